"""What the platform tests do with a cluster from the outside, through librdkafka (confluent-kafka):
create topics, produce with an idempotent producer, read a topic to its end (read_committed),
look at committed offsets, topic configs and replication."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from tests.integration.helpers import wait_until


def admin(bootstrap: str):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create_topics(bootstrap: str, topics: dict[str, int], replication: int = 3,
                  configs: dict[str, str] | None = None) -> None:
    """Create ``topics`` (name -> partitions) and wait until each partition has a leader."""
    from confluent_kafka.admin import NewTopic

    a = admin(bootstrap)
    futures = a.create_topics([NewTopic(t, p, replication, config=dict(configs or {})) for t, p in topics.items()])
    for f in futures.values():
        f.result(60)
    for topic, partitions in topics.items():
        wait_until(lambda topic=topic, partitions=partitions: len(leaders(bootstrap, topic)) == partitions, 60,
                   f"{topic}: {partitions} partitions with leaders")


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = admin(bootstrap).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p.id: p.leader for p in t.partitions.values() if p.leader >= 0}


def replication(bootstrap: str, topic: str) -> dict[int, tuple[list[int], list[int]]]:
    """partition -> (replicas, isr)."""
    md = admin(bootstrap).list_topics(topic, timeout=10)
    return {p.id: (list(p.replicas), list(p.isrs)) for p in md.topics[topic].partitions.values()}


def topic_names(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=10).topics)


def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource

    a = admin(bootstrap)
    (f,) = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return {k: v.value for k, v in f.result(30).items()}


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, (topic, partition) -> offset."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    a = admin(bootstrap)
    (f,) = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {(tp.topic, tp.partition): tp.offset for tp in f.result(30).topic_partitions if tp.offset >= 0}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"offsets-{uuid.uuid4().hex[:8]}"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def read_all(bootstrap: str, topic: str, partitions: int, *, timeout: float = 120,
             isolation: str = "read_committed") -> list[Record]:
    """Every record of ``topic`` up to the end it has now (the last stable offset for read_committed),
    in partition and offset order."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-all-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[Record] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic} to its end in {timeout}s (at the end of {at_end})")
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(m.partition())
                    continue
                raise AssertionError(f"reading {topic}: {m.error()}")
            at_end.discard(m.partition())
            out.append(Record(m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]))
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        c.close()


class Producer:
    """An idempotent acks=all librdkafka producer that remembers what was acknowledged and what failed."""

    def __init__(self, bootstrap: str, **config: str | int) -> None:
        from confluent_kafka import Producer as _Producer

        self._p = _Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, **config})
        self.acked: list[Record] = []
        self.failed: list[str] = []

    def send(self, topic: str, key: str | bytes | None, value: str | bytes, timestamp: int | None = None,
             partition: int | None = None) -> None:
        def report(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is not None:
                self.failed.append(str(err))
            else:
                self.acked.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))

        kwargs = {} if partition is None else {"partition": partition}
        while True:
            try:
                self._p.produce(topic, value=value, key=key, timestamp=timestamp or 0, on_delivery=report, **kwargs)
                break
            except BufferError:
                self._p.poll(0.1)
        self._p.poll(0)

    def flush(self, timeout: float = 120) -> None:
        left = self._p.flush(timeout)
        assert left == 0, f"{left} records not delivered after {timeout}s"
        assert not self.failed, f"deliveries failed: {self.failed[:5]}"


def produce_lines(bootstrap: str, topic: str, lines: Iterable[str], key: str | None = None) -> None:
    p = Producer(bootstrap)
    for line in lines:
        p.send(topic, key, line)
    p.flush()
