"""deploy/ and docker-compose.yml agree with each other and with the broker's config registry.

Checked without Docker: the compose file is parsed with PyYAML, every KAFKA_* variable must name a
broker config of storage/config.py's REGISTRY (after the entrypoint's renaming), listeners, ports,
volumes, health checks and the pipeline service must line up; the entrypoint script itself is run to
render a server.properties, which the broker's own config loader must accept.
"""

from __future__ import annotations

import configparser
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from storage.config import REGISTRY, BrokerConfig, read_properties

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
ENTRYPOINT = DEPLOY / "docker-entrypoint.sh"
JVM_VARS = {"KAFKA_OPTS", "KAFKA_HEAP_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_JMX_OPTS",
            "KAFKA_GC_LOG_OPTS", "KAFKA_VERSION", "KAFKA_HOME", "KAFKA_DEBUG"}


def env_to_config(var: str) -> str:
    """The entrypoint's renaming rule (Kafka images' convention), for checking names."""
    n = var[len("KAFKA_"):].lower()
    return n.replace("___", "-").replace("__", "@").replace("_", ".").replace("@", "_")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def brokers(compose: dict) -> dict[str, dict]:
    return {name: svc for name, svc in compose["services"].items() if name.startswith("broker-")}


def broker_env(svc: dict) -> dict[str, str]:
    return {k: str(v) for k, v in svc["environment"].items()}


def listeners(value: str) -> dict[str, tuple[str, int]]:
    out = {}
    for item in value.split(","):
        name, rest = item.split("://", 1)
        host, port = rest.rsplit(":", 1)
        out[name] = (host, int(port))
    return out


def test_services(compose: dict) -> None:
    services = compose["services"]
    assert {"zookeeper", "broker-1", "broker-2", "broker-3", "prometheus", "grafana", "spark"} <= set(services)
    for name, svc in services.items():
        if name != "spark":  # a job: runs once, then exits
            assert "healthcheck" in svc, f"{name} has no health check"
        for dep in (svc.get("depends_on") or {}):
            assert dep in services, f"{name} depends on unknown service {dep}"


def test_broker_env_names_are_broker_configs(compose: dict) -> None:
    for name, svc in brokers(compose).items():
        for var in broker_env(svc):
            if not var.startswith("KAFKA_") or var in JVM_VARS:
                continue
            cfg = env_to_config(var)
            assert cfg in REGISTRY, f"{name}: {var} -> {cfg!r} is not a broker config"
            assert REGISTRY[cfg].broker or cfg in ("min.insync.replicas",), f"{name}: {cfg} is a topic-only config"


def test_brokers_render_valid_configs(compose: dict, tmp_path: Path) -> None:
    """Run the entrypoint on each broker's environment; the broker's loader accepts the result."""
    ids = set()
    for name, svc in brokers(compose).items():
        env = {"PATH": os.environ["PATH"], "KAFKETTE_BASE_CONFIG": str(DEPLOY / "server.properties"),
               **broker_env(svc)}
        r = subprocess.run(["bash", str(ENTRYPOINT), "--print-config"], env=env, capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        path = tmp_path / f"{name}.properties"
        path.write_text(r.stdout)
        props = read_properties(str(path))
        config = BrokerConfig(props)
        assert not config.unknown, f"{name}: unknown configs {sorted(config.unknown)}"
        ids.add(config.get("broker.id"))
        assert config.get("metrics.port") == 9404
        assert props["zookeeper.connect"].startswith("zookeeper:2181")
        # Listeners: INTERNAL for containers (advertised as the service name), EXTERNAL for the host.
        lmap = dict(item.split(":") for item in props["listener.security.protocol.map"].split(","))
        bound = listeners(props["listeners"])
        adv = listeners(props["advertised.listeners"])
        assert set(bound) == set(adv) <= set(lmap)
        assert props["inter.broker.listener.name"] in adv
        internal = adv[props["inter.broker.listener.name"]]
        assert internal[0] == svc.get("hostname", name) == name
        ext_host, ext_port = adv["EXTERNAL"]
        assert ext_host == "localhost"
        assert bound["EXTERNAL"][1] == ext_port
        published = {int(p.split(":")[0]): int(p.split(":")[1]) for p in svc["ports"]}
        assert published.get(ext_port) == ext_port, f"{name}: EXTERNAL port {ext_port} is not published as-is"
        assert 9404 in published.values()
        # data on a named volume, at the configured log dir
        mounts = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"]}
        assert any(props["log.dirs"].startswith(m) for m in mounts), f"{name}: log.dirs is not on a volume"
        for src in mounts.values():
            assert src in compose["volumes"], f"{name}: volume {src} not declared"
    assert ids == {1, 2, 3}
    # host ports unique across the file
    host_ports = [p.split(":")[0] for svc in compose["services"].values() for p in svc.get("ports", [])]
    assert len(host_ports) == len(set(host_ports))


def test_entrypoint_renaming_rule(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "KAFKETTE_BASE_CONFIG": str(tmp_path / "none"),
           "KAFKA_BROKER_ID": "7", "KAFKA_LOG_RETENTION_MS": "1000", "KAFKA_OPTS": "-Xmx1g",
           "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "A:PLAINTEXT", "KAFKA_CUSTOM__NAME___X": "1"}
    r = subprocess.run(["bash", str(ENTRYPOINT), "--print-config"], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x and not x.startswith("#")]
    assert lines == ["broker.id=7", "custom_name-x=1", "listener.security.protocol.map=A:PLAINTEXT",
                     "log.retention.ms=1000"]
    # without ZooKeeper the broker is not started
    r = subprocess.run(["bash", str(ENTRYPOINT)], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "KAFKA_ZOOKEEPER_CONNECT" in r.stderr


def test_prometheus_scrapes_every_broker(compose: dict) -> None:
    prom = compose["services"]["prometheus"]
    mounts = {v.split(":")[1]: REPO / v.split(":")[0] for v in prom["volumes"] if v.startswith("./")}
    cfg_file = mounts["/etc/prometheus/prometheus.yml"]
    cfg = yaml.safe_load(cfg_file.read_text())
    targets = {t for sc in cfg["scrape_configs"] for s in sc["static_configs"] for t in s["targets"]}
    assert targets == {f"{name}:9404" for name in brokers(compose)}
    for rule_file in cfg["rule_files"]:
        assert rule_file in mounts, f"rule file {rule_file} is not mounted"
        assert mounts[rule_file].exists()
    yaml.safe_load(mounts["/etc/prometheus/alerts.yml"].read_text())["groups"]


def test_grafana_provisioning(compose: dict) -> None:
    graf = compose["services"]["grafana"]
    mounts = {v.split(":")[1]: REPO / v.split(":")[0] for v in graf["volumes"] if v.startswith("./")}
    prov = mounts["/etc/grafana/provisioning"]
    ds = yaml.safe_load((prov / "datasources/prometheus.yml").read_text())["datasources"][0]
    assert ds["url"] == "http://prometheus:9090" and ds["uid"] == "prometheus"
    dash_prov = yaml.safe_load((prov / "dashboards/kafkette.yml").read_text())["providers"][0]
    dash_dir = mounts[dash_prov["options"]["path"]]
    import json

    dash = json.loads((dash_dir / "kafkette.json").read_text())
    assert dash["panels"] and all(t["datasource"]["uid"] == "prometheus" for p in dash["panels"] for t in p["targets"])
    assert graf["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"].startswith(dash_prov["options"]["path"])


def test_spark_service_runs_the_pipeline(compose: dict) -> None:
    spark = compose["services"]["spark"]
    command = " ".join(spark.get("command") or [])
    assert "clients/pipeline/run_pipeline.sh" in command
    assert (REPO / "clients/pipeline/run_pipeline.sh").exists()
    servers = spark["environment"]["BOOTSTRAP_SERVERS"].split(",")
    internal = set()
    for svc in brokers(compose).values():
        env = broker_env(svc)
        adv = listeners(env["KAFKA_ADVERTISED_LISTENERS"])
        internal.add(f"{adv[env['KAFKA_INTER_BROKER_LISTENER_NAME']][0]}:{adv[env['KAFKA_INTER_BROKER_LISTENER_NAME']][1]}")
    assert set(servers) == internal
    assert set(spark["depends_on"]) >= set(brokers(compose))
    for v in spark.get("volumes", []):
        src = v.split(":")[0]
        assert src.startswith("./") or src in compose["volumes"]


def test_dockerfile() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert "pip install ." in text
    for src in re.findall(r"^COPY (\S+) ", text, re.M):
        assert (REPO / src).exists(), f"Dockerfile copies missing {src}"
    assert 'ENTRYPOINT ["docker-entrypoint.sh"]' in text
    assert "EXPOSE 9092 9404" in text
    # the last stage (what `docker build` makes by default) is the broker
    assert re.findall(r"^FROM .* AS (\w+)", text, re.M)[-1] == "broker"


def test_example_server_properties_and_systemd_unit() -> None:
    config = BrokerConfig(read_properties(str(DEPLOY / "server.properties")))
    assert not config.unknown
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(DEPLOY / "systemd/kafkette.service")
    exec_start = unit["Service"]["ExecStart"]
    assert re.search(r"kafkette broker start --config /etc/kafkette/server.properties$", exec_start)
    assert unit["Service"]["KillSignal"] == "SIGTERM"


def test_kubernetes_manifests() -> None:
    docs = [d for f in sorted((DEPLOY / "k8s").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    by_kind: dict[str, dict[str, dict]] = {}
    for d in docs:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    sts = by_kind["StatefulSet"]["kafkette"]
    headless = by_kind["Service"][sts["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["selector"]["matchLabels"] == sts["spec"]["template"]["metadata"]["labels"]
    container = sts["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    for var in env:
        if var.startswith("KAFKA_"):
            assert env_to_config(var) in REGISTRY, var
    assert env["KAFKA_ZOOKEEPER_CONNECT"].split(":")[0] in by_kind["Service"]  # ZooKeeper is a dependency
    assert "zookeeper" in by_kind["StatefulSet"]
    script = " ".join(container["command"])
    assert "KAFKA_BROKER_ID" in script and sts["spec"]["serviceName"] in script
    ports = {p["containerPort"] for p in container["ports"]}
    assert ports == {9092, 9404} and env["KAFKA_METRICS_PORT"] == "9404"
