"""The common appends in compiled code (``storage/_compiled_append.c``), where built.

Two appends run for every replicated batch: the leader's of the producer's batch, and each follower's of
what its fetch brought. Each goes through ``PartitionLog.append``, dozens of Python calls a batch: with a
thousand partitions, or three replicas, that Python is most of the broker's CPU. The compiled functions
do the same for the common case and return None for everything else before they change anything, so
``PartitionLog.append`` still decides every other append with its own errors:

* ``append_batch``: the leader's, for one plain batch of no producer, of a producer new here, or of a
  known one, next in its sequence, in a segment that does not roll;
* ``append_follower``: a follower's, for plain batches that continue the log from its LEO, each with a
  valid CRC, in a segment that does not roll.

Without a C compiler the extension is not built and every append goes through Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from crc32c import crc32c

from storage.batch_headers import BatchHeader
from storage.producer_state import BatchMetadata

# append_batch(log, records, leader_epoch, log_append_time_ms) -> AppendInfo | None
AppendBatch = Callable[[Any, Any, int, int], Any]
# append_follower(log, records) -> AppendInfo | None
AppendFollower = Callable[[Any, Any], Any]

# The tuples and dataclass the compiled code builds, by position: a change here must be made there too.
_BATCH_HEADER_FIELDS = ("position", "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
                        "attributes", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
                        "producer_epoch", "base_sequence", "records_count")
_BATCH_METADATA_FIELDS = ("first_seq", "last_seq", "first_offset", "last_offset", "timestamp")
_APPEND_INFO_FIELDS = ("first_offset", "last_offset", "max_timestamp", "offset_of_max_timestamp",
                       "log_append_time_ms", "log_start_offset", "records_count", "valid_bytes", "duplicate")


class CompiledAppends(NamedTuple):
    leader: AppendBatch | None
    follower: AppendFollower | None


def compiled_appends(append_info_cls: type, now_ms: Callable[[], int]) -> CompiledAppends:
    """The compiled appends, configured to build ``append_info_cls``; None each when the extension is
    not built or the classes it builds have changed shape. A log whose clock is ``now_ms`` has it read
    in C.

    The compiled code builds these objects without calling their constructors (tuple.__new__ for the
    namedtuples, the slots for AppendInfo), which is only the same while they have none of their own."""
    try:
        from storage import _compiled_append
    except ImportError:  # pragma: no cover - the slim image has no compiler
        return CompiledAppends(None, None)
    if (BatchHeader._fields != _BATCH_HEADER_FIELDS or BatchMetadata._fields != _BATCH_METADATA_FIELDS
            or tuple(getattr(append_info_cls, "__slots__", ())) != _APPEND_INFO_FIELDS
            or hasattr(append_info_cls, "__post_init__")):
        return CompiledAppends(None, None)
    if not _compiled_append.configure(BatchHeader, append_info_cls, BatchMetadata, now_ms, crc32c):
        return CompiledAppends(None, None)
    return CompiledAppends(_compiled_append.append_batch, _compiled_append.append_follower)
