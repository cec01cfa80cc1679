"""Prometheus metrics: an HTTP endpoint on ``metrics.port`` that reads the broker's state at scrape time.

Names follow what Kafka's JMX MBeans become under the Prometheus JMX exporter's standard Kafka rules
(lower-cased ``kafka_<domain>_<type>_<name>``, ``PerSec`` meters as ``..._total`` counters, extra MBean
keys as labels), and kafka_exporter's names for consumer lag, so dashboards and alerts written for
Apache Kafka work unchanged:

    kafka_server_brokertopicmetrics_bytesin_total{topic="t"}        BytesInPerSec (and without a label)
    kafka_server_replicamanager_underreplicatedpartitions           UnderReplicatedPartitions
    kafka_controller_kafkacontroller_activecontrollercount          ActiveControllerCount
    kafka_network_requestmetrics_requests_total{request="Produce"}  RequestsPerSec
    kafka_consumergroup_lag{consumergroup,topic,partition}          kafka_exporter

Request latency is a real histogram (``kafka_network_requestmetrics_totaltimems_bucket``) rather than
the JMX exporter's precomputed quantiles; use ``histogram_quantile``.

The endpoint is served by the broker's own event loop, so the collector reads broker objects without
locks. Nothing is counted per request here beyond one histogram bucket increment; everything else is
derived from counters the broker keeps anyway.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from broker.security.sasl_server import SaslStats
from protocol.api_versions import SUPPORTED, ApiKey

if TYPE_CHECKING:
    from broker.connection import Connection, ConnectionStats
    from broker.connection_quotas import ConnectionQuotas
    from broker.kafka_apis import KafkaApis
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager
    from broker.request_queue import RequestPermits
    from broker.security.sasl_server import BrokerSasl
    from broker.wiring import BrokerComponents
    from config.registry import BrokerConfig
    from protocol.messages import Request
    from storage.log_manager import LogManager

log = logging.getLogger(__name__)


class MetricsSource(Protocol):
    """What the metrics read: the broker's state, read-only, at scrape time.

    Metrics observe everything a broker has (it is their job, as Kafka's metrics registry is fed by
    every component), so this is wide; but it is the whole of it, typed, and nothing here writes to
    the broker except the request-latency observer on ``apis``.
    """

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def log_manager(self) -> LogManager | None: ...
    @property
    def replica_manager(self) -> ReplicaManager | None: ...
    @property
    def components(self) -> BrokerComponents: ...
    @property
    def apis(self) -> KafkaApis: ...
    @property
    def stats(self) -> ConnectionStats: ...
    @property
    def bound(self) -> dict[str, tuple[str, int]]: ...
    @property
    def connections(self) -> set[Connection]: ...
    @property
    def connections_created(self) -> dict[str, int]: ...
    @property
    def connections_closed(self) -> dict[str, int]: ...
    @property
    def expired_connections_killed(self) -> int: ...
    @property
    def connection_quotas(self) -> ConnectionQuotas: ...
    @property
    def request_permits(self) -> RequestPermits: ...
    @property
    def sasl(self) -> BrokerSasl: ...

# Request latency bucket bounds, milliseconds.
LATENCY_BUCKETS_MS = (1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0)
BROKER_STATE_RUNNING = 3  # Kafka's BrokerState.RUNNING
INT64_MAX = (1 << 63) - 1  # a TokenBucket without a quota measures Long.MAX_VALUE


def request_name(api_key: int) -> str:
    entry = SUPPORTED.get(api_key)  # type: ignore[call-overload]
    return entry[2] if entry else str(api_key)


class RequestLatency:
    """Per request name: bucket counts, count and sum (ms). Kafka splits Fetch by who fetches."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[Any]] = {}

    def observe(self, request: Request, elapsed_s: float) -> None:
        key = request.header.api_key
        if key == ApiKey.FETCH:
            body = request.body
            rid = body.replica_id if request.header.api_version < 15 else body.replica_state.replica_id
            name = "FetchFollower" if rid >= 0 else "FetchConsumer"
        else:
            name = request_name(key)
        h = self.by_name.get(name)
        if h is None:
            h = self.by_name[name] = [[0] * (len(LATENCY_BUCKETS_MS) + 1), 0, 0.0]
        ms = elapsed_s * 1000.0
        h[0][bisect.bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        h[1] += 1
        h[2] += ms


def _labelled(name: str, doc: str, typ: str) -> Metric:
    """A family whose samples may carry different label sets (the all-topics total has none)."""
    return Metric(name, doc, typ)


class BrokerCollector:
    def __init__(self, broker: MetricsSource, latency: RequestLatency) -> None:
        self.broker = broker
        self.latency = latency
        self._cpu_mark = (time.monotonic(), time.thread_time())
        self._idle = 1.0

    def describe(self) -> list[Metric]:
        return []  # collected at scrape time only

    # -- helpers ----------------------------------------------------------------------------------

    def _idle_ratio(self) -> float:
        """Share of wall time the event loop thread did not spend on the CPU since the last scrape."""
        now, cpu = time.monotonic(), time.thread_time()
        wall0, cpu0 = self._cpu_mark
        if now - wall0 >= 0.5:
            self._idle = min(1.0, max(0.0, 1.0 - (cpu - cpu0) / (now - wall0)))
            self._cpu_mark = (now, cpu)
        return self._idle

    def collect(self) -> list[Metric]:
        b = self.broker
        out: list[Metric] = []
        rm = b.replica_manager
        partitions = dict(rm.partitions) if rm is not None else {}
        live = set(b.metadata.brokers)

        # BrokerTopicMetrics
        msgs = _labelled("kafka_server_brokertopicmetrics_messagesin", "Records appended by producers (MessagesInPerSec).",
                         "counter")
        bin_ = _labelled("kafka_server_brokertopicmetrics_bytesin", "Bytes appended by producers (BytesInPerSec).",
                         "counter")
        bout = _labelled("kafka_server_brokertopicmetrics_bytesout", "Bytes sent to consumers (BytesOutPerSec).",
                         "counter")
        if rm is not None:
            known = set(b.metadata.topics)
            for topic in [t for t in rm.topic_stats if t not in known]:
                if not any(t == topic for t, _ in partitions):
                    del rm.topic_stats[topic]  # deleted topic
            tm = tb = to = 0
            for topic, (m, bi, bo) in sorted(rm.topic_stats.items()):
                msgs.add_sample("kafka_server_brokertopicmetrics_messagesin_total", {"topic": topic}, m)
                bin_.add_sample("kafka_server_brokertopicmetrics_bytesin_total", {"topic": topic}, bi)
                bout.add_sample("kafka_server_brokertopicmetrics_bytesout_total", {"topic": topic}, bo)
                tm, tb, to = tm + m, tb + bi, to + bo
            msgs.add_sample("kafka_server_brokertopicmetrics_messagesin_total", {}, tm)
            bin_.add_sample("kafka_server_brokertopicmetrics_bytesin_total", {}, tb)
            bout.add_sample("kafka_server_brokertopicmetrics_bytesout_total", {}, to)
        out += [msgs, bin_, bout]
        out.append(CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesout",
                                       "Bytes sent to follower replicas (ReplicationBytesOutPerSec).",
                                       value=rm.replication_bytes_out if rm is not None else 0))

        # Socket server and request handling
        out.append(CounterMetricFamily("kafka_server_socketservermetrics_incomingbytes",
                                       "Bytes read from client sockets.", value=b.stats.bytes_in))
        out.append(CounterMetricFamily("kafka_server_socketservermetrics_outgoingbytes",
                                       "Bytes written to client sockets (sendfile included).", value=b.stats.bytes_out))
        conns = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count", "Open connections.",
                                  labels=["listener"])
        per_listener: dict[str, int] = {name: 0 for name in b.bound}
        for c in list(b.connections):
            per_listener[c.listener] = per_listener.get(c.listener, 0) + 1
        for name, n in sorted(per_listener.items()):
            conns.add_metric([name], n)
        out.append(conns)
        out.extend(self._connection_limit_metrics())
        out.extend(self._authentication_metrics())
        idle = self._idle_ratio()
        out.append(GaugeMetricFamily("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                                     "Fraction of time the request handler (the event loop) was idle, 0..1.",
                                     value=idle))
        out.append(GaugeMetricFamily("kafka_network_socketserver_networkprocessoravgidle_percent",
                                     "Fraction of time the network processor (the event loop) was idle, 0..1.",
                                     value=idle))
        reqs = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests handled (RequestsPerSec).",
                                   labels=["request"])
        hist = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                     "Time from a request's arrival to its response, milliseconds (TotalTimeMs).",
                                     labels=["request"])
        for name, (buckets, count, total) in sorted(self.latency.by_name.items()):
            reqs.add_metric([name], count)
            cum, pairs = 0, []
            for bound, n in zip((*LATENCY_BUCKETS_MS, float("inf")), buckets, strict=True):
                cum += n
                pairs.append(("+Inf" if bound == float("inf") else repr(bound), cum))
            hist.add_metric([name], pairs, total)
        out += [reqs, hist]

        # ReplicaManager
        leaders = under = under_min = at_min = offline = 0
        log_size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log on this broker.",
                                     labels=["topic", "partition"])
        log_end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=["topic", "partition"])
        log_start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset.",
                                      labels=["topic", "partition"])
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition's log.",
                                     labels=["topic", "partition"])
        lm = b.log_manager
        offline_tps = lm.offline_partitions if lm is not None else set()
        for tp, p in sorted(partitions.items()):
            labels = [tp[0], str(tp[1])]
            lg = p.log
            if tp in offline_tps or lg.is_offline:
                offline += 1
                continue
            with contextlib.suppress(Exception):
                log_size.add_metric(labels, lg.size_in_bytes)
                log_end.add_metric(labels, lg.log_end_offset)
                log_start.add_metric(labels, lg.log_start_offset)
                segments.add_metric(labels, len(lg.segments))
            if p.is_leader:
                leaders += 1
                isr = len(p.isr)
                if isr < len(p.replicas):
                    under += 1
                min_isr = getattr(p.config, "min_insync_replicas", 1)
                if isr < min_isr:
                    under_min += 1
                elif isr == min_isr:
                    at_min += 1
        for name, doc, value in (
                ("underreplicatedpartitions", "Partitions led here whose ISR is smaller than their replica set.",
                 under),
                ("underminisrpartitioncount", "Partitions led here whose ISR is below min.insync.replicas.", under_min),
                ("atminisrpartitioncount", "Partitions led here whose ISR is exactly min.insync.replicas.", at_min),
                ("offlinereplicacount", "Replicas on this broker in an offline log directory.", offline),
                ("leadercount", "Partitions this broker leads.", leaders),
                ("partitioncount", "Partition replicas on this broker.", len(partitions))):
            out.append(GaugeMetricFamily(f"kafka_server_replicamanager_{name}", doc, value=value))
        out += [log_size, log_end, log_start, segments]
        out.append(GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount",
                                     "Log directories that failed and went offline (KIP-112).",
                                     value=len(lm.offline_dirs) if lm is not None else 0))
        isr_mgr = b.components.isr_manager
        out.append(CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks (IsrShrinksPerSec).",
                                       value=getattr(isr_mgr, "shrinks", 0)))
        out.append(CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expands (IsrExpandsPerSec).",
                                       value=getattr(isr_mgr, "expands", 0)))

        # Purgatories
        purg = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                 "Requests waiting in a purgatory.", labels=["delayedoperation"])
        if rm is not None:
            purg.add_metric(["Produce"], rm.produce_purgatory.waiting)
            purg.add_metric(["Fetch"], rm.fetch_purgatory.waiting)
        out.append(purg)
        if rm is not None:  # Kafka's FetchSessionCache metrics (KIP-227)
            sessions = rm.fetch_sessions.cache
            out.append(GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                         "Incremental fetch sessions cached.", value=sessions.size))
            out.append(GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                                         "Partitions in the cached fetch sessions.", value=sessions.total_partitions))
            out.append(CounterMetricFamily("kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
                                           "Fetch sessions evicted (IncrementalFetchSessionEvictionsPerSec).",
                                           value=sessions.evictions))

        # Controller
        ctrl = b.components.controller
        active = bool(ctrl is not None and ctrl.is_active)
        out.append(GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                     "1 on the broker that is the active controller, else 0.", value=int(active)))
        ctx = ctrl.context if ctrl is not None and active else None
        out.append(GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                     "Partitions without a live leader (reported by the active controller).",
                                     value=ctx.offline_partition_count() if ctx is not None else 0))
        out.append(GaugeMetricFamily("kafka_controller_kafkacontroller_globalpartitioncount",
                                     "Partitions in the cluster (active controller).",
                                     value=len(ctx.assignments) if ctx is not None else 0))
        out.append(GaugeMetricFamily("kafka_controller_kafkacontroller_globaltopiccount",
                                     "Topics in the cluster (active controller).",
                                     value=len(ctx.all_topics) if ctx is not None else 0))
        imbalance = 0
        if ctrl is not None and active:
            with contextlib.suppress(Exception):
                imbalance = sum(len(v) for v in ctrl.imbalanced_partitions().values())
        out.append(GaugeMetricFamily("kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
                                     "Partitions not led by their preferred replica (active controller).",
                                     value=imbalance))
        stats = getattr(ctrl, "stats", None)
        out.append(CounterMetricFamily("kafka_controller_controllerstats_uncleanleaderelections",
                                       "Unclean leader elections decided by this broker as controller.",
                                       value=getattr(stats, "unclean_leader_elections", 0)))
        out.append(CounterMetricFamily("kafka_controller_controllerstats_leaderelections",
                                       "Leader elections decided by this broker as controller.",
                                       value=getattr(stats, "leader_elections", 0)))

        # Server state
        out.append(GaugeMetricFamily("kafka_server_kafkaserver_brokerstate",
                                     "Broker state (3 = running, Kafka's numbering).", value=BROKER_STATE_RUNNING))
        out.append(GaugeMetricFamily("kafka_brokers", "Live brokers in this broker's metadata.", value=len(live)))

        # Consumer groups this broker coordinates (kafka_exporter's names)
        out += self._group_metrics(partitions)
        out += self._quota_metrics()
        return out

    def _quota_metrics(self) -> list[Metric]:
        """Client quota sensors (Kafka's MBeans ``kafka.server:type=<Produce|Fetch|Request|ControllerMutation>,
        user=..,client-id=..``), named as the JMX exporter's Kafka rules name them: ``kafka_server_quota_<attribute>``
        with ``resource`` the MBean type. As JMX leaves out empty tags, a client-id quota's samples have no
        ``user`` label and a user quota's no ``clientId``. Sensors exist once a quota of their type is set."""
        byte_rate = _labelled("kafka_server_quota_byte_rate", "Bytes per second a client produced or fetched "
                              "(byte-rate), over the quota window.", "gauge")
        throttle = _labelled("kafka_server_quota_throttle_time", "Average throttle time in ms given to a client "
                             "(throttle-time).", "gauge")
        request_time = _labelled("kafka_server_quota_request_time", "Event-loop time a client's requests took, in "
                                 "percent (request-time).", "gauge")
        tokens = _labelled("kafka_server_quota_tokens", "Tokens left in a client's controller mutation bucket "
                           "(tokens).", "gauge")
        mutation_rate = _labelled("kafka_server_quota_mutation_rate", "Partitions a client created or deleted per "
                                  "second (mutation-rate).", "gauge")
        quotas = self.broker.apis.quotas
        if quotas is not None:
            for manager in quotas.managers:
                now = manager.clock()
                resource = manager.quota_type
                for (user, client_id), sensors in list(manager.sensors.items()):
                    labels = {"resource": resource}
                    if user:
                        labels["user"] = user
                    if client_id:
                        labels["clientId"] = client_id
                    measured = sensors.rate.measure(now)
                    if resource == "Request":
                        request_time.add_sample("kafka_server_quota_request_time", labels, measured)
                    elif sensors.bucket is not None:
                        mutation_rate.add_sample("kafka_server_quota_mutation_rate", labels, measured)
                        left = sensors.bucket.measure(sensors.bound, now) if sensors.bound is not None else INT64_MAX
                        tokens.add_sample("kafka_server_quota_tokens", labels, left)
                    else:
                        byte_rate.add_sample("kafka_server_quota_byte_rate", labels, measured)
                    throttle.add_sample("kafka_server_quota_throttle_time", labels, sensors.throttle_time.measure(now))
        return [byte_rate, throttle, request_time, tokens, mutation_rate]

    def _authentication_metrics(self) -> list[Metric]:
        """SASL logins per listener, under the names the JMX exporter gives Kafka's socket-server-metrics
        (successful-authentication-total, failed-authentication-total, ...). A family is exported even
        with no SASL listener, so dashboards and alerts can name it on every broker."""
        stats = self.broker.sasl.stats
        out: list[Metric] = []
        for kafka_name in SaslStats.NAMES:
            name = "kafka_server_socket_server_metrics_" + kafka_name.replace("-", "_")
            help_text = f"SASL {kafka_name} per listener (socket-server-metrics)."
            family: CounterMetricFamily | GaugeMetricFamily
            if name.endswith("_total"):  # prometheus-client adds the suffix to the series itself
                family = CounterMetricFamily(name.removesuffix("_total"), help_text, labels=["listener"])
            else:
                family = GaugeMetricFamily(name, help_text, labels=["listener"])
            for listener in sorted(self.broker.sasl.servers):
                family.add_metric([listener], stats.totals(listener)[kafka_name])
            out.append(family)
        return out

    def _connection_limit_metrics(self) -> list[Metric]:
        """Connections opened, closed and refused, and the bound on requests in flight (SocketServer,
        ConnectionQuotas and RequestChannel in Kafka)."""
        b = self.broker
        out: list[Metric] = []
        created = CounterMetricFamily("kafka_server_socket_server_metrics_connection_creation",
                                      "Connections accepted (connection-creation-total).", labels=["listener"])
        closed = CounterMetricFamily("kafka_server_socket_server_metrics_connection_close",
                                     "Connections closed (connection-close-total).", labels=["listener"])
        for name in sorted(b.connections_created):
            created.add_metric([name], b.connections_created[name])
            closed.add_metric([name], b.connections_closed.get(name, 0))
        out += [created, closed]
        out.append(GaugeMetricFamily("kafka_network_socketserver_expiredconnectionskilledcount",
                                     "Connections closed after connections.max.idle.ms without traffic.",
                                     value=b.expired_connections_killed))
        q = b.connection_quotas
        refused = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connections_refused",
            "Connections refused or closed because of a limit, by the config that limits them.",
            labels=["listener", "reason"])
        for name in sorted(q.listener_counts):
            refused.add_metric([name, "max.connections.per.ip"], q.refused_per_ip.get(name, 0))
            refused.add_metric([name, "max.connections"], q.closed_for_max_connections.get(name, 0))
        refused.add_metric(["", "socket.request.max.bytes"], b.stats.closed_request_too_large)
        refused.add_metric(["", "control.plane.listener.name"], b.apis.refused_off_control_plane)
        out.append(refused)
        blocked = CounterMetricFamily("kafka_network_acceptor_blocked",
                                      "Times an acceptor stopped accepting because the broker was at max.connections.",
                                      labels=["listener"])
        for name in sorted(q.accept_blocked):
            blocked.add_metric([name], q.accept_blocked[name])
        out.append(blocked)
        out.append(CounterMetricFamily("kafka_network_socketserver_invalidrequests",
                                       "Connections closed because a request could not be decoded.",
                                       value=b.stats.closed_invalid_request))
        permits = b.request_permits
        out.append(GaugeMetricFamily("kafka_network_requestchannel_requestqueuesize",
                                     "Requests read but not yet answered (bounded by queued.max.requests).",
                                     value=permits.in_flight))
        out.append(GaugeMetricFamily("kafka_network_requestchannel_requestqueuesize_peak",
                                     "Most requests ever read but not yet answered at once.", value=permits.peak))
        out.append(GaugeMetricFamily("kafka_network_socketserver_memorypoolused",
                                     "Bytes of requests read but not yet answered (queued.max.request.bytes).",
                                     value=permits.bytes))
        out.append(CounterMetricFamily("kafka_network_requestchannel_requestqueuewaits",
                                       "Times a connection stopped reading because the request queue was full.",
                                       value=permits.waited))
        state = b.components.controller_requests
        if state is not None:
            out.append(CounterMetricFamily("kafka_server_controllerrequests_fenced",
                                           "Controller requests refused for a stale broker or controller epoch.",
                                           value=state.refused))
        return out

    def _group_metrics(self, partitions: dict[tuple[str, int], Any]) -> list[Metric]:
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset of the group.",
                                    labels=["consumergroup", "topic", "partition"])
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus the group's committed offset.",
                                labels=["consumergroup", "topic", "partition"])
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "Lag of the group summed over a topic.",
                                    labels=["consumergroup", "topic"])
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group.", labels=["consumergroup"])
        coord = self.broker.components.group_coordinator
        views = []
        if coord is not None:
            with contextlib.suppress(Exception):
                views = coord.group_lag_view()
        for g in views:
            members.add_metric([g.group_id], g.members)
            sums: dict[str, int] = {}
            for (topic, part), off in sorted(g.offsets.items()):
                labels = [g.group_id, topic, str(part)]
                current.add_metric(labels, off)
                p = partitions.get((topic, part))
                if p is None:
                    continue  # no replica here: its high watermark is unknown on this broker
                value = max(0, p.high_watermark - off)
                lag.add_metric(labels, value)
                sums[topic] = sums.get(topic, 0) + value
            for topic, value in sorted(sums.items()):
                lag_sum.add_metric([g.group_id, topic], value)
        return [current, lag, lag_sum, members]


class MetricsServer:
    """GET /metrics on the broker's event loop (plain HTTP/1.1, one response per connection)."""

    def __init__(self, broker: MetricsSource, port: int, host: str = "0.0.0.0") -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.latency = RequestLatency()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker, self.latency))  # type: ignore[arg-type]
        with contextlib.suppress(Exception):
            ProcessCollector(registry=self.registry)
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        self.broker.apis.observer = self.latency.observe
        log.info("metrics endpoint on http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        self.broker.apis.observer = None
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
            parts = head.split(b"\r\n", 1)[0].split()
            method, path = (parts[0], parts[1]) if len(parts) >= 2 else (b"", b"")
            path = path.split(b"?", 1)[0]
            if method not in (b"GET", b"HEAD"):
                status, ctype, body = b"405 Method Not Allowed", b"text/plain", b"GET only\n"
            elif path in (b"/metrics", b"/"):
                status, ctype, body = b"200 OK", CONTENT_TYPE_LATEST.encode(), self.render()
            elif path in (b"/health", b"/healthz"):
                status, ctype, body = b"200 OK", b"text/plain", b"ok\n"
            else:
                status, ctype, body = b"404 Not Found", b"text/plain", b"not found\n"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype + b"\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n")
            if method != b"HEAD":
                writer.write(body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        except Exception:
            log.exception("metrics request failed")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def start_metrics(broker: MetricsSource) -> MetricsServer | None:
    """Serve metrics on ``metrics.port`` (-1: off, 0: any free port); a bind failure is logged, not fatal."""
    port = int(broker.config.get("metrics.port"))
    if port < 0:
        return None
    server = MetricsServer(broker, port)
    try:
        await server.start()
    except OSError as e:
        log.error("cannot serve metrics on port %d: %s", port, e.strerror or e)
        return None
    broker.components.metrics = server
    return server


async def stop_metrics(broker: MetricsSource) -> None:
    server, broker.components.metrics = broker.components.metrics, None
    if server is not None:
        await server.stop()
