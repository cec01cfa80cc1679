"""The produce validator on its own: Kafka's codes and messages, record errors, stamping, no copies."""

from __future__ import annotations

import os
import struct
import time

import crc32c
import lz4.frame
import pytest

import broker.log_validator as log_validator
from broker.log_validator import (
    ValidatedBatch,
    ValidationError,
    stamp_for_append,
    validate_produce_records,
)
from protocol.compression import CompressionType, compress
from protocol.errors import ErrorCode
from protocol.record_scan import scan_records, scan_records_python
from protocol.records import BatchView, InvalidRecordError, TimestampType, build_batch

NOW = int(time.time() * 1000)
_HEADER = struct.Struct(">qiibIhiqqqhii")
CODECS = list(CompressionType)


def validate(data: bytes | bytearray, **overrides: object) -> ValidatedBatch:
    kwargs: dict[str, object] = dict(
        topic_partition="t-0", max_message_bytes=1 << 20, timestamp_type="CreateTime",
        before_max_ms=1 << 62, after_max_ms=1 << 62, now_ms=NOW, compacted=False,
        max_decompressed_bytes=8 << 20)
    kwargs.update(overrides)
    return validate_produce_records(memoryview(bytearray(data)), **kwargs)  # type: ignore[arg-type]


def refused(data: bytes | bytearray, **overrides: object) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        validate(data, **overrides)
    return info.value


def raw_batch(section: bytes, *, count: int, codec: int = 0, last_delta: int | None = None,
              base_ts: int = NOW, max_ts: int = NOW, attributes: int | None = None) -> bytes:
    attrs = codec if attributes is None else attributes
    lod = count - 1 if last_delta is None else last_delta
    out = bytearray(_HEADER.pack(0, 49 + len(section), -1, 2, 0, attrs, lod, base_ts, max_ts, -1, -1, -1, count)
                    + section)
    struct.pack_into(">I", out, 17, crc32c.crc32c(out[21:]))
    return bytes(out)


def records(n: int, *, key: bytes | None = b"k", ts: int = NOW, headers: tuple = ()) -> bytes:
    return build_batch([(key, b"value %d" % i, ts, headers) for i in range(n)])[61:]


@pytest.mark.parametrize("codec", CODECS)
def test_good_batches_pass_with_their_max_timestamp(codec: CompressionType) -> None:
    data = build_batch([(b"k%d" % i, os.urandom(30), NOW - i, [("h", b"x")] if i % 2 else ()) for i in range(500)],
                       compression=codec)
    vb = validate(data)
    assert (vb.records_count, vb.size, vb.max_timestamp, vb.needs_rebuild) == (500, len(data), NOW, False)


def test_the_uncompressed_batch_is_validated_in_place() -> None:
    buf = bytearray(build_batch([(b"k", b"v", NOW)]) + b"\x00\x01")  # two ignored trailing bytes
    vb = validate_produce_records(memoryview(buf), topic_partition="t-0", max_message_bytes=1 << 20,
                                  timestamp_type="CreateTime", before_max_ms=1 << 62, after_max_ms=1 << 62,
                                  now_ms=NOW, compacted=False, max_decompressed_bytes=1 << 20)
    assert vb.data.obj is buf and len(vb.data) == len(buf) - 2  # a view of the request, trimmed


@pytest.mark.parametrize(("data", "code"), [
    (b"", ErrorCode.INVALID_RECORD),
    (struct.pack(">qi", 0, 10) + bytes(60), ErrorCode.CORRUPT_MESSAGE),
    (build_batch([(b"k", b"v")])[:-1], ErrorCode.INVALID_RECORD),
    (build_batch([(b"k", b"v")]) * 2, ErrorCode.INVALID_RECORD),
    (bytes(build_batch([(b"k", b"v")])[:16]) + b"\x03" + build_batch([(b"k", b"v")])[17:], ErrorCode.CORRUPT_MESSAGE),
    (bytes(build_batch([(b"k", b"v")])[:16]) + b"\x01" + build_batch([(b"k", b"v")])[17:], ErrorCode.INVALID_RECORD),
    (build_batch([(b"k", b"v")], base_offset=7), ErrorCode.INVALID_RECORD),
    (build_batch([(b"k", b"v" * 40000)]), ErrorCode.MESSAGE_TOO_LARGE),
    (raw_batch(records(1), count=1, codec=6), ErrorCode.UNKNOWN_SERVER_ERROR),
    (raw_batch(records(3), count=3, last_delta=1), ErrorCode.INVALID_RECORD),
    (raw_batch(records(2), count=3), ErrorCode.INVALID_RECORD),
    (raw_batch(records(4), count=3), ErrorCode.INVALID_RECORD),
    (raw_batch(records(1) + b"\x00", count=1), ErrorCode.INVALID_RECORD),
    (raw_batch(os.urandom(300), count=3, codec=1), ErrorCode.UNKNOWN_SERVER_ERROR),
    (raw_batch(compress(CompressionType.GZIP, os.urandom(300)), count=3, codec=1), ErrorCode.INVALID_RECORD),
    (raw_batch(lz4.frame.compress(bytes(200_000), block_linked=True), count=1, codec=3),
     ErrorCode.UNKNOWN_SERVER_ERROR),
], ids=["empty", "length-10-magic-0", "truncated", "two-batches", "magic-3", "magic-1", "base-offset-7",
        "too-large", "codec-6", "last-offset-delta-short", "fewer-records-than-count", "more-records-than-count",
        "trailing-byte", "gzip-not-gzip", "gzip-of-garbage", "lz4-linked-blocks"])
def test_kafka_error_codes(data: bytes, code: ErrorCode) -> None:
    err = refused(data, max_message_bytes=30000)
    assert err.code == code, err
    assert err.record_errors == []


def test_a_corrupt_crc_is_corrupt_message() -> None:
    data = bytearray(build_batch([(b"k", b"v")]))
    data[-1] ^= 1
    assert refused(data).code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", CODECS)
def test_keyless_records_on_a_compacted_topic_are_listed(codec: CompressionType) -> None:
    data = build_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")], compression=codec)
    err = refused(data, compacted=True)
    assert err.code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in err.record_errors] == [1, 3]
    assert err.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        "three errors at most: [RecordError(batchIndex=1, message='Compacted topic cannot accept message "
        "without key in topic partition t-0'), RecordError(batchIndex=3, message='Compacted topic cannot "
        "accept message without key in topic partition t-0')]")
    validate(build_batch([(b"a", b"1")], compression=codec), compacted=True)


@pytest.mark.parametrize("codec", CODECS)
def test_every_record_timestamp_is_checked(codec: CompressionType) -> None:
    # The first record is in range and sets baseTimestamp; a later, older one breaks the bound.
    data = build_batch([(b"a", b"1", NOW), (b"b", b"2", NOW - 10_000), (b"c", b"3", NOW + 10_000)],
                       compression=codec)
    err = refused(data, before_max_ms=5_000, after_max_ms=5_000)
    assert err.code == ErrorCode.INVALID_TIMESTAMP
    assert err.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in err.record_errors] == [1, 2]
    assert err.record_errors[0].message == (
        f"Timestamp {NOW - 10_000} of message with offset 1 is out of range. The timestamp should be within "
        f"[{NOW - 5_000}, {NOW + 5_000}]")


def test_no_timestamp_is_not_checked_but_log_append_time_from_a_producer_is_refused() -> None:
    validate(build_batch([(b"k", b"v", -1)], base_timestamp=-1), before_max_ms=1000)
    err = refused(raw_batch(records(2), count=2, attributes=0x08), timestamp_type="LogAppendTime")
    assert err.code == ErrorCode.INVALID_TIMESTAMP and [e.batch_index for e in err.record_errors] == [0, 1]
    assert "Producer should not set timestamp type to LogAppendTime" in err.record_errors[0].message


def test_a_producers_log_append_time_bit_on_a_create_time_topic() -> None:
    """Kafka checks the record timestamps (the batch's maxTimestamp under that bit) against the bounds,
    and refuses the bit only for records with no timestamp, whose timestamp it does not check."""
    stamped = raw_batch(records(2), count=2, attributes=0x08)
    assert validate(stamped).records_count == 2
    err = refused(raw_batch(records(2), count=2, attributes=0x08, max_ts=-1))
    assert err.code == ErrorCode.INVALID_TIMESTAMP and [e.batch_index for e in err.record_errors] == [0, 1]
    assert "Producer should not set timestamp type to LogAppendTime" in err.record_errors[0].message
    err = refused(raw_batch(records(2), count=2, attributes=0x08, max_ts=NOW - 10_000), before_max_ms=1000)
    assert err.code == ErrorCode.INVALID_TIMESTAMP and "is out of range" in err.record_errors[0].message


def test_record_framing_errors() -> None:
    for section in (
        b"\x7f" + bytes(8),                               # record length past the batch
        b"\x0c\x00\x00\x00\x01\x01\x01",                  # negative header count
        b"\x10\x00\x00\x00\x01\x01\x02\x01\x01",          # negative header key length
        b"\x18\x00" + b"\xff" * 10 + b"\x00\x01\x01\x00",  # varlong longer than 10 bytes
    ):
        assert refused(raw_batch(section, count=1)).code == ErrorCode.INVALID_RECORD, section


def test_a_bomb_is_refused_after_a_bounded_amount_of_work() -> None:
    giant = b"\xfe\xff\xff\x7f" + bytes(64 << 20)  # one record claiming about 128 MiB
    data = raw_batch(compress(CompressionType.ZSTD, giant), count=1, codec=CompressionType.ZSTD)
    err = refused(data)
    assert err.code == ErrorCode.INVALID_RECORD and "exceeds the bound" in str(err)
    zeros = raw_batch(compress(CompressionType.GZIP, bytes(64 << 20)), count=1, codec=CompressionType.GZIP)
    assert refused(zeros).code == ErrorCode.INVALID_RECORD


def test_compressed_offsets_not_counting_from_zero_need_a_rebuild() -> None:
    section = build_batch([(b"a", b"1", NOW, (), 0), (b"b", b"2", NOW, (), 2)])[61:]
    assert validate(raw_batch(compress(1, section), count=2, codec=1)).needs_rebuild
    assert not validate(raw_batch(section, count=2)).needs_rebuild  # uncompressed: stored as is, as Kafka


def test_bytes_after_an_lz4_frame_are_cut_off() -> None:
    frame = lz4.frame.compress(records(2), block_linked=False)
    vb = validate(raw_batch(frame + lz4.frame.compress(records(1), block_linked=False), count=2, codec=3))
    assert vb.size == 61 + len(frame) and BatchView(vb.data).verify_crc()
    assert [r.value for r in BatchView(vb.data).records()] == [b"value 0", b"value 1"]


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_stamping_sets_the_type_bit_max_timestamp_and_crc(timestamp_type: str) -> None:
    vb = validate(build_batch([(b"a", b"1", NOW - 5), (b"b", b"2", NOW - 9)]), timestamp_type=timestamp_type)
    stamp_for_append(vb, timestamp_type=timestamp_type, now_ms=NOW + 1)
    batch = BatchView(vb.data)
    assert batch.verify_crc()
    if timestamp_type == "LogAppendTime":
        assert (batch.timestamp_type, batch.max_timestamp) == (TimestampType.LOG_APPEND_TIME, NOW + 1)
        assert [r.timestamp for r in batch.records()] == [NOW + 1, NOW + 1]
    else:
        assert (batch.timestamp_type, batch.max_timestamp) == (TimestampType.CREATE_TIME, NOW - 5)


@pytest.mark.parametrize("header_max", [NOW - 5, NOW - 9, NOW + 100, -1],
                         ids=["the-largest", "older", "newer", "unset"])
def test_a_create_time_batch_is_restamped_unless_its_header_holds_the_largest_timestamp(header_max: int) -> None:
    # The validator's common case tells the stamping whether maxTimestamp is already the records'
    # largest; a producer that says otherwise has it set, with the CRC, as Kafka's setMaxTimestamp does.
    data = bytearray(build_batch([(b"a", b"1", NOW - 5), (b"b", b"2", NOW - 9)]))
    struct.pack_into(">q", data, 35, header_max)
    vb = validate(_recrc(data))
    assert vb.create_time_stamped == (header_max == NOW - 5)
    before = bytes(vb.data)
    stamp_for_append(vb, timestamp_type="CreateTime", now_ms=NOW)
    batch = BatchView(vb.data)
    assert batch.verify_crc() and batch.max_timestamp == NOW - 5
    assert (bytes(vb.data) == before) == (header_max == NOW - 5)


def test_scanner_partial_mode_stops_before_an_incomplete_record() -> None:
    section = records(3)
    cut = len(section) - 3
    scan = scan_records(section[:cut], 0, cut, 0, 3, partial=True)
    assert scan.next_index == 2
    rest = section[scan.pos:]
    assert scan_records(rest, 0, len(rest), 2, 3).next_index == 3
    with pytest.raises(InvalidRecordError):
        scan_records(section[:cut], 0, cut, 0, 3)


def _recrc(data: bytearray) -> bytearray:
    struct.pack_into(">I", data, 17, crc32c.crc32c(data[21:]))
    return data


@pytest.mark.parametrize("codec", CODECS)
def test_mutated_batches_only_ever_raise_validation_errors(codec: CompressionType) -> None:
    """Flipped bytes, cuts and insertions anywhere (CRC fixed up so the records get read): the
    validator answers each with a Kafka error code or accepts it, and never fails any other way."""
    import random

    rnd = random.Random(1234 + int(codec))
    base = bytearray(build_batch([(b"k%d" % i if i % 5 else None, os.urandom(rnd.randrange(0, 90)), NOW,
                                   [("h", b"v")] if i % 3 == 0 else ()) for i in range(40)], compression=codec))
    codes = set()
    for _ in range(400):
        data = bytearray(base)
        for _ in range(rnd.randrange(1, 4)):
            kind = rnd.randrange(3)
            at = rnd.randrange(21 if rnd.random() < 0.8 else 0, len(data))
            if kind == 0:
                data[at] = rnd.randrange(256)
            elif kind == 1:
                del data[at:at + rnd.randrange(1, 8)]
            else:
                data[at:at] = os.urandom(rnd.randrange(1, 8))
        if len(data) >= 12:
            struct.pack_into(">i", data, 8, len(data) - 12)
        if len(data) >= 61:
            _recrc(data)
        for yield_gil in (False, True):
            try:
                validate(data, compacted=True, yield_gil=yield_gil)
                codes.add(ErrorCode.NONE)
            except ValidationError as e:
                codes.add(e.code)
    assert codes - {ErrorCode.NONE}  # the mutations did get refused, with Kafka's codes
    assert codes <= {ErrorCode.NONE, ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_TIMESTAMP,
                     ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.MESSAGE_TOO_LARGE}, codes


@pytest.fixture(params=["compiled", "python"])
def scanner(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Validation with the compiled scanner the broker runs, then with the pure-Python fallback."""
    if request.param == "compiled":
        assert log_validator.COMPILED_SCANNER, log_validator.RECORD_SCANNER
    else:
        monkeypatch.setattr(log_validator, "scan_records", scan_records_python)
        monkeypatch.setattr(log_validator, "COMPILED_SCANNER", False)
        monkeypatch.setattr(log_validator, "check_plain_batch", None)
    return request.param


def _answer(data: bytes | bytearray, **overrides: object) -> tuple[object, ...]:
    """What the broker would answer and store, comparable across scanners."""
    try:
        vb = validate(data, **overrides)
    except ValidationError as e:
        return ("refused", e.code, e.message, e.error_message, [(r.batch_index, r.message) for r in e.record_errors])
    return ("accepted", bytes(vb.data), vb.records_count, vb.max_timestamp, vb.needs_rebuild)


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4, CompressionType.GZIP])
def test_both_scanners_give_the_same_answers(codec: CompressionType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Good and mutated batches: the compiled path (the one-call check of a plain batch included) and
    the pure-Python one refuse or accept them alike."""
    import random

    assert log_validator.COMPILED_SCANNER, log_validator.RECORD_SCANNER
    rnd = random.Random(99 + int(codec))
    base = bytearray(build_batch([(b"k%d" % i if i % 7 else None, os.urandom(rnd.randrange(0, 200)), NOW - i,
                                   [("h", b"v")] if i % 3 == 0 else ()) for i in range(60)], compression=codec))
    cases = [bytes(base)]
    for _ in range(150):
        data = bytearray(base)
        at = rnd.randrange(61, len(data))
        if rnd.random() < 0.5:
            data[at] ^= 1 << rnd.randrange(8)
        else:
            del data[at:]
            struct.pack_into(">i", data, 8, len(data) - 12)
        cases.append(bytes(_recrc(data)))
    kinds = set()
    for data in cases:
        for overrides in ({}, {"compacted": True, "yield_gil": True}, {"before_max_ms": 30}):
            compiled = _answer(data, **overrides)
            with monkeypatch.context() as m:
                m.setattr(log_validator, "scan_records", scan_records_python)
                m.setattr(log_validator, "COMPILED_SCANNER", False)
                m.setattr(log_validator, "check_plain_batch", None)
                python = _answer(data, **overrides)
            assert compiled == python, (data.hex(), overrides)
            kinds.add(compiled[0] if compiled[0] == "accepted" else compiled[1])
    assert {"accepted", ErrorCode.INVALID_RECORD} <= kinds, kinds


def test_validation_in_pieces_sees_what_one_scan_sees(scanner: str) -> None:
    data = build_batch([(b"k" if i != 2500 else None, b"v" * 20, NOW - i) for i in range(3000)])
    one = refused(data, compacted=True)
    pieces = refused(data, compacted=True, yield_gil=True)
    assert [e.batch_index for e in one.record_errors] == [e.batch_index for e in pieces.record_errors] == [2500]
    assert validate(data, yield_gil=True).max_timestamp == validate(data).max_timestamp == NOW
