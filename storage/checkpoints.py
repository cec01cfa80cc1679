"""Kafka's small text checkpoint files, written atomically (tmp file + fsync + rename + dir fsync).

Format: a version line, a count line, then one entry per line::

    0
    2
    my-topic 0 1234         (offset checkpoints: topic partition offset)
    3 1000                  (leader-epoch-checkpoint: epoch startOffset)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class CheckpointFormatError(ValueError):
    pass


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, sync: bool = True) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


class CheckpointFile(Generic[T]):
    """A versioned list of entries; ``format_entry``/``parse_entry`` convert one line."""

    def __init__(
        self,
        path: str,
        version: int,
        format_entry: Callable[[T], str],
        parse_entry: Callable[[list[str]], T],
    ) -> None:
        self.path = path
        self.version = version
        self._format = format_entry
        self._parse = parse_entry

    def write(self, entries: Iterable[T], *, sync: bool = True) -> None:
        items = list(entries)
        lines = [str(self.version), str(len(items))]
        lines.extend(self._format(e) for e in items)
        atomic_write(self.path, ("\n".join(lines) + "\n").encode(), sync=sync)

    def read(self) -> list[T]:
        """Entries of the file; [] when it does not exist. Raises CheckpointFormatError when malformed."""
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return []
        lines = text.splitlines()
        try:
            version = int(lines[0].strip())
            if version != self.version:
                raise CheckpointFormatError(f"{self.path}: unrecognized version {version}")
            count = int(lines[1].strip())
            body = [line for line in lines[2:] if line.strip()]
            if count != len(body):
                raise CheckpointFormatError(f"{self.path}: expected {count} entries, found {len(body)}")
            return [self._parse(line.split()) for line in body]
        except (IndexError, ValueError) as e:
            if isinstance(e, CheckpointFormatError):
                raise
            raise CheckpointFormatError(f"{self.path}: malformed checkpoint ({e})") from e


TopicPartition = tuple[str, int]


def _format_offset(entry: tuple[TopicPartition, int]) -> str:
    (topic, partition), offset = entry
    return f"{topic} {partition} {offset}"


def _parse_offset(fields: list[str]) -> tuple[TopicPartition, int]:
    if len(fields) != 3:
        raise CheckpointFormatError(f"malformed offset checkpoint line {' '.join(fields)!r}")
    return (fields[0], int(fields[1])), int(fields[2])


class OffsetCheckpointFile:
    """``topic partition offset`` checkpoints (recovery point, HW, log start offset, cleaner offsets)."""

    VERSION = 0

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            path, self.VERSION, _format_offset, _parse_offset
        )

    def write(self, offsets: dict[TopicPartition, int], *, sync: bool = True) -> None:
        self._file.write(sorted(offsets.items()), sync=sync)

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._file.read())


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint``: ``epoch startOffset`` lines."""

    VERSION = 0

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: CheckpointFile[tuple[int, int]] = CheckpointFile(
            path, self.VERSION, lambda e: f"{e[0]} {e[1]}", self._parse
        )

    @staticmethod
    def _parse(fields: list[str]) -> tuple[int, int]:
        if len(fields) != 2:
            raise CheckpointFormatError(f"malformed leader epoch line {' '.join(fields)!r}")
        return int(fields[0]), int(fields[1])

    def write(self, entries: Iterable[tuple[int, int]], *, sync: bool = True) -> None:
        self._file.write(entries, sync=sync)

    def read(self) -> list[tuple[int, int]]:
        return self._file.read()
