"""Running out of descriptors is a resource problem, not a disk failure; and log recovery says what it
removed. The EMFILE cases run in a subprocess with a low RLIMIT_NOFILE."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from storage.log import PartitionLog
from tests.storage.conftest import kv_batch, small_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_EMFILE_SCRIPT = r"""
import errno, json, os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
from storage.file_handles import SEGMENT_FILES
from storage.log_manager import LogManager
from storage.checkpoints import OffsetCheckpointFile
from tests.storage.conftest import kv_batch

# A cache far larger than the limit: only EMFILE handling can keep the broker going.
SEGMENT_FILES.configure(100_000)
lm = LogManager([sys.argv[1]], broker_id=0, default_config={"segment_bytes": 1024, "file_delete_delay_ms": 0})
lm.startup()
failed = lm.create_logs([("t", p, None, None) for p in range(300)])
for rnd in range(6):  # several rolls per partition, with every partition's files wanted at once
    for p in range(300):
        lm.get_log("t", p).append(kv_batch([(b"k", b"v" * 300)]))
lm.checkpoint_recovery_points()
# Now exhaust the table with other descriptors, then roll and checkpoint: both must cope.
hogs = []
try:
    while True:
        hogs.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    assert e.errno == errno.EMFILE
errors = []
for p in range(300):
    try:
        lm.get_log("t", p).roll()
    except Exception as e:
        errors.append(repr(e))
for fd in hogs[:2]:
    os.close(fd)
hogs = hogs[2:]
lm.checkpoint_recovery_points()
for fd in hogs:
    os.close(fd)
cp = OffsetCheckpointFile(os.path.join(sys.argv[1], "recovery-point-offset-checkpoint")).read()
data_ok = all(len(list(lm.get_log("t", p).batches(0))) == 6 for p in range(300))
print(json.dumps({"failed": len(failed), "offline": sorted(lm.offline_dirs), "roll_errors": errors,
                  "checkpointed": len(cp), "shortages": SEGMENT_FILES.descriptor_shortages,
                  "open": SEGMENT_FILES.open_count, "data_ok": data_ok,
                  "segments": sum(len(lm.get_log("t", p).segments) for p in range(300))}))
lm.shutdown()
"""


def test_emfile_sheds_idle_descriptors_and_never_takes_the_log_dir_offline(tmp_path):
    data = tmp_path / "data"
    proc = subprocess.run([sys.executable, "-c", _EMFILE_SCRIPT, str(data)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["failed"] == 0 and out["offline"] == [] and out["roll_errors"] == []
    assert out["data_ok"], "every record readable through reopened descriptors"
    assert out["checkpointed"] == 300
    assert out["segments"] >= 300 * 3  # rolls by size, then one more each with the table full
    assert out["shortages"] >= 1, "the limit was actually hit"
    assert out["open"] < 256
    assert "out of file descriptors" in proc.stderr


def test_recovery_logs_every_segment_it_truncates_or_deletes(tmp_path, caplog):
    path = str(tmp_path / "t-0")
    cfg = small_config(segment_bytes=1024)
    lg = PartitionLog(path, cfg)
    for i in range(40):
        lg.append(kv_batch([(b"k%d" % i, b"v" * 60), (b"x", b"y")]))
    segs = [(s.base_offset, s.log_path) for s in lg.segments]
    lg.close()
    assert len(segs) >= 4
    # Damage the second segment in the middle of its third batch.
    _base, victim = segs[1]
    data = bytearray(open(victim, "rb").read())
    from protocol.records import BatchView

    pos = 0
    for _ in range(2):
        pos += BatchView(bytes(data), pos).size
    data[pos + 30] ^= 0xFF
    open(victim, "wb").write(bytes(data))
    with caplog.at_level(logging.INFO, logger="storage.log"):
        lg = PartitionLog(path, cfg, recovery_point=0, had_clean_shutdown=False)
    text = "\n".join(r.getMessage() for r in caplog.records)
    base = segs[1][0]
    assert f"found invalid data in segment {victim} (base offset {base}) at byte offset {pos}" in text
    assert f"truncated {len(data) - pos} of {len(data)} bytes" in text
    assert f"offsets {base} to {base + 3} (4 records) kept" in text  # two batches of two records
    for later_base, later_path in segs[2:]:
        line = next(m for m in text.splitlines() if later_path.rsplit("/", 1)[1] in m and "deleting segment" in m)
        assert f"offsets {later_base} to" in line and "readable records" in line
    assert lg.log_end_offset == base + 4
    lg.close()
