"""``PartitionLog.append_as_follower``: the compiled common case (``storage/_compiled_append.c``) against
``PartitionLog.append`` without assigning offsets.

A leader log takes client batches (plain ones, producers that go on, bump their epoch or start,
transactions and their markers, new leader epochs). Two follower logs, one appending through the
compiled function and one through Python only, then get what the leader stored, in fetch-sized pieces
of one to several batches, as bytes or views. Between the pieces come what a follower can also meet: a
corrupted batch, a batch over max.message.bytes, a piece below the LEO or after a gap, a truncation
(KIP-101) and the fetch again. After every append both must have answered the same (the AppendInfo, or
the same error), and at the end their files and their state must be the same bytes and values.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest

import storage.log as log_module
from protocol.records import build_control_batch
from storage.log import PartitionLog
from tests.storage.test_leader_append import (
    CONFIGS,
    Counting,
    Producer,
    Twins,
    client_batch,
    close_and_compare,
    files,
    swapped,
)

COMPILED = Counting(log_module._append_follower) if log_module._append_follower is not None else None


def test_the_compiled_follower_append_is_built() -> None:
    # `make install` builds storage._compiled_append; every test below compares it with Python.
    assert COMPILED is not None


def following_with(compiled: bool) -> AbstractContextManager[None]:
    return swapped("_append_follower", COMPILED if compiled else None)


class Followers(Twins):
    """Two followers of one partition: ``c`` appends compiled where it can, ``p`` in Python."""

    def both(self, action: Callable[[PartitionLog], Any]) -> Any:
        with following_with(True):
            return super().both(action)

    def follower_append(self, data: bytes, *, as_view: bool) -> Any:
        def action(lg: PartitionLog) -> Any:
            with following_with(lg is self.c):
                return lg.append_as_follower(memoryview(data) if as_view else data)
        return self.both(action)


def leader_stream(config: dict[str, Any], root: str, rng: random.Random, steps: int,
                  producers_out: dict[int, Any] | None = None) -> list[bytes]:
    """The batches a leader stored, in order, as a follower fetches them: each one's bytes after the
    leader assigned its offsets and epoch. ``producers_out`` gets the leader's producer state at the end
    (a snapshot read back keeps only each producer's last batch)."""
    leader = PartitionLog(root, config, clock=lambda: 1_700_000_000_000)
    producers = [Producer(pid) for pid in (7, 8, 9)]
    stored: list[bytes] = []
    leader_epoch = 0
    ts = 1_700_000_000_000

    def append(data: bytes, **kwargs: Any) -> bool:
        buf = bytearray(data)
        try:
            if kwargs:
                info = leader.append(buf, leader_epoch=leader_epoch, **kwargs)
            else:
                info = leader.append_as_leader(memoryview(buf), leader_epoch)
        except Exception:  # noqa: BLE001 - a refused batch is simply not in the stream
            return False
        if not info.duplicate:
            stored.append(bytes(buf))
        return True

    for _ in range(steps):
        ts += rng.choice((1, 5, 50, 20_000))
        if rng.random() < 0.03:
            leader_epoch += 1
        r = rng.random()
        pr = rng.choice(producers)
        if r < 0.2:
            append(client_batch(rng, ts))
        elif r < 0.8:
            data = client_batch(rng, ts, producer=pr, transactional=pr.in_txn)
            if append(data):
                pr.seq += int.from_bytes(data[57:61], "big")
        elif r < 0.85:  # a new epoch
            pr.epoch += 1
            pr.seq, pr.in_txn = 0, False
            data = client_batch(rng, ts, producer=pr)
            if append(data):
                pr.seq = int.from_bytes(data[57:61], "big")
        elif r < 0.92:  # a transaction begins, or its marker ends it
            if not pr.in_txn:
                data = client_batch(rng, ts, producer=pr, transactional=True)
                if append(data):
                    pr.in_txn = True
                    pr.seq += int.from_bytes(data[57:61], "big")
            else:
                marker = build_control_batch(commit=rng.random() < 0.5, producer_id=pr.pid, producer_epoch=pr.epoch,
                                             coordinator_epoch=0, timestamp=ts)
                if append(marker, from_client=False):
                    pr.in_txn = False
        else:  # a producer seen for the first time
            fresh = Producer(rng.randint(100, 10_000))
            producers[rng.randrange(len(producers))] = fresh
            data = client_batch(rng, ts, producer=fresh)
            if append(data):
                fresh.seq = int.from_bytes(data[57:61], "big")
    if producers_out is not None:
        producers_out.update(producer_entries(leader))
    leader.close()
    return stored


def producer_entries(lg: PartitionLog) -> dict[int, Any]:
    return {pid: (e.producer_epoch, e.last_timestamp, e.current_txn_first_offset, list(e.batches))
            for pid, e in lg.producer_state.producers.items()}


def base_offset(batch: bytes) -> int:
    return int.from_bytes(batch[:8], "big")


def corrupted(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[-1] ^= 0xFF  # in the records: the CRC no longer matches
    return bytes(b)


def run_follower(followers: Followers, stream: list[bytes], rng: random.Random) -> None:
    """Fetch ``stream`` into both followers, from their LEO, with the detours a follower can meet."""
    by_offset = {base_offset(b): i for i, b in enumerate(stream)}
    i = 0
    while i < len(stream):
        followers.now[0] += rng.choice((1, 50, 20_000))
        r = rng.random()
        k = rng.choice((1, 1, 2, 3, 5, 8))
        piece = stream[i:i + k]
        if r < 0.04:  # a corrupted batch in the piece: refused, nothing appended
            j = rng.randrange(len(piece))
            followers.follower_append(b"".join(piece[:j] + [corrupted(piece[j])] + piece[j + 1:]), as_view=True)
        elif r < 0.07 and i > 0:  # a piece below the LEO: refused
            followers.follower_append(b"".join(stream[i - 1:i + k - 1]), as_view=False)
        elif r < 0.09 and i + 1 < len(stream):  # after a gap (offsets a compacted leader no longer has)
            got = followers.follower_append(b"".join(stream[i + 1:i + 1 + k]), as_view=True)
            if got[0] == "ok":
                i += 1 + len(stream[i + 1:i + 1 + k])
                continue
        elif r < 0.12 and i > 2:  # a truncation to a batch boundary, then the fetch again from there
            back = rng.randint(1, min(i, 6))
            to = base_offset(stream[i - back])
            followers.both(lambda lg, o=to: lg.truncate_to(o))
            i = by_offset[to]
            continue
        else:
            got = followers.follower_append(b"".join(piece), as_view=rng.random() < 0.5)
            if got[0] == "ok":
                i += len(piece)
                continue
            raise AssertionError(f"a follower refused the leader's batches at {base_offset(piece[0])}: {got}")


@pytest.mark.parametrize("seed", range(6))
def test_compiled_and_python_follower_appends_agree(tmp_path: Any, seed: int) -> None:
    rng = random.Random(seed)
    config = CONFIGS[seed % len(CONFIGS)]
    stream = leader_stream(config, str(tmp_path / "leader" / "t-0"), rng, 500)
    followers = Followers(str(tmp_path), config)
    assert COMPILED is not None
    served, declined = COMPILED.served, COMPILED.declined
    run_follower(followers, stream, rng)
    close_and_compare(followers)
    # Not vacuous: the compiled path took many appends (a piece with a transactional batch or a marker is
    # Python's, as are rolls, gaps and refusals), and left the others to Python.
    assert COMPILED.served - served > 50
    assert COMPILED.declined - declined > 50


def test_the_follower_keeps_the_leaders_bytes_and_producer_state(tmp_path: Any) -> None:
    """What the compiled follower append stores is the leader's log byte for byte, and the producer state
    it builds is the leader's: the follower could take over and answer a retry."""
    rng = random.Random(42)
    config: dict[str, Any] = {"segment_bytes": 1 << 20}
    leader_dir = tmp_path / "leader" / "t-0"
    leaders_producers: dict[int, Any] = {}
    stream = leader_stream(config, str(leader_dir), rng, 200, leaders_producers)
    follower = PartitionLog(str(tmp_path / "f" / "t-0"), config)
    assert COMPILED is not None
    served = COMPILED.served
    with following_with(True):
        i = 0
        while i < len(stream):
            piece = stream[i:i + 3]
            follower.append_as_follower(memoryview(b"".join(piece)))
            i += len(piece)
    assert COMPILED.served - served > 20
    leader = PartitionLog(str(leader_dir), config, had_clean_shutdown=True)
    assert list(follower.batches(0)) == list(leader.batches(0))
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries()
    assert producer_entries(follower) == leaders_producers
    for lg in (leader, follower):
        lg.close()


def test_a_full_disk_fails_both_followers_alike(tmpfs_of: Callable[[str], str], tmp_path: Any) -> None:
    """The write fails for want of space: both raise KafkaStorageError, cut the partial write off again and
    leave the same log, which takes the same batches once space returns."""
    rng = random.Random(3)
    pr = Producer(5)
    leader = PartitionLog(str(tmp_path / "leader" / "t-0"), {"segment_bytes": 1 << 20},
                          clock=lambda: 1_700_000_000_000)
    stream = []
    for _ in range(60):
        buf = bytearray(client_batch(rng, 1_700_000_000_000, producer=pr, count=1, value_size=30_000))
        leader.append_as_leader(memoryview(buf), 0)
        pr.seq += 1
        stream.append(bytes(buf))
    leader.close()
    root = tmpfs_of("3m")
    ballast = os.path.join(root, "ballast")
    with open(ballast, "wb") as f:
        f.write(b"\0" * (2 * 1024 * 1024))
    followers = Followers(root, {"segment_bytes": 1 << 20, "index_interval_bytes": 4096,
                                 "segment_index_bytes": 4096})
    i, failures = 0, 0
    while i < len(stream) and failures < 3:
        got = followers.follower_append(b"".join(stream[i:i + 2]), as_view=True)
        if got[0] == "ok":
            i += 2
        else:
            assert got[1] == "KafkaStorageError"
            failures += 1
    assert failures > 0
    os.unlink(ballast)
    assert followers.follower_append(b"".join(stream[i:i + 2]), as_view=True)[0] == "ok"
    followers.close()
    assert files(followers.dirs[0]) == files(followers.dirs[1])
