"""Percentiles over recent observations, in the shape the JMX exporter gives Kafka's Yammer histograms.

Kafka's histograms and timers (``TotalTimeMs``, ``LogFlushRateAndTimeMs``, ...) keep an exponentially
decaying reservoir of 1028 samples biased to the last five minutes, and report 50th, 75th, 95th, 98th,
99th and 999th percentiles, a count and a mean. The JMX exporter's Kafka rules turn them into

    kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}   99thPercentile
    kafka_network_requestmetrics_totaltimems_count{request="Produce"}             Count

Here the reservoir is the last ``RESERVOIR_SIZE`` observations (a ``deque`` with that bound: O(1) per
observation), of which the ones of the last ``WINDOW_S`` seconds are used. When nothing happened in the
window, the last observations are used as they are, as a Yammer reservoir keeps its samples until new
ones replace them. Percentiles are computed when Prometheus scrapes, never on the request path, with
Yammer's UniformSnapshot interpolation. ``_sum`` is exported too (the JMX exporter has no sum; it lets
``rate(x_sum) / rate(x_count)`` give Kafka's Mean over any range).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TypeVar

from prometheus_client.metrics_core import Metric

RESERVOIR_SIZE = 1028  # Yammer's default reservoir size
WINDOW_S = 300.0  # the five minutes Yammer's alpha (0.015) biases its reservoir to
# The percentiles Yammer's Snapshot offers, as the JMX exporter labels them ("0.$N" of NNthPercentile).
Row = TypeVar("Row", bound=tuple[float, ...])  # (monotonic time, value, ...)
QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))


def new_reservoir() -> deque[tuple[float, ...]]:
    """Rows of (monotonic time, value, value, ...): one row per observation, the oldest dropped."""
    return deque(maxlen=RESERVOIR_SIZE)


def recent(rows: deque[Row], now: float, window_s: float = WINDOW_S) -> list[Row]:
    """The rows of the last ``window_s`` seconds, or all of them when none is that recent."""
    snapshot = list(rows)  # one C-level copy: safe against an append from another thread
    cutoff = now - window_s
    if not snapshot or snapshot[-1][0] < cutoff:
        return snapshot
    lo, hi = 0, len(snapshot)
    while lo < hi:  # rows are in time order: find the first one in the window
        mid = (lo + hi) // 2
        if snapshot[mid][0] < cutoff:
            lo = mid + 1
        else:
            hi = mid
    return snapshot[lo:]


def percentile(ordered: Sequence[float], q: float) -> float:
    """Yammer's UniformSnapshot.getValue: interpolated between the two nearest ranks; 0 when empty."""
    n = len(ordered)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return ordered[0]
    if pos >= n:
        return ordered[-1]
    index = int(pos)
    lower, upper = ordered[index - 1], ordered[index]
    return lower + (pos - math.floor(pos)) * (upper - lower)


def percentiles(values: Iterable[float]) -> list[tuple[str, float]]:
    ordered = sorted(values)
    return [(label, percentile(ordered, q)) for label, q in QUANTILES]


class SummaryFamily:
    """One JMX-exporter-style histogram family: quantile gauges plus ``_count`` (and ``_sum``)."""

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.metric = Metric(name, doc, "summary")

    def add(self, labels: dict[str, str], values: Iterable[float], count: int, total: float) -> None:
        for label, value in percentiles(values):
            self.metric.add_sample(self.name, {**labels, "quantile": label}, value)
        self.metric.add_sample(self.name + "_count", labels, count)
        self.metric.add_sample(self.name + "_sum", labels, total)
