"""Stock clients over TLS listeners of one broker: kafka-python, confluent-kafka (librdkafka) and kcat,
with and without client certificates; client authentication refusals; PKCS12 and inline PEM
keystores; per-listener settings; the principal taken from the client certificate.

The broker (in this process, see conftest) has these listeners:

- ``SSL``: PEM keystore file with an encrypted key, ``ssl.client.auth`` none (the broker-wide value);
- ``MTLS``: same keystore, ``listener.name.mtls.ssl.client.auth=required`` and a principal mapping rule;
- ``P12``: PKCS12 keystore and truststore, ``ssl.client.auth=requested``;
- ``INLINE``: the key and chain inline (``ssl.keystore.key`` / ``ssl.keystore.certificate.chain``).
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import Encoding
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.helpers import RawClient, create_topic, unique, wait_until
from tests.security.conftest import (
    CLIENT_DN,
    KEY_PASSWORD,
    STORE_PASSWORD,
    Certs,
    InProcessBroker,
    Party,
    start_in_process_broker,
)

MAPPING_RULES = "RULE:^CN=([^,]+),OU=eng,.*$/$1@eng/U,DEFAULT"


@pytest.fixture(scope="module")
def broker(zookeeper_server: Any, certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    props = {
        # No broker-wide keystore: as in Kafka, a listener's inline PEM key could not be combined with an
        # inherited ssl.keystore.location. Client authentication is broker-wide "none", overridden on MTLS.
        **certs.broker_ssl_props("listener.name.ssl."),
        **certs.broker_ssl_props("listener.name.mtls."),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": MAPPING_RULES,
        "listener.name.p12.ssl.keystore.type": "PKCS12",
        "listener.name.p12.ssl.keystore.location": str(certs.broker.pkcs12),
        "listener.name.p12.ssl.keystore.password": STORE_PASSWORD,
        "listener.name.p12.ssl.key.password": STORE_PASSWORD,
        "listener.name.p12.ssl.truststore.type": "PKCS12",
        "listener.name.p12.ssl.truststore.location": str(certs.truststore_p12),
        "listener.name.p12.ssl.truststore.password": STORE_PASSWORD,
        "listener.name.p12.ssl.client.auth": "requested",
        "listener.name.inline.ssl.keystore.type": "PEM",
        "listener.name.inline.ssl.keystore.key": certs.broker.key_pem(KEY_PASSWORD),
        "listener.name.inline.ssl.key.password": KEY_PASSWORD,
        "listener.name.inline.ssl.keystore.certificate.chain": certs.broker.chain_pem,
        "listener.name.inline.ssl.truststore.type": "PEM",
        "listener.name.inline.ssl.truststore.certificates": certs.ca_pem,
    }
    handle = start_in_process_broker(f"{zookeeper_server.connect_string}/tls-{uuid.uuid4().hex[:8]}",
                                     tmp_path_factory.mktemp("tls-broker"),
                                     {"SSL": "SSL", "MTLS": "SSL", "P12": "SSL", "INLINE": "SSL"}, props)
    try:
        yield handle
    finally:
        handle.stop()


# -- clients ----------------------------------------------------------------------------------------


def kafka_python_ssl(certs: Certs, party: Party | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"security_protocol": "SSL", "ssl_cafile": str(certs.ca_file), "ssl_check_hostname": True}
    if party is not None:
        conf.update(ssl_certfile=str(party.chain_file), ssl_keyfile=str(party.encrypted_key_file),
                    ssl_password=KEY_PASSWORD)
    return conf


def librdkafka_ssl(certs: Certs, party: Party | None = None) -> dict[str, str]:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca_file),
            "ssl.endpoint.identification.algorithm": "https"}
    if party is not None:
        conf.update({"ssl.certificate.location": str(party.chain_file),
                     "ssl.key.location": str(party.encrypted_key_file), "ssl.key.password": KEY_PASSWORD})
    return conf


def kafka_python_round_trip(bootstrap: str, topic: str, conf: dict[str, Any], n: int = 20) -> None:
    values = [f"kp-{i}".encode() for i in range(n)]
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **conf)
    try:
        for v in values:
            producer.send(topic, value=v, partition=0)
        producer.flush(20)
    finally:
        producer.close(5)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **conf)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got: list[bytes] = []

        def read_all() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
            return len(got) >= n

        wait_until(read_all, 20, f"{n} records of {topic}")
    finally:
        consumer.close()
    assert got == values


def confluent_round_trip(bootstrap: str, topic: str, conf: dict[str, str], n: int = 20) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTopicPartition

    values = [f"ck-{i}".encode() for i in range(n)]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **conf})
    errors: list[Any] = []
    for v in values:
        producer.produce(topic, value=v, partition=0, on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(20) == 0 and not errors, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("ck"), "enable.auto.commit": False,
                         **conf})
    try:
        consumer.assign([CTopicPartition(topic, 0, 0)])
        got: list[bytes] = []

        def read_all() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
            return len(got) >= n

        wait_until(read_all, 20, f"{n} records of {topic}", interval=0)
    finally:
        consumer.close()
    assert got == values


def tls_request(certs: Certs, port: int, party: Party | None = None) -> tuple[Any, int]:
    """A Metadata request over TLS with our own client: (response, the client's local port)."""
    raw = RawClient.__new__(RawClient)
    raw.client_id, raw._cid = "tls-test", 0
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    raw.sock = certs.client_context(party).wrap_socket(sock, server_hostname="127.0.0.1")
    try:
        md = raw.request(3, 12, topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        return md, raw.sock.getsockname()[1]
    finally:
        raw.close()


def served_certificate(port: int) -> bytes:
    """The DER certificate the listener on ``port`` presents (no verification)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock, \
            ctx.wrap_socket(sock, server_hostname="127.0.0.1") as tls_sock:
        der = tls_sock.getpeercert(binary_form=True)
    assert der is not None
    return der


def handshake_refused(certs: Certs, port: int, party: Party | None) -> bool:
    """Whether the broker refuses a TLS client presenting ``party``'s certificate (or none). With TLSv1.3
    the client learns it only when it reads: the broker's alert arrives after the client's handshake."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        with certs.client_context(party).wrap_socket(sock, server_hostname="127.0.0.1") as tls_sock:
            tls_sock.sendall(b"\0\0\0\0")
            return tls_sock.recv(1) == b""
    except (ssl.SSLError, ConnectionError):
        return True


# -- tests ------------------------------------------------------------------------------------------


def test_kafka_python_over_ssl_without_client_certificate(broker: InProcessBroker, certs: Certs) -> None:
    topic = unique("tls-kp")
    create_topic(broker.bootstrap(), topic)
    kafka_python_round_trip(broker.bootstrap("SSL"), topic, kafka_python_ssl(certs))


def test_kafka_python_over_ssl_with_client_certificate(broker: InProcessBroker, certs: Certs) -> None:
    topic = unique("tls-kp-mtls")
    create_topic(broker.bootstrap(), topic)
    kafka_python_round_trip(broker.bootstrap("MTLS"), topic, kafka_python_ssl(certs, certs.client))


@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_confluent_kafka_over_ssl(broker: InProcessBroker, certs: Certs, listener: str) -> None:
    topic = unique("tls-ck")
    create_topic(broker.bootstrap(), topic)
    party = certs.client if listener == "MTLS" else None
    confluent_round_trip(broker.bootstrap(listener), topic, librdkafka_ssl(certs, party))


@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_kcat_over_ssl(broker: InProcessBroker, certs: Certs, listener: str, tmp_path: Path) -> None:
    topic = unique("tls-kcat")
    create_topic(broker.bootstrap(), topic)
    party = certs.client if listener == "MTLS" else None
    options = [arg for k, v in librdkafka_ssl(certs, party).items() for arg in ("-X", f"{k}={v}")]
    base = ["kcat", "-b", broker.bootstrap(listener), "-t", topic, "-p", "0", *options]
    lines = [f"kcat-{i}" for i in range(10)]
    subprocess.run([*base, "-P"], input="\n".join(lines) + "\n", text=True, check=True, timeout=30)
    out = subprocess.run([*base, "-C", "-o", "beginning", "-c", str(len(lines)), "-e", "-q"], text=True,
                         check=True, capture_output=True, timeout=30).stdout
    assert out.splitlines() == lines


def test_client_auth_required_refuses_a_client_without_certificate(broker: InProcessBroker, certs: Certs) -> None:
    port = broker.ports["MTLS"]
    failed_before = broker.broker.stats.failed_authentication
    assert handshake_refused(certs, port, None)
    wait_until(lambda: broker.broker.stats.failed_authentication > failed_before, 10, "the failure to be counted")
    # kafka-python gets nowhere either.
    from kafka.errors import KafkaError

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap("MTLS"), max_block_ms=3000,
                             api_version=(2, 8), **kafka_python_ssl(certs))
    try:
        with pytest.raises(KafkaError):
            producer.partitions_for("anything")
    finally:
        producer.close(1)
    # The same listener serves a client with a certificate.
    md, _ = tls_request(certs, port, certs.client)
    assert [b.node_id for b in md.brokers] == [0]


def test_untrusted_certificate_is_refused_and_others_are_served(broker: InProcessBroker, certs: Certs) -> None:
    for listener in ("MTLS", "P12"):  # required and requested: an untrusted certificate fails both
        assert handshake_refused(certs, broker.ports[listener], certs.untrusted_client), listener
        md, _ = tls_request(certs, broker.ports[listener], certs.client)
        assert [b.port for b in md.brokers] == [broker.ports[listener]]


def test_pkcs12_and_inline_pem_keystores_serve_the_broker_certificate(broker: InProcessBroker, certs: Certs) -> None:
    expected = certs.broker.issued.cert.public_bytes(Encoding.DER)
    for listener in ("SSL", "P12", "INLINE"):
        assert served_certificate(broker.ports[listener]) == expected, listener
        md, _ = tls_request(certs, broker.ports[listener])
        assert [b.port for b in md.brokers] == [broker.ports[listener]], listener
    for listener, party in (("P12", certs.client), ("INLINE", None)):
        topic = unique(f"tls-{listener.lower()}")
        create_topic(broker.bootstrap(), topic)
        kafka_python_round_trip(broker.bootstrap(listener), topic, kafka_python_ssl(certs, party), n=5)


def test_principal_from_the_client_certificate(broker: InProcessBroker, certs: Certs) -> None:
    """MTLS maps the DN with its own rule (listener.name.mtls.ssl.principal.mapping.rules); P12 uses the
    broker-wide DEFAULT rule (the DN itself); no certificate is User:ANONYMOUS."""
    cases = [("MTLS", certs.client, "User:ALICE@ENG"), ("P12", certs.client, f"User:{CLIENT_DN}"),
             ("P12", None, "User:ANONYMOUS"), ("SSL", None, "User:ANONYMOUS")]
    for listener, party, expected in cases:
        sock = socket.create_connection(("127.0.0.1", broker.ports[listener]), timeout=10)
        with certs.client_context(party).wrap_socket(sock, server_hostname="127.0.0.1") as tls_sock:
            raw = RawClient.__new__(RawClient)
            raw.sock, raw.client_id, raw._cid = tls_sock, "principal", 0
            raw.request(3, 12, topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            local_port = tls_sock.getsockname()[1]
            assert broker.principals(listener).get(local_port) == expected, (listener, party)
