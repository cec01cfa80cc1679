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
from collections.abc import Generator, Iterator
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from protocol.exceptions import CorruptRecordError

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "CompressionType",
    "DecompressedTooLargeError",
    "DecompressionError",
    "IgnoredTrailingData",
    "TrailingFrameError",
    "compress",
    "decompress",
    "iter_decompress",
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
# snappy-java writes blocks of 32 KiB input; raw snappy expands a block at most by its own length
# prefix's value, which is checked first. librdkafka's single raw block is bounded by the stream's.
_MAX_SNAPPY_BLOCK_OUTPUT = 4 * 1024 * 1024


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
        frame: bytes = lz4.frame.compress(  # lz4 ships no type information
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        return frame
    if codec == CompressionType.ZSTD:
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    raise ValueError(f"unknown compression codec id {codec!r}")


class DecompressionError(CorruptRecordError):
    """Compressed data that its codec cannot decode. ``truncated`` when the data just ends early."""

    def __init__(self, message: str, *, truncated: bool = False) -> None:
        super().__init__(message)
        self.truncated = truncated


class TrailingFrameError(DecompressionError):
    """More data after the first frame where ``iter_decompress(single_frame=True)`` wants one."""


class IgnoredTrailingData(Exception):  # noqa: N818 - not an error: the stream ended, with bytes after it
    """Raised at the end of a single lz4 frame that has ``length`` more bytes after it (Kafka ignores them)."""

    def __init__(self, length: int) -> None:
        super().__init__(f"{length} bytes follow the lz4 frame")
        self.length = length


class DecompressedTooLargeError(CorruptRecordError):
    """Compressed data that would decompress past the caller's bound (a compression bomb)."""


#: Output size of one step of :func:`iter_decompress`: big enough that per-chunk Python overhead
#: vanishes against the codec's work, small enough that a stream costs little memory at any moment.
DEFAULT_CHUNK_SIZE = 256 * 1024


def decompress(
    codec: int, data: bytes | bytearray | memoryview, *, max_output_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes:
    """Decompress a records section; raises ``CorruptRecordError`` on any malformed input.

    Output longer than ``max_output_size`` bytes raises ``DecompressedTooLargeError``.
    """
    if codec == CompressionType.NONE:
        return bytes(data)
    out = bytearray()
    for chunk in iter_decompress(codec, data, max_output_size=max_output_size):
        out += chunk
    return bytes(out)


def iter_decompress(
    codec: int,
    data: bytes | bytearray | memoryview,
    *,
    max_output_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    single_frame: bool = False,
) -> Iterator[bytes]:
    """Decompress as a stream: yields chunks of about ``chunk_size`` bytes (never much more).

    The codec never produces more than a chunk ahead of the consumer, so a caller that stops early
    (it has seen enough to reject the data) pays for what it read and no more, and a compression
    bomb costs at most ``max_output_size`` bytes of work before ``DecompressedTooLargeError``.
    Malformed or truncated input raises ``DecompressionError``.

    ``single_frame`` reads as Kafka's broker reads a produced batch: one gzip member, xerial snappy
    stream or zstd frame, with ``TrailingFrameError`` where output from a next one would begin, and
    one lz4 frame, anything after it ignored: ``IgnoredTrailingData`` ends such a stream, to say how
    many bytes were left unread.
    """
    # A generator, not just an iterator: the finally below closes it, which runs the codec's own cleanup.
    gen: Generator[bytes, None, None]
    if codec == CompressionType.GZIP:
        gen = _gzip_stream(data, chunk_size, single_frame)
    elif codec == CompressionType.SNAPPY:
        gen = _snappy_stream(data, chunk_size, max_output_size, single_frame)
    elif codec == CompressionType.LZ4:
        gen = _lz4_stream(data, chunk_size, single_frame)
    elif codec == CompressionType.ZSTD:
        gen = _zstd_stream(data, chunk_size, single_frame)
    elif codec == CompressionType.NONE:
        gen = (chunk for chunk in (bytes(data),))
    else:
        raise DecompressionError(f"unknown compression codec id {codec}")
    total = 0
    name = _codec_name(codec)
    try:
        for chunk in gen:
            total += len(chunk)
            if total > max_output_size:
                raise DecompressedTooLargeError(f"{name} data decompresses to more than {max_output_size} bytes")
            if chunk:
                yield chunk
    except CorruptRecordError:
        raise
    except (zlib.error, cramjam.DecompressionError, zstandard.ZstdError, RuntimeError, ValueError,
            EOFError) as exc:
        # lz4.frame reports bad frames as RuntimeError; the others have their own error types.
        raise DecompressionError(f"invalid {name} compressed data: {exc}") from exc
    finally:
        gen.close()


def _codec_name(codec: int) -> str:
    try:
        return CompressionType(codec).name.lower()
    except ValueError:
        return f"codec {codec}"


def _gzip_stream(data: bytes | bytearray | memoryview, chunk_size: int, single: bool) -> Generator[bytes, None, None]:
    rest: bytes | memoryview = memoryview(data)
    while True:
        # 16 + MAX_WBITS: gzip wrapper only, as Kafka specifies.
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        yield d.decompress(rest, chunk_size)
        while d.unconsumed_tail:
            yield d.decompress(d.unconsumed_tail, chunk_size)
        if not d.eof:
            # All input taken yet the member is open: maybe the codec holds output back.
            while not d.eof:
                tail = d.decompress(b"", chunk_size)
                if not tail:
                    raise DecompressionError("gzip data is truncated", truncated=True)
                yield tail
        if not d.unused_data:
            return
        if single:
            raise TrailingFrameError("data follows the gzip member")
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
        raise DecompressedTooLargeError(f"snappy block decompresses to more than {limit} bytes")
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_stream(data: bytes | bytearray | memoryview, chunk_size: int, limit: int,
                   single: bool) -> Generator[bytes, None, None]:
    # Raw snappy holds its length up front and xerial blocks are at most 32 KiB of input each
    # (snappy-java's writer); a block's declared length is checked before it is decoded, so no
    # block can make us allocate more than the bound of the whole stream allows.
    view = memoryview(data)
    if view[:8] != _XERIAL_MAGIC:
        yield _snappy_raw(view, limit)
        return
    if len(view) < 16:
        raise DecompressionError("xerial snappy header is truncated", truncated=True)
    pos = 16
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise DecompressionError("xerial snappy block length is truncated", truncated=True)
        if view[pos : pos + 8] == _XERIAL_MAGIC:
            # Another stream's header: snappy-java reads concatenated streams on.
            if single:
                raise TrailingFrameError("data follows the xerial snappy stream")
            pos += 16
            continue
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or size > end - pos:
            raise DecompressionError(
                f"xerial snappy block length {size} exceeds the remaining {end - pos} bytes", truncated=size > 0)
        yield _snappy_raw(view[pos : pos + size], min(limit, max(chunk_size, _MAX_SNAPPY_BLOCK_OUTPUT)))
        pos += size


def _lz4_stream(data: bytes | bytearray | memoryview, chunk_size: int, single: bool) -> Generator[bytes, None, None]:
    rest: bytes | memoryview = memoryview(data)
    # Kafka's Lz4BlockInputStream refuses frames of dependent (linked) blocks, and reads one frame.
    if len(rest) >= 5 and not rest[4] & 0x20:
        raise DecompressionError("lz4 frames of dependent blocks are not supported")
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        yield d.decompress(rest, max_length=chunk_size)
        while not d.needs_input and not d.eof:
            yield d.decompress(b"", max_length=chunk_size)
        if not d.eof:
            raise DecompressionError("lz4 frame is truncated", truncated=True)
        if not d.unused_data:
            return
        if single:
            raise IgnoredTrailingData(len(d.unused_data))
        rest = d.unused_data


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024
_UINT32_LE = struct.Struct("<I")


def _zstd_stream(data: bytes | bytearray | memoryview, chunk_size: int, single: bool) -> Generator[bytes, None, None]:
    # zstandard's decompressobj has no output bound and its stream_reader stops silently at a
    # truncated frame. So we walk the frame's block headers ourselves (each block says how much it
    # can produce: raw and RLE blocks their size, compressed ones at most 128 KiB) and feed the
    # decompressor runs of whole blocks whose output fits in a chunk; ``eof`` catches truncation.
    view = memoryview(data)
    end = len(view)
    if end == 0:
        raise DecompressionError("zstd data is empty", truncated=True)
    pos = 0
    while pos < end:
        if end - pos < 4:
            raise DecompressionError("zstd frame magic is truncated", truncated=True)
        (magic,) = _UINT32_LE.unpack_from(view, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame
            if end - pos < 8:
                raise DecompressionError("zstd skippable frame is truncated", truncated=True)
            pos += 8 + _UINT32_LE.unpack_from(view, pos + 4)[0]
            if pos > end:
                raise DecompressionError("zstd skippable frame is truncated", truncated=True)
            continue
        if magic != _ZSTD_MAGIC:
            raise DecompressionError(f"unknown zstd frame magic {magic:#x}")
        if end - pos < 5:
            raise DecompressionError("zstd frame header is truncated", truncated=True)
        descriptor = view[pos + 4]
        fcs_flag = descriptor >> 6
        single_segment = (descriptor >> 5) & 1
        has_checksum = (descriptor >> 2) & 1
        header = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
        header += (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        d = zstandard.ZstdDecompressor().decompressobj()
        feed_start = pos
        pos += header
        budget = 0
        last = False
        while not last:
            if end - pos < 3:
                raise DecompressionError("zstd block header is truncated", truncated=True)
            block = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            last = bool(block & 1)
            kind = (block >> 1) & 3
            size = block >> 3
            if kind == 3:
                raise DecompressionError("zstd block of the reserved type")
            produced = min(size, _ZSTD_BLOCK_MAX) if kind != 2 else _ZSTD_BLOCK_MAX
            pos += 3 + (1 if kind == 1 else size)
            if pos > end:
                raise DecompressionError("zstd block is truncated", truncated=True)
            if last and has_checksum:
                pos += 4
                if pos > end:
                    raise DecompressionError("zstd frame checksum is truncated", truncated=True)
            budget += produced
            if budget >= chunk_size or last:
                yield d.decompress(view[feed_start:pos])
                feed_start = pos
                budget = 0
        if not d.eof:
            raise DecompressionError("zstd frame is truncated", truncated=True)
        if single and pos < end:
            raise TrailingFrameError("data follows the zstd frame")
