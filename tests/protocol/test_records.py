"""Record batches v2: cross-checked against kafka-python's independent codec in both directions,
in-place patching, validation, recovery scans and a mutation fuzz of the decoders."""

from __future__ import annotations

import mmap
import random
import struct
import time
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import cramjam
import kafka.codec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from protocol.compression import compress
from protocol.exceptions import CorruptRecordError, ProtocolError
from protocol.records import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BATCH_HEADER_SIZE,
    BATCH_LENGTH_OFFSET,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    BatchBuilder,
    BatchView,
    CompressionType,
    InvalidRecordError,
    NewRecord,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
    iter_batches,
    parse_control_record,
    scan_valid_prefix,
    single_batch,
    whole_batches_size,
)
from protocol.varint import encode_varint

CODECS = list(CompressionType)


@pytest.fixture(autouse=True)
def _kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # kafka-python wants python-snappy for raw blocks; cramjam provides them. Its xerial framing
    # stays its own, independent of ours.
    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)
    yield


# --- helpers ------------------------------------------------------------------------------------


def sample_records(n: int = 20, base_ts: int = 1_700_000_000_000) -> list[NewRecord]:
    """Compressible records with every shape of key, value and header."""
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else b"key-%d" % i
        value = None if i % 7 == 3 else b"value %d " % i * (i % 4 + 3)
        headers = [("trace", b"t%d" % i), ("empty", b""), ("null", None), ("ünï", b"\x00\xff")][: i % 5]
        # Out-of-order timestamps give negative deltas against the first record.
        out.append(NewRecord(key, value, base_ts + (i * 37) % 11 - 5, headers))
    return out


def kafka_python_batch(
    records: Sequence[NewRecord],
    codec: int,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    builder = MemoryRecordsBuilder(
        magic=2,
        compression_type=codec,
        batch_size=1 << 24,
        transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for r in records:
        assert builder.append(r.timestamp, r.key, r.value, list(r.headers)) is not None
    builder.close()
    return bytes(builder.buffer())


def kafka_python_view(data: bytes | bytearray) -> DefaultRecordBatch:
    batches = list(MemoryRecords(bytes(data)))
    assert len(batches) == 1
    return batches[0]


def as_tuples(records: Sequence[object]) -> list[tuple]:
    """Record-like objects (ours or kafka-python's) reduced to comparable tuples."""
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in records]


def assert_same_batch(view: BatchView, theirs: DefaultRecordBatch) -> None:
    header = view.header()
    assert header.base_offset == view.base_offset == theirs.base_offset
    assert header.batch_length + LOG_OVERHEAD == view.size == theirs.size_in_bytes
    assert header.partition_leader_epoch == view.partition_leader_epoch == theirs.leader_epoch
    assert header.magic == view.magic == theirs.magic == 2
    assert header.crc == view.crc == theirs.crc
    assert header.attributes == view.attributes == theirs.attributes
    assert header.last_offset_delta == view.last_offset_delta == theirs.last_offset_delta
    assert view.last_offset == theirs.last_offset
    assert view.next_offset == theirs.next_offset
    assert view.compression == theirs.compression_type
    assert view.timestamp_type == theirs.timestamp_type
    assert view.is_transactional == theirs.is_transactional
    assert view.is_control == theirs.is_control_batch
    assert header.base_timestamp == view.base_timestamp == theirs.first_timestamp
    assert header.max_timestamp == view.max_timestamp == theirs.max_timestamp
    assert header.producer_id == view.producer_id == theirs.producer_id
    assert view.has_producer_id == theirs.has_producer_id()
    assert header.producer_epoch == view.producer_epoch == theirs.producer_epoch
    assert header.base_sequence == view.base_sequence == theirs.base_sequence
    assert view.last_sequence == theirs.last_sequence
    assert header.records_count == view.records_count == theirs.records_count


def patch(buf: bytearray, fmt: str, offset: int, value: int, *, fix_crc: bool = True) -> bytearray:
    """Overwrite one header field, by default keeping the CRC valid so only the field is wrong."""
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        BatchView(buf).update_crc()
    return buf


# --- kafka-python -> us ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "producer",
    [
        {},
        {"producer_id": 4242, "producer_epoch": 3, "base_sequence": 2**31 - 5},
        {"producer_id": 77, "producer_epoch": 0, "base_sequence": 0, "transactional": True},
    ],
    ids=["plain", "idempotent", "transactional"],
)
def test_kafka_python_batches_decode(codec: CompressionType, producer: dict[str, int]) -> None:
    records = sample_records()
    data = kafka_python_batch(records, codec, **producer)
    view = BatchView(data)
    assert view.compression == codec  # the payload is compressible, so the codec was applied
    assert view.verify_crc()
    view.validate()
    theirs = kafka_python_view(data)
    assert_same_batch(view, theirs)
    ours = list(view.records())
    assert as_tuples(ours) == as_tuples(list(theirs))
    assert [(r.key, r.value, r.timestamp, list(r.headers)) for r in records] == [
        (r.key, r.value, r.timestamp, r.headers) for r in ours
    ]
    assert [r.offset for r in ours] == list(range(len(records)))


def test_kafka_python_multi_batch_buffer() -> None:
    records = sample_records(8)
    chunks = [
        kafka_python_batch(records[i : i + 3], codec)
        for i, codec in zip(range(0, 8, 3), (0, 1, 4), strict=True)
    ]
    data = b"".join(chunks)
    views = list(iter_batches(data))
    assert [v.size for v in views] == [len(c) for c in chunks]
    assert [v.pos for v in views] == [0, len(chunks[0]), len(chunks[0]) + len(chunks[1])]
    assert all(v.verify_crc() for v in views)
    assert sum(v.records_count for v in views) == 8


# --- us -> kafka-python ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"producer_id": 9001, "producer_epoch": 12, "base_sequence": 40, "partition_leader_epoch": 5},
        {
            "producer_id": 1,
            "producer_epoch": 0,
            "base_sequence": 0,
            "is_transactional": True,
            "base_offset": 2**40,
        },
    ],
    ids=["plain", "idempotent", "transactional"],
)
def test_our_batches_decode_in_kafka_python(codec: CompressionType, options: dict[str, int]) -> None:
    records = sample_records()
    data = build_batch(records, compression=codec, **options)
    theirs = kafka_python_view(data)
    assert theirs.validate_crc()
    view = BatchView(data)
    assert_same_batch(view, theirs)
    assert view.compression == codec
    assert view.base_offset == options.get("base_offset", 0)
    assert view.partition_leader_epoch == options.get("partition_leader_epoch", -1)
    assert view.base_timestamp == records[0].timestamp
    assert view.max_timestamp == max(r.timestamp for r in records)
    view.validate()
    assert as_tuples(list(view.records())) == as_tuples(list(theirs))


HEADERS = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=3)
RECORDS = st.lists(
    st.builds(
        NewRecord,
        key=st.none() | st.binary(max_size=30),
        value=st.none() | st.binary(max_size=120),
        timestamp=st.integers(0, 2**42),
        headers=HEADERS,
        offset_delta=st.none(),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RECORDS, st.sampled_from(CODECS))
def test_hypothesis_round_trips_both_ways(records: list[NewRecord], codec: CompressionType) -> None:
    ours = build_batch(records, compression=codec, base_offset=1000)
    theirs_view = kafka_python_view(ours)
    assert theirs_view.validate_crc()
    decoded = list(BatchView(ours).records())
    assert as_tuples(decoded) == as_tuples(list(theirs_view))
    assert [(r.key, r.value, r.timestamp, list(r.headers)) for r in records] == [
        (r.key, r.value, r.timestamp, r.headers) for r in decoded
    ]

    theirs = kafka_python_batch(records, codec)
    view = BatchView(theirs)
    view.validate()
    assert_same_batch(view, kafka_python_view(theirs))
    assert as_tuples(list(view.records())) == as_tuples(list(kafka_python_view(theirs)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=10, unique=True), st.sampled_from(CODECS))
def test_offset_gaps_as_left_by_compaction(deltas: list[int], codec: CompressionType) -> None:
    deltas.sort()
    records = [NewRecord(b"k", b"v%d" % d, 1000 + d, (), d) for d in deltas]
    data = build_batch(records, compression=codec, base_offset=500, last_offset_delta=deltas[-1] + 3)
    view = BatchView(data)
    assert view.last_offset == 500 + deltas[-1] + 3
    assert [r.offset for r in view.records()] == [500 + d for d in deltas]
    assert [r.offset for r in kafka_python_view(data)] == [500 + d for d in deltas]
    view.validate_structure(from_client=False)
    if len(deltas) != deltas[-1] + 4:
        with pytest.raises(InvalidRecordError, match="inconsistent"):
            view.validate_structure()


# --- control batches ------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_control_batches(commit: bool) -> None:
    data = build_control_batch(
        commit=commit,
        producer_id=31337,
        producer_epoch=4,
        coordinator_epoch=17,
        timestamp=1_650_000_000_000,
        base_offset=88,
        partition_leader_epoch=6,
    )
    view = BatchView(data)
    assert view.is_control and view.is_transactional
    assert view.compression == CompressionType.NONE
    assert view.timestamp_type == TimestampType.CREATE_TIME
    assert (view.base_offset, view.last_offset, view.records_count) == (88, 88, 1)
    assert (view.producer_id, view.producer_epoch, view.base_sequence) == (31337, 4, -1)
    assert view.partition_leader_epoch == 6
    (record,) = view.records()
    assert record.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert record.value == struct.pack(">hi", 0, 17)
    assert parse_control_record(record) == ("COMMIT" if commit else "ABORT", 17)

    theirs = kafka_python_view(data)
    assert theirs.validate_crc() and theirs.is_control_batch and theirs.is_transactional
    assert_same_batch(view, theirs)
    (marker,) = list(theirs)
    assert (marker.commit, marker.abort, marker.version) == (commit, not commit, 0)

    view.validate_structure(from_client=False)
    with pytest.raises(InvalidRecordError, match="control"):
        view.validate_structure()


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5), ("COMMIT", 5)),
        # Newer versions parse as version 0 (fields are only ever appended).
        (struct.pack(">hhh", 1, 0, 9), struct.pack(">hiq", 3, 8, 0), ("ABORT", 8)),
        (None, struct.pack(">hi", 0, 5), InvalidRecordError),
        (b"\x00\x00\x00", struct.pack(">hi", 0, 5), InvalidRecordError),
        (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 5), InvalidRecordError),
        (struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 5), InvalidRecordError),  # KRaft LeaderChange
        (struct.pack(">hh", 0, 1), None, InvalidRecordError),
        (struct.pack(">hh", 0, 1), b"\x00\x00\x00", InvalidRecordError),
        (struct.pack(">hh", 0, 1), struct.pack(">hi", -2, 5), InvalidRecordError),
    ],
)
def test_parse_control_record(key: bytes | None, value: bytes | None, expected: object) -> None:
    record = Record(0, 0, key, value, [])
    if isinstance(expected, tuple):
        assert parse_control_record(record) == expected
    else:
        with pytest.raises(CorruptRecordError):
            parse_control_record(record)


# --- building options -----------------------------------------------------------------------------


def test_builder_defaults_and_options() -> None:
    before = time.time_ns() // 1_000_000
    data = build_batch([(b"k", b"v"), (None, None, None, [("h", None)])])
    after = time.time_ns() // 1_000_000
    view = BatchView(data)
    first, second = view.records()
    assert before <= first.timestamp == second.timestamp == view.max_timestamp <= after
    assert (view.producer_id, view.producer_epoch, view.base_sequence, view.partition_leader_epoch) == (
        -1,
        -1,
        -1,
        -1,
    )
    assert not view.has_producer_id and view.last_sequence == -1
    assert second.headers == [("h", None)]

    explicit = BatchView(build_batch([(b"k", b"v", 5000)], base_timestamp=4000))
    assert explicit.base_timestamp == 4000 and next(explicit.records()).timestamp == 5000

    lat = BatchView(
        build_batch(
            [(b"k", b"v", 5000), (b"k", b"v", 6000)],
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            log_append_time=9999,
            compression=CompressionType.LZ4,
        )
    )
    assert lat.timestamp_type == TimestampType.LOG_APPEND_TIME and lat.max_timestamp == 9999
    assert [r.timestamp for r in lat.records()] == [9999, 9999]
    assert [r.timestamp for r in kafka_python_view(lat.tobytes())] == [9999, 9999]

    horizon = BatchView(build_batch([(b"k", None, 7000)], delete_horizon_ms=6500))
    assert horizon.has_delete_horizon and horizon.delete_horizon_ms == 6500 == horizon.base_timestamp
    assert next(horizon.records()).timestamp == 7000
    assert BatchView(data).delete_horizon_ms is None

    empty = BatchView(build_batch([], base_offset=10, last_offset_delta=4, base_timestamp=123))
    assert (empty.records_count, empty.last_offset, empty.max_timestamp) == (0, 14, 123)
    assert list(empty.records()) == []
    empty.validate(from_client=False)
    with pytest.raises(InvalidRecordError, match="count"):
        empty.validate_structure()
    assert list(kafka_python_view(empty.tobytes())) == []


def test_batch_builder_incremental() -> None:
    builder = BatchBuilder(compression=CompressionType.ZSTD, compression_level=10, base_offset=7)
    sizes = [builder.estimated_size]
    for i in range(5):
        assert builder.append(b"k", b"x" * 100, 1000 + i) == i
        sizes.append(builder.estimated_size)
    assert sizes == sorted(sizes) and sizes[0] == BATCH_HEADER_SIZE
    assert builder.records_count == 5
    data = builder.build()
    assert len(data) < sizes[-1]
    assert [r.offset for r in BatchView(data).records()] == [7, 8, 9, 10, 11]


def test_builder_argument_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        build_batch([])
    with pytest.raises(ValueError, match="offset delta"):
        build_batch([NewRecord(b"a", b"b", 1, (), 3), NewRecord(b"a", b"b", 1, (), 3)])
    with pytest.raises(ValueError, match="codec"):
        BatchBuilder(compression=6)
    with pytest.raises(ValueError, match="last_offset_delta"):
        build_batch([(b"a", b"b", 1), (b"a", b"b", 1)], last_offset_delta=0)
    with pytest.raises(ValueError, match="only one"):
        BatchBuilder(base_timestamp=1, delete_horizon_ms=2)


def test_last_sequence_wraps_like_java() -> None:
    view = BatchView(
        build_batch([(b"k", b"v", 1)] * 10, producer_id=5, producer_epoch=0, base_sequence=2**31 - 3)
    )
    assert view.last_sequence == 6 == kafka_python_view(view.tobytes()).last_sequence


# --- in-place patching ----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_offset_and_leader_epoch_patch_keeps_crc(codec: CompressionType) -> None:
    original = kafka_python_batch(sample_records(), codec, producer_id=3, producer_epoch=1, base_sequence=0)
    buf = bytearray(original)
    view = BatchView(buf)
    view.set_base_offset(123_456_789_012)
    view.set_partition_leader_epoch(42)
    assert buf[ATTRIBUTES_OFFSET:] == original[ATTRIBUTES_OFFSET:]  # nothing under the CRC moved
    assert view.verify_crc()
    view.validate()
    theirs = kafka_python_view(buf)
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.leader_epoch) == (123_456_789_012, 42)
    assert [r.offset for r in view.records()] == [123_456_789_012 + i for i in range(20)]


def test_offset_assignment_across_a_produce_buffer_through_a_memoryview() -> None:
    backing = bytearray(b"".join(build_batch(sample_records(n)) for n in (3, 5, 2)))
    next_offset = 1000
    for view in iter_batches(memoryview(backing)):
        view.set_base_offset(next_offset)
        next_offset = view.next_offset
    assert next_offset == 1010
    assert [b.base_offset for b in MemoryRecords(bytes(backing))] == [1000, 1003, 1008]
    assert all(b.validate_crc() for b in MemoryRecords(bytes(backing)))


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD])
def test_log_append_time_rewrite_recomputes_crc(codec: CompressionType) -> None:
    buf = bytearray(
        build_batch(sample_records(), compression=codec, producer_id=8, producer_epoch=0, base_sequence=0)
    )
    view = BatchView(buf)
    view.set_log_append_time(1_800_000_000_000)
    assert view.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert view.max_timestamp == 1_800_000_000_000
    assert view.compression == codec and view.is_transactional is False
    assert view.verify_crc()
    assert {r.timestamp for r in view.records()} == {1_800_000_000_000}
    theirs = kafka_python_view(buf)
    assert theirs.validate_crc()
    assert theirs.timestamp_type == 1
    assert {r.timestamp for r in theirs} == {1_800_000_000_000}

    # Back to CreateTime: the records' own timestamps return.
    view.set_max_timestamp(TimestampType.CREATE_TIME, 5)
    assert view.verify_crc() and view.timestamp_type == TimestampType.CREATE_TIME
    assert [r.timestamp for r in view.records()] == [r.timestamp for r in sample_records()]


def test_set_max_timestamp_is_a_no_op_when_unchanged() -> None:
    buf = bytearray(build_batch(sample_records()))
    before = bytes(buf)
    view = BatchView(buf)
    view.set_max_timestamp(TimestampType.CREATE_TIME, view.max_timestamp)
    assert bytes(buf) == before


def test_views_over_a_writable_mmap_leave_no_exports(tmp_path: Path) -> None:
    data = build_batch(sample_records(), compression=CompressionType.SNAPPY) + build_batch(
        sample_records(4), base_offset=20
    )
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    with open(path, "r+b") as f:
        mapped = mmap.mmap(f.fileno(), 0)
        views = list(iter_batches(mapped))
        for view in views:
            assert view.verify_crc()
            view.set_base_offset(view.base_offset + 50)
            view.set_log_append_time(77)
            list(view.records())
        assert scan_valid_prefix(mapped).batch_count == 2
        # Closing fails with BufferError if any memoryview of the map were still alive.
        mapped.close()
    assert all(b.validate_crc() for b in MemoryRecords(path.read_bytes()))
    assert [b.base_offset for b in MemoryRecords(path.read_bytes())] == [50, 70]
    assert [b.max_timestamp for b in MemoryRecords(path.read_bytes())] == [77, 77]


def test_whole_batches_size_stops_before_a_partial_tail() -> None:
    """What a follower appends of a fetch response: the whole batches, not the one the size limit cut."""
    a, b = build_batch(sample_records(3)), build_batch(sample_records(4), base_offset=3)
    data = a + b
    assert whole_batches_size(b"") == 0
    assert whole_batches_size(data) == len(data)
    for cut in (1, 11, 12, 60, len(a) - 1):
        assert whole_batches_size(data[:cut]) == 0
    for cut in (len(a), len(a) + 1, len(a) + 11, len(a) + 12, len(data) - 1):
        assert whole_batches_size(memoryview(data)[:cut]) == len(a)
    tiny = bytearray(data)
    struct.pack_into(">i", tiny, len(a) + 8, 10)  # the second batch's batchLength below a header
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        whole_batches_size(tiny)


def test_read_only_buffers_refuse_writes() -> None:
    view = BatchView(build_batch(sample_records(2)))
    with pytest.raises(TypeError):
        view.set_base_offset(1)


# --- iteration, framing and validation errors -------------------------------------------------------


def test_iter_batches_ranges_and_partial_tail() -> None:
    a, b = build_batch(sample_records(3)), build_batch(sample_records(4), base_offset=3)
    data = a + b
    assert [v.base_offset for v in iter_batches(data, len(a))] == [3]
    assert [v.base_offset for v in iter_batches(data, 0, len(a))] == [0]
    assert list(iter_batches(data, len(data))) == []
    for cut in (len(a) + 1, len(a) + 11, len(a) + 12, len(a) + 60, len(data) - 1):
        assert [v.base_offset for v in iter_batches(data[:cut], allow_partial_tail=True)] == [0]
        with pytest.raises(CorruptRecordError):
            list(iter_batches(data[:cut]))
    for start, end in ((5, 2), (-1, None), (0, len(data) + 1)):
        with pytest.raises(ValueError):
            list(iter_batches(data, start, end))
        with pytest.raises(ValueError):
            scan_valid_prefix(data, start, end)
    with pytest.raises(ValueError):
        BatchView(data, 0, len(data) + 1)
    assert single_batch(a).records_count == 3
    with pytest.raises(InvalidRecordError, match="more than one"):
        single_batch(data)
    with pytest.raises(InvalidRecordError, match="no record batch"):
        single_batch(b"")


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        (lambda b: b[:60], CorruptRecordError, "truncated|only"),
        (lambda b: b[:-1], CorruptRecordError, "only"),
        (
            lambda b: patch(b, ">i", BATCH_LENGTH_OFFSET, -1, fix_crc=False),
            CorruptRecordError,
            "below the minimum",
        ),
        (
            lambda b: patch(b, ">i", BATCH_LENGTH_OFFSET, 48, fix_crc=False),
            CorruptRecordError,
            "below the minimum",
        ),
        (lambda b: patch(b, ">i", BATCH_LENGTH_OFFSET, 2**31 - 1, fix_crc=False), CorruptRecordError, "only"),
        (lambda b: patch(b, ">b", MAGIC_OFFSET, 1, fix_crc=False), InvalidRecordError, "magic v1"),
        (lambda b: patch(b, ">b", MAGIC_OFFSET, 3, fix_crc=False), CorruptRecordError, "magic"),
    ],
)
def test_framing_errors(mutate: Callable[[bytearray], bytearray], error: type[Exception], match: str) -> None:
    data = mutate(bytearray(build_batch(sample_records(3))))
    with pytest.raises(error, match=match):
        BatchView(data)
    with pytest.raises(error, match=match):
        list(iter_batches(data))
    result = scan_valid_prefix(data)
    assert (result.valid_bytes, result.batch_count, result.last_offset) == (0, 0, -1)
    assert result.stop_reason


def test_bad_crc_is_detected_anywhere_under_it_and_nowhere_else() -> None:
    data = build_batch(sample_records(3), compression=CompressionType.GZIP)
    for pos in (ATTRIBUTES_OFFSET, MAX_TIMESTAMP_OFFSET, RECORDS_OFFSET, len(data) - 1):
        buf = bytearray(data)
        buf[pos] ^= 0x10
        view = BatchView(buf)
        assert not view.verify_crc()
        with pytest.raises(CorruptRecordError, match="crc"):
            view.ensure_valid_crc()
        with pytest.raises(CorruptRecordError, match="crc"):
            view.validate()
        assert scan_valid_prefix(buf).stop_reason == "at position 0: CRC mismatch"
    buf = bytearray(data)
    buf[3] ^= 0xFF  # baseOffset: outside the CRC by design
    assert BatchView(buf).verify_crc()


@pytest.mark.parametrize(
    ("fmt", "offset", "value", "from_client", "match"),
    [
        (">i", RECORDS_COUNT_OFFSET, -1, False, "invalid record count"),
        (">i", RECORDS_COUNT_OFFSET, 4, False, "4 records but only 3 offsets"),
        (">i", RECORDS_COUNT_OFFSET, 2, True, "inconsistent"),
        (">i", RECORDS_COUNT_OFFSET, 0, True, "count for record batch: 0"),
        (">i", LAST_OFFSET_DELTA_OFFSET, -1, False, "negative lastOffsetDelta"),
        (">i", LAST_OFFSET_DELTA_OFFSET, 5, True, "inconsistent"),
        (">h", ATTRIBUTES_OFFSET, 6, False, "unknown compression codec id 6"),
        (">q", PRODUCER_ID_OFFSET, 12, True, "sequence"),
    ],
)
def test_structure_errors(fmt: str, offset: int, value: int, from_client: bool, match: str) -> None:
    buf = patch(bytearray(build_batch(sample_records(3))), fmt, offset, value)
    view = BatchView(buf)
    assert view.verify_crc()
    with pytest.raises(CorruptRecordError, match=match) as info:
        view.validate_structure(from_client=from_client)
    expected_code = 2 if "codec" in match else 87
    assert info.value.error_code == expected_code


def test_uncompressed_count_must_fit_in_the_bytes() -> None:
    buf = bytearray(build_batch([(b"", b"", 0)]))
    patch(buf, ">i", LAST_OFFSET_DELTA_OFFSET, 10**6)
    patch(buf, ">i", RECORDS_COUNT_OFFSET, 10**6)
    with pytest.raises(InvalidRecordError, match="declares 1000000 records"):
        BatchView(buf).validate_structure()


def test_sequence_check_only_for_producer_batches() -> None:
    ok = BatchView(build_batch(sample_records(2), producer_id=1, producer_epoch=0, base_sequence=0))
    ok.validate()
    buf = patch(bytearray(ok.tobytes()), ">i", BASE_SEQUENCE_OFFSET, -1)
    with pytest.raises(InvalidRecordError, match="sequence"):
        BatchView(buf).validate_structure()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("count", [0, 19, 21, 500])
def test_records_count_mismatch_when_iterating(codec: CompressionType, count: int) -> None:
    buf = patch(
        bytearray(build_batch(sample_records(20), compression=codec)), ">i", RECORDS_COUNT_OFFSET, count
    )
    with pytest.raises(InvalidRecordError, match="records|batch size"):
        list(BatchView(buf).records())


@pytest.mark.parametrize("codec", [c for c in CODECS if c != CompressionType.NONE])
def test_garbage_compressed_payload(codec: CompressionType) -> None:
    for garbage in (b"", b"\x00", b"definitely not compressed data" * 3):
        data = bytearray(build_batch(sample_records(3)))
        del data[RECORDS_OFFSET:]
        data += garbage
        patch(data, ">i", BATCH_LENGTH_OFFSET, len(data) - LOG_OVERHEAD, fix_crc=False)
        patch(data, ">h", ATTRIBUTES_OFFSET, int(codec))
        view = BatchView(data)
        assert view.verify_crc()
        # A lone zero byte is a valid empty raw snappy block: then the record count catches it.
        with pytest.raises(CorruptRecordError, match=f"{codec.name.lower()}|ends early"):
            list(view.records())


def raw_batch(records_section: bytes, count: int) -> bytes:
    """A header around hand-written record bytes (valid CRC) to test the record parser."""
    data = bytearray(build_batch([], last_offset_delta=max(count - 1, 0), base_timestamp=0))
    data += records_section
    patch(data, ">i", BATCH_LENGTH_OFFSET, len(data) - LOG_OVERHEAD, fix_crc=False)
    return bytes(patch(data, ">i", RECORDS_COUNT_OFFSET, count))


def record_bytes(body: bytes, size_delta: int = 0) -> bytes:
    return encode_varint(len(body) + size_delta) + body


GOOD_BODY = (
    b"\x00"
    + encode_varint(0)
    + encode_varint(0)
    + encode_varint(1)
    + b"k"
    + encode_varint(1)
    + b"v"
    + b"\x00"
)


@pytest.mark.parametrize(
    ("section", "match"),
    [
        (record_bytes(GOOD_BODY, +1), "record size|ends early"),
        (record_bytes(GOOD_BODY, -1), "record size|exceeds"),
        (record_bytes(GOOD_BODY) + b"\x00", "batch size"),
        (encode_varint(0), "invalid record size 0"),
        (encode_varint(-5) + GOOD_BODY, "invalid record size -5"),
        (b"\xff\xff\xff\xff\xff\xff", "malformed record"),
        (
            record_bytes(b"\x00\x00\x00" + encode_varint(50) + b"k" + encode_varint(1) + b"v\x00"),
            "key length 50",
        ),
        (record_bytes(b"\x00\x00\x00\x01" + encode_varint(50) + b"v\x00"), "value length 50"),
        (record_bytes(b"\x00\x00\x00\x01\x01" + encode_varint(-1)), "number of record headers -1"),
        (
            record_bytes(b"\x00\x00\x00\x01\x01" + encode_varint(1) + encode_varint(-1) + b"\x01"),
            "header key length -1",
        ),
        (record_bytes(b"\x00\x00\x00\x01\x01" + encode_varint(1) + encode_varint(1) + b"\xff\x01"), "UTF-8"),
        (
            record_bytes(
                b"\x00\x00\x00\x01\x01" + encode_varint(1) + encode_varint(1) + b"h" + encode_varint(9)
            ),
            "header value",
        ),
        (record_bytes(b"\x00\x00\x00\x01\x01" + encode_varint(3)), "headers but ends early"),
    ],
)
def test_malformed_records(section: bytes, match: str) -> None:
    view = BatchView(raw_batch(section, 1))
    assert view.verify_crc()
    with pytest.raises(InvalidRecordError, match=match):
        list(view.records())


def test_hand_written_record_parses() -> None:
    (record,) = BatchView(raw_batch(record_bytes(GOOD_BODY), 1)).records()
    assert record == Record(0, 0, b"k", b"v", [])


# --- recovery scan ------------------------------------------------------------------------------------


def three_batches() -> tuple[bytes, list[int]]:
    parts = [
        build_batch(sample_records(3), base_offset=0),
        build_batch(
            sample_records(4, base_ts=2_000_000_000_000), base_offset=3, compression=CompressionType.LZ4
        ),
        build_batch(sample_records(2), base_offset=7),
    ]
    return b"".join(parts), [len(p) for p in parts]


def test_scan_clean_log() -> None:
    data, sizes = three_batches()
    result = scan_valid_prefix(data)
    assert result.valid_bytes == len(data)
    assert (result.batch_count, result.first_offset, result.last_offset) == (3, 0, 8)
    assert result.max_timestamp == max(r.timestamp for r in sample_records(4, base_ts=2_000_000_000_000))
    assert result.offset_of_max_timestamp == 6
    assert result.stop_reason is None
    assert scan_valid_prefix(b"") == (0, 0, -1, -1, -1, -1, None)
    second = scan_valid_prefix(data, sizes[0], sizes[0] + sizes[1])
    assert (second.valid_bytes, second.batch_count, second.first_offset, second.last_offset) == (
        sizes[1],
        1,
        3,
        6,
    )


def test_scan_stops_at_every_torn_tail() -> None:
    data, sizes = three_batches()
    boundary = sizes[0] + sizes[1]
    for cut in range(boundary, len(data)):
        result = scan_valid_prefix(data[:cut])
        assert (result.valid_bytes, result.batch_count, result.last_offset) == (boundary, 2, 6)
        assert (result.stop_reason is None) == (cut == boundary)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b, at: b.__setitem__(at + RECORDS_OFFSET, b[at + RECORDS_OFFSET] ^ 1), "CRC"),
        (lambda b, at: b.__setitem__(slice(at, len(b)), bytes(len(b) - at)), "below the minimum"),
        (lambda b, at: struct.pack_into(">q", b, at, 1), "does not follow"),
        (lambda b, at: struct.pack_into(">b", b, at + MAGIC_OFFSET, 0), "magic"),
        (lambda b, at: struct.pack_into(">i", b, at + BATCH_LENGTH_OFFSET, 10**6), "cut off"),
    ],
)
def test_scan_stops_at_the_first_bad_batch(damage: Callable[[bytearray, int], None], reason: str) -> None:
    data, sizes = three_batches()
    buf = bytearray(data)
    boundary = sizes[0] + sizes[1]
    damage(buf, boundary)
    result = scan_valid_prefix(buf)
    assert (result.valid_bytes, result.batch_count, result.last_offset) == (boundary, 2, 6)
    assert result.stop_reason is not None and reason in result.stop_reason
    assert result.stop_reason.startswith(f"at position {boundary}:")


def test_scan_rejects_structurally_inconsistent_batches_with_valid_crc() -> None:
    data, sizes = three_batches()
    buf = bytearray(data)
    boundary = sizes[0] + sizes[1]
    struct.pack_into(">i", buf, boundary + RECORDS_COUNT_OFFSET, 50)
    BatchView(buf, boundary).update_crc()
    result = scan_valid_prefix(buf)
    assert result.valid_bytes == boundary and "50 records" in (result.stop_reason or "")


# --- mutation fuzz ---------------------------------------------------------------------------------


def _corpus() -> list[bytes]:
    recs = sample_records(6)
    corpus = [
        build_batch(recs, compression=codec, producer_id=5, producer_epoch=1, base_sequence=9)
        for codec in CODECS
    ]
    corpus.append(
        build_control_batch(commit=True, producer_id=5, producer_epoch=1, coordinator_epoch=2, timestamp=3)
    )
    corpus.append(kafka_python_batch(recs, CompressionType.GZIP))
    corpus.append(
        build_batch(recs[:2]) + build_batch(recs[2:4], base_offset=2, compression=CompressionType.LZ4)
    )
    return corpus


def _exercise(data: bytes | bytearray) -> None:
    """Everything a broker might do with untrusted bytes; only protocol errors may escape."""
    result = scan_valid_prefix(data)  # must never raise
    assert 0 <= result.valid_bytes <= len(data)
    try:
        for view in iter_batches(data, allow_partial_tail=len(data) % 2 == 0):
            header = view.header()
            assert header.batch_length + LOG_OVERHEAD == view.size
            _ = (
                view.last_offset,
                view.timestamp_type,
                view.is_control,
                view.last_sequence,
                view.has_producer_id,
            )
            repr(view)
            view.verify_crc()
            try:
                view.validate_structure(from_client=False)
            except CorruptRecordError:
                pass
            for record in view.records(max_output_size=1 << 20):
                if view.is_control:
                    try:
                        parse_control_record(record)
                    except CorruptRecordError:
                        pass
    except ProtocolError:
        pass


def test_mutation_fuzz() -> None:
    rng = random.Random(20240601)
    corpus = _corpus()
    for base in corpus:
        _exercise(base)
    cases = 0
    while cases < 30_000:
        base = rng.choice(corpus)
        buf = bytearray(base)
        kind = cases % 5
        if kind == 0:  # a few random byte flips anywhere
            for _ in range(rng.randrange(1, 4)):
                buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif kind == 1:  # random bytes in the records section, CRC fixed so parsing goes deep
            for _ in range(rng.randrange(1, 6)):
                buf[rng.randrange(RECORDS_OFFSET, len(buf))] = rng.randrange(256)
            BatchView(buf, 0, BatchView(buf).size).update_crc()
        elif kind == 2:  # truncation
            del buf[rng.randrange(len(buf)) :]
        elif kind == 3:  # header field overwritten with a random or boundary value
            offset, fmt = rng.choice(
                [
                    (BATCH_LENGTH_OFFSET, ">i"),
                    (RECORDS_COUNT_OFFSET, ">i"),
                    (LAST_OFFSET_DELTA_OFFSET, ">i"),
                    (ATTRIBUTES_OFFSET, ">h"),
                    (CRC_OFFSET, ">I"),
                ]
            )
            bits = struct.calcsize(fmt) * 8
            low = 0 if fmt == ">I" else -(1 << (bits - 1))
            value = rng.choice([low, -1, 0, 1, 7, 60, len(buf), rng.randrange(low, low + (1 << bits))])
            struct.pack_into(fmt, buf, offset, max(value, low))
        else:  # splice: a slice of one batch pasted into another
            other = rng.choice(corpus)
            start = rng.randrange(len(other))
            at = rng.randrange(len(buf))
            buf[at : at + rng.randrange(1, 40)] = other[start : start + rng.randrange(1, 40)]
        _exercise(buf)
        cases += 1


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=200))
def test_random_bytes_never_escape(data: bytes) -> None:
    _exercise(data)
    _exercise(build_batch(sample_records(2)) + data)


def test_records_section_recompressed_garbage() -> None:
    # Compressed batches whose *decompressed* bytes are garbage: valid CRC, valid compression.
    rng = random.Random(5)
    plain = build_batch(sample_records(6))
    section = bytearray(plain[RECORDS_OFFSET:])
    for i in range(300):
        mutated = bytearray(section)
        for _ in range(rng.randrange(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        codec = CODECS[1 + i % 4]
        data = bytearray(plain[:RECORDS_OFFSET]) + compress(codec, mutated)
        patch(data, ">i", BATCH_LENGTH_OFFSET, len(data) - LOG_OVERHEAD, fix_crc=False)
        patch(data, ">h", ATTRIBUTES_OFFSET, int(codec))
        _exercise(data)
