"""confluent-kafka (librdkafka) against one broker: idempotent produce, consume, groups, admin."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.integration.helpers import RawClient, unique, wait_until


def _result(future: Any, timeout: float = 20.0) -> Any:
    return future.result(timeout)


def _consume(consumer: Consumer, n: int, timeout: float = 30.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
        if msg.error() is None:
            out.append(msg)
    return out


def test_idempotent_produce_consume_group_and_admin(kafka_cluster: Any) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic, group = unique("ck"), unique("ck-group")
    admin = AdminClient({"bootstrap.servers": bootstrap})

    # Admin: create with a config, then it is in the metadata and in DescribeConfigs.
    _result(admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                          config={"retention.ms": "3600000"})])[topic])
    md = admin.list_topics(topic, timeout=10)
    assert sorted(md.topics[topic].partitions) == [0, 1, 2]
    assert all(p.leader == 0 for p in md.topics[topic].partitions.values())
    configs = _result(admin.describe_configs([ConfigResource("topic", topic)])[ConfigResource("topic", topic)])
    assert configs["retention.ms"].value == "3600000"
    change = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    _result(admin.incremental_alter_configs([change])[change])
    configs = _result(admin.describe_configs([ConfigResource("topic", topic)])[ConfigResource("topic", topic)])
    assert configs["retention.ms"].value == "7200000"

    # Idempotent producer with every codec librdkafka has.
    delivered: list[tuple[int, int, bytes]] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset(), msg.value()))

    n = 0
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "compression.type": codec, "linger.ms": 5})
        for i in range(40):
            producer.produce(topic, key=b"key-%d" % (i % 6), value=f"{codec}-{i}".encode(), on_delivery=on_delivery)
            n += 1
        assert producer.flush(20) == 0
    assert not errors, errors
    assert len(delivered) == n
    # Idempotence gave each partition gap-free offsets, each assigned once.
    for p in range(3):
        offs = sorted(o for (pp, o, _v) in delivered if pp == p)
        assert offs == list(range(len(offs)))
    with RawClient(bootstrap) as raw:
        by_partition = {p: raw.fetch_batches(topic, p) for p in range(3)}
    batches = [b for bs in by_partition.values() for b in bs]
    assert all(b.producer_id >= 0 and b.base_sequence >= 0 for b in batches), "batches carry producer ids"
    # librdkafka's batches, with every codec it has, decode with our record decoder to exactly what
    # was delivered at those offsets.
    assert {int(b.compression) for b in batches} == {0, 1, 2, 3, 4}, "every codec reached the log"
    decoded = {(p, r.offset, r.value) for p, bs in by_partition.items() for b in bs for r in b.records()}
    assert decoded == set(delivered)

    # A group of one: consume everything, commit, then a second consumer resumes after the commit.
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
    c1 = Consumer(conf)
    c1.subscribe([topic])
    got = _consume(c1, n)
    assert sorted(m.value() for m in got) == sorted(v for (_p, _o, v) in delivered)
    committed = c1.commit(asynchronous=False)
    assert all(tp.error is None for tp in committed)
    want = {p: sum(1 for (pp, _o, _v) in delivered if pp == p) for p in range(3)}
    assert {tp.partition: tp.offset for tp in committed} == {p: o for p, o in want.items() if o}

    groups = _result(admin.list_consumer_groups())
    assert group in {g.group_id for g in groups.valid}
    desc = _result(admin.describe_consumer_groups([group])[group])
    assert len(desc.members) == 1 and str(desc.state).endswith("STABLE")
    c1.close()

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, value=b"after-commit", partition=1)
    assert producer.flush(10) == 0
    c2 = Consumer(conf)
    c2.subscribe([topic])
    got = _consume(c2, 1)
    assert [m.value() for m in got] == [b"after-commit"], "resumes from the committed offsets"
    c2.assign([TopicPartition(topic, 1, 0)])  # seek by assignment
    again = _consume(c2, 1)
    assert again[0].offset() == 0
    c2.close()

    offsets = _result(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group])
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions if tp.topic == topic} == \
        {p: o for p, o in want.items() if o}

    # Delete the group, then the topic.
    _result(admin.delete_consumer_groups([group])[group])
    assert group not in {g.group_id for g in _result(admin.list_consumer_groups()).valid}
    _result(admin.delete_topics([topic])[topic])
    wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 15, "the topic to be gone")


def test_group_of_two_shares_partitions_and_rebalances_on_leave(kafka_cluster: Any) -> None:
    """Two librdkafka consumers split the partitions; when one closes, the other gets them all."""
    bootstrap = kafka_cluster.bootstrap
    topic, group = unique("ck-group2"), unique("ck-group2")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _result(admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic])
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(40):
        producer.produce(topic, value=b"%d" % i, partition=i % 4)
    assert producer.flush(10) == 0
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "enable.auto.commit": True,
            "auto.commit.interval.ms": 200}
    consumers = [Consumer(conf), Consumer(conf)]
    for c in consumers:
        c.subscribe([topic])
    seen: list[bytes] = []

    def poll_all(cs: list[Consumer]) -> None:
        for c in cs:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                seen.append(m.value())

    def split() -> bool:
        poll_all(consumers)
        parts = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
        return sorted(p for ps in parts for p in ps) == [0, 1, 2, 3] and all(len(ps) == 2 for ps in parts)

    wait_until(split, 30, "two consumers with two partitions each", interval=0)
    wait_until(lambda: poll_all(consumers) or len(set(seen)) == 40, 30, "all 40 records", interval=0)
    consumers[1].close()
    wait_until(lambda: poll_all(consumers[:1]) or len(consumers[0].assignment()) == 4, 30,
               "the remaining consumer to get all four partitions", interval=0)
    producer.produce(topic, value=b"late", partition=3)
    assert producer.flush(10) == 0
    wait_until(lambda: poll_all(consumers[:1]) or b"late" in seen, 20, "the record produced after the leave",
               interval=0)
    consumers[0].close()
    assert sorted(set(seen)) == sorted([b"%d" % i for i in range(40)] + [b"late"])
