"""Message formats v0/v1 (protocol/legacy_records.py) against kafka-python's independent implementation.

kafka-python's ``LegacyRecordBatchBuilder`` writes what its producers send with old ``api_version``
settings; its ``MemoryRecords`` reads what its consumers receive from old Fetch versions. Our parser
must read the first and our builder must write what the second reads. (Kafka's own Java classes
check the same in test_crosscheck_kafka_java.py, lz4 in v0 with its odd header checksum included:
kafka-python needs the xxhash module for that, which is not installed.)
"""

from __future__ import annotations

import random

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from protocol.compression import CompressionType
from protocol.legacy_records import (
    LegacyFormatError,
    LegacyRecord,
    build_message_set,
    iter_deep,
    iter_shallow,
    xxh32,
)

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
# v0 with lz4 needs xxhash in kafka-python (not installed): the Java cross-check covers it.
FORMATS = [(magic, codec) for magic in (0, 1) for codec in CODECS if (magic, codec) != (0, "lz4")]


def _records(rnd: random.Random, n: int) -> list[tuple[bytes | None, bytes | None, int]]:
    def blob() -> bytes | None:
        return None if rnd.random() < 0.2 else rnd.randbytes(rnd.randrange(0, 40))
    return [(blob(), blob(), 1_700_000_000_000 + rnd.randrange(10_000)) for _ in range(n)]


def _flatten(data: bytes) -> list[tuple[int, int, int, bytes | None, bytes | None]]:
    out = []
    for m in iter_shallow(data):
        assert m.is_valid
        for r in (iter_deep(m) if m.is_compressed else [m]):
            assert r.is_valid
            out.append((r.offset, r.magic, r.timestamp, r.key, r.value))
    return out


@pytest.mark.parametrize(("magic", "codec"), FORMATS)
def test_we_read_what_kafka_python_writes(magic: int, codec: str) -> None:
    rnd = random.Random(f"{magic}{codec}")
    for n in (1, 3, 40):
        recs = _records(rnd, n)
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 20)
        for i, (k, v, ts) in enumerate(recs):
            assert builder.append(i, timestamp=ts, key=k, value=v) is not None
        data = bytes(builder.build())
        got = _flatten(data)
        want_ts = [ts if magic else -1 for _k, _v, ts in recs]
        assert [(o, m) for o, m, *_ in got] == [(i, magic) for i in range(n)]
        assert [t for _o, _m, t, _k, _v in got] == want_ts
        assert [(k, v) for *_x, k, v in got] == [(k, v) for k, v, _ts in recs]
        shallow = list(iter_shallow(data))
        assert len(shallow) == (n if codec == "none" else 1)


@pytest.mark.parametrize(("magic", "codec"), FORMATS)
@pytest.mark.parametrize("log_append_time", [None, 1_650_000_000_123])
def test_kafka_python_reads_what_we_write(magic: int, codec: str, log_append_time: int | None) -> None:
    rnd = random.Random(f"{magic}{codec}{log_append_time}")
    recs = _records(rnd, 25)
    first = 1000 + rnd.randrange(100)
    data = build_message_set([LegacyRecord(first + i, ts, k, v) for i, (k, v, ts) in enumerate(recs)],
                             magic=magic, codec=CODECS[codec], log_append_time=log_append_time)
    got = []
    mr = MemoryRecords(data)
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        for r in batch:
            got.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value))
    if magic == 0:
        want = [(first + i, None, None, k, v) for i, (k, v, _ts) in enumerate(recs)]
    else:
        tt = 1 if log_append_time is not None else 0
        want = [(first + i, log_append_time if log_append_time is not None else ts, tt, k, v)
                for i, (k, v, ts) in enumerate(recs)]
    assert got == want
    # and ours reads it back
    assert [(o, k, v) for o, _m, _t, k, v in _flatten(data)] == [(first + i, k, v) for i, (k, v, _ts) in enumerate(recs)]


def test_compressed_v1_wrapper_carries_the_last_offset_and_max_timestamp() -> None:
    data = build_message_set([LegacyRecord(7, 50, b"a", b"1"), LegacyRecord(8, 90, None, b"2"),
                              LegacyRecord(9, 70, b"c", None)], magic=1, codec=CompressionType.GZIP)
    (wrapper,) = iter_shallow(data)
    assert (wrapper.offset, wrapper.timestamp, wrapper.key, wrapper.codec) == (9, 90, None, CompressionType.GZIP)
    assert [(m.offset, m.timestamp) for m in iter_deep(wrapper)] == [(7, 50), (8, 90), (9, 70)]


def test_errors_carry_kafkas_codes() -> None:
    good = build_message_set([LegacyRecord(0, 5, b"k", b"v")], magic=1)
    short = bytearray(good)
    short[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(LegacyFormatError) as info:
        list(iter_shallow(bytes(short)))
    assert info.value.code == 2  # CORRUPT_MESSAGE
    assert "less than the minimum record overhead (14)" in info.value.message
    bad_magic = bytearray(good)
    bad_magic[16] = 3
    with pytest.raises(LegacyFormatError, match="Invalid magic found in record: 3"):
        list(iter_shallow(bytes(bad_magic)))
    # a truncated last entry is ignored, as Kafka's input stream does
    assert len(list(iter_shallow(good + good[:20]))) == 1
    flipped = bytearray(good)
    flipped[-1] ^= 1
    (m,) = iter_shallow(bytes(flipped))
    assert not m.is_valid


def test_zstd_wrapper_and_empty_wrapper_are_invalid_records() -> None:
    plain = build_message_set([LegacyRecord(0, 1, None, b"x")], magic=1, codec=CompressionType.GZIP)
    (w,) = iter_shallow(plain)
    zstd = bytearray(plain)
    zstd[17] = (zstd[17] & ~7) | 4
    (wz,) = iter_shallow(bytes(zstd))
    with pytest.raises(LegacyFormatError) as info:
        iter_deep(wz)
    assert info.value.code == 87
    assert w.describe().startswith("LegacyRecordBatch(offset=0, Record(magic=1, attributes=1, compression=gzip, crc=")


def test_xxh32_reference_vectors() -> None:
    # Known values of the reference implementation.
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
