"""Old versions whose answers depend on the cluster: Metadata v0 with a broker down, DeleteTopics before v3.

* Metadata v0 (Kafka's ``errorUnavailableEndpoints``) lists only the replicas and in-sync replicas it
  can reach and says REPLICA_NOT_AVAILABLE for a partition missing some; later versions list them all.
* DeleteTopics v0-2 with ``delete.topic.enable=false`` is INVALID_REQUEST: TOPIC_DELETION_DISABLED
  came in v3.
"""

from __future__ import annotations

from typing import Any

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type
from tests.integration.helpers import RawClient, controller_bootstrap, unique, wait_until

_META = request_type(ApiKey.METADATA)


def _partition(raw: RawClient, version: int, topic: str) -> Any:
    r = raw.request(ApiKey.METADATA, version, topics=[_META.MetadataRequestTopic(name=topic)],
                    allow_auto_topic_creation=False)
    return r.topics[0].partitions[0]


def test_metadata_v0_leaves_out_unreachable_replicas(cluster_factory: Any) -> None:
    cluster = cluster_factory(2)
    topic = unique("md-v0")
    ct = request_type(ApiKey.CREATE_TOPICS)
    with RawClient(controller_bootstrap(cluster.bootstrap)) as admin:
        r = admin.request(ApiKey.CREATE_TOPICS, 7, timeout_ms=15000, validate_only=False, topics=[ct.CreatableTopic(
            name=topic, num_partitions=-1, replication_factor=-1, assignments=[
                ct.CreatableReplicaAssignment(partition_index=0, broker_ids=[0, 1])], configs=[])])
    assert r.topics[0].error_code == 0
    with RawClient(cluster.brokers[0].bootstrap) as raw:
        # Created on the controller: broker 0 learns of the topic a moment later.
        wait_until(lambda: raw.leaders(topic) == 1 and _partition(raw, 0, topic).isr_nodes == [0, 1], 30,
                   "both replicas in sync")
        p = _partition(raw, 0, topic)
        assert (p.error_code, p.leader_id, p.replica_nodes) == (0, 0, [0, 1])
        cluster.brokers[1].stop()

        def broker_1_gone() -> bool:
            md = raw.request(ApiKey.METADATA, 1, topics=[], allow_auto_topic_creation=False)
            return [b.node_id for b in md.brokers] == [0]

        wait_until(broker_1_gone, 30, "broker 1 to leave the metadata")
        v0 = _partition(raw, 0, topic)
        assert (v0.error_code, v0.leader_id, v0.replica_nodes) == (ErrorCode.REPLICA_NOT_AVAILABLE, 0, [0])
        assert 1 not in v0.isr_nodes
        v1 = _partition(raw, 1, topic)
        assert (v1.error_code, v1.replica_nodes) == (0, [0, 1])


def test_delete_topics_disabled_before_v3_is_an_invalid_request(cluster_factory: Any) -> None:
    cluster = cluster_factory(1, overrides={"delete.topic.enable": "false"})
    topic = unique("no-delete")
    dt = request_type(ApiKey.DELETE_TOPICS)
    with RawClient(cluster.bootstrap) as raw:
        for version, code in ((0, ErrorCode.INVALID_REQUEST), (2, ErrorCode.INVALID_REQUEST),
                              (3, ErrorCode.TOPIC_DELETION_DISABLED), (6, ErrorCode.TOPIC_DELETION_DISABLED)):
            fields: dict[str, Any] = {"topic_names": [topic]} if version < 6 else {
                "topics": [dt.DeleteTopicState(name=topic)]}
            r = raw.request(ApiKey.DELETE_TOPICS, version, timeout_ms=5000, **fields)
            assert r.responses[0].error_code == code, version
