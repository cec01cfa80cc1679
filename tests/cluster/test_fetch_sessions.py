"""Fetch sessions (KIP-227) on a 3-broker cluster: followers replicate through one session per leader,
and consumers keep reading through leader changes.

Followers' sessions are visible in each leader's FetchSessionCache metrics: with no consumer around,
the partitions cached on all brokers together are exactly the follower replicas (partitions times
replication factor minus one), and they follow partitions added by CreatePartitions and removed by a
topic deletion. The replicas end byte-identical.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.cluster.helpers import Admin, segment_bytes, start_broker, unique, wait_until
from tests.integration.test_fetch_sessions_clients import (
    CLIENTS,
    EVICTIONS,
    PARTITIONS_CACHED,
    SESSIONS,
    Consumer,
    Records,
    metric,
)

TOPIC_CONFIGS = {"min.insync.replicas": "2"}


def _cached(cluster: Any) -> int:
    return int(sum(metric(cluster, PARTITIONS_CACHED, i) for i in range(len(cluster.brokers))))


def _producer(bootstrap: str) -> Callable[[str, int, bytes], int]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=0,
                             request_timeout_ms=15000, delivery_timeout_ms=120000, reconnect_backoff_max_ms=1000,
                             metadata_max_age_ms=2000)

    def send(topic: str, partition: int, value: bytes) -> int:
        return int(producer.send(topic, value=value, partition=partition).get(timeout=120).offset)

    send.producer = producer  # type: ignore[attr-defined]
    return send


def _replicas_identical(cluster: Any, topic: str, partitions: int) -> None:
    def same(p: int) -> bool:
        logs = [segment_bytes(b, topic, p) for b in cluster.brokers]
        return bool(logs[0]) and all(x == logs[0] for x in logs)

    for p in range(partitions):
        wait_until(lambda p=p: same(p), 60, f"the replicas of {topic}-{p} byte-identical", interval=0.2)


def test_follower_sessions_follow_partition_adds_and_removes(cluster3: Callable[..., Any]) -> None:
    cluster = cluster3()
    kept, dropped = unique("fs-kept"), unique("fs-dropped")
    send = _producer(cluster.bootstrap)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(kept, 3, 3, TOPIC_CONFIGS)
        admin.create_topic(dropped, 2, 3, TOPIC_CONFIGS)
        recs = Records(send)
        recs.produce([(kept, p) for p in range(3)] + [(dropped, p) for p in range(2)], n=5)
        # Two followers per partition, each fetching it through its session with the leader.
        wait_until(lambda: _cached(cluster) == (3 + 2) * 2, 30, "10 follower partitions in sessions")
        # Each broker leads partitions followed by the two others: two sessions on each.
        wait_until(lambda: all(metric(cluster, SESSIONS, i) == 2 for i in range(3)), 30, "two sessions a broker")

        from kafka.admin import NewPartitions

        admin.client.create_partitions({kept: NewPartitions(6)})
        wait_until(lambda: admin._fully_replicated(kept, 6, 3), 60, f"{kept}: 6 partitions fully replicated")
        producer = send.producer  # type: ignore[attr-defined]
        wait_until(lambda: len(producer.partitions_for(kept) or ()) == 6, 30, "the producer to see 6 partitions")
        recs.produce([(kept, p) for p in range(6)], n=5)
        wait_until(lambda: _cached(cluster) == (6 + 2) * 2, 30, "16 follower partitions in sessions")

        admin.client.delete_topics([dropped])
        wait_until(lambda: _cached(cluster) == 6 * 2, 30, "12 follower partitions in sessions")
        recs.produce([(kept, p) for p in range(6)], n=5)
        assert all(metric(cluster, EVICTIONS, i) == 0 for i in range(3))
        assert all(metric(cluster, SESSIONS, i) == 2 for i in range(3))
    send.producer.close()  # type: ignore[attr-defined]
    _replicas_identical(cluster, kept, 6)


def test_num_replica_fetchers_splits_each_leaders_partitions_over_sessions(cluster3: Callable[..., Any]) -> None:
    """num.replica.fetchers=2: a follower replicates a leader's partitions through two fetchers, each with
    a session of its own, a partition in the one Kafka's getFetcherId names; back to 1 at run time (set
    with Apache Kafka's own kafka-configs), replication carries on."""
    from broker.replica_fetcher import fetcher_id_for
    from tests.benchmark_clients_support import java_tool

    cluster = cluster3(num_replica_fetchers="2")
    topic = unique("fetchers")
    send = _producer(cluster.bootstrap)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, 12, 3, TOPIC_CONFIGS)
        recs = Records(send)
        recs.produce([(topic, p) for p in range(12)], n=3)
        leaders = {p: d["leader"] for p, d in admin.describe(topic).items()}
    # On each leader: two followers, each with a session per fetcher id among the partitions it leads.
    expected = {i: 2 * len({fetcher_id_for((topic, p), 2) for p, lead in leaders.items() if lead == i})
                for i in range(3)}
    assert sum(expected.values()) > 6, f"the partitions fell to one fetcher id on every leader: {leaders}"
    wait_until(lambda: all(metric(cluster, SESSIONS, i) == expected[i] for i in range(3)), 30,
               lambda: f"sessions per leader {expected} (metrics say "
                       f"{[metric(cluster, SESSIONS, i) for i in range(3)]})")
    java_tool("kafka.admin.ConfigCommand", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type",
              "brokers", "--entity-default", "--add-config", "num.replica.fetchers=1")
    wait_until(lambda: all("num.replica.fetchers now 1 (was 2)" in b.log_text() for b in cluster.brokers), 30,
               "every broker to move its partitions to one fetcher a leader")
    recs.produce([(topic, p) for p in range(12)], n=3)  # acks=all: both followers still in sync
    send.producer.close()  # type: ignore[attr-defined]
    _replicas_identical(cluster, topic, 12)


@pytest.mark.slow
def test_consumers_and_followers_through_leader_changes(cluster3: Callable[..., Any]) -> None:
    """The leader of a partition is killed, and later the next one: kafka-python, confluent-kafka and the
    Java consumer read every record once, in order, and the follower sessions bring the restarted
    brokers back into the ISR with byte-identical replicas."""
    cluster = cluster3()
    topic = unique("fs-leaders")
    tps = [(topic, p) for p in range(3)]
    send = _producer(cluster.bootstrap)
    consumers: dict[str, Consumer] = {}
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, 3, 3, TOPIC_CONFIGS)
        recs = {name: Records(send) for name in CLIENTS}
        produced = Records(send)
        try:
            for name, make in CLIENTS.items():
                consumers[name] = make(cluster.bootstrap)
                consumers[name].assign(tps)

            def step(what: str) -> None:
                n = produced.produce(tps, n=4)
                for name, c in consumers.items():
                    recs[name].produced = produced.produced
                    recs[name].take(c, n, f"{name} {what}", timeout=120)

            step("before any failure")
            for round_ in range(2):
                victim = admin.describe(topic)[0]["leader"]
                cluster.brokers[victim].kill()
                admin.wait_leader(topic, 0, lambda b, v=victim: b >= 0 and b != v, what="a new leader")
                step(f"after leader change {round_ + 1}")
                start_broker(cluster.brokers[victim])
                for p in range(3):
                    admin.wait_isr(topic, p, [0, 1, 2], 90)
                step(f"after broker {victim} rejoined")
            for name in consumers:
                recs[name].check(tps)
        finally:
            for c in consumers.values():
                c.close()
            send.producer.close()  # type: ignore[attr-defined]
    _replicas_identical(cluster, topic, 3)
