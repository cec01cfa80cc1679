"""Many partitions on one broker: restart time and descriptors at idle.

One broker (real ZooKeeper) with a topic of 10,000 partitions (``KAFKETTE_BENCH_PARTITIONS``):

* restart: clean stop, then the time from starting the process until Metadata shows a leader for every
  partition (goal: under 10 s);
* open descriptors in ``/proc/PID/fd`` at idle, after creation and after the restart (goal: at most
  1.2 per partition plus connections).

``KAFKETTE_PROFILE=path`` profiles the restarted broker with cProfile (broker/main.py writes the stats
when it exits). Run: ``python -m tests.bench_partitions`` (a few minutes).
"""

from __future__ import annotations

import os
import sys
import time

from clients.devcluster import LocalCluster, wait_for_port
from tests.integration import partition_fleet as pf

PARTITIONS = int(os.environ.get("KAFKETTE_BENCH_PARTITIONS", "10000"))
RESTART_GOAL_S = 10.0
FDS_PER_PARTITION_GOAL = 1.2


def _idle_fds(broker: pf.BrokerProcess) -> int:
    """Descriptors once the count stops moving (background work after leadership settles)."""
    last, stable_since = -1, time.monotonic()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        n = pf.open_fds(broker)
        if n != last:
            last, stable_since = n, time.monotonic()
        elif time.monotonic() - stable_since >= 2:
            break
        time.sleep(0.25)
    return last


def main() -> int:
    overrides = {"zookeeper.session.timeout.ms": "6000", "offsets.topic.num.partitions": "1",
                 "auto.leader.rebalance.enable": "false"}
    with LocalCluster(1, overrides=overrides) as cluster:
        broker = cluster.brokers[0]
        fleet = pf.Fleet("bench-many", PARTITIONS, 1)
        t0 = time.monotonic()
        pf.create_topic(cluster.bootstrap, fleet.topic, PARTITIONS, 1, timeout=600)
        pf.wait_all_led(cluster.bootstrap, fleet, 600)
        created_s = time.monotonic() - t0
        pf.write_sample(cluster.bootstrap, fleet)
        fds_created = _idle_fds(broker)

        assert broker.stop(timeout=300) == 0, "clean stop"
        profile = os.environ.get("KAFKETTE_PROFILE")
        t0 = time.monotonic()
        broker.start(wait=False)
        assert broker.process is not None
        wait_for_port(broker.host, broker.port, 300, broker.process)
        listening_s = time.monotonic() - t0
        pf.wait_all_led(cluster.bootstrap, fleet, 600)
        restart_s = time.monotonic() - t0
        got = pf.read_sample(cluster.bootstrap, fleet)
        assert got == fleet.written, "the sampled records read back after the restart"
        fds_restarted = _idle_fds(broker)
        trouble = pf.fd_trouble(broker.log_text())

    per_partition = fds_restarted / PARTITIONS
    print(f"partitions: {PARTITIONS} on one broker (topic created and led in {created_s:.1f}s)")
    print(f"restart (clean stop, process start until every partition is led): {restart_s:.1f}s "
          f"(listening after {listening_s:.1f}s); goal < {RESTART_GOAL_S:.0f}s: "
          f"{'met' if restart_s < RESTART_GOAL_S else 'NOT met'}")
    print(f"open descriptors at idle: {fds_created} after creation, {fds_restarted} after the restart = "
          f"{per_partition:.2f} per partition; goal <= {FDS_PER_PARTITION_GOAL} + connections: "
          f"{'met' if per_partition <= FDS_PER_PARTITION_GOAL else 'NOT met'}")
    if profile:
        print(f"profile of the restarted broker: {profile}")
    if trouble:
        print("descriptor trouble in the broker log:", *trouble[:5], sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
