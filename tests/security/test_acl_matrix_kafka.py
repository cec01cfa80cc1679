"""Side by side with Apache Kafka 3.9.1 (ZooKeeper mode, the jars from Maven Central): the same
``authorizer.class.name``, ``super.users`` and ACLs, the same requests from the same principal and
host, and the same answers, case by case (tests/security/acl_matrix.py).

Kafka runs with its request log on (tests/security/kafka_request_log.py); the log is kept in the
test's temporary directory, and a failure names it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clients.devcluster import LocalCluster
from tests.ops.kafka_broker import KafkaZkBroker
from tests.security.acl_matrix import BROKER_OVERRIDES, KAFKA_CASES, run_matrix
from tests.security.kafka_request_log import request_logging_jvm_options
from tests.security.test_acl_matrix import prepare_acls


def observe_kafka(kept_log: Path) -> dict[str, object]:
    broker = KafkaZkBroker(overrides=dict(BROKER_OVERRIDES),
                           jvm_options=request_logging_jvm_options(kept_log.parent))
    zk = None
    try:
        broker.zk.start()
        zk = prepare_acls(broker.zk.connect_string, "/kafka")
        broker.start()
        return run_matrix(broker.bootstrap, zk, KAFKA_CASES, apache_kafka=True)
    except BaseException as e:
        e.add_note(f"Apache Kafka's log, with its request log: {kept_log}")
        raise
    finally:
        if zk is not None:
            zk.close()
        if broker.log_path.exists():
            shutil.copy(broker.log_path, kept_log)  # stop() removes the broker's directory
        broker.stop()


def observe_kafkette(request: pytest.FixtureRequest) -> dict[str, object]:
    from tests.conftest import attach_cluster

    cluster = LocalCluster(1, overrides=BROKER_OVERRIDES, metrics_base_port=None)
    zk = None
    try:
        cluster.zk.start()
        zk = prepare_acls(cluster.zk.connect_string, cluster.chroot)
        cluster.start()
        attach_cluster(request, cluster)
        return run_matrix(cluster.bootstrap, zk, KAFKA_CASES)
    finally:
        if zk is not None:
            zk.close()
        cluster.__exit__(None, None, None)


@pytest.mark.slow
def test_acl_matrix_same_answers_as_apache_kafka(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    kafka_log = tmp_path / "apache-kafka.log"
    kafka = observe_kafka(kafka_log)
    assert "kafka.request.logger" in kafka_log.read_text(errors="replace"), "Kafka's request log is off"
    ours = observe_kafkette(request)
    assert ours.keys() == kafka.keys()
    differences = {label: (ours[label], kafka[label]) for label in kafka if ours[label] != kafka[label]}
    assert not differences, f"kafkette vs Apache Kafka: {differences} (Kafka's request log: {kafka_log})"
