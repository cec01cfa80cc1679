"""``__transaction_state`` keys and values, byte for byte as Apache Kafka 3.9 writes and reads them.

The expected bytes below are what Kafka's generated ``TransactionLogKey``/``TransactionLogValue`` classes
produce (``tests/txn/java/TxnLogProbe.java`` prints them); ``test_against_kafka`` re-runs that probe
against the Kafka jars and also lets Kafka's ``TransactionLog.readTxnRecordValue`` decode our bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.offsets_topic_format import java_string_hashcode
from broker.txn_log_format import (
    TxnLogFormatError,
    TxnLogValue,
    TxnState,
    UnknownTxnKey,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
    partition_for,
)

PROBE = Path(__file__).parent / "java" / "TxnLogProbe.java"

KEYS = {
    "my-txn": "000000066d792d74786e",
    "tx-\u00e9\u4e2d": "0000000874782dc3a9e4b8ad",
}
# (version, state) -> Kafka's bytes for the probe's sample value
VALUES = {
    (0, 0): "000000000000000003e800030000ea6000ffffffff0000018bcfe5687bffffffffffffffff",
    (0, 1): "000000000000000003e900030000ea60010000000200016100000002000000000000000200016200000001"
            "000000010000018bcfe5687b0000018bcfe56800",
    (0, 4): "000000000000000003ec00030000ea60040000000200016100000002000000000000000200016200000001"
            "000000010000018bcfe5687b0000018bcfe56800",
    (1, 0): "000100000000000003e800030000ea6000000000018bcfe5687bffffffffffffffff00",
    (1, 2): "000100000000000003ea00030000ea60020302610300000000000000020002620200000001000000018bcfe5687b"
            "0000018bcfe5680000",
    (1, 5): "000100000000000003ed00030000ea60050302610300000000000000020002620200000001000000018bcfe5687b"
            "0000018bcfe5680000",
}


def sample(state: int) -> TxnLogValue:
    parts = {} if state == 0 else {"b": [1], "a": [2, 0]}  # order does not matter: written sorted
    return TxnLogValue(producer_id=1000 + state, producer_epoch=3, timeout_ms=60000, state=TxnState(state),
                       partitions=parts, last_update_ms=1700000000123, start_ms=-1 if state == 0 else 1700000000000)


@pytest.mark.parametrize("txn_id", list(KEYS))
def test_key_bytes(txn_id: str) -> None:
    assert encode_txn_key(txn_id).hex() == KEYS[txn_id]
    assert decode_txn_key(bytes.fromhex(KEYS[txn_id])) == txn_id


def test_unknown_key_version_is_reported_not_raised() -> None:
    assert decode_txn_key(b"\x00\x05\x00\x01x") == UnknownTxnKey(5)


@pytest.mark.parametrize(("version", "state"), list(VALUES))
def test_value_bytes(version: int, state: int) -> None:
    v = sample(state)
    assert encode_txn_value(v, version).hex() == VALUES[(version, state)]
    back = decode_txn_value(bytes.fromhex(VALUES[(version, state)]))
    assert back is not None
    assert back.state == TxnState(state)
    assert (back.producer_id, back.producer_epoch, back.timeout_ms) == (1000 + state, 3, 60000)
    assert (back.last_update_ms, back.start_ms) == (v.last_update_ms, v.start_ms)
    assert {t: sorted(ps) for t, ps in back.partitions.items()} == {t: sorted(ps) for t, ps in v.partitions.items()}


def test_default_version_is_what_kafka_39_writes() -> None:
    assert encode_txn_value(sample(1)).hex() == VALUES[(0, 1)]


def test_tombstone_and_errors() -> None:
    assert decode_txn_value(None) is None
    with pytest.raises(TxnLogFormatError):
        decode_txn_value(b"\x00\x07" + b"\x00" * 30)  # unknown version
    with pytest.raises(TxnLogFormatError):
        decode_txn_value(bytes.fromhex(VALUES[(0, 1)])[:20])  # truncated
    bad_state = bytearray.fromhex(VALUES[(0, 0)])
    bad_state[16] = 9
    with pytest.raises(TxnLogFormatError):
        decode_txn_value(bytes(bad_state))
    with pytest.raises(ValueError):
        encode_txn_value(TxnLogValue(1, 0, 1000, TxnState.EMPTY, {"a": [0]}))


def test_trailing_bytes_are_ignored() -> None:
    assert decode_txn_value(bytes.fromhex(VALUES[(0, 1)]) + b"extra") is not None


def test_partition_for_is_kafkas_hash() -> None:
    # Utils.abs(String.hashCode) % n, with Utils.abs(Integer.MIN_VALUE) == 0.
    assert java_string_hashcode("my-txn") == -1061187895  # Java: "my-txn".hashCode()
    assert partition_for("my-txn", 50) == 1061187895 % 50 == 45
    assert java_string_hashcode("polygenelubricants") == -2**31
    assert partition_for("polygenelubricants", 50) == 0


def test_state_names_are_kafkas() -> None:
    assert [s.kafka_name for s in TxnState] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                                "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert TxnState.from_name("PrepareCommit") is TxnState.PREPARE_COMMIT
    assert TxnState.from_name("Nope") is None


def test_against_kafka() -> None:
    from tests import kafka_dist

    classes = kafka_dist.compile_java(PROBE)
    out = kafka_dist.run_java("TxnLogProbe", extra_classpath=classes).split()
    it = iter(out)
    keys, values = [], {}
    for word in it:
        if word == "key":
            keys.append(next(it))
        elif word == "value":
            version, state, hexed = int(next(it)), int(next(it)), next(it)
            values[(version, state)] = hexed
    assert keys == list(KEYS.values())
    for (version, state), hexed in values.items():
        assert encode_txn_value(sample(state), version).hex() == hexed, (version, state)
    # Kafka reads what we write.
    ours = encode_txn_value(sample(2)).hex()
    text = kafka_dist.run_java("TxnLogProbe", "decode", "my-txn", ours, extra_classpath=classes)
    assert "producerId=1002" in text and "state=PrepareCommit" in text and "txnTimeoutMs=60000" in text
    assert "a-0" in text and "a-2" in text and "b-1" in text
