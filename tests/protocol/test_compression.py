"""Compression codecs: round trips, interoperability with other encoders, bounds and garbage."""

from __future__ import annotations

import gzip
import io
import os
import random
import struct
import types
import zlib
from collections.abc import Iterator

import cramjam
import kafka.codec
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.compression import (
    CompressionType,
    DecompressedTooLargeError,
    IgnoredTrailingData,
    TrailingFrameError,
    compress,
    decompress,
    iter_decompress,
)
from protocol.exceptions import CorruptRecordError

CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c != CompressionType.NONE]
XERIAL_MAGIC = b"\x82SNAPPY\x00"

# Compressible but not trivial: repeated words with some randomness, ~200 KiB.
_rng = random.Random(7)
TEXT = b" ".join(
    _rng.choice([b"kafka", b"record", b"batch", b"offset", os.urandom(3)]) for _ in range(40_000)
)


@pytest.fixture
def kafka_snappy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Give kafka-python's codec module (which wants python-snappy) raw snappy via cramjam.

    kafka-python then does its own xerial framing, an independent implementation to check ours.
    """
    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)
    yield


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "data", [b"", b"x", TEXT, os.urandom(70_000)], ids=["empty", "one", "text", "random"]
)
def test_round_trip(codec: CompressionType, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(int(codec), memoryview(packed)) == data
    assert decompress(codec, bytearray(packed)) == data


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=3000))
def test_round_trip_hypothesis(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_compression_actually_compresses() -> None:
    for codec in COMPRESSED:
        assert len(compress(codec, TEXT)) < len(TEXT) // 2, codec


@pytest.mark.parametrize("level", [1, 9])
def test_levels(level: int) -> None:
    for codec in (CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD):
        assert decompress(codec, compress(codec, TEXT, level=level)) == TEXT


# --- snappy: both framings -------------------------------------------------------------------------


def test_snappy_encodes_the_xerial_stream_format() -> None:
    packed = compress(CompressionType.SNAPPY, TEXT)
    assert packed[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    # Walk the blocks by hand: each holds at most 32 KiB of input, like snappy-java's default.
    pos, out = 16, bytearray()
    while pos < len(packed):
        (size,) = struct.unpack_from(">i", packed, pos)
        block = bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + size]))
        assert 0 < len(block) <= 32 * 1024
        out += block
        pos += 4 + size
    assert pos == len(packed)
    assert out == TEXT


def test_snappy_decodes_raw_blocks_as_librdkafka_sends_them() -> None:
    raw = bytes(cramjam.snappy.compress_raw(TEXT))
    assert raw[:8] != XERIAL_MAGIC
    assert decompress(CompressionType.SNAPPY, raw) == TEXT


@pytest.mark.usefixtures("kafka_snappy")
def test_snappy_interoperates_with_kafka_python_framing() -> None:
    theirs = kafka.codec.snappy_encode(TEXT, xerial_compatible=True, xerial_blocksize=4096)
    assert decompress(CompressionType.SNAPPY, theirs) == TEXT
    assert kafka.codec.snappy_decode(compress(CompressionType.SNAPPY, TEXT)) == TEXT
    assert (
        decompress(CompressionType.SNAPPY, kafka.codec.snappy_encode(TEXT, xerial_compatible=False)) == TEXT
    )


def test_snappy_xerial_bad_block_lengths() -> None:
    header = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for tail in (
        struct.pack(">i", -1),
        struct.pack(">i", 1000) + b"abc",
        b"\x00\x00",
        b"\x00\x00\x00\x05\x00",
    ):
        with pytest.raises(CorruptRecordError):
            decompress(CompressionType.SNAPPY, header + tail)
    with pytest.raises(CorruptRecordError, match="header"):
        decompress(CompressionType.SNAPPY, header[:12])
    assert decompress(CompressionType.SNAPPY, header) == b""


# --- gzip, lz4, zstd: frames other encoders write ------------------------------------------------


def test_gzip_reads_other_writers_and_concatenated_members() -> None:
    assert decompress(CompressionType.GZIP, gzip.compress(TEXT, compresslevel=1)) == TEXT
    two = gzip.compress(TEXT[:1000]) + gzip.compress(TEXT[1000:])
    assert decompress(CompressionType.GZIP, two) == TEXT
    assert kafka.codec.gzip_decode(compress(CompressionType.GZIP, TEXT)) == TEXT
    assert decompress(CompressionType.GZIP, kafka.codec.gzip_encode(TEXT)) == TEXT


def test_gzip_rejects_a_bare_zlib_stream() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.GZIP, zlib.compress(TEXT))


def test_lz4_writes_independent_blocks_and_reads_any_frame() -> None:
    packed = compress(CompressionType.LZ4, TEXT)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flags = packed[4]
    assert flags >> 6 == 1  # frame version 01
    assert flags & 0x20  # block independence: the Java reader requires it
    assert not flags & 0x08  # no content size
    assert (packed[5] >> 4) & 0x7 == 4  # 64 KiB maximum block size
    assert kafka.codec.lz4_decode(packed) == TEXT
    for kwargs in ({}, {"content_checksum": True, "store_size": True}):
        assert decompress(CompressionType.LZ4, lz4.frame.compress(TEXT, block_linked=False, **kwargs)) == TEXT
    two = lz4.frame.compress(TEXT[:5000], block_linked=False) + lz4.frame.compress(TEXT[5000:], block_linked=False)
    assert decompress(CompressionType.LZ4, two) == TEXT


def test_lz4_frames_of_dependent_blocks_are_refused_as_kafka_does() -> None:
    # Kafka's Lz4BlockInputStream: "Dependent block stream is unsupported"; the Java client and
    # librdkafka only write independent blocks, and so does kafka-python.
    with pytest.raises(CorruptRecordError, match="dependent blocks"):
        decompress(CompressionType.LZ4, lz4.frame.compress(TEXT, block_linked=True))


def test_zstd_reads_streamed_frames_without_content_size() -> None:
    # What zstd-jni's ZstdOutputStream produces: no content size, possibly several frames.
    sink = io.BytesIO()
    with zstandard.ZstdCompressor(write_content_size=False).stream_writer(sink, closefd=False) as writer:
        writer.write(TEXT)
    streamed = sink.getvalue()
    assert zstandard.get_frame_parameters(streamed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, streamed) == TEXT
    assert decompress(CompressionType.ZSTD, streamed + streamed) == TEXT + TEXT
    assert kafka.codec.zstd_decode(compress(CompressionType.ZSTD, TEXT)) == TEXT


# --- bounds and bad input -------------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED)
def test_output_bound(codec: CompressionType) -> None:
    bomb = compress(codec, bytes(4 * 1024 * 1024))
    assert len(bomb) < 300_000
    assert decompress(codec, bomb, max_output_size=4 * 1024 * 1024) == bytes(4 * 1024 * 1024)
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(codec, bomb, max_output_size=1024 * 1024)


def _zstd_frame(declared_size: int, payload: bytes) -> bytes:
    # Hand-built frame: 8-byte content size, 1 KiB window, one raw last block.
    header = struct.pack("<I", 0xFD2FB528) + bytes([0xC0, 0x00]) + struct.pack("<Q", declared_size)
    block_header = ((len(payload) << 3) | 1).to_bytes(3, "little")
    return header + block_header + payload


def test_zstd_does_not_trust_the_declared_content_size() -> None:
    assert decompress(CompressionType.ZSTD, _zstd_frame(3, b"abc")) == b"abc"
    # A one-shot decoder would try to allocate a terabyte here; streaming just finds the lie.
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.ZSTD, _zstd_frame(1 << 40, b"abc"))


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_every_strict_prefix_is_rejected(codec: CompressionType) -> None:
    packed = compress(codec, TEXT[:20_000])
    for cut in sorted({*range(0, 40), *range(0, len(packed), 7), len(packed) - 1}):
        with pytest.raises(CorruptRecordError):
            decompress(codec, packed[:cut])


def test_snappy_prefixes_fail_or_yield_a_prefix() -> None:
    # The xerial format has no end marker: a cut exactly between blocks is indistinguishable from a
    # shorter stream (the batch's record count catches that one level up).
    packed = compress(CompressionType.SNAPPY, TEXT[:100_000])
    for cut in range(0, len(packed), 97):
        try:
            out = decompress(CompressionType.SNAPPY, packed[:cut])
        except CorruptRecordError:
            continue
        assert TEXT.startswith(out)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_raises_corrupt_record_error(codec: CompressionType) -> None:
    rng = random.Random(int(codec))
    packed = compress(codec, TEXT[:5000])
    for i in range(300):
        if i % 3 == 0:
            data = rng.randbytes(rng.randrange(0, 200))
        else:
            data = bytearray(packed)
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            data = bytes(data)
        try:
            decompress(codec, data, max_output_size=1 << 20)
        except CorruptRecordError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(COMPRESSED), st.binary(max_size=100))
def test_garbage_hypothesis(codec: CompressionType, data: bytes) -> None:
    try:
        decompress(codec, data, max_output_size=1 << 20)
    except CorruptRecordError:
        pass


def test_unknown_codec() -> None:
    with pytest.raises(CorruptRecordError, match="unknown compression codec id 5"):
        decompress(5, b"abc")
    with pytest.raises(ValueError):
        compress(7, b"abc")


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                                   CompressionType.ZSTD])
def test_streaming_yields_bounded_chunks_that_add_up(codec: CompressionType) -> None:
    data = TEXT * 40 + os.urandom(100_000)
    chunks = list(iter_decompress(codec, compress(codec, data), chunk_size=64 * 1024))
    assert b"".join(chunks) == data
    # Never far beyond a chunk: one zstd block (128 KiB) or one xerial block (32 KiB input) at most.
    assert max(len(c) for c in chunks) <= 128 * 1024 + 64 * 1024


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_a_bomb_stops_at_the_bound_after_bounded_work(codec: CompressionType) -> None:
    packed = compress(codec, bytes(256 << 20)) if codec != CompressionType.LZ4 else lz4.frame.compress(
        bytes(256 << 20), block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX4MB)
    seen = 0
    with pytest.raises(DecompressedTooLargeError):
        for chunk in iter_decompress(codec, packed, max_output_size=8 << 20, chunk_size=1 << 20):
            seen += len(chunk)
    assert seen <= 8 << 20


def test_single_frame_reading_is_kafkas() -> None:
    two = {c: compress(c, b"first") + compress(c, b"second")
           for c in (CompressionType.GZIP, CompressionType.ZSTD, CompressionType.SNAPPY)}
    for codec, data in two.items():
        assert decompress(codec, data) == b"firstsecond"  # concatenation is legal in general
        with pytest.raises(TrailingFrameError):
            list(iter_decompress(codec, data, single_frame=True))
    lz = lz4.frame.compress(b"first", block_linked=False) + b"anything"
    out = []
    with pytest.raises(IgnoredTrailingData) as info:
        for chunk in iter_decompress(CompressionType.LZ4, lz, single_frame=True):
            out.append(chunk)
    assert b"".join(out) == b"first" and info.value.length == len(b"anything")


def test_zstd_skippable_frames_are_skipped_and_reserved_blocks_refused() -> None:
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    assert decompress(CompressionType.ZSTD, skippable + compress(CompressionType.ZSTD, b"data")) == b"data"
    frame = bytearray(compress(CompressionType.ZSTD, b"data" * 100))
    single_segment = frame[4] >> 5 & 1
    header = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[frame[4] & 3]
    header += (single_segment, 2, 4, 8)[frame[4] >> 6]
    frame[header] |= 0b110  # the first block's type: 3, reserved
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.ZSTD, bytes(frame))
