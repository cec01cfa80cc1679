"""Prometheus metrics: an HTTP endpoint on ``metrics.port`` that reads the broker's state at scrape time.

Names are what Kafka's MBeans become under the Prometheus JMX exporter's Kafka rules (its example
``kafka-2_0_0.yml`` and Strimzi's configuration, which has the same rules: lower-cased
``kafka_<domain>_<type>_<name>``, ``PerSec`` meters as ``..._total`` counters, Yammer histograms and
timers as ``quantile`` gauges plus ``_count``, extra MBean keys as labels), and kafka_exporter's names
for topics, partitions and consumer groups, so dashboards and alerts written for Apache Kafka work
unchanged:

    kafka_server_brokertopicmetrics_bytesin_total{topic="t"}              BytesInPerSec (and without a label)
    kafka_server_replicamanager_underreplicatedpartitions                 UnderReplicatedPartitions
    kafka_controller_kafkacontroller_activecontrollercount                ActiveControllerCount
    kafka_network_requestmetrics_totaltimems{request,quantile="0.99"}     TotalTimeMs 99thPercentile
    kafka_network_requestmetrics_requests_total{request,version}          RequestsPerSec
    kafka_topic_partition_current_offset{topic,partition}                 kafka_exporter
    kafka_consumergroup_lag{consumergroup,topic,partition}                kafka_exporter

``tests/ops/exporter_series.txt`` lists the series taken from those configurations and dashboards;
a test checks that live brokers export every one.

The endpoint is served by the broker's own event loop, so the collector reads broker objects without
locks. The request path records only what cannot be read later: each request's phase times (one deque
append) and its response's error codes (broker/metrics_requests.py), and what Produce v0-2 and Fetch
v0-3 converted (broker/conversion_metrics.py, exported by broker/metrics_conversions.py); percentiles
are computed here, at scrape time (broker/metrics_quantiles.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)

from broker.conversion_metrics import ConversionMetrics, conversion_metrics_for
from broker.metrics_conversions import conversion_counters, conversion_histograms
from broker.metrics_kafka_exporter import cluster_metrics, group_metrics, partition_metrics
from broker.metrics_quantiles import SummaryFamily, recent
from broker.metrics_requests import RequestMetricsRegistry
from broker.security.sasl_server import SaslStats

if TYPE_CHECKING:
    from broker.connection import Connection, ConnectionStats
    from broker.connection_quotas import ConnectionQuotas
    from broker.connection_rate_quotas import ConnectionRateQuotas
    from broker.kafka_apis import KafkaApis
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager
    from broker.request_queue import RequestPermits
    from broker.security.sasl_server import BrokerSasl
    from broker.wiring import BrokerComponents
    from config.registry import BrokerConfig
    from storage.log_manager import LogManager

log = logging.getLogger(__name__)


class MetricsSource(Protocol):
    """What the metrics read: the broker's state, read-only, at scrape time.

    Metrics observe everything a broker has (it is their job, as Kafka's metrics registry is fed by
    every component), so this is wide; but it is the whole of it, typed, and nothing here writes to
    the broker except the request metrics observer on ``apis`` (broker/metrics_requests.py).
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
    def connection_rates(self) -> ConnectionRateQuotas: ...
    @property
    def request_permits(self) -> RequestPermits: ...
    @property
    def sasl(self) -> BrokerSasl: ...


BROKER_STATE_RUNNING = 3  # Kafka's BrokerState.RUNNING
INT64_MAX = (1 << 63) - 1  # a TokenBucket without a quota measures Long.MAX_VALUE


def _labelled(name: str, doc: str, typ: str) -> Metric:
    """A family whose samples may carry different label sets (the all-topics total has none)."""
    return Metric(name, doc, typ)


class BrokerCollector:
    def __init__(self, broker: MetricsSource, requests: RequestMetricsRegistry) -> None:
        self.broker = broker
        self.requests = requests
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
        known_topics = set(b.metadata.topics)
        lm = b.log_manager
        offline_tps = lm.offline_partitions if lm is not None else set()
        ctrl = b.components.controller
        active = bool(ctrl is not None and ctrl.is_active)

        out += self._topic_metrics(partitions, known_topics)
        out += self._network_metrics()
        out += self._replica_manager_metrics(partitions, offline_tps)
        out += self._log_metrics(partitions, offline_tps)
        out += self._purgatory_metrics()
        out += self._verification_metrics()
        out += self._controller_metrics(active)
        out.append(GaugeMetricFamily("kafka_server_kafkaserver_brokerstate",
                                     "Broker state (3 = running, Kafka's numbering).", value=BROKER_STATE_RUNNING))
        # kafka_exporter's families, each series from one broker (broker/metrics_kafka_exporter.py)
        out += cluster_metrics(b, active)
        out += partition_metrics(b.metadata.broker_id, partitions, offline_tps)
        out += group_metrics(b, partitions)
        out += self._quota_metrics()
        return out

    def _topic_metrics(self, partitions: dict[tuple[str, int], Any], known: set[str]) -> list[Metric]:
        """BrokerTopicMetrics: bytes and messages (kept by the replica manager) and request counts."""
        b = self.broker
        rm = b.replica_manager
        msgs = _labelled("kafka_server_brokertopicmetrics_messagesin", "Records appended by producers (MessagesInPerSec).",
                         "counter")
        bin_ = _labelled("kafka_server_brokertopicmetrics_bytesin", "Bytes appended by producers (BytesInPerSec).",
                         "counter")
        bout = _labelled("kafka_server_brokertopicmetrics_bytesout", "Bytes sent to consumers (BytesOutPerSec).",
                         "counter")
        if rm is not None:
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
        out: list[Metric] = [msgs, bin_, bout]
        out.append(CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesout",
                                       "Bytes sent to follower replicas (ReplicationBytesOutPerSec).",
                                       value=rm.replication_bytes_out if rm is not None else 0))
        fetchers = b.components.replica_fetchers
        out.append(CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesin",
                                       "Bytes appended from leaders by this broker's replica fetchers "
                                       "(ReplicationBytesInPerSec).",
                                       value=fetchers.replication_bytes_in if fetchers is not None else 0))
        out += conversion_counters(self._conversions(), known | {t for t, _ in partitions})
        self.requests.forget_topics(known)
        return out

    def _conversions(self) -> ConversionMetrics | None:
        """Message format conversion counts (Produce v0-2, Fetch v0-3), kept per replica manager."""
        rm = self.broker.replica_manager
        return conversion_metrics_for(rm) if rm is not None else None

    def _network_metrics(self) -> list[Metric]:
        """Request handling (RequestMetrics, the event loop's idle share) and the socket server."""
        b = self.broker
        out = self.requests.collect()
        out += conversion_histograms(self._conversions(), self.requests)
        out.append(CounterMetricFamily("kafka_server_socket_server_metrics_incoming_byte",
                                       "Bytes read from client sockets, every listener (incoming-byte-total).",
                                       value=b.stats.bytes_in))
        out.append(CounterMetricFamily("kafka_server_socket_server_metrics_outgoing_byte",
                                       "Bytes written to client sockets, sendfile included, every listener "
                                       "(outgoing-byte-total).", value=b.stats.bytes_out))
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
        # One event loop is the network processor too; Strimzi's rules name it ..._percent, kafka-2_0_0.yml
        # ...percent (its gauge rule keeps the MBean name whole).
        for name in ("kafka_network_socketserver_networkprocessoravgidle_percent",
                     "kafka_network_socketserver_networkprocessoravgidlepercent"):
            out.append(GaugeMetricFamily(name, "Fraction of time the network processor (the event loop) was idle, "
                                         "0..1 (NetworkProcessorAvgIdlePercent).", value=idle))
        return out

    def _replica_manager_metrics(self, partitions: dict[tuple[str, int], Any],
                                 offline_tps: set[tuple[str, int]]) -> list[Metric]:
        b = self.broker
        out: list[Metric] = []
        leaders = under = under_min = at_min = offline = 0
        for tp, p in partitions.items():
            if tp in offline_tps or p.log.is_offline:
                offline += 1
                continue
            if p.is_leader:
                leaders += 1
                isr = len(p.isr)
                if isr < len(p.replicas):
                    under += 1
                min_isr = p.effective_min_isr  # Kafka's isUnderMinIsr and isAtMinIsr use it too
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
        isr_mgr = b.components.isr_manager
        out.append(CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks (IsrShrinksPerSec).",
                                       value=getattr(isr_mgr, "shrinks", 0)))
        out.append(CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expands (IsrExpandsPerSec).",
                                       value=getattr(isr_mgr, "expands", 0)))
        out.append(CounterMetricFamily("kafka_server_replicamanager_failedisrupdates",
                                       "ISR changes the controller refused (FailedIsrUpdatesPerSec).",
                                       value=getattr(isr_mgr, "failed", 0)))
        fetchers = b.components.replica_fetchers
        max_lag = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                                    "Largest lag, in records, of a partition this broker follows behind its leader's "
                                    "high watermark (MaxLag).", labels=["clientId"])
        max_lag.add_metric(["Replica"], fetchers.max_lag() if fetchers is not None else 0)
        out.append(max_lag)
        # Replicas moving between this broker's log dirs (KIP-113): Kafka's ReplicaAlterLogDirsManager.
        mover = b.components.log_dir_mover
        for name, doc, value in (
                ("maxlag", "Records the furthest-behind future replica has yet to copy (MaxLag).",
                 mover.max_lag() if mover is not None else 0),
                ("failedpartitionscount", "Log dir moves stopped by an error (FailedPartitionsCount).",
                 len(mover.failed) if mover is not None else 0),
                ("deadthreadcount", "Log dir copiers that stopped while the broker runs (DeadThreadCount).",
                 int(mover.copier_dead) if mover is not None else 0)):
            family = GaugeMetricFamily(f"kafka_server_replicaalterlogdirsmanager_{name}", doc, labels=["clientId"])
            family.add_metric(["ReplicaAlterLogDirs"], value)
            out.append(family)
        return out

    def _log_metrics(self, partitions: dict[tuple[str, int], Any], offline_tps: set[tuple[str, int]]
                     ) -> list[Metric]:
        """Per-partition Log gauges, LogManager's offline directories and LogFlushStats."""
        log_size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log on this broker.",
                                     labels=["topic", "partition"])
        log_end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=["topic", "partition"])
        log_start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset.",
                                      labels=["topic", "partition"])
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition's log.",
                                     labels=["topic", "partition"])
        for tp, p in sorted(partitions.items()):
            lg = p.log
            if tp in offline_tps or lg.is_offline:
                continue
            labels = [tp[0], str(tp[1])]
            with contextlib.suppress(Exception):
                log_size.add_metric(labels, lg.size_in_bytes)
                log_end.add_metric(labels, lg.log_end_offset)
                log_start.add_metric(labels, lg.log_start_offset)
                segments.add_metric(labels, len(lg.segments))
        out: list[Metric] = [log_size, log_end, log_start, segments]
        lm = self.broker.log_manager
        out.append(GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount",
                                     "Log directories that failed and went offline (KIP-112).",
                                     value=len(lm.offline_dirs) if lm is not None else 0))
        flush = SummaryFamily("kafka_log_logflushstats_logflushrateandtimems",
                              "Milliseconds a log flush (fsync after a segment roll, or flush.ms) took "
                              "(LogFlushRateAndTimeMs), percentiles over recent flushes.")
        if lm is not None:
            rows = recent(lm.flush_times, time.monotonic())
            flush.add({}, (ms for _, ms in rows), lm.flushes, lm.flush_ms_total)
        else:
            flush.add({}, (), 0, 0.0)
        out.append(flush.metric)
        return out

    def _verification_metrics(self) -> list[Metric]:
        """KIP-890's AddPartitionsToTxnManager metrics (transaction.partition.verification.enable)."""
        verifier = self.broker.components.txn_verifier
        failures = CounterMetricFamily(
            "kafka_server_addpartitionstotxnmanager_verificationfailurerate",
            "Partitions whose transaction verification failed (VerificationFailureRate).",
            value=verifier.stats.failed_partitions if verifier is not None else 0)
        timing = SummaryFamily("kafka_server_addpartitionstotxnmanager_verificationtimems",
                               "Milliseconds from a verification question to its answer (VerificationTimeMs), "
                               "percentiles over the last 1,028 verifications.")
        if verifier is not None:
            stats = verifier.stats
            timing.add({}, list(stats.time_ms), stats.verifications, stats.total_time_ms)
        else:
            timing.add({}, (), 0, 0.0)
        return [failures, timing.metric]

    def _purgatory_metrics(self) -> list[Metric]:
        b = self.broker
        rm = b.replica_manager
        out: list[Metric] = []
        # The MBean key is delayedOperation; the JMX exporter's Kafka rules keep label names as they are.
        for name, doc in (("purgatorysize", "Requests waiting in a purgatory (PurgatorySize)."),
                          ("numdelayedoperations", "Delayed operations in a purgatory (NumDelayedOperations).")):
            family = GaugeMetricFamily(f"kafka_server_delayedoperationpurgatory_{name}", doc,
                                       labels=["delayedOperation"])
            if rm is not None:
                family.add_metric(["Produce"], rm.produce_purgatory.waiting)
                family.add_metric(["Fetch"], rm.fetch_purgatory.waiting)
            out.append(family)
        if rm is not None:  # Kafka's FetchSessionCache metrics (KIP-227)
            sessions = rm.fetch_sessions.cache
            out.append(GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                         "Incremental fetch sessions cached.", value=sessions.size))
            out.append(GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                                         "Partitions in the cached fetch sessions.", value=sessions.total_partitions))
            out.append(CounterMetricFamily("kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
                                           "Fetch sessions evicted (IncrementalFetchSessionEvictionsPerSec).",
                                           value=sessions.evictions))
        return out

    def _controller_metrics(self, active: bool) -> list[Metric]:
        ctrl = self.broker.components.controller
        out: list[Metric] = []
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
        # Kafka's LeaderElectionRateAndTimeMs is a timer; the controller counts its elections but does
        # not time them, so only the timer's count is exported (no quantile series).
        elections = Metric("kafka_controller_controllerstats_leaderelectionrateandtimems",
                           "Partition leader elections decided by this broker as controller "
                           "(LeaderElectionRateAndTimeMs Count).", "summary")
        elections.add_sample("kafka_controller_controllerstats_leaderelectionrateandtimems_count", {},
                             getattr(stats, "leader_elections", 0))
        out.append(elections)
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
        rates = b.connection_rates
        throttled = CounterMetricFamily(
            "kafka_network_acceptor_throttled",
            "Connections held back by a connection creation rate quota (KIP-612), by the quota: the acceptor "
            "waited (max.connection.creation.rate) or the connection was closed unserved (connection_creation_rate).",
            labels=["listener", "quota"])
        throttle_ms = CounterMetricFamily(
            "kafka_network_acceptor_throttle_time_ms",
            "Milliseconds of those throttles (Kafka's connection-accept-throttle-time and "
            "ip-connection-accept-throttle-time, summed).", labels=["listener", "quota"])
        for name in sorted(q.listener_counts):
            for quota, counts, times in (("max.connection.creation.rate", rates.accept_throttled,
                                          rates.accept_throttle_ms),
                                         ("connection_creation_rate", rates.ip_throttled, rates.ip_throttle_ms)):
                throttled.add_metric([name, quota], counts.get(name, 0))
                throttle_ms.add_metric([name, quota], times.get(name, 0))
        out += [throttled, throttle_ms]
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


class MetricsServer:
    """GET /metrics on the broker's event loop (plain HTTP/1.1, one response per connection)."""

    def __init__(self, broker: MetricsSource, port: int, host: str = "0.0.0.0") -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.requests = RequestMetricsRegistry(lambda: broker.metadata.topics_by_id)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker, self.requests))  # type: ignore[arg-type]
        with contextlib.suppress(Exception):
            ProcessCollector(registry=self.registry)
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        self.broker.apis.observer = self.requests.on_response
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
