"""Deferred answers on a TLS connection (broker/security/tls_connection.py): the request loop reads and
decrypts the next requests while the writer task encrypts and writes the answers, through one TLS
object, in request order. A real TlsConnection over a TLS socket to a client in a thread, with the
scripted handler of tests/broker/test_deferred_responses.py (``D<n>`` answered when the test says so)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop

from broker.request_queue import RequestPermits
from broker.security.tls_connection import TlsConnection
from broker.security.tls_listener import ListenerTls
from config.registry import BrokerConfig
from tests.broker.test_deferred_responses import Scripted, _frame, _until
from tests.security.conftest import Certs

BIG = 4 << 20  # an answer far beyond the socket buffers: its writer waits for writability many times


def _listener_tls(certs: Certs) -> ListenerTls:
    config = BrokerConfig({"broker.id": "0", "zookeeper.connect": "localhost:2181/x",
                           "listeners": "SSL://127.0.0.1:9093", "listener.security.protocol.map": "SSL:SSL",
                           "inter.broker.listener.name": "SSL", **certs.broker_ssl_props()})
    return ListenerTls.build(config, "SSL", inter_broker=False)


class TlsClient:
    """A blocking TLS client in its own thread: sends what it is given, reads ``n`` answers."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self.sock = sock

    def send(self, *payloads: bytes) -> None:
        self.sock.sendall(b"".join(_frame(p) for p in payloads))

    def read(self, n: int) -> list[bytes]:
        out = []
        for _ in range(n):
            size = struct.unpack(">i", self._exactly(4))[0]
            out.append(self._exactly(size))
        return out

    def _exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise AssertionError("the connection closed")
            buf += chunk
        return bytes(buf)


def _run(certs: Certs, scenario: Callable[[TlsClient, TlsConnection, Scripted, RequestPermits], Awaitable[Any]],
         handler: Scripted | None = None) -> None:
    tls = _listener_tls(certs)
    handler = handler or Scripted()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with socket.create_server(("127.0.0.1", 0)) as server:
            raw = socket.create_connection(server.getsockname())
            accepted, _ = server.accept()
        permits = RequestPermits(64 << 20)
        conn = TlsConnection(accepted, handler, tls=tls, security_protocol="SSL", handshake_timeout_s=30,
                             max_request_bytes=1 << 20, listener="SSL", permits=permits)
        task = asyncio.ensure_future(conn.serve())
        # The client's handshake blocks: it runs in a thread while the loop serves the broker's side.
        client_sock = await loop.run_in_executor(None, lambda: certs.client_context().wrap_socket(
            raw, server_hostname="127.0.0.1"))
        client = TlsClient(client_sock)
        try:
            await scenario(client, conn, handler, permits)
        finally:
            client_sock.close()
            await asyncio.wait([task], timeout=30)
            assert task.done()

    uvloop.run(main())


async def _in_thread(fn: Callable[[], Any]) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


def test_tls_requests_after_a_deferred_one_are_handled_at_once_and_answered_in_order(certs: Certs) -> None:
    async def scenario(client: TlsClient, conn: TlsConnection, h: Scripted, _p: RequestPermits) -> None:
        await _in_thread(lambda: client.send(b"D1", b"P2", b"D3", b"P4"))
        await _until(lambda: len(h.handled) == 4, "all four requests handled")
        assert h.handled == [b"D1", b"P2", b"D3", b"P4"]
        assert conn.busy
        h.release[b"D3"].set_result(None)  # ready first, still answered after D1
        reading = asyncio.ensure_future(_in_thread(lambda: client.read(4)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not reading.done(), "an answer went out ahead of the deferred first one"
        h.release[b"D1"].set_result(None)
        assert await reading == [b"D1", b"P2", b"D3", b"P4"]
        await _until(lambda: not conn.busy, "the queue to empty")

    _run(certs, scenario)


def test_tls_answers_written_while_the_next_requests_are_read(certs: Certs) -> None:
    """A large deferred answer is encrypted and written a piece at a time (the writer waits for the
    socket again and again) while the request loop reads and decrypts the requests that keep coming."""
    big = b"D" + bytes(BIG)

    class BigAnswers(Scripted):
        async def _later(self, payload: bytes, fut: asyncio.Future[None]) -> Any:
            await fut
            return [_frame(big if payload == b"D1" else payload)]

    async def scenario(client: TlsClient, conn: TlsConnection, h: Scripted, _p: RequestPermits) -> None:
        await _in_thread(lambda: client.send(b"D1"))
        await _until(lambda: b"D1" in h.release, "the first request handled")
        h.release[b"D1"].set_result(None)
        # The client sends the next requests before it reads anything: the answer fills the socket
        # buffers, so its writer is waiting for writability while the loop reads these.
        await _in_thread(lambda: client.send(b"P2", b"D3", b"P4"))
        await _until(lambda: len(h.handled) == 4, "the requests behind the big answer handled")
        assert conn.busy
        h.release[b"D3"].set_result(None)
        answers = await _in_thread(lambda: client.read(4))
        assert answers == [big, b"P2", b"D3", b"P4"]
        await _until(lambda: not conn.busy, "the queue to empty")

    _run(certs, scenario, BigAnswers())


def test_tls_waits_on_one_descriptor_share_its_callbacks(certs: Certs) -> None:
    """Two waits for readability at once (an SSL_write that wants to read, beside the peer watch or the
    request loop's read) both end when data comes, and the descriptor's reader goes with the last."""

    async def scenario(client: TlsClient, conn: TlsConnection, h: Scripted, _p: RequestPermits) -> None:
        await _until(lambda: bool(conn._on_readable), "the request loop waiting to read")
        first = asyncio.ensure_future(conn._readable())
        second = asyncio.ensure_future(conn._readable())
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(conn._on_readable) == 3 and not first.done() and not second.done()
        await _in_thread(lambda: client.send(b"P1"))
        await asyncio.wait_for(asyncio.gather(first, second), 30)
        assert await _in_thread(lambda: client.read(1)) == [b"P1"]
        await _until(lambda: len(conn._on_readable) == 1, "the request loop waiting alone again")

    _run(certs, scenario)
