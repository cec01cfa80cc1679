"""Record-batch compression codecs, byte-compatible with the Java client and librdkafka.

Only the records section of a v2 batch is compressed; the codec id lives in the low three bits of
the batch attributes. Notes on each codec, because the wire formats differ from the "obvious"
Python call in places:

* gzip: RFC 1952 members, as ``GZIPOutputStream`` writes them. Concatenated members are accepted
  (``GZIPInputStream`` reads them too).
* snappy: the Java client wraps raw snappy blocks in snappy-java's (xerial) stream format: an
  8-byte magic, two int32 version fields, then ``int32 length + raw block`` chunks of at most
  32 KiB of input each. librdkafka sends one raw block. We decode both and encode the xerial form,
  which every client can read.
* lz4: the standard LZ4 frame format (magic v2 batches fixed the old broken header checksum). The
  Java reader only handles independent blocks, so we never emit linked blocks.
* zstd: standard frames. Java's zstd-jni streams frames without a content size, so decompression
  always streams instead of trusting (or requiring) the size in the frame header.

Every decoder bounds its output (``max_output_size``) so a few hundred compressed bytes cannot make
the broker allocate gigabytes, and every failure surfaces as ``CorruptRecordError``.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from protocol.exceptions import CorruptRecordError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "CompressionType",
    "compress",
    "decompress",
]


class CompressionType(IntEnum):
    """Codec ids as stored in bits 0-2 of the batch attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


#: Upper bound on one batch's decompressed records section. Far above any sane batch
#: (message.max.bytes is 1 MiB by default) yet small enough that a compression bomb fails fast.
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
# Version 1, minimum compatible version 1: what snappy-java writes and what it checks on read.
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")


def compress(codec: int, data: bytes | bytearray | memoryview, *, level: int | None = None) -> bytes:
    """Compress a records section with ``codec`` (a :class:`CompressionType` or its id).

    ``level`` is the codec's own level (KIP-390's ``compression.<codec>.level``); None picks the
    codec default. An unknown codec is a programming error and raises ``ValueError``.
    """
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        # mtime=0 keeps the output deterministic; -1 is not accepted by gzip.compress.
        return gzip.compress(data, compresslevel=6 if level is None or level < 0 else level, mtime=0)
    if codec == CompressionType.SNAPPY:
        return _xerial_encode(data)
    if codec == CompressionType.LZ4:
        return lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == CompressionType.ZSTD:
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    raise ValueError(f"unknown compression codec id {codec!r}")


def decompress(
    codec: int, data: bytes | bytearray | memoryview, *, max_output_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes:
    """Decompress a records section; raises ``CorruptRecordError`` on any malformed input.

    Output longer than ``max_output_size`` bytes is treated as corrupt too.
    """
    try:
        if codec == CompressionType.NONE:
            out = bytes(data)
        elif codec == CompressionType.GZIP:
            out = _gzip_decode(data, max_output_size)
        elif codec == CompressionType.SNAPPY:
            out = _snappy_decode(data, max_output_size)
        elif codec == CompressionType.LZ4:
            out = _lz4_decode(data, max_output_size)
        elif codec == CompressionType.ZSTD:
            out = _zstd_decode(data, max_output_size)
        else:
            raise CorruptRecordError(f"unknown compression codec id {codec}")
    except CorruptRecordError:
        raise
    except (
        zlib.error,
        cramjam.DecompressionError,
        zstandard.ZstdError,
        RuntimeError,
        ValueError,
        EOFError,
    ) as exc:
        # lz4.frame reports bad frames as RuntimeError; the others have their own error types.
        name = _codec_name(codec)
        raise CorruptRecordError(f"invalid {name} compressed data: {exc}") from exc
    if len(out) > max_output_size:
        raise CorruptRecordError(
            f"{_codec_name(codec)} data decompresses to more than {max_output_size} bytes"
        )
    return out


def _codec_name(codec: int) -> str:
    try:
        return CompressionType(codec).name.lower()
    except ValueError:
        return f"codec {codec}"


def _too_big(codec: str, limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"{codec} data decompresses to more than {limit} bytes")


def _gzip_decode(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    out = bytearray()
    rest: bytes | memoryview = memoryview(data)
    while True:
        # 16 + MAX_WBITS: gzip wrapper only, as Kafka specifies.
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = d.decompress(rest, limit + 1 - len(out))
        out += chunk
        while d.unconsumed_tail:
            if len(out) > limit:
                raise _too_big("gzip", limit)
            out += d.decompress(d.unconsumed_tail, limit + 1 - len(out))
        if len(out) > limit:
            raise _too_big("gzip", limit)
        if not d.eof:
            raise CorruptRecordError("gzip data is truncated")
        if not d.unused_data:
            return bytes(out)
        # Another member follows (concatenated gzip streams are legal).
        rest = d.unused_data


def _xerial_encode(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw(block: bytes | memoryview, limit: int) -> bytes:
    # The raw format starts with the uncompressed length: check it before allocating.
    if cramjam.snappy.decompress_raw_len(block) > limit:
        raise _too_big("snappy", limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decode(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    view = memoryview(data)
    if view[:8] != _XERIAL_MAGIC:
        return _snappy_raw(view, limit)
    if len(view) < 16:
        raise CorruptRecordError("xerial snappy header is truncated")
    out = bytearray()
    pos = 16
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("xerial snappy block length is truncated")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or size > end - pos:
            raise CorruptRecordError(
                f"xerial snappy block length {size} exceeds the remaining {end - pos} bytes"
            )
        out += _snappy_raw(view[pos : pos + size], limit - len(out))
        pos += size
    return bytes(out)


def _lz4_decode(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    out = bytearray()
    rest: bytes | memoryview = memoryview(data)
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        out += d.decompress(rest, max_length=limit + 1 - len(out))
        while not d.needs_input and not d.eof:
            if len(out) > limit:
                raise _too_big("lz4", limit)
            out += d.decompress(b"", max_length=limit + 1 - len(out))
        if len(out) > limit:
            raise _too_big("lz4", limit)
        if not d.eof:
            raise CorruptRecordError("lz4 frame is truncated")
        if not d.unused_data:
            return bytes(out)
        rest = d.unused_data


def _zstd_decode(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    # zstandard's stream_reader stops silently at a truncated frame and decompressobj has no output
    # bound, so feed decompressobj slices small enough that even the best possible ratio (one RLE
    # block: 4 bytes in, 128 KiB out) cannot overshoot the remaining budget by much, and check
    # ``eof`` to catch truncation. Real batches compress far less, so the slices stay large.
    view = memoryview(data)
    end = len(view)
    out = bytearray()
    pos = 0
    while True:
        d = zstandard.ZstdDecompressor().decompressobj()
        while not d.eof:
            if pos >= end:
                raise CorruptRecordError("zstd frame is truncated")
            step = max(64, (limit - len(out)) >> 17)
            out += d.decompress(view[pos : pos + step])
            pos = min(pos + step, end)
            if len(out) > limit:
                raise _too_big("zstd", limit)
        # Whatever the last slice held past the frame end starts the next frame.
        pos -= len(d.unused_data)
        if pos >= end:
            return bytes(out)
