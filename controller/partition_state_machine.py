"""The partition and replica state machines of the ZooKeeper-mode controller (Kafka's
``PartitionStateMachine`` and ``ReplicaStateMachine``, with their leader election step).

Partitions move New/Offline -> Online by electing a leader (``controller/leader_election.py``:
offline, reassignment, preferred, controlled-shutdown and, where enabled, unclean elections) and
writing the partition state znode with a conditional update fenced by the controller epoch; the
replicas are then told with LeaderAndIsr and every broker with UpdateMetadata, through the
controller's request batch. Replicas that go offline are removed from their partitions' ISRs the
same way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kazoo.exceptions import NodeExistsError

from config.registry import parse_value
from controller import leader_election as le
from controller import zk_data as zd
from controller.context import PartitionState, ReplicaState
from controller.zk_client import ControllerMovedError
from controller.zk_data import LeaderIsrAndControllerEpoch
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from controller.controller import KafkaController, TopicPartition

# The controller's loggers: these steps are part of the controller's story in the broker log.
log = logging.getLogger("controller.controller")
state_change_log = logging.getLogger("kafkette.state.change")



class PartitionStateMachine:
    """Elections and state changes of partitions and replicas, on the active controller's event loop."""

    def __init__(self, controller: KafkaController) -> None:
        self._ctl = controller

    # -- Partition and replica state machines ------------------------------------------------------

    def unclean_enabled(self, topic_config: dict[str, str]) -> bool:
        # A topic override (a string from its ZooKeeper config node) wins over the broker's value.
        v = topic_config.get("unclean.leader.election.enable")
        if v is None:
            return bool(self._ctl.config("unclean.leader.election.enable"))
        return bool(parse_value("unclean.leader.election.enable", v))

    async def trigger_online_partition_state_change(self, partitions: Iterable[TopicPartition] | None = None,
                                                     *, force_unclean: bool = False) -> dict[TopicPartition, int]:
        """Move New/Offline partitions (not being deleted) online. Returns failures: partition -> error."""
        ctx = self._ctl.context
        if partitions is None:
            candidates = [tp for tp in ctx.partitions_in_states(PartitionState.NEW, PartitionState.OFFLINE)
                          if not ctx.is_topic_queued_for_deletion(tp[0])]
        else:
            candidates = [tp for tp in partitions
                          if ctx.partition_state(tp) in (PartitionState.NEW, PartitionState.OFFLINE)]
        if not candidates:
            return {}
        new = [tp for tp in candidates if tp not in ctx.leadership]
        offline = [tp for tp in candidates if tp in ctx.leadership]
        failures: dict[TopicPartition, int] = {}
        if new:
            failures.update(await self.initialize_leader_and_isr(new))
        if offline:
            ok, failed = await self.elect_leaders(offline, "offline", force_unclean=force_unclean)
            for tp in ok:
                ctx.set_partition_state(tp, PartitionState.ONLINE, check=False)
            for tp, code in failed.items():
                ctx.set_partition_state(tp, PartitionState.OFFLINE, check=False)
                failures[tp] = code
        return failures

    async def initialize_leader_and_isr(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """New -> Online: the first live assigned replica leads, the live replicas form the ISR."""
        ctx = self._ctl.context
        to_create: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        failures: dict[TopicPartition, int] = {}
        for tp in partitions:
            live = [r for r in ctx.replicas(tp) if ctx.is_replica_online(r, tp)]
            if not live:
                state_change_log.error("controller %d epoch %d failed to make %s-%d online: none of the assigned "
                                       "replicas %s is alive", self._ctl.broker_id, ctx.epoch, tp[0], tp[1], ctx.replicas(tp))
                failures[tp] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                continue
            to_create[tp] = LeaderIsrAndControllerEpoch(leader=live[0], leader_epoch=zd.INITIAL_LEADER_EPOCH,
                                                        isr=tuple(live), controller_epoch=ctx.epoch, zk_version=0)
        if not to_create:
            return failures
        results = await self._ctl._zk(self._ctl.zk.create_partition_states, to_create, ctx.epoch_zk_version)
        existing: list[TopicPartition] = []
        for tp, r in results.items():
            if isinstance(r, NodeExistsError):
                existing.append(tp)
            elif isinstance(r, Exception):
                state_change_log.error("controller %d: creating state of %s-%d failed: %r", self._ctl.broker_id, tp[0],
                                       tp[1], r)
                failures[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
            else:
                ctx.leadership[tp] = r
                ctx.set_partition_state(tp, PartitionState.ONLINE, check=False)
                live = [x for x in ctx.replicas(tp) if ctx.is_replica_online(x, tp)]
                self._ctl._add_leader_and_isr(live, tp, is_new=True)
                self._ctl.stats.leader_elections += 1
        if existing:
            # A previous controller got this far already: take the state found and elect if needed.
            states = await self._ctl._zk(self._ctl.zk.get_partition_states, existing)
            for tp in existing:
                st = states.get(tp)
                if st is None:
                    failures[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
                    continue
                ctx.leadership[tp] = st
                ctx.set_partition_state(tp, PartitionState.OFFLINE, check=False)
            failures.update(await self.trigger_online_partition_state_change(
                [tp for tp in existing if tp in ctx.leadership]))
        return failures

    async def elect_leaders(self, partitions: list[TopicPartition], strategy: str, *,
                             force_unclean: bool = False) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch],
                                                                   dict[TopicPartition, int]]:
        """Elect with ``strategy`` ('offline', 'preferred', 'controlled_shutdown', 'reassign'): read the
        current states, compute, write conditionally (retrying partitions whose znode moved), then
        queue LeaderAndIsr for the live replicas. Returns (new states, failures -> error code)."""
        ctx = self._ctl.context
        done: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        failed: dict[TopicPartition, int] = {}
        remaining = list(partitions)
        topic_configs: dict[str, dict[str, str]] = {}
        if strategy == "offline" and not force_unclean:
            topic_configs = await self._ctl._zk(self._ctl.zk.get_topic_configs, sorted({t for t, _ in remaining}))
        attempts = 0
        while remaining:
            attempts += 1
            if attempts > 20:
                for tp in remaining:
                    failed[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
                break
            states = await self._ctl._zk(self._ctl.zk.get_partition_states, remaining)
            to_write: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
            results: dict[TopicPartition, le.ElectionResult] = {}
            for tp in remaining:
                st = states.get(tp)
                if st is None:
                    failed[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if st.controller_epoch > ctx.epoch:
                    raise ControllerMovedError(f"partition {tp} was written by controller epoch "
                                               f"{st.controller_epoch} > {ctx.epoch}")
                ctx.leadership[tp] = st
                assignment = ctx.replicas(tp)
                if strategy == "offline":
                    unclean = force_unclean or self.unclean_enabled(topic_configs.get(tp[0], {}))
                    res = le.elect_offline(tp, st, assignment, ctx.live_replica_brokers(tp, ctx.live_broker_ids), unclean)
                elif strategy == "preferred":
                    res = le.elect_preferred(tp, st, assignment, ctx.live_replica_brokers(tp, ctx.live_broker_ids))
                elif strategy == "controlled_shutdown":
                    res = le.elect_controlled_shutdown(
                        tp, st, assignment, ctx.live_replica_brokers(tp, ctx.live_or_shutting_down_broker_ids),
                        ctx.shutting_down_broker_ids)
                elif strategy == "reassign":
                    target = ctx.assignments[tp].target_replicas
                    res = le.elect_for_reassignment(tp, st, target, ctx.live_replica_brokers(tp, ctx.live_broker_ids))
                else:
                    raise ValueError(strategy)
                if res.new_state is None:
                    failed[tp] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if strategy == "preferred"
                                  else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
                    if strategy == "offline":
                        state_change_log.error(
                            "controller %d epoch %d: no leader for %s-%d: no live replica in ISR %s (assignment %s)%s",
                            self._ctl.broker_id, ctx.epoch, tp[0], tp[1], list(st.isr), list(assignment),
                            "" if self.unclean_enabled(topic_configs.get(tp[0], {})) or force_unclean
                            else " and unclean leader election is disabled")
                    continue
                results[tp] = res
                to_write[tp] = res.new_state.with_controller_epoch(ctx.epoch)
            if not to_write:
                break
            upd = await self._ctl._zk(self._ctl.zk.update_partition_states, to_write, ctx.epoch_zk_version)
            for tp, new_state in upd.finished.items():
                res = results[tp]
                ctx.leadership[tp] = new_state
                done[tp] = new_state
                self._ctl.stats.leader_elections += 1
                if res.unclean:
                    self._ctl.stats.unclean_leader_elections += 1
                    log.warning("controller %d: UNCLEAN leader election for %s-%d: replica %d, not in ISR %s, "
                                "leads now (leader epoch %d); records acknowledged by the old ISR may be lost",
                                self._ctl.broker_id, tp[0], tp[1], new_state.leader, list(states[tp].isr),
                                new_state.leader_epoch)
                state_change_log.info("controller %d epoch %d elected leader %d for %s-%d (%s): leader epoch %d, "
                                      "ISR %s, partition epoch %d", self._ctl.broker_id, ctx.epoch, new_state.leader,
                                      tp[0], tp[1], strategy, new_state.leader_epoch, list(new_state.isr),
                                      new_state.zk_version)
                recipients = [r for r in res.live_replicas if r in ctx.live_brokers]
                self._ctl._add_leader_and_isr(recipients, tp)
            for tp, e in upd.failed.items():
                log.error("controller %d: writing the state of %s-%d failed: %r", self._ctl.broker_id, tp[0], tp[1], e)
                failed[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
            if upd.to_retry:
                self._ctl.stats.zk_write_conflicts += len(upd.to_retry)
            remaining = list(upd.to_retry)
        return done, failed

    async def remove_replicas_from_isr(self, replicas: list[tuple[TopicPartition, int]]) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """OfflineReplica: take each replica out of its partition's ISR (conditional writes, retried)."""
        ctx = self._ctl.context
        by_tp: dict[TopicPartition, list[int]] = {}
        for tp, r in replicas:
            by_tp.setdefault(tp, []).append(r)
        done: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = list(by_tp)
        for _ in range(20):
            if not remaining:
                break
            states = await self._ctl._zk(self._ctl.zk.get_partition_states, remaining)
            to_write: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
            for tp in remaining:
                st = states.get(tp)
                if st is None:
                    continue
                if st.controller_epoch > ctx.epoch:
                    raise ControllerMovedError(f"partition {tp} written by a newer controller")
                ctx.leadership[tp] = st
                new = le.remove_replicas_from_isr(st, by_tp[tp])
                if new is not None:
                    to_write[tp] = new.with_controller_epoch(ctx.epoch)
            if not to_write:
                break
            upd = await self._ctl._zk(self._ctl.zk.update_partition_states, to_write, ctx.epoch_zk_version)
            for tp, st in upd.finished.items():
                ctx.leadership[tp] = st
                done[tp] = st
                state_change_log.info("controller %d epoch %d removed %s from the ISR of %s-%d: leader %d, ISR %s, "
                                      "leader epoch %d", self._ctl.broker_id, ctx.epoch, by_tp[tp], tp[0], tp[1], st.leader,
                                      list(st.isr), st.leader_epoch)
            for tp, e in upd.failed.items():
                log.error("controller %d: shrinking the ISR of %s-%d failed: %r", self._ctl.broker_id, tp[0], tp[1], e)
            remaining = list(upd.to_retry)
        return done

    async def offline_replicas(self, replicas: list[tuple[TopicPartition, int]]) -> None:
        """Replica state machine -> OfflineReplica."""
        ctx = self._ctl.context
        if not replicas:
            return
        for tp, r in replicas:
            self._ctl._add_stop_replica([r], tp, False)
        updated = await self.remove_replicas_from_isr(replicas)
        offline_of: dict[TopicPartition, set[int]] = {}
        for tp, r in replicas:
            offline_of.setdefault(tp, set()).add(r)
            ctx.set_replica_state(tp, r, ReplicaState.OFFLINE, check=False)
        for tp in updated:
            if ctx.is_topic_queued_for_deletion(tp[0]):
                continue
            recipients = [r for r in ctx.replicas(tp) if r not in offline_of[tp] and r in ctx.live_brokers]
            self._ctl._add_leader_and_isr(recipients, tp)

    async def on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        ctx = self._ctl.context
        for tp in partitions:
            ctx.set_partition_state(tp, PartitionState.NEW, check=False)
            for r in ctx.replicas(tp):
                ctx.set_replica_state(tp, r, ReplicaState.NEW, check=False)
        await self.initialize_leader_and_isr(sorted(partitions))
        for tp in partitions:
            for r in ctx.replicas(tp):
                if ctx.is_replica_online(r, tp, include_shutting_down=True):
                    ctx.set_replica_state(tp, r, ReplicaState.ONLINE, check=False)
