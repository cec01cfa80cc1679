"""Split brain: a controller frozen (SIGSTOP) until its ZooKeeper session expires, while another broker
wins the election, then thawed. Whatever the old controller still sends carries its old epoch and is
refused by the brokers ("stale controller epoch"); it cannot write ZooKeeper either (its writes are
conditional on the controller epoch znode's version), so partition state stays the new controller's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from protocol.api_versions import ApiKey
from protocol.messages import request_type
from protocol.records import build_batch
from tests.cluster.helpers import Admin, RawClient, ZkView, unique, wait_until


def _metadata_controller(broker: Any) -> int:
    try:
        with RawClient(broker.bootstrap, timeout=5) as raw:
            md = raw.request(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False,
                             include_topic_authorized_operations=False)
        return md.controller_id
    except (OSError, ConnectionError):
        return -1


def _states(zk: ZkView, topics: list[str], partitions: int) -> dict[tuple[str, int], Any]:
    return {(t, p): zk.state(t, p) for t in topics for p in range(partitions)}


@pytest.mark.slow  # about 10 s or more; make test keeps the forged controller requests (test_fencing.py)
def test_frozen_controller_is_fenced_after_thaw(cluster3: Callable[..., Any]) -> None:
    """Steps: (1) freeze broker R, (2) create a topic so the controller C has requests for R on the
    wire and queued behind them, (3) freeze C, thaw R (R answers C's in-flight request, which is still
    current), (4) C's session expires and D becomes controller with a higher epoch and tells every live
    broker, (5) thaw C: its queued requests reach R with the old epoch and are refused; C resigns, and
    ZooKeeper holds only state written by D."""
    cluster = cluster3()
    with ZkView(cluster) as zk:
        c = wait_until(lambda: (lambda cid: None if cid is None else (cid,))(zk.controller()), 30, "a controller")[0]
        old_epoch = zk.controller_epoch()
        r, other = sorted({0, 1, 2} - {c})
        C, R = cluster.brokers[c], cluster.brokers[r]
        base = unique("split-base")
        with Admin(cluster.bootstrap) as admin:
            admin.create_topic(base, 3, 3)
        fresh = unique("split-new")
        with RawClient(C.bootstrap) as raw_c:
            R.pause()
            try:
                _create_topic(raw_c, fresh)
                wait_until(lambda: zk.zk.get_partitions_for_topic(fresh) and all(
                    zk.state(fresh, p) is not None for p in range(3)), 30, f"partition state of {fresh}")
                time.sleep(1.0)  # C sends LeaderAndIsr/UpdateMetadata for the new topic to R (frozen)
                C.pause()
            finally:
                R.resume()
        try:
            # D takes over once C's session expires, and moves C's leaderships.
            d = wait_until(lambda: (lambda cid: (cid,) if cid not in (None, c) else None)(zk.controller()), 60,
                           "a new controller")[0]
            new_epoch = zk.controller_epoch()
            assert new_epoch > old_epoch
            wait_until(lambda: all(s.leader not in (c, -1) for s in _states(zk, [base, fresh], 3).values()), 60,
                       "every partition led without C")
            # A partition that C only followed keeps C in its ISR while nothing is written to it: as in
            # Kafka (Replica.isCaughtUp), a follower at the leader's log end is in sync. A record to
            # each partition leaves C behind, and the leaders shrink it out.
            for t in (base, fresh):
                for p in range(3):
                    _write_one(cluster, zk, t, p)
            wait_until(lambda: all(c not in s.isr for s in _states(zk, [base, fresh], 3).values()), 60,
                       "C out of every ISR")
            wait_until(lambda: _metadata_controller(R) == d and _metadata_controller(cluster.brokers[other]) == d,
                       30, f"brokers {r} and {other} following controller {d}")
            before = _states(zk, [base, fresh], 3)
            marks = {b.broker_id: len(b.log_text()) for b in cluster.brokers}
        finally:
            C.resume()

        stale = f"refusing a request from controller {c} with stale controller epoch {old_epoch}"
        wait_until(lambda: any(stale in cluster.brokers[b].log_text()[marks[b]:] for b in (r, other)), 60,
                   f"a broker refusing controller {c}'s epoch-{old_epoch} request")
        wait_until(lambda: f"controller {c}: resigning" in C.log_text()[marks[c]:], 60, f"controller {c} resigning")

        # C comes back as an ordinary broker (new session, new broker epoch) and catches up.
        with Admin(cluster.bootstrap) as admin:
            for t in (base, fresh):
                for p in range(3):
                    admin.wait_isr(t, p, [0, 1, 2], 90)
        assert zk.controller() == d
        assert zk.controller_epoch() == new_epoch
        after = _states(zk, [base, fresh], 3)
        for tp, st in after.items():
            assert st.controller_epoch <= new_epoch
            if st.zk_version != before[tp].zk_version:
                assert st.controller_epoch == new_epoch, f"{tp} rewritten by controller epoch {st.controller_epoch}"
            assert st.leader in st.isr, f"{tp}: leader {st.leader} not in ISR {st.isr}"
        for b in (r, other):
            assert "refusing a request from controller" not in cluster.brokers[b].log_text()[marks[b]:].replace(
                stale, ""), "a request from the current controller was refused"


def _write_one(cluster: Any, zk: ZkView, topic: str, partition: int) -> None:
    """One record (acks=1) to the partition's current leader, as ZooKeeper names it."""
    def attempt() -> bool:
        leader = zk.state(topic, partition).leader
        try:
            with RawClient(cluster.brokers[leader].bootstrap, timeout=5) as raw:
                return raw.produce(topic, partition, build_batch([(None, b"x")]), acks=1).error_code == 0
        except (OSError, ConnectionError):
            return False
    wait_until(attempt, 60, f"a record written to {topic}-{partition}")


def _create_topic(raw: RawClient, name: str) -> None:
    """CreateTopics straight to the controller (an admin client would ask the frozen broker first)."""
    mt = request_type(ApiKey.CREATE_TOPICS)
    resp = raw.request(ApiKey.CREATE_TOPICS, 5, timeout_ms=30000, validate_only=False, topics=[
        mt.CreatableTopic(name=name, num_partitions=3, replication_factor=3, assignments=[], configs=[])])
    assert resp.topics[0].error_code == 0, resp.topics[0]
