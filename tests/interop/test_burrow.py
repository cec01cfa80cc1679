"""Burrow (Debian's package, a real process) reports the consumer lag of a group that kafka-python and
the Java client commit to, on the cluster of `make run` with the configuration docs/interop.md shows,
and at the old protocol versions Burrow also speaks.

Burrow counts a commit only once it knows the partition's end offset (its topic and offset refreshes
run every few seconds), so both clients keep committing the same offsets while the test polls
Burrow's HTTP API, until it reports the lag.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from clients.zookeeper_server import free_port
from tests.integration.helpers import unique, wait_until
from tests.integration.test_devcluster import DevClusterProcess
from tests.interop.burrow import CLUSTER, Burrow, render_config
from tests.interop.clients import JavaCommitter, KafkaPythonCommitter, create_topic, kafka_python_produce

# Go builds and a Debian package on first use, then three client stacks: make test-slow.
pytestmark = pytest.mark.slow


RECORDS_PER_PARTITION = 12
PYTHON_COMMITS = {0: 3, 1: 7}  # partition -> committed offset, by kafka-python
JAVA_COMMITS = {2: 5}  # by the Java client, to the same group

# `make run`'s layout on fixed ports of their own (the dev cluster takes consecutive broker ports).
DEV_BROKER_PORT = 26092  # 26092-26094
DEV_ZK_PORT = 26181


def report_lag_scenario(bootstrap: str, zookeeper: str, tmp_path: Path, burrow_exe: Path,
                        kafka_version: str | None = None) -> None:
    topic, group = unique("burrow-lag"), unique("burrow-group")
    create_topic(bootstrap, topic, 3)
    for p in range(3):
        kafka_python_produce(bootstrap, topic, RECORDS_PER_PARTITION, f"p{p}", partition=p)
    # The first commits create __consumer_offsets, which Burrow 1.2 needs to exist when it starts.
    python = KafkaPythonCommitter(bootstrap, topic, group, PYTHON_COMMITS)
    java = JavaCommitter(bootstrap, topic, group, JAVA_COMMITS)
    http_port = free_port()
    config = render_config(brokers=bootstrap.split(","), zookeeper=zookeeper, http_port=http_port,
                           pidfile=tmp_path / "burrow.pid", kafka_version=kafka_version)
    burrow = Burrow(burrow_exe, config, tmp_path / "burrow", http_port)
    try:
        burrow.wait_ready()
        expected = {p: RECORDS_PER_PARTITION - m for p, m in {**PYTHON_COMMITS, **JAVA_COMMITS}.items()}
        last: dict[str, Any] = {}

        def lag_reported() -> bool:
            python.commit()
            java.commit()
            answer = burrow.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")
            if answer is None or answer.get("error"):
                return False
            last.update(answer)
            lags = {p["partition"]: p["current_lag"] for p in answer["status"]["partitions"] if p["topic"] == topic}
            return lags == expected

        wait_until(lag_reported, 120, lambda: f"Burrow to report lags {expected} (last answer: {last}); "
                                              f"Burrow's log:\n{burrow.log_text()[-4000:]}", interval=0.5)
        status = last["status"]
        assert status["cluster"] == CLUSTER and status["group"] == group
        assert status["totallag"] == sum(expected.values())
        committed = {p["partition"]: p["end"]["offset"] for p in status["partitions"]}
        assert committed == {**PYTHON_COMMITS, **JAVA_COMMITS}
        # Burrow's view of the end offsets, from its own ListOffsets requests.
        topic_offsets = burrow.get(f"/v3/kafka/{CLUSTER}/topic/{topic}")
        assert topic_offsets is not None and topic_offsets["offsets"] == [RECORDS_PER_PARTITION] * 3
    finally:
        burrow.stop()
        python.close()
        java.close()


@pytest.mark.slow
def test_burrow_reports_lag_on_make_run_cluster(tmp_path: Path, interop_bin: Path) -> None:
    """`make run` (python -m clients.devcluster) and Burrow with docs/interop.md's file, ports replaced."""
    dev = DevClusterProcess("--brokers", "3", "--port", str(DEV_BROKER_PORT), "--zk-port", str(DEV_ZK_PORT),
                            "--metrics-port", "-1", data=tmp_path / "devcluster")
    try:
        dev.wait_ready()
        # What the docs tell the reader to take from make run's banner.
        zk = re.search(r"^ZooKeeper: (\S+?)(/\S*)?$", dev.output, re.M)
        servers = re.search(r"^bootstrap servers: (\S+)", dev.output, re.M)
        assert zk is not None and servers is not None, dev.output
        assert zk.group(1) == f"127.0.0.1:{DEV_ZK_PORT}"
        report_lag_scenario(servers.group(1), zk.group(1), tmp_path, interop_bin / "Burrow")
        assert dev.stop() == 0, dev.output
    finally:
        dev.kill()


# The file's "2.1.0" (the newest Burrow 1.2 knows); "0.10.0", the version in Debian's example
# configuration; "0.8", Burrow's default when none is given. The old ones read __consumer_offsets with
# Fetch v2 and v0 (message formats v1 and v0, converted by the broker) and ask for end offsets with
# ListOffsets v0.
@pytest.mark.parametrize("kafka_version", ["2.1.0", pytest.param("0.10.0", marks=pytest.mark.slow),
                                           pytest.param("0.8", marks=pytest.mark.slow)])
def test_burrow_reports_lag(tmp_path: Path, interop_bin: Path, cluster: Any, kafka_version: str) -> None:
    zookeeper = cluster.zk.connect_string  # host:port, without the cluster's chroot
    report_lag_scenario(cluster.bootstrap, zookeeper, tmp_path, interop_bin / "Burrow", kafka_version)
