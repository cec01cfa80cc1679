"""Kafka's framing: every request and response is a 4-byte big-endian size followed by that many bytes.

Sans-I/O: ``FrameReader`` takes bytes as they arrive and hands back complete frames; the server
decides what to do with a ``FrameTooLargeError`` (Kafka logs and closes the connection).
"""

from __future__ import annotations

import struct

from protocol.exceptions import FrameTooLargeError, ProtocolError

DEFAULT_MAX_REQUEST_BYTES = 104_857_600  # socket.request.max.bytes
_SIZE = struct.Struct(">i")


def check_frame_size(size: int, max_bytes: int) -> None:
    if size < 0:
        raise FrameTooLargeError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameTooLargeError(f"frame of {size} bytes exceeds socket.request.max.bytes={max_bytes}")


def frame_size(prefix: bytes | bytearray | memoryview, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> int:
    """Decode and check a 4-byte size prefix."""
    if len(prefix) < 4:
        raise ProtocolError(f"size prefix of {len(prefix)} bytes")
    (size,) = _SIZE.unpack_from(prefix, 0)
    check_frame_size(size, max_bytes)
    return size


def size_prefix(n: int) -> bytes:
    return _SIZE.pack(n)


class FrameReader:
    """Accumulates received bytes and yields complete frames as writable memoryviews.

    Each frame gets its own ``bytearray`` so a Produce handler can patch batch headers in place
    and keep views into it after later frames arrive.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        self._buf += data
        frames: list[memoryview] = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            check_frame_size(size, self.max_bytes)
            if len(buf) - pos - 4 < size:
                break
            frames.append(memoryview(buf[pos + 4:pos + 4 + size]))  # slicing copies: one fresh bytearray
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buf)
