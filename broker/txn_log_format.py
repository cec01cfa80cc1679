"""The record formats of the ``__transaction_state`` topic, byte for byte as Apache Kafka writes them.

Every record key and value starts with an int16 schema version (the layouts are
``protocol/schemas/TransactionLogKey.json`` and ``TransactionLogValue.json``):

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

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from broker.offsets_topic_format import decode_record, read_version
from broker.offsets_topic_format import partition_for as _partition_for
from protocol.schema import MessageType, encode_versioned, message_type

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
_MAX_VALUE_VERSION = 1


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
# The records, encoded by the schema compiler (protocol/schemas/TransactionLog*.json)

_KEY = message_type("TransactionLogKey")
_VALUE = message_type("TransactionLogValue")


def _version(buf: bytes | bytearray | memoryview) -> int:
    return read_version(buf, TxnLogFormatError)


def _decode(mt: MessageType, buf: bytes | bytearray | memoryview, version: int) -> Any:
    return decode_record(mt, buf, version, TxnLogFormatError)


# ------------------------------------------------------------------------------------------------
# Keys


def encode_txn_key(transactional_id: str) -> bytes:
    if len(transactional_id.encode("utf-8")) > 0x7FFF:
        raise ValueError("transactional id is longer than 32767 bytes")
    return encode_versioned(_KEY, _KEY(transactional_id=transactional_id), TXN_KEY_VERSION)


def decode_txn_key(buf: bytes | bytearray | memoryview) -> str | UnknownTxnKey:
    version = _version(buf)
    if version != TXN_KEY_VERSION:
        return UnknownTxnKey(version)
    return _decode(_KEY, buf, version).transactional_id


# ------------------------------------------------------------------------------------------------
# Values


def encode_txn_value(value: TxnLogValue, version: int = TXN_VALUE_VERSION) -> bytes:
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise ValueError(f"transaction log values have versions 0-1, not {version}")
    if value.state == TxnState.EMPTY and any(value.partitions.values()):
        raise ValueError("an Empty transaction cannot have partitions")
    partitions = None
    if value.state != TxnState.EMPTY:  # the array is null exactly when the state is Empty
        partitions = [_VALUE.PartitionsSchema(topic=t, partition_ids=sorted(ps))  # type: ignore[attr-defined]
                      for t, ps in sorted(value.partitions.items()) if ps]
    msg = _VALUE(producer_id=value.producer_id, producer_epoch=value.producer_epoch,
                 transaction_timeout_ms=value.timeout_ms, transaction_status=int(value.state),
                 transaction_partitions=partitions, transaction_last_update_timestamp_ms=value.last_update_ms,
                 transaction_start_timestamp_ms=value.start_ms)
    return encode_versioned(_VALUE, msg, version)


def decode_txn_value(buf: bytes | bytearray | memoryview | None) -> TxnLogValue | None:
    """The value, or None for a tombstone. Bytes after the last field are ignored, as Kafka does."""
    if buf is None:
        return None
    version = _version(buf)
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise TxnLogFormatError(f"unknown transaction log value version {version}")
    v = _decode(_VALUE, buf, version)
    try:
        state = TxnState(v.transaction_status)
    except ValueError:
        raise TxnLogFormatError(f"unknown transaction state id {v.transaction_status}") from None
    partitions: dict[str, list[int]] = {}
    if state != TxnState.EMPTY:  # Kafka ignores them for Empty
        for tp in v.transaction_partitions or ():
            partitions.setdefault(tp.topic, []).extend(tp.partition_ids)
    return TxnLogValue(v.producer_id, v.producer_epoch, v.transaction_timeout_ms, state, partitions,
                       v.transaction_last_update_timestamp_ms, v.transaction_start_timestamp_ms)
