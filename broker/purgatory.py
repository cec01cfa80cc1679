"""Purgatories: requests that wait for a condition (HW reaching an offset, enough bytes to fetch).

Kafka keeps delayed operations keyed by partition and re-checks them when something happens to
that partition. Here a waiter registers a future under its keys; ``notify(key)`` wakes every waiter
on the key, and the waiter re-checks its own condition, so a spurious wake-up costs one check.
``wait`` returns the keys that were notified, so that a waiter on many partitions re-checks only those.

A replicated acks=all produce goes through two parked operations per batch (the followers' fetches
waiting for the append, then the produce waiting for the HW), so the wake-up is kept short: the waiting
task awaits the future itself, with a timer that resolves it at the deadline, and resumes on the loop
turn after the notification (asyncio.wait_for would add a loop turn, a second future and a callback).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Hashable, Iterable

from broker.metrics_timing import CURRENT_CLOCK


class _Waiter:
    """One parked operation: its future, and the keys notified while it was parked."""

    __slots__ = ("future", "notified")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.notified: list[Hashable] = []


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Purgatory:
    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[_Waiter]] = {}
        self.waiting = 0  # operations parked now (a metric)

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> list[Hashable]:
        """Park until one of ``keys`` is notified or ``timeout_s`` passes; returns the keys notified
        meanwhile (empty after a timeout)."""
        if timeout_s <= 0:
            return []
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop.create_future())
        keys = list(keys)
        watchers = self._watchers
        for k in keys:
            s = watchers.get(k)
            if s is None:
                watchers[k] = {waiter}
            else:
                s.add(waiter)
        self.waiting += 1
        parked = time.monotonic()
        timer = loop.call_later(timeout_s, _expire, waiter.future)
        try:
            await waiter.future
        finally:
            timer.cancel()
            self.waiting -= 1
            clock = CURRENT_CLOCK.get()
            if clock is not None:  # the request's RemoteTimeMs
                clock.remote_s += time.monotonic() - parked
            for k in keys:
                s = watchers.get(k)
                if s is not None:
                    s.discard(waiter)
                    if not s:
                        del watchers[k]
        return waiter.notified

    def notify(self, key: Hashable) -> None:
        waiters = self._watchers.pop(key, None)
        if not waiters:
            return
        for w in waiters:
            w.notified.append(key)
            if not w.future.done():
                w.future.set_result(None)

    def notify_all(self) -> None:
        for key in list(self._watchers):
            self.notify(key)
