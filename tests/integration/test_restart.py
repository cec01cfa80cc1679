"""A consumer group across broker restarts (kafka-python): committed offsets survive, so the group
resumes where it committed, and only the uncommitted tail is read twice."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.helpers import RawClient, create_topic, unique, wait_until


def _take(consumer: KafkaConsumer, n: int, timeout: float = 30.0) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(timeout_ms=300, max_records=n - len(out)).items():
            out.extend((tp.partition, m.offset, m.value.decode()) for m in msgs)
    return out


def test_group_resumes_from_committed_offsets_after_broker_restarts(cluster_factory: Any) -> None:
    cluster = cluster_factory(1, overrides={"zookeeper.session.timeout.ms": "4000"})
    bootstrap = cluster.bootstrap
    broker = cluster.brokers[0]
    topic, group = unique("restart"), unique("restart-group")
    nparts = 3
    create_topic(bootstrap, topic, partitions=nparts)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    produced = [f"v{i}" for i in range(90)]
    for i, v in enumerate(produced):
        producer.send(topic, value=v.encode(), partition=i % nparts)
    producer.flush(10)
    producer.close(5)

    def member() -> KafkaConsumer:
        return KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000,
                             reconnect_backoff_max_ms=500)

    # 40 records read and committed, then 15 more read but never committed (the uncommitted tail).
    c1 = member()
    committed_part = _take(c1, 40)
    assert len(committed_part) == 40
    c1.commit()
    committed = {p: c1.committed(TopicPartition(topic, p)) for p in range(nparts)}
    tail = _take(c1, 15)
    assert len(tail) == 15
    c1.close(autocommit=False)

    def restart(crash: bool) -> None:
        if crash:
            broker.kill()
        else:
            assert broker.stop() == 0
        broker.start()
        with RawClient(bootstrap) as raw:
            wait_until(lambda: raw.leaders(topic) == nparts, 30, "leaders after the restart")

    restart(crash=False)

    # A new member resumes exactly at the committed offsets.
    c2 = member()
    rest = _take(c2, 90 - 40)
    firsts = {p: min((o for (pp, o, _v) in rest if pp == p), default=30) for p in range(nparts)}
    assert firsts == committed, "resumed from the committed offsets"
    seen = [v for (_p, _o, v) in committed_part + tail + rest]
    assert sorted(set(seen)) == sorted(produced), "nothing lost"
    again = sorted(v for v in seen if seen.count(v) > 1)
    assert sorted(set(again)) == sorted(v for (_p, _o, v) in tail), "only the uncommitted tail was read twice"
    assert len(again) == 2 * len(tail)
    c2.commit()
    final = {p: c2.committed(TopicPartition(topic, p)) for p in range(nparts)}
    assert final == {p: 30 for p in range(nparts)}

    # The member stays up across a crash of the broker and reads what is produced afterwards, once.
    restart(crash=True)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    later = [f"after-crash-{i}" for i in range(30)]
    for i, v in enumerate(later):
        producer.send(topic, value=v.encode(), partition=i % nparts)
    producer.flush(10)
    producer.close(5)
    more = _take(c2, 30, timeout=45)
    assert sorted(v for (_p, _o, v) in more) == sorted(later)
    c2.commit()
    c2.close(autocommit=False)

    c3 = member()
    assert {p: c3.committed(TopicPartition(topic, p)) for p in range(nparts)} == {p: 40 for p in range(nparts)}
    assert _take(c3, 1, timeout=3) == [], "nothing left to read for the group"
    c3.close(autocommit=False)


def test_high_watermarks_checkpointed_while_the_broker_runs(cluster_factory: Any) -> None:
    """replication-offset-checkpoint is written every replica.high.watermark.checkpoint.interval.ms, as
    Kafka's ReplicaManager does, so a crashed broker leaves HWs behind that are at most that old."""
    cluster = cluster_factory(1, overrides={"replica.high.watermark.checkpoint.interval.ms": "300"})
    broker = cluster.brokers[0]
    topic = unique("hw-checkpoint")
    create_topic(cluster.bootstrap, topic, partitions=1)
    checkpoint = Path(broker.props["log.dirs"]) / "replication-offset-checkpoint"

    def checkpointed_hw() -> int | None:
        if not checkpoint.exists():
            return None
        lines = checkpoint.read_text().splitlines()
        hws = {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines[2:])}
        return hws.get((topic, 0))

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(25):
        producer.send(topic, value=b"v%d" % i, partition=0)
    producer.flush(10)
    wait_until(lambda: checkpointed_hw() == 25, 30, lambda: f"HW 25 checkpointed (file says {checkpointed_hw()})")
    for i in range(5):
        producer.send(topic, value=b"w%d" % i, partition=0)
    producer.flush(10)
    producer.close(5)
    wait_until(lambda: checkpointed_hw() == 30, 30, lambda: f"HW 30 checkpointed (file says {checkpointed_hw()})")
    broker.kill()  # no clean stop, which writes every checkpoint: the file is what the periodic write left
    assert checkpointed_hw() == 30
    broker.start()
    with RawClient(cluster.bootstrap) as raw:
        wait_until(lambda: raw.leaders(topic) == 1, 30, "the partition led after the restart")
