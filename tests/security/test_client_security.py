"""Security on the connections kafkette opens: the client SASL steps, TLS, the CLI's client properties.

- The SASL steps (``protocol/sasl_client.py``) run inside the client state machine against the broker's
  own SASL mechanism servers (``broker/security/sasl_plain.py``, ``sasl_scram.py``): every byte the
  client sends is decoded as a broker decodes it, and every answer is what the broker's mechanism says.
- The ``kafkette`` CLI with ``--command-config`` over SSL, SASL_PLAINTEXT and SASL_SSL against a real
  broker on a real ZooKeeper, and its ``scram`` and ``client-quotas`` commands.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.security.sasl_mechanism import SaslAuthenticationFailed, SaslFailed
from broker.security.sasl_plain import PlainSaslServer
from broker.security.sasl_scram import ScramSaslServer
from protocol import scram
from protocol.api_versions import ApiKey
from protocol.client_connection import AuthenticationError, ClientConnection, ConnectionReady
from protocol.errors import ErrorCode
from protocol.framing import FrameReader
from protocol.messages import api_versions_body, decode_request, encode_response_bytes, new_response
from protocol.sasl_client import PlainClient, SaslStep, ScramClient, sasl_auth_factory
from tests.ops.helpers import fails, kafkette, ok, unique, wait_until

# ------------------------------------------------------------------------------------------------
# The SASL steps against the broker's mechanism servers


def _requests(data: bytes) -> list:
    return [decode_request(f) for f in FrameReader().feed(data)]


def _answer(req, body) -> bytes:
    return encode_response_bytes(req.api_key, req.api_version, req.header.correlation_id, body)


class MiniSaslBroker:
    """The broker's side of SaslHandshake/SaslAuthenticate around one mechanism server, as
    broker/security/sasl_server.py frames it: errors as SASL_AUTHENTICATION_FAILED with the text a
    client may see."""

    def __init__(self, server, enabled=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), lifetime_ms: int = 0,
                 tamper=None) -> None:
        self.server, self.enabled, self.lifetime_ms, self.tamper = server, list(enabled), lifetime_ms, tamper
        self.seen: list[tuple[int, int]] = []

    def respond(self, req):
        self.seen.append((req.api_key, req.api_version))
        if req.api_key == ApiKey.API_VERSIONS:
            return api_versions_body()
        if req.api_key == ApiKey.SASL_HANDSHAKE:
            code = ErrorCode.NONE if req.body.mechanism in self.enabled else ErrorCode.UNSUPPORTED_SASL_MECHANISM
            return new_response(ApiKey.SASL_HANDSHAKE, error_code=code, mechanisms=self.enabled)
        assert req.api_key == ApiKey.SASL_AUTHENTICATE
        try:
            token = self.server.evaluate(bytes(req.body.auth_bytes)) or b""
        except SaslAuthenticationFailed as e:
            return self._failed(str(e))
        except SaslFailed:
            return self._failed(f"Authentication failed during authentication due to invalid credentials with "
                                f"SASL mechanism {self.server.mechanism}")
        if self.tamper is not None and self.server.complete:
            token = self.tamper(token)
        return new_response(ApiKey.SASL_AUTHENTICATE, error_code=0, error_message=None, auth_bytes=token,
                            session_lifetime_ms=self.lifetime_ms if self.server.complete else 0)

    @staticmethod
    def _failed(message: str):
        return new_response(ApiKey.SASL_AUTHENTICATE, error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                            error_message=message, auth_bytes=b"", session_lifetime_ms=0)


def run_exchange(conn: ClientConnection, broker: MiniSaslBroker) -> list:
    """Pump bytes between the client state machine and the mini broker until the client is ready."""
    events = conn.start()
    for _ in range(10):
        if conn.is_ready:
            return events
        for req in _requests(conn.data_to_send()):
            events += conn.receive_data(_answer(req, broker.respond(req)))
    raise AssertionError("the exchange did not finish")


def scram_lookup(mechanism: str, users: dict[str, str], iterations: int = 4096):
    creds = {u: scram.credential_from_password(mechanism, p, iterations) for u, p in users.items()}
    return lambda mech, user: creds.get(user) if mech == mechanism else None


def test_plain_authenticates_against_the_broker_mechanism() -> None:
    broker = MiniSaslBroker(PlainSaslServer(lambda: {"alice": "alice-secret"}), lifetime_ms=60000)
    conn = ClientConnection("t", auth_steps=[SaslStep(PlainClient("alice", "alice-secret"))])
    assert ConnectionReady() in run_exchange(conn, broker)
    assert broker.server.authorization_id == "alice"
    # SaslHandshake v1, then SaslAuthenticate at the negotiated version (v2 carries the session lifetime).
    assert broker.seen == [(ApiKey.API_VERSIONS, 3), (ApiKey.SASL_HANDSHAKE, 1), (ApiKey.SASL_AUTHENTICATE, 2)]
    assert conn.session_lifetime_ms == 60000


def test_plain_wrong_password_is_the_brokers_message() -> None:
    broker = MiniSaslBroker(PlainSaslServer(lambda: {"alice": "alice-secret"}))
    conn = ClientConnection("t", auth_steps=[SaslStep(PlainClient("alice", "wrong"))])
    with pytest.raises(AuthenticationError) as info:
        run_exchange(conn, broker)
    assert info.value.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert str(info.value) == "Authentication failed: Invalid username or password"
    assert conn.closed


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_and_verifies_the_server(mechanism: str) -> None:
    server = ScramSaslServer(mechanism, scram_lookup(mechanism, {"bob": "bob-secret"}, iterations=8192))
    broker = MiniSaslBroker(server)
    step = SaslStep(ScramClient(mechanism, "bob", "bob-secret"))
    conn = ClientConnection("t", negotiate_versions=False, auth_steps=[step])
    assert ConnectionReady() in run_exchange(conn, broker)
    assert server.authorization_id == "bob" and step.client.complete
    # Pinned versions (inter-broker connections): no ApiVersions, handshake then two SCRAM rounds.
    assert [k for k, _v in broker.seen] == [ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                                            ApiKey.SASL_AUTHENTICATE]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_and_unknown_user_fail(mechanism: str) -> None:
    for user, password in (("bob", "nope"), ("mallory", "bob-secret")):
        server = ScramSaslServer(mechanism, scram_lookup(mechanism, {"bob": "bob-secret"}))
        conn = ClientConnection("t", auth_steps=[SaslStep(ScramClient(mechanism, user, password))])
        with pytest.raises(AuthenticationError) as info:
            run_exchange(conn, MiniSaslBroker(server))
        assert info.value.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert mechanism in str(info.value) and conn.closed


def test_scram_server_signature_is_checked() -> None:
    """A server that does not know the credential cannot forge the server-final message."""
    mechanism = "SCRAM-SHA-512"
    server = ScramSaslServer(mechanism, scram_lookup(mechanism, {"bob": "bob-secret"}))

    def forge(token: bytes) -> bytes:
        return scram.ServerFinalMessage(bytes(64)).encode()

    conn = ClientConnection("t", auth_steps=[SaslStep(ScramClient(mechanism, "bob", "bob-secret"))])
    with pytest.raises(AuthenticationError, match="Invalid server signature in server final message"):
        run_exchange(conn, MiniSaslBroker(server, tamper=forge))
    assert conn.closed


def test_scram_refuses_a_weak_iteration_count_and_a_foreign_nonce() -> None:
    client = ScramClient("SCRAM-SHA-256", "bob", "pw", nonce="abc")
    client.initial_response()
    weak = scram.ServerFirstMessage("abcdef", b"salt", 1024).encode()
    with pytest.raises(AuthenticationError, match="Requested iterations 1024 is less than the minimum 4096"):
        client.evaluate(weak)
    client = ScramClient("SCRAM-SHA-256", "bob", "pw", nonce="abc")
    client.initial_response()
    with pytest.raises(AuthenticationError, match="Invalid server nonce"):
        client.evaluate(scram.ServerFirstMessage("xyz", b"salt", 4096).encode())


def test_unsupported_mechanism_names_what_the_broker_offers() -> None:
    broker = MiniSaslBroker(PlainSaslServer(lambda: {}), enabled=["PLAIN"])
    conn = ClientConnection("t", auth_steps=sasl_auth_factory("SCRAM-SHA-512", "bob", "pw")())
    with pytest.raises(AuthenticationError) as info:
        run_exchange(conn, broker)
    assert info.value.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert str(info.value) == ("Client SASL mechanism 'SCRAM-SHA-512' not enabled in the server, enabled "
                               "mechanisms are [PLAIN]")


def test_the_factory_gives_every_connection_fresh_steps() -> None:
    factory = sasl_auth_factory("SCRAM-SHA-256", "bob", "pw")
    (a,), (b,) = factory(), factory()
    assert a is not b and a.client._nonce != b.client._nonce
    with pytest.raises(ValueError, match="GSSAPI"):
        sasl_auth_factory("GSSAPI", "bob", "pw")


# ------------------------------------------------------------------------------------------------
# The kafkette CLI over every security protocol, against a real broker on a real ZooKeeper

HOST = "127.0.0.1"
BASE_PORT = 23010  # PLAINTEXT, SSL (client certificate required), SASL_PLAINTEXT, SASL_SSL
PORTS = {"PLAINTEXT": BASE_PORT, "SSL": BASE_PORT + 1, "SASL_PLAINTEXT": BASE_PORT + 2, "SASL_SSL": BASE_PORT + 3}
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_USER, PLAIN_PASSWORD = "carol", "carol-secret"
SCRAM_USER, SCRAM_PASSWORD = "dave", "dave-secret"
KEY_PASSWORD = "broker-key-secret"
REAUTH_MS = 1500


@dataclass(frozen=True)
class SecureBroker:
    bootstrap: dict[str, str]  # security protocol -> host:port
    ca: Path
    client_cert: Path
    client_key: Path
    untrusted_ca: Path
    dir: Path


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    from clients.certificates import CertificateAuthority
    from clients.devcluster import LocalCluster

    d = tmp_path_factory.mktemp("client-security")
    ca = CertificateAuthority.create("CN=kafkette client security test CA")
    broker = ca.issue_server("CN=localhost").write_pem(d, "broker", key_password=KEY_PASSWORD)
    client = ca.issue_client("CN=cli-user,O=kafkette").write_pem(d, "client")
    other = CertificateAuthority.create("CN=someone else's CA")
    listeners = ",".join(f"{p}://{HOST}:{port}" for p, port in PORTS.items())
    overrides = {
        "listeners": listeners, "advertised.listeners": listeners, "security.inter.broker.protocol": "PLAINTEXT",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(broker.keystore), "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.write_pem(d / "ca.pem")),
        "listener.name.ssl.ssl.client.auth": "required",
        # Short SASL sessions on SASL_PLAINTEXT (KIP-368): the clients must renew them as they go.
        "listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        overrides[f"listener.name.{listener}.plain.sasl.jaas.config"] = \
            f'{PLAIN_MODULE} required user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
        for mechanism in ("scram-sha-256", "scram-sha-512"):
            overrides[f"listener.name.{listener}.{mechanism}.sasl.jaas.config"] = f"{SCRAM_MODULE} required;"
    with LocalCluster(1, base_port=BASE_PORT, overrides=overrides, metrics_base_port=None) as cluster:
        bootstrap = {p: f"{HOST}:{port}" for p, port in PORTS.items()}
        # The SCRAM user, created with the CLI over the PLAINTEXT listener (as kafka-configs would).
        ok("scram", "--alter", "--entity-type", "users", "--entity-name", SCRAM_USER, "--bootstrap-server",
           bootstrap["PLAINTEXT"], "--add-config",
           f"SCRAM-SHA-256=[iterations=8192,password={SCRAM_PASSWORD}],SCRAM-SHA-512=[password={SCRAM_PASSWORD}]")
        yield SecureBroker(bootstrap, d / "ca.pem", client.cert, client.key, other.write_pem(d / "other-ca.pem"), d)
        del cluster


def client_properties(path: Path, **props: str) -> str:
    path.write_text("".join(f"{k.replace('_', '.')}={v}\n" for k, v in props.items()))
    return str(path)


def sasl(mechanism: str, user: str, password: str) -> dict[str, str]:
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    return {"sasl_mechanism": mechanism,
            "sasl_jaas_config": f'{module} required username="{user}" password="{password}";'}


def round_trip(bootstrap: str, config: str, flag: str = "--command-config") -> None:
    """Create a topic, produce and consume through the CLI with ``config`` for every connection."""
    topic = unique("secure-cli")
    ok("topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1",
       "--bootstrap-server", bootstrap, "--command-config", config)
    ok("console-producer", "--topic", topic, "--bootstrap-server", bootstrap,
       "--producer.config" if flag == "kafka" else flag, config, stdin="one\ntwo\nthree\n")
    r = ok("console-consumer", "--topic", topic, "--from-beginning", "--timeout-ms", "3000",
           "--bootstrap-server", bootstrap, "--consumer.config" if flag == "kafka" else flag, config)
    assert sorted(r.out.split()) == ["one", "three", "two"]


def test_cli_over_ssl_with_a_client_certificate(secure_broker: SecureBroker) -> None:
    b = secure_broker
    config = client_properties(b.dir / "ssl.properties", security_protocol="SSL", ssl_truststore_type="PEM",
                               ssl_truststore_location=str(b.ca), ssl_keystore_type="PEM",
                               ssl_keystore_certificate_chain=b.client_cert.read_text().replace("\n", "\\n"),
                               ssl_keystore_key=b.client_key.read_text().replace("\n", "\\n"))
    round_trip(b.bootstrap["SSL"], config, flag="kafka")
    ok("cluster", "describe", "--bootstrap-server", b.bootstrap["SSL"], "--command-config", config)


def test_cli_over_ssl_with_pkcs12_stores(secure_broker: SecureBroker) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    b = secure_broker
    cert = x509.load_pem_x509_certificate(b.client_cert.read_bytes())
    key = serialization.load_pem_private_key(b.client_key.read_bytes(), None)
    ca = x509.load_pem_x509_certificate(b.ca.read_bytes())
    keystore = b.dir / "client.p12"
    keystore.write_bytes(pkcs12.serialize_key_and_certificates(
        b"client", key, cert, [ca], serialization.BestAvailableEncryption(b"store-pw")))  # type: ignore[arg-type]
    truststore = b.dir / "truststore.p12"
    truststore.write_bytes(pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(ca, b"ca")], serialization.BestAvailableEncryption(b"trust-pw")))
    config = client_properties(b.dir / "ssl-p12.properties", security_protocol="SSL",
                               ssl_truststore_type="PKCS12", ssl_truststore_location=str(truststore),
                               ssl_truststore_password="trust-pw", ssl_keystore_type="PKCS12",
                               ssl_keystore_location=str(keystore), ssl_keystore_password="store-pw")
    r = ok("cluster", "describe", "--bootstrap-server", b.bootstrap["SSL"], "--command-config", config,
           "--output", "json")
    assert r.json()


def test_cli_over_ssl_refused_without_certificate_or_trust(secure_broker: SecureBroker) -> None:
    b = secure_broker
    # The listener requires a client certificate.
    no_cert = client_properties(b.dir / "ssl-no-cert.properties", security_protocol="SSL",
                                ssl_truststore_type="PEM", ssl_truststore_location=str(b.ca))
    fails("topics", "--list", "--bootstrap-server", b.bootstrap["SSL"], "--command-config", no_cert, rc=1)
    # A truststore that does not hold the broker's CA: the handshake fails on our side.
    untrusted = client_properties(b.dir / "ssl-untrusted.properties", security_protocol="SSL",
                                  ssl_truststore_type="PEM", ssl_truststore_location=str(b.untrusted_ca))
    fails("topics", "--list", "--bootstrap-server", b.bootstrap["SSL"], "--command-config", untrusted, rc=1,
          match="SSL handshake with .* failed.*CERTIFICATE_VERIFY_FAILED")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_cli_over_sasl_plaintext(secure_broker: SecureBroker, mechanism: str) -> None:
    b = secure_broker
    user, password = (PLAIN_USER, PLAIN_PASSWORD) if mechanism == "PLAIN" else (SCRAM_USER, SCRAM_PASSWORD)
    config = client_properties(b.dir / f"sasl-{mechanism}.properties", security_protocol="SASL_PLAINTEXT",
                               **sasl(mechanism, user, password))
    round_trip(b.bootstrap["SASL_PLAINTEXT"], config)


def test_cli_over_sasl_ssl_manages_credentials_and_quotas(secure_broker: SecureBroker) -> None:
    b = secure_broker
    config = client_properties(b.dir / "sasl-ssl.properties", security_protocol="SASL_SSL",
                               ssl_truststore_type="PEM", ssl_truststore_location=str(b.ca),
                               **sasl("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD))
    bs = b.bootstrap["SASL_SSL"]
    round_trip(bs, config)
    user = unique("erin")
    common = ("--bootstrap-server", bs, "--command-config", config)
    ok("scram", "--alter", "--user", user, "--add-config", "SCRAM-SHA-512=[iterations=5000,password=erin-pw]",
       *common)
    r = ok("scram", "--describe", "--entity-type", "users", "--entity-name", user, *common)
    assert r.out.strip() == f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-512=iterations=5000"
    # The new user logs in over SASL_SSL right away (the broker's credential cache follows ZooKeeper).
    erin = client_properties(b.dir / "erin.properties", security_protocol="SASL_SSL", ssl_truststore_type="PEM",
                             ssl_truststore_location=str(b.ca), **sasl("SCRAM-SHA-512", user, "erin-pw"))
    wait_until(lambda: kafkette("topics", "--list", "--bootstrap-server", bs, "--command-config", erin).rc == 0,
               30, f"{user} to authenticate")
    ok("client-quotas", "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
       "producer_byte_rate=1048576,consumer_byte_rate=2e7", *common)
    r = ok("client-quotas", "--describe", "--entity-type", "users", "--entity-name", user, *common)
    assert r.out.strip() == (f"Quota configs for user-principal '{user}' are consumer_byte_rate=2.0E7, "
                             "producer_byte_rate=1048576.0")
    ok("scram", "--alter", "--user", user, "--delete-config", "SCRAM-SHA-512", *common)
    r = wait_until(lambda: (lambda res: res if res.rc else None)(
        kafkette("topics", "--list", "--bootstrap-server", bs, "--command-config", erin)), 30, "the login to fail")
    assert "SASL_AUTHENTICATION_FAILED" in r.err and r.rc == 1


def test_cli_sasl_wrong_password_is_one_clear_line(secure_broker: SecureBroker) -> None:
    b = secure_broker
    config = client_properties(b.dir / "wrong.properties", security_protocol="SASL_PLAINTEXT",
                               **sasl("SCRAM-SHA-512", SCRAM_USER, "not-the-password"))
    fails("topics", "--list", "--bootstrap-server", b.bootstrap["SASL_PLAINTEXT"], "--command-config", config,
          rc=1, match=r"authentication with 127\.0\.0\.1:\d+ failed: SASL_AUTHENTICATION_FAILED: Authentication "
                      r"failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")
    plain = client_properties(b.dir / "wrong-plain.properties", security_protocol="SASL_PLAINTEXT",
                              **sasl("PLAIN", PLAIN_USER, "nope"))
    fails("topics", "--list", "--bootstrap-server", b.bootstrap["SASL_PLAINTEXT"], "--command-config", plain,
          rc=1, match="Authentication failed: Invalid username or password")
    gssapi = client_properties(b.dir / "gssapi.properties", security_protocol="SASL_PLAINTEXT")
    fails("topics", "--list", "--bootstrap-server", b.bootstrap["SASL_PLAINTEXT"], "--command-config", gssapi,
          rc=2, match="GSSAPI")


def test_cli_scram_and_quota_commands_check_input(secure_broker: SecureBroker) -> None:
    bs = ("--bootstrap-server", secure_broker.bootstrap["PLAINTEXT"])
    fails("scram", "--alter", "--user", "x", "--add-config", "SCRAM-SHA-256=[iterations=100,password=p]", *bs,
          rc=2, match="Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256")
    fails("scram", "--alter", "--user", "x", "--add-config", "SCRAM-SHA-1=[password=p]", *bs, rc=2,
          match="Unexpected config names: SCRAM-SHA-1")
    r = ok("scram", "--describe", "--user", unique("nobody"), *bs)
    assert "RESOURCE_NOT_FOUND: Attempt to describe a user credential that does not exist" in r.out
    fails("client-quotas", "--alter", "--entity-type", "clients", "--add-config", "producer_byte_rate=1", *bs,
          rc=2, match="--entity-name or --entity-default must be specified")
    fails("client-quotas", "--alter", "--client", "c", "--add-config", "SCRAM-SHA-256=[password=p]", *bs, rc=2,
          match="Only quota configs can be added for 'clients'")
    fails("client-quotas", "--alter", "--client", unique("c"), "--delete-config", "producer_byte_rate", *bs, rc=1,
          match="Invalid config\\(s\\): producer_byte_rate")
    client = unique("app")
    ok("client-quotas", "--alter", "--entity-type", "users", "--entity-default", "--entity-type", "clients",
       "--entity-name", client, "--add-config", "request_percentage=25.5", *bs)
    r = ok("client-quotas", "--describe", "--user-defaults", "--client", client, *bs)
    assert r.out.strip() == f"Quota configs for the default user-principal, client-id '{client}' are " \
                            "request_percentage=25.5"


def _metadata_request():
    from protocol.messages import new_request

    return new_request(ApiKey.METADATA, topics=[], allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)


def _sasl_security(mechanism: str = "SCRAM-SHA-512"):
    from protocol.client_connection import ConnectionSecurity

    return ConnectionSecurity("SASL_PLAINTEXT", auth=sasl_auth_factory(mechanism, SCRAM_USER, SCRAM_PASSWORD))


def test_blocking_client_renews_its_sasl_session(secure_broker: SecureBroker) -> None:
    """Requests keep going over several session lifetimes: each one after the renewal point goes on a
    freshly authenticated connection instead of the one the broker is about to close (KIP-368)."""
    import time

    from clients.connection import BrokerConnection

    host, port = secure_broker.bootstrap["SASL_PLAINTEXT"].split(":")
    conn = BrokerConnection(host, int(port), client_id="renewal-test", timeout=10.0, security=_sasl_security())
    try:
        assert conn.sm.session_lifetime_ms == REAUTH_MS
        deadline = time.monotonic() + 3.5 * REAUTH_MS / 1000
        answered = 0
        while time.monotonic() < deadline:
            conn.send(ApiKey.METADATA, None, _metadata_request())
            assert conn.receive().brokers
            answered += 1
            time.sleep(0.1)
        assert answered > 10 and conn.renewals >= 2
    finally:
        conn.close()


def test_asyncio_client_renews_its_sasl_session(secure_broker: SecureBroker) -> None:
    """The inter-broker client (NodeClient): every request succeeds across several session lifetimes,
    on successive connections; none is sent on an expired session."""
    import asyncio

    from controller.network_client import ConnectionSettings, NodeClient

    host, port = secure_broker.bootstrap["SASL_PLAINTEXT"].split(":")

    async def run() -> tuple[int, int]:
        node = NodeClient(host, int(port), ConnectionSettings(client_id="renewal-test",
                                                              security=_sasl_security("SCRAM-SHA-256")))
        seen: set[int] = set()
        answered = 0
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 3.5 * REAUTH_MS / 1000
            while loop.time() < deadline:
                # Two at a time, so a renewal also happens with a request in flight on the old connection.
                results = await asyncio.gather(*(node.request(ApiKey.METADATA, _metadata_request(), timeout=10)
                                                 for _ in range(2)))
                assert all(r.brokers for r in results)
                conn = await node.connection()
                seen.add(id(conn))
                answered += 2
                await asyncio.sleep(0.1)
        finally:
            node.close()
        return answered, len(seen)

    answered, connections = asyncio.run(run())
    assert answered > 20 and connections >= 3


def test_java_double_formatting() -> None:
    from clients.cmd_quotas import java_double

    assert [java_double(v) for v in (1024.0, 0.5, 1e7, 12345678.0, 1e-4, 1.25e20, 9999999.0)] == \
        ["1024.0", "0.5", "1.0E7", "1.2345678E7", "1.0E-4", "1.25E20", "9999999.0"]
