"""Varint codecs: round trips, known encodings, Java overflow semantics and malformed input."""

from __future__ import annotations

import mmap
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record import util as kafka_util

from protocol.exceptions import ProtocolError
from protocol.varint import (
    decode_unsigned_varint,
    decode_unsigned_varlong,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_unsigned_varlong,
    encode_varint,
    encode_varlong,
    size_of_unsigned_varint,
    size_of_varint,
    size_of_varlong,
    zigzag_decode,
    zigzag_encode,
)

Decoder = Callable[[bytes, int], tuple[int, int]]

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UINT32 = st.integers(0, 2**32 - 1)
UINT64 = st.integers(0, 2**64 - 1)


@given(INT32, st.binary(max_size=4), st.binary(max_size=4))
def test_varint_round_trip_inside_a_buffer(value: int, before: bytes, after: bytes) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value) <= 5
    assert decode_varint(before + encoded + after, len(before)) == (value, len(before) + len(encoded))


@given(INT64)
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == size_of_varlong(value) <= 10
    assert decode_varlong(encoded, 0) == (value, len(encoded))


@given(UINT32)
def test_unsigned_varint_round_trip(value: int) -> None:
    encoded = encode_unsigned_varint(value)
    assert len(encoded) == size_of_unsigned_varint(value) <= 5
    assert decode_unsigned_varint(encoded, 0) == (value, len(encoded))


@given(UINT64)
def test_unsigned_varlong_round_trip(value: int) -> None:
    encoded = encode_unsigned_varlong(value)
    assert len(encoded) <= 10
    assert decode_unsigned_varlong(encoded, 0) == (value, len(encoded))


@given(INT64)
def test_zigzag_varlong_matches_an_independent_encoder(value: int) -> None:
    # kafka-python's record codec writes zigzag varlongs one byte at a time.
    out = bytearray()
    kafka_util.encode_varint(value, out.append)
    assert encode_varlong(value) == bytes(out)
    assert decode_varlong(bytes(out), 0)[0] == kafka_util.decode_varint(bytes(out), 0)[0]


@given(INT64)
def test_zigzag_functions_are_inverse(value: int) -> None:
    assert zigzag_encode(value) >= 0
    assert zigzag_decode(zigzag_encode(value)) == value


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (63, b"\x7e"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (300, b"\xd8\x04"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_known_zigzag_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_known_unsigned_encodings(value: int, encoded: bytes) -> None:
    assert encode_unsigned_varint(value) == encoded
    assert decode_unsigned_varint(encoded, 0) == (value, len(encoded))


def test_decoders_accept_every_buffer_type(tmp_path: Path) -> None:
    data = b"\x00" + encode_varint(-12345) + encode_varlong(2**40) + encode_unsigned_varint(99999)
    path = tmp_path / "buf"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        for buf in (data, bytearray(data), memoryview(data), mapped):
            v1, pos = decode_varint(buf, 1)
            v2, pos = decode_varlong(buf, pos)
            v3, pos = decode_unsigned_varint(buf, pos)
            assert (v1, v2, v3, pos) == (-12345, 2**40, 99999, len(data))


def test_fifth_byte_overflow_is_dropped_like_java() -> None:
    # Java shifts the fifth byte into a 32-bit int and loses the high bits; so do we.
    assert decode_unsigned_varint(b"\xff\xff\xff\xff\x7f", 0) == (2**32 - 1, 5)
    assert decode_varint(b"\xfe\xff\xff\xff\x7f", 0) == (2**31 - 1, 5)


@pytest.mark.parametrize(
    "decoder, max_len",
    [(decode_varint, 5), (decode_unsigned_varint, 5), (decode_varlong, 10), (decode_unsigned_varlong, 10)],
)
def test_overlong_and_truncated_varints_raise(decoder: Decoder, max_len: int) -> None:
    longest = b"\x80" * (max_len - 1) + b"\x01"
    assert decoder(longest, 0)[1] == max_len
    with pytest.raises(ProtocolError, match="longer than"):
        decoder(b"\x80" * max_len + b"\x01", 0)
    with pytest.raises(ProtocolError, match="longer than"):
        decoder(b"\xff" * 20, 0)
    for cut in range(max_len):
        with pytest.raises(ProtocolError, match="ends inside"):
            decoder(longest[:cut], 0)
    with pytest.raises(ProtocolError):
        decoder(b"\x01\x02", 2)


@given(st.binary(max_size=12), st.integers(0, 12))
def test_decoders_only_raise_protocol_error(data: bytes, pos: int) -> None:
    for decoder in (decode_varint, decode_varlong, decode_unsigned_varint, decode_unsigned_varlong):
        try:
            value, new_pos = decoder(data, pos)
        except ProtocolError:
            continue
        assert pos < new_pos <= len(data)


@pytest.mark.parametrize(
    "encoder, bad",
    [
        (encode_varint, 2**31),
        (encode_varint, -(2**31) - 1),
        (encode_varlong, 2**63),
        (encode_unsigned_varint, -1),
        (encode_unsigned_varint, 2**32),
        (encode_unsigned_varlong, 2**64),
    ],
)
def test_encoders_reject_out_of_range_values(encoder: Callable[[int], bytes], bad: int) -> None:
    with pytest.raises(ValueError):
        encoder(bad)
