"""kafka-python against one broker: produce with every acks and codec, groups, commits, seeks, admin."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.errors import UnknownTopicOrPartitionError

from protocol.records import CompressionType
from tests.integration.helpers import RawClient, create_topic, unique, wait_until

REPO = Path(__file__).resolve().parents[2]

CODECS = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
          "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 15.0) -> list[Any]:
    """Every record of ``topic`` from the beginning, by manual assignment (no group)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=500)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=300).values():
                out.extend(msgs)
        return out
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------------------
# Produce


@pytest.mark.parametrize("codec", list(CODECS))
def test_produce_every_acks_with_codec(kafka_cluster: Any, codec: str) -> None:
    """acks 0, 1 and all with one codec: every record comes back, in order, stored with that codec."""
    bootstrap = kafka_cluster.bootstrap
    topic = unique(f"produce-{codec}")
    create_topic(bootstrap, topic, partitions=2)
    sent: dict[str, list[tuple[int, int]]] = {}
    per_acks = 30
    for acks in (0, 1, "all"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=5,
                                 compression_type=None if codec == "none" else codec)
        futures = [producer.send(topic, key=f"k{i % 4}".encode(), value=f"acks={acks} #{i}".encode())
                   for i in range(per_acks)]
        producer.flush(15)
        metas = [f.get(timeout=15) for f in futures]
        producer.close(5)
        if acks != 0:  # acks=0 gets no answer, so no offsets either
            assert all(m.offset >= 0 for m in metas)
        sent[str(acks)] = [(m.partition, m.offset) for m in metas]
    records = consume_all(bootstrap, topic, 2, 3 * per_acks)
    values = [r.value.decode() for r in records]
    assert sorted(values) == sorted(f"acks={a} #{i}" for a in (0, 1, "all") for i in range(per_acks))
    # Per key (so per partition) the order is the send order.
    for key in {r.key for r in records}:
        seq = [r.value.decode() for r in records if r.key == key]
        expected = [f"acks={a} #{i}" for a in (0, 1, "all") for i in range(per_acks) if f"k{i % 4}".encode() == key]
        assert seq == expected
    # acks=1/all: the offsets the producer was told are where the records are.
    where = {(r.partition, r.offset): r.value.decode() for r in records}
    for acks in ("1", "all"):
        for i, (p, off) in enumerate(sent[acks]):
            assert where[(p, off)] == f"acks={acks} #{i}"
    # The broker stored the producer's batches as produced (compression.type=producer). kafka-python
    # sends a batch uncompressed when compressing would not shrink it (a batch of one short record,
    # which linger and load decide), so uncompressed batches may sit beside compressed ones.
    with RawClient(bootstrap) as raw:
        batches = [b for p in range(2) for b in raw.fetch_batches(topic, p)]
    codecs = {b.compression for b in batches}
    assert batches and CODECS[codec] in codecs and codecs <= {CODECS[codec], CODECS["none"]}, codecs


# ------------------------------------------------------------------------------------------------
# Groups


class Member:
    """A group member process (tests/integration/group_member.py) and what it reported."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.integration.group_member", bootstrap, topic, group],
                                     cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assigned: list[int] | None = None
        self.consumed: list[tuple[int, int, str]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self._lock:
                if "assigned" in msg:
                    self.assigned = msg["assigned"]
                else:
                    self.consumed.extend(tuple(c) for c in msg["consumed"])

    def stop(self) -> int:
        self.proc.terminate()
        rc = self.proc.wait(20)
        self._reader.join(5)
        return rc

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)

    def stderr(self) -> str:
        return self.proc.stderr.read() if self.proc.stderr and self.proc.poll() is not None else ""


def _balanced(members: list[Member], partitions: int) -> bool:
    got = [m.assigned for m in members]
    if any(a is None for a in got):
        return False
    flat = sorted(p for a in got for p in a)  # type: ignore[union-attr]
    sizes = sorted(len(a) for a in got)  # type: ignore[arg-type]
    return flat == list(range(partitions)) and sizes[-1] - sizes[0] <= 1


@pytest.mark.slow  # about 10 s or more; make test keeps the group tests of the other clients
def test_group_rebalances_on_join_leave_and_crash(kafka_cluster: Any) -> None:
    """Three members join one by one, one leaves, one crashes: the partitions are always shared out
    among the live members, and every record is consumed exactly once across the group."""
    bootstrap = kafka_cluster.bootstrap
    topic, group = unique("rebalance"), unique("rebalance-group")
    nparts = 6
    create_topic(bootstrap, topic, partitions=nparts)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    produced: list[str] = []

    def produce(n: int) -> None:
        for _ in range(n):
            v = f"m{len(produced)}"
            producer.send(topic, value=v.encode(), partition=len(produced) % nparts)
            produced.append(v)
        producer.flush(10)

    def consumed_values(members: list[Member]) -> list[str]:
        return [v for m in members for (_p, _o, v) in m.consumed]

    produce(60)
    a = Member(bootstrap, topic, group)
    members = [a]
    try:
        wait_until(lambda: _balanced([a], nparts), 30, "the first member to get every partition")
        b = Member(bootstrap, topic, group)
        members.append(b)
        wait_until(lambda: _balanced([a, b], nparts), 30, "a rebalance sharing the partitions between 2 members")
        c = Member(bootstrap, topic, group)
        members.append(c)
        wait_until(lambda: _balanced([a, b, c], nparts) and all(len(m.assigned or []) == 2 for m in (a, b, c)),
                   30, "a rebalance giving each of 3 members 2 partitions")
        produce(60)
        wait_until(lambda: len(set(consumed_values(members))) == len(produced), 30, "120 records consumed")

        def group_log(marker: str) -> list[str]:
            return [line for line in kafka_cluster.brokers[0].log_text().splitlines()
                    if f"group {group}:" in line and marker in line]

        # A clean leave (LeaveGroup) rebalances at once: the coordinator removes the member because it
        # left, not because its session timed out.
        assert c.stop() == 0, c.stderr()
        wait_until(lambda: _balanced([a, b], nparts) and len(a.assigned or []) == 3, 15,
                   "the 2 remaining members to share the partitions after a leave")
        assert len(group_log(" left (reason:")) == 1, "the leaving member should have sent LeaveGroup"
        assert group_log("failed its session timeout") == [], "a clean leave should not wait for the session timeout"

        # A crash (SIGKILL: no LeaveGroup) is noticed when the member's session times out (6 s).
        produce(30)
        wait_until(lambda: len(set(consumed_values(members))) == len(produced), 30, "150 records consumed")
        b.kill()
        wait_until(lambda: a.assigned == list(range(nparts)), 30, "the survivor to get every partition")
        assert len(group_log("failed its session timeout")) == 1, \
            "a crashed member is only dropped when its session times out"
        assert len(group_log(" left (reason:")) == 1, "the crashed member cannot have left cleanly"
        produce(30)
        wait_until(lambda: len(set(consumed_values(members))) == len(produced), 30,
                   lambda: f"every record consumed; missing {sorted(set(produced) - set(consumed_values(members)))}")
        values = consumed_values(members)
        assert sorted(values) == sorted(produced), "records consumed more than once or lost"
    finally:
        producer.close(5)
        for m in members:
            if m.proc.poll() is None:
                m.kill()


def test_commit_sync_async_and_seek(kafka_cluster: Any) -> None:
    """commit() and commit_async() store offsets a new member of the group resumes from; seek moves."""
    bootstrap = kafka_cluster.bootstrap
    topic, group = unique("commits"), unique("commits-group")
    create_topic(bootstrap, topic, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(40):
        producer.send(topic, value=b"%d" % i)
    producer.flush(10)
    producer.close(5)
    tp = TopicPartition(topic, 0)

    def member() -> KafkaConsumer:
        c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                          auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000)
        return c

    def take(c: KafkaConsumer, n: int) -> list[int]:
        out: list[int] = []
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=300, max_records=n - len(out)).values():
                out.extend(m.offset for m in msgs)
        return out

    c1 = member()
    assert take(c1, 10) == list(range(10))
    c1.commit()  # commitSync
    assert c1.committed(tp) == 10
    assert take(c1, 5) == list(range(10, 15))
    done: list[Any] = []
    c1.commit_async(callback=lambda offsets, exc: done.append((offsets, exc)))
    def commit_answered() -> bool:
        if not done:
            c1.poll(timeout_ms=100, max_records=1)  # callbacks run from poll()
        return bool(done)

    wait_until(commit_answered, 15, "the commit_async callback")
    offsets, result = done[0]
    assert not isinstance(result, Exception), result
    assert offsets[tp].offset == 15
    assert c1.committed(tp) == 15
    c1.close(autocommit=False)

    c2 = member()
    first = take(c2, 1)
    assert first == [15], "a new member resumes from the last committed offset"
    c2.seek(tp, 3)
    assert take(c2, 2) == [3, 4]
    c2.seek_to_beginning(tp)
    assert take(c2, 1) == [0]
    c2.seek_to_end(tp)
    assert c2.position(tp) == 40
    c2.seek(tp, 38)
    assert take(c2, 2) == [38, 39]
    c2.close(autocommit=False)

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
        assert offsets[tp].offset == 15
    finally:
        admin.close()


# ------------------------------------------------------------------------------------------------
# Admin


def test_admin_topics_and_configs(kafka_cluster: Any) -> None:
    """create (with configs), describe, alter configs (whole and incremental) and delete topics."""
    bootstrap = kafka_cluster.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topic = unique("admin-topic")
    try:
        admin.create_topics([NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000"})])
        described = admin.describe_topics([topic])
        assert len(described) == 1 and described[0]["error_code"] == 0
        parts = sorted(described[0]["partitions"], key=lambda p: p["partition_index"])
        assert [p["partition_index"] for p in parts] == [0, 1, 2]
        assert all(p["leader_id"] == 0 and p["replica_nodes"] == [0] and p["isr_nodes"] == [0] for p in parts)
        assert topic in admin.list_topics()

        def topic_configs() -> dict[str, Any]:
            res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            return res["topic"][topic]

        # The config given at creation is in force at once (config_filter="modified" by default).
        cfg = topic_configs()
        assert cfg["retention.ms"]["value"] == "3600000"
        assert cfg["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        all_cfg = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        assert all_cfg["topic"][topic]["cleanup.policy"]["value"] == "delete"

        # AlterConfigs replaces the whole set; IncrementalAlterConfigs changes one key.
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "7200000"})])
        assert topic_configs()["retention.ms"]["value"] == "7200000"
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": "2000000"})],
                            incremental=True)
        cfg = topic_configs()
        assert cfg["max.message.bytes"]["value"] == "2000000" and cfg["retention.ms"]["value"] == "7200000"

        # Broker configs describe too.
        broker_cfg = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")
        assert broker_cfg["broker"]["0"]["log.dirs"]["value"] == kafka_cluster.brokers[0].props["log.dirs"]

        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics(), 15, "the deleted topic to leave the metadata")
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([unique("never-created")])
    finally:
        admin.close()


def test_admin_groups(kafka_cluster: Any) -> None:
    """list, describe and delete groups, with a live member and after it left."""
    bootstrap = kafka_cluster.bootstrap
    topic, group = unique("admin-groups"), unique("admin-group")
    create_topic(bootstrap, topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send(topic, b"x", partition=0).get(10)
    producer.close(5)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id="admin-groups-member",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=1000)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_until(lambda: consumer.poll(timeout_ms=200) or consumer.assignment(), 20, "the consumer to join")
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
        groups = wait_until(lambda: {g["group_id"]: g for g in admin.list_groups()}.get(group), 10,
                            "the group in ListGroups")
        assert groups["protocol_type"] == "consumer"
        desc = admin.describe_groups([group])[group]
        assert desc["error"] is None and desc["group_state"] == "Stable"
        assert desc["protocol_type"] == "consumer" and desc["protocol_data"] == "range"
        assert len(desc["members"]) == 1 and desc["members"][0]["client_id"] == "admin-groups-member"

        assert admin.delete_groups([group])[group] == "NonEmptyGroupError"

        consumer.close(autocommit=False)
        desc = wait_until(lambda: (d := admin.describe_groups([group])[group])["group_state"] == "Empty" and d,
                          10, "the group to be empty")
        assert desc["members"] == []
        assert admin.delete_groups([group])[group] == "OK"
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.describe_groups([group])[group]["group_state"] == "Dead"
    finally:
        consumer.close(autocommit=False)
        admin.close()

