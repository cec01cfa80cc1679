"""Partition reassignment (the reassignment part of Kafka's ``KafkaController``, KIP-455).

Reassignments come from AlterPartitionReassignments or from the ``/admin/reassign_partitions``
znode. For each partition the assignment becomes origin + target, with the new replicas *adding*
and the dropped ones *removing*, written to the topic znode; the leader epoch is bumped so every
replica learns (LeaderAndIsr). Once every target replica is in the ISR the leader moves into the
target set if it is not there already, the removed replicas are stopped and deleted, and the
assignment becomes the target. Cancelling (a null target) reassigns back to the origin replicas.

It runs inside the controller's event loop and reaches ZooKeeper, the request batch, the leader
election and the context through its ``KafkaController``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from controller import zk_data as zd
from controller.context import ReplicaState
from controller.zk_client import ControllerMovedError
from controller.zk_data import ReplicaAssignment
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type
from protocol.schema import Struct

if TYPE_CHECKING:
    from controller.controller import KafkaController, TopicPartition

# The controller's logger: reassignment is part of the controller's story in the broker log.
log = logging.getLogger("controller.controller")


class ReassignmentManager:
    """Ongoing partition reassignments of the active controller."""

    def __init__(self, controller: KafkaController) -> None:
        self._ctl = controller

    async def alter_partition_reassignments(
            self, reassignments: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, tuple[int, str | None]]:
        """Start (target replica list) or cancel (None) reassignments. Per partition: (error, message).

        Kafka's protocol: the assignment becomes origin + target with the new replicas *adding* and
        the dropped ones *removing*; the leader epoch is bumped so every replica learns; once every
        target replica is in the ISR the leader moves into the target set if needed, the removed
        replicas are stopped and deleted and the assignment becomes the target.
        """
        if not self._ctl._active or self._ctl.loop is None:
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in reassignments}
        fut = self._ctl._enqueue("reassign", dict(reassignments), want_result=True)
        assert fut is not None
        try:
            return await fut
        except ControllerMovedError:
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in reassignments}

    async def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, ReplicaAssignment]:
        if not self._ctl._active or self._ctl.loop is None:
            return {}
        fut = self._ctl._enqueue("list_reassignments", None if partitions is None else list(partitions), want_result=True)
        assert fut is not None
        return await fut

    def list_reassignments(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        ctx = self._ctl.context
        tps = ctx.partitions_being_reassigned if partitions is None else set(partitions)
        return {tp: ctx.assignments[tp] for tp in sorted(tps)
                if tp in ctx.assignments and ctx.assignments[tp].is_being_reassigned}

    async def handle_alter_partition_reassignments(self, request: Struct) -> Struct:
        """AlterPartitionReassignments request body -> response body."""
        resp_t = response_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
        if not self._ctl._active:
            return resp_t(error_code=ErrorCode.NOT_CONTROLLER, error_message="This is not the correct controller for this cluster.")
        wanted: dict[TopicPartition, list[int] | None] = {}
        for t in request.topics:
            for p in t.partitions:
                wanted[(t.name, p.partition_index)] = None if p.replicas is None else list(p.replicas)
        results = await self.alter_partition_reassignments(wanted)
        by_topic: dict[str, list[Struct]] = {}
        for (t, p), (code, msg) in results.items():
            by_topic.setdefault(t, []).append(resp_t.ReassignablePartitionResponse(
                partition_index=p, error_code=code, error_message=msg))
        return resp_t(error_code=ErrorCode.NONE, responses=[
            resp_t.ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])

    async def handle_list_partition_reassignments(self, request: Struct) -> Struct:
        resp_t = response_type(ApiKey.LIST_PARTITION_REASSIGNMENTS)
        if not self._ctl._active:
            return resp_t(error_code=ErrorCode.NOT_CONTROLLER, error_message="This is not the correct controller for this cluster.")
        tps = None if request.topics is None else [(t.name, p) for t in request.topics for p in t.partition_indexes]
        found = await self.list_partition_reassignments(tps)
        by_topic: dict[str, list[Struct]] = {}
        for (t, p), a in found.items():
            by_topic.setdefault(t, []).append(resp_t.OngoingPartitionReassignment(
                partition_index=p, replicas=list(a.replicas), adding_replicas=list(a.adding_replicas),
                removing_replicas=list(a.removing_replicas)))
        return resp_t(error_code=ErrorCode.NONE, topics=[
            resp_t.OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])

    async def process_reassign_znode(self) -> None:
        ctx = self._ctl.context
        wanted = await self._ctl._zk(self._ctl.zk.get_partition_reassignment, self._ctl._watcher("reassign_znode"))
        if not wanted:
            return
        todo = {tp: reps for tp, reps in wanted.items()
                if not (tp in ctx.assignments and ctx.assignments[tp].is_being_reassigned
                        and list(ctx.assignments[tp].target_replicas) == list(reps))}
        if todo:
            results = await self.process_reassignments(dict(todo.items()), from_znode=True)
            failed = [tp for tp, (code, _) in results.items() if code != ErrorCode.NONE]
            if failed:
                log.warning("controller %d: dropping invalid reassignments from %s: %s", self._ctl.broker_id,
                            zd.REASSIGN_PARTITIONS_PATH, {tp: results[tp] for tp in failed})
                await self._remove_from_reassign_znode(failed)

    async def _remove_from_reassign_znode(self, done: list[TopicPartition]) -> None:
        ctx = self._ctl.context
        cur = await self._ctl._zk(self._ctl.zk.get_partition_reassignment)
        if not cur or not any(tp in cur for tp in done):
            return
        left = {tp: reps for tp, reps in cur.items() if tp not in done}
        if left:
            def rewrite() -> None:
                self._ctl.zk._checked_write(ctx.epoch_zk_version, "set", zd.REASSIGN_PARTITIONS_PATH,
                                       zd.encode_reassignment(left))
            await self._ctl._zk(rewrite)
        else:
            await self._ctl._zk(self._ctl.zk.delete_partition_reassignment, ctx.epoch_zk_version)

    async def process_reassignments(self, wanted: dict[TopicPartition, list[int] | None], *,
                                     from_znode: bool) -> dict[TopicPartition, tuple[int, str | None]]:
        ctx = self._ctl.context
        if not self._ctl._active:
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in wanted}
        out: dict[TopicPartition, tuple[int, str | None]] = {}
        for tp, target in sorted(wanted.items()):
            cur = ctx.assignments.get(tp)
            if cur is None or ctx.is_topic_queued_for_deletion(tp[0]):
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist or is being deleted.")
                continue
            if target is None:
                if not cur.is_being_reassigned:
                    out[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress.")
                    continue
                target = list(cur.origin_replicas)
            if not target or len(set(target)) != len(target):
                out[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid target replicas {target}.")
                continue
            unknown = [r for r in target if r not in ctx.live_brokers]
            if unknown:
                out[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Brokers {unknown} are not alive.")
                continue
            if tp not in ctx.leadership:
                out[tp] = (ErrorCode.LEADER_NOT_AVAILABLE, "The partition has no state yet.")
                continue
            await self._start_reassignment(tp, target)
            out[tp] = (ErrorCode.NONE, None)
        return out

    async def _write_topic_assignment(self, topic: str) -> None:
        ctx = self._ctl.context
        parts = {tp[1]: ctx.assignments[tp] for tp in ctx.partitions_for_topic(topic)}
        await self._ctl._zk(self._ctl.zk.set_topic_assignment, topic, ctx.topic_ids.get(topic), parts, ctx.epoch_zk_version)

    async def _bump_leader_epoch(self, tp: TopicPartition, recipients: Iterable[int]) -> None:
        """Rewrite the partition state with leader epoch + 1 so every replica sees the new assignment."""
        ctx = self._ctl.context
        for _ in range(20):
            st = (await self._ctl._zk(self._ctl.zk.get_partition_states, [tp])).get(tp)
            if st is None:
                return
            if st.controller_epoch > ctx.epoch:
                raise ControllerMovedError(f"partition {tp} written by a newer controller")
            upd = await self._ctl._zk(self._ctl.zk.update_partition_states, {tp: st.new_epoch().with_controller_epoch(ctx.epoch)},
                                 ctx.epoch_zk_version)
            if tp in upd.finished:
                ctx.leadership[tp] = upd.finished[tp]
                self._ctl._add_leader_and_isr([r for r in recipients if r in ctx.live_brokers], tp)
                return
            if upd.failed:
                return

    async def _start_reassignment(self, tp: TopicPartition, target: list[int]) -> None:
        ctx = self._ctl.context
        cur = ctx.assignments[tp]
        origin = list(cur.origin_replicas)
        full = list(dict.fromkeys(target + origin))
        new = ReplicaAssignment(tuple(full), tuple(r for r in target if r not in origin),
                                tuple(r for r in origin if r not in target))
        # Replicas an earlier, unfinished reassignment was adding and that are no longer wanted.
        dropped = [r for r in cur.adding_replicas if r not in full]
        log.info("controller %d: reassigning %s-%d from %s to %s", self._ctl.broker_id, tp[0], tp[1], origin, target)
        if not new.is_being_reassigned:
            ctx.assignments[tp] = ReplicaAssignment(tuple(target))
            ctx.partitions_being_reassigned.discard(tp)
            await self._write_topic_assignment(tp[0])
        else:
            ctx.assignments[tp] = new
            ctx.partitions_being_reassigned.add(tp)
            await self._write_topic_assignment(tp[0])
            for r in new.adding_replicas:
                ctx.set_replica_state(tp, r, ReplicaState.ONLINE, check=False)
            await self._bump_leader_epoch(tp, new.replicas)
        if dropped:
            await self._ctl.partition_state_machine.offline_replicas([(tp, r) for r in dropped])
            for r in dropped:
                self._ctl._add_stop_replica([r], tp, True)
                ctx.set_replica_state(tp, r, ReplicaState.NON_EXISTENT, check=False)
        await self.maybe_complete_reassignment(tp)

    async def maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        ctx = self._ctl.context
        a = ctx.assignments.get(tp)
        st = ctx.leadership.get(tp)
        if a is None or st is None:
            return
        target = a.target_replicas
        if a.is_being_reassigned and not set(target) <= set(st.isr):
            return  # still waiting for the new replicas to catch up
        removing = list(a.removing_replicas)
        final = ReplicaAssignment(tuple(target))
        if st.leader not in target or st.leader not in ctx.live_broker_ids:
            ok, failed = await self._ctl.partition_state_machine.elect_leaders([tp], "reassign")
            if failed:
                log.warning("controller %d: reassignment of %s-%d waits: no target replica can lead yet",
                            self._ctl.broker_id, tp[0], tp[1])
                return
        else:
            await self._bump_leader_epoch(tp, target)
        ctx.assignments[tp] = final
        if removing:
            await self._ctl.partition_state_machine.offline_replicas([(tp, r) for r in removing])
            for r in removing:
                self._ctl._add_stop_replica([r], tp, True)
                ctx.set_replica_state(tp, r, ReplicaState.NON_EXISTENT, check=False)
        await self._write_topic_assignment(tp[0])
        ctx.partitions_being_reassigned.discard(tp)
        self._ctl._add_update_metadata(ctx.live_or_shutting_down_broker_ids, [tp])
        await self._remove_from_reassign_znode([tp])
        log.info("controller %d: reassignment of %s-%d to %s is complete", self._ctl.broker_id, tp[0], tp[1], list(target))
