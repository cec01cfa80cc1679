"""``kafkette`` beside Apache Kafka 3.9's own tools, run against the same kafkette broker: the consumer groups'
COORDINATOR (ID) cell, and the console producer's batches (an idempotent producer's, like Kafka's).

The Kafka tools run from the jars ``tests/kafka_dist.py`` resolves (as the dump-log and ACL cross-checks do).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ops.helpers import running_cluster, unique

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    yield from running_cluster(1, metrics_base_port=None)


def kafkette(*argv: str, stdin: str | None = None) -> str:
    r = subprocess.run([sys.executable, "-m", "clients.cli", *argv], input=stdin, capture_output=True, text=True,
                       timeout=90, cwd=REPO)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_group_state_coordinator_cell_as_kafka_consumer_groups(cluster: Any) -> None:
    from tests.kafka_dist import run_java

    bs = cluster.bootstrap
    t, g = unique("kcoord"), unique("kg")
    kafkette("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "1")
    kafkette("console-producer", "--bootstrap-server", bs, "--topic", t, stdin="m\n")
    kafkette("console-consumer", "--bootstrap-server", bs, "--topic", t, "--group", g, "--from-beginning",
             "--max-messages", "1")
    theirs = run_java("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", bs,
                      "--describe", "--group", g, "--state")
    ours = kafkette("consumer-groups", "--describe", "--bootstrap-server", bs, "--group", g, "--state")

    def rows(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.strip()]

    (their_head, their_row), (our_head, our_row) = rows(theirs), rows(ours)
    assert their_head.split() == our_head.split()
    # the same "host:port  (id)" cell, two spaces before the id included
    cell = re.compile(r"\S+:\d+  \(\d+\)")
    their_cell, our_cell = cell.search(their_row), cell.search(our_row)
    assert their_cell and our_cell and their_cell.group() == our_cell.group(), (their_row, our_row)
    assert their_cell.group().endswith(f"  ({cluster.brokers[0].broker_id})")
    assert their_row.split()[-2:] == our_row.split()[-2:]  # STATE, #MEMBERS


def test_console_producer_batches_as_kafka_console_producer(cluster: Any) -> None:
    """Kafka 3.9's console producer writes idempotent batches (a producer id, sequences from 0); so does ours."""
    from tests.kafka_dist import classpath

    bs = cluster.bootstrap
    t = unique("kidem")
    kafkette("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "1")
    proc = subprocess.run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath(),
                           "kafka.tools.ConsoleProducer", "--bootstrap-server", bs, "--topic", t],
                          input="theirs\n", capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    kafkette("console-producer", "--bootstrap-server", bs, "--topic", t, stdin="ours\n")
    seg = Path(cluster.brokers[0].props["log.dirs"]) / f"{t}-0" / "00000000000000000000.log"
    doc = json.loads(kafkette("dump-log", "--files", str(seg), "--output", "json"))
    theirs, ours = doc[0]["batches"]
    for b in (theirs, ours):
        assert b["producerId"] >= 0 and b["producerEpoch"] == 0 and b["baseSequence"] == 0
    assert theirs["producerId"] != ours["producerId"]
