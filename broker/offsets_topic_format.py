"""The record formats of the ``__consumer_offsets`` topic, byte for byte as Apache Kafka writes them.

Every record key and value starts with an int16 schema version, followed by the fields of that
version of the schema:

The layouts are in ``protocol/schemas/`` (OffsetCommitKey, GroupMetadataKey, OffsetCommitValue,
GroupMetadataValue) and encoded by the schema compiler:

* key version 0 or 1: an offset commit, ``(group: string, topic: string, partition: int32)``;
* key version 2: group metadata, ``(group: string)``;
* offset commit value versions 0-4: ``offset: int64``, ``leader_epoch: int32`` (v3+),
  ``metadata: string``, ``commit_timestamp: int64``, ``expire_timestamp: int64`` (v1 only);
  v4 is a flexible version (compact strings, tagged fields);
* group metadata value versions 0-4: ``protocol_type``, ``generation``, ``protocol`` (nullable),
  ``leader`` (nullable), ``current_state_timestamp`` (v2+) and the members, each with
  ``member_id``, ``group_instance_id`` (v3+, nullable), ``client_id``, ``client_host``,
  ``rebalance_timeout`` (v1+), ``session_timeout``, ``subscription`` and ``assignment`` bytes;
  v4 is flexible.

A null value is a tombstone: the offset or the group was deleted. Like Kafka 3.x we write offset
commit keys at version 1, offset commit values at version 3 (version 1 when the commit carries an
explicit expire timestamp, which only OffsetCommit v2-v4 with a retention time produce) and group
metadata values at version 3; we read every version. Outside tools (kafka-consumer-groups, Burrow,
Kafka's own formatters) therefore read our topic unchanged. Like Kafka's readers, the decoders
ignore bytes after the last field of a version.

``partition_for`` maps a group id to its partition exactly as Kafka does:
``Utils.abs(groupId.hashCode()) % partitions``, with Java's ``String.hashCode`` over UTF-16 code
units and Kafka's ``Utils.abs`` (which maps ``Integer.MIN_VALUE`` to 0; it is *not* a bit mask).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from protocol.exceptions import ProtocolError
from protocol.schema import MessageType, decode_versioned, encode_versioned, message_type, record_version

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "OffsetsFormatError",
    "UnknownKey",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
    "java_string_hashcode",
    "partition_for",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
_MAX_VALUE_VERSION = 4


class OffsetsFormatError(ValueError):
    """Bytes that are not a valid ``__consumer_offsets`` key or value."""


# ------------------------------------------------------------------------------------------------
# Partitioning


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h >= 0x80000000 else h


def _kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs`` except that ``Integer.MIN_VALUE`` maps to 0."""
    return 0 if n == -0x80000000 else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition that owns ``group_id``."""
    if num_partitions <= 0:
        raise ValueError(f"the offsets topic needs at least one partition, not {num_partitions}")
    return _kafka_abs(java_string_hashcode(group_id)) % num_partitions


# ------------------------------------------------------------------------------------------------
# Data


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key with a version this format does not know (Kafka logs and skips those)."""

    version: int


@dataclass(slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1  # -1: none (versions below 3 cannot carry one)
    expire_timestamp: int = -1  # -1: none (only version 1 carries one)


@dataclass(slots=True)
class MemberMetadataValue:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadataValue] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------
# The records, encoded by the schema compiler (protocol/schemas/*.json)

_OFFSET_KEY = message_type("OffsetCommitKey")
_GROUP_KEY = message_type("GroupMetadataKey")
_OFFSET_VALUE = message_type("OffsetCommitValue")
_GROUP_VALUE = message_type("GroupMetadataValue")


def read_version(buf: bytes | bytearray | memoryview, error: type[ValueError] = OffsetsFormatError) -> int:
    """The int16 version prefix; malformed input raises ``error`` (each internal topic has its own)."""
    try:
        return record_version(buf)
    except ProtocolError as e:
        raise error(str(e)) from None


def decode_record(mt: MessageType, buf: bytes | bytearray | memoryview, version: int,
            error: type[ValueError] = OffsetsFormatError) -> Any:
    try:
        return decode_versioned(mt, buf, version)[1]
    except ProtocolError as e:
        raise error(f"malformed {mt.name} v{version}: {e}") from None


# ------------------------------------------------------------------------------------------------
# Keys


def encode_offset_commit_key(group: str, topic: str, partition: int,
                             version: int = OFFSET_COMMIT_KEY_VERSION) -> bytes:
    if version not in (0, 1):
        raise ValueError(f"offset commit keys have versions 0 and 1, not {version}")
    return encode_versioned(_OFFSET_KEY, _OFFSET_KEY(group=group, topic=topic, partition=partition), version)


def encode_group_metadata_key(group: str) -> bytes:
    return encode_versioned(_GROUP_KEY, _GROUP_KEY(group=group), GROUP_METADATA_KEY_VERSION)


def decode_key(buf: bytes | bytearray | memoryview) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    version = read_version(buf)
    if version in (0, 1):
        k = decode_record(_OFFSET_KEY, buf, version)
        return OffsetCommitKey(k.group, k.topic, k.partition)
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(decode_record(_GROUP_KEY, buf, version).group)
    return UnknownKey(version)


# ------------------------------------------------------------------------------------------------
# Offset commit values


def offset_commit_value_version(value: OffsetCommitValue) -> int:
    """The version Kafka 3.x writes: 1 when an explicit expire timestamp is set, else 3."""
    return 1 if value.expire_timestamp != -1 else OFFSET_COMMIT_VALUE_VERSION


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    if version is None:
        version = offset_commit_value_version(value)
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise ValueError(f"offset commit values have versions 0-4, not {version}")
    msg = _OFFSET_VALUE(offset=value.offset, leader_epoch=value.leader_epoch, metadata=value.metadata,
                        commit_timestamp=value.commit_timestamp, expire_timestamp=value.expire_timestamp)
    return encode_versioned(_OFFSET_VALUE, msg, version)


def decode_offset_commit_value(buf: bytes | bytearray | memoryview | None) -> OffsetCommitValue | None:
    """The value, or None for a tombstone."""
    if buf is None:
        return None
    version = read_version(buf)
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise OffsetsFormatError(f"unknown offset commit value version {version}")
    v = decode_record(_OFFSET_VALUE, buf, version)
    return OffsetCommitValue(v.offset, v.metadata, v.commit_timestamp, v.leader_epoch, v.expire_timestamp)


# ------------------------------------------------------------------------------------------------
# Group metadata values


def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise ValueError(f"group metadata values have versions 0-4, not {version}")
    members = [_GROUP_VALUE.MemberMetadata(  # type: ignore[attr-defined]
        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
        client_host=m.client_host, rebalance_timeout=m.rebalance_timeout, session_timeout=m.session_timeout,
        subscription=m.subscription, assignment=m.assignment) for m in value.members]
    msg = _GROUP_VALUE(protocol_type=value.protocol_type, generation=value.generation, protocol=value.protocol,
                       leader=value.leader, current_state_timestamp=value.current_state_timestamp, members=members)
    return encode_versioned(_GROUP_VALUE, msg, version)


def decode_group_metadata_value(buf: bytes | bytearray | memoryview | None) -> GroupMetadataValue | None:
    """The value, or None for a tombstone."""
    if buf is None:
        return None
    version = read_version(buf)
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise OffsetsFormatError(f"unknown group metadata value version {version}")
    v = decode_record(_GROUP_VALUE, buf, version)
    members = [MemberMetadataValue(
        member_id=m.member_id, client_id=m.client_id, client_host=m.client_host, session_timeout=m.session_timeout,
        subscription=m.subscription, assignment=m.assignment, rebalance_timeout=m.rebalance_timeout,
        group_instance_id=m.group_instance_id) for m in v.members]
    return GroupMetadataValue(v.protocol_type, v.generation, v.protocol, v.leader, v.current_state_timestamp, members)
