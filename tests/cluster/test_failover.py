"""Failover under load: RF=3, min.insync.replicas=2, acks=all producers (kafka-python and librdkafka)
running while brokers are killed, bounced and frozen. After each fault every acknowledged record is read
back in order with no holes and no duplicates, and the test reports how long producing to and consuming
from the affected partition stopped (the terminal summary's "cluster availability" section).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.cluster.helpers import Admin, Workload, ZkView, report, start_broker, unique, wait_until

PARTITIONS = 3
TOPIC_CONFIGS = {"min.insync.replicas": "2"}


def _setup(cluster3: Callable[..., Any], **extra: str) -> tuple[Any, Admin, str]:
    cluster = cluster3(**extra)
    admin = Admin(cluster.bootstrap)
    topic = unique("failover")
    admin.create_topic(topic, PARTITIONS, 3, TOPIC_CONFIGS)
    return cluster, admin, topic


def _all_isr_full(admin: Admin, topic: str, timeout: float = 90) -> None:
    for p in range(PARTITIONS):
        admin.wait_isr(topic, p, [0, 1, 2], timeout)


def _recovered(w: Workload, admin: Admin) -> float:
    """Wait until producing to every partition works again and the live consumer has caught up."""
    try:
        w.progress(10)
        w.consumer_caught_up()
    except AssertionError:
        print(f"partition state when stuck: {admin.describe(w.topic)}")
        raise
    return time.monotonic()


def test_leader_sigkill_acks_all_loses_nothing(cluster3: Callable[..., Any]) -> None:
    """SIGKILL the leader of partition 0 under load: the controller elects a new leader from the ISR,
    producers retry there, nothing acknowledged is lost; the restarted broker truncates, catches up and
    rejoins the ISR."""
    cluster, admin, topic = _setup(cluster3)
    w = Workload(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        victim = admin.describe(topic)[0]["leader"]
        t0 = time.monotonic()
        cluster.brokers[victim].kill()
        admin.wait_leader(topic, 0, lambda b: b >= 0 and b != victim, what="a new leader")
        t1 = _recovered(w, admin)
        report("leader SIGKILL", **w.unavailability(t0, t1, partition=0))
        start_broker(cluster.brokers[victim])
        _all_isr_full(admin, topic)
        w.progress(10)
        counts = w.finish()
        report("leader SIGKILL totals", **counts)
    finally:
        w.abort()
        admin.close()


@pytest.mark.slow
def test_controller_sigkill(cluster3: Callable[..., Any]) -> None:
    """SIGKILL the active controller (which also leads some partitions): another broker wins the
    election in ZooKeeper once the session expires, takes over leadership changes, nothing is lost."""
    cluster, admin, topic = _setup(cluster3)
    w = Workload(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        with ZkView(cluster) as zk:
            victim = zk.controller()
            assert victim is not None
            old_epoch = zk.controller_epoch()
            t0 = time.monotonic()
            cluster.brokers[victim].kill()
            wait_until(lambda: zk.controller() not in (None, victim) and zk.controller_epoch() > old_epoch, 60,
                       "a new controller")
            t_ctrl = time.monotonic() - t0
            led = [p for p, d in admin.describe(topic).items() if d["leader"] == victim]
            for p in range(PARTITIONS):
                admin.wait_leader(topic, p, lambda b: b >= 0 and b != victim, what="a live leader")
            t1 = _recovered(w, admin)
            report("controller SIGKILL", new_controller_after=t_ctrl, **w.unavailability(t0, t1))
            start_broker(cluster.brokers[victim])
            _all_isr_full(admin, topic)
            del led
        w.progress(10)
        report("controller SIGKILL totals", **w.finish())
    finally:
        w.abort()
        admin.close()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["clean", "hard"])
def test_rolling_bounce(cluster3: Callable[..., Any], how: str) -> None:
    """Restart every broker in turn (SIGTERM with controlled shutdown, or SIGKILL), each time waiting
    until the ISR is whole again before the next one."""
    cluster, admin, topic = _setup(cluster3)
    w = Workload(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        worst: dict[str, float] = {}
        for b in cluster.brokers:
            t0 = time.monotonic()
            if how == "clean":
                rc = b.stop()
                assert rc == 0, f"broker {b.broker_id} exited with {rc}"
            else:
                b.kill()
            for p in range(PARTITIONS):
                admin.wait_leader(topic, p, lambda x, bid=b.broker_id: x >= 0 and x != bid, what="a live leader")
            t1 = _recovered(w, admin)
            for k, v in w.unavailability(t0, t1).items():
                worst[k] = max(worst.get(k, 0.0), v)
            start_broker(b)
            _all_isr_full(admin, topic)
        report(f"rolling bounce ({how}), worst per broker", **worst)
        report(f"rolling bounce ({how}) totals", **w.finish())
    finally:
        w.abort()
        admin.close()


@pytest.mark.slow
def test_follower_frozen_leaves_and_rejoins_isr(cluster3: Callable[..., Any]) -> None:
    """SIGSTOP a follower: after replica.lag.time.max.ms the leader shrinks the ISR (producing goes on
    with min.insync.replicas=2); SIGCONT: it catches up and rejoins the ISR. The ZooKeeper session
    timeout is raised to 20 s here so that it is the leader's lag check, not the session expiry, that
    takes the follower out (the ISR is read from ZooKeeper: the frozen broker answers no metadata)."""
    cluster, admin, topic = _setup(cluster3, zookeeper_session_timeout_ms="20000")
    zk = ZkView(cluster)
    w = Workload(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        # A partition whose leader is not the controller, and its follower that is not the controller
        # either: only the follower is cut off (a frozen controller is test_split_brain's subject).
        controller = zk.controller()
        desc = admin.describe(topic)
        part = next(p for p, d in desc.items() if d["leader"] != controller)
        leader = desc[part]["leader"]
        follower = next(r for r in desc[part]["replicas"] if r not in (leader, controller))
        others = sorted({0, 1, 2} - {follower})
        t0 = time.monotonic()
        cluster.brokers[follower].pause()
        try:
            wait_until(lambda: sorted(zk.state(topic, part).isr) == others, 60, f"ISR {others} in ZooKeeper")
            t_shrunk = time.monotonic() - t0
            t1 = _recovered(w, admin)
            report("follower SIGSTOP", isr_shrunk_after=t_shrunk, **w.unavailability(t0, t1, partition=part))
        finally:
            cluster.brokers[follower].resume()
        t2 = time.monotonic()
        admin.wait_isr(topic, part, [0, 1, 2])
        report("follower SIGCONT", isr_expanded_after=time.monotonic() - t2)
        w.progress(10)
        report("follower SIGSTOP totals", **w.finish())
    finally:
        w.abort()
        admin.close()
        zk.close()
