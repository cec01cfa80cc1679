"""Peer host names: a resolver that stalls or fails for a while does not hold a connection to a peer
whose address is known; one that answers, or says the name is gone, still decides.

The lookups are stubbed (the machine's resolver cannot be made to stall); the last test connects a real
``KafkaConnection`` over a real socket to a peer whose name's lookup never answers.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import pytest

from controller.host_resolver import RESOLVER, HostResolver
from controller.network_client import ConnectionSettings, KafkaConnection
from protocol.api_versions import ApiKey
from tests.controller.test_network_client import Peer, md_answer, md_request

pytestmark = pytest.mark.timeout(60)

V4 = socket.AF_INET


def info(*ips: str, port: int = 9092) -> list[tuple[Any, ...]]:
    return [(V4, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in ips]


class Lookups:
    """Stands in for the loop's getaddrinfo: each call takes the next behaviour."""

    def __init__(self, *behaviours: Callable[[], Any]) -> None:
        self.behaviours = list(behaviours)
        self.calls: list[str] = []
        self.pending: list[asyncio.Future[Any]] = []

    async def __call__(self, host: str, port: int, **_kw: Any) -> Any:
        self.calls.append(host)
        return await self.behaviours.pop(0)()


def answers(*ips: str) -> Callable[[], Any]:
    async def run() -> Any:
        return info(*ips)
    return run


def fails(errno: int) -> Callable[[], Any]:
    async def run() -> Any:
        raise socket.gaierror(errno, "stub")
    return run


def stalls(lookups: Lookups, then: list[tuple[Any, ...]] | None = None) -> Callable[[], Any]:
    async def run() -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        lookups.pending.append(fut)
        await fut
        return then
    return run


def run(body: Callable[[Lookups], Any], lookups_of: Callable[[Lookups], list[Callable[[], Any]]]) -> None:
    async def main() -> None:
        lookups = Lookups()
        lookups.behaviours = lookups_of(lookups)
        asyncio.get_running_loop().getaddrinfo = lookups  # type: ignore[method-assign]
        await body(lookups)
    asyncio.run(main())


def test_an_ip_literal_is_not_looked_up() -> None:
    async def body(lookups: Lookups) -> None:
        r = HostResolver()
        assert await r.resolve("10.0.0.7", 9092) == [(V4, "10.0.0.7")]
        assert await r.resolve("::1", 9092) == [(socket.AF_INET6, "::1")]
        assert lookups.calls == []
    run(body, lambda _l: [])


def test_a_first_lookup_is_waited_for_however_long_it_takes() -> None:
    async def body(lookups: Lookups) -> None:
        r = HostResolver(stale_after_s=0.01)
        task = asyncio.create_task(r.resolve("broker-1", 9092))
        while not lookups.pending:
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)  # well past stale_after_s: nothing known to fall back on
        assert not task.done()
        lookups.pending[0].set_result(None)
        assert await task == [(V4, "10.0.0.1")]
    run(body, lambda lookups: [stalls(lookups, info("10.0.0.1", "10.0.0.1"))])


def test_a_stalled_or_temporarily_failing_lookup_falls_back_to_the_last_good_address() -> None:
    async def body(lookups: Lookups) -> None:
        r = HostResolver(stale_after_s=0.01)
        assert await r.resolve("broker-1", 9092) == [(V4, "10.0.0.1")]
        # The resolver stops answering: the known address, without waiting for it.
        assert await r.resolve("broker-1", 9092) == [(V4, "10.0.0.1")]
        # It fails for now (EAI_AGAIN, what glibc says when no server answered): the same.
        assert await r.resolve("broker-1", 9092) == [(V4, "10.0.0.1")]
        # The stalled lookup answers late, with a new address: remembered, so the next stall uses it.
        lookups.pending[0].set_result(None)
        for _ in range(3):
            await asyncio.sleep(0)
        assert await r.resolve("broker-1", 9092) == [(V4, "10.0.0.2")]
        assert lookups.calls == ["broker-1"] * 4
    run(body, lambda lookups: [answers("10.0.0.1"), stalls(lookups, info("10.0.0.2")), fails(socket.EAI_AGAIN),
                               stalls(lookups)])


def test_an_answer_decides_and_a_name_that_is_gone_is_not_replaced_by_its_old_address() -> None:
    async def body(lookups: Lookups) -> None:
        r = HostResolver(stale_after_s=5.0)
        assert await r.resolve("broker-1", 9092) == [(V4, "10.0.0.1")]
        assert await r.resolve("broker-1", 9092) == [(V4, "10.0.0.9")]  # the peer moved
        with pytest.raises(socket.gaierror):
            await r.resolve("broker-1", 9092)  # EAI_NONAME: removed for good
        assert await r.resolve("broker-2", 9092) == [(V4, "10.0.0.2")]  # per name
    run(body, lambda _l: [answers("10.0.0.1"), answers("10.0.0.9"), fails(socket.EAI_NONAME), answers("10.0.0.2")])


def test_a_connection_to_a_known_peer_opens_while_the_resolver_is_silent() -> None:
    async def policy(req: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(md_answer(req))

    async def main() -> None:
        peer = await Peer(policy).start()
        real = asyncio.get_running_loop().getaddrinfo
        silent: list[asyncio.Future[Any]] = []

        async def lookup(host: str, port: int, **kw: Any) -> Any:
            if host != "peer.test":
                return await real(host, port, **kw)
            if not silent:
                return info("127.0.0.1", port=port)
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            silent.append(fut)
            return await fut  # never answers
        asyncio.get_running_loop().getaddrinfo = lookup  # type: ignore[method-assign]
        settings = ConnectionSettings(client_id="t", connect_timeout_s=5.0)
        try:
            first = await KafkaConnection.open("peer.test", peer.port, settings)
            first.close()
            silent.append(asyncio.get_running_loop().create_future())  # from now on the lookup stalls
            conn = await KafkaConnection.open("peer.test", peer.port, settings)
            try:
                assert (await conn.request(ApiKey.METADATA, md_request())).controller_id == 1
            finally:
                conn.close()
            assert peer.connections == 2
        finally:
            RESOLVER.forget()
            await peer.stop()
    asyncio.run(main())
