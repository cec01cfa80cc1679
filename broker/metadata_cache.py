"""The broker's view of the cluster, fed only by the controller's UpdateMetadata requests.

Like Kafka's ZkMetadataCache: clients' Metadata responses, partition leadership lookups for
FindCoordinator and NOT_LEADER hints all come from here, never from ZooKeeper directly.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

# The controller marks partitions of a topic being deleted with this leader id.
LEADER_DURING_DELETE = -2


@dataclass(slots=True)
class BrokerInfo:
    id: int
    rack: str | None
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port)


@dataclass(slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    zk_version: int = 0
    controller_epoch: int = 0


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[uuid.UUID, str] = {}
        self.controller_id: int = -1
        self.controller_epoch: int = -1
        self.cluster_id: str | None = None
        self.version = 0  # bumped on every update; waiters compare it

    def update(self, body) -> list[tuple[str, int]]:  # noqa: ANN001 - UpdateMetadataRequest body
        """Apply an UpdateMetadata request; returns partitions that were deleted."""
        self.controller_id = body.controller_id
        self.controller_epoch = body.controller_epoch
        self.brokers = {
            b.id: BrokerInfo(b.id, b.rack, {e.listener: (e.host, e.port) for e in b.endpoints})
            for b in body.live_brokers
        }
        deleted: list[tuple[str, int]] = []
        for ts in body.topic_states:
            topic = self.topics.get(ts.topic_name)
            if topic is None or (ts.topic_id.int and topic.topic_id != ts.topic_id):
                topic = TopicInfo(ts.topic_name, ts.topic_id)
                self.topics[ts.topic_name] = topic
                self.topics_by_id[ts.topic_id] = ts.topic_name
            for ps in ts.partition_states:
                if ps.leader == LEADER_DURING_DELETE:
                    topic.partitions.pop(ps.partition_index, None)
                    deleted.append((ts.topic_name, ps.partition_index))
                    continue
                topic.partitions[ps.partition_index] = PartitionInfo(
                    ts.topic_name, ps.partition_index, ps.leader, ps.leader_epoch, list(ps.isr),
                    list(ps.replicas), list(ps.offline_replicas), ps.zk_version, ps.controller_epoch)
            if not topic.partitions and any(p.leader == LEADER_DURING_DELETE for p in ts.partition_states):
                del self.topics[ts.topic_name]
                self.topics_by_id.pop(topic.topic_id, None)
        self.version += 1
        return deleted

    @property
    def initialized(self) -> bool:
        """Whether a controller's UpdateMetadata has reached this broker since it started."""
        return self.version > 0

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        t = self.topics.get(topic)
        return t.partitions.get(partition) if t else None

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        b = self.brokers.get(broker_id)
        return b.endpoints.get(listener) if b else None

    def alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers
