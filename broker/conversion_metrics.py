"""Message format conversion counters: Kafka's conversion metrics, kept here for the exporter to read.

Kafka 3.9 counts, per topic and for all topics, the records it converts (BrokerTopicMetrics
``ProduceMessageConversionsPerSec`` for v0/v1 records produced, ``FetchMessageConversionsPerSec``
for records down-converted for Fetch v0-3), and per request type (Produce, Fetch) two histograms
(RequestMetrics ``MessageConversionsTimeMs`` and ``TemporaryMemoryBytes``). Kafka updates the
histograms for every Produce and Fetch request, with 0 when nothing was converted; here only
requests that converted something are recorded, and the exporter adds the others as zeros from the
request metrics, which count every Produce and Fetch request anyway (broker/metrics_conversions.py).

As in Kafka's ``KafkaApis.updateRecordConversionStats``, a request's conversion time and temporary
memory are those of the last partition it converted (each partition overwrites them).

Observations go into reservoirs of ``(monotonic time, value)`` rows, the form
``broker/metrics_quantiles.py`` computes percentiles from.
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from broker.metrics_quantiles import new_reservoir

PRODUCE, FETCH = "Produce", "Fetch"


@dataclass
class Observations:
    """One histogram: recent rows for percentiles, and the running count and sum."""

    rows: deque[tuple[float, ...]] = field(default_factory=new_reservoir)
    count: int = 0
    total: float = 0.0

    def update(self, value: float) -> None:
        self.rows.append((time.monotonic(), value))
        self.count += 1
        self.total += value


@dataclass
class ConversionMetrics:
    """The counters of one broker."""

    #: topic -> records converted (ProduceMessageConversionsPerSec / FetchMessageConversionsPerSec).
    produce_conversions: dict[str, int] = field(default_factory=dict)
    fetch_conversions: dict[str, int] = field(default_factory=dict)
    #: request type -> records converted, all topics (deleted ones included, as Kafka's all-topics meter).
    all_topics: dict[str, int] = field(default_factory=lambda: {PRODUCE: 0, FETCH: 0})
    #: request type -> MessageConversionsTimeMs / TemporaryMemoryBytes observations.
    conversion_time_ms: dict[str, Observations] = field(
        default_factory=lambda: {PRODUCE: Observations(), FETCH: Observations()})
    temporary_memory_bytes: dict[str, Observations] = field(
        default_factory=lambda: {PRODUCE: Observations(), FETCH: Observations()})

    def converted(self, request: str, topic: str, records: int) -> None:
        counts = self.produce_conversions if request == PRODUCE else self.fetch_conversions
        counts[topic] = counts.get(topic, 0) + records
        self.all_topics[request] += records

    def request_done(self, request: str, conversion_time_ns: int, temporary_memory_bytes: int) -> None:
        """A request that converted records: its (last partition's) time and temporary memory."""
        self.conversion_time_ms[request].update(round(conversion_time_ns / 1e6))
        self.temporary_memory_bytes[request].update(temporary_memory_bytes)

    def total(self, request: str) -> int:
        """Records converted for ``request`` since the broker started, every topic."""
        return self.all_topics[request]

    def topics(self) -> set[str]:
        return set(self.produce_conversions) | set(self.fetch_conversions)

    def forget_topic(self, topic: str) -> None:
        self.produce_conversions.pop(topic, None)
        self.fetch_conversions.pop(topic, None)


_BY_OWNER: weakref.WeakKeyDictionary[Any, ConversionMetrics] = weakref.WeakKeyDictionary()


def conversion_metrics_for(owner: Any) -> ConversionMetrics:
    """The counters of the broker whose replica manager is ``owner`` (created on first use)."""
    metrics = _BY_OWNER.get(owner)
    if metrics is None:
        metrics = _BY_OWNER[owner] = ConversionMetrics()
    return metrics
