"""The group metadata manager: each group's state in ``__consumer_offsets``, and back (Kafka's
``GroupMetadataManager``).

It owns the in-memory table of groups and which ``__consumer_offsets`` partitions this broker
coordinates, and everything written to or read from those partitions:

* **loading**: when the broker becomes leader of a partition, ``load_partition`` reads it from the
  start and rebuilds its groups (committed offsets, transactional offsets still pending on their
  marker, the last group metadata record); until that finishes the partition is *loading*.
  ``unload_partition`` drops the groups when leadership moves away;
* **persistence**: a group metadata record after every completed rebalance or membership change
  (``store_group``), one offset commit record per committed partition (``store_offsets``, plain or
  transactional), tombstones for deleted or expired offsets and groups (``cleanup_group_metadata``);
* **offset expiry**: every ``offsets.retention.check.interval.ms`` the offsets of groups that are
  empty (or never used group management) expire ``offsets.retention.minutes`` after the group
  emptied or after their commit (KIP-211).

Records are Kafka's binary formats (``broker/offsets_topic_format.py``). The partition log is
abstracted as ``OffsetsLog``; the broker wires it to the replica manager. Membership decisions are
not made here: the coordinator passes ``on_group_loaded``/``on_group_unloaded`` hooks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from broker.group_config import GroupCoordinatorConfig
from broker.group_metadata import (
    CommitRecord,
    GroupMetadata,
    GroupState,
    IllegalGroupStateError,
    MemberMetadata,
    OffsetAndMetadata,
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
from storage.clock import Clock, TimerHandle

log = logging.getLogger(__name__)

E = ErrorCode
_LOAD_YIELD_EVERY = 1000  # records between yields to the event loop while loading a partition

GroupHook = Callable[[GroupMetadata], None]

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


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


class GroupMetadataManager:
    """The groups of the ``__consumer_offsets`` partitions this broker leads, and their records there."""

    def __init__(self, offsets_log: OffsetsLog, config: GroupCoordinatorConfig, num_partitions: int,
                 clock: Clock) -> None:
        self.config = config
        self.num_partitions = num_partitions
        self.clock = clock
        self._log = offsets_log
        self.groups: dict[str, GroupMetadata] = {}
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self._epochs: dict[int, int] = {}
        self._load_tokens: dict[int, object] = {}
        self._producer_groups: dict[int, set[str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._expiry_timer: TimerHandle | None = None
        self.active = True
        self.on_group_loaded: GroupHook = lambda group: None
        self.on_group_unloaded: GroupHook = lambda group: None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the periodic offset expiration (Kafka's ``delete-expired-group-metadata`` task)."""
        self.active = True
        if self._expiry_timer is None:
            self._schedule_expiry()

    def _schedule_expiry(self) -> None:
        self._expiry_timer = self.clock.schedule(max(self.config.offsets_retention_check_interval_ms, 1),
                                                 self._on_expiry_timer)

    def _on_expiry_timer(self) -> None:
        # One pass at a time: the next one is scheduled when this one is done, as a fixed-delay task.
        self.spawn(self._expiry_pass())

    async def _expiry_pass(self) -> None:
        try:
            await self.expire_offsets()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("offset expiration failed")
        if self.active:
            self._schedule_expiry()

    async def close(self) -> None:
        self.active = False
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        for partition in list(self.owned | self.loading):
            self.unload_partition(partition)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def now(self) -> int:
        return self.clock.now_ms()

    # -- partitions ------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return _partition_for(group_id, self.num_partitions)

    def is_loaded(self, partition: int) -> bool:
        return partition in self.owned and partition not in self.loading

    def is_loading(self, partition: int) -> bool:
        return partition in self.loading

    def is_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        """Cache ``group`` unless one with its id is cached already; returns the cached one."""
        return self.groups.setdefault(group.group_id, group)

    def validate_group_status(self, group_id: str | None, api: ApiKey) -> int | None:
        """The error a request for ``group_id`` gets before reaching the group, or None (Kafka's
        ``validateGroupStatus``): an invalid id, an inactive coordinator, a loading or foreign partition."""
        if api in (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS):
            valid = group_id is not None
        else:
            valid = bool(group_id)
        if not valid:
            return E.INVALID_GROUP_ID
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)  # type: ignore[arg-type]
        if partition in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return E.NOT_COORDINATOR
        return None

    def group_not_exists(self, group_id: str) -> bool:
        if self.partition_for(group_id) not in self.owned:
            return False
        group = self.groups.get(group_id)
        return group is None or group.is_state(GroupState.DEAD)

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
        if partition in self.loading or partition in self.owned:
            return  # already loading, or loaded and still ours
        self.loading.add(partition)
        token = object()
        self._load_tokens[partition] = token
        start = time.monotonic()
        try:
            await self._do_load(partition, token)
        except asyncio.CancelledError:
            if self._load_tokens.get(partition) is token:
                self.loading.discard(partition)
            raise
        except Exception:
            log.exception("error loading __consumer_offsets-%d", partition)
        if self._load_tokens.get(partition) is token:
            self.owned.add(partition)
            self.loading.discard(partition)
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

        now = self.now()
        for gid in list(loaded_groups) + [g for g in {**offsets_by_group, **pending_by_group}
                                           if g not in loaded_groups]:
            if gid in loaded_groups:
                group = self._group_from_value(gid, loaded_groups[gid], now)
            else:
                group = GroupMetadata(gid, GroupState.EMPTY, now)
            group.initialize_offsets(offsets_by_group.get(gid, {}), pending_by_group.get(gid, {}))
            if gid in self.groups:
                log.debug("group %s already cached; the loaded copy is dropped", gid)
                continue
            self.groups[gid] = group
            self.on_group_loaded(group)

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

    def unload_partition(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Stop coordinating ``partition``: its groups go Dead and waiting members get NOT_COORDINATOR."""
        if not self._maybe_update_epoch(partition, coordinator_epoch):
            log.info("not unloading __consumer_offsets-%d for stale epoch %s", partition, coordinator_epoch)
            return
        self.owned.discard(partition)
        self.loading.discard(partition)
        self._load_tokens[partition] = object()
        removed = 0
        for gid, group in list(self.groups.items()):
            if self.partition_for(gid) == partition:
                self.on_group_unloaded(group)
                del self.groups[gid]
                for groups in self._producer_groups.values():
                    groups.discard(gid)
                removed += 1
        log.info("unloaded __consumer_offsets-%d: %d groups", partition, removed)

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
        acks = -1 if required_acks is None else required_acks  # acks=all unless a caller says otherwise
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

    def store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes],
                    callback: Callable[[int], None]) -> None:
        """Write the group's metadata record, then call ``callback(error)`` (the value is taken now)."""
        partition = self.partition_for(group.group_id)
        if partition not in self.owned:
            callback(E.NOT_COORDINATOR)
            return
        record = (encode_group_metadata_key(group.group_id), self._group_value(group, assignment))

        async def run() -> None:
            code, _ = await self._append(partition, [record])
            callback(_convert_store_group_error(code) if code != E.NONE else E.NONE)

        self.spawn(run())

    def _metadata_ok(self, metadata: str | None) -> bool:
        return metadata is None or _utf16_len(metadata) <= self.config.offset_metadata_max_bytes

    async def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata], *,
                            producer_id: int = -1, producer_epoch: int = -1) -> dict[TopicPartition, int]:
        if not group.has_received_consistent_offset_commits():
            log.warning("group %s receives both consumer and transactional offset commits; mixing them "
                        "gives surprising results", group.group_id)
        valid = {tp: om for tp, om in offsets.items() if self._metadata_ok(om.metadata)}
        if not valid:
            return {tp: E.OFFSET_METADATA_TOO_LARGE for tp in offsets}
        partition = self.partition_for(group.group_id)
        if partition not in self.owned:
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
                    self.remove_producer_group(producer_id, group.group_id)
            return _convert_offset_commit_error(code)

        # Shielded: a client that disconnects must not leave the group's pending state half-done.
        error = await asyncio.shield(self.spawn(run()))
        return {tp: (error if tp in valid else E.OFFSET_METADATA_TOO_LARGE) for tp in offsets}

    def remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self._producer_groups.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self._producer_groups[producer_id]

    async def cleanup_group_metadata(self, groups: Iterable[GroupMetadata],
                                     selector: Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]]
                                      ) -> int:
        """Remove offsets chosen by ``selector`` (and groups left empty), writing tombstones."""
        removed_total = 0
        now = self.now()
        for group in list(groups):
            removed = selector(group)
            if group.is_state(GroupState.EMPTY) and not group.has_offsets():
                log.info("group %s is now dead (generation %d)", group.group_id, group.generation_id)
                group.transition_to(GroupState.DEAD, now)
            partition = self.partition_for(group.group_id)
            if partition not in self.owned:
                continue
            tombstones: list[tuple[bytes, bytes | None]] = [
                (encode_offset_commit_key(group.group_id, t, p), None) for (t, p) in removed]
            if group.is_state(GroupState.DEAD) and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
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
        now = self.now()
        retention = self.config.offsets_retention_ms
        n = await self.cleanup_group_metadata(
            list(self.groups.values()), lambda g: g.remove_expired_offsets(now, retention))
        if n:
            log.info("expired %d offsets", n)
        return n

    async def on_partitions_deleted(self, tps: Iterable[TopicPartition]) -> int:
        """Forget committed offsets of deleted topic partitions (topic deletion calls this)."""
        tps = list(tps)
        return await self.cleanup_group_metadata(list(self.groups.values()), lambda g: g.remove_offsets(tps))

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
            group = self.groups.get(group_id)
            if group is not None and not group.is_state(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, commit)
                self.remove_producer_group(producer_id, group_id)

    def group_lag_view(self) -> list[GroupView]:
        """Committed offsets of every group this broker coordinates (the lag exporter subtracts them)."""
        return [GroupView(g.group_id, g.state.value, g.protocol_type or "", g.protocol_name, g.generation_id,
                          g.size, {tp: om.offset for tp, om in g.all_offsets().items()})
                for g in self.groups.values() if not g.is_state(GroupState.DEAD)]
