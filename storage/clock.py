"""Time and delayed callbacks, injectable (Kafka's ``Time`` plus the scheduling half of its ``Timer``).

Coordinators and controllers tell the time (commit timestamps, transaction deadlines) and run
callbacks later (session timeouts, rebalance timeouts, periodic expiration). Taking both from one
``Clock`` object instead of ``time.time()`` and ``loop.call_later`` lets tests substitute a
``ManualClock`` and move time forward themselves, so that a 30-second session timeout is tested
without waiting 30 seconds, and a test never depends on how fast the machine is.

Why here, in ``storage/``: the layers call only downwards (broker -> controller -> storage ->
protocol), and both the broker's coordinators and the controller need the clock, so it must sit at
or below ``storage/``. ``protocol/`` is sans-I/O and never tells time; ``storage/`` is the lowest
layer that does (segment roll, retention and producer-id expiry are all time-driven in Kafka's log),
so it is the lowest sensible home. The module opens no sockets and files: ``EventLoopClock`` only
asks the running asyncio loop for ``call_later``, and ``ManualClock`` is plain data.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = ["Clock", "EventLoopClock", "ManualClock", "TimerHandle", "as_clock"]


@runtime_checkable
class TimerHandle(Protocol):
    """A scheduled callback; ``cancel`` is idempotent and harmless after the callback ran."""

    def cancel(self) -> None:
        ...


@runtime_checkable
class Clock(Protocol):
    """Wall-clock milliseconds and delayed callbacks on the caller's event loop."""

    def now_ms(self) -> int:
        """Milliseconds since the epoch (Kafka's ``Time.milliseconds()``)."""
        ...

    def schedule(self, delay_ms: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Call ``fn(*args)`` once, ``delay_ms`` from now (a negative delay means as soon as possible)."""
        ...


class EventLoopClock:
    """The real clock: ``time.time()`` for timestamps, the running event loop for timers.

    Timers use the loop's monotonic time, so a wall-clock jump neither fires nor delays them.
    ``time_ms`` replaces only the timestamp source (tests that pin commit timestamps).
    """

    __slots__ = ("_time_ms",)

    def __init__(self, time_ms: Callable[[], int] | None = None) -> None:
        self._time_ms = time_ms

    def now_ms(self) -> int:
        if self._time_ms is not None:
            return self._time_ms()
        return int(time.time() * 1000)

    def schedule(self, delay_ms: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, fn, *args)


class _ManualTimer:
    __slots__ = ("args", "cancelled", "deadline_ms", "fn")

    def __init__(self, deadline_ms: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.deadline_ms = deadline_ms
        self.fn = fn
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told to (Kafka's ``MockTime``/``MockTimer``).

    ``advance(ms)`` moves time forward and runs, in deadline order (ties in scheduling order), every
    callback that falls due on the way, each with ``now_ms()`` equal to its own deadline; callbacks
    scheduled by those callbacks run too if they fall due before the new time. A callback due
    immediately (delay <= 0) runs on the event loop's next turn without any advance, as it would on
    the real clock.
    """

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now = now_ms
        self._seq = itertools.count()
        self._timers: list[tuple[int, int, _ManualTimer]] = []

    def now_ms(self) -> int:
        return self._now

    def schedule(self, delay_ms: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        if delay_ms <= 0:
            # Due now: run on the loop's next turn, as the real clock would, never re-entrantly.
            try:
                return asyncio.get_running_loop().call_soon(fn, *args)
            except RuntimeError:
                pass  # no loop: the next advance() runs it
        timer = _ManualTimer(self._now + max(int(delay_ms), 0), fn, args)
        heapq.heappush(self._timers, (timer.deadline_ms, next(self._seq), timer))
        return timer

    def advance(self, ms: int) -> int:
        """Move time forward by ``ms``; returns how many callbacks ran."""
        if ms < 0:
            raise ValueError("time only moves forward")
        target = self._now + ms
        ran = 0
        while self._timers and self._timers[0][0] <= target:
            deadline, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = deadline
            timer.cancelled = True  # a later cancel() of a fired timer is a no-op
            timer.fn(*timer.args)
            ran += 1
        self._now = target
        return ran

    @property
    def pending(self) -> int:
        """Scheduled callbacks that have neither run nor been cancelled."""
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    def next_deadline_ms(self) -> int | None:
        live = [d for d, _, t in self._timers if not t.cancelled]
        return min(live) if live else None


def as_clock(clock: Clock | Callable[[], int] | None) -> Clock:
    """A ``Clock`` from a clock, a plain millisecond time source (timers on the event loop), or None."""
    if clock is None:
        return EventLoopClock()
    if isinstance(clock, Clock):
        return clock
    return EventLoopClock(clock)
