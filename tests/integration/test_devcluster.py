"""What ``make run`` starts (``python -m clients.devcluster``): ZooKeeper and a broker that stock
clients use at once; SIGTERM stops everything with status 0; a second start reuses the data."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from clients.zookeeper_server import free_port
from tests.integration.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]


class DevCluster:
    def __init__(self, port: int, zk_port: int, data: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "clients.devcluster", "--brokers", "1", "--port", str(port),
             "--zk-port", str(zk_port), "--metrics-port", str(free_port()), "--dir", str(data)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self) -> None:
        def ready() -> bool:
            assert self.proc.poll() is None, "devcluster exited:\n" + "\n".join(self.lines)
            return any(line.startswith("bootstrap servers:") for line in self.lines)

        wait_until(ready, 60, "the devcluster to say it is up")

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(60)
        self._reader.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_devcluster_serves_clients_and_stops_cleanly(tmp_path: Path) -> None:
    port, zk_port = free_port(), free_port()
    data = tmp_path / "devcluster"
    bootstrap = f"127.0.0.1:{port}"
    dev = DevCluster(port, zk_port, data)
    try:
        dev.wait_ready()
        assert f"bootstrap servers: {bootstrap}" in "\n".join(dev.lines)
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        meta = producer.send("devcluster-smoke", b"hello").get(30)  # auto-created topic
        producer.close(5)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5000)
        consumer.assign([TopicPartition("devcluster-smoke", meta.partition)])
        consumer.seek(TopicPartition("devcluster-smoke", meta.partition), meta.offset)
        assert [m.value for m in consumer] == [b"hello"]
        consumer.close()
        assert dev.terminate() == 0, "\n".join(dev.lines)
    finally:
        dev.kill()
    wait_until(lambda: not _listening(port) and not _listening(zk_port), 10, "the broker and ZooKeeper to stop")
    assert (data / "broker-0" / "broker.log").exists()

    # `make run` again: the same directory, the same topic and record.
    again = DevCluster(port, zk_port, data)
    try:
        again.wait_ready()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5000)
        consumer.assign([TopicPartition("devcluster-smoke", meta.partition)])
        consumer.seek(TopicPartition("devcluster-smoke", meta.partition), meta.offset)
        deadline = time.monotonic() + 20
        got: list[Any] = []
        while not got and time.monotonic() < deadline:
            got = [m.value for m in consumer]
        assert got == [b"hello"]
        consumer.close()
        assert again.terminate() == 0, "\n".join(again.lines)
    finally:
        again.kill()
