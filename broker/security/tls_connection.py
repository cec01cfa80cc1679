"""A client connection on an SSL or SASL_SSL listener.

The socket is wrapped in an ``ssl.SSLSocket`` left non-blocking, so OpenSSL reads and writes the file
descriptor itself (no copies through memory BIOs); when it wants to read or write it raises, and we wait
for the socket with the event loop's reader/writer callbacks.

Fetch responses cannot use ``sendfile`` (the kernel would send the file's bytes unencrypted): a file
region is read with ``os.preadv`` into a reusable buffer and handed to ``SSL_write`` as a memoryview
of that buffer, so the bytes go from the page cache to OpenSSL without Python objects in between.
Kernel TLS (which would let ``sendfile`` encrypt in the kernel) needs the kernel's ``tls`` module and
``SSL_OP_ENABLE_KTLS``, which Python 3.11's ssl module does not expose; see ``KTLS_NOTES``.

The handshake has a time limit; a failed handshake closes only this connection, with one
rate-limited log line, as Kafka's "Failed authentication with /<ip> (SSL handshake failed)".
On SSL listeners the principal is ``User:<name>`` with the name mapped from the client certificate's
DN by ``ssl.principal.mapping.rules``, or ``User:ANONYMOUS`` without a client certificate. On SASL_SSL
listeners SASL decides the principal.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from cryptography import x509

from broker.connection import (
    CloseConnection,
    Connection,
    ConnectionClosed,
    ConnectionStats,
    Handler,
    limited_log,
)
from broker.request_queue import RequestPermits
from broker.security.principal import USER_TYPE, KafkaPrincipal
from broker.security.ssl_principal import NoMatchingRule
from broker.security.tls_listener import ListenerTls
from protocol.schema import FileRegion

log = logging.getLogger(__name__)

KTLS_NOTES = """\
Kernel TLS was looked at for the fetch path (sendfile through TLS): Python 3.11's ssl module has no
OP_ENABLE_KTLS (3.12 adds it; the raw SSL_OP_ENABLE_KTLS bit could be set), OpenSSL 3.0 can drive kTLS
for TLSv1.2/1.3 AES-GCM, but the kernel here has no TLS upper-layer protocol (no /proc/net/tls_stat,
setsockopt(TCP_ULP, "tls") fails with ENOENT), so it is not used."""

# Fetch data is read into buffers of this size and written through TLS a buffer at a time: 16 TLS
# records per SSL_write keeps the per-call overhead small without holding much memory per connection.
FILE_CHUNK = 256 * 1024
_POOL_MAX = 16
_buffer_pool: list[bytearray] = []  # one event loop per process: no locking needed


def _take_buffer() -> bytearray:
    return _buffer_pool.pop() if _buffer_pool else bytearray(FILE_CHUNK)


def _give_back(buf: bytearray) -> None:
    if len(_buffer_pool) < _POOL_MAX:
        _buffer_pool.append(buf)


class TlsConnection(Connection):
    """A Connection whose transport is TLS; the request loop is Connection's, deferred answers included.

    The request loop reads while the writer task writes, through the one TLS object: an SSL_write may
    have to wait for the socket to be readable, an SSL_read for it to be writable, and the peer watch
    waits for readability too. The event loop keeps one reader and one writer callback per descriptor,
    so those waits share them (``_on_readable`` / ``_on_writable``): each readiness wakes every waiter
    of its direction, and the callback is removed with the last one.
    """

    def __init__(self, sock: socket.socket, handler: Handler, *, tls: ListenerTls, security_protocol: str,
                 handshake_timeout_s: float, max_request_bytes: int, listener: str,
                 stats: ConnectionStats | None = None, permits: RequestPermits | None = None,
                 peer: tuple[str, int] | None = None) -> None:
        super().__init__(sock, handler, max_request_bytes=max_request_bytes, listener=listener, stats=stats,
                         permits=permits, peer=peer)
        self.security_protocol = security_protocol
        # The listener's context when the connection was accepted: a rotation affects later connections.
        self._mapper = tls.principal_mapper
        self.sock = tls.context.wrap_socket(self.sock, server_side=True, do_handshake_on_connect=False)
        self.tls_sock: ssl.SSLSocket = self.sock
        self._handshake_timeout_s = handshake_timeout_s
        self._recv_into = self._tls_recv_into
        self._scatter = False
        self.peer_dn: str | None = None  # the client certificate's subject (RFC 2253), when one was sent
        self._on_readable: list[Callable[[], None]] = []
        self._on_writable: list[Callable[[], None]] = []

    # -- handshake ----------------------------------------------------------------------------------

    async def establish(self) -> None:
        try:
            await asyncio.wait_for(self._handshake(), self._handshake_timeout_s)
            self._set_principal()
        except (TimeoutError, ssl.SSLError, OSError, NoMatchingRule, ValueError) as e:
            self.stats.failed_authentication += 1
            reason = "timed out" if isinstance(e, TimeoutError) else _describe(e)
            limited_log.log(logging.INFO, "ssl-handshake", "Failed authentication with /%s (SSL handshake failed: "
                            "%s) on listener %s", self.client_host, reason, self.listener)
            raise CloseConnection() from None
        self.stats.successful_authentication += 1
        self.last_active = time.monotonic()

    async def _handshake(self) -> None:
        while True:
            try:
                self.tls_sock.do_handshake()
                return
            except ssl.SSLWantReadError:
                await self._readable()
            except ssl.SSLWantWriteError:
                await self._writable()

    def _set_principal(self) -> None:
        der = self.tls_sock.getpeercert(binary_form=True)
        if not der:
            return  # no client certificate: User:ANONYMOUS (ssl.client.auth=none or requested)
        self.peer_dn = x509.load_der_x509_certificate(der).subject.rfc4514_string()
        if self.security_protocol == "SSL":
            name = self._mapper.get_name(self.peer_dn)
            self.principal = KafkaPrincipal(USER_TYPE, name)
            log.debug("connection %s on listener %s: SSL principal %s from certificate %s", self.peer,
                      self.listener, self.principal, self.peer_dn)

    # -- transport ----------------------------------------------------------------------------------

    def _add_waiter(self, waiters: list[Callable[[], None]], callback: Callable[[], None],
                    add: Callable[..., Any]) -> None:
        if not waiters:
            add(self.fd, _wake_all, waiters)
        waiters.append(callback)

    def _remove_waiter(self, waiters: list[Callable[[], None]], callback: Callable[[], None],
                       remove: Callable[[int], Any]) -> None:
        try:
            waiters.remove(callback)
        except ValueError:
            return
        if not waiters:
            remove(self.fd)

    async def _ready(self, waiters: list[Callable[[], None]], add: Callable[..., Any],
                     remove: Callable[[int], Any]) -> None:
        fut: asyncio.Future[None] = self.loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        self._add_waiter(waiters, ready, add)
        try:
            await fut
        finally:
            self._remove_waiter(waiters, ready, remove)

    async def _readable(self) -> None:
        self._waited = True
        await self._ready(self._on_readable, self.loop.add_reader, self.loop.remove_reader)

    async def _writable(self) -> None:
        await self._ready(self._on_writable, self.loop.add_writer, self.loop.remove_writer)

    def _watch_peer(self) -> None:
        if not self.closed and not self._watching:
            self._watching = True
            self._add_waiter(self._on_readable, self._peer_readable, self.loop.add_reader)

    def _unwatch_peer(self) -> None:
        if self._watching:
            self._watching = False
            self._remove_waiter(self._on_readable, self._peer_readable, self.loop.remove_reader)

    async def _tls_recv_into(self, sock: socket.socket, buf: memoryview) -> int:
        while True:
            try:
                return self.tls_sock.recv_into(buf)
            except ssl.SSLWantReadError:
                await self._readable()
            except ssl.SSLWantWriteError:
                await self._writable()
            except ssl.SSLZeroReturnError:
                return 0  # close_notify

    async def _write_all(self, data: memoryview) -> None:
        """SSL_write the whole of ``data``. After a want-read/write, OpenSSL must be given the same
        buffer again; it returns once every byte is in TLS records on the socket."""
        while data:
            try:
                n = self.tls_sock.send(data)
            except ssl.SSLWantWriteError:
                await self._writable()
                continue
            except ssl.SSLWantReadError:
                await self._readable()
                continue
            except (ConnectionError, OSError) as e:
                raise ConnectionClosed(str(e)) from None
            self.stats.bytes_out += n
            data = data[n:]

    async def _send_bytes(self, chunks: list[bytes | bytearray | memoryview], *, more: bool = False) -> None:
        # ``more`` (hold the bytes for the file data that follows) has no TLS counterpart: the
        # region is read and encrypted into records of its own.
        data = memoryview(b"".join(chunks)) if len(chunks) > 1 else memoryview(chunks[0]).cast("B")
        await self._write_all(data)

    async def _sendfile(self, region: FileRegion) -> None:
        buf = _take_buffer()
        try:
            view = memoryview(buf)
            offset, remaining = region.position, region.length
            while remaining > 0:
                want = min(len(buf), remaining)
                n = os.preadv(region.fd, [view[:want]], offset)
                if n == 0:
                    # As with sendfile: the response length is on the wire already, drop the connection.
                    raise ConnectionClosed("segment shrank during a TLS fetch read")
                await self._write_all(view[:n])
                offset += n
                remaining -= n
                self.stats.tls_file_bytes += n
        finally:
            _give_back(buf)

    def _peer_gone(self) -> bool | None:
        # SSLSocket refuses recv flags; peek at the raw descriptor through a socket object that does
        # not own it (detached before it could close the descriptor).
        raw = socket.socket(fileno=self.fd)
        try:
            return raw.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return None
        except OSError:
            return True
        finally:
            raw.detach()


def _wake_all(waiters: list[Callable[[], None]]) -> None:
    for callback in list(waiters):  # a callback may remove itself (the peer watch does)
        callback()


def _describe(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError) and e.reason:
        return e.reason.replace("_", " ").lower()
    return str(e) or type(e).__name__
