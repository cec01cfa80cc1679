"""Log dir failures in ZooKeeper mode (KIP-112), the controller's side.

A broker whose log dir fails keeps running and writes ``/log_dir_event_notification/log_dir_event_N``.
The controller, watching that path, deletes the notifications and sends the broker LeaderAndIsr for every
replica it hosts. The broker answers KAFKA_STORAGE_ERROR for those in the failed dir; those replicas go
offline as if their broker had died: partitions they led elect a new leader among the other replicas
(``ControllerContext.is_replica_online`` and the elections leave them out), and they leave every ISR.
They stay offline until the broker registers again (a restart), when LeaderAndIsr finds out afresh which
of its replicas are there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from controller.context import PartitionState, TopicPartition
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from controller.controller import KafkaController

log = logging.getLogger(__name__)


class LogDirEvents:
    def __init__(self, controller: KafkaController) -> None:
        self._ctl = controller

    async def process_notifications(self, names: list[str] | None = None) -> None:
        """The notification znodes changed (or, at failover, ``names`` were found): ask each broker named
        about all its replicas."""
        ctl = self._ctl
        if names is None:
            names = await ctl._zk(ctl.zk.get_log_dir_event_notifications, ctl._watcher("log_dir_event"))
        if not names:
            return
        brokers = await ctl._zk(ctl.zk.get_brokers_from_log_dir_events, names)
        await ctl._zk(ctl.zk.delete_log_dir_event_notifications, names, ctl.context.epoch_zk_version)
        ctx = ctl.context
        for b in sorted(brokers):
            if b not in ctx.live_brokers:
                continue
            log.info("controller %d: broker %d reported a failed log dir; sending it LeaderAndIsr for its replicas",
                     ctl.broker_id, b)
            for tp, r in ctx.replicas_on_brokers([b]):
                if tp in ctx.leadership and not ctx.is_topic_queued_for_deletion(tp[0]):
                    ctl._add_leader_and_isr([r], tp)

    def storage_errors_in(self, broker: int, resp: Any) -> list[TopicPartition]:
        """The partitions a LeaderAndIsr answer says are in a failed log dir of ``broker``, not yet known."""
        ctx = self._ctl.context
        names = {tid: t for t, tid in ctx.topic_ids.items()}
        known = ctx.replicas_on_offline_dirs.get(broker, set())
        out: list[TopicPartition] = []
        for t in resp.topics:
            topic = names.get(t.topic_id)
            if topic is None:
                continue
            for p in t.partition_errors:
                if p.error_code == ErrorCode.KAFKA_STORAGE_ERROR and (topic, p.partition_index) not in known:
                    out.append((topic, p.partition_index))
        return out

    async def on_replicas_offline(self, broker: int, partitions: Iterable[TopicPartition]) -> None:
        """Kafka's onReplicasBecomeOffline for one broker's replicas in a failed dir."""
        ctl = self._ctl
        ctx = ctl.context
        if broker not in ctx.live_brokers:
            return  # it died meanwhile: the broker-failure path took care of everything
        offline = ctx.replicas_on_offline_dirs.setdefault(broker, set())
        new = [tp for tp in partitions if tp not in offline and tp in ctx.assignments]
        if not new:
            return
        offline.update(new)
        log.warning("controller %d: replicas of broker %d in a failed log dir go offline: %s", ctl.broker_id, broker,
                    ", ".join(f"{t}-{p}" for t, p in sorted(new)))
        led = [tp for tp in new if (st := ctx.leadership.get(tp)) is not None and st.leader == broker
               and not ctx.is_topic_queued_for_deletion(tp[0])]
        for tp in led:
            ctx.set_partition_state(tp, PartitionState.OFFLINE, check=False)
        if led:
            await ctl.partition_state_machine.trigger_online_partition_state_change(led)
        await ctl.partition_state_machine.offline_replicas(
            [(tp, broker) for tp in new if not ctx.is_topic_queued_for_deletion(tp[0])])

    def forget(self, brokers: Iterable[int]) -> None:
        """A broker registered again, or died: what its dirs hold is learned afresh."""
        for b in brokers:
            self._ctl.context.replicas_on_offline_dirs.pop(b, None)
