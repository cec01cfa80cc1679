"""The compiled codec against the generated one: the same produce request, the same produce and fetch
answers, or None where the generated codec must decide (and then it does, with its own errors)."""

from __future__ import annotations

import random
import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.kafka_apis import KafkaApis
from protocol import compiled_wire
from protocol.exceptions import ProtocolError
from protocol.messages import encode_response, request_type, response_type
from protocol.schema import SPLICE_MIN, FileRegion, FileRegions, Output

REQUEST = request_type(0)
RESPONSE = response_type(0)
VERSIONS = range(3, 12)

names = st.text(min_size=0, max_size=20)
records = st.one_of(st.none(), st.binary(max_size=300))
partitions = st.builds(lambda i, r: REQUEST.PartitionProduceData(index=i, records=r),
                       st.integers(-2**31, 2**31 - 1), records)
topics = st.builds(lambda n, ps: REQUEST.TopicProduceData(name=n, partition_data=ps), names,
                   st.lists(partitions, max_size=4))
requests = st.builds(lambda tid, acks, timeout, ts: REQUEST(transactional_id=tid, acks=acks, timeout_ms=timeout,
                                                            topic_data=ts),
                     st.one_of(st.none(), names), st.integers(-2**15, 2**15 - 1), st.integers(-2**31, 2**31 - 1),
                     st.lists(topics, max_size=4))


def test_the_compiled_codec_is_built() -> None:
    # `make install` builds it (setup.py); without it every test here would compare None with nothing.
    assert compiled_wire.COMPILED


def request_frame(body: Any, version: int, prefix: bytes = b"\x07junk", trailer: bytes = b"") -> bytearray:
    out = Output()
    REQUEST.encode_into(body, version, out)
    return bytearray(prefix + b"".join(bytes(p) for p in out.parts()) + trailer)


def python_decode(frame: bytearray, pos: int, version: int) -> tuple[Any, int] | Exception:
    try:
        return REQUEST.decode(memoryview(frame), version, pos, exact=False)
    except Exception as e:  # noqa: BLE001 - what the generated decoder raises is the expected answer
        return e


def agree(frame: bytearray, pos: int, version: int) -> Any:
    """The compiled decoder gives the generated decoder's answer, or None; returns its answer."""
    compiled = compiled_wire.decode_produce(memoryview(frame), pos, version)
    expected = python_decode(frame, pos, version)
    if compiled is not None:
        assert not isinstance(expected, Exception), f"compiled decoded what the generated decoder refuses: {expected!r}"
        assert compiled == expected
    return compiled


def damage(frame: bytearray, data: st.DataObject) -> bytearray:
    """``frame`` (after its 5-byte prefix) cut, bit-flipped or lengthened, or random bytes instead."""
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    damaged = bytearray(frame)
    kind = data.draw(st.sampled_from(["cut", "flip", "insert", "random"]))
    if kind == "cut":
        return damaged[:rng.randrange(5, len(damaged) + 1)]
    if kind == "flip":
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(5, len(damaged))
            damaged[i] ^= 1 << rng.randrange(8)
    elif kind == "insert":
        i = rng.randrange(5, len(damaged) + 1)
        damaged[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    else:
        damaged = bytearray(b"\x07junk" + bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))))
    return damaged


@given(requests, st.sampled_from(VERSIONS), st.binary(max_size=8))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_well_formed_requests_decode_alike(body: Any, version: int, trailer: bytes) -> None:
    frame = request_frame(body, version, trailer=trailer)
    compiled = agree(frame, 5, version)
    assert compiled is not None  # the common shape is taken by the compiled decoder
    decoded, end = compiled
    assert end == len(frame) - len(trailer)
    for topic in decoded.topic_data:
        for p in topic.partition_data:
            if p.records is not None:
                # a view of the frame, writable like it (stamping writes the batch header in place)
                assert isinstance(p.records, memoryview) and not p.records.readonly
                assert p.records.obj is frame


@given(requests, st.sampled_from(VERSIONS), st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_damaged_requests_are_left_to_the_generated_decoder(body: Any, version: int, data: st.DataObject) -> None:
    agree(damage(request_frame(body, version), data), 5, version)


def test_a_tagged_field_goes_to_the_generated_decoder() -> None:
    body = REQUEST(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        REQUEST.TopicProduceData(name="t", partition_data=[REQUEST.PartitionProduceData(index=0, records=b"x")])])
    frame = request_frame(body, 9, prefix=b"")
    # The request's own tagged fields: one unknown tag (1) of two bytes, which Kafka skips.
    tagged = frame[:-1] + bytearray([1, 1, 2, 0xAB, 0xCD])
    assert compiled_wire.decode_produce(memoryview(tagged), 0, 9) is None
    decoded, _ = REQUEST.decode(memoryview(tagged), 9)
    assert decoded == REQUEST.decode(memoryview(frame), 9)[0]


def test_versions_outside_the_compiled_range_are_left_alone() -> None:
    body = REQUEST(transactional_id=None, acks=1, timeout_ms=1, topic_data=[])
    for version in (0, 1, 2):
        out = Output()
        REQUEST.encode_into(body, version, out)
        assert compiled_wire.decode_produce(memoryview(bytearray(b"".join(bytes(p) for p in out.parts()))), 0, version) is None
    assert compiled_wire.decode_produce(memoryview(bytearray(8)), 0, 12) is None


def test_broker_decode_uses_it_and_refuses_alike() -> None:
    """KafkaApis.decode: a whole frame through the compiled path; a null topic name still refused."""
    body = REQUEST(transactional_id="tx", acks=-1, timeout_ms=5, topic_data=[
        REQUEST.TopicProduceData(name="t", partition_data=[REQUEST.PartitionProduceData(index=3, records=b"abc")])])
    header = struct.pack(">hhih", 0, 9, 42, 3) + b"cli" + b"\x00"
    frame = request_frame(body, 9, prefix=header)
    request = KafkaApis.decode(memoryview(frame))
    assert request.header.correlation_id == 42 and request.body == body
    null_name = bytearray(header) + bytearray([3, ord("t"), ord("x"), 0, 0xFF, 0xFF, 0, 0, 0, 5, 2, 0, 1, 0, 0])
    with pytest.raises(ProtocolError, match="Name is null"):
        KafkaApis.decode(memoryview(null_name))


# -- answers ---------------------------------------------------------------------------------------

i64 = st.integers(-2**63, 2**63 - 1)
partition_answers = st.builds(
    lambda i, e, b, t, s: RESPONSE.PartitionProduceResponse(index=i, error_code=e, base_offset=b,
                                                            log_append_time_ms=t, log_start_offset=s),
    st.integers(-2**31, 2**31 - 1), st.integers(-2**15, 2**15 - 1), i64, i64, i64)
topic_answers = st.builds(lambda n, ps: RESPONSE.TopicProduceResponse(name=n, partition_responses=ps), names,
                          st.lists(partition_answers, max_size=4))
answers = st.builds(lambda ts, throttle: RESPONSE(responses=ts, throttle_time_ms=throttle),
                    st.lists(topic_answers, max_size=4), st.integers(-2**31, 2**31 - 1))


def python_answer(version: int, correlation_id: int, body: Any) -> bytes:
    return b"".join(bytes(p) for p in encode_response(0, version, correlation_id, body))


@given(answers, st.sampled_from(VERSIONS), st.integers(-2**31, 2**31 - 1))
@settings(max_examples=300, deadline=None)
def test_common_answers_encode_alike(body: Any, version: int, correlation_id: int) -> None:
    assert compiled_wire.encode_produce_response(version, correlation_id, body) == python_answer(
        version, correlation_id, body)


def _answer() -> Any:
    return RESPONSE(responses=[RESPONSE.TopicProduceResponse(name="t", partition_responses=[
        RESPONSE.PartitionProduceResponse(index=0, error_code=0, base_offset=10)])])


@pytest.mark.parametrize("version", VERSIONS)
def test_uncommon_answers_are_left_to_the_generated_encoder(version: int) -> None:
    def part(body: Any) -> Any:
        return body.responses[0].partition_responses[0]

    changes = {
        "record errors": lambda b: setattr(part(b), "record_errors", [
            RESPONSE.BatchIndexAndErrorMessage(batch_index=1, batch_index_error_message="bad")]),
        "error message": lambda b: setattr(part(b), "error_message", "bad"),
        "current leader": lambda b: setattr(part(b).current_leader, "leader_id", 2),
        "node endpoints": lambda b: setattr(b, "node_endpoints", [
            RESPONSE.NodeEndpoint(node_id=2, host="h", port=1, rack=None)]),
    }
    carried = {"record errors": 8, "error message": 8, "current leader": 10, "node endpoints": 10}
    for what, change in changes.items():
        body = _answer()
        change(body)
        compiled = compiled_wire.encode_produce_response(version, 1, body)
        if version >= carried[what]:
            assert compiled is None, what
        else:
            # A field this version does not carry is not written by either encoder.
            assert compiled == python_answer(version, 1, body), what


@pytest.mark.parametrize("field, value", [("index", 2**31), ("error_code", -2**15 - 1), ("base_offset", 2**63),
                                          ("log_start_offset", -2**63 - 1), ("index", "0"), ("base_offset", None)])
def test_values_outside_their_wire_type_are_left_to_the_generated_encoder(field: str, value: Any) -> None:
    body = _answer()
    setattr(body.responses[0].partition_responses[0], field, value)
    assert compiled_wire.encode_produce_response(11, 1, body) is None
    with pytest.raises((struct.error, TypeError)):
        python_answer(11, 1, body)


def test_a_topic_name_that_is_not_text_is_left_to_the_generated_encoder() -> None:
    body = _answer()
    body.responses[0].name = None
    assert compiled_wire.encode_produce_response(11, 1, body) is None
    body.responses[0].name = "\ud800"  # a lone surrogate: not encodable as UTF-8
    assert compiled_wire.encode_produce_response(11, 1, body) is None


def test_views_that_are_not_plain_bytes_are_left_to_the_generated_decoder() -> None:
    body = REQUEST(transactional_id=None, acks=1, timeout_ms=1, topic_data=[
        REQUEST.TopicProduceData(name="t", partition_data=[REQUEST.PartitionProduceData(index=0, records=b"ab")])])
    frame = request_frame(body, 9, prefix=b"")
    frame += bytes(-len(frame) % 4)
    assert compiled_wire.decode_produce(memoryview(frame).cast("I"), 0, 9) is None  # items of 4 bytes
    doubled = bytearray(b"".join(bytes([b, 0]) for b in frame))
    assert compiled_wire.decode_produce(memoryview(doubled)[::2], 0, 9) is None  # strided
    assert compiled_wire.decode_produce(memoryview(frame), 0, 9) is not None


# -- fetch answers -----------------------------------------------------------------------------------

FETCH = response_type(1)
FETCH_VERSIONS = range(4, 18)

record_sets = st.one_of(
    st.none(),
    st.binary(max_size=64),
    st.binary(min_size=SPLICE_MIN, max_size=SPLICE_MIN + 64),  # spliced, not copied
    st.binary(max_size=SPLICE_MIN + 64).map(lambda b: memoryview(bytearray(b))),
    st.lists(st.one_of(st.builds(FileRegion, st.integers(0, 1000), st.integers(0, 2**40), st.integers(0, 2**20)),
                       st.binary(max_size=32)), max_size=3).map(FileRegions),
)
aborted = st.one_of(st.none(), st.lists(st.builds(lambda p, f: FETCH.AbortedTransaction(producer_id=p, first_offset=f),
                                                  i64, i64), max_size=3))
fetch_partitions = st.builds(
    lambda i, e, hw, lso, lss, ab, prr, r: FETCH.PartitionData(
        partition_index=i, error_code=e, high_watermark=hw, last_stable_offset=lso, log_start_offset=lss,
        aborted_transactions=ab, preferred_read_replica=prr, records=r),
    st.integers(-2**31, 2**31 - 1), st.integers(-2**15, 2**15 - 1), i64, i64, i64, aborted,
    st.integers(-2**31, 2**31 - 1), record_sets)
fetch_topics = st.builds(lambda n, tid, ps: FETCH.FetchableTopicResponse(topic=n, topic_id=tid, partitions=ps),
                         names, st.one_of(st.none(), st.uuids()), st.lists(fetch_partitions, max_size=3))
fetch_answers = st.builds(lambda t, e, s, ts: FETCH(throttle_time_ms=t, error_code=e, session_id=s, responses=ts),
                          st.integers(-2**31, 2**31 - 1), st.integers(-2**15, 2**15 - 1),
                          st.integers(-2**31, 2**31 - 1), st.lists(fetch_topics, max_size=3))


def comparable(parts: list[Any]) -> list[Any]:
    """Parts as bytes, file regions as themselves: what the connection writes, in order."""
    return [p if isinstance(p, FileRegion) else bytes(p) for p in parts]


@given(fetch_answers, st.sampled_from(FETCH_VERSIONS), st.integers(-2**31, 2**31 - 1))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_common_fetch_answers_encode_alike(body: Any, version: int, correlation_id: int) -> None:
    compiled = compiled_wire.encode_fetch_response(version, correlation_id, body)
    assert compiled is not None
    expected = encode_response(1, version, correlation_id, body)
    assert comparable(compiled) == comparable(expected)
    # The size prefix counts the spliced record sets, which are handed over as they are (not copied).
    size = sum(p.length if isinstance(p, FileRegion) else len(p) for p in compiled)
    assert struct.unpack(">i", bytes(compiled[0][:4]))[0] == size - 4
    # The same record sets go out as they are, neither copied nor split, in the same places.
    ids = set()
    for topic in body.responses:
        for p in topic.partitions:
            r = p.records
            if isinstance(r, FileRegions):
                ids.update(id(c) for c in r)
            elif r is not None and len(r) >= SPLICE_MIN:
                ids.add(id(r))
    assert [id(p) for p in compiled if id(p) in ids] == [id(p) for p in expected if id(p) in ids]


def _fetch_answer() -> Any:
    return FETCH(throttle_time_ms=0, error_code=0, session_id=1, responses=[FETCH.FetchableTopicResponse(
        topic="t", partitions=[FETCH.PartitionData(partition_index=0, high_watermark=5, records=b"x")])])


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_uncommon_fetch_answers_are_left_to_the_generated_encoder(version: int) -> None:
    def part(body: Any) -> Any:
        return body.responses[0].partitions[0]

    changes = {
        "diverging epoch": lambda b: setattr(part(b), "diverging_epoch", FETCH.EpochEndOffset(epoch=3, end_offset=10)),
        "current leader": lambda b: setattr(part(b).current_leader, "leader_epoch", 4),
        "snapshot id": lambda b: setattr(part(b), "snapshot_id", FETCH.SnapshotId(end_offset=1, epoch=2)),
        "node endpoints": lambda b: setattr(b, "node_endpoints", [
            FETCH.NodeEndpoint(node_id=2, host="h", port=1, rack=None)]),
    }
    carried = {"diverging epoch": 12, "current leader": 12, "snapshot id": 12, "node endpoints": 16}
    for what, change in changes.items():
        body = _fetch_answer()
        change(body)
        compiled = compiled_wire.encode_fetch_response(version, 1, body)
        if version >= carried[what]:
            assert compiled is None, what
        else:
            assert compiled is not None and comparable(compiled) == comparable(
                encode_response(1, version, 1, body)), what


@pytest.mark.parametrize("change", [
    lambda b: setattr(b.responses[0].partitions[0], "high_watermark", 2**63),
    lambda b: setattr(b.responses[0].partitions[0], "error_code", 2**15),
    lambda b: setattr(b.responses[0].partitions[0], "records", "text"),
    lambda b: setattr(b.responses[0].partitions[0], "records", memoryview(bytearray(8))[::2]),
    lambda b: setattr(b.responses[0].partitions[0], "aborted_transactions", ()),
    lambda b: setattr(b, "session_id", None),
], ids=["hw", "error code", "records as text", "strided records", "aborted as tuple", "session id"])
def test_fetch_values_outside_the_common_shape_are_left_to_the_generated_encoder(change: Any) -> None:
    body = _fetch_answer()
    change(body)
    assert compiled_wire.encode_fetch_response(11, 1, body) is None
    assert compiled_wire.encode_fetch_response(16, 1, body) is None


def test_versions_outside_the_compiled_fetch_range_are_left_alone() -> None:
    for version in (0, 1, 2, 3, 18):
        assert compiled_wire.encode_fetch_response(version, 1, _fetch_answer()) is None


# -- fetch requests ----------------------------------------------------------------------------------

FETCH_REQUEST = request_type(1)
FETCH_REQUEST_VERSIONS = range(4, 18)
i32 = st.integers(-2**31, 2**31 - 1)
fetch_request_partitions = st.builds(
    lambda p, cle, fo, lfe, lso, pmb: FETCH_REQUEST.FetchPartition(
        partition=p, current_leader_epoch=cle, fetch_offset=fo, last_fetched_epoch=lfe, log_start_offset=lso,
        partition_max_bytes=pmb), i32, i32, i64, i32, i64, i32)
fetch_request_topics = st.builds(
    lambda n, tid, ps: FETCH_REQUEST.FetchTopic(topic=n, topic_id=tid, partitions=ps),
    names, st.one_of(st.uuids(), st.just(uuid.UUID(int=0))), st.lists(fetch_request_partitions, max_size=3))
forgotten = st.builds(lambda n, tid, ps: FETCH_REQUEST.ForgottenTopic(topic=n, topic_id=tid, partitions=ps),
                      names, st.uuids(), st.lists(i32, max_size=5))
fetch_requests = st.builds(
    lambda rid, mw, mn, mx, iso, sid, se, ts, fts, rack: FETCH_REQUEST(
        replica_id=rid, max_wait_ms=mw, min_bytes=mn, max_bytes=mx, isolation_level=iso, session_id=sid,
        session_epoch=se, topics=ts, forgotten_topics_data=fts, rack_id=rack),
    i32, i32, i32, i32, st.integers(-128, 127), i32, i32, st.lists(fetch_request_topics, max_size=3),
    st.lists(forgotten, max_size=2), names)


def fetch_request_frame(body: Any, version: int, prefix: bytes = b"\x07junk", trailer: bytes = b"") -> bytearray:
    out = Output()
    FETCH_REQUEST.encode_into(body, version, out)
    return bytearray(prefix + b"".join(bytes(p) for p in out.parts()) + trailer)


def fetch_agree(frame: bytearray, pos: int, version: int) -> Any:
    compiled = compiled_wire.decode_fetch(memoryview(frame), pos, version)
    try:
        expected: Any = FETCH_REQUEST.decode(memoryview(frame), version, pos, exact=False)
    except Exception as e:  # noqa: BLE001 - what the generated decoder raises is the expected answer
        expected = e
    if compiled is not None:
        assert not isinstance(expected, Exception), f"compiled decoded what the generated decoder refuses: {expected!r}"
        assert compiled == expected
    return compiled


@given(fetch_requests, st.sampled_from(FETCH_REQUEST_VERSIONS), st.binary(max_size=8))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_well_formed_fetch_requests_decode_alike(body: Any, version: int, trailer: bytes) -> None:
    frame = fetch_request_frame(body, version, trailer=trailer)
    compiled = fetch_agree(frame, 5, version)
    assert compiled is not None
    assert compiled[1] == len(frame) - len(trailer)


@given(fetch_requests, st.sampled_from(FETCH_REQUEST_VERSIONS), st.data())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_damaged_fetch_requests_are_left_to_the_generated_decoder(body: Any, version: int,
                                                                  data: st.DataObject) -> None:
    fetch_agree(damage(fetch_request_frame(body, version), data), 5, version)


@pytest.mark.parametrize("version", [12, 15, 17])
def test_fetch_requests_with_tagged_fields_go_to_the_generated_decoder(version: int) -> None:
    body = FETCH_REQUEST(max_wait_ms=0, min_bytes=1, max_bytes=100, topics=[], forgotten_topics_data=[],
                         rack_id="", cluster_id="c")  # ClusterId: a tagged field from version 12
    frame = fetch_request_frame(body, version, prefix=b"")
    assert compiled_wire.decode_fetch(memoryview(frame), 0, version) is None
    assert FETCH_REQUEST.decode(memoryview(frame), version)[0].cluster_id == "c"
    body.cluster_id = None
    assert compiled_wire.decode_fetch(memoryview(fetch_request_frame(body, version, prefix=b"")), 0, version) is not None


def test_fetch_request_defaults_are_fresh_for_each_request() -> None:
    body = FETCH_REQUEST(max_wait_ms=0, min_bytes=1, max_bytes=100, topics=[], rack_id="")
    frame = memoryview(fetch_request_frame(body, 4, prefix=b""))
    one, _ = compiled_wire.decode_fetch(frame, 0, 4)
    two, _ = compiled_wire.decode_fetch(frame, 0, 4)
    assert one == two
    assert one.replica_state is not two.replica_state  # a struct default, made for each request
    assert one.forgotten_topics_data is not two.forgotten_topics_data  # version 4 has none: a list each
    assert compiled_wire.decode_fetch(frame, 0, 3) is None
    assert compiled_wire.decode_fetch(frame, 0, 18) is None
