"""LogManager: every partition log in the broker's ``log.dirs``, their checkpoints and failures.

Directory layout (Kafka's)::

    <log dir>/meta.properties                     version=0, broker.id, cluster.id
    <log dir>/.kafka_cleanshutdown                present only after a clean shutdown
    <log dir>/recovery-point-offset-checkpoint    \\
    <log dir>/replication-offset-checkpoint        | text checkpoints: version, count,
    <log dir>/log-start-offset-checkpoint          | "topic partition offset" lines
    <log dir>/cleaner-offset-checkpoint           /
    <log dir>/<topic>-<partition>/                segments, leader-epoch-checkpoint, partition.metadata

A new partition goes to the online directory holding the fewest partitions. Any OSError from a directory's
files (a full disk included, as Kafka; not running out of descriptors, which is the process's) takes that directory offline: its partitions are closed and reported in
``offline_partitions``, ``offline_dirs`` grows and ``on_dir_offline`` is called; the process keeps running.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shutil
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
        recovery_threads: int = LOAD_THREADS,
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
        self.recovery_threads = max(1, recovery_threads)
        self.offline_dirs: set[str] = set()
        self.had_clean_shutdown: dict[str, bool] = {}
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._offline_partitions: set[TopicPartition] = set()
        self._pending_dir_deletes: list[tuple[int, str]] = []
        self._lock = threading.RLock()
        t = clock()
        self._next_retention = t + retention_check_interval_ms
        self._next_recovery_checkpoint = t + flush_offset_checkpoint_interval_ms
        self._next_start_checkpoint = t + flush_start_offset_checkpoint_interval_ms
        self._started = False
        # Kafka's LogFlushStats LogFlushRateAndTimeMs, read by the broker's metrics: (monotonic time,
        # milliseconds) of the most recent periodic flushes (a bounded deque: O(1) per flush), and totals.
        self.flush_times: deque[tuple[float, float]] = deque(maxlen=FLUSH_TIMES_KEPT)
        self.flushes = 0
        self.flush_ms_total = 0.0

    # ================================================================================ failures
    def _mark_offline(self, log_dir: str, exc: BaseException) -> None:
        with self._lock:
            if log_dir in self.offline_dirs:
                return
            log.error("log dir %s is offline: %s", log_dir, exc)
            self.offline_dirs.add(log_dir)
            for tp, d in list(self._dir_of.items()):
                if d == log_dir:
                    lg = self._logs.pop(tp, None)
                    if lg is not None:
                        lg.close_quietly()
                    self._offline_partitions.add(tp)
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
        d = self._dir_of.get((lg.topic, lg.partition))
        if d is not None:
            self._mark_offline(d, exc)

    @property
    def offline_partitions(self) -> set[TopicPartition]:
        return set(self._offline_partitions)

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
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                self._pending_dir_deletes.append((self.clock(), path))
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                continue
            try:
                tp = parse_partition_dir(name)
            except ValueError:
                continue
            found.append((tp, path))
        # One config per topic (building one is not free, and a topic may have thousands of partitions).
        configs = {topic: self._config_for(topic) for topic in {tp[0] for tp, _path in found}}
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
        if clean:
            os.unlink(clean_file)
            fsync_dir(d)

    # ================================================================================ logs
    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def partition_counts(self) -> dict[str, int]:
        counts = {d: 0 for d in self.online_dirs}
        for tp, d in self._dir_of.items():
            if d in counts and tp in self._logs:
                counts[d] += 1
        return counts

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
            d = min(self.online_dirs, key=lambda x: (counts[x], self.log_dirs.index(x)))
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
        failed: dict[TopicPartition, BaseException] = {}
        with self._lock:
            counts = self.partition_counts()
            for topic, partition, topic_id, config in specs:
                tp = (topic, partition)
                if tp in self._logs or any(t[0] == tp for t in todo):
                    continue
                if tp in self._offline_partitions or not counts:
                    failed[tp] = LogDirOfflineError(f"{topic}-{partition} has no online log dir")
                    continue
                d = min(self.online_dirs, key=lambda x: (counts[x], self.log_dirs.index(x)))
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
        return failed

    def delete_log(self, topic: str, partition: int) -> None:
        """Close the log and rename its directory ``<tp>.<uuid>-delete`` for asynchronous removal."""
        tp = (topic, partition)
        with self._lock:
            lg = self._logs.pop(tp, None)
            d = self._dir_of.pop(tp, None)
            self._offline_partitions.discard(tp)
        if lg is None or d is None:
            return
        with self._guard(d):
            lg.close()
            target = os.path.join(d, f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            os.replace(lg.dir_path, target)
            fsync_dir(d)
        delay = int(getattr(lg.config, "file_delete_delay_ms", None) or 60_000) if lg.config is not None else 60_000
        self._pending_dir_deletes.append((self.clock() + delay, target))

    # ================================================================================ checkpoints
    def _offsets_by_dir(self, value: Callable[[PartitionLog], int]) -> dict[str, dict[TopicPartition, int]]:
        out: dict[str, dict[TopicPartition, int]] = {d: {} for d in self.online_dirs}
        for tp, lg in list(self._logs.items()):
            d = self._dir_of.get(tp)
            if d in out:
                out[d][tp] = value(lg)
        return out

    def _write_checkpoints(self, name: str, value: Callable[[PartitionLog], int]) -> None:
        for d, offsets in self._offsets_by_dir(value).items():
            for attempt in (1, 2):
                try:
                    with self._guard(d):
                        OffsetCheckpointFile(os.path.join(d, name)).write(offsets)
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

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoints(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark)

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
        for lg in self.all_logs():
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
                    if t >= self._next_retention:
                        lg.delete_old_segments(t)
            except KafkaStorageError as e:
                log.warning("periodic work on %s failed: %s", lg, e)
        if t >= self._next_retention:
            self._next_retention = t + self.retention_check_interval_ms
        if t >= self._next_recovery_checkpoint:
            self._next_recovery_checkpoint = t + self.flush_offset_checkpoint_interval_ms
            self.checkpoint_recovery_points()
        if t >= self._next_start_checkpoint:
            self._next_start_checkpoint = t + self.flush_start_offset_checkpoint_interval_ms
            self.checkpoint_log_start_offsets()
        due = [p for when, p in self._pending_dir_deletes if when <= t]
        self._pending_dir_deletes = [(w, p) for w, p in self._pending_dir_deletes if w > t]
        for path in due:
            shutil.rmtree(path, ignore_errors=True)

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

        def close(item: tuple[TopicPartition, PartitionLog]) -> None:
            tp, lg = item
            d = self._dir_of[tp]
            try:
                with self._guard(d):
                    lg.flush()
                    lg.close()
            except KafkaStorageError:
                failed.add(d)

        # Each close fsyncs a producer snapshot and a leader-epoch-checkpoint: in parallel, so that a
        # broker with 10,000 partitions stops in seconds (the file system commits the fsyncs together).
        run_batch(close, list(self._logs.items()))
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
