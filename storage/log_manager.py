"""LogManager: every partition log in the broker's ``log.dirs``, their checkpoints and failures.

Directory layout (Kafka's)::

    <log dir>/meta.properties                     version=0, broker.id, cluster.id
    <log dir>/.kafka_cleanshutdown                present only after a clean shutdown
    <log dir>/recovery-point-offset-checkpoint    \\
    <log dir>/replication-offset-checkpoint        | text checkpoints: version, count,
    <log dir>/log-start-offset-checkpoint          | "topic partition offset" lines
    <log dir>/cleaner-offset-checkpoint           /
    <log dir>/<topic>-<partition>/                segments, leader-epoch-checkpoint, partition.metadata
    <log dir>/<topic>-<partition>.<uuid>-future/  a replica being moved here from another log dir (KIP-113)

A new partition goes to the online directory holding the fewest partitions. Any OSError from a directory's
files (a full disk included, as Kafka; not running out of descriptors, which is the process's) takes that directory offline: its partitions are closed and reported in
``offline_partitions``, ``offline_dirs`` grows and ``on_dir_offline`` is called; the process keeps running.

Future logs (Kafka's futureLogs, KIP-113): AlterReplicaLogDirs creates a second log of a partition in
another log dir, in a ``-future`` directory, which the broker fills from the current log (see
broker/alter_log_dirs.py). ``replace_current_with_future`` then renames it to ``<topic>-<partition>`` and
the old directory to ``<topic>-<partition>.<uuid>-delete``. A future log found at start-up is loaded
beside the current one, so the move resumes. Future logs are flushed and checkpointed like the others but
are not in ``all_logs()``: nothing but the move reads or cleans them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from config.properties import format_properties, read_properties
from storage.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointFormatError,
    OffsetCheckpointFile,
    atomic_write,
    fsync_dir,
)
from storage.errors import KafkaStorageError, LogDirOfflineError, is_disk_full
from storage.file_handles import SEGMENT_FILES, is_out_of_descriptors, retry_when_out_of_descriptors
from storage.log import PartitionLog, now_ms, parse_partition_dir

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
# Kafka's UnifiedLog.logFutureDirName and parseTopicPartitionName: <topic>-<partition>.<uuid>-future.
_FUTURE_DIR = re.compile(r"^(?P<name>.+)\.(?P<id>[^.]+)" + re.escape(FUTURE_DIR_SUFFIX) + "$")

TopicPartition = tuple[str, int]

# Threads for batches of small fsync'd writes (new logs, leader-epoch checkpoints of a LeaderAndIsr):
# the file system commits concurrent fsyncs together, so thousands take about as long as unsynced writes.
BATCH_IO_THREADS = 16
# Flush durations kept for LogFlushRateAndTimeMs' percentiles (the size of Kafka's Yammer reservoir).
FLUSH_TIMES_KEPT = 1028
# Threads loading logs at start: Kafka's num.recovery.threads.per.data.dir default. Loading a cleanly
# closed log is mostly Python; measured on 10,000 logs, 4 threads took 4-6 s and one thread 2.5 s (they
# only fight over the interpreter lock).
LOAD_THREADS = 1
# Logs per load task.
LOAD_CHUNK = 32


def run_batch(fn: Callable[[Any], None], items: Sequence[Any], *,
              threads: int = BATCH_IO_THREADS) -> list[BaseException | None]:
    """``fn`` on every item, in parallel threads; the exception each raised (or None), in order."""

    def one(item: Any) -> BaseException | None:
        try:
            fn(item)
        except Exception as e:  # reported per item to the caller
            return e
        return None

    if len(items) < 8 or threads <= 1:
        return [one(item) for item in items]
    with ThreadPoolExecutor(min(threads, len(items)), thread_name_prefix="log-batch") as pool:
        return list(pool.map(one, items))


class InconsistentClusterIdError(Exception):
    """meta.properties names another cluster than the one this broker joined."""


class LogDirNotFoundError(Exception):
    """LOG_DIR_NOT_FOUND (57): a path that is not one of the broker's log.dirs."""


def future_dir_name(topic: str, partition: int) -> str:
    """A new future log directory's name (a fresh uuid, without dashes, as Kafka's)."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_future_dir(name: str) -> TopicPartition:
    m = _FUTURE_DIR.match(name)
    if not m:
        raise ValueError(f"{name!r} is not a <topic>-<partition>.<uuid>-future directory name")
    return parse_partition_dir(m.group("name"))


def topic_id_to_string(topic_id: uuid.UUID | bytes | str) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    if isinstance(topic_id, str):
        return topic_id
    raw = topic_id.bytes if isinstance(topic_id, uuid.UUID) else topic_id
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def write_properties(path: str, props: dict[str, str]) -> None:
    atomic_write(path, format_properties(props).encode("latin-1"))


def write_partition_metadata(log_dir: str, topic_id: uuid.UUID | bytes | str) -> None:
    atomic_write(os.path.join(log_dir, PARTITION_METADATA), f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}".encode())


def read_partition_metadata(log_dir: str) -> str | None:
    path = os.path.join(log_dir, PARTITION_METADATA)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    if fields.get("version") != "0":
        raise ValueError(f"{path}: unknown version {fields.get('version')!r}")
    return fields.get("topic_id")


class LogManager:
    def __init__(
        self,
        log_dirs: list[str],
        *,
        broker_id: int,
        cluster_id: str | None = None,
        default_config: Any = None,
        topic_config: Callable[[str], Any] | None = None,
        clock: Callable[[], int] = now_ms,
        on_dir_offline: Callable[[str], None] | None = None,
        retention_check_interval_ms: int = 300_000,
        flush_offset_checkpoint_interval_ms: int = 60_000,
        flush_start_offset_checkpoint_interval_ms: int = 60_000,
        high_watermark_checkpoint_interval_ms: int = 5_000,
        recovery_threads: int = LOAD_THREADS,
        after_many_logs: Callable[[int], None] | None = None,
    ) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.default_config = default_config
        self.topic_config = topic_config
        self.clock = clock
        self.on_dir_offline = on_dir_offline
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_offset_checkpoint_interval_ms = flush_offset_checkpoint_interval_ms
        self.flush_start_offset_checkpoint_interval_ms = flush_start_offset_checkpoint_interval_ms
        self.high_watermark_checkpoint_interval_ms = high_watermark_checkpoint_interval_ms
        # What each dir's replication-offset-checkpoint last held, for the periodic write to skip a dir
        # where no HW moved.
        self._hws_written: dict[str, dict[TopicPartition, int]] = {}
        self.recovery_threads = max(1, recovery_threads)
        # Told how many logs were loaded at start-up, or created in one batch: the process decides what
        # to do about a heap that just grew by that many long-lived objects (broker/heap.py).
        self.after_many_logs = after_many_logs
        self.offline_dirs: set[str] = set()
        self.had_clean_shutdown: dict[str, bool] = {}
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._offline_partitions: set[TopicPartition] = set()
        self._pending_dir_deletes: list[tuple[int, str]] = []
        # Future logs by partition, the log dir holding each and its real "-future" directory.
        self._future: dict[TopicPartition, PartitionLog] = {}
        self._future_dir_of: dict[TopicPartition, str] = {}
        self._future_path: dict[TopicPartition, str] = {}
        # PartitionLog takes its topic and partition from its directory's name, which a "-future" name is
        # not: each future log is opened through a symlink named <topic>-<partition> in this private
        # directory (outside the log dirs, whose layout stays Kafka's), made when the first one opens.
        self._future_links: str | None = None
        # AlterReplicaLogDirs for a replica this broker does not host yet: its log is created in that dir
        # (Kafka's preferredLogDirs).
        self._preferred_dirs: dict[TopicPartition, str] = {}
        self._lock = threading.RLock()
        t = clock()
        self._next_retention = t + retention_check_interval_ms
        self._next_recovery_checkpoint = t + flush_offset_checkpoint_interval_ms
        self._next_start_checkpoint = t + flush_start_offset_checkpoint_interval_ms
        self._next_hw_checkpoint = t + high_watermark_checkpoint_interval_ms
        self._started = False
        # Kafka's LogFlushStats LogFlushRateAndTimeMs, read by the broker's metrics: (monotonic time,
        # milliseconds) of the most recent periodic flushes (a bounded deque: O(1) per flush), and totals.
        self.flush_times: deque[tuple[float, float]] = deque(maxlen=FLUSH_TIMES_KEPT)
        self.flushes = 0
        self.flush_ms_total = 0.0

    # ================================================================================ failures
    def _mark_offline(self, log_dir: str, exc: BaseException) -> None:
        # The logs are closed after the manager's lock is released. A log calls this while holding its
        # own lock (an append, a flush or a close that failed); closing the others under the manager's
        # lock would wait for a log whose thread waits here for that lock, as several logs of one
        # failed dir do at once (a shutdown closes them in parallel).
        with self._lock:
            if log_dir in self.offline_dirs:
                return
            log.error("log dir %s is offline: %s", log_dir, exc)
            self.offline_dirs.add(log_dir)
            gone: list[PartitionLog] = []
            for tp, d in list(self._dir_of.items()):
                if d == log_dir:
                    lg = self._logs.pop(tp, None)
                    if lg is not None:
                        gone.append(lg)
                    self._offline_partitions.add(tp)
            futures = [self._forget_future(tp) for tp, d in list(self._future_dir_of.items()) if d == log_dir]
        for lg in gone:
            lg.close_quietly()
        for lg in futures:
            lg.close_quietly()
            self._unlink_future(lg)
        if self.on_dir_offline is not None:
            self.on_dir_offline(log_dir)

    @contextlib.contextmanager
    def _guard(self, log_dir: str) -> Iterator[None]:
        try:
            yield
        except OSError as e:
            if is_disk_full(e):
                # Kafka's LogDirFailureChannel takes any IOException, "No space left on device" included:
                # the dir goes offline and leadership of its partitions moves to other brokers (KIP-112).
                self._mark_offline(log_dir, e)
                raise KafkaStorageError(f"log dir {log_dir} is full: {e}", disk_full=True, cause=e) from e
            if is_out_of_descriptors(e):
                # The process ran out of descriptors: the disk is fine. Close idle segment files so
                # the retry (or the next attempt) can open what it needs.
                SEGMENT_FILES.shed_idle()
                raise KafkaStorageError(f"out of file descriptors in log dir {log_dir}: {e}", cause=e) from e
            self._mark_offline(log_dir, e)
            raise LogDirOfflineError(f"log dir {log_dir} failed: {e}", cause=e) from e

    def _log_io_error(self, lg: PartitionLog, exc: OSError) -> None:
        tp = (lg.topic, lg.partition)
        if self._logs.get(tp) is not lg:
            # A log let go of (moved to another dir, or deleted) failing in a late operation: its files
            # are gone on purpose, and the dir now holding the partition is not at fault.
            return
        d = self._dir_of.get(tp)
        if d is not None:
            self._mark_offline(d, exc)

    def _future_io_error(self, lg: PartitionLog, exc: OSError) -> None:
        tp = (lg.topic, lg.partition)
        if self._future.get(tp) is lg:
            self._mark_offline(self._future_dir_of[tp], exc)

    @property
    def offline_partitions(self) -> set[TopicPartition]:
        return set(self._offline_partitions)

    def is_partition_offline(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s log dir failed; asked on every produce and fetch, so without a copy."""
        return tp in self._offline_partitions

    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    # ================================================================================ startup
    def startup(self) -> None:
        started = time.monotonic()
        for d in self.log_dirs:
            try:
                self._load_dir(d)
            except InconsistentClusterIdError:
                raise
            except OSError as e:
                self._mark_offline(d, e)
        if not self.online_dirs:
            raise KafkaStorageError("no log directory is online")
        self._started = True
        if self.after_many_logs is not None:
            self.after_many_logs(len(self._logs))
        log.info("loaded %d logs in %d ms", len(self._logs), (time.monotonic() - started) * 1000)

    def _check_meta_properties(self, d: str) -> None:
        path = os.path.join(d, META_PROPERTIES)
        if os.path.exists(path):
            props = read_properties(path)
            found = props.get("cluster.id")
            if self.cluster_id is not None and found is not None and found != self.cluster_id:
                raise InconsistentClusterIdError(f"{path} has cluster.id {found}, broker joined {self.cluster_id}")
            if self.cluster_id is None:
                self.cluster_id = found
            if props.get("broker.id") not in (None, str(self.broker_id)):
                raise InconsistentClusterIdError(f"{path} has broker.id {props['broker.id']}, not {self.broker_id}")
        else:
            props = {"version": "0", "broker.id": str(self.broker_id)}
            if self.cluster_id is not None:
                props["cluster.id"] = self.cluster_id
            write_properties(path, props)

    def _config_for(self, topic: str) -> Any:
        if self.topic_config is not None:
            cfg = self.topic_config(topic)
            if cfg is not None:
                return cfg
        return self.default_config

    def _read_checkpoint(self, d: str, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(os.path.join(d, name)).read()
        except CheckpointFormatError as e:
            log.warning("ignoring corrupt checkpoint: %s", e)
            return {}

    def _load_dir(self, d: str) -> None:
        os.makedirs(d, exist_ok=True)
        self._check_meta_properties(d)
        clean_file = os.path.join(d, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(clean_file)
        self.had_clean_shutdown[d] = clean
        recovery_points = self._read_checkpoint(d, RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT)
        hws = self._read_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT)
        found: list[tuple[TopicPartition, str]] = []
        futures: list[tuple[TopicPartition, str]] = []
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                self._pending_dir_deletes.append((self.clock(), path))
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                try:
                    futures.append((parse_future_dir(name), path))
                except ValueError:
                    pass
                continue
            try:
                tp = parse_partition_dir(name)
            except ValueError:
                continue
            found.append((tp, path))
        # One config per topic (building one is not free, and a topic may have thousands of partitions).
        configs = {topic: self._config_for(topic) for topic in {tp[0] for tp, _path in found + futures}}
        loaded: dict[TopicPartition, PartitionLog] = {}

        def load(chunk: list[tuple[TopicPartition, str]]) -> None:
            for item in chunk:
                retry_when_out_of_descriptors(lambda item=item: load_one(item))  # type: ignore[misc]

        def load_one(item: tuple[TopicPartition, str]) -> None:
            tp, path = item
            loaded[tp] = PartitionLog(
                path,
                configs[tp[0]],
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                high_watermark=hws.get(tp),
                had_clean_shutdown=clean,
                clock=self.clock,
                io_error_handler=self._log_io_error,
            )

        # Logs load on recovery_threads threads (Kafka: num.recovery.threads.per.data.dir).
        # In chunks: a task per log would cost more in executor bookkeeping than most loads take.
        chunks = [found[i:i + LOAD_CHUNK] for i in range(0, len(found), LOAD_CHUNK)]
        errors = run_batch(load, chunks, threads=self.recovery_threads)
        first_error = next((e for e in errors if e is not None), None)
        if first_error is not None:
            for lg in loaded.values():
                lg.close_quietly()
            raise first_error
        with self._lock:
            for tp, _path in found:
                if tp in self._logs:
                    for lg in loaded.values():
                        lg.close_quietly()
                    raise OSError(f"duplicate log directories for {tp[0]}-{tp[1]}")
            for tp, _path in found:
                self._logs[tp] = loaded[tp]
                self._dir_of[tp] = d
        self._load_futures(d, futures, configs, recovery_points, start_offsets, hws, clean)
        if clean:
            os.unlink(clean_file)
            fsync_dir(d)

    def _load_futures(self, d: str, futures: list[tuple[TopicPartition, str]], configs: dict[str, Any],
                      recovery_points: dict[TopicPartition, int], start_offsets: dict[TopicPartition, int],
                      hws: dict[TopicPartition, int], clean: bool) -> None:
        """The future logs of dir ``d``: moves that were under way when the broker stopped."""
        for tp, path in futures:
            with self._lock:
                if tp in self._future:
                    # Kafka: "Duplicate log directories found" (the broker refuses to start).
                    raise OSError(f"duplicate future log directories for {tp[0]}-{tp[1]}: {path}, "
                                  f"{self._future_path[tp]}")
            lg = retry_when_out_of_descriptors(lambda tp=tp, path=path: self._open_future(  # type: ignore[misc]
                tp, path, configs[tp[0]], recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0), high_watermark=hws.get(tp), had_clean_shutdown=clean))
            with self._lock:
                self._future[tp] = lg
                self._future_dir_of[tp] = d
                self._future_path[tp] = path
            log.info("loaded future log of %s-%d in %s (log end offset %d)", tp[0], tp[1], path, lg.log_end_offset)

    def _open_future(self, tp: TopicPartition, path: str, config: Any, **kwargs: Any) -> PartitionLog:
        if self._future_links is None:
            self._future_links = tempfile.mkdtemp(prefix="kafkette-future-logs-")
        link = os.path.join(self._future_links, f"{tp[0]}-{tp[1]}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(link)
        os.symlink(path, link, target_is_directory=True)
        return PartitionLog(link, config, clock=self.clock, io_error_handler=self._future_io_error, **kwargs)

    def _forget_future(self, tp: TopicPartition) -> PartitionLog:
        """Drop a future log from the maps; the caller closes it, then calls _unlink_future."""
        lg = self._future.pop(tp)
        del self._future_dir_of[tp]
        del self._future_path[tp]
        return lg

    def _unlink_future(self, lg: PartitionLog) -> None:
        """Remove the symlink a closed future log was opened through, and the links' directory with the
        last one (so that only a broker killed during a move leaves an empty directory behind)."""
        with contextlib.suppress(OSError):
            os.unlink(lg.dir_path)
        with self._lock:  # create_future_log opens its link under this lock
            links = self._future_links
            if links is not None and not self._future:
                with contextlib.suppress(OSError):
                    os.rmdir(links)
                    self._future_links = None

    # ================================================================================ logs
    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def partition_counts(self) -> dict[str, int]:
        """Logs per online dir, future logs included (as Kafka's nextLogDirs counts them)."""
        counts = {d: 0 for d in self.online_dirs}
        for tp, d in self._dir_of.items():
            if d in counts and tp in self._logs:
                counts[d] += 1
        for d in self._future_dir_of.values():
            if d in counts:
                counts[d] += 1
        return counts

    def _dir_for_new_log(self, tp: TopicPartition, counts: dict[str, int]) -> str:
        """The dir AlterReplicaLogDirs asked for when it is online, else the one with the fewest logs."""
        preferred = self._preferred_dirs.pop(tp, None)
        if preferred is not None and preferred in counts:
            return preferred
        return min(self.online_dirs, key=lambda x: (counts[x], self.log_dirs.index(x)))

    def get_or_create_log(
        self, topic: str, partition: int, *, topic_id: uuid.UUID | bytes | str | None = None, config: Any = None
    ) -> PartitionLog:
        tp = (topic, partition)
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if tp in self._offline_partitions:
                raise LogDirOfflineError(f"{topic}-{partition} is in an offline log dir")
            counts = self.partition_counts()
            if not counts:
                raise KafkaStorageError("no log directory is online")
            d = self._dir_for_new_log(tp, counts)
            with self._guard(d):
                path = os.path.join(d, f"{topic}-{partition}")
                os.makedirs(path, exist_ok=True)
                if topic_id is not None:
                    write_partition_metadata(path, topic_id)
                lg = PartitionLog(
                    path,
                    config if config is not None else self._config_for(topic),
                    had_clean_shutdown=True,
                    clock=self.clock,
                    io_error_handler=self._log_io_error,
                )
                fsync_dir(d)
            self._logs[tp] = lg
            self._dir_of[tp] = d
            return lg

    def create_logs(self, specs: Iterable[tuple[str, int, Any, Any]]) -> dict[TopicPartition, BaseException]:
        """Create many logs at once (a LeaderAndIsr for new partitions): ``(topic, partition, topic id,
        config)`` each. Directories are chosen as get_or_create_log does, the files are written in
        parallel and each log directory's parent is fsynced once. Returns the failures by partition."""
        todo: list[tuple[TopicPartition, str, Any, Any]] = []
        queued: set[TopicPartition] = set()  # a set: a LeaderAndIsr names 10,000 partitions or more
        failed: dict[TopicPartition, BaseException] = {}
        with self._lock:
            counts = self.partition_counts()
            for topic, partition, topic_id, config in specs:
                tp = (topic, partition)
                if tp in self._logs or tp in queued:
                    continue
                queued.add(tp)
                if tp in self._offline_partitions or not counts:
                    failed[tp] = LogDirOfflineError(f"{topic}-{partition} has no online log dir")
                    continue
                d = self._dir_for_new_log(tp, counts)
                counts[d] += 1
                todo.append((tp, d, topic_id, config))
        made: dict[TopicPartition, PartitionLog] = {}

        def create_one(item: tuple[TopicPartition, str, Any, Any]) -> None:
            (topic, partition), d, topic_id, config = item
            path = os.path.join(d, f"{topic}-{partition}")
            os.makedirs(path, exist_ok=True)
            if topic_id is not None:
                write_partition_metadata(path, topic_id)
            made[(topic, partition)] = PartitionLog(
                path, config if config is not None else self._config_for(topic), had_clean_shutdown=True,
                clock=self.clock, io_error_handler=self._log_io_error)

        def create(item: tuple[TopicPartition, str, Any, Any]) -> None:
            retry_when_out_of_descriptors(lambda: create_one(item))

        errors = run_batch(create, todo)
        dirs = {d for _tp, d, _i, _c in todo}
        for d in dirs:
            try:
                with self._guard(d):
                    fsync_dir(d)
            except KafkaStorageError as e:
                log.warning("could not sync log dir %s after creating logs: %s", d, e)
        with self._lock:
            for (tp, d, _i, _c), err in zip(todo, errors, strict=True):
                lg = made.get(tp)
                if err is not None or lg is None:
                    failed[tp] = err or KafkaStorageError(f"{tp[0]}-{tp[1]} was not created")
                    if isinstance(err, OSError) and not is_out_of_descriptors(err):
                        self._mark_offline(d, err)
                    continue
                if d in self.offline_dirs or tp in self._logs:
                    lg.close_quietly()
                    continue
                self._logs[tp] = lg
                self._dir_of[tp] = d
        if self.after_many_logs is not None:
            self.after_many_logs(len(made))
        return failed

    def delete_log(self, topic: str, partition: int) -> None:
        """Close the log and rename its directory ``<tp>.<uuid>-delete`` for asynchronous removal (its
        future log too)."""
        tp = (topic, partition)
        self.delete_future_log(topic, partition)
        with self._lock:
            lg = self._logs.pop(tp, None)
            d = self._dir_of.pop(tp, None)
            self._offline_partitions.discard(tp)
        if lg is None or d is None:
            return
        with self._guard(d):
            lg.close()
            self._rename_for_deletion(d, lg.dir_path, lg)

    def _rename_for_deletion(self, d: str, path: str, lg: PartitionLog) -> None:
        target = os.path.join(d, f"{lg.topic}-{lg.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(path, target)
        fsync_dir(d)
        configured = getattr(lg.config, "file_delete_delay_ms", None) if lg.config is not None else None
        delay = 60_000 if configured is None else int(configured)  # file.delete.delay.ms (0 is allowed)
        self._pending_dir_deletes.append((self.clock() + delay, target))

    # ================================================================================ moving between dirs
    def get_future_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._future.get((topic, partition))

    def future_log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._future_dir_of.get((topic, partition))

    def all_future_logs(self) -> list[PartitionLog]:
        return list(self._future.values())

    def check_log_dir(self, log_dir: str) -> None:
        """Kafka's isLogDirOnline as AlterReplicaLogDirs uses it: LogDirNotFoundError for a path that
        is not a configured log dir, KafkaStorageError for an offline one."""
        if log_dir not in self.log_dirs:
            raise LogDirNotFoundError(f"Log dir {log_dir} is not found in the config.")
        if log_dir in self.offline_dirs:
            raise KafkaStorageError(f"Log directory {log_dir} is offline")

    def set_preferred_log_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """Where the log of a replica this broker does not host yet is to be created (Kafka's
        maybeUpdatePreferredLogDir: not remembered when a log of the partition is in that dir already)."""
        tp = (topic, partition)
        with self._lock:
            if self._dir_of.get(tp) != log_dir and self._future_dir_of.get(tp) != log_dir:
                self._preferred_dirs[tp] = log_dir

    def create_future_log(self, topic: str, partition: int, log_dir: str, *, topic_id: Any = None,
                          config: Any = None) -> PartitionLog:
        """An empty future log of a hosted partition in ``log_dir``, another dir than its current log's."""
        tp = (topic, partition)
        with self._lock:
            self.check_log_dir(log_dir)
            if tp not in self._logs:
                raise KafkaStorageError(f"the current log of {topic}-{partition} is not online")
            if self._dir_of[tp] == log_dir:
                raise ValueError(f"{topic}-{partition} is in {log_dir} already")
            if tp in self._future:
                raise ValueError(f"{topic}-{partition} has a future log in {self._future_dir_of[tp]} already")
            path = os.path.join(log_dir, future_dir_name(topic, partition))
            with self._guard(log_dir):
                os.makedirs(path)
                if topic_id is not None:
                    write_partition_metadata(path, topic_id)
                lg = self._open_future(tp, path, config if config is not None else self._config_for(topic),
                                       had_clean_shutdown=True)
                fsync_dir(log_dir)
            self._future[tp] = lg
            self._future_dir_of[tp] = log_dir
            self._future_path[tp] = path
            self._preferred_dirs.pop(tp, None)
        log.info("created future log of %s-%d in %s", topic, partition, path)
        return lg

    def delete_future_log(self, topic: str, partition: int) -> None:
        """A move given up (AlterReplicaLogDirs to another dir, the replica deleted): the future log's
        directory is renamed ``-delete`` and removed later."""
        tp = (topic, partition)
        with self._lock:
            if tp not in self._future:
                return
            d, path = self._future_dir_of[tp], self._future_path[tp]
            lg = self._forget_future(tp)
        with self._guard(d), lg.lock:  # waits for a copy in progress
            lg.close()
            self._unlink_future(lg)
            self._rename_for_deletion(d, path, lg)
        log.info("deleted future log of %s-%d in %s", topic, partition, d)

    def replace_current_with_future(self, topic: str, partition: int) -> PartitionLog:
        """Kafka's replaceCurrentWithFutureLog: the future log, caught up with the current one, becomes the
        partition's log in its dir; the current log's directory is renamed ``-delete``. Returns the new
        current log (the future log reopened under its final name). ``checkpoint_after_move`` then
        rewrites the two dirs' checkpoints (off the event loop: until then they are merely stale).

        The caller makes sure nothing appends to the current log meanwhile (it runs on the event loop, which
        does every append); both logs' locks are held throughout, so a truncation or flush in a thread
        waits, and finds the log closed."""
        tp = (topic, partition)
        with self._lock:
            src, dest = self._logs.get(tp), self._future.get(tp)
            if src is None:
                raise KafkaStorageError(f"The current replica for {topic}-{partition} is offline")
            if dest is None:
                raise KafkaStorageError(f"The future replica for {topic}-{partition} is offline")
            src_dir, dest_dir, future_path = self._dir_of[tp], self._future_dir_of[tp], self._future_path[tp]
            with src.lock, dest.lock:
                if src.log_end_offset != dest.log_end_offset:
                    raise ValueError(f"the future log of {topic}-{partition} ends at {dest.log_end_offset}, "
                                     f"the current log at {src.log_end_offset}")
                final = os.path.join(dest_dir, f"{topic}-{partition}")
                with self._guard(dest_dir):
                    dest.flush()
                    dest.close()
                    self._forget_future(tp)
                    self._unlink_future(dest)
                    os.replace(future_path, final)
                    fsync_dir(dest_dir)
                    moved = PartitionLog(final, dest.config, recovery_point=dest.recovery_point,
                                         log_start_offset=max(dest.log_start_offset, src.log_start_offset),
                                         high_watermark=src.high_watermark, had_clean_shutdown=True,
                                         clock=self.clock, io_error_handler=self._log_io_error)
                    # The leader epochs of the current log that no copied batch carried yet (a new leader's
                    # epoch starts at its LEO, before any of its batches).
                    for epoch, start in src.leader_epoch_cache.entries():
                        moved.maybe_assign_epoch_start_offset(epoch, start)
                self._logs[tp] = moved
                self._dir_of[tp] = dest_dir
                with self._guard(src_dir):
                    src.close_quietly()  # its files go: no producer snapshot to write
                    self._rename_for_deletion(src_dir, src.dir_path, src)
        log.info("the current replica of %s-%d in %s is replaced with the future replica in %s", topic, partition,
                 src_dir, dest_dir)
        return moved

    def checkpoint_after_move(self, topic: str, partition: int, src_dir: str, dest_dir: str) -> None:
        """After ``replace_current_with_future``: the partition's cleaner offset moves with it and both dirs'
        recovery point and log start checkpoints are rewritten (as Kafka's replaceCurrentWithFutureLog)."""
        self._move_cleaner_offset((topic, partition), src_dir, dest_dir)
        for d in (src_dir, dest_dir):
            self._write_checkpoints(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point, only=d)
            self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset, only=d)

    def _move_cleaner_offset(self, tp: TopicPartition, src_dir: str, dest_dir: str) -> None:
        """Kafka's LogCleaner.alterCheckpointDir: the partition's cleaner offset follows it."""
        offsets = self._read_checkpoint(src_dir, CLEANER_OFFSET_CHECKPOINT)
        offset = offsets.pop(tp, None)
        if offset is None:
            return
        try:
            with self._guard(src_dir):
                OffsetCheckpointFile(os.path.join(src_dir, CLEANER_OFFSET_CHECKPOINT)).write(offsets)
            if dest_dir not in self.offline_dirs:
                with self._guard(dest_dir):
                    dest = self._read_checkpoint(dest_dir, CLEANER_OFFSET_CHECKPOINT)
                    dest[tp] = offset
                    OffsetCheckpointFile(os.path.join(dest_dir, CLEANER_OFFSET_CHECKPOINT)).write(dest)
        except KafkaStorageError as e:
            log.warning("could not move the cleaner offset of %s-%d: %s", tp[0], tp[1], e)

    # ================================================================================ checkpoints
    def _offsets_by_dir(self, value: Callable[[PartitionLog], int]) -> dict[str, dict[TopicPartition, int]]:
        """Per online dir, ``value`` of each log in it; a future log is keyed by its partition too (never
        in the same dir as the partition's current log)."""
        out: dict[str, dict[TopicPartition, int]] = {d: {} for d in self.online_dirs}
        for tp, lg in list(self._logs.items()):
            d = self._dir_of.get(tp)
            if d in out:
                out[d][tp] = value(lg)
        for tp, lg in list(self._future.items()):
            d = self._future_dir_of.get(tp)
            if d in out:
                out[d][tp] = value(lg)
        return out

    def _write_checkpoints(self, name: str, value: Callable[[PartitionLog], int], only: str | None = None,
                           last_written: dict[str, dict[TopicPartition, int]] | None = None) -> None:
        """``last_written``: what each dir's file was last written with, kept up to date here; a dir whose
        offsets are all the same is skipped (its file would be rewritten byte for byte)."""
        for d, offsets in self._offsets_by_dir(value).items():
            if only is not None and d != only:
                continue
            if last_written is not None and last_written.get(d) == offsets:
                continue
            for attempt in (1, 2):
                try:
                    with self._guard(d):
                        OffsetCheckpointFile(os.path.join(d, name)).write(offsets)
                    if last_written is not None:
                        last_written[d] = offsets
                    break
                except KafkaStorageError as e:
                    if attempt == 1 and is_out_of_descriptors(e.__cause__ or e):
                        continue  # _guard shed idle descriptors: once more
                    log.warning("could not write %s in %s: %s", name, d, e)
                    break

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoints(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset)

    def checkpoint_high_watermarks(self, *, skip_unchanged: bool = False) -> None:
        """Write each online dir's replication-offset-checkpoint; ``skip_unchanged``: not where every HW is
        what that dir's file was last written with."""
        self._write_checkpoints(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark,
                                last_written=self._hws_written if skip_unchanged else None)
        if not skip_unchanged:
            self._hws_written.clear()  # written in full: the next periodic write compares afresh

    def cleaner_offsets(self, log_dir: str) -> dict[TopicPartition, int]:
        return self._read_checkpoint(log_dir, CLEANER_OFFSET_CHECKPOINT)

    def update_cleaner_offset(self, topic: str, partition: int, offset: int) -> None:
        d = self._dir_of.get((topic, partition))
        if d is None or d in self.offline_dirs:
            return
        with self._guard(d):
            cp = OffsetCheckpointFile(os.path.join(d, CLEANER_OFFSET_CHECKPOINT))
            offsets = self._read_checkpoint(d, CLEANER_OFFSET_CHECKPOINT)
            offsets = {tp: o for tp, o in offsets.items() if tp in self._logs}
            offsets[(topic, partition)] = offset
            cp.write(offsets)

    # ================================================================================ periodic work
    def tick(self, now: int | None = None) -> None:
        """Periodic work (the broker calls it, ideally from an executor): flushes, retention, checkpoints."""
        t = self.clock() if now is None else now
        retention_due = t >= self._next_retention
        for lg in self.all_logs():
            if not retention_due and not lg.tick_due(t):
                # Most logs have nothing to do in a given second; with thousands of them, walking each
                # one's full tick held the GIL away from the event loop for milliseconds every second.
                continue
            d = self._dir_of.get((lg.topic, lg.partition))
            if d is None or d in self.offline_dirs:
                continue
            try:
                with self._guard(d):
                    recovery_point = lg.recovery_point
                    started = time.monotonic()
                    lg.tick(t)
                    if lg.recovery_point != recovery_point:  # it flushed (after a roll, or flush.ms)
                        self._flushed(started)
                    if retention_due:
                        lg.delete_old_segments(t)
            except KafkaStorageError as e:
                log.warning("periodic work on %s failed: %s", lg, e)
        for tp, lg in list(self._future.items()):  # flushes only: retention follows the current log
            d = self._future_dir_of.get(tp)
            if d is None or d in self.offline_dirs:
                continue
            try:
                with self._guard(d):
                    lg.tick(t)
            except KafkaStorageError as e:
                log.warning("periodic work on the future log of %s-%d failed: %s", tp[0], tp[1], e)
        if t >= self._next_retention:
            self._next_retention = t + self.retention_check_interval_ms
        if t >= self._next_recovery_checkpoint:
            self._next_recovery_checkpoint = t + self.flush_offset_checkpoint_interval_ms
            self.checkpoint_recovery_points()
        if t >= self._next_start_checkpoint:
            self._next_start_checkpoint = t + self.flush_start_offset_checkpoint_interval_ms
            self.checkpoint_log_start_offsets()
        if t >= self._next_hw_checkpoint:
            # Kafka's ReplicaManager writes it every replica.high.watermark.checkpoint.interval.ms, so a
            # broker restarted after a crash starts from a HW at most that old, not the last clean stop's.
            self._next_hw_checkpoint = t + self.high_watermark_checkpoint_interval_ms
            self.checkpoint_high_watermarks(skip_unchanged=True)
        due = [p for when, p in self._pending_dir_deletes if when <= t]
        self._pending_dir_deletes = [(w, p) for w, p in self._pending_dir_deletes if w > t]
        for path in due:
            shutil.rmtree(path, ignore_errors=True)

    def remove_expired_producers(self, now: int, expiration_ms: int) -> int:
        """Drop producer state idle for ``expiration_ms`` (Kafka's producer-expiry task); runs on the thread
        that appends, so no append sees a producer entry vanish halfway. Returns how many went."""
        removed = 0
        for lg in self.all_logs():
            ps = lg.producer_state
            ps.producer_id_expiration_ms = expiration_ms
            before = len(ps.producers)
            ps.remove_expired_producers(now)
            removed += before - len(ps.producers)
        return removed

    def _flushed(self, started: float) -> None:
        ended = time.monotonic()
        ms = (ended - started) * 1000.0
        self.flush_times.append((ended, ms))
        self.flushes += 1
        self.flush_ms_total += ms

    def run_retention(self, now: int | None = None) -> int:
        deleted = 0
        for lg in self.all_logs():
            d = self._dir_of.get((lg.topic, lg.partition))
            if d is None or d in self.offline_dirs:
                continue
            try:
                with self._guard(d):
                    deleted += lg.delete_old_segments(now)
            except KafkaStorageError as e:
                log.warning("retention on %s failed: %s", lg, e)
        return deleted

    # ================================================================================ shutdown
    def shutdown(self, broker_epoch: int = -1) -> None:
        """Flush and close every log, write checkpoints, then the clean-shutdown marker per healthy dir."""
        failed: set[str] = set()

        # Each close fsyncs a producer snapshot and a leader-epoch-checkpoint: in parallel, so that a
        # broker with 10,000 partitions stops in seconds (the file system commits the fsyncs together).
        def close(item: tuple[str, PartitionLog]) -> None:
            d, lg = item
            try:
                with self._guard(d):
                    lg.flush()
                    lg.close()
            except KafkaStorageError:
                failed.add(d)

        run_batch(close, [(self._dir_of[tp], lg) for tp, lg in self._logs.items()]
                  + [(self._future_dir_of[tp], lg) for tp, lg in self._future.items()])
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        for d in self.online_dirs:
            if d in failed:
                continue
            try:
                with self._guard(d):
                    atomic_write(os.path.join(d, CLEAN_SHUTDOWN_FILE),
                                 json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode())
            except KafkaStorageError as e:
                log.warning("no clean shutdown marker for %s: %s", d, e)
        self._logs.clear()
        for lg in list(self._future.values()):
            self._forget_future((lg.topic, lg.partition))
        if self._future_links is not None:
            shutil.rmtree(self._future_links, ignore_errors=True)  # symlinks only: rmtree does not follow them
            self._future_links = None
