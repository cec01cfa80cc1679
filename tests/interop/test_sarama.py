"""Sarama (Go) against a 3-broker kafkette cluster, at Kafka 3.9's protocol and at two old ones, beside
kafka-python and the Java client 3.9.1: each reads what the others write, and a consumer group's
committed offsets are the same whichever client committed or reads them.

At 0.10.2.0 Sarama writes message format v1 (Produce v2) and reads with Fetch v3, so the broker converts
both ways; at 1.0.0 it speaks record batches with the versions of Kafka 1.0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import unique
from tests.interop.clients import (
    SARAMA_VERSIONS,
    Record,
    Sarama,
    create_topic,
    end_offsets,
    java_committed,
    java_consume,
    java_produce,
    kafka_python_commit,
    kafka_python_committed,
    kafka_python_consume,
    kafka_python_produce,
)

# Go builds and a Debian package on first use, then three client stacks: make test-slow.
pytestmark = pytest.mark.slow


# The codec each version writes with: zstd needs 2.1 or later; 0.10.2's gzip makes wrapper messages.
# The current protocol in make test; the old ones (1.0.0, 0.10.2.0) in make test-slow.
VERSIONS_FAST_FIRST = [SARAMA_VERSIONS[0], *(pytest.param(v, marks=pytest.mark.slow) for v in SARAMA_VERSIONS[1:])]
CODEC = {"3.9.0": "zstd", "1.0.0": "lz4", "0.10.2.0": "gzip"}


def by_position(records: list[Record]) -> dict[tuple[int, int], tuple[str, str]]:
    positions = {(p, o): (k, v) for p, o, k, v in records}
    assert len(positions) == len(records), f"a position read twice: {sorted(records)}"
    return positions


def in_partition_order(records: list[Record]) -> bool:
    """Each partition's records come in offset order."""
    last: dict[int, int] = {}
    for p, o, _, _ in records:
        if o <= last.get(p, -1):
            return False
        last[p] = o
    return True


@pytest.mark.parametrize("version", VERSIONS_FAST_FIRST)
def test_sarama_writes_kafka_python_and_java_read(cluster: Any, interop_bin: Path, version: str) -> None:
    bs = cluster.bootstrap
    topic = unique(f"sarama-w-{version}")
    create_topic(bs, topic, 3)
    sarama = Sarama(interop_bin, bs, version)
    written = sarama.produce(topic, 30, "sarama", compression=CODEC[version])
    assert {p for p, _, _, _ in written} == {0, 1, 2}, written  # keys hash to every partition

    expected = by_position(written)
    for name, read in (("kafka-python", kafka_python_consume(bs, topic, 30)), ("java", java_consume(bs, topic, 30))):
        assert by_position(read) == expected, name
        assert in_partition_order(read), name
    # Sarama reads its own records back at the same version.
    assert by_position(sarama.consume(topic, 30)) == expected


@pytest.mark.parametrize("version", VERSIONS_FAST_FIRST)
def test_kafka_python_and_java_write_sarama_reads(cluster: Any, interop_bin: Path, version: str) -> None:
    bs = cluster.bootstrap
    topic = unique(f"sarama-r-{version}")
    create_topic(bs, topic, 3)
    # kafka-python's batches are compressed and hold several records; the Java producer's are not.
    written = kafka_python_produce(bs, topic, 20, "kafka-python", compression=CODEC[version])
    written += java_produce(bs, topic, 20, "java")

    read = Sarama(interop_bin, bs, version).consume(topic, 40)
    assert by_position(read) == by_position(written)
    assert in_partition_order(read)


@pytest.mark.parametrize("version", VERSIONS_FAST_FIRST)
def test_sarama_group_commits_seen_by_kafka_python_and_java(cluster: Any, interop_bin: Path,
                                                             version: str) -> None:
    bs = cluster.bootstrap
    topic, group = unique(f"sarama-g-{version}"), unique(f"sarama-group-{version}")
    create_topic(bs, topic, 3)
    written = kafka_python_produce(bs, topic, 30, "kafka-python")
    sarama = Sarama(interop_bin, bs, version)

    # A Sarama consumer group member takes every record and commits.
    consumed = sarama.group(topic, group, 30)
    assert by_position(consumed) == by_position(written)
    ends = end_offsets(written)
    assert kafka_python_committed(bs, topic, group) == ends
    assert java_committed(bs, topic, group) == ends
    assert sarama.committed(topic, group) == ends

    # Sarama's offset manager moves one partition back; the others see it.
    sarama.commit(topic, group, 1, 2)
    moved = {**ends, 1: 2}
    assert kafka_python_committed(bs, topic, group) == moved
    assert java_committed(bs, topic, group) == moved


@pytest.mark.parametrize("version", VERSIONS_FAST_FIRST)
def test_sarama_group_resumes_from_kafka_python_commits(cluster: Any, interop_bin: Path, version: str) -> None:
    bs = cluster.bootstrap
    topic, group = unique(f"sarama-resume-{version}"), unique(f"sarama-resume-{version}")
    create_topic(bs, topic, 3)
    written = kafka_python_produce(bs, topic, 30, "kafka-python")
    ends = end_offsets(written)
    committed = {p: end // 2 for p, end in ends.items()}
    kafka_python_commit(bs, topic, group, committed)

    sarama = Sarama(interop_bin, bs, version)
    assert sarama.committed(topic, group) == committed
    remaining = [r for r in written if r[1] >= committed[r[0]]]
    consumed = sarama.group(topic, group, len(remaining))
    # The group starts where kafka-python committed: exactly the records after those offsets.
    assert by_position(consumed) == by_position(remaining)
    assert kafka_python_committed(bs, topic, group) == ends
