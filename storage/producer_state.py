"""Per-producer idempotence and transaction state, and Kafka's ``.snapshot`` files.

For every producer id the log remembers the last five appended batches (first/last sequence and offset),
to answer a retried batch with its original offsets and to reject gaps in the sequence; and the first
offset of its open transaction, which bounds the last stable offset (LSO).

KIP-890 part 1 (transaction verification): before a producer's first transactional batch of a
transaction is appended to a partition, the leader asks the transaction coordinator whether the partition
is in the transaction. A ``VerificationGuard`` ties that question to its answer. It is created with the
producer's ``VerificationStateEntry`` when the question is asked, and the append must present it. Any
transactional append or marker for the producer removes the entry. So if a marker ends the producer's
transaction while the question is out, the old guard no longer matches, and the late batch is refused
rather than opening a transaction the coordinator knows nothing about (a hanging transaction that would
hold back the LSO forever).

The append runs through layers that know nothing of verification: the replica manager and the partition.
So the produce handler passes the guards of the request it serves in ``REQUEST_VERIFICATION_GUARDS``, a
context variable of the request's task.

Snapshot format (ProducerSnapshot v1, big endian): ``version int16 = 1 | crc uint32 (CRC-32C of all bytes
after it) | count int32 | count x (producerId int64, epoch int16, lastSequence int32, lastOffset int64,
offsetDelta int32, timestamp int64, coordinatorEpoch int32, currentTxnFirstOffset int64)``. A snapshot
named ``<offset>.snapshot`` holds the state after every batch below that offset.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c

from storage.batch_headers import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    control_record,
)
from storage.checkpoints import atomic_write
from storage.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    StorageError,
    TransactionCoordinatorFencedError,
)
from storage.segment import DELETED_SUFFIX, SNAPSHOT_SUFFIX, filename_prefix

SNAPSHOT_VERSION = 1
NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_INT32_MAX = 2**31 - 1

_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_OFFSET = 2
_ENTRIES_OFFSET = 6


class InvalidTxnStateError(StorageError):
    """INVALID_TXN_STATE (48): a non-transactional write from a producer with an open transaction."""

    error_code = 48


class VerificationGuard:
    """One verification's identity (Kafka's VerificationGuard): equal only to itself."""

    __slots__ = ()

    def verify(self, request_guard: VerificationGuard | None) -> bool:
        """Whether an append presenting ``request_guard`` carries this verification (None never does)."""
        return request_guard is self


@dataclass(slots=True)
class VerificationStateEntry:
    """A producer's verification in progress on one partition, kept until its first transactional append.

    ``lowest_sequence`` is the lowest base sequence seen while verifying in ``epoch``. A batch with a
    higher sequence must not get in first: the lower batch's retry would then fail with
    OUT_OF_ORDER_SEQUENCE_NUMBER over and over.
    """

    timestamp: int
    lowest_sequence: int
    epoch: int
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


# The guards of the client append being served, per (topic, partition), or None when verification is
# not required for it (transaction.partition.verification.enable=false). Set by the produce handler for
# the duration of the append; read by PartitionLog.append.
REQUEST_VERIFICATION_GUARDS: ContextVar[Mapping[tuple[str, int], VerificationGuard] | None] = ContextVar(
    "REQUEST_VERIFICATION_GUARDS", default=None)


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int, transactional: bool = False
                       ) -> BatchMetadata | None:
        """The cached batch that this append retries, if any.

        A transactional retry can only be of a batch of the transaction still open: a client does not
        end a transaction before its batches are answered. A match with a batch of a transaction that a
        marker already ended is therefore not a retry but a reuse of its sequence numbers, which
        librdkafka does after abort_transaction() purges messages it had sent (possibly persisted) and
        was about to retry. Kafka 3.9 answers such a batch as a duplicate and drops it, so the next
        transaction commits without it; here the sequence check decides instead (OUT_OF_ORDER_SEQUENCE_NUMBER),
        which makes the client abort and bump its epoch rather than lose the records.
        """
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                if transactional and (self.current_txn_first_offset is None
                                      or b.first_offset < self.current_txn_first_offset):
                    return None
                return b
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateManager:
    def __init__(self, log_dir: str, *, producer_id_expiration_ms: int = 86_400_000) -> None:
        self.log_dir = log_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, int] = {}  # first offset -> producer id
        self.verification_states: dict[int, VerificationStateEntry] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset = -1

    # -- validation (leader appends from clients) ----------------------------------------------------
    def check_append(self, headers: list[BatchHeader], *, from_client: bool, verify_txn: bool = False,
                     request_guard: VerificationGuard | None = None) -> BatchMetadata | None:
        """Validate producer epochs and sequences; returns the original batch when the append is a retry.

        ``verify_txn``: transaction verification is on for this client append; a transactional batch
        of a producer without an open transaction here then needs ``request_guard`` to be the guard
        of the producer's verification (KIP-890).
        """
        pending: dict[int, tuple[int, int]] = {}
        for h in headers:
            pid = h.producer_id
            if pid < 0:
                continue
            # The header's properties, read once: this runs for every batch of an idempotent producer.
            control = bool(h.attributes & CONTROL_FLAG)
            transactional = bool(h.attributes & TRANSACTIONAL_FLAG)
            last_sequence = h.last_sequence
            entry = self.producers.get(pid)
            epoch, last_seq = pending.get(
                pid, (entry.producer_epoch, entry.last_seq) if entry else (NO_PRODUCER_EPOCH, NO_SEQUENCE)
            )
            if from_client and entry is not None and not control:
                dup = entry.find_duplicate(h.producer_epoch, h.base_sequence, last_sequence, transactional)
                if dup is not None:
                    return dup
            if verify_txn and transactional and not control and (
                    entry is None or entry.current_txn_first_offset is None):
                v = self.verification_states.get(pid)
                if v is None or not v.guard.verify(request_guard):
                    raise InvalidTxnStateError("Record was not part of an ongoing transaction")
            if h.producer_epoch < epoch:
                if from_client:
                    raise InvalidProducerEpochError(
                        f"producer {pid} epoch {h.producer_epoch} is older than current epoch {epoch}"
                    )
                continue
            if control:
                pending[pid] = (h.producer_epoch, last_seq)
                continue
            if from_client:
                if self.verification_states:
                    self._check_lowest_verifying_sequence(pid, h, epoch, last_seq)
                if h.producer_epoch != epoch:
                    if h.base_sequence != 0 and epoch != NO_PRODUCER_EPOCH:
                        raise OutOfOrderSequenceError(
                            f"producer {pid}: new epoch {h.producer_epoch} must start at sequence 0, "
                            f"got {h.base_sequence}"
                        )
                elif epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq, h.base_sequence):
                    raise OutOfOrderSequenceError(
                        f"producer {pid}: out of order sequence {h.base_sequence} (last {last_seq})"
                    )
                if (
                    entry is not None
                    and not transactional
                    and entry.current_txn_first_offset is not None
                    and h.producer_epoch == entry.producer_epoch
                ):
                    raise InvalidTxnStateError(f"producer {pid} has an open transaction; expected a transactional write")
            pending[pid] = (h.producer_epoch, last_sequence)
        return None

    def _check_lowest_verifying_sequence(self, pid: int, h: BatchHeader, epoch: int, last_seq: int) -> None:
        """Refuse a batch that would overtake a lower sequence still being verified (Kafka's check).

        Only a lower sequence that could still be appended holds the batch back: one that repeats
        sequences of an ended transaction (see find_duplicate) is refused whenever it comes, and must
        not block the batches after it.
        """
        v = self.verification_states.get(pid)
        if v is None or h.base_sequence <= v.lowest_sequence:
            return
        if v.epoch != epoch:
            appendable = v.lowest_sequence == 0 or epoch == NO_PRODUCER_EPOCH
        else:
            appendable = epoch == NO_PRODUCER_EPOCH or _in_sequence(last_seq, v.lowest_sequence)
        if appendable:
            raise OutOfOrderSequenceError(
                f"producer {pid}: out of order sequence {h.base_sequence} "
                f"(earliest seen sequence {v.lowest_sequence})")

    # -- transaction verification (KIP-890) -----------------------------------------------------------
    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None

    def maybe_create_verification_state_entry(self, producer_id: int, sequence: int, epoch: int,
                                              now_ms: int) -> VerificationStateEntry:
        """The producer's verification entry, created if there is none (with a new guard)."""
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = self.verification_states[producer_id] = VerificationStateEntry(now_ms, sequence, epoch)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self.verification_states.get(producer_id)

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self.verification_states.pop(producer_id, None)

    def check_marker(self, h: BatchHeader, coordinator_epoch: int) -> None:
        entry = self.producers.get(h.producer_id)
        if entry is None:
            return
        if h.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(f"producer {h.producer_id}: marker epoch {h.producer_epoch} is stale")
        if entry.coordinator_epoch > coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"producer {h.producer_id}: coordinator epoch {coordinator_epoch} < {entry.coordinator_epoch}"
            )

    # -- updates -------------------------------------------------------------------------------------
    def update(self, h: BatchHeader, batch: bytes | bytearray | memoryview | None = None) -> CompletedTxn | None:
        """Apply one appended batch; returns the completed transaction for a commit/abort marker."""
        pid = h.producer_id
        if pid >= 0:
            entry = self.producers.get(pid)
            if entry is None:
                entry = self.producers[pid] = ProducerStateEntry(pid)
            control = bool(h.attributes & CONTROL_FLAG)
            transactional = bool(h.attributes & TRANSACTIONAL_FLAG)
            if self.verification_states and (transactional or control):
                # A data batch opened the transaction here, or a marker ended it: either way the
                # verification is over, and a guard handed out before this is stale.
                self.verification_states.pop(pid, None)
            if control:
                if batch is None:
                    raise ValueError("control batch bytes are needed to apply a transaction marker")
                ctype, coordinator_epoch = control_record(batch)
                entry.producer_epoch = h.producer_epoch
                entry.last_timestamp = h.max_timestamp
                if ctype in (CONTROL_ABORT, CONTROL_COMMIT):
                    entry.coordinator_epoch = coordinator_epoch
                    first = entry.current_txn_first_offset
                    entry.current_txn_first_offset = None
                    self.map_end_offset = h.next_offset
                    return CompletedTxn(pid, first if first is not None else h.base_offset, h.last_offset,
                                        ctype == CONTROL_ABORT)
            else:
                if h.producer_epoch != entry.producer_epoch:
                    entry.batches.clear()
                    entry.producer_epoch = h.producer_epoch
                entry.batches.append(
                    BatchMetadata(h.base_sequence, h.last_sequence, h.base_offset,
                                  h.base_offset + h.last_offset_delta, h.max_timestamp)
                )
                entry.last_timestamp = h.max_timestamp
                if transactional and entry.current_txn_first_offset is None:
                    entry.current_txn_first_offset = h.base_offset
                    self._ongoing[h.base_offset] = pid
        self.map_end_offset = h.next_offset
        return None

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        others = [off for off, pid in self._ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        for off, pid in list(self._ongoing.items()):
            if pid == completed.producer_id:
                del self._ongoing[off]

    @property
    def first_unstable_offset(self) -> int | None:
        return min(self._ongoing) if self._ongoing else None

    def ongoing_transactions(self) -> dict[int, int]:
        return {pid: off for off, pid in self._ongoing.items()}

    def remove_expired_producers(self, now_ms: int) -> None:
        """Drop idle producers, and verifications that never led to an append, after producer.id.expiration.ms."""
        for pid, entry in list(self.producers.items()):
            if entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms:
                del self.producers[pid]
        for pid, v in list(self.verification_states.items()):
            if now_ms - v.timestamp >= self.producer_id_expiration_ms:
                del self.verification_states[pid]

    def reset(self, offset: int) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self.map_end_offset = offset

    # -- snapshots -----------------------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.log_dir, filename_prefix(offset) + SNAPSHOT_SUFFIX)

    def snapshot_offsets(self, names: Iterable[str] | None = None) -> list[int]:
        """Offsets of the snapshot files, from ``names`` (a listing of the log dir the caller has just
        made, saving a listing per log at start) or from the directory."""
        out = []
        if names is None:
            try:
                names = os.listdir(self.log_dir)
            except FileNotFoundError:
                return []
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX):
                try:
                    out.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
                except ValueError:
                    continue
        return sorted(out)

    def encode_snapshot(self) -> bytes:
        parts = [_HEAD.pack(SNAPSHOT_VERSION, 0, len(self.producers))]
        for pid, e in list(self.producers.items()):  # a copy: the event loop may add producers meanwhile
            txn_first = e.current_txn_first_offset if e.current_txn_first_offset is not None else -1
            parts.append(
                _ENTRY.pack(pid, e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta,
                            e.last_timestamp, e.coordinator_epoch, txn_first)
            )
        data = bytearray(b"".join(parts))
        struct.pack_into(">I", data, _CRC_OFFSET, crc32c(memoryview(data)[_ENTRIES_OFFSET:]))
        return bytes(data)

    def take_snapshot(self, *, sync: bool = True) -> int | None:
        """Write ``<map end offset>.snapshot`` unless one exists at that offset already."""
        offset = self.map_end_offset
        if offset <= self.last_snapshot_offset and os.path.exists(self.snapshot_path(offset)):
            return None
        atomic_write(self.snapshot_path(offset), self.encode_snapshot(), sync=sync)
        self.last_snapshot_offset = offset
        return offset

    @staticmethod
    def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
        if len(data) < _HEAD.size:
            raise CorruptSnapshotError("snapshot too short")
        version, crc, count = _HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"snapshot has unknown version {version}")
        if crc32c(memoryview(data)[_ENTRIES_OFFSET:]) != crc:
            raise CorruptSnapshotError("snapshot CRC mismatch")
        if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
            raise CorruptSnapshotError("snapshot size does not match its entry count")
        entries = []
        for i in range(count):
            pid, epoch, last_seq, last_off, delta, ts, coord, txn_first = _ENTRY.unpack_from(
                data, _HEAD.size + i * _ENTRY.size
            )
            e = ProducerStateEntry(pid, epoch, coord, ts, txn_first if txn_first >= 0 else None)
            if last_off >= 0:
                first_seq = last_seq - delta if last_seq >= 0 else NO_SEQUENCE
                e.batches.append(BatchMetadata(first_seq, last_seq, last_off - delta, last_off, ts))
            entries.append(e)
        return entries

    def load_latest_snapshot(self, max_offset: int, now_ms: int | None = None, *,
                             offsets: list[int] | None = None) -> int | None:
        """Load the newest valid snapshot at or below ``max_offset`` (deleting newer and corrupt ones).

        ``offsets``: the snapshot offsets when the caller knows them (see snapshot_offsets).
        Returns its offset, or None when there is none (state starts empty).
        """
        self.reset(0)
        for offset in reversed(self.snapshot_offsets() if offsets is None else offsets):
            path = self.snapshot_path(offset)
            if offset > max_offset:
                _unlink(path)
                continue
            try:
                with open(path, "rb") as f:
                    entries = self.decode_snapshot(f.read())
            except (CorruptSnapshotError, OSError):
                _unlink(path)
                continue
            for e in entries:
                if now_ms is not None and e.current_txn_first_offset is None and (
                    now_ms - e.last_timestamp >= self.producer_id_expiration_ms
                ):
                    continue
                self.producers[e.producer_id] = e
                if e.current_txn_first_offset is not None:
                    self._ongoing[e.current_txn_first_offset] = e.producer_id
            self.map_end_offset = offset
            self.last_snapshot_offset = offset
            return offset
        self.last_snapshot_offset = -1
        return None

    def delete_snapshots_after(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off > offset:
                _unlink(self.snapshot_path(off))
        if self.last_snapshot_offset > offset:
            self.last_snapshot_offset = -1

    def delete_snapshots_before(self, offset: int, *, offsets: list[int] | None = None) -> None:
        for off in self.snapshot_offsets() if offsets is None else offsets:
            if off < offset:
                _unlink(self.snapshot_path(off))

    def delete_all_snapshots(self) -> None:
        for off in self.snapshot_offsets():
            _unlink(self.snapshot_path(off))
        self.last_snapshot_offset = -1


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


__all__ = [
    "BatchMetadata",
    "CompletedTxn",
    "DELETED_SUFFIX",
    "InvalidTxnStateError",
    "ProducerStateEntry",
    "ProducerStateManager",
    "REQUEST_VERIFICATION_GUARDS",
    "VerificationGuard",
    "VerificationStateEntry",
]
