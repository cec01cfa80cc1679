"""Brokers talking to each other over a secured inter-broker listener.

- ``inter_broker_security`` (broker/security/inter_broker.py) from Kafka's broker configs: the listener's
  protocol decides TLS and SASL, ssl.* come per listener, the broker's own SCRAM/PLAIN credentials from
  the listener's JAAS config, misconfigurations fail with Kafka's messages.
- A 3-broker cluster (real ZooKeeper, real broker processes) whose inter-broker listener is SASL_SSL with
  SCRAM-SHA-512: replication (acks=all, RF=3, full ISR), the controller's LeaderAndIsr/UpdateMetadata,
  AlterPartition and, in the slow test, a leader killed under load: a new leader is elected, the
  producers carry on, every acknowledged record is read back once, and the restarted broker rejoins
  the ISR. Clients use a PLAINTEXT listener; only broker-to-broker traffic is secured.

The existing cluster failure tests run on such a cluster with ``KAFKETTE_TEST_INTER_BROKER=SASL_SSL``
(see tests/cluster/helpers.py).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from broker.security.inter_broker import inter_broker_security
from config.registry import BrokerConfig, ConfigError
from protocol.sasl_client import SaslStep
from tests.cluster.helpers import SCRAM_MODULE, Admin, SecureInterBroker, Workload, start_broker, unique

BASE_PORT = 23100  # client (PLAINTEXT) ports of the three brokers; INTERNAL ports are picked by the brokers


def _config(props: dict[str, str] | None = None) -> BrokerConfig:
    return BrokerConfig({"broker.id": "0", "zookeeper.connect": "localhost:2181/x", **(props or {})})


# ------------------------------------------------------------------------------------------------
# inter_broker_security from the broker's configs


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> SecureInterBroker:
    return SecureInterBroker("SASL_SSL", tmp_path_factory.mktemp("inter-broker-pki"))


def test_plaintext_inter_broker_listener_needs_nothing() -> None:
    sec = inter_broker_security(_config(), "PLAINTEXT")
    assert sec.security_protocol == "PLAINTEXT" and sec.ssl_context is None and sec.auth_steps() == ()


def test_sasl_ssl_listener_gives_tls_and_the_brokers_own_scram_login(pki: SecureInterBroker) -> None:
    sec = inter_broker_security(_config({**pki.overrides(), **pki.broker_overrides(0, 23199)}), "INTERNAL")
    assert sec.security_protocol == "SASL_SSL"
    assert isinstance(sec.ssl_context, ssl.SSLContext)
    assert sec.ssl_context.verify_mode == ssl.CERT_REQUIRED and sec.ssl_context.check_hostname
    (step,) = sec.auth_steps()
    assert isinstance(step, SaslStep) and step.mechanism == "SCRAM-SHA-512"
    assert step.client.username == SecureInterBroker.USER and step.client.password == pki.password
    # Fresh steps per connection (a SCRAM exchange has state).
    assert sec.auth_steps()[0] is not step


def test_per_listener_settings_win_and_the_mechanism_must_be_enabled() -> None:
    jaas = f'{SCRAM_MODULE} required username="b" password="p";'
    props = {
        "listeners": "PLAINTEXT://:9092,INTERNAL://:9093", "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
            'password="broker-pw" user_broker="broker-pw";',
    }
    sec = inter_broker_security(_config(props), "INTERNAL")
    (step,) = sec.auth_steps()
    assert sec.ssl_context is None and step.mechanism == "PLAIN" and step.client.username == "broker"
    props["listener.name.internal.sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
    props["listener.name.internal.scram-sha-512.sasl.jaas.config"] = jaas
    with pytest.raises(ConfigError, match="must be included in sasl.enabled.mechanisms"):
        inter_broker_security(_config(props), "INTERNAL")


def test_control_plane_listener_has_its_own_protocol(pki: SecureInterBroker) -> None:
    """Controller requests go to the control-plane listener: its protocol and ssl.* settings count, with
    the inter-broker SASL mechanism (as Kafka's ControllerChannelManager builds its channel)."""
    props = {**pki.overrides(),
             "listeners": "PLAINTEXT://:9092,INTERNAL://:9093,CONTROL://:9094",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROL:SSL",
             "control.plane.listener.name": "CONTROL",
             "listener.name.control.ssl.endpoint.identification.algorithm": ""}
    config = _config(props)
    control = inter_broker_security(config, "CONTROL")
    assert control.security_protocol == "SSL" and control.auth_steps() == ()
    assert control.ssl_context is not None and not control.ssl_context.check_hostname
    internal = inter_broker_security(config, "INTERNAL")
    assert internal.security_protocol == "SASL_SSL" and internal.ssl_context is not None
    assert internal.ssl_context.check_hostname


def test_missing_credentials_fail_at_start_up() -> None:
    props = {
        "listeners": "INTERNAL://:9093", "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required;",
    }
    with pytest.raises(ConfigError, match="no username and password"):
        inter_broker_security(_config(props), "INTERNAL")
    props["sasl.mechanism.inter.broker.protocol"] = "GSSAPI"
    props["sasl.enabled.mechanisms"] = "GSSAPI"
    with pytest.raises(ConfigError, match="GSSAPI is not supported"):
        inter_broker_security(_config(props), "INTERNAL")


# ------------------------------------------------------------------------------------------------
# A 3-broker cluster replicating over SASL_SSL


@pytest.fixture
def secure_cluster(cluster_factory: Callable[..., Any]) -> Iterator[Any]:
    from tests.cluster.helpers import overrides

    secured = SecureInterBroker("SASL_SSL")
    opts = secured.options()
    opts["overrides"] = {**overrides(), **opts["overrides"]}
    yield cluster_factory(3, base_port=BASE_PORT, metrics_base_port=None, **opts)


def _registration(cluster: Any, broker_id: int) -> dict[str, Any]:
    from controller.zk_client import KafkaZkClient

    zk = KafkaZkClient(cluster.zk.connect_string + cluster.chroot, 30000, 15000, name="test-view")
    zk.start()
    try:
        data, _stat = zk._zk.get(f"/brokers/ids/{broker_id}")  # the raw JSON, as Kafka's tools read it
    finally:
        zk.close()
    return json.loads(data)


def test_sasl_ssl_inter_broker_listener_replicates(secure_cluster: Any) -> None:
    cluster = secure_cluster
    reg = _registration(cluster, 1)
    assert reg["listener_security_protocol_map"]["INTERNAL"] == "SASL_SSL"
    assert any(e.startswith("INTERNAL://") for e in reg["endpoints"])
    with Admin(cluster.bootstrap) as admin:
        topic = unique("ib-sasl-ssl")
        admin.create_topic(topic, 3, 3, {"min.insync.replicas": "3"})  # every replica must fetch over SASL_SSL
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=10)
        acked = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i).get(timeout=30) for i in range(60)]
        producer.close()
        assert len(acked) == 60
        for p in range(3):
            admin.wait_isr(topic, p, [0, 1, 2])
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=5000)
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        values = sorted(r.value for r in consumer)
        consumer.close()
        assert values == sorted(b"v%d" % i for i in range(60))
    # Every broker authenticated the others (a refused login is logged by the broker's SASL server).
    for b in cluster.brokers:
        assert "Failed authentication" not in b.log_text()


@pytest.mark.slow
def test_sasl_ssl_inter_broker_failover(secure_cluster: Any) -> None:
    """Kill the leader of partition 0 under acks=all load (kafka-python and librdkafka producers):
    the controller elects a new leader over SASL_SSL, producers carry on, nothing acknowledged is lost,
    and the restarted broker authenticates again, catches up and rejoins every ISR."""
    cluster = secure_cluster
    with Admin(cluster.bootstrap) as admin:
        topic = unique("ib-failover")
        admin.create_topic(topic, 3, 3, {"min.insync.replicas": "2"})
        w = Workload(cluster.bootstrap, topic, 3).start()
        try:
            victim = admin.describe(topic)[0]["leader"]
            cluster.brokers[victim].kill()
            admin.wait_leader(topic, 0, lambda b: b >= 0 and b != victim, what="a new leader")
            w.progress(20)
            start_broker(cluster.brokers[victim])
            for p in range(3):
                admin.wait_isr(topic, p, [0, 1, 2], 90)
            w.progress(20)
            counts = w.finish()
        finally:
            w.abort()
    assert counts["acked"] > 0  # finish() verified every acknowledged record: in place, in order, once
