"""How a plain connection receives requests (broker/connection.py): a request bigger than the read
buffer is finished with one receive that also takes the start of the next request into the buffer, and
whatever way the bytes arrive, every frame comes out whole, in order, and nothing else. A client that
waits for each answer (a follower) keeps the connection's registration with the loop from one request
to the next, and bytes that arrive while nobody waits for them do not keep the loop firing."""

from __future__ import annotations

import asyncio
import random
import select
import socket
import struct
import threading
from collections.abc import Callable

import uvloop

from broker.connection import Connection
from tests.broker.loop_watches import CountingLoopWatches


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


def test_a_client_that_waits_for_each_answer_keeps_the_registration() -> None:
    async def main() -> None:
        client, broker_side = _connected_pair()
        client.setblocking(False)
        loop = asyncio.get_running_loop()
        readers = CountingLoopWatches(loop, broker_side.fileno(), "reader")

        async def handler(conn: Connection, frame: memoryview) -> list[bytes]:
            return [struct.pack(">i", len(frame)) + bytes(frame)]

        conn = Connection(broker_side, handler, max_request_bytes=1 << 20, listener="l", peer=("c", 1))
        task = asyncio.create_task(conn.serve())
        for i in range(50):  # one request at a time, as a follower fetches
            await loop.sock_sendall(client, _frame(i, 100))
            answer = b""
            while len(answer) < 104:
                answer += await loop.sock_recv(client, 4096)
            assert answer == _frame(i, 100)
        # Every request after the first was waited for: with the registration kept, the loop was
        # asked once (it was asked and told to forget twice per request before).
        assert readers.added == 1 and readers.removed == 0, (readers.added, readers.removed)
        client.close()
        await asyncio.wait_for(task, 30)
        assert conn.closed and readers.removed == 1  # closing lets the descriptor go first

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def test_bytes_arriving_while_a_request_is_handled_do_not_keep_the_loop_firing() -> None:
    async def main() -> None:
        client, broker_side = _connected_pair()
        client.setblocking(False)
        # Without it, Nagle would hold the third request until the second is acknowledged.
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        loop = asyncio.get_running_loop()
        release: asyncio.Future[None] = loop.create_future()
        handled: list[bytes] = []

        async def handler(conn: Connection, frame: memoryview) -> list[bytes]:
            handled.append(bytes(frame))
            if len(handled) == 2:
                await release  # a long request; the client's next one waits in the socket meanwhile
            return [struct.pack(">i", len(frame)) + bytes(frame)]

        conn = Connection(broker_side, handler, max_request_bytes=1 << 20, listener="l", peer=("c", 1))
        fired = 0
        real = conn._socket_readable

        def counting() -> None:
            nonlocal fired
            fired += 1
            real()

        conn._socket_readable = counting  # type: ignore[method-assign]
        task = asyncio.create_task(conn.serve())
        await loop.sock_sendall(client, _frame(1, 10))
        assert await loop.sock_recv(client, 4096) == _frame(1, 10)  # the connection waits, registered
        await loop.sock_sendall(client, _frame(2, 10))
        while len(handled) < 2:
            await asyncio.sleep(0.001)
        before = fired
        await loop.sock_sendall(client, _frame(3, 10))  # readable while nobody waits for it
        assert select.select([broker_side], [], [], 5)[0], "the third request did not arrive"
        for _ in range(200):
            await asyncio.sleep(0)
        assert fired - before <= 1, f"the reader fired {fired - before} times while nobody waited"
        release.set_result(None)
        got = b""
        while len(got) < 28:
            got += await loop.sock_recv(client, 4096)
        assert got == _frame(2, 10) + _frame(3, 10)
        assert handled == [_frame(i, 10)[4:] for i in (1, 2, 3)]
        client.close()
        await asyncio.wait_for(task, 30)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
