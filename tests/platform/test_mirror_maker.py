"""MirrorMaker 2 (``connect-mirror-maker``) between kafkette and Apache Kafka 3.9.1, both ways.

A topic with a non-default config is filled on the source cluster and half read by a consumer group that
commits and goes away. MirrorMaker 2 replicates the topic (``src.<topic>`` on the target), its config,
and the group's offsets (checkpoints, ``sync.group.offsets.enabled``). Then the group fails over: a
consumer of the same group on the target resumes at the translated offsets. Every source record must be
on the target in the same order per partition, and the failed-over group must read on with no gap. It
may read some records again: MirrorMaker 2 translates an offset through the latest offset sync at or
below it (one every ``offset.lag.max`` records at most), so the resumed position can lie a little before
the committed one; the test counts those repeats and reports them.
"""

from __future__ import annotations

import collections
import struct
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.helpers import unique
from tests.integration.helpers import wait_until
from tests.platform import kafka_ops
from tests.platform.java import MIRROR_MAKER, JavaProcess, write_properties

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PARTITIONS = 3
RECORDS = 3000
MORE = 600  # produced while MirrorMaker 2 runs
RETENTION_MS = "123456789"  # the source topic's own config, to be seen on the target


@pytest.fixture
def apache_kafka() -> Iterator[Any]:
    from tests.ops.kafka_broker import KafkaZkBroker

    broker = KafkaZkBroker()
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def mm2_properties(source: str, target: str, topic: str, group: str) -> dict[str, str]:
    return {
        "clusters": "src, tgt",
        "src.bootstrap.servers": source,
        "tgt.bootstrap.servers": target,
        "src->tgt.enabled": "true",
        "tgt->src.enabled": "false",
        "src->tgt.topics": topic,
        "src->tgt.groups": group,
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "refresh.topics.interval.seconds": "5",
        "refresh.groups.interval.seconds": "5",
        "sync.topic.configs.interval.seconds": "5",
        "sync.topic.acls.enabled": "false",  # neither cluster has an authorizer here
        # The Apache Kafka side is one broker: every topic MirrorMaker 2 creates gets one replica.
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
    }


def consume_some(bootstrap: str, topic: str, group: str, count: int) -> list[kafka_ops.Record]:
    """Read ``count`` records of ``topic`` as a member of ``group``, commit, leave."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    got: list[kafka_ops.Record] = []
    try:
        c.subscribe([topic])
        wait_until(lambda: _poll_into(c, got, count) >= count, 120, f"{count} records of {topic} for {group}")
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def _poll_into(c: Any, got: list[kafka_ops.Record], limit: int) -> int:
    for m in c.consume(max(1, min(500, limit - len(got))), 0.5):
        if m.error():
            raise AssertionError(str(m.error()))
        got.append(kafka_ops.Record(m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]))
    return len(got)


def consume_to_end(bootstrap: str, topic: str, group: str, start: dict[int, int],
                   debug_log: Path) -> list[kafka_ops.Record]:
    """Resume ``group`` on ``topic`` (from its committed offsets, ``start``) and read up to the end.
    librdkafka's fetch and group debug lines go to ``debug_log``, for when it does not get there."""
    import logging

    from confluent_kafka import Consumer

    ends = kafka_ops.end_offsets(bootstrap, topic, PARTITIONS)
    logger = logging.getLogger(f"failover-consumer-{group}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(logging.FileHandler(debug_log))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "debug": "fetch,cgrp,consumer"}, logger=logger)
    got: list[kafka_ops.Record] = []
    last: dict[int, int] = {p: off - 1 for p, off in start.items()}

    def at_end() -> bool:
        return all(last.get(p, -1) + 1 >= end for p, end in ends.items() if end > 0)

    try:
        c.subscribe([topic])

        def progress() -> bool:
            before = len(got)
            _poll_into(c, got, len(got) + 500)
            for r in got[before:]:
                last[r.partition] = r.offset
            return at_end()

        wait_until(progress, 120, lambda: f"{group} to read {topic} to {ends} from {start} (at {last}, "
                   f"read {collections.Counter(r.partition for r in got)}, assigned {c.assignment()}; "
                   f"librdkafka's debug log: {debug_log})")
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    p = kafka_ops.Producer(bootstrap)
    for i in range(start, start + count):
        p.send(topic, f"key-{i % 97}", f"record {i}")
    p.flush()


def by_partition(records: list[kafka_ops.Record]) -> dict[int, list[bytes | None]]:
    out: dict[int, list[bytes | None]] = collections.defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        out[r.partition].append(r.value)
    return dict(out)


def checkpoints(target: str, group: str) -> dict[tuple[str, int], tuple[int, int]]:
    """The latest checkpoint per partition for ``group`` in src.checkpoints.internal on the target:
    (topic on the target, partition) -> (upstream offset, downstream offset). Kafka's Struct encoding:
    key (group, topic, partition), value (version, upstream offset, downstream offset, metadata)."""
    if "src.checkpoints.internal" not in kafka_ops.topic_names(target):
        return {}
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for r in kafka_ops.read_all(target, "src.checkpoints.internal", 1, isolation="read_uncommitted"):
        assert r.key is not None and r.value is not None
        fields, at = [], 0
        for _ in range(2):
            (n,) = struct.unpack_from(">h", r.key, at)
            fields.append(r.key[at + 2:at + 2 + n].decode())
            at += 2 + n
        (partition,) = struct.unpack_from(">i", r.key, at)
        _version, upstream, downstream = struct.unpack_from(">hqq", r.value)
        if fields[0] == group:
            out[(fields[1], partition)] = (upstream, downstream)
    return out


def mirror_and_fail_over(java: Callable[..., JavaProcess], tmp_path: Path, source: str, target: str) -> dict[str, int]:
    topic = unique("orders")
    group = f"billing-{uuid.uuid4().hex[:8]}"
    remote = f"src.{topic}"
    kafka_ops.create_topics(source, {topic: PARTITIONS}, replication=1, configs={"retention.ms": RETENTION_MS})
    produce(source, topic, 0, RECORDS)

    config = write_properties(tmp_path / "mm2.properties", mm2_properties(source, target, topic, group))
    mm2 = java("mirror-maker", MIRROR_MAKER, str(config), heap="512m").start()

    def replicated() -> bool:
        ends = kafka_ops.end_offsets(source, topic, PARTITIONS)
        return remote in kafka_ops.topic_names(target) and kafka_ops.end_offsets(target, remote, PARTITIONS) == ends

    wait_until(replicated, 300, f"{remote} on the target as long as {topic}", interval=1)
    # The group reads while MirrorMaker 2 runs and more is produced, commits, and goes away: the source
    # cluster is lost from here on, as far as the group is concerned.
    produce(source, topic, RECORDS, MORE)
    first = consume_some(source, topic, group, RECORDS + MORE // 2)
    committed_src = {p: off for (t, p), off in kafka_ops.committed(source, group).items() if t == topic}
    assert sum(committed_src.values()) == RECORDS + MORE // 2
    wait_until(replicated, 300, f"{remote} on the target as long as {topic}", interval=1)

    # Every record, in order per partition.
    src_records = kafka_ops.read_all(source, topic, PARTITIONS, isolation="read_uncommitted")
    tgt_records = kafka_ops.read_all(target, remote, PARTITIONS, isolation="read_uncommitted")
    assert len(src_records) == RECORDS + MORE
    assert by_partition(tgt_records) == by_partition(src_records)
    assert [r.key for r in tgt_records] == [r.key for r in src_records]

    # The topic's config came along.
    wait_until(lambda: kafka_ops.topic_config(target, remote).get("retention.ms") == RETENTION_MS, 120,
               lambda: f"retention.ms={RETENTION_MS} on {remote} ({kafka_ops.topic_config(target, remote)})", interval=1)

    # The group's final offsets checkpointed, and the translations written as the group's offsets on the target.
    def checkpointed() -> dict[tuple[str, int], tuple[int, int]]:
        cps = checkpoints(target, group)
        done = all(cps.get((remote, p), (-1, -1))[0] == off for p, off in committed_src.items())
        return cps if done else {}

    cps = wait_until(checkpointed, 180, lambda: f"checkpoints of {group} at {committed_src} "
                     f"(have {checkpoints(target, group)})", interval=1)
    translated = {p: cps[(remote, p)][1] for p in committed_src}

    def synced() -> bool:
        return {p: off for (t, p), off in kafka_ops.committed(target, group).items() if t == remote} == translated

    wait_until(synced, 120, lambda: f"{group}'s offsets {translated} on the target "
               f"(have {kafka_ops.committed(target, group)})", interval=1)
    mm2.stop()
    # What the group resumes from is what is committed on the target once MirrorMaker 2 has stopped: it
    # may have written a closer translation after the check above (an offset sync nearer the committed
    # offset came in), e.g. the exact end of a partition the group had read to the end.
    translated = {p: off for (t, p), off in kafka_ops.committed(target, group).items() if t == remote}
    assert set(translated) == set(committed_src), (translated, committed_src)
    # Translated offsets never lie past the committed ones: nothing can be skipped.
    assert all(translated[p] <= committed_src[p] for p in committed_src), (translated, committed_src)

    # Fail over: the group resumes on the target.
    rest = consume_to_end(target, remote, group, translated, tmp_path / "failover-consumer.log")
    seen = collections.Counter((r.partition, r.value) for r in first + rest)
    everything = {(r.partition, r.value) for r in src_records}
    assert set(seen) == everything, f"missing after failover: {sorted(everything - set(seen))[:5]}"
    repeats = sum(n - 1 for n in seen.values())
    assert repeats == sum(committed_src[p] - translated[p] for p in committed_src)
    return {"records": len(src_records), "committed_on_source": sum(committed_src.values()),
            "translated": sum(translated.values()), "read_again_after_failover": repeats}


def test_mirror_kafkette_to_apache_kafka(cluster_factory: Callable[..., Any], apache_kafka: Any,
                                         java: Callable[..., JavaProcess], tmp_path: Path) -> None:
    kafkette = cluster_factory(3)
    numbers = mirror_and_fail_over(java, tmp_path, kafkette.bootstrap, apache_kafka.bootstrap)
    print(f"[mirror-maker] kafkette -> Apache Kafka: {numbers}")


def test_mirror_apache_kafka_to_kafkette(cluster_factory: Callable[..., Any], apache_kafka: Any,
                                         java: Callable[..., JavaProcess], tmp_path: Path) -> None:
    kafkette = cluster_factory(3)
    numbers = mirror_and_fail_over(java, tmp_path, apache_kafka.bootstrap, kafkette.bootstrap)
    print(f"[mirror-maker] Apache Kafka -> kafkette: {numbers}")
