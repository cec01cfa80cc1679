"""leader-epoch-checkpoint writes on restart: a file whose entries did not change is not rewritten.

An empty partition's epoch starts at its LEO, so loading its log drops that entry (Kafka's truncateFromEnd)
and becoming leader again re-assigns the same one: the file ends where it started, with no write.
"""

from __future__ import annotations

import os
from pathlib import Path

from storage.checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from storage.log import PartitionLog
from tests.storage.test_log import fill


def _inode(path: Path) -> int:
    # Every checkpoint write is an atomic replace: a new inode.
    return os.stat(path / LEADER_EPOCH_CHECKPOINT).st_ino


def _become_leader(lg: PartitionLog, epoch: int) -> None:
    lg.maybe_assign_epoch_start_offset(epoch, lg.log_end_offset, write_checkpoint=False)
    lg.write_leader_epoch_checkpoint()


def test_empty_partition_restart_and_same_epoch_rewrites_nothing(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = PartitionLog(str(d))
    _become_leader(lg, 0)
    lg.flush()
    lg.close()
    assert LeaderEpochCheckpointFile(str(d / LEADER_EPOCH_CHECKPOINT)).read() == [(0, 0)]
    ino = _inode(d)

    lg = PartitionLog(str(d), had_clean_shutdown=True)
    assert lg.leader_epoch_cache.entries() == []  # truncated from the end (LEO 0), in memory only
    assert _inode(d) == ino
    _become_leader(lg, 0)
    assert not lg.leader_epoch_checkpoint_stale
    assert lg.leader_epoch_cache.entries() == [(0, 0)]
    lg.flush()
    lg.close()
    assert _inode(d) == ino
    assert LeaderEpochCheckpointFile(str(d / LEADER_EPOCH_CHECKPOINT)).read() == [(0, 0)]


def test_new_epoch_is_written(tmp_path: Path) -> None:
    d = tmp_path / "t-1"
    lg = PartitionLog(str(d))
    _become_leader(lg, 0)
    fill(lg, 3, epoch=0)
    lg.flush()
    lg.close()
    lg = PartitionLog(str(d), had_clean_shutdown=True)
    assert lg.leader_epoch_cache.entries() == [(0, 0)]
    ino = _inode(d)
    _become_leader(lg, 0)  # same epoch: nothing to do
    assert _inode(d) == ino
    _become_leader(lg, 4)
    assert _inode(d) != ino
    assert LeaderEpochCheckpointFile(str(d / LEADER_EPOCH_CHECKPOINT)).read() == [(0, 0), (4, 3)]
    lg.close()


def test_truncation_at_load_reaches_the_file_when_no_leader_restores_it(tmp_path: Path) -> None:
    d = tmp_path / "t-2"
    lg = PartitionLog(str(d))
    _become_leader(lg, 2)
    lg.close()
    # Loaded and closed again without becoming leader (a follower, or a stop): the file follows memory.
    lg = PartitionLog(str(d), had_clean_shutdown=True)
    assert lg.leader_epoch_checkpoint_stale  # the file still has the entry the load dropped
    lg.flush()
    lg.close()
    assert LeaderEpochCheckpointFile(str(d / LEADER_EPOCH_CHECKPOINT)).read() == []


def test_crash_before_the_deferred_write_loses_nothing(tmp_path: Path) -> None:
    d = tmp_path / "t-3"
    lg = PartitionLog(str(d))
    _become_leader(lg, 1)
    fill(lg, 2, epoch=1)
    _become_leader(lg, 3)  # epoch 3 from offset 2, no records in it yet
    lg.flush()
    lg.close()
    lg = PartitionLog(str(d), had_clean_shutdown=True)
    assert lg.leader_epoch_cache.entries() == [(1, 0)]
    # No flush, no close (the process died): the file still names epoch 3, and a load drops it again.
    assert LeaderEpochCheckpointFile(str(d / LEADER_EPOCH_CHECKPOINT)).read() == [(1, 0), (3, 2)]
    again = PartitionLog(str(d), had_clean_shutdown=False)
    assert again.leader_epoch_cache.entries() == [(1, 0)]
    assert again.log_end_offset == 2
    again.close()
    lg.close_quietly()
