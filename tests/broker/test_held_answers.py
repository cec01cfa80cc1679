"""Answers held while the client's next request is already received (broker/connection.py, _hold):
they go out together with the answers after them, in order, in one send; nothing ever waits for a
held answer (a request that parks, a deferred answer, a request that closes the connection)."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import pytest

from broker.connection import _MAX_HELD_RESPONSES, Connection, Parts
from broker.deferred_response import DeferredResponse
from broker.request_queue import RequestPermits
from tests.broker.test_deferred_responses import (
    Scripted,
    _frame,
    _nothing_to_read,
    _read_frames,
    _run,
    _until,
)

pytestmark = pytest.mark.timeout(60)


class Parking(Scripted):
    """Scripted, plus ``W<n>``: the handler itself waits (a request parked in a purgatory) until the
    test sets ``release[W<n>]``, then answers."""

    async def __call__(self, conn: Connection, frame: memoryview) -> Parts | DeferredResponse | None:
        payload = bytes(frame)
        if payload.startswith(b"W"):
            self.handled.append(payload)
            fut = self.release[payload] = asyncio.get_running_loop().create_future()
            await fut
            return [_frame(payload)]
        return await super().__call__(conn, frame)


def count_sends(conn: Connection) -> list[bytes]:
    """Record what each send of byte chunks carried (the connection's one way to write bytes)."""
    sends: list[bytes] = []
    send_bytes = conn._send_bytes

    async def counting(chunks: list[Any], *, more: bool = False) -> None:
        sends.append(b"".join(bytes(c) for c in chunks))
        await send_bytes(chunks, more=more)

    conn._send_bytes = counting  # type: ignore[method-assign]
    return sends


def test_answers_to_pipelined_requests_go_out_in_one_send() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        sends = count_sends(conn)
        sent = [b"P1", b"P2", b"P3"]
        await asyncio.get_running_loop().sock_sendall(client, b"".join(_frame(p) for p in sent))
        assert await _read_frames(client, 3) == sent
        assert sends == [b"".join(_frame(p) for p in sent)]
        # A request on its own is answered at once.
        await asyncio.get_running_loop().sock_sendall(client, _frame(b"P4"))
        assert await _read_frames(client, 1) == [b"P4"]
        assert len(sends) == 2
        await _until(lambda: not conn.busy, "nothing held")

    _run(scenario)


def test_at_most_so_many_answers_are_held() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        sends = count_sends(conn)
        sent = [b"P%02d" % i for i in range(20)]
        await asyncio.get_running_loop().sock_sendall(client, b"".join(_frame(p) for p in sent))
        assert await _read_frames(client, 20) == sent
        per_send = _MAX_HELD_RESPONSES + 1  # the held ones and the one that could not be held
        assert [len(s) // len(_frame(b"P10")) for s in sends[:2]] == [per_send, per_send]
        assert b"".join(sends) == b"".join(_frame(p) for p in sent)

    _run(scenario)


def test_a_held_answer_does_not_wait_for_a_request_that_parks() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        await asyncio.get_running_loop().sock_sendall(client, _frame(b"P1") + _frame(b"W2") + _frame(b"P3"))
        # P1 was held (W2 was already here); W2's handler waits: the next loop turn writes P1.
        assert await _read_frames(client, 1) == [b"P1"]
        await _until(lambda: b"W2" in h.release, "W2 parked")
        assert _nothing_to_read(client)
        h.release[b"W2"].set_result(None)
        assert await _read_frames(client, 2) == [b"W2", b"P3"]
        await _until(lambda: not conn.busy, "nothing held")

    _run(scenario, Parking())


def test_a_held_answer_goes_out_before_a_deferred_one_and_those_behind_it() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        await asyncio.get_running_loop().sock_sendall(client, b"".join(
            _frame(p) for p in (b"P1", b"P2", b"D3", b"P4")))
        assert await _read_frames(client, 2) == [b"P1", b"P2"]
        await _until(lambda: len(h.handled) == 4, "all four requests handled")
        assert _nothing_to_read(client), "an answer went out ahead of the deferred one"
        h.release[b"D3"].set_result(None)
        assert await _read_frames(client, 2) == [b"D3", b"P4"]

    _run(scenario)


def test_held_answers_are_written_before_a_request_closes_the_connection() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(client, _frame(b"P1") + _frame(b"P2") + _frame(b"C") + _frame(b"P4"))
        assert await _read_frames(client, 2) == [b"P1", b"P2"]
        assert await loop.sock_recv(client, 1) == b"", "the connection stayed open"
        assert h.handled == [b"P1", b"P2", b"C"]

    _run(scenario)


def test_held_answers_are_written_before_a_too_large_request_closes_the_connection() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        loop = asyncio.get_running_loop()
        too_large = struct.pack(">i", (1 << 20) + 1)  # over the connection's max_request_bytes
        await loop.sock_sendall(client, _frame(b"P1") + _frame(b"P2") + too_large)
        assert await _read_frames(client, 2) == [b"P1", b"P2"]
        assert await loop.sock_recv(client, 1) == b"", "the connection stayed open"
        assert conn.stats.closed_request_too_large == 1

    _run(scenario)


def test_a_held_answer_to_a_client_that_left_costs_nothing() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, permits: RequestPermits) -> None:
        await asyncio.get_running_loop().sock_sendall(client, _frame(b"P1") + _frame(b"W2"))
        await _until(lambda: b"W2" in h.release, "W2 parked")
        client.close()  # P1 was written (or is on its way) to a client that is gone
        h.release[b"W2"].set_result(None)
        await _until(lambda: conn.closed, "the connection closed")
        await _until(lambda: permits.in_flight == 0, "every permit back")
        assert not conn._held and conn._held_writer is None

    _run(scenario, Parking())


def test_a_held_answer_reaches_a_client_that_stops_sending_in_the_middle_of_a_request() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        loop = asyncio.get_running_loop()
        # P1 is held (bytes of the next request are here), then the client sends no more (half-closed).
        await loop.sock_sendall(client, _frame(b"P1") + _frame(b"P2")[:3])
        client.shutdown(socket.SHUT_WR)
        assert await _read_frames(client, 1) == [b"P1"]
        assert await loop.sock_recv(client, 1) == b"", "the connection stayed open"
        assert h.handled == [b"P1"]

    _run(scenario)
