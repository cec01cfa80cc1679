"""Leader election rules and the state tables, on fake inputs."""

from __future__ import annotations

import pytest

from controller import leader_election as le
from controller.context import ControllerContext, IllegalStateTransition, PartitionState, ReplicaState
from controller.zk_data import LEADER_RECOVERY_RECOVERING, LeaderIsrAndControllerEpoch

TP = ("t", 0)


def state(leader: int, isr: list[int], epoch: int = 5, zk_version: int = 7) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(leader=leader, leader_epoch=epoch, isr=tuple(isr), controller_epoch=1,
                                       zk_version=zk_version)


def test_offline_picks_first_live_isr_member_in_assignment_order() -> None:
    r = le.elect_offline(TP, state(1, [3, 2, 1]), [1, 2, 3], live={2, 3}, unclean_enabled=False)
    assert r.new_state is not None
    assert r.new_state.leader == 2  # assignment order, not ISR order
    assert list(r.new_state.isr) == [3, 2]  # dead members leave the ISR
    assert r.new_state.leader_epoch == 6 and r.new_state.zk_version == 7
    assert r.live_replicas == (2, 3) and not r.unclean


def test_offline_without_live_isr_member_is_offline_unless_unclean() -> None:
    s = state(1, [1])
    r = le.elect_offline(TP, s, [1, 2, 3], live={3}, unclean_enabled=False)
    assert r.new_state is None and r.live_replicas == (3,)
    u = le.elect_offline(TP, s, [1, 2, 3], live={3, 2}, unclean_enabled=True)
    assert u.unclean and u.new_state is not None
    assert u.new_state.leader == 2 and list(u.new_state.isr) == [2]
    assert u.new_state.leader_recovery_state == LEADER_RECOVERY_RECOVERING
    assert le.elect_offline(TP, s, [1, 2], live=set(), unclean_enabled=True).new_state is None


def test_preferred() -> None:
    assert le.elect_preferred(TP, state(2, [1, 2]), [1, 2], live={1, 2}).new_state.leader == 1
    assert le.elect_preferred(TP, state(2, [2]), [1, 2], live={1, 2}).new_state is None  # not in ISR
    assert le.elect_preferred(TP, state(2, [1, 2]), [1, 2], live={2}).new_state is None  # not alive
    r = le.elect_preferred(TP, state(2, [1, 2]), [1, 2], live={1, 2})
    assert list(r.new_state.isr) == [1, 2] and r.new_state.leader_epoch == 6


def test_controlled_shutdown() -> None:
    r = le.elect_controlled_shutdown(TP, state(1, [1, 2, 3]), [1, 2, 3], {1, 2, 3}, {1})
    assert r.new_state.leader == 2 and list(r.new_state.isr) == [2, 3]
    assert le.elect_controlled_shutdown(TP, state(1, [1]), [1, 2], {1, 2}, {1}).new_state is None
    r = le.elect_controlled_shutdown(TP, state(1, [1, 2, 3]), [1, 2, 3], {1, 2, 3}, {1, 2})
    assert r.new_state.leader == 3 and list(r.new_state.isr) == [3]


def test_reassignment() -> None:
    r = le.elect_for_reassignment(TP, state(1, [1, 2, 3, 4]), [4, 3], live={1, 2, 3, 4})
    assert r.new_state.leader == 4 and list(r.new_state.isr) == [1, 2, 3, 4]
    assert le.elect_for_reassignment(TP, state(1, [1, 2]), [4, 3], live={1, 2, 3, 4}).new_state is None


def test_remove_replica_from_isr() -> None:
    s = state(1, [1, 2, 3])
    f = le.remove_replica_from_isr(s, 2)
    assert (f.leader, list(f.isr), f.leader_epoch) == (1, [1, 3], 6)
    lead = le.remove_replica_from_isr(s, 1)
    assert (lead.leader, list(lead.isr)) == (-1, [2, 3])
    last = le.remove_replica_from_isr(state(1, [1]), 1)
    assert (last.leader, list(last.isr)) == (-1, [1])  # the last ISR member stays
    assert le.remove_replica_from_isr(s, 9) is None
    both = le.remove_replicas_from_isr(s, [2, 3])
    assert (both.leader, list(both.isr), both.leader_epoch) == (1, [1], 6)


def test_state_transitions_are_kafkas() -> None:
    ctx = ControllerContext()
    ctx.set_partition_state(TP, PartitionState.NEW)
    ctx.set_partition_state(TP, PartitionState.ONLINE)
    ctx.set_partition_state(TP, PartitionState.OFFLINE)
    ctx.set_partition_state(TP, PartitionState.ONLINE)
    with pytest.raises(IllegalStateTransition):
        ctx.set_partition_state(TP, PartitionState.NEW)
    with pytest.raises(IllegalStateTransition):
        ctx.set_partition_state(TP, PartitionState.NON_EXISTENT)
    ctx.set_partition_state(TP, PartitionState.OFFLINE)
    ctx.set_partition_state(TP, PartitionState.NON_EXISTENT)
    assert ctx.partition_state(TP) is PartitionState.NON_EXISTENT
    ctx.set_replica_state(TP, 1, ReplicaState.NEW)
    ctx.set_replica_state(TP, 1, ReplicaState.ONLINE)
    with pytest.raises(IllegalStateTransition):
        ctx.set_replica_state(TP, 1, ReplicaState.DELETION_STARTED)
    ctx.set_replica_state(TP, 1, ReplicaState.OFFLINE)
    ctx.set_replica_state(TP, 1, ReplicaState.DELETION_STARTED)
    ctx.set_replica_state(TP, 1, ReplicaState.DELETION_SUCCESSFUL)
    ctx.set_replica_state(TP, 1, ReplicaState.NON_EXISTENT)


def test_context_queries() -> None:
    from controller.zk_data import BrokerRegistration, EndPoint, ReplicaAssignment
    ctx = ControllerContext()
    for b in (1, 2, 3):
        ctx.live_brokers[b] = BrokerRegistration(b, (EndPoint("h", 9000 + b),), broker_epoch=100 + b)
    ctx.shutting_down_broker_ids.add(3)
    ctx.assignments[("a", 0)] = ReplicaAssignment((1, 2))
    ctx.assignments[("a", 1)] = ReplicaAssignment((2, 3))
    ctx.leadership[("a", 0)] = state(2, [1, 2])
    assert ctx.live_broker_ids == {1, 2} and ctx.live_or_shutting_down_broker_ids == {1, 2, 3}
    assert ctx.partitions_on_broker(3) == [("a", 1)]
    assert ctx.replicas_on_brokers([1]) == [(("a", 0), 1)]
    assert ctx.broker_epoch(2) == 102 and ctx.broker_epoch(9) == -1
    assert not ctx.is_replica_online(3) and ctx.is_replica_online(3, include_shutting_down=True)
    assert ctx.preferred_replica_imbalance_count() == 1
    ctx.remove_topic("a")
    assert not ctx.assignments and not ctx.leadership
