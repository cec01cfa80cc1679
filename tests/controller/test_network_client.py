"""The asyncio wrapper of the one client over real sockets: timeouts, connection death, reconnect backoff.

The peer is a small asyncio server that parses requests with the protocol package's server side and
answers as a test tells it to (or not at all).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from controller.network_client import (
    ConnectionPool,
    ConnectionSettings,
    KafkaConnection,
    KafkaConnectionError,
    NodeClient,
    RequestTimeoutError,
)
from protocol.api_versions import ApiKey
from protocol.framing import FrameReader
from protocol.messages import (
    Request,
    api_versions_body,
    decode_request,
    encode_response_bytes,
    new_request,
    new_response,
)

pytestmark = pytest.mark.timeout(60)

Policy = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


def md_request() -> Any:
    return new_request(ApiKey.METADATA, topics=[], allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)


def md_answer(req: Request, controller_id: int = 1, corr: int | None = None) -> bytes:
    return encode_response_bytes(req.api_key, req.api_version, req.header.correlation_id if corr is None else corr,
                                 new_response(ApiKey.METADATA, throttle_time_ms=0, brokers=[], cluster_id="c",
                                              controller_id=controller_id, topics=[]))


class Peer:
    """A broker stand-in: answers ApiVersions itself, everything else through ``policy``."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.requests: list[Request] = []
        self.connections = 0

    async def start(self, port: int = 0) -> Peer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        frames = FrameReader()
        try:
            while data := await reader.read(65536):
                for frame in frames.feed(data):
                    req = decode_request(frame)
                    self.requests.append(req)
                    if req.api_key == ApiKey.API_VERSIONS:
                        writer.write(encode_response_bytes(req.api_key, req.api_version, req.header.correlation_id,
                                                           api_versions_body()))
                    else:
                        await self.policy(req, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def settings(**kw: Any) -> ConnectionSettings:
    return ConnectionSettings(client_id="t", **kw)


def test_pipelined_requests_are_matched_in_order() -> None:
    async def policy(req: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(md_answer(req, controller_id=len([r for r in peer.requests if r.api_key == ApiKey.METADATA])))

    async def main() -> None:
        await peer.start()
        conn = await KafkaConnection.open("127.0.0.1", peer.port, settings(max_in_flight=3))
        try:
            got = await asyncio.gather(*(conn.request(ApiKey.METADATA, md_request()) for _ in range(10)))
            assert [m.controller_id for m in got] == list(range(1, 11))
            assert conn.version(ApiKey.METADATA) == peer.requests[-1].api_version
        finally:
            conn.close()
            await peer.stop()
    peer = Peer(policy)
    asyncio.run(main())


def test_connection_death_fails_every_request_in_flight() -> None:
    async def policy(req: Request, writer: asyncio.StreamWriter) -> None:
        if len([r for r in peer.requests if r.api_key == ApiKey.METADATA]) == 3:
            writer.transport.abort()  # the broker goes away with three requests unanswered

    async def main() -> None:
        await peer.start()
        conn = await KafkaConnection.open("127.0.0.1", peer.port, settings(max_in_flight=5))
        try:
            results = await asyncio.gather(*(conn.request(ApiKey.METADATA, md_request()) for _ in range(3)),
                                           return_exceptions=True)
            assert all(isinstance(r, KafkaConnectionError) for r in results), results
            assert conn.closed
            with pytest.raises(KafkaConnectionError):
                await conn.request(ApiKey.METADATA, md_request())
        finally:
            conn.close()
            await peer.stop()
    peer = Peer(policy)
    asyncio.run(main())


def test_a_mismatched_correlation_id_fails_the_connection() -> None:
    async def policy(req: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(md_answer(req, corr=req.header.correlation_id + 100))

    async def main() -> None:
        await peer.start()
        conn = await KafkaConnection.open("127.0.0.1", peer.port, settings())
        try:
            with pytest.raises(KafkaConnectionError, match="correlation id"):
                await conn.request(ApiKey.METADATA, md_request())
            assert conn.closed
        finally:
            conn.close()
            await peer.stop()
    peer = Peer(policy)
    asyncio.run(main())


def test_request_timeout_closes_the_connection_and_fails_the_others() -> None:
    async def silent(req: Request, writer: asyncio.StreamWriter) -> None:
        return None

    async def main() -> None:
        await peer.start()
        conn = await KafkaConnection.open("127.0.0.1", peer.port, settings(request_timeout_s=0.3))
        try:
            other = asyncio.ensure_future(conn.request(ApiKey.METADATA, md_request(), timeout=30))
            with pytest.raises(RequestTimeoutError):
                await conn.request(ApiKey.METADATA, md_request())
            with pytest.raises(KafkaConnectionError):
                await other  # its answer could never be matched once the connection is out of step
            assert conn.closed
        finally:
            conn.close()
            await peer.stop()
    peer = Peer(silent)
    asyncio.run(main())


def test_connect_timeout_covers_negotiation() -> None:
    async def main() -> None:
        async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # accepts, never answers ApiVersions
        server = await asyncio.start_server(mute, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(KafkaConnectionError, match="timed out"):
                await KafkaConnection.open("127.0.0.1", port, settings(connect_timeout_s=0.3))
        finally:
            server.close()
    asyncio.run(main())


def test_in_flight_limit_holds_requests_back() -> None:
    held: list[Request] = []
    release = asyncio.Event()

    answered = [0]

    async def policy(req: Request, writer: asyncio.StreamWriter) -> None:
        held.append(req)
        if len(held) < 2:
            return
        await release.wait()  # hold the first two; answer everything once released
        for r in held[answered[0]:]:
            writer.write(md_answer(r))
        answered[0] = len(held)

    async def main() -> None:
        await peer.start()
        conn = await KafkaConnection.open("127.0.0.1", peer.port, settings(max_in_flight=2))
        try:
            tasks = [asyncio.ensure_future(conn.request(ApiKey.METADATA, md_request())) for _ in range(3)]
            while len(held) < 2:
                await asyncio.sleep(0.01)
            assert conn.sm.in_flight == 2 and not conn.sm.can_send  # the third waits for a slot
            release.set()
            await asyncio.gather(*tasks)
            assert len(held) == 3
        finally:
            conn.close()
            await peer.stop()
    peer = Peer(policy)
    asyncio.run(main())


def test_node_client_reconnects_after_its_backoff() -> None:
    async def policy(req: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(md_answer(req, controller_id=7))

    async def main() -> None:
        probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = probe.sockets[0].getsockname()[1]
        probe.close()
        await probe.wait_closed()
        node = NodeClient("127.0.0.1", port, settings(reconnect_backoff_s=0.05, reconnect_backoff_max_s=0.2))
        try:
            for _ in range(3):
                with pytest.raises(KafkaConnectionError, match="cannot connect"):
                    await node.request(ApiKey.METADATA, md_request())
            assert node._failures == 3 and 0.04 <= node.backoff() <= 0.24  # doubled, capped at the maximum
            await peer.start(port)  # the broker comes up: the next request connects, after the backoff
            resp = await node.request(ApiKey.METADATA, md_request())
            assert resp.controller_id == 7 and node.connected and node._failures == 0
        finally:
            node.close()
            await peer.stop()
    peer = Peer(policy)
    asyncio.run(main())


def test_pool_shares_one_connection_per_address_until_it_is_busy() -> None:
    gate = asyncio.Event()

    async def policy(req: Request, writer: asyncio.StreamWriter) -> None:
        await gate.wait()
        writer.write(md_answer(req))

    async def main() -> None:
        await peer.start()
        pool = ConnectionPool(settings(max_in_flight=1), connections_per_node=2)
        try:
            gate.set()
            await pool.request("127.0.0.1", peer.port, ApiKey.METADATA, md_request())
            await pool.request("127.0.0.1", peer.port, ApiKey.METADATA, md_request())
            assert peer.connections == 1  # idle: reused
            gate.clear()
            busy = [asyncio.ensure_future(pool.request("127.0.0.1", peer.port, ApiKey.METADATA, md_request()))
                    for _ in range(3)]
            while len([r for r in peer.requests if r.api_key == ApiKey.METADATA]) < 4:
                await asyncio.sleep(0.01)
            gate.set()
            await asyncio.gather(*busy)
            assert peer.connections == 2  # a second connection while the first was busy, no more
        finally:
            pool.close()
            await peer.stop()
    peer = Peer(policy)
    asyncio.run(main())
