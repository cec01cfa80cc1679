"""A small TCP proxy that adds latency, jitter and connection resets (the kernel here has no netem).

It runs inside a node's namespace in front of that node's server (a broker's listener, ZooKeeper's
client port), so every connection *to* the node passes it, whoever opens it; its delays apply to both
directions of the connection. Bytes keep their order: a chunk leaves no earlier than the one before it.

Its settings are a JSON file it re-reads whenever the file changes, so the harness turns faults on
and off without a control socket:

    {"latency_ms": 100, "jitter_ms": 100, "reset_percent": 0}

each chunk is held ``latency_ms`` plus a uniform random value in ``[-jitter_ms, +jitter_ms]`` (never
less than 0); with ``reset_percent`` > 0, each chunk has that chance of resetting the connection (RST
to both sides, as toxiproxy's reset_peer does).

    python -m tests.chaos.proxy --listen 10.203.0.20:9092 --target 10.203.0.20:19092 --control FILE --seed 7
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path

CHECK_EVERY = 0.1  # seconds between looks at the control file


@dataclass
class Toxics:
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    reset_percent: float = 0.0

    def delay(self, rng: random.Random) -> float:
        if not self.latency_ms and not self.jitter_ms:
            return 0.0
        return max(0.0, self.latency_ms + rng.uniform(-self.jitter_ms, self.jitter_ms)) / 1000.0


def write_control(path: Path, latency_ms: float = 0, jitter_ms: float = 0, reset_percent: float = 0) -> None:
    """Atomically replace the control file (the proxy never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"latency_ms": latency_ms, "jitter_ms": jitter_ms, "reset_percent": reset_percent}))
    os.replace(tmp, path)


class Proxy:
    def __init__(self, listen: tuple[str, int], target: tuple[str, int], control: Path, seed: int) -> None:
        self.listen = listen
        self.target = target
        self.control = control
        self.rng = random.Random(seed)
        self.toxics = Toxics()
        self._mtime = 0.0

    def _reload(self) -> None:
        try:
            mtime = self.control.stat().st_mtime
            if mtime == self._mtime:
                return
            self._mtime = mtime
            self.toxics = Toxics(**json.loads(self.control.read_text()))
        except (OSError, ValueError, TypeError):
            pass  # keep the last good settings

    async def _watch(self) -> None:
        while True:
            self._reload()
            await asyncio.sleep(CHECK_EVERY)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    both: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        # Chunks are released in order: each one at max(its own due time, the previous one's).
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def release() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            with contextlib.suppress(OSError):
                writer.write_eof()

        releaser = asyncio.create_task(release())
        last_due = 0.0
        try:
            while True:
                data = await reader.read(65536)
                if self.toxics.reset_percent and data and self.rng.uniform(0, 100) < self.toxics.reset_percent:
                    for w in both:
                        _reset(w)
                    return
                last_due = max(last_due, time.monotonic() + self.toxics.delay(self.rng))
                await queue.put((last_due, data))
                if not data:
                    break
            await releaser
        except (OSError, asyncio.IncompleteReadError):
            for w in both:
                _reset(w)
        finally:
            releaser.cancel()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(client_w)
            return
        both = (client_w, server_w)
        await asyncio.gather(self._pipe(client_r, server_w, both), self._pipe(server_r, client_w, both),
                             return_exceptions=True)
        for w in both:
            w.close()

    async def run(self) -> None:
        self._reload()
        server = await asyncio.start_server(self._serve, *self.listen, reuse_address=True)
        watcher = asyncio.create_task(self._watch())
        async with server:
            await server.serve_forever()
        watcher.cancel()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST: SO_LINGER with a zero timeout makes close() abort the connection."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", required=True, type=_address)
    ap.add_argument("--target", required=True, type=_address)
    ap.add_argument("--control", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    asyncio.run(Proxy(args.listen, args.target, args.control, args.seed).run())


if __name__ == "__main__":
    main()
