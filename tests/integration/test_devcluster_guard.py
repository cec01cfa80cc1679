"""``make run`` without surprises: a second run while one is up refuses before its banner, with status 1,
writing nothing into the running cluster's logs; a data directory keeps one broker count; broker configs
come from ``--override`` and ``KAFKETTE_OVERRIDES``, typos refused; Ctrl-C stops everything and says so."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType

from clients.devcluster_guard import SHAPE_FILE, adopt_legacy_layout, read_shape, shape_dir
from tests.integration.test_devcluster import (
    PORTS_GUARD,
    PORTS_SHAPE,
    PORTS_TYPO,
    REPO,
    DevClusterProcess,
    refused_run,
    single_broker_args,
    wait_all_gone,
)


class Running:
    def __init__(self, dev: DevClusterProcess, port: int, zk_port: int, args: list[str]) -> None:
        self.dev, self.port, self.zk_port, self.args = dev, port, zk_port, args

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def logs(self) -> dict[Path, str]:
        return {p: p.read_text(errors="replace") for p in sorted(self.dev.data.rglob("*.log"))}


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """One broker with configs from both the environment and the command line."""
    port, zk_port = PORTS_GUARD, PORTS_GUARD + 1
    args = single_broker_args(PORTS_GUARD)
    dev = DevClusterProcess(*args, "--override", "log.retention.ms=123456", data=tmp_path_factory.mktemp("dev") / "c",
                            env={"KAFKETTE_OVERRIDES": "num.partitions=4 'log.cleaner.enable=false'"})
    try:
        dev.wait_ready()
        yield Running(dev, port, zk_port, args)
    finally:
        dev.kill()


def test_second_run_on_the_same_directory_and_ports_is_refused(running: Running) -> None:
    before = running.logs()
    second = refused_run(*running.args, data=running.dev.data)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "bootstrap servers" not in second.stdout + second.stderr
    assert "refusing to start: another dev cluster" in second.stderr
    assert f"(pid {running.dev.proc.pid})" in second.stderr
    # Nothing of the refused run reached the running cluster's files.
    assert running.logs() == before
    assert running.dev.proc.poll() is None


def test_make_run_while_one_is_up_refuses_with_a_nonzero_status(running: Running) -> None:
    """The same refusal through the README's command: make passes the dev cluster's status on."""
    before = running.logs()
    run_args = " ".join([*running.args, "--dir", str(running.dev.data)])
    second = subprocess.run(["make", "-s", "run", f"RUN_ARGS={run_args}"], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert second.returncode != 0, second.stdout + second.stderr
    assert "refusing to start: another dev cluster" in second.stderr
    assert "bootstrap servers" not in second.stdout + second.stderr
    assert running.logs() == before
    assert running.dev.proc.poll() is None


def test_second_run_on_another_directory_with_the_same_ports_is_refused(running: Running,
                                                                        tmp_path: Path) -> None:
    before = running.logs()
    other = tmp_path / "other"
    second = refused_run(*running.args, data=other)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "bootstrap servers" not in second.stdout + second.stderr
    assert f"{running.port} (broker 0)" in second.stderr and f"{running.zk_port} (ZooKeeper)" in second.stderr
    assert not (other / "broker-0").exists() and not (other / "zookeeper").exists()
    assert running.logs() == before


def test_overrides_reach_every_broker(running: Running) -> None:
    assert "broker configs given: num.partitions=4 log.cleaner.enable=false log.retention.ms=123456" in running.dev.output
    admin = KafkaAdminClient(bootstrap_servers=running.bootstrap, client_id="devcluster-overrides")
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")
        entries = described["broker"]["0"]
        for name, value in (("log.retention.ms", "123456"), ("log.cleaner.enable", "false")):
            assert (entries[name]["value"], entries[name]["config_source"]) == (value, "STATIC_BROKER_CONFIG")
    finally:
        admin.close()
    # ... and in what the broker does: an auto-created topic gets num.partitions partitions.
    producer = KafkaProducer(bootstrap_servers=running.bootstrap)
    try:
        producer.send("devcluster-overrides", b"x").get(30)
        assert producer.partitions_for("devcluster-overrides") == {0, 1, 2, 3}
    finally:
        producer.close(5)


def test_a_typo_in_an_override_is_refused_before_anything_starts(tmp_path: Path) -> None:
    data = tmp_path / "typo"
    bad = refused_run(*single_broker_args(PORTS_TYPO), "--override", "log.retension.ms=1", data=data)
    assert bad.returncode == 2
    assert "log.retension.ms: not a broker config (did you mean log.retention.ms" in bad.stderr
    assert not data.exists()
    bad = refused_run(*single_broker_args(PORTS_TYPO), data=data,
                      env={"KAFKETTE_OVERRIDES": "num.partitions=many"})
    assert bad.returncode == 2
    assert "num.partitions=many" in bad.stderr and "not a 32-bit integer" in bad.stderr
    assert not data.exists()


def test_ctrl_c_stops_everything_and_another_broker_count_is_refused(tmp_path: Path) -> None:
    port, zk_port = PORTS_SHAPE, PORTS_SHAPE + 1
    data = tmp_path / "shape"
    dev = DevClusterProcess(*single_broker_args(PORTS_SHAPE), data=data)
    try:
        dev.wait_ready()
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
        producer.send("devcluster-shape", b"on broker 0").get(30)
        producer.close(5)
        assert dev.stop(signal.SIGINT) == 0, dev.output
        assert "stopping the dev cluster (Ctrl-C): the broker, then ZooKeeper" in dev.output
        assert "stopped: every broker and ZooKeeper" in dev.output
        wait_all_gone(data, dev.proc)
    finally:
        dev.kill()
    assert read_shape(data) == 1
    three = refused_run("--brokers", "3", "--port", str(port), "--zk-port", str(zk_port), "--metrics-port", "-1",
                        data=data)
    assert three.returncode == 1, three.stdout + three.stderr
    assert "bootstrap servers" not in three.stdout + three.stderr
    assert f"{data} holds the data of a 1-broker cluster" in three.stderr
    assert "--brokers 1" in three.stderr and f"delete {data}" in three.stderr
    assert not (data / "broker-1").exists()


def test_default_directories_are_per_broker_count_and_an_old_layout_is_moved(tmp_path: Path) -> None:
    parent = tmp_path / "devcluster"
    assert shape_dir(parent, 3) != shape_dir(parent, 1)
    # What an earlier version left: a 3-broker cluster directly in .cache/devcluster.
    for name in ("zookeeper/data", "broker-0/data", "broker-1/data", "broker-2/data"):
        (parent / name).mkdir(parents=True)
    (parent / "broker-2" / "broker.log").write_text("broker 2's log\n")
    moved = adopt_legacy_layout(parent)
    assert moved == shape_dir(parent, 3)
    assert (moved / "broker-2" / "broker.log").read_text() == "broker 2's log\n"
    assert (moved / SHAPE_FILE).exists() and read_shape(moved) == 3
    assert not (parent / "broker-0").exists() and not (parent / "zookeeper").exists()
    # A 1-broker run then gets a directory of its own.
    assert read_shape(shape_dir(parent, 1)) is None
    assert adopt_legacy_layout(parent) is None
