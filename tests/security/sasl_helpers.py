"""A single real broker (with its own real ZooKeeper) whose listeners speak SASL, and the small tools
the SASL tests share: SCRAM users set through AlterUserScramCredentials, raw SASL exchanges by hand,
and the client settings for kafka-python, confluent-kafka and kcat.

Listeners of ``SaslBroker``:

- ``PLAINTEXT``: inter-broker and admin (SCRAM credentials are altered there, as an operator would);
- ``SASL_PLAINTEXT``: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, each with its JAAS config set as
  ``listener.name.sasl_plaintext.<mechanism>.sasl.jaas.config``; sessions do not end;
- ``REAUTH`` (mapped to SASL_PLAINTEXT): the same mechanisms with one broker-wide ``sasl.jaas.config``
  holding both login modules, and ``listener.name.reauth.connections.max.reauth.ms`` short, so
  clients must re-authenticate (KIP-368) every few seconds.

SASL_SSL is tested on an in-process broker with the TLS fixtures of ``conftest.py``
(``test_sasl_ssl.py``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from clients.devcluster import LocalCluster
from clients.zookeeper_server import free_port
from protocol import scram
from protocol.api_versions import ApiKey
from protocol.messages import decode_response, encode_request, request_type

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
# PLAIN users live in the JAAS config; SCRAM users are added by the tests through the admin listener.
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
REAUTH_MS = 4000


def plain_jaas(users: dict[str, str]) -> str:
    options = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return f'{PLAIN_MODULE} required username="admin" password="admin-secret" {options};'


def scram_jaas() -> str:
    return f'{SCRAM_MODULE} required username="admin" password="admin-secret";'


class SaslBroker:
    def __init__(self, *, extra: dict[str, str] | None = None) -> None:
        self.plain_port, self.sasl_port, self.reauth_port = free_port(), free_port(), free_port()
        listeners = {"PLAINTEXT": self.plain_port, "SASL_PLAINTEXT": self.sasl_port, "REAUTH": self.reauth_port}
        protocols = {"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "REAUTH": "SASL_PLAINTEXT"}
        spec = ",".join(f"{name}://127.0.0.1:{port}" for name, port in listeners.items())
        overrides = {
            "listeners": spec,
            "advertised.listeners": spec,
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocols.items()),
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": scram_jaas(),
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scram_jaas(),
            # One broker-wide JAAS config with both login modules serves every mechanism of REAUTH.
            "sasl.jaas.config": f"{plain_jaas(PLAIN_USERS)} {scram_jaas()}",
            "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
            "group.initial.rebalance.delay.ms": "0",
        }
        overrides.update(extra or {})
        self.cluster = LocalCluster(1, base_port=self.plain_port, overrides=overrides, metrics_base_port=0)

    def metric(self, name: str, listener: str) -> float:
        """One series of the broker's Prometheus endpoint, e.g. a socket-server-metrics counter."""
        import urllib.request

        url = self.cluster.brokers[0].metrics_url
        assert url is not None
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        for line in text.splitlines():
            if line.startswith(f'{name}{{listener="{listener}"}} '):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"{name} for listener {listener} not exported")

    def __enter__(self) -> SaslBroker:
        self.cluster.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cluster.__exit__(None, None, None)

    @property
    def admin_bootstrap(self) -> str:
        return f"127.0.0.1:{self.plain_port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def reauth_bootstrap(self) -> str:
        return f"127.0.0.1:{self.reauth_port}"

    def log_text(self) -> str:
        return self.cluster.brokers[0].log_text()

    # -- SCRAM users, as kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]' does -----

    def set_scram(self, user: str, password: str, mechanism: str, iterations: int = 4096, *,
                  wait: bool = True) -> None:
        """Upsert ``user``'s credential; with ``wait``, return once the broker accepts it (the broker
        answers when ZooKeeper has it; its credential cache follows the change notification a moment
        later, as every broker's does in Kafka)."""
        upsert_scram(self.plain_port, user, password, mechanism, iterations)
        if wait:
            wait_until(lambda: scram_login(self.sasl_port, mechanism, user, password), 30,
                       f"the {mechanism} credential of {user} to count")



def upsert_scram(port: int, user: str, password: str, mechanism: str, iterations: int = 4096) -> None:
    """AlterUserScramCredentials over the PLAINTEXT listener on ``port`` (the client salts the
    password, as Kafka's admin client does)."""
    al = request_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac(scram.MECHANISMS[mechanism], password.encode(), salt, iterations)
    resp = admin_call(port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, deletions=[], upsertions=[
        al.ScramCredentialUpsertion(name=user, mechanism=SCRAM_TYPES[mechanism], iterations=iterations,
                                    salt=salt, salted_password=salted)])
    assert [(r.user, r.error_code) for r in resp.results] == [(user, 0)], resp


def admin_call(port: int, api: int, version: int, **fields: Any) -> Any:
    """One request over a fresh PLAINTEXT connection; the decoded response body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(encode_request(api, version, 1, "sasl-test", request_type(api)(**fields)))
        return decode_response(api, version, recv_frame(s))[1]


def sasl_handshake(s: socket.socket, mechanism: str, version: int = 1, correlation_id: int = 1) -> Any:
    """(correlation id, SaslHandshake response body)."""
    s.sendall(encode_request(ApiKey.SASL_HANDSHAKE, version, correlation_id, "raw",
                             request_type(ApiKey.SASL_HANDSHAKE)(mechanism=mechanism)))
    return decode_response(ApiKey.SASL_HANDSHAKE, version, recv_frame(s))


def sasl_authenticate(s: socket.socket, token: bytes, version: int = 2, correlation_id: int = 2) -> Any:
    """The SaslAuthenticate response body for ``token``."""
    s.sendall(encode_request(ApiKey.SASL_AUTHENTICATE, version, correlation_id, "raw",
                             request_type(ApiKey.SASL_AUTHENTICATE)(auth_bytes=token)))
    return decode_response(ApiKey.SASL_AUTHENTICATE, version, recv_frame(s))[1]


def scram_login(port: int, mechanism: str, user: str, password: str) -> bool:
    """Whether a SCRAM exchange by hand succeeds (and the broker proves it knows the credential)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        sasl_handshake(s, mechanism)
        client = ScramExchange(mechanism, user, password)
        first = sasl_authenticate(s, client.client_first())
        if first.error_code:
            return False
        final = sasl_authenticate(s, client.client_final(first.auth_bytes), correlation_id=3)
        return bool(final.error_code == 0 and client.server_final_ok(final.auth_bytes))


def recv_frame(s: socket.socket) -> bytes:
    head = s.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        raise ConnectionError("closed by the broker")
    (n,) = struct.unpack(">i", head)
    body = s.recv(n, socket.MSG_WAITALL) if n else b""
    if len(body) < n:
        raise ConnectionError("closed by the broker")
    return body


def closed_by_peer(s: socket.socket) -> bool:
    """Whether the broker closed ``s`` (reads until EOF, within the socket's timeout)."""
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def wait_until(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


# -- client settings ------------------------------------------------------------------------------------


def kafka_python_config(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}


def librdkafka_config(bootstrap: str, mechanism: str, user: str, password: str,
                      protocol: str = "SASL_PLAINTEXT") -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": protocol, "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


# -- a SCRAM client exchange by hand (protocol/scram), for raw-socket tests ------------------------------


class ScramExchange:
    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.mechanism, self.password = mechanism, password
        self.first = scram.ClientFirstMessage(user, scram.new_nonce())
        self.server_first: scram.ServerFirstMessage | None = None
        self.final: scram.ClientFinalMessage | None = None
        self.salted = b""

    def client_first(self) -> bytes:
        return self.first.encode()

    def client_final(self, server_first: bytes) -> bytes:
        sf = self.server_first = scram.ServerFirstMessage.decode(server_first)
        self.salted = scram.salted_password(self.mechanism, self.password, sf.salt, sf.iterations)
        binding = base64.b64encode(self.first.gs2_header.encode()).decode()
        without_proof = scram.ClientFinalMessage(binding, sf.nonce)
        proof = scram.client_proof(self.mechanism, self.salted,
                                   scram.auth_message(self.first, sf, without_proof))
        self.final = scram.ClientFinalMessage(binding, sf.nonce, proof)
        return self.final.encode()

    def server_final_ok(self, server_final: bytes) -> bool:
        assert self.server_first is not None and self.final is not None
        msg = scram.ServerFinalMessage.decode(server_final)
        expected = scram.server_signature(self.mechanism, scram.server_key(self.mechanism, self.salted),
                                          scram.auth_message(self.first, self.server_first, self.final))
        return msg.error is None and msg.server_signature == expected
