"""The cluster controller (Kafka's ``KafkaController`` in ZooKeeper mode).

Every broker runs a ``KafkaController``; the one whose ``Elector`` wins the election is *active*. On
becoming active it loads the cluster from ZooKeeper (brokers, topics, assignments, partition states)
and from then on reacts to ZooKeeper watches and to requests from brokers:

- broker registrations appear / disappear / change epoch (``/brokers/ids``) -> broker startup/failure
- topics appear (``/brokers/topics``) or gain partitions (topic znode data) -> new partitions
- topics are marked for deletion (``/admin/delete_topics``) -> StopReplica + znode removal
- ISR-change notifications, topic config changes (unclean leader election may have been enabled)
- AlterPartition (ISR changes from partition leaders), ControlledShutdown, ElectLeaders
- the periodic preferred-leader balance check (``auto.leader.rebalance.enable``)

All of it runs as events handled one at a time by a single asyncio task (Kafka's
ControllerEventManager), so the state (``ControllerContext``) needs no locks. ZooKeeper calls run in a
thread executor; watches fire on kazoo's threads and are bridged in with ``call_soon_threadsafe``.

Each state change follows Kafka's order: elect / compute, write the partition state znode with a
conditional update on its version (fenced by the controller epoch's znode version), then send
LeaderAndIsr to the partition's replicas and UpdateMetadata to every live broker. Each event's
requests are collected in a batch and sent when the event is done.

The work is split as Kafka splits it; this module keeps the event loop, failover, the request
batch and the events about brokers, topics, ISR notifications and configs, and hands the rest to:

- ``controller/partition_state_machine.py``: partition and replica state changes and elections;
- ``controller/alter_partition.py``: AlterPartition (ISR changes from partition leaders);
- ``controller/leader_balance.py``: controlled shutdown, ElectLeaders, the preferred-leader balance;
- ``controller/topic_deletion.py``: topic deletion (Kafka's ``TopicDeletionManager``);
- ``controller/reassignment.py``: partition reassignment.

They all run on this controller's event loop and share its ``ControllerContext``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from config.views import lookup
from controller import zk_data as zd
from controller.alter_partition import AlterPartitionHandler
from controller.channel import ControllerChannelManager, inter_broker_endpoint
from controller.context import ControllerContext, ControllerStats, PartitionState, ReplicaState
from controller.controller_config import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
)
from controller.election import Elector
from controller.leader_balance import LeaderBalancer
from controller.log_dir_events import LogDirEvents
from controller.partition_state_machine import PartitionStateMachine
from controller.reassignment import ReassignmentManager
from controller.topic_deletion import TopicDeletionManager
from controller.zk_client import ControllerMovedError, KafkaZkClient
from controller.zk_data import LeaderIsrAndControllerEpoch, ReplicaAssignment
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type
from protocol.schema import Struct

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("kafkette.state.change")

__all__ = ["ELECTION_PREFERRED", "ELECTION_UNCLEAN", "KafkaController"]

TopicPartition = tuple[str, int]
ConfigGetter = Callable[[str], Any]

EPOCH_DURING_DELETE = -2


@dataclass
class _Event:
    name: str
    payload: Any = None
    future: asyncio.Future[Any] | None = None


@dataclass
class _RequestBatch:
    """Requests collected while handling one event (Kafka's ControllerBrokerRequestBatch)."""

    leader_and_isr: dict[int, dict[TopicPartition, tuple[LeaderIsrAndControllerEpoch, ReplicaAssignment, bool]]] = \
        field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    full_leader_and_isr: set[int] = field(default_factory=set)

    def empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata_brokers or self.stop_replica)


class KafkaController:
    """The controller of one broker: inactive until its elector wins.

    ``config_getter(name)`` returns the broker's value of a config (``unclean.leader.election.enable``,
    ``delete.topic.enable``, ``auto.leader.rebalance.enable``, ``leader.imbalance.per.broker.percentage``,
    ``leader.imbalance.check.interval.seconds``); None means Kafka's default.
    """

    def __init__(self, zk: KafkaZkClient, broker_id: int, loop: asyncio.AbstractEventLoop | None = None,
                 channel_manager: ControllerChannelManager | None = None,
                 config_getter: ConfigGetter | None = None, *, listener_name: str | None = "PLAINTEXT",
                 require_registration: bool = True) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.loop = loop
        self.listener_name = listener_name
        self.channel = channel_manager or ControllerChannelManager(broker_id, loop, listener_name=listener_name)
        self._config_getter = config_getter
        self.require_registration = require_registration
        self.stats = ControllerStats()
        self.context = ControllerContext(stats=self.stats)
        self.elector: Elector | None = None
        self._active = False
        self._events: asyncio.Queue[_Event] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._batch = _RequestBatch()
        self._busy = False
        self._rebalance_task: asyncio.Task[None] | None = None
        self._watched_topics: set[str] = set()
        self._last_config_change: str | None = None
        self._generation = 0  # bumps on every failover/resignation: stale watches are ignored
        self.on_controller_change: list[Callable[[bool, int], Awaitable[None] | None]] = []
        self.partition_state_machine = PartitionStateMachine(self)
        self.alter_partition = AlterPartitionHandler(self)
        self.leader_balance = LeaderBalancer(self)
        self.topic_deletion = TopicDeletionManager(self)
        self.reassignments = ReassignmentManager(self)
        self.log_dir_events = LogDirEvents(self)

    # ==========================================================================================
    # Lifecycle

    def config(self, name: str) -> Any:
        """The broker's typed value of ``name`` (a string from a plain mapping is parsed), else the
        registry's default."""
        getter = self._config_getter
        return lookup(getter, name)

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def epoch(self) -> int:
        return self.context.epoch if self._active else -1

    @property
    def unclean_leader_elections(self) -> int:
        return self.stats.unclean_leader_elections

    async def start(self) -> None:
        """Start the event task and take part in controller election."""
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        if self.channel.loop is None:
            self.channel.loop = self.loop
        self._task = self.loop.create_task(self._run(), name=f"controller-events-{self.broker_id}")
        self.elector = Elector(self.zk, self.broker_id, self.loop, on_become_controller=self._on_become_controller,
                               on_resign=self._on_resign, require_registration=self.require_registration)
        await self.elector.start()

    async def shutdown(self) -> None:
        """Stop: resign (deleting /controller so another broker takes over at once) and close channels."""
        if self.elector is not None:
            await self.elector.stop()
        if self._active:
            await self._on_resign()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self.channel.shutdown()

    async def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until no controller event is queued or running (tests)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._busy or not self._events.empty():
            if loop.time() > deadline:
                raise TimeoutError("controller events still pending")
            await asyncio.sleep(0.01)

    # ==========================================================================================
    # Event plumbing

    def _enqueue(self, name: str, payload: Any = None, *, want_result: bool = False) -> asyncio.Future[Any] | None:
        fut = self.loop.create_future() if want_result and self.loop is not None else None
        self._events.put_nowait(_Event(name, payload, fut))
        return fut

    def _post_threadsafe(self, name: str, payload: Any = None) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._enqueue, name, payload)

    def _watcher(self, name: str, payload: Any = None) -> Callable[[Any], None]:
        gen = self._generation

        def fire(event: Any) -> None:
            self._post_threadsafe(name, (gen, payload))
        return fire

    async def _zk(self, fn: Callable[..., Any], *args: Any) -> Any:
        assert self.loop is not None
        return await self.loop.run_in_executor(None, fn, *args)

    async def _run(self) -> None:
        while True:
            ev = await self._events.get()
            self._busy = True
            self._batch = _RequestBatch()
            try:
                result = await self._dispatch(ev)
                self._flush_batch()
                if ev.future is not None and not ev.future.done():
                    ev.future.set_result(result)
            except asyncio.CancelledError:
                if ev.future is not None and not ev.future.done():
                    ev.future.cancel()
                raise
            except ControllerMovedError as e:
                log.warning("controller %d: fenced while handling %s (%s); resigning", self.broker_id, ev.name, e)
                await self._resign_after_fencing()
                if ev.future is not None and not ev.future.done():
                    ev.future.set_exception(e)
            except Exception as e:
                log.exception("controller %d: handling event %s failed", self.broker_id, ev.name)
                with contextlib.suppress(Exception):
                    self._flush_batch()
                if ev.future is not None and not ev.future.done():
                    ev.future.set_exception(e)
            finally:
                self._busy = not self._events.empty()

    async def _dispatch(self, ev: _Event) -> Any:
        name = ev.name
        if name == "failover":
            return await self._failover(*ev.payload)
        if name == "resign":
            return self._resign_state()
        if name == "alter_partition":
            return await self.alter_partition.process_alter_partition(ev.payload)
        if name == "controlled_shutdown":
            return await self.leader_balance.process_controlled_shutdown(*ev.payload)
        if name == "elect_leaders":
            return await self.leader_balance.process_elect_leaders(*ev.payload)
        if name == "reassign":
            return await self.reassignments.process_reassignments(ev.payload, from_znode=False)
        if name == "list_reassignments":
            return self.reassignments.list_reassignments(ev.payload)
        if not self._active:
            return None
        if name in ("broker_change", "topic_change", "topic_deletion", "partition_modification",
                    "isr_change", "config_change", "broker_modification", "reassign_znode", "log_dir_event",
                    "replicas_offline"):
            gen, payload = ev.payload if isinstance(ev.payload, tuple) and len(ev.payload) == 2 else (None, None)
            if gen is not None and gen != self._generation:
                return None  # a watch from an earlier term
            if name == "broker_change":
                return await self._process_broker_change()
            if name == "topic_change":
                return await self._process_topic_change()
            if name == "topic_deletion":
                return await self.topic_deletion.process_deletion_znode()
            if name == "partition_modification":
                # The payload is the topic whose partitions znode changed (see _watcher).
                return await self._process_partition_modification(str(payload))
            if name == "isr_change":
                return await self._process_isr_change()
            if name == "config_change":
                return await self._process_config_change()
            if name == "reassign_znode":
                return await self.reassignments.process_reassign_znode()
            if name == "log_dir_event":
                return await self.log_dir_events.process_notifications()
            if name == "replicas_offline":
                assert isinstance(payload, tuple)
                broker, partitions = payload
                return await self.log_dir_events.on_replicas_offline(broker, partitions)
        if name == "stop_replica_response":
            return await self.topic_deletion.on_stop_replica_response(*ev.payload)
        if name == "auto_rebalance":
            return await self.leader_balance.process_auto_rebalance()
        if name == "resume_deletion":
            return await self.topic_deletion.resume_deletions()
        log.debug("controller %d: ignoring event %s", self.broker_id, name)
        return None

    # ==========================================================================================
    # Becoming / stopping being the controller

    async def _on_become_controller(self, epoch: int, epoch_zk_version: int) -> None:
        fut = self._enqueue("failover", (epoch, epoch_zk_version), want_result=True)
        assert fut is not None
        await fut
        await self._notify_change(True, epoch)

    async def _on_resign(self) -> None:
        fut = self._enqueue("resign", want_result=True)
        assert fut is not None
        with contextlib.suppress(Exception):
            await fut
        await self._notify_change(False, -1)

    async def _notify_change(self, active: bool, epoch: int) -> None:
        for cb in list(self.on_controller_change):
            try:
                r = cb(active, epoch)
                if asyncio.iscoroutine(r):
                    await r
            except Exception:
                log.exception("controller change listener failed")

    async def _resign_after_fencing(self) -> None:
        self._resign_state()
        if self.elector is not None:
            self.elector.epoch = -1
            self.elector.epoch_zk_version = -1
            self.elector.active_controller_id = -1
            self.elector._post("controller_changed")

    def _resign_state(self) -> None:
        if not self._active:
            return
        log.info("controller %d: resigning (epoch %d)", self.broker_id, self.context.epoch)
        self._active = False
        self._generation += 1
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        for bid in list(self.channel.broker_ids()):
            self.channel.remove_broker(bid)
        self._batch = _RequestBatch()
        self._watched_topics.clear()
        self.context = ControllerContext(stats=self.stats)

    async def _failover(self, epoch: int, epoch_zk_version: int) -> None:
        log.info("controller %d: starting failover, epoch %d", self.broker_id, epoch)
        self._generation += 1
        ctx = ControllerContext(epoch=epoch, epoch_zk_version=epoch_zk_version, stats=self.stats)
        self.context = ctx
        self._active = True
        await self.channel.start()

        # Load everything, arming the watches as we read.
        brokers = await self._zk(self.zk.get_all_brokers, self._watcher("broker_change"))
        ctx.live_brokers = dict(brokers)
        topics = await self._zk(self.zk.get_all_topics, self._watcher("topic_change"))
        ctx.all_topics = set(topics)
        await self._load_topics(topics)
        states = await self._zk(self.zk.get_partition_states, ctx.all_partitions())
        for tp, st in states.items():
            ctx.leadership[tp] = st
        deletions = await self._zk(self.zk.get_topic_deletions, self._watcher("topic_deletion"))
        isr_changes = await self._zk(self.zk.get_isr_change_notifications, self._watcher("isr_change"))
        log_dir_events = await self._zk(self.zk.get_log_dir_event_notifications, self._watcher("log_dir_event"))
        changes = await self._zk(self.zk.get_config_change_notifications, self._watcher("config_change"))
        self._last_config_change = changes[-1] if changes else None

        for reg in ctx.live_brokers.values():
            self.channel.add_broker(reg)

        # Tell every broker about the new controller and the live brokers.
        self._add_update_metadata(ctx.live_or_shutting_down_broker_ids, ())

        # Replica state machine start-up: live replicas online (LeaderAndIsr for all of them).
        for tp, a in ctx.assignments.items():
            for r in a.replicas:
                ctx.set_replica_state(tp, r, ReplicaState.ONLINE if ctx.is_replica_online(r, tp, include_shutting_down=True)
                                      else ReplicaState.DELETION_INELIGIBLE, check=False)
        for tp in ctx.all_partitions():
            if tp in ctx.leadership:
                live = [r for r in ctx.replicas(tp) if ctx.is_replica_online(r, tp, include_shutting_down=True)]
                self._add_leader_and_isr(live, tp)
        self._batch.full_leader_and_isr |= ctx.live_or_shutting_down_broker_ids

        # Partition state machine start-up.
        for tp in ctx.all_partitions():
            st = ctx.leadership.get(tp)
            if st is None:
                ctx.set_partition_state(tp, PartitionState.NEW, check=False)
            elif ctx.is_replica_online(st.leader, tp, include_shutting_down=True):
                ctx.set_partition_state(tp, PartitionState.ONLINE, check=False)
            else:
                ctx.set_partition_state(tp, PartitionState.OFFLINE, check=False)
        self._flush_batch()
        await self.partition_state_machine.trigger_online_partition_state_change()

        # Topic deletions and notifications left from before.
        await self.topic_deletion.handle_deletion_requests(deletions)
        if isr_changes:
            await self._apply_isr_changes(isr_changes)
        if log_dir_events:
            await self.log_dir_events.process_notifications(log_dir_events)
        self._flush_batch()
        await self.topic_deletion.resume_deletions()
        # Reassignments in flight (adding/removing replicas in the assignment) and legacy requests.
        for tp, a in sorted(ctx.assignments.items()):
            if a.is_being_reassigned and not ctx.is_topic_queued_for_deletion(tp[0]):
                ctx.partitions_being_reassigned.add(tp)
                await self.reassignments.maybe_complete_reassignment(tp)
        await self.reassignments.process_reassign_znode()

        if self.config("auto.leader.rebalance.enable"):
            self._rebalance_task = self.loop.create_task(self.leader_balance.rebalance_loop(self._generation),  # type: ignore[union-attr]
                                                         name=f"controller-{self.broker_id}-rebalance")
        log.info("controller %d: failover done, epoch %d: %d brokers, %d topics, %d partitions (%d offline)",
                 self.broker_id, epoch, len(ctx.live_brokers), len(ctx.all_topics), len(ctx.assignments),
                 ctx.offline_partition_count())

    async def _load_topics(self, topics: Iterable[str]) -> list[str]:
        """Read assignments (watching each topic znode), give topics without an id one. Returns the
        topics loaded."""
        ctx = self.context
        names = list(topics)
        for t in names:
            if t not in self._watched_topics:
                await self._zk(self.zk.exists, zd.topic_path(t), self._watcher("partition_modification", t))
                self._watched_topics.add(t)
        assignments = await self._zk(self.zk.get_topic_assignments, names)
        loaded = []
        for t in names:
            ta = assignments.get(t)
            if ta is None:
                continue
            topic_id = ta.topic_id
            if topic_id is None:
                topic_id = zd.random_uuid()
                await self._zk(self.zk.set_topic_assignment, t, topic_id, ta.partitions, ctx.epoch_zk_version)
            ctx.topic_ids[t] = topic_id
            ctx.all_topics.add(t)
            for p, a in ta.partitions.items():
                ctx.assignments[(t, p)] = a
            loaded.append(t)
        return loaded

    # ==========================================================================================
    # Request batches

    def _add_leader_and_isr(self, brokers: Iterable[int], tp: TopicPartition, *, is_new: bool = False) -> None:
        ctx = self.context
        st = ctx.leadership.get(tp)
        a = ctx.assignments.get(tp)
        if st is None or a is None:
            return
        for b in brokers:
            if b < 0:
                continue
            self._batch.leader_and_isr.setdefault(b, {})[tp] = (st, a, is_new)
        # Called once per partition (10,000 in a failover or a big CreateTopics): no set built per call.
        self._batch.update_metadata_brokers.update(ctx.live_brokers)
        self._batch.update_metadata_partitions.add(tp)

    def _add_update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self._batch.update_metadata_brokers.update(brokers)
        self._batch.update_metadata_partitions.update(partitions)

    def _add_stop_replica(self, brokers: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        for b in brokers:
            cur = self._batch.stop_replica.setdefault(b, {})
            cur[tp] = cur.get(tp, False) or delete

    def _flush_batch(self) -> None:
        batch, self._batch = self._batch, _RequestBatch()
        if batch.empty() or not self._active:
            return
        ctx = self.context
        lai_t = request_type(ApiKey.LEADER_AND_ISR)
        for broker, parts in sorted(batch.leader_and_isr.items()):
            by_topic: dict[str, list[Struct]] = {}
            leaders: set[int] = set()
            for (t, p), (st, a, is_new) in sorted(parts.items()):
                by_topic.setdefault(t, []).append(lai_t.LeaderAndIsrPartitionState(
                    partition_index=p, controller_epoch=st.controller_epoch, leader=st.leader,
                    leader_epoch=st.leader_epoch, isr=list(st.isr), partition_epoch=st.zk_version,
                    replicas=list(a.replicas), adding_replicas=list(a.adding_replicas),
                    removing_replicas=list(a.removing_replicas), is_new=is_new,
                    leader_recovery_state=st.leader_recovery_state))
                leaders.add(st.leader)
            live_leaders = []
            for lid in sorted(leaders):
                reg = ctx.live_brokers.get(lid)
                if reg is None:
                    continue
                ep = inter_broker_endpoint(reg, self.listener_name)
                live_leaders.append(lai_t.LeaderAndIsrLiveLeader(broker_id=lid, host_name=ep.host, port=ep.port))
            body = lai_t(
                controller_id=self.broker_id, is_k_raft_controller=False, controller_epoch=ctx.epoch,
                broker_epoch=ctx.broker_epoch(broker), type=1 if broker in batch.full_leader_and_isr else 0,
                topic_states=[lai_t.LeaderAndIsrTopicState(topic_name=t, topic_id=ctx.topic_ids.get(t, zd.ZERO_UUID),
                                                           partition_states=ps) for t, ps in by_topic.items()],
                live_leaders=live_leaders)
            state_change_log.debug("controller %d epoch %d sending LeaderAndIsr to broker %d for %d partitions",
                                   self.broker_id, ctx.epoch, broker, len(parts))
            self.channel.send(broker, ApiKey.LEADER_AND_ISR, body, self._on_leader_and_isr_response)

        if batch.update_metadata_brokers:
            um_t = request_type(ApiKey.UPDATE_METADATA)
            by_topic_um: dict[str, list[Struct]] = {}
            for tp in sorted(batch.update_metadata_partitions):
                um_state = ctx.leadership.get(tp)
                um_assignment = ctx.assignments.get(tp)
                if um_state is None or um_assignment is None:
                    continue
                leader = zd.LEADER_DURING_DELETE if ctx.is_topic_queued_for_deletion(tp[0]) else um_state.leader
                by_topic_um.setdefault(tp[0], []).append(um_t.UpdateMetadataPartitionState(
                    partition_index=tp[1], controller_epoch=um_state.controller_epoch, leader=leader,
                    leader_epoch=um_state.leader_epoch, isr=list(um_state.isr), zk_version=um_state.zk_version,
                    replicas=list(um_assignment.replicas),
                    offline_replicas=[r for r in um_assignment.replicas if not ctx.is_replica_online(
                        r, tp, include_shutting_down=True)]))
            topic_states = [um_t.UpdateMetadataTopicState(topic_name=t, topic_id=ctx.topic_ids.get(t, zd.ZERO_UUID),
                                                           partition_states=ps) for t, ps in by_topic_um.items()]
            live = [um_t.UpdateMetadataBroker(
                id=reg.broker_id,
                endpoints=[um_t.UpdateMetadataEndpoint(port=ep.port, host=ep.host, listener=ep.listener_name,
                                                       security_protocol=ep.security_protocol_id)
                           for ep in reg.endpoints],
                rack=reg.rack) for _, reg in sorted(ctx.live_brokers.items())]
            for broker in sorted(batch.update_metadata_brokers):
                if broker not in ctx.live_brokers:
                    continue
                body = um_t(controller_id=self.broker_id, is_k_raft_controller=False, type=0,
                            controller_epoch=ctx.epoch, broker_epoch=ctx.broker_epoch(broker),
                            topic_states=topic_states, live_brokers=live)
                self.channel.send(broker, ApiKey.UPDATE_METADATA, body, self._on_update_metadata_response)

        sr_t = request_type(ApiKey.STOP_REPLICA)
        for broker, stops in sorted(batch.stop_replica.items()):
            by_topic_sr: dict[str, list[Struct]] = {}
            for (t, p), delete in sorted(stops.items()):
                sr_state = ctx.leadership.get((t, p))
                epoch = EPOCH_DURING_DELETE if ctx.is_topic_queued_for_deletion(t) else (
                    sr_state.leader_epoch if sr_state is not None else -1)
                by_topic_sr.setdefault(t, []).append(sr_t.StopReplicaPartitionState(
                    partition_index=p, leader_epoch=epoch, delete_partition=delete))
            body = sr_t(controller_id=self.broker_id, is_k_raft_controller=False, controller_epoch=ctx.epoch,
                        broker_epoch=ctx.broker_epoch(broker),
                        topic_states=[sr_t.StopReplicaTopicState(topic_name=t, partition_states=ps)
                                      for t, ps in by_topic_sr.items()])
            deletes = {tp for tp, d in stops.items() if d}
            self.channel.send(broker, ApiKey.STOP_REPLICA, body, self._stop_replica_callback(deletes))

    def _on_leader_and_isr_response(self, broker: int, api_key: int, resp: Struct | None,
                                    err: BaseException | None) -> None:
        if err is not None or resp is None:
            return
        if resp.error_code != ErrorCode.NONE:
            log.warning("controller %d: LeaderAndIsr to broker %d failed with error %d", self.broker_id, broker,
                        resp.error_code)
            return
        for t in resp.topics:
            for p in t.partition_errors:
                if p.error_code != ErrorCode.NONE:
                    log.info("controller %d: broker %d answered LeaderAndIsr for partition %d of topic %s with "
                             "error %d", self.broker_id, broker, p.partition_index, t.topic_id, p.error_code)
        # KIP-112: KAFKA_STORAGE_ERROR means the replica is in a failed log dir of that broker.
        offline = self.log_dir_events.storage_errors_in(broker, resp)
        if offline:
            self._post_threadsafe("replicas_offline", (self._generation, (broker, offline)))

    def _on_update_metadata_response(self, broker: int, api_key: int, resp: Struct | None,
                                     err: BaseException | None) -> None:
        if resp is not None and resp.error_code != ErrorCode.NONE:
            log.warning("controller %d: UpdateMetadata to broker %d failed with error %d", self.broker_id, broker,
                        resp.error_code)

    def _stop_replica_callback(self, deletes: set[TopicPartition]) -> Callable[..., None]:
        gen = self._generation

        def cb(broker: int, api_key: int, resp: Struct | None, err: BaseException | None) -> None:
            if not deletes or gen != self._generation:
                return
            errors: dict[TopicPartition, int] = {}
            if resp is None:
                errors = {tp: ErrorCode.NETWORK_EXCEPTION for tp in deletes}
            elif resp.error_code != ErrorCode.NONE:
                errors = {tp: resp.error_code for tp in deletes}
            else:
                for pe in resp.partition_errors:
                    tp = (pe.topic_name, pe.partition_index)
                    if tp in deletes and pe.error_code != ErrorCode.NONE:
                        errors[tp] = pe.error_code
            self._enqueue("stop_replica_response", (broker, deletes, errors))
        return cb

    # ==========================================================================================
    # Brokers

    async def _process_broker_change(self) -> None:
        ctx = self.context
        current = await self._zk(self.zk.get_all_brokers, self._watcher("broker_change"))
        old = ctx.live_brokers
        new_ids = sorted(set(current) - set(old))
        dead_ids = sorted(set(old) - set(current))
        bounced = sorted(b for b in set(current) & set(old) if current[b].broker_epoch != old[b].broker_epoch)
        changed = sorted(b for b in set(current) & set(old) if b not in bounced and current[b] != old[b])
        if not (new_ids or dead_ids or bounced or changed):
            return
        log.info("controller %d: broker change: new %s, dead %s, bounced %s, updated %s", self.broker_id, new_ids,
                 dead_ids, bounced, changed)
        for b in new_ids:
            self.channel.add_broker(current[b])
        for b in bounced:
            self.channel.remove_broker(b)
            self.channel.add_broker(current[b])
        for b in dead_ids:
            self.channel.remove_broker(b)
        for b in changed:
            ctx.live_brokers[b] = current[b]
            self.channel.update_broker(current[b])
        if new_ids:
            for b in new_ids:
                ctx.live_brokers[b] = current[b]
            await self._on_broker_startup(new_ids)
        if bounced:
            for b in bounced:
                ctx.live_brokers.pop(b, None)
            await self._on_broker_failure(bounced)
            for b in bounced:
                ctx.live_brokers[b] = current[b]
            await self._on_broker_startup(bounced)
        if dead_ids:
            for b in dead_ids:
                ctx.live_brokers.pop(b, None)
            await self._on_broker_failure(dead_ids)
        if changed:
            self._add_update_metadata(ctx.live_or_shutting_down_broker_ids, ())

    async def _on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self.context
        ctx.shutting_down_broker_ids -= set(new_brokers)
        self.log_dir_events.forget(new_brokers)
        existing = ctx.live_or_shutting_down_broker_ids - set(new_brokers)
        self._add_update_metadata(existing, ())
        self._add_update_metadata(new_brokers, [tp for tp in ctx.all_partitions() if tp in ctx.leadership])
        # Their replicas come online: LeaderAndIsr (full state) to the new brokers.
        replicas = ctx.replicas_on_brokers(new_brokers)
        for tp, r in replicas:
            if ctx.is_topic_queued_for_deletion(tp[0]):
                continue
            ctx.set_replica_state(tp, r, ReplicaState.ONLINE, check=False)
            if tp in ctx.leadership:
                self._batch.leader_and_isr.setdefault(r, {})[tp] = (ctx.leadership[tp], ctx.assignments[tp], False)
        if ctx.leadership:
            self._add_update_metadata(ctx.live_or_shutting_down_broker_ids,
                                      [tp for tp, _ in replicas if tp in ctx.leadership])
        self._batch.full_leader_and_isr |= set(new_brokers)
        await self.partition_state_machine.trigger_online_partition_state_change()
        # Topic deletions waiting for these brokers may go on.
        waiting = {tp[0] for tp, _ in replicas if ctx.is_topic_queued_for_deletion(tp[0])}
        if waiting:
            for tp, r in replicas:
                if tp[0] in waiting and ctx.replica_state(tp, r) is not ReplicaState.DELETION_SUCCESSFUL:
                    ctx.set_replica_state(tp, r, ReplicaState.OFFLINE, check=False)
            ctx.topics_ineligible_for_deletion -= waiting
            self._enqueue("resume_deletion")

    async def _on_broker_failure(self, dead_brokers: list[int]) -> None:
        ctx = self.context
        dead = set(dead_brokers)
        ctx.shutting_down_broker_ids -= dead
        self.log_dir_events.forget(dead)
        offline_leader = [tp for tp, st in ctx.leadership.items()
                          if st.leader in dead and not ctx.is_topic_queued_for_deletion(tp[0])]
        for tp in offline_leader:
            ctx.set_partition_state(tp, PartitionState.OFFLINE, check=False)
        await self.partition_state_machine.trigger_online_partition_state_change()
        replicas = ctx.replicas_on_brokers(dead)
        live_topic_replicas = [(tp, r) for tp, r in replicas if not ctx.is_topic_queued_for_deletion(tp[0])]
        await self.partition_state_machine.offline_replicas(live_topic_replicas)
        deleting = {tp[0] for tp, _ in replicas if ctx.is_topic_queued_for_deletion(tp[0])}
        for tp, r in replicas:
            if tp[0] in deleting:
                ctx.set_replica_state(tp, r, ReplicaState.DELETION_INELIGIBLE, check=False)
        ctx.topics_ineligible_for_deletion |= deleting
        # Everyone learns about the dead brokers even when no partition changed.
        self._add_update_metadata(ctx.live_or_shutting_down_broker_ids, ())

    # ==========================================================================================
    # Topics

    async def _process_topic_change(self) -> None:
        ctx = self.context
        topics = set(await self._zk(self.zk.get_all_topics, self._watcher("topic_change")))
        new_topics = sorted(topics - ctx.all_topics)
        gone = sorted(ctx.all_topics - topics)
        for t in gone:
            ctx.remove_topic(t)
            self._watched_topics.discard(t)
        if not new_topics:
            return
        loaded = await self._load_topics(new_topics)
        partitions = [tp for t in loaded for tp in ctx.partitions_for_topic(t)]
        log.info("controller %d: new topics %s with %d partitions", self.broker_id, loaded, len(partitions))
        if partitions:
            await self.partition_state_machine.on_new_partition_creation(partitions)

    async def _process_partition_modification(self, topic: str) -> None:
        ctx = self.context
        self._watched_topics.discard(topic)
        ta = await self._zk(self.zk.get_topic_assignment, topic, self._watcher("partition_modification", topic))
        if ta is None:
            return
        self._watched_topics.add(topic)
        if topic not in ctx.all_topics:
            return  # the topic-change event will load it
        added = sorted(p for p in ta.partitions if (topic, p) not in ctx.assignments)
        if not added:
            return
        if ctx.is_topic_queued_for_deletion(topic):
            log.info("controller %d: skipping new partitions %s of %s: the topic is being deleted", self.broker_id,
                     added, topic)
            return
        for p in added:
            ctx.assignments[(topic, p)] = ta.partitions[p]
        log.info("controller %d: topic %s gained partitions %s", self.broker_id, topic, added)
        await self.partition_state_machine.on_new_partition_creation([(topic, p) for p in added])

    # ------------------------------------------------------------------------------------------
    # ISR change notifications and config changes

    async def _process_isr_change(self) -> None:
        names = await self._zk(self.zk.get_isr_change_notifications, self._watcher("isr_change"))
        if names:
            await self._apply_isr_changes(names)

    async def _apply_isr_changes(self, names: list[str]) -> None:
        ctx = self.context
        partitions = await self._zk(self.zk.get_partitions_from_isr_changes, names)
        known = [tp for tp in partitions if tp in ctx.assignments]
        if known:
            states = await self._zk(self.zk.get_partition_states, known)
            ctx.leadership.update(states)
            self._add_update_metadata(ctx.live_or_shutting_down_broker_ids, list(states))
        await self._zk(self.zk.delete_isr_change_notifications, names, ctx.epoch_zk_version)

    async def _process_config_change(self) -> None:
        ctx = self.context
        names = await self._zk(self.zk.get_config_change_notifications, self._watcher("config_change"))
        fresh = [n for n in names if self._last_config_change is None or n > self._last_config_change]
        if not fresh:
            return
        self._last_config_change = fresh[-1]
        topics: set[str] = set()
        all_topics = False
        for n in fresh:
            entity, _ = await self._zk(self.zk.read_config_change_notification, n)
            if entity is None:
                continue
            etype, name = entity
            if etype == zd.CONFIG_TYPE_TOPIC:
                topics.add(name)
            elif etype == zd.CONFIG_TYPE_BROKER:
                all_topics = True
        # unclean.leader.election.enable may have been switched on: retry offline partitions.
        offline = [tp for tp in ctx.partitions_in_states(PartitionState.OFFLINE)
                   if (all_topics or tp[0] in topics) and not ctx.is_topic_queued_for_deletion(tp[0])]
        if offline:
            await self.partition_state_machine.trigger_online_partition_state_change(offline)

    # ==========================================================================================
    # AlterPartition (controller/alter_partition.py)

    async def handle_alter_partition(self, request: Struct) -> Struct:
        return await self.alter_partition.handle_alter_partition(request)

    # ==========================================================================================
    # Controlled shutdown (controller/leader_balance.py)

    async def handle_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Struct:
        return await self.leader_balance.handle_controlled_shutdown(broker_id, broker_epoch)

    # ==========================================================================================
    # Leader elections on request (controller/leader_balance.py)

    async def elect_leaders(self, election_type: int = ELECTION_PREFERRED,
                            partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, tuple[int, str | None]]:
        return await self.leader_balance.elect_leaders(election_type, partitions)

    async def handle_elect_leaders(self, request: Struct) -> Struct:
        return await self.leader_balance.handle_elect_leaders(request)

    def imbalanced_partitions(self) -> dict[int, list[TopicPartition]]:
        return self.leader_balance.imbalanced_partitions()

    # ==========================================================================================
    # Partition reassignment (controller/reassignment.py)

    async def alter_partition_reassignments(
            self, reassignments: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, tuple[int, str | None]]:
        """Start (target replica list) or cancel (None) reassignments. Per partition: (error, message)."""
        return await self.reassignments.alter_partition_reassignments(reassignments)

    async def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, ReplicaAssignment]:
        return await self.reassignments.list_partition_reassignments(partitions)

    async def handle_alter_partition_reassignments(self, request: Struct) -> Struct:
        """AlterPartitionReassignments request body -> response body."""
        return await self.reassignments.handle_alter_partition_reassignments(request)

    async def handle_list_partition_reassignments(self, request: Struct) -> Struct:
        return await self.reassignments.handle_list_partition_reassignments(request)

    # ==========================================================================================
    # Introspection

    def describe(self) -> dict[str, Any]:
        ctx = self.context
        return {
            "broker_id": self.broker_id,
            "active": self._active,
            "epoch": ctx.epoch if self._active else -1,
            "live_brokers": sorted(ctx.live_brokers),
            "shutting_down": sorted(ctx.shutting_down_broker_ids),
            "topics": len(ctx.all_topics),
            "partitions": len(ctx.assignments),
            "offline_partitions": ctx.offline_partition_count(),
            "preferred_replica_imbalance": ctx.preferred_replica_imbalance_count(),
            "topics_to_delete": sorted(ctx.topics_to_delete),
            "stats": vars(self.stats).copy(),
        }
