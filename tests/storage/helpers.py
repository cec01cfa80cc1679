"""Checks shared by the storage tests."""

from __future__ import annotations

from storage.batch_headers import read_header_at
from storage.log import PartitionLog


def assert_indexes_agree(lg: PartitionLog) -> None:
    """Every offset index entry names a batch start whose last offset is the entry's offset (Kafka's rule),
    time index entries are increasing and name batches whose max timestamp matches, and every segment's
    headers tile its file."""
    for seg in lg.segments:
        headers = list(seg.headers())
        assert sum(h.size for h in headers) == seg.size, seg
        by_pos = {h.position: h for h in headers}
        by_last = {h.last_offset: h for h in headers}
        prev = -1
        for i in range(seg.offset_index.entries):
            off, pos = seg.offset_index.entry(i)
            assert off > prev
            prev = off
            h = by_pos.get(pos)
            assert h is not None and h.last_offset == off, (seg, i, off, pos)
        prev_ts = -1
        for i in range(seg.time_index.entries):
            ts, off = seg.time_index.entry(i)
            assert ts > prev_ts
            prev_ts = ts
            h = by_last.get(off)
            assert h is not None and h.max_timestamp == ts, (seg, i, ts, off)
        if headers:
            assert read_header_at(seg.fd, headers[-1].position) is not None
            assert seg.next_offset == headers[-1].next_offset
    assert lg.log_end_offset == lg.active_segment.next_offset
