"""min.insync.replicas on a partition leader, as Kafka applies it from 3.7 (KAFKA-15583): capped by the
number of assigned replicas, the HW held while the ISR is below it, and the maximal ISR (with a pending
expansion) counted when an acks=all write is answered. tests/cluster/test_under_min_isr.py compares
the same rules with Apache Kafka 3.9.1 on real clusters.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.metadata_cache import MetadataCache
from broker.partition import Partition, PartitionError
from broker.replica_manager import ReplicaManager
from config.registry import BrokerConfig, LogConfig
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from storage.log_manager import LogManager


@pytest.fixture
def make_leader(tmp_path: Path) -> Iterator[object]:
    """``make_leader(topic, isr, replicas)``: broker 0 leading a partition, min.insync.replicas=2."""
    config = BrokerConfig({"min.insync.replicas": "2"})
    lm = LogManager([str(tmp_path)], broker_id=0, cluster_id="c", default_config=LogConfig.from_broker(config, {}))
    lm.startup()
    rm = ReplicaManager(0, config, lm, MetadataCache(0), lambda _topic: LogConfig.from_broker(config, {}))

    def make(topic: str, isr: list[int], replicas: list[int]) -> Partition:
        p = rm.get_or_create_partition(topic, 0, uuid.uuid4())
        assert p.make_leader(0, isr, replicas, 0, 0)
        return p

    yield make
    lm.shutdown()


def append(p: Partition, acks: int, n: int = 1) -> int:
    """Appends ``n`` records; returns the offset after them."""
    records = [NewRecord(b"k", b"v", 1_700_000_000_000) for _ in range(n)]
    info = p.append_as_leader(memoryview(bytearray(build_batch(records))), acks, 1_700_000_000_000)
    return info.last_offset + 1


def test_a_topic_with_fewer_replicas_than_min_insync_replicas_takes_acks_all(make_leader) -> None:  # type: ignore[no-untyped-def]
    p = make_leader("one-replica", [0], [0])
    assert p.effective_min_isr == 1 and not p.is_under_min_isr
    end = append(p, -1)
    assert p.high_watermark == end
    assert p.ack_satisfied(end) == (True, ErrorCode.NONE)

    two = make_leader("two-replicas", [0, 1], [0, 1])
    assert two.effective_min_isr == 2  # capped only where the replicas are fewer


def test_the_hw_stands_still_below_min_isr_and_moves_once_the_isr_is_back(make_leader) -> None:  # type: ignore[no-untyped-def]
    p = make_leader("shrunk", [0, 1], [0, 1, 2])
    end = append(p, -1)
    assert p.update_follower_fetch(1, end)
    assert p.high_watermark == end == 1

    p.isr = {0}  # the controller took 1 out of the ISR
    assert p.is_under_min_isr
    with pytest.raises(PartitionError) as refused:
        append(p, -1)
    assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    end = append(p, 1, n=3)  # acks=1 is still written...
    assert (p.log_end_offset, p.high_watermark) == (4, 1)  # ...but not committed: the HW stays
    assert not p.update_follower_fetch(1, end)  # even with a caught-up replica outside the ISR
    assert p.high_watermark == 1

    assert p.make_leader(0, [0, 1], [0, 1, 2], 1, 0)  # 1 back in the ISR: its LEO counts at once
    assert p.high_watermark == 4


def test_a_pending_expansion_counts_towards_min_isr_when_acks_all_is_answered(make_leader) -> None:  # type: ignore[no-untyped-def]
    p = make_leader("pending", [0, 1], [0, 1, 2])
    end = append(p, -1)
    assert p.update_follower_fetch(1, end)
    # The ISR shrank to the leader, and the leader proposed adding 2 back (pending): Kafka's
    # checkEnoughReplicasReachOffset counts the maximal ISR, as the HW does.
    p.isr = {0}
    p.pending_isr = {0, 2}
    assert p.ack_satisfied(end) == (True, ErrorCode.NONE)
    p.pending_isr = None
    assert p.ack_satisfied(end) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


class Eligibility:
    """The leader's view of replica.lag.time.max.ms and of live brokers, set by each test."""

    def __init__(self) -> None:
        self.live = {0, 1, 2}

    def lag_time_max_ms(self) -> int:
        return 30_000

    def alive(self, broker_id: int) -> bool:
        return broker_id in self.live


def test_the_hw_waits_for_a_caught_up_follower_outside_the_isr(make_leader) -> None:  # type: ignore[no-untyped-def]
    """Kafka's shouldWaitForReplicaToJoinIsr: once follower 2 has caught up to where the leader was at its
    previous fetch, the HW no longer runs ahead of it, so it can reach the HW and join the ISR even while
    records keep coming; a follower whose broker is not alive is not waited for."""
    p = make_leader("joining", [0, 1], [0, 1, 2])
    p.eligibility = eligibility = Eligibility()
    end = append(p, 1, n=3)
    assert p.update_follower_fetch(1, end) and p.high_watermark == 3
    p.update_follower_fetch(2, 0)  # far behind: not caught up, not waited for
    end = append(p, 1, n=2)
    assert p.update_follower_fetch(1, end) and p.high_watermark == 5

    p.update_follower_fetch(2, 3)  # reached the leader's LEO of its previous fetch: caught up
    end = append(p, 1, n=2)
    assert not p.update_follower_fetch(1, end)
    assert p.high_watermark == 5  # not 7: held for follower 2
    p.update_follower_fetch(2, 5)
    assert p.high_watermark == 5 and 2 in p.caught_up_followers()  # at the HW: ready to join the ISR

    eligibility.live.discard(2)  # its broker died
    assert p.maybe_increment_hw() and p.high_watermark == 7
