"""Purgatories: requests that wait for a condition (HW reaching an offset, enough bytes to fetch).

Kafka keeps delayed operations keyed by partition and re-checks them when something happens to
that partition. Here a waiter registers a future under its keys; ``notify(key)`` wakes every waiter
on the key, and the waiter re-checks its own condition, so a spurious wake-up costs one check.
``wait`` returns the keys that were notified, so that a waiter on many partitions re-checks only those.

A waiter may also give ``ready(key)``, Kafka's tryComplete: ``notify`` runs it for each waiter on the key
and wakes only those it answers True for; the others stay parked as they are. Produces waiting for the
HW and followers' fetches waiting for appends are notified by every HW move of their partition, most of
which do not complete them (a produce whose batch the HW has not reached yet, a fetch that reads to the
LEO), and waking them only to park again cost a loop turn, a future and a timer each time.

A replicated acks=all produce goes through two parked operations per batch (the followers' fetches
waiting for the append, then the produce waiting for the HW), so the wake-up is kept short: the waiting
task awaits the future itself, with a timer that resolves it at the deadline, and resumes on the loop
turn after the notification (asyncio.wait_for would add a loop turn, a second future and a callback).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Iterable

from broker.metrics_timing import CURRENT_CLOCK


class _Waiter:
    """One parked operation: its future, its tryComplete, and the keys notified while it was parked."""

    __slots__ = ("future", "ready", "notified")

    def __init__(self, future: asyncio.Future[None], ready: Callable[[Hashable], bool] | None) -> None:
        self.future = future
        self.ready = ready
        self.notified: list[Hashable] = []

    def wakes_on(self, key: Hashable) -> bool:
        if self.future.done() or self.ready is None:
            return True
        try:
            return self.ready(key)
        except Exception:  # noqa: BLE001 - let the waiter itself meet the failure, on its own task
            return True


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Purgatory:
    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[_Waiter]] = {}
        self.waiting = 0  # operations parked now (a metric)

    async def wait(self, keys: Iterable[Hashable], timeout_s: float,
                   ready: Callable[[Hashable], bool] | None = None) -> list[Hashable]:
        """Park until one of ``keys`` is notified (and ``ready``, when given, answers True for it) or
        ``timeout_s`` passes; returns the keys notified meanwhile (empty after a timeout)."""
        if timeout_s <= 0:
            return []
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop.create_future(), ready)
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
        """Wake the waiters on ``key`` that are ready."""
        waiters = self._watchers.get(key)
        if not waiters:
            return
        woken = [w for w in waiters if w.wakes_on(key)]
        if len(woken) == len(waiters):
            del self._watchers[key]
        else:
            for w in woken:
                waiters.discard(w)
        for w in woken:
            w.notified.append(key)
            if not w.future.done():
                w.future.set_result(None)

