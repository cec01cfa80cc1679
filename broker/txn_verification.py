"""KIP-890 part 1 on the produce path: a leader asks the transaction coordinator before it appends.

Before a producer's first transactional batch of a transaction goes into a partition, the leader asks
the coordinator of the request's transactional id whether that partition is in the transaction
(AddPartitionsToTxn v4, ``verify_only``). Only a positive answer lets the batch in. A late or stray
batch is refused otherwise: one that arrives after its transaction was aborted, or one from a producer
that never added the partition. Such a batch would open a transaction here that the coordinator will
never end, and the partition's last stable offset would stay behind it for good.

``TxnVerifier`` is Kafka's AddPartitionsToTxnManager. The coordinator is found as FindCoordinator finds
it: the ``__transaction_state`` partition of the id's hash, and that partition's leader in the
metadata cache. When this broker is the coordinator it answers directly. Requests to another broker are
batched per coordinator: one request is in flight per coordinator, and the verifications that arrive
meanwhile go together in the next one. As in Kafka, the batch holds at most one verification per
transactional id. A newer one replaces an older one, which is answered INVALID_PRODUCER_EPOCH (older
epoch) or NETWORK_EXCEPTION (same epoch: the client is retrying).

``verify_produce`` is ReplicaManager.handleProduceAppend's part before the append. It opens a
verification (a guard in the partition's producer state, storage/producer_state.py) for each partition
whose transaction is not open yet, asks the coordinator, and translates its errors into the ones a
producer expects from Produce.

``TxnOffsetsVerification`` does the same for TxnOffsetCommit (Kafka's GroupCoordinator.
handleTxnCommitOffsets): before the group coordinator appends a transaction's offsets to the group's
``__consumer_offsets`` partition, it asks whether AddOffsetsToTxn put that partition in the
transaction. The coordinator appends with ``append_internal``, which checks no guard, so
``require_verified`` checks it right before that append (nothing runs between the two on the event
loop).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.partition import PartitionError
from broker.txn_log_format import partition_for
from protocol.api_versions import ApiKey
from protocol.client_connection import PLAINTEXT, ConnectionSecurity
from protocol.errors import ErrorCode
from protocol.messages import request_type

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager
    from broker.txn_coordinator import TransactionCoordinator
    from storage.log import PartitionLog
    from storage.producer_state import VerificationGuard

log = logging.getLogger(__name__)

TP = tuple[str, int]
TXN_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
NO_SEQUENCE = -1  # a TxnOffsetCommit has no sequence: Kafka verifies it with RecordBatch.NO_SEQUENCE
VERIFY_VERSION = 4  # the first AddPartitionsToTxn version with verify_only (KIP-890)
CONFIG = "transaction.partition.verification.enable"
_APT = request_type(ApiKey.ADD_PARTITIONS_TO_TXN)

# Producer id, epoch and base sequence of a v2 batch (after baseOffset .. maxTimestamp).
_PRODUCER_FIELDS = struct.Struct(">qhi")
_PRODUCER_ID_AT = 43
_HEADER_SIZE = 61
_MAGIC_AT = 16
_ATTRIBUTES_LOW_AT = 22
_TRANSACTIONAL = 0x10

# Coordinator errors that Kafka turns into NOT_ENOUGH_REPLICAS for the producer: retriable, but older
# clients do not retry them on Produce, and this one does not make them refresh their metadata.
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


def transactional_batch_producer(records: memoryview | bytes | None) -> tuple[int, int, int] | None:
    """(producer id, epoch, base sequence) of the first batch when it is a transactional v2 batch."""
    if records is None or len(records) < _HEADER_SIZE or records[_MAGIC_AT] != 2:
        return None
    if not records[_ATTRIBUTES_LOW_AT] & _TRANSACTIONAL:
        return None
    pid, epoch, seq = _PRODUCER_FIELDS.unpack_from(records, _PRODUCER_ID_AT)
    return (pid, epoch, seq) if pid >= 0 else None


def produce_error(code: ErrorCode) -> tuple[ErrorCode, str | None]:
    """The Produce answer (code, error message) for a partition that failed verification (Kafka's
    ReplicaManager.handleProduceAppend)."""
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, "Partition was not added to the transaction"
    if code in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return ErrorCode.NOT_ENOUGH_REPLICAS, (
            f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}")
    return code, None


def _coordinator_error(code: ErrorCode, generic_errors: bool) -> ErrorCode:
    """A coordinator's per-partition verification error as the leader passes it on (Kafka's
    AddPartitionsToTxnManager): producers expect INVALID_PRODUCER_EPOCH when fenced, and only
    Produce v11+ clients know TRANSACTION_ABORTABLE."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE and not generic_errors:
        return ErrorCode.INVALID_TXN_STATE
    return code


@dataclass(slots=True)
class _Verification:
    """One transactional id's question, waiting for (or in) a request to its coordinator."""

    producer_id: int
    producer_epoch: int
    partitions: list[TP]
    generic_errors: bool
    answer: asyncio.Future[dict[TP, ErrorCode]]


@dataclass(slots=True)
class VerificationStats:
    """Kafka's AddPartitionsToTxnManager metrics: VerificationFailureRate counts partitions,
    VerificationTimeMs the time from a question to its answer."""

    verifications: int = 0
    requests: int = 0  # AddPartitionsToTxn requests sent to other brokers
    failed_partitions: int = 0
    total_time_ms: float = 0.0
    time_ms: deque[float] = field(default_factory=lambda: deque(maxlen=1028))  # Kafka's reservoir size

    def record(self, started: float, failed: int) -> None:
        elapsed = (time.monotonic() - started) * 1000.0
        self.verifications += 1
        self.failed_partitions += failed
        self.total_time_ms += elapsed
        self.time_ms.append(elapsed)


class TxnVerifier:
    """Asks transaction coordinators whether partitions are in a transaction (AddPartitionsToTxn v4
    ``verify_only``), batching the questions per coordinator."""

    def __init__(self, broker_id: int, metadata: MetadataCache, inter_broker_listener: str,
                 coordinator: Callable[[], TransactionCoordinator | None], request_timeout_ms: int,
                 security: ConnectionSecurity = PLAINTEXT) -> None:
        from controller.network_client import ConnectionPool, ConnectionSettings

        self.broker_id = broker_id
        self.metadata = metadata
        self.inter_broker_listener = inter_broker_listener
        self.coordinator = coordinator  # this broker's, which answers when the coordinator is us
        self.stats = VerificationStats()
        # One request in flight per coordinator, as Kafka's sender thread keeps it.
        self._pool = ConnectionPool(ConnectionSettings(
            client_id=f"broker-{broker_id}-txn-verification", negotiate_versions=False, max_in_flight=1,
            request_timeout_s=request_timeout_ms / 1000.0, security=security))
        self._waiting: dict[int, dict[str, tuple[_Verification, float]]] = {}
        self._in_flight: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TP],
                     *, generic_errors: bool) -> dict[TP, ErrorCode]:
        """The partitions the coordinator did not confirm, each with the error to pass on (empty: all
        are in the transaction). ``generic_errors``: the client knows TRANSACTION_ABORTABLE."""
        started = time.monotonic()
        node = self._coordinator_node(transactional_id)
        if node is None:
            errors = dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            self.stats.record(started, len(errors))
            return errors
        if node == self.broker_id:
            errors = self._verify_locally(transactional_id, producer_id, producer_epoch, partitions, generic_errors)
            self.stats.record(started, len(errors))
            return errors
        answer: asyncio.Future[dict[TP, ErrorCode]] = asyncio.get_running_loop().create_future()
        self._enqueue(node, transactional_id,
                      _Verification(producer_id, producer_epoch, partitions, generic_errors, answer), started)
        return await answer

    def _coordinator_node(self, transactional_id: str) -> int | None:
        """The coordinator's broker id, as FindCoordinator would name it (None: there is none now)."""
        topic = self.metadata.topics.get(TXN_TOPIC)
        if topic is None or not topic.partitions:
            return None
        info = topic.partitions.get(partition_for(transactional_id, len(topic.partitions)))
        if info is None or info.leader < 0 or not self.metadata.alive(info.leader):
            return None
        if info.leader != self.broker_id and self.metadata.endpoint(info.leader, self.inter_broker_listener) is None:
            return None
        return info.leader

    def _verify_locally(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TP],
                        generic_errors: bool) -> dict[TP, ErrorCode]:
        coordinator = self.coordinator()
        if coordinator is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        answer = coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        return {tp: _coordinator_error(code, generic_errors) for tp, code in answer.items() if code != ErrorCode.NONE}

    # -- batching per coordinator --------------------------------------------------------------------

    def _enqueue(self, node: int, transactional_id: str, v: _Verification, started: float) -> None:
        waiting = self._waiting.setdefault(node, {})
        existing = waiting.get(transactional_id)
        if existing is not None:
            old, old_started = existing
            if v.producer_epoch < old.producer_epoch:
                # The incoming question is from a fenced producer: it is not asked at all.
                self._answer(v, dict.fromkeys(v.partitions, ErrorCode.INVALID_PRODUCER_EPOCH), started)
                return
            # A newer epoch fences the waiting question; the same epoch means the client retried.
            code = (ErrorCode.INVALID_PRODUCER_EPOCH if old.producer_epoch < v.producer_epoch
                    else ErrorCode.NETWORK_EXCEPTION)
            self._answer(old, dict.fromkeys(old.partitions, code), old_started)
        waiting[transactional_id] = (v, started)
        if node not in self._in_flight:
            # On the next loop pass, so that the questions of requests served in this one go together.
            self._in_flight.add(node)
            asyncio.get_running_loop().call_soon(self._start_send, node)

    def _start_send(self, node: int) -> None:
        batch = self._waiting.pop(node, None)
        if not batch or self._closed:
            self._in_flight.discard(node)
            if batch:
                for v, started in batch.values():
                    self._answer(v, dict.fromkeys(v.partitions, ErrorCode.NETWORK_EXCEPTION), started)
            return
        task = asyncio.get_running_loop().create_task(self._send(node, batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, node: int, batch: dict[str, tuple[_Verification, float]]) -> None:
        try:
            await self._ask(node, batch)
        except Exception:  # noqa: BLE001 - every waiting producer must get an answer
            log.exception("verifying transactions with broker %d failed", node)
            self._answer_all(batch, ErrorCode.NETWORK_EXCEPTION)
        finally:
            if self._waiting.get(node):
                self._start_send(node)
            else:
                self._in_flight.discard(node)

    async def _ask(self, node: int, batch: dict[str, tuple[_Verification, float]]) -> None:
        from controller.network_client import KafkaConnectionError

        ep = self.metadata.endpoint(node, self.inter_broker_listener)
        if ep is None:
            self._answer_all(batch, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return
        transactions = []
        for txn_id, (v, _started) in batch.items():
            topics: dict[str, list[int]] = {}
            for t, p in v.partitions:
                topics.setdefault(t, []).append(p)
            transactions.append(_APT.AddPartitionsToTxnTransaction(
                transactional_id=txn_id, producer_id=v.producer_id, producer_epoch=v.producer_epoch,
                verify_only=True, topics=[_APT.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                          for t, ps in topics.items()]))
        self.stats.requests += 1
        try:
            resp = await self._pool.request(ep[0], ep[1], ApiKey.ADD_PARTITIONS_TO_TXN,
                                            _APT(transactions=transactions), version=VERIFY_VERSION)
        except (KafkaConnectionError, OSError) as e:
            log.warning("AddPartitionsToTxn to broker %d failed with a network error: %s", node, e)
            self._answer_all(batch, ErrorCode.NETWORK_EXCEPTION)
            return
        top = ErrorCode(resp.error_code)
        if top == ErrorCode.UNSUPPORTED_VERSION:
            # A coordinator without verify_only: Kafka carries on with the produce unverified.
            log.warning("broker %d does not support transaction verification; appending unverified", node)
            for v, started in batch.values():
                self._answer(v, {}, started)
            return
        if top != ErrorCode.NONE:
            log.error("AddPartitionsToTxn to broker %d failed: %s", node, top.name)
            # The producer is not told about the broker's own authorization failure.
            self._answer_all(batch, ErrorCode.INVALID_TXN_STATE if top == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                             else top)
            return
        results = {r.transactional_id: r for r in resp.results_by_transaction}
        for txn_id, (v, started) in batch.items():
            r = results.get(txn_id)
            if r is None:
                self._answer(v, dict.fromkeys(v.partitions, ErrorCode.NETWORK_EXCEPTION), started)
                continue
            unverified: dict[TP, ErrorCode] = {}
            for tr in r.topic_results:
                for pr in tr.results_by_partition:
                    if pr.partition_error_code != ErrorCode.NONE:
                        unverified[(tr.name, pr.partition_index)] = _coordinator_error(
                            ErrorCode(pr.partition_error_code), v.generic_errors)
            self._answer(v, unverified, started)

    def _answer_all(self, batch: dict[str, tuple[_Verification, float]], code: ErrorCode) -> None:
        for v, started in batch.values():
            self._answer(v, dict.fromkeys(v.partitions, code), started)

    def _answer(self, v: _Verification, errors: dict[TP, ErrorCode], started: float) -> None:
        if not v.answer.done():
            v.answer.set_result(errors)
            self.stats.record(started, len(errors))

    def close(self) -> None:
        self._closed = True
        for batch in self._waiting.values():
            self._answer_all(batch, ErrorCode.NETWORK_EXCEPTION)
        self._waiting.clear()
        for task in self._tasks:
            task.cancel()
        self._pool.close()


@dataclass(slots=True)
class ProduceVerification:
    """The outcome of verifying a produce request: errors for the partitions that may not be appended
    (code and message), and the guards the others' appends present."""

    errors: dict[TP, tuple[ErrorCode, str | None]] = field(default_factory=dict)
    guards: dict[TP, VerificationGuard] = field(default_factory=dict)


async def verify_produce(rm: ReplicaManager, verifier: TxnVerifier, transactional_id: str, producer_id: int,
                         producer_epoch: int, batches: Iterable[tuple[TP, int]], version: int) -> ProduceVerification:
    """Open a verification for each partition whose transaction is not open yet (``batches``: each
    partition with its batch's base sequence) and ask the coordinator about them."""
    out = ProduceVerification()
    for tp, sequence in batches:
        try:
            p = rm.leader_partition(tp)
            guard = p.log.maybe_start_transaction_verification(producer_id, sequence, producer_epoch)
        except PartitionError as e:
            out.errors[tp] = produce_error(e.code)
            continue
        if guard is not None:
            out.guards[tp] = guard
    if out.guards:
        unverified = await verifier.verify(transactional_id, producer_id, producer_epoch, list(out.guards),
                                           generic_errors=version > 10)
        for tp, code in unverified.items():
            out.errors[tp] = produce_error(code)
    return out



# -- TxnOffsetCommit ------------------------------------------------------------------------------------


def offset_commit_error(code: ErrorCode) -> ErrorCode:
    """A failed verification as TxnOffsetCommit answers it (Kafka's GroupMetadataManager.
    maybeConvertOffsetCommitError). INVALID_TXN_STATE and INVALID_PRODUCER_ID_MAPPING pass unchanged."""
    if code == ErrorCode.NETWORK_EXCEPTION:
        # Retriable, but older clients do not retry it; this one makes them retry without a lookup.
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return code


# The guards a TxnOffsetCommit's append presents: None when it needs none (verification off).
OffsetGuards = dict[TP, "VerificationGuard"] | None


class TxnOffsetsVerification:
    """KIP-890 for TxnOffsetCommit: is the group's offsets partition in the producer's transaction?

    Called by the group coordinator with the transactional id, producer, the group's
    ``__consumer_offsets`` partition and the request version; answers (error, guards)."""

    def __init__(self, rm: ReplicaManager, verifier: Callable[[], TxnVerifier | None],
                 enabled: Callable[[], bool]) -> None:
        self.rm = rm
        self.verifier = verifier  # the produce path's: one batch of questions per coordinator for both
        self.enabled = enabled  # transaction.partition.verification.enable, a dynamic broker config

    async def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int, partition: int,
                       version: int) -> tuple[ErrorCode, OffsetGuards]:
        verifier = self.verifier()
        if not transactional_id or verifier is None or not self.enabled():
            return ErrorCode.NONE, None
        tp = (OFFSETS_TOPIC, partition)
        try:
            guard = self.rm.leader_partition(tp).log.maybe_start_transaction_verification(
                producer_id, NO_SEQUENCE, producer_epoch)
        except PartitionError as e:
            return offset_commit_error(e.code), None
        if guard is None:
            return ErrorCode.NONE, {}  # the transaction is open on the partition already
        # TxnOffsetCommit v4 is the version whose clients know TRANSACTION_ABORTABLE.
        unverified = await verifier.verify(transactional_id, producer_id, producer_epoch, [tp],
                                           generic_errors=version >= 4)
        code = unverified.get(tp)
        if code is not None:
            return offset_commit_error(code), None
        return ErrorCode.NONE, {tp: guard}


def require_verified(lg: PartitionLog, producer_id: int, guard: VerificationGuard | None) -> None:
    """Refuse a coordinator's transactional append whose verification went stale: the producer has no
    open transaction on the partition and ``guard`` is not its current verification's (a marker ended
    the transaction after the coordinator confirmed it). Kafka's UnifiedLog makes this check on every
    transactional append; ``append_internal`` does not."""
    from storage.producer_state import InvalidTxnStateError

    ps = lg.producer_state
    if ps.has_ongoing_transaction(producer_id):
        return
    entry = ps.verification_state_entry(producer_id)
    if entry is None or not entry.guard.verify(guard):
        raise InvalidTxnStateError("Record was not part of an ongoing transaction")
