"""AlterPartition (KIP-497): ISR changes proposed by partition leaders, as the controller applies them.

Each proposal is checked against the leader's broker epoch, the partition's leader epoch and its
partition epoch (the state znode's version) before anything is written. An accepted change is
written to the state znode with a conditional update and answered with the new state; a rejected
one changes nothing and gets Kafka's error for the check that failed.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from controller import zk_data as zd
from controller.zk_client import ControllerMovedError
from controller.zk_data import LeaderIsrAndControllerEpoch
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import new_response, response_type
from protocol.schema import Struct

if TYPE_CHECKING:
    from controller.controller import KafkaController, TopicPartition

# The controller's loggers: these steps are part of the controller's story in the broker log.
log = logging.getLogger("controller.controller")
state_change_log = logging.getLogger("kafkette.state.change")



class AlterPartitionHandler:
    """The controller's side of AlterPartition, run as events on its loop."""

    def __init__(self, controller: KafkaController) -> None:
        self._ctl = controller

    # -- AlterPartition ----------------------------------------------------------------------------

    async def handle_alter_partition(self, request: Struct) -> Struct:
        """AlterPartition from a partition leader -> response body (for the broker's request handler)."""
        if not self._ctl._active or self._ctl.loop is None:
            return new_response(ApiKey.ALTER_PARTITION, error_code=ErrorCode.NOT_CONTROLLER)
        fut = self._ctl._enqueue("alter_partition", request, want_result=True)
        assert fut is not None
        try:
            return await fut
        except ControllerMovedError:
            return new_response(ApiKey.ALTER_PARTITION, error_code=ErrorCode.NOT_CONTROLLER)

    async def process_alter_partition(self, req: Struct) -> Struct:
        ctx = self._ctl.context
        resp_t = response_type(ApiKey.ALTER_PARTITION)
        if not self._ctl._active:
            return resp_t(error_code=ErrorCode.NOT_CONTROLLER)
        self._ctl.stats.alter_partition_requests += 1
        broker_id = req.broker_id
        reg = ctx.live_brokers.get(broker_id)
        # The sender's own epoch must be its current one, -1 included (Kafka's ZooKeeper controller; -1
        # is only "unknown" for the ISR members' epochs below, KIP-903).
        if reg is None or req.broker_epoch != reg.broker_epoch:
            return resp_t(error_code=ErrorCode.STALE_BROKER_EPOCH)
        names = {tid: t for t, tid in ctx.topic_ids.items()}
        results: dict[TopicPartition, tuple[int, LeaderIsrAndControllerEpoch | None]] = {}
        order: list[tuple[uuid.UUID, list[tuple[int, TopicPartition | None]]]] = []
        to_write: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for topic in req.topics:
            topic_name = names.get(topic.topic_id)
            rows: list[tuple[int, TopicPartition | None]] = []
            order.append((topic.topic_id, rows))
            for p in topic.partitions:
                if topic_name is None:
                    rows.append((p.partition_index, None))
                    continue
                tp = (topic_name, p.partition_index)
                rows.append((p.partition_index, tp))
                cur = ctx.leadership.get(tp)
                if cur is None or tp not in ctx.assignments:
                    results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                    continue
                new_isr = tuple(b.broker_id for b in p.new_isr_with_epochs)
                proposed = LeaderIsrAndControllerEpoch(leader=cur.leader, leader_epoch=p.leader_epoch, isr=new_isr,
                                                       leader_recovery_state=p.leader_recovery_state,
                                                       controller_epoch=ctx.epoch, zk_version=p.partition_epoch)
                if p.partition_epoch > cur.zk_version or p.leader_epoch > cur.leader_epoch:
                    # The leader knows newer state than we do: we are likely not the controller any more.
                    results[tp] = (ErrorCode.NOT_CONTROLLER, None)
                elif p.leader_epoch < cur.leader_epoch:
                    results[tp] = (ErrorCode.FENCED_LEADER_EPOCH, None)
                elif proposed.same_state(cur):
                    results[tp] = (ErrorCode.NONE, cur)  # already there (idempotent retry)
                elif p.partition_epoch < cur.zk_version:
                    results[tp] = (ErrorCode.INVALID_UPDATE_VERSION, None)
                elif p.leader_recovery_state == zd.LEADER_RECOVERY_RECOVERING and len(new_isr) > 1:
                    results[tp] = (ErrorCode.INVALID_REQUEST, None)
                elif (cur.leader_recovery_state == zd.LEADER_RECOVERY_RECOVERED
                      and p.leader_recovery_state == zd.LEADER_RECOVERY_RECOVERING):
                    results[tp] = (ErrorCode.INVALID_REQUEST, None)
                elif not new_isr or cur.leader not in new_isr:
                    results[tp] = (ErrorCode.INVALID_REQUEST, None)
                else:
                    live = ctx.live_broker_ids
                    ineligible = [b for b in p.new_isr_with_epochs
                                  if b.broker_id not in live
                                  or (b.broker_epoch != -1 and b.broker_epoch != ctx.broker_epoch(b.broker_id))]
                    if ineligible:
                        log.info("controller %d: rejecting ISR %s for %s-%d: replicas %s are not eligible",
                                 self._ctl.broker_id, list(new_isr), tp[0], tp[1], [b.broker_id for b in ineligible])
                        results[tp] = (ErrorCode.INELIGIBLE_REPLICA, None)
                    else:
                        to_write[tp] = proposed
        if to_write:
            upd = await self._ctl._zk(self._ctl.zk.update_partition_states, to_write, ctx.epoch_zk_version)
            for tp, st in upd.finished.items():
                ctx.leadership[tp] = st
                results[tp] = (ErrorCode.NONE, st)
                state_change_log.info("controller %d epoch %d: ISR of %s-%d is now %s (leader %d, leader epoch %d, "
                                      "partition epoch %d)", self._ctl.broker_id, ctx.epoch, tp[0], tp[1], list(st.isr),
                                      st.leader, st.leader_epoch, st.zk_version)
            for tp in upd.to_retry:
                results[tp] = (ErrorCode.INVALID_UPDATE_VERSION, None)
            for tp, e in upd.failed.items():
                log.error("controller %d: AlterPartition write for %s-%d failed: %r", self._ctl.broker_id, tp[0], tp[1], e)
                results[tp] = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
            if upd.finished:
                self._ctl._add_update_metadata(ctx.live_or_shutting_down_broker_ids, list(upd.finished))
                for tp in sorted(upd.finished):
                    if tp in ctx.partitions_being_reassigned:
                        await self._ctl.reassignments.maybe_complete_reassignment(tp)
        topics_out = []
        for topic_id, rows in order:
            parts = []
            for pidx, row_tp in rows:
                if row_tp is None:
                    parts.append(resp_t.PartitionData(partition_index=pidx, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                                      leader_id=-1, leader_epoch=-1, isr=[], partition_epoch=-1))
                    continue
                code, st = results[row_tp]
                if st is None:
                    parts.append(resp_t.PartitionData(partition_index=pidx, error_code=code, leader_id=-1,
                                                      leader_epoch=-1, isr=[], partition_epoch=-1))
                else:
                    parts.append(resp_t.PartitionData(partition_index=pidx, error_code=code, leader_id=st.leader,
                                                      leader_epoch=st.leader_epoch, isr=list(st.isr),
                                                      leader_recovery_state=st.leader_recovery_state,
                                                      partition_epoch=st.zk_version))
            topics_out.append(resp_t.TopicData(topic_id=topic_id, partitions=parts))
        return resp_t(error_code=ErrorCode.NONE, topics=topics_out)
