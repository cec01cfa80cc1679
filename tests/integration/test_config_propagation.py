"""Topic configs reach every broker: set at creation or altered through one broker, the others see them
(ZooKeeper's /config/topics and /config/changes, watched by each broker)."""

from __future__ import annotations

from typing import Any

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from protocol.api_versions import ApiKey
from protocol.messages import request_type
from tests.integration.helpers import RawClient, unique, wait_until

RESOURCE_TOPIC = 2


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
