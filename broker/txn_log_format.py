"""The record formats of the ``__transaction_state`` topic, byte for byte as Apache Kafka writes them.

Every record key and value starts with an int16 schema version:

* key version 0: ``transactional_id: string`` (int16 length + UTF-8);
* value versions 0 and 1: ``producer_id: int64``, ``producer_epoch: int16``,
  ``transaction_timeout_ms: int32``, ``transaction_status: int8``, ``transaction_partitions``
  (nullable array of ``(topic: string, partition_ids: [int32])``), ``last_update_timestamp_ms: int64``,
  ``start_timestamp_ms: int64``. Version 1 is the flexible form (compact strings and arrays, tagged
  fields after each struct).

A null value is a tombstone: the transactional id expired. Kafka 3.9 writes key version 0 and value
version 0 (version 1 only once ``transaction.version`` 1 is enabled, which ZooKeeper clusters never
do) and reads both; the partitions array is null exactly when the state is Empty. We do the same, so
Kafka's own formatters (``kafka-dump-log --transaction-log-decoder``) read our topic unchanged.

The status byte is Kafka's ``TransactionState`` id: Empty 0, Ongoing 1, PrepareCommit 2,
PrepareAbort 3, CompleteCommit 4, CompleteAbort 5, Dead 6, PrepareEpochFence 7.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from broker.offsets_topic_format import partition_for as _partition_for

__all__ = [
    "TXN_KEY_VERSION",
    "TXN_VALUE_VERSION",
    "TxnLogFormatError",
    "TxnLogValue",
    "TxnState",
    "UnknownTxnKey",
    "decode_txn_key",
    "decode_txn_value",
    "encode_txn_key",
    "encode_txn_value",
    "partition_for",
]

TXN_KEY_VERSION = 0
TXN_VALUE_VERSION = 0  # what Kafka 3.9 writes
_FLEXIBLE_VALUE_VERSION = 1
_MAX_VALUE_VERSION = 1

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TxnLogFormatError(ValueError):
    """Bytes that are not a valid ``__transaction_state`` key or value."""


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions report ("PrepareCommit", ...)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}


@dataclass(frozen=True, slots=True)
class UnknownTxnKey:
    """A key with a version this format does not know (Kafka logs and skips those)."""

    version: int


@dataclass(slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    #: topic -> partition ids; written as null when the state is Empty.
    partitions: dict[str, list[int]] = field(default_factory=dict)
    last_update_ms: int = -1
    start_ms: int = -1


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``: ``Utils.abs(hashCode) % n``."""
    return _partition_for(transactional_id, num_partitions)


# ------------------------------------------------------------------------------------------------
# Keys


def encode_txn_key(transactional_id: str) -> bytes:
    data = transactional_id.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"transactional id of {len(data)} bytes is longer than 32767")
    return _I16.pack(TXN_KEY_VERSION) + _I16.pack(len(data)) + data


def decode_txn_key(buf: bytes | bytearray | memoryview) -> str | UnknownTxnKey:
    version = _version(buf)
    if version != TXN_KEY_VERSION:
        return UnknownTxnKey(version)
    r = _Reader(buf, 2, flexible=False)
    return r.string()


# ------------------------------------------------------------------------------------------------
# Values


def encode_txn_value(value: TxnLogValue, version: int = TXN_VALUE_VERSION) -> bytes:
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise ValueError(f"transaction log values have versions 0-1, not {version}")
    if value.state == TxnState.EMPTY and any(value.partitions.values()):
        raise ValueError("an Empty transaction cannot have partitions")
    flexible = version >= _FLEXIBLE_VALUE_VERSION
    out = bytearray(_I16.pack(version))
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.timeout_ms)
    out += _I8.pack(int(value.state))
    if value.state == TxnState.EMPTY:
        out += b"\x00" if flexible else _I32.pack(-1)
    else:
        topics = sorted((t, sorted(ps)) for t, ps in value.partitions.items() if ps)
        _array_len(out, len(topics), flexible)
        for topic, parts in topics:
            _string(out, topic, flexible)
            _array_len(out, len(parts), flexible)
            for p in parts:
                out += _I32.pack(p)
            if flexible:
                out.append(0)  # tagged fields of the partitions struct
    out += _I64.pack(value.last_update_ms)
    out += _I64.pack(value.start_ms)
    if flexible:
        out.append(0)
    return bytes(out)


def decode_txn_value(buf: bytes | bytearray | memoryview | None) -> TxnLogValue | None:
    """The value, or None for a tombstone. Bytes after the last field are ignored, as Kafka does."""
    if buf is None:
        return None
    version = _version(buf)
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise TxnLogFormatError(f"unknown transaction log value version {version}")
    r = _Reader(buf, 2, flexible=version >= _FLEXIBLE_VALUE_VERSION)
    producer_id = r.i64()
    producer_epoch = r.i16()
    timeout_ms = r.i32()
    status = r.i8()
    try:
        state = TxnState(status)
    except ValueError:
        raise TxnLogFormatError(f"unknown transaction state id {status}") from None
    partitions: dict[str, list[int]] = {}
    n = r.array_len(nullable=True)
    for _ in range(max(n, 0)):
        topic = r.string()
        ids = [r.i32() for _ in range(r.array_len())]
        r.skip_tagged_fields()
        partitions.setdefault(topic, []).extend(ids)
    last_update = r.i64()
    start = r.i64()
    r.skip_tagged_fields()
    if state == TxnState.EMPTY:
        partitions = {}  # Kafka ignores them for Empty
    return TxnLogValue(producer_id, producer_epoch, timeout_ms, state, partitions, last_update, start)


# ------------------------------------------------------------------------------------------------
# Low-level helpers


def _version(buf: bytes | bytearray | memoryview) -> int:
    if len(buf) < 2:
        raise TxnLogFormatError("record shorter than its version prefix")
    return _I16.unpack_from(buf, 0)[0]


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _array_len(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        _uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def _string(out: bytearray, s: str, flexible: bool) -> None:
    data = s.encode("utf-8")
    if flexible:
        _uvarint(out, len(data) + 1)
    else:
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes is longer than 32767")
        out += _I16.pack(len(data))
    out += data


class _Reader:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int, flexible: bool) -> None:
        self.buf = memoryview(buf)
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise TxnLogFormatError("record runs past its end")
        v = self.buf[self.pos:end]
        self.pos = end
        return v

    def i8(self) -> int:
        return _I8.unpack(self._take(1))[0]

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            if shift > 28:
                raise TxnLogFormatError("unsigned varint longer than 5 bytes")
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7

    def string(self) -> str:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            raise TxnLogFormatError("non-nullable string is null")
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as e:
            raise TxnLogFormatError(f"string is not UTF-8: {e}") from None

    def array_len(self, nullable: bool = False) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            if not nullable:
                raise TxnLogFormatError("non-nullable array is null")
            return -1
        if n > len(self.buf) - self.pos:
            raise TxnLogFormatError(f"array of {n} elements cannot fit in the record")
        return n

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())
