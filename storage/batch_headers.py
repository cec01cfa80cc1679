"""Record batch v2 headers as the storage layer sees them: fixed-offset fields, never the records.

The log works on batch headers only (61 bytes); record-level work (compaction, timestamp lookup inside a
batch) goes through ``protocol.records``. Layout (big endian)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordsCount int32

``batchLength`` counts the bytes after itself, so a batch occupies ``batchLength + 12`` bytes. The CRC
(CRC-32C) covers attributes to the end; baseOffset and partitionLeaderEpoch sit outside it so a leader
can stamp them in place.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    PARTITION_LEADER_EPOCH_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)

# The v2 batch layout is defined once, in protocol/records.py; storage reads headers with positions.
HEADER = struct.Struct(">qiiBIhiqqqhii")  # the 61 header bytes in one unpack (magic unsigned here)
HEADER_SIZE = BATCH_HEADER_SIZE
CRC_START = ATTRIBUTES_OFFSET
MAGIC_V2 = MAGIC
OFFSET_FIELD = struct.Struct(">q")
EPOCH_FIELD = struct.Struct(">i")
EPOCH_OFFSET = PARTITION_LEADER_EPOCH_OFFSET
LENGTH_FIELD = struct.Struct(">qi")

TRANSACTIONAL_FLAG = TRANSACTIONAL_FLAG_MASK
CONTROL_FLAG = CONTROL_FLAG_MASK
TIMESTAMP_TYPE_FLAG = TIMESTAMP_TYPE_MASK
COMPRESSION_MASK = COMPRESSION_CODEC_MASK


class BatchHeader(NamedTuple):
    position: int
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

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader(pos, *HEADER.unpack_from(buf, pos))


def header_is_sane(h: BatchHeader) -> bool:
    """Size and magic checks that need no CRC (Kafka's FileLogInputStream + DefaultRecordBatch checks)."""
    return (
        h.magic == MAGIC_V2
        and h.batch_length >= MIN_BATCH_LENGTH
        and h.last_offset_delta >= 0
        and h.records_count >= 0
        and h.base_offset >= 0
    )


def crc_is_valid(batch: bytes | bytearray | memoryview) -> bool:
    """CRC-32C of attributes..end against the stored crc; ``batch`` is exactly one batch."""
    stored: int = struct.unpack_from(">I", batch, 17)[0]
    computed: int = crc32c(memoryview(batch)[CRC_START:])
    return computed == stored


def buffer_headers(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Headers of the batches that tile ``buf``; raises ValueError when they do not tile it exactly.

    The checks are :func:`header_is_sane`'s, inline: every append parses its batches' headers (one for a
    producer's request), and there the calls were a visible part of the cost."""
    headers: list[BatchHeader] = []
    pos = 0
    end = len(buf)
    unpack = HEADER.unpack_from
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise ValueError(f"truncated batch header at byte {pos}")
        h = BatchHeader(pos, *unpack(buf, pos))
        size = h.batch_length + LOG_OVERHEAD
        # header_is_sane(h), and the batch within the buffer
        if (h.magic != MAGIC_V2 or h.batch_length < MIN_BATCH_LENGTH or h.last_offset_delta < 0
                or h.records_count < 0 or h.base_offset < 0 or pos + size > end):
            raise ValueError(f"invalid batch at byte {pos}")
        headers.append(h)
        pos += size
    return headers


def read_headers(fd: int, start: int, end: int, window: int = 64 * 1024) -> Iterator[BatchHeader]:
    """Headers of the batches in file ``fd`` between ``start`` and ``end`` (exclusive), read in windows.

    Stops silently at a header that would run past ``end`` or fails the size checks; callers that must
    know (recovery) compare the last position reached with ``end``.
    """
    pos = start
    buf = b""
    buf_start = start
    while pos + LOG_OVERHEAD <= end:
        rel = pos - buf_start
        if rel < 0 or rel + HEADER_SIZE > len(buf):
            want = min(window, end - pos)
            if want < HEADER_SIZE:
                want = end - pos
            buf = os.pread(fd, want, pos)
            buf_start = pos
            rel = 0
            if len(buf) < HEADER_SIZE:
                return
        h = BatchHeader(pos, *HEADER.unpack_from(buf, rel))
        if not header_is_sane(h) or pos + h.size > end:
            return
        yield h
        pos += h.size


def read_header_at(fd: int, pos: int) -> BatchHeader | None:
    data = os.pread(fd, HEADER_SIZE, pos)
    if len(data) < HEADER_SIZE:
        return None
    return BatchHeader(pos, *HEADER.unpack_from(data, 0))


CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def _varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (raw >> 1) ^ -(raw & 1), pos


def control_record(batch: bytes | bytearray | memoryview) -> tuple[int, int]:
    """(control type, coordinator epoch) of a control batch's single record.

    Control batches are never compressed: the record follows the header directly. Key: version int16,
    type int16 (0 ABORT, 1 COMMIT); value (end-transaction marker): version int16, coordinatorEpoch int32.
    """
    pos = HEADER_SIZE
    _, pos = _varint(batch, pos)  # record length
    pos += 1  # attributes
    _, pos = _varint(batch, pos)  # timestamp delta
    _, pos = _varint(batch, pos)  # offset delta
    key_len, pos = _varint(batch, pos)
    if key_len < 4:
        raise ValueError("control record key too short")
    ctype = struct.unpack_from(">h", batch, pos + 2)[0]
    pos += key_len
    value_len, pos = _varint(batch, pos)
    coordinator_epoch = -1
    if value_len >= 6:
        coordinator_epoch = struct.unpack_from(">i", batch, pos + 2)[0]
    return ctype, coordinator_epoch
