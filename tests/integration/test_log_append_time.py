"""``message.timestamp.type=LogAppendTime``: the broker's clock replaces the producer's, everywhere.

Producers send records stamped in 1970; the topic says LogAppendTime. Consumers of all three client
libraries must see timestamp type LogAppendTime and the time the leader appended the batch (the
same value the produce response carried); ListOffsets by that time finds the records; time-based
retention goes by it (the 1970 stamps would have had the records deleted at once); and the
follower, which copies the stamped batch as it is, serves the same after the leader is stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.helpers import RawClient, unique, wait_until
from tests.integration.read_to_end import READERS

ANCIENT_MS = 1_000_000  # 1970-01-01T00:16:40Z


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from clients.devcluster import LocalCluster

    with LocalCluster(2, overrides={"log.retention.check.interval.ms": "300"}) as c:
        yield c


def _create(bootstrap: str, name: str, replication: int, configs: dict[str, str]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="lat-admin")
    try:
        admin.create_topics([NewTopic(name, 1, replication, topic_configs=configs)])
    finally:
        admin.close()
    with RawClient(bootstrap) as raw:
        wait_until(lambda: raw.leaders(name) == 1, 20, f"a leader for {name}")


def _produce_ancient(bootstrap: str, topic: str) -> tuple[int, int, dict[int, int]]:
    """Three records from kafka-python and three from confluent-kafka, all stamped ANCIENT_MS.

    Returns the clock around the produce and, per offset, the log-append time the response gave."""
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    before = now_ms()
    appended: dict[int, int] = {}
    kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for i in range(3):
            md = kp.send(topic, key=b"kp%d" % i, value=b"v", timestamp_ms=ANCIENT_MS).get(20)
            appended[md.offset] = md.timestamp  # kafka-python reports the log-append time here
    finally:
        kp.close()
    cp = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    delivered: list[Any] = []
    for i in range(3):
        cp.produce(topic, key=b"cp%d" % i, value=b"v", timestamp=ANCIENT_MS,
                   on_delivery=lambda err, msg: delivered.append((err, msg)))
    cp.flush(20)
    assert len(delivered) == 3 and all(err is None for err, _ in delivered), delivered
    for _, msg in delivered:
        appended[msg.offset()] = msg.timestamp()[1]
    return before, now_ms(), appended


def test_log_append_time_everywhere(cluster: Any) -> None:
    bootstrap = cluster.bootstrap
    topic = unique("lat")
    _create(bootstrap, topic, 2, {"message.timestamp.type": "LogAppendTime", "min.insync.replicas": "2"})
    before, after, appended = _produce_ancient(bootstrap, topic)
    assert sorted(appended) == list(range(6))
    assert all(before <= ts <= after for ts in appended.values()), (before, appended, after)

    for client, read in READERS.items():
        rows = read(bootstrap, topic, 0)
        assert [r[0] for r in rows] == list(range(6)), client
        for offset, ts_type, ts in rows:
            assert ts_type == "LogAppendTime", (client, offset, ts_type)
            assert ts == appended[offset], (client, offset, ts, appended)

    with RawClient(_leader_bootstrap(cluster, topic)) as raw:
        # The time index holds the append times: the first record at or after `before` is offset 0,
        # and nothing is at or after a moment past the last append.
        assert raw.list_offset(topic, 0, timestamp=before) == 0
        assert raw.list_offset(topic, 0, timestamp=max(appended.values())) <= 5
        assert raw.list_offset(topic, 0, timestamp=max(appended.values()) + 1) == -1

    # The follower holds the stamped batches unchanged: stop the leader and read them from it.
    leader = _leader_of(bootstrap, topic)
    survivor = next(b for b in cluster.brokers if b.broker_id != leader)
    next(b for b in cluster.brokers if b.broker_id == leader).stop()
    wait_until(lambda: _leader_of(survivor.bootstrap, topic) == survivor.broker_id, 30,
               f"{survivor.broker_id} leading {topic}")
    rows = READERS["kafka-python"](survivor.bootstrap, topic, 0)
    assert [(r[0], r[1], r[2]) for r in rows] == [(o, "LogAppendTime", appended[o]) for o in range(6)]


def _leader_bootstrap(cluster: Any, topic: str) -> str:
    """The address of the broker leading partition 0 of ``topic`` (ListOffsets goes to the leader)."""
    running = next(b for b in cluster.brokers if b.running)
    leader = _leader_of(running.bootstrap, topic)
    return next(b.bootstrap for b in cluster.brokers if b.broker_id == leader)


def _leader_of(bootstrap: str, topic: str) -> int:
    from protocol.api_versions import ApiKey
    from protocol.messages import request_type

    mt = request_type(ApiKey.METADATA)
    try:
        with RawClient(bootstrap) as raw:
            md = raw.request(ApiKey.METADATA, 12, topics=[mt.MetadataRequestTopic(name=topic, topic_id=None)],
                             allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    except OSError:
        return -1
    parts = [p for t in md.topics if t.name == topic for p in t.partitions]
    return parts[0].leader_id if parts else -1


def test_time_retention_goes_by_log_append_time(cluster: Any) -> None:
    bootstrap = next(b for b in cluster.brokers if b.running).bootstrap
    hour = str(3_600_000)
    create_time = unique("ret-ct")
    log_append = unique("ret-lat")
    _create(bootstrap, create_time, 1, {"retention.ms": hour})
    _create(bootstrap, log_append, 1, {"retention.ms": hour, "message.timestamp.type": "LogAppendTime"})
    _produce_ancient(bootstrap, create_time)
    _produce_ancient(bootstrap, log_append)
    with RawClient(_leader_bootstrap(cluster, create_time)) as raw:
        # CreateTime: 1970 is more than an hour ago, so retention deletes the records.
        wait_until(lambda: raw.list_offset(create_time, 0, timestamp=-2) == 6, 30,
                   f"retention deleting {create_time}")
    with RawClient(_leader_bootstrap(cluster, log_append)) as raw:
        # The same records stamped with their append time are younger than an hour: kept.
        assert raw.list_offset(log_append, 0, timestamp=-2) == 0
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="lat-admin")
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, log_append,
                                            configs={"retention.ms": "1", "message.timestamp.type": "LogAppendTime"})])
    finally:
        admin.close()
    with RawClient(_leader_bootstrap(cluster, log_append)) as raw:
        # A millisecond of retention: the append times are now old enough, and retention goes by them.
        wait_until(lambda: raw.list_offset(log_append, 0, timestamp=-2) == 6, 30, f"retention deleting {log_append}")
