"""The controller's view of the cluster (Kafka's ``ControllerContext``) and the state-machine states.

Pure data, owned by the controller's event task: nothing here touches ZooKeeper or the network.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from controller.zk_data import BrokerRegistration, LeaderIsrAndControllerEpoch, ReplicaAssignment

TopicPartition = tuple[str, int]


class PartitionState(enum.Enum):
    """Kafka's partition state machine: NonExistent -> New -> Online <-> Offline -> NonExistent."""

    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


# Valid previous states of each target state (PartitionState.validPreviousStates in Kafka).
PARTITION_VALID_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.OFFLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}


class ReplicaState(enum.Enum):
    """Kafka's replica state machine."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


REPLICA_VALID_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    ReplicaState.NEW: frozenset({ReplicaState.NON_EXISTENT}),
    ReplicaState.ONLINE: frozenset({ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE,
                                    ReplicaState.DELETION_INELIGIBLE}),
    ReplicaState.OFFLINE: frozenset({ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE,
                                     ReplicaState.DELETION_INELIGIBLE}),
    ReplicaState.DELETION_STARTED: frozenset({ReplicaState.OFFLINE}),
    ReplicaState.DELETION_SUCCESSFUL: frozenset({ReplicaState.DELETION_STARTED}),
    ReplicaState.DELETION_INELIGIBLE: frozenset({ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED}),
    ReplicaState.NON_EXISTENT: frozenset({ReplicaState.DELETION_SUCCESSFUL}),
}


class IllegalStateTransition(Exception):
    pass


@dataclass
class ControllerStats:
    unclean_leader_elections: int = 0
    leader_elections: int = 0
    preferred_elections: int = 0
    controlled_shutdowns: int = 0
    alter_partition_requests: int = 0
    zk_write_conflicts: int = 0


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)  # includes shutting-down
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    # KIP-112: per broker, the replicas a LeaderAndIsr answer showed to be in a failed log dir (cleared when
    # the broker registers again).
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    all_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    assignments: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[tuple[TopicPartition, int], ReplicaState] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    topics_deletion_started: set[str] = field(default_factory=set)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    stats: ControllerStats = field(default_factory=ControllerStats)

    # -------------------------------------------------------------------------- brokers

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        return set(self.live_brokers) - self.shutting_down_broker_ids

    def broker_epoch(self, broker_id: int) -> int:
        reg = self.live_brokers.get(broker_id)
        return reg.broker_epoch if reg is not None else -1

    def is_replica_online(self, broker_id: int, tp: TopicPartition | None = None, *,
                          include_shutting_down: bool = False) -> bool:
        """Kafka's isReplicaOnline: the broker is alive and the replica is not in one of its failed log
        dirs (KIP-112)."""
        if tp is not None and tp in self.replicas_on_offline_dirs.get(broker_id, ()):
            return False
        if include_shutting_down:
            return broker_id in self.live_brokers
        return broker_id in self.live_brokers and broker_id not in self.shutting_down_broker_ids

    def live_replica_brokers(self, tp: TopicPartition, brokers: set[int]) -> set[int]:
        """``brokers`` without those whose replica of ``tp`` sits in a failed log dir: who may lead it."""
        return {b for b in brokers if tp not in self.replicas_on_offline_dirs.get(b, ())}

    # -------------------------------------------------------------------------- topics and partitions

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        a = self.assignments.get(tp)
        return a.replicas if a is not None else ()

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp[0] == topic)

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, a in self.assignments.items() if broker_id in a.replicas)

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[tuple[TopicPartition, int]]:
        ids = set(broker_ids)
        return sorted((tp, r) for tp, a in self.assignments.items() for r in a.replicas if r in ids)

    def all_partitions(self) -> list[TopicPartition]:
        return sorted(self.assignments)

    def partitions_in_states(self, *states: PartitionState) -> list[TopicPartition]:
        s = set(states)
        return sorted(tp for tp, st in self.partition_states.items() if st in s)

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def replica_state(self, tp: TopicPartition, broker_id: int) -> ReplicaState:
        return self.replica_states.get((tp, broker_id), ReplicaState.NON_EXISTENT)

    def set_partition_state(self, tp: TopicPartition, state: PartitionState, *, check: bool = True) -> None:
        cur = self.partition_state(tp)
        if check and cur not in PARTITION_VALID_PREVIOUS[state]:
            raise IllegalStateTransition(f"partition {tp[0]}-{tp[1]}: {cur.value} -> {state.value}")
        if state is PartitionState.NON_EXISTENT:
            self.partition_states.pop(tp, None)
        else:
            self.partition_states[tp] = state

    def set_replica_state(self, tp: TopicPartition, broker_id: int, state: ReplicaState, *,
                          check: bool = True) -> None:
        cur = self.replica_state(tp, broker_id)
        if check and cur not in REPLICA_VALID_PREVIOUS[state]:
            raise IllegalStateTransition(f"replica {broker_id} of {tp[0]}-{tp[1]}: {cur.value} -> {state.value}")
        if state is ReplicaState.NON_EXISTENT:
            self.replica_states.pop((tp, broker_id), None)
        else:
            self.replica_states[(tp, broker_id)] = state

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    def remove_topic(self, topic: str) -> None:
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)
        for tp in self.partitions_for_topic(topic):
            self.assignments.pop(tp, None)
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
        for key in [k for k in self.replica_states if k[0][0] == topic]:
            del self.replica_states[key]
        self.topics_to_delete.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.topics_deletion_started.discard(topic)

    def offline_partition_count(self) -> int:
        return sum(1 for tp, st in self.partition_states.items()
                   if st is PartitionState.OFFLINE and tp[0] not in self.topics_to_delete)

    def preferred_replica_imbalance_count(self) -> int:
        n = 0
        for tp, a in self.assignments.items():
            st = self.leadership.get(tp)
            if a.replicas and st is not None and st.leader != a.replicas[0] and tp[0] not in self.topics_to_delete:
                n += 1
        return n
