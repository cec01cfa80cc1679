"""One client connection: read frames, hand them to the request handler, write responses in order.

Kafka processes one request per connection at a time (the channel is muted until the response is
sent); clients that pipeline simply have their next requests wait in the socket buffer. We do the
same: read a frame, handle it, write the response, read the next. Produce with acks=0 has no response.

Responses are written with the socket's fd directly: byte chunks with ``send`` and file regions
with ``os.sendfile``, waiting for writability on EAGAIN. asyncio's own ``loop.sendfile`` may fall back
to read+write in Python (uvloop's transports do), which would defeat zero copy.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Sequence

from protocol.exceptions import FrameTooLargeError, ProtocolError
from protocol.framing import check_frame_size
from protocol.schema import FileRegion

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_READ_CHUNK = 256 * 1024

# What a handler returns: wire parts (bytes/memoryview/FileRegion), or None for "no response".
Parts = Sequence[bytes | bytearray | memoryview | FileRegion]
Handler = Callable[["Connection", memoryview], Awaitable[Parts | None]]


class ConnectionClosed(Exception):
    """The peer went away (or idled out). ``mid_request``: it left part of a request unsent."""

    def __init__(self, reason: str, *, mid_request: bool = False) -> None:
        super().__init__(reason)
        self.mid_request = mid_request


class Connection:
    """A client socket served by the broker's event loop."""

    def __init__(self, sock: socket.socket, handler: Handler, *, max_request_bytes: int,
                 idle_timeout_s: float, listener: str, stats: ConnectionStats | None = None) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.fd = sock.fileno()
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.idle_timeout_s = idle_timeout_s
        self.listener = listener
        self.loop = asyncio.get_running_loop()
        try:
            peer = sock.getpeername()
            self.peer = f"{peer[0]}:{peer[1]}"
            self.client_host = peer[0]
        except OSError:
            self.peer, self.client_host = "?", "?"
        self._buf = bytearray(_READ_CHUNK)
        self._view = memoryview(self._buf)
        self._start = 0  # first unread byte in _buf
        self._end = 0  # end of received data in _buf
        self.stats = stats or ConnectionStats()
        self.closed = False
        self._task: asyncio.Task[None] | None = None  # the serve() task, while it runs
        self.in_flight = False  # a request is being handled (graceful shutdown waits for it)

    # -- reading ------------------------------------------------------------------------------------

    async def _recv_some(self) -> None:
        """Receive more bytes into the buffer (compacting it first), or raise ConnectionClosed."""
        if self._start == self._end:
            self._start = self._end = 0
        elif self._end == len(self._buf):
            n = self._end - self._start
            self._buf[:n] = self._buf[self._start:self._end]
            self._start, self._end = 0, n
        try:
            n = await asyncio.wait_for(self.loop.sock_recv_into(self.sock, self._view[self._end:]),
                                       self.idle_timeout_s)
        except TimeoutError:
            raise ConnectionClosed("idle for connections.max.idle.ms") from None
        except (ConnectionError, OSError) as e:
            raise ConnectionClosed(str(e)) from None
        if n == 0:
            raise ConnectionClosed("closed by peer")
        self._end += n
        self.stats.bytes_in += n

    async def read_frame(self) -> memoryview:
        """The next request frame, in a writable buffer of its own (handlers may keep views)."""
        while self._end - self._start < 4:
            try:
                await self._recv_some()
            except ConnectionClosed as e:
                if self._end > self._start:
                    raise ConnectionClosed(f"{e} after {self._end - self._start} bytes of a size prefix",
                                           mid_request=True) from None
                raise
        (size,) = _SIZE.unpack_from(self._buf, self._start)
        check_frame_size(size, self.max_request_bytes)
        self._start += 4
        frame = bytearray(size)
        fview = memoryview(frame)
        got = min(size, self._end - self._start)
        fview[:got] = self._view[self._start:self._start + got]
        self._start += got
        while got < size:
            # Large frames are read straight into their own buffer, not through ours.
            try:
                n = await asyncio.wait_for(self.loop.sock_recv_into(self.sock, fview[got:]), self.idle_timeout_s)
            except TimeoutError:
                raise ConnectionClosed(f"idle after {got} of {size} bytes of a request",
                                       mid_request=True) from None
            except (ConnectionError, OSError) as e:
                raise ConnectionClosed(f"{e} after {got} of {size} bytes of a request", mid_request=True) from None
            if n == 0:
                raise ConnectionClosed(f"closed by peer after {got} of {size} bytes of a request",
                                       mid_request=True)
            got += n
            self.stats.bytes_in += n
        return fview

    # -- writing ------------------------------------------------------------------------------------

    async def _writable(self) -> None:
        fut = self.loop.create_future()
        self.loop.add_writer(self.fd, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            self.loop.remove_writer(self.fd)

    async def write_parts(self, parts: Parts) -> None:
        """Write byte chunks with send() and file regions with os.sendfile(), in order."""
        chunks: list[bytes | bytearray | memoryview] = []
        try:
            for part in parts:
                if isinstance(part, FileRegion):
                    if chunks:
                        await self._send_bytes(chunks)
                        chunks = []
                    await self._sendfile(part)
                    part.release()
                else:
                    chunks.append(part)
            if chunks:
                await self._send_bytes(chunks)
        finally:
            # Written or not (the peer left), the regions let go of their segment files: storage
            # closes a deleted segment's descriptor only after the last region using it is released.
            for part in parts:
                if isinstance(part, FileRegion):
                    part.release()

    async def _send_bytes(self, chunks: list[bytes | bytearray | memoryview]) -> None:
        data = memoryview(b"".join(chunks)) if len(chunks) > 1 else memoryview(chunks[0]).cast("B")
        while data:
            try:
                n = self.sock.send(data)
            except BlockingIOError:
                await self._writable()
                continue
            except (ConnectionError, OSError) as e:
                raise ConnectionClosed(str(e)) from None
            self.stats.bytes_out += n
            data = data[n:]

    async def _sendfile(self, region: FileRegion) -> None:
        offset, remaining = region.position, region.length
        while remaining > 0:
            try:
                n = os.sendfile(self.fd, region.fd, offset, remaining)
            except BlockingIOError:
                await self._writable()
                continue
            except (ConnectionError, OSError) as e:
                raise ConnectionClosed(str(e)) from None
            if n == 0:
                # The file is shorter than the region (truncated underneath us): the response
                # length is already on the wire, so the only safe move is to drop the connection.
                raise ConnectionClosed("segment shrank during sendfile")
            offset += n
            remaining -= n
            self.stats.bytes_out += n
            self.stats.sendfile_bytes += n

    # -- the loop -----------------------------------------------------------------------------------

    async def serve(self) -> None:
        self._task = asyncio.current_task()
        try:
            while True:
                frame = await self.read_frame()
                started = time.monotonic()
                self.in_flight = True
                parts = await self.handler(self, frame)
                if parts is not None:
                    await self.write_parts(parts)
                self.in_flight = False
                self.stats.requests += 1
                self.stats.busy_s += time.monotonic() - started
        except ConnectionClosed as e:
            if e.mid_request:
                log.info("connection from %s lost in the middle of a request: %s", self.peer, e)
            else:
                log.debug("connection %s closed: %s", self.peer, e)
        except FrameTooLargeError as e:
            log.warning("closing connection from %s: %s", self.peer, e)
        except ProtocolError as e:
            log.warning("closing connection from %s: invalid request: %s", self.peer, e)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A bug in a handler must never take the broker down; it costs this client its connection.
            log.exception("closing connection from %s after an unexpected error", self.peer)
        finally:
            self._task = None
            self.close()

    def close(self) -> None:
        """Close the connection. From outside its serve() task (broker shutdown), the task is cancelled
        and closes the socket itself once its pending receive or send is withdrawn: closing a socket
        under a pending loop operation makes that operation fail on a dead file descriptor."""
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            return
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass


class ConnectionStats:
    __slots__ = ("bytes_in", "bytes_out", "sendfile_bytes", "requests", "busy_s")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0
        self.sendfile_bytes = 0
        self.requests = 0
        self.busy_s = 0.0
