"""The two scenarios that lost or diverged data while followers truncated to their high watermark
(KIP-101), reproduced step by step on real broker processes.

Setup for both: a 3-broker cluster; the active controller is broker C, and the topic has one partition
with replicas [A, B] on the two other brokers (A preferred, so A leads first). Replication is steered
with SIGSTOP/SIGKILL of whole broker processes. Records are produced one at a time with kafkette's own
wire client, straight to the broker that leads.

Both topics enable ``unclean.leader.election.enable``, as Kafka's own acceptance test for these
scenarios does (EpochDrivenReplicationProtocolAcceptanceTest): when a broker dies, the controller
takes it out of the ISR, so the broker that must lead next may be outside the ISR when its turn comes
(in scenario 2 it always is; in scenario 1 it is unless it rejoined in the moment before A died). What is checked is what KIP-101 promises: a replica that becomes follower
truncates only where its log diverges from the leader's (OffsetForLeaderEpoch), never to its high
watermark, so (1) a committed record survives a restart followed by a leader change and (2) replicas
never keep different records at the same offset. Afterwards the two replicas' segment files are
byte-identical.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protocol.records import build_batch
from tests.cluster.helpers import (
    Admin,
    RawClient,
    ZkView,
    disk_values,
    produce_once_hosted,
    roles,
    segment_bytes,
    start_broker,
    unique,
    wait_until,
)

TOPIC_CONFIGS = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}


def _produce(broker: Any, topic: str, value: bytes, acks: int) -> int:
    with RawClient(broker.bootstrap) as raw:
        r = raw.produce(topic, 0, build_batch([(None, value)]), acks=acks)
    assert r.error_code == 0, f"produce of {value!r} to broker {broker.broker_id}: error {r.error_code}"
    return r.base_offset


def _served_values(broker: Any, topic: str) -> list[bytes]:
    """What ``broker``, as leader, serves to a consumer (everything below its high watermark).

    ZooKeeper names the new leader a moment before the controller's LeaderAndIsr reaches it; until
    then it answers NOT_LEADER_OR_FOLLOWER, which a consumer retries, and so does this."""
    with RawClient(broker.bootstrap) as raw:
        def serving() -> Any:
            pd = raw.fetch(topic, 0, 0)
            return pd if pd.error_code == 0 else None

        wait_until(serving, 30, f"broker {broker.broker_id} serving {topic}-0 as leader")
        return [r.value for b in raw.fetch_batches(topic, 0) for r in b.records()]


def _checkpointed_hw(broker: Any, topic: str) -> int:
    """The replica's high watermark in its replication-offset-checkpoint (0 if not written yet)."""
    path = Path(broker.dir) / "data" / "replication-offset-checkpoint"
    if not path.exists():
        return 0
    for line in path.read_text().splitlines()[2:]:
        t, p, off = line.rsplit(" ", 2)
        if t == topic and p == "0":
            return int(off)
    return 0


def _log_since(broker: Any, mark: int) -> str:
    return broker.log_text()[mark:]


def _wait_identical(cluster: Any, a: int, b: int, topic: str) -> bytes:
    def same() -> bytes | None:
        x, y = segment_bytes(cluster.brokers[a], topic, 0), segment_bytes(cluster.brokers[b], topic, 0)
        return x if x and x == y else None

    return wait_until(same, 60, f"replicas {a} and {b} of {topic}-0 byte-identical", interval=0.2)


@pytest.mark.slow  # about 10 s or more; make test keeps scenario 2
def test_kip101_scenario1_committed_record_survives_restart_then_leader_change(
        cluster3: Callable[..., Any]) -> None:
    """Scenario 1: min.insync.replicas=1. A and B both hold m1, m2; A's HW is 2, B's is still 1.
    B restarts (truncating to its HW would drop m2), then A dies and B leads: m2 must still be there.

    ``replica.fetch.wait.max.ms=5000`` makes the state exact: B's fetch at offset 2 (the one that moves
    A's HW to 2 and completes the acks=all produce of m2) waits up to 5 s on A for new data, so B learns
    HW=2 only later; B is SIGKILLed inside that window, with HW 1 in memory and at most 1 on disk.
    """
    cluster = cluster3(replica_fetch_wait_max_ms="5000")
    a, b, c = roles(cluster)
    A, B = cluster.brokers[a], cluster.brokers[b]
    topic = unique("kip101-s1")
    with Admin(cluster.bootstrap) as admin, ZkView(cluster) as zk:
        admin.create_topic(topic, configs=TOPIC_CONFIGS, assignment={0: [a, b]})
        assert zk.state(topic, 0).leader == a

        assert produce_once_hosted(A.bootstrap, topic, 0, build_batch([(None, b"m1")])).base_offset == 0
        assert _produce(A, topic, b"m2", acks=-1) == 1   # acked: A's HW is 2, m2 is committed
        B.kill()
        assert disk_values(B, topic) == [b"m1", b"m2"]
        hw_b = _checkpointed_hw(B, topic)
        assert hw_b < 2, f"B's checkpointed HW is {hw_b}: the scenario needs B's HW behind its log end"

        # The controller takes B out of the ISR once its ZooKeeper session expires; then B restarts.
        wait_until(lambda: list(zk.state(topic, 0).isr) == [a], 60, "ISR [A] after B's death")
        mark = len(B.log_text())
        start_broker(B)
        checked = re.compile(rf"{re.escape(topic)}-0: no truncation needed|truncating {re.escape(topic)}-0 ")
        wait_until(lambda: checked.search(_log_since(B, mark)), 60, "B's truncation check as follower of A")
        A.kill()  # A dies right after B's epoch check: B must lead with m2 in its log.

        st = wait_until(lambda: (lambda s: s if s.leader == b else None)(zk.state(topic, 0)), 60,
                        "B elected leader after A's death")
        assert st.leader == b
        assert f"truncating {topic}-0 from 2 to 1" not in _log_since(B, mark)
        assert _served_values(B, topic)[:2] == [b"m1", b"m2"], "the committed m2 was lost"

        # A comes back as a follower of B and ends up with exactly B's log.
        start_broker(A)
        assert _produce(B, topic, b"m3", acks=-1) == 2
        wait_until(lambda: list(zk.state(topic, 0).isr) in ([a, b], [b, a]), 60, "A back in the ISR")
        _wait_identical(cluster, a, b, topic)
        assert _served_values(B, topic) == [b"m1", b"m2", b"m3"]
        assert disk_values(A, topic) == [b"m1", b"m2", b"m3"]


def test_kip101_scenario2_diverged_replica_truncates_to_new_leader(cluster3: Callable[..., Any]) -> None:
    """Scenario 2: A holds m1, m2; B only m1 (B is frozen while m2 goes to A with acks=1). Both die.
    B returns first, becomes leader and accepts m3 at offset 1. When A returns it must truncate its own
    m2 at offset 1 (OffsetForLeaderEpoch: B's epoch 0 ended at offset 1) and take m3: both replicas end
    up as [m1, m3], byte-identical. Keeping m2 (HW-based truncation with A's HW at 1 or 2) would leave
    the two replicas with different records at offset 1 forever."""
    cluster = cluster3()
    a, b, c = roles(cluster)
    A, B = cluster.brokers[a], cluster.brokers[b]
    topic = unique("kip101-s2")
    with Admin(cluster.bootstrap) as admin, ZkView(cluster) as zk:
        admin.create_topic(topic, configs=TOPIC_CONFIGS, assignment={0: [a, b]})
        assert zk.state(topic, 0).leader == a
        assert produce_once_hosted(A.bootstrap, topic, 0, build_batch([(None, b"m1")])).base_offset == 0  # both replicas

        B.pause()
        try:
            assert _produce(A, topic, b"m2", acks=1) == 1  # only A has it
            assert disk_values(A, topic) == [b"m1", b"m2"]
            assert disk_values(B, topic) == [b"m1"]
            A.kill()
            # B dies still frozen: A's answer to B's parked fetch (woken by m2's append) may already sit
            # in B's socket buffer, and a B resumed first would read it and append m2 after all.
            B.kill()
        finally:
            B.resume()  # only matters when an assertion above left B frozen
        wait_until(lambda: not ({a, b} & set(zk.zk.get_sorted_broker_ids())), 60, "A and B gone from ZooKeeper")

        start_broker(B)
        wait_until(lambda: zk.state(topic, 0).leader == b, 60, "B leading")
        wait_until(lambda: admin.describe(topic).get(0, {}).get("leader") == b, 30, "metadata: B leads")
        offset = wait_until(lambda: _try_produce(B, topic, b"m3"), 30, "B accepting m3")
        assert offset == 1, f"m3 went to offset {offset}"
        assert _served_values(B, topic) == [b"m1", b"m3"]

        mark_a = len(A.log_text())
        start_broker(A)
        wait_until(lambda: f"truncating {topic}-0 from 2 to 1" in _log_since(A, mark_a), 60,
                   "A truncating its m2 at offset 1")
        wait_until(lambda: sorted(zk.state(topic, 0).isr) == sorted([a, b]), 60, "A back in the ISR")
        _wait_identical(cluster, a, b, topic)
        assert disk_values(A, topic) == [b"m1", b"m3"]
        assert _served_values(B, topic) == [b"m1", b"m3"]


def _try_produce(broker: Any, topic: str, value: bytes) -> int | None:
    with RawClient(broker.bootstrap) as raw:
        r = raw.produce(topic, 0, build_batch([(None, value)]), acks=-1)
    return r.base_offset if r.error_code == 0 else None
