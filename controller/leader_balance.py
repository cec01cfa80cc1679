"""Moving leadership on purpose: controlled shutdown, ElectLeaders and the preferred-leader balance.

* ControlledShutdown: leadership moves off the broker that is stopping, which also leaves the
  ISRs it follows; the response lists the partitions it still leads.
* ElectLeaders (PREFERRED or UNCLEAN) on request, as in Kafka's ``KafkaController``.
* ``auto.leader.rebalance.enable``: every ``leader.imbalance.check.interval.seconds`` the brokers
  whose share of partitions led by someone else exceeds ``leader.imbalance.per.broker.percentage``
  get their preferred leadership back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from controller.context import PartitionState
from controller.controller_config import ELECTION_PREFERRED, ELECTION_UNCLEAN
from controller.zk_client import ControllerMovedError
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import new_response, response_type
from protocol.schema import Struct

if TYPE_CHECKING:
    from controller.controller import KafkaController, TopicPartition

# The controller's loggers: these steps are part of the controller's story in the broker log.
log = logging.getLogger("controller.controller")



class LeaderBalancer:
    """Leadership moves the controller makes on request or on its balance check."""

    def __init__(self, controller: KafkaController) -> None:
        self._ctl = controller

    # -- Controlled shutdown -----------------------------------------------------------------------

    async def handle_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Struct:
        """ControlledShutdown -> response body: leadership moves off ``broker_id``, which also leaves
        the ISRs it follows; the response lists the partitions it still leads."""
        if not self._ctl._active or self._ctl.loop is None:
            return new_response(ApiKey.CONTROLLED_SHUTDOWN, error_code=ErrorCode.NOT_CONTROLLER)
        fut = self._ctl._enqueue("controlled_shutdown", (broker_id, broker_epoch), want_result=True)
        assert fut is not None
        try:
            return await fut
        except ControllerMovedError:
            return new_response(ApiKey.CONTROLLED_SHUTDOWN, error_code=ErrorCode.NOT_CONTROLLER)

    async def process_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Struct:
        ctx = self._ctl.context
        resp_t = response_type(ApiKey.CONTROLLED_SHUTDOWN)
        if not self._ctl._active:
            return resp_t(error_code=ErrorCode.NOT_CONTROLLER)
        reg = ctx.live_brokers.get(broker_id)
        if reg is None:
            return resp_t(error_code=ErrorCode.BROKER_NOT_AVAILABLE)
        if broker_epoch != -1 and broker_epoch < reg.broker_epoch:
            return resp_t(error_code=ErrorCode.STALE_BROKER_EPOCH)
        self._ctl.stats.controlled_shutdowns += 1
        ctx.shutting_down_broker_ids.add(broker_id)
        log.info("controller %d: controlled shutdown of broker %d; shutting down: %s", self._ctl.broker_id, broker_id,
                 sorted(ctx.shutting_down_broker_ids))
        act_on = [tp for tp in ctx.partitions_on_broker(broker_id)
                  if len(ctx.replicas(tp)) > 1 and tp in ctx.leadership
                  and not ctx.is_topic_queued_for_deletion(tp[0])]
        led = [tp for tp in act_on if ctx.leadership[tp].leader == broker_id]
        followed = [tp for tp in act_on if ctx.leadership[tp].leader != broker_id]
        if led:
            ok, _failed = await self._ctl.partition_state_machine.elect_leaders(led, "controlled_shutdown")
            for tp in ok:
                ctx.set_partition_state(tp, PartitionState.ONLINE, check=False)
        if followed:
            await self._ctl.partition_state_machine.offline_replicas([(tp, broker_id) for tp in followed])
        remaining = sorted(tp for tp, st in ctx.leadership.items()
                           if st.leader == broker_id and len(ctx.replicas(tp)) > 1
                           and not ctx.is_topic_queued_for_deletion(tp[0]))
        return resp_t(error_code=ErrorCode.NONE, remaining_partitions=[
            resp_t.RemainingPartition(topic_name=t, partition_index=p) for t, p in remaining])

    # -- Leader elections on request ---------------------------------------------------------------

    async def elect_leaders(self, election_type: int = ELECTION_PREFERRED,
                            partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, tuple[int, str | None]]:
        """Elect leaders for ``partitions`` (None: all). Result per partition: (error code, message).

        PREFERRED: the first assigned replica leads if alive and in the ISR (ELECTION_NOT_NEEDED if
        it leads already, PREFERRED_LEADER_NOT_AVAILABLE if it cannot). UNCLEAN: leaderless
        partitions get any live replica (ELECTION_NOT_NEEDED where a leader is alive).
        """
        if not self._ctl._active or self._ctl.loop is None:
            parts = list(partitions or [])
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in parts}
        fut = self._ctl._enqueue("elect_leaders", (election_type, None if partitions is None else list(partitions)),
                            want_result=True)
        assert fut is not None
        try:
            return await fut
        except ControllerMovedError:
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in (partitions or [])}

    async def handle_elect_leaders(self, request: Struct) -> Struct:
        """ElectLeaders request body -> response body (v1+ layout; the handler encodes the version)."""
        tps = None if request.topic_partitions is None else [
            (t.topic, p) for t in request.topic_partitions for p in t.partitions]
        results = await self.elect_leaders(request.election_type, tps)
        resp_t = response_type(ApiKey.ELECT_LEADERS)
        if not self._ctl._active and not results:
            return resp_t(error_code=ErrorCode.NOT_CONTROLLER)
        by_topic: dict[str, list[Struct]] = {}
        for (t, p), (code, msg) in sorted(results.items()):
            by_topic.setdefault(t, []).append(resp_t.PartitionResult(partition_id=p, error_code=code, error_message=msg))
        return resp_t(error_code=ErrorCode.NONE, replica_election_results=[
            resp_t.ReplicaElectionResult(topic=t, partition_result=pr) for t, pr in by_topic.items()])

    async def process_elect_leaders(self, election_type: int,
                                     partitions: list[TopicPartition] | None) -> dict[TopicPartition, tuple[int, str | None]]:
        ctx = self._ctl.context
        if not self._ctl._active:
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in (partitions or [])}
        if partitions is None:
            partitions = ctx.all_partitions()
        out: dict[TopicPartition, tuple[int, str | None]] = {}
        valid: list[TopicPartition] = []
        for tp in partitions:
            if tp not in ctx.assignments:
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The partition {tp[0]}-{tp[1]} does not exist.")
            elif ctx.is_topic_queued_for_deletion(tp[0]):
                out[tp] = (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted.")
            else:
                st = ctx.leadership.get(tp)
                if election_type == ELECTION_PREFERRED:
                    if st is not None and st.leader == ctx.replicas(tp)[0]:
                        out[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "Leader is already the preferred replica.")
                        continue
                elif election_type == ELECTION_UNCLEAN:
                    if st is not None and st.leader in ctx.live_broker_ids:
                        out[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "The partition has a live leader.")
                        continue
                else:
                    out[tp] = (ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}.")
                    continue
                if st is None:
                    out[tp] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "The partition has no state yet.")
                    continue
                valid.append(tp)
        if valid:
            if election_type == ELECTION_PREFERRED:
                ok, failed = await self._ctl.partition_state_machine.elect_leaders(valid, "preferred")
                self._ctl.stats.preferred_elections += len(ok)
            else:
                ok, failed = await self._ctl.partition_state_machine.elect_leaders(valid, "offline", force_unclean=True)
            for tp in ok:
                ctx.set_partition_state(tp, PartitionState.ONLINE, check=False)
                out[tp] = (ErrorCode.NONE, None)
            for tp, code in failed.items():
                msg = ("The preferred replica is not alive or not in the ISR." if code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                       else "No live replica can lead the partition." if code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                       else None)
                out[tp] = (code, msg)
        return out

    async def rebalance_loop(self, generation: int) -> None:
        try:
            while self._ctl._active and generation == self._ctl._generation:
                interval = float(self._ctl.config("leader.imbalance.check.interval.seconds"))
                await asyncio.sleep(max(0.05, interval))
                if self._ctl._active and generation == self._ctl._generation:
                    self._ctl._enqueue("auto_rebalance")
        except asyncio.CancelledError:
            pass

    def imbalanced_partitions(self) -> dict[int, list[TopicPartition]]:
        """Per preferred leader broker: partitions it should lead but does not (Kafka's check)."""
        ctx = self._ctl.context
        out: dict[int, list[TopicPartition]] = {}
        for tp, a in ctx.assignments.items():
            if not a.replicas or ctx.is_topic_queued_for_deletion(tp[0]) or tp in ctx.partitions_being_reassigned:
                continue
            st = ctx.leadership.get(tp)
            if st is not None and st.leader != a.replicas[0]:
                out.setdefault(a.replicas[0], []).append(tp)
        return out

    async def process_auto_rebalance(self) -> None:
        ctx = self._ctl.context
        threshold = float(self._ctl.config("leader.imbalance.per.broker.percentage"))
        per_broker_total: dict[int, int] = {}
        for a in ctx.assignments.values():
            if a.replicas:
                per_broker_total[a.replicas[0]] = per_broker_total.get(a.replicas[0], 0) + 1
        to_elect: list[TopicPartition] = []
        for broker, tps in sorted(self.imbalanced_partitions().items()):
            total = per_broker_total.get(broker, 0)
            ratio = len(tps) / total if total else 0.0
            if ratio * 100 <= threshold:
                continue
            if broker not in ctx.live_broker_ids:
                continue
            for tp in tps:
                st = ctx.leadership.get(tp)
                if st is not None and broker in st.isr:
                    to_elect.append(tp)
        if to_elect:
            log.info("controller %d: preferred leader imbalance over %.0f%%: electing preferred leaders for %d "
                     "partitions", self._ctl.broker_id, threshold, len(to_elect))
            ok, _ = await self._ctl.partition_state_machine.elect_leaders(to_elect, "preferred")
            self._ctl.stats.preferred_elections += len(ok)
            for tp in ok:
                ctx.set_partition_state(tp, PartitionState.ONLINE, check=False)
