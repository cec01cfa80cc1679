"""Segment descriptors: the LRU bound, pinning, lazily opened and memory-mapped indexes, descriptors of
.txnindex and snapshots, and the start-up budget."""

from __future__ import annotations

import logging
import os

import pytest

from storage.fd_budget import HEADROOM, plan
from storage.file_handles import FileHandle, FileHandleCache
from storage.log import PartitionLog
from tests.storage.conftest import kv_batch, records_of, small_config


def open_fds_to(prefix: str) -> list[str]:
    """Paths under ``prefix`` this process holds a descriptor for."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            out.append(target)
    return out


def mapped_paths(prefix: str) -> set[str]:
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if line.rstrip().split()[-1].startswith(prefix)}


def make_files(tmp_path, n: int) -> list[str]:
    paths = []
    for i in range(n):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"%d" % i * 100)
        paths.append(str(p))
    return paths


# ------------------------------------------------------------------------------------------- the LRU


def test_lru_keeps_at_most_capacity_idle_descriptors_and_reopens_on_demand(tmp_path):
    cache = FileHandleCache(capacity=64)
    handles = [FileHandle(p, cache=cache) for p in make_files(tmp_path, 200)]
    for i, h in enumerate(handles):
        with h.use() as fd:
            assert os.pread(fd, 3, 0) == (b"%d" % i * 3)[:3]
        assert cache.open_count <= 64
    assert len(open_fds_to(str(tmp_path))) == cache.open_count == 64
    # The least recently used went first; the newest are still open.
    assert not handles[0].is_open and handles[-1].is_open
    with handles[0].use() as fd:  # reopened by its path
        assert os.pread(fd, 1, 0) == b"0"
    assert cache.evictions >= 137


def test_a_pinned_descriptor_is_never_evicted_nor_closed(tmp_path):
    cache = FileHandleCache(capacity=64)
    paths = make_files(tmp_path, 300)
    first = FileHandle(paths[0], cache=cache)
    pin = first.pin()
    first.close()  # the segment is deleted while a response still references it
    os.unlink(paths[0])
    others = [FileHandle(p, cache=cache) for p in paths[1:]]
    for h in others:  # churn: descriptor numbers get reused for other files
        with h.use():
            pass
    # The pinned descriptor still names the original (unlinked) file and reads its bytes.
    assert os.readlink(f"/proc/self/fd/{pin.fd}").endswith("f0 (deleted)")
    assert os.pread(pin.fd, 3, 0) == b"000"
    pin.release()
    assert not first.is_open and cache.open_count <= 64
    try:
        now = os.readlink(f"/proc/self/fd/{pin.fd}")
    except OSError:
        now = None  # closed
    assert now is None or not now.endswith("f0 (deleted)")
    pin.release()  # twice is harmless


def test_close_of_an_idle_handle_closes_at_once_and_refuses_later_use(tmp_path):
    cache = FileHandleCache(capacity=64)
    (path,) = make_files(tmp_path, 1)
    h = FileHandle(path, cache=cache)
    with h.use():
        pass
    assert cache.open_count == 1
    h.close()
    assert cache.open_count == 0 and open_fds_to(str(tmp_path)) == []
    with pytest.raises(OSError):
        h.acquire()


def test_a_dropped_pin_lets_go(tmp_path):
    cache = FileHandleCache(capacity=64)
    (path,) = make_files(tmp_path, 1)
    h = FileHandle(path, cache=cache)
    pin = h.pin()
    h.close()
    assert h.is_open
    del pin  # a response dropped unsent (its connection died)
    assert not h.is_open and cache.open_count == 0


# ------------------------------------------------------------------------------------------- segments


def test_inactive_segments_hold_no_descriptor_and_old_data_is_still_read(tmp_path):
    path = str(tmp_path / "t-0")
    lg = PartitionLog(path, small_config(segment_bytes=1024))
    for i in range(120):
        lg.append(kv_batch([(b"k%d" % i, b"v" * 40)]))
    lg.high_watermark = lg.log_end_offset
    assert len(lg.segments) > 10
    lg.close()
    lg = PartitionLog(path, small_config(segment_bytes=1024), had_clean_shutdown=True)
    inactive = [s for s in lg.segments[:-1]]
    # Opening the log opened no inactive segment's .log, nor any index file of theirs.
    held = open_fds_to(path)
    assert all(not s.file.is_open for s in inactive), held
    assert not any(p.endswith((".index", ".timeindex")) and not p.startswith(lg.active_segment.log_path[:-4])
                   for p in held)
    # A fetch of the oldest data opens that one file, through the cache, and pins it.
    result = lg.read(0, 100)
    assert len(result.regions) == 1 and inactive[0].file.is_open
    region = result.regions[0]
    assert os.readlink(f"/proc/self/fd/{region.fd}") == inactive[0].log_path
    region.release()
    assert [r[0] for r in records_of(lg)] == list(range(120))
    lg.close()


def test_indexes_are_loaded_lazily_and_memory_mapped_without_a_descriptor(tmp_path):
    path = str(tmp_path / "t-0")
    lg = PartitionLog(path, small_config(segment_bytes=1024))
    for i in range(80):
        lg.append(kv_batch([(b"k%d" % i, b"v" * 40)]))
    lg.close()
    lg = PartitionLog(path, small_config(segment_bytes=1024), had_clean_shutdown=True)
    old = lg.segments[1]
    # Not loaded at open (a clean shutdown checks only what it must), so nothing is mapped either.
    assert not old.offset_index._loaded
    assert old.offset_index.path not in mapped_paths(path)
    # A lookup maps the file and closes it: the mapping stays, the descriptor does not.
    target = old.base_offset + 2
    assert lg.read(target, 10).regions
    assert old.offset_index._loaded
    assert old.offset_index.path in mapped_paths(path)
    assert old.offset_index.path not in open_fds_to(path)
    assert old.time_index.path not in open_fds_to(path)
    lg.close()


def test_txn_index_and_producer_snapshots_keep_no_descriptor(tmp_path):
    from storage.txn_index import AbortedTxn

    path = str(tmp_path / "t-0")
    lg = PartitionLog(path, small_config(segment_bytes=1024))
    for i in range(40):
        lg.append(kv_batch([(b"k%d" % i, b"v" * 40)], producer_id=7, producer_epoch=0, base_sequence=i))
    lg.active_segment.txn_index.append(AbortedTxn(7, 0, 1, 0))
    lg.flush()
    names = {os.path.basename(p) for p in open_fds_to(path)}
    assert any(n.endswith(".snapshot") for n in os.listdir(path))
    assert not any(n.endswith((".snapshot", ".txnindex", "leader-epoch-checkpoint")) for n in names), names
    lg.close()


# ------------------------------------------------------------------------------------------- the budget


def test_budget_counts_segments_connections_and_headroom():
    b = plan(soft_limit=4096, partitions=2000, segments=2500, max_connections=500, configured_capacity=10_000)
    assert b.wanted == 2500 + 2 * 2000 + 500 + HEADROOM
    assert not b.fits
    assert b.cache_capacity == 4096 - 500 - HEADROOM
    roomy = plan(soft_limit=1 << 20, partitions=2000, segments=2500, max_connections=2**31 - 1,
                 configured_capacity=10_000)
    assert roomy.fits and roomy.cache_capacity == 10_000 and roomy.connections == 1000


def test_start_up_warns_once_with_the_numbers_when_the_limit_is_too_small(tmp_path, caplog):
    import resource

    from storage import fd_budget
    from storage.file_handles import SEGMENT_FILES

    d = tmp_path / "data"
    for i in range(30):
        (d / f"t-{i}").mkdir(parents=True)
        (d / f"t-{i}" / "00000000000000000000.log").write_bytes(b"")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    saved = SEGMENT_FILES.capacity
    try:
        with caplog.at_level(logging.INFO, logger="storage.fd_budget"):
            budget = fd_budget.apply([str(d)], max_connections=hard, configured_capacity=10_000)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard  # soft limit raised to the hard one
        assert budget.partitions == 30 and budget.segments == 30
        assert SEGMENT_FILES.capacity == budget.cache_capacity
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        msg = warnings[0].getMessage()
        assert f"open files limit {hard}" in msg and "30 partitions, 30 segments" in msg
        assert f"at least {budget.wanted}" in msg
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        SEGMENT_FILES.configure(saved)
