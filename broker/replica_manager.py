"""The replica manager: every partition replica on this broker and the data-path requests on them.

Produce appends to leader replicas and, for acks=all, parks in the produce purgatory until the HW
passes the appended batch. Fetch reads file regions (sent with sendfile) up to the HW for consumers,
the LSO for read_committed consumers and the LEO for followers, and parks in the fetch purgatory
until ``min_bytes`` are there or ``max_wait_ms`` passes. Role changes come from the controller's
LeaderAndIsr and StopReplica requests.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from broker.deferred_response import DeferredResponse
from broker.fetch_session import FetchManager
from broker.log_validator import (
    COMPILED_SCANNER,
    ValidatedBatch,
    ValidationError,
    accept_as_produced,
    keeps_plain_batches_as_produced,
    needs_recompression,
    stamp_for_append,
    validate_produce_records,
)
from broker.partition import Partition, PartitionError, now_ms
from broker.purgatory import Purgatory
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type
from protocol.records import BatchView, NewRecord, build_batch
from protocol.schema import FileRegions
from storage.errors import KafkaStorageError, OffsetOutOfRangeError, StorageError

if TYPE_CHECKING:
    from broker.alter_log_dirs import AlterLogDirsManager
    from broker.isr_manager import IsrManager
    from broker.metadata_cache import MetadataCache
    from broker.replica_fetcher import ReplicaFetcherManager
    from broker.replication_quota import ReplicationQuota
    from config.registry import BrokerConfig, LogConfig
    from storage.log_manager import LogManager

log = logging.getLogger(__name__)

TP = tuple[str, int]
_LAI = response_type(ApiKey.LEADER_AND_ISR)
_SR = response_type(ApiKey.STOP_REPLICA)
_PRODUCE = response_type(ApiKey.PRODUCE)
_FETCH = response_type(ApiKey.FETCH)
_LIST_OFFSETS = response_type(ApiKey.LIST_OFFSETS)
_EPOCHS = response_type(ApiKey.OFFSET_FOR_LEADER_EPOCH)
_DELETE_RECORDS = response_type(ApiKey.DELETE_RECORDS)

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def _storage_error_code(e: Exception) -> ErrorCode:
    if isinstance(e, OffsetOutOfRangeError):
        return ErrorCode.OFFSET_OUT_OF_RANGE
    if isinstance(e, KafkaStorageError):
        return ErrorCode.KAFKA_STORAGE_ERROR
    code = getattr(e, "error_code", None)
    if isinstance(code, int):
        return ErrorCode(code)
    return ErrorCode.UNKNOWN_SERVER_ERROR


class LeadershipListener(Protocol):
    """Told after each LeaderAndIsr / StopReplica which partitions this broker now leads or follows
    (the group and transaction coordinators load or unload their state partitions). A follower entry
    is (topic, partition, leader id); the leader id is -1 for a stopped replica."""

    async def on_leadership_change(self, became_leader: list[TP], became_follower: list[tuple[str, int, int]]) -> None:
        ...


class _FollowerEligibility:
    """The partitions' view of replica.lag.time.max.ms (a dynamic broker config) and of which brokers
    are alive (the metadata cache, kept by UpdateMetadata)."""

    __slots__ = ("_config", "_metadata")

    def __init__(self, config: BrokerConfig, metadata: MetadataCache) -> None:
        self._config = config
        self._metadata = metadata

    def lag_time_max_ms(self) -> int:
        return int(self._config.get("replica.lag.time.max.ms"))

    def alive(self, broker_id: int) -> bool:
        return self._metadata.alive(broker_id)


class ReplicaManager:
    def __init__(self, broker_id: int, config: BrokerConfig, log_manager: LogManager,
                 metadata: MetadataCache, topic_config: Callable[[str], LogConfig], *,
                 isr_manager: IsrManager | None = None, leader_quota: ReplicationQuota | None = None,
                 fetcher_manager: ReplicaFetcherManager | None = None,
                 log_dir_mover: AlterLogDirsManager | None = None,
                 load_topic_configs: Callable[[list[str]], Awaitable[None]] | None = None) -> None:
        self.broker_id = broker_id
        self.config = config
        self.log_manager = log_manager
        self.metadata = metadata
        self.topic_config = topic_config
        # Reads the overrides of topics whose logs are about to be created from ZooKeeper into what
        # ``topic_config`` answers (None: a broker without ZooKeeper keeps what it has).
        self.load_topic_configs = load_topic_configs
        self.partitions: dict[TP, Partition] = {}
        self.follower_eligibility = _FollowerEligibility(config, metadata)
        # The partition ids hosted here per topic: a topic's config change reaches its partitions
        # without a scan of every partition (a listener pass over many new topics would be quadratic).
        self._hosted: dict[str, set[int]] = {}
        self.produce_purgatory = Purgatory("Produce")
        self.fetch_purgatory = Purgatory("Fetch")
        # Incremental fetch sessions (KIP-227) of the consumers and followers fetching from this broker.
        self.fetch_sessions = FetchManager(config.get("max.incremental.fetch.session.cache.slots"))
        self.listeners_on_append: list[Callable[[TP], None]] = []
        self.listeners_on_stop: list[Callable[[TP], None]] = []
        self.isr_manager = isr_manager  # AlterPartition proposals (ISR expansion on follower fetches)
        self.leader_quota = leader_quota  # leader-side replication throttle
        self.fetcher_manager = fetcher_manager  # follower replication; None in a broker without peers
        self.log_dir_mover = log_dir_mover  # AlterReplicaLogDirs: moves between this broker's log dirs
        self._leadership_listeners: list[LeadershipListener] = []
        self.messages_in = 0
        self.bytes_in = 0
        # Per topic: [messages in, bytes in, bytes out to consumers]; bytes out to followers in total.
        self.topic_stats: dict[str, list[int]] = {}
        self.replication_bytes_out = 0

    # ------------------------------------------------------------------------------------------------
    # Partitions

    def get_partition(self, tp: TP) -> Partition | None:
        return self.partitions.get(tp)

    def leader_partition(self, tp: TP, current_leader_epoch: int = -1) -> Partition:
        p = self.partitions.get(tp)
        if p is None:
            if self.metadata.partition(*tp) is None:
                raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if p.log.is_offline or self.log_manager.is_partition_offline(tp):
            raise PartitionError(ErrorCode.KAFKA_STORAGE_ERROR)
        p.check_leader(current_leader_epoch)
        return p

    def get_or_create_partition(self, topic: str, partition: int, topic_id: Any, config: Any = None) -> Partition:
        tp = (topic, partition)
        p = self.partitions.get(tp)
        if p is None:
            if config is None:
                config = self.topic_config(topic)
            lg = self.log_manager.get_or_create_log(topic, partition, topic_id=topic_id, config=config)
            p = Partition(topic, partition, self.broker_id, lg, config, topic_id=topic_id,
                          eligibility=self.follower_eligibility)
            self._add_partition(p)
        return p

    def _add_partition(self, p: Partition) -> None:
        self.partitions[p.tp] = p
        self._hosted.setdefault(p.topic, set()).add(p.partition)

    def _remove_partition(self, tp: TP) -> Partition | None:
        p = self.partitions.pop(tp, None)
        ids = self._hosted.get(tp[0])
        if ids is not None:
            ids.discard(tp[1])
            if not ids:
                del self._hosted[tp[0]]
        return p

    # ------------------------------------------------------------------------------------------------
    # Becoming leader or follower, in batches: a LeaderAndIsr may name every partition of the broker
    # (10,000 after a restart), so nothing here costs a syscall round or an executor hop per partition
    # on the event loop, and nothing scans all partitions per partition.

    async def prepare_become_leader_or_follower(self, topic_states: Any) -> None:
        """Create the Partition objects (and, for new partitions, their logs) a LeaderAndIsr names.

        New logs are created off the event loop in one batch (LogManager.create_logs writes their
        files in parallel); topic configs are built once per topic. A partition whose log could not be
        created is left out: the per-partition step then reports its storage error.

        The topic configs of new logs come from ZooKeeper, read here as Kafka reads them when it creates
        a log: the config change listener may not have seen a topic created a moment ago (through
        another broker, or through this one while its CreateTopics answer is still on its way). And they
        are built again once the logs exist: an override that arrived while the files were being
        written found no partition to update, so it is applied here.
        """
        missing: list[tuple[str, int, Any]] = []
        for ts in topic_states:
            for ps in ts.partition_states:
                tp = (ts.topic_name, ps.partition_index)
                if tp in self.partitions or self._maybe_in_failed_dir(tp, ps.is_new):
                    continue
                missing.append((ts.topic_name, ps.partition_index, ts.topic_id))
        if not missing:
            return
        new_logs = [m for m in missing if self.log_manager.get_log(m[0], m[1]) is None]
        if new_logs:
            if self.load_topic_configs is not None:
                await self.load_topic_configs(sorted({topic for topic, _, _ in new_logs}))
            configs = self._topic_configs(topic for topic, _, _ in new_logs)
            specs = [(topic, partition, topic_id, configs[topic]) for topic, partition, topic_id in new_logs]
            failed = await asyncio.get_running_loop().run_in_executor(None, self.log_manager.create_logs, specs)
            for (topic, partition), e in failed.items():
                log.error("could not create the log of %s-%d: %s", topic, partition, e)
        configs = self._topic_configs(topic for topic, _, _ in missing)  # no await from here on
        for topic, partition, topic_id in missing:
            lg = self.log_manager.get_log(topic, partition)
            if lg is not None and (topic, partition) not in self.partitions:
                config = configs[topic]
                lg.update_config(config)
                self._add_partition(Partition(topic, partition, self.broker_id, lg, config, topic_id=topic_id,
                                              eligibility=self.follower_eligibility))

    def _topic_configs(self, topics: Iterable[str]) -> dict[str, LogConfig]:
        """The current LogConfig of each topic, built once per topic."""
        return {topic: self.topic_config(topic) for topic in set(topics)}

    async def checkpoint_leader_epochs(self, tps: list[TP]) -> None:
        """Write the leader-epoch-checkpoint of every partition that just became leader, in one batch
        off the event loop (make_leader was called with write_epoch_checkpoint=False)."""
        # Only files whose entries changed: after a restart the new leader epoch is usually the one
        # already in the file (the controller did not bump it), and nothing is written at all.
        logs = [p.log for p in (self.partitions.get(tp) for tp in tps)
                if p is not None and p.log.leader_epoch_checkpoint_stale]
        if not logs:
            return
        from storage.log_manager import run_batch

        def write(lg: Any) -> None:
            lg.write_leader_epoch_checkpoint()

        errors = await asyncio.get_running_loop().run_in_executor(None, run_batch, write, logs)
        for lg, e in zip(logs, errors, strict=True):
            if e is not None:
                log.error("could not write the leader epoch checkpoint of %s-%d: %s", lg.topic, lg.partition, e)

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        """A coordinator subscribes when it is built (before the broker registers, so before any
        LeaderAndIsr can arrive)."""
        self._leadership_listeners.append(listener)

    async def _notify_leadership(self, became_leader: list[TP], became_follower: list[tuple[str, int, int]]) -> None:
        for listener in list(self._leadership_listeners):
            await listener.on_leadership_change(became_leader, became_follower)

    async def become_leader_or_follower(self, request: Any) -> Any:
        """Apply a LeaderAndIsr the controller sent (already fenced by broker and controller epoch):
        make each partition leader or follower, start or stop its fetcher, tell the coordinators, and
        wake produces and fetches parked on partitions whose role changed."""
        topics = []
        became_leader: list[TP] = []
        became_follower: list[tuple[str, int, int]] = []
        await self.prepare_become_leader_or_follower(request.topic_states)  # new logs in one batch
        if self.fetcher_manager is not None and self.fetcher_manager.log_changes:
            # A truncation still running would cut the log under its new role (and under the new
            # epoch's start offset). Nothing below awaits before the roles change, so none starts meanwhile.
            await self.fetcher_manager.quiesce([(ts.topic_name, ps.partition_index) for ts in request.topic_states
                                                for ps in ts.partition_states])
        for ts in request.topic_states:
            errs = []
            for ps in ts.partition_states:
                code = ErrorCode.NONE
                if self._maybe_in_failed_dir((ts.topic_name, ps.partition_index), ps.is_new):
                    # KIP-112: the controller takes this replica offline and elects a leader elsewhere.
                    errs.append(_LAI.LeaderAndIsrPartitionError(partition_index=ps.partition_index,
                                                                error_code=ErrorCode.KAFKA_STORAGE_ERROR))
                    continue
                try:
                    p = self.get_or_create_partition(ts.topic_name, ps.partition_index, ts.topic_id)
                    # Kafka's ReplicaManager refuses an older leader epoch (STALE_CONTROLLER_EPOCH); an
                    # older partition epoch at the same leader epoch is skipped without an error
                    # (Partition.makeLeader/makeFollower: "already at a newer partition epoch").
                    stale_leader_epoch = ps.leader_epoch < p.leader_epoch
                    if ps.leader == self.broker_id:
                        ok = p.make_leader(ps.leader_epoch, list(ps.isr), list(ps.replicas), ps.partition_epoch,
                                           ps.controller_epoch, write_epoch_checkpoint=False)
                        if ok:
                            became_leader.append(p.tp)
                    else:
                        ok = p.make_follower(ps.leader, ps.leader_epoch, list(ps.isr), list(ps.replicas),
                                             ps.partition_epoch, ps.controller_epoch)
                        if ok:
                            became_follower.append((ts.topic_name, ps.partition_index, ps.leader))
                    if not ok and stale_leader_epoch:
                        code = ErrorCode.STALE_CONTROLLER_EPOCH
                    elif not ok:
                        log.info("Skipped the become-%s state change for %s-%d with partition epoch %d since "
                                 "the replica is already at a newer partition epoch %d",
                                 "leader" if ps.leader == self.broker_id else "follower", ts.topic_name,
                                 ps.partition_index, ps.partition_epoch, p.partition_epoch)
                except Exception as e:  # a storage failure costs this partition, not the request
                    log.error("LeaderAndIsr for %s-%d failed: %s", ts.topic_name, ps.partition_index, e)
                    code = ErrorCode.KAFKA_STORAGE_ERROR
                errs.append(_LAI.LeaderAndIsrPartitionError(partition_index=ps.partition_index, error_code=code))
            topics.append(_LAI.LeaderAndIsrTopicError(topic_id=ts.topic_id, partition_errors=errs))
        await self.checkpoint_leader_epochs(became_leader)  # one batch of leader-epoch-checkpoint writes
        fetchers = self.fetcher_manager
        if fetchers is None or fetchers.closed:  # shutting down: the fetchers are gone already
            return _LAI(error_code=ErrorCode.NONE, topics=topics)
        for tp in became_leader:
            fetchers.remove_partition(tp)
        for topic, partition, leader in became_follower:
            fetchers.add_partition((topic, partition), leader, self.partitions[(topic, partition)].leader_epoch)
        if self.log_dir_mover is not None and self.log_manager.all_future_logs():
            # Moves found at start-up (or left by a StopReplica) go on now that their replica is online.
            self.log_dir_mover.resume(became_leader + [(t, p) for t, p, _leader in became_follower])
        await self._notify_leadership(became_leader, became_follower)
        for tp in became_leader:
            self.notify_hw(tp)
        for topic, partition, _leader in became_follower:
            self.notify_hw((topic, partition))  # parked produces/fetches learn they lost leadership
        return _LAI(error_code=ErrorCode.NONE, topics=topics)

    def _maybe_in_failed_dir(self, tp: TP, is_new: bool) -> bool:
        """The replica was in a log dir that failed, or may have been: Kafka's LogManager refuses to create
        the log of a partition that is not new while any dir is offline (it would start an empty replica
        beside the lost one)."""
        lm = self.log_manager
        if not lm.offline_dirs:  # the common case
            return False
        return lm.is_partition_offline(tp) or (not is_new and lm.get_log(*tp) is None)

    async def on_log_dir_failure(self, log_dir: str) -> list[TP]:
        """KIP-112 on this broker: the partitions of a failed dir stop replicating and serving (their
        requests get KAFKA_STORAGE_ERROR), produces parked on them finish, and the coordinators let go of
        any they led. Returns those partitions."""
        gone = sorted(tp for tp in self.log_manager.offline_partitions if tp in self.partitions)
        for tp in gone:
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove_partition(tp)
            p = self.partitions[tp]
            p.leader_id = -1  # parked acks=all produces answer now instead of timing out
            p.pending_isr = None
            self.notify_hw(tp)
        if gone:
            await self._notify_leadership([], [(t, p, -1) for t, p in gone])
        return gone

    async def stop_replicas(self, request: Any) -> Any:
        """Apply a StopReplica the controller sent (already fenced). A partition state with a leader
        epoch older than ours is refused with FENCED_LEADER_EPOCH (-1 and -2 mean "any")."""
        results = []
        stopped: list[TP] = []
        for ts in request.topic_states:
            for ps in ts.partition_states:
                tp = (ts.topic_name, ps.partition_index)
                code = ErrorCode.NONE
                p = self.partitions.get(tp)
                if p is not None and ps.leader_epoch >= 0 and ps.leader_epoch < p.leader_epoch:
                    code = ErrorCode.FENCED_LEADER_EPOCH
                else:
                    stopped.append(tp)
                    if self.fetcher_manager is not None:
                        self.fetcher_manager.remove_partition(tp)
                        await self.fetcher_manager.quiesce([tp])  # its log may be deleted below
                    try:
                        await self.stop_replica(tp, delete=ps.delete_partition)
                    except Exception as e:
                        log.error("StopReplica for %s-%d failed: %s", tp[0], tp[1], e)
                        code = ErrorCode.KAFKA_STORAGE_ERROR
                results.append(_SR.StopReplicaPartitionError(topic_name=tp[0], partition_index=tp[1],
                                                             error_code=code))
        await self._notify_leadership([], [(t, p, -1) for t, p in stopped])
        return _SR(error_code=ErrorCode.NONE, partition_errors=results)

    async def stop_replica(self, tp: TP, *, delete: bool) -> None:
        """StopReplica: drop our replica of ``tp`` (and its log files when ``delete``)."""
        p = self._remove_partition(tp)
        if self.log_dir_mover is not None:
            self.log_dir_mover.stop_partition(tp)
        for cb in self.listeners_on_stop:
            cb(tp)
        if p is not None:
            # A leader whose replica is removed (reassignment) may have acks=all produces parked: they
            # hold this Partition object, so it must stop claiming leadership for them to finish now
            # with NOT_LEADER_OR_FOLLOWER (the producer retries at the new leader) instead of timing out.
            p.leader_id = -1
            p.pending_isr = None
            self.notify_hw(tp)  # parked produces and fetches see the partition gone
        if delete:
            await asyncio.get_running_loop().run_in_executor(None, self.log_manager.delete_log, *tp)

    def on_topic_config_change(self, topic: str) -> None:
        ids = self._hosted.get(topic)
        if not ids:
            return
        config = self.topic_config(topic)
        for partition in ids:
            p = self.partitions[(topic, partition)]
            p.config = config
            p.log.update_config(config)
            if p.future_log is not None:  # a move between log dirs in progress (Kafka updates it too)
                p.future_log.update_config(config)

    def notify_append(self, tp: TP) -> None:
        self.fetch_purgatory.notify(tp)
        for cb in self.listeners_on_append:
            cb(tp)

    def notify_hw(self, tp: TP) -> None:
        self.produce_purgatory.notify(tp)
        self.fetch_purgatory.notify(tp)

    # ------------------------------------------------------------------------------------------------
    # Produce

    async def append_records(self, body: Any, version: int, *, defer: bool = False) -> Any:
        """Append a produce request's batches and answer it. With ``defer``, an acks=all request that
        has to wait for its followers returns a DeferredResponse of that wait once everything is
        appended, so that its connection can go on to the next request meanwhile."""
        acks = body.acks
        timeout_s = max(body.timeout_ms, 0) / 1000.0
        now = now_ms()
        results: dict[TP, Any] = {}
        pending: dict[TP, tuple[Partition, int]] = {}
        for topic in body.topic_data:
            for pd in topic.partition_data:
                tp = (topic.name, pd.index)
                resp = _PRODUCE.PartitionProduceResponse(index=pd.index, base_offset=-1)
                results[tp] = resp
                if body.transactional_id is None and _has_transactional_batch(pd.records):
                    # Kafka refuses transactional records without a transactional id before anything
                    # else (for the whole request there; only for this partition here).
                    resp.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                    continue
                try:
                    resp.error_code, info, p = await self._append_one(tp, pd.records, acks, now, version)
                except ValidationError as e:
                    # Kafka fills error_message and record_errors only for rejected records.
                    resp.error_code = e.code
                    resp.error_message = e.error_message
                    resp.record_errors = [_PRODUCE.BatchIndexAndErrorMessage(
                        batch_index=r.batch_index, batch_index_error_message=r.message) for r in e.record_errors]
                    log.debug("produce to %s-%s refused: %s: %s", tp[0], tp[1], e.code.name, e)
                    continue
                except PartitionError as e:
                    resp.error_code = e.code
                    resp.error_message = str(e) if str(e) != e.code.name else None
                    continue
                if info is None:
                    continue
                resp.base_offset = info.first_offset
                resp.log_append_time_ms = info.log_append_time_ms
                resp.log_start_offset = info.log_start_offset
                if acks == -1:
                    # A retried batch found in the log (duplicate sequence) is acknowledged like the
                    # original: only once it is committed. Its first copy may still be waiting for the ISR.
                    # Already committed (an ISR of one: the append moved the HW) needs no wait.
                    done, code = p.ack_satisfied(info.last_offset + 1)
                    if not done:
                        pending[tp] = (p, info.last_offset + 1)
                    elif code != ErrorCode.NONE:
                        resp.error_code = code
        if pending:
            if defer:
                return DeferredResponse(self._acks_then_response(pending, results, timeout_s))
            await self._await_acks(pending, results, timeout_s)
        if acks == 0:
            return None
        return self._produce_response(results)

    async def _acks_then_response(self, pending: dict[TP, tuple[Partition, int]], results: dict[TP, Any],
                                  timeout_s: float) -> Any:
        await self._await_acks(pending, results, timeout_s)
        return self._produce_response(results)

    @staticmethod
    def _produce_response(results: dict[TP, Any]) -> Any:
        by_topic: dict[str, list[Any]] = {}
        for (t, _), r in results.items():
            by_topic.setdefault(t, []).append(r)
        return _PRODUCE(responses=[_PRODUCE.TopicProduceResponse(name=t, partition_responses=rs)
                                   for t, rs in by_topic.items()])

    async def _append_one(self, tp: TP, records: memoryview | None, acks: int, now: int,
                          version: int = 9) -> tuple[ErrorCode, Any, Any]:
        if tp[0].startswith("__") and tp[0] in ("__consumer_offsets", "__transaction_state"):
            raise PartitionError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot produce to internal topic {tp[0]}")
        if acks not in (0, 1, -1):
            raise PartitionError(ErrorCode.INVALID_REQUIRED_ACKS)
        p = self.leader_partition(tp)
        if records is None:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE, "null records")
        cfg = p.config
        fetch_max_bytes = self.config.get("fetch.max.bytes")
        cached = p.produce_validation
        if cached is None or cached[0] is not cfg or cached[1] != fetch_max_bytes:
            # What LogValidator needs from the topic's config, built once per config (each change
            # installs a new LogConfig object) rather than read attribute by attribute per request.
            cached = p.produce_validation = (cfg, fetch_max_bytes, dict(
                topic_partition=f"{tp[0]}-{tp[1]}", max_message_bytes=cfg.max_message_bytes,
                timestamp_type=cfg.message_timestamp_type, before_max_ms=cfg.message_timestamp_before_max_ms,
                after_max_ms=cfg.message_timestamp_after_max_ms, compacted=cfg.compact,
                max_decompressed_bytes=max(cfg.max_message_bytes, fetch_max_bytes)),
                cfg.compression_type, cfg.message_timestamp_type,
                (cfg.max_message_bytes, cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms,
                 cfg.compact)
                if keeps_plain_batches_as_produced(cfg.message_timestamp_type, cfg.compression_type) else None)
        as_produced = cached[5]
        off_loop = _validate_off_loop(records)
        count = -1
        vb: ValidatedBatch | None
        try:
            if as_produced is not None and not off_loop:
                # The common produce: one valid uncompressed batch, stored exactly as it came.
                count = accept_as_produced(records, as_produced[0], now, as_produced[1], as_produced[2],
                                           as_produced[3])
            if count >= 0:
                vb = None
            elif off_loop:
                # Big batches: decompression runs without the GIL, and so does the compiled record
                # scan (the Python one hands it back between pieces), so the loop never waits for a
                # whole batch.
                vb = await asyncio.get_running_loop().run_in_executor(None, functools.partial(
                    validate_produce_records, records, yield_gil=True, now_ms=now, version=version, **cached[2]))
            else:
                vb = validate_produce_records(records, now_ms=now, version=version, **cached[2])
        except ValidationError:
            raise
        except Exception as e:  # noqa: BLE001 - a validator bug must cost one partition's answer, no more
            # Kafka answers any unexpected failure of an append with UNKNOWN_SERVER_ERROR.
            log.exception("validating a produce to %s-%s failed unexpectedly", tp[0], tp[1])
            raise ValidationError(ErrorCode.UNKNOWN_SERVER_ERROR, f"unexpected {type(e).__name__}") from None
        if vb is None:
            return self._append_validated(tp, p, records, count, len(records), acks, -1)
        compression_type, timestamp_type = cached[3], cached[4]
        target = needs_recompression(vb.batch, compression_type)
        if target is None and vb.needs_rebuild:
            # Inner offsets that do not run 0..n-1 in a batch Kafka meant to keep as it is: Kafka
            # decides to rebuild it only after reading its records without keys and values, and the
            # rebuild fails with an unknown error. (Recompressed to the topic's codec, it is rebuilt.)
            raise ValidationError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                  "compressed records with offset deltas other than 0..n-1")
        if target is not None:
            vb.data = memoryview(bytearray(await asyncio.get_running_loop().run_in_executor(
                None, _recompress, vb.batch, target)))
            vb.batch = BatchView(vb.data)
            vb.create_time_stamped = False  # a new header: stamp_for_append reads it
        stamp_for_append(vb, timestamp_type=timestamp_type, now_ms=now)
        return self._append_validated(tp, p, vb.data, vb.records_count, vb.size, acks,
                                      now if timestamp_type == "LogAppendTime" else -1)

    def _append_validated(self, tp: TP, p: Partition, data: memoryview, records_count: int, size: int, acks: int,
                          log_append_time: int) -> tuple[ErrorCode, Any, Any]:
        """Append one partition's validated batch (``size`` bytes as received) as leader, count it, and
        wake who waits on it."""
        try:
            info = p.append_as_leader(data, acks, log_append_time)
        except StorageError as e:
            raise PartitionError(_storage_error_code(e), str(e)) from None
        self.messages_in += records_count
        self.bytes_in += size
        ts = self.topic_stats.get(tp[0])
        if ts is None:
            ts = self.topic_stats[tp[0]] = [0, 0, 0]
        ts[0] += records_count
        ts[1] += size
        self.notify_append(tp)
        if p.high_watermark > info.last_offset:
            self.notify_hw(tp)
        return ErrorCode.NONE, info, p

    async def _await_acks(self, pending: dict[TP, tuple[Partition, int]], results: dict[TP, Any],
                          timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s

        def settle(tp: Any) -> bool:
            """Kafka's DelayedProduce.tryComplete for one partition: done (answered) or still waiting."""
            entry = pending.get(tp)
            if entry is None:
                return True
            done, code = entry[0].ack_satisfied(entry[1])
            if done:
                if code != ErrorCode.NONE:
                    results[tp].error_code = code
                del pending[tp]
            return done

        def ready(tp: Any) -> bool:
            # Woken when the last partition is settled, not by every HW move of the partitions.
            return settle(tp) and not pending

        while pending:
            for tp in list(pending):
                settle(tp)
            remaining = deadline - time.monotonic()
            if not pending or remaining <= 0:
                break
            await self.produce_purgatory.wait(list(pending), remaining, ready)
        for tp in pending:
            results[tp].error_code = ErrorCode.REQUEST_TIMED_OUT

    def append_internal(self, tp: TP, records: bytes | memoryview, required_acks: int = -1) -> Any:
        """Append coordinator-built batches (offsets, group metadata, txn markers) as leader. With acks=all
        (the coordinators' writes but offset commits configured otherwise), NOT_ENOUGH_REPLICAS before
        anything is appended while the ISR is below min.insync.replicas."""
        p = self.leader_partition(tp)
        try:
            info = p.append_internal(records, required_acks)
        except StorageError as e:
            raise PartitionError(_storage_error_code(e), str(e)) from None
        self.notify_append(tp)
        if p.high_watermark > info.last_offset:
            self.notify_hw(tp)
        return info

    async def wait_for_hw(self, tp: TP, offset: int, timeout_s: float) -> ErrorCode:
        """Wait until the HW of ``tp`` reaches ``offset`` (an internal acks=all)."""
        p = self.partitions.get(tp)
        deadline = time.monotonic() + timeout_s
        while True:
            if p is None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            done, code = p.ack_satisfied(offset)
            if done:
                return code
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            def ready(_tp: Any, waiting_on: Partition = p) -> bool:
                return self.partitions.get(tp) is not waiting_on or waiting_on.ack_satisfied(offset)[0]

            await self.produce_purgatory.wait([tp], remaining, ready)
            p = self.partitions.get(tp)

    # ------------------------------------------------------------------------------------------------
    # Fetch

    def _resolve_topic(self, topic: Any, version: int) -> tuple[str | None, Any]:
        if version >= 13:
            name = self.metadata.topics_by_id.get(topic.topic_id)
            return name, topic.topic_id
        t = self.metadata.topics.get(topic.topic)
        return topic.topic, (t.topic_id if t else None)

    async def fetch_messages(self, body: Any, version: int) -> Any:
        replica_id = body.replica_id if version < 15 else body.replica_state.replica_id
        is_follower = replica_id >= 0
        isolation = body.isolation_level if not is_follower else READ_UNCOMMITTED
        max_wait_s = max(body.max_wait_ms, 0) / 1000.0
        deadline = time.monotonic() + max_wait_s
        keys: list[tuple[str | None, int]] = []  # None: a topic id this broker does not know
        for topic in body.topics:
            name, _ = self._resolve_topic(topic, version)
            keys.extend((name, p.partition) for p in topic.partitions)
        first = True
        while True:
            resp, total_bytes, errors = self._read_all(body, version, replica_id, isolation, is_follower,
                                                       first_read=first)
            first = False
            remaining = deadline - time.monotonic()
            if errors or total_bytes >= body.min_bytes or remaining <= 0 or not keys:
                if total_bytes:
                    self._count_bytes_out(resp, version, is_follower, total_bytes)
                return resp
            # Kafka's DelayedFetch.tryComplete: the fetch reads again only if a partition it names changed
            # in what this fetch reads (its end offset, its leadership). A follower's fetch is notified by
            # the HW moving after the other follower's fetch, a consumer's by appends beyond its HW: reading
            # every partition of the fetch again for those would find what the last read found. The
            # purgatory runs this check when it notifies, and leaves the fetch parked when nothing changed.
            seen: dict[Any, tuple[Any, ...]] = {k: self._fetch_watch_state(k, is_follower, isolation) for k in keys}

            def changed(k: Any, seen: dict[Any, tuple[Any, ...]] = seen) -> bool:
                return self._fetch_watch_state(k, is_follower, isolation) != seen.get(k)

            while True:
                notified = await self.fetch_purgatory.wait(keys, remaining, changed)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or any(changed(k) for k in notified):
                    break

    def _fetch_watch_state(self, tp: Any, is_follower: bool, isolation: int) -> tuple[Any, ...]:
        """What a parked fetch of ``tp`` depends on: the offset it reads up to (the LEO for a follower,
        else the HW or LSO), the log start offset and the partition's leadership."""
        p = self.partitions.get(tp)  # None too for a topic id this broker does not know: (None, partition)
        if p is None:
            return ()
        lg = p.log
        if is_follower:
            end = lg.log_end_offset
        elif isolation == READ_COMMITTED:
            end = lg.last_stable_offset
        else:
            end = lg.high_watermark
        return (id(p), id(lg), end, lg.log_start_offset, p.leader_id, p.leader_epoch, lg.is_offline)

    def _count_bytes_out(self, resp: Any, version: int, is_follower: bool, total_bytes: int) -> None:
        if is_follower:
            self.replication_bytes_out += total_bytes
            return
        for tr in resp.responses:
            size = sum(pd.records.size for pd in tr.partitions if isinstance(pd.records, FileRegions))
            if size:
                name = self.metadata.topics_by_id.get(tr.topic_id) if version >= 13 else tr.topic
                if name is not None:
                    ts = self.topic_stats.get(name)
                    if ts is None:
                        ts = self.topic_stats[name] = [0, 0, 0]
                    ts[2] += size

    def _read_all(self, body: Any, version: int, replica_id: int, isolation: int, is_follower: bool,
                  first_read: bool) -> tuple[Any, int, bool]:
        limit = body.max_bytes if version >= 3 else 0x7FFFFFFF
        total = 0
        errors = False
        responses = []
        for topic in body.topics:
            name, topic_id = self._resolve_topic(topic, version)
            parts = []
            for fp in topic.partitions:
                pd = _FETCH.PartitionData(partition_index=fp.partition, high_watermark=-1, last_stable_offset=-1,
                                          log_start_offset=-1, records=b"")
                parts.append(pd)
                if name is None:
                    pd.error_code = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    errors = True
                    continue
                tp = (name, fp.partition)
                throttled = False
                try:
                    p = self.leader_partition(tp, fp.current_leader_epoch if version >= 9 else -1)
                    if is_follower:
                        # The follower's fetch position counts once per fetch, when it arrives (Kafka:
                        # updateFetchState = !readFromPurgatory): its replica.lag.time.max.ms clock
                        # compares that fetch's time with the leader's LEO at that moment.
                        if first_read:
                            if p.update_follower_fetch(replica_id, fp.fetch_offset,
                                                       body.replica_state.replica_epoch if version >= 15 else -1):
                                self.notify_hw(tp)
                            if self.isr_manager is not None and replica_id not in p.isr:
                                self.isr_manager.maybe_expand(p)
                        max_offset = None
                        throttled = self.leader_quota is not None and self.leader_quota.is_throttled(*tp)
                    elif isolation == READ_COMMITTED:
                        max_offset = p.log.last_stable_offset
                    else:
                        max_offset = p.high_watermark
                    part_max = min(fp.partition_max_bytes, max(limit - total, 0))
                    if throttled and self.leader_quota.is_exceeded():  # type: ignore[union-attr]
                        # Over leader.replication.throttled.rate: this throttled replica waits.
                        part_max = 0
                    result = p.log.read(fp.fetch_offset, part_max, max_offset,
                                        min_one_batch=(total == 0 and part_max > 0))
                    if throttled:
                        self.leader_quota.record(sum(n for _fd, _pos, n in result.regions))  # type: ignore[union-attr]
                except PartitionError as e:
                    pd.error_code = e.code
                    errors = True
                    self._set_current_leader(pd, tp, version)
                    continue
                except StorageError as e:
                    pd.error_code = _storage_error_code(e)
                    errors = True
                    if isinstance(e, OffsetOutOfRangeError) and is_follower:
                        # Kafka 3.9 answers -1 for all three (a consumer resets by its own rule), and its
                        # followers ask ListOffsets; ours take the leader's log start and HW from here.
                        pd.high_watermark = p.high_watermark
                        pd.log_start_offset = p.log.log_start_offset
                        pd.last_stable_offset = p.log.last_stable_offset
                    continue
                pd.high_watermark = result.high_watermark
                pd.last_stable_offset = p.log.last_stable_offset
                pd.log_start_offset = result.log_start_offset
                size = sum(length for _fd, _pos, length in result.regions)
                if size:
                    pd.records = FileRegions(result.regions)  # each keeps its segment file pinned until sent
                    total += size
                else:
                    pd.records = b""
                if isolation == READ_COMMITTED and size:
                    upper = max_offset if max_offset is not None else p.log_end_offset
                    aborted = p.log.collect_aborted_transactions(fp.fetch_offset, upper)
                    pd.aborted_transactions = [_FETCH.AbortedTransaction(producer_id=a.producer_id,
                                                                         first_offset=a.first_offset)
                                               for a in aborted]
                else:
                    pd.aborted_transactions = [] if isolation == READ_COMMITTED else None
            tr = _FETCH.FetchableTopicResponse(partitions=parts)
            if version >= 13:
                tr.topic_id = topic.topic_id
            else:
                tr.topic = topic.topic
            responses.append(tr)
        return _FETCH(error_code=0, session_id=0, responses=responses), total, errors

    def _set_current_leader(self, pd: Any, tp: TP, version: int) -> None:
        if version < 12:
            return
        info = self.metadata.partition(*tp)
        # KIP-951 hint: only a leader this broker knows to be alive (a client may not know a broker that
        # just came back; naming a dead or unknown one sends it nowhere). Otherwise no hint (-1, -1).
        if info is not None and info.leader >= 0 and self.metadata.alive(info.leader):
            pd.current_leader = _FETCH.LeaderIdAndEpoch(leader_id=info.leader, leader_epoch=info.leader_epoch)

    # ------------------------------------------------------------------------------------------------
    # ListOffsets, OffsetForLeaderEpoch, DeleteRecords

    def list_offsets(self, body: Any, version: int) -> Any:
        topics = []
        isolation = body.isolation_level if version >= 2 else READ_UNCOMMITTED
        for topic in body.topics:
            parts = []
            for lp in topic.partitions:
                r = _LIST_OFFSETS.ListOffsetsPartitionResponse(partition_index=lp.partition_index, timestamp=-1,
                                                               offset=-1, leader_epoch=-1)
                parts.append(r)
                tp = (topic.name, lp.partition_index)
                try:
                    if body.replica_id >= 0:
                        p = self.partitions.get(tp)
                        if p is None:
                            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    else:
                        p = self.leader_partition(tp, lp.current_leader_epoch if version >= 4 else -1)
                    r.offset, r.timestamp, r.leader_epoch = self._offset_for(p, lp.timestamp, isolation,
                                                                             body.replica_id >= 0)
                except PartitionError as e:
                    r.error_code = e.code
                except StorageError as e:
                    r.error_code = _storage_error_code(e)
            topics.append(_LIST_OFFSETS.ListOffsetsTopicResponse(name=topic.name, partitions=parts))
        return _LIST_OFFSETS(topics=topics)

    def _offset_for(self, p: Partition, timestamp: int, isolation: int, from_replica: bool) -> tuple[int, int, int]:
        lg = p.log
        if timestamp == -1:  # latest: the HW (or LSO) for consumers, as Kafka
            if from_replica:
                off = lg.log_end_offset
            else:
                off = lg.last_stable_offset if isolation == READ_COMMITTED else p.high_watermark
            return off, -1, p.leader_epoch
        if timestamp == -2:
            off = lg.log_start_offset
            epoch = lg.leader_epoch_cache.epoch_for_offset(off)
            return off, -1, epoch if epoch is not None else -1
        found = lg.offset_for_timestamp(timestamp)
        upper = p.high_watermark if not from_replica else lg.log_end_offset
        if found is None or found[0] >= upper and timestamp != -3:
            return -1, -1, -1
        off, ts = found
        epoch = lg.leader_epoch_cache.epoch_for_offset(off)
        return off, ts, epoch if epoch is not None else -1

    def offsets_for_leader_epoch(self, body: Any, version: int) -> Any:
        topics = []
        for topic in body.topics:
            parts = []
            for pe in topic.partitions:
                r = _EPOCHS.EpochEndOffset(partition=pe.partition, leader_epoch=-1, end_offset=-1)
                parts.append(r)
                tp = (topic.topic, pe.partition)
                try:
                    # Consumers (KIP-320 validation) and followers (KIP-101 truncation) both ask the leader.
                    p = self.leader_partition(tp, pe.current_leader_epoch)
                    epoch, end = p.log.end_offset_for_epoch(pe.leader_epoch)
                    r.leader_epoch, r.end_offset = epoch, end
                except PartitionError as e:
                    r.error_code = e.code
                except StorageError as e:
                    r.error_code = _storage_error_code(e)
            topics.append(_EPOCHS.OffsetForLeaderTopicResult(topic=topic.topic, partitions=parts))
        return _EPOCHS(topics=topics)

    def delete_records(self, body: Any, version: int) -> Any:
        topics = []
        for topic in body.topics:
            parts = []
            for dp in topic.partitions:
                r = _DELETE_RECORDS.DeleteRecordsPartitionResult(partition_index=dp.partition_index, low_watermark=-1)
                parts.append(r)
                tp = (topic.name, dp.partition_index)
                try:
                    p = self.leader_partition(tp)
                    target = p.high_watermark if dp.offset == -1 else dp.offset
                    if target < 0 or target > p.high_watermark:
                        raise PartitionError(ErrorCode.OFFSET_OUT_OF_RANGE)
                    r.low_watermark = p.log.delete_records(target)
                except PartitionError as e:
                    r.error_code = e.code
                except StorageError as e:
                    r.error_code = _storage_error_code(e)
            topics.append(_DELETE_RECORDS.DeleteRecordsTopicResult(name=topic.name, partitions=parts))
        return _DELETE_RECORDS(topics=topics)


# Batches from these sizes on are validated in a worker thread (see ``_append_one``). A compressed
# one holds several times its size in records, and decompression runs without the GIL, in parallel
# with the loop. An uncompressed MiB is about 0.1 ms of CRC and scanning with the compiled scanner,
# less than the hand-off to a thread costs the loop, but about 7 ms with the Python one.
_OFF_LOOP_COMPRESSED_BYTES = 64 * 1024
_OFF_LOOP_UNCOMPRESSED_BYTES = (16 << 20) if COMPILED_SCANNER else (512 << 10)


def _has_transactional_batch(records: memoryview | None) -> bool:
    """The transactional attribute bit of the first batch, read only when its header is there."""
    if records is None or len(records) < 23 or records[16] != 2:
        return False
    return bool(records[22] & 0x10)


def _validate_off_loop(records: memoryview) -> bool:
    if len(records) < _OFF_LOOP_COMPRESSED_BYTES:
        return False
    return len(records) >= _OFF_LOOP_UNCOMPRESSED_BYTES or bool(records[22] & 0x07)  # attributes: the codec


def _recompress(batch: BatchView, target: Any) -> bytes:
    """Rewrite a produced batch with the topic's codec, keeping producer metadata (off the loop)."""
    # Offsets are assigned afresh, 0..n-1, as Kafka's buildRecordsAndAssignOffsets does.
    recs = [NewRecord(r.key, r.value, r.timestamp, tuple(r.headers), i) for i, r in enumerate(batch.records())]
    return build_batch(recs, base_offset=0, compression=target, timestamp_type=batch.timestamp_type,
                       producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                       base_sequence=batch.base_sequence, is_transactional=batch.is_transactional,
                       partition_leader_epoch=batch.partition_leader_epoch,
                       base_timestamp=batch.base_timestamp, last_offset_delta=len(recs) - 1)
