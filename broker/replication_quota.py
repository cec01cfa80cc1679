"""Replication throttles (Kafka's ReplicationQuotaManager): a bytes/s cap on throttled replicas.

A partition is throttled on this broker when its topic's ``leader.replication.throttled.replicas``
(on a leader) or ``follower.replication.throttled.replicas`` (on a follower) lists it as
``partition:<this broker id>``, or is ``*``. Their replication traffic counts against
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` (dynamic broker
configs), measured over ``replication.quota.window.num`` windows of
``replication.quota.window.size.seconds``. While the measured rate is above the cap, a leader
leaves throttled partitions out of its fetch responses and a follower leaves them out of its fetch
requests; unthrottled partitions are never held back. Reassignment sets and clears these configs.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

INT64_MAX = (1 << 63) - 1


def throttled_partitions(replicas: tuple[str, ...] | list[str], broker_id: int) -> set[int] | bool:
    """Partitions of a topic throttled on ``broker_id``; True for the wildcard."""
    out: set[int] = set()
    for entry in replicas:
        entry = entry.strip()
        if entry == "*":
            return True
        p, _, b = entry.partition(":")
        if p.isdigit() and b.strip().lstrip("-").isdigit() and int(b) == broker_id:
            out.add(int(p))
    return out


class ReplicationQuota:
    def __init__(self, broker_id: int, rate_config: str, replicas_attr: str, config: Callable[[str], Any],
                 topic_config: Callable[[str], Any], clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_id = broker_id
        self.rate_config = rate_config
        self.replicas_attr = replicas_attr
        self.config = config
        self.topic_config = topic_config
        self.clock = clock
        self._samples: deque[list[float]] = deque()  # [window start, bytes]
        self.throttled_bytes = 0

    @property
    def bound(self) -> int:
        return int(self.config(self.rate_config))

    def is_throttled(self, topic: str, partition: int) -> bool:
        if self.bound >= INT64_MAX:
            return False
        parts = throttled_partitions(getattr(self.topic_config(topic), self.replicas_attr), self.broker_id)
        return parts is True or (isinstance(parts, set) and partition in parts)

    def _window(self) -> tuple[float, int]:
        size = float(self.config("replication.quota.window.size.seconds"))
        return size, int(self.config("replication.quota.window.num"))

    def record(self, nbytes: int) -> None:
        if nbytes <= 0:
            return
        size, num = self._window()
        now = self.clock()
        if not self._samples or now - self._samples[-1][0] >= size:
            self._samples.append([now, 0.0])
        self._samples[-1][1] += nbytes
        self.throttled_bytes += nbytes
        while len(self._samples) > num:
            self._samples.popleft()

    def rate(self) -> float:
        """Bytes/s over the kept windows (the oldest window's start to now, at least one window)."""
        if not self._samples:
            return 0.0
        size, num = self._window()
        now = self.clock()
        while self._samples and now - self._samples[0][0] > size * num:
            self._samples.popleft()
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0][0], size)
        return sum(b for _, b in self._samples) / elapsed

    def is_exceeded(self) -> bool:
        bound = self.bound
        return bound < INT64_MAX and self.rate() > bound
