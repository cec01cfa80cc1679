"""The active index takes appends as stores into a writable mapping; a full disk must still be ENOSPC.

A store into a hole of a sparse file makes the kernel find a block at page-fault time, and on a full
filesystem that is SIGBUS, which would kill the broker. The index writes the rest of a page with zeros
before its first store there, so a full disk is an OSError the segment answers by skipping the entry. The checks run in a
child process so that a SIGBUS shows as that child's death, not as the test runner's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import errno, os, sys
    from storage.index import OffsetIndex, TimeIndex

    mnt = sys.argv[1]
    offsets = OffsetIndex(os.path.join(mnt, "0.index"), 0, 64 * 1024, preallocate=True)
    times = TimeIndex(os.path.join(mnt, "0.timeindex"), 0, 64 * 1024, preallocate=True)
    offsets.append(0, 0)
    times.maybe_append(1000, 0)
    assert offsets._mm_writable and times._mm_writable, "the active indexes are not mapped writable"
    # Fill the filesystem to the last block.
    fd = os.open(os.path.join(mnt, "ballast"), os.O_WRONLY | os.O_CREAT)
    while True:
        try:
            os.write(fd, bytes(4096))
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
            break
    os.close(fd)
    # Entries on the page already allocated still go in; the first one past it is ENOSPC.
    refused = {}
    for name, index, append in (("offset", offsets, lambda i: offsets.append(i, i * 100)),
                                ("time", times, lambda i: times.maybe_append(1000 + i, i))):
        for i in range(1, 2000):
            try:
                append(i)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                refused[name] = i
                break
    assert set(refused) == {"offset", "time"}, refused
    assert offsets.entries == refused["offset"] and times.entries == refused["time"], refused
    # Space returns: appends carry on where they stopped, and every entry reads back.
    os.unlink(os.path.join(mnt, "ballast"))
    for i in range(refused["offset"], 2000):
        offsets.append(i, i * 100)
    for i in range(refused["time"], 2000):
        times.maybe_append(1000 + i, i)
    assert [offsets.entry(i) for i in range(2000)] == [(i, i * 100) for i in range(2000)]
    assert [times.entry(i) for i in range(2000)] == [(1000 + i, i) for i in range(2000)]
    assert offsets.lookup(1234) == (1234, 123400) and times.lookup(1500) == (1500, 500)
    offsets.flush()
    offsets.close()
    times.close()
    reread = OffsetIndex(os.path.join(mnt, "0.index"), 0, 64 * 1024)
    assert reread.entries == 2000 and reread.entry(1999) == (1999, 199900)
    print("refused at", refused["offset"], refused["time"])
""")


@pytest.fixture
def tiny_fs(tmpfs_of):
    return tmpfs_of("256k")


def test_full_disk_under_a_mapped_index_is_enospc_not_sigbus(tiny_fs):
    child = subprocess.run([sys.executable, "-c", CHILD, tiny_fs], cwd=REPO, capture_output=True, text=True,
                           timeout=120)
    assert child.returncode != -signal.SIGBUS, "a store into the index mapping faulted on the full disk"
    assert child.returncode == 0, child.stderr
    # 4096-byte pages: the offset index's first page holds 512 entries, the time index's 341 whole ones.
    assert child.stdout.split() == ["refused", "at", "512", "341"], child.stdout


def test_appends_through_the_mapping_match_the_file(tmp_path):
    from storage.index import OffsetIndex

    path = str(tmp_path / "0.index")
    index = OffsetIndex(path, 100, 8 * 4096, preallocate=True)
    for i in range(3000):
        index.append(100 + i, i * 10)
    assert index._mm_writable
    with open(path, "rb") as f:
        raw = f.read(3000 * 8)
    # Kafka's format: relative offset and position, both int32 big endian, straight in the file.
    assert raw[:8] == (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
    assert raw[-8:] == (2999).to_bytes(4, "big") + (29990).to_bytes(4, "big")
    index.close()
    assert os.path.getsize(path) == 3000 * 8
