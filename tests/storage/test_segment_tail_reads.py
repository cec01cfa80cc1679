"""Reads at the tail of a segment answered from the headers of its last appends (LogSegment._recent) agree
with the file: for every offset, the same batch as a segment that reads headers back from disk."""

from __future__ import annotations

from pathlib import Path

from protocol.records import build_batch
from storage.log import PartitionLog
from storage.segment import LogSegment

CONFIG = {"segment_bytes": 1 << 20, "index_interval_bytes": 200, "file_delete_delay_ms": 0}


def _batch(n: int, base: int = 0) -> bytearray:
    return bytearray(build_batch([(None, b"v%d" % i) for i in range(n)], base_offset=base))


def _from_disk(seg: LogSegment) -> LogSegment:
    """The same segment's files opened afresh: no recent appends, every read goes to the index and file."""
    return LogSegment(seg.dir_path, seg.base_offset, seg.settings)


def _assert_agrees(lg: PartitionLog) -> int:
    seg = lg.segments[-1]
    assert seg._recent, "the appends were not remembered: the test would not exercise them"
    disk = _from_disk(seg)
    checked = 0
    for offset in range(seg.base_offset, lg.log_end_offset + 3):
        assert seg.translate_offset(offset) == disk.translate_offset(offset), offset
        assert seg.read(offset, 10_000) == disk.read(offset, 10_000), offset
        checked += 1
    disk.close()
    return checked


def test_leader_appends_of_one_and_several_batches(tmp_path: Path) -> None:
    lg = PartitionLog(str(tmp_path / "t-0"), CONFIG)
    for i in range(30):  # more appends than the segment remembers: the older ones go through the index
        data = _batch(1 + i % 4)
        if i % 5 == 0:  # an append of several batches
            data += _batch(2)
        lg.append(data, leader_epoch=0)
    assert _assert_agrees(lg) == lg.log_end_offset + 3
    lg.close()


def test_follower_appends_with_offset_gaps_and_a_truncation(tmp_path: Path) -> None:
    lg = PartitionLog(str(tmp_path / "t-0"), CONFIG)
    offset = 0
    for i in range(20):
        n = 1 + i % 3
        lg.append(_batch(n, base=offset), assign_offsets=False)
        offset += n + (i % 2) * 5  # a compacted leader's batches leave gaps
    _assert_agrees(lg)
    # KIP-101 truncation forgets the appends it cuts, and later appends are remembered again.
    cut = lg.log_end_offset - 9
    lg.truncate_to(cut)
    assert lg.log_end_offset <= cut
    offset = lg.log_end_offset
    for n in (2, 1, 3):
        lg.append(_batch(n, base=offset), assign_offsets=False)
        offset += n
    _assert_agrees(lg)
    lg.close()


def test_an_append_without_headers_is_not_skipped_by_a_tail_read(tmp_path: Path) -> None:
    from storage.batch_headers import buffer_headers

    lg = PartitionLog(str(tmp_path / "t-0"), CONFIG)
    lg.append(_batch(3), leader_epoch=0)  # offsets 0-2, remembered with its headers
    seg = lg.segments[-1]
    # Appends straight to the segment (as the cleaner writes its output), one without its headers.
    middle, last = _batch(2, base=3), _batch(4, base=5)
    seg.append(memoryview(middle), 4, -1, 3)
    seg.append(memoryview(last), 8, -1, 5, buffer_headers(memoryview(last)))
    disk = _from_disk(seg)
    for offset in range(0, 10):
        assert seg.translate_offset(offset) == disk.translate_offset(offset), offset
    assert seg.translate_offset(3) is not None and seg.translate_offset(3).base_offset == 3
    disk.close()
    lg.close()
