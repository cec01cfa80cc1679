"""LeaderAndIsr states older than what a replica has are not applied (Kafka's Partition.makeLeader and
makeFollower). A partition epoch moves on with every change in ZooKeeper, AlterPartition's included, so
a LeaderAndIsr read before an ISR shrink arrives with the same leader epoch and an older partition epoch:
applying it would put back a replica ZooKeeper no longer has in the ISR."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from broker.partition import Partition
from config.registry import LogConfig
from storage.log import PartitionLog


@pytest.fixture
def partition(tmp_path: object) -> Iterator[Partition]:
    lg = PartitionLog(os.path.join(str(tmp_path), "t-0"), {"segment_bytes": 1 << 20})
    yield Partition("t", 0, 1, lg, LogConfig({}))
    lg.close()


def test_a_leader_skips_a_state_older_than_its_partition_epoch(partition: Partition) -> None:
    assert partition.make_leader(3, [1, 2, 3], [1, 2, 3], 5, 1)
    # AlterPartition accepted a shrink: partition epoch 6, same leader epoch.
    partition.isr, partition.partition_epoch = {1, 2}, 6
    assert not partition.make_leader(3, [1, 2, 3], [1, 2, 3], 5, 1)
    assert partition.isr == {1, 2} and partition.partition_epoch == 6
    # The same state at the current partition epoch, or a newer one, is applied.
    assert partition.make_leader(3, [1, 2], [1, 2, 3], 6, 1)
    assert partition.make_leader(3, [1, 2, 3], [1, 2, 3], 7, 1)
    assert partition.isr == {1, 2, 3} and partition.partition_epoch == 7
    # An older leader epoch is never applied.
    assert not partition.make_leader(2, [1], [1, 2, 3], 9, 1)


def test_a_follower_skips_a_state_older_than_its_partition_epoch(partition: Partition) -> None:
    assert partition.make_follower(2, 4, [2, 1], [2, 1], 8, 1)
    assert not partition.make_follower(2, 4, [2, 1, 3], [2, 1, 3], 7, 1)
    assert partition.isr == {2, 1} and partition.partition_epoch == 8
    assert partition.make_follower(3, 5, [3, 1], [2, 1, 3], 9, 1)
    assert partition.leader_id == 3 and partition.leader_epoch == 5
