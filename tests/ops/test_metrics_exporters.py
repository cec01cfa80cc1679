"""Live brokers export what the JMX exporter's Kafka rules and kafka_exporter produce, with real values.

``tests/ops/exporter_series.txt`` is the checked-in list of series taken from those exporter configs and
the dashboards built on them; every line must be exported by a 3-broker cluster after produce, consume
and commit traffic. The other tests check that the values mean what Kafka's do: request phases that add
up to the total, percentiles from observed latencies (a long-polling fetch shows its wait as remote
time), failed produce requests and error counts, kafka_exporter's partition and group series (each from
one broker), LogFlushStats after segment rolls, ReplicaFetcherManager MaxLag behind a throttle, and the
message conversion meters and histograms moved by a kafka-python pinned to 0.10.1.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import ErrorCode as E
from tests.integration.helpers import create_topic
from tests.ops.helpers import ok, running_cluster, scrape, unique, urls, wait_until
from tests.txn.test_kip890_verification import NOT_ADDED, _produce
from tests.txn.test_txn_protocol import Txn

REPO = Path(__file__).resolve().parents[2]
SERIES_LIST = Path(__file__).with_name("exporter_series.txt")
QUANTILES = ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999")
PHASES = ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems")
RECORDS, RECORD_SIZE = 2000, 200

Labels = frozenset[tuple[str, str]]
Samples = list[tuple[str, dict[str, str], float]]

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape_all(url: str) -> Samples:
    """Every sample of one scrape, labels as a dict (helpers.scrape keys by exact label sets)."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: Samples = []
    for line in text.splitlines():
        m = _SAMPLE.match(line) if line and not line.startswith("#") else None
        if m:
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def matching(samples: Samples, name: str, **labels: str) -> list[float]:
    """Values of the samples named ``name`` whose labels include ``labels``."""
    return [v for n, ls, v in samples if n == name and all(ls.get(k) == x for k, x in labels.items())]


@dataclass
class Traffic:
    topic: str
    group: str
    idle_topic: str


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    # A follower out of the ISR within 2 s, and replication throttles measured over two 1-second windows,
    # so that test_max_lag_of_a_throttled_follower sees a lagging follower within seconds.
    yield from running_cluster(3, overrides={"replica.lag.time.max.ms": "2000", "replication.quota.window.num": "2"})


def everything(cluster: object) -> Samples:
    return [s for u in urls(cluster) for s in scrape_all(u)]


@pytest.fixture(scope="module")
def traffic(cluster: object) -> Traffic:
    """Produce (acks=all), consume in a group with commits, and long-poll an empty topic."""
    from kafka import KafkaConsumer

    bs = cluster.bootstrap  # type: ignore[attr-defined]
    t, g, idle = unique("xtraffic"), unique("xgroup"), unique("xidle")
    # Small segments: the writes roll them, and the broker flushes rolled segments (LogFlushStats).
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "3",
       "--replication-factor", "3", "--config", "segment.bytes=20000")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", idle, "--partitions", "1",
       "--replication-factor", "3")
    ok("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", str(RECORDS),
       "--record-size", str(RECORD_SIZE), "--throughput", "-1", "--producer-props", "acks=all")
    ok("console-consumer", "--bootstrap-server", bs, "--topic", t, "--group", g, "--from-beginning",
       "--max-messages", str(RECORDS), "--timeout-ms", "20000")
    # Nothing to read: each fetch waits fetch.max.wait.ms in the leader's fetch purgatory.
    consumer = KafkaConsumer(idle, bootstrap_servers=bs, fetch_max_wait_ms=400, consumer_timeout_ms=2500,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        assert list(consumer) == []
    finally:
        consumer.close()
    return Traffic(t, g, idle)


# ------------------------------------------------------------------------------------------------
# The checked-in list


def parse_selector(line: str) -> tuple[str, dict[str, str | None]]:
    """``name{a="x",b}`` -> (name, {"a": "x", "b": None}); None: the label must only be present."""
    m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?", line)
    assert m, f"bad line in {SERIES_LIST.name}: {line!r}"
    labels: dict[str, str | None] = {}
    for item in filter(None, (i.strip() for i in (m.group(2) or "").split(","))):
        key, _, value = item.partition("=")
        labels[key.strip()] = value.strip().strip('"') if value else None
    return m.group(1), labels


def listed_series() -> list[str]:
    lines = [line.strip() for line in SERIES_LIST.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_every_listed_series_is_exported(cluster: object, traffic: Traffic) -> None:
    listed = listed_series()
    assert len(listed) > 200
    # Group state and per-topic counters settle after the commits: wait until everything is there.
    def missing() -> list[str]:
        samples = everything(cluster)
        absent = []
        for line in listed:
            name, want = parse_selector(line)
            if not any(n == name and all(k in ls and (v is None or ls[k] == v) for k, v in want.items())
                       for n, ls, _ in samples):
                absent.append(line)
        return absent

    last: list[str] = []

    def none_missing() -> bool:
        nonlocal last
        last = missing()
        return not last

    try:
        wait_until(none_missing, 30, "every listed series")
    except AssertionError:
        pytest.fail(f"not exported by any broker: {last}")


def test_percentiles_and_phases_of_request_metrics(cluster: object, traffic: Traffic) -> None:
    """Per broker and request: quantiles grow with q, phases add up to the total, counts agree."""
    seen = 0
    for url in urls(cluster):
        samples = scrape_all(url)
        for request in ("Produce", "FetchConsumer", "FetchFollower", "Fetch", "Metadata"):
            count = matching(samples, "kafka_network_requestmetrics_totaltimems_count", request=request)
            if not count:
                continue
            seen += 1
            n = count[0]
            assert n == sum(matching(samples, "kafka_network_requestmetrics_requests_total", request=request))
            total = matching(samples, "kafka_network_requestmetrics_totaltimems_sum", request=request)[0]
            parts = sum(matching(samples, f"kafka_network_requestmetrics_{p}_sum", request=request)[0]
                        for p in PHASES)
            assert abs(total - parts) <= 1e-6 * max(1.0, total), (request, total, parts)
            for phase in (*PHASES, "totaltimems"):
                name = f"kafka_network_requestmetrics_{phase}"
                assert matching(samples, f"{name}_count", request=request) == [n]
                values = [matching(samples, name, request=request, quantile=q)[0] for q in QUANTILES]
                assert all(v >= 0 for v in values)
                assert values == sorted(values), (request, phase, values)
            # A whole request takes at least as long as any one of its phases.
            p999 = matching(samples, "kafka_network_requestmetrics_totaltimems", request=request, quantile="0.999")
            assert p999[0] > 0
    assert seen >= 9  # Produce, FetchConsumer, FetchFollower, Fetch and Metadata on three brokers, mostly


def test_remote_time_is_the_wait_in_a_purgatory(cluster: object, traffic: Traffic) -> None:
    samples = everything(cluster)
    # The idle consumer's fetches waited fetch.max.wait.ms=400 each in the leader's fetch purgatory.
    remote = matching(samples, "kafka_network_requestmetrics_remotetimems", request="FetchConsumer",
                      quantile="0.999")
    assert max(remote) >= 350, remote
    # acks=all produce waits for the followers in the produce purgatory.
    produce_remote = matching(samples, "kafka_network_requestmetrics_remotetimems_sum", request="Produce")
    assert max(produce_remote) > 0
    # Metadata waits in a purgatory only on a broker that has just started, for the controller's first
    # UpdateMetadata (the cluster's start-up checks ask then); afterwards it never does.
    metadata_remote = matching(samples, "kafka_network_requestmetrics_remotetimems", request="Metadata",
                               quantile="0.50")
    assert metadata_remote and all(v == 0 for v in metadata_remote), metadata_remote


def test_failed_produce_requests_and_error_counts(cluster: object) -> None:
    """NOT_ENOUGH_REPLICAS is an unexpected append failure in Kafka's ReplicaManager: counted as failed.

    The partition has two replicas and min.insync.replicas=2, and its follower is frozen until the
    leader has taken it out of the ISR. (A one-replica topic with min.insync.replicas=2 takes acks=all
    writes since Kafka 3.7: tests/cluster/test_under_min_isr.py.) Neither broker is the controller,
    which the leader's AlterPartition must reach while the follower is frozen."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    from clients.admin import WireClient

    bs = cluster.bootstrap  # type: ignore[attr-defined]
    with WireClient(bs) as c:
        controller = c.refresh([]).controller_id
    leader, follower = sorted({0, 1, 2} - {controller})
    t = unique("xfail")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--replica-assignment", f"{leader}:{follower}",
       "--config", "min.insync.replicas=2")

    at_leader = cluster.brokers[leader].bootstrap  # type: ignore[attr-defined]  # never the frozen broker

    def isr() -> list[int]:
        described = ok("topics", "--describe", "--bootstrap-server", at_leader, "--topic", t, "--output",
                       "json").json()
        return sorted(described[0]["partitions"][0]["isr"])

    wait_until(lambda: isr() == sorted([leader, follower]), 30, f"{t}: both replicas in the ISR")
    before = sum(matching(everything(cluster), "kafka_network_requestmetrics_errors_total", request="Produce",
                          error="NOT_ENOUGH_REPLICAS"))
    frozen = cluster.brokers[follower]  # type: ignore[attr-defined]
    frozen.pause()
    try:
        wait_until(lambda: isr() == [leader], 30, f"{t}: the frozen follower out of the ISR")
        producer = KafkaProducer(bootstrap_servers=at_leader, acks="all", retries=0)
        try:
            with pytest.raises(KafkaError):
                producer.send(t, b"refused").get(timeout=20)
        finally:
            producer.close(timeout=5)
    finally:
        frozen.resume()
    samples = everything(cluster)
    assert sum(matching(samples, "kafka_network_requestmetrics_errors_total", request="Produce",
                        error="NOT_ENOUGH_REPLICAS")) >= before + 1
    assert sum(matching(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=t)) >= 1
    assert sum(matching(samples, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic=t)) >= 1
    # The all-topics sample counts it too.
    all_failed = [v for n, ls, v in samples if n == "kafka_server_brokertopicmetrics_failedproducerequests_total"
                  and not ls]
    assert sum(all_failed) >= 1


def test_kafka_exporter_series_come_from_one_broker_each(cluster: object, traffic: Traffic) -> None:
    bs = cluster.bootstrap  # type: ignore[attr-defined]
    t, g = traffic.topic, traffic.group
    described = ok("topics", "--describe", "--bootstrap-server", bs, "--topic", t, "--output", "json").json()
    leaders = {str(p["partition"]): p["leader"] for p in described[0]["partitions"]}

    def settled() -> bool:
        s = everything(cluster)
        return (len(matching(s, "kafka_topic_partition_in_sync_replica", topic=t)) == 3
                and set(matching(s, "kafka_topic_partition_in_sync_replica", topic=t)) == {3.0}
                and sum(matching(s, "kafka_topic_partition_current_offset", topic=t)) == RECORDS)

    wait_until(settled, 30, "one series per partition, all in sync, all records below the high watermark")
    samples = everything(cluster)
    for n, ls, v in samples:
        if n == "kafka_topic_partition_leader" and ls.get("topic") == t:
            assert v == leaders[ls["partition"]]
    assert matching(samples, "kafka_topic_partition_oldest_offset", topic=t) == [0.0, 0.0, 0.0]
    assert matching(samples, "kafka_topic_partition_replicas", topic=t) == [3.0, 3.0, 3.0]
    assert matching(samples, "kafka_topic_partition_under_replicated_partition", topic=t) == [0.0, 0.0, 0.0]
    assert len(matching(samples, "kafka_topic_partition_leader_is_preferred", topic=t)) == 3
    assert matching(samples, "kafka_topic_partitions", topic=t) == [3.0]  # the controller's, once
    assert matching(samples, "kafka_brokers") == [3.0]
    assert len(matching(samples, "kafka_broker_info")) == 3
    assert matching(samples, "kafka_consumergroup_current_offset_sum", consumergroup=g, topic=t) == [RECORDS]
    assert matching(samples, "kafka_consumergroup_lag_sum", consumergroup=g, topic=t) == [0.0]
    assert len(matching(samples, "kafka_consumergroup_members", consumergroup=g)) == 1


def test_log_flush_timer_counts_flushes_after_rolls(cluster: object, traffic: Traffic) -> None:
    name = "kafka_log_logflushstats_logflushrateandtimems"

    def flushed() -> float:
        return sum(matching(everything(cluster), f"{name}_count"))

    # Rolled segments are flushed by the broker's once-a-second housekeeping.
    wait_until(flushed, 30, "a log flush after the traffic's segment rolls")
    samples = everything(cluster)
    for url in urls(cluster):
        s = scrape_all(url)
        if matching(s, f"{name}_count")[0] > 0:
            values = [matching(s, name, quantile=q)[0] for q in QUANTILES]
            assert values == sorted(values) and values[-1] > 0
    assert sum(matching(samples, f"{name}_sum")) > 0


def test_max_lag_of_a_throttled_follower(cluster: object) -> None:
    """Followers throttled far below the produce rate fall out of the ISR; MaxLag then shows how far
    behind the leader's high watermark their fetches are, and goes back to 0 once the throttle is lifted."""
    bs = cluster.bootstrap  # type: ignore[attr-defined]
    t = unique("xlag")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "1", "--replication-factor", "3")
    maxlag = "kafka_server_replicafetchermanager_maxlag"
    ok("configs", "--alter", "--bootstrap-server", bs, "--broker-defaults", "--add-config",
       "follower.replication.throttled.rate=100000")
    try:
        ok("configs", "--alter", "--bootstrap-server", bs, "--topic", t, "--add-config",
           "follower.replication.throttled.replicas=*")
        ok("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "5000", "--record-size", "1000",
           "--throughput", "-1", "--producer-props", "acks=1")
        lag = wait_until(lambda: max(matching(everything(cluster), maxlag, clientId="Replica")), 60,
                         "a follower lagging behind its leader")
        assert 0 < lag <= 5000
    finally:
        ok("configs", "--alter", "--bootstrap-server", bs, "--broker-defaults", "--delete-config",
           "follower.replication.throttled.rate")
    wait_until(lambda: max(matching(everything(cluster), maxlag, clientId="Replica")) == 0, 60,
               "the followers caught up")
    wait_until(lambda: sum(matching(everything(cluster), "kafka_topic_partition_in_sync_replica", topic=t)) == 3,
               60, "the followers back in the ISR")


def test_alert_rules_pass_promtool() -> None:
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    result = subprocess.run([promtool, "check", "rules", str(REPO / "deploy/prometheus/alerts.yml")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_message_conversion_metrics(cluster: object) -> None:
    """kafka-python pinned to 0.10.1 produces with Produce v2 (message format v1, converted to v2) and reads
    with Fetch v3 (down-converted to v1): Kafka's conversion meters count the records, per topic and for
    all topics, and the conversion histograms count every Produce and Fetch request, as 0 when nothing
    was converted."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    bs = cluster.bootstrap  # type: ignore[attr-defined]
    t = unique("xconv")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "1",
       "--replication-factor", "1")
    produced = "kafka_server_brokertopicmetrics_producemessageconversions_total"
    fetched = "kafka_server_brokertopicmetrics_fetchmessageconversions_total"

    def all_topics(samples: Samples, name: str) -> float:
        return sum(v for n, ls, v in samples if n == name and not ls)

    before = everything(cluster)
    records = 50
    # Current-version produce requests to the same leader: requests that convert nothing.
    current = KafkaProducer(bootstrap_servers=bs)
    old = KafkaProducer(bootstrap_servers=bs, api_version=(0, 10, 1), linger_ms=100)
    try:
        for i in range(5):
            current.send(t, b"current-%d" % i).get(timeout=20)
        for i in range(records):
            old.send(t, b"old-%d" % i)
        old.flush(timeout=20)
    finally:
        current.close(timeout=5)
        old.close(timeout=5)
    leader = next(u for u in urls(cluster) if matching(scrape_all(u), produced, topic=t))

    def fetches() -> float:
        return matching(scrape_all(leader), "kafka_network_requestmetrics_totaltimems_count", request="Fetch")[0]

    consumer = KafkaConsumer(bootstrap_servers=bs, api_version=(0, 10, 1), enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    read: list[bytes] = []
    try:
        consumer.assign([TopicPartition(t, 0)])

        def all_read() -> bool:
            for batch in consumer.poll(timeout_ms=300).values():
                read.extend(m.value for m in batch)
            return len(read) >= records + 5

        wait_until(all_read, 30, "every record read back with Fetch v3")
        # Then fetches that find nothing new, so convert nothing.
        start = fetches()

        def idle_fetches() -> bool:
            consumer.poll(timeout_ms=200)
            return fetches() >= start + 10

        wait_until(idle_fetches, 30, "ten fetches without new records")
    finally:
        consumer.close()
    assert sorted(read) == sorted([b"current-%d" % i for i in range(5)] + [b"old-%d" % i for i in range(records)])

    # Both conversions are counted before their responses are sent: the scrape sees them.
    samples = everything(cluster)
    assert matching(samples, produced, topic=t) == [records]  # one broker leads the partition
    assert all_topics(samples, produced) - all_topics(before, produced) == records
    # Fetch v3 down-converts every record it returns, the current producer's included; a response that
    # ends inside a batch has that batch converted again by the next fetch.
    assert sum(matching(samples, fetched, topic=t)) >= records + 5
    assert all_topics(samples, fetched) - all_topics(before, fetched) >= records + 5

    for url in urls(cluster):
        s = scrape_all(url)
        for request in ("Produce", "Fetch"):
            handled = matching(s, "kafka_network_requestmetrics_totaltimems_count", request=request)
            for family in ("messageconversionstimems", "temporarymemorybytes"):
                name = f"kafka_network_requestmetrics_{family}"
                # Every request is in the histogram, those without a conversion too.
                assert matching(s, f"{name}_count", request=request) == handled, (url, request, family)
                values = [matching(s, name, request=request, quantile=q)[0] for q in QUANTILES]
                assert values == sorted(values) and values[0] >= 0, (url, request, family, values)
    s = scrape_all(leader)
    memory = "kafka_network_requestmetrics_temporarymemorybytes"
    for request in ("Produce", "Fetch"):
        assert matching(s, f"{memory}_sum", request=request)[0] > 0, request
        # Most of the leader's requests converted nothing (the current producer's five, the fetches
        # that found no new records); the largest value is a conversion's.
        assert matching(s, memory, request=request, quantile="0.50") == [0.0], request
        assert matching(s, memory, request=request, quantile="0.999")[0] > 0, request


VERIFY_FAILURES = "kafka_server_addpartitionstotxnmanager_verificationfailurerate_total"
VERIFY_TIME_COUNT = "kafka_server_addpartitionstotxnmanager_verificationtimems_count"


def _cluster_total(cluster: object, name: str) -> float:
    return sum(v for url in urls(cluster) for (n, _labels), v in scrape(url).items() if n == name)


def test_a_refused_transactional_produce_is_counted_as_a_verification_failure(cluster: Any) -> None:
    # KIP-890's AddPartitionsToTxnManager metrics (VerificationFailureRate, VerificationTimeMs).
    failures_before = _cluster_total(cluster, VERIFY_FAILURES)
    questions_before = _cluster_total(cluster, VERIFY_TIME_COUNT)
    topic = unique("verify-metrics")
    create_topic(cluster.bootstrap, topic, 2)
    t = Txn(cluster.bootstrap, unique("verify-metrics-txn"))
    try:
        assert t.init().error_code == E.NONE
        assert t.add(topic, [0]) == E.NONE
        assert _produce(t, topic, 0, [b"in"], 0).error_code == E.NONE
        r = _produce(t, topic, 1, [b"stray"], 0)
        assert (r.error_code, r.error_message) == (E.INVALID_TXN_STATE, NOT_ADDED)
    finally:
        t.close()
    wait_until(lambda: _cluster_total(cluster, VERIFY_FAILURES) >= failures_before + 1, 30,
               "the failure in the exported counter")
    # Both first writes were questions to the coordinator: the added partition's and the refused one's.
    assert _cluster_total(cluster, VERIFY_TIME_COUNT) >= questions_before + 2
    quantiles = [labels for url in urls(cluster) for (n, labels), _ in scrape(url).items()
                 if n == "kafka_server_addpartitionstotxnmanager_verificationtimems"]
    assert frozenset({("quantile", "0.99")}) in quantiles
