"""The disk scenarios' second log dir on each broker: a faulty FUSE filesystem, or a small real one.

- ``FaultyDir``: ``tests/chaos/faultfs.py`` mounted over a backing directory; a scenario turns it
  read-only, failing with EIO, full (ENOSPC) or slow to fsync, and back.
- ``SmallDisk``: a loop-mounted ext4 image of a few MiB (no reserved blocks: brokers run as root), filled
  up for real by a filler file when the scenario says so.

Both are mounted on the host before the brokers start; ``ip netns exec`` gives each broker a mount
namespace that is a slave of the host's, so the broker sees them. Unmounted after the brokers stopped.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.chaos.faultfs import write_control

REPO = Path(__file__).resolve().parents[2]


def _mounted(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == target for line in f)


def _unmount(path: Path) -> None:
    if not _mounted(path):
        return
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        # Still busy (a broker that would not die, a shell inside): detach it, it goes when unused.
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


class FaultyDir:
    def __init__(self, directory: Path) -> None:
        self.mount = directory / "faulty"
        self.backing = directory / "faulty-backing"
        self.control = directory / "faultfs.json"
        self.log_path = directory / "faultfs.log"
        self.process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)
        write_control(self.control)

    def start(self) -> None:
        self.mount.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.faultfs", "--backing", str(self.backing), "--mount",
                 str(self.mount), "--control", str(self.control)],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 20
        while not _mounted(self.mount):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"faultfs did not mount {self.mount}; see {self.log_path}")
            time.sleep(0.05)

    def set(self, mode: str = "ok", fsync_delay_ms: int = 0) -> None:
        write_control(self.control, mode, fsync_delay_ms)
        time.sleep(0.3)  # the filesystem re-reads its control file every 100 ms

    def holds(self, partition_dir: str) -> bool:
        return (self.backing / partition_dir).is_dir()

    def delayed_fsyncs(self) -> int:
        """How many fsyncs the filesystem has delayed so far (its log's last count; roughly, by 20s)."""
        try:
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines()
                     if ln.startswith("delayed fsyncs: ")]
        except OSError:
            return 0
        return int(lines[-1].split(": ")[1]) if lines else 0

    def stop(self) -> None:
        self.set("ok")
        _unmount(self.mount)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self.process = None


class SmallDisk:
    """A real filesystem of ``size_mib`` MiB in a file, loop-mounted: it fills up as a real disk does."""

    def __init__(self, directory: Path, size_mib: int = 48) -> None:
        self.mount = directory / "faulty"
        self.image = directory / "small-disk.img"
        self.filler = self.mount / "filler"
        self.size_mib = size_mib

    def start(self) -> None:
        self.mount.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(self.size_mib << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(self.image)], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "loop", str(self.image), str(self.mount)], check=True, capture_output=True)
        (self.mount / "lost+found").rmdir()  # Kafka would take it for a partition dir with a bad name

    def holds(self, partition_dir: str) -> bool:
        return (self.mount / partition_dir).is_dir()

    def fill(self) -> int:
        """Write a filler file until not one more byte fits; returns the bytes written. Big writes can be
        refused while some space is left (ext4 keeps room for delayed allocation), so ever smaller ones
        take the rest."""
        written = 0
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 20, 64 << 10, 4 << 10, 256, 1):
                chunk = b"\0" * size
                while True:
                    try:
                        n = os.write(fd, chunk)
                    except OSError:
                        break
                    written += n
                with contextlib.suppress(OSError):
                    os.fsync(fd)  # allocates what was delayed: what is left is truly free
        finally:
            os.close(fd)
        return written

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.filler.unlink()

    def stop(self) -> None:
        _unmount(self.mount)
        with contextlib.suppress(FileNotFoundError):
            self.image.unlink()
