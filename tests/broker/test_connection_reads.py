"""How a plain connection receives requests (broker/connection.py): a request bigger than the read
buffer is finished with one receive that also takes the start of the next request into the buffer, and
whatever way the bytes arrive, every frame comes out whole, in order, and nothing else."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
from collections.abc import Callable

import uvloop

from broker.connection import Connection


class CountingSocket(socket.socket):
    """The broker side's socket, counting the receives that brought bytes."""

    receives = 0
    scattered_ahead = 0  # receives that finished a frame and brought bytes of the next one

    def recv_into(self, buf, *args):  # type: ignore[no-untyped-def, override]
        n = super().recv_into(buf, *args)
        self.receives += 1
        return n

    def recvmsg_into(self, buffers, *args):  # type: ignore[no-untyped-def, override]
        buffers = list(buffers)
        result = super().recvmsg_into(buffers, *args)
        self.receives += 1
        if result[0] > len(buffers[0]):
            self.scattered_ahead += 1
        return result


def _connected_pair() -> tuple[socket.socket, CountingSocket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    broker_side = CountingSocket(fileno=accepted.detach())
    broker_side.setblocking(False)
    return client, broker_side


def _frame(i: int, size: int) -> bytes:
    payload = (b"%08d" % i) * (size // 8 + 1)
    return struct.pack(">i", size) + payload[:size]


Sender = Callable[[socket.socket], None]


async def _serve(frames: list[bytes], send: Sender, *, before: bool) -> tuple[list[bytes], CountingSocket, int]:
    """Serve one connection until every frame was handled; ``send`` runs on a thread, or first when
    ``before`` (everything then waits in the socket buffers when the connection starts reading)."""
    got: list[bytes] = []

    async def handler(conn: Connection, frame: memoryview) -> None:
        got.append(bytes(frame))
        return None  # like acks=0: no response

    client, broker_side = _connected_pair()
    if before:
        send(client)
    sender = threading.Thread(target=send if not before else lambda _sock: None, args=(client,), daemon=True)
    sender.start()
    conn = Connection(broker_side, handler, max_request_bytes=1 << 20, listener="l", peer=("c", 1))
    task = asyncio.create_task(conn.serve())
    while len(got) < len(frames):
        await asyncio.sleep(0.01)
    sender.join(30)
    client.shutdown(socket.SHUT_WR)
    await task
    client.close()
    return got, broker_side, conn.stats.bytes_in


def _run(frames: list[bytes], send: Sender, *, before: bool = False) -> tuple[list[bytes], CountingSocket, int]:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(_serve(frames, send, before=before))


def test_frames_arriving_in_pieces_come_out_whole() -> None:
    rng = random.Random(7)
    frames = [_frame(i, rng.choice([1, 3, 4092, 4096, 4097, 9000, 16_500, 70_000])) for i in range(300)]
    wire = b"".join(frames)

    def send(sock: socket.socket) -> None:
        # Cut anywhere: inside size prefixes, at buffer boundaries, several requests at once.
        pos = 0
        while pos < len(wire):
            step = rng.choice([1, 2, 5, 4096, 4100, 20_000, 100_000])
            sock.sendall(wire[pos:pos + step])
            pos += step

    got, _, bytes_in = _run(frames, send)
    assert got == [f[4:] for f in frames]
    assert bytes_in == len(wire)


def test_a_waiting_request_costs_one_receive() -> None:
    frames = [_frame(i, 16_500) for i in range(40)]  # a Java producer's 16 KiB batches
    wire = b"".join(frames)

    def send(sock: socket.socket) -> None:
        sock.sendall(wire)

    got, broker_side, bytes_in = _run(frames, send, before=True)
    assert got == [f[4:] for f in frames]
    assert bytes_in == len(wire)
    # Each frame is finished by a receive that also brings the next one's first bytes (the last frame
    # has no next one, and bytes not yet on the broker's side of the loopback can split a receive).
    assert broker_side.scattered_ahead >= len(frames) // 2, broker_side.scattered_ahead
    # Two receives per request before: the buffer's 4 KiB, then the rest of the frame.
    assert broker_side.receives < 1.5 * len(frames), broker_side.receives
