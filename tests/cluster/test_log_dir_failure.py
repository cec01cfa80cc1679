"""A failed log dir in ZooKeeper mode (KIP-112): the broker stays up, the dir's replicas go offline and
leadership of them moves, the broker's other dir keeps serving; when no dir is left, the broker halts.

Broker 1 has two log dirs, the first on ``tests/chaos/faultfs.py`` (a FUSE filesystem that can turn
read-only); broker 2 has only such a dir. Real ZooKeeper, real brokers, kafka-python clients.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.disks import FaultyDir
from tests.cluster.helpers import (
    Admin,
    ConfluentProducer,
    ZkView,
    overrides,
    start_broker,
    unique,
    wait_until,
)

PARTITIONS = 4


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_read_only_log_dir_goes_offline_and_leadership_moves(cluster_factory: Callable[..., Any],
                                                             tmp_path: Path) -> None:
    disks = {1: FaultyDir(tmp_path / "disk-1"), 2: FaultyDir(tmp_path / "disk-2")}
    for d in disks.values():
        d.start()
    try:
        def broker_dirs(broker_id: int, port: int) -> dict[str, str]:
            if broker_id == 1:  # the faulty dir first: new partitions alternate between the two
                return {"log.dirs": f"{disks[1].mount},{tmp_path / 'b1-data'}"}
            if broker_id == 2:
                return {"log.dirs": str(disks[2].mount)}
            return {}

        cluster = cluster_factory(3, base_dir=tmp_path / "cluster", broker_overrides=broker_dirs,
                                  overrides=overrides(**{"min.insync.replicas": "2"}))
        _check(cluster, disks)
    finally:
        for d in disks.values():
            d.stop()


def _check(cluster: Any, disks: dict[int, FaultyDir]) -> None:
    topic = unique("logdir")
    with Admin(cluster.bootstrap) as admin, ZkView(cluster) as zk:
        # Broker 1 leads every partition, so the failure has leadership to move.
        admin.create_topic(topic, assignment={p: [1, 0, 2] for p in range(PARTITIONS)})
        on_bad = [p for p in range(PARTITIONS) if disks[1].holds(f"{topic}-{p}")]
        on_good = [p for p in range(PARTITIONS) if p not in on_bad]
        assert on_bad and on_good, f"broker 1's replicas should be in both dirs: faulty {on_bad}, other {on_good}"

        producer = ConfluentProducer(cluster.bootstrap, topic, PARTITIONS).start()
        try:
            producer.wait_acks(100)
            disks[1].set("readonly")
            # The next write to the dir fails: the dir goes offline, the controller moves leadership of
            # its partitions to other brokers and drops broker 1 from their ISRs.
            for p in on_bad:
                wait_until(lambda p=p: (lambda s: s.leader not in (1, -1) and 1 not in s.isr)(zk.state(topic, p)),
                           60, f"{topic}-{p} led elsewhere, without broker 1 in its ISR")
            assert cluster.brokers[1].process.poll() is None, "broker 1 exited with a healthy dir left"
            # The other dir keeps serving: broker 1 still leads those partitions, with the full ISR.
            for p in on_good:
                st = zk.state(topic, p)
                assert st.leader == 1 and sorted(st.isr) == [0, 1, 2], (p, st)
            log = cluster.brokers[1].log_text()
            assert "is offline" in log and "Sent a log dir failure notification" in log
            # DescribeLogDirs reports the failed dir.
            dirs = _describe_log_dirs(cluster.brokers[1].bootstrap)
            assert dirs[str(disks[1].mount)] == 56, dirs  # KAFKA_STORAGE_ERROR
            assert all(code == 0 for d, code in dirs.items() if d != str(disks[1].mount)), dirs
            assert "kafka_log_logmanager_offlinelogdirectorycount 1.0" in _metrics(cluster.brokers[1])
            producer.wait_acks(200)  # acks=all with min.insync.replicas=2 goes on, on every partition

            # Healed and restarted, broker 1 catches up and rejoins every ISR.
            disks[1].set("ok")
            cluster.brokers[1].stop()
            start_broker(cluster.brokers[1])
            for p in range(PARTITIONS):
                admin.wait_isr(topic, p, [0, 1, 2], timeout=90)
            producer.wait_acks(100)
        finally:
            plog = producer.stop()
        assert plog.ack_count() > 400 and not plog.failed, (plog.ack_count(), plog.failed[:3])
        _assert_all_read(cluster.bootstrap, topic, {(a.partition, a.offset) for a in plog.acked})

        # Broker 2 has a single dir: when it fails, the broker halts (Kafka: "Shutdown broker because all
        # log dirs in ... have failed").
        disks[2].set("readonly")
        producer = ConfluentProducer(cluster.bootstrap, topic, PARTITIONS).start()
        try:
            wait_until(lambda: cluster.brokers[2].process.poll() is not None, 60, "broker 2 to halt")
            assert "Shutdown broker because all log dirs in" in cluster.brokers[2].log_text()
            producer.wait_acks(100)  # the two others carry on
        finally:
            plog = producer.stop()
        disks[2].set("ok")
        _assert_all_read(cluster.bootstrap, topic, {(a.partition, a.offset) for a in plog.acked})


def _metrics(broker: Any) -> str:
    import urllib.request

    with urllib.request.urlopen(broker.metrics_url, timeout=10) as r:
        return str(r.read().decode())


def _describe_log_dirs(bootstrap: str) -> dict[str, int]:
    from protocol.api_versions import ApiKey
    from tests.integration.helpers import RawClient

    with RawClient(bootstrap) as raw:
        r = raw.request(ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None)
    return {res.log_dir: res.error_code for res in r.results}


def _assert_all_read(bootstrap: str, topic: str, acked: set[tuple[int, int]]) -> None:
    """Every acknowledged (partition, offset) is in the log."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("check"), "enable.auto.commit": False})
    seen: set[tuple[int, int]] = set()
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])

        def all_seen() -> bool:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    seen.add((m.partition(), m.offset()))
            return acked <= seen

        wait_until(all_seen, 90, lambda: f"{len(acked - seen)} acknowledged records read back")
    finally:
        c.close()
