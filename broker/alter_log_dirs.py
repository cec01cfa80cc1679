"""Moving a replica between this broker's log dirs while it keeps serving (KIP-113, AlterReplicaLogDirs).

As Kafka's ReplicaManager.alterReplicaLogDirs and ReplicaAlterLogDirsManager/Thread do in ZooKeeper mode:

* AlterReplicaLogDirs creates an empty *future log* of the partition in the destination dir (a
  ``<topic>-<partition>.<uuid>-future`` directory, storage/log_manager.py) and hands it to the mover;
* the mover copies batches from the current log to the future log, as a follower copies from its leader:
  the same offsets, leader epochs, producer state and transaction index; the future log follows the
  current one's truncations (checked by leader epoch, as KIP-101), log start offset and high watermark;
* once the future log has caught up, the swap runs on the event loop, which does every append, so nothing
  is written between the last copied batch and the swap: the future log becomes the partition's log and
  the old directory is renamed ``-delete``. Producers and consumers see nothing but their next request
  served from the new dir.

One partition is copied at a time, oldest move first (Kafka's selectPartitionToFetch), ``replica.fetch.max.bytes``
per round, in a worker thread; the last round and the swap run on the loop. The copy rate is capped by the
dynamic broker config ``replica.alter.log.dirs.io.max.bytes.per.second`` (Kafka's AlterLogDirs replication
quota). A future log found at start-up is picked up again once the partition is online (the LeaderAndIsr
after the restart), so a move survives restarts. A move to a dir other than the one in progress cancels it
(the future log is deleted); a move back to the current dir only cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from broker.replication_quota import INT64_MAX, ReplicationQuota
from config.registry import REGISTRY
from protocol.errors import ErrorCode
from storage.batch_headers import buffer_headers
from storage.errors import KafkaStorageError, OffsetOutOfRangeError
from storage.log_manager import LogDirNotFoundError, future_dir_name

if TYPE_CHECKING:
    from broker.partition import Partition
    from broker.replica_manager import ReplicaManager
    from config.registry import BrokerConfig
    from storage.cleaner import LogCleaner
    from storage.log import PartitionLog
    from storage.log_manager import LogManager

log = logging.getLogger(__name__)

TP = tuple[str, int]
RATE_CONFIG = "replica.alter.log.dirs.io.max.bytes.per.second"
# The AlterLogDirs quota's own sample window (Kafka's QuotaConfigs), under the names ReplicationQuota reads.
_WINDOW_CONFIGS = {"replication.quota.window.num": "alter.log.dirs.replication.quota.window.num",
                   "replication.quota.window.size.seconds": "alter.log.dirs.replication.quota.window.size.seconds"}
# Kafka's defaults, used while the config registry does not define these names.
_KAFKA_DEFAULTS: dict[str, Any] = {RATE_CONFIG: INT64_MAX, "alter.log.dirs.replication.quota.window.num": 11,
                                   "alter.log.dirs.replication.quota.window.size.seconds": 1}
# Kafka refuses a move whose future directory name would not fit a file name (KAFKA-4893).
MAX_DIR_NAME = 255
# How often the mover looks at the quota again while it is exceeded.
THROTTLE_POLL_S = 0.05


def quota_setting(config: BrokerConfig, name: str) -> Any:
    """A setting of the AlterLogDirs quota: the broker config when the registry defines it, else Kafka's default."""
    if REGISTRY.get(name) is not None:
        return config.get(name)
    return _KAFKA_DEFAULTS[name]


class AlterLogDirsManager:
    """The moves in progress on this broker and the task that copies them."""

    def __init__(self, broker_id: int, log_manager: LogManager, replica_manager: Callable[[], ReplicaManager | None],
                 config: Callable[[], BrokerConfig], cleaner: Callable[[], LogCleaner | None] = lambda: None) -> None:
        self.log_manager = log_manager
        # Cleaning of a partition is paused while it moves, as Kafka's ReplicaManager pauses it when it
        # creates the future log and resumes it when the future log takes over (or the move ends).
        self.cleaner = cleaner
        self.replica_manager = replica_manager  # built after this object (it is handed this one)
        self.config = config
        self.quota = ReplicationQuota(
            broker_id, RATE_CONFIG, "", lambda name: quota_setting(config(), _WINDOW_CONFIGS.get(name, name)),
            lambda _topic: None)
        self.moving: dict[TP, str] = {}  # partition -> destination dir, oldest move first
        self.failed: set[TP] = set()  # moves stopped by an error, until resumed (FailedPartitionsCount)
        self.bytes_copied = 0
        self.closed = False
        self._wakeup = asyncio.Event()
        self._round = asyncio.Lock()  # held while a copy round or a swap runs
        self._alter = asyncio.Lock()  # AlterReplicaLogDirs requests one at a time (Kafka: replicaStateChangeLock)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def shutdown(self) -> None:
        """Stop copying; future logs stay on disk and resume after the restart."""
        self.closed = True
        async with self._round:  # a round in a worker thread finishes first
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
                self._task = None

    # ------------------------------------------------------------------------------------------------
    # AlterReplicaLogDirs

    async def alter_replica_log_dirs(self, dirs: dict[TP, str]) -> dict[TP, ErrorCode]:
        async with self._alter:
            out = {}
            for tp, log_dir in dirs.items():
                try:
                    out[tp] = await self._alter_one(tp, log_dir)
                except Exception as e:
                    if isinstance(e, KafkaStorageError):
                        out[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                    else:
                        log.exception("changing the log dir of %s-%d failed", tp[0], tp[1])
                        out[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
                    log.warning("unable to alter the log dir of %s-%d to %s: %s", tp[0], tp[1], log_dir, e)
            return out

    async def _alter_one(self, tp: TP, log_dir: str) -> ErrorCode:
        lm = self.log_manager
        topic, partition = tp
        if len(future_dir_name(topic, partition)) > MAX_DIR_NAME:
            return ErrorCode.INVALID_TOPIC_EXCEPTION  # "The topic name is too long."
        try:
            lm.check_log_dir(log_dir)
        except LogDirNotFoundError:
            return ErrorCode.LOG_DIR_NOT_FOUND
        except KafkaStorageError:
            return ErrorCode.KAFKA_STORAGE_ERROR
        rm = self.replica_manager()
        p = rm.partitions.get(tp) if rm is not None else None
        if p is not None and (lm.is_partition_offline(tp) or p.log.is_offline):
            return ErrorCode.KAFKA_STORAGE_ERROR
        future_dir = lm.future_log_dir_of(topic, partition)
        if p is not None and future_dir is not None and future_dir != log_dir:
            await self.cancel(tp)  # another destination than the move in progress: that move stops
        # A replica this broker does not host yet is created in this dir when it comes (LeaderAndIsr).
        lm.set_preferred_log_dir(topic, partition, log_dir)
        if p is None or rm is None or lm.get_log(topic, partition) is None:
            if rm is not None and rm.metadata.partition(topic, partition) is not None:
                return ErrorCode.REPLICA_NOT_AVAILABLE
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if lm.log_dir_of(topic, partition) == log_dir:
            return ErrorCode.NONE  # there already (a move elsewhere, if any, was cancelled above)
        if lm.future_log_dir_of(topic, partition) != log_dir:
            loop = asyncio.get_running_loop()
            p.future_log = await loop.run_in_executor(None, lambda: lm.create_future_log(
                topic, partition, log_dir, topic_id=p.topic_id, config=p.config))
            cleaner = self.cleaner()
            if cleaner is not None:
                # Waits for a pass cleaning this partition to stop at its next segment.
                await loop.run_in_executor(None, cleaner.abort_and_pause, topic, partition)
                log.info("The cleaning for partition %s-%d is aborted and paused", topic, partition)
            log.info("moving %s-%d from %s to %s", topic, partition, lm.log_dir_of(topic, partition), log_dir)
        self._add(tp, p)
        return ErrorCode.NONE

    async def cancel(self, tp: TP) -> None:
        """Stop the move of ``tp`` and delete its future log."""
        async with self._round:
            self.moving.pop(tp, None)
            self.failed.discard(tp)
            self._resume_cleaning(tp)
            rm = self.replica_manager()
            p = rm.partitions.get(tp) if rm is not None else None
            if p is not None:
                p.future_log = None
            await asyncio.get_running_loop().run_in_executor(None, self.log_manager.delete_future_log, *tp)
        log.info("stopped moving %s-%d", tp[0], tp[1])

    # ------------------------------------------------------------------------------------------------
    # Partitions coming and going (LeaderAndIsr, StopReplica)

    def resume(self, tps: Iterable[TP]) -> None:
        """Kafka's maybeAddLogDirFetchers: partitions now online here whose future log exists (found at
        start-up, or left by a StopReplica without deletion) are copied on."""
        lm = self.log_manager
        rm = self.replica_manager()
        if rm is None or self.closed:
            return
        for tp in tps:
            p = rm.partitions.get(tp)
            if p is not None and tp not in self.moving and lm.get_future_log(*tp) is not None:
                log.info("resuming the move of %s-%d to %s", tp[0], tp[1], lm.future_log_dir_of(*tp))
                cleaner = self.cleaner()
                if cleaner is not None:
                    cleaner.abort_and_pause(*tp, timeout=0)  # a pass under way stops; the swap waits for it
                self._add(tp, p)

    def stop_partition(self, tp: TP) -> None:
        """The replica is stopped (its future log stays for the next LeaderAndIsr, or goes with it when
        the replica is deleted)."""
        self.moving.pop(tp, None)
        self.failed.discard(tp)
        self._resume_cleaning(tp)

    def _resume_cleaning(self, tp: TP) -> None:
        cleaner = self.cleaner()
        if cleaner is not None and cleaner.is_paused(*tp):
            cleaner.resume(*tp)
            log.info("Cleaning for partition %s-%d is resumed", tp[0], tp[1])

    # ------------------------------------------------------------------------------------------------
    # Kafka's ReplicaAlterLogDirsManager metrics

    def max_lag(self) -> int:
        """Records the furthest-behind future replica still has to copy (MaxLag)."""
        rm = self.replica_manager()
        lag = 0
        for tp in list(self.moving):
            p = rm.partitions.get(tp) if rm is not None else None
            future = self.log_manager.get_future_log(*tp)
            if p is not None and future is not None and not p.log.is_offline and not future.is_offline:
                lag = max(lag, p.log.log_end_offset - future.log_end_offset)
        return lag

    @property
    def copier_dead(self) -> bool:
        """The copying task ended while the broker runs (DeadThreadCount)."""
        return self._task is not None and self._task.done() and not self.closed

    def _add(self, tp: TP, p: Partition) -> None:
        self.failed.discard(tp)
        p.future_log = self.log_manager.get_future_log(*tp)
        self.moving.setdefault(tp, self.log_manager.future_log_dir_of(*tp) or "")
        self._wakeup.set()

    # ------------------------------------------------------------------------------------------------
    # Copying

    async def _run(self) -> None:
        while not self.closed:
            if not self.moving:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if self.quota.is_exceeded():
                # Over replica.alter.log.dirs.io.max.bytes.per.second: no copy until the rate is back under.
                await asyncio.sleep(THROTTLE_POLL_S)
                continue
            tp = next(iter(self.moving))
            try:
                async with self._round:
                    if tp in self.moving:
                        await self._copy_round(tp)
            except asyncio.CancelledError:
                raise
            except OffsetOutOfRangeError as e:
                log.info("moving %s-%d: %s; starting the round again", tp[0], tp[1], e)
            except Exception as e:
                # Kafka's fetcher marks the partition failed; the next LeaderAndIsr for it resumes.
                log.error("moving %s-%d failed: %r", tp[0], tp[1], e, exc_info=not isinstance(e, KafkaStorageError))
                self._drop(tp)
                self.failed.add(tp)
                await asyncio.sleep(self.config().get("replica.fetch.backoff.ms") / 1000.0)

    def _drop(self, tp: TP) -> None:
        self.moving.pop(tp, None)
        self._resume_cleaning(tp)
        rm = self.replica_manager()
        p = rm.partitions.get(tp) if rm is not None else None
        if p is not None:
            p.future_log = None

    async def _copy_round(self, tp: TP) -> None:
        rm = self.replica_manager()
        p = rm.partitions.get(tp) if rm is not None else None
        future = self.log_manager.get_future_log(*tp)
        if rm is None or p is None or future is None:
            self._drop(tp)
            return
        current = p.log
        if current.is_offline or future.is_offline:
            self._drop(tp)
            return
        max_bytes = self.config().get("replica.fetch.max.bytes")
        copied, reached_end = await asyncio.get_running_loop().run_in_executor(
            None, copy_round, current, future, max_bytes, True)
        self._copied(copied)
        if not reached_end or tp not in self.moving or rm.partitions.get(tp) is not p or p.log is not current:
            return
        # What was appended during the round is copied here, on the loop, then the logs are swapped: no
        # append can come in between.
        cleaner = self.cleaner()
        if cleaner is not None and cleaner.is_cleaning(*tp):
            return  # a pass that began before the pause is still rewriting the current log: swap later
        copied, reached_end = copy_round(current, future, max_bytes, False)
        self._copied(copied)
        if reached_end and future.log_end_offset == current.log_end_offset:
            lm = self.log_manager
            source = lm.log_dir_of(*tp)
            moved = lm.replace_current_with_future(*tp)
            p.replace_log_with_future(moved)
            self.moving.pop(tp, None)
            self._resume_cleaning(tp)
            target = lm.log_dir_of(*tp)
            log.info("moved %s-%d to %s (log end offset %d)", tp[0], tp[1], target, moved.log_end_offset)
            if source is not None and target is not None:
                await asyncio.get_running_loop().run_in_executor(None, lm.checkpoint_after_move, *tp, source, target)

    def _copied(self, n: int) -> None:
        if n:
            self.quota.record(n)
            self.bytes_copied += n


def copy_round(current: PartitionLog, future: PartitionLog, max_bytes: int, flush: bool) -> tuple[int, bool]:
    """One round of the copy: up to ``max_bytes`` of batches from ``current`` appended to ``future``.
    Returns (bytes appended, whether ``future`` reached the end ``current`` had when the round began);
    with ``flush``, a future log that reached the end is synced (so the swap on the loop syncs little)."""
    _follow_truncation(current, future)
    if future.log_end_offset < current.log_start_offset:
        # Behind the current log's start (retention, DeleteRecords): start over there, as a follower does.
        future.truncate_fully_and_start_at(current.log_start_offset)
    end = current.log_end_offset
    copied = 0
    if future.log_end_offset < end:
        data = current.read_bytes(future.log_end_offset, max(max_bytes, 1))
        if data:
            copied = _append(future, data)
    future.high_watermark = current.high_watermark
    start = current.log_start_offset
    if future.log_start_offset < start <= future.high_watermark:
        future.delete_records(start)
    reached = future.log_end_offset >= end
    if reached and flush:
        future.flush()
    return copied, reached


def _append(future: PartitionLog, data: bytes) -> int:
    """Append whole batches read from the current log at the future log's end offset."""
    view = memoryview(data)
    first = buffer_headers(view)[0]
    leo = future.log_end_offset
    if first.base_offset < leo:
        if leo == future.log_start_offset:
            # The current log starts inside this batch (DeleteRecords): the future log starts at the batch,
            # as Kafka's follower does on an UnexpectedAppendOffsetException.
            future.truncate_fully_and_start_at(first.base_offset)
        else:
            future.truncate_to(first.base_offset)
    future.append_as_follower(view)
    return len(data)


def _follow_truncation(current: PartitionLog, future: PartitionLog) -> None:
    """Truncate the future log where it diverges from the current one (the current replica truncated as a
    follower after a leader change), by leader epoch as ReplicaAlterLogDirsThread does (KIP-101/279)."""
    leo = future.log_end_offset
    if leo == future.log_start_offset:
        return
    epoch = future.latest_epoch
    if epoch is None:
        target = min(leo, current.log_end_offset)
    else:
        their_epoch, their_end = current.end_offset_for_epoch(epoch)
        if their_epoch < 0 or their_end < 0:
            # The current log has no such epoch (any more): what the future log holds of it goes.
            starts = dict(future.leader_epoch_cache.entries())
            target = min(starts.get(epoch, leo), current.log_end_offset)
        elif their_epoch == epoch:
            target = min(their_end, leo)
        else:
            _e, our_end = future.end_offset_for_epoch(their_epoch)
            target = min(their_end, our_end if our_end >= 0 else leo, leo)
    if target < leo:
        log.info("truncating the future log of %s-%d from %d to %d", future.topic, future.partition, leo, target)
        if target <= future.log_start_offset:
            future.truncate_fully_and_start_at(max(target, current.log_start_offset))
        else:
            future.truncate_to(target)
