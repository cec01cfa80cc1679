"""Kafka record batches, message format v2 (magic 2), read in place and built from scratch.

Layout of one batch (all integers big-endian)::

    offset  size  field
         0     8  baseOffset              \\
         8     4  batchLength             |  LOG_OVERHEAD (12 bytes): not counted in batchLength
        12     4  partitionLeaderEpoch    |  not covered by the CRC (the broker patches these
        16     1  magic (= 2)             |  and baseOffset in place on append)
        17     4  crc (CRC-32C of bytes 21..end)
        21     2  attributes
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61        records (compressed as a whole when attributes say so)

Each record is ``varint length`` followed by ``int8 attributes, varlong timestampDelta,
varint offsetDelta, varint keyLength, key, varint valueLength, value, varint headerCount`` and
headers of ``varint keyLength, key (UTF-8), varint valueLength, value``; a length of -1 is null.

The broker's hot paths (produce validation, offset assignment, recovery scans) only ever touch the
61-byte header, so :class:`BatchView` reads fields with ``struct.unpack_from`` straight out of the
receive buffer or the mmapped segment and the CRC is computed over a memoryview slice: a constant
number of Python calls per batch, however many records it holds. Walking records is a separate,
explicitly slower operation (:meth:`BatchView.records`).

Errors: a batch that cannot be framed or fails its checksum raises ``CorruptRecordError``
(CORRUPT_MESSAGE, 2). Where Kafka's ``LogValidator``/``DefaultRecord`` answer INVALID_RECORD (87)
(count/offset-range inconsistencies, malformed records inside a well-framed batch) we raise
:class:`InvalidRecordError`, a subclass, so callers that only care "is this batch acceptable"
catch one type and still get Kafka's error code.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from enum import IntEnum
from mmap import mmap
from typing import Any, NamedTuple, TypeAlias

import crc32c

from protocol.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, CompressionType, compress, decompress
from protocol.exceptions import CorruptRecordError, ProtocolError
from protocol.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BASE_OFFSET_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "BATCH_HEADER_SIZE",
    "BATCH_LENGTH_OFFSET",
    "COMPRESSION_CODEC_MASK",
    "CONTROL_FLAG_MASK",
    "CRC_OFFSET",
    "DELETE_HORIZON_FLAG_MASK",
    "LAST_OFFSET_DELTA_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_BATCH_LENGTH",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORDS_OFFSET",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG_MASK",
    "BatchBuilder",
    "BatchHeader",
    "BatchView",
    "CompressionType",
    "ControlRecordType",
    "InvalidRecordError",
    "NewRecord",
    "ReadableBuffer",
    "Record",
    "ScanResult",
    "TimestampType",
    "WritableBuffer",
    "build_batch",
    "build_control_batch",
    "iter_batches",
    "parse_control_record",
    "scan_valid_prefix",
    "single_batch",
]

ReadableBuffer: TypeAlias = bytes | bytearray | memoryview | mmap
WritableBuffer: TypeAlias = bytearray | memoryview | mmap

# --- header layout --------------------------------------------------------------------------------
BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

BATCH_HEADER_SIZE = 61
#: baseOffset + batchLength: the bytes in front of what batchLength counts.
LOG_OVERHEAD = 12
#: Smallest legal batchLength: a header with no records.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
MAGIC = 2

# --- attribute bits -------------------------------------------------------------------------------
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

# --- sentinel values Kafka uses in the header ----------------------------------------------------------
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_INT32_MAX = (1 << 31) - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == BATCH_HEADER_SIZE
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_INT8 = struct.Struct(">b")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")

# Each record needs at least 7 bytes (length, attributes, timestampDelta, offsetDelta, keyLength,
# valueLength, headerCount: one byte each), which bounds recordsCount for uncompressed batches.
_MIN_RECORD_SIZE = 7


class TimestampType(IntEnum):
    """Bit 3 of the attributes: whether record timestamps come from the producer or the broker."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(IntEnum):
    """The ``type`` field of a control record key (transaction markers)."""

    ABORT = 0
    COMMIT = 1


class InvalidRecordError(CorruptRecordError):
    """A well-framed batch whose contents break Kafka's rules: INVALID_RECORD (87)."""

    error_code = 87


class BatchHeader(NamedTuple):
    """All header fields of one batch, decoded by a single ``unpack_from``."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int


class Record(NamedTuple):
    """One decoded record; ``timestamp`` already reflects LogAppendTime when the batch uses it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class NewRecord(NamedTuple):
    """Input to the batch builders. Plain tuples in the same order work too.

    ``timestamp`` None means "now"; ``offset_delta`` None means "one after the previous record"
    (gaps are only for rewriting compacted batches).
    """

    key: bytes | None
    value: bytes | None
    timestamp: int | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    offset_delta: int | None = None


class ScanResult(NamedTuple):
    """Outcome of :func:`scan_valid_prefix`."""

    #: Bytes from ``start`` that form whole, valid batches: the length to keep on recovery.
    valid_bytes: int
    batch_count: int
    #: Base offset of the first valid batch, -1 when there is none.
    first_offset: int
    #: Last offset of the last valid batch, -1 when there is none.
    last_offset: int
    #: Largest batch maxTimestamp seen (-1 if none) and the last offset of the batch holding it:
    #: exactly the entry Kafka's time index keeps for a segment.
    max_timestamp: int
    offset_of_max_timestamp: int
    #: Why the scan stopped before ``end``; None when every byte belonged to a valid batch.
    stop_reason: str | None


def _crc_of(buf: ReadableBuffer, start: int, end: int) -> int:
    # The memoryview is released at once so a bytearray stays resizable and an mmap closable.
    with memoryview(buf) as view:
        return crc32c.crc32c(view[start:end])


def _check_magic(buf: ReadableBuffer, pos: int) -> None:
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC:
        if magic in (0, 1):
            # What Kafka answers to produce v3+ carrying old message sets.
            raise InvalidRecordError(f"record batch magic v{magic} is not supported, only v{MAGIC}")
        raise CorruptRecordError(f"invalid record batch magic byte {magic} at position {pos}")


def _new_view(buf: ReadableBuffer, pos: int, size: int) -> BatchView:
    # iter_batches has already checked the framing: skip __init__'s repeat of it.
    view = object.__new__(BatchView)
    view.buf = buf
    view.pos = pos
    view.size = size
    return view


class BatchView:
    """A zero-copy view of one v2 batch at ``buf[pos:]``.

    Construction checks only what every accessor relies on (the whole batch lies within
    ``buf[pos:end]``, batchLength is at least a header, magic is 2), so property reads never fail.
    Everything else is checked on request: :meth:`verify_crc`, :meth:`validate_structure`,
    :meth:`records`. Setters write into ``buf``, which must then be writable.
    """

    __slots__ = ("buf", "pos", "size")

    buf: ReadableBuffer
    pos: int
    #: Total bytes of the batch on disk or on the wire: batchLength + LOG_OVERHEAD.
    size: int

    def __init__(self, buf: ReadableBuffer, pos: int = 0, end: int | None = None) -> None:
        if end is None:
            end = len(buf)
        elif end > len(buf):
            raise ValueError(f"end {end} is past the end of a buffer of {len(buf)} bytes")
        available = end - pos
        if pos < 0 or available < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                f"record batch at position {pos} is truncated: {max(available, 0)} bytes, "
                f"need at least {BATCH_HEADER_SIZE}"
            )
        (length,) = _INT32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch at position {pos} has batchLength {length}, below the minimum {MIN_BATCH_LENGTH}"
            )
        if length > available - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"record batch at position {pos} has batchLength {length} but only "
                f"{available - LOG_OVERHEAD} bytes follow"
            )
        _check_magic(buf, pos)
        self.buf = buf
        self.pos = pos
        self.size = length + LOG_OVERHEAD

    def __repr__(self) -> str:
        return (
            f"BatchView(pos={self.pos}, size={self.size}, base_offset={self.base_offset}, "
            f"count={self.records_count}, attributes={self.attributes:#x})"
        )

    # --- raw header fields ------------------------------------------------------------------------

    def header(self) -> BatchHeader:
        """Every header field at once (one ``unpack_from``; cheaper than several properties)."""
        return BatchHeader._make(_HEADER.unpack_from(self.buf, self.pos))

    @property
    def base_offset(self) -> int:
        value: int = _INT64.unpack_from(self.buf, self.pos)[0]
        return value

    @property
    def batch_length(self) -> int:
        return self.size - LOG_OVERHEAD

    @property
    def partition_leader_epoch(self) -> int:
        value: int = _INT32.unpack_from(self.buf, self.pos + PARTITION_LEADER_EPOCH_OFFSET)[0]
        return value

    @property
    def magic(self) -> int:
        return MAGIC  # checked at construction

    @property
    def crc(self) -> int:
        """The stored CRC (unsigned)."""
        value: int = _UINT32.unpack_from(self.buf, self.pos + CRC_OFFSET)[0]
        return value

    @property
    def attributes(self) -> int:
        value: int = _INT16.unpack_from(self.buf, self.pos + ATTRIBUTES_OFFSET)[0]
        return value

    @property
    def last_offset_delta(self) -> int:
        value: int = _INT32.unpack_from(self.buf, self.pos + LAST_OFFSET_DELTA_OFFSET)[0]
        return value

    @property
    def base_timestamp(self) -> int:
        value: int = _INT64.unpack_from(self.buf, self.pos + BASE_TIMESTAMP_OFFSET)[0]
        return value

    @property
    def max_timestamp(self) -> int:
        value: int = _INT64.unpack_from(self.buf, self.pos + MAX_TIMESTAMP_OFFSET)[0]
        return value

    @property
    def producer_id(self) -> int:
        value: int = _INT64.unpack_from(self.buf, self.pos + PRODUCER_ID_OFFSET)[0]
        return value

    @property
    def producer_epoch(self) -> int:
        value: int = _INT16.unpack_from(self.buf, self.pos + PRODUCER_EPOCH_OFFSET)[0]
        return value

    @property
    def base_sequence(self) -> int:
        value: int = _INT32.unpack_from(self.buf, self.pos + BASE_SEQUENCE_OFFSET)[0]
        return value

    @property
    def records_count(self) -> int:
        value: int = _INT32.unpack_from(self.buf, self.pos + RECORDS_COUNT_OFFSET)[0]
        return value

    # --- derived values ---------------------------------------------------------------------------

    @property
    def end(self) -> int:
        """Position in ``buf`` just past this batch (where the next one starts)."""
        return self.pos + self.size

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        codec = self.attributes & COMPRESSION_CODEC_MASK
        try:
            return CompressionType(codec)
        except ValueError:
            raise CorruptRecordError(f"record batch uses unknown compression codec id {codec}") from None

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner set the delete-horizon flag, baseTimestamp holds the horizon."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG_MASK else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record, wrapping at int32 max like the Java producer."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return (base + self.last_offset_delta) % (_INT32_MAX + 1)

    def records_section(self) -> memoryview:
        """The (possibly compressed) records bytes, as a view; release it when done with an mmap."""
        return memoryview(self.buf)[self.pos + RECORDS_OFFSET : self.pos + self.size]

    def tobytes(self) -> bytes:
        """A copy of the whole batch."""
        with memoryview(self.buf) as view:
            return view[self.pos : self.pos + self.size].tobytes()

    # --- checks -----------------------------------------------------------------------------------

    def compute_crc(self) -> int:
        """CRC-32C of attributes..end, computed now (what :attr:`crc` should hold)."""
        return _crc_of(self.buf, self.pos + ATTRIBUTES_OFFSET, self.pos + self.size)

    def verify_crc(self) -> bool:
        return self.compute_crc() == self.crc

    def ensure_valid_crc(self) -> None:
        """Raise ``CorruptRecordError`` unless the stored CRC matches (Kafka's ``ensureValid``)."""
        stored = self.crc
        computed = self.compute_crc()
        if stored != computed:
            raise CorruptRecordError(
                f"record batch at offset {self.base_offset} is corrupt "
                f"(stored crc = {stored}, computed crc = {computed})"
            )

    def validate_structure(self, *, from_client: bool = True) -> None:
        """Check the header's internal consistency (O(1), no record decoding, no CRC).

        Always: known codec, recordsCount >= 0, lastOffsetDelta >= 0 and not fewer offsets than
        records, and for uncompressed batches enough bytes to hold recordsCount records.

        ``from_client`` adds ``LogValidator``'s rules for batches arriving in a Produce request:
        at least one record, ``lastOffsetDelta + 1 == recordsCount``, a base sequence whenever a
        producer id is set, and no control batches (only the coordinators write those). Replicated
        and compacted batches legitimately break the first two, hence the switch.
        """
        (attributes,) = _INT16.unpack_from(self.buf, self.pos + ATTRIBUTES_OFFSET)
        (last_delta,) = _INT32.unpack_from(self.buf, self.pos + LAST_OFFSET_DELTA_OFFSET)
        (count,) = _INT32.unpack_from(self.buf, self.pos + RECORDS_COUNT_OFFSET)
        codec = attributes & COMPRESSION_CODEC_MASK
        if codec > CompressionType.ZSTD:
            raise CorruptRecordError(f"record batch uses unknown compression codec id {codec}")
        if count < 0:
            raise InvalidRecordError(f"found invalid record count {count} in magic v2 batch")
        if last_delta < 0:
            raise InvalidRecordError(f"record batch has a negative lastOffsetDelta {last_delta}")
        if count > last_delta + 1:
            raise InvalidRecordError(
                f"record batch holds {count} records but only {last_delta + 1} offsets (lastOffsetDelta {last_delta})"
            )
        if codec == CompressionType.NONE and count * _MIN_RECORD_SIZE > self.size - BATCH_HEADER_SIZE:
            raise InvalidRecordError(
                f"record batch declares {count} records in {self.size - BATCH_HEADER_SIZE} bytes of records"
            )
        if not from_client:
            return
        if count == 0:
            raise InvalidRecordError("invalid reported count for record batch: 0")
        if count != last_delta + 1:
            raise InvalidRecordError(
                f"inconsistent batch offset range (lastOffsetDelta {last_delta}) and count of records {count}"
            )
        if attributes & CONTROL_FLAG_MASK:
            raise InvalidRecordError("clients are not allowed to write control records")
        if self.has_producer_id and self.base_sequence < 0:
            raise InvalidRecordError(
                f"invalid sequence number {self.base_sequence} for producer id {self.producer_id}"
            )

    def validate(self, *, from_client: bool = True) -> None:
        """:meth:`validate_structure` then :meth:`ensure_valid_crc`."""
        self.validate_structure(from_client=from_client)
        self.ensure_valid_crc()

    # --- in-place writers -------------------------------------------------------------------------

    def set_base_offset(self, offset: int) -> None:
        """Assign offsets (outside the CRC, so the CRC stays valid)."""
        _INT64.pack_into(self.buf, self.pos + BASE_OFFSET_OFFSET, offset)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Stamp the leader epoch (outside the CRC)."""
        _INT32.pack_into(self.buf, self.pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)

    def set_max_timestamp(self, timestamp_type: TimestampType, max_timestamp: int) -> None:
        """Set the timestamp type bit and maxTimestamp, then recompute the CRC.

        A no-op when both already hold (as in Kafka's ``setMaxTimestamp``), which saves the CRC
        pass for the common CreateTime case.
        """
        attributes = self.attributes
        current_type = (
            TimestampType.LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME
        )
        if current_type == timestamp_type and self.max_timestamp == max_timestamp:
            return
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        else:
            attributes &= ~TIMESTAMP_TYPE_MASK
        buf = self.buf
        _INT16.pack_into(buf, self.pos + ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(buf, self.pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
        self.update_crc()

    def set_log_append_time(self, timestamp: int) -> None:
        """Switch the batch to LogAppendTime stamped ``timestamp`` (every record then reads it)."""
        self.set_max_timestamp(TimestampType.LOG_APPEND_TIME, timestamp)

    def update_crc(self) -> None:
        """Recompute and store the CRC after changing bytes it covers."""
        _UINT32.pack_into(self.buf, self.pos + CRC_OFFSET, self.compute_crc())

    # --- records ----------------------------------------------------------------------------------

    def records(self, *, max_output_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
        """Decode the records (decompressing first when needed); per-record work, not a hot path.

        Exactly ``recordsCount`` well-formed records must fill the records section: anything else
        raises ``InvalidRecordError``. Decompression failures raise ``CorruptRecordError``.
        """
        (attributes,) = _INT16.unpack_from(self.buf, self.pos + ATTRIBUTES_OFFSET)
        count = self.records_count
        if count < 0:
            raise InvalidRecordError(f"found invalid record count {count} in magic v2 batch")
        codec = attributes & COMPRESSION_CODEC_MASK
        base_offset = self.base_offset
        base_timestamp = self.base_timestamp
        log_append_time = self.max_timestamp if attributes & TIMESTAMP_TYPE_MASK else None
        start = self.pos + RECORDS_OFFSET
        end = self.pos + self.size
        if codec == CompressionType.NONE:
            # Decode straight from the caller's buffer, bounded by the batch end.
            return _iter_records(self.buf, start, end, count, base_offset, base_timestamp, log_append_time)
        with memoryview(self.buf) as view:
            data = decompress(codec, view[start:end], max_output_size=max_output_size)
        return _iter_records(data, 0, len(data), count, base_offset, base_timestamp, log_append_time)


def _iter_records(
    buf: ReadableBuffer,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
) -> Iterator[Record]:
    # Every slice is bounded by the record's own end (itself bounded by ``end``), so a lying length
    # can never read into a neighbouring batch; a varint that runs past a record's end is caught by
    # the final size check, one that runs past ``buf`` raises ProtocolError, converted below.
    try:
        for _ in range(count):
            if pos >= end:
                raise InvalidRecordError(
                    f"record batch declares {count} records but its records section ends early"
                )
            size, pos = decode_varint(buf, pos)
            body_end = pos + size
            if size <= 0 or body_end > end:
                raise InvalidRecordError(
                    f"invalid record size {size} with {end - pos} bytes left in the batch"
                )
            pos += 1  # record attributes: unused in v2
            timestamp_delta, pos = decode_varlong(buf, pos)
            offset_delta, pos = decode_varint(buf, pos)
            key_len, pos = decode_varint(buf, pos)
            if key_len < 0:
                key = None
            else:
                if key_len > body_end - pos:
                    raise InvalidRecordError(f"record key length {key_len} exceeds the record")
                key = bytes(buf[pos : pos + key_len])
                pos += key_len
            value_len, pos = decode_varint(buf, pos)
            if value_len < 0:
                value = None
            else:
                if value_len > body_end - pos:
                    raise InvalidRecordError(f"record value length {value_len} exceeds the record")
                value = bytes(buf[pos : pos + value_len])
                pos += value_len
            header_count, pos = decode_varint(buf, pos)
            if header_count < 0:
                raise InvalidRecordError(f"found invalid number of record headers {header_count}")
            headers: list[tuple[str, bytes | None]] = []
            for _h in range(header_count):
                if pos >= body_end:
                    raise InvalidRecordError(f"record declares {header_count} headers but ends early")
                hkey_len, pos = decode_varint(buf, pos)
                if hkey_len < 0 or hkey_len > body_end - pos:
                    raise InvalidRecordError(f"invalid record header key length {hkey_len}")
                hkey = bytes(buf[pos : pos + hkey_len]).decode("utf-8")
                pos += hkey_len
                hvalue_len, pos = decode_varint(buf, pos)
                if hvalue_len < 0:
                    hvalue = None
                else:
                    if hvalue_len > body_end - pos:
                        raise InvalidRecordError(
                            f"record header value length {hvalue_len} exceeds the record"
                        )
                    hvalue = bytes(buf[pos : pos + hvalue_len])
                    pos += hvalue_len
                headers.append((hkey, hvalue))
            if pos != body_end:
                raise InvalidRecordError(
                    f"invalid record size: expected to read {size} bytes in record payload, "
                    f"but instead read {size + pos - body_end}"
                )
            yield Record(
                base_offset + offset_delta,
                base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
                key,
                value,
                headers,
            )
    except UnicodeDecodeError as exc:
        raise InvalidRecordError(f"record header key is not valid UTF-8: {exc}") from None
    except CorruptRecordError:
        raise
    except ProtocolError as exc:
        raise InvalidRecordError(f"malformed record: {exc}") from None
    if pos != end:
        raise InvalidRecordError(
            f"incorrect declared batch size, {end - pos} bytes remain after {count} records"
        )


# --- walking a buffer of batches -----------------------------------------------------------------------


def _check_range(buf: ReadableBuffer, start: int, end: int | None) -> int:
    # Bad bounds are the caller's bug, not bad data: ValueError, never CorruptRecordError.
    size = len(buf)
    if end is None:
        end = size
    if not 0 <= start <= end <= size:
        raise ValueError(f"bad range [{start}, {end}) for a buffer of {size} bytes")
    return end


def iter_batches(
    buf: ReadableBuffer, start: int = 0, end: int | None = None, *, allow_partial_tail: bool = False
) -> Iterator[BatchView]:
    """Yield a :class:`BatchView` for each consecutive batch in ``buf[start:end]``.

    A batchLength below the header size or a magic other than 2 raises ``CorruptRecordError``, as
    does a batch cut off by ``end``, unless ``allow_partial_tail``: fetch responses may end in a
    partial batch (the size limit cuts through it), which is then silently dropped, as consumers do.
    Only the framing is checked; call :meth:`BatchView.verify_crc` etc. as needed.
    """
    end = _check_range(buf, start, end)
    pos = start
    unpack_length = _INT32.unpack_from
    while pos < end:
        remaining = end - pos
        if remaining < LOG_OVERHEAD:
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"{remaining} trailing bytes at position {pos} are not a record batch")
        (length,) = unpack_length(buf, pos + BATCH_LENGTH_OFFSET)
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch at position {pos} has batchLength {length}, below the minimum {MIN_BATCH_LENGTH}"
            )
        size = length + LOG_OVERHEAD
        if size > remaining:
            if allow_partial_tail:
                return
            raise CorruptRecordError(
                f"record batch at position {pos} has batchLength {length} but only {remaining - LOG_OVERHEAD} bytes follow"
            )
        _check_magic(buf, pos)
        yield _new_view(buf, pos, size)
        pos += size


def whole_batches_size(buf: ReadableBuffer) -> int:
    """Bytes of ``buf`` up to the end of its last whole batch: a fetch response may end in a partial one.

    Only the lengths are read (a batchLength below the header size raises ``CorruptRecordError``): a
    follower hands the bytes to its log's append, which parses and checks every header anyway.
    """
    end = len(buf)
    pos = 0
    unpack_length = _INT32.unpack_from
    while end - pos >= LOG_OVERHEAD:
        (length,) = unpack_length(buf, pos + BATCH_LENGTH_OFFSET)
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch at position {pos} has batchLength {length}, below the minimum {MIN_BATCH_LENGTH}"
            )
        if length + LOG_OVERHEAD > end - pos:
            break
        pos += length + LOG_OVERHEAD
    return pos


def single_batch(buf: ReadableBuffer) -> BatchView:
    """The one batch a v3+ Produce request must carry per partition (INVALID_RECORD otherwise)."""
    views = iter_batches(buf)
    first = next(views, None)
    if first is None:
        raise InvalidRecordError("produce request partition data has no record batch")
    if next(views, None) is not None:
        raise InvalidRecordError("produce request partition data has more than one record batch")
    return first


def scan_valid_prefix(buf: ReadableBuffer, start: int = 0, end: int | None = None) -> ScanResult:
    """Measure the longest run of valid batches from ``start`` (log recovery after a crash).

    A batch counts when it is whole, has magic 2, a correct CRC, a consistent header
    (``validate_structure(from_client=False)``) and offsets above the previous batch's. The scan
    stops at the first batch that is not, and never raises for bad data: the caller truncates the
    segment at ``start + valid_bytes``.
    """
    end = _check_range(buf, start, end)
    pos = start
    count = 0
    first_offset = -1
    last_offset = -1
    max_timestamp = NO_TIMESTAMP
    offset_of_max_timestamp = -1
    reason: str | None = None
    unpack_header = _HEADER.unpack_from
    while pos < end:
        remaining = end - pos
        if remaining < BATCH_HEADER_SIZE:
            reason = f"{remaining} trailing bytes are shorter than a batch header"
            break
        (base, length, _epoch, magic, crc, _attrs, last_delta, _bt, batch_max_ts, *_rest) = unpack_header(
            buf, pos
        )
        size = length + LOG_OVERHEAD
        if length < MIN_BATCH_LENGTH:
            reason = f"batchLength {length} is below the minimum {MIN_BATCH_LENGTH}"
            break
        if size > remaining:
            reason = f"batch of {size} bytes is cut off after {remaining} bytes"
            break
        if magic != MAGIC:
            reason = f"magic byte {magic} is not {MAGIC}"
            break
        if _crc_of(buf, pos + ATTRIBUTES_OFFSET, pos + size) != crc:
            reason = "CRC mismatch"
            break
        view = _new_view(buf, pos, size)
        try:
            view.validate_structure(from_client=False)
        except CorruptRecordError as exc:
            reason = str(exc)
            break
        if base <= last_offset:
            reason = f"base offset {base} does not follow the previous batch's last offset {last_offset}"
            break
        if count == 0:
            first_offset = base
        count += 1
        last_offset = base + last_delta
        if batch_max_ts > max_timestamp:
            max_timestamp = batch_max_ts
            offset_of_max_timestamp = last_offset
        pos += size
    if reason is not None:
        reason = f"at position {pos}: {reason}"
    return ScanResult(
        pos - start, count, first_offset, last_offset, max_timestamp, offset_of_max_timestamp, reason
    )


# --- building batches -------------------------------------------------------------------------------


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class BatchBuilder:
    """Accumulates records and serialises them as one v2 batch.

    Records are encoded as they are appended, so :attr:`estimated_size` is cheap to watch when
    filling batches up to a size limit. Field meanings follow :func:`build_batch`.
    """

    def __init__(
        self,
        *,
        base_offset: int = 0,
        compression: CompressionType | int = CompressionType.NONE,
        compression_level: int | None = None,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        log_append_time: int | None = None,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        base_timestamp: int | None = None,
        delete_horizon_ms: int | None = None,
    ) -> None:
        try:
            codec = CompressionType(compression)
        except ValueError:
            raise ValueError(f"unknown compression codec {compression!r}") from None
        if delete_horizon_ms is not None:
            # The horizon lives in baseTimestamp: record deltas are taken from it.
            if base_timestamp is not None and base_timestamp != delete_horizon_ms:
                raise ValueError("delete_horizon_ms replaces base_timestamp; give only one")
            base_timestamp = delete_horizon_ms
        self.base_offset = base_offset
        self.compression = codec
        self.compression_level = compression_level
        self.timestamp_type = timestamp_type
        self.log_append_time = log_append_time
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.delete_horizon_ms = delete_horizon_ms
        self._base_timestamp = base_timestamp
        self._max_timestamp = NO_TIMESTAMP
        self._now: int | None = None
        self._records = bytearray()
        self._count = 0
        self._last_offset_delta = -1

    @property
    def records_count(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """Size of the batch if built uncompressed now (an upper bound, give or take, when compressed)."""
        return BATCH_HEADER_SIZE + len(self._records)

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        offset_delta: int | None = None,
    ) -> int:
        """Encode one record; returns its offset delta."""
        if offset_delta is None:
            offset_delta = self._last_offset_delta + 1
        elif offset_delta <= self._last_offset_delta:
            raise ValueError(f"offset delta {offset_delta} does not follow {self._last_offset_delta}")
        if offset_delta > _INT32_MAX:
            raise ValueError(f"offset delta {offset_delta} does not fit in int32")
        if timestamp is None:
            if self._now is None:
                self._now = _now_ms()
            timestamp = self._now
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        body = bytearray(b"\x00")  # record attributes
        body += encode_varlong(timestamp - self._base_timestamp)
        body += encode_varint(offset_delta)
        if key is None:
            body += b"\x01"  # zigzag(-1)
        else:
            body += encode_varint(len(key))
            body += key
        if value is None:
            body += b"\x01"
        else:
            body += encode_varint(len(value))
            body += value
        body += encode_varint(len(headers))
        for header_key, header_value in headers:
            encoded_key = header_key.encode("utf-8")
            body += encode_varint(len(encoded_key))
            body += encoded_key
            if header_value is None:
                body += b"\x01"
            else:
                body += encode_varint(len(header_value))
                body += header_value
        self._records += encode_varint(len(body))
        self._records += body
        self._count += 1
        self._last_offset_delta = offset_delta
        return offset_delta

    def build(self, *, last_offset_delta: int | None = None) -> bytes:
        """Serialise the batch.

        ``last_offset_delta`` may extend the offset range past the last record (the cleaner keeps a
        batch's original range when it drops records); it is required for an empty batch.
        """
        if last_offset_delta is None:
            if self._count == 0:
                raise ValueError("an empty batch needs an explicit last_offset_delta")
            last_offset_delta = self._last_offset_delta
        elif last_offset_delta < self._last_offset_delta or last_offset_delta > _INT32_MAX:
            raise ValueError(f"last_offset_delta {last_offset_delta} is out of range")
        attributes = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self.is_control:
            attributes |= CONTROL_FLAG_MASK
        if self.delete_horizon_ms is not None:
            attributes |= DELETE_HORIZON_FLAG_MASK
        base_timestamp = NO_TIMESTAMP if self._base_timestamp is None else self._base_timestamp
        max_timestamp = self._max_timestamp
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            # Like Kafka's builder: the broker's append time replaces the records' maximum.
            max_timestamp = self.log_append_time if self.log_append_time is not None else _now_ms()
        elif self._count == 0:
            max_timestamp = base_timestamp
        if self.compression == CompressionType.NONE:
            section: bytes | bytearray = self._records
        else:
            section = compress(self.compression, self._records, level=self.compression_level)
        out = bytearray(BATCH_HEADER_SIZE)
        out += section
        _HEADER.pack_into(
            out,
            0,
            self.base_offset,
            len(out) - LOG_OVERHEAD,
            self.partition_leader_epoch,
            MAGIC,
            0,  # CRC, filled in below once the bytes it covers are final
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._count,
        )
        _UINT32.pack_into(out, CRC_OFFSET, _crc_of(out, ATTRIBUTES_OFFSET, len(out)))
        return bytes(out)


def build_batch(
    records: Iterable[NewRecord | tuple[Any, ...]],
    *,
    base_offset: int = 0,
    compression: CompressionType | int = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    base_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Serialise ``records`` (``NewRecord``s or tuples ``(key, value[, timestamp[, headers[, offset_delta]]])``) as one batch.

    ``base_timestamp`` defaults to the first record's timestamp (records without one get the
    current time). With LogAppendTime, maxTimestamp is ``log_append_time`` (default: now).
    """
    builder = BatchBuilder(
        base_offset=base_offset,
        compression=compression,
        compression_level=compression_level,
        timestamp_type=timestamp_type,
        log_append_time=log_append_time,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=base_timestamp,
        delete_horizon_ms=delete_horizon_ms,
    )
    for record in records:
        builder.append(*record)
    return builder.build(last_offset_delta=last_offset_delta)


# --- control batches (transaction markers) -------------------------------------------------------------


def build_control_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker batch: one control record, transactional and control flags set.

    Key is ``int16 version (0), int16 type``; value is ``int16 version (0), int32 coordinatorEpoch``.
    """
    record_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_batch(
        [
            NewRecord(
                _CONTROL_KEY.pack(0, record_type),
                _CONTROL_VALUE.pack(0, coordinator_epoch),
                timestamp,
            )
        ],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_control_record(record: Record) -> tuple[str, int]:
    """Decode a transaction marker: ``("COMMIT" | "ABORT", coordinator_epoch)``.

    Later key/value versions are read as version 0, as Kafka does (fields are only ever appended).
    Other control types (KRaft's) and malformed markers raise ``InvalidRecordError``.
    """
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError(f"control record key of {0 if key is None else len(key)} bytes is too short")
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(f"control record type {type_id} is not a transaction marker")
    value = record.value
    if value is None or len(value) < _CONTROL_VALUE.size:
        raise InvalidRecordError(
            f"transaction marker value of {0 if value is None else len(value)} bytes is too short"
        )
    value_version, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    if value_version < 0:
        raise InvalidRecordError(f"invalid transaction marker value version {value_version}")
    return ControlRecordType(type_id).name, coordinator_epoch
