"""What ``make run`` starts (``python -m clients.devcluster``): ZooKeeper and a broker that stock
clients use at once; SIGTERM stops everything with status 0 and says so; a second start reuses the data.

``DevClusterProcess`` runs the real entry point for the other dev cluster tests
(tests/integration/test_devcluster_*.py) as well.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from clients.devcluster_guard import leftover_processes
from tests.integration.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]
DEVCLUSTER = [sys.executable, "-m", "clients.devcluster"]


class DevClusterProcess:
    """``python -m clients.devcluster`` as a user runs it, its output collected line by line."""

    def __init__(self, *args: str, data: Path, env: dict[str, str] | None = None) -> None:
        self.data = data
        self.proc = subprocess.Popen(
            [*DEVCLUSTER, *args, "--dir", str(data)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        def seen() -> bool:
            if text in self.output:
                return True
            assert self.proc.poll() is None, f"devcluster exited ({self.proc.returncode}):\n{self.output}"
            return False

        wait_until(seen, timeout, lambda: f"{text!r} in the dev cluster's output:\n{self.output}")

    def wait_ready(self, timeout: float = 90.0) -> None:
        self.wait_for("bootstrap servers:", timeout)

    def control(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The documented control command, against this cluster's directory."""
        return subprocess.run([*DEVCLUSTER, *args, "--dir", str(self.data)], cwd=REPO, capture_output=True,
                              text=True, timeout=120)

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        rc = self.proc.wait(60)
        self._reader.join(5)
        return rc

    def kill(self) -> None:
        """Test teardown: whatever is left of this cluster, processes of its directory included."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for pid in leftover_processes(self.data):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def refused_run(*args: str, data: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A dev cluster start expected to end by itself (a refusal)."""
    return subprocess.run([*DEVCLUSTER, *args, "--dir", str(data)], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, **(env or {})))


def wait_all_gone(data: Path, proc: subprocess.Popen[str]) -> None:
    """The dev cluster process and every broker and ZooKeeper of its directory have exited."""
    wait_until(lambda: proc.poll() is not None and not leftover_processes(data), 30,
               lambda: f"the processes of {data} to exit (left: {leftover_processes(data)})")


# Fixed ports, below the ephemeral range: a free port from the kernel may become some client connection's
# local port once released, and the dev cluster rightly refuses a port in use. Each test has its own.
PORTS_SMOKE = 22010
PORTS_GUARD = 22020
PORTS_SHAPE = 22030
PORTS_TYPO = 22040
PORTS_FAILOVER = 22100


def single_broker_args(base: int) -> list[str]:
    """One broker on ``base``, ZooKeeper on ``base`` + 1, metrics on ``base`` + 2."""
    return ["--brokers", "1", "--port", str(base), "--zk-port", str(base + 1), "--metrics-port", str(base + 2)]


def read_one(bootstrap: str, partition: int, offset: int) -> bytes | None:
    """The value of the record at ``offset`` (polling until the partition serves it; None if never)."""
    tp = TopicPartition("devcluster-smoke", partition)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=20000)
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset)
        for record in consumer:
            return bytes(record.value)
        return None
    finally:
        consumer.close()


def test_devcluster_serves_clients_and_stops_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "devcluster"
    bootstrap = f"127.0.0.1:{PORTS_SMOKE}"
    dev = DevClusterProcess(*single_broker_args(PORTS_SMOKE), data=data)
    try:
        dev.wait_ready()
        assert f"bootstrap servers: {bootstrap}" in dev.output
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        meta = producer.send("devcluster-smoke", b"hello").get(30)  # auto-created topic
        producer.close(5)
        assert read_one(bootstrap, meta.partition, meta.offset) == b"hello"
        assert dev.stop() == 0, dev.output
        assert "stopping the dev cluster (SIGTERM)" in dev.output
        assert "stopped: every broker and ZooKeeper" in dev.output
        wait_all_gone(data, dev.proc)
    finally:
        dev.kill()
    assert (data / "broker-0" / "broker.log").exists()

    # `make run` again: the same directory, the same topic and record.
    again = DevClusterProcess(*single_broker_args(PORTS_SMOKE), data=data)
    try:
        again.wait_ready()
        assert read_one(bootstrap, meta.partition, meta.offset) == b"hello"
        assert again.stop() == 0, again.output
    finally:
        again.kill()
