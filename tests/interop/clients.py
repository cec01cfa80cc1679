"""The three client libraries of the interoperability tests, each behind the same few calls.

Sarama runs as ``sarama-client`` (deploy/interop/sarama-client, built by deploy/interop/install.sh),
the Java client 3.9.1 as ``tests/interop/java/InteropClient.java`` (compiled against Kafka's jars from
Maven Central, see tests/kafka_dist.py), kafka-python in this process. A record is
``(partition, offset, key, value)``; every call raises when its client reports an error.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.integration.helpers import all_served, wait_until

Record = tuple[int, int, str, str]
REPO = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO / "deploy" / "interop" / "install.sh"
JAVA_SOURCE = Path(__file__).parent / "java" / "InteropClient.java"

# Sarama's protocol versions under test: Kafka 3.9 (the release this project follows) and two old ones
# (message format v1 and the first record-batch release).
SARAMA_VERSIONS = ["3.9.0", "1.0.0", "0.10.2.0"]


def install() -> Path:
    """Run the install script (idempotent, cached in .cache/interop) and return its bin directory."""
    proc = subprocess.run(["bash", str(INSTALL_SCRIPT)], capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"{INSTALL_SCRIPT} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return Path(proc.stdout.strip().splitlines()[-1])


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 3) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-admin")
    try:
        admin.create_topics([NewTopic(name, partitions, replication)])
    finally:
        admin.close()
    wait_until(lambda: all_served(bootstrap, name, partitions), 30, f"leaders serving all partitions of {name}")


# ------------------------------------------------------------------------------------------ Sarama


class Sarama:
    """``sarama-client`` at one protocol version."""

    def __init__(self, bin_dir: Path, bootstrap: str, version: str) -> None:
        self.exe = str(bin_dir / "sarama-client")
        self.bootstrap = bootstrap
        self.version = version

    def run(self, command: str, *args: str, timeout: float = 90) -> list[dict[str, object]]:
        argv = [self.exe, command, "-brokers", self.bootstrap, "-version", self.version, *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"sarama-client {command} at {self.version} failed ({proc.returncode}):\n"
                                 f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    @staticmethod
    def records(rows: list[dict[str, object]]) -> list[Record]:
        return [(int(r["partition"]), int(r["offset"]), str(r["key"]), str(r["value"]))  # type: ignore[call-overload]
                for r in rows]

    def produce(self, topic: str, count: int, prefix: str, compression: str = "none") -> list[Record]:
        return self.records(self.run("produce", "-topic", topic, "-count", str(count), "-prefix", prefix,
                                     "-compression", compression))

    def consume(self, topic: str, count: int) -> list[Record]:
        return self.records(self.run("consume", "-topic", topic, "-count", str(count)))

    def group(self, topic: str, group: str, count: int) -> list[Record]:
        return self.records(self.run("group", "-topic", topic, "-group", group, "-count", str(count)))

    def commit(self, topic: str, group: str, partition: int, offset: int) -> None:
        self.run("commit", "-topic", topic, "-group", group, "-partition", str(partition), "-offset", str(offset))

    def committed(self, topic: str, group: str) -> dict[int, int]:
        return {int(r["partition"]): int(r["offset"])  # type: ignore[call-overload]
                for r in self.run("offsets", "-topic", topic, "-group", group)}


# -------------------------------------------------------------------------------------------- Java


def java_command(*args: str) -> list[str]:
    from tests.kafka_dist import classpath, compile_java

    cp = compile_java(JAVA_SOURCE) + ":" + classpath()
    return ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, "InteropClient", *args]


def java(*args: str, timeout: float = 120) -> list[list[str]]:
    proc = subprocess.run(java_command(*args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise AssertionError(f"InteropClient {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-2000:]}\n{proc.stderr[-5000:]}")
    return [line.split("\t") for line in proc.stdout.splitlines() if line]


def java_records(rows: list[list[str]]) -> list[Record]:
    return [(int(p), int(o), k, v) for p, o, k, v in rows]


def java_produce(bootstrap: str, topic: str, count: int, prefix: str) -> list[Record]:
    return java_records(java("produce", bootstrap, topic, str(count), prefix))


def java_consume(bootstrap: str, topic: str, count: int) -> list[Record]:
    return java_records(java("consume", bootstrap, topic, str(count)))


def java_committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    return {int(p): int(o) for p, o in java("committed", bootstrap, group, topic)}


class JavaCommitter:
    """A Java consumer that commits fixed offsets for a group each time ``commit()`` is called."""

    def __init__(self, bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
        positions = [f"{p}:{o}" for p, o in sorted(offsets.items())]
        self.proc = subprocess.Popen(java_command("commit", bootstrap, group, topic, *positions),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self._expect_committed()  # it commits once at start

    def _expect_committed(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "committed":
            self.proc.kill()
            _, err = self.proc.communicate(timeout=30)
            raise AssertionError(f"the Java committer failed ({self.proc.returncode}): {line!r}\n{err[-5000:]}")

    def commit(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        self._expect_committed()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


# ------------------------------------------------------------------------------------ kafka-python


def kafka_python_produce(bootstrap: str, topic: str, count: int, prefix: str, compression: str | None = None,
                         partition: int | None = None) -> list[Record]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type=compression, linger_ms=20)
    try:
        pairs = [(f"{prefix}-key-{i}", f"{prefix}-value-{i}") for i in range(count)]
        sent = [(k, v, producer.send(topic, key=k.encode(), value=v.encode(), partition=partition)) for k, v in pairs]
        producer.flush()
        records = []
        for k, v, future in sent:
            md = future.get(timeout=30)
            records.append((md.partition, md.offset, k, v))
        return records
    finally:
        producer.close()


def kafka_python_consume(bootstrap: str, topic: str, count: int, timeout: float = 60) -> list[Record]:
    import time

    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             auto_offset_reset="earliest", check_crcs=True)
    try:
        partitions = wait_until(lambda: consumer.partitions_for_topic(topic), 30, f"partitions of {topic}")
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        while len(records) < count:
            assert time.monotonic() < deadline, f"kafka-python received {len(records)} of {count} records"
            for batch in consumer.poll(timeout_ms=500).values():
                records += [(r.partition, r.offset, r.key.decode(), r.value.decode()) for r in batch]
        return records
    finally:
        consumer.close()


def kafka_python_commit(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    committer = KafkaPythonCommitter(bootstrap, topic, group, offsets)
    committer.close()


def kafka_python_committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        partitions = wait_until(lambda: consumer.partitions_for_topic(topic), 30, f"partitions of {topic}")
        result = {}
        for p in sorted(partitions):
            offset = consumer.committed(TopicPartition(topic, p))
            result[p] = -1 if offset is None else offset
        return result
    finally:
        consumer.close()


def end_offsets(records: list[Record]) -> dict[int, int]:
    """Per partition, the offset after the last of ``records``."""
    ends: dict[int, int] = {}
    for p, o, _, _ in records:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


class KafkaPythonCommitter:
    """A kafka-python consumer that commits fixed offsets for a group each time ``commit()`` is called
    (once at start), outside any generation as a consumer with assigned partitions does."""

    def __init__(self, bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.structs import OffsetAndMetadata

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        self.offsets = {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        self.commit()

    def commit(self) -> None:
        self.consumer.commit(self.offsets)

    def close(self) -> None:
        self.consumer.close()
