"""The compiled record scanner against the pure-Python reference: same results, same errors, always.

``make test`` installs the project, which builds ``protocol._record_scan``; a missing extension here
is a failure, not a skip. Inputs are valid batches of every shape, records written field by field
with chosen varint encodings (5-byte and overlong varints, 10-byte varlongs, negative lengths,
INT32 extremes), and mutations of both: bit flips, truncations, inserted and overwritten bytes.
"""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.record_scan import SCANNER, RecordScan, scan_records, scan_records_python
from protocol.records import InvalidRecordError, build_batch

try:
    from protocol import _record_scan
except ImportError:  # reported by test_the_compiled_scanner_is_built_and_in_use
    _record_scan = None  # type: ignore[assignment]

scan_records_c = _record_scan.scan_records if _record_scan is not None else None
INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)
RECORDS_OFFSET = 61


def outcome(fn: Any, buf: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    try:
        result = fn(buf, *args, **kwargs)
    except InvalidRecordError as e:
        return ("error", type(e), str(e))
    assert type(result) is RecordScan
    return ("ok", tuple(result))


def agree(buf: Any, pos: int, end: int, first_index: int, count: int, **kwargs: Any) -> tuple[Any, ...]:
    """Both scanners' outcomes, which must be equal; returns the reference's."""
    assert scan_records_c is not None, "protocol._record_scan was not built"
    expected = outcome(scan_records_python, buf, pos, end, first_index, count, **kwargs)
    got = outcome(scan_records_c, buf, pos, end, first_index, count, **kwargs)
    assert got == expected, (bytes(buf[pos:end])[:200].hex(), pos, end, first_index, count, kwargs)
    return expected


def agree_all_ways(section: bytes, count: int) -> None:
    """Whole and partial scans, from the start, a few records in, and with counts off by one."""
    end = len(section)
    for n in {count, max(count - 1, 0), count + 1}:
        agree(section, 0, end, 0, n)
        agree(section, 0, end, 0, n, partial=True)
        agree(section, 0, end, 0, n, partial=True, max_record_size=16)
    # A prefix as partial mode sees it in a stream of decompressed chunks.
    for cut in sorted({0, 1, end // 3, end // 2, end - 1}):
        if 0 <= cut <= end:
            agree(section[:cut], 0, cut, 0, count, partial=True)
            agree(section[:cut], 0, cut, 0, count)


# --- writing records field by field ---------------------------------------------------------------


def varint(value: int, width: int | None = None) -> bytes:
    """Zigzag ``value``, in ``width`` bytes when given (an overlong encoding pads with zero groups)."""
    zz = value * 2 if value >= 0 else -value * 2 - 1
    groups = []
    while True:
        groups.append(zz & 0x7F)
        zz >>= 7
        if not zz:
            break
    if width is not None:
        groups += [0] * (width - len(groups))
    return bytes([g | 0x80 for g in groups[:-1]] + [groups[-1]])


def record(*, ts: int = 0, delta: int = 0, key: bytes | None = b"k", value: bytes | None = b"v",
           headers: tuple[tuple[bytes, bytes | None], ...] = (), widths: dict[str, int] | None = None,
           key_len: int | None = None, value_len: int | None = None, header_count: int | None = None,
           size: int | None = None, size_delta: int = 0) -> bytes:
    """One v2 record; lengths and the size may be overridden (lies), varint widths chosen per field."""
    w = widths or {}
    body = bytearray(b"\x00")
    body += varint(ts, w.get("ts"))
    body += varint(delta, w.get("delta"))
    klen = key_len if key_len is not None else (-1 if key is None else len(key))
    body += varint(klen, w.get("key")) + (key or b"")
    vlen = value_len if value_len is not None else (-1 if value is None else len(value))
    body += varint(vlen, w.get("value")) + (value or b"")
    body += varint(len(headers) if header_count is None else header_count, w.get("headers"))
    for hk, hv in headers:
        body += varint(len(hk)) + hk + varint(-1 if hv is None else len(hv)) + (hv or b"")
    declared = (len(body) if size is None else size) + size_delta
    return varint(declared, w.get("size")) + bytes(body)


def section_of(n: int, **fields: Any) -> bytes:
    return b"".join(record(delta=i, **fields) for i in range(n))


# --- the extension is there and is what validation uses -------------------------------------------


def test_the_compiled_scanner_is_built_and_in_use() -> None:
    assert _record_scan is not None, "protocol._record_scan did not build: is a C compiler and Python.h there?"
    assert scan_records is _record_scan.scan_records
    assert SCANNER.startswith("compiled")


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, "slice"])
def test_every_buffer_kind_is_read_in_place(kind: Any) -> None:
    section = build_batch([(b"k", b"v" * 70, 5, [("h", b"x")]) for _ in range(20)])[RECORDS_OFFSET:]
    if kind == "slice":
        buf: Any = memoryview(b"junk" + section + b"tail")[4:-4]
    else:
        buf = kind(section)
    result = agree(buf, 0, len(section), 0, 20)
    assert result[0] == "ok" and result[1][:2] == (len(section), 20)


def test_not_bytes_like_or_bad_arguments_are_type_and_value_errors() -> None:
    assert scan_records_c is not None
    with pytest.raises(TypeError):
        scan_records_c("not bytes", 0, 3, 0, 1)
    with pytest.raises(TypeError):
        scan_records_c(b"\x00", 0, 1, 0, 1, True)  # partial is keyword-only, as in the reference
    with pytest.raises(ValueError):
        scan_records_c(b"\x00", -1, 1, 0, 1)


# --- valid batches of every shape -----------------------------------------------------------------


SHAPES: list[tuple[str, list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]]]] = [
    ("one record", [(b"k", b"v", 0, [])]),
    ("null keys and values", [(None, None, 0, [])] * 30),
    ("empty keys and values", [(b"", b"", 0, [])] * 30),
    ("sizes of one, two and three varint bytes", [(b"k" * n, b"v" * (n * 3), 0, []) for n in (1, 20, 63, 64, 3000)]),
    ("values of 8 KiB and more", [(None, b"x" * 9000, 0, []), (b"k", b"y" * 70000, 0, [])]),
    ("headers", [(b"k", b"v", 0, [("a", b"1"), ("", None), ("long" * 40, b"z" * 300)])] * 10),
    ("timestamps far apart", [(b"k", b"v", t, []) for t in (0, -1, 1 << 40, -(1 << 40), 63, 64, 8191, 8192)]),
    ("many small records", [(None, b"ABCDEFGHIJ" * 10, 1_700_000_000_000 + i, []) for i in range(3000)]),
]


@pytest.mark.parametrize("shape", [s for _, s in SHAPES], ids=[n for n, _ in SHAPES])
def test_valid_batches_of_every_shape(shape: list[Any]) -> None:
    section = build_batch(shape)[RECORDS_OFFSET:]
    result = agree(section, 0, len(section), 0, len(shape))
    assert result[0] == "ok" and result[1][:2] == (len(section), len(shape))
    agree_all_ways(section, len(shape))


def test_scans_continue_from_any_record() -> None:
    shape = [(b"k" if i % 3 else None, b"v" * (i * 7), i * 1000, [("h", b"x")] * (i % 2)) for i in range(60)]
    section = build_batch(shape)[RECORDS_OFFSET:]
    pos, index = 0, 0
    while index < 60:
        step = agree(section, pos, len(section), index, min(60, index + 7))
        assert step[0] == "ok"
        pos, index = step[1][0], step[1][1]
    assert pos == len(section)


def test_release_gil_changes_nothing_but_who_may_run() -> None:
    section = build_batch([(None, b"x" * 100, i, []) for i in range(20000)])[RECORDS_OFFSET:]
    assert len(section) > 1 << 20
    plain = agree(section, 0, len(section), 0, 20000)
    released = agree(section, 0, len(section), 0, 20000, release_gil=True)
    assert plain == released and plain[0] == "ok"
    broken = bytearray(section)
    broken[scan_records_python(section, 0, len(section), 0, 10000).pos] ^= 0x01  # a size turned negative
    assert agree(broken, 0, len(broken), 0, 20000, release_gil=True)[0] == "error"


# --- varint edge cases, one by one ----------------------------------------------------------------


EDGES: dict[str, bytes] = {
    "5-byte size": record(widths={"size": 5}),
    "5-byte varints everywhere": record(widths={"size": 5, "delta": 5, "key": 5, "value": 5, "headers": 5}),
    "10-byte timestamp": record(ts=1, widths={"ts": 10}),
    # size 17: attributes, a timestamp of 2^70 - 1 before zigzag, delta 0, key "k", value "v", no headers
    "10-byte timestamp of 70 bits": b"\x22\x00" + b"\xff" * 9 + b"\x7f" + b"\x00\x02k\x02v\x00",
    "10-byte timestamp, most negative": record(ts=-(1 << 62), widths={"ts": 10}),
    "6-byte size (too long)": record(widths={"size": 6}),
    "6-byte offset delta (too long)": record(widths={"delta": 6}),
    "6-byte key length (too long)": record(widths={"key": 6}),
    "6-byte value length (too long)": record(widths={"value": 6}),
    "6-byte header count (too long)": record(widths={"headers": 6}),
    "11-byte timestamp (too long)": record(ts=1, widths={"ts": 11}),
    "35-bit size": b"\xff\xff\xff\xff\x7f" + b"\x00" * 20,
    "35-bit negative key length": b"\x1a\x00\x00\x00" + b"\xff\xff\xff\xff\x7f" + b"\x02v\x00" + b"\x00" * 16,
    "size INT32_MAX": record(size=INT32_MAX),
    "size INT32_MIN": record(size=INT32_MIN),
    "size -1": record(size=-1),
    "size 0": b"\x00",
    "size one short": record(size_delta=-1),
    "size one long": record(size_delta=1),
    "key length INT32_MAX": record(key_len=INT32_MAX),
    "key length INT32_MIN": record(key_len=INT32_MIN),
    "key length -2": record(key=None, key_len=-2),
    "value length INT32_MAX": record(value_len=INT32_MAX),
    "value length INT32_MIN": record(value_len=INT32_MIN),
    "value length -5": record(value=None, value_len=-5),
    "header count -1": record(header_count=-1),
    "header count INT32_MIN": record(header_count=INT32_MIN),
    "header count INT32_MAX": record(header_count=INT32_MAX),
    "header count past the end": record(headers=((b"a", b"b"),), header_count=9),
    "negative header key length": record(headers=((b"a", b"b"),))[:-4] + b"\x03a\x02b",
    "header value null": record(headers=((b"a", None),)),
    "offset delta INT32_MAX": record(delta=INT32_MAX),
    "offset delta negative": record(delta=-3),
    "offset delta two bytes": record(delta=64),
    "truncated in the size varint": b"\x80\x80",
    "truncated in the timestamp varlong": b"\x40\x00\x80\x80\x80",
}


@pytest.mark.parametrize("data", list(EDGES.values()), ids=list(EDGES))
def test_varint_and_length_edge_cases(data: bytes) -> None:
    for prefix in (b"", record(), record() + record(delta=1)):
        section = prefix + data
        for count in (1, 2, 3, 4):
            agree(section, 0, len(section), 0, count)
            agree(section, 0, len(section), 0, count, partial=True)
            agree(section, 0, len(section), 0, count, partial=True, max_record_size=8)
            agree(section + b"\x00" * 8, 0, len(section) + 8, 0, count)


def test_expected_errors_for_known_edges() -> None:
    """Not only equal: the reference's messages for the hostile lengths Kafka names."""
    def error(data: bytes, **kw: Any) -> str:
        result = agree(data, 0, len(data), 0, 1, **kw)
        assert result[0] == "error", result
        return result[2]

    assert error(EDGES["6-byte size (too long)"]) == "varint is too long: more than 5 bytes"
    assert error(EDGES["11-byte timestamp (too long)"]) == "varint is too long: more than 10 bytes"
    assert error(EDGES["header count -1"]) == "Found invalid number of record headers -1"
    assert error(EDGES["negative header key length"]) == "Invalid negative header key size -2"
    assert error(EDGES["size INT32_MIN"]).startswith(f"Invalid record size: expected {INT32_MIN} bytes")
    assert error(EDGES["size INT32_MAX"], partial=True, max_record_size=1000) == (
        f"record of {INT32_MAX} bytes exceeds the bound of 1000")
    assert error(EDGES["size one short"]).startswith("Invalid record size: expected to read")
    assert error(b"") == "Incorrect declared batch size, premature EOF reached"
    assert error(EDGES["truncated in the size varint"]) == "Found invalid record structure"


def test_a_70_bit_timestamp_comes_back_whole() -> None:
    data = EDGES["10-byte timestamp of 70 bits"]
    result = agree(data, 0, len(data), 0, 1)
    assert result[0] == "ok"
    # The maximum starts at -2^63, which this timestamp does not beat: the reference's sentinel, kept.
    assert (result[1][2], result[1][3]) == (-(1 << 69), -(1 << 63))


def test_an_empty_partial_scan_reports_nothing_seen() -> None:
    assert agree(b"", 0, 0, 3, 10, partial=True) == ("ok", (0, 3, 1 << 63, -(1 << 63), -1, True))


# --- generated and mutated inputs -----------------------------------------------------------------


lengths = st.one_of(st.integers(-3, 300), st.sampled_from([INT32_MAX, INT32_MIN, -1, 63, 64, 8191, 8192]))
timestamps = st.one_of(st.integers(-(1 << 20), 1 << 20), st.integers(-(1 << 63), (1 << 63) - 1))


@st.composite
def hostile_records(draw: st.DrawFn) -> bytes:
    """A record that is valid, or lies in one of its lengths, or uses unusual varint widths."""
    key = draw(st.one_of(st.none(), st.binary(max_size=80)))
    value = draw(st.one_of(st.none(), st.binary(max_size=200)))
    headers = draw(st.lists(st.tuples(st.binary(max_size=10), st.one_of(st.none(), st.binary(max_size=10))),
                            max_size=3))
    widths = draw(st.dictionaries(st.sampled_from(["size", "delta", "key", "value", "headers"]),
                                  st.integers(1, 6), max_size=2))
    if draw(st.booleans()):
        widths["ts"] = draw(st.integers(1, 11))
    lie = draw(st.sampled_from([None, None, None, "key_len", "value_len", "header_count", "size", "size_delta"]))
    kwargs: dict[str, Any] = {}
    if lie == "size_delta":
        kwargs["size_delta"] = draw(st.integers(-4, 4))
    elif lie is not None:
        kwargs[lie] = draw(lengths)
    # A width too small for a value writes it minimally.
    return record(ts=draw(timestamps), delta=draw(st.integers(-2, 70)), key=key, value=value,
                  headers=tuple(headers), widths=widths, **kwargs)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile_records(), min_size=0, max_size=6), st.integers(0, 8), st.booleans(), st.integers(0, 3))
def test_generated_records_agree(recs: list[bytes], count: int, partial: bool, first_index: int) -> None:
    section = b"".join(recs)
    agree(section, 0, len(section), first_index, first_index + count, partial=partial)
    agree(section, 0, len(section), first_index, first_index + count, partial=partial, max_record_size=50)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 5), st.booleans())
def test_random_bytes_agree(data: bytes, count: int, partial: bool) -> None:
    agree(data, 0, len(data), 0, count, partial=partial)


def _mutations(section: bytes, rng: random.Random) -> list[bytes]:
    out = []
    for _ in range(60):
        b = bytearray(section)
        kind = rng.randrange(5)
        i = rng.randrange(len(b))
        if kind == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            del b[i:]
        elif kind == 2:
            b[i:i] = bytes([rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])])
        elif kind == 3:
            b[i:i + 5] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80",
                                     b"\xff\xff\xff\xff\x7f", b"\x81\x80\x80\x80\x00"])
        else:
            for _ in range(rng.randrange(1, 6)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(bytes(b))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_mutated_batches_agree(seed: int) -> None:
    rng = random.Random(seed)
    shape = [(rng.choice([None, b"", b"key"]), rng.choice([None, b"", b"v" * rng.randrange(200)]),
              rng.randrange(-(1 << 41), 1 << 41), [("h", b"x")] * rng.randrange(3)) for _ in range(12)]
    section = build_batch(shape)[RECORDS_OFFSET:]
    for mutated in _mutations(section, rng):
        for count in (12, 11, 13):
            agree(mutated, 0, len(mutated), 0, count)
            agree(mutated, 0, len(mutated), 0, count, partial=True, max_record_size=100)


def test_without_the_extension_the_python_scanner_runs() -> None:
    """An install without a C compiler: importing the extension fails, and validation still works."""
    code = (
        "import sys; sys.modules['protocol._record_scan'] = None\n"
        "import broker.log_validator as lv, protocol.record_scan as rs\n"
        "from protocol.records import build_batch\n"
        "assert rs.scan_records is rs.scan_records_python and not lv.COMPILED_SCANNER\n"
        "b = memoryview(bytearray(build_batch([(None, b'v', 0)] * 3)))\n"
        "vb = lv.validate_produce_records(b, topic_partition='t-0', max_message_bytes=1 << 20,\n"
        "    timestamp_type='CreateTime', before_max_ms=1 << 62, after_max_ms=1 << 62, now_ms=0,\n"
        "    compacted=False, max_decompressed_bytes=1 << 20, yield_gil=True)\n"
        "print(lv.RECORD_SCANNER, vb.records_count)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "pure Python (protocol._record_scan was not built) 3"
