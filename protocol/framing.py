"""Kafka's framing: every request and response is a 4-byte big-endian size followed by that many bytes.

This is the one framing implementation, for both directions. Every outgoing connection
(``protocol/client_connection.py``) reads responses with ``FrameReader``. The broker's server
connections (``broker/connection.py``) decode and check each size prefix with ``frame_size`` but
keep their own receive loop: they read one request at a time (Kafka mutes a channel until its
response is sent), take a ``queued.max.requests`` permit as soon as a size is known and before any
memory is allocated for the body, and keep only a few KiB per idle connection — none of which a
reader that splits out every buffered frame at once can do. Sans-I/O: ``FrameReader`` takes bytes
as they arrive and hands back complete frames; the caller decides what to do with a
``FrameTooLargeError`` (Kafka logs and closes the connection).

Two ways to give it bytes:

- ``feed(data)``: the caller already holds the bytes (a test, a blocking ``recv``).
- ``get_buffer()`` / ``buffer_updated(n)``: the caller receives *into* the reader's memory (asyncio's
  ``BufferedProtocol``, ``socket.recv_into``). Once a frame's size prefix has been read, the rest of
  that frame goes straight into the frame's own ``bytearray``, so a large frame (a Fetch response
  carrying record batches, a Produce request) is never copied after the kernel wrote it.
"""

from __future__ import annotations

import struct

from protocol.exceptions import FrameTooLargeError, ProtocolError

DEFAULT_MAX_REQUEST_BYTES = 104_857_600  # socket.request.max.bytes
_SIZE = struct.Struct(">i")
_SCRATCH_BYTES = 64 * 1024  # where size prefixes and small frames land before they are split out


def check_frame_size(size: int, max_bytes: int) -> None:
    if size < 0:
        raise FrameTooLargeError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameTooLargeError(f"frame of {size} bytes exceeds socket.request.max.bytes={max_bytes}")


def frame_size(prefix: bytes | bytearray | memoryview, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> int:
    """Decode and check a 4-byte size prefix."""
    if len(prefix) < 4:
        raise ProtocolError(f"size prefix of {len(prefix)} bytes")
    size: int = _SIZE.unpack_from(prefix, 0)[0]
    check_frame_size(size, max_bytes)
    return size


def size_prefix(n: int) -> bytes:
    return _SIZE.pack(n)


class FrameReader:
    """Accumulates received bytes and yields complete frames as writable memoryviews.

    Each frame gets its own ``bytearray`` so a Produce handler can patch batch headers in place and
    keep views into it after later frames arrive, and a Fetch response's records can be appended to
    a log straight from it.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES, scratch_bytes: int = _SCRATCH_BYTES) -> None:
        self.max_bytes = max_bytes
        self._scratch = bytearray(max(scratch_bytes, 16))
        self._start = 0  # first unconsumed byte in the scratch buffer
        self._end = 0  # one past the last received byte in the scratch buffer
        self._frame: bytearray | None = None  # the frame being filled directly, once its size is known
        self._filled = 0
        self._failed: FrameTooLargeError | None = None

    # -- receiving into the reader ---------------------------------------------------------------

    def get_buffer(self) -> memoryview:
        """Writable memory for the next received bytes (never empty)."""
        if self._failed is not None:
            raise self._failed
        if self._frame is not None:
            return memoryview(self._frame)[self._filled:]
        if self._end == len(self._scratch):
            self._compact()
        return memoryview(self._scratch)[self._end:]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """``nbytes`` were written at the start of the last ``get_buffer()``; the frames now complete."""
        frames: list[memoryview] = []
        if self._frame is not None:
            self._filled += nbytes
            if self._filled < len(self._frame):
                return frames
            frames.append(memoryview(self._frame))
            self._frame = None
            self._filled = 0
            return frames
        self._end += nbytes
        self._split(frames)
        return frames

    # -- handing bytes to the reader -------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        frames: list[memoryview] = []
        src = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" else data
        pos = 0
        while pos < len(src):
            buf = self.get_buffer()
            n = min(len(buf), len(src) - pos)
            buf[:n] = src[pos:pos + n]
            pos += n
            frames += self.buffer_updated(n)
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        in_frame = 4 + self._filled if self._frame is not None else 0
        return (self._end - self._start) + in_frame

    # -- internals ------------------------------------------------------------------------------

    def _split(self, frames: list[memoryview]) -> None:
        buf = self._scratch
        pos, end = self._start, self._end
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            try:
                check_frame_size(size, self.max_bytes)
            except FrameTooLargeError as e:
                self._failed = e  # the stream cannot be resynchronised: every later call fails too
                raise
            have = end - pos - 4
            if have >= size:
                frames.append(memoryview(buf[pos + 4:pos + 4 + size]))  # slicing copies: one fresh bytearray
                pos += 4 + size
                continue
            # An incomplete frame: give it its own buffer now, so the rest is received in place.
            frame = bytearray(size)
            frame[:have] = buf[pos + 4:end]
            self._frame, self._filled = frame, have
            pos = end
            break
        if pos == end:
            self._start = self._end = 0
        else:
            self._start = pos

    def _compact(self) -> None:
        """Move a partial size prefix (fewer than 4 bytes) to the front of the scratch buffer."""
        rest = self._end - self._start
        self._scratch[:rest] = self._scratch[self._start:self._end]
        self._start, self._end = 0, rest
