"""Validation of produced batches before they reach the log, after Kafka's ``LogValidator``.

A Produce request's records for one partition go through the same three stages as in Kafka 3.9,
and each stage answers with the error code Kafka's answers with:

1. Framing (``ProduceRequest.validateRecords`` over ``MemoryRecords.batches()``): a batchLength
   below 14 or a magic above 2 is CORRUPT_MESSAGE; no complete batch, magic 0/1, or a second batch
   is INVALID_RECORD. Bytes after the batch that do not form another one (fewer than a length
   field, or a length running past the end) are ignored and not stored, as Kafka trims them.
2. The batch header (``UnifiedLog.analyzeAndValidateRecords`` and ``LogValidator.validateBatch``):
   size against ``max.message.bytes`` (MESSAGE_TOO_LARGE), CRC (CORRUPT_MESSAGE), codec id, offset
   range against recordsCount, control batches and sequence numbers (INVALID_RECORD).
3. Every record (``LogValidator`` with ``DefaultRecord``): framing, count, nothing left over,
   keys on compacted topics and timestamps. Record-level rejections carry ``record_errors`` and an
   error message in the response exactly as Kafka builds them; everything else carries neither.

Compressed records are decompressed as a stream (``protocol.compression.iter_decompress``) and
scanned chunk by chunk, so memory stays at a chunk plus one record. The stream may not produce more
than ``max_decompressed_bytes``: the broker's ``fetch.max.bytes`` (or ``max.message.bytes`` when that
is larger), the most a consumer is ever asked to take in one response. Kafka itself stops reading a
stream after ``recordsCount`` records plus one byte; a bomb of zeros fails on its first record.

The uncompressed case touches the request buffer in place: the scan reads it through a memoryview
and nothing is copied (see ``protocol.record_scan``, compiled when the install could build it:
:data:`RECORD_SCANNER` names the scanner in use, and the broker logs it at start). With the compiled
scanner comes ``check_plain_batch``: the common produce, one uncompressed batch that passes every
rule above, accepted in one call with what this module would have found; for anything else it
answers None and the stages above run in Python, with Kafka's error for what is wrong. Producers'
batches are accepted as they are, apart from what Kafka rewrites too: maxTimestamp is set to the largest record timestamp (CreateTime)
or the broker's clock (LogAppendTime), with the CRC recomputed, by :func:`stamp_for_append`.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

from protocol.compression import (
    CompressionType,
    DecompressedTooLargeError,
    DecompressionError,
    IgnoredTrailingData,
    TrailingFrameError,
    iter_decompress,
)
from protocol.errors import ErrorCode
from protocol.exceptions import CorruptRecordError
from protocol.record_scan import (
    SCANNER,
    RecordScan,
    check_plain_batch,
    iter_record_summaries,
    scan_records,
    scan_records_python,
)
from protocol.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    NO_TIMESTAMP,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchView,
    InvalidRecordError,
    TimestampType,
)

__all__ = [
    "COMPILED_SCANNER",
    "RECORD_SCANNER",
    "RecordError",
    "ValidatedBatch",
    "ValidationError",
    "frame_produce_batch",
    "needs_recompression",
    "stamp_for_append",
    "validate_produce_records",
]

#: Which record scanner validation runs: "compiled (...)" or "pure Python (...)".
RECORD_SCANNER = SCANNER
#: The compiled scanner lets go of the GIL by itself; the Python one must be cut into pieces for that.
COMPILED_SCANNER: bool = scan_records is not scan_records_python

_CODEC_BY_NAME = {
    "none": CompressionType.NONE, "uncompressed": CompressionType.NONE, "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY, "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD,
}

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
# Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest batchLength its batch iterator accepts.
_MIN_FRAMED_LENGTH = 14
_MAGIC_OFFSET = 16
# The codec can say no to data (corrupt or truncated stream, an lz4 frame of dependent blocks):
# Kafka's decompressing input streams then throw an IOException (or a RuntimeException) that ends up
# as a KafkaException, which the produce path answers with UNKNOWN_SERVER_ERROR. A stream that is
# well formed but holds fewer records than recordsCount is INVALID_RECORD.
_CORRUPT_STREAM_CODE = ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(slots=True)
class RecordError:
    """One rejected record: its index in the batch and why (Kafka's ``ProduceResponse.RecordError``)."""

    batch_index: int
    message: str

    def __str__(self) -> str:
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


class ValidationError(Exception):
    """A batch Kafka would refuse: the partition's error code and what the response says about it.

    ``error_message`` and ``record_errors`` are set only where Kafka sets them (rejected records);
    ``str(self)`` always explains, for logs.
    """

    def __init__(self, code: ErrorCode, message: str, *, error_message: str | None = None,
                 record_errors: list[RecordError] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.error_message = error_message
        self.record_errors = record_errors or []


@dataclass(slots=True)
class ValidatedBatch:
    batch: BatchView
    #: Exactly the batch's bytes (a view of the request; trailing bytes Kafka ignores are cut off).
    data: memoryview
    records_count: int
    size: int
    #: What maxTimestamp must hold for CreateTime: the largest record timestamp, -1 if none.
    max_timestamp: int
    #: A compressed batch whose records' offset deltas are not 0..n-1: Kafka rewrites such batches.
    needs_rebuild: bool = False
    compressed: bool = False
    record_errors: list[RecordError] = field(default_factory=list)
    #: The header already says what a CreateTime topic stores (the CreateTime bit, and ``max_timestamp``
    #: as maxTimestamp): stamp_for_append has nothing to read or write for such a topic.
    create_time_stamped: bool = False


def _next_batch_size(buf: memoryview, pos: int, end: int) -> int | None:
    """Kafka's ``ByteBufferLogInputStream.nextBatchSize``: None when no further batch is framed."""
    remaining = end - pos
    if remaining < LOG_OVERHEAD:
        return None
    (length,) = _INT32.unpack_from(buf, pos + 8)
    if length < _MIN_FRAMED_LENGTH:
        message = f"Record size {length} is less than the minimum record overhead ({_MIN_FRAMED_LENGTH})"
        raise ValidationError(ErrorCode.CORRUPT_MESSAGE, message, error_message=message if pos == 0 else None)
    if remaining < _MAGIC_OFFSET + 1:
        return None
    magic = buf[pos + _MAGIC_OFFSET]
    if magic > 127:
        magic -= 256
    if magic < 0 or magic > 2:
        message = f"Invalid magic found in record: {magic}"
        raise ValidationError(ErrorCode.CORRUPT_MESSAGE, message, error_message=message if pos == 0 else None)
    size = length + LOG_OVERHEAD
    return size if size <= remaining else None


def frame_produce_batch(records: memoryview, version: int = 9) -> tuple[int, int]:
    """The one batch of a v3+ Produce partition: ``(size, magic)``, after Kafka's framing rules."""
    end = len(records)
    size = _next_batch_size(records, 0, end)
    if size is None:
        raise ValidationError(ErrorCode.INVALID_RECORD,
                              f"Produce requests with version {version} must have at least one record batch per partition")
    magic = records[_MAGIC_OFFSET]
    if magic != 2:
        raise ValidationError(ErrorCode.INVALID_RECORD,
                              f"Produce requests with version {version} are only allowed to contain record "
                              "batches with magic version 2")
    if version < 7 and size >= 23 and records[22] & COMPRESSION_CODEC_MASK == CompressionType.ZSTD:
        raise ValidationError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                              f"Produce requests with version {version} are not allowed to use ZStandard compression")
    if _next_batch_size(records, size, end) is not None:
        raise ValidationError(ErrorCode.INVALID_RECORD,
                              f"Produce requests with version {version} are only allowed to contain exactly "
                              "one record batch per partition")
    return size, magic


def validate_produce_records(records: memoryview, *, topic_partition: str, max_message_bytes: int,
                             timestamp_type: str, before_max_ms: int, after_max_ms: int, now_ms: int,
                             compacted: bool, max_decompressed_bytes: int, version: int = 9,
                             yield_gil: bool = False) -> ValidatedBatch:
    """Validate one partition's records from a Produce request (v3+: exactly one v2 batch).

    ``yield_gil``: the caller is a worker thread next to an event loop. The compiled scanner then
    releases the GIL while it scans; the Python one, which holds it, stops every thousand records to
    let the loop's thread run, so the loop waits for one piece of the scan rather than for a whole
    switch interval or more.
    """
    if check_plain_batch is not None and not yield_gil:
        # The common produce (one uncompressed batch that passes everything) in one compiled call;
        # None means the checks below decide, with Kafka's error for what is wrong.
        accepted = check_plain_batch(records, max_message_bytes, now_ms, before_max_ms, after_max_ms,
                                     timestamp_type == "CreateTime", compacted)
        if accepted is not None:
            # The compiled check accepts only the CreateTime bit; the producer's maxTimestamp is
            # almost always the records' largest, which is what a CreateTime topic keeps.
            count, max_timestamp = accepted
            return ValidatedBatch(BatchView(records), records, count, len(records), max_timestamp,
                                  create_time_stamped=_INT64.unpack_from(records, MAX_TIMESTAMP_OFFSET)[0]
                                  == max_timestamp)
    size, _ = frame_produce_batch(records, version)
    data = records[:size] if size != len(records) else records
    # UnifiedLog.analyzeAndValidateRecords: the client's baseOffset, the size, then the CRC.
    (base_offset,) = struct.unpack_from(">q", data, 0)
    if base_offset != 0:
        raise ValidationError(ErrorCode.INVALID_RECORD,
                              f"The baseOffset of the record batch in the append to {topic_partition} should be 0, "
                              f"but it is {base_offset}")
    if size < BATCH_HEADER_SIZE:
        raise ValidationError(ErrorCode.CORRUPT_MESSAGE,
                              f"Record batch of {size} bytes is shorter than a v2 batch header")
    batch = BatchView(data)
    (_base, _len, _ple, _magic, crc, attributes, last_delta, base_ts, max_ts, producer_id, _pe, base_seq,
     count) = _HEADER.unpack_from(data, 0)
    if size > max_message_bytes:
        raise ValidationError(ErrorCode.MESSAGE_TOO_LARGE,
                              f"The record batch size in the append to {topic_partition} is {size} bytes which "
                              f"exceeds the maximum configured value of {max_message_bytes}.")
    if batch.compute_crc() != crc:
        raise ValidationError(ErrorCode.CORRUPT_MESSAGE,
                              f"Record is corrupt (stored crc = {crc}) in topic partition {topic_partition}.")
    codec = attributes & COMPRESSION_CODEC_MASK
    if codec > CompressionType.ZSTD:
        # Kafka's CompressionType.forId throws IllegalArgumentException, answered as an unknown error.
        raise ValidationError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {codec}")
    _validate_batch_header(topic_partition, attributes, last_delta, count, producer_id, base_seq)

    log_append_bit = bool(attributes & TIMESTAMP_TYPE_MASK)
    if codec == CompressionType.NONE:
        # The records section, in place: a slice of a memoryview copies nothing.
        section = data[RECORDS_OFFSET:]
        try:
            if yield_gil and not COMPILED_SCANNER:
                scan = _scan_in_pieces(section, count)
            else:
                scan = scan_records(section, 0, len(section), 0, count, release_gil=yield_gil)
        except InvalidRecordError as e:
            raise ValidationError(ErrorCode.INVALID_RECORD, str(e)) from None
        if scan.pos != len(section):
            raise ValidationError(ErrorCode.INVALID_RECORD,
                                  "Incorrect declared batch size, records still remaining in file")
        needs_rebuild = False
    else:
        scan, ignored = _scan_compressed(data, codec, count, max_decompressed_bytes, yield_gil)
        needs_rebuild = not scan.offsets_consecutive
        section = None
        if ignored:
            # Bytes after an lz4 frame: Kafka never reads them, but stores them, and librdkafka
            # consumers then fail on the batch. Storing the batch without them is what Kafka's
            # readers see, for every reader.
            data, batch = _trim_records(data, size - ignored)
            size -= ignored

    # Record-level rules, from aggregates: only a batch that fails them is walked record by record.
    create_time = timestamp_type == "CreateTime"
    if log_append_bit:
        min_record_ts = max_record_ts = max_ts
    else:
        min_record_ts = base_ts + scan.min_timestamp_delta
        max_record_ts = base_ts + scan.max_timestamp_delta
    lo, hi = now_ms - before_max_ms, now_ms + after_max_ms
    # A record with NO_TIMESTAMP passes in Kafka: the slow path below knows, the aggregates do not.
    # Kafka refuses the producer's LogAppendTime bit only where a record's timestamp is not checked:
    # on a CreateTime topic, records whose timestamp (the batch's maxTimestamp) is NO_TIMESTAMP.
    if create_time:
        timestamps_ok = (min_record_ts >= lo and max_record_ts <= hi
                         and not (log_append_bit and max_ts == NO_TIMESTAMP))
    else:
        timestamps_ok = not log_append_bit
    if not timestamps_ok or (compacted and scan.first_keyless >= 0):
        errors = _record_errors(data, section, codec, count, topic_partition, compacted, create_time,
                                log_append_bit, base_ts, max_ts, lo, hi, max_decompressed_bytes)
        if errors:
            _raise_record_errors(errors)
    batch_max = max_record_ts if max_record_ts > NO_TIMESTAMP else NO_TIMESTAMP
    return ValidatedBatch(batch, data, count, size, batch_max, needs_rebuild, codec != CompressionType.NONE)


def keeps_plain_batches_as_produced(timestamp_type: str, topic_compression: str) -> bool:
    """Does a topic with this config store a valid uncompressed CreateTime batch exactly as produced
    (no recompression, no new timestamp)? Then :func:`accept_as_produced` may decide its batches."""
    return (check_plain_batch is not None and timestamp_type == "CreateTime"
            and _CODEC_BY_NAME.get(topic_compression, CompressionType.NONE) == CompressionType.NONE)


def accept_as_produced(records: memoryview, max_message_bytes: int, now_ms: int, before_max_ms: int,
                       after_max_ms: int, compacted: bool) -> int:
    """The common produce to a topic that :func:`keeps_plain_batches_as_produced`: one uncompressed
    batch that passes every check of :func:`validate_produce_records` and whose header already holds
    its largest record timestamp, so that it is stored byte for byte as received. Its record count,
    or -1 when :func:`validate_produce_records` must decide (with Kafka's error for what is wrong)."""
    assert check_plain_batch is not None  # keeps_plain_batches_as_produced says no without it
    accepted = check_plain_batch(records, max_message_bytes, now_ms, before_max_ms, after_max_ms, True, compacted)
    if accepted is None or _INT64.unpack_from(records, MAX_TIMESTAMP_OFFSET)[0] != accepted[1]:
        return -1
    return accepted[0]  # type: ignore[no-any-return]


def _validate_batch_header(tp: str, attributes: int, last_delta: int, count: int, producer_id: int,
                           base_sequence: int) -> None:
    """``LogValidator.validateBatch`` for a client's v2 batch (baseOffset is the client's, 0)."""
    if last_delta < 0:
        raise ValidationError(ErrorCode.INVALID_RECORD,
                              f"Batch has an invalid offset range: [0, {last_delta}] in topic partition {tp}")
    if count <= 0:
        raise ValidationError(ErrorCode.INVALID_RECORD,
                              f"Invalid reported count for record batch: {count} in topic partition {tp}")
    if last_delta + 1 != count:
        raise ValidationError(ErrorCode.INVALID_RECORD,
                              f"Inconsistent batch offset range [0, {last_delta}] and count of records {count} "
                              f"in topic partition {tp}")
    if attributes & CONTROL_FLAG_MASK:
        raise ValidationError(ErrorCode.INVALID_RECORD,
                              f"Clients are not allowed to write control records in topic partition {tp}")
    if producer_id >= 0 and base_sequence < 0:
        raise ValidationError(ErrorCode.INVALID_RECORD,
                              f"Invalid sequence number {base_sequence} in record batch with producerId "
                              f"{producer_id} in topic partition {tp}")


def _trim_records(data: memoryview, size: int) -> tuple[memoryview, BatchView]:
    """The batch cut to ``size`` bytes, batchLength and CRC fixed (in place when the buffer allows)."""
    if data.readonly:
        data = memoryview(bytearray(data))
    data = data[:size]
    _INT32.pack_into(data, 8, size - LOG_OVERHEAD)
    batch = BatchView(data)
    batch.update_crc()
    return data, batch


def _decompressed(data: memoryview, codec: int, limit: int) -> memoryview:
    out = bytearray()
    try:
        for chunk in iter_decompress(codec, data[RECORDS_OFFSET:], max_output_size=limit, single_frame=True):
            out += chunk
    except IgnoredTrailingData:
        pass
    return memoryview(out)


def _merge(a: RecordScan, b: RecordScan) -> RecordScan:
    """Aggregates of two consecutive scans (``a`` first)."""
    return RecordScan(b.pos, b.next_index, min(a.min_timestamp_delta, b.min_timestamp_delta),
                      max(a.max_timestamp_delta, b.max_timestamp_delta),
                      a.first_keyless if a.first_keyless >= 0 else b.first_keyless,
                      a.offsets_consecutive and b.offsets_consecutive)


# Records scanned between two GIL hand-offs in a worker thread: about a millisecond of work.
_PIECE_RECORDS = 1024


def _scan_in_pieces(section: memoryview, count: int) -> RecordScan:
    end = len(section)
    scan = scan_records(section, 0, end, 0, min(count, _PIECE_RECORDS))
    while scan.next_index < count:
        time.sleep(0)  # releases the GIL: the event loop's thread gets its turn now
        scan = _merge(scan, scan_records(section, scan.pos, end, scan.next_index,
                                         min(count, scan.next_index + _PIECE_RECORDS)))
    return scan


def _scan_compressed(data: memoryview, codec: int, count: int, limit: int,
                     yield_gil: bool = False) -> tuple[RecordScan, int]:
    """Stream-decompress and scan; stop as soon as the stream has told us enough to refuse it.

    Returns the aggregates and how many bytes after the compressed stream were left unread."""
    ignored = 0
    pending = bytearray()
    index = 0
    min_ts = 1 << 63
    max_ts = -(1 << 63)
    first_keyless = -1
    consecutive = True
    try:
        for chunk in iter_decompress(codec, data[RECORDS_OFFSET:], max_output_size=limit, single_frame=True):
            if index >= count:
                # Kafka reads one byte past the last record to check nothing follows.
                raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
            if yield_gil and not COMPILED_SCANNER:
                time.sleep(0)  # a chunk is a few thousand records: let the event loop's thread run
            pending += chunk
            scan = scan_records(pending, 0, len(pending), index, count, partial=True, max_record_size=limit,
                                release_gil=yield_gil)
            index = scan.next_index
            if index > 0:
                min_ts = min(min_ts, scan.min_timestamp_delta)
                max_ts = max(max_ts, scan.max_timestamp_delta)
                if first_keyless < 0:
                    first_keyless = scan.first_keyless
                consecutive = consecutive and scan.offsets_consecutive
            del pending[:scan.pos]
            if index >= count and pending:
                raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
    except IgnoredTrailingData as e:
        ignored = e.length
    except DecompressedTooLargeError as e:
        raise ValidationError(ErrorCode.INVALID_RECORD, str(e)) from None
    except TrailingFrameError as e:
        # Kafka's streams read on into a next gzip member / zstd frame / snappy stream, but a record
        # from there fails to decode (an unknown error); having all records, one byte more is enough.
        if index >= count:
            raise ValidationError(ErrorCode.INVALID_RECORD,
                                  "Incorrect declared batch size, records still remaining in file") from None
        raise ValidationError(_CORRUPT_STREAM_CODE, f"Failed to decompress record stream: {e}") from None
    except DecompressionError as e:
        # Truncated streams too: Kafka's codecs report them as IOExceptions of their own.
        raise ValidationError(_CORRUPT_STREAM_CODE, f"Failed to decompress record stream: {e}") from None
    except InvalidRecordError as e:
        raise ValidationError(ErrorCode.INVALID_RECORD, str(e)) from None
    except CorruptRecordError as e:
        raise ValidationError(_CORRUPT_STREAM_CODE, f"Failed to decompress record stream: {e}") from None
    if index < count:
        raise ValidationError(ErrorCode.INVALID_RECORD, "Incorrect declared batch size, premature EOF reached")
    return RecordScan(0, index, min_ts, max_ts, first_keyless, consecutive), ignored


def _record_errors(data: memoryview, section: memoryview | None, codec: int, count: int, tp: str,
                   compacted: bool, create_time: bool, log_append_bit: bool, base_ts: int, max_ts: int,
                   lo: int, hi: int, limit: int) -> list[tuple[ErrorCode, RecordError]]:
    """Kafka's per-record ``validateRecord``: one error at most per record, the key checked first."""
    if section is None:
        section = _decompressed(data, codec, limit)
    errors: list[tuple[ErrorCode, RecordError]] = []
    for rec in iter_record_summaries(section, 0, len(section), count):
        if compacted and rec.key_size < 0:
            errors.append((ErrorCode.INVALID_RECORD, RecordError(
                rec.index, f"Compacted topic cannot accept message without key in topic partition {tp}")))
            continue
        ts = max_ts if log_append_bit else base_ts + rec.timestamp_delta
        if create_time and ts != NO_TIMESTAMP:
            if ts < lo or ts > hi:
                errors.append((ErrorCode.INVALID_TIMESTAMP, RecordError(
                    rec.index, f"Timestamp {ts} of message with offset {rec.offset_delta} is out of range. "
                               f"The timestamp should be within [{lo}, {hi}]")))
        elif log_append_bit:
            description = (f"DefaultRecord(offset={rec.offset_delta}, timestamp={ts}, "
                           f"key={max(rec.key_size, 0)} bytes, value={max(rec.value_size, 0)} bytes)")
            errors.append((ErrorCode.INVALID_TIMESTAMP, RecordError(
                rec.index, f"Invalid timestamp type in message {description}. Producer should not set "
                           "timestamp type to LogAppendTime.")))
    return errors


def _raise_record_errors(errors: list[tuple[ErrorCode, RecordError]]) -> None:
    """Kafka's ``processRecordErrors``: any timestamp error makes the whole answer INVALID_TIMESTAMP."""
    record_errors = [e for _, e in errors]
    if any(code == ErrorCode.INVALID_TIMESTAMP for code, _ in errors):
        message = "One or more records have been rejected due to invalid timestamp"
        code = ErrorCode.INVALID_TIMESTAMP
    else:
        shown = ", ".join(str(e) for e in record_errors[:3])
        message = (f"One or more records have been rejected due to {len(record_errors)} record errors in total, "
                   f"and only showing the first three errors at most: [{shown}]")
        code = ErrorCode.INVALID_RECORD
    raise ValidationError(code, message, error_message=message, record_errors=record_errors)


def needs_recompression(batch: BatchView, topic_compression: str) -> CompressionType | None:
    """The codec to rewrite the batch with, or None to store it as produced."""
    if topic_compression == "producer":
        return None
    target = _CODEC_BY_NAME.get(topic_compression)
    if target is None or target == batch.compression:
        return None
    return target


def stamp_for_append(vb: ValidatedBatch, *, timestamp_type: str, now_ms: int) -> None:
    """Kafka's ``setMaxTimestamp`` after validation: LogAppendTime gets the broker's clock, CreateTime
    the records' largest timestamp. A no-op (no CRC pass) when the batch already says so."""
    if vb.create_time_stamped and timestamp_type == "CreateTime":
        return
    if timestamp_type == "LogAppendTime":
        wanted, max_timestamp = TimestampType.LOG_APPEND_TIME, now_ms
    else:
        wanted, max_timestamp = TimestampType.CREATE_TIME, vb.max_timestamp
    if vb.batch.timestamp_type == wanted and vb.batch.max_timestamp == max_timestamp:
        return
    if vb.data.readonly:
        vb.data = memoryview(bytearray(vb.data))
        vb.batch = BatchView(vb.data)
    vb.batch.set_max_timestamp(wanted, max_timestamp)
