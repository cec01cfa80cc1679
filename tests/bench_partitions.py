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
import re
import sys
import time
from datetime import datetime

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


_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \w+ \S+: (.*)$")


def _phases(log_text: str, led_at: float) -> list[tuple[str, float]]:
    """The restart's phases from the broker log (and ``led_at``, the wall-clock time Metadata showed
    every partition led): (name, seconds), in order."""
    marks: dict[str, float] = {}
    for line in log_text.splitlines():
        m = _STAMP.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        msg = m.group(2)
        marks.setdefault("first line", t)
        if msg.startswith("loaded ") and " logs in " in msg:
            marks["logs loaded"] = t
        elif "starting failover" in msg:
            marks["failover started"] = t
        elif "failover done" in msg:
            marks["failover done"] = t
    order = ["first line", "logs loaded", "failover started", "failover done"]
    names = {"logs loaded": "first log line to logs loaded", "failover started": "registration + election",
             "failover done": "controller failover"}
    out = []
    for a, b in zip(order, order[1:], strict=False):
        if a in marks and b in marks:
            out.append((names[b], marks[b] - marks[a]))
    if "failover done" in marks:
        out.append(("LeaderAndIsr + UpdateMetadata until all led", led_at - marks["failover done"]))
    return out


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
        log_offset = len(broker.log_text())
        broker.start(wait=False)
        assert broker.process is not None
        wait_for_port(broker.host, broker.port, 300, broker.process)
        listening_s = time.monotonic() - t0
        pf.wait_all_led(cluster.bootstrap, fleet, 600)
        restart_s = time.monotonic() - t0
        led_at = time.time()
        phases = _phases(broker.log_text()[log_offset:], led_at)
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
    if phases:
        print("phases (broker log): " + ", ".join(f"{name} {sec:.1f}s" for name, sec in phases))
    if profile:
        print(f"profile of the restarted broker: {profile}")
    if trouble:
        print("descriptor trouble in the broker log:", *trouble[:5], sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
