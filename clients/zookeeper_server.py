"""A private ZooKeeper server for tests and the dev cluster.

Runs Debian's ``zookeeper`` package (``/usr/share/java/zookeeper.jar``) as a standalone server in a
directory of its own, waits until it answers the ``srvr`` four-letter command, and stops it again.

    with ZooKeeperServer() as zk:
        client = KazooClient(hosts=zk.connect_string)

Command line (for the dev cluster):  ``python -m clients.zookeeper_server --port 2181 --dir DIR``.

The server is configured with a short tick (500 ms) and explicit session bounds (1 s .. 60 s), so tests
can ask for short sessions while brokers keep Kafka's default ``zookeeper.session.timeout.ms`` (18 s).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
CONF_DIR = "/etc/zookeeper/conf_example"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"


# Ports handed out by free_port(), the most recent first: a process never gets one twice in a row of
# _RECENT_PORTS, so two servers it starts one after the other cannot be told the same port.
_RECENT_PORTS: collections.deque[int] = collections.deque(maxlen=1000)
FREE_PORT_RANGE = (27000, 32768)


def free_port_slice(index: int, count: int) -> str:
    """``KAFKETTE_FREE_PORT_RANGE`` for the ``index``-th of ``count`` processes that share the range."""
    low, high = FREE_PORT_RANGE
    width = (high - low) // count
    return f"{low + index * width}-{low + (index + 1) * width}"


def _free_port_range() -> tuple[int, int]:
    narrowed = os.environ.get("KAFKETTE_FREE_PORT_RANGE")
    if narrowed:
        low, _, high = narrowed.partition("-")
        with contextlib.suppress(ValueError):
            if FREE_PORT_RANGE[0] <= int(low) < int(high) <= FREE_PORT_RANGE[1]:
                return int(low), int(high)
    return FREE_PORT_RANGE


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody uses right now, for a server to bind soon after (ZooKeeper cannot bind port 0
    and report it).

    It comes from below Linux's ephemeral range (32768 and up by default): a port the kernel picks for
    ``bind(0)`` is one it also gives to outgoing connections, so between this call and the server's
    bind a client connection can take it, and the server fails with "address already in use". Below
    the range only another free_port() caller can, so the port is checked free on every address (a
    server binds 0.0.0.0) and not handed out again soon. Fixed-port clusters use ports under 27000.

    ``KAFKETTE_FREE_PORT_RANGE=low-high`` narrows the range: processes that start servers side by side
    (the test suite's parallel workers) each take a slice, since one does not know the ports the
    other has handed out but not yet bound."""
    low, high = _free_port_range()
    with contextlib.suppress(OSError, ValueError):
        high = min(high, int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]))
    rng = random.SystemRandom()
    for _ in range(1000):
        port = rng.randrange(low, high)
        if port in _RECENT_PORTS:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("0.0.0.0" if host in ("127.0.0.1", "localhost", "0.0.0.0") else host, port))
            except OSError:
                continue
        _RECENT_PORTS.appendleft(port)
        return port
    # Every port tried is busy (or the ephemeral range starts lower): let the kernel choose.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def four_letter_word(host: str, port: int, word: str = "srvr", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the answer ('' when nothing came back)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            try:
                data = s.recv(4096)
            except TimeoutError:
                break
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone ZooKeeper process; a context manager.

    ``data_dir`` defaults to a fresh temporary directory that ``stop()`` removes; a directory passed
    in is kept. ``port`` defaults to a free port.
    """

    def __init__(self, port: int | None = None, data_dir: str | os.PathLike[str] | None = None, *,
                 host: str = "127.0.0.1", tick_time_ms: int = 500, min_session_timeout_ms: int = 1000,
                 max_session_timeout_ms: int = 60000, java: str | None = None,
                 startup_timeout: float = 30.0) -> None:
        self.host = host
        self.port = port or free_port(host)
        self._own_dir = data_dir is None
        self.base_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="kafkette-zk-"))
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.java = java or shutil.which("java") or "java"
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: BinaryIO | None = None
        self._paused = False

    # ------------------------------------------------------------------ properties

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "zookeeper.out"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # ------------------------------------------------------------------ lifecycle

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.base_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            f"minSessionTimeout={self.min_session_timeout_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            "autopurge.purgeInterval=0\n"
        )
        return cfg

    def command(self) -> list[str]:
        cfg = self.base_dir / "zoo.cfg"
        return [
            self.java,
            "-Xms64m", "-Xmx256m",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=*",
            f"-Dzookeeper.log.dir={self.base_dir}",
            "-Dzookeeper.root.logger=INFO,CONSOLE",
            "-cp", f"{CONF_DIR}:{ZOOKEEPER_JAR}",
            MAIN_CLASS, str(cfg),
        ]

    def start(self) -> ZooKeeperServer:
        if self.running:
            return self
        if not os.path.exists(ZOOKEEPER_JAR):
            raise RuntimeError(f"{ZOOKEEPER_JAR} not found: install Debian's zookeeper package "
                               "(deploy/install-sysdeps.sh)")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(self.command(), stdout=self._log_file, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self.wait_until_serving(self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_until_serving(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.process.returncode}; see {self.log_path}:\n"
                                   + self._log_tail())
            with contextlib.suppress(OSError):
                answer = four_letter_word(self.host, self.port, "srvr", timeout=0.5)
                if "Mode:" in answer:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"ZooKeeper on {self.connect_string} did not come up within {timeout}s:\n"
                                   + self._log_tail())
            time.sleep(0.1)

    def _log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            if self._paused:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
                self._paused = False
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): clients lose their connection, sessions later expire."""
        if self.running and not self._paused:
            os.kill(self.process.pid, signal.SIGSTOP)  # type: ignore[union-attr]
            self._paused = True

    def resume(self) -> None:
        if self.running and self._paused:
            os.kill(self.process.pid, signal.SIGCONT)  # type: ignore[union-attr]
            self._paused = False

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<ZooKeeperServer {self.connect_string} {state} dir={self.base_dir}>"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clients.zookeeper_server",
                                     description="Run a standalone ZooKeeper for a kafkette dev cluster.")
    parser.add_argument("--port", type=int, default=2181)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--dir", default=None, help="data directory (default: a temporary one, removed on exit)")
    parser.add_argument("--tick-time-ms", type=int, default=2000)
    args = parser.parse_args(argv)
    server = ZooKeeperServer(args.port, args.dir, host=args.host, tick_time_ms=args.tick_time_ms,
                             min_session_timeout_ms=2 * args.tick_time_ms,
                             max_session_timeout_ms=max(60000, 20 * args.tick_time_ms))
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    print(f"ZooKeeper serving on {server.connect_string} (data in {server.base_dir})", flush=True)
    try:
        while not stop:
            if not server.running:
                print("ZooKeeper exited unexpectedly; see " + str(server.log_path), file=sys.stderr)
                return 1
            time.sleep(0.5)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
