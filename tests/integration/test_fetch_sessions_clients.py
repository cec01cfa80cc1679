"""Fetch sessions (KIP-227) with real consumers: kafka-python, confluent-kafka and the Java consumer 3.9.1.

Each client runs the same scenario against a broker whose session cache has 8 slots (one per shard):
partitions assigned, a partition added by CreatePartitions, a partition dropped from the assignment, a
topic deleted while assigned, and finally its session evicted by followers' (privileged) sessions. After
each step it must read exactly what was produced since, in order, once. The Java consumer and
kafka-python fetch through a session (the cache shows it); librdkafka does not implement KIP-227 and
fetches without one, which the broker must serve as before.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.integration.helpers import RawClient, create_topic, unique, wait_until
from tests.integration.test_fetch_sessions_protocol import SessionFetcher, produce_one, topic_id_of

TP = tuple[str, int]
Rec = tuple[str, int, int, str]  # topic, partition, offset, value
JAVA_SOURCE = Path(__file__).parent / "java" / "FetchSessionConsumer.java"

SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
PARTITIONS_CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
EVICTIONS = "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total"


class Consumer(Protocol):
    uses_sessions: bool

    def assign(self, tps: list[TP]) -> None: ...
    def poll(self, count: int, timeout: float) -> list[Rec]: ...
    def close(self) -> None: ...


class KafkaPythonConsumer:
    uses_sessions = True

    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaConsumer

        self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                               auto_offset_reset="earliest", metadata_max_age_ms=1000, fetch_max_wait_ms=100)

    def assign(self, tps: list[TP]) -> None:
        from kafka import TopicPartition

        self.c.assign([TopicPartition(t, p) for t, p in tps])

    def poll(self, count: int, timeout: float) -> list[Rec]:
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for records in self.c.poll(timeout_ms=200).values():
                out.extend((r.topic, r.partition, r.offset, r.value.decode()) for r in records)
        return out

    def close(self) -> None:
        self.c.close()


class ConfluentConsumer:
    uses_sessions = False  # librdkafka sends every fetch without a session (KIP-227 is not implemented)

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer

        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("fs-rdk"), "enable.auto.commit": False,
                           "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
                           "topic.metadata.refresh.interval.ms": 1000})
        self.assigned: set[TP] = set()
        self.errors: list[str] = []

    def assign(self, tps: list[TP]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        wanted = set(tps)
        gone = self.assigned - wanted
        if gone:
            self.c.incremental_unassign([TopicPartition(t, p) for t, p in sorted(gone)])
        new = wanted - self.assigned
        if new:
            self.c.incremental_assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in sorted(new)])
        self.assigned = wanted

    def poll(self, count: int, timeout: float) -> list[Rec]:
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            msg = self.c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                # A deleted topic's partition is reported, not fatal; anything fatal fails the test.
                assert not msg.error().fatal(), msg.error()
                self.errors.append(msg.error().name())
                continue
            out.append((msg.topic(), msg.partition(), msg.offset(), msg.value().decode()))
        return out

    def close(self) -> None:
        self.c.close()


class JavaConsumer:
    """tests/integration/java/FetchSessionConsumer.java, driven over its standard input."""

    uses_sessions = True

    def __init__(self, bootstrap: str) -> None:
        from tests.kafka_dist import classpath, compile_java

        cp = compile_java(JAVA_SOURCE) + ":" + classpath()
        self.proc = subprocess.Popen(
            ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, "FetchSessionConsumer", bootstrap],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _command(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _line(self, timeout: float) -> str:
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise AssertionError(f"the Java consumer exited with status {self.proc.wait()}")
        return line

    def assign(self, tps: list[TP]) -> None:
        self._command("assign " + ",".join(f"{t}:{p}" for t, p in tps))
        assert self._line(120) == "OK"

    def poll(self, count: int, timeout: float) -> list[Rec]:
        self._command(f"poll {count} {int(timeout * 1000)}")
        out: list[Rec] = []
        while True:
            words = self._line(timeout + 120).split(" ", 4)
            if words[0] == "DONE":
                return out
            assert words[0] == "R", words
            out.append((words[1], int(words[2]), int(words[3]), words[4]))

    def close(self) -> None:
        try:
            self._command("quit")
            self.proc.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


CLIENTS = {"kafka-python": KafkaPythonConsumer, "confluent-kafka": ConfluentConsumer, "java": JavaConsumer}


def metric(cluster: Any, name: str, broker: int = 0) -> float:
    import urllib.request

    port = cluster.brokers[broker].metrics_port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric {name}")


class Records:
    """What was produced per partition, and what a consumer has read of it. ``send(topic, partition,
    value)`` produces one record and returns its offset."""

    def __init__(self, send: Callable[[str, int, bytes], int]) -> None:
        self.send = send
        self.produced: dict[TP, list[str]] = {}
        self.read: dict[TP, list[tuple[int, str]]] = {}

    def produce(self, tps: list[TP], n: int = 2) -> int:
        for t, p in tps:
            values = self.produced.setdefault((t, p), [])
            for _ in range(n):
                value = f"{t}/{p}/{len(values)}"
                assert self.send(t, p, value.encode()) == len(values)
                values.append(value)
        return n * len(tps)

    def take(self, consumer: Consumer, count: int, what: str, timeout: float = 60) -> None:
        got = consumer.poll(count, timeout)
        for t, p, offset, value in got:
            self.read.setdefault((t, p), []).append((offset, value))
        assert len(got) == count, f"{what}: read {len(got)} of {count}: {got}"

    def check(self, tps: list[TP]) -> None:
        """Every record of ``tps`` read exactly once, in order."""
        for tp in tps:
            assert self.read.get(tp, []) == list(enumerate(self.produced.get(tp, []))), tp


def run_scenario(cluster: Any, consumer: Consumer) -> None:
    bootstrap = cluster.bootstrap
    a, b, c = unique("fs-a"), unique("fs-b"), unique("fs-c")
    create_topic(bootstrap, a, 2)
    create_topic(bootstrap, b, 1)
    create_topic(bootstrap, c, 1)
    expected_sessions = 1 if consumer.uses_sessions else 0
    with RawClient(bootstrap, client_id="fs-clients") as raw:
        recs = Records(lambda t, p, v: produce_one(raw, t, p, v))
        a0, a1, a2, b0, c0 = (a, 0), (a, 1), (a, 2), (b, 0), (c, 0)

        consumer.assign([a0, a1, b0, c0])
        recs.take(consumer, recs.produce([a0, a1, b0, c0]), "the first assignment")
        assert metric(cluster, SESSIONS) == expected_sessions
        if consumer.uses_sessions:
            assert metric(cluster, PARTITIONS_CACHED) == 4

        # A partition added by CreatePartitions joins the session.
        from kafka.admin import KafkaAdminClient, NewPartitions

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="fs-admin")
        try:
            admin.create_partitions({a: NewPartitions(3)})
            wait_until(lambda: raw.leaders(a) == 3, 15, "a leader for the new partition")
            consumer.assign([a0, a1, a2, b0, c0])
            recs.take(consumer, recs.produce([a0, a1, a2, b0, c0]), "after CreatePartitions")
            if consumer.uses_sessions:
                wait_until(lambda: metric(cluster, PARTITIONS_CACHED) == 5, 10, "5 partitions in the session")

            # A partition dropped from the assignment is forgotten: its new records are not read.
            consumer.assign([a0, a1, a2, c0])
            recs.produce([b0])
            recs.take(consumer, recs.produce([a0, a1, a2, c0]), "after dropping a partition")
            assert consumer.poll(1, 1.0) == []
            if consumer.uses_sessions:
                wait_until(lambda: metric(cluster, PARTITIONS_CACHED) == 4, 10, "4 partitions in the session")

            # A topic deleted while assigned: the others go on.
            admin.delete_topics([c])
            wait_until(lambda: raw.leaders(c) == 0, 30, f"{c} deleted")
            recs.take(consumer, recs.produce([a0, a1, a2]), "after deleting an assigned topic")
            consumer.assign([a0, a1, a2])
            recs.take(consumer, recs.produce([a0, a1, a2]), "after dropping the deleted topic")
        finally:
            admin.close()

        # Followers' sessions are privileged: eight of them fill the eight shards, evicting the consumer's.
        assert metric(cluster, SESSIONS) == expected_sessions
        follower = SessionFetcher(raw, a, topic_id_of(raw, a), replica_id=1)
        for _ in range(8):
            assert follower.fetch(0, 0, {}).session_id != 0
        assert metric(cluster, SESSIONS) == 8
        assert metric(cluster, EVICTIONS) == expected_sessions
        # The consumer's next fetch finds its session gone, starts over with a full fetch and gets no new
        # session (the shards hold followers' sessions it may not evict): it carries on without one.
        recs.take(consumer, recs.produce([a0, a1, a2]), "after the eviction")
        recs.take(consumer, recs.produce([a0, a1, a2]), "sessionless")
        assert metric(cluster, SESSIONS) == 8
        recs.check([a0, a1, a2, c0])
        assert recs.read.get(b0) == list(enumerate(recs.produced[b0][:4]))  # not the two after it was dropped


@pytest.fixture
def small_cache_cluster(cluster_factory: Any) -> Any:
    return cluster_factory(1, overrides={"max.incremental.fetch.session.cache.slots": "8"})


@pytest.fixture(params=list(CLIENTS))
def consumer(request: pytest.FixtureRequest, small_cache_cluster: Any) -> Iterator[Consumer]:
    c = CLIENTS[request.param](small_cache_cluster.bootstrap)
    try:
        yield c
    finally:
        c.close()


def test_consumer_across_adds_removes_and_eviction(small_cache_cluster: Any, consumer: Consumer) -> None:
    run_scenario(small_cache_cluster, consumer)
