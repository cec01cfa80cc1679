"""The classic-protocol group coordinator: consumer group membership, rebalances and committed offsets.

A broker is the coordinator of every group whose ``__consumer_offsets`` partition it leads
(``partition_for``). The coordinator keeps each group's state in memory (``broker/group_metadata.py``)
and makes it durable by appending Kafka-format records (``broker/offsets_topic_format.py``) to that
partition: one group metadata record after every completed rebalance or membership change, one
offset commit record per committed partition, tombstones for deleted or expired offsets and groups.
When the broker becomes leader of a partition, ``load_partition`` rebuilds the state of its groups
by reading the partition from the start; when it stops leading it, ``unload_partition`` drops them.

The behaviour is Apache Kafka's classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
OffsetCommit/OffsetFetch and the admin APIs):

* JoinGroup v4+ first answers MEMBER_ID_REQUIRED with a fresh member id (KIP-394); static members
  (``group.instance.id``, KIP-345) get a new member id on every join, fencing the previous holder
  (FENCED_INSTANCE_ID), and rejoin a Stable group without a rebalance when their protocol allows.
* A rebalance waits up to the rebalance timeout for every member to rejoin; members that do not are
  dropped. The first rebalance of an empty group waits ``group.initial.rebalance.delay.ms``, extended
  by the same delay whenever a new member arrives, up to the rebalance timeout.
* After the join phase, the leader's SyncGroup assignment is written to the log and then handed to
  every member; members that do not send SyncGroup within the rebalance timeout are dropped.
* Members that miss heartbeats for their session timeout are removed, which triggers a rebalance.
* Offsets of groups that are empty (or never used group management) expire
  ``offsets.retention.minutes`` after the group emptied or after their commit (KIP-211).

Timers run on the event loop (``loop.call_later``): they play the role of Kafka's heartbeat and
rebalance purgatories, each operation completing early on its event or on its deadline.

The partition log is abstracted as ``OffsetsLog``; the broker wires it to the replica manager.
Every public ``handle_*`` coroutine takes a decoded request body and its version and returns the
response body built with the compiled message type of that version.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from broker.group_metadata import (
    GROUP_TYPE_CLASSIC,
    CommitRecord,
    GroupMetadata,
    GroupState,
    IllegalGroupStateError,
    JoinResult,
    MemberMetadata,
    OffsetAndMetadata,
    SyncResult,
    TopicPartition,
)
from broker.offsets_topic_format import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from broker.offsets_topic_format import partition_for as _partition_for
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type
from protocol.schema import Struct

log = logging.getLogger(__name__)

E = ErrorCode
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
INVALID_OFFSET = -1
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
_LOAD_YIELD_EVERY = 1000  # records between yields to the event loop while loading a partition


# ------------------------------------------------------------------------------------------------
# The log and the configuration


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One record read back from a ``__consumer_offsets`` partition.

    ``control`` is None for data records, ``"commit"`` or ``"abort"`` for a transaction marker (then
    ``key``/``value`` are unused). ``producer_id``/``transactional`` are those of the record's batch.
    """

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    transactional: bool = False
    control: str | None = None


@runtime_checkable
class OffsetsLog(Protocol):
    """What the coordinator needs from the ``__consumer_offsets`` partitions this broker leads.

    ``append`` writes the records as one batch (``records`` are ``(key, value)``, value None for a
    tombstone; a transactional batch when ``transactional``) and returns the offset of its first
    record once the write is durable as ``required_acks`` asks (-1: the whole ISR, like acks=all).
    It must take its place in the log before its first ``await``, so that appends land in call
    order. It raises on failure; an exception with a Kafka error code in ``.code`` (``KafkaError``)
    or ``.error_code`` is mapped as Kafka maps append errors (NOT_ENOUGH_REPLICAS ->
    COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR, ...).

    ``read_all`` yields the partition's records from its log start to its end, in offset order, as
    ``LogEntry``s or plain ``(offset, key, value)`` tuples (data records outside transactions).
    It may be a plain or an async iterable.
    """

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
               producer_epoch: int = -1, transactional: bool = False, required_acks: int = -1) -> Awaitable[int]:
        ...

    def read_all(self, partition: int) -> Iterable[LogEntry | tuple[int, bytes | None, bytes | None]] | AsyncIterable[Any]:
        ...


@dataclass(slots=True)
class GroupCoordinatorConfig:
    """The broker configs the coordinator reads (Kafka's names and defaults)."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2_147_483_647
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 10_080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    offsets_topic_num_partitions: int = 50
    offsets_commit_required_acks: int = -1

    _NAMES = {
        "group.min.session.timeout.ms": "group_min_session_timeout_ms",
        "group.max.session.timeout.ms": "group_max_session_timeout_ms",
        "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
        "group.max.size": "group_max_size",
        "offset.metadata.max.bytes": "offset_metadata_max_bytes",
        "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
        "offsets.topic.num.partitions": "offsets_topic_num_partitions",
        "offsets.commit.required.acks": "offsets_commit_required_acks",
    }

    @classmethod
    def from_config(cls, config: Any) -> GroupCoordinatorConfig:
        """From a ``BrokerConfig`` (anything with ``.get(name)``) or a plain mapping of Kafka names."""
        out = cls()

        def get(name: str) -> Any:
            try:
                return config.get(name)
            except KeyError:
                return None

        for name, attr in cls._NAMES.items():
            v = get(name)
            if v is not None:
                setattr(out, attr, int(v))
        minutes = get("offsets.retention.minutes")
        if minutes is not None:
            out.offsets_retention_ms = int(minutes) * 60_000
        return out


# ------------------------------------------------------------------------------------------------
# Error mapping


def _error_code_of(exc: BaseException) -> int:
    for attr in ("code", "error_code"):
        v = getattr(exc, attr, None)
        if isinstance(v, int):
            return int(v)
    return int(E.UNKNOWN_SERVER_ERROR)


def _convert_offset_commit_error(code: int) -> int:
    """How Kafka reports a failed ``__consumer_offsets`` append of offsets to the committer."""
    if code == E.NETWORK_EXCEPTION:
        return E.COORDINATOR_LOAD_IN_PROGRESS
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    return code


def _convert_store_group_error(code: int) -> int:
    """How Kafka reports a failed append of group metadata to the group's members."""
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code == E.REQUEST_TIMED_OUT:
        return E.REBALANCE_IN_PROGRESS
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    return code


# ------------------------------------------------------------------------------------------------
# Delayed operations hung on a group


@dataclass(slots=True)
class _JoinOp:
    """The join phase of a rebalance: completes when every member rejoined, or at its deadline.

    An initial join (the first rebalance of an empty group) never completes early; at its deadline
    it extends itself while new members keep arriving and rebalance time remains.
    """

    initial: bool
    delay_ms: int
    remaining_ms: int = 0
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class _SyncOp:
    """The sync phase: members that have not sent SyncGroup by the deadline are removed."""

    generation: int
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class GroupView:
    """A read-only summary of one group, for metrics (consumer lag) and tools."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str | None
    generation: int
    members: int
    offsets: dict[TopicPartition, int] = field(default_factory=dict)


def _normalize_host(host: str) -> str:
    # Kafka reports a member's host as Java's InetAddress.toString(), e.g. "/127.0.0.1".
    return host if host.startswith("/") else "/" + host


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


class GroupCoordinator:
    """The group coordinator of one broker."""

    def __init__(self, offsets_log: OffsetsLog, config: Any = None, *, num_partitions: int | None = None,
                 broker_id: int = 0, time_ms: Callable[[], int] | None = None,
                 topic_exists: Callable[[str, int], bool] | None = None) -> None:
        """``config``: a ``GroupCoordinatorConfig``, a ``BrokerConfig`` or a mapping of Kafka config names.

        ``num_partitions``: the partition count of ``__consumer_offsets`` (default: the config's
        ``offsets.topic.num.partitions``). ``topic_exists(topic, partition)``: the metadata cache
        check that OffsetCommit, TxnOffsetCommit and OffsetDelete apply before reaching the group
        (UNKNOWN_TOPIC_OR_PARTITION); None skips it. ``time_ms``: wall clock in ms (tests).
        """
        if config is None:
            cfg = GroupCoordinatorConfig()
        elif isinstance(config, GroupCoordinatorConfig):
            cfg = config
        else:
            cfg = GroupCoordinatorConfig.from_config(config)
        self.config = cfg
        self.num_partitions = num_partitions if num_partitions is not None else cfg.offsets_topic_num_partitions
        self.broker_id = broker_id
        self._log = offsets_log
        self._time_ms = time_ms or (lambda: int(time.time() * 1000))
        self._topic_exists = topic_exists
        self._groups: dict[str, GroupMetadata] = {}
        self._owned: set[int] = set()
        self._loading: set[int] = set()
        self._epochs: dict[int, int] = {}
        self._load_tokens: dict[int, object] = {}
        self._producer_groups: dict[int, set[str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._expiry_task: asyncio.Task[None] | None = None
        self._active = True
        # Hook for pending transactional state the transaction coordinator tracks outside of the
        # groups (OffsetFetch require_stable); the groups' own pending offsets are always checked.
        self.has_pending_txn_offsets: Callable[[str, TopicPartition], bool] | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the periodic offset expiration."""
        self._active = True
        if self._expiry_task is None:
            self._expiry_task = asyncio.get_running_loop().create_task(self._expiry_loop())

    async def close(self) -> None:
        self._active = False
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            try:
                await self._expiry_task
            except asyncio.CancelledError:
                pass
            self._expiry_task = None
        for partition in list(self._owned | self._loading):
            self.unload_partition(partition)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _expiry_loop(self) -> None:
        interval = max(self.config.offsets_retention_check_interval_ms, 1) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("offset expiration failed")

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _now(self) -> int:
        return self._time_ms()

    @staticmethod
    def _call_later(delay_ms: float, fn: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, fn, *args)

    # -- partitions ------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return _partition_for(group_id, self.num_partitions)

    def is_loaded(self, partition: int) -> bool:
        return partition in self._owned and partition not in self._loading

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._owned)

    def _maybe_update_epoch(self, partition: int, epoch: int | None) -> bool:
        current = self._epochs.get(partition)
        if epoch is None:
            return True
        if current is None or epoch > current:
            self._epochs[partition] = epoch
            return True
        return epoch == current

    async def load_partition(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Become coordinator for ``partition``: read it from the start and rebuild its groups.

        Until loading finishes its groups answer COORDINATOR_LOAD_IN_PROGRESS.
        """
        if not self._maybe_update_epoch(partition, coordinator_epoch):
            log.info("not loading __consumer_offsets-%d for stale epoch %s", partition, coordinator_epoch)
            return
        if partition in self._loading or partition in self._owned:
            return  # already loading, or loaded and still ours
        self._loading.add(partition)
        token = object()
        self._load_tokens[partition] = token
        start = time.monotonic()
        try:
            await self._do_load(partition, token)
        except asyncio.CancelledError:
            if self._load_tokens.get(partition) is token:
                self._loading.discard(partition)
            raise
        except Exception:
            log.exception("error loading __consumer_offsets-%d", partition)
        if self._load_tokens.get(partition) is token:
            self._owned.add(partition)
            self._loading.discard(partition)
            log.info("loaded __consumer_offsets-%d in %.0f ms", partition, (time.monotonic() - start) * 1000)

    async def _iter_log(self, partition: int) -> Any:
        source = self._log.read_all(partition)
        n = 0
        if hasattr(source, "__aiter__"):
            async for entry in source:  # type: ignore[union-attr]
                yield entry
            return
        for entry in source:  # type: ignore[union-attr]
            yield entry
            n += 1
            if n % _LOAD_YIELD_EVERY == 0:
                await asyncio.sleep(0)

    async def _do_load(self, partition: int, token: object) -> None:
        loaded_offsets: dict[tuple[str, TopicPartition], CommitRecord] = {}
        pending: dict[int, dict[tuple[str, TopicPartition], CommitRecord]] = {}
        loaded_groups: dict[str, GroupMetadataValue] = {}
        removed_groups: set[str] = set()

        async for raw in self._iter_log(partition):
            if self._load_tokens.get(partition) is not token:
                return  # unloaded meanwhile
            entry = raw if isinstance(raw, LogEntry) else LogEntry(raw[0], raw[1], raw[2])
            if entry.control is not None:
                if entry.control == "commit":
                    for gtp, rec in pending.get(entry.producer_id, {}).items():
                        cur = loaded_offsets.get(gtp)
                        if cur is None or cur.older_than(rec):
                            loaded_offsets[gtp] = rec
                pending.pop(entry.producer_id, None)
                continue
            if entry.key is None:
                log.warning("__consumer_offsets-%d offset %d: record without key skipped", partition, entry.offset)
                continue
            try:
                key = decode_key(entry.key)
                if isinstance(key, OffsetCommitKey):
                    gtp = (key.group, (key.topic, key.partition))
                    txn = entry.transactional
                    if txn:
                        pending.setdefault(entry.producer_id, {})
                    value = decode_offset_commit_value(entry.value)
                    if value is None:
                        if txn:
                            pending[entry.producer_id].pop(gtp, None)
                        else:
                            loaded_offsets.pop(gtp, None)
                    else:
                        rec = CommitRecord(entry.offset, OffsetAndMetadata(
                            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                            None if value.expire_timestamp == -1 else value.expire_timestamp))
                        if txn:
                            pending[entry.producer_id][gtp] = rec
                        else:
                            loaded_offsets[gtp] = rec
                elif isinstance(key, GroupMetadataKey):
                    gvalue = decode_group_metadata_value(entry.value)
                    if gvalue is None:
                        loaded_groups.pop(key.group, None)
                        removed_groups.add(key.group)
                    else:
                        removed_groups.discard(key.group)
                        loaded_groups[key.group] = gvalue
                else:
                    log.warning("__consumer_offsets-%d offset %d: unknown key version %d skipped",
                                partition, entry.offset, key.version)
            except OffsetsFormatError as e:
                log.warning("__consumer_offsets-%d offset %d: unreadable record skipped: %s",
                            partition, entry.offset, e)

        if self._load_tokens.get(partition) is not token:
            return
        offsets_by_group: dict[str, dict[TopicPartition, CommitRecord]] = {}
        for (gid, tp), rec in loaded_offsets.items():
            offsets_by_group.setdefault(gid, {})[tp] = rec
        pending_by_group: dict[str, dict[int, dict[TopicPartition, CommitRecord]]] = {}
        for pid, recs in pending.items():
            for (gid, tp), rec in recs.items():
                self._producer_groups.setdefault(pid, set()).add(gid)
                pending_by_group.setdefault(gid, {}).setdefault(pid, {})[tp] = rec

        now = self._now()
        for gid in list(loaded_groups) + [g for g in {**offsets_by_group, **pending_by_group}
                                           if g not in loaded_groups]:
            if gid in loaded_groups:
                group = self._group_from_value(gid, loaded_groups[gid], now)
            else:
                group = GroupMetadata(gid, GroupState.EMPTY, now)
            group.initialize_offsets(offsets_by_group.get(gid, {}), pending_by_group.get(gid, {}))
            if gid in self._groups:
                log.debug("group %s already cached; the loaded copy is dropped", gid)
                continue
            self._groups[gid] = group
            self._on_group_loaded(group)

    def _group_from_value(self, group_id: str, value: GroupMetadataValue, now: int) -> GroupMetadata:
        group = GroupMetadata(group_id, GroupState.STABLE if value.members else GroupState.EMPTY, now)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.current_state_timestamp = None if value.current_state_timestamp == -1 else value.current_state_timestamp
        for m in value.members:
            member = MemberMetadata(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout if m.rebalance_timeout != -1 else m.session_timeout, m.session_timeout,
                value.protocol_type, [(value.protocol or "", m.subscription)], m.assignment)
            group.add(member)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        log.info("loaded group %s generation %d (%s)", group.group_id, group.generation_id, group.state.value)
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(group, f"loaded group is over capacity ({self.config.group_max_size})")
        for member in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat(group, member)

    def unload_partition(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Stop coordinating ``partition``: its groups go Dead and waiting members get NOT_COORDINATOR."""
        if not self._maybe_update_epoch(partition, coordinator_epoch):
            log.info("not unloading __consumer_offsets-%d for stale epoch %s", partition, coordinator_epoch)
            return
        self._owned.discard(partition)
        self._loading.discard(partition)
        self._load_tokens[partition] = object()
        removed = 0
        for gid, group in list(self._groups.items()):
            if self.partition_for(gid) == partition:
                self._on_group_unloaded(group)
                del self._groups[gid]
                for groups in self._producer_groups.values():
                    groups.discard(gid)
                removed += 1
        log.info("unloaded __consumer_offsets-%d: %d groups", partition, removed)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(GroupState.DEAD, self._now())
        if previous is GroupState.PREPARING_REBALANCE:
            for member in list(group.members.values()):
                group.maybe_invoke_join_callback(member, JoinResult(member.member_id, E.NOT_COORDINATOR))
        elif previous in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            for member in list(group.members.values()):
                group.maybe_invoke_sync_callback(member, SyncResult(E.NOT_COORDINATOR))
        self._cancel_group_timers(group)

    def _cancel_group_timers(self, group: GroupMetadata) -> None:
        for member in group.members.values():
            member.cancel_heartbeat()
        for handle in group.pending_member_timers.values():
            handle.cancel()
        group.pending_member_timers.clear()
        self._cancel_join_op(group)
        self._remove_sync_expiration(group)

    # -- validation ------------------------------------------------------------------------------

    def _validate_group_status(self, group_id: str | None, api: ApiKey) -> int | None:
        if api in (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS):
            valid = group_id is not None
        else:
            valid = bool(group_id)
        if not valid:
            return E.INVALID_GROUP_ID
        if not self._active:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)  # type: ignore[arg-type]
        if partition in self._loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return E.NOT_COORDINATOR
        return None

    def _group_not_exists(self, group_id: str) -> bool:
        if self.partition_for(group_id) not in self._owned:
            return False
        group = self._groups.get(group_id)
        return group is None or group.is_state(GroupState.DEAD)

    @staticmethod
    def _validate_current_member(group: GroupMetadata, member_id: str, instance_id: str | None,
                                 operation: str) -> int | None:
        if instance_id is not None:
            current = group.current_static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("group %s: %s by %s fenced: instance %s belongs to %s", group.group_id, operation,
                         member_id, instance_id, current)
                return E.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        return None

    # -- heartbeat timers --------------------------------------------------------------------------

    def _complete_and_schedule_next_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                                              timeout_ms: int | None = None) -> None:
        member.heartbeat_satisfied = True
        member.cancel_heartbeat()
        member.heartbeat_satisfied = False
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self._call_later(timeout, self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_state(GroupState.DEAD) or group.members.get(member.member_id) is not member:
            return
        if not member.has_satisfied_heartbeat():
            log.info("group %s: member %s failed its session timeout, removing it", group.group_id, member.member_id)
            self._remove_member_and_update_group(group, member, "session timeout")

    def _add_pending_member_expiration(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        old = group.pending_member_timers.pop(member_id, None)
        if old is not None:
            old.cancel()
        group.pending_member_timers[member_id] = self._call_later(
            timeout_ms, self._on_pending_member_expired, group, member_id)

    def _cancel_pending_member_expiration(self, group: GroupMetadata, member_id: str) -> None:
        handle = group.pending_member_timers.pop(member_id, None)
        if handle is not None:
            handle.cancel()

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_member_timers.pop(member_id, None)
        if group.is_state(GroupState.DEAD) or group.has(member_id):
            return
        if group.is_pending_member(member_id):
            log.info("group %s: pending member %s never joined, removed", group.group_id, member_id)
            self._remove_pending_member_and_update_group(group, member_id)

    # -- rebalance: join phase ---------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_state(GroupState.EMPTY)
        delay = self.config.group_initial_rebalance_delay_ms
        group.transition_to(GroupState.PREPARING_REBALANCE, self._now())
        log.info("group %s: preparing to rebalance (generation %d, partition %d): %s", group.group_id,
                 group.generation_id, self.partition_for(group.group_id), reason)
        if initial:
            self._start_join_op(group, _JoinOp(True, delay, max(group.rebalance_timeout_ms() - delay, 0)))
        else:
            self._start_join_op(group, _JoinOp(False, group.rebalance_timeout_ms()))
            self._try_complete_join(group)

    def _start_join_op(self, group: GroupMetadata, op: _JoinOp) -> None:
        self._cancel_join_op(group)
        group.join_op = op
        op.timer = self._call_later(op.delay_ms, self._on_join_deadline, group, op)

    def _cancel_join_op(self, group: GroupMetadata) -> None:
        op = group.join_op
        if op is not None:
            if op.timer is not None:
                op.timer.cancel()
            group.join_op = None

    def _try_complete_join(self, group: GroupMetadata) -> None:
        op = group.join_op
        if op is not None and not op.initial and group.has_all_members_joined():
            self._cancel_join_op(group)
            self._on_complete_join(group)

    def _on_join_deadline(self, group: GroupMetadata, op: _JoinOp) -> None:
        if group.join_op is not op:
            return
        op.timer = None
        group.join_op = None
        if op.initial and group.new_member_added and op.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, op.remaining_ms)
            remaining = max(op.remaining_ms - op.delay_ms, 0)
            self._start_join_op(group, _JoinOp(True, delay, remaining))
            return
        self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                log.info("group %s: member %s did not rejoin in time, removed", group.group_id, member.member_id)
                self._remove_member(group, member)
        if group.is_state(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout while session timeouts clear the group.
            log.warning("group %s: no member rejoined, the rebalance waits longer", group.group_id)
            self._start_join_op(group, _JoinOp(False, group.rebalance_timeout_ms()))
            self._try_complete_join(group)
            return
        group.init_next_generation(self._now())
        if group.is_state(GroupState.EMPTY):
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)

            def on_stored(error: int) -> None:
                if error != E.NONE:
                    log.warning("group %s: writing the empty generation failed with %s", group.group_id,
                                ErrorCode(error).name if error in ErrorCode._value2member_map_ else error)

            self._store_group(group, {}, on_stored)
            return
        log.info("group %s: generation %d with %d members (protocol %s)", group.group_id, group.generation_id,
                 group.size, group.protocol_name)
        all_members = group.current_member_metadata()
        for member in list(group.members.values()):
            is_leader = group.is_leader(member.member_id)
            group.maybe_invoke_join_callback(member, JoinResult(
                member.member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                group.leader_id or "", False, all_members if is_leader else []))
            self._complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Drop a member outright (no rebalance decision here); answers its parked requests."""
        group.remove(member.member_id)
        member.cancel_heartbeat()
        group.maybe_invoke_sync_callback(member, SyncResult(E.UNKNOWN_MEMBER_ID))

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A new member may time out while its JoinGroup is parked: answer it so that it can retry.
        group.maybe_invoke_join_callback(member, JoinResult(UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID))
        self._remove_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        self._cancel_pending_member_expiration(group, member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- rebalance: sync phase ---------------------------------------------------------------------

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self._remove_sync_op(group)
        op = _SyncOp(group.generation_id)
        group.sync_op = op
        op.timer = self._call_later(group.rebalance_timeout_ms(), self._on_sync_deadline, group, op)
        self._maybe_complete_sync_expiration(group)

    def _remove_sync_op(self, group: GroupMetadata) -> None:
        op = group.sync_op
        if op is not None:
            if op.timer is not None:
                op.timer.cancel()
            group.sync_op = None

    def _maybe_complete_sync_expiration(self, group: GroupMetadata) -> None:
        op = group.sync_op
        if op is None:
            return
        if (op.generation != group.generation_id
                or group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
                or group.has_received_sync_from_all_members()):
            self._remove_sync_op(group)

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self._maybe_complete_sync_expiration(group)

    def _on_sync_deadline(self, group: GroupMetadata, op: _SyncOp) -> None:
        if group.sync_op is not op:
            return
        group.sync_op = None
        if op.generation != group.generation_id or group.state not in (
                GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if group.has_received_sync_from_all_members():
            return
        missing = list(group.pending_sync_members)
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
        log.info("group %s: members %s did not send SyncGroup in time, removed", group.group_id, missing)
        self._prepare_rebalance(group, f"removing {missing} on pending sync expiration")

    def _set_and_propagate_assignment(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, E.NONE)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        ok = error == E.NONE
        for member in list(group.members.values()):
            result = SyncResult(error, group.protocol_type if ok else None, group.protocol_name if ok else None,
                                member.assignment)
            if group.maybe_invoke_sync_callback(member, result):
                # Members parked in SyncGroup did not heartbeat meanwhile: restart their session.
                self._complete_and_schedule_next_heartbeat(group, member)

    # -- persistence -----------------------------------------------------------------------------

    def _group_value(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> bytes:
        members = []
        for m in group.members.values():
            if group.protocol_name is None:
                raise IllegalGroupStateError(f"group {group.group_id} has members but no protocol")
            if m.member_id not in assignment:
                raise IllegalGroupStateError(f"member {m.member_id} of {group.group_id} has no assignment")
            members.append(MemberMetadataValue(
                member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                session_timeout=m.session_timeout_ms, subscription=bytes(m.metadata(group.protocol_name)),
                assignment=bytes(assignment[m.member_id]), rebalance_timeout=m.rebalance_timeout_ms,
                group_instance_id=m.group_instance_id))
        return encode_group_metadata_value(GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=group.protocol_name,
            leader=group.leader_id, current_state_timestamp=group.current_state_timestamp_or_default(),
            members=members))

    async def _append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                      producer_epoch: int = -1, transactional: bool = False,
                      required_acks: int | None = None) -> tuple[int, int | None]:
        acks = self.config.offsets_commit_required_acks if required_acks is None else required_acks
        try:
            base = await self._log.append(partition, records, producer_id=producer_id, producer_epoch=producer_epoch,
                                          transactional=transactional, required_acks=acks)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            code = _error_code_of(e)
            log.warning("append to __consumer_offsets-%d failed: %s", partition, e)
            return code, None
        return E.NONE, base

    def _store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes],
                     callback: Callable[[int], None]) -> None:
        """Write the group's metadata record, then call ``callback(error)`` (the value is taken now)."""
        partition = self.partition_for(group.group_id)
        if partition not in self._owned:
            callback(E.NOT_COORDINATOR)
            return
        record = (encode_group_metadata_key(group.group_id), self._group_value(group, assignment))

        async def run() -> None:
            code, _ = await self._append(partition, [record])
            callback(_convert_store_group_error(code) if code != E.NONE else E.NONE)

        self._spawn(run())

    def _metadata_ok(self, metadata: str | None) -> bool:
        return metadata is None or _utf16_len(metadata) <= self.config.offset_metadata_max_bytes

    async def _store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata], *,
                             producer_id: int = -1, producer_epoch: int = -1) -> dict[TopicPartition, int]:
        if not group.has_received_consistent_offset_commits():
            log.warning("group %s receives both consumer and transactional offset commits; mixing them "
                        "gives surprising results", group.group_id)
        valid = {tp: om for tp, om in offsets.items() if self._metadata_ok(om.metadata)}
        if not valid:
            return {tp: E.OFFSET_METADATA_TOO_LARGE for tp in offsets}
        partition = self.partition_for(group.group_id)
        if partition not in self._owned:
            return {tp: E.NOT_COORDINATOR for tp in offsets}
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(group.group_id, tp[0], tp[1]), encode_offset_commit_value(OffsetCommitValue(
                om.offset, om.metadata, om.commit_timestamp, om.leader_epoch,
                -1 if om.expire_timestamp is None else om.expire_timestamp)))
            for tp, om in valid.items()]
        txn = producer_id != -1
        if txn:
            self._producer_groups.setdefault(producer_id, set()).add(group.group_id)
            group.prepare_txn_offset_commit(producer_id, valid)
        else:
            group.prepare_offset_commit(valid)

        async def run() -> int:
            code, base = await self._append(partition, records, producer_id=producer_id,
                                            producer_epoch=producer_epoch, transactional=txn)
            if code == E.NONE:
                if not group.is_state(GroupState.DEAD):
                    for tp, om in valid.items():
                        rec = CommitRecord(base, om)
                        if txn:
                            group.on_txn_offset_commit_append(producer_id, tp, rec)
                        else:
                            group.on_offset_commit_append(tp, rec)
                return E.NONE
            if not group.is_state(GroupState.DEAD):
                for tp, om in valid.items():
                    if txn:
                        group.fail_pending_txn_offset_commit(producer_id, tp)
                    else:
                        group.fail_pending_offset_write(tp, om)
                if txn and not group.has_pending_offset_commits_from_producer(producer_id):
                    self._remove_producer_group(producer_id, group.group_id)
            return _convert_offset_commit_error(code)

        # Shielded: a client that disconnects must not leave the group's pending state half-done.
        error = await asyncio.shield(self._spawn(run()))
        return {tp: (error if tp in valid else E.OFFSET_METADATA_TOO_LARGE) for tp in offsets}

    def _remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self._producer_groups.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self._producer_groups[producer_id]

    async def _cleanup_group_metadata(self, groups: Iterable[GroupMetadata],
                                      selector: Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]]
                                      ) -> int:
        """Remove offsets chosen by ``selector`` (and groups left empty), writing tombstones."""
        removed_total = 0
        now = self._now()
        for group in list(groups):
            removed = selector(group)
            if group.is_state(GroupState.EMPTY) and not group.has_offsets():
                log.info("group %s is now dead (generation %d)", group.group_id, group.generation_id)
                group.transition_to(GroupState.DEAD, now)
            partition = self.partition_for(group.group_id)
            if partition not in self._owned:
                continue
            tombstones: list[tuple[bytes, bytes | None]] = [
                (encode_offset_commit_key(group.group_id, t, p), None) for (t, p) in removed]
            if group.is_state(GroupState.DEAD) and self._groups.get(group.group_id) is group:
                del self._groups[group.group_id]
                # A group that only ever stored offsets (generation 0) never had a metadata record.
                if group.generation_id > 0:
                    tombstones.append((encode_group_metadata_key(group.group_id), None))
            if tombstones:
                # Losing these is harmless: the next expiration pass or a new leader redoes them.
                code, _ = await self._append(partition, tombstones, required_acks=1)
                if code == E.NONE:
                    removed_total += len(removed)
                else:
                    log.warning("group %s: writing %d tombstones failed (%d)", group.group_id, len(tombstones), code)
        return removed_total

    async def expire_offsets(self) -> int:
        """One pass of ``offsets.retention.minutes`` expiration; returns how many offsets went."""
        now = self._now()
        retention = self.config.offsets_retention_ms
        n = await self._cleanup_group_metadata(
            list(self._groups.values()), lambda g: g.remove_expired_offsets(now, retention))
        if n:
            log.info("expired %d offsets", n)
        return n

    async def on_partitions_deleted(self, tps: Iterable[TopicPartition]) -> int:
        """Forget committed offsets of deleted topic partitions (topic deletion calls this)."""
        tps = list(tps)
        return await self._cleanup_group_metadata(list(self._groups.values()), lambda g: g.remove_offsets(tps))

    def complete_pending_txn_offsets(self, producer_id: int, commit: bool,
                                     partitions: Iterable[int] | None = None) -> None:
        """A transaction marker for ``producer_id`` was written to ``partitions`` (None: all of ours).

        On commit the producer's pending offsets become the groups' committed offsets (unless a
        newer plain commit exists); on abort they are dropped.
        """
        parts = None if partitions is None else set(partitions)
        for group_id in list(self._producer_groups.get(producer_id, ())):
            if parts is not None and self.partition_for(group_id) not in parts:
                continue
            group = self._groups.get(group_id)
            if group is not None and not group.is_state(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, commit)
                self._remove_producer_group(producer_id, group_id)

    def group_lag_view(self) -> list[GroupView]:
        """Committed offsets of every group this broker coordinates (the lag exporter subtracts them)."""
        return [GroupView(g.group_id, g.state.value, g.protocol_type or "", g.protocol_name, g.generation_id,
                          g.size, {tp: om.offset for tp, om in g.all_offsets().items()})
                for g in self._groups.values() if not g.is_state(GroupState.DEAD)]

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self._groups.get(group_id)

    # ============================================================================================
    # JoinGroup

    async def handle_join_group(self, req: Struct, version: int, client_id: str | None, client_host: str) -> Struct:
        r: Any = req
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[JoinResult] = loop.create_future()

        def callback(result: JoinResult) -> None:
            if not fut.done():
                fut.set_result(result)

        session_timeout = r.session_timeout_ms
        rebalance_timeout = session_timeout if version == 0 else r.rebalance_timeout_ms
        instance_id = r.group_instance_id if version >= 5 else None
        protocols = [(p.name, bytes(p.metadata)) for p in r.protocols]
        if r.reason:
            log.debug("group %s: JoinGroup from %s, reason: %s", r.group_id, r.member_id, r.reason)
        self._join_group(r.group_id, r.member_id, instance_id, version >= 4 and instance_id is None, version >= 9,
                         client_id or "", _normalize_host(client_host), rebalance_timeout, session_timeout,
                         r.protocol_type, protocols, callback)
        result = await fut
        return self._join_response(result, version)

    @staticmethod
    def _join_response(result: JoinResult, version: int) -> Struct:
        mt: Any = response_type(ApiKey.JOIN_GROUP)
        protocol_name = result.protocol_name
        if version < 7 and protocol_name is None:
            protocol_name = ""
        elif version >= 7 and protocol_name == "":
            protocol_name = None
        return mt(error_code=int(result.error), generation_id=result.generation_id,
                  protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader_id,
                  skip_assignment=result.skip_assignment, member_id=result.member_id,
                  members=[mt.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
                           for m, i, meta in result.members])

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        state = group.state
        if state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if state is GroupState.PREPARING_REBALANCE:
            return ((group.has(member_id) and group.get(member_id).is_awaiting_join)
                    or group.num_awaiting < self.config.group_max_size)
        return group.has(member_id) or group.size < self.config.group_max_size

    def _join_group(self, group_id: str, member_id: str, instance_id: str | None, require_known_member_id: bool,
                    support_skip_assignment: bool, client_id: str, client_host: str, rebalance_timeout_ms: int,
                    session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                    callback: Callable[[JoinResult], None]) -> None:
        error = self._validate_group_status(group_id, ApiKey.JOIN_GROUP)
        if error is not None:
            callback(JoinResult(member_id, error))
            return
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            callback(JoinResult(member_id, E.INVALID_SESSION_TIMEOUT))
            return
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(group_id)
        if group is None:
            if not is_unknown:
                callback(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))
                return
            group = GroupMetadata(group_id, GroupState.EMPTY, self._now())
            self._groups[group_id] = group
        if not self._accept_joining_member(group, member_id):
            removed = group.remove(member_id)
            if removed is not None:
                removed.cancel_heartbeat()
            callback(JoinResult(UNKNOWN_MEMBER_ID, E.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._new_member_join(group, instance_id, require_known_member_id, support_skip_assignment, client_id,
                                  client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                  callback)
        else:
            self._current_member_join(group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                      session_timeout_ms, protocol_type, protocols, callback)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _new_member_join(self, group: GroupMetadata, instance_id: str | None, require_known_member_id: bool,
                         support_skip_assignment: bool, client_id: str, client_host: str, rebalance_timeout_ms: int,
                         session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                         callback: Callable[[JoinResult], None]) -> None:
        if group.is_state(GroupState.DEAD):
            callback(JoinResult(UNKNOWN_MEMBER_ID, E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, [p for p, _ in protocols]):
            callback(JoinResult(UNKNOWN_MEMBER_ID, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = group.generate_member_id(client_id, instance_id)
        if instance_id is not None:
            old_member_id = group.current_static_member_id(instance_id)
            if old_member_id is not None:
                log.info("group %s: static member %s rejoins with a new member id %s (replacing %s)",
                         group.group_id, instance_id, new_member_id, old_member_id)
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, instance_id, protocols,
                                                         rebalance_timeout_ms, session_timeout_ms, callback,
                                                         support_skip_assignment)
            else:
                self._add_member_and_rebalance(group, new_member_id, instance_id, client_id, client_host,
                                               rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                               callback)
        elif require_known_member_id:
            # KIP-394: hand out the member id and make the client come back with it.
            group.add_pending_member(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, session_timeout_ms)
            callback(JoinResult(new_member_id, E.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_member_id, None, client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, callback)

    def _current_member_join(self, group: GroupMetadata, member_id: str, instance_id: str | None, client_id: str,
                             client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                             protocol_type: str, protocols: list[tuple[str, bytes]],
                             callback: Callable[[JoinResult], None]) -> None:
        if group.is_state(GroupState.DEAD):
            callback(JoinResult(member_id, E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, [p for p, _ in protocols]):
            callback(JoinResult(member_id, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if instance_id is not None:
                # Pending members are dynamic by construction; a static id here is a confused client.
                callback(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))
                return
            self._add_member_and_rebalance(group, member_id, None, client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, callback)
            return
        error = self._validate_current_member(group, member_id, instance_id, "join-group")
        if error is not None:
            callback(JoinResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              callback, "member rejoining during PreparingRebalance")
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # Probably a retry after a lost JoinGroup response: answer with the current generation.
                callback(JoinResult(member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                                    group.leader_id or "", False,
                                    group.current_member_metadata() if group.is_leader(member_id) else []))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, callback, "member metadata changed")
        elif state is GroupState.STABLE:
            if group.is_leader(member_id):
                # The leader rejoins to make the group rebalance (e.g. its topics' metadata changed).
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, callback, "leader rejoining")
            elif not member.matches(protocols):
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, callback, "member metadata changed")
            else:
                callback(JoinResult(member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                                    group.leader_id or "", False, []))
        else:
            log.warning("group %s: member %s rejoins a group in state %s", group.group_id, member_id, state.value)
            callback(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                                  client_id: str, client_host: str, rebalance_timeout_ms: int,
                                  session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                                  callback: Callable[[JoinResult], None]) -> None:
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, protocols)
        member.is_new = True
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        self._cancel_pending_member_expiration(group, member_id)
        # A new member cannot heartbeat before its first join response; a parked JoinGroup of a client
        # that went away must not hold the rebalance forever, so new members get a join deadline.
        self._complete_and_schedule_next_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"new member {member_id} (instance {instance_id}) joined")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, callback: Callable[[JoinResult], None],
                                     reason: str) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, f"{reason} ({member.member_id})")

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                            instance_id: str, protocols: list[tuple[str, bytes]],
                                            rebalance_timeout_ms: int, session_timeout_ms: int,
                                            callback: Callable[[JoinResult], None],
                                            support_skip_assignment: bool) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._complete_and_schedule_next_heartbeat(group, member)
        old_protocols = member.supported_protocols
        old_rebalance_timeout, old_session_timeout = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol next generation: persist the new member id, no rebalance.
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def on_stored(error: int) -> None:
                    if error != E.NONE:
                        log.warning("group %s: persisting static member %s failed (%d); reverting",
                                    group.group_id, instance_id, error)
                        group.update_member(member, old_protocols, old_rebalance_timeout, old_session_timeout, None)
                        if group.has(new_member_id):
                            old = group.replace_static_member(instance_id, new_member_id, old_member_id)
                            self._complete_and_schedule_next_heartbeat(group, old)
                        callback(JoinResult(UNKNOWN_MEMBER_ID, error, group.generation_id, group.protocol_type,
                                            group.protocol_name, current_leader))
                    elif support_skip_assignment:
                        # JoinGroup v9+: a static leader learns it leads but must not run the assignor.
                        is_leader = group.is_leader(new_member_id)
                        group.maybe_invoke_join_callback(member, JoinResult(
                            new_member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                            group.leader_id or "", is_leader,
                            group.current_member_metadata() if is_leader else []))
                    else:
                        # Older clients: report the old leader id so the rejoining member never thinks it
                        # must assign (a Stable group would ignore that assignment anyway).
                        group.maybe_invoke_join_callback(member, JoinResult(
                            new_member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                            current_leader, False, []))

                self._store_group(group, assignment, on_stored)
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} rejoined with a protocol change")
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may be assigning for the old member id: start over.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        elif state is GroupState.PREPARING_REBALANCE:
            pass
        else:
            raise IllegalGroupStateError(f"static member {instance_id} rejoined group {group.group_id} "
                                         f"in state {state.value}")

    # ============================================================================================
    # SyncGroup

    async def handle_sync_group(self, req: Struct, version: int, client_id: str | None = None,
                                client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.SYNC_GROUP)
        if version >= 5 and (r.protocol_type is None or r.protocol_name is None):
            return mt(error_code=E.INCONSISTENT_GROUP_PROTOCOL, assignment=b"")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[SyncResult] = loop.create_future()

        def callback(result: SyncResult) -> None:
            if not fut.done():
                fut.set_result(result)

        assignment: dict[str, bytes] = {}
        for a in r.assignments:
            assignment[a.member_id] = bytes(a.assignment)
        instance_id = r.group_instance_id if version >= 3 else None
        protocol_type = r.protocol_type if version >= 5 else None
        protocol_name = r.protocol_name if version >= 5 else None
        self._sync_group(r.group_id, r.generation_id, r.member_id, protocol_type, protocol_name, instance_id,
                         assignment, callback)
        result = await fut
        return mt(error_code=int(result.error), protocol_type=result.protocol_type,
                  protocol_name=result.protocol_name, assignment=result.assignment)

    def _sync_group(self, group_id: str, generation: int, member_id: str, protocol_type: str | None,
                    protocol_name: str | None, instance_id: str | None, assignment: dict[str, bytes],
                    callback: Callable[[SyncResult], None]) -> None:
        error = self._validate_group_status(group_id, ApiKey.SYNC_GROUP)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the old coordinator; make the member rejoin.
            callback(SyncResult(E.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncResult(error))
            return
        group = self._groups.get(group_id)
        if group is None:
            callback(SyncResult(E.UNKNOWN_MEMBER_ID))
            return
        if group.is_state(GroupState.DEAD):
            callback(SyncResult(E.COORDINATOR_NOT_AVAILABLE))
            return
        error = self._validate_current_member(group, member_id, instance_id, "sync-group")
        if error is None:
            if generation != group.generation_id:
                error = E.ILLEGAL_GENERATION
            elif protocol_type is not None and protocol_type != group.protocol_type:
                error = E.INCONSISTENT_GROUP_PROTOCOL
            elif protocol_name is not None and protocol_name != group.protocol_name:
                error = E.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            callback(SyncResult(error))
            return
        state = group.state
        if state is GroupState.EMPTY:
            callback(SyncResult(E.UNKNOWN_MEMBER_ID))
        elif state is GroupState.PREPARING_REBALANCE:
            callback(SyncResult(E.REBALANCE_IN_PROGRESS))
        elif state is GroupState.COMPLETING_REBALANCE:
            member = group.get(member_id)
            member.awaiting_sync = callback
            group.remove_pending_sync_member(member_id)
            self._maybe_complete_sync_expiration(group)
            if group.is_leader(member_id):
                log.info("group %s: assignment from leader %s for generation %d (%d members, %d static)",
                         group.group_id, member_id, group.generation_id, group.size, len(group.static_members))
                full = {m: assignment.get(m, b"") for m in group.members}
                missing = [m for m in group.members if m not in assignment]
                if missing:
                    log.warning("group %s: empty assignment for members %s", group.group_id, missing)
                gen = group.generation_id

                def on_stored(error: int) -> None:
                    if group.is_state(GroupState.COMPLETING_REBALANCE) and gen == group.generation_id:
                        if error != E.NONE:
                            self._reset_and_propagate_assignment_error(group, error)
                            self._maybe_prepare_rebalance(group, f"storing the assignment failed ({error})")
                        else:
                            self._set_and_propagate_assignment(group, full)
                            group.transition_to(GroupState.STABLE, self._now())

                self._store_group(group, full, on_stored)
        elif state is GroupState.STABLE:
            group.remove_pending_sync_member(member_id)
            self._maybe_complete_sync_expiration(group)
            member = group.get(member_id)
            callback(SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._complete_and_schedule_next_heartbeat(group, member)

    # ============================================================================================
    # Heartbeat

    async def handle_heartbeat(self, req: Struct, version: int, client_id: str | None = None,
                               client_host: str | None = None) -> Struct:
        r: Any = req
        instance_id = r.group_instance_id if version >= 3 else None
        error = self._heartbeat(r.group_id, r.member_id, instance_id, r.generation_id)
        return response_type(ApiKey.HEARTBEAT)(error_code=int(error))

    def _heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> int:
        error = self._validate_group_status(group_id, ApiKey.HEARTBEAT)
        if error is not None:
            # While loading we know nothing about the member: let it carry on.
            return E.NONE if error == E.COORDINATOR_LOAD_IN_PROGRESS else error
        group = self._groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, instance_id, "heartbeat")
        if error is not None:
            return error
        if generation != group.generation_id:
            return E.ILLEGAL_GENERATION
        state = group.state
        if state is GroupState.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        return E.REBALANCE_IN_PROGRESS if state is GroupState.PREPARING_REBALANCE else E.NONE

    # ============================================================================================
    # LeaveGroup

    async def handle_leave_group(self, req: Struct, version: int, client_id: str | None = None,
                                 client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.LEAVE_GROUP)
        if version < 3:
            leaving = [(r.member_id, None, None)]
        else:
            leaving = [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None) for m in r.members]
        top, members = self._leave_group(r.group_id, leaving)
        if version < 3:
            code = top if top != E.NONE else next((e for _, _, e in members if e != E.NONE), E.NONE)
            return mt(error_code=int(code))
        return mt(error_code=int(top), members=[
            mt.MemberResponse(member_id=m, group_instance_id=i, error_code=int(e)) for m, i, e in members])

    def _leave_group(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]
                     ) -> tuple[int, list[tuple[str, str | None, int]]]:
        error = self._validate_group_status(group_id, ApiKey.LEAVE_GROUP)
        if error is not None:
            return error, []
        group = self._groups.get(group_id)
        if group is None:
            return E.NONE, [(m, i, E.UNKNOWN_MEMBER_ID) for m, i, _ in leaving]
        if group.is_state(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, []
        results: list[tuple[str, str | None, int]] = []
        for member_id, instance_id, reason in leaving:
            if member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal by group.instance.id (KIP-345).
                current = group.current_static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                else:
                    self._leave_member(group, group.get(current), reason)
                    results.append((member_id, instance_id, E.NONE))
            elif group.is_pending_member(member_id):
                self._remove_pending_member_and_update_group(group, member_id)
                results.append((member_id, instance_id, E.NONE))
            else:
                error = self._validate_current_member(group, member_id, instance_id, "leave-group")
                if error is None:
                    self._leave_member(group, group.get(member_id), reason)
                results.append((member_id, instance_id, error if error is not None else E.NONE))
        return E.NONE, results

    def _leave_member(self, group: GroupMetadata, member: MemberMetadata, reason: str | None) -> None:
        log.info("group %s: member %s left (reason: %s)", group.group_id, member.member_id, reason or "not provided")
        self._remove_member_and_update_group(group, member, f"member {member.member_id} left")

    # ============================================================================================
    # OffsetCommit / TxnOffsetCommit

    def _validate_offset_commit(self, group: GroupMetadata, generation: int, member_id: str,
                                instance_id: str | None, transactional: bool) -> int | None:
        if group.is_state(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_state(GroupState.EMPTY):
            return None  # admin client or a consumer without group management
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error = self._validate_current_member(group, member_id, instance_id,
                                                  "txn-offset-commit" if transactional else "offset-commit")
            if error is not None:
                return error
            return E.ILLEGAL_GENERATION if generation != group.generation_id else None
        if not transactional and not group.is_state(GroupState.EMPTY):
            return E.UNKNOWN_MEMBER_ID  # only members may commit for a group with members
        return None

    def _split_known_partitions(self, topics: Iterable[Any], partitions_of: Callable[[Any], Iterable[int]]
                                ) -> tuple[list[TopicPartition], dict[TopicPartition, int]]:
        """Requested partitions in order, and UNKNOWN_TOPIC_OR_PARTITION for those the cluster lacks."""
        ordered: dict[TopicPartition, None] = {}
        unknown: dict[TopicPartition, int] = {}
        for t in topics:
            for p in partitions_of(t):
                tp = (t.name, p)
                ordered[tp] = None
                if self._topic_exists is not None and not self._topic_exists(t.name, p):
                    unknown[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
        return list(ordered), unknown

    @staticmethod
    def _by_topic(ordered: list[TopicPartition], errors: Mapping[TopicPartition, int]) -> list[tuple[str, list[tuple[int, int]]]]:
        out: dict[str, list[tuple[int, int]]] = {}
        for tp in ordered:
            out.setdefault(tp[0], []).append((tp[1], int(errors[tp])))
        return list(out.items())

    async def handle_offset_commit(self, req: Struct, version: int, client_id: str | None = None,
                                   client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.OFFSET_COMMIT)
        now = self._now()
        retention = r.retention_time_ms if 2 <= version <= 4 else -1
        expire = None if retention == -1 else now + retention
        ordered, errors = self._split_known_partitions(r.topics, lambda t: [p.partition_index for p in t.partitions])
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for t in r.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp in errors:
                    continue
                offsets[tp] = OffsetAndMetadata(
                    p.committed_offset, p.committed_leader_epoch if version >= 6 else -1,
                    "" if p.committed_metadata is None else p.committed_metadata, now, expire)
        if offsets:
            instance_id = r.group_instance_id if version >= 7 else None
            errors.update(await self._commit_offsets(r.group_id, r.member_id, instance_id,
                                                     r.generation_id_or_member_epoch, offsets))
        return mt(topics=[mt.OffsetCommitResponseTopic(name=name, partitions=[
            mt.OffsetCommitResponsePartition(partition_index=p, error_code=e) for p, e in parts])
            for name, parts in self._by_topic(ordered, errors)])

    async def _commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                              offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        error = self._validate_group_status(group_id, ApiKey.OFFSET_COMMIT)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self._groups.get(group_id)
        if group is None:
            if generation >= 0:
                # A commit from an old generation of a group that no longer exists.
                return dict.fromkeys(offsets, E.ILLEGAL_GENERATION)
            group = GroupMetadata(group_id, GroupState.EMPTY, self._now())
            self._groups[group_id] = group
        error = self._validate_offset_commit(group, generation, member_id, instance_id, transactional=False)
        if error is not None:
            return dict.fromkeys(offsets, error)
        state = group.state
        if state is GroupState.COMPLETING_REBALANCE:
            # The member knows the new generation but has no assignment yet.
            return dict.fromkeys(offsets, E.REBALANCE_IN_PROGRESS)
        if state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        return await self._store_offsets(group, offsets)

    async def handle_txn_offset_commit(self, req: Struct, version: int, client_id: str | None = None,
                                       client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.TXN_OFFSET_COMMIT)
        now = self._now()
        ordered, errors = self._split_known_partitions(r.topics, lambda t: [p.partition_index for p in t.partitions])
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for t in r.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp not in errors:
                    offsets[tp] = OffsetAndMetadata(
                        p.committed_offset, p.committed_leader_epoch if version >= 2 else -1,
                        "" if p.committed_metadata is None else p.committed_metadata, now, None)
        if offsets:
            generation = r.generation_id if version >= 3 else NO_GENERATION
            member_id = r.member_id if version >= 3 else UNKNOWN_MEMBER_ID
            instance_id = r.group_instance_id if version >= 3 else None
            results = await self._txn_commit_offsets(r.group_id, r.producer_id, r.producer_epoch, member_id,
                                                     instance_id, generation, offsets)
            if version < 2:
                # Clients before 2.0 could crash on COORDINATOR_LOAD_IN_PROGRESS here (KAFKA-7296).
                results = {tp: (E.COORDINATOR_NOT_AVAILABLE if e == E.COORDINATOR_LOAD_IN_PROGRESS else e)
                           for tp, e in results.items()}
            errors.update(results)
        return mt(topics=[mt.TxnOffsetCommitResponseTopic(name=name, partitions=[
            mt.TxnOffsetCommitResponsePartition(partition_index=p, error_code=e) for p, e in parts])
            for name, parts in self._by_topic(ordered, errors)])

    async def _txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                  instance_id: str | None, generation: int,
                                  offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        error = self._validate_group_status(group_id, ApiKey.TXN_OFFSET_COMMIT)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self._groups.get(group_id)
        if group is None:
            group = GroupMetadata(group_id, GroupState.EMPTY, self._now())
            self._groups[group_id] = group
        error = self._validate_offset_commit(group, generation, member_id, instance_id, transactional=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        return await self._store_offsets(group, offsets, producer_id=producer_id, producer_epoch=producer_epoch)

    # ============================================================================================
    # OffsetFetch

    async def handle_offset_fetch(self, req: Struct, version: int, client_id: str | None = None,
                                  client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.OFFSET_FETCH)
        require_stable = bool(r.require_stable) if version >= 7 else False
        if version >= 8:
            groups = []
            for g in r.groups:
                tps = None if g.topics is None else [(t.name, p) for t in g.topics for p in t.partition_indexes]
                error, rows = self._fetch_offsets(g.group_id, require_stable, tps)
                topics: dict[str, list[Any]] = {}
                for (topic, part), off, epoch, meta, perr in rows:
                    topics.setdefault(topic, []).append(mt.OffsetFetchResponsePartitions(
                        partition_index=part, committed_offset=off, committed_leader_epoch=epoch, metadata=meta,
                        error_code=perr))
                groups.append(mt.OffsetFetchResponseGroup(
                    group_id=g.group_id, error_code=int(error),
                    topics=[mt.OffsetFetchResponseTopics(name=n, partitions=ps) for n, ps in topics.items()]))
            return mt(groups=groups)
        tps = None if r.topics is None else [(t.name, p) for t in r.topics for p in t.partition_indexes]
        error, rows = self._fetch_offsets(r.group_id, require_stable, tps)
        if error != E.NONE and version < 2 and tps is not None:
            # Version 1 has no top-level error code: report it on every requested partition.
            rows = [(tp, INVALID_OFFSET, -1, "", error) for tp in tps]
        topics = {}
        for (topic, part), off, epoch, meta, perr in rows:
            topics.setdefault(topic, []).append(mt.OffsetFetchResponsePartition(
                partition_index=part, committed_offset=off, committed_leader_epoch=epoch, metadata=meta,
                error_code=perr))
        return mt(error_code=int(error),
                  topics=[mt.OffsetFetchResponseTopic(name=n, partitions=ps) for n, ps in topics.items()])

    def _fetch_offsets(self, group_id: str, require_stable: bool, tps: list[TopicPartition] | None
                       ) -> tuple[int, list[tuple[TopicPartition, int, int, str, int]]]:
        error = self._validate_group_status(group_id, ApiKey.OFFSET_FETCH)
        if error is not None:
            return error, []
        group = self._groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return E.NONE, [(tp, INVALID_OFFSET, -1, "", E.NONE) for tp in (tps or [])]
        wanted = list(group.offsets) if tps is None else list(dict.fromkeys(tps))
        rows = []
        for tp in wanted:
            if require_stable and (group.has_pending_offset_commits_for(tp) or (
                    self.has_pending_txn_offsets is not None and self.has_pending_txn_offsets(group_id, tp))):
                rows.append((tp, INVALID_OFFSET, -1, "", int(E.UNSTABLE_OFFSET_COMMIT)))
                continue
            om = group.offset(tp)
            if om is None:
                rows.append((tp, INVALID_OFFSET, -1, "", int(E.NONE)))
            else:
                rows.append((tp, om.offset, om.leader_epoch, om.metadata, int(E.NONE)))
        return E.NONE, rows

    # ============================================================================================
    # ListGroups / DescribeGroups / DeleteGroups / OffsetDelete

    async def handle_list_groups(self, req: Struct, version: int, client_id: str | None = None,
                                 client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.LIST_GROUPS)
        if not self._active:
            return mt(error_code=E.COORDINATOR_NOT_AVAILABLE, groups=[])
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self._loading else E.NONE
        states = {s.lower() for s in (r.states_filter or [])} if version >= 4 else set()
        types = {t.lower() for t in (r.types_filter or [])} if version >= 5 else set()
        groups = []
        for g in self._groups.values():
            if states and g.state.value.lower() not in states:
                continue
            if types and GROUP_TYPE_CLASSIC not in types:
                continue
            groups.append(mt.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "",
                                         group_state=g.state.value, group_type=GROUP_TYPE_CLASSIC))
        return mt(error_code=int(error), groups=groups)

    async def handle_describe_groups(self, req: Struct, version: int, client_id: str | None = None,
                                     client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.DESCRIBE_GROUPS)
        return mt(groups=[self._describe_group(mt, gid) for gid in r.groups])

    def _describe_group(self, mt: Any, group_id: str) -> Any:
        error = self._validate_group_status(group_id, ApiKey.DESCRIBE_GROUPS)
        if error is not None:
            return mt.DescribedGroup(error_code=int(error), group_id=group_id, group_state="", protocol_type="",
                                     protocol_data="", members=[])
        group = self._groups.get(group_id)
        if group is None:
            return mt.DescribedGroup(error_code=0, group_id=group_id, group_state=GroupState.DEAD.value,
                                     protocol_type="", protocol_data="", members=[])
        stable = group.is_state(GroupState.STABLE) and group.protocol_name is not None
        members = []
        for m in group.members.values():
            members.append(mt.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if stable else b"",  # type: ignore[arg-type]
                member_assignment=m.assignment if stable else b""))
        return mt.DescribedGroup(
            error_code=0, group_id=group_id, group_state=group.state.value, protocol_type=group.protocol_type or "",
            protocol_data=group.protocol_name if stable else "", members=members,
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

    async def handle_delete_groups(self, req: Struct, version: int, client_id: str | None = None,
                                   client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.DELETE_GROUPS)
        results = await self._delete_groups(list(dict.fromkeys(r.groups_names)))
        return mt(results=[mt.DeletableGroupResult(group_id=g, error_code=int(e)) for g, e in results.items()])

    async def _delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        results: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for gid in group_ids:
            error = self._validate_group_status(gid, ApiKey.DELETE_GROUPS)
            if error is not None:
                results[gid] = error
                continue
            group = self._groups.get(gid)
            if group is None or group.is_state(GroupState.DEAD):
                results[gid] = E.GROUP_ID_NOT_FOUND if self._group_not_exists(gid) else E.NOT_COORDINATOR
            elif group.is_state(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self._now())
                eligible.append(group)
                results[gid] = E.NONE
            else:
                results[gid] = E.NON_EMPTY_GROUP
        if eligible:
            n = await self._cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
            log.info("deleted groups %s (%d offsets)", [g.group_id for g in eligible], n)
        return results

    async def handle_offset_delete(self, req: Struct, version: int, client_id: str | None = None,
                                   client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.OFFSET_DELETE)
        ordered, errors = self._split_known_partitions(r.topics, lambda t: [p.partition_index for p in t.partitions])
        wanted = [tp for tp in ordered if tp not in errors]
        group_error, results = await self._delete_offsets(r.group_id, wanted)
        if group_error != E.NONE:
            return mt(error_code=int(group_error), topics=[])
        errors.update(results)
        return mt(error_code=0, topics=[mt.OffsetDeleteResponseTopic(name=name, partitions=[
            mt.OffsetDeleteResponsePartition(partition_index=p, error_code=e) for p, e in parts])
            for name, parts in self._by_topic(ordered, errors)])

    async def _delete_offsets(self, group_id: str, tps: list[TopicPartition]
                              ) -> tuple[int, dict[TopicPartition, int]]:
        error = self._validate_group_status(group_id, ApiKey.OFFSET_DELETE)
        if error is not None:
            return error, {}
        group = self._groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return (E.GROUP_ID_NOT_FOUND if self._group_not_exists(group_id) else E.NOT_COORDINATOR), {}
        results: dict[TopicPartition, int] = {}
        if group.is_state(GroupState.EMPTY):
            eligible = tps
        elif group.is_consumer_group:
            eligible = []
            for tp in tps:
                if group.is_subscribed_to_topic(tp[0]):
                    results[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return E.NON_EMPTY_GROUP, {}
        if eligible:
            n = await self._cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
            log.info("group %s: deleted offsets of %s (%d removed)", group_id, eligible, n)
            for tp in eligible:
                results[tp] = E.NONE
        return E.NONE, results
