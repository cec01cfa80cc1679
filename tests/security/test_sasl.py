"""SASL on a real broker with real ZooKeeper and real clients (kafka-python, confluent-kafka, kcat), and
by hand over raw sockets where the exact bytes matter (Kafka's messages, the v0 raw-token path).

One broker for the module (``sasl_helpers.SaslBroker``); each test uses topics, groups and SCRAM users
of its own.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import decode_response, encode_request, request_type
from tests.security.sasl_helpers import (
    PLAIN_USERS,
    REAUTH_MS,
    SaslBroker,
    ScramExchange,
    admin_call,
    closed_by_peer,
    kafka_python_config,
    librdkafka_config,
    recv_frame,
    sasl_authenticate,
    sasl_handshake,
    scram_login,
    wait_until,
)

KCAT = shutil.which("kcat") or "kcat"


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest) -> Iterator[SaslBroker]:
    with SaslBroker() as b:
        yield b


@pytest.fixture(autouse=True)
def _broker_log_on_failure(request: pytest.FixtureRequest, broker: SaslBroker) -> None:
    from tests.conftest import attach_cluster

    attach_cluster(request, broker.cluster)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def credentials(broker: SaslBroker, mechanism: str) -> tuple[str, str]:
    """A user for ``mechanism``: a JAAS user for PLAIN, a fresh SCRAM user otherwise."""
    if mechanism == "PLAIN":
        return "alice", PLAIN_USERS["alice"]
    user, password = unique("scram"), unique("pw")
    broker.set_scram(user, password, mechanism)
    return user, password


# -- stock clients ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_produces_and_consumes_in_a_group(broker: SaslBroker, mechanism: str) -> None:
    user, password = credentials(broker, mechanism)
    cfg = kafka_python_config(broker.sasl_bootstrap, mechanism, user, password)
    topic = unique("kp")
    producer = KafkaProducer(acks="all", **cfg)
    try:
        for i in range(10):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
        producer.flush(30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, group_id=unique("g"), auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=20000, **cfg)
    try:
        got = []
        for record in consumer:
            got.append(record.value)
            if len(got) == 10:
                break
        consumer.commit()
    finally:
        consumer.close()
    assert got == [b"v%d" % i for i in range(10)]


def _confluent_round_trip(conf: dict[str, Any], topic: str, n: int = 10) -> list[bytes]:
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for i in range(n):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": unique("g"), "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        wait_until(lambda: _poll_into(consumer, got) >= n, 30, "the records")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def _poll_into(consumer: Consumer, got: list[bytes]) -> int:
    msg = consumer.poll(0.5)
    if msg is not None:
        if msg.error():
            raise KafkaException(msg.error())
        got.append(msg.value() or b"")
    return len(got)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_produces_and_consumes_in_a_group(broker: SaslBroker, mechanism: str) -> None:
    user, password = credentials(broker, mechanism)
    topic = unique("ck")
    got = _confluent_round_trip(librdkafka_config(broker.sasl_bootstrap, mechanism, user, password), topic)
    assert got == [b"v%d" % i for i in range(10)]


def kcat(broker: SaslBroker, mechanism: str, user: str, password: str, *args: str,
         stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KCAT, "-b", broker.sasl_bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
                           "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}",
                           "-X", f"sasl.password={password}", *args],
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_kcat_over_sasl_scram_sha_512(broker: SaslBroker) -> None:
    user, password = credentials(broker, "SCRAM-SHA-512")
    topic = unique("kcat")
    done = kcat(broker, "SCRAM-SHA-512", user, password, "-P", "-t", topic, "-K:", stdin="a:1\nb:2\nc:3\n")
    assert done.returncode == 0, done.stderr
    out = kcat(broker, "SCRAM-SHA-512", user, password, "-C", "-t", topic, "-e", "-o", "beginning",
               "-f", "%k=%s\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["a=1", "b=2", "c=3"]


# -- failures --------------------------------------------------------------------------------------------


def test_wrong_credentials_fail_for_stock_clients_and_others_are_served(
        broker: SaslBroker, caplog: pytest.LogCaptureFixture) -> None:
    scram_user, scram_password = credentials(broker, "SCRAM-SHA-256")
    failed = "kafka_server_socket_server_metrics_failed_authentication_total"
    failed_before = broker.metric(failed, "SASL_PLAINTEXT")
    # kafka-python: it sees SASL_AUTHENTICATION_FAILED with the broker's message (and, as it does,
    # keeps retrying until max_block_ms): a wrong PLAIN password, a SCRAM user on the wrong mechanism.
    for mechanism, user, password, message in (
            ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
            ("SCRAM-SHA-512", scram_user, scram_password,
             "Authentication failed during authentication due to invalid credentials with SASL mechanism "
             "SCRAM-SHA-512")):
        caplog.clear()
        cfg = kafka_python_config(broker.sasl_bootstrap, mechanism, user, password)
        with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaPythonError):
            KafkaProducer(**cfg, bootstrap_timeout_ms=1500)
        seen = [r.getMessage() for r in caplog.records]
        assert any("SaslAuthenticationFailedError" in m and message in m for m in seen), seen
    # confluent-kafka: the error is an authentication error with the broker's message.
    errors: list[KafkaError] = []
    producer = Producer({**librdkafka_config(broker.sasl_bootstrap, "SCRAM-SHA-256", scram_user, "wrong"),
                         "error_cb": errors.append})
    try:
        wait_until(lambda: producer.poll(0.2) is not None and bool(errors), 30, "an authentication error")
    finally:
        producer.flush(0)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("invalid credentials with SASL mechanism SCRAM-SHA-256" in e.str() for e in errors), errors
    # A good client is still served.
    got = _confluent_round_trip(librdkafka_config(broker.sasl_bootstrap, "SCRAM-SHA-256", scram_user,
                                                  scram_password), unique("after"), 3)
    assert got == [b"v0", b"v1", b"v2"]
    assert "Failed authentication with" in broker.log_text()
    # Every refused login is counted, per listener, under Kafka's socket-server metric name.
    assert broker.metric(failed, "SASL_PLAINTEXT") >= failed_before + 3
    assert broker.metric("kafka_server_socket_server_metrics_successful_authentication_total",
                         "SASL_PLAINTEXT") >= 1


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=20)


def test_failures_carry_kafkas_errors_and_close_the_connection(broker: SaslBroker) -> None:
    user, password = credentials(broker, "SCRAM-SHA-256")
    # PLAIN, wrong password / unknown user: Kafka's message, then the connection is closed.
    for token in (b"\0alice\0wrong", b"\0nobody\0x"):
        with _connect(broker.sasl_port) as s:
            assert sasl_handshake(s, "PLAIN")[1].error_code == 0
            resp = sasl_authenticate(s, token)
            assert (resp.error_code, resp.error_message) == (
                ErrorCode.SASL_AUTHENTICATION_FAILED, "Authentication failed: Invalid username or password")
            assert closed_by_peer(s)
    # SCRAM, wrong password: refused at the proof.
    with _connect(broker.sasl_port) as s:
        sasl_handshake(s, "SCRAM-SHA-256")
        client = ScramExchange("SCRAM-SHA-256", user, "wrong")
        first = sasl_authenticate(s, client.client_first())
        assert first.error_code == 0
        resp = sasl_authenticate(s, client.client_final(first.auth_bytes), correlation_id=3)
        assert (resp.error_code, resp.error_message) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
        assert closed_by_peer(s)
    # SCRAM, unknown user (or no credential for this mechanism): refused at the first message, same text.
    for mechanism, name in (("SCRAM-SHA-256", "nobody"), ("SCRAM-SHA-512", user)):
        with _connect(broker.sasl_port) as s:
            sasl_handshake(s, mechanism)
            resp = sasl_authenticate(s, ScramExchange(mechanism, name, password).client_first())
            assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert resp.error_message.endswith(f"invalid credentials with SASL mechanism {mechanism}")
            assert closed_by_peer(s)
    # A mechanism the listener does not enable.
    with _connect(broker.sasl_port) as s:
        _, hs = sasl_handshake(s, "GSSAPI")
        assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert sorted(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert closed_by_peer(s)


def test_requests_before_authentication_close_the_connection(broker: SaslBroker) -> None:
    metadata = request_type(ApiKey.METADATA)(topics=[], allow_auto_topic_creation=False)
    with _connect(broker.sasl_port) as s:
        s.sendall(encode_request(ApiKey.METADATA, 1, 1, "raw", metadata))
        assert closed_by_peer(s)
    # After the handshake, only SaslAuthenticate is expected.
    with _connect(broker.sasl_port) as s:
        sasl_handshake(s, "PLAIN")
        s.sendall(encode_request(ApiKey.METADATA, 1, 2, "raw", metadata))
        assert closed_by_peer(s)
    # ApiVersions is answered before the handshake (the advertised versions, SASL's included).
    with _connect(broker.sasl_port) as s:
        s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "raw", request_type(ApiKey.API_VERSIONS)()))
        keys = {k.api_key for k in decode_response(ApiKey.API_VERSIONS, 0, recv_frame(s))[1].api_keys}
        assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.METADATA} <= keys
        assert sasl_handshake(s, "PLAIN")[1].error_code == 0
        assert sasl_authenticate(s, b"\0alice\0alice-secret").error_code == 0
        s.sendall(encode_request(ApiKey.METADATA, 1, 3, "raw", metadata))
        assert decode_response(ApiKey.METADATA, 1, recv_frame(s))[0] == 3
        # Authenticated, without session expiry: another SaslAuthenticate is out of place.
        resp = sasl_authenticate(s, b"\0alice\0alice-secret", correlation_id=4)
        assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_v0_handshake_then_raw_tokens(broker: SaslBroker) -> None:
    metadata = request_type(ApiKey.METADATA)(topics=[], allow_auto_topic_creation=False)
    # PLAIN: one bare token, answered with an empty bare frame.
    with _connect(broker.sasl_port) as s:
        _, hs = sasl_handshake(s, "PLAIN", version=0)
        assert hs.error_code == 0
        token = b"\0bob\0bob-secret"
        s.sendall(len(token).to_bytes(4, "big") + token)
        assert recv_frame(s) == b""
        s.sendall(encode_request(ApiKey.METADATA, 1, 5, "raw", metadata))
        assert decode_response(ApiKey.METADATA, 1, recv_frame(s))[0] == 5
    # SCRAM: two rounds of bare tokens; the server's signature proves it knew the credential.
    user, password = credentials(broker, "SCRAM-SHA-512")
    with _connect(broker.sasl_port) as s:
        sasl_handshake(s, "SCRAM-SHA-512", version=0)
        client = ScramExchange("SCRAM-SHA-512", user, password)
        first = client.client_first()
        s.sendall(len(first).to_bytes(4, "big") + first)
        final = client.client_final(recv_frame(s))
        s.sendall(len(final).to_bytes(4, "big") + final)
        assert client.server_final_ok(recv_frame(s))
        s.sendall(encode_request(ApiKey.METADATA, 1, 6, "raw", metadata))
        assert decode_response(ApiKey.METADATA, 1, recv_frame(s))[0] == 6
    # A wrong password on the raw path: no answer, the connection is closed.
    with _connect(broker.sasl_port) as s:
        sasl_handshake(s, "PLAIN", version=0)
        token = b"\0bob\0wrong"
        s.sendall(len(token).to_bytes(4, "big") + token)
        assert closed_by_peer(s)


def test_oversized_token_before_authentication_is_refused(broker: SaslBroker) -> None:
    # sasl.server.max.receive.size (512 KiB by default) bounds frames until the client is authenticated.
    with _connect(broker.sasl_port) as s:
        sasl_handshake(s, "PLAIN")
        s.sendall((1 << 20).to_bytes(4, "big") + b"\0" * 1024)
        assert closed_by_peer(s)


# -- SCRAM credentials follow ZooKeeper --------------------------------------------------------------------


def test_scram_users_added_and_changed_without_restart(broker: SaslBroker) -> None:
    user = unique("dave")
    assert not scram_login(broker.sasl_port, "SCRAM-SHA-256", user, "first")
    broker.set_scram(user, "first", "SCRAM-SHA-256", wait=False)
    wait_until(lambda: scram_login(broker.sasl_port, "SCRAM-SHA-256", user, "first"), 30, "the new user to log in")
    broker.set_scram(user, "second", "SCRAM-SHA-256", iterations=8192, wait=False)
    wait_until(lambda: scram_login(broker.sasl_port, "SCRAM-SHA-256", user, "second"), 30, "the new password to count")
    assert not scram_login(broker.sasl_port, "SCRAM-SHA-256", user, "first")
    # And a stock client logs in with it.
    got = _confluent_round_trip(librdkafka_config(broker.sasl_bootstrap, "SCRAM-SHA-256", user, "second"),
                                unique("changed"), 2)
    assert got == [b"v0", b"v1"]


# -- re-authentication (KIP-368) ---------------------------------------------------------------------------


class _Lines(logging.Handler):
    """librdkafka's debug log lines (confluent-kafka hands them to a Python logger)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def count(self, needle: str, thread: str = "") -> int:
        return sum(needle in line and thread in line for line in list(self.lines))


@pytest.mark.slow  # about 10 s or more; make test keeps the by-hand re-authentication and the clients' session renewal
def test_reauthentication_keeps_a_consumer_going_and_a_changed_password_counts(broker: SaslBroker) -> None:
    """On the REAUTH listener sessions last REAUTH_MS: librdkafka learns that from SaslAuthenticate v1+
    and re-authenticates on the same connection before the session ends; the consumer keeps consuming
    across several re-authentications without a reconnect. A password changed meanwhile is checked
    at the next re-authentication, which then fails (and the client is told); with the old password
    back, the client's next connection gets in again."""
    user, password = credentials(broker, "SCRAM-SHA-256")
    topic = unique("reauth")
    lines = _Lines()
    rdkafka_log = logging.getLogger(f"rdkafka.{topic}")
    rdkafka_log.addHandler(lines)
    rdkafka_log.setLevel(logging.DEBUG)
    rdkafka_log.propagate = False
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": broker.admin_bootstrap, "linger.ms": 5})
    consumer = Consumer({**librdkafka_config(broker.reauth_bootstrap, "SCRAM-SHA-256", user, password),
                         "group.id": unique("g"), "auto.offset.reset": "earliest", "debug": "security,broker",
                         "logger": rdkafka_log, "error_cb": errors.append})
    consumed: list[int] = []  # how many re-authentications had happened when each record arrived

    def pump() -> None:
        producer.produce(topic, b"x")
        producer.poll(0)
        msg = consumer.poll(0.1)
        if msg is not None and not msg.error():
            consumed.append(lines.count("UP -> REAUTH", fetcher))

    fetcher = f"/{broker.cluster.brokers[0].broker_id}]:"  # librdkafka's thread for the broker (fetches)
    try:
        consumer.subscribe([topic])
        # Records keep arriving while the fetch connection re-authenticates three times.
        wait_until(lambda: (pump(), bool(consumed) and consumed[-1] >= 3)[1], 40,
                   "records consumed across several re-authentications")
        assert not errors, errors
        assert sorted(set(consumed)) == [0, 1, 2, 3], consumed  # records between every re-authentication
        # One connection throughout: re-authenticated in place, never dropped and reconnected.
        assert lines.count("-> CONNECT", fetcher) == 1
        assert lines.count("-> DOWN", fetcher) == 0
        # The broker sent the session lifetime with the authentication and each re-authentication.
        assert lines.count(f"Received session lifetime {REAUTH_MS} ms from broker", fetcher) >= 3
        # A new password: the next re-authentication (with the old one) fails, and the client hears why.
        broker.set_scram(user, unique("new-pw"), "SCRAM-SHA-256")
        wait_until(lambda: (pump(), bool(errors))[1], 30, "the failed re-authentication")
        assert any(e.code() == KafkaError._AUTHENTICATION and "Authentication failed during re-authentication "
                   "due to invalid credentials with SASL mechanism SCRAM-SHA-256" in e.str() for e in errors), errors
        assert "Failed re-authentication with" in broker.log_text()
        # The old password back: the client, reconnecting with it, is let in again and consumes on.
        broker.set_scram(user, password, "SCRAM-SHA-256")
        before = len(consumed)
        wait_until(lambda: (pump(), len(consumed) > before)[1], 30, "the consumer to be back")
    finally:
        consumer.close()
        producer.flush(5)


def test_reauthentication_by_hand_and_session_end(broker: SaslBroker) -> None:
    metadata = request_type(ApiKey.METADATA)(topics=[], allow_auto_topic_creation=False)
    with _connect(broker.reauth_port) as s:
        sasl_handshake(s, "PLAIN")
        first = sasl_authenticate(s, b"\0alice\0alice-secret")
        assert (first.error_code, first.session_lifetime_ms) == (0, REAUTH_MS)
        # Re-authentication on the same connection: handshake and token again, a new session.
        assert sasl_handshake(s, "PLAIN", correlation_id=3)[1].error_code == 0
        again = sasl_authenticate(s, b"\0alice\0alice-secret", correlation_id=4)
        assert (again.error_code, again.session_lifetime_ms) == (0, REAUTH_MS)
        # Not twice within a second (Kafka's rule): the handshake is then out of place, nothing more.
        assert sasl_handshake(s, "PLAIN", correlation_id=5)[1].error_code == ErrorCode.ILLEGAL_SASL_STATE
        # Requests are served until the session ends; the first one after that closes the connection.
        correlation_id = 6

        def served() -> bool:
            nonlocal correlation_id
            correlation_id += 1
            try:
                s.sendall(encode_request(ApiKey.METADATA, 1, correlation_id, "raw", metadata))
                return decode_response(ApiKey.METADATA, 1, recv_frame(s))[0] == correlation_id
            except (ConnectionError, OSError):
                return False

        wait_until(lambda: not served(), REAUTH_MS / 1000 + 20, "the session to end")
        assert closed_by_peer(s)
    # A re-authentication may not change who the connection belongs to.
    with _connect(broker.reauth_port) as s:
        sasl_handshake(s, "PLAIN")
        assert sasl_authenticate(s, b"\0alice\0alice-secret").error_code == 0
        sasl_handshake(s, "PLAIN", correlation_id=3)
        resp = sasl_authenticate(s, b"\0bob\0bob-secret", correlation_id=4)
        assert (resp.error_code, resp.error_message) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            "Cannot change principals during re-authentication from User.alice: User.bob")
        assert closed_by_peer(s)
    # Nor the mechanism: the handshake is answered, the next token fails the connection.
    user, password = credentials(broker, "SCRAM-SHA-256")
    with _connect(broker.reauth_port) as s:
        sasl_handshake(s, "PLAIN")
        assert sasl_authenticate(s, b"\0alice\0alice-secret").error_code == 0
        assert sasl_handshake(s, "SCRAM-SHA-256", correlation_id=3)[1].error_code == 0
        s.sendall(encode_request(ApiKey.SASL_AUTHENTICATE, 2, 4, "raw", request_type(ApiKey.SASL_AUTHENTICATE)(
            auth_bytes=ScramExchange("SCRAM-SHA-256", user, password).client_first())))
        assert closed_by_peer(s)


# -- the SCRAM credential APIs answer as Kafka's ZooKeeper-mode broker does ------------------------------


def test_scram_credential_apis_validate_as_kafka_does(broker: SaslBroker) -> None:
    al = request_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    ds = request_type(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)

    def up(name: str, mechanism: int = 1, iterations: int = 4096) -> Any:
        return al.ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=b"s" * 16,
                                           salted_password=b"p" * 32)

    good, dup, missing = unique("good"), unique("dup"), unique("missing")
    resp = admin_call(broker.plain_port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, upsertions=[
        up(""), up("mech", mechanism=3), up("few", iterations=4095), up("many", iterations=16385), up(dup), up(dup),
        up(good), up(good, mechanism=2)], deletions=[al.ScramCredentialDeletion(name=missing, mechanism=1)])
    assert {r.user: (r.error_code, r.error_message) for r in resp.results} == {
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "mech": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        dup: (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        missing: (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        good: (ErrorCode.NONE, None)}
    resp = admin_call(broker.plain_port, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=[
        ds.UserName(name=good), ds.UserName(name=missing), ds.UserName(name=""), ds.UserName(name=dup),
        ds.UserName(name=dup)])
    results = {r.user: r for r in resp.results}
    assert [(c.mechanism, c.iterations) for c in results[good].credential_infos] == [(1, 4096), (2, 4096)]
    assert (results[missing].error_code, results[missing].error_message) == (
        ErrorCode.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {missing}")
    assert (results[""].error_code, results[""].error_message) == (
        ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty")
    assert (results[dup].error_code, results[dup].error_message) == (
        ErrorCode.DUPLICATE_RESOURCE,
        f"Cannot describe SCRAM credentials for the same user twice in a single request: {dup}")
    everyone = admin_call(broker.plain_port, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=None)
    names = [r.user for r in everyone.results]
    assert good in names and names == sorted(names) and missing not in names
