"""``make run-secure`` as a user meets it: ``python -m clients.devcluster --secure`` as a real process
(real ZooKeeper, three real brokers, SASL_SSL with SCRAM-SHA-512 everywhere, the ACL authorizer), then
the commands it prints, run exactly as printed: the kafkette CLI with the written client.properties,
kcat with the written kcat.conf, and the kafka-python snippet. A user without ACLs is refused until the
printed ``kafkette acls`` command grants it.

The state directory keeps the CA and the passwords: a second setup over the same directory reuses
them (a fast test, no cluster).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Fixed ports in this suite's range: clients, inter-broker listeners, ZooKeeper.
CLIENT_PORT = 24500
INTER_BROKER_PORT = 24510
ZK_PORT = 24520
TOPIC = "orders"
ALICE_PASSWORD = "alice-secret"


@dataclass
class RunningSecureCluster:
    process: subprocess.Popen[bytes]
    state_dir: Path
    output: str

    def printed_block(self, header: str) -> str:
        """The indented lines printed under ``header:``, dedented."""
        lines = self.output.splitlines()
        start = lines.index(f"{header}:") + 1
        block = []
        for line in lines[start:]:
            if not line.startswith("    "):
                break
            block.append(line)
        return textwrap.dedent("\n".join(block))

    def printed_command(self, prefix: str) -> list[str]:
        """The printed command line that starts with ``prefix`` (continuation lines joined), split as
        a shell would."""
        text = self.output.replace("\\\n", " ")
        for line in text.splitlines():
            at = line.find(prefix)
            if at >= 0:
                return _resolve(shlex.split(line[at:]))
        raise AssertionError(f"no printed command starting with {prefix!r} in:\n{self.output}")

    @property
    def client_properties(self) -> Path:
        return self.state_dir / "client.properties"

    def log_tails(self) -> str:
        tails = []
        for log in sorted(self.state_dir.glob("cluster/broker-*/broker.log")):
            tails.append(f"--- {log}\n{log.read_text(errors='replace')[-3000:]}")
        return "\n".join(tails)


def _resolve(words: list[str]) -> list[str]:
    """``kafkette`` is the venv's console script; run it with this interpreter."""
    if words[0] == "kafkette":
        return [sys.executable, "-m", "clients.cli", *words[1:]]
    return words


def run(cmd: list[str], *, input: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, input=input, timeout=timeout, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def ok(cmd: list[str], **kwargs: object) -> str:
    proc = run(cmd, **kwargs)  # type: ignore[arg-type]
    assert proc.returncode == 0, f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _wait_ports_free(ports: list[int], timeout: float = 30.0) -> None:
    """A cluster of an earlier run may still be shutting down on these fixed ports."""
    deadline = time.monotonic() + timeout
    busy = ports
    while busy:
        busy = []
        for port in ports:
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    busy.append(port)
        if busy and time.monotonic() > deadline:
            pytest.fail(f"ports {busy} are in use: something else runs on this suite's fixed ports")
        if busy:
            time.sleep(0.2)


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSecureCluster]:
    _wait_ports_free([*range(CLIENT_PORT, CLIENT_PORT + 3), *range(INTER_BROKER_PORT, INTER_BROKER_PORT + 3), ZK_PORT])
    state_dir = tmp_path_factory.mktemp("run-secure")
    out_path = state_dir.parent / f"{state_dir.name}.out"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "clients.devcluster", "--secure", "--port", str(CLIENT_PORT),
             "--inter-broker-port", str(INTER_BROKER_PORT), "--zk-port", str(ZK_PORT), "--metrics-port", "-1",
             "--dir", str(state_dir)],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    cluster = RunningSecureCluster(proc, state_dir, "")
    try:
        deadline = time.monotonic() + 120
        while "bootstrap servers:" not in cluster.output:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the secure dev cluster did not come up (status {proc.poll()}):\n"
                            f"{out_path.read_text(errors='replace')}\n{cluster.log_tails()}")
            time.sleep(0.2)
            cluster.output = out_path.read_text(errors="replace")
        yield cluster
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def orders_topic(secure_cluster: RunningSecureCluster) -> str:
    ok([sys.executable, "-m", "clients.cli", "topics", "--command-config", str(secure_cluster.client_properties),
        "--bootstrap-server", f"localhost:{CLIENT_PORT}", "--create", "--topic", TOPIC, "--partitions", "3",
        "--replication-factor", "3"])
    return TOPIC


@pytest.mark.slow
def test_printed_files_and_settings(secure_cluster: RunningSecureCluster) -> None:
    props = secure_cluster.client_properties.read_text()
    for line in ("security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512", "ssl.truststore.type=PEM",
                 f"ssl.truststore.location={secure_cluster.state_dir / 'ssl' / 'ca.pem'}"):
        assert line in props.splitlines()
    assert re.search(r'^sasl\.jaas\.config=org\.apache\.kafka\.common\.security\.scram\.ScramLoginModule required '
                     r'username="admin" password="[^"]+";$', props, re.M)
    assert str(secure_cluster.client_properties) in secure_cluster.output
    assert "-----BEGIN CERTIFICATE-----" in (secure_cluster.state_dir / "ssl" / "ca.pem").read_text()
    # Every listener of every broker is SASL_SSL; brokers talk over BROKER as a super user.
    server = (secure_cluster.state_dir / "cluster" / "broker-1" / "server.properties").read_text()
    assert "listener.security.protocol.map=CLIENT:SASL_SSL,BROKER:SASL_SSL" in server
    assert "super.users=User:admin;User:kafkette-broker" in server
    assert "authorizer.class.name=kafka.security.authorizer.AclAuthorizer" in server


@pytest.mark.slow
def test_kafkette_cli_as_printed(secure_cluster: RunningSecureCluster, orders_topic: str) -> None:
    listed = ok(secure_cluster.printed_command("kafkette topics"))
    assert orders_topic in listed.split()
    # Produce and consume with the same properties file.
    base = ["--command-config", str(secure_cluster.client_properties), "--bootstrap-server", f"localhost:{CLIENT_PORT}"]
    ok([sys.executable, "-m", "clients.cli", "console-producer", *base, "--topic", orders_topic],
       input="one\ntwo\nthree\n")
    got = ok([sys.executable, "-m", "clients.cli", "console-consumer", *base, "--topic", orders_topic,
              "--from-beginning", "--max-messages", "3", "--timeout-ms", "20000"])
    assert sorted(got.split()) == ["one", "three", "two"]


@pytest.mark.slow
def test_kcat_as_printed(secure_cluster: RunningSecureCluster, orders_topic: str) -> None:
    shown = ok(secure_cluster.printed_command("kcat -F"))
    assert "3 brokers:" in shown
    assert f'topic "{orders_topic}" with 3 partitions' in shown
    # The same config file produces and consumes.
    kcat = secure_cluster.printed_command("kcat -F")[:-1]  # without -L
    ok([*kcat, "-P", "-t", "kcat-secure", "-K:"], input="k1:v1\nk2:v2\n")
    got = ok([*kcat, "-C", "-t", "kcat-secure", "-e", "-c", "2", "-f", "%k=%s\\n"])
    assert sorted(got.split()) == ["k1=v1", "k2=v2"]


@pytest.mark.slow
def test_kafka_python_as_printed(secure_cluster: RunningSecureCluster, orders_topic: str) -> None:
    snippet = secure_cluster.printed_block("kafka-python")
    out = ok([sys.executable, "-c", snippet])
    assert orders_topic in out


def _alice_properties(secure_cluster: RunningSecureCluster) -> Path:
    """client.properties with alice's credentials instead of admin's."""
    text = re.sub(r'username="admin" password="[^"]+"', f'username="alice" password="{ALICE_PASSWORD}"',
                  secure_cluster.client_properties.read_text())
    path = secure_cluster.state_dir / "alice.properties"
    path.write_text(text)
    return path


def _alice_reads(secure_cluster: RunningSecureCluster, topic: str) -> subprocess.CompletedProcess[str]:
    """kafka-python as alice: assign all partitions (no group) and read from the beginning; exit
    status 3 when the topic is not visible to alice."""
    ca = secure_cluster.state_dir / "ssl" / "ca.pem"
    code = f"""
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers="localhost:{CLIENT_PORT}", security_protocol="SASL_SSL",
                  sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                  sasl_plain_password="{ALICE_PASSWORD}", ssl_cafile="{ca}", enable_auto_commit=False,
                  consumer_timeout_ms=15000)
# kafka-python logs "Topic ... is not authorized" and knows no partitions of a topic it may not describe.
if not c.partitions_for_topic("{topic}"):
    print("refused: no partitions visible")
    sys.exit(3)
c.assign([TopicPartition("{topic}", p) for p in range(3)])
c.seek_to_beginning()
print(" ".join(sorted(r.value.decode() for r in c)))
"""
    return run([sys.executable, "-c", code], timeout=90)


@pytest.mark.slow
def test_user_without_acls_is_refused_until_an_acl_allows_it(secure_cluster: RunningSecureCluster,
                                                              orders_topic: str) -> None:
    admin = ["--command-config", str(secure_cluster.client_properties),
             "--bootstrap-server", f"localhost:{CLIENT_PORT}"]
    ok([sys.executable, "-m", "clients.cli", "console-producer", *admin, "--topic", orders_topic],
       input="pizza\nsalad\n")
    # The printed command creates alice's SCRAM credential (admin is a super user).
    ok(secure_cluster.printed_command("kafkette scram"))
    alice = ["--command-config", str(_alice_properties(secure_cluster)),
             "--bootstrap-server", f"localhost:{CLIENT_PORT}"]

    # Authenticated, but no ACL: producing and reading are refused.
    produce = run([sys.executable, "-m", "clients.cli", "console-producer", *alice, "--topic", orders_topic],
                  input="soup\n")
    assert produce.returncode != 0
    assert "TOPIC_AUTHORIZATION_FAILED" in produce.stderr + produce.stdout
    consume = run([sys.executable, "-m", "clients.cli", "console-consumer", *alice, "--topic", orders_topic,
                   "--partition", "0", "--from-beginning", "--timeout-ms", "5000"])
    assert consume.returncode != 0
    assert "TOPIC_AUTHORIZATION_FAILED" in consume.stderr + consume.stdout
    refused = _alice_reads(secure_cluster, orders_topic)
    assert refused.returncode == 3, refused.stdout + refused.stderr

    # The printed ACL command grants Read on the topic: alice reads what admin wrote.
    ok(secure_cluster.printed_command("kafkette acls"))
    allowed = _alice_reads(secure_cluster, orders_topic)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert {"pizza", "salad"} <= set(allowed.stdout.split())
    # Read does not imply Write: the (idempotent) producer is refused its producer id, as Kafka refuses
    # InitProducerId to a principal with neither IdempotentWrite on the cluster nor Write on any topic.
    produce = run([sys.executable, "-m", "clients.cli", "console-producer", *alice, "--topic", orders_topic],
                  input="soup\n")
    assert produce.returncode != 0
    assert "CLUSTER_AUTHORIZATION_FAILED" in produce.stderr + produce.stdout
    # Write granted with kafka-acls' producer shortcut: now alice's produce goes through.
    ok([sys.executable, "-m", "clients.cli", "acls", *admin, "--add", "--allow-principal", "User:alice",
        "--producer", "--topic", orders_topic])
    ok([sys.executable, "-m", "clients.cli", "console-producer", *alice, "--topic", orders_topic], input="soup\n")
    assert "soup" in _alice_reads(secure_cluster, orders_topic).stdout.split()


def test_second_setup_reuses_ca_and_passwords(tmp_path: Path) -> None:
    from clients.devcluster_secure import SecureDevCluster

    first = SecureDevCluster(1, base_port=CLIENT_PORT, state_dir=tmp_path)
    ca, broker_cert = (tmp_path / "ssl" / "ca.pem").read_bytes(), (tmp_path / "ssl" / "broker.crt").read_bytes()
    second = SecureDevCluster(1, base_port=CLIENT_PORT, state_dir=tmp_path)
    assert (tmp_path / "ssl" / "ca.pem").read_bytes() == ca
    assert (tmp_path / "ssl" / "broker.crt").read_bytes() == broker_cert
    assert second.passwords == first.passwords
    assert (tmp_path / "client.properties").stat().st_mode & 0o077 == 0  # holds a password
    # A certificate the CA did not sign (another state directory's) is replaced.
    shutil.copy(tmp_path / "ssl" / "ca.pem", tmp_path / "old-ca.pem")
    (tmp_path / "ssl" / "ca.pem").unlink()
    (tmp_path / "ssl" / "ca.key").unlink()
    SecureDevCluster(1, base_port=CLIENT_PORT, state_dir=tmp_path)
    assert (tmp_path / "ssl" / "ca.pem").read_bytes() != ca
    assert (tmp_path / "ssl" / "broker.crt").read_bytes() != broker_cert
