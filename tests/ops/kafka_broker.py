"""A real Apache Kafka 3.9 broker in ZooKeeper mode, from the jars tests/kafka_dist.py resolves."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from clients.devcluster import wait_for_port
from clients.zookeeper_server import ZooKeeperServer, free_port


class KafkaZkBroker:
    """ZooKeeper plus one ``kafka.Kafka`` process; ``bootstrap`` once started."""

    def __init__(self, overrides: dict[str, str] | None = None,
                 jvm_options: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-Xshare:auto")) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="apache-kafka-"))
        self.zk = ZooKeeperServer(data_dir=self.dir / "zookeeper")
        self.port = free_port()
        self.overrides = dict(overrides or {})
        self.jvm_options = jvm_options  # the default starts fast; benchmarks want the full JIT: ()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.dir / "kafka.log"
        self.log_dir = self.dir / "data"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> KafkaZkBroker:
        from tests.kafka_dist import classpath

        cp = classpath()
        self.zk.start()
        props = {
            "broker.id": "0",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "zookeeper.connect": f"{self.zk.connect_string}/kafka",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }
        cfg = self.dir / "server.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.process = subprocess.Popen(
            ["java", "-Xmx512m", *self.jvm_options, "-cp", cp, "kafka.Kafka", str(cfg)],
            stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
        wait_for_port("127.0.0.1", self.port, timeout, self.process)
        # Listening comes a moment before the broker has registered and elected itself controller.
        from clients.admin import WireClient
        from clients.connection import WireError

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(WireError, OSError), WireClient(self.bootstrap) as c:
                if c.refresh([]).controller_id >= 0:
                    return self
            time.sleep(0.3)
        raise TimeoutError("Apache Kafka did not elect a controller")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.zk.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
