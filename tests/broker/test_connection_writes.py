"""How a plain connection writes an answer bigger than its socket's send buffer (broker/connection.py):
a fetch answer of 1 MiB from a segment file goes out with sendfile in several short writes. After a
short write the connection waits for room instead of calling sendfile again (which could only fail with
EAGAIN), and it keeps its registration with the loop across the waits of one answer rather than adding
and removing it for each. Every byte arrives, in order."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import tempfile
import threading

import pytest
import uvloop

from broker.connection import Connection
from protocol.schema import FileRegion
from tests.broker.loop_watches import CountingLoopWatches

SEND_BUFFER = 100 * 1024  # Kafka's socket.send.buffer.bytes
ANSWER = 1024 * 1024
REQUESTS = 8


def test_a_large_file_answer_waits_for_room_and_keeps_its_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"sendfile": 0, "eagain": 0}
    real_sendfile = os.sendfile

    def counting_sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        calls["sendfile"] += 1
        try:
            return real_sendfile(out_fd, in_fd, offset, count)
        except BlockingIOError:
            calls["eagain"] += 1
            raise

    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    content = os.urandom(ANSWER)

    async def main() -> None:
        with tempfile.TemporaryFile() as f, socket.create_server(("127.0.0.1", 0)) as server:
            f.write(content)
            f.flush()
            client = socket.create_connection(server.getsockname())
            accepted, _ = server.accept()
            accepted.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
            accepted.setblocking(False)
            loop = asyncio.get_running_loop()
            writers = CountingLoopWatches(loop, accepted.fileno(), "writer")

            async def handler(conn: Connection, frame: memoryview) -> list[object]:
                return [struct.pack(">i", ANSWER), FileRegion(f.fileno(), 0, ANSWER)]

            conn = Connection(accepted, handler, max_request_bytes=1 << 20, listener="l", peer=("c", 1))
            task = asyncio.create_task(conn.serve())
            answers: list[bytes] = []

            def read_answers() -> None:
                # One request at a time, as a consumer fetches; the reader drains as fast as it can.
                for i in range(REQUESTS):
                    client.sendall(struct.pack(">i", 4) + b"%04d" % i)
                    size = struct.unpack(">i", _read_exactly(client, 4))[0]
                    answers.append(_read_exactly(client, size))

            reader = threading.Thread(target=read_answers, daemon=True)
            reader.start()
            await loop.run_in_executor(None, reader.join, 60)
            assert not reader.is_alive()
            client.close()
            await asyncio.wait_for(task, 30)
            assert conn.closed

            assert answers == [content] * REQUESTS
            # The answers did not fit the send buffer: they went out in several writes each...
            assert calls["sendfile"] > REQUESTS, calls
            # ...none of which found the buffer full (a call right after a short write used to) ...
            assert calls["eagain"] == 0, calls
            # ...and the loop was asked at most once per answer to say when there is room, and told to
            # forget it as often (per wait before: as many as the short writes).
            assert writers.added <= REQUESTS and writers.removed == writers.added, (writers.added, writers.removed)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 16))
        assert chunk, "connection closed early"
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
