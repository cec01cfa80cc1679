from __future__ import annotations

import os
import random
import time
import tracemalloc

import pytest

from protocol.records import BatchView, build_control_batch
from storage.cleaner import LogCleaner, OffsetMap
from storage.log import PartitionLog
from tests.storage.conftest import batch, records_of
from tests.storage.helpers import assert_indexes_agree

NOW = 10_000_000


def compact_config(**kw):
    cfg = {"cleanup_policy": "compact", "segment_bytes": 1024, "index_interval_bytes": 128,
           "segment_index_bytes": 4096, "file_delete_delay_ms": 0, "min_cleanable_dirty_ratio": 0.01,
           "delete_retention_ms": 1000}
    cfg.update(kw)
    return cfg


def latest_by_key(records):
    latest = {}
    for off, _ts, key, value in records:
        latest[key] = (off, value)
    return latest


def test_offset_map_is_bounded_and_keeps_latest():
    m = OffsetMap(24 * 1000)
    assert m.memory_bytes <= 24 * 1000
    for i in range(800):
        m.put(b"k%d" % (i % 300), i)
    assert m.size == 300
    for k in range(300):
        assert m.get(b"k%d" % k) == max(i for i in range(800) if i % 300 == k)
    assert m.get(b"absent") == -1


def test_compaction_keeps_latest_value_per_key_at_original_offsets(log_dir):
    rnd = random.Random(1)
    now = [NOW]
    lg = PartitionLog(log_dir, compact_config(), clock=lambda: now[0])
    for i in range(300):
        recs = [(b"key-%d" % rnd.randrange(20), b"value-%d" % (i * 3 + j), NOW - 5000 + i) for j in range(3)]
        lg.append(batch(recs, compression=i % 3), leader_epoch=1)
    lg.high_watermark = lg.log_end_offset
    before = records_of(lg)
    cleaner = LogCleaner(lambda: [lg], clock=lambda: now[0], dedupe_buffer_size=1 << 16)
    stats = cleaner.clean_once()
    assert stats is not None and stats.segments_cleaned > 1
    after = records_of(lg)
    active_base = lg.active_segment.base_offset
    expected = latest_by_key([r for r in before if r[0] < stats.end_offset])
    cleaned = {r[2]: (r[0], r[3]) for r in after if r[0] < stats.end_offset}
    for key, val in expected.items():
        assert cleaned[key] == val
    # no key appears twice in the cleaned section; nothing beyond it changed
    assert len([r for r in after if r[0] < stats.end_offset]) == len(cleaned)
    assert [r for r in after if r[0] >= stats.end_offset] == [r for r in before if r[0] >= stats.end_offset]
    # offsets never change; LEO is untouched; every surviving record is identical to the original
    orig = {r[0]: r for r in before}
    assert all(orig[r[0]] == r for r in after)
    assert lg.log_end_offset == before[-1][0] + 1 and stats.end_offset <= active_base
    assert lg.size_in_bytes < sum(len(b) for b in [])+10**9
    assert_indexes_agree(lg)
    # leader epochs survive the rewrite
    assert all(BatchView(b).partition_leader_epoch == 1 for b in lg.batches())
    # reopening after compaction reads the same thing
    lg.close()
    lg = PartitionLog(log_dir, compact_config(), had_clean_shutdown=True)
    assert records_of(lg) == after
    lg.close()


def test_tombstones_kept_until_delete_retention_then_dropped(log_dir):
    now = [NOW]
    lg = PartitionLog(log_dir, compact_config(), clock=lambda: now[0])
    for i in range(30):
        lg.append(batch([(b"a", b"a%d" % i, NOW + i), (b"b", b"b%d" % i, NOW + i)]))
    lg.append(batch([(b"a", None, NOW + 100)]))  # tombstone for a
    for i in range(30):
        lg.append(batch([(b"c", b"c%d" % i, NOW + 200 + i)]))
    lg.roll()
    lg.high_watermark = lg.log_end_offset
    cleaner = LogCleaner(lambda: [lg], clock=lambda: now[0])
    cleaner.clean_once()
    state = latest_by_key(records_of(lg))
    assert state[b"a"][1] is None  # tombstone retained within delete.retention.ms
    assert not [r for r in records_of(lg) if r[2] == b"a" and r[3] is not None]
    tomb_batch = [BatchView(b) for b in lg.batches() if any(r.key == b"a" for r in BatchView(b).records())]
    assert tomb_batch and tomb_batch[0].delete_horizon_ms == NOW + 1000
    now[0] += 5000  # past the horizon
    lg.append(batch([(b"d", b"d", now[0])]))
    lg.roll()
    lg.high_watermark = lg.log_end_offset
    cleaner.clean(lg)
    keys = {r[2] for r in records_of(lg)}
    assert b"a" not in keys and {b"b", b"c", b"d"} <= keys
    assert latest_by_key(records_of(lg))[b"b"][1] == b"b29"
    assert_indexes_agree(lg)
    lg.close()


def test_min_compaction_lag_and_active_segment_are_not_cleaned(log_dir):
    now = [NOW]
    lg = PartitionLog(log_dir, compact_config(min_compaction_lag_ms=10_000), clock=lambda: now[0])
    for i in range(60):
        lg.append(batch([(b"k", b"v%d" % i, NOW - 20_000 + i * 500)]))
    lg.high_watermark = lg.log_end_offset
    cleaner = LogCleaner(lambda: [lg], clock=lambda: now[0])
    first, end = cleaner.cleanable_range(lg, now[0])
    assert end <= lg.active_segment.base_offset
    for seg in lg.segments:
        if seg.base_offset < end:
            assert seg.largest_timestamp() <= now[0] - 10_000
    cleaner.clean(lg)
    recs = records_of(lg)
    assert all(r[0] >= end or r[3] == b"v%d" % (end - 1) or r[0] == end - 1 for r in recs if r[0] < end)
    assert [r for r in recs if r[0] >= end] == [(o, NOW - 20_000 + o * 500, b"k", b"v%d" % o)
                                                 for o in range(end, 60)]
    lg.close()


def test_hw_bounds_the_cleanable_range(log_dir):
    lg = PartitionLog(log_dir, compact_config())
    for i in range(60):
        lg.append(batch([(b"k", b"v%d" % i, NOW + i)]))
    lg.high_watermark = 10
    cleaner = LogCleaner(lambda: [lg], clock=lambda: NOW)
    assert cleaner.cleanable_range(lg, NOW)[1] <= 10
    lg.close()


def test_producer_metadata_and_transactions_survive_compaction(log_dir):
    now = [NOW]
    lg = PartitionLog(log_dir, compact_config())
    seq = 0
    for i in range(20):
        lg.append(batch([(b"k%d" % (i % 3), b"v%d" % i, NOW + i)], producer_id=77, producer_epoch=4,
                        base_sequence=seq))
        seq += 1
    # an aborted transaction: its records vanish; a committed one stays compacted
    lg.append(batch([(b"t", b"aborted", NOW + 50)], producer_id=88, producer_epoch=0, base_sequence=0,
                    is_transactional=True))
    lg.append(bytearray(build_control_batch(commit=False, producer_id=88, producer_epoch=0, coordinator_epoch=0,
                                            timestamp=NOW + 51)), from_client=False)
    lg.append(batch([(b"t", b"committed", NOW + 52)], producer_id=99, producer_epoch=0, base_sequence=0,
                    is_transactional=True))
    lg.append(bytearray(build_control_batch(commit=True, producer_id=99, producer_epoch=0, coordinator_epoch=0,
                                            timestamp=NOW + 53)), from_client=False)
    lg.roll()
    lg.append(batch([(b"x", b"y", NOW + 60)]))
    lg.high_watermark = lg.log_end_offset
    cleaner = LogCleaner(lambda: [lg], clock=lambda: now[0])
    cleaner.clean(lg)
    views = [BatchView(b) for b in lg.batches()]
    pid77 = [v for v in views if v.producer_id == 77]
    # the producer's last batch (offset 19) is kept and its sequence range intact
    assert pid77[-1].last_offset == 19 and pid77[-1].base_sequence == 19 and pid77[-1].producer_epoch == 4
    values = {r[3] for r in records_of(lg)}
    assert b"aborted" not in values and b"committed" in values
    assert any(v.is_control and v.producer_id == 88 for v in views)  # markers wait for their horizon
    assert all(v.is_transactional for v in views if v.producer_id in (88, 99))
    # The abort marker stays, and so does its .txnindex entry in the cleaned segment (Kafka's
    # CleanedTransactionMetadata): read_committed fetches from the log start still learn of it.
    [marker] = [v for v in views if v.is_control and v.producer_id == 88]
    aborted = lg.collect_aborted_transactions(0, lg.log_end_offset)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in aborted] == [(88, 20, marker.base_offset)]
    # an idempotent retry of the last batch is still detected after compaction + restart
    lg.close()
    lg = PartitionLog(log_dir, compact_config(), had_clean_shutdown=False)
    assert lg.producer_state.producers[77].last_seq == 19
    lg.close()


def test_crash_mid_swap_leaves_a_consistent_log(log_dir, monkeypatch):
    lg = PartitionLog(log_dir, compact_config())
    for i in range(100):
        lg.append(batch([(b"k%d" % (i % 5), b"v%d" % i, NOW + i)]))
    lg.high_watermark = lg.log_end_offset
    before = records_of(lg)
    expected_latest = latest_by_key(before)

    def boom(self, new_segment, old_segments):
        new_segment.flush()
        new_segment.change_file_suffixes(".cleaned", ".swap")
        raise SystemExit("crash after the swap commit point")

    monkeypatch.setattr(PartitionLog, "replace_segments", boom)
    cleaner = LogCleaner(lambda: [lg], clock=lambda: NOW)
    with pytest.raises(SystemExit):
        cleaner.clean(lg)
    monkeypatch.undo()
    lg.close_quietly()
    assert [n for n in os.listdir(log_dir) if n.endswith(".swap")]
    lg = PartitionLog(log_dir, compact_config(), had_clean_shutdown=False)
    after = records_of(lg)
    assert not [n for n in os.listdir(log_dir) if n.endswith((".swap", ".cleaned"))]
    orig = {r[0]: r for r in before}
    assert all(orig[r[0]] == r for r in after)  # every survivor is an original record at its offset
    assert latest_by_key(after) == expected_latest
    assert [r[0] for r in after] == sorted(r[0] for r in after)
    assert_indexes_agree(lg)
    lg.close()


def _fill_many_keys(lg: PartitionLog, total_bytes: int, keys: int) -> int:
    rnd = random.Random(5)
    value = b"x" * 100
    written = 0
    i = 0
    while written < total_bytes:
        recs = [(b"key-%08d" % rnd.randrange(keys), value, NOW + i) for _ in range(50)]
        written += lg.append(batch(recs, compression=0)).valid_bytes
        i += 1
    lg.roll()
    lg.high_watermark = lg.log_end_offset
    return written


def _cleaner_peak(lg: PartitionLog, dedupe: int) -> tuple[int, object]:
    cleaner = LogCleaner(lambda: [lg], clock=lambda: NOW + 10**9, dedupe_buffer_size=dedupe,
                         io_buffer_size=256 * 1024)
    tracemalloc.start()
    try:
        stats = cleaner.clean(lg)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, stats


def test_cleaner_memory_is_bounded_by_dedupe_buffer(tmp_path):
    lg = PartitionLog(str(tmp_path / "big-0"), compact_config(segment_bytes=1 << 20, segment_index_bytes=1 << 16))
    _fill_many_keys(lg, 8 * 1024 * 1024, keys=200_000)
    dedupe = 1 << 20  # holds ~39k keys: the pass stops when the map is full
    peak, stats = _cleaner_peak(lg, dedupe)
    assert stats.end_offset < lg.log_end_offset and stats.map_entries <= dedupe // 24
    assert peak < dedupe + 3 * 1024 * 1024, peak
    lg.close()


@pytest.mark.slow
# Its time is building and writing 1 GiB of batches in Python, then cleaning them: about 270 s alone on
# the 2-core machine, so the default 300 s is too close (it was passed once beside other tests, once
# within `make test-slow`). What it checks is memory, not time, so it gets a budget of its own.
@pytest.mark.timeout(900)
def test_cleaner_memory_is_bounded_on_a_1_gib_log(tmp_path):
    # 1 GiB of 122-byte records over 5 million keys: far more keys than the 16 MiB map holds, so the
    # pass stops when the map is full, and memory stays near the dedupe buffer whatever the log size.
    lg = PartitionLog(str(tmp_path / "huge-0"), compact_config(segment_bytes=256 << 20, segment_index_bytes=1 << 20))
    written = _fill_many_keys(lg, 1 << 30, keys=5_000_000)
    assert written >= 1 << 30
    dedupe = 16 << 20
    peak, stats = _cleaner_peak(lg, dedupe)
    assert stats.map_entries <= dedupe // 24 and stats.records_retained > 0
    assert peak < dedupe + 8 * 1024 * 1024, peak
    lg.close()


def _txn_append(lg, pid, recs, seq, commit, marker_ts, roll_before_marker=False):
    """A transaction of ``recs`` by ``pid`` (epoch 0), ended by a COMMIT or ABORT marker."""
    lg.append(batch(recs, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True))
    if roll_before_marker:
        lg.roll()
    lg.append(bytearray(build_control_batch(commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                            timestamp=marker_ts)), from_client=False)


def _read_committed(lg):
    """What a read_committed consumer sees from the log start: records outside aborted transactions."""
    aborted = lg.collect_aborted_transactions(lg.log_start_offset, lg.log_end_offset)
    out = {}
    for data in lg.batches(lg.log_start_offset):
        v = BatchView(data)
        if v.is_control:
            continue
        if v.is_transactional and any(t.producer_id == v.producer_id and t.first_offset <= v.base_offset
                                      <= t.last_offset for t in aborted):
            continue
        for rec in v.records():
            out.setdefault(rec.key, []).append(rec.value)
    return out


def test_an_aborted_latest_value_does_not_shadow_the_committed_one(log_dir):
    """Kafka's buildOffsetMap leaves aborted batches out of the key map: a key whose latest record is
    aborted keeps its latest committed value."""
    lg = PartitionLog(log_dir, compact_config())
    _txn_append(lg, 5, [(b"k", b"committed", NOW)], 0, True, NOW + 1)
    _txn_append(lg, 5, [(b"k", b"aborted", NOW + 2)], 1, False, NOW + 3)
    lg.append(batch([(b"plain", b"p1", NOW + 4)]))
    lg.roll()
    lg.append(batch([(b"x", b"y", NOW + 10)]))
    lg.high_watermark = lg.log_end_offset
    before = _read_committed(lg)
    assert before[b"k"] == [b"committed"]
    LogCleaner(lambda: [lg], clock=lambda: NOW).clean(lg)
    assert _read_committed(lg) == before
    assert b"aborted" not in {r[3] for r in records_of(lg)}
    lg.close()


def test_aborted_data_whose_marker_is_past_the_cleaned_range_is_dropped(log_dir):
    """The transaction's batches are in a cleaned segment and its ABORT marker (with its .txnindex
    entry) in the active one: the cleaner still knows them as aborted (Kafka collects the aborted
    transactions of every later segment), so they neither survive as committed nor shadow the key."""
    lg = PartitionLog(log_dir, compact_config())
    lg.append(batch([(b"k", b"plain", NOW)]))
    _txn_append(lg, 6, [(b"k", b"aborted", NOW + 1), (b"j", b"aborted-j", NOW + 1)], 0, False, NOW + 2,
                roll_before_marker=True)
    lg.high_watermark = lg.log_end_offset
    assert lg.active_segment.base_offset > 0
    cleaner = LogCleaner(lambda: [lg], clock=lambda: NOW)
    stats = cleaner.clean(lg)
    assert stats.end_offset == lg.active_segment.base_offset
    assert _read_committed(lg) == {b"k": [b"plain"]}
    data = [r.value for b in lg.batches() if not BatchView(b).is_control for r in BatchView(b).records()]
    assert data == [b"plain"], "the aborted records are gone"
    # The producer's last data batch stays (empty) for its sequence, still covered by the entry.
    [aborted] = lg.collect_aborted_transactions(0, lg.log_end_offset)
    assert (aborted.producer_id, aborted.first_offset) == (6, 1)
    lg.close()


def _dirty_compacted_log(log_dir, now):
    rnd = random.Random(7)
    lg = PartitionLog(log_dir, compact_config(), clock=lambda: now[0])
    for i in range(300):
        lg.append(batch([(b"key-%d" % rnd.randrange(20), b"value-%d" % i, NOW - 5000 + i)]), leader_epoch=1)
    lg.high_watermark = lg.log_end_offset
    return lg


def test_a_paused_partition_is_not_cleaned_until_resumed(log_dir):
    # Kafka's abortAndPauseCleaning / resumeCleaning: what a replica moving between log dirs gets.
    now = [NOW]
    lg = _dirty_compacted_log(log_dir, now)
    before = records_of(lg)
    cleaner = LogCleaner(lambda: [lg], clock=lambda: now[0], dedupe_buffer_size=1 << 16)
    cleaner.abort_and_pause(lg.topic, lg.partition)
    assert cleaner.is_paused(lg.topic, lg.partition)
    assert cleaner.grab_filthiest_log() is None and cleaner.clean_once() is None
    assert records_of(lg) == before
    cleaner.resume(lg.topic, lg.partition)
    stats = cleaner.clean_once()
    assert stats is not None and stats.segments_cleaned > 1 and len(records_of(lg)) < len(before)
    lg.close()


def test_a_pass_under_way_stops_at_the_next_segment_and_rolls_back(log_dir):
    now = [NOW]
    lg = _dirty_compacted_log(log_dir, now)
    before = records_of(lg)
    segments_before = [s.base_offset for s in lg.segments]
    cleaner = LogCleaner(lambda: [lg], clock=lambda: now[0], dedupe_buffer_size=1 << 16)
    clean_into = cleaner._clean_into
    calls = []

    def pause_midway(*args, **kwargs):
        # The request to pause arrives while the pass rewrites its first segment (a move began).
        if not calls:
            cleaner.abort_and_pause(lg.topic, lg.partition, timeout=0)
        calls.append(1)
        return clean_into(*args, **kwargs)

    cleaner._clean_into = pause_midway
    assert cleaner.clean_once() is None  # aborted
    assert len(calls) == 1, "the pass stops before the next segment"
    assert not [n for n in os.listdir(log_dir) if n.endswith(".cleaned")], "the partial output is rolled back"
    # Groups already swapped in stay (each group is its own commit, as in Kafka); nothing else changed,
    # and the cleaner offset did not move, so the next pass redoes the range.
    after = records_of(lg)
    orig = {r[0]: r for r in before}
    assert all(orig[r[0]] == r for r in after) and latest_by_key(after) == latest_by_key(before)
    assert [s.base_offset for s in lg.segments][-1] == segments_before[-1]
    assert cleaner.checkpoints.get(lg) == 0
    assert cleaner.is_paused(lg.topic, lg.partition) and not cleaner.is_cleaning(lg.topic, lg.partition)
    assert cleaner.clean_once() is None
    cleaner.resume(lg.topic, lg.partition)
    assert cleaner.clean_once() is not None
    lg.close()


def test_throttler_sleeps_what_the_interval_took_too_little_as_kafkas():
    from storage.throttler import Throttler

    now = [0]
    naps: list[float] = []
    t = Throttler(1000.0, 300, clock_ns=lambda: now[0], sleep=naps.append)
    now[0] = 100_000_000
    t.maybe_throttle(500)  # within the check interval: nothing yet
    assert naps == []
    now[0] = 400_000_000
    t.maybe_throttle(500)  # 1,000 bytes in 400 ms at 1,000 B/s: 1,000 ms due, 600 ms short
    assert naps == [0.6]
    now[0] = 1_500_000_000
    t.maybe_throttle(100)  # 100 bytes over 1.1 s: under the rate
    assert naps == [0.6]
    t.desired_rate_per_s = 1.7976931348623157e308  # the default, Double.MAX_VALUE: never
    now[0] = 2_000_000_000
    t.maybe_throttle(10**12)
    assert naps == [0.6] and t.slept_ms == 600


def test_cleaner_io_is_held_to_log_cleaner_io_max_bytes_per_second(log_dir):
    now = [NOW]
    lg = PartitionLog(log_dir, compact_config(), clock=lambda: now[0])
    for i in range(200):
        lg.append(batch([(b"key-%d" % (i % 10), b"v" * 100, NOW - 5000 + i)]), leader_epoch=1)
    lg.high_watermark = lg.log_end_offset
    rate = 10_000.0
    cleaner = LogCleaner(lambda: [lg], clock=lambda: now[0], max_io_bytes_per_second=rate)
    throttler = cleaner.throttler
    naps: list[float] = []
    throttler.sleep = naps.append  # recorded, not slept
    throttler.check_interval_ns = 0  # a check at every read and write
    observed: list[float] = []
    report = throttler.maybe_throttle

    def counted(n: float) -> None:
        observed.append(n)
        report(n)

    throttler.maybe_throttle = counted  # type: ignore[method-assign]
    started = time.monotonic()
    stats = cleaner.clean_once()
    took = time.monotonic() - started
    assert stats is not None and stats.bytes_read > 0 and stats.bytes_written > 0
    # Reads for the offset map, reads of the segments copied and the writes of the cleaned ones all
    # count; the naps make up the time that much I/O takes at 10,000 B/s, less what the pass itself took
    # (each nap rounded to whole milliseconds, from an elapsed time truncated to them: 1.5 ms either way).
    assert sum(observed) >= 2 * stats.bytes_read + stats.bytes_written - 1
    paid = sum(naps) * rate
    slack = rate * 0.0015 * len(naps)
    assert sum(observed) - rate * took - slack <= paid <= sum(observed) + slack
    lg.close()


def test_log_cleaner_threads_clean_different_logs_with_a_share_of_the_buffer(tmp_path):
    """log.cleaner.threads: each thread takes a log no other thread is cleaning, with its share of the
    dedupe buffer; 0 threads clean nothing (Kafka's LogCleaner starts numThreads CleanerThreads)."""
    import threading

    now = [NOW]
    logs = []
    for name in ("a-0", "b-0"):
        lg = PartitionLog(str(tmp_path / name), compact_config(), clock=lambda: now[0])
        for i in range(300):
            lg.append(batch([(b"key-%d" % (i % 10), b"v%d" % i, NOW - 5000 + i)]), leader_epoch=1)
        lg.high_watermark = lg.log_end_offset
        logs.append(lg)
    cleaner = LogCleaner(lambda: logs, clock=lambda: now[0], threads=2, dedupe_buffer_size=8 << 20, backoff_ms=50)
    # A log one thread is cleaning is not offered to another.
    first = cleaner.grab_filthiest_log()
    assert first is not None
    cleaner._cleaning.add((first.topic, first.partition))
    second = cleaner.grab_filthiest_log()
    assert second is not None and second is not first
    cleaner._cleaning.clear()

    sizes_before = [lg.size_in_bytes for lg in logs]
    cleaner.start()
    try:
        names = sorted(t.name for t in threading.enumerate() if t.name.startswith("kafka-log-cleaner-thread-"))
        assert names == ["kafka-log-cleaner-thread-0", "kafka-log-cleaner-thread-1"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                lg.size_in_bytes < before for lg, before in zip(logs, sizes_before, strict=True)):
            time.sleep(0.05)
        assert all(lg.size_in_bytes < before for lg, before in zip(logs, sizes_before, strict=True))
        cleaner.set_threads(1)  # dynamic: the threads finish their pass, then one starts
        names = sorted(t.name for t in threading.enumerate() if t.name.startswith("kafka-log-cleaner-thread-"))
        assert names == ["kafka-log-cleaner-thread-0"]
    finally:
        cleaner.stop()
    # Each thread's offset map has its share of log.cleaner.dedupe.buffer.size.
    two = LogCleaner(lambda: logs, threads=2, dedupe_buffer_size=8 << 20)
    assert 3 << 20 < two._map().memory_bytes <= 4 << 20
    idle = LogCleaner(lambda: logs, clock=lambda: now[0], threads=0)
    idle.start()
    assert not any(t.name.startswith("kafka-log-cleaner-thread-") for t in threading.enumerate())
    idle.stop()
    for lg in logs:
        lg.close()
