"""Request/response envelopes: headers, ApiVersions special cases, the version table."""

from __future__ import annotations

import struct

import pytest

from protocol.api_versions import SUPPORTED, ApiKey, advertised
from protocol.exceptions import ProtocolError, UnsupportedVersionError
from protocol.framing import FrameReader
from protocol.messages import (
    api_versions_body,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    new_request,
    request_type,
    response_type,
    unsupported_api_versions_response,
)
from protocol.schema import FileRegion, FileRegions


def test_every_advertised_version_compiles_both_ways() -> None:
    for key, (lo, hi, _name) in SUPPORTED.items():
        for v in range(lo, hi + 1):
            for mt in (request_type(key), response_type(key)):
                msg = mt()
                assert mt.decode(mt.encode(msg, v), v)[0] == msg


def test_advertised_matches_kafka_39_zookeeper_ranges() -> None:
    # Spot checks; tests/ops/test_api_versions_vs_kafka.py compares every API with a live Kafka 3.9.1.
    table = {k: (lo, hi) for k, lo, hi in advertised()}
    assert table[ApiKey.PRODUCE] == (0, 11)
    assert table[ApiKey.FETCH] == (0, 17)
    assert table[ApiKey.LIST_OFFSETS] == (0, 9)
    assert table[ApiKey.OFFSET_COMMIT] == (0, 9)
    assert table[ApiKey.OFFSET_FETCH] == (0, 9)
    assert table[ApiKey.CREATE_TOPICS] == (0, 7)
    assert table[ApiKey.JOIN_GROUP] == (0, 9)
    assert table[ApiKey.API_VERSIONS] == (0, 4)


def test_kafka_python_infers_broker_39() -> None:
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    table = {k: (lo, hi) for k, lo, hi in advertised()}
    assert infer_broker_version_from_api_versions(table) == (3, 9)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_round_trip_uses_header_v0(version: int) -> None:
    frame = encode_request(ApiKey.API_VERSIONS, version, 42, "client",
                           new_request(ApiKey.API_VERSIONS, client_software_name="x", client_software_version="1"))
    req = decode_request(memoryview(bytearray(frame[4:])))
    assert req.header.correlation_id == 42 and req.header.client_id == "client"
    parts = encode_response(ApiKey.API_VERSIONS, version, 42, api_versions_body())
    raw = b"".join(bytes(p) for p in parts)  # type: ignore[arg-type]
    assert struct.unpack(">i", raw[:4])[0] == len(raw) - 4
    cid, body = decode_response(ApiKey.API_VERSIONS, version, raw[4:])
    assert cid == 42 and body.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == advertised()


def test_too_new_api_versions_gets_error_35_and_our_ranges() -> None:
    hdr = struct.pack(">hhi", 18, 99, 5) + b"\x00\x01x" + b"\x00"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(hdr)
    assert info.value.correlation_id == 5 and info.value.api_key == 18
    raw = unsupported_api_versions_response(5)
    cid, body = decode_response(ApiKey.API_VERSIONS, 0, raw[4:])
    assert cid == 5 and body.error_code == 35 and len(body.api_keys) == len(SUPPORTED)


def test_unknown_api_key_is_unsupported() -> None:
    with pytest.raises(UnsupportedVersionError):
        decode_request(struct.pack(">hhi", 9999, 0, 1) + b"\xff\xff")


def test_trailing_bytes_are_a_protocol_error() -> None:
    frame = encode_request(ApiKey.METADATA, 12, 1, "c", new_request(ApiKey.METADATA, topics=None))
    with pytest.raises(ProtocolError):
        decode_request(frame[4:] + b"\x00")


def test_produce_records_are_zero_copy_views() -> None:
    mt = request_type(ApiKey.PRODUCE)
    batch = bytes(range(200))
    body = mt(acks=-1, timeout_ms=1000, topic_data=[mt.TopicProduceData(name="t", partition_data=[
        mt.PartitionProduceData(index=0, records=batch)])])
    frame = bytearray(encode_request(ApiKey.PRODUCE, 9, 1, "c", body)[4:])
    req = decode_request(memoryview(frame))
    rec = req.body.topic_data[0].partition_data[0].records
    assert isinstance(rec, memoryview) and bytes(rec) == batch
    rec[0] = 0xFF  # writable view into the receive buffer: offsets can be patched in place
    assert 0xFF in frame


def test_fetch_response_splices_file_regions() -> None:
    mt = response_type(ApiKey.FETCH)
    regions = FileRegions([FileRegion(7, 100, 5000), FileRegion(7, 9000, 3000)])
    body = mt(responses=[mt.FetchableTopicResponse(topic="t", partitions=[
        mt.PartitionData(partition_index=0, high_watermark=10, records=regions)])])
    parts = encode_response(ApiKey.FETCH, 12, 3, body)
    assert [p for p in parts if isinstance(p, FileRegion)] == list(regions)
    total = sum(p.length if isinstance(p, FileRegion) else len(p) for p in parts)
    assert struct.unpack(">i", bytes(parts[0][:4]))[0] == total - 4


def test_frame_reader_splits_and_rejects_oversize() -> None:
    r = FrameReader(max_bytes=100)
    out = r.feed(b"\x00\x00\x00\x03abc\x00\x00\x00\x02d")
    assert [bytes(f) for f in out] == [b"abc"] and r.pending == 5
    assert [bytes(f) for f in r.feed(b"e")] == [b"de"]
    with pytest.raises(ProtocolError):
        r.feed(b"\x00\x00\x01\x00")
    with pytest.raises(ProtocolError):
        FrameReader().feed(b"\xff\xff\xff\xff")
