"""Log compaction for ``cleanup.policy=compact`` (and ``compact,delete``), after Kafka's LogCleaner.

One pass over a log:

1. Pick the filthiest log: dirty bytes / cleanable bytes >= ``min.cleanable.dirty.ratio`` (or a dirty
   segment older than ``max.compaction.lag.ms``). The cleanable range ends at the first uncleanable
   offset: min(active segment base, last stable offset, first segment younger than
   ``min.compaction.lag.ms``).
2. Build a key -> latest offset map over the dirty range in a fixed ``dedupe_buffer_size`` buffer
   (:class:`OffsetMap`: 16-byte MD5 of the key + 8-byte offset per slot). When it fills up, the pass
   stops there and the rest stays dirty for the next pass. Batches of aborted transactions stay out of
   the map, so a key whose latest record was aborted keeps its latest committed one.
3. Rewrite segments from the log start in groups that fit one segment: a record survives if no later
   offset for its key is in the map. Batches keep their base offset, last offset delta, producer id,
   epoch, sequence, transactional flag, leader epoch and compression (KIP-534: batches holding tombstones
   or markers get a delete horizon; a tombstone goes once its batch's horizon has passed). Records of
   aborted transactions go, wherever their abort marker is (the aborted transactions come from the
   ``.txnindex`` of every segment, the later ones included). A transaction marker goes once no batch of
   its transaction remains and its horizon has passed; an abort marker that stays keeps its entry in
   the cleaned segment's ``.txnindex``. The last batch of each producer is kept, even empty, so its
   sequence survives.
4. Swap each cleaned group in with the ``.cleaned`` -> ``.swap`` -> final rename scheme
   (:meth:`PartitionLog.replace_segments`).

Compression work happens here, on the cleaner thread (or whatever executor calls :meth:`clean_once`).
"""

from __future__ import annotations

import hashlib
import logging
import math
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from protocol.records import BatchView, CompressionType, TimestampType, build_batch
from storage.batch_headers import CONTROL_ABORT, BatchHeader, control_record
from storage.errors import StorageError
from storage.log import PartitionLog, cleanup_policies, config_value, now_ms
from storage.segment import CLEANED_SUFFIX, INT32_MAX, LogSegment
from storage.throttler import Throttler
from storage.txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

_SLOT = struct.Struct(">16sq")
SLOT_SIZE = _SLOT.size  # 24
_OFFSET = struct.Struct(">q")


def _largest_prime_at_most(n: int) -> int:
    def is_prime(k: int) -> bool:
        if k < 2:
            return False
        if k % 2 == 0:
            return k == 2
        i = 3
        while i * i <= k:
            if k % i == 0:
                return False
            i += 2
        return True

    while n > 2 and not is_prime(n):
        n -= 1
    return max(n, 2)


class OffsetMap:
    """Fixed-memory hash map from key (MD5) to its latest offset; double hashing over a bytearray."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.slots = _largest_prime_at_most(max(memory // SLOT_SIZE, 3))
        self._buf = bytearray(self.slots * SLOT_SIZE)
        self.capacity = max(int(self.slots * load_factor), 1)
        self.size = 0
        self.latest_offset = -1

    @property
    def memory_bytes(self) -> int:
        return len(self._buf)

    def is_full(self) -> bool:
        return self.size >= self.capacity

    def clear(self) -> None:
        self._buf[:] = bytes(len(self._buf))
        self.size = 0
        self.latest_offset = -1

    def _probe(self, digest: bytes) -> Iterable[int]:
        h1 = int.from_bytes(digest[:8], "big")
        h2 = int.from_bytes(digest[8:], "big") % (self.slots - 1) + 1
        slot = h1 % self.slots
        for _ in range(self.slots):
            yield slot * SLOT_SIZE
            slot = (slot + h2) % self.slots

    def put(self, key: bytes, offset: int) -> None:
        digest = hashlib.md5(key).digest()
        buf = self._buf
        for pos in self._probe(digest):
            stored: int = _OFFSET.unpack_from(buf, pos + 16)[0]
            if stored == 0:
                if self.size >= self.slots - 1:
                    raise OverflowError("offset map is full")
                _SLOT.pack_into(buf, pos, digest, offset + 1)
                self.size += 1
                break
            if buf[pos : pos + 16] == digest:
                _OFFSET.pack_into(buf, pos + 16, offset + 1)
                break
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        digest = hashlib.md5(key).digest()
        buf = self._buf
        for pos in self._probe(digest):
            stored: int = _OFFSET.unpack_from(buf, pos + 16)[0]
            if stored == 0:
                return -1
            if buf[pos : pos + 16] == digest:
                return stored - 1
        return -1


@dataclass(slots=True)
class CleanStats:
    topic: str = ""
    partition: int = 0
    first_dirty_offset: int = 0
    end_offset: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    segments_cleaned: int = 0
    map_entries: int = 0


class CleanerCheckpoints:
    """Where each log's dirty section starts; in memory, optionally persisted through the log manager."""

    def __init__(self, log_manager: Any = None) -> None:
        self._offsets: dict[tuple[str, int], int] = {}
        self._manager = log_manager
        if log_manager is not None:
            for d in log_manager.online_dirs:
                self._offsets.update(log_manager.cleaner_offsets(d))

    def get(self, lg: PartitionLog) -> int:
        return self._offsets.get((lg.topic, lg.partition), 0)

    def set(self, lg: PartitionLog, offset: int) -> None:
        self._offsets[(lg.topic, lg.partition)] = offset
        if self._manager is not None:
            self._manager.update_cleaner_offset(lg.topic, lg.partition, offset)


class _TxnTracker:
    """Kafka's CleanedTransactionMetadata: which transactions a pass has seen batches of, and the
    transaction index of the segment being written, which gets the aborted transactions whose markers
    stay (so read_committed fetches of what remains still see them as aborted)."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._aborted = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        # producer id -> (its aborted transaction, whether a batch of it was seen in this pass)
        self.ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        self.ongoing_committed: set[int] = set()
        self.cleaned_index: TransactionIndex | None = None

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._next < len(self._aborted) and self._aborted[self._next].first_offset <= offset:
            txn = self._aborted[self._next]
            self.ongoing_aborted.setdefault(txn.producer_id, (txn, False))
            self._next += 1

    def data_batch_is_aborted(self, h: BatchHeader) -> bool:
        if not h.is_transactional:
            return False
        self._consume_aborted_up_to(h.last_offset)
        ongoing = self.ongoing_aborted.get(h.producer_id)
        if ongoing is not None:
            self.ongoing_aborted[h.producer_id] = (ongoing[0], True)
            return True
        self.ongoing_committed.add(h.producer_id)
        return False

    def marker_can_be_discarded(self, h: BatchHeader, control_type: int) -> bool:
        self._consume_aborted_up_to(h.last_offset)
        if control_type == CONTROL_ABORT:
            ongoing = self.ongoing_aborted.pop(h.producer_id, None)
            if ongoing is not None and ongoing[1]:
                # The marker stays until no batch of its transaction is left: so does its index entry.
                if self.cleaned_index is not None:
                    self.cleaned_index.append(ongoing[0])
                return False
            return True
        committed = h.producer_id in self.ongoing_committed
        self.ongoing_committed.discard(h.producer_id)
        return not committed


class CleaningAbortedError(Exception):
    """Kafka's LogCleaningAbortedException: the pass stopped before its commit point."""


class LogCleaner:
    def __init__(
        self,
        logs: Callable[[], list[PartitionLog]] | Any,
        *,
        dedupe_buffer_size: int = 128 * 1024 * 1024,
        io_buffer_size: int = 1024 * 1024,
        load_factor: float = 0.9,
        clock: Callable[[], int] = now_ms,
        backoff_ms: int = 15_000,
        checkpoints: CleanerCheckpoints | None = None,
        max_io_bytes_per_second: float = math.inf,
        threads: int = 1,
    ) -> None:
        if callable(logs):
            self._logs = logs
            manager = None
        else:
            manager = logs
            self._logs = logs.all_logs
        self.dedupe_buffer_size = dedupe_buffer_size
        self.io_buffer_size = io_buffer_size
        self.load_factor = load_factor
        self.clock = clock
        self.backoff_ms = backoff_ms
        self.checkpoints = checkpoints if checkpoints is not None else CleanerCheckpoints(manager)
        # log.cleaner.threads: each thread cleans a different log, with its own share of the dedupe
        # buffer (Kafka's cleaner threads split log.cleaner.dedupe.buffer.size), and all share the throttler.
        self.threads = threads
        self._local = threading.local()  # the calling thread's offset map
        self._threads: list[threading.Thread] = []
        self._reconfiguring = threading.Lock()
        self._stop = threading.Event()
        # log.cleaner.io.max.bytes.per.second over the reads and writes of a pass (Kafka's cleaner-io
        # throttler, checked every 300 ms); a stop cuts a nap short.
        self.throttler = Throttler(max_io_bytes_per_second, 300, sleep=self._stop.wait)
        self.last_stats: CleanStats | None = None
        # Kafka's LogCleanerManager in-progress states, reduced to what the broker needs: partitions
        # whose cleaning is paused (a replica moving between log dirs), and the ones being cleaned.
        self._state = threading.Condition()
        self._paused: set[tuple[str, int]] = set()
        self._cleaning: set[tuple[str, int]] = set()
        self._abort: set[tuple[str, int]] = set()

    # ================================================================================ pausing
    def abort_and_pause(self, topic: str, partition: int, timeout: float | None = 60.0) -> None:
        """Kafka's abortAndPauseCleaning: no cleaning of the partition until ``resume``; a pass cleaning
        it now stops at its next segment and rolls back (what it had not committed). Blocks until then."""
        tp = (topic, partition)
        with self._state:
            self._paused.add(tp)
            if tp in self._cleaning:
                self._abort.add(tp)
            self._state.wait_for(lambda: tp not in self._cleaning, timeout)

    def resume(self, topic: str, partition: int) -> None:
        """Kafka's resumeCleaning."""
        with self._state:
            self._paused.discard((topic, partition))

    def is_paused(self, topic: str, partition: int) -> bool:
        with self._state:
            return (topic, partition) in self._paused

    def is_cleaning(self, topic: str, partition: int) -> bool:
        with self._state:
            return (topic, partition) in self._cleaning

    def _check_abort(self, lg: PartitionLog) -> None:
        if (lg.topic, lg.partition) in self._abort:
            raise CleaningAbortedError(f"the cleaning of {lg.topic}-{lg.partition} was aborted")

    # ================================================================================ choosing a log
    def cleanable_range(self, lg: PartitionLog, now: int) -> tuple[int, int]:
        """(first dirty offset, first uncleanable offset) of ``lg``."""
        segs = lg.segments
        first_dirty = self.checkpoints.get(lg)
        if first_dirty < lg.log_start_offset or first_dirty > lg.log_end_offset:
            first_dirty = lg.log_start_offset
        limit = min(segs[-1].base_offset, lg.last_stable_offset)
        min_lag = int(config_value(lg.config, "min_compaction_lag_ms"))
        if min_lag > 0:
            for seg in segs:
                if seg.base_offset >= limit:
                    break
                if seg.largest_timestamp() > now - min_lag:
                    limit = min(limit, seg.base_offset)
                    break
        return first_dirty, max(first_dirty, limit)

    def dirty_ratio(self, lg: PartitionLog, now: int) -> tuple[float, int, int]:
        first_dirty, end = self.cleanable_range(lg, now)
        clean = dirty = 0
        for seg in lg.segments:
            if seg.base_offset >= end:
                break
            nxt_base = seg.next_offset
            if nxt_base <= first_dirty:
                clean += seg.size
            else:
                dirty += seg.size
        total = clean + dirty
        return (dirty / total if total else 0.0), dirty, total

    def _must_clean_now(self, lg: PartitionLog, now: int, first_dirty: int, end: int) -> bool:
        max_lag = int(config_value(lg.config, "max_compaction_lag_ms"))
        if max_lag <= 0 or max_lag >= 2**62 or end <= first_dirty:
            return False
        for seg in lg.segments:
            if seg.next_offset <= first_dirty or seg.size == 0:
                continue
            if seg.base_offset >= end:
                return False
            h = seg.first_header()
            ts = h.max_timestamp if h is not None and h.max_timestamp >= 0 else seg.largest_timestamp()
            return now - ts > max_lag
        return False

    def grab_filthiest_log(self, now: int | None = None) -> PartitionLog | None:
        t = self.clock() if now is None else now
        best: tuple[float, PartitionLog] | None = None
        for lg in self._logs():
            if lg.is_offline or "compact" not in cleanup_policies(lg.config):
                continue
            if (lg.topic, lg.partition) in self._paused or (lg.topic, lg.partition) in self._cleaning:
                continue  # paused, or another cleaner thread has it
            try:
                ratio, dirty, _ = self.dirty_ratio(lg, t)
                first_dirty, end = self.cleanable_range(lg, t)
            except (OSError, StorageError, ValueError):
                continue
            if dirty == 0:
                continue
            if ratio >= float(config_value(lg.config, "min_cleanable_dirty_ratio")) or self._must_clean_now(
                lg, t, first_dirty, end
            ):
                if best is None or ratio > best[0]:
                    best = (ratio, lg)
        return None if best is None else best[1]

    # ================================================================================ cleaning
    def clean_once(self, now: int | None = None) -> CleanStats | None:
        """Clean the filthiest log, if any is due; safe to call from a thread pool. None when none was
        due, or the pass was aborted (``abort_and_pause``)."""
        with self._state:
            lg = self.grab_filthiest_log(now)
            if lg is None:
                return None
            tp = (lg.topic, lg.partition)
            self._cleaning.add(tp)
        try:
            return self.clean(lg, now)
        except CleaningAbortedError as e:
            log.info("%s; the partition's cleaning is paused", e)
            return None
        finally:
            with self._state:
                self._cleaning.discard(tp)
                self._abort.discard(tp)
                self._state.notify_all()

    def _map(self) -> OffsetMap:
        offset_map: OffsetMap | None = getattr(self._local, "offset_map", None)
        if offset_map is None:
            offset_map = self._local.offset_map = OffsetMap(self.dedupe_buffer_size // max(1, self.threads),
                                                            self.load_factor)
        else:
            offset_map.clear()
        return offset_map

    def clean(self, lg: PartitionLog, now: int | None = None) -> CleanStats:
        t = self.clock() if now is None else now
        first_dirty, end = self.cleanable_range(lg, t)
        stats = CleanStats(lg.topic, lg.partition, first_dirty)
        if end <= first_dirty:
            stats.end_offset = first_dirty
            return stats
        offset_map = self._map()
        end_offset = self._build_offset_map(lg, first_dirty, end, offset_map, stats)
        stats.end_offset = end_offset
        stats.map_entries = offset_map.size
        delete_retention = int(config_value(lg.config, "delete_retention_ms"))
        all_segments = lg.segments
        segments = [s for s in all_segments if s.base_offset < end_offset]
        # The aborted transactions of the whole range rewritten, from every segment's index: an abort
        # marker (and so its entry) may sit in a later segment than the transaction's batches.
        upper = all_segments[len(segments)].base_offset if len(segments) < len(all_segments) else lg.log_end_offset
        tracker = _TxnTracker(lg.collect_aborted_transactions(segments[0].base_offset, upper))
        last_batch_of_producer = {
            pid: e.last_data_offset for pid, e in lg.producer_state.producers.items() if e.last_data_offset >= 0
        }
        segment_bytes = int(config_value(lg.config, "segment_bytes"))
        for group in self._group_segments(segments, segment_bytes):
            cleaned = lg.new_cleaned_segment(group[0].base_offset)
            tracker.cleaned_index = cleaned.txn_index
            try:
                for seg in group:
                    self._check_abort(lg)
                    self._clean_into(seg, cleaned, offset_map, end_offset, t, delete_retention, tracker,
                                     last_batch_of_producer, stats)
                cleaned.on_become_inactive()
                lg.replace_segments(cleaned, group)
                cleaned.release_index_fds()
                stats.segments_cleaned += len(group)
            except BaseException:
                if cleaned.file_suffix == CLEANED_SUFFIX:
                    cleaned.delete_files()  # before the commit point: roll back
                raise  # past it (.swap on disk), the next load completes the swap
        self.checkpoints.set(lg, end_offset)
        self.last_stats = stats
        return stats

    def _build_offset_map(
        self, lg: PartitionLog, start: int, end: int, offset_map: OffsetMap, stats: CleanStats
    ) -> int:
        """Fill the map with the dirty range; returns the offset it covers up to (exclusive).

        Batches of aborted transactions are left out, as Kafka's buildOffsetMap leaves them: they are
        dropped, and a key whose latest record was aborted keeps its latest committed value."""
        reached = start
        tracker = _TxnTracker(lg.collect_aborted_transactions(start, end))
        for seg in lg.segments:
            if seg.base_offset >= end:
                break
            if seg.next_offset <= start:
                continue
            self._check_abort(lg)
            for h in seg.headers():
                if h.next_offset <= start:
                    continue
                if h.base_offset >= end:
                    return reached
                if h.is_control:
                    tracker.marker_can_be_discarded(h, control_record(seg.read_bytes(h.position, h.size))[0])
                    reached = h.next_offset
                    continue
                if tracker.data_batch_is_aborted(h):
                    stats.records_read += h.records_count
                    reached = h.next_offset
                    continue
                if offset_map.size + h.records_count > offset_map.capacity:
                    if reached == start:
                        raise StorageError("log.cleaner.dedupe.buffer.size cannot hold a single batch of keys")
                    return reached
                data = seg.read_bytes(h.position, h.size)
                stats.bytes_read += len(data)
                self.throttler.maybe_throttle(len(data))
                for rec in BatchView(data).records():
                    stats.records_read += 1
                    if rec.key is not None and rec.offset >= start:
                        offset_map.put(rec.key, rec.offset)
                reached = h.next_offset
        return min(reached, end) if reached > start else end

    def _group_segments(self, segments: list[LogSegment], max_size: int) -> list[list[LogSegment]]:
        groups: list[list[LogSegment]] = []
        current: list[LogSegment] = []
        size = 0
        for seg in segments:
            if current and (
                size + seg.size > max_size or seg.next_offset - 1 - current[0].base_offset > INT32_MAX
            ):
                groups.append(current)
                current, size = [], 0
            current.append(seg)
            size += seg.size
        if current:
            groups.append(current)
        return groups

    def _clean_into(
        self,
        source: LogSegment,
        dest: LogSegment,
        offset_map: OffsetMap,
        end_offset: int,
        now: int,
        delete_retention_ms: int,
        tracker: _TxnTracker,
        last_batch_of_producer: dict[int, int],
        stats: CleanStats,
    ) -> None:
        out = bytearray()
        out_info: list[tuple[int, int, int]] = []  # (last offset, max timestamp, offset of max ts)

        def flush_out() -> None:
            if not out:
                return
            last = out_info[-1][0]
            max_ts, off_max = -1, last
            for _lo, mts, omax in out_info:
                if mts > max_ts:
                    max_ts, off_max = mts, omax
            dest.append(memoryview(out), last, max_ts, off_max)
            stats.bytes_written += len(out)
            self.throttler.maybe_throttle(len(out))
            out.clear()
            out_info.clear()

        for h in source.headers():
            data = source.read_bytes(h.position, h.size)
            self.throttler.maybe_throttle(len(data))
            kept = self._filter_batch(h, data, offset_map, end_offset, now, delete_retention_ms, tracker,
                                      last_batch_of_producer, stats)
            if kept is None:
                continue
            kh = BatchView(kept)
            out += kept
            out_info.append((kh.last_offset, kh.max_timestamp, kh.last_offset))
            if len(out) >= self.io_buffer_size:
                flush_out()
        flush_out()

    def _filter_batch(
        self,
        h: BatchHeader,
        data: bytes,
        offset_map: OffsetMap,
        end_offset: int,
        now: int,
        delete_retention_ms: int,
        tracker: _TxnTracker,
        last_batch_of_producer: dict[int, int],
        stats: CleanStats,
    ) -> bytes | None:
        view = BatchView(data)
        horizon = view.delete_horizon_ms
        horizon_expired = horizon is not None and horizon <= now
        if h.is_control:
            ctype, _ = control_record(data)
            discard = tracker.marker_can_be_discarded(h, ctype)
            if discard and horizon_expired:
                return None
            if horizon is None:
                return self._rebuild(view, list(view.records()), now + delete_retention_ms)
            return data
        if tracker.data_batch_is_aborted(h):
            stats.records_read += h.records_count
            if last_batch_of_producer.get(h.producer_id) == h.last_offset:
                return self._rebuild(view, [], None)
            return None
        records = list(view.records())
        retained = []
        has_tombstone = False
        for rec in records:
            if rec.offset >= end_offset or rec.offset > offset_map.latest_offset:
                keep = True
            elif rec.key is None:
                keep = False
            else:
                found = offset_map.get(rec.key)
                keep = not (found >= 0 and rec.offset < found)
                if keep and rec.value is None and horizon_expired:
                    keep = False
            if keep:
                retained.append(rec)
                if rec.value is None:
                    has_tombstone = True
        stats.records_retained += len(retained)
        needs_horizon = has_tombstone and horizon is None
        if len(retained) == len(records) and not needs_horizon:
            return data
        if not retained:
            if h.producer_id >= 0 and last_batch_of_producer.get(h.producer_id) == h.last_offset:
                return self._rebuild(view, [], horizon)
            return None
        return self._rebuild(view, retained, now + delete_retention_ms if needs_horizon else horizon)

    @staticmethod
    def _rebuild(view: BatchView, retained: list[Any], delete_horizon_ms: int | None) -> bytes:
        """The batch with only ``retained`` records, at the same base offset and offset range."""
        log_append = view.timestamp_type == TimestampType.LOG_APPEND_TIME
        kwargs: dict[str, Any] = {}
        if delete_horizon_ms is not None:
            kwargs["delete_horizon_ms"] = delete_horizon_ms
        elif not retained:
            kwargs["base_timestamp"] = view.max_timestamp
        base = view.base_offset
        return build_batch(
            [(r.key, r.value, r.timestamp, r.headers, r.offset - base) for r in retained],
            base_offset=base,
            compression=CompressionType(view.compression),
            timestamp_type=view.timestamp_type,
            log_append_time=view.max_timestamp if log_append else None,
            producer_id=view.producer_id,
            producer_epoch=view.producer_epoch,
            base_sequence=view.base_sequence,
            is_transactional=view.is_transactional,
            is_control=view.is_control,
            partition_leader_epoch=view.partition_leader_epoch,
            last_offset_delta=view.last_offset_delta,
            **kwargs,
        )

    # ================================================================================ thread
    def start(self) -> None:
        """Start ``threads`` cleaner threads (none for 0: no log is cleaned, as in Kafka)."""
        if self._threads:
            return
        self._stop.clear()
        self._threads = [threading.Thread(target=self._run, name=f"kafka-log-cleaner-thread-{i}", daemon=True)
                         for i in range(self.threads)]
        for t in self._threads:
            t.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        self._threads = []

    def set_threads(self, threads: int) -> None:
        """A new log.cleaner.threads (dynamic, as Kafka's LogCleaner.reconfigure): the threads stop after
        their current pass, then the new number starts. Blocks: call it off the event loop."""
        with self._reconfiguring:  # one change at a time: a second waits, then finds nothing to do
            if threads == self.threads:
                return
            running = bool(self._threads)
            self.stop(timeout=None)
            self.threads = threads
            if running:
                self.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                stats = self.clean_once()
            except Exception:
                log.exception("log cleaner pass failed")
                stats = None
            if stats is None:
                self._stop.wait(self.backoff_ms / 1000)
