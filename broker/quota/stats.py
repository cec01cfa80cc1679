"""The measurements quotas are enforced on, with Kafka's arithmetic (org.apache.kafka.common.metrics.stats).

Times are milliseconds from whatever clock the caller uses (the quota managers use a monotonic one).

- ``SampledRate`` is Kafka's ``Rate`` over a ``WindowedSum``: values go into the current sample of
  ``window_ms``; a sample whose last event is ``samples * window_ms`` old is reset; the rate is the sum
  of the kept samples over the time since the oldest one started, counted as at least ``samples - 1``
  full windows (so one burst right after a quiet period is not measured over a few milliseconds).
- ``SampledAvg`` is Kafka's ``Avg`` over the same kind of samples (the throttle-time metric).
- ``TokenBucket`` is Kafka's ``TokenBucket`` (KIP-599): it refills at the quota rate up to a burst of
  ``samples * window * quota`` and may go negative; the controller mutation quota is exceeded while it is.
- ``throttle_time_ms`` is QuotaUtils.throttleTime: with O the observed rate, T the bound and W the
  window the rate was measured over, the delay X with ``O * W / (W + X) = T`` is ``(O - T) / T * W``.
"""

from __future__ import annotations

import math


class _Sample:
    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: float) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, now_ms: float) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SampledStat:
    """Kafka's SampledStat: a ring of ``samples + 1`` samples (one extra for the sample overlapping the
    start of the measured span), each covering ``window_ms``."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: float) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def _current_sample(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: float) -> _Sample:
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def purge_obsolete(self, now_ms: float) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def oldest_start(self, now_ms: float) -> float:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(s.start_ms for s in self._samples)

    def total(self, now_ms: float) -> float:
        self.purge_obsolete(now_ms)
        return sum(s.value for s in self._samples)

    def count(self, now_ms: float) -> int:
        self.purge_obsolete(now_ms)
        return sum(s.event_count for s in self._samples)

    def last_event_ms(self) -> float:
        return max((s.last_event_ms for s in self._samples), default=-math.inf)


class SampledRate(SampledStat):
    """Kafka's Rate (per second) over a WindowedSum."""

    __slots__ = ()

    def window_size_ms(self, now_ms: float) -> float:
        """The span the rate is measured over: since the oldest kept sample started, and at least
        ``samples - 1`` whole windows plus what has passed of the current one."""
        self.purge_obsolete(now_ms)
        elapsed = now_ms - self.oldest_start(now_ms)
        full_windows = int(elapsed // self.window_ms)
        min_full_windows = self.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * self.window_ms
        return max(elapsed, 1.0)

    def measure(self, now_ms: float) -> float:
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)


class SampledAvg(SampledStat):
    """Kafka's Avg: the mean of the recorded values in the kept samples (NaN when there are none)."""

    __slots__ = ()

    def measure(self, now_ms: float) -> float:
        self.purge_obsolete(now_ms)
        count = sum(s.event_count for s in self._samples)
        if count == 0:
            return math.nan
        return sum(s.value for s in self._samples) / count


class TokenBucket:
    """Kafka's TokenBucket: tokens refill at ``quota`` per second up to ``samples * window_s * quota``."""

    __slots__ = ("_last_update_ms", "samples", "tokens", "window_ms")

    def __init__(self, samples: int, window_ms: float) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.tokens = 0.0
        self._last_update_ms: float | None = None  # never updated: the bucket starts full

    def burst(self, quota: float) -> float:
        return self.samples * (self.window_ms / 1000.0) * quota

    def _refill(self, quota: float, now_ms: float) -> None:
        burst = self.burst(quota)
        if self._last_update_ms is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + quota * (now_ms - self._last_update_ms) / 1000.0)
        self._last_update_ms = now_ms

    def measure(self, quota: float, now_ms: float) -> float:
        self._refill(quota, now_ms)
        return self.tokens

    def record(self, value: float, quota: float, now_ms: float) -> None:
        self._refill(quota, now_ms)
        self.tokens = min(self.burst(quota), self.tokens - value)


def throttle_time_ms(observed: float, bound: float, window_ms: float) -> int:
    """QuotaUtils.throttleTime: how long to wait for the rate over ``window_ms`` to come down to ``bound``."""
    return java_round((observed - bound) / bound * window_ms)


def java_round(x: float) -> int:
    """Java's Math.round (halves go up), which Kafka uses; Python's round() halves to even."""
    return math.floor(x + 0.5)
