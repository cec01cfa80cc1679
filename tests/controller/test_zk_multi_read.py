"""Bulk znode reads (multiRead chunks) against a real ZooKeeper: same answers as one getData each."""

from __future__ import annotations

import pytest

from controller import zk_data as zd
from controller import zk_multi_read
from controller.zk_client import KafkaZkClient
from controller.zk_data import LeaderIsrAndControllerEpoch

pytestmark = pytest.mark.timeout(60)


def _states(zk: KafkaZkClient, topic: str, n: int) -> dict[tuple[str, int], LeaderIsrAndControllerEpoch]:
    zk.create_topic(topic, {p: [p % 3, (p + 1) % 3] for p in range(n)})
    states = {(topic, p): LeaderIsrAndControllerEpoch(leader=p % 3, leader_epoch=p, isr=(p % 3, (p + 1) % 3),
                                                      controller_epoch=1) for p in range(n)}
    zk.create_partition_states(states, zd.MATCH_ANY_VERSION)
    return states


def test_bulk_read_matches_single_reads_across_chunks(zk: KafkaZkClient, monkeypatch: pytest.MonkeyPatch) -> None:
    _states(zk, "bulk", 300)
    # Small requests: the 300 reads (and the missing ones) span many multiRead chunks in flight at once.
    monkeypatch.setattr(zk_multi_read, "MAX_REQUEST_BYTES", 2048)
    asked = [("bulk", p) for p in range(300)] + [("bulk", 300), ("absent", 0)]
    assert len(zk_multi_read.chunks([zd.partition_state_path(*tp) for tp in asked], 2048)) > 5
    got = zk.get_partition_states(asked)
    assert ("bulk", 300) not in got and ("absent", 0) not in got
    assert len(got) == 300
    for p in (0, 1, 150, 299):
        single = zk.get_partition_state("bulk", p)
        assert single is not None and got[("bulk", p)] == single
        assert single.leader_epoch == p and single.zk_version == 0


def test_pipelined_fallback_gives_the_same_answers(zk: KafkaZkClient) -> None:
    _states(zk, "fallback", 20)
    asked = [("fallback", p) for p in range(21)]
    bulk = zk.get_partition_states(asked)
    zk._multi_read_supported = False  # as after a server answered UNIMPLEMENTED
    assert zk.get_partition_states(asked) == bulk
    assert len(bulk) == 20


def test_topic_assignments_in_bulk(zk: KafkaZkClient) -> None:
    for t in ("a1", "a2", "a3"):
        zk.create_topic(t, {0: [1, 2], 1: [2, 1]})
    got = zk.get_topic_assignments(["a1", "missing", "a2", "a3"])
    assert sorted(got) == ["a1", "a2", "a3"]
    assert got["a2"].partitions[1].replicas == (2, 1)
    assert got["a1"] == zk.get_topic_assignment("a1")
