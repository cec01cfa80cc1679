"""The transaction coordinator: transactional ids, their producer ids and epochs, and two-phase commit.

Each transactional id lives in one partition of ``__transaction_state`` (Kafka's
``Utils.abs(hashCode) % partitions``); the leader of that partition is its coordinator, and the
partition's leader epoch is the *coordinator epoch* that fences markers from older coordinators.
Every state change is first written to that partition (acks=all) and only applied in memory once the
write is replicated, exactly as Kafka's ``TransactionStateManager.appendTransactionToLog``.

States (Kafka's ``TransactionState``) and how they move::

    Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
                                               --EndTxn(abort) / timeout / fencing--> PrepareAbort --markers--> CompleteAbort
    Empty / CompleteCommit / CompleteAbort --InitProducerId--> Empty (epoch + 1, or a new producer id)

While a transition is being written the metadata carries a *pending state*; any other request for the
same transactional id meanwhile gets CONCURRENT_TRANSACTIONS. After PrepareCommit/PrepareAbort is
written the client is answered at once and the markers are written to every partition of the
transaction by ``WriteTxnMarkers`` to each partition's leader (retried until every partition
acknowledged, or the coordinator lost the partition), then CompleteCommit/CompleteAbort is written.

A coordinator that becomes leader of a ``__transaction_state`` partition loads it from the log and
finishes every transaction found in PrepareCommit/PrepareAbort (the markers are written again: a
duplicate marker is harmless); a new leader epoch while it stays the leader changes nothing. Losing
leadership drops the partition's state and its marker work.

Timeouts: an Ongoing transaction older than its ``transaction.timeout.ms`` is aborted by a periodic
check (``transaction.abort.timed.out.transaction.cleanup.interval.ms``): the producer epoch is bumped
first, so the timed-out producer is fenced (PrepareEpochFence, as Kafka). Transactional ids idle in
Empty/CompleteCommit/CompleteAbort for ``transactional.id.expiration.ms`` are removed with a tombstone.

Why ~880 lines: this is Kafka's TransactionCoordinator and TransactionStateManager in one module —
the state machine (InitProducerId, AddPartitions, EndTxn with their transitions) and the per-partition
cache it mutates must be read together to check that every transition is logged before it is applied.
The broker adapters (log backend, marker sender wiring) live in ``txn_broker_side.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from broker.txn_log_format import (
    TxnLogValue,
    TxnState,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
    partition_for,
)
from config.views import ConfigView, config_field
from protocol.errors import ErrorCode
from storage.clock import Clock, TimerHandle, as_clock

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_SHORT_MAX = 32767

TP = tuple[str, int]

# The states a state may be entered from (Kafka's validPreviousStates).
_VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}
_EXPIRABLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})

# Errors of a WriteTxnMarkers partition result, and what the coordinator does with them.
_MARKER_RETRY = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                           ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                           ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR})
_MARKER_GIVE_UP = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_MARKER_SKIP = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})


class TxnStateError(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client error."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch in reserve so a producer can always be fenced."""
    return epoch >= _SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The metadata a transition will leave behind, once it is in the log (Kafka's TxnTransitMetadata)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TP]
    start_ms: int
    last_update_ms: int

    def log_value(self) -> TxnLogValue:
        parts: dict[str, list[int]] = {}
        if self.state != TxnState.EMPTY:
            for t, p in self.partitions:
                parts.setdefault(t, []).append(p)
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state, parts,
                           self.last_update_ms, self.start_ms)


@dataclass(eq=False)
class TxnMetadata:
    """One transactional id's state (Kafka's TransactionMetadata)."""

    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[TP] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending_state: TxnState | None = None
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_log(cls, transactional_id: str, v: TxnLogValue) -> TxnMetadata:
        parts = {(t, p) for t, ps in v.partitions.items() for p in ps} if v.state != TxnState.EMPTY else set()
        return cls(transactional_id, v.producer_id, NO_PRODUCER_ID, v.producer_epoch, NO_PRODUCER_EPOCH,
                   v.timeout_ms, v.state, parts, v.start_ms, v.last_update_ms)

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT)

    # -- preparing transitions (each sets the pending state) --------------------------------------

    def _prepare(self, state: TxnState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: Iterable[TP], start_ms: int, now: int) -> TxnTransit:
        if self.pending_state is not None:
            raise TxnStateError(f"{self.transactional_id}: transition to {state.kafka_name} while "
                                f"{self.pending_state.kafka_name} is pending")
        if producer_id < 0:
            raise TxnStateError(f"{self.transactional_id}: illegal producer id {producer_id}")
        if state != TxnState.DEAD and epoch < 0:
            raise TxnStateError(f"{self.transactional_id}: illegal producer epoch {epoch}")
        if self.state not in _VALID_PREVIOUS[state]:
            raise TxnStateError(f"{self.transactional_id}: {state.kafka_name} cannot follow {self.state.kafka_name}")
        self.pending_state = state
        return TxnTransit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, frozenset(partitions),
                          start_ms, now)

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        if self.producer_epoch >= _SHORT_MAX:
            raise TxnStateError(f"{self.transactional_id}: cannot fence producer epoch {self.producer_epoch}")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH,
                             self.timeout_ms, self.partitions, self.start_ms, self.last_update_ms)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now: int) -> TxnTransit | ErrorCode:
        if self.epoch_exhausted:
            raise TxnStateError(f"{self.transactional_id}: producer epochs of {self.producer_id} are exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump whose answer the producer never got: hand out the same epoch again.
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(TxnState.EMPTY, self.producer_id, epoch, last, timeout_ms, (), -1, now)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransit:
        if self.has_pending_transaction:
            raise TxnStateError(f"{self.transactional_id}: cannot rotate the producer id with a pending transaction")
        return self._prepare(TxnState.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH, timeout_ms, (), -1, now)

    def prepare_add_partitions(self, added: Iterable[TP], now: int) -> TxnTransit:
        start = now if self.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT) \
            else self.start_ms
        return self._prepare(TxnState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions | set(added), start, now)

    def prepare_abort_or_commit(self, state: TxnState, now: int) -> TxnTransit:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions, self.start_ms, now)

    def prepare_complete(self, now: int) -> TxnTransit:
        state = TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, (), self.start_ms, now)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(TxnState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, (), self.start_ms, self.last_update_ms)

    # -- completing a transition once it is in the log -------------------------------------------

    def complete_transition(self, t: TxnTransit) -> None:
        to = self.pending_state
        if to is None or to != t.state:
            raise TxnStateError(f"{self.transactional_id}: completing {t.state.kafka_name}, pending "
                                f"{to.kafka_name if to is not None else 'nothing'}")
        same_producer = t.producer_id == self.producer_id and t.producer_epoch == self.producer_epoch
        if to == TxnState.EMPTY:
            bump_ok = t.producer_epoch == self.producer_epoch + 1 or (t.producer_epoch == 0
                                                                      and t.producer_id != self.producer_id)
            if (self.producer_epoch != t.producer_epoch and not bump_ok) or t.partitions or t.start_ms != -1:
                self._bad(t)
            self.timeout_ms = t.timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.last_producer_id = t.last_producer_id
        elif to == TxnState.ONGOING:
            if not same_producer or not self.partitions <= t.partitions or self.timeout_ms != t.timeout_ms:
                self._bad(t)
            self.start_ms = t.start_ms
            self.partitions |= t.partitions
        elif to in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            if (not same_producer or set(self.partitions) != set(t.partitions) or self.timeout_ms != t.timeout_ms
                    or self.start_ms != t.start_ms):
                self._bad(t)
        elif to in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            if not same_producer or self.timeout_ms != t.timeout_ms or t.start_ms == -1:
                self._bad(t)
            self.start_ms = t.start_ms
            self.partitions.clear()
        else:
            # PrepareEpochFence is never written; Dead is removed from the cache, never written as a state.
            self._bad(t)
        self.last_update_ms = t.last_update_ms
        self.pending_state = None
        self.state = to

    def _bad(self, t: TxnTransit) -> None:
        raise TxnStateError(f"{self.transactional_id}: invalid transition from {self} to {t}")

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for t, p in sorted(self.partitions):
            out.setdefault(t, []).append(p)
        return out


# ------------------------------------------------------------------------------------------------
# What the coordinator needs from the broker (fakes in the unit tests)


class TxnLogBackend(Protocol):
    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], timeout_s: float) -> ErrorCode:
        """Append to ``__transaction_state`` as leader and wait for acks=all; the append's error."""

    def read(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        """Every (key, value) of the partition from its log start to its log end (runs in a thread)."""


class MarkerSender(Protocol):
    def leader_of(self, tp: TP) -> int | None:
        """The leader's broker id, -1 when it has none right now, None when the partition does not exist."""

    async def write_markers(self, broker_id: int, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: list[TP]) -> dict[TP, ErrorCode]:
        """WriteTxnMarkers to ``broker_id``; raises OSError/TimeoutError when the broker cannot be reached."""


@dataclass
class TxnCoordinatorConfig(ConfigView):
    """The transaction coordinator's configs: a view of the registry (Kafka's TransactionStateManagerConfig)."""

    num_partitions: int = config_field("transaction.state.log.num.partitions")
    max_timeout_ms: int = config_field("transaction.max.timeout.ms")
    id_expiration_ms: int = config_field("transactional.id.expiration.ms")
    abort_interval_ms: int = config_field("transaction.abort.timed.out.transaction.cleanup.interval.ms")
    expire_interval_ms: int = config_field("transaction.remove.expired.transaction.cleanup.interval.ms")
    request_timeout_ms: int = config_field("request.timeout.ms")
    # Not a Kafka config: the pause before resending WriteTxnMarkers to a leader that failed them.
    retry_backoff_s: float = 0.1


@dataclass
class _PartitionCache:
    coordinator_epoch: int
    txns: dict[str, TxnMetadata] = field(default_factory=dict)


class TransactionCoordinator:
    def __init__(self, backend: TxnLogBackend, markers: MarkerSender, generate_producer_id: Callable[[], Awaitable[int]],
                 config: TxnCoordinatorConfig | None = None, *, clock: Clock | Callable[[], int] | None = None,
                 partition_count: Callable[[], int | None] | None = None) -> None:
        """``clock``: time and timers (``storage/clock.py``), or a plain millisecond time source."""
        self.backend = backend
        self.markers = markers
        self.generate_producer_id = generate_producer_id
        self.config = config or TxnCoordinatorConfig.from_config()
        self.time = as_clock(clock)
        self.clock = self.time.now_ms
        self._partition_count = partition_count
        self._cache: dict[int, _PartitionCache] = {}
        self._loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self._tasks: set[asyncio.Task[Any]] = set()
        self._marker_tasks: dict[str, asyncio.Task[Any]] = {}
        self._periodic: dict[str, TimerHandle] = {}
        self.active = False

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        self.active = True
        self._every("abort-timed-out-transactions", self.config.abort_interval_ms, self.abort_timed_out_transactions)
        self._every("expire-transactional-ids", self.config.expire_interval_ms, self.expire_transactional_ids)

    async def close(self) -> None:
        self.active = False
        for handle in self._periodic.values():
            handle.cancel()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._periodic.clear()
        self._tasks.clear()
        self._marker_tasks.clear()
        self._cache.clear()
        self._loading.clear()

    def _every(self, name: str, interval_ms: int, fn: Callable[[], Awaitable[Any]]) -> None:
        """Run ``fn`` on the clock every ``interval_ms``, each run scheduled when the previous one is done."""
        async def run() -> None:
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("periodic transaction coordinator task %s failed", name)
            if self.active:
                self._every(name, interval_ms, fn)

        self._periodic[name] = self.time.schedule(max(interval_ms, 10), lambda: self._spawn(run()))

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task failed", exc_info=task.exception())

    # -- partitions ----------------------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        if self._partition_count is not None:
            n = self._partition_count()
            if n:
                return n
        return self.config.num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def owned_partitions(self) -> dict[int, int]:
        return {p: c.coordinator_epoch for p, c in self._cache.items()}

    def _state(self, transactional_id: str) -> tuple[ErrorCode, int, TxnMetadata | None]:
        """(error, coordinator epoch, metadata or None) — Kafka's getTransactionState."""
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, None
        entry = self._cache.get(partition)
        if entry is None:
            return ErrorCode.NOT_COORDINATOR, -1, None
        return ErrorCode.NONE, entry.coordinator_epoch, entry.txns.get(transactional_id)

    def metadata(self, transactional_id: str) -> TxnMetadata | None:
        return self._state(transactional_id)[2]

    def start_loading(self, partition: int, coordinator_epoch: int) -> asyncio.Task[Any] | None:
        """This broker leads ``partition`` (a LeaderAndIsr named it leader): unless it already did, claim
        the partition now and read it in a task (returned). Called as the LeaderAndIsr is applied, so that
        "already" is decided in the order leaderships change: an unload in between (it became a follower)
        has removed the claim, and a later leadership loads afresh at its own epoch."""
        if partition in self._cache or partition in self._loading:
            # Still its leader: a new leader epoch without a new leader (the controller changed the ISR)
            # keeps the state and the coordinator epoch of the election, as Kafka's coordinator is told
            # only of new leaderships. Reloading would drop what only memory holds (the epoch a KIP-360
            # retry of InitProducerId may name, in-flight requests, marker work) for nothing.
            return None
        self._loading[partition] = coordinator_epoch
        return self._spawn(self._load(partition, coordinator_epoch))

    async def load_partition(self, partition: int, coordinator_epoch: int) -> None:
        """Become coordinator of ``partition``: read its log, then finish transactions left in Prepare*."""
        task = self.start_loading(partition, coordinator_epoch)
        if task is not None:
            await task

    async def _load(self, partition: int, coordinator_epoch: int) -> None:
        log.info("loading transaction state of %s-%d at coordinator epoch %d", TXN_TOPIC, partition, coordinator_epoch)
        started = time.monotonic()
        try:
            loaded = await asyncio.get_running_loop().run_in_executor(None, self._read_partition, partition)
        except Exception:
            log.exception("loading %s-%d failed", TXN_TOPIC, partition)
            if self._loading.get(partition) == coordinator_epoch:
                del self._loading[partition]
            return
        if self._loading.get(partition) != coordinator_epoch:
            return  # unloaded (or reloaded at another epoch) meanwhile
        del self._loading[partition]
        self._cache[partition] = _PartitionCache(coordinator_epoch, loaded)
        now = self.clock()
        pending = 0
        for txn_id, meta in loaded.items():
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                transit = meta.prepare_complete(now)
                self._start_markers(txn_id, coordinator_epoch, meta.state == TxnState.PREPARE_COMMIT, meta, transit)
                pending += 1
        log.info("loaded %d transactional ids from %s-%d in %.0f ms (%d to complete)", len(loaded), TXN_TOPIC,
                 partition, (time.monotonic() - started) * 1000, pending)

    def _read_partition(self, partition: int) -> dict[str, TxnMetadata]:
        loaded: dict[str, TxnMetadata] = {}
        for key, value in self.backend.read(partition):
            if key is None:
                continue
            try:
                txn_id = decode_txn_key(key)
                if not isinstance(txn_id, str):
                    log.warning("unknown key version %d in %s-%d; skipped", txn_id.version, TXN_TOPIC, partition)
                    continue
                v = decode_txn_value(value)
            except ValueError as e:
                log.warning("skipping an unreadable record in %s-%d: %s", TXN_TOPIC, partition, e)
                continue
            if v is None:
                loaded.pop(txn_id, None)
            else:
                loaded[txn_id] = TxnMetadata.from_log(txn_id, v)
        return loaded

    def unload_partition(self, partition: int) -> None:
        if partition in self._cache or partition in self._loading:
            log.info("unloading transaction state of %s-%d", TXN_TOPIC, partition)
        self._drop_partition(partition)

    def _drop_partition(self, partition: int) -> None:
        self._loading.pop(partition, None)
        entry = self._cache.pop(partition, None)
        if entry is None:
            return
        for txn_id in entry.txns:
            task = self._marker_tasks.pop(txn_id, None)
            if task is not None:
                task.cancel()

    # -- log appends --------------------------------------------------------------------------------

    async def _append_transition(self, transactional_id: str, coordinator_epoch: int, transit: TxnTransit,
                                 retry_on: frozenset[ErrorCode] = frozenset()) -> ErrorCode:
        """Write ``transit`` and, once replicated, apply it (Kafka's appendTransactionToLog)."""
        err, epoch, meta = self._state(transactional_id)
        if err:
            return err
        if meta is None or epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        key = encode_txn_key(transactional_id)
        value = encode_txn_value(transit.log_value())
        timeout_s = max(transit.timeout_ms, 1000) / 1000.0
        try:
            code = await self.backend.append(self.partition_for(transactional_id), [(key, value)], timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("appending to %s failed", TXN_TOPIC)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        code = _coordinator_error(code)
        err, epoch, current = self._state(transactional_id)
        if code == ErrorCode.NONE:
            if err:
                return err
            if current is None or epoch != coordinator_epoch:
                return ErrorCode.NOT_COORDINATOR
            current.complete_transition(transit)
            return ErrorCode.NONE
        if not err and current is not None and epoch == coordinator_epoch and code not in retry_on:
            current.pending_state = None
        log.info("writing %s of %s to %s failed: %s", transit.state.kafka_name, transactional_id, TXN_TOPIC, code.name)
        return code

    # -- InitProducerId ---------------------------------------------------------------------------------

    def validate_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.max_timeout_ms

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional InitProducerId; PRODUCER_FENCED is not translated."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if not self.validate_timeout(timeout_ms):
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        err, epoch, meta = self._state(transactional_id)
        if err:
            return err, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if meta is None:
            pid = await self.generate_producer_id()
            err, epoch, meta = self._state(transactional_id)
            if err:
                return err, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            if meta is None:
                meta = TxnMetadata(transactional_id, pid, timeout_ms=timeout_ms, last_update_ms=self.clock())
                self._cache[self.partition_for(transactional_id)].txns[transactional_id] = meta
        new_pid: int | None = None
        if meta.epoch_exhausted and not meta.pending and meta.state in _EXPIRABLE:
            new_pid = await self.generate_producer_id()
            err, epoch, meta2 = self._state(transactional_id)
            if err or meta2 is not meta:
                return err or ErrorCode.NOT_COORDINATOR, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        result = self._prepare_init(meta, timeout_ms, expected, new_pid)
        if isinstance(result, ErrorCode):
            return result, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if result.state == TxnState.PREPARE_EPOCH_FENCE:
            # Abort the open transaction first; the client retries and then gets the next epoch.
            code = await self._end_transaction(transactional_id, result.producer_id, result.producer_epoch,
                                               commit=False, from_client=False)
            return (code if code != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS), \
                NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        code = await self._append_transition(transactional_id, epoch, result)
        if code != ErrorCode.NONE:
            return code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        log.info("initialized transactional id %s with producer id %d epoch %d", transactional_id,
                 result.producer_id, result.producer_epoch)
        return ErrorCode.NONE, result.producer_id, result.producer_epoch

    def _prepare_init(self, meta: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                      new_pid: int | None) -> TxnTransit | ErrorCode:
        if meta.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None:
            exp_pid, exp_epoch = expected
            valid = (meta.producer_epoch == NO_PRODUCER_EPOCH or exp_pid == meta.producer_id
                     or (exp_pid == meta.last_producer_id and is_epoch_exhausted(exp_epoch)))
            if not valid:
                return ErrorCode.PRODUCER_FENCED
        state = meta.state
        if state in (TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state in _EXPIRABLE:
            if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
                if new_pid is None:
                    return ErrorCode.CONCURRENT_TRANSACTIONS  # raced with another request; let the client retry
                return meta.prepare_producer_id_rotation(new_pid, timeout_ms, self.clock(), expected is not None)
            return meta.prepare_increment_producer_epoch(timeout_ms, expected[1] if expected else None, self.clock())
        if state == TxnState.ONGOING:
            return meta.prepare_fence_producer_epoch()
        raise TxnStateError(f"{meta.transactional_id} is in state {state.kafka_name}")

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TP]) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        parts = set(partitions)
        err, epoch, meta = self._state(transactional_id)
        if err:
            return err
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if meta.pending or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state == TxnState.ONGOING and parts <= meta.partitions:
            return ErrorCode.NONE
        transit = meta.prepare_add_partitions(parts, self.clock())
        return await self._append_transition(transactional_id, epoch, transit)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TP]) -> dict[TP, ErrorCode]:
        """KIP-890 verification (AddPartitionsToTxn v4+ verify_only): is each partition in the transaction?"""
        parts = list(partitions)
        if not transactional_id:
            return dict.fromkeys(parts, ErrorCode.INVALID_REQUEST)
        err, _epoch, meta = self._state(transactional_id)
        if err:
            return dict.fromkeys(parts, err)
        if meta is None or meta.producer_id != producer_id:
            return dict.fromkeys(parts, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != producer_epoch:
            return dict.fromkeys(parts, ErrorCode.PRODUCER_FENCED)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return dict.fromkeys(parts, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {tp: ErrorCode.NONE if tp in meta.partitions else ErrorCode.TRANSACTION_ABORTABLE for tp in parts}

    # -- EndTxn -------------------------------------------------------------------------------------------

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              commit: bool) -> ErrorCode:
        return await self._end_transaction(transactional_id, producer_id, producer_epoch, commit, from_client=True)

    async def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                               from_client: bool) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        err, coordinator_epoch, meta = self._state(transactional_id)
        if err:
            return err
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if (from_client and producer_epoch != meta.producer_epoch) or producer_epoch < meta.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if meta.pending and meta.pending_state != TxnState.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = meta.state
        is_epoch_fence = False
        if state == TxnState.ONGOING:
            next_state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            if next_state == TxnState.PREPARE_ABORT and meta.pending_state == TxnState.PREPARE_EPOCH_FENCE:
                is_epoch_fence = True
                meta.pending_state = None
                meta.producer_epoch = producer_epoch
                meta.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = meta.prepare_abort_or_commit(next_state, self.clock())
        elif state == TxnState.COMPLETE_COMMIT:
            return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
        elif state == TxnState.COMPLETE_ABORT:
            return ErrorCode.NONE if not commit else ErrorCode.INVALID_TXN_STATE
        elif state == TxnState.PREPARE_COMMIT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
        elif state == TxnState.PREPARE_ABORT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE
        elif state == TxnState.EMPTY:
            return ErrorCode.INVALID_TXN_STATE
        else:
            raise TxnStateError(f"{transactional_id} is in state {state.kafka_name}")

        code = await self._append_transition(transactional_id, coordinator_epoch, transit)
        if code != ErrorCode.NONE:
            if is_epoch_fence:
                err, epoch, current = self._state(transactional_id)
                if not err and current is not None and epoch == coordinator_epoch:
                    current.has_failed_epoch_fence = True
                    log.warning("writing the epoch fence of %s failed (%s); epoch %d was not handed out",
                                transactional_id, code.name, producer_epoch)
            return code
        err, epoch, meta = self._state(transactional_id)
        if err:
            return err
        if meta is None or epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        if meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if meta.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        expected_state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if meta.state != expected_state:
            return ErrorCode.INVALID_TXN_STATE
        complete = meta.prepare_complete(self.clock())
        self._start_markers(transactional_id, coordinator_epoch, commit, meta, complete)
        return ErrorCode.NONE

    # -- markers ---------------------------------------------------------------------------------------------

    def _start_markers(self, transactional_id: str, coordinator_epoch: int, commit: bool, meta: TxnMetadata,
                       complete: TxnTransit) -> None:
        old = self._marker_tasks.pop(transactional_id, None)
        if old is not None:
            old.cancel()
        task = self._spawn(self._complete_transaction(transactional_id, coordinator_epoch, commit, meta, complete))
        self._marker_tasks[transactional_id] = task
        task.add_done_callback(functools.partial(self._forget_marker_task, transactional_id))

    def _forget_marker_task(self, transactional_id: str, task: asyncio.Future[Any]) -> None:
        """A finished marker task leaves the table, unless a newer one for the same id replaced it."""
        if self._marker_tasks.get(transactional_id) is task:
            self._marker_tasks.pop(transactional_id, None)

    def _owns(self, transactional_id: str, coordinator_epoch: int, meta: TxnMetadata) -> bool:
        err, epoch, current = self._state(transactional_id)
        return not err and epoch == coordinator_epoch and current is meta

    async def _complete_transaction(self, transactional_id: str, coordinator_epoch: int, commit: bool,
                                    meta: TxnMetadata, complete: TxnTransit) -> None:
        """Write the markers to every partition of the transaction, then CompleteCommit/CompleteAbort."""
        pid, epoch = meta.producer_id, meta.producer_epoch
        backoff = self.config.retry_backoff_s
        # Why each partition's marker is still missing, logged when it changes (Kafka logs every retry;
        # once per cause keeps a long outage readable).
        waiting: dict[TP, str] = {}

        def still_waiting(tp: TP, why: str) -> None:
            if waiting.get(tp) != why:
                waiting[tp] = why
                log.info("marker of %s for %s-%d not written yet (%s); retrying with coordinator epoch %d",
                         transactional_id, tp[0], tp[1], why, coordinator_epoch)

        while meta.partitions:
            if not self._owns(transactional_id, coordinator_epoch, meta):
                return
            by_leader: dict[int, list[TP]] = {}
            for tp in sorted(meta.partitions):
                leader = self.markers.leader_of(tp)
                if leader is None:
                    log.info("partition %s-%d of transaction %s no longer exists; no marker for it",
                             tp[0], tp[1], transactional_id)
                    meta.partitions.discard(tp)
                elif leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
                else:
                    still_waiting(tp, "no leader")
            if by_leader:
                results = await asyncio.gather(*(
                    self._write_markers(b, pid, epoch, commit, coordinator_epoch, tps) for b, tps in by_leader.items()))
                if not self._owns(transactional_id, coordinator_epoch, meta):
                    return
                for res in results:
                    for tp, code in res.items():
                        if code == ErrorCode.NONE or code in _MARKER_SKIP:
                            meta.partitions.discard(tp)
                        elif code in _MARKER_GIVE_UP:
                            log.info("markers of %s cancelled: %s on %s-%d", transactional_id, code.name, tp[0], tp[1])
                            return
                        elif code in _MARKER_RETRY:
                            still_waiting(tp, code.name)
                        else:
                            log.warning("unexpected %s writing a marker of %s to %s-%d; retrying", code.name,
                                        transactional_id, tp[0], tp[1])
            if meta.partitions:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        # Every partition has its marker: record the end of the transaction.
        backoff = self.config.retry_backoff_s
        while self._owns(transactional_id, coordinator_epoch, meta):
            code = await self._append_transition(transactional_id, coordinator_epoch, complete,
                                                 retry_on=frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE}))
            if code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                if code == ErrorCode.NONE:
                    log.debug("completed %s of %s", "commit" if commit else "abort", transactional_id)
                else:
                    log.info("completing the transaction of %s failed: %s", transactional_id, code.name)
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def _write_markers(self, broker_id: int, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                             tps: list[TP]) -> dict[TP, ErrorCode]:
        try:
            res = await self.markers.write_markers(broker_id, pid, epoch, commit, coordinator_epoch, tps)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("WriteTxnMarkers to broker %d failed: %s", broker_id, e or type(e).__name__)
            return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return {tp: ErrorCode(res.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)) for tp in tps}

    # -- timeouts and expiration --------------------------------------------------------------------------

    def timed_out_transactions(self) -> list[tuple[str, int, int]]:
        now = self.clock()
        out = []
        for entry in self._cache.values():
            for txn_id, meta in entry.txns.items():
                if not meta.pending and meta.state == TxnState.ONGOING and meta.start_ms + meta.timeout_ms < now:
                    out.append((txn_id, meta.producer_id, meta.producer_epoch))
        return out

    async def abort_timed_out_transactions(self) -> None:
        for txn_id, pid, _epoch in self.timed_out_transactions():
            err, _ce, meta = self._state(txn_id)
            if err or meta is None or meta.producer_id != pid or meta.pending or meta.state != TxnState.ONGOING:
                continue
            fence = meta.prepare_fence_producer_epoch()
            log.info("aborting the transaction of %s (producer id %d): older than its timeout of %d ms",
                     txn_id, pid, meta.timeout_ms)
            code = await self._end_transaction(txn_id, fence.producer_id, fence.producer_epoch, commit=False,
                                               from_client=False)
            if code not in (ErrorCode.NONE, ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.PRODUCER_FENCED,
                            ErrorCode.CONCURRENT_TRANSACTIONS):
                log.warning("aborting the timed out transaction of %s failed: %s", txn_id, code.name)

    async def expire_transactional_ids(self) -> int:
        """Write tombstones for transactional ids idle longer than ``transactional.id.expiration.ms``."""
        now = self.clock()
        removed = 0
        for partition, entry in list(self._cache.items()):
            expired: list[tuple[str, TxnMetadata, TxnTransit]] = []
            for txn_id, meta in entry.txns.items():
                if (not meta.pending and meta.state in _EXPIRABLE
                        and meta.last_update_ms <= now - self.config.id_expiration_ms):
                    expired.append((txn_id, meta, meta.prepare_dead()))
            if not expired:
                continue
            records: list[tuple[bytes, bytes | None]] = [(encode_txn_key(t), None) for t, _m, _d in expired]
            try:
                code = _coordinator_error(await self.backend.append(
                    partition, records, self.config.request_timeout_ms / 1000.0))
            except Exception:
                log.exception("writing transactional id tombstones failed")
                code = ErrorCode.UNKNOWN_SERVER_ERROR
            current = self._cache.get(partition)
            for txn_id, meta, dead in expired:
                if (code == ErrorCode.NONE and current is entry and entry.txns.get(txn_id) is meta
                        and meta.pending_state == TxnState.DEAD and meta.producer_epoch == dead.producer_epoch):
                    del entry.txns[txn_id]
                    removed += 1
                else:
                    meta.pending_state = None
            if removed:
                log.info("expired %d transactional ids of %s-%d", removed, TXN_TOPIC, partition)
        return removed

    # -- DescribeTransactions / ListTransactions ---------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        err, _epoch, meta = self._state(transactional_id)
        if err:
            return err, None
        if meta is None or meta.state == TxnState.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, meta

    def list_transactions(self, producer_ids: Iterable[int], states: Iterable[str], duration_ms: int = -1
                          ) -> tuple[ErrorCode, list[str], list[TxnMetadata]]:
        """(error, unknown state filters, matching transactions)."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        if self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        pids = set(producer_ids)
        names = list(states)
        wanted: set[TxnState] = set()
        unknown: list[str] = []
        for n in names:
            s = TxnState.from_name(n)
            if s is None:
                unknown.append(n)
            else:
                wanted.add(s)
        now = self.clock()
        out = []
        for entry in self._cache.values():
            for meta in entry.txns.values():
                if meta.state == TxnState.DEAD:
                    continue
                if pids and meta.producer_id not in pids:
                    continue
                if names and meta.state not in wanted:
                    continue
                if duration_ms >= 0 and now - meta.start_ms <= duration_ms:
                    continue
                out.append(meta)
        return ErrorCode.NONE, unknown, out


def _coordinator_error(code: ErrorCode | int) -> ErrorCode:
    """Map a log append error to the coordinator error clients understand (as Kafka does)."""
    code = ErrorCode(code)
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code
