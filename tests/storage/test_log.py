from __future__ import annotations

import os
import struct

import pytest

from protocol.records import BatchView, build_control_batch
from storage.errors import (
    CorruptRecordError,
    InvalidOffsetAppendError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from storage.log import PartitionLog
from tests.storage.conftest import batch, kv_batch, records_of, small_config


def fill(lg: PartitionLog, n: int, *, start_ts: int = 1000, epoch: int | None = 0) -> None:
    for i in range(n):
        lg.append(kv_batch([(b"k%d" % i, b"v%d" % i)], ts=start_ts + i), leader_epoch=epoch)


def test_append_assigns_offsets_in_place_and_reads_back(log_dir):
    lg = PartitionLog(log_dir, small_config())
    buf = batch([(b"a", b"1", 10), (b"b", b"2", 11)])
    info = lg.append(buf, leader_epoch=3)
    assert (info.first_offset, info.last_offset, info.max_timestamp, info.records_count) == (0, 1, 11, 2)
    assert struct.unpack_from(">q", buf, 0)[0] == 0 and struct.unpack_from(">i", buf, 12)[0] == 3
    info = lg.append(batch([(b"c", b"3", 12)]), leader_epoch=3)
    assert info.first_offset == 2 and lg.log_end_offset == 3
    assert [(o, k, v) for o, _, k, v in records_of(lg)] == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"c", b"3")]
    view = BatchView(lg.read_bytes(2, 1000))
    assert view.base_offset == 2 and view.partition_leader_epoch == 3 and view.verify_crc()
    lg.close()


def test_read_returns_whole_batch_containing_offset_and_respects_bounds(log_dir):
    lg = PartitionLog(log_dir, small_config())
    lg.append(kv_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]))
    lg.append(kv_batch([(b"d", b"4")]))
    r = lg.read(1, 10_000)
    assert r.first_batch_offset == 0 and len(r.regions) == 1
    fd, pos, length = r.regions[0]
    assert pos == 0 and length == os.fstat(fd).st_size
    assert lg.read(1, 10_000, max_offset=3).regions[0][2] < length  # HW bound excludes batch at 3
    assert lg.read(3, 10_000, max_offset=3).regions == []
    assert lg.read(4, 100).regions == []  # at LEO: empty
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(5, 100)
    # min_one_batch: a tiny max_bytes still returns the first whole batch
    assert lg.read(0, 1).regions[0][2] == BatchView(lg.read_bytes(0, 1)).size
    assert lg.read(0, 1, min_one_batch=False).regions[0][2] == 1
    lg.close()


def test_roll_on_segment_bytes_and_index_files_named_by_base_offset(log_dir):
    lg = PartitionLog(log_dir, small_config(segment_bytes=1024))
    fill(lg, 60)
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) > 3 and bases[0] == 0
    names = set(os.listdir(log_dir))
    for b in bases:
        assert f"{b:020d}.log" in names and f"{b:020d}.index" in names and f"{b:020d}.timeindex" in names
    # rolled segments have trimmed indexes; the active one is preallocated
    for seg in lg.segments[:-1]:
        assert os.path.getsize(seg.offset_index.path) % 8 == 0
        assert os.path.getsize(seg.offset_index.path) < 4096
        assert os.path.getsize(seg.time_index.path) % 12 == 0
        assert os.path.getsize(seg.log_path) <= 1024
    assert os.path.getsize(lg.active_segment.offset_index.path) == 4096
    assert [r[0] for r in records_of(lg)] == list(range(60))
    for off in range(60):
        assert BatchView(lg.read_bytes(off, 1)).base_offset == off
    lg.close()


def test_roll_on_segment_ms_with_timestamps(log_dir):
    lg = PartitionLog(log_dir, small_config(segment_bytes=1 << 20, segment_ms=100))
    lg.append(kv_batch([(b"a", b"1")], ts=1000))
    lg.append(kv_batch([(b"a", b"1")], ts=1050))
    assert len(lg.segments) == 1
    lg.append(kv_batch([(b"a", b"1")], ts=1101))
    assert len(lg.segments) == 2 and lg.active_segment.base_offset == 2
    lg.close()


def test_roll_on_full_index(log_dir):
    lg = PartitionLog(log_dir, small_config(segment_bytes=1 << 20, index_interval_bytes=1, segment_index_bytes=64))
    fill(lg, 40)
    assert len(lg.segments) > 2
    for seg in lg.segments[:-1]:
        assert seg.offset_index.entries <= 8
    assert [r[0] for r in records_of(lg)] == list(range(40))
    lg.close()


def test_offset_for_timestamp(log_dir):
    lg = PartitionLog(log_dir, small_config(segment_bytes=512))
    for i in range(50):
        lg.append(kv_batch([(b"k", b"v"), (b"k", b"w")], ts=1000 + 10 * i))
    assert lg.offset_for_timestamp(0) == (0, 1000)
    assert lg.offset_for_timestamp(1000) == (0, 1000)
    assert lg.offset_for_timestamp(1001) == (1, 1001)
    assert lg.offset_for_timestamp(1002) == (2, 1010)
    assert lg.offset_for_timestamp(1491) == (99, 1491)
    assert lg.offset_for_timestamp(1492) is None
    assert lg.offset_for_timestamp(-2) == (0, -1)
    assert lg.offset_for_timestamp(-1) == (100, -1)
    assert lg.offset_for_timestamp(-3) == (99, 1491)
    lg.close()


def test_follower_append_keeps_offsets_and_rejects_going_back(log_dir):
    lg = PartitionLog(log_dir, small_config())
    lg.append(kv_batch([(b"a", b"1")], base_offset=5, partition_leader_epoch=2), assign_offsets=False)
    assert lg.log_end_offset == 6 and lg.leader_epoch_cache.entries() == [(2, 5)]
    with pytest.raises(InvalidOffsetAppendError):
        lg.append(kv_batch([(b"a", b"1")], base_offset=5), assign_offsets=False)
    lg.close()


def test_an_append_not_from_a_client_checks_every_crc_and_stores_nothing_on_a_bad_one(log_dir):
    """Kafka checks the CRC of every batch it appends, a follower's too; the leader's client appends
    were checked by LogValidator."""
    lg = PartitionLog(log_dir, small_config())
    good = kv_batch([(b"a", b"1")], base_offset=0)
    bad = bytearray(kv_batch([(b"b", b"2")], base_offset=1))
    bad[-1] ^= 0x01
    for append in (lambda: lg.append(good + bad, assign_offsets=False),
                   lambda: lg.append(bytearray(bad), assign_offsets=True, from_client=False)):
        with pytest.raises(CorruptRecordError, match="Record is corrupt"):
            append()
        assert lg.log_end_offset == 0 and lg.size_in_bytes == 0
    lg.append(good, assign_offsets=False)
    assert lg.log_end_offset == 1
    lg.close()


def test_record_too_large(log_dir):
    lg = PartitionLog(log_dir, small_config(max_message_bytes=100))
    with pytest.raises(RecordTooLargeError):
        lg.append(kv_batch([(b"a", b"x" * 200)]))
    lg.close()


def test_truncate_to_and_reopen(log_dir):
    cfg = small_config(segment_bytes=600)
    lg = PartitionLog(log_dir, cfg)
    for i in range(30):
        lg.append(kv_batch([(b"k", b"v%d" % i)], ts=1000 + i), leader_epoch=i // 10)
    lg.high_watermark = 30
    assert lg.truncate_to(17)
    assert lg.log_end_offset == 17 and lg.high_watermark == 17
    assert lg.leader_epoch_cache.entries() == [(0, 0), (1, 10)]
    assert [r[0] for r in records_of(lg)] == list(range(17))
    lg.append(kv_batch([(b"k", b"new")], ts=5000), leader_epoch=5)
    assert records_of(lg)[-1][0] == 17 and records_of(lg)[-1][3] == b"new"
    assert lg.offset_for_timestamp(1020) == (17, 5000)
    lg.flush()
    lg.close()
    lg = PartitionLog(log_dir, cfg, recovery_point=18, had_clean_shutdown=True)
    assert lg.log_end_offset == 18
    assert lg.leader_epoch_cache.entries() == [(0, 0), (1, 10), (5, 17)]
    assert [r[3] for r in records_of(lg)][-2:] == [b"v16", b"new"]
    lg.close()


def test_truncate_fully_and_start_at(log_dir):
    lg = PartitionLog(log_dir, small_config())
    fill(lg, 10)
    lg.truncate_fully_and_start_at(100)
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark) == (100, 100, 100)
    lg.append(kv_batch([(b"a", b"1")]))
    assert records_of(lg)[0][0] == 100
    lg.close()
    lg = PartitionLog(log_dir, small_config(), had_clean_shutdown=True)
    assert lg.log_start_offset == 100 and lg.log_end_offset == 101
    lg.close()


def test_retention_by_time_size_and_delete_records(log_dir):
    now = [10_000_000]
    cfg = small_config(segment_bytes=600, retention_ms=1000)
    lg = PartitionLog(log_dir, cfg, clock=lambda: now[0])
    for i in range(40):
        lg.append(kv_batch([(b"k", b"v%d" % i)], ts=now[0] - 5000 + i * 200))
    lg.high_watermark = lg.log_end_offset
    nseg = len(lg.segments)
    deleted = lg.delete_old_segments()
    assert 0 < deleted < nseg
    first = lg.segments[0]
    assert first.largest_timestamp() >= now[0] - 1000 or len(lg.segments) == 1
    assert lg.log_start_offset == first.base_offset
    assert records_of(lg)[0][0] == lg.log_start_offset
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    # retention.bytes
    lg.update_config(small_config(segment_bytes=600, retention_ms=-1, retention_bytes=700))
    lg.delete_old_segments()
    assert lg.size_in_bytes - lg.active_segment.size <= 700
    # DeleteRecords above HW is refused; below moves the start
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records(lg.high_watermark + 1)
    target = lg.log_end_offset - 2
    assert lg.delete_records(target) == target
    assert records_of(lg)[0][0] == target
    assert len(lg.segments) >= 1
    lg.tick()
    assert not [n for n in os.listdir(log_dir) if n.endswith(".deleted")]  # delay 0, removed on tick
    lg.close()


def test_expired_active_segment_rolls_then_goes(log_dir):
    now = [10_000_000]
    lg = PartitionLog(log_dir, small_config(segment_bytes=1 << 20, retention_ms=1000), clock=lambda: now[0])
    fill(lg, 5, start_ts=now[0] - 10_000)
    lg.high_watermark = 5
    assert lg.delete_old_segments() == 1
    assert lg.log_start_offset == 5 and lg.log_end_offset == 5 and len(lg.segments) == 1
    assert lg.active_segment.size == 0
    lg.close()


def test_deleted_segments_wait_for_file_delete_delay(log_dir):
    now = [1_000_000]
    lg = PartitionLog(log_dir, small_config(segment_bytes=300, file_delete_delay_ms=5000), clock=lambda: now[0])
    fill(lg, 20)
    lg.high_watermark = 20
    lg.delete_records(15)
    pending = [n for n in os.listdir(log_dir) if n.endswith(".deleted")]
    assert pending and all(n.split(".")[1] in ("log", "index", "timeindex") for n in pending)
    lg.tick(now[0] + 1000)
    assert [n for n in os.listdir(log_dir) if n.endswith(".deleted")]
    lg.tick(now[0] + 6000)
    assert not [n for n in os.listdir(log_dir) if n.endswith(".deleted")]
    lg.close()


def test_transactions_aborted_index_and_lso(log_dir):
    lg = PartitionLog(log_dir, small_config(segment_bytes=1 << 20))
    lg.append(kv_batch([(b"a", b"1")]))
    lg.append(kv_batch([(b"t", b"1")], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True))
    lg.append(kv_batch([(b"u", b"1")], producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True))
    lg.high_watermark = lg.log_end_offset
    assert lg.first_unstable_offset == 1 and lg.last_stable_offset == 1
    lg.append(bytearray(build_control_batch(commit=False, producer_id=7, producer_epoch=0, coordinator_epoch=1,
                                            timestamp=2000)), from_client=False)
    assert lg.first_unstable_offset == 2
    lg.append(bytearray(build_control_batch(commit=True, producer_id=8, producer_epoch=0, coordinator_epoch=1,
                                            timestamp=2000)), from_client=False)
    lg.high_watermark = lg.log_end_offset
    assert lg.first_unstable_offset is None and lg.last_stable_offset == 5
    aborted = lg.collect_aborted_transactions(0, 5)
    assert [(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset) for a in aborted] == [(7, 1, 3, 2)]
    raw = open(lg.active_segment.txn_index.path, "rb").read()
    assert raw == struct.pack(">hqqqq", 0, 7, 1, 3, 2)
    lg.close()
    lg = PartitionLog(log_dir, small_config(segment_bytes=1 << 20), had_clean_shutdown=True)
    assert lg.collect_aborted_transactions(0, 5)[0].producer_id == 7
    lg.close()


def test_idempotent_duplicate_returns_original_offsets(log_dir):
    import time

    from storage.errors import OutOfOrderSequenceError

    ts = int(time.time() * 1000)
    lg = PartitionLog(log_dir, small_config())
    b0 = kv_batch([(b"a", b"1"), (b"b", b"2")], ts=ts, producer_id=42, producer_epoch=1, base_sequence=0)
    lg.append(bytearray(b0))
    lg.append(kv_batch([(b"c", b"3")], ts=ts, producer_id=42, producer_epoch=1, base_sequence=2))
    dup = lg.append(bytearray(b0))
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
    assert lg.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        lg.append(kv_batch([(b"d", b"4")], producer_id=42, producer_epoch=1, base_sequence=7))
    lg.close()
    lg = PartitionLog(log_dir, small_config(), had_clean_shutdown=True)  # state from snapshot
    assert lg.append(kv_batch([(b"c", b"3")], ts=ts, producer_id=42, producer_epoch=1, base_sequence=2)).duplicate
    lg.close()
