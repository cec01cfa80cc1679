"""Reading the records of a fetch response: skip what precedes the fetch position, control batches and,
for a read_committed consumer, the batches of aborted transactions.

A read_committed fetch response lists the partition's aborted transactions that overlap the records it
carries, as (producer id, first offset) pairs. A transactional batch is aborted when its producer has an
aborted transaction that started at or before the batch's last offset and whose ABORT marker has not been
passed yet: the filter Kafka's consumer applies (``CompletedFetch.nextFetchedRecord``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Any

from protocol.records import (
    BatchView,
    ControlRecordType,
    InvalidRecordError,
    Record,
    iter_batches,
    parse_control_record,
)

__all__ = ["aborted_of", "next_offset_after", "records_of"]


def aborted_of(partition_data: Any) -> list[tuple[int, int]]:
    """(producer id, first offset) of each aborted transaction a fetch response lists for a partition
    (none when the broker sent a null list, as it does for read_uncommitted)."""
    return [(a.producer_id, a.first_offset) for a in (getattr(partition_data, "aborted_transactions", None) or [])]


def records_of(data: Any, from_offset: int,
               aborted: Iterable[tuple[int, int]] | None = None) -> Iterator[tuple[Any, Record]]:
    """Records at or after ``from_offset`` in a fetch response's records, skipping control batches.

    ``aborted`` None reads uncommitted (every data record); a list of (producer id, first offset) reads
    committed: the records of those aborted transactions are left out too.
    """
    if not data:
        return
    buf = bytes(data)
    # Aborted transactions by first offset; each producer joins the aborted set once a batch reaches it.
    pending: list[tuple[int, int]] | None = None
    if aborted is not None:
        pending = [(first, pid) for pid, first in aborted]
        heapq.heapify(pending)
    aborted_pids: set[int] = set()
    for batch in iter_batches(buf, allow_partial_tail=True):
        # Batches before the fetch position still go through the filter: an ABORT marker there ends
        # its producer's aborted transaction for what follows.
        if pending is not None and batch.has_producer_id:
            while pending and pending[0][0] <= batch.last_offset:
                aborted_pids.add(heapq.heappop(pending)[1])
            if batch.is_control:
                if _is_abort_marker(batch):
                    aborted_pids.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted_pids:
                continue
        if batch.next_offset <= from_offset or batch.is_control:
            continue
        for rec in batch.records():
            if rec.offset >= from_offset:
                yield batch, rec


def _is_abort_marker(batch: BatchView) -> bool:
    for rec in batch.records():
        try:
            return parse_control_record(rec)[0] == ControlRecordType.ABORT.name
        except InvalidRecordError:  # not a transaction marker: it ends no transaction
            return False
    return False


def next_offset_after(data: Any, from_offset: int) -> int:
    """The next fetch position after the whole batches in ``data`` (control batches included)."""
    nxt = from_offset
    if data:
        for batch in iter_batches(bytes(data), allow_partial_tail=True):
            nxt = max(nxt, batch.next_offset)
    return nxt
