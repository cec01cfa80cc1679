"""A tight scanner over the records of a v2 batch: framing checked, nothing copied.

Produce validation has to look at every record (Kafka's ``LogValidator`` does: framing, keys on
compacted topics, each record's timestamp), and in Python that per-record loop is the cost of the
whole produce path. So :func:`scan_records` is one function with everything in locals: varints of one
byte (nearly all of them in practice: sizes below 64, deltas, null keys, zero headers) are decoded
inline, longer ones by :func:`_read_varint`; keys, values and headers are skipped by their lengths,
never sliced. It returns only the aggregates the validator needs (smallest and largest timestamp
delta, first record without a key, whether offset deltas run 0, 1, 2, ...); a batch that fails the
aggregate checks is walked again, slowly, by :func:`iter_record_summaries` to name every bad record.

The checks are those of Kafka's ``DefaultRecord.readFrom``/``readPartiallyFrom``: a record's length
varint must fit the bytes left, its fields must end exactly at its declared end, header counts and
header key lengths must not be negative, and varints are at most 5 bytes (varlongs 10). Errors are
``InvalidRecordError`` (INVALID_RECORD, 87), as Kafka's ``InvalidRecordException``.

``protocol/_record_scan.c`` is the same loop compiled (about a hundredth of the time per record): when
the install built it, :func:`scan_records` is that one, and :data:`SCANNER` says which is in use. The
Python loop here stays the reference the compiled one is tested against, and the fallback where no C
compiler was at hand; it is :func:`scan_records_python` either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import crc32c

from protocol.records import InvalidRecordError, ReadableBuffer

__all__ = ["SCANNER", "RecordScan", "RecordSummary", "check_plain_batch", "iter_record_summaries", "scan_records",
           "scan_records_python"]

_NO_TS = 1 << 63


class RecordScan(NamedTuple):
    """Where a scan stopped and what it saw, for the records from ``first_index`` to ``next_index``."""

    pos: int
    next_index: int
    min_timestamp_delta: int
    max_timestamp_delta: int
    #: Index (within the batch) of the first record with a null key, -1 when all have keys.
    first_keyless: int
    #: True when every record's offsetDelta equals its index in the batch.
    offsets_consecutive: bool


class RecordSummary(NamedTuple):
    """One record's fields that validation reports on (the slow path)."""

    # Named as Kafka's RecordError.batchIndex is reported; it shadows tuple.index, which nothing calls.
    index: int  # type: ignore[assignment]
    timestamp_delta: int
    offset_delta: int
    key_size: int
    value_size: int


def _read_varint(buf: ReadableBuffer, pos: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint (``max_bytes`` 5) or varlong (10) at ``pos``; IndexError past the buffer."""
    value = 0
    shift = 0
    for i in range(max_bytes):
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos + i + 1
        shift += 7
    raise InvalidRecordError(f"varint is too long: more than {max_bytes} bytes")


def scan_records_python(
    buf: ReadableBuffer, pos: int, end: int, first_index: int, count: int, *, partial: bool = False,
    max_record_size: int = 1 << 31, release_gil: bool = False,
) -> RecordScan:
    """Check the records in ``buf[pos:end]`` until ``count`` records (indexes from ``first_index``).

    ``buf`` must end at ``end`` (pass a slice): reading past it is how a field that overruns the
    batch is caught. With ``partial`` the bytes are a prefix of a longer stream (decompressed
    chunks): the scan stops before a record that is not entirely there and says where. Without it,
    running out of bytes before ``count`` records is an error; bytes left after them are the
    caller's to judge. A record declaring more than ``max_record_size`` bytes is refused before
    its bytes are awaited, so a stream cannot make its reader buffer a giant record.

    ``release_gil``: the caller is a worker thread; the compiled scanner then lets other threads run
    while it scans a big buffer. Python bytecode cannot, and ignores it.
    """
    index = first_index
    min_ts = _NO_TS
    max_ts = -_NO_TS
    first_keyless = -1
    consecutive = True
    read = _read_varint
    start = pos
    try:
        while index < count:
            if pos >= end:
                if partial:
                    break
                raise InvalidRecordError("Incorrect declared batch size, premature EOF reached")
            start = pos
            b = buf[pos]
            if b < 0x80:
                size = b >> 1 if not b & 1 else -((b + 1) >> 1)
                pos += 1
            else:
                try:
                    b2 = buf[pos + 1]
                    if b2 < 0x80:  # two bytes: records of 64 to 8191 bytes
                        size = (b & 0x7F) | (b2 << 7)
                        size = (size >> 1) ^ -(size & 1)
                        pos += 2
                    else:
                        size, pos = read(buf, pos, 5)
                except IndexError:
                    if partial:
                        pos = start
                        break
                    raise
            body = pos
            record_end = pos + size
            if size < 0 or record_end > end:
                if size > max_record_size:
                    raise InvalidRecordError(f"record of {size} bytes exceeds the bound of {max_record_size}")
                if partial and size >= 0:
                    pos = start
                    break
                raise InvalidRecordError(
                    f"Invalid record size: expected {size} bytes in record payload, but instead the buffer "
                    f"has only {end - pos} remaining bytes.")
            # attributes (unused in v2), then the timestamp delta (a varlong)
            b = buf[pos + 1]
            if b < 0x80:
                ts = (b >> 1) ^ -(b & 1)
                pos += 2
            elif buf[pos + 2] < 0x80:
                ts = (b & 0x7F) | (buf[pos + 2] << 7)
                ts = (ts >> 1) ^ -(ts & 1)
                pos += 3
            else:
                ts, pos = read(buf, pos + 1, 10)
            b = buf[pos]
            if b < 0x80:
                if b != index << 1:  # zigzag(index) for a non-negative index
                    consecutive = False
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    delta = (b & 0x7F) | (b2 << 7)
                    pos += 2
                    if (delta >> 1) ^ -(delta & 1) != index:
                        consecutive = False
                else:
                    delta, pos = read(buf, pos, 5)
                    if delta != index:
                        consecutive = False
            b = buf[pos]
            if b == 1:  # null key: zigzag(-1)
                pos += 1
                if first_keyless < 0:
                    first_keyless = index
            else:
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    n, pos = read(buf, pos, 5)
                if n >= 0:
                    pos += n
                elif first_keyless < 0:
                    first_keyless = index
            b = buf[pos]
            if b < 0x80:
                if not b & 1:  # odd: a negative length, a null value
                    pos += b >> 1
                pos += 1
            elif buf[pos + 1] < 0x80:
                n = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2 if n & 1 else 2 + (n >> 1)
            else:
                n, pos = read(buf, pos, 5)
                if n > 0:
                    pos += n
            b = buf[pos]
            if b == 0:
                pos += 1
            else:
                pos = _skip_headers(buf, pos, end)
            if pos != record_end:
                raise InvalidRecordError(
                    f"Invalid record size: expected to read {size} bytes in record payload, but instead "
                    f"read {pos - body}")
            if ts < min_ts:
                min_ts = ts
            if ts > max_ts:
                max_ts = ts
            index += 1
    except IndexError:
        raise InvalidRecordError("Found invalid record structure") from None
    return RecordScan(pos, index, min_ts, max_ts, first_keyless, consecutive)


def _skip_headers(buf: ReadableBuffer, pos: int, end: int) -> int:
    count, pos = _read_varint(buf, pos, 5)
    if count < 0:
        raise InvalidRecordError(f"Found invalid number of record headers {count}")
    if count > end - pos:
        raise InvalidRecordError(
            f"Found invalid number of record headers. {count} is larger than the remaining size of the buffer")
    for _ in range(count):
        key_size, pos = _read_varint(buf, pos, 5)
        if key_size < 0:
            raise InvalidRecordError(f"Invalid negative header key size {key_size}")
        pos += key_size
        value_size, pos = _read_varint(buf, pos, 5)
        if value_size > 0:
            pos += value_size
    return pos


def iter_record_summaries(buf: ReadableBuffer, pos: int, end: int, count: int) -> Iterator[RecordSummary]:
    """The fields of each record in an already scanned records section (the slow, reporting path)."""
    read = _read_varint
    for index in range(count):
        size, pos = read(buf, pos, 5)
        record_end = pos + size
        ts, p = read(buf, pos + 1, 10)
        delta, p = read(buf, p, 5)
        key_size, p = read(buf, p, 5)
        if key_size > 0:
            p += key_size
        value_size, p = read(buf, p, 5)
        yield RecordSummary(index, ts, delta, key_size, value_size)
        pos = record_end


def _compiled_scanner() -> tuple[Callable[..., RecordScan], str, Callable[..., tuple[int, int] | None] | None]:
    try:
        from protocol import _record_scan
    except ImportError:
        return scan_records_python, "pure Python (protocol._record_scan was not built)", None
    _record_scan.configure(InvalidRecordError, RecordScan, crc32c.crc32c)
    return _record_scan.scan_records, "compiled (protocol._record_scan)", _record_scan.check_plain_batch


#: The scanner produce validation uses: the compiled one when the install built it. With it comes
#: ``check_plain_batch`` (None without it): the common produce, one uncompressed batch that passes
#: every check, accepted in one compiled call; it answers None for anything else, which the Python
#: validator then judges (broker.log_validator.validate_produce_records).
scan_records, SCANNER, check_plain_batch = _compiled_scanner()
