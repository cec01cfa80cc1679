"""Segment file descriptors: opened on demand, shared, bounded by an LRU, pinned while in use.

A broker with tens of thousands of segments cannot keep every ``.log`` and index file open (the process
would hit RLIMIT_NOFILE, and a failed ``open`` must not look like a broken disk). Every segment file is a
:class:`FileHandle`: the descriptor is opened the first time someone needs it and stays open while it is
used; once idle it sits in one process-wide LRU (:class:`FileHandleCache`) and is closed when more than
``capacity`` descriptors are open. A fetch of old data reopens the file and still uses sendfile.

Lifetime rule: a descriptor is closed only when nobody holds it. Every use takes a reference
(:meth:`FileHandle.use` around a syscall, :meth:`FileHandle.pin` for a fetch response that will be
written later). Closing a handle (segment deleted, swapped out by the cleaner, log closed) while it is
pinned only marks it: the descriptor is closed when the last pin is released. So a pending ``sendfile``
can never read a closed descriptor, nor a reused number that now names another file: an unlinked file
stays readable through the pinned descriptor, and its bytes are the original ones.

We pin a refcounted handle rather than ``dup()`` a descriptor per response: a dup costs a descriptor
per in-flight partition response (thousands for one fetch over many partitions), which is exactly the
resource this module budgets, while a reference costs nothing.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

log = logging.getLogger(__name__)

# Default number of segment descriptors kept open (log.segment.open.files.max): one per partition for
# 10,000 partitions, which keeps a broker of that size comfortably inside the common 65,536 limit with
# room for connections. The broker lowers it at start when RLIMIT_NOFILE leaves less room.
DEFAULT_OPEN_FILES = 10_000
# Never shrink below this: a few descriptors per concurrently appended partition.
MIN_OPEN_FILES = 64

_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
T = TypeVar("T")


def is_out_of_descriptors(exc: BaseException) -> bool:
    """EMFILE/ENFILE: a resource limit of the process or system, not a failing disk."""
    return isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS


def retry_when_out_of_descriptors(fn: Callable[[], T], attempts: int = 3) -> T:
    """``fn()``; on EMFILE/ENFILE close idle segment files and try again (the last error propagates)."""
    for attempt in range(attempts):
        try:
            return fn()
        except OSError as e:
            if not is_out_of_descriptors(e) or attempt == attempts - 1:
                raise
            SEGMENT_FILES.shed_idle()
    raise AssertionError("unreachable")


class FileHandleCache:
    """Bounds the number of open segment descriptors; closes the least recently used idle ones."""

    def __init__(self, capacity: int = DEFAULT_OPEN_FILES) -> None:
        self.capacity = max(capacity, MIN_OPEN_FILES)
        # One lock for the cache and every handle's state: opens and closes are microseconds.
        self.lock = threading.RLock()
        self._idle: OrderedDict[int, FileHandle] = OrderedDict()  # open, unreferenced; oldest first
        self.open_count = 0
        self.opens = 0
        self.evictions = 0
        self.descriptor_shortages = 0
        self._last_shortage_log = 0.0

    def configure(self, capacity: int) -> None:
        with self.lock:
            self.capacity = max(capacity, MIN_OPEN_FILES)
            self._evict_over(self.capacity)

    # -- called with the lock held ---------------------------------------------------------------------
    def _open(self, handle: FileHandle) -> int:
        self._evict_over(self.capacity - 1)
        try:
            fd = os.open(handle.path, handle.flags, 0o644)
        except OSError as e:
            if not is_out_of_descriptors(e):
                raise
            # Out of descriptors: shed idle ones (half of them, at least a few) and try once more.
            shed = self._shed(max(len(self._idle) // 2, 8))
            self._report_shortage(e, shed)
            fd = os.open(handle.path, handle.flags, 0o644)
        self.open_count += 1
        self.opens += 1
        return fd

    def _evict_over(self, limit: int) -> None:
        while self.open_count > limit and self._idle:
            _, victim = self._idle.popitem(last=False)
            victim._close_fd()
            self.evictions += 1

    def _shed(self, n: int) -> int:
        done = 0
        while done < n and self._idle:
            _, victim = self._idle.popitem(last=False)
            victim._close_fd()
            self.evictions += 1
            done += 1
        # Stay below where the limit was hit, so the next opens do not run into it again.
        self.capacity = max(MIN_OPEN_FILES, min(self.capacity, self.open_count))
        return done

    def _report_shortage(self, exc: OSError, shed: int) -> None:
        self.descriptor_shortages += 1
        now = time.monotonic()
        if now - self._last_shortage_log > 10.0:
            self._last_shortage_log = now
            log.warning("out of file descriptors (%s): closed %d idle segment files, %d remain open; "
                        "segment file cache capacity is now %d (raise the open files limit, ulimit -n)",
                        exc.strerror or exc, shed, self.open_count, self.capacity)

    def shed_idle(self, fraction: float = 0.5) -> int:
        """Close a share of the idle descriptors (after EMFILE outside this cache, e.g. a checkpoint)."""
        with self.lock:
            shed = self._shed(max(int(len(self._idle) * fraction), 8))
            self._report_shortage(OSError(errno.EMFILE, os.strerror(errno.EMFILE)), shed)
            return shed

    def __repr__(self) -> str:
        return f"FileHandleCache(open={self.open_count}, idle={len(self._idle)}, capacity={self.capacity})"


SEGMENT_FILES = FileHandleCache()


class FileHandle:
    """One file, opened on demand through the cache; see the module docstring for the lifetime rule."""

    __slots__ = ("path", "flags", "cache", "_fd", "_refs", "_closed")

    def __init__(self, path: str, *, cache: FileHandleCache | None = None, writable: bool = True,
                 create: bool = False) -> None:
        self.path = path
        self.flags = (os.O_RDWR if writable else os.O_RDONLY) | getattr(os, "O_CLOEXEC", 0)
        self.cache = SEGMENT_FILES if cache is None else cache
        self._fd = -1
        self._refs = 0
        self._closed = False
        if create:
            with self.use(create=True):
                pass

    def __repr__(self) -> str:
        return f"FileHandle({self.path!r}, fd={self._fd}, refs={self._refs}, closed={self._closed})"

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    @property
    def closed(self) -> bool:
        return self._closed

    def acquire(self, *, create: bool = False) -> int:
        """Take a reference and return the open descriptor (opening the file if needed).

        The compiled appends (storage/_compiled_append.c) do what this and :meth:`release` do
        for an open file itself: a change here must be made there too."""
        cache = self.cache
        with cache.lock:
            if self._closed:
                raise OSError(errno.EBADF, f"segment file {self.path} is closed")
            if self._fd < 0:
                if create:
                    self.flags |= os.O_CREAT
                try:
                    self._fd = cache._open(self)
                finally:
                    self.flags &= ~os.O_CREAT
            elif self._refs == 0:
                cache._idle.pop(id(self), None)
            self._refs += 1
            return self._fd

    def release(self) -> None:
        cache = self.cache
        with cache.lock:
            self._refs -= 1
            if self._refs > 0 or self._fd < 0:
                return
            if self._closed:
                self._close_fd()
            else:
                cache._idle[id(self)] = self
                if cache.open_count > cache.capacity:
                    cache._evict_over(cache.capacity)

    @contextmanager
    def use(self, *, create: bool = False) -> Iterator[int]:
        """The descriptor for the duration of a ``with`` block (it cannot be closed meanwhile)."""
        fd = self.acquire(create=create)
        try:
            yield fd
        finally:
            self.release()

    def pin(self) -> FilePin:
        """A reference for a response to be written later; released by the connection after sendfile."""
        return FilePin(self, self.acquire())

    def close(self) -> None:
        """Close now, or when the last reference goes (a pending sendfile keeps reading the original file)."""
        cache = self.cache
        with cache.lock:
            if self._closed:
                return
            self._closed = True
            if self._refs == 0:
                cache._idle.pop(id(self), None)
                self._close_fd()

    def _close_fd(self) -> None:
        # With the cache lock held, and only when nobody references the descriptor.
        fd, self._fd = self._fd, -1
        if fd >= 0:
            self.cache.open_count -= 1
            self.cache._idle.pop(id(self), None)
            try:
                os.close(fd)
            except OSError:
                pass


class FilePin:
    """A reference to an open segment file held by a response until its bytes are on the wire."""

    __slots__ = ("_handle", "fd")

    def __init__(self, handle: FileHandle, fd: int) -> None:
        self._handle: FileHandle | None = handle
        self.fd = fd

    def release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.release()

    def __del__(self) -> None:
        # A response dropped without being written (its connection died first) still lets go.
        self.release()
