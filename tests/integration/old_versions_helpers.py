"""Helpers for the old-protocol-version tests: raw old requests and reading v0/v1 message sets.

Message sets are read with kafka-python's own implementation (``kafka.record``), which is independent
of the broker's, except lz4 in message format v0, which kafka-python cannot read without the xhash
module: those are read with protocol/legacy_records.py (checked against Kafka's classes elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.record.memory_records import MemoryRecords

from protocol.api_versions import ApiKey
from protocol.legacy_records import iter_deep, iter_shallow
from protocol.messages import request_type
from tests.integration.helpers import RawClient

_FETCH = request_type(ApiKey.FETCH)
_PRODUCE = request_type(ApiKey.PRODUCE)


@dataclass(frozen=True)
class OldRecord:
    offset: int
    magic: int
    timestamp: int | None
    timestamp_type: int | None
    key: bytes | None
    value: bytes | None


def read_message_set(data: bytes) -> list[OldRecord]:
    """The whole records of a v0/v1 message set (a partial last entry is skipped, as consumers do)."""
    if _has_v0_lz4(data):
        return _read_ourselves(data)
    out = []
    mr = MemoryRecords(data)
    while mr.has_next():
        batch = mr.next_batch()
        if batch is None:
            break
        assert batch.validate_crc()
        for r in batch:
            out.append(OldRecord(r.offset, batch.magic, r.timestamp, r.timestamp_type, r.key, r.value))
    return out


def _has_v0_lz4(data: bytes) -> bool:
    try:
        return any(m.magic == 0 and m.codec == 3 for m in iter_shallow(data))
    except Exception:  # noqa: BLE001 - kafka-python will say what is wrong
        return False


def _read_ourselves(data: bytes) -> list[OldRecord]:
    out = []
    for m in iter_shallow(data):
        for r in (iter_deep(m) if m.is_compressed else [m]):
            out.append(OldRecord(r.offset, r.magic, None, None, r.key, r.value))
    return out


def fetch_old(raw: RawClient, version: int, topic: str, partition: int, offset: int,
              partition_max_bytes: int = 1 << 20, max_wait_ms: int = 200) -> Any:
    """One partition's data from a Fetch of ``version`` (0-3)."""
    r = raw.request(ApiKey.FETCH, version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=64 << 20,
                    topics=[_FETCH.FetchTopic(topic=topic, partitions=[
                        _FETCH.FetchPartition(partition=partition, fetch_offset=offset,
                                              partition_max_bytes=partition_max_bytes)])])
    return r.responses[0].partitions[0]


def produce_old(raw: RawClient, version: int, topic: str, partition: int, records: bytes, acks: int = -1) -> Any:
    """One message set to one partition with a Produce of ``version`` (0-2); the partition's answer."""
    body = raw.request(ApiKey.PRODUCE, version, acks=acks, timeout_ms=10000, topic_data=[
        _PRODUCE.TopicProduceData(name=topic, partition_data=[
            _PRODUCE.PartitionProduceData(index=partition, records=records)])])
    return body.responses[0].partition_responses[0]
