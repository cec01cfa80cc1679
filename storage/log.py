"""PartitionLog: one partition's segments, offsets, indexes, epochs and producer state.

Kafka's names: LEO (log end offset, the next offset to assign), HW (high watermark, set by the broker),
log start offset (first offset a consumer may read; moved by retention and DeleteRecords), recovery point
(every offset below it is fsynced; an unclean restart validates only from there).

Thread model: the broker's loop appends and reads; a cleaner thread or an executor may run retention,
flushes and segment swaps. A per-log lock guards the segment list; fsync runs outside it.

Why one module of ~1,200 lines: everything here reads or changes the segment list under that one
lock (loading and recovery, append and roll, reads, truncation, retention, swaps), and the lock's
rules are easiest to check when every holder is in view. Kafka splits the same work into LocalLog,
UnifiedLog and LogLoader around shared mutable state; the split that would pay here is recovery
(``_load`` to ``_rebuild_producer_state``) into a loader that returns a segment list, once its
producer-state rebuild no longer needs the live log.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from protocol.schema import FileRegion
from storage.batch_headers import (
    EPOCH_FIELD,
    EPOCH_OFFSET,
    OFFSET_FIELD,
    BatchHeader,
    buffer_headers,
    control_record,
    crc_is_valid,
    read_headers,
)
from storage.checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile, fsync_dir
from storage.compiled_append import compiled_appends
from storage.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidOffsetAppendError,
    KafkaStorageError,
    LogDirOfflineError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    is_disk_full,
)
from storage.file_handles import SEGMENT_FILES, is_out_of_descriptors
from storage.leader_epoch import LeaderEpochFileCache
from storage.producer_state import REQUEST_VERIFICATION_GUARDS, ProducerStateManager, VerificationGuard
from storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    SegmentSettings,
    offset_from_filename,
    pread_all,
    random_jitter,
)
from storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
_LONG_MAX = 2**63 - 1

LOG_CONFIG_DEFAULTS: dict[str, Any] = {
    "segment_bytes": 1024 * 1024 * 1024,
    "segment_ms": 7 * 24 * 3600 * 1000,
    "segment_jitter_ms": 0,
    "segment_index_bytes": 10 * 1024 * 1024,
    "index_interval_bytes": 4096,
    "retention_ms": 7 * 24 * 3600 * 1000,
    "retention_bytes": -1,
    "cleanup_policy": "delete",
    "delete_retention_ms": 24 * 3600 * 1000,
    "min_cleanable_dirty_ratio": 0.5,
    "min_compaction_lag_ms": 0,
    "max_compaction_lag_ms": _LONG_MAX,
    "file_delete_delay_ms": 60_000,
    "flush_messages": _LONG_MAX,
    "flush_ms": _LONG_MAX,
    "preallocate": False,
    "max_message_bytes": 1024 * 1024 + 12,
}


def config_value(config: Any, name: str) -> Any:
    """A log config attribute (python name, e.g. ``segment_bytes``), Kafka's default when absent."""
    if config is None:
        return LOG_CONFIG_DEFAULTS[name]
    if isinstance(config, dict):
        return config.get(name, LOG_CONFIG_DEFAULTS[name])
    value = getattr(config, name, None)
    return LOG_CONFIG_DEFAULTS[name] if value is None else value


def cleanup_policies(config: Any) -> frozenset[str]:
    raw = config_value(config, "cleanup_policy")
    if isinstance(raw, str):
        items: Iterable[str] = raw.split(",")
    else:
        items = raw
    return frozenset(p.strip().lower() for p in items if p and p.strip())


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_DIR_NAME = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def parse_partition_dir(name: str) -> tuple[str, int]:
    m = _DIR_NAME.match(name)
    if not m:
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return m.group("topic"), int(m.group("partition"))


@dataclass(slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int = -1
    log_start_offset: int = 0
    records_count: int = 0
    valid_bytes: int = 0
    duplicate: bool = False


# The common leader and follower appends in compiled code, or None (see storage/compiled_append.py).
_append_batch, _append_follower = compiled_appends(AppendInfo, now_ms)


@dataclass(slots=True)
class ReadResult:
    """File regions to hand to sendfile, plus the log offsets of the moment.

    Each region pins its segment's descriptor (see storage/file_handles.py): the descriptor stays open,
    whatever happens to the segment, until the region is released after it was written.
    """

    regions: list[FileRegion] = field(default_factory=list)
    first_batch_offset: int = -1
    log_end_offset: int = 0
    high_watermark: int = 0
    log_start_offset: int = 0

    @property
    def size(self) -> int:
        return sum(r[2] for r in self.regions)


IoErrorHandler = Callable[["PartitionLog", OSError], None]


class PartitionLog:
    def __init__(
        self,
        dir_path: str,
        config: Any = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = False,
        clock: Callable[[], int] = now_ms,
        io_error_handler: IoErrorHandler | None = None,
    ) -> None:
        self.dir_path = os.path.abspath(dir_path)
        self.topic, self.partition = parse_partition_dir(os.path.basename(self.dir_path))
        self.config = config
        self._limits_cache: tuple[Any, tuple[int, int, int, int, int]] | None = None
        self.clock = clock
        self.io_error_handler = io_error_handler
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._prefix_max_ts: list[int] | None = None
        self._offline = False
        self._closed = False
        self._roll_flush_upto: int | None = None
        self._dir_dirty = False
        self._epoch_checkpoint_dirty = False
        self._last_flush_ms = clock()
        os.makedirs(self.dir_path, exist_ok=True)
        self.leader_epoch_cache = LeaderEpochFileCache(
            LeaderEpochCheckpointFile(os.path.join(self.dir_path, LEADER_EPOCH_CHECKPOINT))
        )
        self.producer_state = ProducerStateManager(self.dir_path)
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._leo = 0
        self._load(had_clean_shutdown)
        self._hw = self._log_start_offset if high_watermark is None else high_watermark
        self._hw = max(self._log_start_offset, min(self._hw, self._leo))

    # ================================================================================ configuration
    def _settings(self) -> SegmentSettings:
        return SegmentSettings(
            index_interval_bytes=int(config_value(self.config, "index_interval_bytes")),
            max_index_size=int(config_value(self.config, "segment_index_bytes")),
            roll_jitter_ms=random_jitter(int(config_value(self.config, "segment_jitter_ms"))),
            preallocate_bytes=int(config_value(self.config, "segment_bytes"))
            if config_value(self.config, "preallocate")
            else 0,
        )

    def update_config(self, config: Any) -> None:
        with self._lock:
            self.config = config

    def _append_limits(self) -> tuple[int, int, int, int, int]:
        """(max.message.bytes, segment.bytes, segment.ms, flush.messages, flush.ms), read once per config.

        Every append needs them; a LogConfig is immutable (a change installs a new one), so they are
        kept until ``self.config`` is another object. Plain dicts (tests) are read each time. The
        compiled appends (storage/_compiled_append.c) read ``_limits_cache`` themselves: (config, limits)."""
        config = self.config
        cached = self._limits_cache
        if cached is not None and cached[0] is config:
            return cached[1]
        limits = (int(config_value(config, "max_message_bytes")), int(config_value(config, "segment_bytes")),
                  int(config_value(config, "segment_ms")), int(config_value(config, "flush_messages")),
                  int(config_value(config, "flush_ms")))
        if config is not None and not isinstance(config, dict):
            self._limits_cache = (config, limits)
        return limits

    # ================================================================================ properties
    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self._hw = max(self._log_start_offset, min(value, self._leo))

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset
        return self._hw if first_unstable is None else min(first_unstable, self._hw)

    @property
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset

    @property
    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def is_offline(self) -> bool:
        return self._offline

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, "
            f"leo={self._leo}, hw={self._hw}, segments={len(self._segments)})"
        )

    # ================================================================================ I/O errors
    def _io_failure(self, exc: OSError, action: str) -> KafkaStorageError:
        if is_disk_full(exc):
            # The log itself stays consistent and could take writes again once space returns; whoever owns
            # the directory decides (the LogManager takes it offline, as Kafka does for any IOException).
            if self.io_error_handler is not None:
                try:
                    self.io_error_handler(self, exc)
                except Exception:  # the handler must not mask the storage error
                    log.exception("log dir failure handler raised")
            return KafkaStorageError(f"{action} {self.topic}-{self.partition}: disk full ({exc})", disk_full=True,
                                     cause=exc)
        if is_out_of_descriptors(exc):
            # EMFILE/ENFILE is the process's limit, not the disk: the log stays online, idle segment
            # files are closed so that a retry can open what it needs.
            SEGMENT_FILES.shed_idle()
            return KafkaStorageError(f"{action} {self.topic}-{self.partition}: out of file descriptors ({exc})",
                                     cause=exc)
        self._offline = True
        if self.io_error_handler is not None:
            try:
                self.io_error_handler(self, exc)
            except Exception:  # the handler must not mask the storage error
                log.exception("log dir failure handler raised")
        return LogDirOfflineError(f"{action} {self.topic}-{self.partition}: I/O error ({exc})", cause=exc)

    def _check_online(self) -> None:
        if self._offline:
            raise LogDirOfflineError(f"log {self.topic}-{self.partition} is offline")
        if self._closed:
            raise KafkaStorageError(f"log {self.topic}-{self.partition} is closed")

    # ================================================================================ loading
    def _load(self, had_clean_shutdown: bool) -> None:
        listing = os.listdir(self.dir_path)
        swap_logs, removed = self._remove_temp_files_and_collect_swaps(listing)
        self._complete_swaps(swap_logs)
        segments: list[LogSegment] = []
        # One directory listing per load when nothing was removed or swapped (the common case).
        names = sorted(os.listdir(self.dir_path) if removed or swap_logs else listing)
        log_bases = set()
        for name in names:
            if name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit():
                log_bases.add(offset_from_filename(name))
        for name in names:  # orphaned index files (their log file is gone)
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                if name.endswith(suffix) and name[: -len(suffix)].isdigit():
                    if offset_from_filename(name) not in log_bases:
                        os.unlink(os.path.join(self.dir_path, name))
        settings = self._settings()
        bases = sorted(log_bases)
        # Unclean: segments from the one holding the recovery point get fully recovered below anyway.
        recover_from = bases[max(bisect.bisect_right(bases, self._recovery_point) - 1, 0)] if bases else 0
        last_base = bases[-1] if bases else None
        for base in bases:
            seg = LogSegment(self.dir_path, base, settings)
            segments.append(seg)
            if not had_clean_shutdown and base >= recover_from:
                continue
            try:
                if base != last_base:
                    # As Kafka (KAFKA-7283): older segments' indexes are opened lazily, on first use,
                    # and only checked to exist now; loading them all would map every index file.
                    seg.check_index_files_exist()
                    continue
                seg.sanity_check()
            except (CorruptIndexError, OSError, ValueError) as e:
                log.warning("rebuilding indexes of %s: %s", seg.log_path, e)
                size_before = seg.size
                truncated = seg.recover()
                if truncated:
                    self._log_truncated_segment(seg, size_before, truncated)
        self._set_segments(segments)
        if not had_clean_shutdown and segments:
            self._recover_unflushed()
        if not self._segments:
            base = max(self._log_start_offset, 0)
            self._set_segments([LogSegment(self.dir_path, base, self._settings(), new=True)])
        self._leo = self.active_segment.next_offset
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        if self._log_start_offset > self._leo:
            self._log_start_offset = self._leo
        self._recovery_point = min(self._recovery_point, self._leo)
        for seg in self._segments[:-1]:
            seg.release_index_fds()
        self.active_segment.make_active()
        # The file is rewritten on the next flush (or not at all when becoming leader re-assigns the
        # entry a load dropped: an empty partition's epoch starts at its LEO).
        epochs_before = self.leader_epoch_cache.entries()
        self.leader_epoch_cache.truncate_from_end(self._leo, flush=False)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset, flush=False)
        if self.leader_epoch_cache.entries() != epochs_before:
            self._epoch_checkpoint_dirty = True
        # After a clean shutdown nothing above touched the snapshots: the listing made at the top
        # still names them (one directory listing per log rather than three; deleting a snapshot
        # the load removed already is a no-op).
        snapshots = self.producer_state.snapshot_offsets(names) if had_clean_shutdown else None
        self._rebuild_producer_state(self._leo, snapshot_offsets=snapshots)
        self.producer_state.delete_snapshots_before(self._segments[0].base_offset, offsets=snapshots)

    def _remove_temp_files_and_collect_swaps(self, listing: list[str]) -> tuple[list[str], bool]:
        """(.swap logs to complete, whether any file was removed)."""
        swaps: list[str] = []
        min_cleaned = _LONG_MAX
        removed = False
        for name in listing:
            path = os.path.join(self.dir_path, name)
            if name.endswith(DELETED_SUFFIX) or name.endswith(".tmp"):
                removed = True
                os.unlink(path)
            elif name.endswith(CLEANED_SUFFIX):
                removed = True
                try:
                    min_cleaned = min(min_cleaned, offset_from_filename(name))
                except ValueError:
                    pass
                os.unlink(path)
            elif name.endswith(SWAP_SUFFIX):
                base_name = name[: -len(SWAP_SUFFIX)]
                if base_name.endswith(LOG_SUFFIX):
                    swaps.append(path)
                else:
                    removed = True
                    os.unlink(path)  # index swap files are rebuilt from the log
        kept = []
        for path in swaps:
            if offset_from_filename(os.path.basename(path)) >= min_cleaned:
                removed = True
                os.unlink(path)
            else:
                kept.append(path)
        return sorted(kept), removed

    def _complete_swaps(self, swap_logs: list[str]) -> None:
        """A .swap log is a committed cleaner output: replace the segments it covers, then rename it."""
        for path in swap_logs:
            base = offset_from_filename(os.path.basename(path))
            seg = LogSegment(self.dir_path, base, self._settings(), file_suffix=SWAP_SUFFIX)
            try:
                seg.recover()
                end = seg.next_offset if seg.size else base + 1
            finally:
                seg.close()
            for name in os.listdir(self.dir_path):
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    if name.endswith(suffix) and name[: -len(suffix)].isdigit():
                        off = offset_from_filename(name)
                        if base <= off < end:
                            os.unlink(os.path.join(self.dir_path, name))
            for name in os.listdir(self.dir_path):
                if name.endswith(SWAP_SUFFIX) and offset_from_filename(name) == base:
                    os.replace(os.path.join(self.dir_path, name), os.path.join(self.dir_path, name[: -len(SWAP_SUFFIX)]))
            fsync_dir(self.dir_path)

    def _recover_unflushed(self) -> None:
        segs = self._segments
        start = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
        unflushed = segs[start:]
        if not unflushed:
            return
        first = unflushed[0]
        self._rebuild_producer_state(first.base_offset)
        ps = self.producer_state
        cache = self.leader_epoch_cache
        expected = segs[start - 1].next_offset if start > 0 else None
        for i, seg in enumerate(unflushed):
            def on_batch(h: BatchHeader, batch: memoryview, seg: LogSegment = seg) -> None:
                ple = h.partition_leader_epoch
                latest = cache.latest_epoch
                if ple >= 0 and (latest is None or ple > latest):
                    cache.assign(ple, h.base_offset, flush=False)
                self._apply_producer_state(h, batch, seg)

            size_before = os.stat(seg.log_path).st_size
            truncated = seg.recover(on_batch, min_offset=expected)
            expected = seg.next_offset if seg.size else expected
            if truncated:
                self._log_truncated_segment(seg, size_before, truncated)
                rest = unflushed[i + 1 :]
                if rest:
                    for r in rest:
                        self._log_deleted_segment(r)
                        r.delete_files()
                    self._set_segments([s for s in self._segments if s not in rest])
                break
            log.debug("%s-%d: recovered segment %s: offsets %d to %d, %d records", self.topic, self.partition,
                      seg.log_path, seg.base_offset, seg.next_offset - 1, seg.recovered_records)
        cache.flush()
        ps.map_end_offset = self.active_segment.next_offset

    def _log_truncated_segment(self, seg: LogSegment, size_before: int, truncated: int) -> None:
        # As Kafka's LogLoader: say which segment lost what, so an operator can tell a torn tail
        # (the last writes before a crash) from damage in the middle of a log.
        if seg.size:
            kept = f"offsets {seg.base_offset} to {seg.next_offset - 1} ({seg.recovered_records} records) kept"
        else:
            kept = "no valid records kept"
        log.warning("%s-%d: found invalid data in segment %s (base offset %d) at byte offset %d: truncated "
                    "%d of %d bytes; %s; the log now ends at offset %d", self.topic, self.partition,
                    seg.log_path, seg.base_offset, seg.size, truncated, size_before, kept,
                    seg.next_offset if seg.size else seg.base_offset)

    def _log_deleted_segment(self, seg: LogSegment) -> None:
        records, last = 0, None
        try:
            for h in seg.headers():
                records += h.records_count
                last = h.last_offset
        except (OSError, ValueError):
            pass
        span = f"offsets {seg.base_offset} to {last}" if last is not None else f"base offset {seg.base_offset}"
        log.warning("%s-%d: deleting segment %s as part of log recovery: it follows the invalid data "
                    "(%s, %d readable records, %d bytes)", self.topic, self.partition, seg.log_path, span,
                    records, seg.size)

    def _apply_producer_state(self, h: BatchHeader, batch: memoryview | bytes | None, seg: LogSegment) -> None:
        ps = self.producer_state
        if h.producer_id < 0:
            ps.map_end_offset = h.next_offset
            return
        if h.is_control and batch is None:
            batch = seg.read_bytes(h.position, h.size)
        completed = ps.update(h, batch)
        if completed is not None:
            if completed.is_aborted:
                lso = ps.last_stable_offset(completed)
                seg.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                completed.last_offset, lso))
            ps.complete_txn(completed)

    def _rebuild_producer_state(self, up_to: int, *, snapshot_offsets: list[int] | None = None) -> None:
        """Producer state after every batch below ``up_to``: latest snapshot, then replay batch headers."""
        ps = self.producer_state
        snap = ps.load_latest_snapshot(up_to, self.clock(), offsets=snapshot_offsets)
        start = snap if snap is not None else (self._segments[0].base_offset if self._segments else 0)
        for seg in self._segments:
            if seg.base_offset >= up_to:
                break
            nxt = self._next_base_after(seg)
            if nxt is not None and nxt <= start:
                continue
            pos = 0
            if start > seg.base_offset:
                h = seg.translate_offset(start)
                if h is None:
                    continue
                pos = h.position
            for h in seg.headers(pos):
                if h.base_offset >= up_to:
                    break
                if h.producer_id < 0 or h.next_offset <= start:
                    continue
                batch = seg.read_bytes(h.position, h.size) if h.is_control else None
                completed = ps.update(h, batch)
                if completed is not None:
                    ps.complete_txn(completed)
        ps.map_end_offset = up_to

    def _next_base_after(self, seg: LogSegment) -> int | None:
        i = bisect.bisect_right(self._bases, seg.base_offset)
        return self._bases[i] if i < len(self._bases) else None

    def _set_segments(self, segments: list[LogSegment]) -> None:
        self._segments = sorted(segments, key=lambda s: s.base_offset)
        self._bases = [s.base_offset for s in self._segments]
        self._prefix_max_ts = None

    # ================================================================================ append
    def append_as_leader(self, records: memoryview, leader_epoch: int, log_append_time_ms: int = -1) -> AppendInfo:
        """A client's validated batches, appended as leader (Kafka's appendAsLeader): :meth:`append` with
        offsets assigned and ``leader_epoch`` stamped. One plain batch, the common case, is appended by
        compiled code where it is built; it hands every other case to :meth:`append` untouched."""
        if _append_batch is not None:
            try:
                info = _append_batch(self, records, leader_epoch, log_append_time_ms)
            except OSError as e:
                raise self._io_failure(e, "append to") from e
            if info is not None:
                return info  # type: ignore[no-any-return]
        return self.append(records, assign_offsets=True, leader_epoch=leader_epoch, from_client=True,
                           log_append_time_ms=log_append_time_ms)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Batches fetched from the leader, appended with their own offsets and epochs (Kafka's
        appendAsFollower): :meth:`append` without assigning offsets, every batch's CRC checked. The
        common case (plain batches continuing the log from its LEO) is appended by compiled code where it
        is built; it hands every other case to :meth:`append` untouched."""
        if _append_follower is not None:
            try:
                info = _append_follower(self, records)
            except OSError as e:
                raise self._io_failure(e, "append to") from e
            if info is not None:
                return info  # type: ignore[no-any-return]
        return self.append(records, assign_offsets=False, from_client=False)

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
        from_client: bool | None = None,
        log_append_time_ms: int = -1,
        now: int | None = None,
    ) -> AppendInfo:
        """Append already-validated batches.

        As leader (``assign_offsets``) each batch's baseOffset, and partitionLeaderEpoch when
        ``leader_epoch`` is given, are patched in place (fields outside the CRC): pass a writable buffer
        to avoid a copy. As follower the batches keep their offsets, which must start at or above the
        LEO. Idempotent retries (same producer epoch and sequence range as one of the producer's last
        five batches) are answered with the original offsets and not written again.
        """
        self._check_online()
        patch = assign_offsets or leader_epoch is not None
        if isinstance(records, memoryview):
            mv = records.cast("B") if records.format != "B" else records
            if patch and mv.readonly:
                mv = memoryview(bytearray(mv))
        elif isinstance(records, bytearray):
            mv = memoryview(records)
        else:
            mv = memoryview(bytearray(records) if patch else records)
        try:
            headers = buffer_headers(mv)
        except ValueError as e:
            raise CorruptRecordError(str(e)) from e
        if not headers:
            raise CorruptRecordError("append of zero batches")
        max_message_bytes, segment_bytes, segment_ms, flush_messages, _flush_ms = self._append_limits()
        for h in headers:
            if h.size > max_message_bytes:
                raise RecordTooLargeError(f"batch of {h.size} bytes exceeds max.message.bytes {max_message_bytes}")
        if len(mv) > segment_bytes:
            raise RecordTooLargeError(f"append of {len(mv)} bytes exceeds segment.bytes {segment_bytes}")
        if from_client is None:
            from_client = assign_offsets
        if not from_client:
            # Kafka's analyzeAndValidateRecords checks every batch's CRC whatever the origin (a client's
            # were checked by LogValidator): a follower never stores a batch that the leader's disk or
            # the way here corrupted, and its fetcher tries the partition again.
            for h in headers:
                if not crc_is_valid(mv[h.position : h.position + h.size]):
                    raise CorruptRecordError(f"Record is corrupt (stored crc = {h.crc}) in topic partition "
                                             f"{self.topic}-{self.partition}.")
        with self._lock:
            self._check_online()
            ps = self.producer_state
            has_producers = False
            for h in headers:
                if h.producer_id >= 0:
                    has_producers = True
                    break
            if has_producers:
                # KIP-890: the guards of the produce request being served (None: not verifying).
                guards = REQUEST_VERIFICATION_GUARDS.get() if from_client else None
                dup = ps.check_append(headers, from_client=from_client, verify_txn=guards is not None,
                                      request_guard=guards.get((self.topic, self.partition)) if guards else None)
                if dup is not None:
                    return AppendInfo(dup.first_offset, dup.last_offset, dup.timestamp, dup.last_offset,
                                      log_append_time_ms, self._log_start_offset, 0, 0, duplicate=True)
                if not from_client:
                    for h in headers:
                        if h.is_control:
                            ps.check_marker(h, control_record(mv[h.position : h.position + h.size])[1])
            leo = self._leo
            if assign_offsets:
                offset = leo
                pack_offset = OFFSET_FIELD.pack_into
                for i, h in enumerate(headers):
                    pack_offset(mv, h.position, offset)
                    if leader_epoch is not None:
                        EPOCH_FIELD.pack_into(mv, h.position + EPOCH_OFFSET, leader_epoch)
                    # h._replace(base_offset=..., partition_leader_epoch=...), built directly (once per
                    # request: _replace goes through a dict and _make).
                    headers[i] = h = BatchHeader(
                        h.position, offset, h.batch_length,
                        leader_epoch if leader_epoch is not None else h.partition_leader_epoch, *h[4:])
                    offset += h.last_offset_delta + 1
            else:
                if leader_epoch is not None:
                    for i, h in enumerate(headers):
                        EPOCH_FIELD.pack_into(mv, h.position + EPOCH_OFFSET, leader_epoch)
                        headers[i] = h._replace(partition_leader_epoch=leader_epoch)
                expected = leo
                for h in headers:
                    if h.base_offset < expected:
                        raise InvalidOffsetAppendError(
                            f"follower append at offset {h.base_offset} is below the expected offset {expected}"
                        )
                    expected = h.next_offset
            first_offset = headers[0].base_offset
            last_offset = headers[-1].last_offset
            max_ts, offset_of_max = -1, last_offset
            count = 0
            for h in headers:
                count += h.records_count
                if h.max_timestamp > max_ts:
                    max_ts, offset_of_max = h.max_timestamp, h.last_offset
            t = self.clock() if now is None else now
            try:
                seg = self._maybe_roll(len(mv), max_ts, first_offset, last_offset, t, segment_bytes, segment_ms)
                seg.append(mv, last_offset, max_ts, offset_of_max, headers)
            except OSError as e:
                raise self._io_failure(e, "append to") from e
            self._leo = last_offset + 1
            if self._prefix_max_ts is not None and max_ts > self._prefix_max_ts[-1]:
                self._prefix_max_ts[-1] = max_ts
            cache = self.leader_epoch_cache
            for h in headers:
                ple = h.partition_leader_epoch
                if ple >= 0:
                    latest = cache.latest_epoch
                    if latest is None or ple > latest:
                        self._assign_epoch(ple, h.base_offset)
                if h.producer_id >= 0:
                    self._apply_producer_state(h, mv[h.position : h.position + h.size] if h.is_control else None, seg)
            ps.map_end_offset = self._leo
            if self._leo - self._recovery_point >= flush_messages:
                self.flush()
            return AppendInfo(first_offset, last_offset, max_ts, offset_of_max, log_append_time_ms,
                              self._log_start_offset, count, len(mv))

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int,
                                             epoch: int) -> VerificationGuard | None:
        """The guard an append of the producer's transactional batch must present, or None when its
        transaction is already open here and needs no verification (Kafka's UnifiedLog method)."""
        with self._lock:
            ps = self.producer_state
            if ps.has_ongoing_transaction(producer_id):
                return None
            return ps.maybe_create_verification_state_entry(producer_id, sequence, epoch, self.clock()).guard

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        self.leader_epoch_cache.assign(epoch, start_offset, flush=False)
        try:
            self.leader_epoch_cache.flush()
            self._epoch_checkpoint_dirty = False
        except OSError:
            self._epoch_checkpoint_dirty = True

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int | None = None, *,
                                        write_checkpoint: bool = True) -> None:
        """A new leader records where its epoch starts (the LEO when it became leader).

        ``write_checkpoint=False`` leaves the leader-epoch-checkpoint to :meth:`write_leader_epoch_checkpoint`
        (LeaderAndIsr writes the files of thousands of partitions in one batch, off the event loop).
        """
        with self._lock:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or leader_epoch > latest:
                start = self._leo if start_offset is None else start_offset
                if write_checkpoint:
                    self._assign_epoch(leader_epoch, start)
                else:
                    self.leader_epoch_cache.assign(leader_epoch, start, flush=False)
                    self._epoch_checkpoint_dirty = True

    @property
    def leader_epoch_checkpoint_stale(self) -> bool:
        """Whether write_leader_epoch_checkpoint has anything to write."""
        return self._epoch_checkpoint_dirty and self.leader_epoch_cache.needs_flush

    def write_leader_epoch_checkpoint(self) -> None:
        """Write (and fsync) the leader-epoch-checkpoint if its entries changed since the last write."""
        if not self._epoch_checkpoint_dirty or self._offline or self._closed:
            return
        try:
            self.leader_epoch_cache.flush()
            self._epoch_checkpoint_dirty = False
        except OSError as e:
            raise self._io_failure(e, "leader epoch checkpoint of") from e

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch answer: (epoch, end offset) per KIP-101/279."""
        with self._lock:
            return self.leader_epoch_cache.end_offset_for(epoch, self._leo)

    # ================================================================================ roll
    def _maybe_roll(self, size: int, max_ts: int, first_offset: int, last_offset: int, now: int,
                    segment_bytes: int, segment_ms: int) -> LogSegment:
        seg = self._segments[-1]
        if seg.should_roll(segment_bytes, segment_ms, now, size, max_ts, last_offset):
            return self._roll(max(first_offset, self._leo))
        return seg

    def roll(self, new_base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``new_base_offset`` (default: the LEO)."""
        self._check_online()
        with self._lock:
            try:
                return self._roll(self._leo if new_base_offset is None else new_base_offset)
            except OSError as e:
                raise self._io_failure(e, "roll") from e

    def _roll(self, new_base: int) -> LogSegment:
        active = self._segments[-1]
        if active.base_offset == new_base and active.size == 0:
            return active
        if new_base < active.next_offset:
            raise ValueError(f"cannot roll to {new_base}: below the active segment's next offset")
        seg = LogSegment(self.dir_path, new_base, self._settings(), created_ms=self.clock(), new=True)
        active.on_become_inactive()
        active.release_index_fds()
        self._segments.append(seg)
        self._bases.append(new_base)
        if self._prefix_max_ts is not None:
            self._prefix_max_ts.append(self._prefix_max_ts[-1])
        self._dir_dirty = True
        self.producer_state.map_end_offset = self._leo
        try:
            self.producer_state.take_snapshot(sync=False)
        except OSError as e:
            log.warning("could not write producer snapshot for %s-%s: %s", self.topic, self.partition, e)
        self._roll_flush_upto = new_base
        return seg

    # ================================================================================ reads
    def _check_read_offset(self, offset: int) -> None:
        if offset < self._log_start_offset or offset > self._leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.topic}-{self.partition}: "
                f"[{self._log_start_offset}, {self._leo}]"
            )

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """File regions holding batches from ``start_offset`` (the whole batch that contains it).

        ``max_offset`` (exclusive, e.g. the HW for consumers) bounds the data; ``max_bytes`` too, except
        that with ``min_one_batch`` the first batch is returned whole even when larger. The last batch
        of a region may be cut at ``max_bytes``, as Kafka does; consumers skip a partial last batch.
        """
        with self._lock:
            self._check_read_offset(start_offset)
            result = ReadResult(log_end_offset=self._leo, high_watermark=self._hw,
                                log_start_offset=self._log_start_offset)
            if start_offset == self._leo or (max_offset is not None and start_offset >= max_offset):
                return result
            i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
            segs = self._segments
            while i < len(segs):
                seg = segs[i]
                if max_offset is not None and seg.base_offset >= max_offset:
                    break
                max_pos = None
                if max_offset is not None and (i + 1 == len(segs) or segs[i + 1].base_offset > max_offset):
                    h = seg.translate_offset(max_offset)
                    max_pos = h.position if h is not None else None
                r = seg.read(start_offset, max_bytes, max_pos, min_one_batch)
                if r is None:
                    i += 1
                    continue
                pos, length, h = r
                if length > 0:
                    pin = seg.pin()
                    result.regions.append(FileRegion(pin.fd, pos, length, pin))
                    result.first_batch_offset = h.base_offset
                break
            return result

    def read_bytes(
        self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> bytes:
        """Like :meth:`read` but returns whole batches as bytes (for internal readers)."""
        with self._lock:
            result = self.read(start_offset, max_bytes, max_offset, min_one_batch)
        try:
            chunks = [pread_all(r.fd, r.length, r.position) for r in result.regions]
        finally:
            for r in result.regions:
                r.release()
        data = b"".join(chunks)
        end = 0
        for h in _headers_of(data):
            end = h.position + h.size
        return data[:end]

    def batches(self, start_offset: int | None = None, max_offset: int | None = None) -> Iterable[bytes]:
        """Every batch from ``start_offset`` (default: log start) as bytes; for tests and tools."""
        offset = self._log_start_offset if start_offset is None else start_offset
        while True:
            data = self.read_bytes(offset, 1 << 20, max_offset)
            if not data:
                return
            last = None
            for h in _headers_of(data):
                yield data[h.position : h.position + h.size]
                last = h
            assert last is not None
            offset = last.next_offset
            if offset >= self._leo:
                return

    # ================================================================================ timestamps
    def _prefix_max(self) -> list[int]:
        if self._prefix_max_ts is None:
            out, best = [], -1
            for seg in self._segments:
                best = max(best, seg.max_timestamp)
                out.append(best)
            self._prefix_max_ts = out
        return self._prefix_max_ts

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` (ListOffsets).

        Also takes Kafka's special values: -2 earliest, -1 latest, -3 the record with the max timestamp.
        None when no record qualifies.
        """
        with self._lock:
            if timestamp == EARLIEST_TIMESTAMP:
                return self._log_start_offset, -1
            if timestamp == LATEST_TIMESTAMP:
                return self._leo, -1
            if timestamp == MAX_TIMESTAMP:
                return self._offset_of_max_timestamp()
            prefix = self._prefix_max()
            i = bisect.bisect_left(prefix, timestamp)
            lso = self._log_start_offset
            for seg in self._segments[i:]:
                h = seg.find_batch_by_timestamp(timestamp, lso)
                while h is not None:
                    for rec in _records_of(seg.read_bytes(h.position, h.size)):
                        if rec.timestamp >= timestamp and rec.offset >= lso:
                            return rec.offset, rec.timestamp
                    nxt = None
                    for h2 in seg.headers(h.position + h.size):
                        if h2.max_timestamp >= timestamp:
                            nxt = h2
                            break
                    h = nxt
            return None

    def _offset_of_max_timestamp(self) -> tuple[int, int] | None:
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        target = best.max_timestamp
        for h in best.headers():
            if h.max_timestamp == target:
                for rec in _records_of(best.read_bytes(h.position, h.size)):
                    if rec.timestamp == target:
                        return rec.offset, rec.timestamp
        return None

    # ================================================================================ transactions
    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset) for a READ_COMMITTED fetch."""
        with self._lock:
            i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
            out: list[AbortedTxn] = []
            for seg in self._segments[i:]:
                found, complete = seg.txn_index.collect_aborted(start_offset, upper_bound_offset)
                out.extend(found)
                if complete:
                    break
            return out

    # ================================================================================ truncation
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and above ``offset`` (follower truncation); True if anything went."""
        self._check_online()
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        with self._lock:
            if offset >= self._leo:
                return False
            try:
                if self._segments[0].base_offset > offset:
                    self._truncate_fully(offset)
                    return True
                doomed = [s for s in self._segments if s.base_offset > offset]
                self._remove_segments(doomed)
                seg = self._segments[-1]
                seg.truncate_to(offset)
                seg.make_active()
                self._leo = seg.next_offset
                self._prefix_max_ts = None
                self.leader_epoch_cache.truncate_from_end(self._leo)
                self.producer_state.delete_snapshots_after(self._leo)
                self._rebuild_producer_state(self._leo)
                self._log_start_offset = min(self._log_start_offset, self._leo)
                self._hw = min(self._hw, self._leo)
                self._recovery_point = min(self._recovery_point, self._leo)
                if self._roll_flush_upto is not None and self._roll_flush_upto > self._leo:
                    self._roll_flush_upto = None
            except OSError as e:
                raise self._io_failure(e, "truncate") from e
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log empty at ``offset`` (a follower far behind the leader)."""
        self._check_online()
        with self._lock:
            try:
                self._truncate_fully(offset)
            except OSError as e:
                raise self._io_failure(e, "truncate") from e

    def _truncate_fully(self, offset: int) -> None:
        # Every old file is renamed .deleted before the new segment (maybe of the same name) exists.
        self._remove_segments(list(self._segments))
        self._set_segments([LogSegment(self.dir_path, offset, self._settings(), created_ms=self.clock(), new=True)])
        self.leader_epoch_cache.clear()
        self.producer_state.delete_all_snapshots()
        self.producer_state.reset(offset)
        self._leo = offset
        self._log_start_offset = offset
        self._hw = offset
        self._recovery_point = offset
        self._roll_flush_upto = None

    # ================================================================================ retention
    def _remove_segments(self, doomed: list[LogSegment]) -> None:
        if not doomed:
            return
        gone = {id(s) for s in doomed}
        remaining = [s for s in self._segments if id(s) not in gone]
        for seg in doomed:
            if seg.file_suffix == "":
                seg.change_file_suffixes("", DELETED_SUFFIX)
            self._schedule_delete(seg)
        self._set_segments(remaining)

    def _schedule_delete(self, seg: LogSegment) -> None:
        delay = int(config_value(self.config, "file_delete_delay_ms"))
        self._pending_deletes.append((self.clock() + delay, seg))

    def delete_pending_segments(self, now: int | None = None, *, force: bool = False) -> int:
        """Remove ``.deleted`` files whose delay has passed (closing their descriptors)."""
        t = self.clock() if now is None else now
        with self._lock:
            due = [s for d, s in self._pending_deletes if force or d <= t]
            self._pending_deletes = [(d, s) for d, s in self._pending_deletes if not (force or d <= t)]
        for seg in due:
            seg.delete_files()
        return len(due)

    def _delete_old_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool], reason: str) -> int:
        segs = self._segments
        deletable: list[LogSegment] = []
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if self._hw >= upper and predicate(seg, nxt):
                deletable.append(seg)
            else:
                break
        if not deletable:
            return 0
        if len(deletable) == len(segs):
            if segs[-1].size == 0:
                deletable.pop()
            else:
                self._roll(self._leo)
        if not deletable:
            return 0
        log.info("deleting %d segments of %s-%s (%s)", len(deletable), self.topic, self.partition, reason)
        self._remove_segments(deletable)
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self.producer_state.delete_snapshots_before(self._segments[0].base_offset)
        return len(deletable)

    def delete_old_segments(self, now: int | None = None) -> int:
        """One retention pass: retention.ms, retention.bytes (delete policy) and the log start offset."""
        self._check_online()
        t = self.clock() if now is None else now
        with self._lock:
            try:
                deleted = 0
                if "delete" in cleanup_policies(self.config):
                    retention_ms = int(config_value(self.config, "retention_ms"))
                    if retention_ms >= 0:
                        deleted += self._delete_old_segments(
                            lambda s, _n: t - s.largest_timestamp() > retention_ms, "retention.ms"
                        )
                    retention_bytes = int(config_value(self.config, "retention_bytes"))
                    if retention_bytes >= 0:
                        diff = [sum(s.size for s in self._segments) - retention_bytes]

                        def over_size(s: LogSegment, _n: LogSegment | None) -> bool:
                            if diff[0] - s.size >= 0:
                                diff[0] -= s.size
                                return True
                            return False

                        deleted += self._delete_old_segments(over_size, "retention.bytes")
                lso = self._log_start_offset
                deleted += self._delete_old_segments(
                    lambda _s, n: n is not None and n.base_offset <= lso, "log start offset"
                )
                return deleted
            except OSError as e:
                raise self._io_failure(e, "retention of") from e

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (<= HW); returns the new start."""
        self._check_online()
        with self._lock:
            if offset > self._hw or offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot move log start of {self.topic}-{self.partition} to {offset}: above HW {self._hw}"
                )
            if offset > self._log_start_offset:
                self._log_start_offset = offset
                self.leader_epoch_cache.truncate_from_start(offset)
                try:
                    self._delete_old_segments(lambda _s, n: n is not None and n.base_offset <= offset, "DeleteRecords")
                except OSError as e:
                    raise self._io_failure(e, "delete records of") from e
            return self._log_start_offset

    # ================================================================================ flush / close
    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below ``up_to`` (default LEO) and advance the recovery point."""
        if self._offline:
            return
        with self._lock:
            target = self._leo if up_to is None else min(up_to, self._leo)
            if target <= self._recovery_point and not self._dir_dirty:
                return
            start = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
            todo = [s for s in self._segments[start:] if s.base_offset < target or s.base_offset == self._recovery_point]
            dir_dirty = self._dir_dirty
            self._dir_dirty = False
            epoch_dirty = self._epoch_checkpoint_dirty
        try:
            for seg in todo:
                try:
                    seg.flush()
                except OSError:
                    if seg._closed:
                        continue
                    raise
            if dir_dirty:
                fsync_dir(self.dir_path)
            if epoch_dirty:
                self.leader_epoch_cache.flush()
                self._epoch_checkpoint_dirty = False
        except OSError as e:
            raise self._io_failure(e, "flush") from e
        with self._lock:
            self._recovery_point = max(self._recovery_point, target)
            self._last_flush_ms = self.clock()

    def tick_due(self, now: int) -> bool:
        """Whether :meth:`tick` has anything to do at ``now``: a flush after a roll or for ``flush.ms``,
        or segment files whose deletion delay has passed. Reads attributes only, so the owner can ask
        every log every second and tick the few that answer yes."""
        if self._roll_flush_upto is not None:
            return True
        pending = self._pending_deletes
        if pending and min(d for d, _ in pending) <= now:
            return True
        flush_ms = self._append_limits()[4]
        return flush_ms < _LONG_MAX and now - self._last_flush_ms >= flush_ms and self._leo > self._recovery_point

    def tick(self, now: int | None = None) -> None:
        """Periodic work the owner calls: flush after a roll or ``flush.ms``, delete expired files."""
        t = self.clock() if now is None else now
        if self._offline or self._closed:
            return
        if self._roll_flush_upto is not None:
            upto, self._roll_flush_upto = self._roll_flush_upto, None
            self.flush(upto)
        flush_ms = self._append_limits()[4]
        if flush_ms < _LONG_MAX and t - self._last_flush_ms >= flush_ms and self._leo > self._recovery_point:
            self.flush()
        self.delete_pending_segments(t)

    def close(self) -> None:
        """Snapshot producer state at the LEO, trim indexes; the caller flushes first for a clean stop."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self._offline:
                try:
                    self.producer_state.map_end_offset = self._leo
                    self.producer_state.take_snapshot(sync=True)
                    self.leader_epoch_cache.flush()
                    for seg in self._segments:
                        seg.close()
                except OSError as e:
                    raise self._io_failure(e, "close") from e
            else:
                for seg in self._segments:
                    seg.close_quietly()
        self.delete_pending_segments(force=True)

    def close_quietly(self) -> None:
        """Release descriptors without touching files (the directory failed)."""
        with self._lock:
            self._closed = True
            self._offline = True
            for seg in self._segments:
                seg.close_quietly()
            for _, seg in self._pending_deletes:
                seg.close_quietly()
            self._pending_deletes = []

    # ================================================================================ cleaner support
    def replace_segments(self, new_segment: LogSegment, old_segments: list[LogSegment]) -> None:
        """Swap a cleaner output (``.cleaned`` files) in for ``old_segments`` crash-safely.

        ``.cleaned`` -> ``.swap`` marks the commit point: from then on recovery completes the swap,
        before it recovery discards the cleaned files. The old segments are renamed ``.deleted`` and the
        swap files renamed to their final names.
        """
        with self._lock:
            current = {id(s) for s in self._segments}
            old = [s for s in old_segments if id(s) in current]
            if len(old) != len(old_segments):
                raise ValueError("segments changed while they were being cleaned")
            new_segment.flush()
            new_segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            fsync_dir(self.dir_path)
            for seg in old:
                seg.change_file_suffixes("", DELETED_SUFFIX)
            new_segment.change_file_suffixes(SWAP_SUFFIX, "")
            fsync_dir(self.dir_path)
            remaining = [s for s in self._segments if id(s) not in {id(o) for o in old}]
            remaining.append(new_segment)
            for seg in old:
                self._schedule_delete(seg)
            self._set_segments(remaining)

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        settings = self._settings()
        settings.roll_jitter_ms = 0
        settings.preallocate_bytes = 0
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            path = os.path.join(self.dir_path, f"{base_offset:020d}{suffix}{CLEANED_SUFFIX}")
            if os.path.exists(path):
                os.unlink(path)
        return LogSegment(self.dir_path, base_offset, settings, file_suffix=CLEANED_SUFFIX, new=True)

    @property
    def lock(self) -> threading.RLock:
        return self._lock


def _headers_of(data: bytes) -> Iterable[BatchHeader]:
    """Whole batches in ``data`` (a trailing partial batch is left out)."""
    from storage.batch_headers import HEADER_SIZE, header_is_sane, parse_header

    pos, end = 0, len(data)
    while pos + HEADER_SIZE <= end:
        h = parse_header(data, pos)
        if not header_is_sane(h) or pos + h.size > end:
            return
        yield h
        pos += h.size


def _records_of(batch: bytes) -> Iterable[Any]:
    from protocol.records import BatchView

    return BatchView(batch).records()


__all__ = [
    "AppendInfo",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "LOG_CONFIG_DEFAULTS",
    "MAX_TIMESTAMP",
    "PartitionLog",
    "ReadResult",
    "cleanup_policies",
    "config_value",
    "parse_partition_dir",
    "read_headers",
]
