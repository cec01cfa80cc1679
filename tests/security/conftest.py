"""Fixtures for the security tests: certificates, and single brokers with extra listeners.

``certs`` (session): one CA with a broker certificate and a client certificate, and a second CA nobody
trusts with a client certificate of its own, as files (PEM, encrypted PEM, PKCS12) and PEM strings.

``tls_broker_factory``: start an in-process broker (its own event loop in a thread) on the session's
ZooKeeper with a PLAINTEXT listener plus whatever listeners and configs a test adds::

    broker = tls_broker_factory({"SSL": "SSL", "MTLS": "SSL"}, {**certs.broker_ssl_props(),
                                "listener.name.mtls.ssl.client.auth": "required"})
    broker.bootstrap("MTLS")      # "127.0.0.1:<port>"
    broker.broker                 # the Broker object: connections, listener_tls, stats

Being in process, a test can look at what the broker made of a connection (its principal) and count
what went through TLS; the broker still only talks to clients over real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clients.certificates import CertificateAuthority, IssuedCertificate

# Fixed ports for these tests (each checked free before use), away from other suites' ranges.
PORT_RANGE = range(21000, 21500)
_next_port = [PORT_RANGE.start]

KEY_PASSWORD = "key-secret"
STORE_PASSWORD = "store-secret"
CLIENT_DN = "CN=alice,OU=eng,O=kafkette"


def take_port(host: str = "127.0.0.1") -> int:
    """The next port of PORT_RANGE that nobody listens on now (wrapping around)."""
    for _ in range(len(PORT_RANGE)):
        port = _next_port[0]
        _next_port[0] = port + 1 if port + 1 < PORT_RANGE.stop else PORT_RANGE.start
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker binds
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORT_RANGE}")


@dataclass(frozen=True)
class Party:
    """A certificate holder as files and PEM text."""

    issued: IssuedCertificate
    cert_file: Path  # leaf certificate
    chain_file: Path  # leaf + CA
    key_file: Path  # unencrypted PKCS#8 key
    encrypted_key_file: Path  # the key encrypted with KEY_PASSWORD
    keystore_pem: Path  # encrypted key + chain in one file (ssl.keystore.type=PEM)
    pkcs12: Path  # key + chain, store and key password STORE_PASSWORD

    @property
    def chain_pem(self) -> str:
        return self.issued.chain_pem

    def key_pem(self, password: str | None = None) -> str:
        return self.issued.key_pem(password)

    @property
    def subject(self) -> str:
        return self.issued.subject


def make_party(directory: Path, stem: str, issued: IssuedCertificate) -> Party:
    plain = issued.write_pem(directory, stem)
    encrypted = issued.write_pem(directory, f"{stem}-enc", key_password=KEY_PASSWORD)
    p12 = issued.write_pkcs12(directory / f"{stem}.p12", STORE_PASSWORD)
    return Party(issued, plain.cert, plain.chain, plain.key, encrypted.key, encrypted.keystore, p12)


@dataclass(frozen=True)
class Certs:
    directory: Path
    ca: CertificateAuthority
    ca_file: Path
    truststore_p12: Path  # the CA in a PKCS12 truststore, password STORE_PASSWORD
    broker: Party
    client: Party  # CLIENT_DN, issued by ``ca``
    untrusted_ca: CertificateAuthority
    untrusted_client: Party  # issued by ``untrusted_ca``

    @property
    def ca_pem(self) -> str:
        return self.ca.cert_pem

    def broker_ssl_props(self, prefix: str = "") -> dict[str, str]:
        """The broker's keystore (encrypted PEM file) and the CA as truststore, as ssl.* properties
        (``prefix`` e.g. ``listener.name.ssl.`` for one listener)."""
        return {
            f"{prefix}ssl.keystore.type": "PEM",
            f"{prefix}ssl.keystore.location": str(self.broker.keystore_pem),
            f"{prefix}ssl.key.password": KEY_PASSWORD,
            f"{prefix}ssl.truststore.type": "PEM",
            f"{prefix}ssl.truststore.location": str(self.ca_file),
        }

    def client_context(self, party: Party | None = None, *, check_hostname: bool = True) -> ssl.SSLContext:
        """A Python client context trusting ``ca``; presenting ``party``'s certificate when given."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.check_hostname = check_hostname
        if party is not None:
            ctx.load_cert_chain(str(party.chain_file), str(party.key_file))
        return ctx

    def new_broker_certificate(self, stem: str, subject: str = "CN=localhost") -> Party:
        """Another broker certificate from ``ca`` (e.g. to rotate to)."""
        return make_party(self.directory, stem, self.ca.issue_server(subject))


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    directory = tmp_path_factory.mktemp("certs")
    ca = CertificateAuthority.create("CN=kafkette test CA,O=kafkette")
    untrusted = CertificateAuthority.create("CN=untrusted CA,O=elsewhere")
    ca_file = ca.write_pem(directory / "ca.pem")
    truststore = directory / "truststore.p12"
    truststore.write_bytes(ca.truststore_pkcs12(STORE_PASSWORD))
    return Certs(
        directory=directory, ca=ca, ca_file=ca_file, truststore_p12=truststore,
        broker=make_party(directory, "broker", ca.issue_server("CN=localhost,O=kafkette")),
        client=make_party(directory, "client", ca.issue_client(CLIENT_DN)),
        untrusted_ca=untrusted,
        untrusted_client=make_party(directory, "untrusted-client", untrusted.issue_client("CN=mallory,O=elsewhere")),
    )


# ---------------------------------------------------------------------------------------------------
# One broker in this process


@dataclass
class InProcessBroker:
    """A Broker running its own event loop in a thread; ``ports`` maps listener name -> port."""

    broker: Any
    ports: dict[str, int]
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    result: list[Any] = field(default_factory=list)

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def call(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Run ``fn`` on the broker's loop and return its result (for looking at broker state safely)."""
        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def principals(self, listener: str) -> dict[int, str]:
        """Client port -> principal of the broker's open connections on ``listener``."""
        def collect() -> dict[int, str]:
            return {int(c.peer.rsplit(":", 1)[1]): str(c.principal) for c in self.broker.connections
                    if c.listener == listener}

        return self.call(collect)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.broker.request_stop)
            self.thread.join(30)


def start_in_process_broker(zk_connect: str, data_dir: Path, listeners: Mapping[str, str],
                            props: Mapping[str, str] | None = None, timeout: float = 30.0) -> InProcessBroker:
    """Start a broker with a PLAINTEXT listener (inter-broker, used for readiness) plus ``listeners``
    (name -> security protocol), each on a port of PORT_RANGE, with ``props`` on top."""
    from broker.broker import Broker
    from config.registry import BrokerConfig
    from tests.integration.helpers import RawClient, wait_until

    names = {"PLAINTEXT": "PLAINTEXT", **{n.upper(): p for n, p in listeners.items()}}
    ports = {name: take_port() for name in names}
    config = BrokerConfig({
        "broker.id": "0",
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in names.items()),
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir),
        "zookeeper.connect": zk_connect,
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "metrics.port": "-1",
        **(props or {}),
    })
    broker = Broker(config)
    loop = asyncio.new_event_loop()
    handle = InProcessBroker(broker, ports, loop, threading.Thread())

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            handle.result.append(loop.run_until_complete(broker.run()))
        except BaseException as e:  # reported by the waiting side
            handle.result.append(e)
        finally:
            loop.close()

    handle.thread = threading.Thread(target=run, name="tls-test-broker", daemon=True)
    handle.thread.start()

    def ready() -> bool:
        if handle.result:
            raise AssertionError(f"the broker stopped during start-up: {handle.result}")
        try:
            with RawClient(handle.bootstrap(), timeout=2) as raw:
                md = raw.request(3, 12, topics=[], allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False)
            return len(md.brokers) == 1 and md.controller_id == 0
        except OSError:
            return False

    try:
        wait_until(ready, timeout, "the in-process broker to start")
    except BaseException:
        handle.stop()
        raise
    return handle


@pytest.fixture
def tls_broker_factory(zookeeper_server: Any, zk_chroot: str,
                       tmp_path: Path) -> Iterator[Callable[..., InProcessBroker]]:
    started: list[InProcessBroker] = []

    def make(listeners: Mapping[str, str], props: Mapping[str, str] | None = None) -> InProcessBroker:
        chroot = f"{zk_chroot}-{len(started)}"
        handle = start_in_process_broker(zookeeper_server.connect_string + chroot,
                                         tmp_path / f"data-{len(started)}", listeners, props)
        started.append(handle)
        return handle

    try:
        yield make
    finally:
        for handle in started:
            with contextlib.suppress(Exception):
                handle.stop()
