"""Errors raised by the storage layer, each carrying the Kafka error code a broker answers with."""

from __future__ import annotations

import errno


class StorageError(Exception):
    """Base class: ``error_code`` is the Kafka error code for a response (UNKNOWN_SERVER_ERROR by default)."""

    error_code: int = -1
    retriable: bool = False


class KafkaStorageError(StorageError):
    """KAFKA_STORAGE_ERROR (56): the log's disk failed or is full.

    ``disk_full`` is True for ENOSPC/EDQUOT: the log itself stays consistent and would accept writes again
    once space returns, but the LogManager takes its directory offline, as for any other I/O error (Kafka's
    LogDirFailureChannel does the same for every IOException).
    """

    error_code = 56
    retriable = True

    def __init__(self, message: str, *, disk_full: bool = False, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.disk_full = disk_full
        self.__cause__ = cause


class OffsetOutOfRangeError(StorageError):
    """OFFSET_OUT_OF_RANGE (1): a read or DeleteRecords offset outside [log start offset, LEO] (or HW)."""

    error_code = 1


class CorruptRecordError(StorageError):
    """CORRUPT_MESSAGE (2): batch bytes handed to append do not parse as record batches."""

    error_code = 2


class RecordTooLargeError(StorageError):
    """MESSAGE_TOO_LARGE (10): a batch larger than the segment or max.message.bytes."""

    error_code = 10


class InvalidOffsetAppendError(StorageError):
    """A follower append whose offsets are not above the log end offset (UNKNOWN_SERVER_ERROR, as Kafka)."""

    error_code = -1


class OutOfOrderSequenceError(StorageError):
    """OUT_OF_ORDER_SEQUENCE_NUMBER (45)."""

    error_code = 45


class InvalidProducerEpochError(StorageError):
    """INVALID_PRODUCER_EPOCH (47): a producer epoch older than the one the log has seen."""

    error_code = 47


class TransactionCoordinatorFencedError(StorageError):
    """TRANSACTION_COORDINATOR_FENCED (52): an end-transaction marker from an older coordinator epoch."""

    error_code = 52


class CorruptSnapshotError(StorageError):
    """A producer-state snapshot that fails its CRC or schema checks (the loader deletes it and rebuilds)."""


class CorruptIndexError(StorageError):
    """An index file that fails its sanity check (the loader rebuilds it from the log)."""


class LogDirOfflineError(KafkaStorageError):
    """The log directory holding the partition has gone offline."""


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS
