"""docker-compose.yml run for real: images built with podman, the stack brought up with podman-compose.

No image registry is needed: deploy/local-images.sh bootstraps a Debian base with debootstrap (Debian's
package mirror), imports it, and builds every image FROM it with ``--pull=never`` (the only network the
builds use is the package registries: Debian, PyPI, Maven Central). The stack is the compose file as it
is, with the image variables of deploy/local-images.env and host ports below 32768 chosen free for the
run: one ZooKeeper, three brokers, Prometheus, then the pipeline service. Grafana has no Debian package
and is not started.

podman runs without systemd here, so nothing schedules the healthchecks: the test runs each one with
``podman healthcheck run`` (what podman's timer would do), which records the result in the container's
state, and polls for ``healthy``.

Everything the test starts carries the project label and is removed in a finally block (containers,
volumes, the network), also when a test fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clients.pipeline import results
from clients.pipeline.generate_events import PageView, parse_time_ms
from clients.zookeeper_server import free_port
from tests.cluster.helpers import Admin, KafkaPythonProducer, read_all, verify
from tests.integration.helpers import unique, wait_until
from tests.spark import expected

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

REPO = Path(__file__).resolve().parents[2]
PROJECT = "kafkettecompose"
BROKERS = ("broker-1", "broker-2", "broker-3")
CORE = ("zookeeper", *BROKERS, "prometheus")
KCAT = shutil.which("kcat") or "kcat"
LOCAL_IMAGES = ("localhost/kafkette:latest", "localhost/kafkette-pipeline:latest",
                "localhost/kafkette-zookeeper:3.8", "localhost/kafkette-prometheus:latest")
BASE_IMAGE = "localhost/debian-base:bookworm"


def local_image_env() -> dict[str, str]:
    out = {}
    for line in (REPO / "deploy/local-images.env").read_text().splitlines():
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k] = v
    return out


@dataclass
class Stack:
    env: dict[str, str]
    ports: dict[str, int]
    project: str = PROJECT
    files: tuple[str, ...] = ("docker-compose.yml",)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{self.ports[b]}" for b in BROKERS)

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def run(self, *cmd: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(cmd, env=self.env, cwd=REPO, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def podman(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("podman", *args, timeout=timeout, check=check)

    def compose(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        # podman-compose 1.0 exits 0 whatever podman said; the tests check the containers themselves.
        files = [arg for f in self.files for arg in ("-f", str(REPO / f))]
        return self.run("podman-compose", "-p", self.project, *files, *args, timeout=timeout)

    def up(self, *services: str) -> None:
        self.compose("up", "-d", "--no-build", *services)

    def state(self, service: str) -> dict[str, Any]:
        out = self.podman("inspect", "--type", "container", self.container(service)).stdout
        return json.loads(out)[0]["State"]

    def health(self, service: str) -> str:
        st = self.state(service)
        return (st.get("Health") or st.get("Healthcheck") or {}).get("Status", "")

    def check_health(self, service: str) -> bool:
        """Run the service's healthcheck once (podman records the result); True when healthy."""
        self.podman("healthcheck", "run", self.container(service), check=False, timeout=60)
        return self.health(service) == "healthy"

    def wait_healthy(self, services: tuple[str, ...] | list[str], timeout: float = 300) -> None:
        for svc in services:
            wait_until(lambda s=svc: self.check_health(s), timeout,
                       lambda s=svc: f"{s} healthy; log:\n{self.logs(s)[-3000:]}", interval=2)

    def wait_formed(self, timeout: float = 180) -> None:
        """Every broker answers Metadata with all three brokers and a controller. Healthy says only that
        a broker's listeners accept connections; it learns who is alive from the controller's first
        UpdateMetadata, and the controller reaches a broker it has just seen by its name, which the
        network's resolver (aardvark-dns on podman) has left unanswered for tens of seconds at times
        after containers started or stopped."""
        from clients.devcluster import wait_for_cluster_metadata

        for b in BROKERS:
            wait_for_cluster_metadata("127.0.0.1", self.ports[b], len(BROKERS), timeout)

    def logs(self, service: str) -> str:
        proc = self.podman("logs", self.container(service), check=False)
        return proc.stdout + proc.stderr

    def project_ids(self, kind: str) -> list[str]:
        label = f"label=io.podman.compose.project={self.project}"
        if kind == "container":
            out = self.podman("ps", "-a", "-q", "--filter", label, check=False).stdout
        else:
            out = self.podman("volume", "ls", "-q", "--filter", label, check=False).stdout
        return out.split()

    def remove_everything(self) -> None:
        """Containers, volumes and the network of the project, whatever state they are in."""
        # Brokers before ZooKeeper, the way a stack stops cleanly (the last broker's controlled shutdown
        # needs ZooKeeper); then down, which stops what is left and removes containers and volumes.
        for svc in ("spark", "prometheus", *reversed(BROKERS)):
            self.podman("stop", self.container(svc), check=False, timeout=120)
        with contextlib.suppress(Exception):
            self.compose("down", "-v", "-t", "30", timeout=300)
        ids = self.project_ids("container")
        if ids:
            self.podman("rm", "-f", "-v", "-t", "10", *ids, check=False)
        vols = self.project_ids("volume")
        if vols:
            self.podman("volume", "rm", "-f", *vols, check=False)
        self.podman("network", "rm", "-f", f"{self.project}_default", check=False)


def new_stack(project: str, *files: str) -> Stack:
    """Host ports below 32768, free now, and the local images' names, as the compose file's variables."""
    ports = dict(zip((*BROKERS, "broker-1-metrics", "broker-2-metrics", "broker-3-metrics", "zookeeper",
                      "prometheus", "grafana"), (free_port() for _ in range(9)), strict=True))
    env = {**os.environ, **local_image_env(), "CONTAINERS_CONF": str(REPO / "deploy/containers.conf"),
           "KAFKETTE_ZOOKEEPER_PORT": str(ports["zookeeper"]),
           "KAFKETTE_PROMETHEUS_PORT": str(ports["prometheus"]),
           "KAFKETTE_GRAFANA_PORT": str(ports["grafana"])}
    for i, b in enumerate(BROKERS, 1):
        env[f"KAFKETTE_BROKER_{i}_PORT"] = str(ports[b])
        env[f"KAFKETTE_BROKER_{i}_METRICS_PORT"] = str(ports[f"{b}-metrics"])
    return Stack(env, ports, project, ("docker-compose.yml", *files))


@pytest.fixture(scope="module")
def images() -> Iterator[None]:
    """The images (the Debian base once from its cached tar, then podman's layer cache), and this
    machine's compose-test lock held for the module."""
    cache = REPO / ".cache" / "containers"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".compose-test.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one compose test per machine at a time
        new_stack(PROJECT).run("bash", str(REPO / "deploy/local-images.sh"), timeout=3000)
        yield


@pytest.fixture(scope="module")
def stack(images: None) -> Iterator[Stack]:
    st = new_stack(PROJECT)
    st.remove_everything()  # what an interrupted earlier run may have left
    try:
        st.up(*CORE)
        st.wait_healthy(CORE)
        st.wait_formed()
        yield st
    finally:
        st.remove_everything()


def test_zookeeper_ensemble_override(images: None) -> None:
    """deploy/compose.zk-ensemble.yml: three ZooKeeper servers form a quorum; the brokers keep working
    with the quorum's leader stopped. (Runs before the main stack, on a project of its own.)"""
    st = new_stack(f"{PROJECT}zk", "deploy/compose.zk-ensemble.yml")
    zks = ("zookeeper", "zookeeper-2", "zookeeper-3")
    st.remove_everything()
    try:
        st.up(*zks, *BROKERS)
        st.wait_healthy((*zks, *BROKERS))
        st.wait_formed()

        def modes() -> dict[str, str]:
            out = {}
            for z in zks:
                status = st.podman("exec", st.container(z), "zkServer.sh", "status", check=False).stdout
                m = re.search(r"^Mode: (\w+)", status, re.M)
                out[z] = m.group(1) if m else ""
            return out

        got = wait_until(lambda: (lambda m: m if sorted(m.values()) == ["follower", "follower", "leader"] else None)(
            modes()), 60, "one leader and two followers")
        leader = next(z for z, mode in got.items() if mode == "leader")
        connect = st.podman("exec", st.container("broker-1"), "grep", "^zookeeper.connect=",
                            "/var/lib/kafkette/server.properties").stdout
        assert connect.strip().endswith("zookeeper:2181,zookeeper-2:2181,zookeeper-3:2181/kafkette")
        st.podman("stop", st.container(leader))
        with Admin(st.bootstrap) as admin:
            admin.create_topic(unique("ensemble"), partitions=3, replication=3)  # needs ZooKeeper writes
        assert sorted(m for z, m in modes().items() if z != leader) == ["follower", "leader"]
    finally:
        st.remove_everything()


def test_secured_profile(images: None, tmp_path: Path) -> None:
    """deploy/compose.secure.yml: the init service makes the CA, the brokers' certificate, passwords and
    the SCRAM users; the brokers come up with SASL_SSL listeners and the ACL authorizer; host clients use
    the client files it wrote (the kafkette CLI, kcat, kafka-python); a user without ACLs is refused; a
    second init reuses what the first made. (A project of its own, before the main stack.)"""
    from clients.pipeline import client_security

    st = new_stack(f"{PROJECT}sec", "deploy/compose.secure.yml")
    host_dir = tmp_path / "secure"
    host_dir.mkdir()
    st.env["KAFKETTE_SECURE_DIR"] = str(host_dir)
    st.remove_everything()
    try:
        st.up("zookeeper")
        st.wait_healthy(["zookeeper"])
        st.up("secure-init")
        assert st.podman("wait", st.container("secure-init"), timeout=300).stdout.strip() == "0", st.logs("secure-init")
        assert "SCRAM credentials written to zookeeper:2181/kafkette for: admin, kafkette-broker" in st.logs("secure-init")
        ca = (host_dir / "ca.pem").read_bytes()
        props = host_dir / "client.properties"
        assert f"ssl.truststore.location={host_dir}/ca.pem" in props.read_text().splitlines()
        st.up(*BROKERS)
        st.wait_healthy(BROKERS)
        rendered = st.podman("exec", st.container("broker-2"), "cat", "/var/lib/kafkette/server.properties").stdout
        assert "listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL" in rendered.splitlines()
        assert "authorizer.class.name=kafka.security.authorizer.AclAuthorizer" in rendered.splitlines()

        def cli(*args: str, config: Path = props, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "clients.cli", args[0], "--command-config", str(config),
                                   "--bootstrap-server", st.bootstrap.split(",")[0], *args[1:]],
                                  input=stdin, capture_output=True, text=True, timeout=120, cwd=REPO)

        topic = unique("secure")
        created = cli("topics", "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "3")
        assert created.returncode == 0, created.stderr
        assert topic in cli("topics", "--list").stdout.split()
        # kcat with the written librdkafka config: every broker, at its EXTERNAL address, over SASL_SSL.
        md = subprocess.run([KCAT, "-F", str(host_dir / "kcat.conf"), "-b", st.bootstrap, "-L", "-J"],
                            capture_output=True, text=True, timeout=60)
        assert md.returncode == 0, md.stderr
        assert {b["name"] for b in json.loads(md.stdout)["brokers"]} == {f"localhost:{st.ports[b]}" for b in BROKERS}
        # kafka-python with the same settings: acks=all over the replicated (SASL_SSL) inter-broker listener.
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=st.bootstrap, acks="all",
                                 **client_security.kafka_python_config(client_security.load(props)))
        try:
            for i in range(30):
                producer.send(topic, value=f"secure-{i}".encode(), partition=i % 3).get(60)
        finally:
            producer.close(30)
        got = cli("console-consumer", "--topic", topic, "--from-beginning", "--max-messages", "30",
                  "--timeout-ms", "30000")
        assert sorted(got.stdout.split()) == sorted(f"secure-{i}" for i in range(30)), got.stderr
        # Another user authenticates but, without ACLs, may not write.
        assert cli("scram", "--alter", "--entity-type", "users", "--entity-name", "bob",
                   "--add-config", "SCRAM-SHA-512=[password=bob-secret]").returncode == 0
        bob = tmp_path / "bob.properties"
        bob.write_text(re.sub(r'username="admin" password="[^"]+"', 'username="bob" password="bob-secret"',
                              props.read_text()))
        refused = cli("console-producer", "--topic", topic, config=bob, stdin="nope\n")
        assert refused.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr
        # The init service again (as on every `up`): same CA, nothing rewritten in ZooKeeper.
        st.podman("rm", st.container("secure-init"))
        st.up("secure-init")
        assert st.podman("wait", st.container("secure-init"), timeout=300).stdout.strip() == "0"
        assert "for: nobody (already there)" in st.logs("secure-init")
        assert (host_dir / "ca.pem").read_bytes() == ca
    finally:
        st.remove_everything()


# ------------------------------------------------------------------------------------------------------


def test_images_built_from_the_local_debian_base(stack: Stack) -> None:
    base_layers = json.loads(stack.podman("image", "inspect", BASE_IMAGE).stdout)[0]["RootFS"]["Layers"]
    for image in LOCAL_IMAGES:
        layers = json.loads(stack.podman("image", "inspect", image).stdout)[0]["RootFS"]["Layers"]
        assert layers[:len(base_layers)] == base_layers, f"{image} is not built FROM {BASE_IMAGE}"
    # Nothing came from an image registry: none of the compose file's public default images is here.
    for public in ("docker.io/library/python:3.11-slim", "docker.io/library/zookeeper:3.8",
                   "docker.io/prom/prometheus:v2.53.0", "docker.io/grafana/grafana:11.1.0"):
        assert stack.podman("image", "exists", public, check=False).returncode == 1, public
    # The running services use those images.
    for svc, image in (("broker-1", "localhost/kafkette:latest"), ("zookeeper", "localhost/kafkette-zookeeper:3.8"),
                       ("prometheus", "localhost/kafkette-prometheus:latest")):
        got = stack.podman("inspect", "--type", "container", "--format", "{{.ImageName}}", stack.container(svc)).stdout
        assert got.strip() == image


def test_broker_runs_as_non_root_with_owned_data_dirs(stack: Stack) -> None:
    for b in BROKERS:
        status = stack.podman("exec", stack.container(b), "cat", "/proc/1/status").stdout
        uids = re.search(r"^Uid:\s+(\d+)\s+(\d+)", status, re.M)
        assert uids and uids.groups() == ("1000", "1000"), f"{b}: broker process runs as {uids and uids.groups()}"
        assert "kafkette" in stack.podman("exec", stack.container(b), "cat", "/proc/1/cmdline").stdout
        owner = stack.podman("exec", stack.container(b), "stat", "-c", "%U:%G %a", "/var/lib/kafkette/data").stdout
        assert owner.split()[0] == "kafkette:kafkette", owner
        meta = stack.podman("exec", stack.container(b), "stat", "-c", "%U", "/var/lib/kafkette/data/meta.properties")
        assert meta.stdout.strip() == "kafkette"


def test_started_as_root_the_broker_drops_to_kafkette_and_owns_its_data(stack: Stack) -> None:
    """`user: root` with a volume that root owns: the entrypoint hands the data dir to kafkette, drops to
    it, and the broker joins the cluster (a fourth broker, on the stack's network)."""
    volume = f"{stack.project}_root-started-data"
    name = f"{stack.project}_root-started"
    net = f"{stack.project}_default"
    try:
        stack.podman("volume", "create", "--label", f"io.podman.compose.project={stack.project}", volume)
        stack.podman("run", "--rm", "--user", "root", "--entrypoint", "sh", "-v", f"{volume}:/var/lib/kafkette",
                     "localhost/kafkette:latest", "-c", "mkdir -p /var/lib/kafkette/data && chown -R root:root "
                     "/var/lib/kafkette && chmod 700 /var/lib/kafkette/data")
        env = ["-e", "KAFKA_BROKER_ID=4", "-e", "KAFKA_ZOOKEEPER_CONNECT=zookeeper:2181/kafkette",
               "-e", "KAFKA_LISTENERS=INTERNAL://0.0.0.0:19092", "-e", f"KAFKA_ADVERTISED_LISTENERS=INTERNAL://{name}:19092",
               "-e", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=INTERNAL:PLAINTEXT",
               "-e", "KAFKA_INTER_BROKER_LISTENER_NAME=INTERNAL", "-e", "KAFKA_LOG_DIRS=/var/lib/kafkette/data"]
        stack.podman("run", "-d", "--name", name, "--user", "root", "--net", net, "--network-alias", name,
                     "--label", f"io.podman.compose.project={stack.project}", *env,
                     "-v", f"{volume}:/var/lib/kafkette", "localhost/kafkette:latest")
        # Registered in ZooKeeper (host clients do not see it: it has no EXTERNAL listener).
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=f"127.0.0.1:{stack.ports['zookeeper']}")
        zk.start(timeout=30)
        try:
            wait_until(lambda: "4" in zk.get_children("/kafkette/brokers/ids"), 90,
                       lambda: f"broker 4 registered; log:\n{stack.podman('logs', name, check=False).stderr[-3000:]}",
                       interval=1)
        finally:
            zk.stop()
            zk.close()
        status = stack.podman("exec", name, "cat", "/proc/1/status").stdout
        assert re.search(r"^Uid:\s+1000\s+1000", status, re.M), status
        owner = stack.podman("exec", name, "stat", "-c", "%U", "/var/lib/kafkette/data",
                             "/var/lib/kafkette/data/meta.properties").stdout.split()
        assert owner == ["kafkette", "kafkette"]
        stack.podman("stop", name, timeout=120)
        assert stack.podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip() == "0"
    finally:
        stack.podman("rm", "-f", "-v", name, check=False)
        stack.podman("volume", "rm", "-f", volume, check=False)


def test_every_service_is_healthy(stack: Stack) -> None:
    for svc in CORE:
        assert stack.check_health(svc), f"{svc}: {stack.health(svc)}"
        assert stack.state(svc)["Running"]


def kcat(stack: Stack, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run([KCAT, "-b", stack.bootstrap, *args], input=stdin, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, f"kcat {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def broker_history(stack: Stack) -> str:
    """Each broker's start time and restart count, and the end of its log: what an assertion on the
    cluster's metadata prints, since a broker that restarted answers with an empty broker list until
    the controller's first UpdateMetadata reaches it."""
    out = []
    for b in BROKERS:
        info = json.loads(stack.podman("inspect", "--type", "container", stack.container(b)).stdout)[0]
        out.append(f"{b}: started {info['State'].get('StartedAt')}, restarts {info.get('RestartCount', '?')}, "
                   f"log:\n{stack.logs(b)[-2000:]}")
    return "\n".join(out)


def test_host_clients_through_external_listeners(stack: Stack) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = unique("compose")
    with Admin(stack.bootstrap) as admin:
        admin.create_topic(topic, partitions=3, replication=3)  # waits for 3 in-sync replicas everywhere
        described = admin.describe(topic)
    assert sorted(described) == [0, 1, 2]
    for p in described.values():
        assert sorted(p["replicas"]) == [1, 2, 3] and p["isr"] == [1, 2, 3] and p["leader"] in (1, 2, 3)

    # kcat (librdkafka): metadata lists every broker at its EXTERNAL (host) address.
    md = json.loads(kcat(stack, "-L", "-J", "-t", topic))
    assert {(b["id"], b["name"]) for b in md["brokers"]} == {
        (i, f"localhost:{stack.ports[b]}") for i, b in enumerate(BROKERS, 1)}, broker_history(stack)
    (t,) = md["topics"]
    assert t["topic"] == topic and len(t["partitions"]) == 3
    assert all(len(p["replicas"]) == 3 and len(p["isrs"]) == 3 for p in t["partitions"])

    # kcat produces to every partition (so to every leader), kafka-python reads it back ...
    kcat_lines = [f"k{i}:kcat-{i}" for i in range(30)]
    for part in range(3):
        kcat(stack, "-P", "-t", topic, "-p", str(part), "-K:",
             stdin="\n".join(x for i, x in enumerate(kcat_lines) if i % 3 == part) + "\n")
    # ... kafka-python produces too (acks=all), kcat reads everything back.
    producer = KafkaProducer(bootstrap_servers=stack.bootstrap, acks="all", enable_idempotence=True)
    try:
        for i in range(30):
            producer.send(topic, key=f"p{i}".encode(), value=f"kafka-python-{i}".encode(), partition=i % 3).get(60)
    finally:
        producer.close(30)
    consumer = KafkaConsumer(bootstrap_servers=stack.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=15000)
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        seen: list[str] = []
        wait_until(lambda: seen.extend(m.value.decode() for ms in consumer.poll(1000).values() for m in ms)
                   or len(seen) >= 60, 60, "60 records through kafka-python")
    finally:
        consumer.close()
    assert sorted(seen) == sorted([f"kcat-{i}" for i in range(30)] + [f"kafka-python-{i}" for i in range(30)])
    out = kcat(stack, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k=%s\n")
    assert sorted(out.split()) == sorted([f"k{i}=kcat-{i}" for i in range(30)] + [f"p{i}=kafka-python-{i}" for i in range(30)])


def test_stopped_broker_keeps_idempotent_acks_all_producer_going(stack: Stack) -> None:
    topic = unique("compose-failover")
    with Admin(stack.bootstrap) as admin:
        admin.create_topic(topic, partitions=3, replication=3, configs={"min.insync.replicas": "2"})
        producer = KafkaPythonProducer(stack.bootstrap, topic, 3, interval=0.01).start()
        try:
            producer.wait_acks(100, timeout=60)
            # podman stop: SIGTERM, then SIGKILL after the stop timeout. A clean, controlled shutdown
            # exits 0 well inside it.
            stack.podman("stop", stack.container("broker-2"), timeout=120)
            st = stack.state("broker-2")
            assert not st["Running"] and st["ExitCode"] == 0, st
            assert "[KafkaServer id=2] shut down completed" in stack.logs("broker-2")
            for p in range(3):
                admin.wait_isr(topic, p, [1, 3], timeout=60)
            producer.wait_acks(300, timeout=120)  # two in-sync replicas: acks=all still succeeds
            stack.podman("start", stack.container("broker-2"))
            stack.wait_healthy(["broker-2"])
            for p in range(3):  # back in the ISR (Metadata, polled)
                admin.wait_isr(topic, p, [1, 2, 3], timeout=180)
            producer.wait_acks(100, timeout=60)
        finally:
            log = producer.stop()
    counts = verify([log], read_all(stack.bootstrap, topic, 3))
    assert not log.failed, f"sends failed: {log.failed[:5]}"
    assert counts["acked"] >= 500 and counts["records"] == counts["acked"], counts


def test_prometheus_scrapes_every_broker(stack: Stack) -> None:
    url = f"http://127.0.0.1:{stack.ports['prometheus']}/api/v1/query?query=up"

    def up_targets() -> dict[str, str]:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success"
        return {s["metric"]["instance"]: s["value"][1] for s in body["data"]["result"]
                if s["metric"].get("job") == "kafkette"}

    want = {f"{b}:9404": "1" for b in BROKERS}
    wait_until(lambda: up_targets() == want, 120, lambda: f"up == 1 for {sorted(want)}", interval=2)
    # and it holds real broker metrics, not only its own up series
    q = "http://127.0.0.1:{}/api/v1/query?query=count%20by%20(instance)%20({{job%3D%22kafkette%22}})"
    with urllib.request.urlopen(q.format(stack.ports["prometheus"]), timeout=10) as r:
        series = json.loads(r.read())["data"]["result"]
    assert {s["metric"]["instance"] for s in series} == set(want)
    assert all(int(s["value"][1]) > 10 for s in series)


def test_pipeline_service_prints_correct_counts(stack: Stack) -> None:
    stack.up("spark")
    spark = stack.container("spark")
    # Its healthcheck (the pipeline process is alive) goes green while it runs.
    wait_until(lambda: stack.check_health("spark") or not stack.state("spark")["Running"], 300,
               "the spark service healthy or finished", interval=2)
    exit_code = stack.podman("wait", spark, timeout=2400).stdout.strip()
    out = stack.logs("spark")
    assert exit_code == "0", f"pipeline exited {exit_code}:\n{out[-5000:]}"
    produced = re.search(r"^produced (\d+) page views to page-views", out, re.M)
    summary = re.search(r"^page-views-per-minute: (\d+) window/page results \((\d+) distinct\), (\d+) views counted",
                        out, re.M)
    assert produced and summary, out[-5000:]
    # The counts the job should print, computed without Spark from what the input topic holds.
    events = [PageView(v["event_id"], parse_time_ms(v["event_time"]), 0, v["user_id"], v["session_id"], v["page"],
                       v["referrer"], v["user_agent"], v["country"], v["duration_ms"])
              for _, v in results.read_topic(stack.bootstrap, "page-views")]
    assert len(events) == int(produced.group(1))
    want = expected.emitted_windows(events)
    got, keys = expected.from_topic(results.read_topic(stack.bootstrap, "page-views-per-minute"))
    assert got == want, expected.diff(want, got)
    assert int(summary.group(1)) == len(want) == int(summary.group(2))
    assert int(summary.group(3)) == sum(v["views"] for v in want.values())
    print(f"pipeline service: {produced.group(0)}; {summary.group(0)}")
    stack.podman("rm", spark)


def test_down_then_up_keeps_the_data(stack: Stack) -> None:
    topic = unique("compose-persist")
    with Admin(stack.bootstrap) as admin:
        admin.create_topic(topic, partitions=3, replication=3)
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=stack.bootstrap, acks="all")
    try:
        for i in range(90):
            producer.send(topic, value=f"persist-{i}".encode(), partition=i % 3).get(60)
    finally:
        producer.close(30)
    before = read_all(stack.bootstrap, topic, 3)

    # Every broker, the last one too (it has nobody to hand its leaderships to and retries its controlled
    # shutdown), exits cleanly on SIGTERM inside the stop timeout: the compose file's stop_grace_period,
    # which deploy/containers.conf repeats for podman. Then down removes the containers, not the volumes.
    stack.podman("stop", stack.container("prometheus"))
    for b in reversed(BROKERS):
        timeout = json.loads(stack.podman("inspect", "--type", "container", stack.container(b)).stdout)[0]["Config"]
        assert timeout["StopTimeout"] == 60 and timeout["StopSignal"] in (15, "SIGTERM"), timeout
        stack.podman("stop", stack.container(b), timeout=120)
        st = stack.state(b)
        # The end of its log in the message: the containers are gone once the test's stack is torn down,
        # and a shutdown that hangs past the stop timeout is only explained by what the broker last did.
        assert st["ExitCode"] == 0, (f"{b} exited {st['ExitCode']} (137: killed after the stop timeout); "
                                     f"the end of its log:\n{stack.logs(b)[-6000:]}")
        assert f"[KafkaServer id={b[-1]}] shut down completed" in stack.logs(b)
    stack.compose("down", "-t", "30")
    assert stack.project_ids("container") == []
    volumes = set(stack.project_ids("volume"))
    assert {f"{stack.project}_{b}-data" for b in BROKERS} <= volumes
    stack.up(*CORE)
    stack.wait_healthy(CORE)
    stack.wait_formed()
    with Admin(stack.bootstrap) as admin:
        wait_until(lambda: (lambda d: len(d) == 3 and all(p["isr"] == [1, 2, 3] for p in d.values()))(
            admin.describe(topic)), 180, f"{topic} fully replicated after up")
    after = read_all(stack.bootstrap, topic, 3)
    assert after == before
    assert sorted(v.decode() for recs in after.values() for _, v in recs) == sorted(f"persist-{i}" for i in range(90))
