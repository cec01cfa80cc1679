"""``__consumer_offsets`` keys and values, byte for byte, and Kafka's group -> partition mapping."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.old.types import (
    Array,
    Bytes,
    CompactArray,
    CompactBytes,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    String,
    TaggedFields,
)

from broker.offsets_topic_format import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsFormatError,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hashcode,
    partition_for,
)

# ------------------------------------------------------------------------------------------------
# Partitioning


def _reference_hash(s: str) -> int:
    """String.hashCode written out the slow way over UTF-16 code units."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    n = len(units)
    for i, u in enumerate(units):
        h += u * 31 ** (n - 1 - i)
    h %= 2**32
    return h - 2**32 if h >= 2**31 else h


@pytest.mark.parametrize(("s", "expected"), [
    ("", 0),
    ("a", 97),
    ("ab", 97 * 31 + 98),
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # a surrogate pair, as Java sees it
    ("polygenelubricants", -2**31),  # Integer.MIN_VALUE
])
def test_java_hashcode_examples(s, expected):
    assert java_string_hashcode(s) == expected


@given(st.text(max_size=60))
def test_java_hashcode_matches_reference(s):
    assert java_string_hashcode(s) == _reference_hash(s)


def test_partition_for_uses_kafka_abs_not_a_mask():
    # Utils.abs(Integer.MIN_VALUE) is 0 in Kafka.
    assert partition_for("polygenelubricants", 50) == 0
    # A negative hash: Math.abs, not hash & 0x7fffffff, decides the partition.
    s = next(f"group-{i}" for i in range(1000) if java_string_hashcode(f"group-{i}") < 0
             and abs(java_string_hashcode(f"group-{i}")) % 50 != (java_string_hashcode(f"group-{i}") & 0x7FFFFFFF) % 50)
    h = java_string_hashcode(s)
    assert partition_for(s, 50) == abs(h) % 50
    assert partition_for("a", 50) == 97 % 50
    assert partition_for("my-group", 1) == 0
    with pytest.raises(ValueError):
        partition_for("g", 0)


# ------------------------------------------------------------------------------------------------
# Exact bytes, derived by hand from Kafka's schemas


def test_offset_commit_key_bytes():
    key = encode_offset_commit_key("g", "t", 1)
    assert key == bytes.fromhex("0001" "0001" "67" "0001" "74" "00000001")
    assert decode_key(key) == OffsetCommitKey("g", "t", 1)
    # Version 0 keys (older brokers) have the same layout.
    assert decode_key(encode_offset_commit_key("g", "t", 1, version=0)) == OffsetCommitKey("g", "t", 1)


def test_group_metadata_key_bytes():
    assert encode_group_metadata_key("grp") == bytes.fromhex("0002" "0003") + b"grp"
    assert decode_key(encode_group_metadata_key("grp")) == GroupMetadataKey("grp")
    assert decode_key(b"\x00\x07whatever") == UnknownKey(7)


def test_offset_commit_value_bytes():
    v = OffsetCommitValue(offset=5, metadata="m", commit_timestamp=1000, leader_epoch=2)
    assert encode_offset_commit_value(v) == bytes.fromhex(
        "0003" "0000000000000005" "00000002" "0001" "6d" "00000000000003e8")
    # With an expire timestamp Kafka writes version 1 (no leader epoch, the expire timestamp last).
    v1 = OffsetCommitValue(offset=5, metadata="", commit_timestamp=1000, expire_timestamp=2000)
    assert encode_offset_commit_value(v1) == bytes.fromhex(
        "0001" "0000000000000005" "0000" "00000000000003e8" "00000000000007d0")
    # Version 4 is flexible: compact string, then an empty tagged-field section.
    assert encode_offset_commit_value(v, version=4) == bytes.fromhex(
        "0004" "0000000000000005" "00000002" "02" "6d" "00000000000003e8" "00")
    # Version 0: offset, metadata, commit timestamp.
    assert encode_offset_commit_value(v, version=0) == bytes.fromhex(
        "0000" "0000000000000005" "0001" "6d" "00000000000003e8")
    for version in range(5):
        got = decode_offset_commit_value(encode_offset_commit_value(v, version=version))
        assert (got.offset, got.metadata, got.commit_timestamp) == (5, "m", 1000)
        assert got.leader_epoch == (2 if version >= 3 else -1)
    assert decode_offset_commit_value(None) is None


def test_group_metadata_value_bytes():
    member = MemberMetadataValue(member_id="m", client_id="c", client_host="/h", session_timeout=10000,
                                 subscription=b"\x01", assignment=b"", rebalance_timeout=30000,
                                 group_instance_id=None)
    value = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range", leader="m",
                               current_state_timestamp=1234, members=[member])
    expected = (bytes.fromhex("0003")
                + b"\x00\x08consumer" + bytes.fromhex("00000003") + b"\x00\x05range" + b"\x00\x01m"
                + bytes.fromhex("00000000000004d2")
                + bytes.fromhex("00000001")
                + b"\x00\x01m" + b"\xff\xff" + b"\x00\x01c" + b"\x00\x02/h"
                + bytes.fromhex("00007530") + bytes.fromhex("00002710")
                + bytes.fromhex("00000001") + b"\x01" + bytes.fromhex("00000000"))
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value
    empty = GroupMetadataValue(protocol_type="consumer", generation=4, protocol=None, leader=None,
                               current_state_timestamp=99, members=[])
    assert encode_group_metadata_value(empty) == (
        bytes.fromhex("0003") + b"\x00\x08consumer" + bytes.fromhex("00000004") + b"\xff\xff\xff\xff"
        + bytes.fromhex("0000000000000063") + bytes.fromhex("00000000"))
    assert decode_group_metadata_value(None) is None


# ------------------------------------------------------------------------------------------------
# Cross-check against kafka-python's independent primitive encoders


def _prefixed(version: int, schema: Schema, item: tuple) -> bytes:
    return Int16.encode(version) + schema.encode(item)


def test_crosscheck_offset_commit_with_kafka_python():
    key = Schema(("group", String()), ("topic", String()), ("partition", Int32))
    assert encode_offset_commit_key("grüppe", "topic-ä", 7) == _prefixed(1, key, ("grüppe", "topic-ä", 7))
    v3 = Schema(("offset", Int64), ("leader_epoch", Int32), ("metadata", String()), ("commit_timestamp", Int64))
    v = OffsetCommitValue(offset=2**40, metadata="meta", commit_timestamp=1_700_000_000_000, leader_epoch=9)
    assert encode_offset_commit_value(v) == _prefixed(3, v3, (2**40, 9, "meta", 1_700_000_000_000))
    v4 = Schema(("offset", Int64), ("leader_epoch", Int32), ("metadata", CompactString()),
                ("commit_timestamp", Int64), ("tags", TaggedFields))
    assert encode_offset_commit_value(v, version=4) == _prefixed(4, v4, (2**40, 9, "meta", 1_700_000_000_000, {}))


def test_crosscheck_group_metadata_with_kafka_python():
    members = [
        MemberMetadataValue("m1", "c1", "/10.0.0.1", 10000, b"sub1", b"asg1", 30000, "inst-1"),
        MemberMetadataValue("m2", "c2", "/10.0.0.2", 10000, b"sub2", b"", 30000, None),
    ]
    value = GroupMetadataValue("consumer", 12, "range", "m1", 1_700_000_000_000, members)
    member_v3 = Array(("member_id", String()), ("group_instance_id", String()), ("client_id", String()),
                      ("client_host", String()), ("rebalance_timeout", Int32), ("session_timeout", Int32),
                      ("subscription", Bytes), ("assignment", Bytes))
    v3 = Schema(("protocol_type", String()), ("generation", Int32), ("protocol", String()), ("leader", String()),
                ("current_state_timestamp", Int64), ("members", member_v3))
    items = [(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout,
              m.session_timeout, m.subscription, m.assignment) for m in members]
    assert encode_group_metadata_value(value) == _prefixed(
        3, v3, ("consumer", 12, "range", "m1", 1_700_000_000_000, items))
    member_v4 = CompactArray(("member_id", CompactString()), ("group_instance_id", CompactString()),
                             ("client_id", CompactString()), ("client_host", CompactString()),
                             ("rebalance_timeout", Int32), ("session_timeout", Int32),
                             ("subscription", CompactBytes), ("assignment", CompactBytes), ("tags", TaggedFields))
    v4 = Schema(("protocol_type", CompactString()), ("generation", Int32), ("protocol", CompactString()),
                ("leader", CompactString()), ("current_state_timestamp", Int64), ("members", member_v4),
                ("tags", TaggedFields))
    assert encode_group_metadata_value(value, version=4) == _prefixed(
        4, v4, ("consumer", 12, "range", "m1", 1_700_000_000_000, [(*i, {}) for i in items], {}))
    # Version 0: no rebalance timeout, no state timestamp, no instance id.
    member_v0 = Array(("member_id", String()), ("client_id", String()), ("client_host", String()),
                      ("session_timeout", Int32), ("subscription", Bytes), ("assignment", Bytes))
    v0 = Schema(("protocol_type", String()), ("generation", Int32), ("protocol", String()), ("leader", String()),
                ("members", member_v0))
    encoded_v0 = _prefixed(0, v0, ("consumer", 12, "range", "m1", [
        (m.member_id, m.client_id, m.client_host, m.session_timeout, m.subscription, m.assignment) for m in members]))
    assert encode_group_metadata_value(value, version=0) == encoded_v0
    back = decode_group_metadata_value(encoded_v0)
    assert back.current_state_timestamp == -1 and back.members[0].rebalance_timeout == -1
    assert back.members[0].group_instance_id is None


def test_decoding_skips_unknown_tagged_fields_and_rejects_garbage():
    v = OffsetCommitValue(offset=1, metadata="", commit_timestamp=2, leader_epoch=3)
    raw = encode_offset_commit_value(v, version=4)
    with_tag = raw[:-1] + bytes([1, 5, 2]) + b"\xab\xcd"  # one tagged field: tag 5, two bytes
    assert decode_offset_commit_value(with_tag) == v
    with pytest.raises(OffsetsFormatError):
        decode_offset_commit_value(b"\x00\x03\x00")
    with pytest.raises(OffsetsFormatError):
        decode_offset_commit_value(b"\x00\x09" + b"\x00" * 20)
    with pytest.raises(OffsetsFormatError):
        decode_group_metadata_value(b"\x00")
    with pytest.raises(OffsetsFormatError):
        decode_key(b"\x00\x01\x00\x05ab")


# ------------------------------------------------------------------------------------------------
# Round trips

_names = st.text(max_size=20)
_i32 = st.integers(-2**31, 2**31 - 1)
_i64 = st.integers(-2**63, 2**63 - 1)


@settings(max_examples=200)
@given(st.integers(0, 4), _i64, st.text(max_size=40), _i64, _i32, _i64)
def test_offset_commit_value_roundtrip(version, offset, metadata, commit_ts, epoch, expire):
    v = OffsetCommitValue(offset=offset, metadata=metadata, commit_timestamp=commit_ts,
                          leader_epoch=epoch if version >= 3 else -1, expire_timestamp=expire if version == 1 else -1)
    raw = encode_offset_commit_value(v, version=version)
    assert struct.unpack(">h", raw[:2])[0] == version
    assert decode_offset_commit_value(raw) == v


@settings(max_examples=200)
@given(_names, _names, _i32)
def test_keys_roundtrip(group, topic, partition):
    assert decode_key(encode_offset_commit_key(group, topic, partition)) == OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_group_metadata_key(group)) == GroupMetadataKey(group)


_members = st.lists(st.builds(
    MemberMetadataValue, member_id=_names, client_id=_names, client_host=_names, session_timeout=_i32,
    subscription=st.binary(max_size=30), assignment=st.binary(max_size=30), rebalance_timeout=_i32,
    group_instance_id=st.none() | _names), max_size=4)


@settings(max_examples=200)
@given(st.integers(0, 4), _names, _i32, st.none() | _names, st.none() | _names, _i64, _members)
def test_group_metadata_value_roundtrip(version, ptype, generation, protocol, leader, ts, members):
    for m in members:
        if version < 3:
            m.group_instance_id = None
        if version < 1:
            m.rebalance_timeout = -1
    value = GroupMetadataValue(ptype, generation, protocol, leader, ts if version >= 2 else -1, members)
    assert decode_group_metadata_value(encode_group_metadata_value(value, version=version)) == value
