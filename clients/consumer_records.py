"""Reading the records of a fetch response: skip what precedes the fetch position and control batches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from protocol.records import Record, iter_batches

__all__ = ["next_offset_after", "records_of"]


def records_of(data: Any, from_offset: int) -> Iterator[tuple[Any, Record]]:
    """Records at or after ``from_offset`` in a fetch response's records, skipping control batches."""
    if not data:
        return
    buf = bytes(data)
    for batch in iter_batches(buf, allow_partial_tail=True):
        if batch.next_offset <= from_offset:
            continue
        if batch.is_control:
            continue
        for rec in batch.records():
            if rec.offset >= from_offset:
                yield batch, rec


def next_offset_after(data: Any, from_offset: int) -> int:
    """The next fetch position after the whole batches in ``data`` (control batches included)."""
    nxt = from_offset
    if data:
        for batch in iter_batches(bytes(data), allow_partial_tail=True):
            nxt = max(nxt, batch.next_offset)
    return nxt
