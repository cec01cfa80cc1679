"""Every stock client over every security protocol, against one broker (issue #12).

One kafkette broker per module, configured as a Kafka broker would be, with a listener per security
protocol:

- PLAINTEXT (also the inter-broker listener; the tests create topics and SCRAM users through it),
- SSL with ``ssl.client.auth=requested``: clients with and without a certificate both connect,
- SASL_PLAINTEXT and SASL_SSL with ``sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512``: the
  PLAIN user is in the listener's JAAS config, the SCRAM user is created with
  AlterUserScramCredentials (both mechanisms).

Each case runs ``client_matrix``'s round trip (produce, consume in a group and commit, a committed and
an aborted transaction, read_committed read back) with one client over one security setting, on a
topic of its own. kafka-python, confluent-kafka, kcat and the Java client 3.9.1 each run every case;
the whole matrix is ``slow``, and one case per client stays in the fast suite. Certificates come from
the ``certs`` fixture (conftest.py).

``test_client_round_trip_apache_kafka`` runs the same cases against Apache Kafka 3.9.1 with the same
configs (slow): it shows the client settings are right, so that a failure against kafkette is
kafkette's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.integration.helpers import create_topic, unique
from tests.security.client_matrix import CHECKS, Security
from tests.security.conftest import Certs

# Ports 24100-24103: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.
BASE_PORT = 24100
PORTS = {"PLAINTEXT": BASE_PORT, "SSL": BASE_PORT + 1, "SASL_PLAINTEXT": BASE_PORT + 2, "SASL_SSL": BASE_PORT + 3}
HOST = "127.0.0.1"
RECORDS = 50
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-secret"
SCRAM_USER, SCRAM_PASSWORD = "bob", "bob-secret"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def kafkette_ssl_configs(certs: Certs) -> dict[str, str]:
    """The broker's key encrypted in a PEM keystore (``ssl.key.password``), the CA as PEM truststore."""
    return certs.broker_ssl_props()


def apache_kafka_ssl_configs(certs: Certs) -> dict[str, str]:
    """The same certificate for Apache Kafka, with its key unencrypted: the certificates fixture
    encrypts keys with PBES2, which Kafka 3.9.1 on Java 17 cannot read ("PBES2 SecretKeyFactory not
    available")."""
    keystore = certs.directory / "broker-unencrypted-keystore.pem"
    keystore.write_text(certs.broker.key_file.read_text() + certs.broker.chain_file.read_text())
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_file)}


def broker_security_configs(ssl_configs: dict[str, str], ports: dict[str, int], host: str = HOST) -> dict[str, str]:
    """Kafka's server.properties for the four listeners (the same names for kafkette and Apache Kafka)."""
    listeners = ",".join(f"{protocol}://{host}:{port}" for protocol, port in ports.items())
    configs = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "security.inter.broker.protocol": "PLAINTEXT",
        **ssl_configs,
        "listener.name.ssl.ssl.client.auth": "requested",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        configs[f"listener.name.{listener}.plain.sasl.jaas.config"] = (
            f'{PLAIN_MODULE} required user_{PLAIN_USER}="{PLAIN_PASSWORD}";')
        for mechanism in ("scram-sha-256", "scram-sha-512"):
            configs[f"listener.name.{listener}.{mechanism}.sasl.jaas.config"] = f"{SCRAM_MODULE} required;"
    return configs


def create_scram_user(plaintext_bootstrap: str) -> None:
    """The SCRAM user, both mechanisms, through AlterUserScramCredentials."""
    from kafka.admin import KafkaAdminClient, UserScramCredentialUpsertion

    admin = KafkaAdminClient(bootstrap_servers=plaintext_bootstrap, client_id="matrix-admin")
    try:
        result = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(SCRAM_USER, m, SCRAM_PASSWORD, iterations=8192)
             for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
    finally:
        admin.close()
    assert all(error is None for error in result.values()), result


def wait_for_scram_login(bootstrap: str, security: Security, timeout: float = 30.0) -> None:
    """Credentials reach the authenticator through ZooKeeper change notifications: poll with a login."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout
    while True:
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="matrix-login",
                                     request_timeout_ms=5000, **security.kafka_python())
            admin.close()
            return
        except KafkaError as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"{security.label} login as {SCRAM_USER} still fails: {e!r}") from None
            time.sleep(0.2)


def securities(certs: Certs) -> dict[str, Security]:
    """Every way to connect, by label. The client key is unencrypted: the Java client could not read
    the fixture's encrypted one (see apache_kafka_ssl_configs)."""
    ca_file = str(certs.ca_file)
    out = [Security(), Security("SSL", ca_file=ca_file),
           Security("SSL", ca_file=ca_file, cert_file=str(certs.client.cert_file),
                    key_file=str(certs.client.key_file))]
    for protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        ca = ca_file if protocol == "SASL_SSL" else None
        out.append(Security(protocol, "PLAIN", PLAIN_USER, PLAIN_PASSWORD, ca_file=ca))
        out += [Security(protocol, m, SCRAM_USER, SCRAM_PASSWORD, ca_file=ca) for m in MECHANISMS[1:]]
    return {s.label: s for s in out}


LABELS = ["PLAINTEXT", "SSL", "SSL-client-cert"] + [f"{p}-{m}" for p in ("SASL_PLAINTEXT", "SASL_SSL")
                                                    for m in MECHANISMS]
# One case per client in the fast suite; the full matrix is slow.
FAST = {("kafka-python", "SASL_SSL-SCRAM-SHA-512"), ("confluent-kafka", "SSL-client-cert"),
        ("java", "SASL_PLAINTEXT-PLAIN"), ("kcat", "SASL_SSL-SCRAM-SHA-256")}
CASES = [pytest.param(client, label, id=f"{client}-{label}",
                      marks=() if (client, label) in FAST else pytest.mark.slow)
         for label in LABELS for client in CHECKS]


@dataclass
class SecureBroker:
    ports: dict[str, int]
    securities: dict[str, Security]
    cluster: object | None = None  # kafkette's LocalCluster, for its logs in failure reports

    def bootstrap(self, security: Security) -> str:
        return f"{HOST}:{self.ports[security.protocol]}"

    @property
    def plaintext(self) -> str:
        return f"{HOST}:{self.ports['PLAINTEXT']}"

    def add_scram_user(self) -> None:
        create_scram_user(self.plaintext)
        for label in ("SASL_PLAINTEXT-SCRAM-SHA-256", "SASL_PLAINTEXT-SCRAM-SHA-512"):
            wait_for_scram_login(self.bootstrap(self.securities[label]), self.securities[label])


@pytest.fixture(scope="module")
def secure_broker(certs: Certs) -> Iterator[SecureBroker]:
    """kafkette, one broker with the four listeners and the SCRAM user."""
    from clients.devcluster import LocalCluster

    overrides = {"offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "5",
                 **broker_security_configs(kafkette_ssl_configs(certs), PORTS)}
    with LocalCluster(1, base_port=PORTS["PLAINTEXT"], overrides=overrides, metrics_base_port=None) as cluster:
        broker = SecureBroker(PORTS, securities(certs), cluster)
        broker.add_scram_user()
        yield broker


@pytest.fixture(scope="module")
def secure_apache_kafka(certs: Certs) -> Iterator[SecureBroker]:
    """Apache Kafka 3.9.1 with the same configs: the reference the matrix is checked against."""
    from tests.ops.kafka_broker import KafkaZkBroker

    ports = {protocol: port + 10 for protocol, port in PORTS.items()}
    kafka = KafkaZkBroker(broker_security_configs(apache_kafka_ssl_configs(certs), ports))
    kafka.port = ports["PLAINTEXT"]
    try:
        kafka.start()
        broker = SecureBroker(ports, securities(certs))
        broker.add_scram_user()
        yield broker
    finally:
        kafka.stop()


def round_trip(broker: SecureBroker, client: str, label: str) -> None:
    security = broker.securities[label]
    topic = unique(f"matrix-{client}")
    create_topic(broker.plaintext, topic, partitions=2)
    steps = CHECKS[client](broker.bootstrap(security), topic, security, RECORDS)
    assert len(steps) == 4, steps


@pytest.mark.parametrize(("client", "label"), CASES)
def test_client_round_trip(secure_broker: SecureBroker, request: pytest.FixtureRequest, client: str,
                           label: str) -> None:
    """Produce, consume in a group and commit, a committed and an aborted transaction, read_committed."""
    from tests.conftest import attach_cluster

    attach_cluster(request, secure_broker.cluster)
    round_trip(secure_broker, client, label)


@pytest.mark.slow
@pytest.mark.parametrize(("client", "label"), [pytest.param(*c.values, id=c.id) for c in CASES])
def test_client_round_trip_apache_kafka(secure_apache_kafka: SecureBroker, client: str, label: str) -> None:
    """The same cases against Apache Kafka 3.9.1 configured alike: what a failure above is compared with."""
    round_trip(secure_apache_kafka, client, label)
