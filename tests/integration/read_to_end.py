"""Read one partition from its beginning to its end with each real client library.

Each reader returns ``[(offset, timestamp_type, timestamp)]`` with the type as Kafka names it
("CreateTime" / "LogAppendTime"), and raises if the client reports any error on the way (a corrupt
batch, a codec failure) or does not reach the end offset in time.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.integration.helpers import unique

Row = tuple[int, str, int]
JAVA_SOURCE = Path(__file__).parent / "java" / "ConsumeToEnd.java"


def kafka_python_read(bootstrap: str, topic: str, partition: int, timeout: float = 60.0) -> list[Row]:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             auto_offset_reset="earliest", check_crcs=True)
    rows: list[Row] = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise AssertionError(f"kafka-python stopped at {consumer.position(tp)} of {end} in {topic}-{partition}")
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    rows.append((r.offset, "LogAppendTime" if r.timestamp_type == 1 else "CreateTime", r.timestamp))
    finally:
        consumer.close()
    return rows


def confluent_read(bootstrap: str, topic: str, partition: int, timeout: float = 60.0) -> list[Row]:
    from confluent_kafka import (
        OFFSET_BEGINNING,
        TIMESTAMP_LOG_APPEND_TIME,
        Consumer,
        KafkaError,
        KafkaException,
        TopicPartition,
    )

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("read-to-end"),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "check.crcs": True, "enable.partition.eof": True})
    rows: list[Row] = []
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        position = 0
        deadline = time.monotonic() + timeout
        while position < end:
            if time.monotonic() > deadline:
                raise AssertionError(f"confluent-kafka stopped at {position} of {end} in {topic}-{partition}")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    position = max(position, msg.offset())
                    continue
                raise KafkaException(msg.error())
            ts_type, ts = msg.timestamp()
            rows.append((msg.offset(), "LogAppendTime" if ts_type == TIMESTAMP_LOG_APPEND_TIME else "CreateTime", ts))
            position = msg.offset() + 1
    finally:
        consumer.close()
    return rows


def java_read(bootstrap: str, topic: str, partition: int) -> list[Row]:
    return java_read_all(bootstrap, [(topic, partition)])[(topic, partition)]


def java_read_all(bootstrap: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], list[Row]]:
    """Several partitions, one after the other, in one JVM (starting one costs seconds)."""
    from tests.kafka_dist import compile_java, run_java

    out = run_java("ConsumeToEnd", bootstrap, *(f"{t}:{p}" for t, p in partitions),
                   extra_classpath=compile_java(JAVA_SOURCE), timeout=180)
    rows: dict[tuple[str, int], list[Row]] = {tp: [] for tp in partitions}
    ended = set()
    for line in out.split("\n"):
        parts = line.split()
        if len(parts) == 4 and parts[0] == "END":
            ended.add((parts[1], int(parts[2])))
        elif len(parts) == 5:
            rows[(parts[0], int(parts[1]))].append((int(parts[2]), parts[3], int(parts[4])))
    assert ended == set(partitions), out
    return rows


READERS = {"kafka-python": kafka_python_read, "confluent-kafka": confluent_read, "java": java_read}
