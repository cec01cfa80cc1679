"""Purgatories: requests that wait for a condition (HW reaching an offset, enough bytes to fetch).

Kafka keeps delayed operations keyed by partition and re-checks them when something happens to
that partition. Here a waiter registers a future under its keys; ``notify(key)`` wakes every waiter
on the key, and the waiter re-checks its own condition, so a spurious wake-up costs one check.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Hashable, Iterable

from broker.metrics_timing import CURRENT_CLOCK


class Purgatory:
    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[asyncio.Future[None]]] = {}
        self.waiting = 0  # operations parked now (a metric)

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> None:
        """Park until one of ``keys`` is notified or ``timeout_s`` passes."""
        if timeout_s <= 0:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for k in keys:
            self._watchers.setdefault(k, set()).add(fut)
        self.waiting += 1
        parked = time.monotonic()
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            pass
        finally:
            self.waiting -= 1
            clock = CURRENT_CLOCK.get()
            if clock is not None:  # the request's RemoteTimeMs
                clock.remote_s += time.monotonic() - parked
            for k in keys:
                s = self._watchers.get(k)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._watchers[k]

    def notify(self, key: Hashable) -> None:
        for fut in self._watchers.pop(key, ()):
            if not fut.done():
                fut.set_result(None)

    def notify_all(self) -> None:
        for key in list(self._watchers):
            self.notify(key)
