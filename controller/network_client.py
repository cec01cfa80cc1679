"""The asyncio wrapper around ``protocol.client_connection``: every outgoing connection a broker makes.

The controller's channels to brokers, the broker's channel to the controller, replica fetchers,
forwarding to the controller and the transaction coordinator's WriteTxnMarkers all use it (it lives
in controller/ so that both controller/ and broker/ can). Three pieces:

- ``KafkaConnection``: one socket as an ``asyncio.BufferedProtocol``. Received bytes land in the
  frame reader's memory directly (a Fetch response's records are never copied after the kernel wrote
  them). ``request()`` waits for a slot under the in-flight limit, sends, and waits for the matched
  response. A request that times out closes the connection (as Kafka's ``NetworkClient`` does: the
  responses still in the pipe would otherwise be matched to the wrong requests); whenever the
  connection dies, every request in flight fails with ``KafkaConnectionError``.
- ``NodeClient``: the connection to one address, opened on first use and re-opened after a failure
  once the reconnect backoff has passed (``reconnect.backoff.ms`` doubling up to
  ``reconnect.backoff.max.ms``, with +/-20% jitter as Kafka applies it).
- ``ConnectionPool``: one ``NodeClient`` per address, for senders that talk to whichever broker
  a partition or the controller is on.

Security (``ConnectionSettings.security``, a ``ConnectionSecurity``): with a TLS context the socket is
wrapped by asyncio's TLS transport (handshake within the connect timeout, the broker's certificate
checked against ``server_hostname`` or the host when the context checks host names); with SASL the
authentication steps run on every new connection before it is ready.

Session expiry (KIP-368): when the broker grants a session lifetime, the connection is due for renewal
at a random 85-95% of it (Kafka's client re-authenticates in that window). Instead of re-authenticating
on the same socket, ``NodeClient`` retires a due connection: new requests go to a freshly opened and
authenticated connection, and the retired one is closed gracefully once its last response is in. So
no request is ever sent on a session the broker is about to end, and no in-flight request is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from controller.host_resolver import RESOLVER
from protocol.client_connection import (
    PLAINTEXT,
    ClientConnection,
    ConnectionReady,
    ConnectionSecurity,
    InFlightRequest,
    Response,
)
from protocol.exceptions import ProtocolError
from protocol.schema import Struct

log = logging.getLogger(__name__)

__all__ = ["PLAINTEXT", "ConnectionPool", "ConnectionRetiredError", "ConnectionSecurity", "ConnectionSettings",
           "KafkaConnection", "KafkaConnectionError", "NodeClient", "RequestTimeoutError"]


class KafkaConnectionError(ConnectionError):
    """The connection failed, closed, or sent something that ended it; the request may not have run."""


class ConnectionRetiredError(KafkaConnectionError):
    """The connection is being retired (session renewal): the request was not sent; send it on a new one."""


class RequestTimeoutError(KafkaConnectionError, TimeoutError):
    """No response within the request timeout (``request.timeout.ms``); the connection was closed."""


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How to open and use a connection (Kafka's client config names in the comments)."""

    client_id: str
    connect_timeout_s: float = 10.0  # socket.connection.setup.timeout.ms
    request_timeout_s: float = 30.0  # request.timeout.ms
    max_in_flight: int = 5  # max.in.flight.requests.per.connection
    negotiate_versions: bool = True
    version_caps: tuple[tuple[int, int], ...] = ()
    reconnect_backoff_s: float = 0.05  # reconnect.backoff.ms
    reconnect_backoff_max_s: float = 1.0  # reconnect.backoff.max.ms
    security: ConnectionSecurity = PLAINTEXT  # security.protocol: TLS context, SASL steps
    max_response_bytes: int = 1 << 30


class KafkaConnection(asyncio.BufferedProtocol):
    """One connected socket running the client state machine."""

    def __init__(self, host: str, port: int, settings: ConnectionSettings) -> None:
        self.host, self.port, self.settings = host, port, settings
        self.sm = ClientConnection(settings.client_id, max_in_flight=settings.max_in_flight,
                                   negotiate_versions=settings.negotiate_versions,
                                   version_caps=dict(settings.version_caps),
                                   auth_steps=settings.security.auth_steps(),
                                   max_response_bytes=settings.max_response_bytes)
        self.transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._drain_waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.closed_error: BaseException | None = None
        # KIP-368: loop time after which the session should be renewed (None: it never expires).
        self.renew_at: float | None = None
        self._close_when_idle = False

    # -- opening ----------------------------------------------------------------------------------

    @classmethod
    async def open(cls, host: str, port: int, settings: ConnectionSettings) -> KafkaConnection:
        """Connect, negotiate versions and authenticate, all within the connect timeout."""
        loop = asyncio.get_running_loop()
        conn: KafkaConnection | None = None

        def factory() -> KafkaConnection:
            nonlocal conn
            conn = cls(host, port, settings)
            return conn
        try:
            async with asyncio.timeout(settings.connect_timeout_s):
                sec = settings.security
                tls: dict[str, Any] = {} if sec.ssl_context is None else {
                    "ssl": sec.ssl_context, "server_hostname": sec.server_hostname or host,
                    "ssl_handshake_timeout": settings.connect_timeout_s}
                # Each address in the resolver's order, as create_connection does with a host name;
                # the name itself still checks the broker's certificate.
                failure: OSError | None = None
                for family, address in await RESOLVER.resolve(host, port):
                    try:
                        await loop.create_connection(factory, address, port, family=family, **tls)
                        break
                    except ssl.SSLError:
                        raise
                    except OSError as e:
                        failure = e
                else:
                    raise failure or OSError(f"no address for {host}")
                assert conn is not None
                await conn._ready
        except TimeoutError:
            if conn is not None:
                conn.close(KafkaConnectionError(f"connection setup to {host}:{port} timed out"))
            raise KafkaConnectionError(f"connecting to {host}:{port} timed out after "
                                       f"{settings.connect_timeout_s:.1f}s") from None
        except ssl.SSLError as e:  # before OSError: a failed TLS handshake (bad certificate, protocol)
            raise KafkaConnectionError(f"TLS handshake with {host}:{port} failed: {e}") from None
        except OSError as e:
            raise KafkaConnectionError(f"cannot connect to {host}:{port}: {e.strerror or e}") from None
        except BaseException:
            if conn is not None:
                conn.close(KafkaConnectionError("connection setup abandoned"))
            raise
        assert conn is not None
        return conn

    # -- asyncio.BufferedProtocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        with contextlib.suppress(OSError, AttributeError):
            import socket
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._handle(self.sm.start())
        self._flush()

    def get_buffer(self, sizehint: int) -> memoryview:
        try:
            return self.sm.get_buffer()
        except ProtocolError as e:  # an oversized frame found earlier: the stream cannot continue
            self.close(KafkaConnectionError(str(e)))
            return memoryview(bytearray(1 << 16))

    def buffer_updated(self, nbytes: int) -> None:
        if self.sm.closed:
            return
        try:
            events = self.sm.buffer_updated(nbytes)
        except ProtocolError as e:
            log.warning("closing connection to %s:%d: %s", self.host, self.port, e)
            self.close(KafkaConnectionError(f"bad response from {self.host}:{self.port}: {e}"))
            return
        except Exception as e:  # an authentication step failed
            self.close(KafkaConnectionError(f"connection setup with {self.host}:{self.port} failed: {e}"))
            return
        self._handle(events)
        self._flush()

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost fails what is in flight

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(KafkaConnectionError(f"connection to {self.host}:{self.port} lost"
                                        + (f": {exc}" if exc else "")))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)
        self._drain_waiter = None

    # -- requests ---------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.sm.closed

    @property
    def is_ready(self) -> bool:
        return self.sm.is_ready

    def version(self, api_key: int, cap: int | None = None) -> int:
        return self.sm.version(api_key, cap)

    async def request(self, api_key: int, body: Struct, *, version: int | None = None,
                      timeout: float | None = None) -> Struct:
        """Send and wait for the response body (``timeout`` None: the request timeout)."""
        fut = await self.send(api_key, body, version=version)
        assert fut is not None
        t = self.settings.request_timeout_s if timeout is None else timeout
        # A plain timer rather than asyncio.timeout/wait_for: this is on the replication hot path.
        timer = self._loop.call_later(t, self._expire, fut, api_key, t)
        try:
            return await fut
        finally:
            timer.cancel()

    def _expire(self, fut: asyncio.Future[Struct], api_key: int, t: float) -> None:
        if fut.done():
            return
        err = RequestTimeoutError(f"no response from {self.host}:{self.port} to api key {api_key} within {t:.1f}s")
        fut.set_exception(err)
        self.close(err)  # responses still in the pipe would be matched to the wrong requests

    async def send(self, api_key: int, body: Struct, *, version: int | None = None,
                   expect_response: bool = True) -> asyncio.Future[Struct] | None:
        """Queue a request once a slot is free; returns the future of its response body."""
        while not self.sm.can_send and expect_response:
            self._raise_if_closed()
            self._raise_if_retired()
            waiter = self._loop.create_future()
            self._slot_waiters.append(waiter)
            await waiter
        self._raise_if_closed()
        self._raise_if_retired()
        fut: asyncio.Future[Struct] | None = self._loop.create_future() if expect_response else None
        self.sm.send(api_key, body, version=version, expect_response=expect_response, token=fut)
        self._flush()
        if self._paused:
            if self._drain_waiter is None:
                self._drain_waiter = self._loop.create_future()
            await asyncio.shield(self._drain_waiter)
        return fut

    def close(self, reason: BaseException | None = None) -> None:
        if self.closed_error is None:
            self.closed_error = reason or KafkaConnectionError(f"connection to {self.host}:{self.port} closed")
        lost = self.sm.close(self.closed_error)
        self._fail(lost, self.closed_error)
        if not self._ready.done():
            self._ready.set_exception(self.closed_error)
            self._ready.exception()  # retrieved: nobody may be waiting any more
        for w in self._slot_waiters:
            if not w.done():
                w.set_result(None)  # the waiter re-checks and raises
        self._slot_waiters.clear()
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)
        if self.transport is not None:
            self.transport.close()

    # -- internals --------------------------------------------------------------------------------

    def _raise_if_retired(self) -> None:
        if self._close_when_idle:
            raise ConnectionRetiredError(f"connection to {self.host}:{self.port} is being retired")

    def _raise_if_closed(self) -> None:
        if self.sm.closed:
            raise KafkaConnectionError(str(self.closed_error or f"connection to {self.host}:{self.port} closed"))

    def _flush(self) -> None:
        data = self.sm.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _handle(self, events: list[Any]) -> None:
        for ev in events:
            if isinstance(ev, Response):
                fut = ev.token
                if fut is not None and not fut.done():
                    fut.set_result(ev.body)
                self._wake_one()
            elif isinstance(ev, ConnectionReady) and not self._ready.done():
                lifetime_ms = self.sm.session_lifetime_ms
                if lifetime_ms > 0:
                    # Kafka's window: 85% of the lifetime plus up to 10% jitter, so that many
                    # connections authenticated together do not all renew at once.
                    self.renew_at = self._loop.time() + lifetime_ms / 1000.0 * (0.85 + 0.10 * random.random())
                self._ready.set_result(None)
        if self._close_when_idle and self.sm.in_flight == 0:
            self.close(KafkaConnectionError(f"connection to {self.host}:{self.port} retired: session renewal"))

    @property
    def session_due(self) -> bool:
        """The broker-granted session is in its renewal window (KIP-368): open a new connection."""
        return self.renew_at is not None and self._loop.time() >= self.renew_at

    def close_when_idle(self) -> None:
        """Take no new requests' responses beyond those in flight; close once they are answered."""
        self._close_when_idle = True
        for w in self._slot_waiters:  # requests waiting for a slot here move to the new connection
            if not w.done():
                w.set_result(None)
        self._slot_waiters.clear()
        if self.sm.in_flight == 0:
            self.close(KafkaConnectionError(f"connection to {self.host}:{self.port} retired: session renewal"))

    def _wake_one(self) -> None:
        while self._slot_waiters:
            w = self._slot_waiters.popleft()
            if not w.done():
                w.set_result(None)
                return

    @staticmethod
    def _fail(lost: list[InFlightRequest], err: BaseException) -> None:
        for r in lost:
            fut = r.token
            if fut is not None and not fut.done():
                fut.set_exception(err)
                fut.exception()  # a caller that gave up (cancelled) must not log "never retrieved"


class NodeClient:
    """The connection to one address: opened on first use, re-opened after failures with backoff."""

    def __init__(self, host: str, port: int, settings: ConnectionSettings) -> None:
        self.host, self.port, self.settings = host, port, settings
        self._conn: KafkaConnection | None = None
        self._connecting: asyncio.Future[KafkaConnection] | None = None
        self._failures = 0
        self._next_attempt = 0.0
        self._closed = False
        self.outstanding = 0  # requests issued through this client and not yet finished

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def backoff(self) -> float:
        """Kafka's exponential reconnect backoff with +/-20% jitter for the current failure count."""
        s = self.settings
        base = min(s.reconnect_backoff_s * (2 ** max(self._failures - 1, 0)), s.reconnect_backoff_max_s)
        return base * (0.8 + 0.4 * random.random())

    async def connection(self) -> KafkaConnection:
        if self._closed:
            raise KafkaConnectionError(f"client for {self.host}:{self.port} is closed")
        if self._conn is not None and not self._conn.closed:
            if not self._conn.session_due:
                return self._conn
            # KIP-368: renew the session on a new connection; the old one drains and closes.
            log.debug("session to %s:%d due for renewal: reconnecting", self.host, self.port)
            retired, self._conn = self._conn, None
            retired.close_when_idle()
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._connect())
        return await asyncio.shield(self._connecting)

    async def _connect(self) -> KafkaConnection:
        loop = asyncio.get_running_loop()
        wait = self._next_attempt - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        try:
            conn = await KafkaConnection.open(self.host, self.port, self.settings)
        except BaseException:
            self._failures += 1
            self._next_attempt = loop.time() + self.backoff()
            raise
        if self._closed:
            conn.close()
            raise KafkaConnectionError(f"client for {self.host}:{self.port} is closed")
        self._failures = 0
        self._conn = conn
        return conn

    async def request(self, api_key: int, body: Struct, *, version: int | None = None,
                      timeout: float | None = None) -> Struct:
        self.outstanding += 1
        try:
            while True:
                conn = await self.connection()
                try:
                    return await conn.request(api_key, body, version=version, timeout=timeout)
                except ConnectionRetiredError:
                    continue  # not sent: the next connection() is the renewed one
                except KafkaConnectionError:
                    self._note_failure(conn)
                    raise
        finally:
            self.outstanding -= 1

    def _note_failure(self, conn: KafkaConnection) -> None:
        if self._conn is conn:
            self._conn = None
            self._failures += 1
            self._next_attempt = asyncio.get_running_loop().time() + self.backoff()

    def disconnect(self, reason: str = "disconnected") -> None:
        """Close the current connection (requests in flight fail); the next request reconnects."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close(KafkaConnectionError(f"connection to {self.host}:{self.port} {reason}"))

    def close(self) -> None:
        self._closed = True
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
        self.disconnect("closed")


class ConnectionPool:
    """``NodeClient``s per (host, port): one, or up to ``connections_per_node`` when requests wait.

    A broker answers one connection's requests one at a time, in order; a sender whose requests each
    wait on the server (WriteTxnMarkers waits for acks=all) opens more connections rather than queue
    independent requests behind each other.
    """

    def __init__(self, settings: ConnectionSettings, connections_per_node: int = 1) -> None:
        self.settings = settings
        self.connections_per_node = max(1, connections_per_node)
        self._nodes: dict[tuple[str, int], list[NodeClient]] = {}

    def node(self, host: str, port: int) -> NodeClient:
        """The least busy client for the address, opening another one while all are busy."""
        clients = self._nodes.setdefault((host, port), [])
        best = min(clients, key=lambda n: n.outstanding, default=None)
        if best is None or (best.outstanding and len(clients) < self.connections_per_node):
            best = NodeClient(host, port, self.settings)
            clients.append(best)
        return best

    async def request(self, host: str, port: int, api_key: int, body: Struct, *, version: int | None = None,
                      timeout: float | None = None) -> Struct:
        return await self.node(host, port).request(api_key, body, version=version, timeout=timeout)

    def addresses(self) -> Sequence[tuple[str, int]]:
        return list(self._nodes)

    def close(self) -> None:
        for clients in self._nodes.values():
            for n in clients:
                n.close()
        self._nodes.clear()
