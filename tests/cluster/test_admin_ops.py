"""Planned leadership and replica moves under load: partition reassignment (AlterPartitionReassignments),
controlled shutdown (SIGTERM) and preferred leader election (ElectLeaders), each while acks=all
producers run, with no loss and no errors beyond retriable ones."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type
from tests.cluster.helpers import Admin, RawClient, Workload, ZkView, report, start_broker, unique, wait_until

PARTITIONS = 3


@pytest.mark.slow
def test_reassignment_while_producing(cluster3: Callable[..., Any]) -> None:
    """RF=2 partitions each move to a replica set that drops their current leader; the moves finish
    (ListPartitionReassignments empty, ZooKeeper assignment = target, ISR = target), the removed
    replicas' directories are deleted, and every acknowledged record is still there."""
    from kafka import TopicPartition

    cluster = cluster3()
    topic = unique("reassign")
    start = {0: [0, 1], 1: [1, 2], 2: [2, 0]}
    target = {0: [1, 2], 1: [2, 0], 2: [0, 1]}
    with Admin(cluster.bootstrap) as admin, ZkView(cluster) as zk:
        admin.create_topic(topic, configs={"min.insync.replicas": "2"}, assignment=start)
        w = Workload(cluster.bootstrap, topic, PARTITIONS).start()
        try:
            t0 = time.monotonic()
            result = admin.client.alter_partition_reassignments(
                {TopicPartition(topic, p): reps for p, reps in target.items()})
            assert all(err is None for err in result.values()), result
            wait_until(lambda: not admin.client.list_partition_reassignments({topic: list(range(PARTITIONS))}), 90,
                       "reassignments to finish")
            wait_until(lambda: zk.assignment(topic) == target, 30, "the target assignment in ZooKeeper")
            for p, reps in target.items():
                d = admin.wait_isr(topic, p, reps, 60)
                assert sorted(d["replicas"]) == sorted(reps)
                assert d["leader"] in reps
            t_done = time.monotonic() - t0
            w.progress(10)
            report("reassignment", took=t_done, **w.unavailability(t0))
            for p, reps in start.items():
                for gone in set(reps) - set(target[p]):
                    d = Path(cluster.brokers[gone].dir) / "data" / f"{topic}-{p}"
                    wait_until(lambda d=d: not d.exists(), 30, f"{d} deleted")
            report("reassignment totals", **w.finish())
        finally:
            w.abort()


@pytest.mark.slow
def test_controlled_shutdown_then_preferred_election(cluster3: Callable[..., Any]) -> None:
    """SIGTERM a broker that leads partitions: controlled shutdown moves its leaderships before it
    stops (producers see at most retriable errors, none fails); after it is back in the ISR,
    ElectLeaders(PREFERRED) returns every partition to its preferred (first) replica."""
    cluster = cluster3()
    topic = unique("preferred")
    assignment = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}
    with Admin(cluster.bootstrap) as admin, ZkView(cluster) as zk:
        admin.create_topic(topic, configs={"min.insync.replicas": "2"}, assignment=assignment)
        w = Workload(cluster.bootstrap, topic, PARTITIONS).start()
        try:
            victim = 0
            t0 = time.monotonic()
            rc = cluster.brokers[victim].stop()
            t_stop = time.monotonic() - t0
            assert rc == 0
            # Leadership had moved before the process exited: nothing waits for a session timeout.
            st = zk.state(topic, 0)
            assert st.leader not in (victim, -1) and victim not in st.isr, st
            assert "controlled shutdown attempt" not in cluster.brokers[victim].log_text()
            w.progress(10)
            report("controlled shutdown", shutdown_took=t_stop, **w.unavailability(t0, partition=0))
            start_broker(cluster.brokers[victim])
            for p in range(PARTITIONS):
                admin.wait_isr(topic, p, [0, 1, 2], 90)
            # ElectLeaders goes to the controller id the admin client cached when it created the topic.
            # When that was the victim and the client refreshed its metadata while the victim was down,
            # kafka-python fails the request (UnknownBrokerIdError) instead of refreshing again.
            admin.wait_for_broker(victim)
            assert admin.describe(topic)[0]["leader"] != victim

            t1 = time.monotonic()
            admin.client.elect_leaders(0, {topic: list(range(PARTITIONS))})
            for p, reps in assignment.items():
                admin.wait_leader(topic, p, lambda b, want=reps[0]: b == want, what=f"preferred leader {reps[0]}")
            w.progress(10)
            report("preferred election", **w.unavailability(t1, partition=0))
            _check_controller_only(cluster, zk, topic)
            counts = w.finish()
            assert counts["failed"] == 0
            report("controlled shutdown + preferred election totals", **counts)
        finally:
            w.abort()


def _check_controller_only(cluster: Any, zk: ZkView, topic: str) -> None:
    """ElectLeaders and ListPartitionReassignments are answered by the controller; any other broker
    answers NOT_CONTROLLER, as Kafka 3.9 does in ZooKeeper mode (it forwards nothing)."""
    controller = zk.controller()
    other = next(b for b in cluster.brokers if b.broker_id != controller)
    ctrl = next(b for b in cluster.brokers if b.broker_id == controller)
    el = request_type(ApiKey.ELECT_LEADERS)
    with RawClient(other.bootstrap) as raw:
        r = raw.request(ApiKey.ELECT_LEADERS, 2, election_type=0, timeout_ms=30000,
                        topic_partitions=[el.TopicPartitions(topic=topic, partitions=[0])])
        assert r.error_code == 0, r
        [result] = r.replica_election_results
        assert [(p.error_code, p.error_message) for p in result.partition_result] == \
            [(ErrorCode.NOT_CONTROLLER, None)], r
        r = raw.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, timeout_ms=30000, topics=None)
        assert r.error_code == ErrorCode.NOT_CONTROLLER and r.topics == [], r
    with RawClient(ctrl.bootstrap) as raw:
        r = raw.request(ApiKey.ELECT_LEADERS, 2, election_type=0, timeout_ms=30000,
                        topic_partitions=[el.TopicPartitions(topic=topic, partitions=[0])])
        assert r.error_code == 0, r
        [result] = r.replica_election_results
        assert [p.error_code for p in result.partition_result] == [ErrorCode.ELECTION_NOT_NEEDED], r
        r = raw.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, timeout_ms=30000, topics=None)
        assert r.error_code == 0 and r.topics == [], r
