"""ZooKeeper and brokers as real processes, each in its own network namespace (``tests/chaos/netns.py``).

A broker is ``python -m broker --config server.properties``, the command ``clients/devcluster.py``
runs, started through ``ip netns exec kft-b<i>``. ZooKeeper is ``clients/zookeeper_server.py``'s java
command started the same way. The test process stays in the host namespace and reaches every node
over the bridge, as a client on another machine would.

Two options change how a node runs:
- ``proxied``: the server listens on a side port and ``tests/chaos/proxy.py`` listens on the advertised
  one in front of it (latency, jitter, resets for every connection to that node);
- ``clock``: the broker runs under libfaketime (Debian's ``faketime`` package) with its wall clock
  offset by what a file says; rewriting the file makes the clock jump. The monotonic clock is left
  alone, as a real clock step (``date -s``, an NTP step) leaves it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from clients.devcluster import wait_for_cluster_metadata, wait_for_port
from clients.zookeeper_server import ZooKeeperServer
from tests.chaos.netns import Node
from tests.chaos.proxy import write_control

REPO = Path(__file__).resolve().parents[2]
BROKER_PORT = 9092  # inside each namespace: every broker has its own address, so one port for all
PROXIED_PORT = 19092  # where a proxied broker really listens
ZK_PORT = 2181
ZK_PROXIED_PORT = 2182
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
FAKETIME_SHIM = Path(__file__).resolve().parent / "faketime_shim"


class FakeClock:
    """The wall-clock offset of one process under libfaketime, kept in a file it re-reads every second."""

    def __init__(self, path: Path, offset_s: int = 0) -> None:
        self.path = path
        self.set(offset_s)

    def set(self, offset_s: int) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{offset_s:+d}\n")
        os.replace(tmp, self.path)
        self.offset_s = offset_s

    def env(self) -> dict[str, str]:
        if not os.path.exists(LIBFAKETIME):
            raise RuntimeError(f"{LIBFAKETIME} not found: install Debian's faketime package "
                               "(deploy/install-sysdeps.sh)")
        return {
            "LD_PRELOAD": LIBFAKETIME,
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            # libfaketime 0.9.10 breaks clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) when the
            # monotonic clock is not faked (libfaketime#426), which is how Python 3.11's time.sleep
            # waits: the shim's sitecustomize makes time.sleep wait in select() instead.
            "PYTHONPATH": os.pathsep.join(p for p in (str(FAKETIME_SHIM), str(REPO)) if p),
        }


class Proxied:
    """A proxy process in a node's namespace, listening on ``listen`` and forwarding to ``target``."""

    def __init__(self, node: Node, listen_port: int, target_port: int, directory: Path, seed: int) -> None:
        self.node = node
        self.control = directory / f"proxy-{node.name}.json"
        write_control(self.control)
        self.listen = f"{node.ip}:{listen_port}"
        self.target = f"{node.ip}:{target_port}"
        self.seed = seed
        self.log_path = directory / f"proxy-{node.name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*self.node.exec_prefix(), sys.executable, "-m", "tests.chaos.proxy", "--listen", self.listen,
                 "--target", self.target, "--control", str(self.control), "--seed", str(self.seed)],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        host, _, port = self.listen.rpartition(":")
        wait_for_port(host, int(port), 20.0, self.process)

    def set(self, latency_ms: float = 0, jitter_ms: float = 0, reset_percent: float = 0) -> None:
        write_control(self.control, latency_ms, jitter_ms, reset_percent)

    def stop(self) -> None:
        _terminate(self.process)
        self.process = None


class NsZooKeeper(ZooKeeperServer):
    """Debian's ZooKeeper, started inside ``node``'s namespace."""

    def __init__(self, node: Node, data_dir: Path, *, port: int = ZK_PORT) -> None:
        super().__init__(port=port, data_dir=data_dir, host=node.ip)
        self.node = node

    def command(self) -> list[str]:
        return [*self.node.exec_prefix(), *super().command()]


class NsBroker:
    """One broker in ``node``'s namespace, with its own directory, server.properties and log file."""

    def __init__(self, broker_id: int, node: Node, zk_connect: str, base_dir: Path, *,
                 overrides: Mapping[str, str] | None = None, proxied: bool = False,
                 clock: FakeClock | None = None, extra_log_dir: Path | None = None) -> None:
        self.broker_id = broker_id
        self.node = node
        self.dir = base_dir / f"broker-{broker_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.dir / "server.properties"
        self.log_path = self.dir / "broker.log"
        self.clock = clock
        self.proxied = proxied
        listen_port = PROXIED_PORT if proxied else BROKER_PORT
        props = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://{node.ip}:{listen_port}",
            "advertised.listeners": f"PLAINTEXT://{node.ip}:{BROKER_PORT}",
            # A second log dir (the disk scenarios' faulty one) goes first: a new partition goes to the
            # dir holding the fewest, the first listed on a tie, so both dirs get partitions.
            "log.dirs": ",".join(str(d) for d in (extra_log_dir, self.dir / "data") if d is not None),
            "zookeeper.connect": zk_connect,
            "metrics.port": "-1",
        }
        props.update(overrides or {})
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None

    @property
    def address(self) -> str:
        return f"{self.node.ip}:{BROKER_PORT}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> NsBroker:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if self.clock is not None:
            env.update(self.clock.env())
        self.process = subprocess.Popen(
            [*self.node.exec_prefix(), sys.executable, "-m", "broker", "--config", str(self.config_path)],
            cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        return self

    def wait_ready(self, brokers: int = 1, timeout: float = 60.0) -> None:
        """Listening, registered, and told by a controller about ``brokers`` live brokers."""
        port = PROXIED_PORT if self.proxied else BROKER_PORT
        try:
            wait_for_port(self.node.ip, port, timeout, self.process)
            wait_for_cluster_metadata(self.node.ip, port, brokers, timeout, self.process, broker_id=self.broker_id)
        except (RuntimeError, TimeoutError) as e:
            raise RuntimeError(f"broker {self.broker_id}: {e}; the end of {self.log_path}:\n"
                               f"{self.log_text()[-3000:]}") from None

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (controlled shutdown), then SIGKILL if it does not exit in time."""
        _terminate(self.process, timeout)
        self._close_log()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def _terminate(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait(check: object, timeout: float, interval: float = 0.2) -> bool:
    """Poll ``check()`` until truthy; False after ``timeout`` seconds (callers decide what that means)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():  # type: ignore[operator]
                return True
        time.sleep(interval)
    return False
