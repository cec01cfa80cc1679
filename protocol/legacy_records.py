"""Kafka's message formats v0 and v1 ("magic" 0 and 1), the formats before record batches.

Clients older than Kafka 0.11 (and newer ones pinned to old protocol versions) produce with
Produce v0-2 and fetch with Fetch v0-3 in these formats. Kafka 3.9 stores only v2 batches: it
converts what such producers send (``LogValidator``) and what such consumers read
(``RecordsUtil.downConvert``). This module is the sans-I/O half of that: parse and build v0/v1
message sets; the broker side is ``broker/produce_conversion.py`` and
``broker/fetch_down_conversion.py``.

A message set is a sequence of entries, each ``int64 offset, int32 size, message``, where a
message (all integers big-endian) is::

    crc        uint32   CRC-32 (IEEE) of everything after it
    magic      int8     0 or 1
    attributes int8     bits 0-2: codec; bit 3 (v1 only): timestamp type (1 = LogAppendTime)
    timestamp  int64    v1 only
    key        int32 length (-1: null) + bytes
    value      int32 length (-1: null) + bytes

A compressed entry (a "wrapper") has a null key and, as its value, a compressed message set of
uncompressed inner messages. In v0 the inner offsets are absolute; in v1 they are relative
(0..n-1) and the wrapper carries the absolute offset of the last one. In v1, a LogAppendTime
wrapper's timestamp is every inner message's timestamp.

Compression is the v2 codecs' (gzip, xerial snappy, lz4 frames), except that zstd does not exist
for v0/v1 and that Kafka writes v0's lz4 frame header with a wrong checksum (over the frame magic
too): ``KafkaLZ4BlockOutputStream(useBrokenFlagDescriptorChecksum)``. Kafka never checks that
checksum when it reads v0 data, and neither do we.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from protocol.compression import CompressionType, DecompressionError, compress, iter_decompress
from protocol.errors import ErrorCode

__all__ = [
    "LOG_OVERHEAD",
    "RECORD_OVERHEAD_V0",
    "RECORD_OVERHEAD_V1",
    "LegacyFormatError",
    "LegacyMessage",
    "LegacyRecord",
    "build_message_set",
    "iter_deep",
    "iter_shallow",
    "parse_message",
]

LOG_OVERHEAD = 12
#: crc, magic, attributes, key length, value length (Kafka's ``LegacyRecord.RECORD_OVERHEAD_V0``).
RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22
_MAGIC_POS = 4  # within a message
_ATTRIBUTES_POS = 5
_TIMESTAMP_POS = 6
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
NO_TIMESTAMP = -1
# Kafka's TimestampType names (NO_TIMESTAMP_TYPE is "NoTimestampType", never printed for v0).
CREATE_TIME, LOG_APPEND_TIME = "CreateTime", "LogAppendTime"

_ENTRY_HEADER = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


class LegacyFormatError(Exception):
    """Data Kafka refuses, with the error code its exception maps to (``Errors.forException``)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One entry of a v0/v1 message set: Kafka's ``LegacyRecord`` with the offset of its entry.

    ``timestamp`` and ``timestamp_type`` are what Kafka's ``LegacyRecord.timestamp()`` and
    ``timestampType()`` answer: for an inner message of a LogAppendTime v1 wrapper, the wrapper's.
    """

    offset: int
    magic: int
    attributes: int
    timestamp: int
    timestamp_type: str | None  # None for v0 (NO_TIMESTAMP_TYPE)
    key: bytes | None
    value: bytes | None
    crc: int
    computed_crc: int
    #: Bytes of the message, without the 12-byte entry header.
    size: int

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_compressed(self) -> bool:
        return self.codec != CompressionType.NONE

    @property
    def is_valid(self) -> bool:
        return self.crc == self.computed_crc

    @property
    def entry_size(self) -> int:
        return self.size + LOG_OVERHEAD

    def describe(self) -> str:
        """Kafka's ``AbstractLegacyRecordBatch.toString()``, as its error messages print a record."""
        key = 0 if self.key is None else len(self.key)
        value = 0 if self.value is None else len(self.value)
        codec = _CODEC_NAMES.get(self.codec, str(self.codec))
        if self.magic > 0:
            record = (f"Record(magic={self.magic}, attributes={self.attributes}, compression={codec}, "
                      f"crc={self.crc}, {self.timestamp_type}={self.timestamp}, key={key} bytes, value={value} bytes)")
        else:
            record = (f"Record(magic={self.magic}, attributes={self.attributes}, compression={codec}, "
                      f"crc={self.crc}, key={key} bytes, value={value} bytes)")
        return f"LegacyRecordBatch(offset={self.offset}, {record})"


def _sized(buf: memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise LegacyFormatError(ErrorCode.CORRUPT_MESSAGE, f"Record {what} length runs past the end of the record")
    (n,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise LegacyFormatError(ErrorCode.CORRUPT_MESSAGE, f"Record {what} of {n} bytes runs past the end of the record")
    return bytes(buf[pos:pos + n]), pos + n


def parse_message(buf: bytes | bytearray | memoryview, pos: int, size: int, offset: int,
                  wrapper: LegacyMessage | None = None) -> LegacyMessage:
    """The message of ``size`` bytes at ``buf[pos:]`` (after its entry header).

    ``wrapper``: the compressed v1 message this one was found in, whose LogAppendTime applies.
    """
    view = memoryview(buf)
    end = pos + size
    if size < RECORD_OVERHEAD_V0:
        raise LegacyFormatError(ErrorCode.CORRUPT_MESSAGE,
                                f"Record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})")
    (crc,) = _UINT32.unpack_from(view, pos)
    computed = zlib.crc32(view[pos + _MAGIC_POS:end])
    magic = view[pos + _MAGIC_POS]
    attributes = view[pos + _ATTRIBUTES_POS]
    if magic == 0:
        timestamp, timestamp_type, key_pos = NO_TIMESTAMP, None, pos + _TIMESTAMP_POS
    elif magic == 1:
        if size < RECORD_OVERHEAD_V1:
            raise LegacyFormatError(ErrorCode.CORRUPT_MESSAGE,
                                    f"Record size {size} is less than the v1 record overhead ({RECORD_OVERHEAD_V1})")
        (timestamp,) = _INT64.unpack_from(view, pos + _TIMESTAMP_POS)
        timestamp_type = LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME
        if wrapper is not None and wrapper.timestamp_type == LOG_APPEND_TIME:
            timestamp, timestamp_type = wrapper.timestamp, LOG_APPEND_TIME
        key_pos = pos + _TIMESTAMP_POS + 8
    else:
        raise LegacyFormatError(ErrorCode.CORRUPT_MESSAGE, f"Invalid magic found in record: {magic}")
    key, p = _sized(view, key_pos, end, "key")
    value, p = _sized(view, p, end, "value")
    return LegacyMessage(offset, magic, attributes, timestamp, timestamp_type, key, value, crc, computed, size)


def iter_shallow(buf: bytes | bytearray | memoryview) -> Iterator[LegacyMessage]:
    """The entries of a message set, as Kafka's ``ByteBufferLogInputStream`` frames them.

    Stops quietly at a truncated last entry (Kafka ignores it); a size below the minimum overhead
    or a magic outside 0..2 is CORRUPT_MESSAGE. A v2 batch ends the walk here: callers look at the
    first entry's magic before they call this.
    """
    view = memoryview(buf)
    end = len(view)
    pos = 0
    while end - pos >= LOG_OVERHEAD:
        offset, size = _ENTRY_HEADER.unpack_from(view, pos)
        if size < RECORD_OVERHEAD_V0:
            raise LegacyFormatError(ErrorCode.CORRUPT_MESSAGE,
                                    f"Record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})")
        if end - pos < LOG_OVERHEAD + _MAGIC_POS + 1:
            return
        magic = view[pos + LOG_OVERHEAD + _MAGIC_POS]
        if magic > 2:
            raise LegacyFormatError(ErrorCode.CORRUPT_MESSAGE, f"Invalid magic found in record: "
                                    f"{magic - 256 if magic > 127 else magic}")
        if size > end - pos - LOG_OVERHEAD:
            return
        if magic == 2:
            first = view[LOG_OVERHEAD + _MAGIC_POS]
            raise LegacyFormatError(ErrorCode.INVALID_RECORD,
                                    f"Batch magic 2 is not the same as the first batch's magic byte {first}")
        yield parse_message(view, pos + LOG_OVERHEAD, size, offset)
        pos += LOG_OVERHEAD + size


def first_magic(buf: bytes | bytearray | memoryview) -> int | None:
    """The magic byte of the first entry or batch, None when there is not even that much."""
    if len(buf) < LOG_OVERHEAD + _MAGIC_POS + 1:
        return None
    return memoryview(buf)[LOG_OVERHEAD + _MAGIC_POS]


# ------------------------------------------------------------------------------------------------
# Compressed wrappers


def _lz4_header_length(frame: memoryview) -> int | None:
    """Bytes from the frame start through the header checksum, None if this is no lz4 frame."""
    if len(frame) < 7 or bytes(frame[:4]) != b"\x04\x22\x4d\x18":
        return None
    flg = frame[4]
    return 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def _with_lz4_checksum(frame: memoryview, broken: bool) -> bytes | bytearray | memoryview:
    """The frame with its header checksum recomputed: correctly, or Kafka's v0 way (``broken``)."""
    n = _lz4_header_length(frame)
    if n is None:
        return frame
    start = 0 if broken else 4
    checksum = (xxh32(bytes(frame[start:n - 1])) >> 8) & 0xFF
    if frame[n - 1] == checksum:
        return frame
    out = bytearray(frame)
    out[n - 1] = checksum
    return out


def _decompressed(wrapper: LegacyMessage) -> bytes:
    assert wrapper.value is not None
    data: bytes | bytearray | memoryview = memoryview(wrapper.value)
    if wrapper.codec == CompressionType.LZ4 and wrapper.magic == 0:
        data = _with_lz4_checksum(memoryview(wrapper.value), broken=False)
    out = bytearray()
    try:
        for chunk in iter_decompress(wrapper.codec, data):
            out += chunk
    except DecompressionError as e:
        # Kafka wraps the codec's IOException in a KafkaException: an unknown server error.
        raise LegacyFormatError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to decompress message set: {e}") from None
    return bytes(out)


def iter_deep(wrapper: LegacyMessage) -> list[LegacyMessage]:
    """The inner messages of a compressed wrapper, offsets absolute (Kafka's ``DeepRecordsIterator``)."""
    if wrapper.codec == CompressionType.ZSTD:
        raise LegacyFormatError(ErrorCode.INVALID_RECORD,
                                f"Invalid wrapper compressionType found in legacy deep record iterator {wrapper.magic}")
    if wrapper.codec > CompressionType.ZSTD:
        # CompressionType.forId throws IllegalArgumentException: an unknown server error.
        raise LegacyFormatError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {wrapper.codec}")
    if wrapper.value is None:
        raise LegacyFormatError(ErrorCode.INVALID_RECORD, "Found invalid compressed record set with null value "
                                f"(magic = {wrapper.magic})")
    data = memoryview(_decompressed(wrapper))
    inner: list[LegacyMessage] = []
    pos, end = 0, len(data)
    # DataLogInputStream: an entry cut short by the end of the stream ends it.
    while end - pos >= LOG_OVERHEAD:
        offset, size = _ENTRY_HEADER.unpack_from(data, pos)
        if size < RECORD_OVERHEAD_V0:
            raise LegacyFormatError(ErrorCode.CORRUPT_MESSAGE, "Record size is less than the minimum record overhead "
                                    f"({RECORD_OVERHEAD_V0})")
        if size > end - pos - LOG_OVERHEAD:
            break
        inner.append(_inner_message(data, pos + LOG_OVERHEAD, size, offset, wrapper))
        pos += LOG_OVERHEAD + size
    if not inner:
        raise LegacyFormatError(ErrorCode.INVALID_RECORD, "Found invalid compressed record set with no inner records")
    if wrapper.magic == 1:
        if wrapper.offset == 0:
            base = 0  # certain librdkafka versions leave the wrapper offset at 0
        else:
            last = inner[-1].offset
            if wrapper.offset < last:
                raise LegacyFormatError(
                    ErrorCode.INVALID_RECORD,
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{wrapper.offset}' is "
                    f"less than the last inner message offset '{last}' and it is not zero.")
            base = wrapper.offset - last
        inner = [_moved(m, base + m.offset) for m in inner]
    for m in inner:
        if m.is_compressed:
            raise LegacyFormatError(ErrorCode.INVALID_RECORD, "Inner messages must not be compressed")
    return inner


def _inner_message(data: memoryview, pos: int, size: int, offset: int, wrapper: LegacyMessage) -> LegacyMessage:
    magic = data[pos + _MAGIC_POS]
    if magic > 1:
        raise LegacyFormatError(ErrorCode.INVALID_RECORD,
                                f"Record's magic {magic} does not match outer magic {wrapper.magic}")
    return parse_message(data, pos, size, offset, wrapper if wrapper.magic == 1 and magic == 1 else None)


def _moved(m: LegacyMessage, offset: int) -> LegacyMessage:
    return LegacyMessage(offset, m.magic, m.attributes, m.timestamp, m.timestamp_type, m.key, m.value, m.crc,
                         m.computed_crc, m.size)


# ------------------------------------------------------------------------------------------------
# Building


@dataclass(frozen=True, slots=True)
class LegacyRecord:
    """Input to :func:`build_message_set`: one record with its absolute offset."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _message(magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | memoryview | None) -> bytes:
    body = bytearray()
    body.append(magic)
    body.append(attributes)
    if magic > 0:
        body += _INT64.pack(timestamp)
    for part in (key, value):
        if part is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(part))
            body += part
    return _UINT32.pack(zlib.crc32(body)) + bytes(body)


def _entry(offset: int, message: bytes) -> bytes:
    return _ENTRY_HEADER.pack(offset, len(message)) + message


def build_message_set(records: Iterable[LegacyRecord], *, magic: int, codec: int = CompressionType.NONE,
                      log_append_time: int | None = None, compression_level: int | None = None) -> bytes:
    """Records as a v0/v1 message set, as Kafka's ``MemoryRecordsBuilder`` writes it for ``magic``.

    ``log_append_time`` set: the LogAppendTime type, every timestamp that time (v1). Uncompressed,
    each record is its own entry; compressed, one wrapper at the last offset holds them all (inner
    offsets relative in v1), stamped with the largest timestamp (or the append time).
    """
    if magic not in (0, 1):
        raise ValueError(f"not a legacy magic: {magic}")
    if codec == CompressionType.ZSTD:
        raise ValueError(f"ZStandard compression is not supported for magic {magic}")
    records = list(records)
    if not records:
        return b""
    ts_attr = TIMESTAMP_TYPE_MASK if magic > 0 and log_append_time is not None else 0
    if codec == CompressionType.NONE:
        out = bytearray()
        for r in records:
            ts = log_append_time if log_append_time is not None else r.timestamp
            out += _entry(r.offset, _message(magic, ts_attr, ts, r.key, r.value))
        return bytes(out)
    base = records[0].offset
    inner = bytearray()
    max_ts = NO_TIMESTAMP
    for r in records:
        ts = log_append_time if log_append_time is not None else r.timestamp
        max_ts = max(max_ts, ts)
        inner += _entry(r.offset - base if magic > 0 else r.offset, _message(magic, ts_attr, ts, r.key, r.value))
    compressed: bytes | bytearray | memoryview = compress(codec, inner, level=compression_level)
    if codec == CompressionType.LZ4 and magic == 0:
        compressed = _with_lz4_checksum(memoryview(compressed), broken=True)
    wrapper_ts = log_append_time if log_append_time is not None else max_ts
    return _entry(records[-1].offset, _message(magic, codec | ts_attr, wrapper_ts, None, bytes(compressed)))


# ------------------------------------------------------------------------------------------------
# xxHash32, for the lz4 frame header checksum (a handful of bytes; no dependency needed)

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (the reference algorithm)."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for j in range(4):
                (lane,) = struct.unpack_from("<I", data, i + 4 * j)
                v[j] = (_rotl((v[j] + lane * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (word,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
