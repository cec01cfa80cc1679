"""Records in every partition of a topic with thousands of them, by raw requests to each leader in
chunks: one record each (``produce_one_each``), each partition's end offset, and every record read back.
Shared by the many-partitions tests and the partitions benchmark."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import NamedTuple

from protocol.api_versions import ApiKey
from protocol.messages import request_type
from protocol.records import build_batch, iter_batches
from tests.integration.helpers import RawClient

CHUNK = 1000  # partitions per request


class View(NamedTuple):
    """One broker's Metadata answer about ``topic``."""

    controller: int
    brokers: dict[int, str]  # live broker id -> host:port
    leaders: dict[int, int]  # partition -> leader id, -1 when it has none (or a dead one)
    epochs: dict[int, int]  # partition -> leader epoch


def cluster_view(bootstrap: str, topic: str, timeout: float = 60) -> View:
    mt = request_type(ApiKey.METADATA)
    with RawClient(bootstrap, timeout=timeout) as raw:
        md = raw.request(ApiKey.METADATA, 12, topics=[mt.MetadataRequestTopic(name=topic, topic_id=None)],
                         allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
    leaders: dict[int, int] = {}
    epochs: dict[int, int] = {}
    for t in md.topics:
        if t.name == topic and t.error_code == 0:
            leaders = {p.partition_index: (p.leader_id if p.leader_id in brokers else -1) for p in t.partitions}
            epochs = {p.partition_index: p.leader_epoch for p in t.partitions}
    return View(md.controller_id, brokers, leaders, epochs)


def _chunks(items: list[int], n: int = CHUNK) -> Iterable[list[int]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def _by_leader(bootstrap: str, topic: str, partitions: int) -> dict[str, list[int]]:
    v = cluster_view(bootstrap, topic)
    brokers, leaders = v.brokers, v.leaders
    assert len(leaders) == partitions and all(v >= 0 for v in leaders.values()), "every partition led"
    out: dict[str, list[int]] = {}
    for p, leader in sorted(leaders.items()):
        out.setdefault(brokers[leader], []).append(p)
    return out


def value_of(topic: str, partition: int) -> bytes:
    return b"%s/%d" % (topic.encode(), partition)


def produce_one_each(bootstrap: str, topic: str, partitions: int) -> None:
    """One record (``value_of``) to every partition, acks=all, in requests of ``CHUNK`` partitions."""
    mt = request_type(ApiKey.PRODUCE)
    now = int(time.time() * 1000)
    for leader, parts in _by_leader(bootstrap, topic, partitions).items():
        with RawClient(leader, timeout=120) as raw:
            for chunk in _chunks(parts):
                body = raw.request(ApiKey.PRODUCE, 9, transactional_id=None, acks=-1, timeout_ms=60000,
                                   topic_data=[mt.TopicProduceData(name=topic, partition_data=[
                                       mt.PartitionProduceData(index=p, records=bytes(build_batch(
                                           [(None, value_of(topic, p), now)]))) for p in chunk])])
                errors = [(r.index, r.error_code) for r in body.responses[0].partition_responses if r.error_code]
                assert not errors, f"produce errors: {errors[:5]}"


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's end offset (ListOffsets latest, from its leader)."""
    mt = request_type(ApiKey.LIST_OFFSETS)
    out: dict[int, int] = {}
    for leader, parts in _by_leader(bootstrap, topic, partitions).items():
        with RawClient(leader, timeout=120) as raw:
            for chunk in _chunks(parts):
                r = raw.request(ApiKey.LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
                    mt.ListOffsetsTopic(name=topic, partitions=[
                        mt.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1)
                        for p in chunk])])
                for p in r.topics[0].partitions:
                    out[p.partition_index] = p.offset if p.error_code == 0 else -1000 - p.error_code
    return out


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every record value of every partition, by Fetch from its leader: rounds of one Fetch per
    ``CHUNK`` partitions, each from where the last left off, until no partition returns more."""
    mt = request_type(ApiKey.FETCH)
    out: dict[int, list[bytes]] = {}
    for leader, parts in _by_leader(bootstrap, topic, partitions).items():
        offsets = dict.fromkeys(parts, 0)
        pending = parts
        with RawClient(leader, timeout=120) as raw:
            while pending:
                more: list[int] = []
                for chunk in _chunks(pending):
                    r = raw.request(ApiKey.FETCH, 12, replica_id=-1, max_wait_ms=0, min_bytes=0,
                                    max_bytes=64 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                                    topics=[mt.FetchTopic(topic=topic, partitions=[
                                        mt.FetchPartition(partition=p, current_leader_epoch=-1,
                                                          fetch_offset=offsets[p], last_fetched_epoch=-1,
                                                          log_start_offset=-1, partition_max_bytes=64 << 10)
                                        for p in chunk])],
                                    forgotten_topics_data=[], rack_id="")
                    for pd in r.responses[0].partitions:
                        p = pd.partition_index
                        assert pd.error_code == 0, (p, pd.error_code)
                        batches = list(iter_batches(memoryview(bytes(pd.records or b""))))
                        for b in batches:
                            out.setdefault(p, []).extend(bytes(rec.value or b"") for rec in b.records()
                                                         if rec.offset >= offsets[p])
                        if batches:
                            offsets[p] = batches[-1].base_offset + batches[-1].last_offset_delta + 1
                            more.append(p)
                        out.setdefault(p, [])
                pending = more
    return out
