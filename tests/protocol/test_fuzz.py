"""Malformed input: every way a frame can be wrong surfaces as ``ProtocolError`` and nothing else.

The bulk test pushes a few hundred thousand random and mutated frames through ``decode_request`` and
``decode_response`` (and the size prefixes through ``FrameReader``): bit flips, truncations,
extensions, overwritten length fields, overlong varints, random api keys and versions, splices of
two frames and plain random bytes, starting from valid frames of every (api, version) we advertise.
It uses ``random.Random`` rather than hypothesis for volume; the seed and case count can be changed
with ``KAFKETTE_FUZZ_SEED`` and ``KAFKETTE_FUZZ_CASES``. The targeted tests below pin down each
kind of bad input separately.
"""

from __future__ import annotations

import os
import random
import struct
import time
import uuid
from typing import Any

import pytest

from protocol.api_versions import SUPPORTED, ApiKey
from protocol.exceptions import FrameTooLargeError, ProtocolError, UnsupportedVersionError
from protocol.framing import FrameReader, frame_size
from protocol.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response_bytes,
    new_request,
    request_type,
    response_type,
)
from protocol.schema import FieldSpec, MessageType, Struct, StructSpec, read_uvarint

SEED = int(os.environ.get("KAFKETTE_FUZZ_SEED", "20240611"))
CASES = int(os.environ.get("KAFKETTE_FUZZ_CASES", "300000"))

_INT_BITS = {"int8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32, "int64": 64}
_ALPHABET = "abcxyz-_.0123456789éß漢字🙂"


# ---------------------------------------------------------------------------------------------
# Valid messages to start from: random values for every field a version carries


def _present(f: FieldSpec, v: int) -> bool:
    return f.versions is not None and f.versions[0] <= v <= f.versions[1]


def _nullable(f: FieldSpec, v: int) -> bool:
    return f.nullable is not None and f.nullable[0] <= v <= f.nullable[1]


def _random_scalar(t: str, rnd: random.Random) -> Any:
    if t in _INT_BITS:
        bits = _INT_BITS[t]
        if t.startswith("u"):
            return rnd.randrange(2**bits)
        return rnd.choice([0, -1, 1, rnd.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1))])
    if t == "float64":
        return rnd.uniform(-1e9, 1e9)
    if t == "bool":
        return rnd.random() < 0.5
    if t == "string":
        return "".join(rnd.choice(_ALPHABET) for _ in range(rnd.randrange(12)))
    if t == "bytes":
        return rnd.randbytes(rnd.randrange(20))
    if t == "records":
        return rnd.randbytes(rnd.randrange(80))
    if t == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128))
    raise AssertionError(t)


def random_struct(spec: StructSpec, v: int, rnd: random.Random, depth: int = 0) -> Struct:
    kwargs = {}
    for f in spec.fields:
        if not _present(f, v):
            continue
        if _nullable(f, v) and rnd.random() < 0.2:
            kwargs[f.name] = None
            continue
        if f.type == "struct":
            assert f.struct is not None
            kwargs[f.name] = random_struct(f.struct, v, rnd, depth + 1)
        elif f.type == "array":
            item = f.item
            assert item is not None
            n = rnd.randrange(4 if depth < 2 else 2)
            if item.type == "struct":
                assert item.struct is not None
                kwargs[f.name] = [random_struct(item.struct, v, rnd, depth + 1) for _ in range(n)]
            else:
                kwargs[f.name] = [_random_scalar(item.type, rnd) for _ in range(n)]
        else:
            kwargs[f.name] = _random_scalar(f.type, rnd)
    assert spec.cls is not None
    return spec.cls(**kwargs)


def _all_versions() -> list[tuple[int, int]]:
    return [(int(k), v) for k, (lo, hi, _n) in SUPPORTED.items() for v in range(lo, hi + 1)]


def seed_frames(rnd: random.Random, per_version: int = 3) -> tuple[list[bytes], list[tuple[int, int, bytes]]]:
    """Valid request frames and (api key, version, frame) responses, without size prefixes."""
    requests, responses = [], []
    for key, v in _all_versions():
        req_t, resp_t = request_type(key), response_type(key)
        for _ in range(per_version):
            body = random_struct(req_t.root, v, rnd)
            client_id = None if rnd.random() < 0.2 else "fuzz-client"
            requests.append(encode_request(key, v, rnd.randrange(2**31), client_id, body)[4:])
            resp = random_struct(resp_t.root, v, rnd)
            responses.append((key, v, encode_response_bytes(key, v, rnd.randrange(2**31), resp)[4:]))
    return requests, responses


# ---------------------------------------------------------------------------------------------
# Mutations


_BOUNDARY_I32 = [-1, -2, 0, 1, 0x7FFFFFFF, -0x80000000, 0x10000, 0x7FFF, 0xFFFF]
_BOUNDARY_I16 = [-1, -2, 0, 1, 0x7FFF, -0x8000, 0x100]
_VARINTS = [b"\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80\x80\x80", b"\xff\xff\xff\xff\x7f",
            b"\xff\xff\xff\xff\x0f", b"\x80", b"\xff", b"\x00", b"\x01", b"\xfe\xff\xff\xff\x07"]


def mutate(frame: bytes, rnd: random.Random, pool: list[bytes]) -> bytes:
    """One random mutation (sometimes two) of ``frame``."""
    data = bytearray(frame)
    for _ in range(1 if rnd.random() < 0.8 else 2):
        kind = rnd.randrange(12)
        n = len(data)
        if kind == 0 and n:  # flip bits
            for _ in range(rnd.randrange(1, 5)):
                data[rnd.randrange(n)] ^= 1 << rnd.randrange(8)
        elif kind == 1 and n:  # truncate
            del data[rnd.randrange(n):]
        elif kind == 2:  # extend: trailing garbage
            data += rnd.randbytes(rnd.randrange(1, 16))
        elif kind == 3 and n >= 4:  # a random or boundary int32 length somewhere
            at = rnd.randrange(n - 3)
            val = rnd.choice(_BOUNDARY_I32) if rnd.random() < 0.7 else rnd.randrange(-(2**31), 2**31)
            struct.pack_into(">i", data, at, val)
        elif kind == 4 and n >= 2:  # a random or boundary int16 length somewhere
            at = rnd.randrange(n - 1)
            struct.pack_into(">h", data, at, rnd.choice(_BOUNDARY_I16))
        elif kind == 5:  # a bad or surprising varint somewhere
            at = rnd.randrange(n + 1)
            span = rnd.randrange(3)
            data[at:at + span] = rnd.choice(_VARINTS)
        elif kind == 6 and n >= 4:  # random api key and/or version
            if rnd.random() < 0.5:
                struct.pack_into(">h", data, 0, rnd.choice([rnd.randrange(-5, 80), rnd.randrange(-(2**15), 2**15)]))
            else:
                struct.pack_into(">h", data, 2, rnd.choice([rnd.randrange(-3, 20), rnd.randrange(-(2**15), 2**15)]))
        elif kind == 7 and n:  # delete a span
            at = rnd.randrange(n)
            del data[at:at + rnd.randrange(1, 9)]
        elif kind == 8:  # insert random bytes
            at = rnd.randrange(n + 1)
            data[at:at] = rnd.randbytes(rnd.randrange(1, 9))
        elif kind == 9 and n:  # overwrite a byte with a special value
            data[rnd.randrange(n)] = rnd.choice([0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE])
        elif kind == 10:  # splice with another frame
            other = rnd.choice(pool)
            data = bytearray(data[:rnd.randrange(n + 1)] + other[rnd.randrange(len(other) + 1):])
        elif kind == 11 and n:  # duplicate a span
            at = rnd.randrange(n)
            data[at:at] = data[at:at + rnd.randrange(1, 17)]
    return bytes(data)


def random_frame(rnd: random.Random) -> bytes:
    """Random bytes, sometimes behind a plausible header."""
    body = rnd.randbytes(rnd.randrange(0, 64))
    if rnd.random() < 0.6:
        key, v = rnd.choice(_all_versions())
        head = struct.pack(">hhi", key, v, rnd.randrange(2**31))
        if rnd.random() < 0.8:
            head += b"\x00\x01c"
            if request_type(key).is_flexible(v):
                head += b"\x00"
        return head + body
    return body


# ---------------------------------------------------------------------------------------------
# The bulk fuzz test


def _fail(what: str, frame: bytes, exc: BaseException) -> None:
    pytest.fail(f"{what}: {type(exc).__name__}: {exc} (seed {SEED}) on frame {frame.hex()}")


def test_fuzz_decoders_raise_only_protocol_errors() -> None:
    rnd = random.Random(SEED)
    requests, responses = seed_frames(rnd)
    pool = requests + [r[2] for r in responses]
    counts = {"requests": 0, "responses": 0, "frame_reader": 0, "decoded": 0, "protocol_errors": 0}
    started = time.perf_counter()
    n_requests = CASES * 6 // 10
    n_responses = CASES * 3 // 10
    n_frames = CASES - n_requests - n_responses

    for _ in range(n_requests):
        frame = random_frame(rnd) if rnd.random() < 0.05 else mutate(rnd.choice(requests), rnd, pool)
        counts["requests"] += 1
        try:
            decode_request(memoryview(bytearray(frame)) if rnd.random() < 0.5 else frame)
            counts["decoded"] += 1
        except ProtocolError:
            counts["protocol_errors"] += 1
        except Exception as e:  # noqa: BLE001 - the point of the test
            _fail("decode_request", frame, e)

    for _ in range(n_responses):
        key, v, frame = rnd.choice(responses)
        if rnd.random() < 0.1:  # the right bytes under the wrong version
            v = rnd.randrange(SUPPORTED[ApiKey(key)][0], SUPPORTED[ApiKey(key)][1] + 1)
        frame = mutate(frame, rnd, pool)
        counts["responses"] += 1
        try:
            decode_response(key, v, frame)
            counts["decoded"] += 1
        except ProtocolError:
            counts["protocol_errors"] += 1
        except Exception as e:  # noqa: BLE001
            _fail(f"decode_response api {key} v{v}", frame, e)

    for _ in range(n_frames):
        # a byte stream of size-prefixed frames, some with mutated prefixes, fed in random pieces
        stream = b"".join(struct.pack(">i", len(f)) + f for f in rnd.sample(requests, 3))
        stream = mutate(stream, rnd, pool) if rnd.random() < 0.7 else stream
        reader = FrameReader(max_bytes=rnd.choice([1 << 20, 200, 64]))
        counts["frame_reader"] += 1
        try:
            pos = 0
            while pos < len(stream):
                step = rnd.randrange(1, 40)
                for fr in reader.feed(stream[pos:pos + step]):
                    try:
                        decode_request(fr)
                    except ProtocolError:
                        pass
                pos += step
        except ProtocolError:
            counts["protocol_errors"] += 1
        except Exception as e:  # noqa: BLE001
            _fail("FrameReader", stream, e)

    elapsed = time.perf_counter() - started
    total = counts["requests"] + counts["responses"] + counts["frame_reader"]
    assert total >= 100_000 or CASES < 100_000
    # Both outcomes must be common, or the mutations are too timid (or too destructive) to probe.
    assert counts["decoded"] > total // 50 and counts["protocol_errors"] > total // 4, counts
    print(f"fuzz: {total} frames in {elapsed:.1f}s: {counts}")


# ---------------------------------------------------------------------------------------------
# Targeted bad input


def _frame(key: int, v: int, body: Struct, client_id: str | None = "c") -> bytes:
    return encode_request(key, v, 7, client_id, body)[4:]


def _metadata_v12() -> bytes:
    mt = request_type(ApiKey.METADATA)
    return _frame(ApiKey.METADATA, 12, mt(topics=[mt.MetadataRequestTopic(name="orders")]))


def test_every_truncation_of_valid_frames_is_a_protocol_error() -> None:
    rnd = random.Random(SEED)
    for key, v in _all_versions():
        for mt, kind in ((request_type(key), "request"), (response_type(key), "response")):
            msg = random_struct(mt.root, v, rnd)
            if kind == "request":
                frame, decode = _frame(key, v, msg), decode_request
            else:
                frame = encode_response_bytes(key, v, 1, msg)[4:]

                def decode(b: bytes, key: int = key, v: int = v) -> Any:
                    return decode_response(key, v, b)
            # Decoding reads left to right and must consume every byte, so no proper prefix of a
            # valid frame can decode.
            for cut in range(len(frame)):
                with pytest.raises(ProtocolError):
                    decode(frame[:cut])


def test_trailing_garbage_is_a_protocol_error() -> None:
    frame = _metadata_v12()
    for extra in (b"\x00", b"\xff" * 3, b"garbage"):
        with pytest.raises(ProtocolError, match="trailing"):
            decode_request(frame + extra)
    raw = encode_response_bytes(ApiKey.HEARTBEAT, 4, 3, response_type(ApiKey.HEARTBEAT)())[4:]
    with pytest.raises(ProtocolError, match="trailing"):
        decode_response(ApiKey.HEARTBEAT, 4, raw + b"\x00")


def test_unknown_api_key_and_version() -> None:
    body = struct.pack(">hhi", 9999, 0, 11) + b"\xff\xff"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(body)
    assert (info.value.api_key, info.value.correlation_id, info.value.error_code) == (9999, 11, 35)
    for key, version in ((-1, 0), (ApiKey.PRODUCE, 12), (ApiKey.FETCH, 18), (ApiKey.METADATA, -1), (74, 0)):
        with pytest.raises(UnsupportedVersionError):
            decode_request(struct.pack(">hhi", key, version, 1) + b"\x00\x00")
    with pytest.raises(KeyError):  # the client side asks for an api we never speak: a usage error
        decode_response(9999, 0, b"\x00\x00\x00\x01")


def test_header_shorter_than_fixed_part() -> None:
    for n in range(8):
        with pytest.raises(ProtocolError):
            decode_request(b"\x00\x03\x00\x0c\x00\x00\x00\x01"[:n])
    for n in range(4):
        with pytest.raises(ProtocolError):
            decode_response(ApiKey.METADATA, 12, b"\x00\x00\x00\x01"[:n])
    with pytest.raises(ProtocolError):  # flexible response header without its tagged-field count
        decode_response(ApiKey.METADATA, 12, b"\x00\x00\x00\x01")


def test_negative_and_oversize_size_prefixes() -> None:
    for prefix in (b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", struct.pack(">i", -7)):
        with pytest.raises(FrameTooLargeError):
            FrameReader().feed(prefix)
        with pytest.raises(FrameTooLargeError):
            frame_size(prefix)
    reader = FrameReader(max_bytes=1000)
    with pytest.raises(FrameTooLargeError):
        reader.feed(struct.pack(">i", 1001))
    assert FrameReader(max_bytes=1000).feed(struct.pack(">i", 1000)) == []  # at the limit: waits for data
    for short in (b"", b"\x00", b"\x00\x00\x01"):
        with pytest.raises(ProtocolError):
            frame_size(short)
    # a zero-size frame is framed fine and then fails to decode as a request
    (empty,) = FrameReader().feed(b"\x00\x00\x00\x00")
    with pytest.raises(ProtocolError):
        decode_request(empty)


def test_truncated_stream_yields_no_frame() -> None:
    frame = _metadata_v12()
    wire = struct.pack(">i", len(frame)) + frame
    reader = FrameReader()
    assert reader.feed(wire[:-1]) == [] and reader.pending == len(wire) - 1
    assert [bytes(f) for f in reader.feed(wire[-1:])] == [frame] and reader.pending == 0


def test_frames_are_separate_writable_buffers() -> None:
    frame = _metadata_v12()
    reader = FrameReader()
    a, b = reader.feed((struct.pack(">i", len(frame)) + frame) * 2)
    assert not a.readonly and a.obj is not b.obj
    a[0] ^= 0xFF
    assert bytes(b) == frame
    assert reader.feed(b"") == [] and reader.pending == 0


def test_overlong_varints_in_compact_fields() -> None:
    mt = request_type(ApiKey.METADATA)
    good = _metadata_v12()
    # header v2: api, version, correlation id, client id "c" (int16 length), no tags = 12 bytes
    head = good[:12]
    assert head.endswith(b"\x00") and good[12:13] == b"\x02"  # compact array of one topic
    for bad in (b"\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80\x80\x00", b"\xff\xff\xff\xff\x7f",
                b"\x80\x80\x80"):
        with pytest.raises(ProtocolError):
            decode_request(head + bad + good[13:])
    # overlong tagged-field count in the request header and in a body struct
    with pytest.raises(ProtocolError):
        decode_request(good[:11] + b"\xff\xff\xff\xff\xff\xff\x01" + good[12:])
    with pytest.raises(ProtocolError):
        mt.decode(b"\x01\x00\x00" + b"\xff" * 6, 12)
    # a 5-byte varint above 32 bits keeps its low 32 bits, as Kafka's ByteUtils.readUnsignedVarint;
    # a 6th byte is an error
    assert read_uvarint(b"\xff\xff\xff\xff\x1f", 0) == (0xFFFFFFFF, 5)
    assert read_uvarint(b"\xff\xff\xff\xff\x0f", 0) == (0xFFFFFFFF, 5)
    with pytest.raises(ProtocolError):
        read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0)


def test_invalid_utf8_strings() -> None:
    mt = request_type(ApiKey.METADATA)
    body = mt.encode(mt(topics=[mt.MetadataRequestTopic(name="ab")]), 12)
    at = body.index(b"ab")
    for bad in (b"\xff\xfe", b"\xc3\x28", b"\xed\xa0"):
        with pytest.raises(ProtocolError):
            mt.decode(body[:at] + bad + body[at + 2:], 12)
    # client id in the request header (always a classic int16 string)
    frame = _frame(ApiKey.METADATA, 12, mt(topics=[]), client_id="ok")
    at = frame.index(b"ok")
    with pytest.raises(ProtocolError):
        decode_request(frame[:at] + b"\xc3\x28" + frame[at + 2:])


def test_array_counts_larger_than_the_frame() -> None:
    # classic int32 counts
    mt = request_type(ApiKey.METADATA)
    body = mt.encode(mt(topics=[mt.MetadataRequestTopic(name="a")]), 4)
    for count in (2, 1000, 0x7FFFFFFF):
        with pytest.raises(ProtocolError):
            mt.decode(struct.pack(">i", count) + body[4:], 4)
    with pytest.raises(ProtocolError):  # -1 where the array is not nullable (v0)
        mt.decode(struct.pack(">i", -1), 0)
    # compact counts, and an int32 array inside
    rt = response_type(ApiKey.METADATA)
    with pytest.raises(ProtocolError):
        rt.decode(b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f", 12)
    lt = request_type(ApiKey.LEADER_AND_ISR)
    with pytest.raises(ProtocolError):
        lt.decode(b"\x00" * 4 + b"\x00" + b"\x00" * 4 + b"\x00" * 8 + b"\x00" + b"\x02" + b"\x02a" + b"\x00" * 16
                  + b"\x02" + b"\x00" * 16 + b"\xff\xff\x7f", 7)


def test_negative_lengths_on_non_nullable_fields() -> None:
    mt = request_type(ApiKey.METADATA)
    body = mt.encode(mt(topics=[mt.MetadataRequestTopic(name="a")]), 4)
    with pytest.raises(ProtocolError, match="null"):
        mt.decode(body[:4] + b"\xff\xff" + body[7:], 4)
    pt = request_type(ApiKey.PRODUCE)
    with pytest.raises(ProtocolError):
        pt.decode(b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01"
                  + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xfe", 8)


def test_tagged_field_size_must_match_its_content() -> None:
    mt = request_type(ApiKey.FETCH)
    msg = mt(cluster_id="abc", replica_id=-1, max_wait_ms=500, min_bytes=1)
    good = mt.encode(msg, 12)
    assert mt.decode(good, 12)[0].cluster_id == "abc"
    at = good.index(b"\x04abc")  # the compact string "abc"
    assert good[at - 3:at] == b"\x01\x00\x04"  # one tagged field: tag 0, 4 bytes
    for bad in (good[:at - 1] + b"\x05" + good[at:], good[:at - 1] + b"\x03" + good[at:],
                good[:at - 1] + b"\x7f" + good[at:]):
        with pytest.raises(ProtocolError):
            mt.decode(bad, 12)


def test_unknown_tagged_fields_are_skipped() -> None:
    mt = request_type(ApiKey.HEARTBEAT)
    good = mt.encode(mt(group_id="g", generation_id=3, member_id="m"), 4)
    assert good.endswith(b"\x00")
    with_tag = good[:-1] + b"\x01" + b"\x09" + b"\x03xyz"  # one unknown tag 9 of 3 bytes
    assert mt.decode(with_tag, 4)[0] == mt.decode(good, 4)[0]
    with pytest.raises(ProtocolError):
        mt.decode(good[:-1] + b"\x01\x09\x10xyz", 4)  # its size runs past the end


def test_api_versions_v3_request_with_broken_header_tags() -> None:
    req = new_request(ApiKey.API_VERSIONS, client_software_name="x", client_software_version="1")
    frame = _frame(ApiKey.API_VERSIONS, 3, req)
    decode_request(frame)
    assert frame[11] == 0  # header tagged-field count
    with pytest.raises(ProtocolError):
        decode_request(frame[:11] + b"\x01\x00\x7f" + frame[12:])


def test_every_message_type_survives_random_bytes() -> None:
    rnd = random.Random(SEED + 1)
    types: list[tuple[MessageType, int]] = []
    for key, v in _all_versions():
        types += [(request_type(key), v), (response_type(key), v)]
    for _ in range(20_000):
        mt, v = rnd.choice(types)
        data = rnd.randbytes(rnd.randrange(48))
        try:
            mt.decode(data, v)
        except ProtocolError:
            pass
        except Exception as e:  # noqa: BLE001
            _fail(f"{mt.name} v{v}", data, e)
