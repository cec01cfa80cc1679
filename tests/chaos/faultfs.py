"""A passthrough FUSE filesystem that can turn faulty on command: the chaos suite's disk faults.

    python -m tests.chaos.faultfs --backing DIR --mount DIR --control FILE

Everything under the mount point is the backing directory's, until the control file (JSON, re-read at
most every 100 ms) says otherwise:

- ``{"mode": "readonly"}``: every call that would change the filesystem fails with EROFS, as on a
  filesystem the kernel remounted read-only after an error; reads still work;
- ``{"mode": "eio"}``: every call fails with EIO, reads included, as on a dying disk;
- ``{"mode": "enospc"}``: writes that would grow a file fail with ENOSPC, as on a full disk;
- ``{"fsync_delay_ms": N}``: each fsync waits N ms first (a slow disk, for ``flush.messages=1``).

Device-mapper (dm-error, dm-flakey) is not in this kernel; FUSE is (``/dev/fuse``). The library is
mfusepy (ctypes over libfuse 3, from PyPI; libfuse 3 is Debian's ``fuse3``). A fault applies to calls
made after it is set: the kernel's page cache still answers reads of pages it holds, which is what a
real failed disk looks like to a process too. Writes are not cached by the kernel (no writeback cache):
each one reaches this process, so a fault is seen by the next write.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import mfusepy as fuse

_OPERATIONS = frozenset(("access", "getattr", "readdir", "chmod", "utimens", "mkdir", "rmdir", "unlink", "rename",
                         "open", "create", "read", "write", "truncate", "fallocate", "flush", "fsync", "release"))
_CHANGING = ("create", "write", "truncate", "unlink", "rename", "mkdir", "rmdir", "chmod", "utimens",
             "fallocate", "link", "symlink", "mknod")


class FaultControl:
    """The control file's current settings, re-read at most every 100 ms."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._at = 0.0
        self._mtime = -1.0
        self.mode = "ok"
        self.fsync_delay_ms = 0
        self._lock = threading.Lock()

    def refresh(self) -> None:
        now = time.monotonic()
        if now - self._at < 0.1:
            return
        with self._lock:
            self._at = now
            try:
                mtime = os.stat(self.path).st_mtime
                if mtime == self._mtime:
                    return
                settings = json.loads(Path(self.path).read_text() or "{}")
            except (OSError, ValueError):
                return  # no (or a half-written) control file: keep what we had
            self._mtime = mtime
            self.mode = str(settings.get("mode", "ok"))
            self.fsync_delay_ms = int(settings.get("fsync_delay_ms", 0))


def write_control(path: Path, mode: str = "ok", fsync_delay_ms: int = 0) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"mode": mode, "fsync_delay_ms": fsync_delay_ms}))
    os.replace(tmp, path)


class FaultyPassthrough(fuse.Operations):
    def __init__(self, backing: str, control: FaultControl) -> None:
        self.root = os.path.realpath(backing)
        self.control = control
        self.delayed_fsyncs = 0
        self._count_lock = threading.Lock()

    use_ns = True  # st_*time_ns in getattr, utimens in nanoseconds

    def __getattribute__(self, name: str) -> Any:
        # Every filesystem call goes through here: the fault, if any, before the real work.
        attr = object.__getattribute__(self, name)
        if name not in _OPERATIONS:
            return attr
        control = object.__getattribute__(self, "control")

        def faulty(*args: Any) -> Any:
            control.refresh()
            mode = control.mode
            if mode == "eio":
                raise fuse.FuseOSError(errno.EIO)
            if mode == "readonly" and (name in _CHANGING or (
                    name == "open" and len(args) > 1 and args[1] & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC))):
                raise fuse.FuseOSError(errno.EROFS)
            if mode == "enospc" and name in ("write", "fallocate", "create", "mkdir"):
                raise fuse.FuseOSError(errno.ENOSPC)
            try:
                return attr(*args)
            except fuse.FuseOSError:
                raise
            except OSError as e:
                raise fuse.FuseOSError(e.errno or errno.EIO) from None

        return faulty

    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    # -- metadata ---------------------------------------------------------------------------------
    def access(self, path: str, amode: int) -> int:
        if not os.access(self._full(path), amode):
            raise fuse.FuseOSError(errno.EACCES)
        return 0

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._full(path))
        attrs = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks",
                                              "st_blksize", "st_ino")}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._full(path))]

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._full(path))
        return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                             "f_files", "f_flag", "f_frsize", "f_namemax")}

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._full(path), mode)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        os.utime(self._full(path), ns=times)
        return 0

    # -- namespace --------------------------------------------------------------------------------
    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._full(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._full(path))
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(self._full(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        os.rename(self._full(old), self._full(new))
        return 0

    # -- files ------------------------------------------------------------------------------------
    def open(self, path: str, flags: int) -> int:
        return os.open(self._full(path), flags)

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        # Read-write whatever the caller asked: the kernel reads pages through this handle too (mmap).
        return os.open(self._full(path), os.O_RDWR | os.O_CREAT, mode)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._full(path), length)
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
        os.posix_fallocate(fh, offset, size)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        delay = self.control.fsync_delay_ms
        if delay:
            time.sleep(delay / 1000.0)
            with self._count_lock:
                self.delayed_fsyncs += 1
                n = self.delayed_fsyncs
            if n == 1 or n % 20 == 0:  # the scenario reads the last count from the log
                print(f"delayed fsyncs: {n}", flush=True)
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)
        return 0

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backing", required=True)
    ap.add_argument("--mount", required=True)
    ap.add_argument("--control", required=True)
    args = ap.parse_args(argv)
    os.makedirs(args.backing, exist_ok=True)
    os.makedirs(args.mount, exist_ok=True)
    ops = FaultyPassthrough(args.backing, FaultControl(args.control))
    # Multithreaded (the broker's threads read and write at once); no kernel writeback cache, so every
    # write reaches us; direct_io off, so the page cache and mmap work as on a real disk.
    fuse.FUSE(ops, args.mount, foreground=True, nothreads=False, allow_other=False, default_permissions=False)


if __name__ == "__main__":
    main()
