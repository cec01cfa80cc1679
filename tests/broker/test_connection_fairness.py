"""A connection reads a request straight from its socket when the bytes are already there, without a
loop turn (broker/connection.py). A client whose requests are always waiting must still not keep the
event loop to itself: every other connection is served between two of its requests."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

import uvloop

from broker.connection import Connection


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _connected_pair() -> tuple[socket.socket, socket.socket]:
    """(client, broker side) of one TCP connection over loopback, as the broker's sockets are."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    return client, accepted


def _drain(sock: socket.socket) -> None:
    while sock.recv(65536):
        pass


async def _serve_both(busy_requests: int) -> list[str]:
    handled: list[str] = []

    async def handler(conn: Connection, frame: memoryview) -> list[bytes]:
        handled.append(f"{conn.listener}:{bytes(frame).decode()}")
        return [_frame(b"ok")]

    (busy_client, busy_side), (quiet_client, quiet_side) = _connected_pair(), _connected_pair()
    # Every request of both clients is in the broker's socket buffers before either connection runs,
    # so each receive finds its bytes waiting; the clients read their answers on threads of their own,
    # so no answer waits for buffer space either.
    busy_client.sendall(b"".join(_frame(b"%d" % i) for i in range(busy_requests)))
    quiet_client.sendall(_frame(b"0"))
    readers = [threading.Thread(target=_drain, args=(c,), daemon=True) for c in (busy_client, quiet_client)]
    for r in readers:
        r.start()
    busy = Connection(busy_side, handler, max_request_bytes=1 << 20, listener="busy", peer=("busy", 1))
    quiet = Connection(quiet_side, handler, max_request_bytes=1 << 20, listener="quiet", peer=("quiet", 2))
    tasks = [asyncio.create_task(busy.serve()), asyncio.create_task(quiet.serve())]
    while len(handled) < busy_requests + 1:
        await asyncio.sleep(0.01)
    for c in (busy_client, quiet_client):
        c.shutdown(socket.SHUT_WR)  # the broker sees EOF and its connections end
    await asyncio.gather(*tasks)
    for r in readers:
        r.join(30)
    busy_client.close()
    quiet_client.close()
    return handled


def test_a_client_whose_requests_are_always_waiting_does_not_hold_up_another() -> None:
    n = 500
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        handled = runner.run(_serve_both(n))
    assert sorted(handled) == sorted([f"busy:{i}" for i in range(n)] + ["quiet:0"])
    assert [h for h in handled if h.startswith("busy:")] == [f"busy:{i}" for i in range(n)]  # in order
    # The quiet client's one request comes within the busy client's first few, not after all of them.
    assert handled.index("quiet:0") <= 2, handled[:10]
