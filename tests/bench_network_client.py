"""The follower's side of replication: the one client against plain asyncio streams.

A replica fetcher sends a Fetch (v11, pinned) and reads a response that carries record batches; on
the acks=all path this happens for every produce. This benchmark measures the client's CPU cost of
that round trip through ``controller.network_client.NodeClient`` (BufferedProtocol: records land
in the frame's own buffer) and through the plain ``asyncio.StreamReader`` reading that the fetcher
used before (``readexactly`` of the frame under ``wait_for``, then a copy into a writable
``bytearray``), on the same
event loop type the broker runs (uvloop when present), against the same responder process.

Two response sizes: 1 MiB of records (throughput; CPU per MiB) and one small batch (latency bound;
CPU per round trip). Costs are CPU time of this process (``time.process_time``), best of several
repeats, the two clients interleaved so that load on a shared machine hits both alike. A ratio
above 1 means the stream reader costs more.

Run with ``make bench`` or ``.venv/bin/python -m tests.bench_network_client``.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from controller.network_client import ConnectionSettings, NodeClient
from protocol.api_versions import ApiKey
from protocol.framing import frame_size
from protocol.messages import (
    decode_response,
    encode_request,
    encode_response_bytes,
    request_type,
    response_type,
)
from protocol.records import NewRecord, build_batch

FETCH_VERSION = 11
REPEATS = 5
_FETCH = request_type(ApiKey.FETCH)
_FETCH_RESP = response_type(ApiKey.FETCH)


def _response_bytes(records_bytes: int) -> bytes:
    """A Fetch v11 response body (correlation id 0) carrying about ``records_bytes`` of batches."""
    per = build_batch([NewRecord(None, b"x" * 1000) for _ in range(64)])
    records = per * max(1, records_bytes // len(per))
    body = _FETCH_RESP(throttle_time_ms=0, error_code=0, session_id=0, responses=[_FETCH_RESP.FetchableTopicResponse(
        topic="bench", partitions=[_FETCH_RESP.PartitionData(
            partition_index=0, error_code=0, high_watermark=1 << 20, last_stable_offset=1 << 20, log_start_offset=0,
            aborted_transactions=[], preferred_read_replica=-1, records=records)])])
    return encode_response_bytes(ApiKey.FETCH, FETCH_VERSION, 0, body)


def _responder(port_q: Any, size: int) -> None:
    """Answers every request with the same Fetch response (its correlation id patched in)."""
    template = bytes(_response_bytes(size))
    srv = socket.create_server(("127.0.0.1", 0))
    port_q.put(srv.getsockname()[1])
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_serve, args=(conn, bytearray(template)), daemon=True).start()


def _serve(conn: socket.socket, out: bytearray) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    try:
        while True:
            while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
                chunk = conn.recv(65536)
                if not chunk:
                    raise ConnectionError
                buf += chunk
            n = 4 + int.from_bytes(buf[:4], "big")
            frame, buf = buf[4:n], buf[n:]
            (corr,) = struct.unpack_from(">i", frame, 4)
            struct.pack_into(">i", out, 4, corr)  # after the size prefix
            conn.sendall(out)
    except (ConnectionError, OSError):
        conn.close()


def _fetch_body() -> Any:
    return _FETCH(replica_id=1, max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, isolation_level=0, session_id=0,
                  session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[_FETCH.FetchTopic(
                      topic="bench", partitions=[_FETCH.FetchPartition(
                          partition=0, current_leader_epoch=0, fetch_offset=0, log_start_offset=0,
                          partition_max_bytes=64 << 20)])])


class StreamFetcher:
    """The plain-streams reading the fetcher did before the one client."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.corr = 0

    async def request(self, body: Any) -> Any:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        self.corr += 1
        self.writer.write(encode_request(ApiKey.FETCH, FETCH_VERSION, self.corr, "bench", body))
        await self.writer.drain()
        frame = await asyncio.wait_for(self._read_frame(), 30.0)
        corr, resp = decode_response(ApiKey.FETCH, FETCH_VERSION, memoryview(bytearray(frame)))
        assert corr == self.corr
        return resp

    async def _read_frame(self) -> bytes:
        assert self.reader is not None
        prefix = await self.reader.readexactly(4)
        return await self.reader.readexactly(frame_size(prefix, 1 << 30))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class ClientFetcher:
    """The one client, as the replica fetcher uses it."""

    def __init__(self, port: int) -> None:
        self.node = NodeClient("127.0.0.1", port, ConnectionSettings(client_id="bench", negotiate_versions=False,
                                                                      max_in_flight=1))

    async def request(self, body: Any) -> Any:
        return await self.node.request(ApiKey.FETCH, body, version=FETCH_VERSION)

    def close(self) -> None:
        self.node.close()


async def _cost(fn: Callable[..., Awaitable[Any]], n: int) -> float:
    await fn()  # connect and warm up
    start = time.process_time()
    for _ in range(n):
        await fn()
    return (time.process_time() - start) / n


async def _run(port_big: int, port_small: int) -> list[tuple[str, float, float]]:
    body = _fetch_body()
    rows: list[tuple[str, float, float]] = []
    for label, port, n in (("1 MiB of records", port_big, 60), ("one small batch", port_small, 2000)):
        best = {"client": float("inf"), "streams": float("inf")}
        client, streams = ClientFetcher(port), StreamFetcher(port)
        try:
            for _ in range(REPEATS):
                best["client"] = min(best["client"], await _cost(lambda c=client: c.request(body), n))
                best["streams"] = min(best["streams"], await _cost(lambda s=streams: s.request(body), n))
        finally:
            client.close()
            streams.close()
        rows.append((label, best["client"], best["streams"]))
    return rows


def main() -> int:
    ctx = mp.get_context("spawn")
    procs, ports = [], []
    for size in (1 << 20, 60_000):
        q = ctx.Queue()
        p = ctx.Process(target=_responder, args=(q, size), daemon=True)
        p.start()
        procs.append(p)
        ports.append(q.get(timeout=60))
    try:
        try:
            import uvloop
            rows = uvloop.run(_run(ports[0], ports[1]))
        except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
            rows = asyncio.run(_run(ports[0], ports[1]))
    finally:
        for p in procs:
            p.terminate()
    print(f"{'Fetch v11 response':<22}{'one client':>14}{'asyncio streams':>18}{'ratio':>8}")
    for label, client, streams in rows:
        print(f"{label:<22}{client * 1e6:>11.0f} us{streams * 1e6:>15.0f} us{streams / client:>8.2f}")
    print(f"(client CPU per round trip, best of {REPEATS}; ratio above 1: the streams cost more)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
