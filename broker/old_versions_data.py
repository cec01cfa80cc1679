"""What Produce, Fetch and ListOffsets do differently in their old versions, as Kafka 3.9's KafkaApis.

* Produce v0-2 may carry message formats v0/v1: each such partition is validated and converted to
  one v2 batch (broker/produce_conversion.py) once the partition is known to be led here (the
  checks that come first in Kafka, internal topics, acks and leadership, are left to the replica
  manager, which answers them before it looks at the records). A partition with no whole message
  is answered NONE with offset -1, as Kafka's log answers an append of nothing. v2 batches in these
  versions go through as in v3+ (Kafka checks their framing only from v3 on).
* Fetch v0-9, after the replica manager and the fetch session (Kafka's ``createResponse``), per
  partition with a local log: a topic with ``compression.type=zstd`` is UNSUPPORTED_COMPRESSION_TYPE
  below v10; below v4 the records are down-converted (broker/fetch_down_conversion.py) to v0
  (Fetch v0/v1) or v1 (v2/v3), or refused UNSUPPORTED_VERSION when the topic's
  ``message.downconversion.enable`` is false (never for a follower). Fetch v0-2 read at most
  ``partition_max_bytes`` per partition, even when the first batch is larger (Kafka's
  ``hardMaxBytesLimit``). KAFKA_STORAGE_ERROR is NOT_LEADER_OR_FOLLOWER below v6.
* ListOffsets v0: ``max_num_offsets`` offsets before a timestamp, from the segments' base offsets
  and last-modified times (``UnifiedLog.legacyFetchOffsetsBefore``).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.conversion_metrics import FETCH, PRODUCE, ConversionMetrics
from broker.fetch_down_conversion import UnsupportedCompression, down_convert
from broker.log_validator import ValidationError
from broker.partition import PartitionError, now_ms
from broker.produce_conversion import TopicSettings, convert_produce
from protocol.api_versions import SUPPORTED, ApiKey
from protocol.errors import ErrorCode
from protocol.legacy_records import first_magic
from protocol.messages import response_type
from protocol.schema import FileRegion, FileRegions
from storage.errors import StorageError
from storage.segment import pread_all

if TYPE_CHECKING:
    from broker.partition import Partition
    from broker.replica_manager import ReplicaManager

_PRODUCE = response_type(ApiKey.PRODUCE)
_FETCH = response_type(ApiKey.FETCH)
_LIST_OFFSETS = response_type(ApiKey.LIST_OFFSETS)
# Converted (and passed-through v2) data is appended as a current version would be.
_APPEND_VERSION = SUPPORTED[ApiKey.PRODUCE][1]
_INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2
CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID = -1, -2

Append = Callable[[Any, int], Awaitable[Any]]


def _settings(p: Partition) -> TopicSettings:
    c = p.config
    return TopicSettings(c.compression_type, c.message_timestamp_type, c.message_timestamp_before_max_ms,
                         c.message_timestamp_after_max_ms, c.max_message_bytes, c.compact,
                         c.compression_gzip_level, c.compression_lz4_level, c.compression_zstd_level)


class OldVersionData:
    """The old-version paths of DataApis, over the replica manager."""

    def __init__(self, replica_manager: ReplicaManager, metrics: ConversionMetrics) -> None:
        self.rm = replica_manager
        self.metrics = metrics

    # ------------------------------------------------------------------------------------------------
    # Produce v0-2

    async def produce(self, body: Any, append: Append) -> tuple[Any, bool]:
        """Answer a v0-2 produce; also whether a partition failed before the append (for acks=0)."""
        answered: dict[tuple[str, int], Any] = {}  # partitions answered here
        converted: dict[tuple[str, int], Any] = {}
        acks_valid = body.acks in (0, 1, -1)
        now = now_ms()
        for t in body.topic_data:
            keep = []
            for pd in t.partition_data:
                tp = (t.name, pd.index)
                if pd.records is None:
                    keep.append(pd)  # null records: the replica manager refuses them
                    continue
                magic = first_magic(pd.records)
                p = self._leader(tp) if acks_valid and t.name not in _INTERNAL_TOPICS else None
                if p is None or (magic is not None and magic > 1):
                    keep.append(pd)  # the replica manager answers it (or appends the v2 batch)
                    continue
                try:
                    result = convert_produce(pd.records, f"{t.name}-{pd.index}", _settings(p), now)
                except ValidationError as e:
                    answered[tp] = _PRODUCE.PartitionProduceResponse(
                        index=pd.index, error_code=e.code, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                        error_message=e.error_message, record_errors=[_PRODUCE.BatchIndexAndErrorMessage(
                            batch_index=r.batch_index, batch_index_error_message=r.message) for r in e.record_errors])
                    continue
                if result is None:
                    answered[tp] = _PRODUCE.PartitionProduceResponse(
                        index=pd.index, error_code=0, base_offset=-1, log_append_time_ms=-1,
                        log_start_offset=p.log.log_start_offset)
                    continue
                pd.records = memoryview(result.batch)
                converted[tp] = result
                keep.append(pd)
            t.partition_data = keep
        body.topic_data = [t for t in body.topic_data if t.partition_data]
        failed_early = any(r.error_code != 0 for r in answered.values())
        appended = await append(body, _APPEND_VERSION) if body.topic_data else None
        by_tp: dict[tuple[str, int], Any] = dict(answered)
        if appended is not None:
            for tr in appended.responses:
                for r in tr.partition_responses:
                    by_tp[(tr.name, r.index)] = r
        self._count_produce(converted, by_tp, body.acks)
        if body.acks == 0:
            return None, failed_early
        topics: dict[str, list[Any]] = {}
        for (topic, _), r in by_tp.items():
            topics.setdefault(topic, []).append(r)
        return _PRODUCE(responses=[_PRODUCE.TopicProduceResponse(name=n, partition_responses=rs)
                                   for n, rs in topics.items()]), failed_early

    def _leader(self, tp: tuple[str, int]) -> Partition | None:
        try:
            return self.rm.leader_partition(tp)
        except PartitionError:
            return None

    def _count_produce(self, converted: dict[tuple[str, int], Any], results: dict[tuple[str, int], Any],
                       acks: int) -> None:
        last = None
        for tp, result in converted.items():
            r = results.get(tp)
            if acks != 0 and (r is None or r.error_code != 0):
                continue  # Kafka counts conversions of appends that succeeded
            self.metrics.converted(PRODUCE, tp[0], result.records_converted)
            last = result
        if last is not None:
            self.metrics.request_done(PRODUCE, last.conversion_time_ns, last.temporary_memory_bytes)

    # ------------------------------------------------------------------------------------------------
    # Fetch v0-9

    def fetch_response(self, resp: Any, request: Any, version: int, follower: bool) -> Any:
        wanted = {(t.topic, p.partition): p for t in request.topics for p in t.partitions} if version <= 3 else {}
        last = None
        for tr in resp.responses:
            parts = tr.partitions
            for i, pd in enumerate(parts):
                if version <= 5 and pd.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                    pd.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                tp = (tr.topic, pd.partition_index)
                p = self.rm.partitions.get(tp)
                if p is None or p.log.is_offline:
                    continue  # no local log, no config: nothing to convert (Kafka's getLogConfig)
                cfg = p.config
                if cfg.compression_type == "zstd":
                    parts[i] = _refused_partition(pd, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
                    continue
                if version > 3:
                    continue
                if not follower and not cfg.message_downconversion_enable:
                    parts[i] = _refused_partition(pd, ErrorCode.UNSUPPORTED_VERSION)
                    continue
                fp = wanted.get(tp)
                limit = fp.partition_max_bytes if fp is not None and version <= 2 else None
                data = _read_records(pd.records, limit)
                pd.records = b""
                try:
                    result = down_convert(data, 0 if version <= 1 else 1, fp.fetch_offset if fp is not None else 0)
                except UnsupportedCompression:
                    parts[i] = _refused_partition(pd, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
                    continue
                pd.records = result.records
                if result.records_converted:
                    self.metrics.converted(FETCH, tp[0], result.records_converted)
                    last = result
        if last is not None:
            self.metrics.request_done(FETCH, last.conversion_time_ns, last.temporary_memory_bytes)
        return resp

    # ------------------------------------------------------------------------------------------------
    # ListOffsets v0

    def list_offsets_v0(self, body: Any, version: int = 0) -> Any:
        topics = []
        for topic in body.topics:
            parts = []
            for lp in topic.partitions:
                r = _LIST_OFFSETS.ListOffsetsPartitionResponse(partition_index=lp.partition_index, error_code=0,
                                                               old_style_offsets=[])
                parts.append(r)
                if lp.timestamp < EARLIEST_TIMESTAMP:
                    # Negative timestamps other than latest and earliest are later versions' (v1+).
                    r.error_code = ErrorCode.UNSUPPORTED_VERSION
                    continue
                tp = (topic.name, lp.partition_index)
                try:
                    # A debugging client (replica id -2) may ask a follower; anyone else, the leader.
                    local = self.rm.partitions.get(tp) if body.replica_id == DEBUGGING_REPLICA_ID else None
                    p = local if local is not None else self.rm.leader_partition(tp)
                    r.old_style_offsets = legacy_offsets_before(p, lp.timestamp, lp.max_num_offsets,
                                                                body.replica_id == CONSUMER_REPLICA_ID)
                except PartitionError as e:
                    r.error_code = e.code
                except (StorageError, OSError):
                    r.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            topics.append(_LIST_OFFSETS.ListOffsetsTopicResponse(name=topic.name, partitions=parts))
        return _LIST_OFFSETS(topics=topics)


def legacy_offsets_before(p: Partition, timestamp: int, max_num_offsets: int, from_consumer: bool) -> list[int]:
    """Kafka's ``Partition.legacyFetchOffsetsForTimestamp``: segment start offsets (and the log end)
    whose last modification is at or before ``timestamp``, newest first, at most ``max_num_offsets``;
    a consumer sees the high watermark instead of offsets above it."""
    lg = p.log
    segments = list(lg.segments)
    start = lg.log_start_offset
    pairs = [(max(s.base_offset, start), int(os.stat(s.log_path).st_mtime * 1000)) for s in segments]
    if segments and segments[-1].size > 0:
        pairs.append((lg.log_end_offset, now_ms()))
    if timestamp == LATEST_TIMESTAMP:
        index = len(pairs) - 1
    elif timestamp == EARLIEST_TIMESTAMP:
        index = 0
    else:
        index = len(pairs) - 1
        while index >= 0 and pairs[index][1] > timestamp:
            index -= 1
    count = max(min(max_num_offsets, index + 1), 0)
    offsets = sorted((pairs[index - j][0] for j in range(count)), reverse=True)
    if not from_consumer:
        return offsets
    hw = p.high_watermark
    if any(o > hw for o in offsets):
        return [hw] + [o for o in _drop_while_above(offsets, hw)]
    return offsets


def _drop_while_above(offsets: list[int], hw: int) -> list[int]:
    i = 0
    while i < len(offsets) and offsets[i] > hw:
        i += 1
    return offsets[i:]


def _refused_partition(pd: Any, code: ErrorCode) -> Any:
    """Kafka's ``FetchResponse.partitionResponse(tp, error)``: the error, no data (null records)."""
    _release(pd.records)
    return _FETCH.PartitionData(partition_index=pd.partition_index, error_code=code, high_watermark=-1,
                                last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None, records=None)


def _release(records: Any) -> None:
    if isinstance(records, FileRegions):
        for region in records:
            if type(region) is FileRegion:
                region.release()


def _read_records(records: Any, limit: int | None) -> bytes:
    """The bytes of a partition's records (file regions read and released), at most ``limit``."""
    if not isinstance(records, FileRegions):
        data = bytes(records or b"")
        return data if limit is None else data[:limit]
    chunks = []
    left = limit if limit is not None else 1 << 62
    try:
        for region in records:
            if type(region) is FileRegion:
                n = min(region.length, left)
                if n > 0:
                    chunks.append(pread_all(region.fd, n, region.position))
            else:
                n = min(len(region), left)
                chunks.append(bytes(region[:n]))
            left -= n
    finally:
        _release(records)
    return b"".join(chunks)
