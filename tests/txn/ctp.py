"""Consume-transform-produce helpers shared by the exactly-once tests.

An input topic holds ``v0..v{n-1}``. A loop reads it (read_committed, group offsets committed only
through ``sendOffsetsToTransaction``) and writes ``T:<value>:<attempt>`` to the output topic inside a
transaction per batch; some batches are aborted on purpose (then the consumer rewinds). What must hold
afterwards: a read_committed reader sees every input value exactly once and no aborted attempt; a
read_uncommitted reader sees the aborted attempts too; the group's committed offsets are the input's end.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from tests.integration.helpers import all_served, wait_until


def create_topic(bootstrap: str, name: str, partitions: int = 3, rf: int = 3) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="txn-admin")
    try:
        admin.create_topics([NewTopic(name, partitions, rf)])
    finally:
        admin.close()
    wait_until(lambda: all_served(bootstrap, name, partitions), 30, f"leaders serving all partitions of {name}")


def seed(bootstrap: str, topic: str, n: int) -> list[bytes]:
    values = [b"v%d" % i for i in range(n)]
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for i, v in enumerate(values):
        p.send(topic, key=b"k%d" % i, value=v)
    p.flush(30)
    p.close()
    return values


def read_all(bootstrap: str, topic: str, isolation: str, timeout: float = 60.0) -> list[bytes]:
    """Every value of ``topic`` a consumer at ``isolation`` can read now (up to the HW or the LSO)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                      group_id=None, consumer_timeout_ms=1000)
    try:
        parts = c.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        c.assign(tps)
        c.seek_to_beginning()
        end = c.end_offsets(tps)  # the LSO for read_committed
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic} to {end} ({isolation})")
            for msgs in c.poll(timeout_ms=500).values():
                out.extend(m.value for m in msgs)
        return out
    finally:
        c.close()


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        parts = sorted(c.partitions_for_topic(topic) or set())
        out = {}
        for p in parts:
            om = c.committed(TopicPartition(topic, p))
            out[p] = -1 if om is None else om
        return out
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or set())]
        return {tp.partition: off for tp, off in c.end_offsets(tps).items()}
    finally:
        c.close()


@dataclass
class Outcome:
    committed: list[bytes] = field(default_factory=list)  # values of committed transactions
    aborted: list[bytes] = field(default_factory=list)  # values of aborted transactions


def check_exactly_once(bootstrap: str, in_topic: str, out_topic: str, group: str, inputs: list[bytes],
                       aborted: list[bytes]) -> None:
    committed_view = read_all(bootstrap, out_topic, "read_committed")
    uncommitted_view = read_all(bootstrap, out_topic, "read_uncommitted")
    sources = Counter(v.split(b":")[1] for v in committed_view)
    assert set(sources) == set(inputs), f"missing {set(inputs) - set(sources)}, extra {set(sources) - set(inputs)}"
    dupes = {k: n for k, n in sources.items() if n != 1}
    assert not dupes, f"read_committed saw these inputs more than once: {dupes}"
    leaked = set(committed_view) & set(aborted)
    assert not leaked, f"read_committed saw aborted records: {sorted(leaked)[:10]}"
    assert set(aborted) <= set(uncommitted_view), "read_uncommitted must see the aborted records"
    assert set(committed_view) <= set(uncommitted_view)
    assert committed_offsets(bootstrap, group, in_topic) == end_offsets(bootstrap, in_topic)


def kafka_python_loop(bootstrap: str, in_topic: str, out_topic: str, group: str, txn_id: str, n: int,
                      abort_every: int = 3, timeout: float = 120.0,
                      before_end: Callable[[int], None] | None = None, max_poll_records: int = 40,
                      producer_config: dict[str, object] | None = None) -> Outcome:
    """The consume-transform-produce loop with kafka-python's transactional producer.

    ``before_end(batch)`` runs with the batch's records sent and acknowledged, before the transaction ends.
    """
    consumer = KafkaConsumer(in_topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             isolation_level="read_committed", auto_offset_reset="earliest", max_poll_records=max_poll_records)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=5,
                             **(producer_config or {}))
    result = Outcome()
    try:
        producer.init_transactions()
        done: set[bytes] = set()
        batch = 0
        deadline = time.monotonic() + timeout
        while len(done) < n:
            assert time.monotonic() < deadline, f"only {len(done)} of {n} records processed"
            recs = consumer.poll(timeout_ms=500)
            if not recs:
                continue
            batch += 1
            producer.begin_transaction()
            sent = []
            for msgs in recs.values():
                for m in msgs:
                    v = b"T:%s:%d" % (m.value, batch)
                    producer.send(out_topic, key=m.key, value=v)
                    sent.append((m.value, v))
            if before_end is not None:
                producer.flush()
                before_end(batch)
            if abort_every and batch % abort_every == 0:
                producer.flush()
                producer.abort_transaction()
                result.aborted.extend(v for _, v in sent)
                for tp, msgs in recs.items():
                    consumer.seek(tp, msgs[0].offset)
                continue
            offsets = {tp: OffsetAndMetadata(msgs[-1].offset + 1, "", -1) for tp, msgs in recs.items()}
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            producer.commit_transaction()
            result.committed.extend(v for _, v in sent)
            done.update(src for src, _ in sent)
    finally:
        producer.close(timeout=10)
        consumer.close()
    return result


def confluent_loop(bootstrap: str, in_topic: str, out_topic: str, group: str, txn_id: str, n: int,
                   abort_every: int = 3, timeout: float = 120.0, before_end: Callable[[int], None] | None = None,
                   max_poll_records: int = 40) -> Outcome:
    """The same loop with confluent-kafka (librdkafka); ``before_end`` as in :func:`kafka_python_loop`."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    producer_config: dict[str, object] = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    if os.environ.get("KAFKETTE_RDKAFKA_DEBUG"):
        # librdkafka's own trace of the producer (e.g. "eos,protocol,broker"), printed to stderr: how a
        # stalled transactional call is diagnosed.
        producer_config["debug"] = os.environ["KAFKETTE_RDKAFKA_DEBUG"]
    producer = Producer(producer_config)
    result = Outcome()
    try:
        consumer.subscribe([in_topic])
        producer.init_transactions(60)
        done: set[bytes] = set()
        batch = 0
        deadline = time.monotonic() + timeout
        while len(done) < n:
            assert time.monotonic() < deadline, f"only {len(done)} of {n} records processed"
            msgs = [m for m in consumer.consume(num_messages=max_poll_records, timeout=0.5) if m.error() is None]
            if not msgs:
                continue
            batch += 1
            producer.begin_transaction()
            sent = []
            first: dict[int, int] = {}
            last: dict[int, int] = {}
            for m in msgs:
                v = b"T:%s:%d" % (m.value(), batch)
                producer.produce(out_topic, key=m.key(), value=v)
                sent.append((m.value(), v))
                first.setdefault(m.partition(), m.offset())
                last[m.partition()] = m.offset()
            if before_end is not None:
                assert producer.flush(60) == 0
                before_end(batch)
            if abort_every and batch % abort_every == 0:
                producer.flush(30)
                producer.abort_transaction(60)
                result.aborted.extend(v for _, v in sent)
                for p, off in first.items():
                    consumer.seek(CTP(in_topic, p, off))
                continue
            offsets = [CTP(in_topic, p, off + 1) for p, off in last.items()]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
            producer.commit_transaction(60)
            result.committed.extend(v for _, v in sent)
            done.update(src for src, _ in sent)
    finally:
        producer.flush(10)
        consumer.close()
    return result
