"""One log segment: ``<base offset>.log`` plus its offset, time and transaction indexes.

The ``.log`` file is a sequence of record batches exactly as Kafka writes them. Appends are positional
writes at the current size; a write that fails part way (a full disk) is truncated back so the file
always ends on a batch boundary. Index entries are added every ``index.interval.bytes`` of appended data
(Kafka's rule: the entry names the last offset of the append and the position where it starts).
"""

from __future__ import annotations

import os
import random
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from storage.batch_headers import (
    HEADER_SIZE,
    BatchHeader,
    crc_is_valid,
    header_is_sane,
    parse_header,
    read_headers,
)
from storage.errors import CorruptIndexError
from storage.file_handles import FileHandle, FilePin
from storage.index import OffsetIndex, TimeIndex
from storage.txn_index import TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
INT32_MAX = 2**31 - 1
_RECOVERY_CHUNK = 4 * 1024 * 1024
_SCAN_WINDOW = 8 * 1024
# Appends whose batch headers the segment keeps (see LogSegment.translate_offset): followers and consumers
# at the tail ask for the batches of the last few appends.
_RECENT_APPENDS = 8


def pread_all(fd: int, length: int, position: int) -> bytes:
    """``length`` bytes at ``position`` (fewer at end of file), however many reads that takes."""
    chunks = []
    while length > 0:
        data = os.pread(fd, length, position)
        if not data:
            break
        chunks.append(data)
        position += len(data)
        length -= len(data)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def segment_file(dir_path: str, base_offset: int, suffix: str, extra_suffix: str = "") -> str:
    return os.path.join(dir_path, filename_prefix(base_offset) + suffix + extra_suffix)


def offset_from_filename(name: str) -> int:
    return int(name.split(".", 1)[0])


@dataclass(slots=True)
class SegmentSettings:
    index_interval_bytes: int = 4096
    max_index_size: int = 10 * 1024 * 1024
    roll_jitter_ms: int = 0
    preallocate_bytes: int = 0


OnBatch = Callable[[BatchHeader, memoryview], None]


class LogSegment:
    """A segment's files and in-memory state (size, max timestamp so far, bytes since the last index entry)."""

    def __init__(
        self,
        dir_path: str,
        base_offset: int,
        settings: SegmentSettings,
        *,
        file_suffix: str = "",
        created_ms: int | None = None,
        new: bool = False,
    ) -> None:
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.settings = settings
        self.file_suffix = file_suffix
        self.log_path = segment_file(dir_path, base_offset, LOG_SUFFIX, file_suffix)
        preallocate_index = new
        self.offset_index = OffsetIndex(
            segment_file(dir_path, base_offset, INDEX_SUFFIX, file_suffix),
            base_offset,
            settings.max_index_size,
            preallocate=preallocate_index,
        )
        self.time_index = TimeIndex(
            segment_file(dir_path, base_offset, TIME_INDEX_SUFFIX, file_suffix),
            base_offset,
            settings.max_index_size,
            preallocate=preallocate_index,
        )
        self.txn_index = TransactionIndex(segment_file(dir_path, base_offset, TXN_INDEX_SUFFIX, file_suffix), base_offset)
        # The .log descriptor is opened on demand and shared through the segment file cache: an
        # inactive segment costs no descriptor until someone reads it.
        self.file = FileHandle(self.log_path)
        if new:
            with self.file.use(create=True) as fd:
                self.size = os.fstat(fd).st_size
                if settings.preallocate_bytes > 0 and self.size == 0:
                    os.posix_fallocate(fd, 0, settings.preallocate_bytes)
        else:
            self.size = os.stat(self.log_path).st_size
        if new:  # Kafka always has both index files next to a log file
            self.offset_index.entries  # noqa: B018 - creates and preallocates the file
            self.time_index.entries  # noqa: B018
        self.created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
        self.roll_jitter_ms = settings.roll_jitter_ms
        self._max_ts: tuple[int, int] | None = (-1, base_offset) if new else None
        self._rolling_ts: int | None = None
        self._next_offset: int | None = base_offset if new else None
        self._bytes_since_index = 0
        # (position, headers relative to it) of the last appends, oldest first: a read at the tail finds
        # its batch here instead of reading headers back from the file after the index lookup.
        self._recent: deque[tuple[int, Sequence[BatchHeader]]] = deque(maxlen=_RECENT_APPENDS)
        self._closed = False
        self._unsynced = True  # the previous process may have left writes in the page cache
        self.recovered_records = 0

    # -- state ---------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, suffix={self.file_suffix!r})"

    @property
    def fd(self) -> int:
        """The open .log descriptor, for tools and tests only: the cache may close it once idle.
        Storage code holds it with ``self.file.use()`` or ``self.file.pin()`` instead."""
        with self.file.use() as fd:
            return fd

    def pin(self) -> FilePin:
        """A reference that keeps the .log descriptor open until released (a fetch response)."""
        return self.file.pin()

    def _read_headers(self, start: int, end: int, window: int = 64 * 1024) -> Iterator[BatchHeader]:
        with self.file.use() as fd:
            yield from read_headers(fd, start, end, window)

    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(max timestamp so far, last offset of the batch holding it); (-1, base) when unknown/empty."""
        if self._max_ts is None:
            self._max_ts = self.time_index.last_entry
            if self._max_ts[0] < 0 and self.size > 0:
                self._max_ts = self._scan_max_timestamp(0)
        return self._max_ts

    @property
    def max_timestamp(self) -> int:
        return self.max_timestamp_and_offset[0]

    def largest_timestamp(self) -> int:
        """Kafka's retention clock for the segment: max timestamp, or the file mtime when there is none."""
        ts = self.max_timestamp
        if ts >= 0:
            return ts
        with self.file.use() as fd:
            return int(os.fstat(fd).st_mtime * 1000)

    def _scan_max_timestamp(self, start: int) -> tuple[int, int]:
        best = self.time_index.last_entry if start else (-1, self.base_offset)
        for h in self._read_headers(start, self.size):
            if h.max_timestamp > best[0]:
                best = (h.max_timestamp, h.last_offset)
        return best

    @property
    def next_offset(self) -> int:
        """Offset after the last batch (the base offset for an empty segment)."""
        if self._next_offset is None:
            _, pos = self.offset_index.lookup(2**63 - 1)
            nxt = self.base_offset
            for h in self._read_headers(pos, self.size, window=256 * 1024):
                nxt = h.next_offset
            self._next_offset = nxt
        return self._next_offset

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def rolling_based_timestamp(self) -> int | None:
        if self._rolling_ts is None and self.size > 0:
            h = self.first_header()
            if h is not None:
                self._rolling_ts = h.max_timestamp
        return self._rolling_ts

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        ts = self.rolling_based_timestamp()
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def should_roll(self, segment_bytes: int, segment_ms: int, now_ms: int, append_size: int, max_timestamp: int,
                    max_offset: int) -> bool:
        """Kafka's LogSegment.shouldRoll, asked by every append (so positional arguments)."""
        size = self.size
        if size > 0:
            if size > segment_bytes - append_size:
                return True
            if self.time_waited_for_roll(now_ms, max_timestamp) > segment_ms - self.roll_jitter_ms:
                return True
        return (
            self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.can_convert_to_relative_offset(max_offset)
        )

    def first_header(self) -> BatchHeader | None:
        with self.file.use() as fd:
            data = os.pread(fd, HEADER_SIZE, 0)
        if len(data) < HEADER_SIZE:
            return None
        return parse_header(data)

    # -- append --------------------------------------------------------------------------------------
    def append(self, data: memoryview, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int,
               headers: Sequence[BatchHeader] | None = None) -> None:
        """Write ``data`` (whole batches) at the end; roll back a partial write before raising.
        ``headers``, when given, are those of ``data``'s batches (positions within ``data``)."""
        if not data:
            return
        position = self.size
        if not self.can_convert_to_relative_offset(largest_offset):
            raise ValueError(f"offset {largest_offset} overflows segment {self.base_offset}")
        if position == 0:
            self._rolling_ts = largest_timestamp
        total = len(data)
        written = 0
        # acquire/release rather than the ``use()`` context manager: this runs once per produce request.
        handle = self.file
        fd = handle.acquire()
        try:
            while written < total:
                written += os.pwrite(fd, data[written:] if written else data, position + written)
        except BaseException:
            if written:
                try:
                    os.ftruncate(fd, position)
                except OSError:
                    pass
            raise
        finally:
            handle.release()
        self.size = position + total
        self._unsynced = True
        self._next_offset = largest_offset + 1
        if headers:
            self._recent.append((position, headers))
        else:
            # The kept appends must be the segment's last ones with nothing between them, or a read
            # could skip the batches of an append that is not among them.
            self._recent.clear()
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self.max_timestamp_and_offset
        if largest_timestamp > max_ts[0]:
            self._max_ts = (largest_timestamp, offset_of_max_timestamp)
        if self._bytes_since_index > self.settings.index_interval_bytes:
            self._append_index_entries(largest_offset, position)
            self._bytes_since_index = 0
        self._bytes_since_index += total

    def _append_index_entries(self, offset: int, position: int) -> None:
        # Sparse indexes: an entry that cannot be written (a full disk) is skipped, lookups stay correct.
        try:
            self.offset_index.append(offset, position)
            ts, ts_offset = self.max_timestamp_and_offset
            self.time_index.maybe_append(ts, ts_offset)
        except OSError:
            pass

    # -- reads ---------------------------------------------------------------------------------------
    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """Header of the first batch whose last offset is >= ``offset`` (None if the segment has none)."""
        recent = self._recent
        if recent and start_position == 0 and recent[0][1][0].base_offset <= offset:
            # Within (or past) the last appends: every batch before them ends below ``offset``.
            for position, headers in recent:
                if headers[-1].last_offset >= offset:
                    for h in headers:
                        if h.last_offset >= offset:
                            return BatchHeader(position + h.position, *h[1:])
            return None
        _, pos = self.offset_index.lookup(offset)
        pos = max(pos, start_position)
        for h in self._read_headers(pos, self.size, window=_SCAN_WINDOW):
            if h.last_offset >= offset:
                return h
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_batch: bool = True
    ) -> tuple[int, int, BatchHeader] | None:
        """(position, length, first batch header) of the bytes to return for a fetch, or None."""
        h = self.translate_offset(start_offset)
        if h is None:
            return None
        limit = self.size if max_position is None else min(max_position, self.size)
        if h.position >= limit:
            return h.position, 0, h
        size = max(max_size, h.size) if min_one_batch else max_size
        return h.position, min(limit - h.position, size), h

    def headers(self, start_position: int = 0, end_position: int | None = None) -> Iterator[BatchHeader]:
        return self._read_headers(start_position, self.size if end_position is None else end_position)

    def read_bytes(self, position: int, length: int) -> bytes:
        with self.file.use() as fd:
            return pread_all(fd, length, position)

    def find_batch_by_timestamp(self, timestamp: int, start_offset: int) -> BatchHeader | None:
        """First batch at or after ``start_offset`` whose max timestamp is >= ``timestamp``."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(ts_offset, start_offset))
        for h in self._read_headers(pos, self.size, window=_SCAN_WINDOW):
            if h.max_timestamp >= timestamp and h.last_offset >= start_offset:
                return h
        return None

    # -- recovery ------------------------------------------------------------------------------------
    def recover(self, on_batch: OnBatch | None = None, *, min_offset: int | None = None) -> int:
        """Validate every batch, truncate at the first invalid one, rebuild the indexes.

        Returns the number of bytes truncated. ``on_batch`` sees each valid batch (producer state,
        leader epochs, transaction index). Afterwards ``recovered_records`` counts the records kept.
        """
        with self.file.use() as fd:
            return self._recover(fd, on_batch, min_offset)

    def _recover(self, fd: int, on_batch: OnBatch | None, min_offset: int | None) -> int:
        self._recent.clear()
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        valid = 0
        last_index_entry = 0
        max_ts = (-1, self.base_offset)
        expected = self.base_offset if min_offset is None else min_offset
        file_size = os.fstat(fd).st_size
        records = 0
        chunk = b""
        chunk_start = 0
        while valid + HEADER_SIZE <= file_size:
            rel = valid - chunk_start
            if rel < 0 or rel + HEADER_SIZE > len(chunk):
                chunk = os.pread(fd, min(_RECOVERY_CHUNK, file_size - valid), valid)
                chunk_start, rel = valid, 0
                if len(chunk) < HEADER_SIZE:
                    break
            h = parse_header(chunk, rel)
            h = h._replace(position=valid)
            if not header_is_sane(h) or valid + h.size > file_size:
                break
            if rel + h.size <= len(chunk):
                batch = memoryview(chunk)[rel : rel + h.size]
            else:
                whole = self.read_bytes(valid, h.size)
                if len(whole) < h.size:
                    break
                batch = memoryview(whole)
            if not crc_is_valid(batch):
                break
            if h.base_offset < expected or not self.can_convert_to_relative_offset(h.last_offset):
                break
            if h.base_offset > expected and self._next_batch_contradicts_gap(fd, h, expected, file_size):
                break
            if h.max_timestamp > max_ts[0]:
                max_ts = (h.max_timestamp, h.last_offset)
            if valid - last_index_entry > self.settings.index_interval_bytes:
                self.offset_index.append(h.last_offset, valid)
                self.time_index.maybe_append(max_ts[0], max_ts[1])
                last_index_entry = valid
            if on_batch is not None:
                on_batch(h, batch)
            expected = h.next_offset
            valid += h.size
            records += h.records_count
        truncated = file_size - valid
        if truncated:
            os.ftruncate(fd, valid)
        self._unsynced = True
        self.size = valid
        self.recovered_records = records
        self._max_ts = max_ts
        self._next_offset = expected if valid else self.base_offset
        self._rolling_ts = None
        self._bytes_since_index = valid - last_index_entry if valid else 0
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(max_ts[0], max_ts[1], skip_full_check=True)
        self.time_index.trim_to_valid_size()
        return truncated

    def _next_batch_contradicts_gap(self, fd: int, h: BatchHeader, expected: int, file_size: int) -> bool:
        """Whether the batch after ``h`` shows that ``h``'s base offset, not the gap, is what is wrong.

        The base offset is outside the CRC, so damage there can only be seen from the neighbours.
        A gap before ``h`` is legal (a follower copies a compacted leader's batches as they are), but
        when the next batch is intact and continues the chain from before ``h`` (``expected`` <= its
        base offset < ``h``'s next offset), ``h`` jumped forward. Kafka keeps such a batch and moves
        the log end offset by the jump; cutting here instead loses only data the replicas still have.
        """
        pos = h.position + h.size
        if pos + HEADER_SIZE > file_size:
            return False
        nh = parse_header(os.pread(fd, HEADER_SIZE, pos), 0)
        if not header_is_sane(nh) or pos + nh.size > file_size or not expected <= nh.base_offset < h.next_offset:
            return False
        return crc_is_valid(os.pread(fd, nh.size, pos))

    def check_index_files_exist(self) -> None:
        if not self.offset_index.exists() or not self.time_index.exists():
            raise CorruptIndexError(f"missing index files for segment {self.log_path}")

    def sanity_check(self) -> None:
        """Cheap index checks for a cleanly closed segment; raises CorruptIndexError."""
        if not self.offset_index.exists() or not self.time_index.exists():
            raise CorruptIndexError(f"missing index files for segment {self.log_path}")
        self.offset_index.sanity_check(self.size)
        self.time_index.sanity_check(self.size)
        self.txn_index.sanity_check()

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        h = self.translate_offset(offset)
        if h is None:
            return 0
        position = h.position
        self._recent.clear()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.preallocate()
        self.time_index.preallocate()
        removed = self.size - position
        with self.file.use() as fd:
            os.ftruncate(fd, position)
        self._unsynced = True
        self.size = position
        self._next_offset = None
        self._bytes_since_index = 0
        if position == 0:
            self.created_ms = int(time.time() * 1000)
            self._rolling_ts = None
            self._max_ts = (-1, self.base_offset)
        else:
            _, last_pos = self.offset_index.lookup(2**63 - 1)
            ts_pos = 0
            if self.time_index.entries:
                _, ts_pos = self.offset_index.lookup(self.time_index.last_entry[1])
            self._max_ts = self._scan_max_timestamp(min(ts_pos, last_pos))
        return removed

    # -- lifecycle -----------------------------------------------------------------------------------
    def on_become_inactive(self) -> None:
        """Called on roll: final time index entry, trim indexes (and a preallocated log) to valid size."""
        ts, off = self.max_timestamp_and_offset
        self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_preallocated()

    def _trim_preallocated(self) -> None:
        if self.settings.preallocate_bytes:
            with self.file.use() as fd:
                if os.fstat(fd).st_size > self.size:
                    os.ftruncate(fd, self.size)

    def make_active(self) -> None:
        for index in (self.offset_index, self.time_index):
            index.make_writable()
            index.preallocate()

    def release_index_fds(self) -> None:
        self.offset_index.release_fd()
        self.time_index.release_fd()

    def flush(self) -> None:
        if self._unsynced:
            # fsync syncs the file (inode), so a descriptor reopened after the cache closed the one
            # that wrote still covers every write made through the old one.
            self._unsynced = False
            try:
                with self.file.use() as fd:
                    os.fsync(fd)
            except BaseException:
                self._unsynced = True
                raise
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self._max_ts is not None and self._max_ts[0] >= 0:
                self.time_index.maybe_append(*self._max_ts, skip_full_check=True)
            self._trim_preallocated()
        finally:
            self.offset_index.close()
            self.time_index.close()
            self.close_fd()

    def close_fd(self) -> None:
        """Release the .log descriptor: closed now, or after the last pending fetch response is sent."""
        if not self._closed:
            self._closed = True
            self.file.close()

    def close_quietly(self) -> None:
        closers: tuple[Callable[[], None], ...] = (lambda: self.offset_index.close(trim=False),
                                                   lambda: self.time_index.close(trim=False), self.close_fd)
        for close in closers:
            try:
                close()
            except OSError:
                pass

    def paths(self) -> list[str]:
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the log (first) and then its indexes from ``old_suffix`` to ``new_suffix``."""

        def renamed(path: str) -> str:
            assert path.endswith(old_suffix) or not old_suffix
            return (path[: len(path) - len(old_suffix)] if old_suffix else path) + new_suffix

        new_log = renamed(self.log_path)
        with self.file.cache.lock:  # nobody reopens the file by its old name in between
            os.replace(self.log_path, new_log)
            self.log_path = self.file.path = new_log
        for index in (self.offset_index, self.time_index):
            if os.path.exists(index.path):
                index.rename(renamed(index.path))
            else:
                index.path = renamed(index.path)
        self.txn_index.rename(renamed(self.txn_index.path))
        self.file_suffix = new_suffix

    def delete_files(self) -> None:
        self.close_quietly()
        for path in self.paths():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def random_jitter(jitter_ms: int) -> int:
    return random.randrange(jitter_ms) if jitter_ms > 0 else 0
