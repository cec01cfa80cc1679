"""Transaction index (``.txnindex``): the aborted transactions whose markers live in a segment.

Each entry is 34 bytes, big endian: ``version int16 (0) | producerId int64 | firstOffset int64 |
lastOffset int64 | lastStableOffset int64``. A fetch at READ_COMMITTED collects the entries that overlap
its offset range so the consumer can drop aborted records.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from storage.errors import CorruptIndexError

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            entries: list[AbortedTxn] = []
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            if len(data) % ENTRY_SIZE:
                raise CorruptIndexError(f"transaction index {self.path} has a partial entry")
            for pos in range(0, len(data), ENTRY_SIZE):
                version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
                if version != VERSION:
                    raise CorruptIndexError(f"transaction index {self.path}: unknown entry version {version}")
                entries.append(AbortedTxn(pid, first, last, lso))
            self._entries = entries
        return self._entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def append(self, txn: AbortedTxn) -> None:
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"aborted txn last offset {txn.last_offset} not above {entries[-1].last_offset}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            data = _ENTRY.pack(VERSION, *txn)
            if os.pwrite(fd, data, len(entries) * ENTRY_SIZE) != ENTRY_SIZE:
                raise OSError(f"short write to {self.path}")
        finally:
            os.close(fd)
        entries.append(txn)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound_offset); True when no later segment can add more."""
        found: list[AbortedTxn] = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose last offset is >= ``offset``."""
        entries = self._load()
        keep = 0
        while keep < len(entries) and entries[keep].last_offset < offset:
            keep += 1
        if keep < len(entries):
            del entries[keep:]
            if os.path.exists(self.path):
                os.truncate(self.path, keep * ENTRY_SIZE)

    def reset(self) -> None:
        self._entries = []
        if os.path.exists(self.path):
            os.truncate(self.path, 0)

    def flush(self) -> None:
        if os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._entries = []

    def sanity_check(self) -> None:
        self._entries = None
        self._load()
