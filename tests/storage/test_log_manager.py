from __future__ import annotations

import json
import os
import shutil
import threading
import uuid

import pytest

from config.properties import read_properties
from storage.errors import LogDirOfflineError
from storage.log_manager import CLEAN_SHUTDOWN_FILE, InconsistentClusterIdError, LogManager
from tests.storage.conftest import kv_batch, records_of, small_config


def make_manager(dirs, **kw):
    lm = LogManager([str(d) for d in dirs], broker_id=1, cluster_id="cluster-A", default_config=small_config(), **kw)
    lm.startup()
    return lm


def test_layout_checkpoints_and_clean_shutdown(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    lm = make_manager(dirs)
    for d in dirs:
        props = read_properties(str(d / "meta.properties"))
        assert props == {"version": "0", "broker.id": "1", "cluster.id": "cluster-A"}
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    logs = [lm.get_or_create_log("orders", p, topic_id=topic_id) for p in range(4)]
    # new partitions go to the directory with the fewest partitions
    assert sorted(len(os.listdir(d)) for d in dirs) == [2 + 1, 2 + 1]  # 2 partitions + meta.properties
    meta = open(os.path.join(logs[0].dir_path, "partition.metadata")).read()
    assert meta == "version: 0\ntopic_id: EjRWeBI0VngSNFZ4EjRWeA"
    for i, lg in enumerate(logs):
        for j in range(10 + i):
            lg.append(kv_batch([(b"k", b"v%d" % j)]))
        lg.high_watermark = lg.log_end_offset - 1
    logs[0].delete_records(3)
    lm.shutdown(broker_epoch=7)
    for d in dirs:
        assert json.loads(open(d / CLEAN_SHUTDOWN_FILE).read()) == {"version": 0, "brokerEpoch": 7}
        rp = open(d / "recovery-point-offset-checkpoint").read().splitlines()
        assert rp[0] == "0" and int(rp[1]) == 2 and all(len(line.split()) == 3 for line in rp[2:])
    text = open(os.path.join(os.path.dirname(logs[0].dir_path), "log-start-offset-checkpoint")).read()
    assert "orders 0 3\n" in text
    hw_text = open(os.path.join(os.path.dirname(logs[1].dir_path), "replication-offset-checkpoint")).read()
    assert "orders 1 10\n" in hw_text
    lm = make_manager(dirs)
    assert all(lm.had_clean_shutdown.values())
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    lg0 = lm.get_log("orders", 0)
    assert lg0.log_start_offset == 3 and lg0.log_end_offset == 10 and lg0.high_watermark == 9
    assert lm.get_log("orders", 3).log_end_offset == 13
    assert [r[3] for r in records_of(lg0)] == [b"v%d" % j for j in range(3, 10)]
    lm.shutdown()


def test_unclean_restart_recovers_from_recovery_point(tmp_path):
    lm = make_manager([tmp_path / "d1"])
    lg = lm.get_or_create_log("t", 0)
    for j in range(50):
        lg.append(kv_batch([(b"k", b"v%d" % j)]))
    lm.checkpoint_recovery_points()
    for lg in lm.all_logs():
        lg.close_quietly()  # crash: no marker written
    lm2 = make_manager([tmp_path / "d1"])
    assert lm2.had_clean_shutdown == {str(tmp_path / "d1"): False}
    assert lm2.get_log("t", 0).log_end_offset == 50
    lm2.shutdown()


def test_cluster_id_mismatch_is_refused(tmp_path):
    make_manager([tmp_path / "d1"]).shutdown()
    lm = LogManager([str(tmp_path / "d1")], broker_id=1, cluster_id="other")
    with pytest.raises(InconsistentClusterIdError):
        lm.startup()


def test_failing_dir_goes_offline_without_taking_the_process_down(tmp_path):
    went_offline = []
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    lm = make_manager(dirs, on_dir_offline=went_offline.append)
    a = lm.get_or_create_log("t", 0)
    b = lm.get_or_create_log("t", 1)
    a.append(kv_batch([(b"k", b"v")]))
    b.append(kv_batch([(b"k", b"v")]))
    bad_dir = os.path.dirname(a.dir_path)
    # the disk under d1 fails: its segment file descriptor starts returning EBADF/EIO
    os.close(a.active_segment.fd)
    with pytest.raises(LogDirOfflineError):
        a.append(kv_batch([(b"k", b"v2")]))
    assert went_offline == [bad_dir] and lm.offline_dirs == {bad_dir}
    assert ("t", 0) in lm.offline_partitions and lm.get_log("t", 0) is None
    assert lm.is_partition_offline(("t", 0)) and not lm.is_partition_offline(("t", 1))
    with pytest.raises(LogDirOfflineError):
        a.append(kv_batch([(b"k", b"v3")]))
    # the other dir keeps working, and new partitions avoid the offline dir
    b.append(kv_batch([(b"k", b"v2")]))
    c = lm.get_or_create_log("t", 2)
    assert os.path.dirname(c.dir_path) != bad_dir
    lm.tick()
    lm.shutdown()
    assert not (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists() or bad_dir != str(tmp_path / "d1")


def test_shutdown_after_its_dir_vanished_closes_every_log(tmp_path):
    # The data dir is removed under a running broker (a disk pulled, a volume unmounted), then it stops.
    # Shutdown closes logs in parallel threads; each close fails and takes the dir offline. The first
    # to fail closes the others while they fail too: it must not hold the manager's lock while it
    # waits for theirs, or the threads wait for each other and the broker never exits.
    went_offline = []
    d = tmp_path / "d1"
    for attempt in range(3):  # the threads must meet in the wrong order to hang: give them chances
        lm = make_manager([d / str(attempt)], on_dir_offline=went_offline.append)
        logs = [lm.get_or_create_log(f"t{i}", 0) for i in range(48)]
        for lg in logs:
            lg.append(kv_batch([(b"k", b"v")]))
        shutil.rmtree(d / str(attempt))
        done = threading.Event()

        def stop(lm: LogManager = lm, done: threading.Event = done) -> None:
            lm.shutdown()
            done.set()

        threading.Thread(target=stop, daemon=True).start()
        assert done.wait(60), "LogManager.shutdown did not return: its threads deadlocked"
        assert lm.offline_dirs == {str(d / str(attempt))}
        assert all(lm.get_log(f"t{i}", 0) is None for i in range(48))
    assert went_offline == [str(d / str(a)) for a in range(3)]


def test_unreadable_dir_at_startup_is_offline(tmp_path):
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    make_manager([d1, d2]).shutdown()
    shutil.rmtree(d1)
    d1.write_text("not a directory")
    lm = make_manager([d1, d2])
    assert lm.offline_dirs == {str(d1)}
    assert os.path.dirname(lm.get_or_create_log("x", 0).dir_path) == str(d2)
    lm.shutdown()


def test_delete_log_renames_then_removes(tmp_path):
    now = [1_000_000]
    lm = make_manager([tmp_path / "d1"], clock=lambda: now[0])
    lg = lm.get_or_create_log("gone", 0)
    lg.append(kv_batch([(b"k", b"v")]))
    lm.delete_log("gone", 0)
    names = os.listdir(tmp_path / "d1")
    assert any(n.startswith("gone-0.") and n.endswith("-delete") for n in names)
    now[0] += 120_000
    lm.tick()
    assert not any(n.startswith("gone-0") for n in os.listdir(tmp_path / "d1"))
    lm.shutdown()


def test_high_watermarks_checkpointed_every_interval_without_a_clean_stop(tmp_path):
    """Kafka's ReplicaManager writes replication-offset-checkpoint every
    replica.high.watermark.checkpoint.interval.ms: a broker killed without a clean stop restarts from a
    HW at most that old."""
    now = [1_000_000]
    d = tmp_path / "d1"
    lm = make_manager([d], clock=lambda: now[0], high_watermark_checkpoint_interval_ms=5_000)
    lg = lm.get_or_create_log("hw", 0)
    for j in range(5):
        lg.append(kv_batch([(b"k", b"v%d" % j)]))
    lg.high_watermark = 4
    checkpoint = d / "replication-offset-checkpoint"
    now[0] += 4_999
    lm.tick()
    assert not checkpoint.exists()  # not due yet
    now[0] += 1
    lm.tick()
    assert "hw 0 4\n" in checkpoint.read_text()
    lg.high_watermark = 5
    now[0] += 5_000
    lm.tick()
    assert "hw 0 5\n" in checkpoint.read_text()
    # Nothing moved: the periodic write leaves the file alone.
    mtime = checkpoint.stat().st_mtime_ns
    os.utime(checkpoint, ns=(mtime - 10**9, mtime - 10**9))
    now[0] += 5_000
    lm.tick()
    assert checkpoint.stat().st_mtime_ns == mtime - 10**9
    # No shutdown (as after SIGKILL): a new manager reads the periodic checkpoint.
    lm2 = make_manager([tmp_path / "d1"])
    assert lm2.had_clean_shutdown == {str(d): False}
    assert lm2.get_log("hw", 0).high_watermark == 5
    lm2.shutdown()
