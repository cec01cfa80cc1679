"""The broker's file-descriptor budget, worked out once at start before any log is opened.

Descriptors a broker uses: segment files (each segment's ``.log`` while it is read or written, and the
two indexes of each active segment while they are written), client and inter-broker connections, and
a few hundred for everything else (ZooKeeper, listeners, checkpoint writes, the executor, Python).
Segment files go through one LRU (storage/file_handles.py), so the broker works with fewer descriptors
than segments; the budget decides the LRU's size and says, once and with the numbers, when the open
files limit is too small for every segment file to stay open.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from storage.file_handles import MIN_OPEN_FILES, SEGMENT_FILES

log = logging.getLogger(__name__)

# Descriptors for everything that is not a segment file or a connection.
HEADROOM = 256
# Connections assumed when max.connections is unlimited (Kafka's default).
ASSUMED_CONNECTIONS = 1_000
_UNLIMITED = 2**31 - 1
# A segment costs its .log descriptor; an active segment also its two index writers.
PER_SEGMENT = 1
PER_ACTIVE_SEGMENT = 2


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as Kafka's start scripts expect of the system);
    returns the (soft, hard) limits in force afterwards."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20  # the kernel's usual nr_open
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("could not raise the open files limit from %d to %d: %s", soft, target, e)
    return soft, hard


def count_segments(log_dirs: list[str]) -> tuple[int, int]:
    """(partitions, segments) found in the log directories (a directory listing each, no file opened)."""
    partitions = segments = 0
    for d in log_dirs:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for entry in entries:
            if not entry.is_dir() or entry.name.endswith("-delete") or "-" not in entry.name:
                continue
            partitions += 1
            try:
                segments += sum(1 for name in os.listdir(entry.path) if name.endswith(".log"))
            except OSError:
                continue
    return partitions, segments


@dataclass(frozen=True, slots=True)
class FdBudget:
    soft_limit: int
    partitions: int
    segments: int
    connections: int
    wanted: int  # descriptors for every segment file open at once, plus connections and headroom
    cache_capacity: int  # segment descriptors the LRU keeps open

    @property
    def fits(self) -> bool:
        return self.wanted <= self.soft_limit


def plan(soft_limit: int, partitions: int, segments: int, max_connections: int,
         configured_capacity: int) -> FdBudget:
    connections = max_connections if max_connections < _UNLIMITED else ASSUMED_CONNECTIONS
    segment_files = segments * PER_SEGMENT + partitions * PER_ACTIVE_SEGMENT
    wanted = segment_files + connections + HEADROOM
    room = soft_limit - connections - HEADROOM
    capacity = max(MIN_OPEN_FILES, min(configured_capacity, room))
    return FdBudget(soft_limit, partitions, segments, connections, wanted, capacity)


def apply(log_dirs: list[str], max_connections: int, configured_capacity: int) -> FdBudget:
    """Raise the limit, size the segment file cache and warn once when the limit is too small."""
    soft, _hard = raise_open_files_limit()
    partitions, segments = count_segments(log_dirs)
    budget = plan(soft, partitions, segments, max_connections, configured_capacity)
    SEGMENT_FILES.configure(budget.cache_capacity)
    if not budget.fits:
        log.warning(
            "open files limit %d is below the %d descriptors this broker could use (%d partitions, %d "
            "segments: %d segment files, %d connections%s, %d headroom): at most %d segment files stay "
            "open and the others are reopened on demand; raise the limit (ulimit -n) to at least %d",
            soft, budget.wanted, partitions, segments, segments * PER_SEGMENT + partitions * PER_ACTIVE_SEGMENT,
            budget.connections, "" if max_connections < _UNLIMITED else " assumed, max.connections is unlimited",
            HEADROOM, budget.cache_capacity, budget.wanted)
    else:
        log.info("open files limit %d; %d partitions, %d segments; segment file cache of %d descriptors",
                 soft, partitions, segments, budget.cache_capacity)
    return budget
