"""Storage benchmark: append throughput against raw sequential write(2) on the same disk, and offset /
timestamp lookup cost as the number of segments grows (should stay flat).

Run: ``python -m tests.bench_storage`` (about a minute).
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import sys
import tempfile
import time

from protocol.records import build_batch
from storage.log import PartitionLog

BENCH_DIR = os.environ.get("KAFKETTE_BENCH_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), ".cache"))


def _raw_write(path: str, chunk: bytes, total: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        written = 0
        while written < total:
            written += os.write(fd, chunk)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return total / elapsed


def _append(dir_path: str, batch_size: int, total: int) -> tuple[float, float]:
    value = os.urandom(batch_size - 100)
    buf = bytearray(build_batch([(b"key", value, 1_700_000_000_000)]))
    lg = PartitionLog(os.path.join(dir_path, f"bench{batch_size}-0"), {"segment_bytes": 128 * 1024 * 1024})
    n = max(1, total // len(buf))
    start = time.perf_counter()
    for _ in range(n):
        lg.append(buf, leader_epoch=0)
    elapsed = time.perf_counter() - start
    lg.close()
    shutil.rmtree(lg.dir_path)
    return n * len(buf) / elapsed, n / elapsed


def _lookup_costs(dir_path: str, segments: int, probes: int = 2000) -> tuple[float, float]:
    cfg = {"segment_bytes": 1 << 30, "segment_index_bytes": 4096, "index_interval_bytes": 256}
    lg = PartitionLog(os.path.join(dir_path, f"seg{segments}-0"), cfg)
    per_segment = 8
    ts0 = 1_700_000_000_000
    offset = 0
    for s in range(segments):
        if s:
            lg.roll()
        for _ in range(per_segment):
            lg.append(bytearray(build_batch([(b"k", b"v" * 100, ts0 + offset), (b"k", b"w", ts0 + offset + 1)])))
            offset += 2
    rnd = random.Random(1)
    leo = lg.log_end_offset
    lg.offset_for_timestamp(ts0)  # builds the per-segment max-timestamp prefix once
    for t in range(0, leo, per_segment * 2):  # map every segment's indexes once (steady state)
        lg.read(t, 1)
        lg.offset_for_timestamp(ts0 + t)
    targets = [rnd.randrange(leo) for _ in range(probes)]
    start = time.perf_counter()
    for t in targets:
        lg.read(t, 1)
    offset_cost = (time.perf_counter() - start) / probes
    start = time.perf_counter()
    for t in targets:
        lg.offset_for_timestamp(ts0 + t)
    ts_cost = (time.perf_counter() - start) / probes
    lg.close()
    shutil.rmtree(lg.dir_path)
    return offset_cost, ts_cost


def main() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.makedirs(BENCH_DIR, exist_ok=True)
    work = tempfile.mkdtemp(prefix="bench-storage-", dir=BENCH_DIR)
    try:
        print("storage append throughput (page cache; ratio = log append / raw sequential write, same run, same disk)")
        for size, total in ((16 * 1024, 256 << 20), (1024 * 1024, 1 << 30)):
            chunk = os.urandom(size)
            raw = max(_raw_write(os.path.join(work, "raw"), chunk, total) for _ in range(2))
            log_bps, batches = max(_append(work, size, total) for _ in range(2))
            print(f"  {size // 1024:>5} KiB batches: log {log_bps / 1e6:8.1f} MB/s {batches:10.0f} batches/s | "
                  f"raw write {raw / 1e6:8.1f} MB/s | ratio {log_bps / raw:.2f}")
        print("lookup cost by segment count (read() = offset index lookup + header scan; "
              "offset_for_timestamp() = time index + one batch decode)")
        for segments in (10, 1000, 10000):
            oc, tc = _lookup_costs(work, segments)
            print(f"  {segments:>6} segments: offset lookup {oc * 1e6:7.1f} us | timestamp lookup {tc * 1e6:7.1f} us")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
