"""Thousands of partitions survive restarts: clean, after SIGKILL, and under an open files limit that a
broker keeping three descriptors per partition could not live with. After each restart every partition
has a leader (Metadata), the sampled records (some spanning several segments) read back, and the
broker log has no EMFILE and no offline log dir."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration import partition_fleet as pf
from tests.integration.helpers import unique

FAST = {"zookeeper.session.timeout.ms": "6000", "offsets.topic.num.partitions": "1",
        "auto.leader.rebalance.enable": "false"}


def _run_restarts(cluster: Any, fleet: pf.Fleet, broker_index: int, plan: list[tuple[str, int | None]],
                  timeout: float) -> None:
    broker = cluster.brokers[broker_index]
    for how, limit in plan:
        mark = len(broker.log_text())
        pf.restart(broker, how, limit, timeout=timeout)
        pf.check_after_restart(cluster.bootstrap, fleet, timeout)
        trouble = pf.fd_trouble(pf.log_since(broker, mark))
        assert trouble == [], f"after a {how} restart (limit {limit}): {trouble[:5]}"


def _fleet(cluster: Any, partitions: int, replication: int, timeout: float) -> pf.Fleet:
    fleet = pf.Fleet(unique("many"), partitions, replication)
    pf.create_topic(cluster.bootstrap, fleet.topic, partitions, replication, timeout=timeout)
    pf.wait_all_led(cluster.bootstrap, fleet, timeout)
    pf.write_sample(cluster.bootstrap, fleet)
    multi = [p for p in list(fleet.written)[:5]]
    leader_dirs = [max(pf.segments_of(b, fleet.topic, p) for b in cluster.brokers) for p in multi]
    assert all(n >= 3 for n in leader_dirs), f"sampled partitions span several segments: {leader_dirs}"
    return fleet


def test_two_thousand_partitions_restart_under_a_low_open_files_limit(cluster_factory: Any) -> None:
    # 2,000 partitions at three descriptors each (the .log and two index files) need 6,000: more than
    # the 4,096 this broker gets, soft and hard.
    cluster = cluster_factory(1, overrides=FAST)
    fleet = _fleet(cluster, 2000, 1, timeout=120)
    _run_restarts(cluster, fleet, 0, [("clean", 4096), ("kill", 4096)], timeout=120)
    broker = cluster.brokers[0]
    assert pf.open_fds(broker) < 4096
    # The broker said at start, once and with its numbers, that the limit is tight.
    warning = [line for line in broker.log_text().splitlines() if "open files limit 4096 is below" in line]
    assert len(warning) == 2 and "2000 partitions" in warning[-1], warning


@pytest.mark.slow
def test_ten_thousand_partitions_on_one_broker_restart(cluster_factory: Any) -> None:
    cluster = cluster_factory(1, overrides=FAST)
    fleet = _fleet(cluster, 10_000, 1, timeout=300)
    _run_restarts(cluster, fleet, 0, [("clean", None), ("kill", None), ("clean", 4096)], timeout=300)


@pytest.mark.slow
def test_three_thousand_partitions_times_three_replicas_restart(cluster_factory: Any) -> None:
    cluster = cluster_factory(3, overrides=FAST)
    fleet = _fleet(cluster, 3000, 3, timeout=300)
    _run_restarts(cluster, fleet, 1, [("clean", None), ("kill", None), ("clean", 4096)], timeout=300)
