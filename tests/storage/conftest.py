from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from protocol.records import BatchView, build_batch
from storage.log import PartitionLog


def batch(records: list[tuple], **kwargs: Any) -> bytearray:
    """A batch (writable, so the log can stamp offsets in place) of ``(key, value, timestamp)`` records."""
    return bytearray(build_batch(records, **kwargs))


def kv_batch(keys_values: list[tuple[bytes | None, bytes | None]], ts: int = 1000, **kwargs: Any) -> bytearray:
    return batch([(k, v, ts + i) for i, (k, v) in enumerate(keys_values)], **kwargs)


def records_of(lg: PartitionLog, start: int | None = None) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record from ``start`` (default log start), via read()."""
    out = []
    first = lg.log_start_offset if start is None else start
    for data in lg.batches(first):
        for rec in BatchView(data).records():
            if rec.offset >= first:
                out.append((rec.offset, rec.timestamp, rec.key, rec.value))
    return out


@pytest.fixture
def log_dir(tmp_path) -> Iterator[str]:
    path = os.path.join(str(tmp_path), "topic-0")
    yield path


@pytest.fixture
def tmpfs_of(tmp_path) -> Iterator[Callable[[str], str]]:
    """``tmpfs_of(size)`` mounts a tmpfs of that size (``"2m"``) and returns its path: a disk that fills
    up for real. Unmounted after the test."""
    mounts: list[str] = []

    def mount(size: str) -> str:
        mnt = tmp_path / f"tmpfs{len(mounts)}"
        mnt.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
        mounts.append(str(mnt))
        return str(mnt)

    yield mount
    for mnt in mounts:
        subprocess.run(["umount", "-l", mnt], check=False)


def small_config(**overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "segment_bytes": 2048,
        "index_interval_bytes": 128,
        "segment_index_bytes": 4096,
        "file_delete_delay_ms": 0,
    }
    cfg.update(overrides)
    return cfg
