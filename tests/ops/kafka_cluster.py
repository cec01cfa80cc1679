"""A real Apache Kafka 3.9 cluster in ZooKeeper mode: ``n`` ``kafka.Kafka`` processes from the jars
tests/kafka_dist.py resolves, on consecutive fixed ports or on free ones.

It can share a ZooKeeper that is already running (a kafkette ``LocalCluster``'s, under a chroot of its
own), so that a side-by-side benchmark runs both systems against the same ZooKeeper; without one it
starts its own. ``tests/ops/kafka_broker.py`` is the one-broker version the tests use.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from clients.devcluster import wait_for_port
from clients.zookeeper_server import ZooKeeperServer, free_port

# What bin/kafka-server-start.sh gives a broker (KAFKA_HEAP_OPTS and kafka-run-class.sh's
# KAFKA_JVM_PERFORMANCE_OPTS): a benchmark compares against Kafka as it is deployed, full JIT included.
PRODUCTION_JVM_OPTIONS: tuple[str, ...] = (
    "-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
)


class KafkaZkCluster:
    """``n`` Apache Kafka brokers (ids 0..n-1) on ``base_port`` .. ``base_port + n - 1``, or on free
    ports when ``base_port`` is 0 (as kafkette's ``LocalCluster``)."""

    def __init__(self, n: int, base_port: int = 0, *, zk_connect: str | None = None, chroot: str = "/apache-kafka",
                 overrides: dict[str, str] | None = None,
                 jvm_options: tuple[str, ...] = PRODUCTION_JVM_OPTIONS) -> None:
        self.n = n
        self.base_port = base_port
        self.ports = [base_port + i for i in range(n)] if base_port else [free_port() for _ in range(n)]
        self.dir = Path(tempfile.mkdtemp(prefix="apache-kafka-cluster-"))
        # None: start a ZooKeeper of our own in start(), stopped in stop().
        self.own_zk = ZooKeeperServer(data_dir=self.dir / "zookeeper") if zk_connect is None else None
        self._zk_connect = zk_connect
        self.chroot = chroot
        self.overrides = dict(overrides or {})
        self.jvm_options = jvm_options
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def log_path(self, broker_id: int) -> Path:
        return self.dir / f"kafka-{broker_id}.log"

    def _properties(self, broker_id: int, zk_connect: str) -> dict[str, str]:
        replicas = str(min(self.n, 3))
        return {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.ports[broker_id]}",
            "log.dirs": str(self.dir / f"data-{broker_id}"),
            "zookeeper.connect": f"{zk_connect}{self.chroot}",
            # As kafkette's LocalCluster: internal topics replicated as widely as the cluster allows.
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": str(min(self.n, 2)),
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }

    def start(self, timeout: float = 180.0) -> KafkaZkCluster:
        from tests.kafka_dist import classpath

        cp = classpath()
        try:
            if self.own_zk is not None:
                self.own_zk.start()
                self._zk_connect = self.own_zk.connect_string
            assert self._zk_connect is not None
            for broker_id in range(self.n):
                cfg = self.dir / f"server-{broker_id}.properties"
                cfg.write_text("".join(f"{k}={v}\n" for k, v in self._properties(broker_id, self._zk_connect).items()))
                self.processes.append(self._launch(broker_id, cp))
            for port, process in zip(self.ports, self.processes, strict=True):
                wait_for_port("127.0.0.1", port, timeout, process)
            self._wait_for_all_brokers(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, broker_id: int, cp: str) -> subprocess.Popen[bytes]:
        cfg = self.dir / f"server-{broker_id}.properties"
        return subprocess.Popen(["java", *self.jvm_options, "-cp", cp, "kafka.Kafka", str(cfg)],
                                stdout=open(self.log_path(broker_id), "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115

    def stop_broker(self, broker_id: int, timeout: float = 60.0) -> None:
        """SIGTERM to one broker: a controlled shutdown, which takes it out of every ISR at once."""
        process = self.processes[broker_id]
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def start_broker(self, broker_id: int, timeout: float = 120.0) -> None:
        """Starts a broker stopped by stop_broker() again, on its port and log dir, and waits until it
        listens."""
        from tests.kafka_dist import classpath

        assert self.processes[broker_id].poll() is not None, f"broker {broker_id} is running"
        self.processes[broker_id] = self._launch(broker_id, classpath())
        wait_for_port("127.0.0.1", self.ports[broker_id], timeout, self.processes[broker_id])

    def _wait_for_all_brokers(self, timeout: float) -> None:
        """Listening comes before registration; wait until every broker's metadata shows all ``n``
        brokers and a controller."""
        from clients.admin import WireClient
        from clients.connection import WireError

        deadline = time.monotonic() + timeout
        for port in self.ports:
            while True:
                with contextlib.suppress(WireError, OSError), WireClient(f"127.0.0.1:{port}") as c:
                    md = c.refresh([])
                    if md.controller_id >= 0 and len(md.brokers) == self.n:
                        break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Apache Kafka on {port} does not see {self.n} brokers and a controller")
                time.sleep(0.3)

    def stop(self) -> None:
        """SIGTERM to all brokers at once (controlled shutdowns in parallel), SIGKILL after 60 s."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + 60
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.own_zk is not None:
            self.own_zk.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> KafkaZkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
