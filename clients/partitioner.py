"""Kafka's default partitioning: murmur2 of the key; records without a key stick to one partition per batch.

The hash is kafka-python's ``murmur2`` (``kafka.partitioner.default``): the same function as the
Java client's ``Utils.murmur2``, from a package the project already depends on for its message
schemas, so there is no reason to keep a second copy. Its ``DefaultPartitioner`` class is not used:
it wants kafka-python's ``ClusterMetadata`` object and picks a random partition for every keyless
record, where Kafka's producers stick to one partition until a batch is sent (KIP-480).
"""

from __future__ import annotations

import random

from kafka.partitioner.default import murmur2 as _murmur2

__all__ = ["StickyPartitioner", "murmur2", "partition_for_key"]


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c), as a signed 32-bit int."""
    return int(_murmur2(data))


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Where Kafka's producers put a record with this key (``toPositive(murmur2(key)) % numPartitions``)."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Keyed records by hash; keyless ones to one random partition per topic until ``batch_done``."""

    def __init__(self) -> None:
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        p = self._sticky.get(topic)
        if p is None or p >= num_partitions:
            p = self._sticky[topic] = random.randrange(num_partitions)
        return p

    def batch_done(self) -> None:
        self._sticky.clear()
