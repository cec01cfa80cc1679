"""What the dev cluster checks before it starts anything, so that a second ``make run`` refuses
instead of starting brokers that fail and write into the first one's files.

- ``DataDirLock``: an exclusive ``flock`` on ``devcluster.lock`` in the cluster's directory, with the
  owner's pid written in it for the message. The kernel drops the lock when its process dies, so a
  crashed run never leaves a stale lock behind.
- ``busy_ports``: the ports the cluster would listen on that something else holds.
- ``check_shape`` / ``write_shape``: ``devcluster.properties`` records how many brokers the directory's
  cluster has. Its partitions are assigned to those broker ids, so the same directory with fewer
  brokers would come up with partitions led by brokers that do not exist.
- ``shape_dir``: where ``make run`` keeps each shape's data when no ``--dir`` is given
  (``.cache/devcluster/brokers-<n>``), and ``adopt_legacy_layout`` for data an earlier version left
  directly in ``.cache/devcluster``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import socket
from collections.abc import Iterable
from pathlib import Path

LOCK_FILE = "devcluster.lock"
SHAPE_FILE = "devcluster.properties"
_BROKER_DIR = re.compile(r"broker-(\d+)")


class RefusedToStart(Exception):
    """The dev cluster must not start; the message says why and what to do."""


class DataDirLock:
    """Held for the life of the dev cluster process (released at exit, or by the kernel on a crash)."""

    def __init__(self, cluster_dir: Path) -> None:
        self.path = cluster_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            owner = self.owner_pid()
            who = f"another dev cluster (pid {owner})" if owner else "another dev cluster"
            raise RefusedToStart(
                f"{who} is running on {self.path.parent}.\n"
                f"Stop it first (Ctrl-C in its terminal, or kill -TERM {owner or '<its pid>'}), or give this one another "
                "directory (--dir) and other ports (--port, --zk-port, --metrics-port).") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def owner_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            return int(self.path.read_text().split()[0])
        return None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor drops the flock


def port_in_use(port: int) -> bool:
    """Whether binding ``port`` fails. 0.0.0.0 conflicts with a listener on any IPv4 address and with a
    dual-stack IPv6 one; SO_REUSEADDR (as servers set it) ignores connections in TIME_WAIT."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def busy_ports(ports: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """The (port, what) pairs whose port something else holds."""
    return [(port, what) for port, what in ports if port > 0 and port_in_use(port)]


def leftover_processes(cluster_dir: Path) -> list[int]:
    """Pids of brokers and ZooKeeper started from this directory's configs that still run: what a dev
    cluster killed with SIGKILL leaves behind (they run in process groups of their own, away from
    the terminal's Ctrl-C)."""
    base = str(cluster_dir.resolve())
    zoo_cfg = f"{base}/zookeeper/zoo.cfg"
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            args = [a.decode(errors="replace") for a in (proc / "cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue
        if any(a == zoo_cfg or (a.startswith(f"{base}/broker-") and a.endswith("/server.properties"))
               for a in args):
            found.append(int(proc.name))
    return sorted(found)


def refuse_busy_ports(ports: Iterable[tuple[int, str]], cluster_dir: Path) -> None:
    busy = busy_ports(ports)
    if not busy:
        return
    listed = ", ".join(f"{port} ({what})" for port, what in busy)
    hint = ("Another `make run`, a Kafka or another program listens there: stop it, or choose other ports "
            "(--port, --zk-port, --metrics-port).")
    leftovers = leftover_processes(cluster_dir)
    if leftovers:
        pids = " ".join(map(str, leftovers))
        # SIGKILL: brokers whose ZooKeeper is gone (it stops at once on SIGTERM) wait on it in their
        # shutdown; their logs are recovered at the next start.
        hint = (f"Processes of an earlier run of this directory are still running (pids {pids}), left when that "
                f"run was killed; stop them with: kill -9 {pids}")
    raise RefusedToStart(f"port{'s' if len(busy) > 1 else ''} in use: {listed}.\n{hint}")


def read_shape(cluster_dir: Path) -> int | None:
    """The broker count of the cluster whose data is in ``cluster_dir`` (None: no data yet). A directory
    written before the shape file existed is judged by its broker directories."""
    marker = cluster_dir / SHAPE_FILE
    if marker.exists():
        for line in marker.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "brokers" and value.strip().isdigit():
                return int(value)
    ids = [int(m.group(1)) for p in _broker_dirs(cluster_dir) if (m := _BROKER_DIR.fullmatch(p.name))]
    return max(ids) + 1 if ids else None


def _broker_dirs(cluster_dir: Path) -> list[Path]:
    if not cluster_dir.is_dir():
        return []
    return [p for p in cluster_dir.iterdir() if _BROKER_DIR.fullmatch(p.name) and (p / "data").is_dir()]


def check_shape(cluster_dir: Path, brokers: int, *, how_to_choose: str) -> None:
    """Refuse to run ``brokers`` brokers on the data of a cluster with another broker count."""
    had = read_shape(cluster_dir)
    if had is None or had == brokers:
        return
    raise RefusedToStart(
        f"{cluster_dir} holds the data of a {had}-broker cluster (its partitions are assigned to brokers "
        f"0-{had - 1}); this run asks for {brokers}.\n"
        f"Run it with {had} brokers again (--brokers {had}), {how_to_choose}, or delete {cluster_dir} to "
        "start afresh.")


def write_shape(cluster_dir: Path, brokers: int) -> None:
    (cluster_dir / SHAPE_FILE).write_text(
        "# The shape of the dev cluster whose data is in this directory (clients/devcluster_guard.py).\n"
        f"brokers={brokers}\n")


def shape_dir(parent: Path, brokers: int) -> Path:
    """The data directory of an ``n``-broker dev cluster when no ``--dir`` is given."""
    return parent / f"brokers-{brokers}"


def adopt_legacy_layout(parent: Path) -> Path | None:
    """Move a cluster an earlier version kept directly in ``parent`` (``zookeeper/``, ``broker-<id>/``)
    into its shape's directory, unless that one exists already. Returns where it went. The caller
    holds the target's lock and has checked that the ports are free, so no old-version cluster runs
    on that data."""
    legacy = [p for p in (parent / "zookeeper", *_broker_dirs(parent)) if p.exists()]
    brokers = read_shape(parent)
    if not legacy or brokers is None or leftover_processes(parent):
        return None
    target = shape_dir(parent, brokers)
    if (target / "zookeeper").exists() or _broker_dirs(target):
        return None
    target.mkdir(parents=True, exist_ok=True)
    for p in legacy:
        p.rename(target / p.name)
    write_shape(target, brokers)
    return target
