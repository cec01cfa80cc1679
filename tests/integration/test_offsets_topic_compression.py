"""offsets.topic.compression.codec: the group coordinator writes __consumer_offsets batches with that
codec (as Kafka's GroupMetadataManager), and reads them back after a restart (kafka-python)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from config.registry import BrokerConfig, ConfigError
from protocol.compression import CompressionType
from tests.integration.helpers import RawClient, create_topic, unique, wait_until


def test_commits_are_written_with_the_codec_and_survive_a_restart(cluster_factory: Any) -> None:
    cluster = cluster_factory(1, overrides={"offsets.topic.compression.codec": "1",  # gzip
                                            "offsets.topic.num.partitions": "1"})
    broker = cluster.brokers[0]
    topic, group = unique("codec"), unique("codec-group")
    create_topic(cluster.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
    for i in range(20):
        producer.send(topic, value=b"v%d" % i)
    producer.flush(10)
    producer.close(5)
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    assert len(list(consumer)) == 20
    consumer.commit()
    consumer.close()

    with RawClient(cluster.bootstrap) as raw:
        batches = raw.fetch_batches("__consumer_offsets", 0)
    assert batches, "nothing in __consumer_offsets"
    assert {b.compression for b in batches} == {CompressionType.GZIP}

    broker.stop()
    broker.start()
    with RawClient(cluster.bootstrap) as raw:
        wait_until(lambda: raw.leaders(topic) == 1, 30, "the topic led after the restart")

    def committed() -> int | None:
        c = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False)
        try:
            return c.committed(TopicPartition(topic, 0))
        finally:
            c.close()

    wait_until(lambda: committed() == 20, 60, "the gzip-compressed commit loaded after the restart")


def test_an_unknown_codec_id_is_refused() -> None:
    with pytest.raises(ConfigError, match="Unknown compression type id: 5"):
        BrokerConfig({"zookeeper.connect": "z:2181", "log.dirs": "/tmp/x", "offsets.topic.compression.codec": "5"})
