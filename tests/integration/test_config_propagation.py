"""Topic configs reach every broker: set at creation or altered through one broker, the others see them
(ZooKeeper's /config/topics and /config/changes, watched by each broker)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from protocol.api_versions import ApiKey
from protocol.messages import request_type
from tests.integration.helpers import RawClient, unique, wait_until

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
CONFIG_SOURCE_DYNAMIC_DEFAULT = 3  # DescribeConfigs' DYNAMIC_DEFAULT_BROKER_CONFIG


def _topic_config(bootstrap: str, topic: str, name: str) -> str | None:
    """One topic config as described by the broker at ``bootstrap`` (not by whichever the client picks)."""
    mt = request_type(ApiKey.DESCRIBE_CONFIGS)
    with RawClient(bootstrap) as raw:
        r = raw.request(ApiKey.DESCRIBE_CONFIGS, 4, resources=[mt.DescribeConfigsResource(
            resource_type=RESOURCE_TOPIC, resource_name=topic, configuration_keys=[name])],
            include_synonyms=False, include_documentation=False)
    [res] = r.results
    if res.error_code != 0:
        return None
    return next((c.value for c in res.configs if c.name == name), None)


def _broker_default(bootstrap: str, name: str) -> tuple[str | None, int] | None:
    """(value, source) of a cluster-wide broker default as described by the broker at ``bootstrap``
    (resource name ""), None when it is not set there."""
    mt = request_type(ApiKey.DESCRIBE_CONFIGS)
    with RawClient(bootstrap) as raw:
        r = raw.request(ApiKey.DESCRIBE_CONFIGS, 4, resources=[mt.DescribeConfigsResource(
            resource_type=RESOURCE_BROKER, resource_name="", configuration_keys=[name])],
            include_synonyms=False, include_documentation=False)
    [res] = r.results
    assert res.error_code == 0, res
    return next(((c.value, c.config_source) for c in res.configs if c.name == name), None)


def test_topic_configs_reach_every_broker(cluster_factory: Any) -> None:
    cluster = cluster_factory(2)
    b0, b1 = (b.bootstrap for b in cluster.brokers)
    topic = unique("configs")
    admin = KafkaAdminClient(bootstrap_servers=b0)
    try:
        admin.create_topics([NewTopic(topic, 2, 2, topic_configs={"retention.ms": "3600000"})])
        for b in (b0, b1):
            wait_until(lambda b=b: _topic_config(b, topic, "retention.ms") == "3600000", 15,
                       f"the creation-time config on {b}")
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "7200000"})],
                            incremental=True)
        for b in (b0, b1):
            wait_until(lambda b=b: _topic_config(b, topic, "retention.ms") == "7200000", 15,
                       f"the altered config on {b}")
        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics(), 15, "the topic to be deleted")
        # Created again without configs: the old overrides are gone everywhere.
        wait_until(lambda: _create(admin, topic), 20, "the topic to be created again")
        for b in (b0, b1):
            wait_until(lambda b=b: _topic_config(b, topic, "retention.ms") == "604800000", 15,
                       f"the default config on {b}")
        # Without partitions left, the last broker's controlled shutdown has nothing to wait for.
        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics(), 15, "the topic to be deleted again")
    finally:
        admin.close()


def _create(admin: KafkaAdminClient, topic: str) -> bool:
    from kafka.errors import TopicAlreadyExistsError

    try:
        admin.create_topics([NewTopic(topic, 2, 2)])
        return True
    except TopicAlreadyExistsError:  # the previous incarnation is still being deleted
        return False


def _raw_alter(bootstrap: str, incremental: bool, resources: list[tuple[int, str, list[tuple[str, str | None]]]],
               validate_only: bool = False) -> list[tuple[int, str | None]]:
    """(error code, message) per resource of an AlterConfigs (or IncrementalAlterConfigs: SET, or DELETE
    for a None value) sent to the broker at ``bootstrap``."""
    key = ApiKey.INCREMENTAL_ALTER_CONFIGS if incremental else ApiKey.ALTER_CONFIGS
    mt = request_type(key)
    with RawClient(bootstrap) as raw:
        if incremental:
            body = [mt.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
                mt.AlterableConfig(name=k, config_operation=1 if v is None else 0, value=v) for k, v in cfgs])
                for t, n, cfgs in resources]
        else:
            body = [mt.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
                mt.AlterableConfig(name=k, value=v) for k, v in cfgs]) for t, n, cfgs in resources]
        r = raw.request(key, 1 if incremental else 2, resources=body, validate_only=validate_only)
    return [(x.error_code, x.error_message) for x in r.responses]


def test_config_requests_are_checked_and_read_from_zookeeper(cluster_factory: Any) -> None:
    """Kafka's ConfigAdminManager.preprocess errors; a DescribeConfigs on another broker right after an
    alter sees the new value (Kafka in ZooKeeper mode reads topic configs from ZooKeeper every time);
    the deprecated message.format.version values Kafka 3.9 still takes."""
    cluster = cluster_factory(2)
    b0, b1 = (b.bootstrap for b in cluster.brokers)
    topic = unique("cfgcheck")
    admin = KafkaAdminClient(bootstrap_servers=b0)
    try:
        admin.create_topics([NewTopic(topic, 1, 2)])
        wait_until(lambda: all(_topic_config(b, topic, "retention.ms") is not None for b in (b0, b1)), 15,
                   "the topic on both brokers")
        invalid = 42  # INVALID_REQUEST
        for incremental in (False, True):
            assert _raw_alter(b0, incremental, [(RESOURCE_TOPIC, topic, [("retention.ms", "1"),
                                                                          ("retention.ms", "2")])]) == \
                [(invalid, "Error due to duplicate config keys")]
            assert _raw_alter(b0, incremental, [(RESOURCE_TOPIC, topic, [("retention.ms", "1")]),
                                                (RESOURCE_TOPIC, topic, [("segment.ms", "9000000")])]) == \
                [(invalid, "Each resource must appear at most once.")] * 2
            other = str(cluster.brokers[1].broker_id)
            assert _raw_alter(b0, incremental, [(4, other, [("log.cleaner.threads", "2")])]) == \
                [(invalid, f"Unexpected broker id, expected {cluster.brokers[0].broker_id}, but received {other}")]
            assert _raw_alter(b0, incremental, [(4, "x", [("log.cleaner.threads", "2")])]) == \
                [(invalid, "Node id must be an integer, but it is: x")]
        assert _raw_alter(b0, False, [(RESOURCE_TOPIC, topic, [("retention.ms", None)])]) == \
            [(invalid, "Null value not supported for : retention.ms")]
        # Nothing of the refused requests was applied.
        assert _topic_config(b1, topic, "retention.ms") == "604800000"

        # Altered through one broker, described by the other at once, 100 times each way round: no
        # waiting for a change notification. Topic configs, and the cluster-wide broker defaults.
        brokers = (b0, b1)
        stale = []
        for i in range(100):
            writer, reader = brokers[i % 2], brokers[1 - i % 2]
            value = str(3_600_000 + i)
            assert _raw_alter(writer, True, [(RESOURCE_TOPIC, topic, [("retention.ms", value)])]) == [(0, None)]
            if _topic_config(reader, topic, "retention.ms") != value:
                stale.append(("topic", i))
            value = str(15_000 + i)
            assert _raw_alter(writer, True, [(RESOURCE_BROKER, "", [("log.cleaner.backoff.ms", value)])]) == \
                [(0, None)]
            if _broker_default(reader, "log.cleaner.backoff.ms") != (value, CONFIG_SOURCE_DYNAMIC_DEFAULT):
                stale.append(("broker default", i))
        assert stale == [], f"stale reads: {stale}"
        assert _raw_alter(b0, True, [(RESOURCE_BROKER, "", [("log.cleaner.backoff.ms", None)])]) == [(0, None)]
        assert _broker_default(b1, "log.cleaner.backoff.ms") is None

        # Kafka 3.9 still takes the deprecated message format versions, and cuts them as it does.
        for value in ("0.10.0.0", "0.8.2.2", "2.8", "3.9.1", "3.0-IV1"):
            assert _raw_alter(b0, True, [(RESOURCE_TOPIC, topic, [("message.format.version", value)])]) == \
                [(0, None)], value
        [(code, msg)] = _raw_alter(b0, True, [(RESOURCE_TOPIC, topic, [("message.format.version", "5.5")])])
        assert code == 40 and msg is not None and "Version 5.5 is not a valid version" in msg  # INVALID_CONFIG
    finally:
        admin.close()


def test_cleaner_io_rate_and_threads_are_dynamic_configs_kafka_configs_sets(cluster_factory: Any) -> None:
    """log.cleaner.io.max.bytes.per.second and log.cleaner.threads, set cluster-wide with Apache Kafka's
    own kafka-configs, reach the running cleaner (their effect: tests/storage/test_cleaner.py)."""
    from tests.benchmark_clients_support import java_tool

    cluster = cluster_factory(1)
    b = cluster.brokers[0]
    java_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type", "brokers",
              "--entity-default", "--add-config", "log.cleaner.io.max.bytes.per.second=1048576")
    wait_until(lambda: "log cleaner I/O now at most 1048576.0 bytes a second" in b.log_text(), 30,
               "the broker's cleaner to take the new rate")
    # log.cleaner.threads, dynamic too, within Kafka's bounds (at most double, at least half, at least 1).
    java_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type", "brokers",
              "--entity-default", "--add-config", "log.cleaner.threads=2")
    wait_until(lambda: "log.cleaner.threads now 2 (was 1)" in b.log_text(), 30, "the cleaner to run two threads")
    with pytest.raises(RuntimeError, match="cannot be increased to more than double the current value 2"):
        java_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type",
                  "brokers", "--entity-default", "--add-config", "log.cleaner.threads=5")
