"""Sparse offset and time indexes in Kafka's file formats.

Offset index (``.index``): 8-byte entries ``relativeOffset int32 | position int32``.
Time index (``.timeindex``): 12-byte entries ``timestamp int64 | relativeOffset int32``.
Both big endian, relative to the segment's base offset, sorted ascending, preallocated to
``segment.index.bytes`` (rounded down to a whole entry) while the segment is active and trimmed to the
valid entries when it is rolled or closed.

Reads go through a shared mmap of the file. The active segment's indexes are mapped writable and an
append is a store into the mapping, as Kafka's MappedByteBuffer put: no system call per entry. The file
is preallocated sparse, and a store into a hole would make the kernel find a block at page-fault time,
where a full disk is SIGBUS, which kills the process (as would a failed read of the page, on a disk
that fails). So before the first store into a page, the rest of that page is written with zeros by
``os.pwrite``, past the last entry: that allocates its block and puts the page in the page cache, and a
full or failing disk is an OSError there, the entry then skipped (the index is sparse, lookups stay
correct). Where a writable mapping cannot be made, appends fall back to ``os.pwrite``. Indexes of
inactive segments are opened lazily on first use and keep no file descriptor, only the mapping.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import weakref
from collections import OrderedDict
from typing import Any

from storage.errors import CorruptIndexError
from storage.file_handles import FileHandle

# Read-only shared mappings made with libc's mmap directly: CPython's mmap module keeps a duplicate file
# descriptor per mapping, which would cost two descriptors per segment. The mapping is released
# (munmap) when the last buffer view of it goes away. Mappings of inactive indexes are kept in an LRU
# (bounded by vm.max_map_count in practice) and reloaded lazily after eviction.
MAX_OPEN_INACTIVE_INDEXES = int(os.environ.get("KAFKETTE_MAX_OPEN_INDEXES", "30000"))
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_PROT_READ = 1
_PROT_WRITE = 2
_MAP_SHARED = 1
_MAP_FAILED = ctypes.c_void_p(-1).value
_PAGE = os.sysconf("SC_PAGE_SIZE")
_ZEROS = bytes(2 * _PAGE)  # an entry may straddle two pages (12-byte time index entries)


def map_read_only(fd: int, length: int) -> Any:
    """A read-only MAP_SHARED mapping of ``fd`` as a ctypes char array (supports the buffer protocol)."""
    return map_shared(fd, length, writable=False)


def map_shared(fd: int, length: int, *, writable: bool) -> Any:
    """A MAP_SHARED mapping of ``fd`` as a ctypes char array (supports the buffer protocol); stores into
    a writable one change the file. ``fd`` must be open for writing then."""
    prot = _PROT_READ | _PROT_WRITE if writable else _PROT_READ
    addr = _libc.mmap(None, length, prot, _MAP_SHARED, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        err = ctypes.get_errno()
        raise OSError(err, f"mmap failed: {os.strerror(err)}")
    arr = (ctypes.c_char * length).from_address(addr)
    weakref.finalize(arr, _libc.munmap, addr, length)
    return arr


_lru: OrderedDict[int, _Index] = OrderedDict()
_lru_lock = threading.Lock()


def _touch(index: _Index) -> None:
    with _lru_lock:
        key = id(index)
        if key in _lru:
            _lru.move_to_end(key)
            return
        _lru[key] = index
        while len(_lru) > MAX_OPEN_INACTIVE_INDEXES:
            _, victim = _lru.popitem(last=False)
            victim._evict()


def _forget(index: _Index) -> None:
    with _lru_lock:
        _lru.pop(id(index), None)


_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32_MAX = 2**31 - 1


class _Index:
    ENTRY_SIZE = 8
    _entry: struct.Struct = _OFFSET_ENTRY
    _key_struct: struct.Struct = struct.Struct(">i")

    def __init__(self, path: str, base_offset: int, max_index_size: int, *, preallocate: bool = False) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._preallocate = preallocate
        self._loaded = False
        # The active segment's index keeps a cached handle (closed when idle, like any segment file) for
        # what a store into the mapping cannot do: allocating blocks, resizing, fsync. Reads and appends
        # use the mapping, which needs no descriptor.
        self._writer: FileHandle | None = None
        self._mm: Any = None
        # Whether self._mm takes stores, and up to which byte the file's blocks are known allocated (a
        # store beyond it allocates first; see the module docstring).
        self._mm_writable = False
        self._allocated = 0
        # False once a writable mapping failed on this file's filesystem: appends use pwrite.
        self._map_writes = True
        self._length = 0
        self._entries = 0
        self._closed = False
        self._writable = preallocate
        self._unsynced = False

    # -- file handling -----------------------------------------------------------------------------
    def _round(self, size: int) -> int:
        return size - size % self.ENTRY_SIZE

    def _load(self) -> None:
        if self._loaded:
            return
        if self._closed:
            raise ValueError(f"index {self.path} is closed")
        exists = os.path.exists(self.path)
        handle = self._writer if self._writer is not None else FileHandle(self.path)
        with handle.use(create=True) as fd:
            size = os.fstat(fd).st_size
            fresh = not exists or (self._preallocate and size == 0)
            self._preallocate = False  # only the first load of a new segment's index preallocates
            if fresh:
                size = self._round(self.max_index_size)
                os.ftruncate(fd, size)
            self._entries = 0 if fresh else self._round(size) // self.ENTRY_SIZE
            self._length = size
            # Nothing is assumed allocated: after a crash the file is at its preallocated size with holes
            # past the entries it had. The first store into each page writes the page first (see above).
            self._allocated = 0
            self._map(fd)
        self._loaded = True
        if self._writable:
            self._writer = handle
        else:
            if handle is not self._writer:
                handle.close()
            _touch(self)
        self._after_load()

    def _evict(self) -> None:
        # Called under the LRU lock: drop the mapping (readers holding it keep it alive until done).
        if self._writer is None and self._loaded:
            self._mm = None
            self._mm_writable = False
            self._loaded = False

    def _after_load(self) -> None:
        pass

    def _map(self, fd: int) -> None:
        self._mm_writable = False
        if self._length <= 0:
            self._mm = None
            return
        if self._writable and self._map_writes:
            try:
                self._mm = map_shared(fd, self._length, writable=True)
                self._mm_writable = True
                return
            except OSError:
                self._map_writes = False
        self._mm = map_read_only(fd, self._length)

    def _unmap(self) -> None:
        self._mm = None  # munmap happens when no lookup holds the mapping any more
        self._mm_writable = False

    def _ensure_writer(self) -> FileHandle:
        self._load()
        if self._writer is None:
            _forget(self)
            self._writer = FileHandle(self.path)
        return self._writer

    def release_fd(self) -> None:
        """Keep only the mapping (inactive segments do not need a descriptor)."""
        self._writable = False
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            if self._loaded:
                _touch(self)

    def make_writable(self) -> None:
        self._writable = True
        _forget(self)
        self._ensure_writer()

    def resize(self, new_size: int) -> bool:
        writer = self._ensure_writer()
        rounded = self._round(new_size)
        if rounded == self._length:
            return False
        with writer.use() as fd:
            self._unmap()
            os.ftruncate(fd, rounded)
            self._length = rounded
            self._entries = min(self._entries, rounded // self.ENTRY_SIZE)
            self._allocated = min(self._allocated, rounded)
            self._map(fd)
        self._unsynced = True
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self._entries * self.ENTRY_SIZE)

    def preallocate(self) -> None:
        """Grow back to ``max_index_size`` so the (again) active segment can append entries."""
        self.resize(max(self.max_index_size, self._entries * self.ENTRY_SIZE))

    def reset(self) -> None:
        """No entries, full size (recovery rebuilds the index). As Kafka's AbstractIndex.reset, the old
        bytes stay in the file: nothing reads past ``entries``, appends overwrite them, and trimming cuts
        the rest. Zeroing them took two ftruncates per index, four per segment recovered after a crash
        (most of the time of a restart after SIGKILL with 10,000 partitions)."""
        self._load()
        self._entries = 0
        self._reset_last()
        self.resize(self.max_index_size)

    def flush(self) -> None:
        if self._loaded and self._writer is not None and self._unsynced:
            self._unsynced = False
            try:
                with self._writer.use() as fd:
                    os.fsync(fd)
            except BaseException:
                self._unsynced = True
                raise

    def close(self, *, trim: bool = True) -> None:
        if self._closed:
            return
        if self._loaded and trim:
            self.trim_to_valid_size()
        self._unmap()
        self.release_fd()
        _forget(self)
        self._loaded = False
        self._closed = True

    def rename(self, new_path: str) -> None:
        writer = self._writer
        if writer is None:
            os.replace(self.path, new_path)
            self.path = new_path
            return
        with writer.cache.lock:
            os.replace(self.path, new_path)
            self.path = writer.path = new_path

    def delete(self) -> None:
        self.close(trim=False)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def exists(self) -> bool:
        return os.path.exists(self.path)

    # -- entries -----------------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        self._load()
        return self._entries

    @property
    def max_entries(self) -> int:
        self._load()
        return self._length // self.ENTRY_SIZE

    def is_full(self) -> bool:
        # entries >= max_entries, without the properties: asked by every append (should the segment roll).
        if not self._loaded:
            self._load()
        return self._entries >= self._length // self.ENTRY_SIZE

    def size_in_bytes(self) -> int:
        self._load()
        return self._length

    def _mapping(self) -> Any:
        self._load()
        mm = self._mm
        if mm is None:
            raise ValueError(f"index {self.path} has no entries")
        if self._writer is None:
            _touch(self)
        return mm

    def _entry_at(self, slot: int) -> tuple[int, int]:
        return self._entry.unpack_from(self._mapping(), slot * self.ENTRY_SIZE)

    def _key_at(self, slot: int) -> int:
        raise NotImplementedError

    def _largest_lower_bound_slot(self, target_key: int) -> int:
        """Slot of the largest entry whose key is <= ``target_key`` (-1 if none)."""
        n = self.entries
        if n == 0:
            return -1
        mm = self._mapping()
        unpack, size = self._key_struct.unpack_from, self.ENTRY_SIZE
        if unpack(mm, (n - 1) * size)[0] <= target_key:
            return n - 1  # at or past the last entry: where reads at the tail land
        if unpack(mm, 0)[0] > target_key:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * size)[0] <= target_key:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _smallest_upper_bound_slot(self, target_key: int) -> int:
        """Slot of the smallest entry whose key is >= ``target_key`` (-1 if none)."""
        n = self.entries
        if n == 0 or self._key_at(n - 1) < target_key:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._key_at(mid) >= target_key:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _write_entry(self, key: int, value: int) -> None:
        """Append the entry (key, value) after the last one. The compiled appends
        (storage/_compiled_append.c) make the common case's store themselves, as OffsetIndex.append and
        TimeIndex.maybe_append: a change to these must be made there too."""
        size = self.ENTRY_SIZE
        pos = self._entries * size
        end = pos + size
        # The common case first: the active index, mapped writable, with its next entry's blocks allocated.
        if self._mm_writable and end <= self._allocated and self._writer is not None:
            self._entry.pack_into(self._mm, pos, key, value)
            self._unsynced = True
            self._entries += 1
            return
        writer = self._ensure_writer()
        pos = self._entries * size
        end = pos + size
        if end > self._length:
            raise ValueError(f"index {self.path} is full ({self._entries} entries)")
        if self._writable and self._map_writes and not self._mm_writable:
            # Made writable after it was loaded (a segment active again): map it for stores.
            with writer.use() as fd:
                self._unmap()
                self._map(fd)
        if self._mm_writable:
            if end > self._allocated:
                # Zeros from the entry to the end of its page (see the module docstring); past the last
                # entry, nothing reads them.
                stop = min(-(-end // _PAGE) * _PAGE, self._length)
                fd = writer.acquire()
                try:
                    done = pos
                    while done < stop:  # a short write (the first page had room) is followed by the error
                        n = os.pwrite(fd, memoryview(_ZEROS)[done - pos:stop - pos], done)
                        if n <= 0:
                            raise OSError(f"index write to {self.path} wrote nothing")
                        done += n
                finally:
                    writer.release()
                self._allocated = stop
            self._entry.pack_into(self._mm, pos, key, value)
        else:
            data = self._entry.pack(key, value)
            fd = writer.acquire()
            try:
                written = os.pwrite(fd, data, pos)
            finally:
                writer.release()
            if written != len(data):
                self._unsynced = True
                raise OSError(f"short index write to {self.path}")
        self._unsynced = True
        self._entries += 1

    def _relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise ValueError(f"offset {offset} does not fit index with base offset {self.base_offset}")
        return rel

    def _reset_last(self) -> None:
        pass


class OffsetIndex(_Index):
    """Maps offsets to file positions: the largest indexed offset <= a target, then scan forward."""

    ENTRY_SIZE = 8
    _entry = _OFFSET_ENTRY
    _key_struct = struct.Struct(">i")
    # (entry count, offset) just after this index's last append(); see append().
    _appended: tuple[int, int] | None = None

    def _key_at(self, slot: int) -> int:
        key: int = _OFFSET_ENTRY.unpack_from(self._mapping(), slot * 8)[0]
        return key

    @property
    def last_offset(self) -> int:
        n = self.entries
        return self.base_offset + self._entry_at(n - 1)[0] if n else self.base_offset

    def entry(self, slot: int) -> tuple[int, int]:
        rel, pos = self._entry_at(slot)
        return self.base_offset + rel, pos

    def append(self, offset: int, position: int) -> None:
        if not self._loaded:
            self._load()
        n = self._entries
        if n:
            # The offset this index last appended, while it is still the last entry (a truncation or
            # reload changes the count): reading it back through the mapping costs a page fault per
            # index file touched, which adds up when a request appends to hundreds of partitions.
            cached = self._appended
            last = cached[1] if cached is not None and cached[0] == n else self.last_offset
            if offset <= last:
                raise ValueError(f"offset {offset} not above last index offset {last} in {self.path}")
        self._write_entry(self._relative(offset), position)
        self._appended = (self._entries, offset)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target, else (base offset, 0)."""
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset)
        if slot < 0:
            return self.base_offset, 0
        return self.entry(slot)

    def fetch_upper_bound_position(self, target_offset: int) -> int | None:
        """Position of the smallest entry with offset >= target (a safe upper bound for a scan)."""
        slot = self._smallest_upper_bound_slot(target_offset - self.base_offset)
        return None if slot < 0 else self.entry(slot)[1]

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= ``offset``."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset)
        if slot < 0:
            new_entries = 0
        elif self.entry(slot)[0] == offset:
            new_entries = slot
        else:
            new_entries = slot + 1
        self._entries = min(self._entries, new_entries)

    def sanity_check(self, log_size: int | None = None) -> None:
        n = self.entries
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(f"index {self.path} size {self._length} is not a multiple of 8")
        if n and self.last_offset < self.base_offset:
            raise CorruptIndexError(f"index {self.path} last offset below base offset")
        if n and log_size is not None:
            prev_rel, prev_pos = -1, -1
            for slot in (0, n - 1) if n > 1 else (0,):
                rel, pos = self._entry_at(slot)
                if rel <= prev_rel or pos < prev_pos or pos >= max(log_size, 1):
                    raise CorruptIndexError(f"index {self.path} entry {slot} ({rel}, {pos}) is inconsistent")
                prev_rel, prev_pos = rel, pos


class TimeIndex(_Index):
    """Maps timestamps to offsets; an entry is added only when the max timestamp so far grows."""

    ENTRY_SIZE = 12
    _entry = _TIME_ENTRY
    _key_struct = struct.Struct(">q")

    def __init__(self, path: str, base_offset: int, max_index_size: int, *, preallocate: bool = False) -> None:
        super().__init__(path, base_offset, max_index_size, preallocate=preallocate)
        self._last: tuple[int, int] = (-1, base_offset)
        self._last_unread = False

    def _after_load(self) -> None:
        # The last entry is read when first needed: after a crash the active segment's index is still
        # at its preallocated size, its last slot lies in a hole of the file, and recovery resets the
        # index without looking. Reading it anyway faulted in a page per log: 40% of a restart after
        # SIGKILL with 10,000 partitions.
        self._last_unread = True

    def _reset_last(self) -> None:
        self._last_unread = False
        if self._entries and self._mm is not None:
            ts, rel = self._entry_at(self._entries - 1)
            self._last = (ts, self.base_offset + rel)
        else:
            self._last = (-1, self.base_offset)

    def _last_entry(self) -> tuple[int, int]:
        if self._last_unread:
            self._reset_last()
        return self._last

    def _key_at(self, slot: int) -> int:
        key: int = _TIME_ENTRY.unpack_from(self._mapping(), slot * 12)[0]
        return key

    def is_full(self) -> bool:
        # One slot is kept for the entry a roll appends (Kafka's TimeIndex.isFull).
        if not self._loaded:
            self._load()
        return self._entries >= self._length // 12 - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        self._load()
        return self._last_entry()

    def entry(self, slot: int) -> tuple[int, int]:
        ts, rel = self._entry_at(slot)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        if not self._loaded:
            self._load()
        if not skip_full_check and self._entries >= self._length // 12 - 1:  # is_full()
            raise ValueError(f"time index {self.path} is full")
        last_ts, last_off = self._last_entry()
        if self._entries and offset < last_off:
            raise ValueError(f"offset {offset} below last time index offset {last_off} in {self.path}")
        if timestamp > last_ts:
            if self._entries * 12 + 12 > self._length:
                self.resize(self._entries * 12 + 12)
            self._write_entry(timestamp, self._relative(offset))
            self._last = (timestamp, offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, else (-1, base offset)."""
        slot = self._largest_lower_bound_slot(target_timestamp)
        if slot < 0:
            return -1, self.base_offset
        return self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= ``offset`` (entries are sorted by offset too)."""
        n = self.entries
        keep = n
        while keep > 0 and self.entry(keep - 1)[1] >= offset:
            keep -= 1
        self._entries = keep
        self._reset_last()

    def sanity_check(self, log_size: int | None = None) -> None:
        n = self.entries
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(f"time index {self.path} size {self._length} is not a multiple of 12")
        if n:
            last_ts, last_off = self.last_entry
            if last_ts < self.entry(0)[0]:
                raise CorruptIndexError(f"time index {self.path} last timestamp below first timestamp")
            if last_off < self.base_offset:
                raise CorruptIndexError(f"time index {self.path} last offset below base offset")
