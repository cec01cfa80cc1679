"""The compiled Produce codec against the generated one: the same request and the same answer bytes,
or None where the generated codec must decide (and then it does, with its own errors)."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.kafka_apis import KafkaApis
from protocol import produce_wire
from protocol.exceptions import ProtocolError
from protocol.messages import encode_response, request_type, response_type
from protocol.schema import Output

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
    assert produce_wire.COMPILED


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
    compiled = produce_wire.decode_produce(memoryview(frame), pos, version)
    expected = python_decode(frame, pos, version)
    if compiled is not None:
        assert not isinstance(expected, Exception), f"compiled decoded what the generated decoder refuses: {expected!r}"
        assert compiled == expected
    return compiled


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
    frame = request_frame(body, version)
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    damaged = bytearray(frame)
    kind = data.draw(st.sampled_from(["cut", "flip", "insert", "random"]))
    if kind == "cut":
        damaged = damaged[:rng.randrange(5, len(damaged) + 1)]
    elif kind == "flip":
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(5, len(damaged))
            damaged[i] ^= 1 << rng.randrange(8)
    elif kind == "insert":
        i = rng.randrange(5, len(damaged) + 1)
        damaged[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    else:
        damaged = bytearray(b"\x07junk" + bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))))
    agree(damaged, 5, version)


def test_a_tagged_field_goes_to_the_generated_decoder() -> None:
    body = REQUEST(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        REQUEST.TopicProduceData(name="t", partition_data=[REQUEST.PartitionProduceData(index=0, records=b"x")])])
    frame = request_frame(body, 9, prefix=b"")
    # The request's own tagged fields: one unknown tag (1) of two bytes, which Kafka skips.
    tagged = frame[:-1] + bytearray([1, 1, 2, 0xAB, 0xCD])
    assert produce_wire.decode_produce(memoryview(tagged), 0, 9) is None
    decoded, _ = REQUEST.decode(memoryview(tagged), 9)
    assert decoded == REQUEST.decode(memoryview(frame), 9)[0]


def test_versions_outside_the_compiled_range_are_left_alone() -> None:
    body = REQUEST(transactional_id=None, acks=1, timeout_ms=1, topic_data=[])
    for version in (0, 1, 2):
        out = Output()
        REQUEST.encode_into(body, version, out)
        assert produce_wire.decode_produce(memoryview(bytearray(b"".join(bytes(p) for p in out.parts()))), 0, version) is None
    assert produce_wire.decode_produce(memoryview(bytearray(8)), 0, 12) is None


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
    assert produce_wire.encode_produce_response(version, correlation_id, body) == python_answer(
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
        compiled = produce_wire.encode_produce_response(version, 1, body)
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
    assert produce_wire.encode_produce_response(11, 1, body) is None
    with pytest.raises((struct.error, TypeError)):
        python_answer(11, 1, body)


def test_a_topic_name_that_is_not_text_is_left_to_the_generated_encoder() -> None:
    body = _answer()
    body.responses[0].name = None
    assert produce_wire.encode_produce_response(11, 1, body) is None
    body.responses[0].name = "\ud800"  # a lone surrogate: not encodable as UTF-8
    assert produce_wire.encode_produce_response(11, 1, body) is None


def test_views_that_are_not_plain_bytes_are_left_to_the_generated_decoder() -> None:
    body = REQUEST(transactional_id=None, acks=1, timeout_ms=1, topic_data=[
        REQUEST.TopicProduceData(name="t", partition_data=[REQUEST.PartitionProduceData(index=0, records=b"ab")])])
    frame = request_frame(body, 9, prefix=b"")
    frame += bytes(-len(frame) % 4)
    assert produce_wire.decode_produce(memoryview(frame).cast("I"), 0, 9) is None  # items of 4 bytes
    doubled = bytearray(b"".join(bytes([b, 0]) for b in frame))
    assert produce_wire.decode_produce(memoryview(doubled)[::2], 0, 9) is None  # strided
    assert produce_wire.decode_produce(memoryview(frame), 0, 9) is not None
