"""Certificate rotation without a restart, start-up refusal of a TLS listener without keystore.

Rotation is Kafka's: a dynamic per-broker update of ``listener.name.<l>.ssl.keystore.location`` (with
IncrementalAlterConfigs or AlterConfigs) is validated first (the new keystore must load, keep the DN and
the SANs), then new connections get the new certificate; open connections keep theirs.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type
from tests.integration.helpers import RawClient, wait_until
from tests.security.conftest import Certs, InProcessBroker
from tests.security.test_tls_clients import served_certificate

BROKER = 4  # ConfigResource.Type.BROKER
LOCATION = "listener.name.ssl.ssl.keystore.location"


def incremental_alter(broker: InProcessBroker, configs: dict[str, str]) -> tuple[int, str | None]:
    t = request_type(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    with RawClient(broker.bootstrap()) as raw:
        r = raw.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[
            t.AlterConfigsResource(resource_type=BROKER, resource_name="0", configs=[
                t.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])])
    res = r.responses[0]
    return res.error_code, res.error_message


def alter(broker: InProcessBroker, configs: dict[str, str]) -> tuple[int, str | None]:
    t = request_type(ApiKey.ALTER_CONFIGS)
    with RawClient(broker.bootstrap()) as raw:
        r = raw.request(ApiKey.ALTER_CONFIGS, 1, validate_only=False, resources=[
            t.AlterConfigsResource(resource_type=BROKER, resource_name="0", configs=[
                t.AlterableConfig(name=k, value=v) for k, v in configs.items()])])
    res = r.responses[0]
    return res.error_code, res.error_message


def der(party: Any) -> bytes:
    return bytes(party.issued.cert.public_bytes(Encoding.DER))


def metadata_over(tls_sock: Any) -> Any:
    raw = RawClient.__new__(RawClient)
    raw.sock, raw.client_id, raw._cid = tls_sock, "rotation", 0
    return raw.request(3, 12, topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_keystore_rotation_without_restart(tls_broker_factory: Any, certs: Certs) -> None:
    broker = tls_broker_factory({"SSL": "SSL"}, certs.broker_ssl_props("listener.name.ssl."))
    port = broker.ports["SSL"]
    assert served_certificate(port) == der(certs.broker)
    # A connection opened before the rotation.
    old_sock = certs.client_context().wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                                  server_hostname="127.0.0.1")
    metadata_over(old_sock)

    rotated = certs.new_broker_certificate("broker-rotated", certs.broker.subject)
    assert incremental_alter(broker, {LOCATION: str(rotated.keystore_pem)}) == (ErrorCode.NONE, None)
    wait_until(lambda: served_certificate(port) == der(rotated), 10, "new connections to get the new certificate")
    # The old connection still works, on the certificate it was accepted with.
    assert old_sock.getpeercert(binary_form=True) == der(certs.broker)
    assert [b.port for b in metadata_over(old_sock).brokers] == [port]
    old_sock.close()
    assert broker.thread.is_alive() and not broker.result, "the broker never restarted"

    # Kafka reloads a keystore file rewritten in place when the same location is set again.
    rewritten = certs.new_broker_certificate("broker-rewritten", certs.broker.subject)
    rotated.keystore_pem.write_bytes(rewritten.keystore_pem.read_bytes())
    assert alter(broker, {LOCATION: str(rotated.keystore_pem)}) == (ErrorCode.NONE, None)
    wait_until(lambda: served_certificate(port) == der(rewritten), 10, "the rewritten keystore to be served")


@pytest.mark.parametrize("api", ["incremental", "legacy"])
def test_keystore_updates_kafka_refuses(tls_broker_factory: Any, certs: Certs, api: str) -> None:
    broker = tls_broker_factory({"SSL": "SSL"}, certs.broker_ssl_props("listener.name.ssl."))
    port = broker.ports["SSL"]
    send = incremental_alter if api == "incremental" else alter
    other_dn = certs.new_broker_certificate(f"broker-other-dn-{api}", "CN=someone-else,O=kafkette")
    garbage = certs.directory / f"garbage-{api}.pem"
    garbage.write_text("not a keystore\n")
    for location, reason in ((str(certs.directory / "missing.pem"), "cannot read the file"),
                             (str(garbage), "At least one certificate expected"),
                             (str(other_dn.keystore_pem), "Keystore DistinguishedName does not match")):
        code, message = send(broker, {LOCATION: location})
        assert code == ErrorCode.INVALID_CONFIG, (location, code, message)
        assert message is not None and "Validation of dynamic config update of SSLFactory failed" in message
        assert reason in message, message
    assert served_certificate(port) == der(certs.broker)
    # Unknown listener configs are still refused as unknown.
    code, message = send(broker, {"listener.name.ssl.no.such.config": "x"})
    assert code == ErrorCode.INVALID_CONFIG and "Unknown broker config" in (message or "")


def test_tls_listener_without_keystore_fails_start_up(tls_broker_factory: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="broker.broker")
    with pytest.raises(AssertionError, match="the broker stopped during start-up"):
        tls_broker_factory({"SSL": "SSL"}, {})
    assert "A client SSLEngine created with the provided settings can't connect to a server SSLEngine created " \
           "with those settings." in caplog.text
