"""kcat (librdkafka's command-line client): metadata, produce, consume and offsets for timestamps."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from kafka import KafkaProducer

from tests.integration.helpers import create_topic, unique

KCAT = shutil.which("kcat") or "kcat"  # deploy/install-sysdeps.sh installs it


def kcat(bootstrap: str, *args: str, stdin: str | None = None, timeout: float = 30.0) -> str:
    proc = subprocess.run([KCAT, "-b", bootstrap, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
    return proc.stdout


def test_kcat_metadata_produce_consume_and_query(kafka_cluster: Any) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("kcat")
    create_topic(bootstrap, topic, partitions=2)

    # -L: brokers, controller and the topic's partitions.
    md = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic))
    broker = kafka_cluster.brokers[0]
    assert md["brokers"] == [{"id": 0, "name": broker.bootstrap}]
    assert md["controllerid"] == 0
    [t] = md["topics"]
    assert t["topic"] == topic and "error" not in t
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1]
    assert all(p["leader"] == 0 and p["replicas"] == [{"id": 0}] and p["isrs"] == [{"id": 0}]
               for p in t["partitions"])

    # -P: keyed lines to partition 0, then -C reads them back with keys, offsets and partitions.
    lines = [f"key{i}:value {i}" for i in range(10)]
    kcat(bootstrap, "-P", "-t", topic, "-p", "0", "-K:", stdin="\n".join(lines) + "\n")
    out = kcat(bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%p|%o|%k|%s\n")
    assert out.splitlines() == [f"0|{i}|key{i}|value {i}" for i in range(10)]
    # -C with an offset in the middle, and a count.
    out = kcat(bootstrap, "-C", "-t", topic, "-p", "0", "-o", "7", "-c", "2", "-q", "-f", "%o %s\n")
    assert out.splitlines() == ["7 value 7", "8 value 8"]

    # -Q: offsets for timestamps (ListOffsets). Records with known CreateTime timestamps go to partition 1.
    base = 1_700_000_000_000
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(5):
        producer.send(topic, value=b"t%d" % i, partition=1, timestamp_ms=base + 1000 * i).get(10)
    producer.close(5)

    def query(ts: int) -> int:
        out = kcat(bootstrap, "-Q", "-t", f"{topic}:1:{ts}")
        # "<topic> [1] offset <n>"
        assert f"{topic} [1] offset" in out, out
        return int(out.strip().rsplit(" ", 1)[1])

    assert query(base - 5000) == 0  # before everything: the first record
    assert query(base) == 0
    assert query(base + 1) == 1  # the first record with a timestamp >= the one asked for
    assert query(base + 2500) == 3
    assert query(base + 4000) == 4
    assert query(base + 10_000) == -1  # later than every record: no such offset (Kafka answers -1)
    # The timestamps come back through -C too.
    out = kcat(bootstrap, "-C", "-t", topic, "-p", "1", "-o", "beginning", "-e", "-q", "-f", "%o %T\n")
    assert out.splitlines() == [f"{i} {base + 1000 * i}" for i in range(5)]
