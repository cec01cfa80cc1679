"""SASL over TLS: SCRAM-SHA-512 on a SASL_SSL listener, with confluent-kafka (librdkafka) verifying the
broker's certificate. The broker runs in this process (``tls_broker_factory``), so the test also sees
what the broker made of each connection: its principal, and the listener's SASL counters."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from tests.security.conftest import Certs, InProcessBroker
from tests.security.sasl_helpers import scram_jaas, upsert_scram, wait_until


def _set_scram(broker: InProcessBroker, user: str, password: str, mechanism: str) -> None:
    upsert_scram(broker.ports["PLAINTEXT"], user, password, mechanism)
    # A dictionary read from this thread: the cache is only ever replaced entry by entry on the loop.
    wait_until(lambda: broker.broker.sasl.credentials.get(mechanism, user) is not None, 30,
               "the broker's credential cache to have the user")


def test_scram_sha_512_over_sasl_ssl(tls_broker_factory: Any, certs: Certs) -> None:
    broker = tls_broker_factory({"SASL_SSL": "SASL_SSL"}, {
        **certs.broker_ssl_props("listener.name.sasl_ssl."),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas(),
    })
    user, password = f"erin-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    _set_scram(broker, user, password, "SCRAM-SHA-512")
    conf = {"bootstrap.servers": broker.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca_file), "ssl.endpoint.identification.algorithm": "https",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}
    topic = f"sasl-ssl-{uuid.uuid4().hex[:6]}"
    producer = Producer({**conf, "acks": "all"})
    for i in range(5):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])

        def more() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None:
                if msg.error():
                    raise KafkaException(msg.error())
                got.append(msg.value() or b"")
            return len(got) >= 5

        wait_until(more, 30, "the records")
        # The broker's connections on the listener belong to the SCRAM user.
        assert set(broker.principals("SASL_SSL").values()) == {f"User:{user}"}
    finally:
        consumer.close()
    assert got == [b"v%d" % i for i in range(5)]
    # A wrong password over the same listener: the client hears the broker's reason.
    errors: list[KafkaError] = []
    bad = Producer({**conf, "sasl.password": "wrong", "error_cb": errors.append})
    wait_until(lambda: (bad.poll(0.2), bool(errors))[1], 30, "an authentication error")
    assert any(e.code() == KafkaError._AUTHENTICATION and "SCRAM-SHA-512" in e.str() for e in errors), errors
    stats = broker.call(lambda: broker.broker.sasl.stats.totals("SASL_SSL"))
    assert stats["successful-authentication-total"] >= 2  # the producer's and the consumer's connections
    assert stats["failed-authentication-total"] >= 1
