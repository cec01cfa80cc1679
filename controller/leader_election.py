"""Partition leader election rules (Kafka's ``Election`` and ``PartitionLeaderElectionAlgorithms``).

Pure functions over a partition's assignment, its current leader/ISR and which replicas are alive:

- offline (new or leaderless partitions, broker failure): the first replica, in assignment order, that
  is alive and in the ISR. With unclean election enabled and none such: the first live replica, which
  leads in the RECOVERING state with an ISR of just itself. Otherwise no leader.
- reassignment: the first live ISR member among the target replicas.
- preferred: the first assigned replica, if it is alive and in the ISR.
- controlled shutdown: the first live ISR member that is not shutting down; the shutting-down
  brokers leave the ISR.

Every new leader/ISR bumps the leader epoch by one. ``remove_replica_from_isr`` is the replica state
machine's OfflineReplica step: a dead or stopping follower leaves the ISR (but the last ISR member
stays), and a dead leader leaves the partition leaderless (-1).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from controller.zk_data import NO_LEADER, LeaderIsrAndControllerEpoch

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ElectionResult:
    partition: TopicPartition
    new_state: LeaderIsrAndControllerEpoch | None  # None: no eligible leader
    live_replicas: tuple[int, ...]  # who gets the LeaderAndIsr request
    unclean: bool = False


def offline_partition_leader(assignment: Sequence[int], isr: Collection[int], live: Collection[int],
                             unclean_enabled: bool) -> tuple[int | None, bool]:
    """(leader or None, whether the choice was unclean)."""
    for r in assignment:
        if r in live and r in isr:
            return r, False
    if unclean_enabled:
        for r in assignment:
            if r in live:
                return r, True
    return None, False


def reassign_partition_leader(target_replicas: Sequence[int], isr: Collection[int], live: Collection[int]) -> int | None:
    for r in target_replicas:
        if r in live and r in isr:
            return r
    return None


def preferred_replica_leader(assignment: Sequence[int], isr: Collection[int], live: Collection[int]) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Collection[int], live: Collection[int],
                               shutting_down: Collection[int]) -> int | None:
    for r in assignment:
        if r in live and r in isr and r not in shutting_down:
            return r
    return None


def elect_offline(partition: TopicPartition, state: LeaderIsrAndControllerEpoch, assignment: Sequence[int],
                  live: Collection[int], unclean_enabled: bool) -> ElectionResult:
    live_replicas = tuple(r for r in assignment if r in live)
    leader, unclean = offline_partition_leader(assignment, state.isr, live, unclean_enabled)
    if leader is None:
        return ElectionResult(partition, None, live_replicas)
    if leader in state.isr:
        new_isr = [r for r in state.isr if r in live]
        return ElectionResult(partition, state.new_leader_and_isr(leader, new_isr), live_replicas)
    return ElectionResult(partition, state.new_recovering_leader_and_isr(leader, [leader]), live_replicas, unclean)


def elect_for_reassignment(partition: TopicPartition, state: LeaderIsrAndControllerEpoch,
                           target_replicas: Sequence[int], live: Collection[int]) -> ElectionResult:
    leader = reassign_partition_leader(target_replicas, state.isr, live)
    return ElectionResult(partition, state.new_leader(leader) if leader is not None else None,
                          tuple(target_replicas))


def elect_preferred(partition: TopicPartition, state: LeaderIsrAndControllerEpoch, assignment: Sequence[int],
                    live: Collection[int]) -> ElectionResult:
    leader = preferred_replica_leader(assignment, state.isr, live)
    return ElectionResult(partition, state.new_leader(leader) if leader is not None else None, tuple(assignment))


def elect_controlled_shutdown(partition: TopicPartition, state: LeaderIsrAndControllerEpoch,
                              assignment: Sequence[int], live_or_shutting_down: Collection[int],
                              shutting_down: Collection[int]) -> ElectionResult:
    live_replicas = tuple(r for r in assignment if r in live_or_shutting_down)
    leader = controlled_shutdown_leader(assignment, state.isr, live_or_shutting_down, shutting_down)
    if leader is None:
        return ElectionResult(partition, None, live_replicas)
    new_isr = [r for r in state.isr if r not in shutting_down]
    return ElectionResult(partition, state.new_leader_and_isr(leader, new_isr), live_replicas)


def remove_replica_from_isr(state: LeaderIsrAndControllerEpoch, replica: int) -> LeaderIsrAndControllerEpoch | None:
    """The new state with ``replica`` out of the ISR, or None when nothing changes.

    A leader that goes offline leaves the partition with no leader; the ISR never becomes empty (the
    last member stays, so a clean election can still pick it when it comes back).
    """
    if replica not in state.isr:
        return None
    new_leader = NO_LEADER if replica == state.leader else state.leader
    new_isr = list(state.isr) if len(state.isr) == 1 else [r for r in state.isr if r != replica]
    return state.new_leader_and_isr(new_leader, new_isr)


def remove_replicas_from_isr(state: LeaderIsrAndControllerEpoch,
                             replicas: Collection[int]) -> LeaderIsrAndControllerEpoch | None:
    """``remove_replica_from_isr`` for several replicas at once (one leader-epoch bump)."""
    gone = [r for r in replicas if r in state.isr]
    if not gone:
        return None
    leader = NO_LEADER if state.leader in gone else state.leader
    isr = list(state.isr)
    for r in gone:
        if len(isr) > 1:
            isr.remove(r)
    return state.new_leader_and_isr(leader, isr)
