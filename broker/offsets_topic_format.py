"""The record formats of the ``__consumer_offsets`` topic, byte for byte as Apache Kafka writes them.

Every record key and value starts with an int16 schema version, followed by the fields of that
version of the schema:

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
_FLEXIBLE_VALUE_VERSION = 4  # first flexible version of both value schemas
_MAX_VALUE_VERSION = 4

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


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
# Low-level writer and reader


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


class _Writer:
    __slots__ = ("flexible", "out")

    def __init__(self, version: int, flexible: bool) -> None:
        self.out = bytearray(_I16.pack(version))
        self.flexible = flexible

    def i32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def string(self, s: str | None, nullable: bool = False) -> None:
        if s is None:
            if not nullable:
                raise ValueError("a non-nullable string field is None")
            if self.flexible:
                self.out.append(0)
            else:
                self.out += b"\xff\xff"
            return
        data = s.encode("utf-8")
        if self.flexible:
            _uvarint(self.out, len(data) + 1)
        else:
            if len(data) > 0x7FFF:
                raise ValueError(f"string of {len(data)} bytes is longer than 32767")
            self.out += _I16.pack(len(data))
        self.out += data

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            _uvarint(self.out, len(b) + 1)
        else:
            self.out += _I32.pack(len(b))
        self.out += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            _uvarint(self.out, n + 1)
        else:
            self.out += _I32.pack(n)

    def tagged_fields(self) -> None:
        if self.flexible:
            self.out.append(0)  # we write no tagged fields


class _Reader:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int, flexible: bool) -> None:
        self.buf = memoryview(buf)
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise OffsetsFormatError("record runs past its end")
        v = self.buf[self.pos:end]
        self.pos = end
        return v

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            if shift > 28:
                raise OffsetsFormatError("unsigned varint longer than 5 bytes")
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else _I16.unpack(self._take(2))[0]
        if n < 0:
            if not nullable:
                raise OffsetsFormatError("non-nullable string is null")
            return None
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as e:
            raise OffsetsFormatError(f"string is not UTF-8: {e}") from None

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise OffsetsFormatError("non-nullable bytes field is null")
        return bytes(self._take(n))

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise OffsetsFormatError("non-nullable array is null")
        if n > len(self.buf) - self.pos:
            raise OffsetsFormatError(f"array of {n} elements cannot fit in the record")
        return n

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


def _version(buf: bytes | bytearray | memoryview) -> int:
    if len(buf) < 2:
        raise OffsetsFormatError("record shorter than its version prefix")
    return _I16.unpack_from(buf, 0)[0]


# ------------------------------------------------------------------------------------------------
# Keys


def encode_offset_commit_key(group: str, topic: str, partition: int,
                             version: int = OFFSET_COMMIT_KEY_VERSION) -> bytes:
    if version not in (0, 1):
        raise ValueError(f"offset commit keys have versions 0 and 1, not {version}")
    w = _Writer(version, flexible=False)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return bytes(w.out)


def encode_group_metadata_key(group: str) -> bytes:
    w = _Writer(GROUP_METADATA_KEY_VERSION, flexible=False)
    w.string(group)
    return bytes(w.out)


def decode_key(buf: bytes | bytearray | memoryview) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    version = _version(buf)
    r = _Reader(buf, 2, flexible=False)
    if version in (0, 1):
        group, topic = r.string(), r.string()
        partition = r.i32()
        return OffsetCommitKey(group, topic, partition)  # type: ignore[arg-type]
    if version == GROUP_METADATA_KEY_VERSION:
        group = r.string()
        return GroupMetadataKey(group)  # type: ignore[arg-type]
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
    w = _Writer(version, flexible=version >= _FLEXIBLE_VALUE_VERSION)
    w.i64(value.offset)
    if version >= 3:
        w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp)
    if version == 1:
        w.i64(value.expire_timestamp)
    w.tagged_fields()
    return bytes(w.out)


def decode_offset_commit_value(buf: bytes | bytearray | memoryview | None) -> OffsetCommitValue | None:
    """The value, or None for a tombstone."""
    if buf is None:
        return None
    version = _version(buf)
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise OffsetsFormatError(f"unknown offset commit value version {version}")
    r = _Reader(buf, 2, flexible=version >= _FLEXIBLE_VALUE_VERSION)
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if version == 1 else -1
    r.skip_tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# Group metadata values


def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise ValueError(f"group metadata values have versions 0-4, not {version}")
    w = _Writer(version, flexible=version >= _FLEXIBLE_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol, nullable=True)
    w.string(value.leader, nullable=True)
    if version >= 2:
        w.i64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id, nullable=True)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tagged_fields()
    w.tagged_fields()
    return bytes(w.out)


def decode_group_metadata_value(buf: bytes | bytearray | memoryview | None) -> GroupMetadataValue | None:
    """The value, or None for a tombstone."""
    if buf is None:
        return None
    version = _version(buf)
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise OffsetsFormatError(f"unknown group metadata value version {version}")
    r = _Reader(buf, 2, flexible=version >= _FLEXIBLE_VALUE_VERSION)
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    current_state_timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tagged_fields()
        members.append(MemberMetadataValue(
            member_id=member_id, client_id=client_id, client_host=client_host,  # type: ignore[arg-type]
            session_timeout=session_timeout, subscription=subscription, assignment=assignment,
            rebalance_timeout=rebalance_timeout, group_instance_id=instance_id))
    r.skip_tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader,  # type: ignore[arg-type]
                              current_state_timestamp, members)
