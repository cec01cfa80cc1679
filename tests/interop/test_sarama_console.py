"""Sarama's own console producer and consumer (github.com/IBM/sarama/tools, at Sarama's default protocol
version) on a kafkette cluster, beside kafka-python and the Java client."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import unique
from tests.interop.clients import (
    Record,
    create_topic,
    java_consume,
    java_produce,
    kafka_python_consume,
    kafka_python_produce,
)

# Go builds and a Debian package on first use, then three client stacks: make test-slow.
pytestmark = pytest.mark.slow


def console_produce(bin_dir: Path, bootstrap: str, topic: str, key: str, value: str, partition: int) -> Record:
    """One record through kafka-console-producer (it sends one per run), the value on standard input."""
    proc = subprocess.run([str(bin_dir / "kafka-console-producer"), "-brokers", bootstrap, "-topic", topic,
                           "-key", key, "-partition", str(partition)],
                          input=value, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    m = re.fullmatch(r"topic=(\S+)\tpartition=(\d+)\toffset=(\d+)", proc.stdout.strip())
    assert m is not None and m.group(1) == topic, proc.stdout
    return int(m.group(2)), int(m.group(3)), key, value


def console_consume(bin_dir: Path, bootstrap: str, topic: str, count: int, timeout: float = 60) -> list[Record]:
    """kafka-console-consumer from the oldest offsets until ``count`` records were printed; then SIGTERM,
    on which it closes its partition consumers and exits 0."""
    proc = subprocess.Popen([str(bin_dir / "kafka-console-consumer"), "-brokers", bootstrap, "-topic", topic,
                             "-offset", "oldest"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    records: list[Record] = []
    fields: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(records) < count:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, f"kafka-console-consumer exited after {len(records)} records"
            if not line:  # a blank line ends each record's block
                continue
            name, _, value = line.partition(":\t")
            fields[name] = value
            if name == "Value":
                records.append((int(fields["Partition"]), int(fields["Offset"]), fields["Key"], value))
                fields = {}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err
    return records


def test_console_producer_records_read_by_kafka_python_and_java(cluster: Any, interop_bin: Path) -> None:
    bs = cluster.bootstrap
    topic = unique("sarama-console-p")
    create_topic(bs, topic, 3)
    written = [console_produce(interop_bin, bs, topic, f"key-{i}", f"value {i}", i % 3) for i in range(6)]
    assert sorted((p, o) for p, o, _, _ in written) == [(p, o) for p in range(3) for o in range(2)]

    assert sorted(kafka_python_consume(bs, topic, 6)) == sorted(written)
    assert sorted(java_consume(bs, topic, 6)) == sorted(written)


def test_console_consumer_reads_kafka_python_and_java_records(cluster: Any, interop_bin: Path) -> None:
    bs = cluster.bootstrap
    topic = unique("sarama-console-c")
    create_topic(bs, topic, 3)
    written = kafka_python_produce(bs, topic, 15, "kafka-python", compression="snappy")
    written += java_produce(bs, topic, 15, "java")

    read = console_consume(interop_bin, bs, topic, 30)
    assert sorted(read) == sorted(written)
