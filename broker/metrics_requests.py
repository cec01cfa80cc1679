"""Kafka's RequestMetrics and the request counts of BrokerTopicMetrics, fed from the request path.

Per request name (Kafka's ApiKeys name; a Fetch also counts as FetchConsumer or FetchFollower, as in
Kafka's RequestChannel), under the names the JMX exporter's Kafka rules give the MBeans
``kafka.network:type=RequestMetrics,name=<X>,request=<R>``:

    kafka_network_requestmetrics_<phase>timems{request,quantile}, _count, _sum   TotalTimeMs, LocalTimeMs, ...
    kafka_network_requestmetrics_requests_total{request,version}                 RequestsPerSec
    kafka_network_requestmetrics_errors_total{request,error}                     ErrorsPerSec

ErrorsPerSec counts every error code in a response, NONE included, as Kafka's ``errorCounts`` does
(a Produce of three partitions counts three). From Produce and Fetch responses come BrokerTopicMetrics'
``TotalProduceRequestsPerSec``/``FailedProduceRequestsPerSec`` and ``TotalFetchRequestsPerSec``/
``FailedFetchRequestsPerSec``: one per partition handed to the log, per topic and for all topics,
failed when the error is not one of those Kafka's ReplicaManager expects (a follower that is not the
leader, an unknown partition, a record too large, a storage error, ...). Unlike Kafka, a Fetch counts the
partitions its response carries: an incremental fetch session's partitions without news are not counted.

On the request path this costs one deque append and a few additions per request, plus one pass over
the response's error codes; percentiles are computed when Prometheus scrapes (broker/metrics_quantiles.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from prometheus_client.metrics_core import CounterMetricFamily, Metric

from broker.metrics_quantiles import SummaryFamily, new_reservoir, recent
from broker.metrics_timing import RequestClock
from protocol.api_versions import SUPPORTED, ApiKey
from protocol.errors import ErrorCode
from protocol.messages import Request, response_type
from protocol.schema import StructSpec

# The phases, in the order RequestClock.finish gives them: (name under the JMX exporter, Kafka's MBean
# name, what it measures).
PHASES: tuple[tuple[str, str, str], ...] = (
    ("requestqueuetimems", "RequestQueueTimeMs", "from the request's last byte read to its handler starting"),
    ("localtimems", "LocalTimeMs", "in the request's handler, waits in a purgatory excluded"),
    ("remotetimems", "RemoteTimeMs", "parked in a purgatory (acks=all replication, fetch.min.bytes)"),
    ("responsequeuetimems", "ResponseQueueTimeMs", "from the handler's answer to its first byte written"),
    ("responsesendtimems", "ResponseSendTimeMs", "writing the response"),
    ("totaltimems", "TotalTimeMs", "from the request's last byte read to the response's last byte written"),
)

# Errors Kafka's ReplicaManager expects, which do not count as failed produce/fetch requests.
_EXPECTED_PRODUCE_ERRORS = frozenset({
    ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.INVALID_TOPIC_EXCEPTION,
    # decided after the append, in the produce purgatory
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND})
_EXPECTED_FETCH_ERRORS = frozenset({
    ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.OFFSET_OUT_OF_RANGE,
    ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE})
# Partitions refused before they reach the log (authorization, a topic the metadata does not know, a
# version we do not serve) are not produce/fetch requests in BrokerTopicMetrics' sense.
_NOT_HANDED_TO_THE_LOG = frozenset({
    ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.UNSUPPORTED_VERSION})

TOTAL_PRODUCE, FAILED_PRODUCE, TOTAL_FETCH, FAILED_FETCH = range(4)
TOPIC_REQUEST_METRICS: tuple[tuple[str, str], ...] = (
    ("totalproducerequests", "Produce partitions handed to the log (TotalProduceRequestsPerSec)."),
    ("failedproducerequests", "Produce partitions that failed unexpectedly (FailedProduceRequestsPerSec)."),
    ("totalfetchrequests", "Fetch partitions read from the log (TotalFetchRequestsPerSec)."),
    ("failedfetchrequests", "Fetch partitions that failed unexpectedly (FailedFetchRequestsPerSec)."),
)


def request_name(api_key: int) -> str:
    entry = SUPPORTED.get(api_key)  # type: ignore[call-overload]
    return entry[2] if entry else str(api_key)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class RequestNameMetrics:
    """The RequestMetrics of one request name: recent phase times, counts per version, error counts."""

    __slots__ = ("name", "rows", "count", "sums", "versions", "errors")

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows = new_reservoir()  # (end, queue, local, remote, response queue, send, total)
        self.count = 0
        self.sums = [0.0] * len(PHASES)
        self.versions: dict[int, int] = {}
        self.errors: dict[int, int] = {}

    def observe(self, end: float, version: int, queue_ms: float, local_ms: float, remote_ms: float,
                response_queue_ms: float, send_ms: float, total_ms: float) -> None:
        self.rows.append((end, queue_ms, local_ms, remote_ms, response_queue_ms, send_ms, total_ms))
        self.count += 1
        sums = self.sums
        sums[0] += queue_ms
        sums[1] += local_ms
        sums[2] += remote_ms
        sums[3] += response_queue_ms
        sums[4] += send_ms
        sums[5] += total_ms
        versions = self.versions
        versions[version] = versions.get(version, 0) + 1


# -- error codes in any response ------------------------------------------------------------------

# (error_code attributes here, (child attribute, is an array, its plan) ...); None: no error code below
ErrorPlan = tuple[tuple[str, ...], tuple[tuple[str, bool, Any], ...]]


def _error_plan(spec: StructSpec, version: int, depth: int = 0) -> ErrorPlan | None:
    if depth > 8:
        return None
    errors: list[str] = []
    children: list[tuple[str, bool, Any]] = []
    for f in spec.fields:
        if f.versions is None or not f.versions[0] <= version <= f.versions[1]:
            continue
        if f.name == "error_code" and f.type == "int16":
            errors.append(f.name)
        elif f.type == "struct" and f.struct is not None:
            sub = _error_plan(f.struct, version, depth + 1)
            if sub is not None:
                children.append((f.name, False, sub))
        elif f.type == "array" and f.item is not None and f.item.struct is not None:
            sub = _error_plan(f.item.struct, version, depth + 1)
            if sub is not None:
                children.append((f.name, True, sub))
    if not errors and not children:
        return None
    return tuple(errors), tuple(children)


def _count_errors(body: Any, plan: ErrorPlan, counts: dict[int, int]) -> None:
    errors, children = plan
    for attr in errors:
        code = getattr(body, attr)
        counts[code] = counts.get(code, 0) + 1
    for attr, is_array, sub in children:
        value = getattr(body, attr, None)
        if value is None:
            continue
        if is_array:
            for item in value:
                _count_errors(item, sub, counts)
        else:
            _count_errors(value, sub, counts)


class RequestMetricsRegistry:
    """Everything the request path reports to the metrics; read by the collector at scrape time."""

    def __init__(self, topic_names: Callable[[], dict[uuid.UUID, str]]) -> None:
        self.topic_names = topic_names  # topic id -> name (Produce v13+, Fetch v13+ carry only ids)
        self.by_name: dict[str, RequestNameMetrics] = {}
        self._targets: dict[int, tuple[RequestNameMetrics, ...]] = {}
        self._fetch = self._metrics("Fetch")
        self._fetch_consumer = (self._metrics("FetchConsumer"), self._fetch)
        self._fetch_follower = (self._metrics("FetchFollower"), self._fetch)
        self._plans: dict[tuple[int, int], ErrorPlan | None] = {}
        # BrokerTopicMetrics request counts: topic -> [total produce, failed produce, total fetch, failed fetch]
        self.topic_requests: dict[str, list[int]] = {}
        self.all_topic_requests = [0, 0, 0, 0]

    def _metrics(self, name: str) -> RequestNameMetrics:
        m = self.by_name.get(name)
        if m is None:
            m = self.by_name[name] = RequestNameMetrics(name)
        return m

    # -- the request path -------------------------------------------------------------------------

    def on_response(self, clock: RequestClock, request: Request, body: Any, dequeued: float, done: float) -> None:
        """KafkaApis has the response body (None: acks=0 produce, no response): count its errors, and
        leave the request's metrics on its connection's clock for the phases the connection measures."""
        hdr = request.header
        key = hdr.api_key
        version = hdr.api_version
        targets: tuple[RequestNameMetrics, ...]
        if key == ApiKey.FETCH:
            req = request.body
            replica_id = req.replica_id if version < 15 else req.replica_state.replica_id
            targets = self._fetch_follower if replica_id >= 0 else self._fetch_consumer
            if body is not None:
                self._fetch_response(body, version)
        else:
            found = self._targets.get(key)
            if found is None:
                found = self._targets[key] = (self._metrics(request_name(key)),)
            targets = found
            if key == ApiKey.PRODUCE:
                if body is not None:
                    self._produce_response(targets[0].errors, body, version)
                else:
                    self._acks0_produce(request.body, version)
            elif body is not None:
                self._errors(targets[0].errors, key, version, body)
        clock.targets = targets
        clock.dequeued = dequeued
        clock.api_done = done
        clock.version = version

    def _errors(self, counts: dict[int, int], key: int, version: int, body: Any) -> None:
        plan_key = (key, version)
        try:
            plan = self._plans[plan_key]
        except KeyError:
            try:
                plan = _error_plan(response_type(key).root, version)
            except KeyError:
                plan = None
            self._plans[plan_key] = plan
        if plan is not None:
            _count_errors(body, plan, counts)

    def _topic(self, topic: str | None, topic_id: Any) -> list[int] | None:
        if not topic:
            topic = self.topic_names().get(topic_id) if topic_id is not None else None
            if topic is None:
                return None
        stats = self.topic_requests.get(topic)
        if stats is None:
            stats = self.topic_requests[topic] = [0, 0, 0, 0]
        return stats

    def _produce_response(self, counts: dict[int, int], body: Any, version: int) -> None:
        all_topics = self.all_topic_requests
        for t in body.responses:
            stats: list[int] | None = None
            resolved = False
            for p in t.partition_responses:
                code = p.error_code
                counts[code] = counts.get(code, 0) + 1
                if code in _NOT_HANDED_TO_THE_LOG:
                    continue
                if not resolved:
                    stats, resolved = self._topic(t.name, t.topic_id if version >= 13 else None), True
                if stats is None:
                    continue
                stats[TOTAL_PRODUCE] += 1
                all_topics[TOTAL_PRODUCE] += 1
                if code not in _EXPECTED_PRODUCE_ERRORS:
                    stats[FAILED_PRODUCE] += 1
                    all_topics[FAILED_PRODUCE] += 1

    def _acks0_produce(self, req: Any, version: int) -> None:
        """acks=0 has no response; its partitions were all appended (a failure closes the connection)."""
        all_topics = self.all_topic_requests
        for t in req.topic_data:
            stats = self._topic(t.name, t.topic_id if version >= 13 else None)
            if stats is not None:
                n = len(t.partition_data)
                stats[TOTAL_PRODUCE] += n
                all_topics[TOTAL_PRODUCE] += n

    def _fetch_response(self, body: Any, version: int) -> None:
        counts = self._fetch.errors
        code = body.error_code
        counts[code] = counts.get(code, 0) + 1
        all_topics = self.all_topic_requests
        for t in body.responses:
            stats: list[int] | None = None
            resolved = False
            for p in t.partitions:
                code = p.error_code
                counts[code] = counts.get(code, 0) + 1
                if code in _NOT_HANDED_TO_THE_LOG:
                    continue
                if not resolved:
                    stats, resolved = self._topic(t.topic, t.topic_id if version >= 13 else None), True
                if stats is None:
                    continue
                stats[TOTAL_FETCH] += 1
                all_topics[TOTAL_FETCH] += 1
                if code not in _EXPECTED_FETCH_ERRORS:
                    stats[FAILED_FETCH] += 1
                    all_topics[FAILED_FETCH] += 1

    # -- scrape time ------------------------------------------------------------------------------

    def forget_topics(self, known: set[str]) -> None:
        """Drop the counts of deleted topics (Kafka removes their BrokerTopicMetrics)."""
        for topic in [t for t in self.topic_requests if t not in known]:
            del self.topic_requests[topic]

    def collect(self) -> list[Metric]:
        now = time.monotonic()
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests answered, per request name and version (RequestsPerSec).",
                                       labels=["request", "version"])
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "Error codes in responses, NONE included (ErrorsPerSec).",
                                     labels=["request", "error"])
        phases = [SummaryFamily(f"kafka_network_requestmetrics_{name}",
                                f"Milliseconds {what} ({mbean}), percentiles over recent requests.")
                  for name, mbean, what in PHASES]
        for name, m in sorted(self.by_name.items()):
            for version, n in sorted(m.versions.items()):
                requests.add_metric([name, str(version)], n)
            for code, n in sorted(m.errors.items()):
                errors.add_metric([name, error_name(code)], n)
            if not m.count:
                continue
            rows = recent(m.rows, now)
            labels = {"request": name}
            for i, family in enumerate(phases):
                family.add(labels, (row[i + 1] for row in rows), m.count, m.sums[i])
        out: list[Metric] = [requests, errors]
        out += [family.metric for family in phases]
        for i, (name, doc) in enumerate(TOPIC_REQUEST_METRICS):
            counter = Metric(f"kafka_server_brokertopicmetrics_{name}", doc, "counter")
            sample = f"kafka_server_brokertopicmetrics_{name}_total"
            for topic, stats in sorted(self.topic_requests.items()):
                counter.add_sample(sample, {"topic": topic}, stats[i])
            counter.add_sample(sample, {}, self.all_topic_requests[i])
            out.append(counter)
        return out
