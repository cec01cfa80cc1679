"""Topic deletion (Kafka's ``TopicDeletionManager``, ZooKeeper mode).

A topic is marked for deletion by a child of ``/admin/delete_topics``. The controller queues it
(unless ``delete.topic.enable`` is false, or the topic does not exist: then the marker is removed),
tells every broker to forget its partitions (UpdateMetadata with leader -2), and sends each replica
StopReplica, first without and then with ``delete_partition``. Replicas move
Offline -> ReplicaDeletionStarted -> ReplicaDeletionSuccessful (or ReplicaDeletionIneligible on an
error or while a replica's broker is down, retried later). When every replica is deleted the
topic's znodes go and the topic leaves the controller's context. A topic with a reassignment in
progress or an offline replica waits (ineligible) until that is over.

It runs inside the controller's event loop (one event at a time, as everything the controller
does) and reaches ZooKeeper, the request batch and the context through its ``KafkaController``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from controller.context import PartitionState, ReplicaState

if TYPE_CHECKING:
    from controller.controller import KafkaController, TopicPartition

# The controller's logger: deletion is part of the controller's story in the broker log.
log = logging.getLogger("controller.controller")



class TopicDeletionManager:
    """Queued, started and completed topic deletions of the active controller."""

    def __init__(self, controller: KafkaController) -> None:
        self._ctl = controller

    async def process_deletion_znode(self) -> None:
        topics = await self._ctl._zk(self._ctl.zk.get_topic_deletions, self._ctl._watcher("topic_deletion"))
        await self.handle_deletion_requests(topics)
        await self.resume_deletions()

    async def handle_deletion_requests(self, topics: list[str]) -> None:
        ctx = self._ctl.context
        if not topics:
            return
        unknown = [t for t in topics if t not in ctx.all_topics]
        if unknown:
            log.info("controller %d: ignoring deletion of non-existent topics %s", self._ctl.broker_id, unknown)
            await self._ctl._zk(self._ctl.zk.remove_topic_deletions, unknown, ctx.epoch_zk_version)
        wanted = [t for t in topics if t in ctx.all_topics and t not in ctx.topics_to_delete]
        if not wanted:
            return
        if not self._ctl.config("delete.topic.enable"):
            log.info("controller %d: removing deletion markers for %s: delete.topic.enable is false", self._ctl.broker_id,
                     wanted)
            await self._ctl._zk(self._ctl.zk.remove_topic_deletions, wanted, ctx.epoch_zk_version)
            return
        for t in wanted:
            ctx.topics_to_delete.add(t)
            tps = ctx.partitions_for_topic(t)
            if any(not ctx.is_replica_online(r, tp, include_shutting_down=True) for tp in tps for r in ctx.replicas(tp)):
                ctx.topics_ineligible_for_deletion.add(t)
            if any(tp in ctx.partitions_being_reassigned for tp in tps):
                ctx.topics_ineligible_for_deletion.add(t)
        log.info("controller %d: topics queued for deletion: %s", self._ctl.broker_id, wanted)

    async def resume_deletions(self) -> None:
        ctx = self._ctl.context
        for t in sorted(ctx.topics_to_delete):
            tps = ctx.partitions_for_topic(t)
            replicas = [(tp, r) for tp in tps for r in ctx.replicas(tp)]
            if all(ctx.replica_state(tp, r) is ReplicaState.DELETION_SUCCESSFUL for tp, r in replicas):
                await self._complete_topic_deletion(t)
                continue
            if t in ctx.topics_ineligible_for_deletion:
                continue
            await self._start_topic_deletion(t)

    async def _start_topic_deletion(self, topic: str) -> None:
        ctx = self._ctl.context
        tps = ctx.partitions_for_topic(topic)
        if topic not in ctx.topics_deletion_started:
            ctx.topics_deletion_started.add(topic)
            # Brokers drop the partitions from their metadata (leader -2).
            self._ctl._add_update_metadata(ctx.live_or_shutting_down_broker_ids, tps)
            for tp in tps:
                ctx.set_partition_state(tp, PartitionState.OFFLINE, check=False)
        todo: list[tuple[TopicPartition, int]] = []
        for tp in tps:
            for r in ctx.replicas(tp):
                st = ctx.replica_state(tp, r)
                if st in (ReplicaState.DELETION_SUCCESSFUL, ReplicaState.DELETION_STARTED):
                    continue
                if not ctx.is_replica_online(r, tp, include_shutting_down=True):
                    ctx.set_replica_state(tp, r, ReplicaState.DELETION_INELIGIBLE, check=False)
                    ctx.topics_ineligible_for_deletion.add(topic)
                    continue
                todo.append((tp, r))
        if not todo:
            return
        for tp, r in todo:
            self._ctl._add_stop_replica([r], tp, False)
            ctx.set_replica_state(tp, r, ReplicaState.OFFLINE, check=False)
        for tp, r in todo:
            self._ctl._add_stop_replica([r], tp, True)
            ctx.set_replica_state(tp, r, ReplicaState.DELETION_STARTED, check=False)
        log.info("controller %d: deleting topic %s: StopReplica(delete) to %d replicas", self._ctl.broker_id, topic,
                 len(todo))

    async def on_stop_replica_response(self, broker: int, deletes: set[TopicPartition],
                                             errors: dict[TopicPartition, int]) -> None:
        ctx = self._ctl.context
        touched: set[str] = set()
        for tp in deletes:
            if not ctx.is_topic_queued_for_deletion(tp[0]):
                continue
            touched.add(tp[0])
            if tp in errors:
                ctx.set_replica_state(tp, broker, ReplicaState.DELETION_INELIGIBLE, check=False)
                ctx.topics_ineligible_for_deletion.add(tp[0])
                log.warning("controller %d: broker %d failed to delete %s-%d (error %d)", self._ctl.broker_id, broker,
                            tp[0], tp[1], errors[tp])
            else:
                ctx.set_replica_state(tp, broker, ReplicaState.DELETION_SUCCESSFUL, check=False)
        if touched:
            await self.resume_deletions()
            # Ineligible because of errors: retry a little later, as Kafka does on the next event.
            if any(t in ctx.topics_ineligible_for_deletion for t in touched) and self._ctl.loop is not None:
                gen = self._ctl._generation

                def retry() -> None:
                    if gen == self._ctl._generation:
                        for t in touched:
                            self._ctl.context.topics_ineligible_for_deletion.discard(t)
                            for tp in self._ctl.context.partitions_for_topic(t):
                                for r in self._ctl.context.replicas(tp):
                                    if (self._ctl.context.replica_state(tp, r) is ReplicaState.DELETION_INELIGIBLE
                                            and self._ctl.context.is_replica_online(r, tp, include_shutting_down=True)):
                                        self._ctl.context.set_replica_state(tp, r, ReplicaState.OFFLINE, check=False)
                        self._ctl._enqueue("resume_deletion")
                self._ctl.loop.call_later(1.0, retry)

    async def _complete_topic_deletion(self, topic: str) -> None:
        ctx = self._ctl.context
        await self._ctl._zk(self._ctl.zk.delete_topic_znodes, topic, ctx.epoch_zk_version)
        ctx.remove_topic(topic)
        self._ctl._watched_topics.discard(topic)
        log.info("controller %d: deletion of topic %s is complete", self._ctl.broker_id, topic)
