"""One client connection: read frames, hand them to the request handler, write responses in order.

Kafka processes one request per connection at a time (the channel is muted until the response is
sent); clients that pipeline simply have their next requests wait in the socket buffer. We do the
same: read a frame, handle it, write the response, read the next. Produce with acks=0 has no response.
One exception: a produce that has appended its batches and only waits for acks=all hands back that
wait (a DeferredResponse). Its response, and those of the requests read after it, are then written
in request order by a writer task while this one reads and handles the next requests, up to
``_MAX_QUEUED_RESPONSES`` of them (broker/deferred_response.py says why). Answers that are ready
together (one HW move completes several acks=all produces) leave in one send: on loopback and on
a LAN every send wakes the client, and on two shared cores wake-ups, not bytes, are the cost.

Responses are written with the socket's fd directly: byte chunks with ``send`` and file regions
with ``os.sendfile``, waiting for writability on EAGAIN. asyncio's own ``loop.sendfile`` may fall
back to read+write in Python (uvloop's transports do), which would defeat zero copy. The bytes
before a region are sent with MSG_MORE, so a fetch response's headers and data reach the peer as
one segment.

TLS listeners use ``broker.security.tls_connection.TlsConnection``, a subclass that replaces the
transport primitives (receive, send bytes, send a file region) and runs the handshake in
``establish()``; the plain path below is unchanged by it (the receive primitive is a bound method
chosen once per connection).

Memory per connection is bounded and grows only on demand: an idle connection holds a small read
buffer; a request gets a buffer of exactly its size once a permit for it is granted (``RequestPermits``,
queued.max.requests / queued.max.request.bytes), and that buffer is dropped with the response. Idle
connections are closed by the broker's sweeper (connections.max.idle.ms), which reads ``last_active``
rather than arming a timer per receive.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from broker.deferred_response import DeferredResponse
from broker.metrics_timing import CURRENT_CLOCK, RequestClock
from broker.rate_limited_log import RateLimitedLog
from broker.request_queue import RequestPermits
from broker.security.principal import ANONYMOUS, KafkaPrincipal
from protocol.exceptions import FrameTooLargeError, ProtocolError
from protocol.framing import frame_size
from protocol.schema import FileRegion

log = logging.getLogger(__name__)
# Closures a client can cause at will are logged at most once per interval per kind (limits), or a
# few per interval (invalid requests, whose text helps whoever debugs a client).
limited_log = RateLimitedLog(log)
invalid_request_log = RateLimitedLog(log, burst=20)

# The read buffer every connection keeps: enough for the size prefix and most small requests in one
# receive. Bigger requests are read straight into a buffer of their own size.
_READ_BUFFER = 4096
# A request still being handled after this long has its connection watched for the client leaving.
_WATCH_PEER_AFTER_S = 1.0
# Responses one connection may have waiting behind a deferred one (broker/deferred_response.py):
# a Kafka producer keeps at most 5 requests in flight (max.in.flight.requests.per.connection).
_MAX_QUEUED_RESPONSES = 5
# Answers held back while the client's next request is already here, to go out in one send with the
# answers after them (see _hold): at most this many, and this many bytes, so the first of them waits
# for a bounded amount of work.
_MAX_HELD_RESPONSES = 8
_MAX_HELD_BYTES = 64 * 1024
# Requests whose handlers only wait once they have done their work (produce: appended, waiting for
# acks=all; fetch: waiting for bytes), so dropping them when their client leaves changes nothing.
_CANCELLABLE_WHILE_PENDING = frozenset({0, 1})  # Produce, Fetch

# What a handler returns: wire parts (bytes/memoryview/FileRegion), or None for "no response".
Parts = Sequence[bytes | bytearray | memoryview | FileRegion]
# A produce waiting for acks=all may hand back the rest of its work (broker/deferred_response.py).
HandlerResult = Parts | DeferredResponse | None
Handler = Callable[["Connection", memoryview], Awaitable[HandlerResult]]


class _QueuedResponse:
    """A response waiting for its turn to be written: its parts, or the task that makes them."""

    __slots__ = ("started", "clock", "permit", "task", "parts")

    def __init__(self, started: float, clock: RequestClock, permit: int | None) -> None:
        self.started = started
        self.clock = clock
        self.permit = permit
        self.task: asyncio.Task[Parts | None] | None = None
        self.parts: Parts | None = None


def _byte_chunks(parts: Parts) -> list[bytes | bytearray | memoryview] | None:
    """The parts as a list of byte chunks, or None when a file region is among them."""
    chunks: list[bytes | bytearray | memoryview] = []
    for part in parts:
        if isinstance(part, FileRegion):
            return None
        chunks.append(part)
    return chunks


def _take_ready_chunks(queue: deque[_QueuedResponse], chunks: list[bytes | bytearray | memoryview]) -> int:
    """Append to ``chunks`` the bytes of the answers right behind the head of ``queue`` that are
    already made (not waiting, not failed, no file region); return how many answers ``chunks`` now
    holds, the head included. The first that is not ready stops the run: answers go out in order."""
    taken = 1
    for entry in itertools.islice(queue, 1, None):
        task = entry.task
        if task is None:
            parts = entry.parts
        elif task.done() and not task.cancelled() and task.exception() is None:
            parts = task.result()
        else:
            break
        if parts is not None:
            more = _byte_chunks(parts)
            if more is None:
                break
            chunks.extend(more)
        taken += 1
    return taken


class ConnectionClosed(Exception):
    """The peer went away (or idled out). ``mid_request``: it left part of a request unsent."""

    def __init__(self, reason: str, *, mid_request: bool = False) -> None:
        super().__init__(reason)
        self.mid_request = mid_request


class CloseConnection(Exception):
    """Raised by a handler: close this connection without a response (the handler counted and
    logged why), as Kafka's network layer does with a request its listener does not serve."""


class Connection:
    """A client socket served by the broker's event loop."""

    def __init__(self, sock: socket.socket, handler: Handler, *, max_request_bytes: int,
                 listener: str, stats: ConnectionStats | None = None, permits: RequestPermits | None = None,
                 peer: tuple[str, int] | None = None) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.fd = sock.fileno()
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.listener = listener
        self.loop = asyncio.get_running_loop()
        if peer is None:
            try:
                peer = sock.getpeername()[:2]
            except OSError:
                peer = ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.client_host = peer[0]
        # The receive primitive, (sock, buffer) -> bytes received (0 at EOF); TLS connections put
        # theirs here. Each sets _waited when it had to wait for the loop (see serve()).
        self._recv_into: Callable[[socket.socket, memoryview], Awaitable[int]] = self._plain_recv_into
        # Whether the rest of a request and the start of the next may be received together (a plain
        # socket's recvmsg into two buffers; TLS records are decrypted by their own primitive).
        self._scatter = True
        self._waited = True
        self._buf = bytearray(_READ_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0  # first unread byte in _buf
        self._end = 0  # end of received data in _buf
        self.stats = stats or ConnectionStats()
        self.permits = permits or RequestPermits(1 << 30)
        self.closed = False
        self._task: asyncio.Task[None] | None = None  # the serve() task, while it runs
        self.in_flight = False  # a request is being handled (graceful shutdown waits for it)
        self.last_active = time.monotonic()  # last byte received or sent (idle expiry, LRU closing)
        self.close_reason: str | None = None  # set by whoever closes it from outside (metrics, logs)
        self._watching = False  # watching the socket for the client leaving during a long request
        # The plain receive's registration with the loop, kept between waits (_wait_readable).
        self._reader_armed = False
        self._read_waiter: asyncio.Future[None] | None = None
        self._permit: int | None = None  # size of the request permit held, while one is
        self._api_key = -1  # of the request being handled
        # Who the peer is: ANONYMOUS until TLS (client certificate) or SASL says otherwise.
        self.security_protocol = "PLAINTEXT"
        self.principal: KafkaPrincipal = ANONYMOUS
        # KIP-219: a throttled client's channel is muted (no request read) until this monotonic time.
        self.muted_until = 0.0
        # Where the current request's time goes (RequestMetrics' phases; broker/metrics_timing.py).
        self.clock = RequestClock()
        # Responses to write, in request order, behind one that is not ready yet; and the task
        # writing them while there are any.
        self._queued: deque[_QueuedResponse] = deque()
        self._writer: asyncio.Task[None] | None = None
        self._space: asyncio.Future[None] | None = None
        # Answers made but not yet written, because the next request was already received (_hold);
        # the loop callback that writes them if this task waits before it writes again, and the
        # task that callback started.
        self._held: list[bytes | bytearray | memoryview] = []
        self._held_responses = 0
        self._held_bytes = 0
        self._held_flush: asyncio.Handle | None = None
        self._held_writer: asyncio.Task[None] | None = None
        self._yielding = False  # this task gave the loop a turn for fairness only: it is not waiting
        # The socket watched for room to write, across the waits of one send (_writable).
        self._writer_armed = False
        self._write_waiter: asyncio.Future[None] | None = None

    def throttle(self, throttle_ms: int) -> None:
        """Mute the channel for ``throttle_ms`` after the current response (quota enforcement)."""
        if throttle_ms > 0:
            self.muted_until = max(self.muted_until, time.monotonic() + throttle_ms / 1000.0)

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
            n = await self._recv_into(self.sock, self._view[self._end:])
        except (ConnectionError, OSError) as e:
            raise ConnectionClosed(str(e)) from None
        if n == 0:
            raise ConnectionClosed("closed by peer")
        self._end += n
        self.stats.bytes_in += n
        self.last_active = time.monotonic()

    async def _plain_recv_into(self, sock: socket.socket, buf: memoryview) -> int:
        """Receive into ``buf``: straight from the socket when bytes are waiting, else after waiting
        for the socket to become readable.

        A client that keeps requests in flight (every producer) almost always has its next bytes
        waiting, so the socket is tried first. One that does not (a follower: one fetch at a time)
        makes the connection wait after every answer; the wait keeps the socket registered with the
        loop from one request to the next (``_wait_readable``), where the loop's own receive would
        register and unregister it each time: with uvloop, a new poll handle, an ioctl and about five
        epoll_ctl calls per receive."""
        while True:
            try:
                return sock.recv_into(buf)
            except BlockingIOError:
                pass
            self._waited = True
            await self._wait_readable()

    async def _wait_readable(self) -> None:
        fut = self._read_waiter = self.loop.create_future()
        if not self._reader_armed:
            self._reader_armed = True
            self.loop.add_reader(self.fd, self._socket_readable)
        try:
            await fut
        finally:
            self._read_waiter = None

    def _socket_readable(self) -> None:
        fut = self._read_waiter
        if fut is not None and not fut.done():
            fut.set_result(None)
            return
        # Readable while nobody waits (a request is being handled, or answers wait to be written):
        # epoll is level-triggered, so the registration goes, or it would fire on every loop turn.
        self._disarm_reader()

    def _disarm_reader(self) -> None:
        if self._reader_armed:
            self._reader_armed = False
            self.loop.remove_reader(self.fd)

    async def read_frame(self) -> memoryview:
        """The next request frame, in a writable buffer of its own (handlers may keep views).

        Holds a request permit from the moment its size is known; serve() gives it back."""
        while self._end - self._start < 4:
            try:
                await self._recv_some()
            except ConnectionClosed as e:
                if self._end > self._start:
                    raise ConnectionClosed(f"{e} after {self._end - self._start} bytes of a size prefix",
                                           mid_request=True) from None
                raise
        size = frame_size(self._view[self._start:self._start + 4], self.max_request_bytes)
        self._start += 4
        # Waiting for a permit is not idleness: the client did send a request.
        self.in_flight = True
        try:
            await self.permits.acquire(size)
        finally:
            self.in_flight = False
            self.last_active = time.monotonic()
        try:
            return await self._read_body(size)
        except BaseException:
            self.permits.release(size)
            raise

    async def _read_body(self, size: int) -> memoryview:
        frame = bytearray(size)
        fview = memoryview(frame)
        got = min(size, self._end - self._start)
        fview[:got] = self._view[self._start:self._start + got]
        self._start += got
        while got < size:
            # Large frames are read straight into their own buffer, not through ours.
            n = -1
            if self._scatter:
                # Everything buffered belonged to this frame, so our buffer is empty: one receive takes
                # the rest of the frame into its buffer and the start of the next request (a producer
                # with requests in flight has it waiting) into ours. That is one receive per request
                # where there were two, the size prefix of the next being already here.
                self._start = self._end = 0
                try:
                    n = self.sock.recvmsg_into((fview[got:], self._view))[0]
                except BlockingIOError:
                    n = -1
                except (ConnectionError, OSError) as e:
                    raise ConnectionClosed(f"{e} after {got} of {size} bytes of a request",
                                           mid_request=True) from None
                if n > size - got:
                    self._end = n - (size - got)
            if n < 0:
                try:
                    n = await self._recv_into(self.sock, fview[got:])
                except (ConnectionError, OSError) as e:
                    raise ConnectionClosed(f"{e} after {got} of {size} bytes of a request",
                                           mid_request=True) from None
            if n == 0:
                raise ConnectionClosed(f"closed by peer after {got} of {size} bytes of a request",
                                       mid_request=True)
            got += min(n, size - got)  # a scattered receive may have brought more (now in our buffer)
            self.stats.bytes_in += n
            self.last_active = time.monotonic()
        return fview

    # -- writing ------------------------------------------------------------------------------------

    async def _writable(self) -> None:
        """Until the socket has room again. The watch stays registered across the waits of one send
        (a 1 MiB fetch answer fills a 100 KiB send buffer several times over); the send ends it with
        _disarm_writer. Adding and removing it for each wait cost two epoll_ctl calls a wait."""
        fut = self._write_waiter = self.loop.create_future()
        if not self._writer_armed:
            self._writer_armed = True
            self.loop.add_writer(self.fd, self._socket_writable)
        try:
            await fut
        finally:
            self._write_waiter = None

    def _socket_writable(self) -> None:
        fut = self._write_waiter
        if fut is not None and not fut.done():
            fut.set_result(None)
            return
        # Writable while nobody waits: epoll is level-triggered, so the watch goes.
        self._disarm_writer()

    def _disarm_writer(self) -> None:
        if self._writer_armed:
            self._writer_armed = False
            self.loop.remove_writer(self.fd)

    async def write_parts(self, parts: Parts) -> None:
        """Write byte chunks with send() and file regions with os.sendfile(), in order."""
        chunks: list[bytes | bytearray | memoryview] = []
        try:
            for part in parts:
                if isinstance(part, FileRegion):
                    if chunks:
                        # The bytes before a file region (a fetch response's headers) wait in the
                        # socket for the region's data: the peer gets one segment and one wake-up
                        # rather than a small one and then the data.
                        await self._send_bytes(chunks, more=part.length > 0)
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

    async def _send_bytes(self, chunks: list[bytes | bytearray | memoryview], *, more: bool = False) -> None:
        data = memoryview(b"".join(chunks)) if len(chunks) > 1 else memoryview(chunks[0]).cast("B")
        flags = socket.MSG_MORE if more else 0
        try:
            while data:
                try:
                    n = self.sock.send(data, flags)
                except BlockingIOError:
                    await self._writable()
                    continue
                except (ConnectionError, OSError) as e:
                    raise ConnectionClosed(str(e)) from None
                self.stats.bytes_out += n
                data = data[n:]
        finally:
            self._disarm_writer()

    async def _sendfile(self, region: FileRegion) -> None:
        offset, remaining = region.position, region.length
        try:
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
                if remaining > 0:
                    # A short write: the send buffer is full, and another call now would only fail
                    # with EAGAIN. The loop says when the peer has read enough to make room.
                    await self._writable()
        finally:
            self._disarm_writer()

    # -- the loop -----------------------------------------------------------------------------------

    async def establish(self) -> None:
        """Before the first request: nothing on a plain connection (TLS: the handshake, and the
        principal from the client certificate). Raises CloseConnection to drop the connection."""

    async def serve(self) -> None:
        self._task = asyncio.current_task()
        # Closing because of what the client sent, the connection first writes the answers still
        # queued: Kafka would have sent them before it read the request that closes the connection.
        drain = False
        try:
            await self.establish()
            await self._serve_requests()
        except ConnectionClosed as e:
            if e.mid_request:
                log.info("connection from %s lost in the middle of a request: %s", self.peer, e)
            else:
                log.debug("connection %s closed: %s", self.peer, e)
        except FrameTooLargeError as e:
            # Kafka: InvalidReceiveException, the connection is closed; other clients are not affected.
            self.stats.closed_request_too_large += 1
            invalid_request_log.log(logging.WARNING, "too-large", "closing connection from %s: %s", self.peer, e)
            drain = True
        except ProtocolError as e:
            self.stats.closed_invalid_request += 1
            invalid_request_log.log(logging.WARNING, "invalid", "closing connection from %s: invalid request: %s",
                            self.peer, e)
            drain = True
        except CloseConnection:
            drain = True
        except asyncio.CancelledError:
            if self.close_reason is None:
                raise
            # Closed from outside by a limit (idle, max.connections): this task ends quietly.
        except Exception:
            # A bug in a handler must never take the broker down; it costs this client its connection.
            log.exception("closing connection from %s after an unexpected error", self.peer)
            drain = True
        finally:
            self.in_flight = False
            try:
                if (self._held or self._held_writer is not None) and self.close_reason is None:
                    # Answers made before the client stopped sending (or sent what closes the
                    # connection), as Kafka sends them; older than anything queued, so first. Not
                    # when closed from outside (idle, limits, shutdown): that close is immediate.
                    self._watch_peer()
                    try:
                        await self._write_held()
                    except (ConnectionClosed, CloseConnection):
                        pass
                writer = self._writer
                if drain and writer is not None:
                    self._watch_peer()  # a client that leaves meanwhile is not waited for
                    await asyncio.wait([writer])  # it ends on its own errors, and logs them
            finally:
                self._unwatch_peer()
                self._task = None
                self._drop_held()
                self._drop_queued()
                self.close()

    async def _serve_requests(self) -> None:
        clock = self.clock
        CURRENT_CLOCK.set(clock)  # the purgatories add the request's waits to it
        while True:
            if self.muted_until:
                # Throttled: the response went out carrying throttle_time_ms; the next request
                # is not read before the time is up (it waits in the socket buffer meanwhile).
                delay = self.muted_until - time.monotonic()
                self.muted_until = 0.0
                if self._held or self._held_writer is not None:
                    await self._write_held()
                if delay > 0:
                    await asyncio.sleep(delay)
                    self.last_active = time.monotonic()
            self._waited = False
            frame = await self.read_frame()
            if not self._waited:
                # Read without a loop turn: let the other connections have one before this request
                # is handled, or a client that never stops sending would keep the loop to itself.
                # (Answers held meanwhile wait for this request's: see _flush_held.)
                self._yielding = True
                try:
                    await asyncio.sleep(0)
                finally:
                    self._yielding = False
            size = len(frame)
            self._permit = size
            self._api_key = int.from_bytes(frame[:2], "big", signed=True) if size >= 2 else -1
            # A request that takes long (parked in a purgatory) must not outlive its client: it
            # holds a request permit, so an abandoned one would block everybody's requests.
            watch = self.loop.call_later(_WATCH_PEER_AFTER_S, self._watch_peer)
            try:
                clock.remote_s = 0.0
                started = time.monotonic()
                self.in_flight = True
                try:
                    parts = await self.handler(self, frame)
                finally:
                    watch.cancel()
                    self._unwatch_peer()
                del frame  # the request's buffer goes now, not with the next request
                if isinstance(parts, DeferredResponse) or self._queued:
                    if self._held or self._held_writer is not None:
                        await self._write_held()  # older answers: out before the writer task's
                    # Answered later, in order, by the writer task; this task reads the next request.
                    self._enqueue(parts, started)
                    clock = self.clock
                    del parts
                    self.in_flight = False
                    if len(self._queued) >= _MAX_QUEUED_RESPONSES:
                        await self._queue_space()
                    continue
                end = responded = time.monotonic()
                if parts is not None:
                    if not self._hold(parts):
                        await self._write_with_held(parts)
                    # (A held answer counts as sent now: its send time is not in the request's.)
                    end = self.last_active = time.monotonic()
                del parts
                self.in_flight = False
                self.stats.requests += 1
                self.stats.busy_s += end - started
                if clock.targets is not None:  # a metrics endpoint is on
                    clock.finish(started, responded, end)
            finally:
                self._release_permit()

    # -- answers held for the next one's send ---------------------------------------------------------
    #
    # A client with requests in flight (every producer: up to 5) often has its next request received
    # by the time an answer is made. Written at once, each answer is a send and wakes the client;
    # held until the next answer is made (most requests are handled without waiting, right after
    # the fairness turn of the loop), the answers to a burst of requests go out together, in order,
    # as the writer task already sends the answers one HW move completed. Nothing waits for a held
    # answer: if this task waits for anything before it writes again (a request parked in a
    # purgatory, a request not fully received, a request permit), the loop's next turn writes the
    # held answers (_flush_held).

    def _hold(self, parts: Parts) -> bool:
        """Hold ``parts`` back if the next request is already here; False: write them now."""
        if self._end == self._start or self.muted_until or self._held_responses >= _MAX_HELD_RESPONSES:
            return False
        chunks = _byte_chunks(parts)
        if chunks is None:
            return False  # a fetch's file regions: their own path (sendfile)
        size = sum(len(c) for c in chunks)
        if self._held_bytes + size > _MAX_HELD_BYTES:
            return False
        self._held.extend(chunks)
        self._held_responses += 1
        self._held_bytes += size
        if self._held_flush is None:
            self._held_flush = self.loop.call_soon(self._flush_held)
        return True

    def _take_held(self) -> list[bytes | bytearray | memoryview]:
        chunks, self._held = self._held, []
        self._held_responses = self._held_bytes = 0
        return chunks

    def _flush_held(self) -> None:
        """A loop turn passed with answers held: this task is waiting, so they go out now."""
        self._held_flush = None
        if self._yielding:
            # Only the turn given to the other connections before the next request is handled: it
            # is handled as soon as that turn ends, so the answers wait for its answer one more turn.
            self._held_flush = self.loop.call_soon(self._flush_held)
            return
        if self._held and self._held_writer is None and not self.closed:
            self._held_writer = asyncio.ensure_future(self._send_held())

    async def _send_held(self) -> None:
        try:
            while self._held:  # answers held while this one was sending go too, in order
                await self._send_bytes(self._take_held())
        except ConnectionClosed as e:
            # As for the writer task: the peer left; the serve() task is ended from outside.
            log.debug("connection %s closed: %s", self.peer, e)
            self.close(f"writing a response: {e}")
        finally:
            if self._held_writer is asyncio.current_task():
                self._held_writer = None

    async def _write_held(self) -> None:
        """Write every held answer (this task's writes come after them)."""
        if self._held_flush is not None:
            self._held_flush.cancel()
            self._held_flush = None
        writer = self._held_writer
        if writer is not None:
            await writer  # it writes what is held meanwhile too; its failure is this one's
        if self._held:
            await self._send_bytes(self._take_held())

    async def _write_with_held(self, parts: Parts) -> None:
        if self._held_writer is not None:
            await self._write_held()
        if not self._held:
            await self.write_parts(parts)
            return
        if self._held_flush is not None:
            self._held_flush.cancel()
            self._held_flush = None
        chunks = self._take_held()
        more = _byte_chunks(parts)
        if more is None:
            await self._send_bytes(chunks)
            await self.write_parts(parts)
        else:
            chunks.extend(more)
            await self._send_bytes(chunks)

    def _drop_held(self) -> None:
        if self._held_flush is not None:
            self._held_flush.cancel()
            self._held_flush = None
        writer, self._held_writer = self._held_writer, None
        if writer is not None and not writer.done():
            writer.cancel()
        self._take_held()

    # -- responses answered after the next request was read (broker/deferred_response.py) ----------

    @property
    def busy(self) -> bool:
        """A request is being handled, or answers are still to be written (not idle, not to be cut)."""
        return self.in_flight or bool(self._queued) or bool(self._held) or self._held_writer is not None

    def _enqueue(self, parts: HandlerResult, started: float) -> None:
        """Queue a response behind the ones still waiting: its own (deferred) work goes on in a task
        with this request's clock and permit; the next request gets new ones."""
        entry = _QueuedResponse(started, self.clock, self._permit)
        self._permit = None
        if isinstance(parts, DeferredResponse):
            entry.task = asyncio.ensure_future(parts.coro)  # runs in a copy of this context: the old clock
        else:
            entry.parts = parts
        self._queued.append(entry)
        self.clock = RequestClock()
        CURRENT_CLOCK.set(self.clock)
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write_queued())

    async def _queue_space(self) -> None:
        """Wait until the writer has answered the oldest queued response (a client pipelining more
        requests than that waits, its requests in the socket buffer)."""
        self._space = self.loop.create_future()
        try:
            await self._space
        finally:
            self._space = None

    async def _write_queued(self) -> None:
        queue = self._queued
        try:
            while queue:
                entry = queue[0]
                parts = await entry.task if entry.task is not None else entry.parts
                responded = time.monotonic()
                answered = 1
                if parts is not None:
                    chunks = _byte_chunks(parts)
                    if chunks is not None and len(queue) > 1:
                        # Answers already made behind this one (the acks=all produces one HW move
                        # completed) go out in the same send: each send wakes the client.
                        answered = _take_ready_chunks(queue, chunks)
                        await self._send_bytes(chunks)
                    else:
                        await self.write_parts(parts)
                end = self.last_active = time.monotonic()
                for _ in range(answered):
                    self._answered(queue.popleft(), responded, end)
        except asyncio.CancelledError:
            raise
        except ConnectionClosed as e:
            log.debug("connection %s closed: %s", self.peer, e)
            self.close(f"writing a response: {e}")
        except CloseConnection:
            self.close("a deferred response closed the connection")
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.peer)
            self.close("unexpected error in a deferred response")
        finally:
            if self._writer is asyncio.current_task():
                self._writer = None

    def _answered(self, entry: _QueuedResponse, responded: float, end: float) -> None:
        if entry.permit is not None:
            self.permits.release(entry.permit)
        self.stats.requests += 1
        self.stats.busy_s += end - entry.started
        if entry.clock.targets is not None:
            entry.clock.finish(entry.started, responded, end)
        space = self._space
        if space is not None and not space.done():
            space.set_result(None)

    def _drop_queued(self) -> None:
        """The connection is closing: queued answers go nowhere; their work stops, permits come back."""
        writer, self._writer = self._writer, None
        if writer is not None and writer is not asyncio.current_task():
            writer.cancel()
        for entry in self._queued:
            if entry.task is not None:
                entry.task.cancel()
            elif entry.parts:
                for part in entry.parts:
                    if isinstance(part, FileRegion):
                        part.release()
            if entry.permit is not None:
                self.permits.release(entry.permit)
        self._queued.clear()
        space = self._space
        if space is not None and not space.done():
            space.cancel()

    def _watch_peer(self) -> None:
        if not self.closed and not self._watching:
            self._watching = True
            self._reader_armed = False  # the watch takes the descriptor's one reader over
            self.loop.add_reader(self.fd, self._peer_readable)

    def _unwatch_peer(self) -> None:
        if self._watching:
            self._watching = False
            self.loop.remove_reader(self.fd)

    def _peer_readable(self) -> None:
        """Readable while a request is being handled: the client's next request (stop watching, it
        is read in turn), or EOF / an error (the client is gone: drop its pending request)."""
        gone = self._peer_gone()
        if gone is None:
            return
        self._unwatch_peer()
        if not gone:
            return
        if self._api_key in _CANCELLABLE_WHILE_PENDING or not self.in_flight:
            # (Not in flight: the connection is closing and only writes the answers still queued.)
            self.close("client gone while its request was pending")
        else:
            # Handlers that change state (groups, transactions, topics, controller requests) run to
            # their end, as in Kafka, whose answer simply goes nowhere; only the permit comes back now.
            self._release_permit()

    def _peer_gone(self) -> bool | None:
        """Whether the readable socket means EOF or an error (True) or data (False); None: spurious."""
        try:
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return None
        except OSError:
            return True

    def _release_permit(self) -> None:
        if self._permit is not None:
            self.permits.release(self._permit)
            self._permit = None

    def close(self, reason: str | None = None) -> None:
        """Close the connection. From outside its serve() task (broker shutdown), the task is cancelled
        and closes the socket itself once its pending receive or send is withdrawn: closing a socket
        under a pending loop operation makes that operation fail on a dead file descriptor."""
        if reason is not None and self.close_reason is None:
            self.close_reason = reason
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            return
        if not self.closed:
            self.closed = True
            self._disarm_reader()
            self._disarm_writer()
            try:
                self.sock.close()
            except OSError:
                pass


class ConnectionStats:
    """Broker-wide counters, shared by every connection (read by broker/metrics.py)."""

    __slots__ = ("bytes_in", "bytes_out", "sendfile_bytes", "requests", "busy_s", "closed_request_too_large",
                 "closed_invalid_request", "successful_authentication", "failed_authentication", "tls_file_bytes")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0
        self.sendfile_bytes = 0
        self.requests = 0
        self.busy_s = 0.0
        self.closed_request_too_large = 0  # socket.request.max.bytes
        self.closed_invalid_request = 0  # undecodable requests, unsupported versions
        # Kafka's successful-authentication-total / failed-authentication-total: TLS handshakes on SSL
        # listeners, SASL exchanges on SASL listeners.
        self.successful_authentication = 0
        self.failed_authentication = 0
        self.tls_file_bytes = 0  # fetch bytes read from segments and encrypted (no sendfile on TLS)
