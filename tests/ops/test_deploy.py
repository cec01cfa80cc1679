"""deploy/ and docker-compose.yml agree with each other and with the broker's config registry.

Checked without a container engine: the compose file is parsed with PyYAML and its ``${VAR:-default}``
variables are filled in as Compose does, every KAFKA_* variable must name a broker config of
config/registry.py's REGISTRY (after the entrypoint's renaming), listeners, ports, volumes, health checks
and the pipeline service must line up; the entrypoint script itself is run to render a
server.properties, which the broker's own config loader must accept. tests/ops/test_compose.py runs the
stack for real.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from config.properties import read_properties
from config.registry import REGISTRY, BrokerConfig

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
ENTRYPOINT = DEPLOY / "docker-entrypoint.sh"
JVM_VARS = {"KAFKA_OPTS", "KAFKA_HEAP_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_JMX_OPTS",
            "KAFKA_GC_LOG_OPTS", "KAFKA_VERSION", "KAFKA_HOME", "KAFKA_DEBUG"}


def env_to_config(var: str) -> str:
    """The entrypoint's renaming rule (Kafka images' convention), for checking names."""
    n = var[len("KAFKA_"):].lower()
    return n.replace("___", "-").replace("__", "@").replace("_", ".").replace("@", "_")


VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable substitution (``${NAME}``, ``${NAME:-default}``) applied to every string."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, str):
        return VAR.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)
    return value


def load_compose(env: dict[str, str] | None = None, *files: str) -> dict:
    out: dict = {}
    for f in ("docker-compose.yml", *files):
        merge(out, interpolate(yaml.safe_load((REPO / f).read_text()), env or {}))
    return out


def merge(target: dict, source: dict) -> None:
    """An override file's merge: mappings recursively, everything else replaced."""
    for k, v in source.items():
        if isinstance(v, dict) and isinstance(target.get(k), dict):
            merge(target[k], v)
        else:
            target[k] = v


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_compose()


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
        assert "healthcheck" in svc, f"{name} has no health check"
        # The shell form: podman-compose 1.0 mis-quotes the exec form's arguments.
        assert svc["healthcheck"]["test"][0] == "CMD-SHELL" and len(svc["healthcheck"]["test"]) == 2, name
        for dep in (svc.get("depends_on") or {}):
            assert dep in services, f"{name} depends on unknown service {dep}"


def test_default_images_are_the_public_ones(compose: dict) -> None:
    """Without variables (a host that reaches the registries) the stack is what it always was."""
    services = compose["services"]
    assert services["zookeeper"]["image"] == "zookeeper:3.8"
    assert services["prometheus"]["image"] == "prom/prometheus:v2.53.0"
    assert services["grafana"]["image"] == "grafana/grafana:11.1.0"
    for name in ("broker-1", "broker-2", "broker-3", "spark"):
        assert services[name]["build"]["args"]["PYTHON_IMAGE"] == "python:3.11-slim", name
    for dockerfile in ("zookeeper/Dockerfile", "prometheus/Dockerfile"):
        assert re.search(r"^ARG BASE_IMAGE=debian:bookworm-slim$", (DEPLOY / dockerfile).read_text(), re.M)


def test_local_images_and_ports(tmp_path: Path) -> None:
    """deploy/local-images.env names what deploy/local-images.sh builds; host ports move the advertised
    EXTERNAL listeners with them."""
    env = dict(line.split("=", 1) for line in (DEPLOY / "local-images.env").read_text().splitlines()
               if line and not line.startswith("#"))
    script = (DEPLOY / "local-images.sh").read_text()
    for image in (env["ZOOKEEPER_IMAGE"], env["PROMETHEUS_IMAGE"], "localhost/kafkette:latest",
                  "localhost/kafkette-pipeline:latest"):
        assert f"build {image} " in script, f"local-images.sh does not build {image}"
    assert f'KAFKETTE_BASE_IMAGE:-{env["PYTHON_IMAGE"]}' in script
    assert "CONTAINERS_CONF" in script and "/etc/containers" not in script
    conf = (DEPLOY / "containers.conf").read_text()
    assert re.search(r"^default_ulimits = \[\]$", conf, re.M) and 'runtime = "runc"' in conf
    ports = {"KAFKETTE_BROKER_1_PORT": "21092", "KAFKETTE_BROKER_2_PORT": "21093", "KAFKETTE_BROKER_3_PORT": "21094"}
    c = load_compose({**env, **ports})
    assert c["services"]["zookeeper"]["image"] == env["ZOOKEEPER_IMAGE"]
    assert c["services"]["broker-1"]["build"]["args"]["PYTHON_IMAGE"] == env["PYTHON_IMAGE"]
    for i, name in enumerate(("broker-1", "broker-2", "broker-3"), 1):
        svc = c["services"][name]
        adv = listeners(svc["environment"]["KAFKA_ADVERTISED_LISTENERS"])
        bound = listeners(svc["environment"]["KAFKA_LISTENERS"])
        host_port = int(ports[f"KAFKETTE_BROKER_{i}_PORT"])
        assert adv["EXTERNAL"] == ("localhost", host_port)
        assert f"{host_port}:{bound['EXTERNAL'][1]}" in svc["ports"]


def test_zookeeper_ensemble_override() -> None:
    c = load_compose({}, "deploy/compose.zk-ensemble.yml")
    zks = {n: s for n, s in c["services"].items() if n.startswith("zookeeper")}
    assert sorted(zks) == ["zookeeper", "zookeeper-2", "zookeeper-3"]
    ids = {s["environment"]["ZOO_MY_ID"] for s in zks.values()}
    assert ids == {"1", "2", "3"}
    servers = {s["environment"]["ZOO_SERVERS"] for s in zks.values()}
    assert len(servers) == 1
    (line,) = servers
    assert sorted(x.split("=")[1].split(":")[0] for x in line.split()) == sorted(zks)
    for name in ("broker-1", "broker-2", "broker-3"):
        connect = c["services"][name]["environment"]["KAFKA_ZOOKEEPER_CONNECT"]
        hosts = connect.split("/")[0].split(",")
        assert sorted(h.split(":")[0] for h in hosts) == sorted(zks)
    for svc in zks.values():
        for v in svc["volumes"]:
            assert v.split(":")[0] in c["volumes"]


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
    # The base is a build arg whose default is the public image.
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim$", text, re.M)
    assert re.search(r"^FROM \$\{PYTHON_IMAGE\} AS \w+$", text, re.M)
    # The broker installs the wheel a build stage made, and that stage fails without the compiled parts.
    assert "pip wheel --no-deps --wheel-dir /wheels ." in text
    assert "COPY --from=build /wheels /wheels" in text and "pip install /wheels/kafkette-*.whl" in text
    for ext in ("protocol/_record_scan", "protocol/_wire", "storage/_compiled_append"):
        assert f"'{ext}'" in text
    assert "bash deploy/spark/install.sh" in text  # the pipeline image carries PySpark and the connector
    for src in re.findall(r"^COPY (?!--from=)(\S+) ", text, re.M):
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


def test_entrypoint_refuses_a_log_dir_it_cannot_write() -> None:
    """Started as a non-root user, the entrypoint checks its log dirs before starting the broker."""
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="kafkette-entrypoint-"))
    try:
        work.chmod(0o777)  # the unprivileged user writes the rendered config here
        env = {"PATH": os.environ["PATH"], "KAFKETTE_BASE_CONFIG": str(work / "none"),
               "KAFKETTE_CONFIG": str(work / "server.properties"), "KAFKA_ZOOKEEPER_CONNECT": "zookeeper:2181",
               "KAFKA_LOG_DIRS": f"{work}/data,/proc/kafkette-not-writable"}
        cmd = ["bash", str(ENTRYPOINT)]
        if os.geteuid() == 0:  # as root the entrypoint would take over the dirs: run it as nobody
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "log dir /proc/kafkette-not-writable is not writable" in r.stderr
        assert (work / "data").is_dir()  # the writable one was created
    finally:
        shutil.rmtree(work, ignore_errors=True)
