"""Fetch v0-3: stored v2 batches down-converted to message format v0 (Fetch v0/v1) or v1 (v2/v3).

This is Kafka 3.9's ``LazyDownConversionRecords`` and ``LazyDownConversionRecordsSend`` over
``RecordsUtil.downConvert``, computed at once instead of while the response is being written, with
the same bytes as the result:

* The records of a partition are converted batch by batch. Control batches (transaction markers)
  are dropped; aborted records are not (old fetch versions have no isolation level: they read
  uncommitted, and Kafka gives them every data record below the high watermark). An uncompressed
  batch loses its records below the fetch offset; a compressed one keeps them all and is
  recompressed with its own codec, one v0/v1 wrapper per batch. Headers are dropped. A zstd batch
  cannot be converted (UNSUPPORTED_COMPRESSION_TYPE).
* The response's record bytes are exactly ``max(bytes read from the log, size of the first
  non-empty converted batch)`` long (12 when nothing converts to anything but there was data, 0 when
  there was none): converted chunks are cut at that size, and what is left is filled with an
  "overflow" message, an entry header (offset -1) whose size runs past the end, which consumers
  take for a partial message and skip.
* The first converted batch is sent first; then conversion goes on from the second batch read, in
  chunks of up to 128 KiB of stored batches (so a batch that converted to nothing before the first
  non-empty one makes that one appear twice, as in Kafka; consumers skip records below their
  position).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

from protocol.compression import CompressionType
from protocol.legacy_records import RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, LegacyRecord, build_message_set
from protocol.records import LOG_OVERHEAD, BatchView, TimestampType, iter_batches

__all__ = ["DownConverted", "UnsupportedCompression", "down_convert"]

#: LazyDownConversionRecordsSend.MAX_READ_SIZE: stored bytes converted per chunk after the first.
MAX_READ_SIZE = 128 * 1024
MIN_OVERFLOW_MESSAGE_LENGTH = LOG_OVERHEAD
_V2_RECORD_BATCH_OVERHEAD = 61
# Kafka's default levels when it recompresses in down-conversion (Compression.of(type).build()).
_DEFAULT_LEVEL = {CompressionType.GZIP: 6, CompressionType.LZ4: 9}


class UnsupportedCompression(Exception):  # noqa: N818 - Kafka's UnsupportedCompressionTypeException
    """A zstd batch, which message formats v0/v1 cannot hold."""


@dataclass
class DownConverted:
    """The bytes to send, and the ``RecordValidationStats`` of the chunks that went into them."""

    records: bytes
    records_converted: int = 0
    temporary_memory_bytes: int = 0
    conversion_time_ns: int = 0


@dataclass
class _Chunk:
    data: bytes
    records_converted: int
    temporary_memory_bytes: int
    conversion_time_ns: int


def _convert(batches: list[BatchView], to_magic: int, first_offset: int) -> _Chunk:
    """``RecordsUtil.downConvert`` of v2 ``batches`` (BatchViews) to ``to_magic``."""
    started = time.perf_counter_ns()
    kept = []
    for batch in batches:
        if batch.is_control:
            continue
        codec = batch.compression
        if codec == CompressionType.ZSTD:
            raise UnsupportedCompression("Down-conversion of zstandard-compressed batches is not supported")
        records = list(batch.records())
        if codec == CompressionType.NONE:
            records = [r for r in records if r.offset >= first_offset]
        if records:
            kept.append((batch, records))
    out = bytearray()
    temporary = converted = 0
    overhead = RECORD_OVERHEAD_V0 if to_magic == 0 else RECORD_OVERHEAD_V1
    for batch, records in kept:
        codec = batch.compression
        log_append_time = batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        out += build_message_set([LegacyRecord(r.offset, r.timestamp, r.key, r.value) for r in records],
                                 magic=to_magic, codec=codec, log_append_time=log_append_time,
                                 compression_level=_DEFAULT_LEVEL.get(codec))
        # MemoryRecordsBuilder.uncompressedBytesWritten: the entries, plus the wrapper's header.
        written = sum(LOG_OVERHEAD + overhead + len(r.key or b"") + len(r.value or b"") for r in records)
        if codec != CompressionType.NONE:
            written += LOG_OVERHEAD + overhead
        temporary += batch.size + written
        converted += len(records)
    return _Chunk(bytes(out), converted, temporary, time.perf_counter_ns() - started)


def _overflow(remaining: int) -> bytes:
    """LazyDownConversionRecordsSend.buildOverflowBatch: a header whose length runs past the end."""
    size = max(MIN_OVERFLOW_MESSAGE_LENGTH, min(remaining + 1, MAX_READ_SIZE))
    head = struct.pack(">qi", -1, max(remaining + 1, _V2_RECORD_BATCH_OVERHEAD))
    return (head + bytes(max(size - len(head), 0)))[:size]


def down_convert(data: bytes, to_magic: int, first_offset: int) -> DownConverted:
    """The record bytes Kafka sends an old fetcher for ``data`` read from the log.

    Raises :class:`UnsupportedCompression` when the first batch that converts to anything is
    zstd-compressed (Kafka answers the partition UNSUPPORTED_COMPRESSION_TYPE); a zstd batch met
    later ends the data with an overflow message instead.
    """
    batches = list(iter_batches(data, allow_partial_tail=True))
    # The constructor: convert one batch at a time until one gives something.
    first: _Chunk | None = None
    for batch in batches:
        chunk = _convert([batch], to_magic, first_offset)
        if chunk.data:
            first = chunk
            break
    if first is not None:
        size = max(len(data), len(first.data))
    else:
        size = MIN_OVERFLOW_MESSAGE_LENGTH if batches else 0
    result = DownConverted(b"")
    if size == 0:
        return result

    def chunks() -> Iterator[_Chunk]:
        # The send's iterator: the cached first chunk, then from the batch after the *first* one read.
        start = 0
        if first is not None:
            yield first
            start = 1
        i = start
        while i < len(batches):
            group = [batches[i]]
            so_far = batches[i].size
            i += 1
            while i < len(batches) and batches[i].size + so_far <= MAX_READ_SIZE:
                group.append(batches[i])
                so_far += batches[i].size
                i += 1
            chunk = _convert(group, to_magic, first_offset)
            if chunk.data:
                yield chunk

    out = bytearray()
    remaining = size
    pending = chunks()
    while remaining > 0:
        try:
            chunk = next(pending)
            piece = chunk.data
            result.records_converted += chunk.records_converted
            result.temporary_memory_bytes += chunk.temporary_memory_bytes
            result.conversion_time_ns += chunk.conversion_time_ns
        except StopIteration:
            piece = _overflow(remaining)
        except UnsupportedCompression:
            piece = _overflow(remaining)
            pending = iter(())
        piece = piece[:remaining]
        out += piece
        remaining -= len(piece)
    result.records = bytes(out)
    return result
