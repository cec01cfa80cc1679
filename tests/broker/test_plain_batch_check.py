"""The one-call check of a plain produced batch against the validator it shortcuts.

``protocol._record_scan.check_plain_batch`` accepts the common produce (one uncompressed v2 batch that
passes every rule) and answers None for anything else, which ``validate_produce_records`` then judges
in Python. Its one promise: it never says yes where the Python validator says no or stores something
else. Each input here goes through both, the validator with the shortcut switched off being the
reference: valid batches of many shapes, every rule broken once, hostile records, bit flips, cuts and
insertions, under different topic settings.
"""

from __future__ import annotations

import os
import random
import struct
import time
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import broker.log_validator as log_validator
from broker.log_validator import (
    ValidationError,
    accept_as_produced,
    keeps_plain_batches_as_produced,
    stamp_for_append,
    validate_produce_records,
)
from protocol.compression import CompressionType
from protocol.record_scan import check_plain_batch
from protocol.records import NewRecord, build_batch

# Imported here, not while drawing: importing that module defines its @given tests, which Hypothesis
# refuses inside a running @given (nested_given) when this file runs without tests/protocol collected.
from tests.protocol.test_record_scan import hostile_records

NOW = int(time.time() * 1000)
DEFAULTS: dict[str, Any] = dict(topic_partition="t-0", max_message_bytes=1 << 20, timestamp_type="CreateTime",
                                before_max_ms=(1 << 63) - 1, after_max_ms=(1 << 63) - 1, now_ms=NOW,
                                compacted=False, max_decompressed_bytes=8 << 20)
SETTINGS: list[dict[str, Any]] = [
    {},
    {"compacted": True},
    {"timestamp_type": "LogAppendTime"},
    {"before_max_ms": 1000, "after_max_ms": 1000},
    {"max_message_bytes": 200},
]


def reference(data: bytes, **overrides: Any) -> tuple[Any, ...]:
    """The Python validator's answer, with the one-call check switched off."""
    kwargs = {**DEFAULTS, **overrides}
    saved = log_validator.check_plain_batch
    log_validator.check_plain_batch = None
    try:
        vb = validate_produce_records(memoryview(bytearray(data)), **kwargs)
    except ValidationError as e:
        return ("refused", e.code)
    finally:
        log_validator.check_plain_batch = saved
    return ("accepted", bytes(vb.data), vb.records_count, vb.max_timestamp, vb.needs_rebuild, vb.compressed)


def shortcut(data: bytes, **overrides: Any) -> tuple[int, int] | None:
    kwargs = {**DEFAULTS, **overrides}
    assert check_plain_batch is not None, "protocol._record_scan was not built"
    return check_plain_batch(memoryview(bytearray(data)), kwargs["max_message_bytes"], kwargs["now_ms"],
                             kwargs["before_max_ms"], kwargs["after_max_ms"],
                             kwargs["timestamp_type"] == "CreateTime", kwargs["compacted"])


def stored_as_is(data: bytes, **overrides: Any) -> bool:
    """What ``accept_as_produced`` says, checked against the validator and the stamping after it: a
    count means the validator accepts the batch with that count and stores its bytes unchanged."""
    kwargs = {**DEFAULTS, **overrides}
    if kwargs["timestamp_type"] != "CreateTime":
        return False
    count = accept_as_produced(memoryview(bytearray(data)), kwargs["max_message_bytes"], kwargs["now_ms"],
                               kwargs["before_max_ms"], kwargs["after_max_ms"], kwargs["compacted"])
    if count < 0:
        return False
    vb = validate_produce_records(memoryview(bytearray(data)), **kwargs)
    stamp_for_append(vb, timestamp_type="CreateTime", now_ms=kwargs["now_ms"])
    assert (vb.records_count, vb.size, bytes(vb.data)) == (count, len(data), data), (data.hex(), overrides)
    return True


def agree(data: bytes, **overrides: Any) -> str:
    """The shortcut's answer is None or exactly what the validator accepts; says which it was."""
    got = shortcut(data, **overrides)
    expected = reference(data, **overrides)
    as_is = stored_as_is(data, **overrides)
    if got is None:
        assert not as_is
    if got is None:
        return "declined"
    assert expected[0] == "accepted", (data.hex(), overrides, expected)
    assert expected[1:] == (data, got[0], got[1], False, False), (data.hex(), overrides, got, expected)
    return "accepted"


def batch(n: int = 5, *, key: bytes | None = b"k", ts: int = NOW, producer_id: int = -1, base_sequence: int = -1,
          headers: tuple[tuple[str, bytes | None], ...] = (), compression: CompressionType = CompressionType.NONE,
          **kwargs: Any) -> bytes:
    recs = [NewRecord(key, b"value %d" % i, ts - i, headers, i) for i in range(n)]
    return build_batch(recs, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                       base_sequence=base_sequence, compression=compression, **kwargs)


def with_crc(data: bytes | bytearray) -> bytes:
    out = bytearray(data)
    struct.pack_into(">I", out, 17, crc32c.crc32c(out[21:]))
    return bytes(out)


def patched(data: bytes, fmt: str, at: int, value: int, *, recrc: bool = True) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return with_crc(out) if recrc else bytes(out)


def test_the_shortcut_is_built_and_validation_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a producer sends is accepted in the one call, and the validator returns its answer."""
    assert check_plain_batch is not None, "protocol._record_scan was not built"
    calls: list[Any] = []

    def spy(*args: Any) -> Any:
        calls.append(args)
        return check_plain_batch(*args)

    monkeypatch.setattr(log_validator, "check_plain_batch", spy)
    data = batch(147, producer_id=1000, base_sequence=0)
    vb = validate_produce_records(memoryview(bytearray(data)), **DEFAULTS)
    assert len(calls) == 1
    assert (vb.records_count, vb.max_timestamp, vb.size, bytes(vb.data)) == (147, NOW, len(data), data)
    assert shortcut(data) == (147, NOW)


@pytest.mark.parametrize("shape", [
    dict(n=1), dict(n=147, producer_id=7, base_sequence=0), dict(n=3, key=None), dict(n=4, headers=(("h", b"v"),)),
    dict(n=2, headers=(("h", None), ("i", b""))), dict(n=6, ts=0), dict(n=2, ts=-1), dict(n=3, ts=(1 << 62)),
    dict(n=5, is_transactional=True, producer_id=9, base_sequence=5),
])
@pytest.mark.parametrize("setting", range(len(SETTINGS)))
def test_valid_batches_agree(shape: dict[str, Any], setting: int) -> None:
    agree(batch(**shape), **SETTINGS[setting])


def test_the_common_batch_is_accepted_where_the_validator_accepts_it() -> None:
    assert agree(batch(10, producer_id=3, base_sequence=0)) == "accepted"
    assert agree(batch(10, key=None)) == "accepted"
    assert agree(batch(10), compacted=True) == "accepted"


def test_every_rule_broken_once_is_declined() -> None:
    """Each of these the validator refuses (or stores otherwise): the shortcut must say None to all."""
    good = batch(5, producer_id=3, base_sequence=0)
    broken = {
        "base offset not 0": patched(good, ">q", 0, 1, recrc=False),
        "batch length below 14": patched(good, ">i", 8, 13, recrc=False),
        "batch length past the end": patched(good, ">i", 8, len(good), recrc=False),
        "magic 1": patched(good, ">b", 16, 1, recrc=False),
        "magic 3": patched(good, ">b", 16, 3, recrc=False),
        "bad crc": patched(good, ">I", 17, (crc32c.crc32c(good[21:]) + 1) & 0xFFFFFFFF, recrc=False),
        "codec 7": patched(good, ">h", 21, 7),
        "control batch": patched(good, ">h", 21, 0x20),
        "log append time from a producer": patched(good, ">h", 21, 0x08),
        "negative last offset delta": patched(good, ">i", 23, -1),
        "count 0": patched(good, ">i", 57, 0),
        "count off by one": patched(good, ">i", 57, 6),
        "negative sequence": patched(good, ">i", 53, -1),
        "a record too few": with_crc(patched(patched(good, ">i", 57, 6), ">i", 23, 5)),
        "trailing bytes": good + b"\x00" * 3,
        "a second batch": good + good,
        "gzip": batch(5, compression=CompressionType.GZIP),
        "shorter than a header": good[:60],
    }
    for name, data in broken.items():
        assert shortcut(data) is None, name
        agree(data)
    assert reference(broken["bad crc"]) == ("refused", log_validator.ErrorCode.CORRUPT_MESSAGE)
    assert shortcut(batch(5, key=None), compacted=True) is None
    assert shortcut(batch(5, ts=NOW - 10_000), before_max_ms=1000) is None
    assert shortcut(batch(5, ts=NOW + 10_000), after_max_ms=1000) is None
    assert shortcut(good, max_message_bytes=len(good) - 1) is None
    assert shortcut(good, max_message_bytes=len(good)) == (5, NOW)


def test_what_is_stored_as_produced() -> None:
    """The produce path's shortcut takes only batches stored byte for byte as they came: a header whose
    maxTimestamp is not the records' largest is stamped by the validator's path instead."""
    assert keeps_plain_batches_as_produced("CreateTime", "producer")
    assert keeps_plain_batches_as_produced("CreateTime", "uncompressed")
    assert not keeps_plain_batches_as_produced("CreateTime", "gzip")
    assert not keeps_plain_batches_as_produced("LogAppendTime", "producer")
    good = batch(5, producer_id=3, base_sequence=0)
    assert stored_as_is(good)
    assert stored_as_is(good, compacted=True)
    late_header = patched(good, ">q", 35, NOW - 100)
    assert shortcut(late_header) == (5, NOW)
    assert not stored_as_is(late_header)
    assert reference(late_header)[0] == "accepted"
    vb = validate_produce_records(memoryview(bytearray(late_header)), **DEFAULTS)
    stamp_for_append(vb, timestamp_type="CreateTime", now_ms=NOW)
    assert bytes(vb.data) == good


def test_limits_beyond_64_bits_are_left_to_the_validator() -> None:
    data = batch(3)
    assert shortcut(data, after_max_ms=1 << 64) is None
    assert shortcut(data, max_message_bytes=-(1 << 70)) is None
    assert agree(data, after_max_ms=1 << 64) == "declined"
    with pytest.raises(TypeError):
        check_plain_batch(data, "big", 0, 0, 0, True, False)  # type: ignore[arg-type,misc]


def test_a_producers_log_append_time_bit_is_left_to_the_validator() -> None:
    """The topic's timestamp type decides what the bit means: accepted on a CreateTime topic when the
    batch's maxTimestamp is in bounds, refused on a LogAppendTime topic."""
    plain = batch(3)
    stamped = patched(plain, ">h", 21, 0x08)
    assert agree(plain, timestamp_type="LogAppendTime") == "accepted"
    assert shortcut(stamped, timestamp_type="LogAppendTime") is None
    assert shortcut(stamped) is None
    assert reference(stamped)[0] == "accepted"
    assert reference(stamped, timestamp_type="LogAppendTime")[0] == "refused"


def _mutations(data: bytes, rng: random.Random) -> list[bytes]:
    out = []
    for _ in range(120):
        b = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            kind = rng.randrange(4)
            at = rng.randrange(0 if rng.random() < 0.2 else 21, len(b))
            if kind == 0:
                b[at] ^= 1 << rng.randrange(8)
            elif kind == 1:
                del b[at:at + rng.randrange(1, 8)]
            elif kind == 2:
                b[at:at] = os.urandom(rng.randrange(1, 8))
            else:
                b[at] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF])
        if len(b) >= 12 and rng.random() < 0.8:
            struct.pack_into(">i", b, 8, len(b) - 12)
        if len(b) >= 61 and rng.random() < 0.9:
            b = bytearray(with_crc(b))
        out.append(bytes(b))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_mutated_batches_agree(seed: int) -> None:
    rng = random.Random(seed)
    good = batch(30, key=None if seed % 2 else b"key", producer_id=seed, base_sequence=0,
                 headers=(("h", b"v"),) if seed % 3 == 0 else ())
    seen = set()
    for data in _mutations(good, rng):
        for setting in SETTINGS:
            seen.add(agree(data, **setting))
    assert "declined" in seen


@st.composite
def hostile_batches(draw: st.DrawFn) -> bytes:
    """A v2 header with chosen fields over records that may lie, CRC right or wrong."""
    recs = draw(st.lists(hostile_records(), min_size=0, max_size=5))
    section = b"".join(recs)
    count = draw(st.sampled_from([len(recs), len(recs) + 1, max(len(recs) - 1, 0), 0, -1]))
    last_delta = draw(st.sampled_from([count - 1, count, -1]))
    attributes = draw(st.sampled_from([0, 0, 0, 0x08, 0x10, 0x20, 1, 4]))
    producer_id = draw(st.sampled_from([-1, 0, 5]))
    base_sequence = draw(st.sampled_from([-1, 0, 17]))
    base_ts = draw(st.sampled_from([NOW, 0, -1, NOW + 5000, (1 << 63) - 1, -(1 << 63)]))
    max_ts = draw(st.sampled_from([NOW, -1, base_ts]))
    head = struct.pack(">qiibIhiqqqhii", draw(st.sampled_from([0, 0, 0, 1])), 49 + len(section), -1, 2, 0,
                       attributes, last_delta, base_ts, max_ts, producer_id, 0, base_sequence, count)
    data = bytearray(head + section)
    if draw(st.integers(0, 9)) > 0:  # mostly a right CRC, so that the records get read
        data = bytearray(with_crc(data))
    return bytes(data) + draw(st.sampled_from([b"", b"", b"\x00", b"\x00" * 12]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_batches(), st.sampled_from(range(len(SETTINGS))))
def test_hostile_batches_agree(data: bytes, setting: int) -> None:
    agree(data, **SETTINGS[setting])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_agree(data: bytes) -> None:
    agree(data)
    if len(data) >= 61:
        agree(with_crc(data))
