"""Failover watched by hand on ``make run``'s cluster: a broker that dies is reported (which one, how it
ended, its log) while the others keep serving; the documented control command brings it back and it
rejoins the ISR; ``stop <id>`` is a controlled shutdown; Ctrl-C then stops all three brokers and
ZooKeeper, and says so, leaving no process behind."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import NewTopic as KafkaNewTopic

from tests.integration.helpers import wait_until
from tests.integration.test_devcluster import PORTS_FAILOVER, DevClusterProcess, wait_all_gone

BROKERS = 3
BOOTSTRAP = ",".join(f"127.0.0.1:{PORTS_FAILOVER + i}" for i in range(BROKERS))
TOPIC = "devcluster-failover"


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[DevClusterProcess]:
    # A ZooKeeper session of 6 s instead of 18 s: the crashed leader's partitions move sooner.
    cluster = DevClusterProcess(
        "--brokers", str(BROKERS), "--port", str(PORTS_FAILOVER), "--zk-port", str(PORTS_FAILOVER + 10),
        "--metrics-port", str(PORTS_FAILOVER + 20), "--override", "zookeeper.session.timeout.ms=6000",
        data=tmp_path / "devcluster")
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        cluster.kill()


def _partition(admin: AdminClient) -> tuple[int, list[int]]:
    """(leader, isr) of the topic's only partition; leader -1 while it has none."""
    md = admin.list_topics(TOPIC, timeout=10)
    p = md.topics[TOPIC].partitions[0]
    return p.leader, sorted(p.isrs)


def _produce(values: list[bytes]) -> None:
    failed: list[str] = []
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 60000})
    for v in values:
        producer.produce(TOPIC, v, partition=0,
                         on_delivery=lambda err, _msg: failed.append(str(err)) if err is not None else None)
    assert producer.flush(90) == 0, "records still unsent"
    assert not failed, failed


def _consume_all(expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "devcluster-failover-check",
                         "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])

        def read() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(bytes(msg.value() or b""))
            return len(got) >= expected

        wait_until(read, 60, lambda: f"{expected} records (have {len(got)})", interval=0)
    finally:
        consumer.close()
    return got


def _pid_of(dev: DevClusterProcess, broker: int) -> int:
    status = dev.control("status")
    assert status.returncode == 0, status.stderr
    m = re.search(rf"^broker {broker} \S+: running \(pid (\d+)\)", status.stdout, re.M)
    assert m, status.stdout
    return int(m.group(1))


@pytest.mark.slow
def test_a_dead_broker_is_reported_the_others_serve_and_restart_brings_it_back(dev: DevClusterProcess) -> None:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for f in admin.create_topics([NewTopic(TOPIC, 1, BROKERS, config={"min.insync.replicas": "2"})]).values():
        f.result(30)
    wait_until(lambda: _partition(admin)[1] == list(range(BROKERS)), 30, "a leader and a full ISR")
    _produce([b"before-%d" % i for i in range(50)])
    leader, _ = _partition(admin)

    # The leader crashes (SIGKILL from outside, as the OOM killer would).
    os.kill(_pid_of(dev, leader), signal.SIGKILL)
    dev.wait_for(f"broker {leader} exited (killed by SIGKILL); its log: {dev.data / f'broker-{leader}' / 'broker.log'}")
    dev.wait_for("the other brokers keep running; restart it with: ")
    assert f"-m clients.devcluster restart {leader} --dir {dev.data}" in dev.output
    assert dev.proc.poll() is None

    # The other two keep serving: a new leader once the dead one's session expires, acks=all with min ISR 2.
    _produce([b"after-%d" % i for i in range(50)])
    new_leader, isr = _partition(admin)
    assert new_leader not in (-1, leader) and leader not in isr
    got = _consume_all(100)
    assert got == [b"before-%d" % i for i in range(50)] + [b"after-%d" % i for i in range(50)]
    status = dev.control("status")
    assert f"broker {leader} 127.0.0.1:{PORTS_FAILOVER + leader}: exited (killed by SIGKILL)" in status.stdout

    # The documented control brings it back, and it catches up into the ISR.
    restarted = dev.control("restart", str(leader))
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert f"broker {leader} is back on 127.0.0.1:{PORTS_FAILOVER + leader}" in restarted.stdout
    wait_until(lambda: _partition(admin)[1] == list(range(BROKERS)), 60, f"broker {leader} back in the ISR")

    # stop <id>: a controlled shutdown, the leadership moves at once, no death reported.
    stopped = dev.control("stop", str(new_leader))
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert f"broker {new_leader} stopped (status 0)" in stopped.stdout
    wait_until(lambda: _partition(admin)[0] not in (-1, new_leader), 10, "the leadership to move")
    assert f"broker {new_leader} exited" not in dev.output
    refused = dev.control("kill", str(new_leader))
    assert refused.returncode == 1 and f"broker {new_leader} is not running" in refused.stdout
    restarted = dev.control("restart", str(new_leader))
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    wait_until(lambda: _partition(admin)[1] == list(range(BROKERS)), 60, f"broker {new_leader} back in the ISR")

    # Ctrl-C: every broker and ZooKeeper stop, and the dev cluster says so.
    assert dev.stop(signal.SIGINT) == 0, dev.output
    assert "stopping the dev cluster (Ctrl-C): 3 brokers at once, then ZooKeeper" in dev.output
    assert re.search(r"^stopped: every broker and ZooKeeper, in [\d.]+ s; data kept in ", dev.output, re.M)
    wait_all_gone(dev.data, dev.proc)


@pytest.mark.slow  # the 3-broker version above is slow too; make test keeps the refusals and Ctrl-C
def test_a_broker_that_dies_is_reported_and_restarted_by_the_control_command(tmp_path: Path) -> None:
    """The short version for `make test`: two brokers, one crashes, the dev cluster says which and goes
    on; the other serves; `restart` brings the dead one back."""
    base = PORTS_FAILOVER + 50
    # A crashed broker registers again once its old ZooKeeper session has expired: 4 s here, not 18.
    dev = DevClusterProcess("--brokers", "2", "--port", str(base), "--zk-port", str(base + 10), "--metrics-port", "-1",
                            "--override", "zookeeper.session.timeout.ms=4000", data=tmp_path / "devcluster")
    try:
        dev.wait_ready()
        # On broker 0 only: the controller takes the dead broker for alive until its session expires.
        kadmin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{base}")
        kadmin.create_topics([KafkaNewTopic("devcluster-one-left", -1, -1, replica_assignments={0: [0]})])
        kadmin.close()
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{base}"})
        os.kill(_pid_of(dev, 1), signal.SIGKILL)
        dev.wait_for(f"broker 1 exited (killed by SIGKILL); its log: {dev.data / 'broker-1' / 'broker.log'}")
        dev.wait_for(f"-m clients.devcluster restart 1 --dir {dev.data}")
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{base}", "acks": "all"})
        producer.produce("devcluster-one-left", b"served by broker 0")
        assert producer.flush(30) == 0
        restarted = dev.control("restart", "1")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert f"broker 1 is back on 127.0.0.1:{base + 1}" in restarted.stdout
        dev.wait_for("broker 1 is back")  # the dev cluster's own terminal says so too
        wait_until(lambda: sorted(admin.list_topics(timeout=10).brokers) == [0, 1], 30, "both brokers registered")
        assert dev.stop(signal.SIGINT) == 0, dev.output
        wait_all_gone(dev.data, dev.proc)
    finally:
        dev.kill()
