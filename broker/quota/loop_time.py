"""How long a request kept the event loop busy: the measure behind request_percentage.

Kafka charges a request the time its request-handler (and network) threads spent on it. A kafkette
broker is one event loop, and a handler coroutine also *waits* (acks=all in the produce purgatory, a
fetch for ``min_bytes``, ZooKeeper calls in the executor), which costs the broker nothing. ``LoopTimed``
awaits a coroutine step by step, as the task running it would, and adds up only the time each step
ran; the waits in between are not counted.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Generator
from typing import Any

_now_ns = time.perf_counter_ns


class LoopTimed:
    """``await LoopTimed(coro)`` is ``await coro``; afterwards ``busy_ns`` is the time its steps ran."""

    __slots__ = ("_coro", "busy_ns")

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self._coro = awaitable.__await__()
        self.busy_ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        value: Any = None
        error: BaseException | None = None
        while True:
            started = _now_ns()
            try:
                if error is None:
                    yielded = coro.send(value)  # (the first send must be None, and is)
                else:
                    yielded = coro.throw(error)
            except StopIteration as stop:
                self.busy_ns += _now_ns() - started
                return stop.value
            except BaseException:
                self.busy_ns += _now_ns() - started
                raise
            self.busy_ns += _now_ns() - started
            try:
                # Hand what the coroutine waits on to the task, and its answer (or error, such as a
                # cancellation) back to the coroutine.
                value = yield yielded
                error = None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # noqa: BLE001 - passed on into the coroutine
                value, error = None, e
