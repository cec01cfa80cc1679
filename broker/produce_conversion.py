"""Produce v0-2 with message formats v0/v1: validated and converted to one v2 batch, as Kafka 3.9 does.

With ``inter.broker.protocol.version`` 3.0 or later a Kafka broker stores only v2 batches: its
``LogValidator`` turns a v0/v1 message set into one batch (``convertAndAssignOffsetsNonCompressed``
when neither side is compressed, else ``validateMessagesAndAssignOffsetsCompressed`` followed by
``buildRecordsAndAssignOffsets``). This module does the same, checks and error messages included,
in Kafka's order:

1. every entry (``UnifiedLog.analyzeAndValidateRecords``): its size against ``max.message.bytes``
   (MESSAGE_TOO_LARGE), its CRC (CORRUPT_MESSAGE), its codec id;
2. the entries together: all of the first one's magic; a compressed one must be alone
   (INVALID_RECORD);
3. every record (inner records of a compressed entry too: their CRCs, CORRUPT_MESSAGE): its magic
   against its entry's, a key on compacted topics, its timestamp (INVALID_RECORD /
   INVALID_TIMESTAMP with ``record_errors``; for uncompressed entries each entry is a batch of its
   own, so an error there always has batch index 0, as in Kafka).

The batch built carries the records' keys, values and timestamps (-1 for v0), offset deltas
0..n-1, no producer id, the topic's codec (the producer's when ``compression.type=producer``) and
CreateTime: the append path stamps LogAppendTime topics afterwards, as it does for any batch. It
then goes through the ordinary v2 validation and append, which finds nothing more to refuse.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from broker.log_validator import RecordError, ValidationError, _raise_record_errors
from protocol.compression import CompressionType
from protocol.errors import ErrorCode
from protocol.legacy_records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    LegacyFormatError,
    LegacyMessage,
    iter_deep,
    iter_shallow,
)
from protocol.records import BATCH_HEADER_SIZE, NewRecord, build_batch

_CODEC_BY_NAME = {"uncompressed": CompressionType.NONE, "gzip": CompressionType.GZIP,
                  "snappy": CompressionType.SNAPPY, "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """What the conversion needs of the topic's config (LogConfig)."""

    compression_type: str
    timestamp_type: str  # "CreateTime" or "LogAppendTime"
    before_max_ms: int
    after_max_ms: int
    max_message_bytes: int
    compacted: bool
    gzip_level: int = -1
    lz4_level: int = 9
    zstd_level: int = 3

    def level_for(self, codec: int) -> int | None:
        return {CompressionType.GZIP: self.gzip_level, CompressionType.LZ4: self.lz4_level,
                CompressionType.ZSTD: self.zstd_level}.get(CompressionType(codec))


@dataclass(frozen=True, slots=True)
class ConvertedProduce:
    """One v2 batch, and Kafka's ``RecordValidationStats`` for it."""

    batch: bytes
    records_converted: int
    temporary_memory_bytes: int
    conversion_time_ns: int


def convert_produce(records: memoryview | bytes, tp: str, topic: TopicSettings, now_ms: int) -> ConvertedProduce | None:
    """Validate a v0/v1 message set and convert it; None when it holds no whole message.

    Raises ``ValidationError`` with Kafka's error code (and record errors) for what Kafka refuses.
    """
    started = time.perf_counter_ns()
    try:
        entries = list(iter_shallow(records))
    except LegacyFormatError as e:
        raise _refused(e, tp) from None
    if not entries:
        return None
    source = CompressionType.NONE
    for entry in entries:
        size = entry.entry_size
        if size > topic.max_message_bytes:
            raise ValidationError(ErrorCode.MESSAGE_TOO_LARGE,
                                  f"The record batch size in the append to {tp} is {size} bytes which exceeds the "
                                  f"maximum configured value of {topic.max_message_bytes}.")
        if not entry.is_valid:
            raise ValidationError(ErrorCode.CORRUPT_MESSAGE,
                                  f"Record is corrupt (stored crc = {entry.crc}) in topic partition {tp}.")
        if entry.codec > CompressionType.ZSTD:
            raise ValidationError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {entry.codec}")
        if entry.codec != CompressionType.NONE:
            source = CompressionType(entry.codec)
    target = source if topic.compression_type == "producer" else _CODEC_BY_NAME[topic.compression_type]
    first = entries[0]
    if source != CompressionType.NONE and len(entries) > 1:
        raise ValidationError(ErrorCode.INVALID_RECORD, "Compressed outer record has more than one batch")
    # Kafka's compressed path (recompression or not) counts what it decompressed and rebuilt.
    compressed_path = source != CompressionType.NONE or target != CompressionType.NONE
    create_time = topic.timestamp_type == "CreateTime"
    lo, hi = now_ms - topic.before_max_ms, now_ms + topic.after_max_ms
    validated: list[LegacyMessage] = []
    uncompressed_bytes = 0
    for entry in entries:
        if entry.magic != first.magic:
            raise ValidationError(ErrorCode.INVALID_RECORD,
                                  f"Batch magic {entry.magic} is not the same as the first batch's magic byte "
                                  f"{first.magic} in topic partition {tp}")
        if entry.is_compressed:
            try:
                inner = iter_deep(entry)
            except LegacyFormatError as e:
                raise _refused(e, tp) from None
        else:
            inner = [entry]
        if compressed_path:
            uncompressed_bytes += BATCH_HEADER_SIZE
        errors: list[tuple[ErrorCode, RecordError]] = []
        for index, record in enumerate(inner):
            error = _record_error(entry, record, index, tp, topic.compacted, create_time, lo, hi)
            if error is not None:
                errors.append(error)
            elif not errors:
                validated.append(record)
                if compressed_path:
                    uncompressed_bytes += record.entry_size
        if errors:
            _raise_record_errors(errors)
    new_records = [NewRecord(r.key, r.value, r.timestamp if r.magic > 0 else NO_TIMESTAMP, (), i)
                   for i, r in enumerate(validated)]
    plain = build_batch(new_records)
    batch = plain if target == CompressionType.NONE else build_batch(
        new_records, compression=target, compression_level=topic.level_for(target))
    # LogValidator's RecordValidationStats: the records re-written, and the bytes held meanwhile.
    temporary = len(plain) + uncompressed_bytes
    return ConvertedProduce(batch, len(new_records), temporary, time.perf_counter_ns() - started)


def _refused(e: LegacyFormatError, tp: str) -> ValidationError:
    message = e.message
    if message.startswith("Batch magic"):
        message += f" in topic partition {tp}"
    return ValidationError(e.code, message)


def _record_error(entry: LegacyMessage, record: LegacyMessage, index: int, tp: str, compacted: bool,
                  create_time: bool, lo: int, hi: int) -> tuple[ErrorCode, RecordError] | None:
    """Kafka's ``LogValidator.validateRecord`` for one v0/v1 record of ``entry`` (itself, uncompressed)."""
    if record.magic != entry.magic:
        return ErrorCode.INVALID_RECORD, RecordError(
            index, f"Record {record.describe()}'s magic does not match outer magic {entry.magic} in topic partition {tp}")
    if entry.is_compressed and not record.is_valid:
        # ensureValid on an inner record: the whole request fails, not one record.
        raise ValidationError(ErrorCode.CORRUPT_MESSAGE,
                              f"Record is corrupt (stored crc = {record.crc}, computed crc = {record.computed_crc})")
    if compacted and record.key is None:
        return ErrorCode.INVALID_RECORD, RecordError(
            index, f"Compacted topic cannot accept message without key in topic partition {tp}")
    if create_time and record.timestamp != NO_TIMESTAMP:
        if record.timestamp < lo or record.timestamp > hi:
            return ErrorCode.INVALID_TIMESTAMP, RecordError(
                index, f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range. "
                       f"The timestamp should be within [{lo}, {hi}]")
    elif entry.timestamp_type == LOG_APPEND_TIME:
        return ErrorCode.INVALID_TIMESTAMP, RecordError(
            index, f"Invalid timestamp type in message {record.describe()}. Producer should not set timestamp "
                   "type to LogAppendTime.")
    return None


__all__ = ["CREATE_TIME", "ConvertedProduce", "TopicSettings", "convert_produce"]
