"""Writer process for the crash tests: appends deterministic batches forever, printing each acked LEO."""

from __future__ import annotations

import sys

from protocol.records import build_batch
from storage.log import PartitionLog


def record_value(offset: int) -> bytes:
    return b"value-%d-" % offset + b"x" * (offset % 97)


def main() -> None:
    path = sys.argv[1]
    lg = PartitionLog(path, {"segment_bytes": 16 * 1024, "index_interval_bytes": 512, "segment_index_bytes": 1024,
                             "flush_messages": 200})
    offset = lg.log_end_offset
    out = sys.stdout
    while True:
        n = 1 + offset % 5
        recs = [(b"key-%d" % (offset + i), record_value(offset + i), 1_000_000 + offset + i) for i in range(n)]
        info = lg.append(bytearray(build_batch(recs, compression=offset % 3)), leader_epoch=offset // 1000)
        offset = info.last_offset + 1
        out.write(f"{offset}\n")
        out.flush()


if __name__ == "__main__":
    main()
