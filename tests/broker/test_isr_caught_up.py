"""Which ISR members a leader counts as out of sync, as Kafka's Replica.isCaughtUp decides: a follower
whose last fetch reached the leader's log end stays in sync however long ago that fetch was (an idle
partition has nothing to fall behind on); one behind it leaves after replica.lag.time.max.ms without
catching up; one that has not fetched since this leader took over leaves too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.metadata_cache import MetadataCache
from broker.partition import Partition
from broker.replica_manager import ReplicaManager
from config.registry import BrokerConfig, LogConfig
from protocol.records import NewRecord, build_batch
from storage.log_manager import LogManager

LAG_MAX_MS = 30_000


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Partition]:
    """Broker 0 leading a partition with replicas [0, 1, 2], all in the ISR."""
    config = BrokerConfig({})
    lm = LogManager([str(tmp_path)], broker_id=0, cluster_id="c", default_config=LogConfig.from_broker(config, {}))
    lm.startup()
    rm = ReplicaManager(0, config, lm, MetadataCache(0), lambda _topic: LogConfig.from_broker(config, {}))
    p = rm.get_or_create_partition("t", 0, uuid.uuid4())
    assert p.make_leader(0, [0, 1, 2], [0, 1, 2], 0, 0)
    yield p
    lm.shutdown()


def append(p: Partition, n: int) -> int:
    records = [NewRecord(b"k", b"v", 1_700_000_000_000) for _ in range(n)]
    info = p.append_as_leader(memoryview(bytearray(build_batch(records))), 1, 1_700_000_000_000)
    return info.last_offset + 1


def age(p: Partition, replica: int) -> None:
    """As if the follower's last fetch that caught up was longer ago than replica.lag.time.max.ms."""
    p.remote[replica].last_caught_up_ms -= 2 * LAG_MAX_MS


def test_a_follower_at_the_leaders_log_end_stays_in_sync_however_long_ago_it_fetched(leader: Partition) -> None:
    end = append(leader, 3)
    leader.update_follower_fetch(1, end)
    leader.update_follower_fetch(2, end)
    assert leader.out_of_sync_replicas(LAG_MAX_MS) == set()

    age(leader, 1)
    age(leader, 2)
    # Nothing was written since: both are still at the log end, so neither is out of sync.
    assert leader.out_of_sync_replicas(LAG_MAX_MS) == set()

    append(leader, 1)
    # Now the log has moved past them, and neither has caught up within the lag time.
    assert leader.out_of_sync_replicas(LAG_MAX_MS) == {1, 2}


def test_a_follower_behind_the_log_end_leaves_after_the_lag_time(leader: Partition) -> None:
    end = append(leader, 3)
    leader.update_follower_fetch(1, end)
    leader.update_follower_fetch(2, end - 1)
    # Replica 2 is behind but caught up to where the leader was at its previous fetch, recently.
    assert leader.out_of_sync_replicas(LAG_MAX_MS) == set()

    age(leader, 1)
    age(leader, 2)
    assert leader.out_of_sync_replicas(LAG_MAX_MS) == {2}


def test_a_follower_that_never_fetched_from_this_leader_leaves_after_the_lag_time(leader: Partition) -> None:
    # A new leader knows no follower's log end (Kafka resets it to unknown), even on an empty log.
    assert leader.out_of_sync_replicas(LAG_MAX_MS) == set()
    age(leader, 1)
    assert leader.out_of_sync_replicas(LAG_MAX_MS) == {1}
