"""Variable-length integers as Kafka encodes them.

Three flavours appear on the wire:

* unsigned varints (LEB128, 7 bits per byte, low group first) for the lengths and counts of the
  "compact" (flexible-version) protocol fields and tagged fields;
* zigzag varints (signed 32-bit) for the lengths and deltas inside v2 records;
* zigzag varlongs (signed 64-bit) for the record timestamp delta.

Decoders take ``(buf, pos)`` and return ``(value, new_pos)`` so a caller can walk a buffer without
slicing it; ``buf`` may be anything that indexes to ints (bytes, bytearray, memoryview of bytes,
mmap). They are plain functions with a one-byte fast path because the schema codec calls them for
every compact field.

Like Kafka's ``ByteUtils``, a 32-bit varint may take at most 5 bytes and a 64-bit one at most 10;
the bits that do not fit in the width are dropped, as Java's fixed-width arithmetic would. Longer
encodings and buffers that end inside a varint raise ``ProtocolError``; encoders raise
``ValueError`` for out-of-range values since that is a bug in the caller, not bad input.
"""

from __future__ import annotations

from mmap import mmap
from typing import TypeAlias

from protocol.exceptions import ProtocolError

#: Anything the decoders can index byte by byte without copying.
ReadableBuffer: TypeAlias = bytes | bytearray | memoryview | mmap

__all__ = [
    "ReadableBuffer",
    "decode_unsigned_varint",
    "decode_unsigned_varlong",
    "decode_varint",
    "decode_varlong",
    "encode_unsigned_varint",
    "encode_unsigned_varlong",
    "encode_varint",
    "encode_varlong",
    "size_of_unsigned_varint",
    "size_of_varint",
    "size_of_varlong",
    "zigzag_decode",
    "zigzag_encode",
]

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

# One-byte encodings are by far the most common (small lengths, deltas, counts), so they are
# prebuilt once instead of allocating a bytearray per call.
_ONE_BYTE: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(128))


def _encode_unsigned(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_unsigned_varint(value: int) -> bytes:
    """Encode ``0 <= value < 2**32`` as an unsigned varint (compact lengths, tagged fields)."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"unsigned varint out of range: {value}")
        return _ONE_BYTE[value]
    if value > _MASK32:
        raise ValueError(f"unsigned varint out of range: {value}")
    return _encode_unsigned(value)


def encode_unsigned_varlong(value: int) -> bytes:
    """Encode ``0 <= value < 2**64`` as an unsigned varlong."""
    if value < 0 or value > _MASK64:
        raise ValueError(f"unsigned varlong out of range: {value}")
    return _encode_unsigned(value)


def zigzag_encode(value: int) -> int:
    """Map signed to unsigned so small magnitudes of either sign encode short (0,-1,1,-2 -> 0,1,2,3)."""
    return (value << 1) if value >= 0 else ((-value) << 1) - 1


def zigzag_decode(value: int) -> int:
    """Inverse of :func:`zigzag_encode`."""
    return (value >> 1) ^ -(value & 1)


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit integer as a zigzag varint (record lengths and deltas)."""
    if -64 <= value < 64:
        return _ONE_BYTE[(value << 1) if value >= 0 else ((-value) << 1) - 1]
    if value < _INT32_MIN or value > _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _encode_unsigned((value << 1) if value >= 0 else ((-value) << 1) - 1)


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit integer as a zigzag varlong (record timestamp deltas)."""
    if -64 <= value < 64:
        return _ONE_BYTE[(value << 1) if value >= 0 else ((-value) << 1) - 1]
    if value < _INT64_MIN or value > _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _encode_unsigned((value << 1) if value >= 0 else ((-value) << 1) - 1)


def size_of_unsigned_varint(value: int) -> int:
    """Number of bytes :func:`encode_unsigned_varint` / ``encode_unsigned_varlong`` produce."""
    return 1 if value < 0x80 else (value.bit_length() + 6) // 7


def size_of_varint(value: int) -> int:
    """Number of bytes :func:`encode_varint` produces for ``value``."""
    return size_of_unsigned_varint((value << 1) if value >= 0 else ((-value) << 1) - 1)


size_of_varlong = size_of_varint


# The decoders below are written out longhand (no shared helper) because a Python call costs more
# than the work they do, and the single-byte case returns before entering the loop. Running off the
# end of ``buf`` surfaces as IndexError, turned into ProtocolError once at the bottom.


def decode_unsigned_varint(buf: ReadableBuffer, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``buf[pos]``; returns ``(value, new_pos)`` with ``0 <= value < 2**32``."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            if b < 0x80:
                return (result | (b << shift)) & _MASK32, pos
            result |= (b & 0x7F) << shift
            shift += 7
            if shift > 28:
                raise ProtocolError("varint is longer than 5 bytes")
    except IndexError:
        raise ProtocolError("buffer ends inside a varint") from None


def decode_unsigned_varlong(buf: ReadableBuffer, pos: int) -> tuple[int, int]:
    """Decode an unsigned varlong at ``buf[pos]``; returns ``(value, new_pos)`` with ``0 <= value < 2**64``."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            if b < 0x80:
                return (result | (b << shift)) & _MASK64, pos
            result |= (b & 0x7F) << shift
            shift += 7
            if shift > 63:
                raise ProtocolError("varlong is longer than 10 bytes")
    except IndexError:
        raise ProtocolError("buffer ends inside a varlong") from None


def decode_varint(buf: ReadableBuffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint (signed 32-bit) at ``buf[pos]``; returns ``(value, new_pos)``."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            if b < 0x80:
                result = (result | (b << shift)) & _MASK32
                return (result >> 1) ^ -(result & 1), pos
            result |= (b & 0x7F) << shift
            shift += 7
            if shift > 28:
                raise ProtocolError("varint is longer than 5 bytes")
    except IndexError:
        raise ProtocolError("buffer ends inside a varint") from None


def decode_varlong(buf: ReadableBuffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varlong (signed 64-bit) at ``buf[pos]``; returns ``(value, new_pos)``."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            if b < 0x80:
                result = (result | (b << shift)) & _MASK64
                return (result >> 1) ^ -(result & 1), pos
            result |= (b & 0x7F) << shift
            shift += 7
            if shift > 63:
                raise ProtocolError("varlong is longer than 10 bytes")
    except IndexError:
        raise ProtocolError("buffer ends inside a varlong") from None
