"""Kafka's Throttler (org.apache.kafka.storage.internals.utils): holds an I/O loop to a byte rate.

The caller reports what it read or wrote; once ``check_interval_ms`` has passed since the last check,
a rate above the desired one makes the caller sleep for as long as it would have taken at that rate,
and the next interval starts. The log cleaner uses it for ``log.cleaner.io.max.bytes.per.second``
(its reads and writes together), which brokers may change at run time.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class Throttler:
    def __init__(self, desired_rate_per_s: float, check_interval_ms: float = 300.0, *,
                 clock_ns: Callable[[], int] = time.monotonic_ns,
                 sleep: Callable[[float], object] = time.sleep) -> None:
        """``sleep`` takes seconds; the cleaner passes its stop event's wait, so a stop does not wait out
        a nap."""
        self.desired_rate_per_s = desired_rate_per_s
        self.check_interval_ns = int(check_interval_ms * 1_000_000)
        self.clock_ns = clock_ns
        self.sleep = sleep
        self._period_start_ns = clock_ns()
        self._observed = 0.0
        self._lock = threading.Lock()
        self.slept_ms = 0  # in total (a metric, and for tests)

    def maybe_throttle(self, observed: float) -> None:
        desired = self.desired_rate_per_s
        # One lock over the count and the nap, as Kafka's: the cleaner threads share one rate, and while
        # one naps the others wait too.
        with self._lock:
            self._observed += observed
            now = self.clock_ns()
            elapsed_ns = now - self._period_start_ns
            if elapsed_ns <= self.check_interval_ns or self._observed <= 0:
                return
            if (self._observed * 1e9) / elapsed_ns > desired and desired < math.inf:
                elapsed_ms = elapsed_ns // 1_000_000
                sleep_ms = math.floor(self._observed / (desired / 1000.0) - elapsed_ms + 0.5) if desired > 0 else 0
                if sleep_ms > 0:
                    self.slept_ms += sleep_ms
                    self.sleep(sleep_ms / 1000.0)
            self._period_start_ns = self.clock_ns()
            self._observed = 0.0
