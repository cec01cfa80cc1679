"""Cross-check the schema codec against kio, an independent implementation of Kafka's protocol.

For every (api key, version) in the version table that kio models, requests and responses alike,
hypothesis builds random kio entities (unicode strings, nulls, uuids, empty and non-empty arrays,
non-default tagged fields) and each one goes both ways through whole frames, headers included:

* kio encodes, we decode, and the decoded fields equal kio's field by field;
* we encode the same values (built from scratch, and again from our decoded message) and the bytes
  are identical to kio's; kio decodes our bytes back to its original entity.

Byte equality holds because both implementations write tagged fields in ascending tag order and
omit those at their default value.

Field names are paired by position within each struct (tagged fields by tag), never by a hand-written
table; kio's only renames are time fields (``throttle_time`` for ``ThrottleTimeMs``, typed as
``timedelta``/``datetime``), which the pairing checks generically. kio models a zero uuid and a
``-1`` timestamp as ``None``; the comparison maps them to our values (``ZERO_UUID``, ``-1``).

Each (api, version) runs a few deterministic shapes besides the random examples (every array
non-empty and every tagged field non-default; every nullable leaf null; every nullable container
null), and the test asserts that every tagged field was seen non-default and every nullable field
was seen null at least once.

APIs kio does not model are checked elsewhere: the inter-broker ones against a small hand-written
encoder below, the versions Kafka 4 dropped from its schemas (Produce v0-2, Fetch v0-3, ...) against
Kafka 3.9.1's own classes in test_crosscheck_kafka_java.py.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import struct
import types
import typing
import uuid
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import tz_aware_from_i64

from protocol.api_versions import SUPPORTED, ApiKey
from protocol.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_bytes,
    request_type,
    response_type,
)
from protocol.schema import SPLICE_MIN, ZERO_UUID, FieldSpec, MessageType, Struct, StructSpec

RANDOM_EXAMPLES = 14
SHAPE_EXAMPLES = 2
MODES = ("full", "null_leaves", "null_containers")
TIME_TYPES = {"timedelta_i32", "timedelta_i64", "datetime_i64"}
INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MS = datetime.timedelta(milliseconds=1)


def _kio_schema(api_key: int, version: int, kind: str) -> type | None:
    load = load_request_schema if kind == "request" else load_response_schema
    try:
        return load(api_key, version)
    except KioIndexError:  # an api or version kio does not model
        return None


def _our_type(api_key: int, kind: str) -> MessageType:
    return request_type(api_key) if kind == "request" else response_type(api_key)


PAIRS = [(int(k), v, kind) for k, (lo, hi, _n) in SUPPORTED.items() for v in range(lo, hi + 1)
         for kind in ("request", "response") if _kio_schema(int(k), v, kind) is not None]
UNMODELLED = sorted({(int(k), v) for k, (lo, hi, _n) in SUPPORTED.items() for v in range(lo, hi + 1)
                     if _kio_schema(int(k), v, "request") is None})


# ---------------------------------------------------------------------------------------------
# Introspection: kio's dataclass fields paired with our FieldSpecs


def _present(f: FieldSpec, v: int) -> bool:
    return f.versions is not None and f.versions[0] <= v <= f.versions[1]


def _tagged(f: FieldSpec, v: int) -> bool:
    return f.tagged is not None and f.tagged[0] <= v <= f.tagged[1]


def _nullable(f: FieldSpec, v: int) -> bool:
    return f.nullable is not None and f.nullable[0] <= v <= f.nullable[1]


def _sub_spec(f: FieldSpec) -> StructSpec | None:
    return f.struct or (f.item.struct if f.item is not None else None)


def _strip_optional(tp: Any) -> tuple[bool, Any]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        assert len(args) == 1, tp
        return True, args[0]
    return False, tp


def _array_item(tp: Any) -> Any | None:
    if typing.get_origin(tp) is tuple:
        return typing.get_args(tp)[0]
    return None


_PAIRS_CACHE: dict[tuple[type, int, int], tuple[tuple[dataclasses.Field, FieldSpec], ...]] = {}


def _pairs(kcls: type, spec: StructSpec, v: int) -> tuple[tuple[dataclasses.Field, FieldSpec], ...]:
    """kio's fields of ``kcls`` paired with ours present in version ``v``: by position, tags by tag."""
    key = (kcls, id(spec), v)
    if key not in _PAIRS_CACHE:
        _PAIRS_CACHE[key] = _pair_fields(kcls, spec, v)
    return _PAIRS_CACHE[key]


def _pair_fields(kcls: type, spec: StructSpec, v: int) -> tuple[tuple[dataclasses.Field, FieldSpec], ...]:
    kfields = dataclasses.fields(kcls)
    ours = [f for f in spec.fields if _present(f, v)]
    k_plain = [f for f in kfields if "tag" not in f.metadata]
    k_tag = sorted((f for f in kfields if "tag" in f.metadata), key=lambda f: f.metadata["tag"])
    o_plain = [f for f in ours if not _tagged(f, v)]
    o_tag = sorted((f for f in ours if _tagged(f, v)), key=lambda f: f.tag)
    assert len(k_plain) == len(o_plain), (kcls, v, [f.name for f in k_plain], [f.name for f in o_plain])
    assert [f.metadata["tag"] for f in k_tag] == [f.tag for f in o_tag], (kcls, v)
    pairs = tuple(zip(k_plain, o_plain, strict=True)) + tuple(zip(k_tag, o_tag, strict=True))
    for kf, of in pairs:
        kt = kf.metadata.get("kafka_type")
        expected = of.name[:-3] if kt in TIME_TYPES and of.name.endswith("_ms") else of.name
        assert kf.name == expected, (kcls, kf.name, of.name)  # kio drops "_ms" from time-typed fields
    return pairs


# ---------------------------------------------------------------------------------------------
# Values: kio entities and our messages, both as plain nested dicts keyed by our field names


def _kio_leaf(value: Any, kt: str | None) -> Any:
    if value is None:
        if kt == "uuid":
            return ZERO_UUID
        if kt == "datetime_i64":
            return -1
        return None
    if kt in ("timedelta_i32", "timedelta_i64"):
        return value // MS
    if kt == "datetime_i64":
        return (value - EPOCH) // MS
    if isinstance(value, ErrorCode):
        return int(value.value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    return value


def kio_plain(entity: Any, spec: StructSpec, v: int) -> dict[str, Any]:
    out = {}
    for kf, of in _pairs(type(entity), spec, v):
        out[of.name] = _kio_value(getattr(entity, kf.name), kf, of, v)
    return out


def _kio_value(value: Any, kf: dataclasses.Field, of: FieldSpec, v: int) -> Any:
    kt = kf.metadata.get("kafka_type")
    sub = _sub_spec(of)
    if isinstance(value, tuple):
        if sub is not None:
            return [kio_plain(x, sub, v) for x in value]
        return [_kio_leaf(x, kt) for x in value]
    if dataclasses.is_dataclass(value):
        assert sub is not None
        return kio_plain(value, sub, v)
    return _kio_leaf(value, kt)


def ours_plain(obj: Struct, spec: StructSpec, v: int) -> dict[str, Any]:
    return {f.name: _ours_value(getattr(obj, f.name), f, v) for f in spec.fields if _present(f, v)}


def _ours_value(value: Any, f: FieldSpec, v: int) -> Any:
    sub = _sub_spec(f)
    if value is None:
        return None
    if isinstance(value, list):
        return [ours_plain(x, sub, v) if sub is not None else _ours_leaf(x) for x in value]
    if isinstance(value, Struct):
        assert sub is not None
        return ours_plain(value, sub, v)
    return _ours_leaf(value)


def _ours_leaf(value: Any) -> Any:
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def build_ours(plain: dict[str, Any], spec: StructSpec) -> Struct:
    """One of our messages built from plain values (fields a version lacks keep their defaults)."""
    kwargs = {}
    by_name = {f.name: f for f in spec.fields}
    for name, value in plain.items():
        f = by_name[name]
        sub = _sub_spec(f)
        if sub is not None and isinstance(value, list):
            value = [build_ours(x, sub) for x in value]
        elif sub is not None and isinstance(value, dict):
            value = build_ours(value, sub)
        kwargs[name] = value
    assert spec.cls is not None
    return spec.cls(**kwargs)


def _our_default(f: FieldSpec, v: int) -> Any:
    if f.type == "struct":
        assert f.struct is not None and f.struct.cls is not None
        return ours_plain(f.struct.cls(), f.struct, v)
    return f.default_spec


def kio_bytes(writer: Callable[[Any, Any], None], entity: Any) -> bytes:
    buf = io.BytesIO()
    writer(buf, entity)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# Strategies built from kio's dataclasses


def _leaf_st(kt: str | None) -> st.SearchStrategy[Any]:
    if kt == "error_code":
        return st.sampled_from(list(ErrorCode))
    if kt == "timedelta_i32":
        return st.integers(-(2**31), 2**31 - 1).map(lambda ms: datetime.timedelta(milliseconds=ms))
    if kt == "timedelta_i64":
        # kio converts through float seconds, exact to about 2**52 microseconds; stay inside that.
        return st.integers(-(2**42), 2**42).map(lambda ms: datetime.timedelta(milliseconds=ms))
    if kt == "datetime_i64":
        return st.integers(0, 2**42).map(tz_aware_from_i64)
    if kt == "uuid":
        return st.uuids().filter(lambda u: u.int != 0)  # kio reads the zero uuid as None
    if kt == "string":
        return st.text(max_size=10)
    if kt in ("bytes", "records"):
        return st.binary(max_size=24)
    if kt == "bool":
        return st.booleans()
    if kt == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kt in INT_RANGES:
        bits = INT_RANGES[kt]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    raise AssertionError(f"no strategy for kafka type {kt!r}")


@cache
def entity_st(kcls: type, mode: str) -> st.SearchStrategy[Any]:
    """Entities of ``kcls``. ``mode``: 'random', or one of the deterministic shapes in MODES."""
    return st.builds(kcls, **{f.name: _field_st(f, mode) for f in dataclasses.fields(kcls)})


def _field_st(f: dataclasses.Field, mode: str) -> st.SearchStrategy[Any]:
    kt = f.metadata.get("kafka_type")
    optional, tp = _strip_optional(f.type)
    item = _array_item(tp)
    container = True
    if item is not None:
        item_optional, item = _strip_optional(item)
        elem = entity_st(item, mode) if dataclasses.is_dataclass(item) else _leaf_st(kt)
        if item_optional and mode == "random":
            elem = st.none() | elem
        base = (st.lists(elem, max_size=3) if mode == "random" else st.lists(elem, min_size=1, max_size=2)).map(tuple)
    elif dataclasses.is_dataclass(tp):
        base = entity_st(tp, mode)
    else:
        base = _leaf_st(kt)
        container = False
    if not optional:
        s = base
    elif mode == "random":
        s = st.none() | base
    elif mode == "full":
        s = base
    elif mode == "null_leaves":
        s = base if container else st.none()
    else:
        s = st.none() if container else base
    if mode == "full" and "tag" in f.metadata and f.default is not dataclasses.MISSING:
        default = f.default
        s = s.filter(lambda x: x != default)
    return s


# ---------------------------------------------------------------------------------------------
# Coverage of tagged and nullable fields


def _walk_required(spec: StructSpec, v: int, seen: frozenset[str] = frozenset()) -> Iterator[tuple[str, str, str]]:
    if spec.name in seen:
        return
    for f in spec.fields:
        if not _present(f, v):
            continue
        if _tagged(f, v):
            yield ("tagged", spec.name, f.name)
        if _nullable(f, v):
            yield ("null", spec.name, f.name)
        sub = _sub_spec(f)
        if sub is not None:
            yield from _walk_required(sub, v, seen | {spec.name})


def _walk_seen(plain: dict[str, Any], spec: StructSpec, v: int, out: set[tuple[str, str, str]]) -> None:
    for f in spec.fields:
        if not _present(f, v):
            continue
        value = plain[f.name]
        if value is None and _nullable(f, v):
            out.add(("null", spec.name, f.name))
        if _tagged(f, v) and value != _our_default(f, v):
            out.add(("tagged", spec.name, f.name))
        sub = _sub_spec(f)
        if sub is None or value is None:
            continue
        for x in value if isinstance(value, list) else [value]:
            _walk_seen(x, sub, v, out)


# ---------------------------------------------------------------------------------------------
# The cross-check


def _check_request(api_key: int, v: int, kcls: type, entity: Any, cid: int, client_id: str | None,
                   seen: set[tuple[str, str, str]]) -> None:
    mt = request_type(api_key)
    hcls = kcls.__header_schema__
    header = hcls(request_api_key=api_key, request_api_version=v, correlation_id=cid, client_id=client_id)
    body = kio_bytes(entity_writer(kcls), entity)
    frame = kio_bytes(entity_writer(hcls), header) + body
    expected = kio_plain(entity, mt.root, v)

    # kio encodes, we decode
    req = decode_request(memoryview(bytearray(frame)))
    assert (req.header.api_key, req.header.api_version, req.header.correlation_id, req.header.client_id) == (
        api_key, v, cid, client_id)
    got = ours_plain(req.body, mt.root, v)
    assert got == expected

    # we encode (from scratch, and the decoded message again): the same bytes as kio
    built = build_ours(expected, mt.root)
    ours = encode_request(api_key, v, cid, client_id, built)
    assert struct.unpack(">i", ours[:4])[0] == len(ours) - 4
    assert ours[4:] == frame
    assert encode_request(api_key, v, cid, client_id, req.body)[4:] == frame
    assert mt.encode(built, v) == body

    # kio decodes ours
    back, size = entity_reader(kcls)(ours, 4 + len(frame) - len(body))
    assert size == len(body)
    assert kio_plain(back, mt.root, v) == expected
    _walk_seen(got, mt.root, v, seen)


def _check_response(api_key: int, v: int, kcls: type, entity: Any, cid: int,
                    seen: set[tuple[str, str, str]]) -> None:
    mt = response_type(api_key)
    hcls = kcls.__header_schema__
    header = hcls(correlation_id=cid)
    body = kio_bytes(entity_writer(kcls), entity)
    frame = kio_bytes(entity_writer(hcls), header) + body
    expected = kio_plain(entity, mt.root, v)

    got_cid, decoded = decode_response(api_key, v, memoryview(bytearray(frame)))
    assert got_cid == cid
    got = ours_plain(decoded, mt.root, v)
    assert got == expected

    built = build_ours(expected, mt.root)
    ours = encode_response_bytes(api_key, v, cid, built)
    assert ours[4:] == frame
    assert encode_response_bytes(api_key, v, cid, decoded)[4:] == frame
    assert mt.encode(built, v) == body

    back, size = entity_reader(kcls)(ours, 4 + len(frame) - len(body))
    assert size == len(body)
    assert kio_plain(back, mt.root, v) == expected
    _walk_seen(got, mt.root, v, seen)


_SETTINGS = dict(deadline=None, database=None, derandomize=True, print_blob=False,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.filter_too_much, HealthCheck.large_base_example])


def _kio_floor(api_key: int) -> int | None:
    """The lowest version kio models of ``api_key``, None when it models none below 20."""
    return next((v for v in range(20) if _kio_schema(api_key, v, "request") is not None), None)


# kafkette's own schemas (protocol/schemas), for the inter-broker APIs spoken only between its brokers.
KAFKETTE_ONLY_SCHEMAS = {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                         ApiKey.CONTROLLED_SHUTDOWN}


def test_pairs_cover_everything_kio_models() -> None:
    # Everything we advertise but the versions Kafka 4 dropped from its schemas (KIP-896: below kio's
    # lowest version of the API), which test_crosscheck_kafka_java.py checks against Kafka 3.9.1's own
    # classes, and the kafkette-only inter-broker schemas, tested further down.
    total = sum(hi - lo + 1 for lo, hi, _n in SUPPORTED.values())
    for api_key, version in UNMODELLED:
        floor = _kio_floor(api_key)
        assert api_key in KAFKETTE_ONLY_SCHEMAS or (floor is not None and version < floor), (api_key, version)
    assert {(0, 0), (0, 1), (0, 2), (1, 0), (1, 3), (2, 0), (8, 0), (8, 1), (9, 0), (19, 1), (20, 0),
            (35, 0)} <= set(UNMODELLED)
    assert len(PAIRS) == 2 * (total - len(UNMODELLED))


@pytest.mark.parametrize(("api_key", "version", "kind"), PAIRS,
                         ids=[f"{ApiKey(k).name}-v{v}-{kind}" for k, v, kind in PAIRS])
def test_kio_crosscheck(api_key: int, version: int, kind: str) -> None:
    kcls = _kio_schema(api_key, version, kind)
    assert kcls is not None
    mt = _our_type(api_key, kind)
    seen: set[tuple[str, str, str]] = set()
    cids = st.integers(-(2**31), 2**31 - 1)

    def run(mode: str, n: int) -> None:
        if kind == "request":
            @settings(max_examples=n, **_SETTINGS)
            @given(entity_st(kcls, mode), cids, st.none() | st.text(max_size=8))
            def check_request(entity: Any, cid: int, client_id: str | None) -> None:
                _check_request(api_key, version, kcls, entity, cid, client_id, seen)

            check_request()
        else:
            @settings(max_examples=n, **_SETTINGS)
            @given(entity_st(kcls, mode), cids)
            def check_response(entity: Any, cid: int) -> None:
                _check_response(api_key, version, kcls, entity, cid, seen)

            check_response()

    run("random", RANDOM_EXAMPLES)
    for mode in MODES:
        run(mode, SHAPE_EXAMPLES)
    required = set(_walk_required(mt.root, version))
    assert required <= seen, f"never exercised: {sorted(required - seen)}"


# ---------------------------------------------------------------------------------------------
# Large records are spliced into the output rather than copied; the bytes must not change


@pytest.mark.parametrize("version", [3, 9, 11])
def test_large_produce_records_match_kio(version: int) -> None:
    kcls = load_request_schema(ApiKey.PRODUCE, version)
    mod = importlib.import_module(kcls.__module__)
    sizes = [SPLICE_MIN - 1, SPLICE_MIN, 3 * SPLICE_MIN + 5, 17, 200_000]
    blobs = [bytes([i]) * n for i, n in enumerate(sizes)]
    entity = kcls(transactional_id="tx", acks=-1, timeout=datetime.timedelta(seconds=30), topic_data=(
        mod.TopicProduceData(name="big", partition_data=tuple(
            mod.PartitionProduceData(index=i, records=b) for i, b in enumerate(blobs))),))
    body = kio_bytes(entity_writer(kcls), entity)
    mt = request_type(ApiKey.PRODUCE)
    msg = build_ours(kio_plain(entity, mt.root, version), mt.root)
    assert mt.encode(msg, version) == body
    frame = encode_request(ApiKey.PRODUCE, version, 5, "c", msg)
    assert frame.endswith(body) and struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    req = decode_request(memoryview(bytearray(frame[4:])))
    assert [bytes(p.records) for p in req.body.topic_data[0].partition_data] == blobs


def test_large_fetch_records_are_spliced_not_copied() -> None:
    kcls = load_response_schema(ApiKey.FETCH, 12)
    mt = response_type(ApiKey.FETCH)
    big = memoryview(bytearray(b"r" * (SPLICE_MIN * 2)))
    small = b"s" * 10
    msg = mt(responses=[mt.FetchableTopicResponse(topic="t", partitions=[
        mt.PartitionData(partition_index=0, high_watermark=5, records=big),
        mt.PartitionData(partition_index=1, high_watermark=5, records=small)])])
    parts = encode_response(ApiKey.FETCH, 12, 9, msg)
    assert any(p is big for p in parts)  # handed to the transport as is
    wire = b"".join(bytes(p) for p in parts)  # type: ignore[arg-type]
    assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4
    assert wire == encode_response_bytes(ApiKey.FETCH, 12, 9, msg)
    back, _ = entity_reader(kcls)(wire, 4 + 4 + 1)  # size, correlation id, header tags
    assert [bytes(p.records) for p in back.responses[0].partitions] == [bytes(big), small]


# ---------------------------------------------------------------------------------------------
# Produce v0-2: Kafka 4 dropped them from its schemas (and kio with it). A v0-2 request body is a
# v3 body without the leading TransactionalId; a v2 response is laid out exactly like v3.


@settings(max_examples=20, **_SETTINGS)
@given(entity_st(load_request_schema(0, 3), "random"), st.sampled_from([0, 1, 2]))
def test_produce_v0_2_requests_against_kio_v3(entity: Any, version: int) -> None:
    kcls = load_request_schema(0, 3)
    entity = dataclasses.replace(entity, transactional_id=None)
    body = kio_bytes(entity_writer(kcls), entity)
    assert body[:2] == b"\xff\xff"
    mt = request_type(ApiKey.PRODUCE)
    msg, _ = mt.decode(memoryview(bytearray(body[2:])), version)
    expected = kio_plain(entity, mt.root, 3)
    del expected["transactional_id"]
    assert ours_plain(msg, mt.root, version) == expected
    assert mt.encode(msg, version) == body[2:]


@settings(max_examples=20, **_SETTINGS)
@given(entity_st(load_response_schema(0, 3), "random"))
def test_produce_v2_response_against_kio_v3(entity: Any) -> None:
    kcls = load_response_schema(0, 3)
    body = kio_bytes(entity_writer(kcls), entity)
    mt = response_type(ApiKey.PRODUCE)
    msg, _ = mt.decode(body, 2)
    assert ours_plain(msg, mt.root, 2) == kio_plain(entity, mt.root, 3)
    assert mt.encode(msg, 2) == body


# ---------------------------------------------------------------------------------------------
# An independent, minimal hand-written encoder for what kio does not model


def i8(x: int) -> bytes:
    return struct.pack(">b", x)


def i16(x: int) -> bytes:
    return struct.pack(">h", x)


def i32(x: int) -> bytes:
    return struct.pack(">i", x)


def i64(x: int) -> bytes:
    return struct.pack(">q", x)


def boolean(x: bool) -> bytes:
    return b"\x01" if x else b"\x00"


def uvarint(n: int) -> bytes:
    out = b""
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out += bytes([low | 0x80])
        else:
            return out + bytes([low])


def cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def carr(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def cints(xs: list[int]) -> bytes:
    return carr([i32(x) for x in xs])


NO_TAGS = b"\x00"


def test_produce_v0_v1_responses_against_hand_encoding() -> None:
    mt = response_type(ApiKey.PRODUCE)
    partitions = [(0, 0, 1234), (7, 6, -1)]  # index, error, base offset
    parts = b"".join(i32(p) + i16(e) + i64(o) for p, e, o in partitions)
    name = "ordérs".encode()
    v0 = i32(1) + i16(len(name)) + name + i32(len(partitions)) + parts
    for version, wire in ((0, v0), (1, v0 + i32(250))):
        msg, _ = mt.decode(wire, version)
        assert msg.throttle_time_ms == (250 if version else 0)
        topic = msg.responses[0]
        assert topic.name == "ordérs"
        assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == partitions
        assert mt.encode(msg, version) == wire


def test_leader_and_isr_v7_against_hand_encoding() -> None:
    topic_id = uuid.UUID("8c9a6f1e-3b1d-4c55-9a55-2f1f0c3b8e11")

    def pstate(p: int, leader: int, isr: list[int], replicas: list[int], is_new: bool) -> bytes:
        return (i32(p) + i32(3) + i32(leader) + i32(12) + cints(isr) + i32(40) + cints(replicas)
                + cints([]) + cints([3]) + boolean(is_new) + i8(0) + NO_TAGS)

    wire = (i32(1) + boolean(False) + i32(3) + i64(4294967296 + 17) + i8(1)
            + carr([cstr("payments") + topic_id.bytes
                    + carr([pstate(0, 1, [1, 2], [1, 2, 3], False), pstate(1, 2, [2], [2, 3, 1], True)])
                    + NO_TAGS])
            + carr([i32(1) + cstr("broker-1.internal") + i32(9093) + NO_TAGS,
                    i32(2) + cstr("broker-2.internal") + i32(9093) + NO_TAGS])
            + NO_TAGS)
    mt = request_type(ApiKey.LEADER_AND_ISR)
    msg, _ = mt.decode(wire, 7)
    assert (msg.controller_id, msg.controller_epoch, msg.broker_epoch, msg.type) == (1, 3, 4294967313, 1)
    topic = msg.topic_states[0]
    assert topic.topic_name == "payments" and topic.topic_id == topic_id
    p0, p1 = topic.partition_states
    assert (p0.leader, p0.leader_epoch, p0.isr, p0.partition_epoch, p0.replicas) == (1, 12, [1, 2], 40, [1, 2, 3])
    assert p0.removing_replicas == [3] and p0.adding_replicas == [] and p1.is_new and not p0.is_new
    assert [(b.broker_id, b.host_name, b.port) for b in msg.live_leaders] == [
        (1, "broker-1.internal", 9093), (2, "broker-2.internal", 9093)]
    assert mt.encode(msg, 7) == wire
    # whole frames: header v2 (flexible), then the body
    frame = encode_request(ApiKey.LEADER_AND_ISR, 7, 99, "controller-1", msg)
    assert frame[4:] == i16(4) + i16(7) + i32(99) + i16(12) + b"controller-1" + NO_TAGS + wire
    assert decode_request(frame[4:]).body == msg

    resp = i16(0) + carr([topic_id.bytes + carr([i32(0) + i16(0) + NO_TAGS, i32(1) + i16(6) + NO_TAGS]) + NO_TAGS]) + NO_TAGS
    rt = response_type(ApiKey.LEADER_AND_ISR)
    rmsg, _ = rt.decode(resp, 7)
    assert [(e.partition_index, e.error_code) for e in rmsg.topics[0].partition_errors] == [(0, 0), (1, 6)]
    assert rt.encode(rmsg, 7) == resp
    assert encode_response_bytes(ApiKey.LEADER_AND_ISR, 7, 99, rmsg)[4:] == i32(99) + NO_TAGS + resp


def test_stop_replica_v4_against_hand_encoding() -> None:
    wire = (i32(1) + boolean(False) + i32(3) + i64(-1)
            + carr([cstr("logs") + carr([i32(0) + i32(-2) + boolean(True) + NO_TAGS,
                                         i32(5) + i32(8) + boolean(False) + NO_TAGS]) + NO_TAGS])
            + NO_TAGS)
    mt = request_type(ApiKey.STOP_REPLICA)
    msg, _ = mt.decode(wire, 4)
    parts = msg.topic_states[0].partition_states
    assert [(p.partition_index, p.leader_epoch, p.delete_partition) for p in parts] == [(0, -2, True), (5, 8, False)]
    assert mt.encode(msg, 4) == wire
    resp = i16(0) + carr([cstr("logs") + i32(0) + i16(0) + NO_TAGS, cstr("logs") + i32(5) + i16(3) + NO_TAGS]) + NO_TAGS
    rt = response_type(ApiKey.STOP_REPLICA)
    rmsg, _ = rt.decode(resp, 4)
    assert [(e.topic_name, e.partition_index, e.error_code) for e in rmsg.partition_errors] == [
        ("logs", 0, 0), ("logs", 5, 3)]
    assert rt.encode(rmsg, 4) == resp


def test_update_metadata_v8_against_hand_encoding() -> None:
    tid = uuid.UUID(int=0x1234_5678_9ABC_DEF0_0FED_CBA9_8765_4321)
    state = i32(2) + i32(3) + i32(-2) + i32(9) + cints([1]) + i32(77) + cints([1, 2]) + cints([2]) + NO_TAGS
    broker = (i32(1) + carr([i32(9092) + cstr("b1") + cstr("PLAINTEXT") + i16(0) + NO_TAGS,
                             i32(9093) + cstr("b1") + cstr("INTERNAL") + i16(0) + NO_TAGS])
              + cstr(None) + NO_TAGS)
    broker2 = i32(2) + carr([]) + cstr("rack-b") + NO_TAGS
    # Type is Kafka's tagged field 0: absent at its default (0), else in the top-level tagged fields.
    body = (i32(1) + boolean(False) + i32(3) + i64(5)
            + carr([cstr("événements") + tid.bytes + carr([state]) + NO_TAGS])
            + carr([broker, broker2]))
    wire = body + NO_TAGS
    mt = request_type(ApiKey.UPDATE_METADATA)
    full, _ = mt.decode(body + bytes([1, 0, 1]) + i8(2), 8)
    assert full.type == 2 and mt.encode(full, 8) == body + bytes([1, 0, 1]) + i8(2)
    msg, _ = mt.decode(wire, 8)
    assert msg.type == 0
    t = msg.topic_states[0]
    assert t.topic_name == "événements" and t.topic_id == tid
    p = t.partition_states[0]
    assert (p.partition_index, p.leader, p.zk_version, p.offline_replicas) == (2, -2, 77, [2])
    b1, b2 = msg.live_brokers
    assert b1.rack is None and b2.rack == "rack-b" and b2.endpoints == []
    assert [(e.port, e.listener) for e in b1.endpoints] == [(9092, "PLAINTEXT"), (9093, "INTERNAL")]
    assert mt.encode(msg, 8) == wire
    rt = response_type(ApiKey.UPDATE_METADATA)
    assert rt.decode(i16(0) + NO_TAGS, 8)[0].error_code == 0
    assert rt.encode(rt(error_code=38), 8) == i16(38) + NO_TAGS


def test_controlled_shutdown_v3_against_hand_encoding() -> None:
    mt = request_type(ApiKey.CONTROLLED_SHUTDOWN)
    wire = i32(2) + i64(81604378700) + NO_TAGS
    msg, _ = mt.decode(wire, 3)
    assert (msg.broker_id, msg.broker_epoch) == (2, 81604378700)
    assert mt.encode(msg, 3) == wire
    rt = response_type(ApiKey.CONTROLLED_SHUTDOWN)
    resp = i16(0) + carr([cstr("payments") + i32(1) + NO_TAGS, cstr("payments") + i32(4) + NO_TAGS]) + NO_TAGS
    rmsg, _ = rt.decode(resp, 3)
    assert [(r.topic_name, r.partition_index) for r in rmsg.remaining_partitions] == [("payments", 1), ("payments", 4)]
    assert rt.encode(rmsg, 3) == resp
