"""Leader epoch cache: the start offset of every leader epoch in a partition's log (KIP-101, KIP-279).

Entries are strictly increasing in both epoch and start offset. They persist in ``leader-epoch-checkpoint``
(version 0 text format) so a restarted follower can truncate by epoch rather than by high watermark.
"""

from __future__ import annotations

import bisect
import threading

from storage.checkpoints import LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None) -> None:
        self._checkpoint = checkpoint
        self._lock = threading.RLock()
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        # What the checkpoint file holds (None: unknown), and whether it was fsynced: a write of the
        # same entries is skipped. A restart truncates and a LeaderAndIsr re-assigns the same entries
        # for thousands of partitions; rewriting identical files would cost an fsync each.
        self._persisted: list[tuple[int, int]] | None = None
        self._persisted_synced = False
        if checkpoint is not None:
            read = checkpoint.read()
            for epoch, offset in read:
                self._assign_in_memory(epoch, offset)
            if read:
                self._persisted = self.entries()
                self._persisted_synced = True

    # -- queries -------------------------------------------------------------------------------------
    def entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        # The compiled appends (storage/_compiled_append.c) reads _epochs' last item itself.
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._offsets[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range contains ``offset`` (None before the first entry)."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, offset) - 1
            return self._epochs[i] if i >= 0 else None

    def previous_epoch(self) -> int | None:
        return self._epochs[-2] if len(self._epochs) > 1 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answer to OffsetForLeaderEpoch, exactly as LeaderEpochFileCache.endOffsetFor.

        The end offset of an epoch is the start offset of the next higher epoch; for the latest epoch it is
        the LEO. An epoch below the first entry answers (requested epoch, first start offset); an epoch
        above every entry, or UNDEFINED_EPOCH, answers (-1, -1).
        """
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._epochs and self._epochs[-1] == requested_epoch:
                return requested_epoch, log_end_offset
            higher = bisect.bisect_right(self._epochs, requested_epoch)
            if higher >= len(self._epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            floor = higher - 1
            if floor < 0:
                return requested_epoch, self._offsets[higher]
            return self._epochs[floor], self._offsets[higher]

    # -- updates -------------------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; drops conflicting (non-monotonic) entries."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        with self._lock:
            if not self._assign_in_memory(epoch, start_offset):
                return False
            if flush:
                self._write(sync=True)
            return True

    def _assign_in_memory(self, epoch: int, start_offset: int) -> bool:
        if self._epochs and not (epoch != self._epochs[-1] or start_offset < self._offsets[-1]):
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> None:
        """Remove entries starting at or after ``end_offset`` (the log was truncated to it).

        ``flush=False`` (log loading) leaves the file as it is until the next flush, as Kafka's
        truncateFromEndAsyncFlush does: every load truncates again, so a crash before the flush loses
        nothing.
        """
        with self._lock:
            if end_offset >= 0 and self._offsets and self._offsets[-1] >= end_offset:
                while self._offsets and self._offsets[-1] >= end_offset:
                    self._epochs.pop()
                    self._offsets.pop()
                if flush:
                    self._write(sync=False)

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> None:
        """The log start moved to ``start_offset``: drop older entries, keep the epoch covering it.

        ``flush=False``: as for truncate_from_end (a load repeats it)."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, start_offset)
            if i == 0 or i == 1 and self._offsets[0] == start_offset:
                return  # nothing changes: no rewrite (every log load calls this)
            epoch = self._epochs[i - 1]
            del self._epochs[:i]
            del self._offsets[:i]
            self._epochs.insert(0, epoch)
            self._offsets.insert(0, start_offset)
            if flush:
                self._write(sync=False)

    def clear(self) -> None:
        with self._lock:
            self._epochs.clear()
            self._offsets.clear()
            self._write(sync=False)

    def flush(self) -> None:
        with self._lock:
            self._write(sync=True)

    @property
    def needs_flush(self) -> bool:
        """Whether the checkpoint file differs from the entries (or was not fsynced)."""
        with self._lock:
            return self._checkpoint is not None and not (
                self._persisted_synced and self._persisted == self.entries())

    def _write(self, *, sync: bool) -> None:
        if self._checkpoint is None:
            return
        entries = self.entries()
        if entries == self._persisted and (self._persisted_synced or not sync):
            return  # the file holds exactly these entries already
        self._persisted = None  # unknown if the write fails half way
        self._checkpoint.write(entries, sync=sync)
        self._persisted = entries
        self._persisted_synced = sync
