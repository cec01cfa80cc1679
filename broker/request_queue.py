"""The bound on requests read but not yet answered (Kafka's RequestChannel queue and MemoryPool).

Kafka's network threads stop reading when ``queued.max.requests`` requests wait for the handler
threads, and (with ``queued.max.request.bytes`` > 0) when the memory pool holding request bytes is
used up. One event loop has no queue between reading and handling, so the same bound is taken over
what costs memory here: a connection takes a permit after reading a request's size and before
allocating its buffer, and gives it back when the response is written. A connection without a permit
simply stops reading; TCP pushes back on its client. Like Kafka's pool (non-strict), a request larger
than what is free is let in when anything is free at all, so no request size can wedge the broker.

The control-plane listener has its own small bound (Kafka gives its control-plane channel a queue of
20), so client load never delays the controller.
"""

from __future__ import annotations

import asyncio
from collections import deque

CONTROL_PLANE_QUEUE = 20  # Kafka's control-plane RequestChannel capacity


class RequestPermits:
    def __init__(self, max_requests: int, max_bytes: int = -1) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes  # <= 0: no byte bound
        self.in_flight = 0
        self.bytes = 0
        self.peak = 0  # most requests ever in flight at once (metrics, tests)
        self.waited = 0  # times a connection had to wait for a permit
        self._waiters: deque[tuple[asyncio.Future[None], int]] = deque()

    def _fits(self) -> bool:
        if self.in_flight >= self.max_requests:
            return False
        return self.max_bytes <= 0 or self.bytes < self.max_bytes

    def _take(self, size: int) -> None:
        self.in_flight += 1
        self.bytes += size
        self.peak = max(self.peak, self.in_flight)

    async def acquire(self, size: int) -> None:
        if not self._waiters and self._fits():
            self._take(size)
            return
        # First come, first served: a waiting connection is not overtaken by newer ones. The permit
        # is taken on the waiter's behalf when it is woken, so nobody slips in between.
        self.waited += 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (fut, size)
        self._waiters.append(entry)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release(size)  # granted, but the connection is going away
            else:
                try:
                    self._waiters.remove(entry)
                except ValueError:
                    pass
            raise

    def release(self, size: int) -> None:
        self.in_flight -= 1
        self.bytes -= size
        while self._waiters and self._fits():
            fut, wsize = self._waiters.popleft()
            if fut.done():  # cancelled while waiting
                continue
            self._take(wsize)
            fut.set_result(None)
