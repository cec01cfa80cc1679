"""Every broker serves Prometheus metrics; the key series move with what happens in the cluster.

The dashboard and the alert rules in deploy/ may only use metric names that a live broker exports.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.ops.helpers import ok, running_cluster, scrape, unique, urls, value, wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    yield from running_cluster(3, overrides={"replica.lag.time.max.ms": "3000"})


def total(cluster: object, name: str, **labels: str) -> float:
    return sum(value(scrape(u), name, **labels) or 0.0 for u in urls(cluster))


def total_over(cluster: object, name: str, **labels: str) -> float:
    """Like ``total``, over every sample whose labels include ``labels`` (e.g. all versions)."""
    want = set(labels.items())
    return sum(v for u in urls(cluster) for (n, ls), v in scrape(u).items() if n == name and want <= ls)


def test_every_broker_serves_metrics(cluster: object) -> None:
    for b in cluster.brokers:  # type: ignore[attr-defined]
        with urllib.request.urlopen(b.metrics_url, timeout=10) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain")
            text = resp.read().decode()
        assert "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge" in text
        # Request latency as the JMX exporter shows Kafka's Yammer histograms: quantiles and a count.
        assert "# TYPE kafka_network_requestmetrics_totaltimems summary" in text
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(b.metrics_url.replace("/metrics", "/nope"), timeout=10)


def test_exactly_one_active_controller(cluster: object) -> None:
    bs = cluster.bootstrap  # type: ignore[attr-defined]

    def one() -> bool:
        counts = [value(scrape(u), "kafka_controller_kafkacontroller_activecontrollercount") for u in urls(cluster)]
        return counts.count(1.0) == 1 and counts.count(0.0) == 2

    wait_until(one, 30, "exactly one broker reporting itself controller")
    described = ok("cluster", "describe", "--bootstrap-server", bs, "--output", "json").json()["controller_id"]
    by_broker = {b.broker_id: value(scrape(b.metrics_url), "kafka_controller_kafkacontroller_activecontrollercount")
                 for b in cluster.brokers}  # type: ignore[attr-defined]
    assert by_broker[described] == 1.0


def test_producing_raises_bytes_in_and_requests(cluster: object) -> None:
    bs = cluster.bootstrap  # type: ignore[attr-defined]
    t = unique("mbytes")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "3", "--replication-factor", "3")
    name = "kafka_server_brokertopicmetrics_bytesin_total"
    before_all = total(cluster, name)
    assert total(cluster, name, topic=t) == 0
    ok("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "500", "--record-size", "200",
       "--throughput", "-1", "--producer-props", "acks=all")
    assert total(cluster, name, topic=t) >= 500 * 200
    assert total(cluster, name) >= before_all + 500 * 200
    assert total(cluster, "kafka_server_brokertopicmetrics_messagesin_total", topic=t) == 500
    ok("console-consumer", "--bootstrap-server", bs, "--topic", t, "--from-beginning", "--max-messages", "500",
       "--timeout-ms", "10000")
    assert total(cluster, "kafka_server_brokertopicmetrics_bytesout_total", topic=t) >= 500 * 200
    assert total(cluster, "kafka_server_brokertopicmetrics_replicationbytesout_total") > 0
    assert total_over(cluster, "kafka_network_requestmetrics_requests_total", request="Produce") > 0
    assert total(cluster, "kafka_network_requestmetrics_totaltimems_count", request="FetchConsumer") > 0
    assert total(cluster, "kafka_network_requestmetrics_totaltimems_count", request="FetchFollower") > 0
    sizes = [v for u in urls(cluster) for (n, ls), v in scrape(u).items()
             if n == "kafka_log_log_size" and ("topic", t) in ls]
    assert len(sizes) == 9 and all(s > 0 for s in sizes)  # 3 partitions x 3 replicas
    assert total(cluster, "kafka_server_replicamanager_partitioncount") >= 9
    for u in urls(cluster):
        idle = value(scrape(u), "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent")
        assert idle is not None and 0.0 <= idle <= 1.0


def test_consumer_lag_series(cluster: object) -> None:
    bs = cluster.bootstrap  # type: ignore[attr-defined]
    t, g = unique("mlag"), unique("mgroup")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "1", "--replication-factor", "3")
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, stdin="".join(f"m{i}\n" for i in range(5)))
    ok("console-consumer", "--bootstrap-server", bs, "--topic", t, "--group", g, "--from-beginning",
       "--max-messages", "5", "--timeout-ms", "10000")
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, stdin="".join(f"n{i}\n" for i in range(7)))

    def lag() -> float | None:
        return total(cluster, "kafka_consumergroup_lag", consumergroup=g, topic=t, partition="0") or None

    assert wait_until(lag, 30, "consumer lag of 7") == 7
    assert total(cluster, "kafka_consumergroup_current_offset", consumergroup=g, topic=t, partition="0") == 5
    assert total(cluster, "kafka_consumergroup_lag_sum", consumergroup=g, topic=t) == 7


def test_under_replicated_when_a_follower_stops(cluster: object) -> None:
    bs = cluster.bootstrap  # type: ignore[attr-defined]
    brokers = {b.broker_id: b for b in cluster.brokers}  # type: ignore[attr-defined]
    controller = ok("cluster", "describe", "--bootstrap-server", bs, "--output", "json").json()["controller_id"]
    t = unique("murp")
    leader_id = next(i for i in brokers if i != controller)
    follower_id = next(i for i in brokers if i not in (controller, leader_id))
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t,
       "--replica-assignment", f"{leader_id}:{follower_id}:{controller}")
    leader_url = brokers[leader_id].metrics_url
    urp = "kafka_server_replicamanager_underreplicatedpartitions"
    wait_until(lambda: value(scrape(leader_url), urp) == 0, 30, "no under-replicated partitions")
    expands_before = value(scrape(leader_url), "kafka_server_replicamanager_isrexpands_total") or 0
    follower = brokers[follower_id]
    follower.stop()
    try:
        # A graceful stop: the controller takes the follower out of the ISR (controlled shutdown).
        wait_until(lambda: (value(scrape(leader_url), urp) or 0) > 0, 60, "the leader to report under-replication")
        # The CLI sees the same thing through the wire protocol.
        listed = ok("topics", "--describe", "--bootstrap-server", bs, "--under-replicated-partitions", "--topic", t,
                    "--output", "json").json()
        assert [p["partition"] for p in listed[0]["partitions"]] == [0]
        assert sum(1.0 for b in cluster.brokers if b.running  # type: ignore[attr-defined]
                   for _ in [0] if value(scrape(b.metrics_url),
                                         "kafka_controller_kafkacontroller_activecontrollercount") == 1.0) == 1
    finally:
        follower.start()
    wait_until(lambda: value(scrape(leader_url), urp) == 0, 90, "under-replicated partitions back to 0")
    wait_until(lambda: total(cluster, urp) == 0, 90, "no broker reporting under-replication")
    # The leader took the returning follower back into the ISR itself.
    assert (value(scrape(leader_url), "kafka_server_replicamanager_isrexpands_total") or 0) > expands_before
    assert ok("topics", "--describe", "--bootstrap-server", bs, "--under-replicated-partitions", "--topic", t,
              "--output", "json").json() == []


# ------------------------------------------------------------------------------------------------
# The dashboard and the alert rules use only what brokers export


_PROMQL_WORDS = {
    "sum", "by", "rate", "irate", "increase", "delta", "deriv", "histogram_quantile", "count", "max", "min", "avg",
    "and", "or", "unless", "on", "ignoring", "without", "group_left", "group_right", "offset", "le", "topic",
    "instance", "job", "request", "consumergroup", "partition", "delayedOperation", "listener", "bool", "abs",
    "error", "version", "clientId",
    "absent", "topk", "bottomk", "quantile", "stddev", "clamp_min", "clamp_max", "time", "vector", "scalar",
}


def metric_names_in(expr: str) -> set[str]:
    expr = re.sub(r'"[^"]*"', '""', expr)            # label values
    expr = re.sub(r"\{[^}]*\}", "", expr)             # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)            # range selectors
    words = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", expr))
    return {w for w in words if w not in _PROMQL_WORDS and not w.isdigit()}


def exported_names(cluster: object) -> set[str]:
    names: set[str] = set()
    for u in urls(cluster):
        with urllib.request.urlopen(u, timeout=10) as resp:
            text = resp.read().decode()
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                names.add(line.split()[2])
            elif line and not line.startswith("#"):
                names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names


def dashboard_exprs() -> list[str]:
    dash = json.loads((REPO / "deploy/grafana/dashboards/kafkette.json").read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def alert_rules() -> list[dict]:
    doc = yaml.safe_load((REPO / "deploy/prometheus/alerts.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_dashboard_and_alerts_use_exported_metrics(cluster: object) -> None:
    # Make every family have samples: a group with committed offsets on some broker.
    test_consumer_lag_series(cluster)
    exported = exported_names(cluster)
    used = {n for e in dashboard_exprs() + [r["expr"] for r in alert_rules()] for n in metric_names_in(e)}
    assert used, "no metric names found"
    missing = sorted(used - exported)
    assert not missing, f"dashboard/alerts use metrics no broker exports: {missing}"
    # and the important ones are there at all
    for name in ("kafka_server_replicamanager_underreplicatedpartitions",
                 "kafka_controller_kafkacontroller_activecontrollercount",
                 "kafka_controller_kafkacontroller_offlinepartitionscount", "kafka_consumergroup_lag",
                 "kafka_server_brokertopicmetrics_bytesin_total", "kafka_network_requestmetrics_totaltimems",
                 "kafka_topic_partition_current_offset", "kafka_server_replicafetchermanager_maxlag"):
        assert name in used, name


def test_alert_rules_cover_the_essentials() -> None:
    rules = {r["alert"]: r for r in alert_rules()}
    exprs = " ".join(r["expr"] for r in rules.values())
    assert re.search(r"kafka_server_replicamanager_underreplicatedpartitions\)?\s*>\s*0", exprs)
    assert re.search(r"kafka_controller_kafkacontroller_offlinepartitionscount\)?\s*>\s*0", exprs)
    assert re.search(r"kafka_controller_kafkacontroller_activecontrollercount\)?\s*!=\s*1", exprs)
    lag = [r for r in rules.values() if "kafka_consumergroup_lag" in r["expr"]]
    assert lag and any(re.search(r"\b(delta|deriv|increase|rate)\(", r["expr"]) for r in lag)
    for r in rules.values():
        assert r["labels"]["severity"] in ("warning", "critical") and r["annotations"]["summary"]


def documented_families() -> tuple[set[str], set[str]]:
    """Metric families named in docs/metrics.md's table, and the documented name prefixes (``x_*``).

    A cell like ``a_b_size``, ``..._logendoffset`` names ``a_b_logendoffset`` (the elision keeps the
    previous name up to its last underscore-separated word); ``x_bucket/_sum/_count`` names the
    histogram family ``x``.
    """
    families: set[str] = set()
    prefixes: set[str] = set()
    for line in (REPO / "docs/metrics.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        previous = ""
        for name in re.findall(r"`([^`]+)`", first):
            if name.endswith("*"):
                prefixes.add(name[:-1])
                continue
            if name.startswith("..."):
                name = previous.rsplit("_", 1 if not previous.endswith("_total") else 2)[0] + name[3:]
            name = name.split("/")[0].removesuffix("_bucket")
            families.add(name)
            previous = name
    return families, prefixes


def test_metrics_doc_matches_live_exporter(cluster: object) -> None:
    """docs/metrics.md lists exactly the families live brokers export (consumer-group series included)."""
    test_consumer_lag_series(cluster)
    documented, prefixes = documented_families()
    exported: set[str] = set()
    for u in urls(cluster):
        with urllib.request.urlopen(u, timeout=10) as resp:
            text = resp.read().decode()
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split()[:4]
                # prometheus-client's TYPE line names a counter without _total; the series has it.
                exported.add(name + "_total" if kind == "counter" and not name.endswith("_total") else name)
    undocumented = sorted(n for n in exported if n not in documented and not any(n.startswith(p) for p in prefixes))
    assert not undocumented, f"exported but not in docs/metrics.md: {undocumented}"
    unexported = sorted(documented - exported)
    assert not unexported, f"in docs/metrics.md but not exported by any broker: {unexported}"
