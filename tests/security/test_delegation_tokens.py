"""Delegation tokens (KIP-48) on real brokers: the four token APIs, their rules, and SCRAM login with a
token (``tokenauth=true``), as a ZooKeeper-mode Kafka 3.9 serves them.

- The fast tests speak the protocol by hand to one SASL broker (``SaslBroker``): create, describe,
  renew, expire, the HMAC and the ZooKeeper znode in Kafka's format, who may do what, the expiry
  check, and a broker without a secret key.
- The slow test drives Kafka's own ``kafka-delegation-tokens`` tool
  (org.apache.kafka.tools.DelegationTokenCommand, 3.9.1) against a two-broker cluster, and Kafka's
  console producer and consumer authenticate with the token on the broker that did not create it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from clients.devcluster import LocalCluster
from clients.devcluster_secure import write_scram_credentials
from clients.zookeeper_server import free_port
from protocol import scram
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import decode_response, encode_request, request_type
from tests.security.sasl_helpers import (
    PLAIN_USERS,
    SCRAM_MODULE,
    SaslBroker,
    ScramExchange,
    recv_frame,
    sasl_authenticate,
    sasl_handshake,
    wait_until,
)

SECRET = "token-secret-key"
MECHANISM = "SCRAM-SHA-256"
ALICE = ("alice-scram", "alice-scram-secret")


# -- a raw client: one SASL (or plaintext) connection, then requests ------------------------------------


class RawSession:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlation = 10

    def __enter__(self) -> RawSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def scram(self, mechanism: str, user: str, password: str, *, token: bool = False) -> bool:
        """A SCRAM exchange (with the tokenauth extension for a token); whether it succeeded."""
        sasl_handshake(self.sock, mechanism)
        client = ScramExchange(mechanism, user, password)
        if token:
            client.first = scram.ClientFirstMessage(user, client.first.nonce, extensions=(("tokenauth", "true"),))
        first = sasl_authenticate(self.sock, client.client_first())
        if first.error_code:
            return False
        final = sasl_authenticate(self.sock, client.client_final(first.auth_bytes), correlation_id=3)
        return bool(final.error_code == 0 and client.server_final_ok(final.auth_bytes))

    def plain(self, user: str, password: str) -> bool:
        sasl_handshake(self.sock, "PLAIN")
        return bool(sasl_authenticate(self.sock, f"\0{user}\0{password}".encode()).error_code == 0)

    def request(self, api: int, version: int, **fields: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(api, version, self.correlation, "token-test", request_type(api)(**fields)))
        cid, body = decode_response(api, version, recv_frame(self.sock))
        assert cid == self.correlation
        return body

    def create(self, version: int = 3, renewers: tuple[str, ...] = (), max_lifetime_ms: int = -1,
               owner: str | None = None) -> Any:
        ct = request_type(ApiKey.CREATE_DELEGATION_TOKEN)
        return self.request(ApiKey.CREATE_DELEGATION_TOKEN, version,
                            owner_principal_type="User" if owner else None, owner_principal_name=owner,
                            renewers=[ct.CreatableRenewers(principal_type=r.split(":")[0],
                                                           principal_name=r.split(":")[1]) for r in renewers],
                            max_lifetime_ms=max_lifetime_ms)

    def describe(self, version: int = 3, owners: list[str] | None = None) -> Any:
        dt = request_type(ApiKey.DESCRIBE_DELEGATION_TOKEN)
        return self.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, version, owners=None if owners is None else [
            dt.DescribeDelegationTokenOwner(principal_type="User", principal_name=o) for o in owners])

    def renew(self, mac: bytes, period_ms: int, version: int = 2) -> Any:
        return self.request(ApiKey.RENEW_DELEGATION_TOKEN, version, hmac=mac, renew_period_ms=period_ms)

    def expire(self, mac: bytes, period_ms: int, version: int = 2) -> Any:
        return self.request(ApiKey.EXPIRE_DELEGATION_TOKEN, version, hmac=mac, expiry_time_period_ms=period_ms)


def scram_session(port: int, user: str, password: str) -> RawSession:
    session = RawSession(port)
    assert session.scram(MECHANISM, user, password)
    return session


def token_login(port: int, token_id: str, mac: bytes) -> bool:
    with RawSession(port) as s:
        return s.scram(MECHANISM, token_id, base64.b64encode(mac).decode(), token=True)


def token_znode(broker: SaslBroker, token_id: str) -> dict[str, Any] | None:
    zk = KazooClient(hosts=broker.cluster.zk_connect, timeout=20)
    zk.start(20)
    try:
        if zk.exists(f"/delegation_token/tokens/{token_id}") is None:
            return None
        doc: dict[str, Any] = json.loads(zk.get(f"/delegation_token/tokens/{token_id}")[0])
        return doc
    finally:
        zk.stop()
        zk.close()


@pytest.fixture(scope="module")
def broker() -> Iterator[SaslBroker]:
    with SaslBroker(extra={"delegation.token.secret.key": SECRET,
                           "delegation.token.expiry.check.interval.ms": "200"}) as b:
        b.set_scram(*ALICE, MECHANISM)
        yield b


# -- fast: the protocol by hand ------------------------------------------------------------------------


def test_create_describe_renew_expire_and_login_with_the_token(broker: SaslBroker) -> None:
    with scram_session(broker.sasl_port, *ALICE) as alice:
        created = alice.create(renewers=("User:bob",))
        assert created.error_code == 0, created
        assert (created.principal_type, created.principal_name) == ("User", ALICE[0])
        assert (created.token_requester_principal_type, created.token_requester_principal_name) == ("User", ALICE[0])
        token_id, mac = created.token_id, bytes(created.hmac)
        # Kafka's token id (a UUID's 16 bytes, URL-safe base64 without padding) and HMAC.
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", token_id)
        assert mac == hmac.new(SECRET.encode(), token_id.encode(), hashlib.sha512).digest()
        day, week = 24 * 3600 * 1000, 7 * 24 * 3600 * 1000
        assert created.expiry_timestamp_ms - created.issue_timestamp_ms == day
        assert created.max_timestamp_ms - created.issue_timestamp_ms == week

        # Stored where Kafka 3.9 stores it, in its format (principals sanitized, no HMAC).
        assert token_znode(broker, token_id) == {
            "version": 3, "owner": f"User%3A{ALICE[0]}", "tokenRequester": f"User%3A{ALICE[0]}",
            "renewers": ["User%3Abob"], "issueTimestamp": created.issue_timestamp_ms,
            "maxTimestamp": created.max_timestamp_ms, "expiryTimestamp": created.expiry_timestamp_ms,
            "tokenId": token_id}

        described = alice.describe()
        assert described.error_code == 0
        [token] = [t for t in described.tokens if t.token_id == token_id]
        assert (token.principal_name, bytes(token.hmac), [(r.principal_type, r.principal_name) for r in token.renewers]
                ) == (ALICE[0], mac, [("User", "bob")])
        assert alice.describe(owners=[]).tokens == []
        assert [t.token_id for t in alice.describe(owners=["nobody"]).tokens] == []
        assert token_id in [t.token_id for t in alice.describe(version=0, owners=[ALICE[0]]).tokens]

        # SCRAM with the token: the session is the owner's, and it may not create or renew tokens.
        assert token_login(broker.sasl_port, token_id, mac)
        with RawSession(broker.sasl_port) as by_token:
            assert by_token.scram("SCRAM-SHA-512", token_id, base64.b64encode(mac).decode(), token=True)
            refused = by_token.create()
            assert refused.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert (refused.principal_name, refused.token_id, refused.issue_timestamp_ms) == (ALICE[0], "", -1)
            assert by_token.renew(mac, -1).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert by_token.describe().error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        # A wrong password, or the token id without tokenauth, does not log in.
        assert not token_login(broker.sasl_port, token_id, b"not the hmac")
        with RawSession(broker.sasl_port) as s:
            assert not s.scram(MECHANISM, token_id, base64.b64encode(mac).decode())

        # Renew: the renewer may, another user may not; the expiry never passes the maximum.
        with RawSession(broker.sasl_port) as bob:
            assert bob.plain("bob", PLAIN_USERS["bob"])
            renewed = bob.renew(mac, 3600 * 1000)
            assert renewed.error_code == 0
            assert renewed.expiry_timestamp_ms <= created.max_timestamp_ms
            assert token_znode(broker, token_id)["expiryTimestamp"] == renewed.expiry_timestamp_ms  # type: ignore[index]
            # The renewer sees the token without any ACL.
            assert token_id in [t.token_id for t in bob.describe().tokens]
        with RawSession(broker.sasl_port) as admin:
            assert admin.plain("admin", PLAIN_USERS["admin"])
            assert admin.renew(mac, 1000).error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
            assert admin.expire(mac, -1).error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        assert alice.renew(b"\x01" * 64, 1000).error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND

        # Expire with a negative period: gone at once, everywhere.
        expired = alice.expire(mac, -1)
        assert expired.error_code == 0 and expired.expiry_timestamp_ms > 0
        assert token_znode(broker, token_id) is None
        assert token_id not in [t.token_id for t in alice.describe().tokens]
        assert not token_login(broker.sasl_port, token_id, mac)
        assert alice.expire(mac, -1).error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_a_token_session_ends_when_the_token_expires(broker: SaslBroker) -> None:
    """Kafka's CREDENTIAL_LIFETIME_MS: the session a token opens lasts until the token's expiry (there is
    no connections.max.reauth.ms here), and SaslAuthenticate v1+ tells the client so."""
    with scram_session(broker.sasl_port, *ALICE) as alice:
        created = alice.create()
        assert created.error_code == 0
        token_id, mac = created.token_id, bytes(created.hmac)
        renewed = alice.renew(mac, 60_000)  # the expiry comes a minute from now
        assert renewed.error_code == 0
        with socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=30) as s:
            sasl_handshake(s, MECHANISM)
            client = ScramExchange(MECHANISM, token_id, base64.b64encode(mac).decode())
            client.first = scram.ClientFirstMessage(token_id, client.first.nonce, extensions=(("tokenauth", "true"),))
            first = sasl_authenticate(s, client.client_first())
            assert first.error_code == 0, first
            final = sasl_authenticate(s, client.client_final(first.auth_bytes), correlation_id=3)
            assert final.error_code == 0 and client.server_final_ok(final.auth_bytes)
            assert 0 < final.session_lifetime_ms <= 60_000, final
        # A password login's session does not end (connections.max.reauth.ms is 0).
        with socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=30) as s:
            sasl_handshake(s, MECHANISM)
            client = ScramExchange(MECHANISM, *ALICE)
            first = sasl_authenticate(s, client.client_first())
            final = sasl_authenticate(s, client.client_final(first.auth_bytes), correlation_id=3)
            assert final.error_code == 0 and final.session_lifetime_ms == 0, final
        assert alice.expire(mac, -1).error_code == 0


def test_token_requests_need_an_authenticated_non_token_session(broker: SaslBroker) -> None:
    with RawSession(broker.plain_port) as plaintext:
        refused = plaintext.create(version=1)
        assert refused.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert (refused.principal_type, refused.principal_name) == ("User", "ANONYMOUS")
        for call in (plaintext.renew(b"x", 1), plaintext.expire(b"x", 1), plaintext.describe()):
            assert call.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    with scram_session(broker.sasl_port, *ALICE) as alice:
        # Renewers must be Users.
        assert alice.create(renewers=("Group:ops",)).error_code == ErrorCode.INVALID_PRINCIPAL_TYPE
        # Without an authorizer, creating a token for another owner is allowed (as Kafka: no authorizer,
        # every authorize() is true); the requester is kept.
        other = alice.create(owner="carol")
        assert other.error_code == 0
        assert (other.principal_name, other.token_requester_principal_name) == ("carol", ALICE[0])
        # The requester may describe, not renew: that is the owner's or a renewer's.
        assert other.token_id in [t.token_id for t in alice.describe().tokens]
        assert alice.renew(bytes(other.hmac), 1000).error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        # The session of carol's token is carol's.
        assert token_login(broker.sasl_port, other.token_id, bytes(other.hmac))
        # A positive expiry period only moves the expiry; the expiry check then removes the token.
        short = alice.create(max_lifetime_ms=60_000)
        assert short.error_code == 0 and short.max_timestamp_ms - short.issue_timestamp_ms == 60_000
        moved = alice.expire(bytes(short.hmac), 300)
        assert moved.error_code == 0 and moved.expiry_timestamp_ms < short.max_timestamp_ms
        wait_until(lambda: token_znode(broker, short.token_id) is None, 30, "the expiry check to remove the token")
        assert short.token_id not in [t.token_id for t in alice.describe().tokens]
        assert alice.renew(bytes(short.hmac), 1000).error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_without_a_secret_key_every_token_api_is_disabled() -> None:
    with SaslBroker() as b:
        b.set_scram(*ALICE, MECHANISM)
        with scram_session(b.sasl_port, *ALICE) as alice:
            assert alice.create().error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
            assert alice.renew(b"x", 1).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
            assert alice.expire(b"x", 1).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
            described = alice.describe()
            assert (described.error_code, described.tokens) == (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, [])
        # Kafka checks the channel first: PLAINTEXT is refused as not allowed, not as disabled.
        with RawSession(b.plain_port) as plaintext:
            assert plaintext.create().error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


# -- slow: Kafka's own tool and clients, two brokers -----------------------------------------------------

JAVA_SECRET = "alice-java-secret"
TOOL = "org.apache.kafka.tools.DelegationTokenCommand"


def java(main_class: str, *args: str, stdin: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """A Kafka 3.9.1 tool from the Maven Central jars (tests/kafka_dist.py), its exit status kept."""
    from tests.kafka_dist import classpath

    return subprocess.run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath(), main_class, *args],
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def client_properties(path: Path, user: str, password: str, *, token: bool = False) -> Path:
    extra = ' tokenauth="true"' if token else ""
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={MECHANISM}\n"
                    f'sasl.jaas.config={SCRAM_MODULE} required username="{user}" password="{password}"{extra};\n')
    return path


class TokenTool:
    """``kafka-delegation-tokens.sh`` against one bootstrap server, as one user."""

    def __init__(self, bootstrap: str, config: Path) -> None:
        self.bootstrap, self.config = bootstrap, config

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return java(TOOL, "--bootstrap-server", self.bootstrap, "--command-config", str(self.config), *args)

    def ok(self, *args: str) -> str:
        proc = self.run(*args)
        assert proc.returncode == 0, f"{args}: {proc.stdout}\n{proc.stderr}"
        return proc.stdout

    def create(self, *args: str) -> tuple[str, str, str]:
        """(token id, HMAC, the tool's output)."""
        out = self.ok("--create", *args)
        rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith(("TOKENID", "Call"))
                and not line.startswith("Created")]
        token_id, mac = rows[-1][0], rows[-1][1]
        assert f"Created delegation token with tokenId : {token_id}" in out
        return token_id, mac, out

    def described(self, *args: str) -> list[list[str]]:
        out = self.ok("--describe", *args)
        assert "Total number of tokens" in out
        return [line.split() for line in out.splitlines()
                if line.strip() and not line.startswith(("TOKENID", "Call", "Total"))]


def sasl_listeners(sasl_ports: list[int]) -> Any:
    def overrides(broker_id: int, port: int) -> dict[str, str]:
        spec = f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_ports[broker_id]}"
        return {"listeners": spec, "advertised.listeners": spec}
    return overrides


def transcript(tool: TokenTool, renewer_tool: TokenTool) -> list[str]:
    """One create/describe/renew/expire session with the tool, normalised (ids, HMACs and dates out)."""
    steps = []
    token_id, mac, out = tool.create("--max-life-time-period", "-1", "--renewer-principal", "User:bob")
    steps.append(out.replace(token_id, "<id>").replace(mac, "<hmac>"))
    steps.append(repr(tool.described()))
    rows = tool.described("--owner-principal", "User:alice")
    steps.append(repr(sorted((r[0] == token_id, r[2], r[3], r[4]) for r in rows)))
    steps.append(repr(renewer_tool.run("--renew", "--hmac", mac, "--renew-time-period", "-1").returncode))
    renewed = tool.ok("--renew", "--hmac", mac, "--renew-time-period", "3600000")
    steps.append(re.sub(r"date : .*", "date : <date>", renewed.replace(mac, "<hmac>")))
    expired = tool.ok("--expire", "--hmac", mac, "--expiry-time-period", "-1")
    steps.append(re.sub(r"date : .*", "date : <date>", expired.replace(mac, "<hmac>")))
    steps.append(repr([r[0] for r in tool.described("--owner-principal", "User:alice") if r[0] == token_id]))
    return [re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d", "<date>", step) for step in steps]


@pytest.mark.slow
def test_kafka_tool_and_java_clients_with_a_token_across_brokers(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    sasl_ports = [free_port(), free_port()]
    overrides = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                 "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": MECHANISM,
                 f"listener.name.sasl_plaintext.{MECHANISM.lower()}.sasl.jaas.config": f"{SCRAM_MODULE} required;",
                 "delegation.token.secret.key": SECRET}
    users = {"alice": JAVA_SECRET, "bob": "bob-java-secret"}
    with LocalCluster(2, overrides=overrides, broker_overrides=sasl_listeners(sasl_ports),
                      before_brokers=lambda zk: write_scram_credentials(zk, users, MECHANISM)) as cluster:
        creator = TokenTool(f"127.0.0.1:{sasl_ports[0]}", client_properties(tmp_path / "alice.properties",
                                                                             "alice", JAVA_SECRET))
        token_id, mac, _ = creator.create("--max-life-time-period", "-1", "--renewer-principal", "User:bob")
        # Without --owner-principal the tool asks for an empty owner list, which Kafka answers with no tokens.
        assert creator.described() == []
        [row] = [r for r in creator.described("--owner-principal", "User:alice") if r[0] == token_id]
        assert row[1:5] == [mac, "User:alice", "User:alice", "[User:bob]"]

        # Through the other broker: bob (a renewer) sees and renews it.
        other = TokenTool(f"127.0.0.1:{sasl_ports[1]}", client_properties(tmp_path / "bob.properties",
                                                                           "bob", users["bob"]))
        wait_until(lambda: any(r[0] == token_id for r in other.described("--owner-principal", "User:alice")), 30,
                   "broker 1 to know the token")
        assert "Completed renew operation." in other.ok("--renew", "--hmac", mac, "--renew-time-period", "-1")

        # A Java producer and consumer authenticate with the token on broker 1, which did not create it,
        # for a topic that lives only there.
        admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[0].bootstrap)
        try:
            admin.create_topics([NewTopic("by-token", num_partitions=-1, replication_factor=-1,
                                          replica_assignments={0: [1]})])
        finally:
            admin.close()
        with_token = client_properties(tmp_path / "token.properties", token_id, mac, token=True)
        by_token = f"127.0.0.1:{sasl_ports[1]}"
        produced = java("kafka.tools.ConsoleProducer", "--bootstrap-server", by_token, "--topic", "by-token",
                        "--producer.config", str(with_token), stdin="one\ntwo\nthree\n")
        assert produced.returncode == 0, produced.stderr
        consumed = java("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", by_token,
                        "--topic", "by-token", "--from-beginning", "--max-messages", "3", "--timeout-ms", "60000",
                        "--consumer.config", str(with_token))
        assert consumed.stdout.split() == ["one", "two", "three"], consumed.stderr

        # A session the token authenticated may not create tokens.
        refused = TokenTool(by_token, with_token).run("--create", "--max-life-time-period", "-1")
        assert refused.returncode != 0 and "not allowed" in refused.stdout + refused.stderr

        # Expired through broker 0: refused on broker 1.
        assert "Completed expire operation." in creator.ok("--expire", "--hmac", mac, "--expiry-time-period", "-1")
        wait_until(lambda: not token_login(sasl_ports[1], token_id, base64.b64decode(mac)), 30,
                   "broker 1 to forget the expired token")
        # A Java client with the expired token is refused at authentication (the tool's admin client
        # reports the SaslAuthenticationException).
        after = TokenTool(by_token, with_token).run("--describe", "--owner-principal", "User:alice")
        assert after.returncode != 0
        assert "Authentication failed" in after.stdout + after.stderr, after.stdout + after.stderr


@pytest.mark.slow
def test_token_tool_transcript_matches_apache_kafka(tmp_path: Path) -> None:
    from tests.ops.kafka_broker import KafkaZkBroker

    users = {"alice": JAVA_SECRET, "bob": "bob-java-secret"}
    sasl_port = free_port()
    sasl = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": MECHANISM,
            f"listener.name.sasl_plaintext.{MECHANISM.lower()}.sasl.jaas.config": f"{SCRAM_MODULE} required;",
            "delegation.token.secret.key": SECRET}
    alice = client_properties(tmp_path / "alice.properties", "alice", JAVA_SECRET)
    bob = client_properties(tmp_path / "bob.properties", "bob", users["bob"])

    kafka = KafkaZkBroker(sasl)
    kafka.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    try:
        kafka.start()
        write_scram_credentials(f"{kafka.zk.connect_string}/kafka", users, MECHANISM)
        theirs_tool = TokenTool(f"127.0.0.1:{sasl_port}", alice)
        wait_until(lambda: theirs_tool.run("--describe").returncode == 0, 60, "Kafka to know alice")
        theirs = transcript(theirs_tool, TokenTool(f"127.0.0.1:{sasl_port}", bob))
    finally:
        kafka.stop()

    ours_port = free_port()
    with LocalCluster(1, overrides=sasl, broker_overrides=sasl_listeners([ours_port]),
                      before_brokers=lambda zk: write_scram_credentials(zk, users, MECHANISM)):
        ours = transcript(TokenTool(f"127.0.0.1:{ours_port}", alice), TokenTool(f"127.0.0.1:{ours_port}", bob))
    assert ours == theirs


# -- fast: the ACLs Kafka checks (an authorizer, a super user to grant them) ------------------------------

USER_RESOURCE, TOKEN_RESOURCE = 7, 6  # Kafka's ResourceType codes
CREATE_TOKENS, DESCRIBE_TOKENS, DESCRIBE = 13, 14, 8  # Kafka's AclOperation codes


def grant(session: RawSession, principal: str, resource_type: int, name: str, operation: int) -> None:
    ca = request_type(ApiKey.CREATE_ACLS)
    created = session.request(ApiKey.CREATE_ACLS, 3, creations=[ca.AclCreation(
        resource_type=resource_type, resource_name=name, resource_pattern_type=3, principal=principal, host="*",
        operation=operation, permission_type=3)])
    assert [r.error_code for r in created.results] == [0], created


def test_acls_for_other_owners_and_for_describe() -> None:
    with SaslBroker(extra={"delegation.token.secret.key": SECRET,
                           "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                           # ANONYMOUS: the brokers themselves (inter-broker PLAINTEXT) and the SCRAM set-up.
                           "super.users": "User:admin;User:ANONYMOUS"}) as b:
        b.set_scram(*ALICE, MECHANISM)
        with scram_session(b.sasl_port, *ALICE) as alice, RawSession(b.sasl_port) as admin, \
                RawSession(b.sasl_port) as bob:
            assert admin.plain("admin", PLAIN_USERS["admin"]) and bob.plain("bob", PLAIN_USERS["bob"])
            # A token for another owner needs CREATE_TOKENS on that User.
            denied = alice.create(owner="carol")
            assert denied.error_code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
            assert (denied.principal_name, denied.token_requester_principal_name) == ("carol", ALICE[0])
            grant(admin, f"User:{ALICE[0]}", USER_RESOURCE, "User:carol", CREATE_TOKENS)
            wait_until(lambda: alice.create(owner="carol").error_code == 0, 30, "the CREATE_TOKENS ACL to count")
            # Her own tokens need no ACL.
            own = alice.create()
            assert own.error_code == 0

            # bob (neither owner, requester nor renewer) sees a token only through an ACL: DESCRIBE on
            # the token, or DESCRIBE_TOKENS on its owner.
            assert own.token_id not in [t.token_id for t in bob.describe().tokens]
            grant(admin, "User:bob", TOKEN_RESOURCE, own.token_id, DESCRIBE)
            wait_until(lambda: [t.token_id for t in bob.describe().tokens] == [own.token_id], 30,
                       "the DESCRIBE ACL on the token to count")
            grant(admin, "User:bob", USER_RESOURCE, "User:carol", DESCRIBE_TOKENS)
            wait_until(lambda: len(bob.describe().tokens) == 2, 30, "the DESCRIBE_TOKENS ACL to count")
            assert {t.principal_name for t in bob.describe().tokens} == {ALICE[0], "carol"}
            # The requester sees the token it made for carol; the super user sees everything.
            assert len(alice.describe().tokens) == 2 and len(admin.describe().tokens) == 2
