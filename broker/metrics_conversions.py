"""Kafka's message conversion metrics, under the names the JMX exporter's Kafka rules give them.

broker/conversion_metrics.py counts what Produce v0-2 and Fetch v0-3 convert; here it becomes

    kafka_server_brokertopicmetrics_producemessageconversions_total{topic}  ProduceMessageConversionsPerSec
    kafka_server_brokertopicmetrics_fetchmessageconversions_total{topic}    FetchMessageConversionsPerSec
    kafka_network_requestmetrics_messageconversionstimems{request,quantile}  MessageConversionsTimeMs
    kafka_network_requestmetrics_temporarymemorybytes{request,quantile}      TemporaryMemoryBytes

The counters have one sample per topic that had records converted (Kafka creates a topic's meter at
its first conversion) and one without a label for all topics (Kafka's is there from the start). The
histograms have ``request`` Produce and Fetch (FetchConsumer and FetchFollower have none in Kafka).

Kafka updates the histograms for every Produce and Fetch request, with 0 when nothing was converted.
Only the requests that converted something are recorded on the request path; the others are added
here, at scrape time, from the request metrics (broker/metrics_requests.py), which see every Produce
and Fetch request anyway. So a request without conversion costs nothing more: the ``_count`` is the
request count, and the percentiles are taken over the requests in the reservoir's window, the ones
that converted with their values and the rest as zeros.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client.metrics_core import Metric

from broker.conversion_metrics import FETCH, PRODUCE, ConversionMetrics, Observations
from broker.metrics_quantiles import SummaryFamily, recent
from broker.metrics_requests import RequestMetricsRegistry, RequestNameMetrics

_COUNTERS = (
    (PRODUCE, "kafka_server_brokertopicmetrics_producemessageconversions",
     "Records in message format v0/v1 converted to v2 for Produce v0-2 (ProduceMessageConversionsPerSec)."),
    (FETCH, "kafka_server_brokertopicmetrics_fetchmessageconversions",
     "Records down-converted to message format v0/v1 for Fetch v0-3 (FetchMessageConversionsPerSec)."),
)


def conversion_counters(conversions: ConversionMetrics | None, live_topics: Iterable[str]) -> list[Metric]:
    """The BrokerTopicMetrics conversion meters. Topics not in ``live_topics`` were deleted: their
    samples go, as Kafka removes a deleted topic's metrics (the all-topics count keeps them)."""
    if conversions is not None:
        live = set(live_topics)
        for topic in conversions.topics() - live:
            conversions.forget_topic(topic)
    out: list[Metric] = []
    for request, name, doc in _COUNTERS:
        family = Metric(name, doc, "counter")
        sample = name + "_total"
        if conversions is not None:
            counts = conversions.produce_conversions if request == PRODUCE else conversions.fetch_conversions
            for topic, n in sorted(counts.items()):
                family.add_sample(sample, {"topic": topic}, n)
        family.add_sample(sample, {}, conversions.total(request) if conversions is not None else 0)
        out.append(family)
    return out


def conversion_histograms(conversions: ConversionMetrics | None, requests: RequestMetricsRegistry,
                          now: float | None = None) -> list[Metric]:
    """The RequestMetrics MessageConversionsTimeMs and TemporaryMemoryBytes of Produce and Fetch."""
    now = time.monotonic() if now is None else now
    times = SummaryFamily("kafka_network_requestmetrics_messageconversionstimems",
                          "Milliseconds a Produce or Fetch request spent converting message formats "
                          "(MessageConversionsTimeMs; 0 for requests that converted nothing), percentiles "
                          "over recent requests.")
    memory = SummaryFamily("kafka_network_requestmetrics_temporarymemorybytes",
                           "Bytes a Produce or Fetch request allocated to convert message formats "
                           "(TemporaryMemoryBytes; 0 for requests that converted nothing), percentiles over "
                           "recent requests.")
    if conversions is not None:
        for request in (PRODUCE, FETCH):
            handled = requests.by_name.get(request)
            for family, observed in ((times, conversions.conversion_time_ms[request]),
                                     (memory, conversions.temporary_memory_bytes[request])):
                # A conversion is recorded before its response is written, the request after.
                count = max(handled.count if handled is not None else 0, observed.count)
                if count:
                    family.add({"request": request}, _window(observed, handled, now), count, observed.total)
    return [times.metric, memory.metric]


def _window(observed: Observations, handled: RequestNameMetrics | None, now: float) -> list[float]:
    """The values of the requests in the request reservoir's window: the conversions recorded since
    the oldest of them started, and a 0 for each of the others."""
    converted = recent(observed.rows, now)
    if handled is None or not handled.rows:
        return [row[1] for row in converted]
    window = recent(handled.rows, now)
    oldest = window[0]
    since = oldest[0] - oldest[-1] / 1000.0  # its end minus its total time (ms): when it was read
    values = [row[1] for row in converted if row[0] >= since][-len(window):]
    return values + [0.0] * (len(window) - len(values))
