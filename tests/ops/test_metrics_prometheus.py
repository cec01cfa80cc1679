"""A real Prometheus scrapes a real 3-broker cluster: every dashboard panel and alert rule has data.

Prometheus is Debian's ``prometheus`` package (deploy/install-sysdeps.sh installs it, with its system
service kept off). It runs here with a scrape interval of 1 s, a temporary storage directory, a free
port and the repository's alert rules, against a LocalCluster with metrics ports. After produce,
consume and commit traffic:

* every query of every panel in deploy/grafana/dashboards/kafkette.json returns at least one series
  through Prometheus's HTTP query API, the latency percentile panels included;
* every rule of deploy/prometheus/alerts.yml is loaded and evaluates without error (health "ok" in
  /api/v1/rules), and its expression *without its threshold* returns data: each side of an
  ``and``/``or``/``unless`` is evaluated with its trailing comparison removed
  (``sum(x) > 0`` -> ``sum(x)``), so the series an alert watches are shown to exist even when the
  alert rightly does not fire.

Everything is polled for; Prometheus is stopped at the end.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ops.helpers import ok, running_cluster, unique, wait_until

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    yield from running_cluster(3)


class Prometheus:
    def __init__(self, workdir: Path, targets: list[str]) -> None:
        from clients.zookeeper_server import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(REPO / "deploy/prometheus/alerts.yml")],
            "scrape_configs": [{"job_name": "kafkette", "metrics_path": "/metrics",
                                "static_configs": [{"targets": targets}]}],
        }
        self.config_path = workdir / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.log_path = workdir / "prometheus.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config_path}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self._log, stderr=subprocess.STDOUT, cwd=workdir)

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as resp:
            doc = json.loads(resp.read())
        assert doc["status"] == "success", doc
        return doc["data"]

    def ready(self) -> bool:
        assert self.proc.poll() is None, f"prometheus exited:\n{self.log()}"
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    def query(self, expr: str) -> list[Any]:
        result: list[Any] = self.get("/api/v1/query", query=expr)["result"]
        return result

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()


@pytest.fixture(scope="module")
def prometheus(cluster: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    targets = [f"{b.host}:{b.metrics_port}" for b in cluster.brokers]  # type: ignore[attr-defined]
    p = Prometheus(tmp_path_factory.mktemp("prometheus"), targets)
    try:
        wait_until(p.ready, 60, "Prometheus ready")
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="module")
def traffic(cluster: object, prometheus: Prometheus) -> str:
    """Produce (acks=all), consume part of it in a group (a lag), commit; once Prometheus scrapes."""
    wait_until(lambda: all(t["health"] == "up" for t in prometheus.get("/api/v1/targets")["activeTargets"])
               and len(prometheus.get("/api/v1/targets")["activeTargets"]) == 3, 60, "three brokers scraped")
    bs = cluster.bootstrap  # type: ignore[attr-defined]
    t, g = unique("promtopic"), unique("promgroup")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "3", "--replication-factor", "3")
    ok("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "3000", "--record-size", "200",
       "--throughput", "-1", "--producer-props", "acks=all")
    ok("console-consumer", "--bootstrap-server", bs, "--topic", t, "--group", g, "--from-beginning",
       "--max-messages", "1000", "--timeout-ms", "20000")
    ok("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "1000", "--record-size", "200",
       "--throughput", "-1", "--producer-props", "acks=all")
    return g


def dashboard_queries() -> list[tuple[str, str]]:
    dash = json.loads((REPO / "deploy/grafana/dashboards/kafkette.json").read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((REPO / "deploy/prometheus/alerts.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def split_top_level(expr: str, words: tuple[str, ...] = ("and", "or", "unless")) -> list[str]:
    """Split a PromQL expression at binary set operators outside parentheses."""
    parts, depth, start = [], 0, 0
    pattern = re.compile(r"\(|\)|\b(?:" + "|".join(words) + r")\b")
    for m in pattern.finditer(expr):
        token = m.group(0)
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0:
            parts.append(expr[start:m.start()])
            start = m.end()
    parts.append(expr[start:])
    return [p.strip() for p in parts]


def without_threshold(expr: str) -> list[str]:
    """``a > 100 and on (x) b > 0`` -> ``["a", "b"]``: what the alert compares, without the comparison."""
    out = []
    for part in split_top_level(" ".join(expr.split())):
        part = re.sub(r"^(?:on|ignoring)\s*\([^)]*\)\s*", "", part)
        part = re.sub(r"\s*(?:==|!=|>=|<=|>|<)\s*(?:bool\s+)?-?[0-9.]+(?:e-?[0-9]+)?\s*$", "", part)
        out.append(part)
    return out


def test_without_threshold() -> None:
    assert without_threshold("sum(x) > 0") == ["sum(x)"]
    assert without_threshold("count(y) < 3") == ["count(y)"]
    assert without_threshold("sum by (a, b) (lag) > 100\nand on (a, b)\nsum by (a, b) (delta(s[15m])) > 0") == \
        ["sum by (a, b) (lag)", "sum by (a, b) (delta(s[15m]))"]


def test_every_dashboard_panel_has_data(prometheus: Prometheus, traffic: str) -> None:
    queries = dashboard_queries()
    assert any('quantile="0.99"' in e and "totaltimems" in e for _, e in queries)
    empty: list[str] = []

    def all_have_data() -> bool:
        empty[:] = [f"{title}: {expr}" for title, expr in queries if not prometheus.query(expr)]
        return not empty

    try:
        wait_until(all_have_data, 90, "every panel query to return data", interval=1.0)
    except AssertionError:
        pytest.fail(f"panel queries without data: {empty}\nprometheus log:\n{prometheus.log()}")
    # The latency percentiles are real numbers, the p99.9 no lower than the p50.
    for request in ("Produce", "FetchConsumer", "FetchFollower"):
        p50, p999 = (max(float(s["value"][1]) for s in prometheus.query(
            f'kafka_network_requestmetrics_totaltimems{{request="{request}",quantile="{q}"}}')) for q in ("0.50", "0.999"))
        assert 0 < p50 <= p999, (request, p50, p999)


def test_every_alert_rule_is_loaded_and_its_series_have_data(prometheus: Prometheus, traffic: str) -> None:
    rules = alert_rules()
    names = {r["alert"] for r in rules}

    def loaded() -> bool:
        groups = prometheus.get("/api/v1/rules", type="alert")["groups"]
        healthy = {r["name"] for g in groups for r in g["rules"] if r["health"] == "ok"}
        return names <= healthy

    wait_until(loaded, 60, "every alert rule loaded and evaluated", interval=1.0)
    exprs = [(r["alert"], e) for r in rules for e in without_threshold(r["expr"])]
    assert len(exprs) > len(rules)  # the lag rule has two sides
    empty: list[str] = []

    def all_have_data() -> bool:
        empty[:] = [f"{name}: {expr}" for name, expr in exprs if not prometheus.query(expr)]
        return not empty

    try:
        wait_until(all_have_data, 90, "every alert expression to return data", interval=1.0)
    except AssertionError:
        pytest.fail(f"alert expressions without data: {empty}\nprometheus log:\n{prometheus.log()}")
    # Nothing is wrong with this cluster: the critical alerts do not fire.
    firing = {a["labels"]["alertname"] for a in prometheus.get("/api/v1/alerts")["alerts"] if a["state"] == "firing"}
    assert not firing & {"KafkaOfflinePartitions", "KafkaActiveControllerCountNotOne", "KafkaOfflineLogDirectory"}
