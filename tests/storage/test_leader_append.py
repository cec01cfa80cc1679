"""``PartitionLog.append_as_leader``: the compiled common case (``storage/_compiled_append.c``) against
``PartitionLog.append``.

Two logs, one appending through the compiled function and one through Python only, get the same
client batches (plain and transactional, from no producer and from producers that go on, retry, skip a
sequence, bump or reuse an epoch; single batches and several at once; read-only buffers; oversized
batches; markers written by the coordinator; new leader epochs; segments rolled for size, time and full
indexes; a disk that fills up). After every append both must have answered the same (the AppendInfo,
or the same error), and at the end their files and their state must be the same bytes and values.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

import storage.log as log_module
from config.registry import BrokerConfig, LogConfig
from protocol.records import build_batch, build_control_batch
from storage.file_handles import SEGMENT_FILES, FileHandle
from storage.index import OffsetIndex, TimeIndex
from storage.log import PartitionLog
from storage.segment import LogSegment


class Counting:
    """The compiled append, counting the appends it took and those it left to Python."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.served = 0
        self.declined = 0

    def __call__(self, *args: Any) -> Any:
        out = self.fn(*args)
        if out is None:
            self.declined += 1
        else:
            self.served += 1
        return out


COMPILED = Counting(log_module._append_batch) if log_module._append_batch is not None else None


def test_the_compiled_append_is_built() -> None:
    # `make install` builds storage._compiled_append; every test below compares it with Python.
    assert COMPILED is not None


@contextmanager
def swapped(name: str, value: Any) -> Iterator[None]:
    """``storage.log``'s compiled function ``name`` replaced by ``value`` (None: Python only) for a while."""
    saved = getattr(log_module, name)
    setattr(log_module, name, value)
    try:
        yield
    finally:
        setattr(log_module, name, saved)


def appending_with(compiled: bool) -> AbstractContextManager[None]:
    return swapped("_append_batch", COMPILED if compiled else None)


class Twins:
    """The same partition twice, in two directories: ``c`` appends compiled where it can, ``p`` in Python."""

    def __init__(self, root: str, config: dict[str, Any]) -> None:
        self.now = [1_700_000_000_000]
        self.config = config
        self.dirs = (os.path.join(root, "c", "t-0"), os.path.join(root, "p", "t-0"))
        self.c = PartitionLog(self.dirs[0], config, clock=lambda: self.now[0])
        self.p = PartitionLog(self.dirs[1], config, clock=lambda: self.now[0])

    def both(self, action: Callable[[PartitionLog], Any]) -> Any:
        """``action`` on both logs (compiled first); both must give the same result or the same error."""
        with appending_with(True):
            got_c = outcome(action, self.c)
        with appending_with(False):
            got_p = outcome(action, self.p)
        assert got_c == got_p
        assert state(self.c) == state(self.p)
        return got_c

    def leader_append(self, data: bytes | bytearray, epoch: int, *, read_only: bool = False,
                      log_append_time: int = -1) -> Any:
        def action(lg: PartitionLog) -> Any:
            buf = memoryview(bytes(data)) if read_only else memoryview(bytearray(data))
            return lg.append_as_leader(buf, epoch, log_append_time)
        return self.both(action)

    def close(self) -> None:
        for lg in (self.c, self.p):
            lg.flush()
            lg.close()


def outcome(action: Callable[[PartitionLog], Any], lg: PartitionLog) -> Any:
    try:
        return ("ok", action(lg))
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(e).__name__, str(e).replace(lg.dir_path, "<log dir>")
                .replace(os.path.dirname(os.path.dirname(lg.dir_path)), "<root>"))


def state(lg: PartitionLog) -> dict[str, Any]:
    ps = lg.producer_state
    return {
        "leo": lg.log_end_offset, "hw": lg.high_watermark, "start": lg.log_start_offset,
        "recovery_point": lg.recovery_point, "prefix_max_ts": lg._prefix_max_ts,
        "epochs": lg.leader_epoch_cache.entries(),
        "segments": [(s.base_offset, s.size, s._next_offset, s._max_ts, s._rolling_ts, s._bytes_since_index,
                      list(s._recent), s.offset_index._entries, s.time_index._entries, s._unsynced)
                     for s in lg._segments],
        # What the compiled code updates in the active segment's indexes and file handle itself.
        "active": [(s.offset_index._appended, s.offset_index._unsynced, s.time_index._unsynced,
                    s.time_index._last if s.time_index._loaded and not s.time_index._last_unread else None,
                    s.file._refs, s.file.is_open, id(s.file) in s.file.cache._idle)
                   for s in lg._segments[-1:]],
        "producers": {pid: (e.producer_epoch, e.coordinator_epoch, e.last_timestamp, e.current_txn_first_offset,
                            list(e.batches)) for pid, e in ps.producers.items()},
        "ongoing": dict(ps._ongoing), "map_end_offset": ps.map_end_offset,
    }


def files(path: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read()
    return out


class Producer:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.epoch = 0
        self.seq = 0
        self.sent: list[tuple[int, int, int]] = []  # (epoch, base sequence, count) of the last batches
        self.in_txn = False


def client_batch(rng: random.Random, ts: int, *, producer: Producer | None = None, seq: int | None = None,
                 epoch: int | None = None, transactional: bool = False, count: int | None = None,
                 value_size: int | None = None) -> bytes:
    n = count if count is not None else rng.choice((1, 1, 2, 5, 17))
    size = value_size if value_size is not None else rng.choice((0, 10, 60, 200))
    stamps = [ts + rng.randint(-50, 50) for _ in range(n)]
    records = [(None if rng.random() < 0.5 else b"k%d" % i, os.urandom(size), stamps[i]) for i in range(n)]
    if producer is None:
        return build_batch(records)
    return build_batch(records, producer_id=producer.pid, producer_epoch=producer.epoch if epoch is None else epoch,
                       base_sequence=producer.seq if seq is None else seq, is_transactional=transactional)


def run_sequence(twins: Twins, rng: random.Random, steps: int) -> None:
    producers = [Producer(pid) for pid in (7, 8, 9)]
    leader_epoch = 0
    for _ in range(steps):
        twins.now[0] += rng.choice((1, 5, 50, 20_000))
        if rng.random() < 0.03:
            leader_epoch += 1
        ts = twins.now[0] - rng.choice((0, 0, 10, 100_000))
        r = rng.random()
        pr = rng.choice(producers)
        if r < 0.15:  # no producer id
            twins.leader_append(client_batch(rng, ts), leader_epoch)
        elif r < 0.60:  # the producer's next batch, the common case
            data = client_batch(rng, ts, producer=pr, transactional=pr.in_txn)
            count = int.from_bytes(data[57:61], "big")
            got = twins.leader_append(data, leader_epoch)
            if got[0] == "ok":
                pr.sent = (pr.sent + [(pr.epoch, pr.seq, count)])[-5:]
                pr.seq += count
        elif r < 0.66 and pr.sent:  # a retry of one of the last five
            epoch, seq, count = rng.choice(pr.sent)
            twins.leader_append(client_batch(rng, ts, producer=pr, epoch=epoch, seq=seq, count=count,
                                             transactional=pr.in_txn), leader_epoch)
        elif r < 0.70:  # a sequence gap, or a stale epoch
            if rng.random() < 0.5:
                twins.leader_append(client_batch(rng, ts, producer=pr, seq=pr.seq + rng.randint(1, 3)), leader_epoch)
            else:
                twins.leader_append(client_batch(rng, ts, producer=pr, epoch=pr.epoch - 1, seq=0), leader_epoch)
        elif r < 0.74:  # a new epoch starts at sequence 0
            pr.epoch += 1
            pr.seq, pr.sent, pr.in_txn = 0, [], False
            data = client_batch(rng, ts, producer=pr)
            if twins.leader_append(data, leader_epoch)[0] == "ok":
                pr.sent = [(pr.epoch, 0, int.from_bytes(data[57:61], "big"))]
                pr.seq = pr.sent[0][2]
        elif r < 0.79:  # a transaction begins, or the coordinator ends it
            if not pr.in_txn:
                data = client_batch(rng, ts, producer=pr, transactional=True)
                if twins.leader_append(data, leader_epoch)[0] == "ok":
                    pr.in_txn = True
                    pr.sent = (pr.sent + [(pr.epoch, pr.seq, int.from_bytes(data[57:61], "big"))])[-5:]
                    pr.seq += pr.sent[-1][2]
            else:
                marker = build_control_batch(commit=rng.random() < 0.5, producer_id=pr.pid,
                                             producer_epoch=pr.epoch, coordinator_epoch=0, timestamp=ts)
                got = twins.both(lambda lg, m=marker, e=leader_epoch: lg.append(bytearray(m), leader_epoch=e,
                                                                                 from_client=False))
                if got[0] == "ok":
                    pr.in_txn = False
        elif r < 0.84:  # two batches in one buffer
            a = client_batch(rng, ts)
            b = client_batch(rng, ts)
            twins.leader_append(a + b, leader_epoch)
        elif r < 0.88:  # a read-only buffer
            twins.leader_append(client_batch(rng, ts), leader_epoch, read_only=True)
        elif r < 0.91:  # too large for max.message.bytes
            twins.leader_append(client_batch(rng, ts, count=1, value_size=4000), leader_epoch)
        elif r < 0.93:  # LogAppendTime stamped by the caller
            twins.leader_append(client_batch(rng, ts), leader_epoch, log_append_time=twins.now[0])
        elif r < 0.95:  # a timestamp lookup (ListOffsets), which keeps the segments' running maxima
            twins.both(lambda lg, t=ts: lg.offset_for_timestamp(t))
        else:  # a producer seen for the first time, through its first batch or an abort marker
            fresh = Producer(rng.randint(100, 10_000))
            producers[rng.randrange(len(producers))] = fresh
            if rng.random() < 0.3:
                # A producer whose first record here is the coordinator's marker: an entry without
                # batches, in which a batch of an older epoch must still be refused.
                fresh.epoch = 3
                marker = build_control_batch(commit=False, producer_id=fresh.pid, producer_epoch=3,
                                             coordinator_epoch=0, timestamp=ts)
                twins.both(lambda lg, m=marker, e=leader_epoch: lg.append(bytearray(m), leader_epoch=e,
                                                                         from_client=False))
                twins.leader_append(client_batch(rng, ts, producer=fresh, epoch=2), leader_epoch)
            data = client_batch(rng, ts, producer=fresh)
            if twins.leader_append(data, leader_epoch)[0] == "ok":
                fresh.seq = int.from_bytes(data[57:61], "big")
                fresh.sent = [(fresh.epoch, 0, fresh.seq)]


CONFIGS = [
    # Small segments and indexes: rolls for size and full indexes, an index entry every few batches.
    {"segment_bytes": 8192, "index_interval_bytes": 256, "segment_index_bytes": 96, "max_message_bytes": 3000,
     "file_delete_delay_ms": 0},
    # Rolls for time only (a segment.ms the clock passes), one index entry per batch.
    {"segment_bytes": 1 << 20, "segment_ms": 60_000, "index_interval_bytes": 0, "max_message_bytes": 3000,
     "file_delete_delay_ms": 0},
    # Kafka's defaults but a small max.message.bytes, and a flush after every few messages.
    {"max_message_bytes": 3000, "flush_messages": 25},
]


@pytest.mark.parametrize("seed", range(6))
def test_compiled_and_python_appends_agree(tmp_path: Any, seed: int) -> None:
    rng = random.Random(seed)
    twins = Twins(str(tmp_path), CONFIGS[seed % len(CONFIGS)])
    assert COMPILED is not None
    served, declined = COMPILED.served, COMPILED.declined
    run_sequence(twins, rng, 400)
    close_and_compare(twins)
    # Not vacuous: the compiled path took most appends, and left the others to Python.
    assert COMPILED.served - served > 100
    assert COMPILED.declined - declined > 50


def close_and_compare(twins: Twins) -> None:
    """Both logs closed hold the same files, and read back after a restart as the same log."""
    twins.close()
    assert files(twins.dirs[0]) == files(twins.dirs[1])
    reopened = [PartitionLog(d, twins.config, had_clean_shutdown=True) for d in twins.dirs]
    assert list(reopened[0].batches(0)) == list(reopened[1].batches(0))
    assert reopened[0].log_end_offset == reopened[1].log_end_offset > 0
    for lg in reopened:
        lg.close()


def test_writable_views_only(tmp_path: Any) -> None:
    """A read-only buffer, or one that is not a memoryview, is appended by Python (which copies it)."""
    lg = PartitionLog(str(tmp_path / "t-0"), {})
    assert COMPILED is not None
    data = build_batch([(None, b"v", 1000)])
    assert log_module._append_batch(lg, memoryview(data), 0, -1) is None
    assert log_module._append_batch(lg, bytearray(data), 0, -1) is None
    assert lg.log_end_offset == 0
    info = log_module._append_batch(lg, memoryview(bytearray(data)), 0, -1)
    assert info is not None and info.first_offset == 0 and lg.log_end_offset == 1
    lg.close()


def test_a_full_disk_fails_both_alike(tmpfs_of: Callable[[str], str]) -> None:
    """The write fails for want of space: both answer KAFKA_STORAGE_ERROR, cut the partial batch off again,
    and leave the same log, which takes writes once space returns."""
    root = tmpfs_of("3m")
    ballast = os.path.join(root, "ballast")
    with open(ballast, "wb") as f:
        f.write(b"\0" * (2 * 1024 * 1024))
    twins = Twins(root, {"segment_bytes": 1 << 20, "index_interval_bytes": 4096, "segment_index_bytes": 4096})
    rng = random.Random(1)
    pr = Producer(5)
    failures = 0
    for _ in range(60):
        data = client_batch(rng, twins.now[0], producer=pr, count=1, value_size=30_000)
        got = twins.leader_append(data, 0)
        if got[0] == "ok":
            pr.seq += 1
        else:
            assert got[1] == "KafkaStorageError"
            failures += 1
    assert failures > 0
    os.unlink(ballast)
    got = twins.leader_append(client_batch(rng, twins.now[0], producer=pr, count=1, value_size=100), 0)
    assert got[0] == "ok"
    twins.close()
    assert files(twins.dirs[0]) == files(twins.dirs[1])


def test_the_common_case_stays_in_compiled_code(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the broker's clock, the index entries, the file reference and the config's limits of a plain
    append are handled in C: the Python methods run only where C hands over (a page of an index not yet
    allocated). Else the comparisons above would pass without testing these paths."""
    calls: dict[str, int] = {}

    def counting(cls: Any, name: str) -> None:
        original = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # A segment file's references, not those an index takes to allocate a page.
            if not isinstance(args[0], FileHandle) or args[0].path.endswith(".log"):
                calls[name] = calls.get(name, 0) + 1
            return original(*args, **kwargs)
        monkeypatch.setattr(cls, name, wrapper)

    for cls, name in ((LogSegment, "_append_index_entries"), (OffsetIndex, "append"), (TimeIndex, "maybe_append"),
                      (FileHandle, "acquire"), (FileHandle, "release"), (PartitionLog, "_append_limits")):
        counting(cls, name)
    config = LogConfig.from_broker(BrokerConfig(), {"index.interval.bytes": "1000"})
    lg = PartitionLog(str(tmp_path / "t-0"), config)
    assert lg.clock is log_module.now_ms
    lg._append_limits()  # the limits are read once per config
    calls.clear()
    rng = random.Random(3)
    assert COMPILED is not None
    served = COMPILED.served
    with appending_with(True):
        for _ in range(300):
            batch = client_batch(rng, log_module.now_ms(), count=3, value_size=600)
            lg.append_as_leader(memoryview(bytearray(batch)), 0)
    assert COMPILED.served - served == 300
    seg = lg._segments[-1]
    assert seg.offset_index._entries >= 299 and seg.time_index._entries > 0
    # The first store into each index page allocates it, in Python: once per 4 KiB of index.
    assert calls.get("_append_index_entries", 0) <= 2, calls
    assert calls.get("append", 0) <= 2 and calls.get("maybe_append", 0) <= 2, calls
    assert calls.get("acquire", 0) == calls.get("release", 0) == 0, calls
    assert calls.get("_append_limits", 0) == 0, calls
    assert (seg.file._refs, id(seg.file) in SEGMENT_FILES._idle) == (0, True)
    assert next(reversed(SEGMENT_FILES._idle)) == id(seg.file)  # the most recently used
    lg.close()


def test_segment_files_are_evicted_as_python_does(tmp_path: Any) -> None:
    """With fewer descriptors than partitions, each append takes its file from the cache and leaves it
    idle (most recent), and the least recent idle ones are closed: the same files open after every
    append, compiled or not."""
    def run(compiled: bool) -> list[Any]:
        root = tmp_path / ("c" if compiled else "p")
        saved = SEGMENT_FILES.capacity
        logs = [PartitionLog(str(root / f"t-{i}"), {}) for i in range(80)]
        rng = random.Random(5)
        seen = []
        try:
            SEGMENT_FILES.configure(64)
            with appending_with(compiled):
                for step in range(400):
                    i = rng.randrange(len(logs)) if step % 3 else step % len(logs)
                    batch = client_batch(rng, 1_700_000_000_000 + step, count=2, value_size=50)
                    logs[i].append_as_leader(memoryview(bytearray(batch)), 0)
                    seen.append((SEGMENT_FILES.open_count <= SEGMENT_FILES.capacity,
                                 [lg._segments[-1].file.is_open for lg in logs],
                                 [lg._segments[-1].file._refs for lg in logs]))
        finally:
            SEGMENT_FILES.configure(saved)
            for lg in logs:
                lg.close()
        return seen

    assert COMPILED is not None
    served = COMPILED.served
    compiled = run(True)
    assert COMPILED.served - served == 400
    assert compiled == run(False)
    assert all(within for within, _, _ in compiled)
    assert any(not all(is_open) for _, is_open, _ in compiled)  # some were evicted


def test_a_config_change_is_seen_by_the_next_append(tmp_path: Any) -> None:
    """The limits are cached per config object: a new config (a topic's max.message.bytes lowered)
    refuses the next batch above it on both paths alike."""
    def config(max_message_bytes: int) -> LogConfig:
        return LogConfig.from_broker(BrokerConfig(), {"max.message.bytes": str(max_message_bytes)})

    twins = Twins(str(tmp_path), config(100_000))  # type: ignore[arg-type]
    rng = random.Random(7)
    pr = Producer(9)
    for _ in range(5):
        assert twins.leader_append(client_batch(rng, twins.now[0], producer=pr, count=2, value_size=900), 0)[0] == "ok"
        pr.seq += 2
    smaller = config(1_000)
    for lg in (twins.c, twins.p):
        lg.update_config(smaller)
    got = twins.leader_append(client_batch(rng, twins.now[0], producer=pr, count=2, value_size=900), 0)
    assert got[:2] == ("error", "RecordTooLargeError")
    twins.close()
    assert files(twins.dirs[0]) == files(twins.dirs[1])


def test_an_index_out_of_order_fails_both_alike(tmp_path: Any) -> None:
    """An offset index that says it holds an offset above the one appended (a bug elsewhere) makes the
    append fail, the same way on both paths, rather than store an entry out of order."""
    twins = Twins(str(tmp_path), {"index_interval_bytes": 0})
    rng = random.Random(8)
    for _ in range(3):
        assert twins.leader_append(client_batch(rng, twins.now[0], count=2), 0)[0] == "ok"
    for lg in (twins.c, twins.p):
        index = lg._segments[-1].offset_index
        index._appended = (index._entries, 10**9)
    got = twins.leader_append(client_batch(rng, twins.now[0], count=2), 0)
    assert got[:2] == ("error", "ValueError")


def test_a_full_cache_closes_the_file_after_its_append(tmp_path: Any) -> None:
    """Every descriptor of the cache is referenced elsewhere (readers in flight) when an append opens
    one more: once that append lets go of its file, the cache is over capacity and closes it, the least
    recent idle one. The same on both paths."""
    def run(compiled: bool) -> list[Any]:
        root = tmp_path / ("c" if compiled else "p")
        saved = SEGMENT_FILES.capacity
        logs = [PartitionLog(str(root / f"t-{i}"), {}) for i in range(66)]
        held: list[FileHandle] = []
        seen = []
        try:
            SEGMENT_FILES.configure(64)
            for lg in logs[:64]:
                handle = lg._segments[-1].file
                handle.acquire()
                held.append(handle)
            with appending_with(compiled):
                for lg in logs[64:]:
                    batch = client_batch(random.Random(1), 1_700_000_000_000, count=2, value_size=50)
                    lg.append_as_leader(memoryview(bytearray(batch)), 0)
                    seen.append((SEGMENT_FILES.open_count - len(held),
                                 [x._segments[-1].file.is_open for x in logs[64:]]))
        finally:
            for handle in held:
                handle.release()
            SEGMENT_FILES.configure(saved)
            for lg in logs:
                lg.close()
        return seen

    compiled = run(True)
    assert compiled == run(False)
    assert [is_open for _, is_open in compiled] == [[False, False], [False, False]]


def test_a_producers_first_batch_is_compiled(tmp_path: Any) -> None:
    """A producer without state here starts with its first batch, at any sequence (its earlier state may
    have expired): with a thousand partitions, each new producer's first batch in each of them is such
    an append. It stays compiled, and the producer's entry is the one Python creates."""
    assert COMPILED is not None
    twins = Twins(str(tmp_path), {})
    rng = random.Random(7)
    served = COMPILED.served
    for pid, first_sequence in ((5, 0), (6, 40)):
        pr = Producer(pid)
        pr.seq = first_sequence
        assert twins.leader_append(client_batch(rng, twins.now[0], producer=pr), 0)[0] == "ok"
    assert COMPILED.served - served == 2
    assert sorted(twins.c.producer_state.producers) == [5, 6]
    twins.close()
    assert files(twins.dirs[0]) == files(twins.dirs[1])
