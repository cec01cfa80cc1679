"""What TLS costs the fetch path: consume throughput over SSL against PLAINTEXT, on kafkette and on
Apache Kafka 3.9.1 configured alike (Kafka's own TLS cost is the anchor: on PLAINTEXT both brokers
sendfile, on SSL both read the log and encrypt it).

Each broker gets one PLAINTEXT and one SSL listener (PEM keystore, no client authentication). One topic
per broker is filled once over PLAINTEXT with RECORDS records of RECORD_SIZE bytes (one partition,
uncompressed, so the fetched bytes are the log's bytes). Then Kafka's ``ConsumerPerformance`` reads the
whole topic again and again, alternating protocols and brokers, each run with a fresh consumer group.
Printed: every run (MB/s of the fetch phase, the broker's CPU seconds from /proc/<pid>/stat), the
medians, the SSL/PLAINTEXT ratio per broker and the kafkette/Kafka ratio per protocol. Kafka runs with
the JVM's full JIT (see ``full_jit``). The consumer is the same Java client for both brokers.

    python -m tests.bench tls                 # or: make bench
    KAFKETTE_BENCH_RECORDS=300000 KAFKETTE_BENCH_RUNS=5 python -m tests.bench_tls [--brokers kafkette,kafka]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RECORD_SIZE = 1024
PROTOCOLS = ("PLAINTEXT", "SSL")
HOST = "127.0.0.1"
PORTS = {"kafkette": {"PLAINTEXT": 21400, "SSL": 21401}, "kafka": {"PLAINTEXT": 21410, "SSL": 21411}}


@dataclass
class Broker:
    name: str
    pid: int
    ports: dict[str, int]
    topic: str = ""

    def bootstrap(self, protocol: str) -> str:
        return f"{HOST}:{self.ports[protocol]}"


@dataclass
class Results:
    mb_s: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    cpu: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, broker: str, protocol: str, mb_s: float, cpu: float) -> None:
        self.mb_s.setdefault((broker, protocol), []).append(mb_s)
        self.cpu.setdefault((broker, protocol), []).append(cpu)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- brokers --------------------------------------------------------------------------------------


def broker_configs(directory: Path, ports: dict[str, int]) -> dict[str, str]:
    listeners = ",".join(f"{p}://{HOST}:{port}" for p, port in ports.items())
    return {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "security.inter.broker.protocol": "PLAINTEXT",
        # Unencrypted key file: Kafka on Java 17 cannot read PBES2-encrypted PEM keys.
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(directory / "broker-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(directory / "ca.pem"),
    }


def write_certificates(directory: Path) -> None:
    from clients.certificates import CertificateAuthority

    ca = CertificateAuthority.create("CN=kafkette TLS bench CA")
    ca.write_pem(directory / "ca.pem")
    ca.issue_server("CN=localhost").write_pem(directory, "broker")


def client_config(directory: Path, protocol: str) -> Path:
    props = {"security.protocol": protocol}
    if protocol == "SSL":
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(directory / "ca.pem")})
    path = directory / f"client-{protocol}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


@contextmanager
def kafkette_broker(directory: Path) -> Iterator[Broker]:
    from clients.devcluster import LocalCluster

    ports = PORTS["kafkette"]
    overrides = {"offsets.topic.num.partitions": "5", **broker_configs(directory, ports)}
    with LocalCluster(1, base_port=ports["PLAINTEXT"], overrides=overrides, metrics_base_port=None) as cluster:
        process = cluster.brokers[0].process
        assert process is not None
        yield Broker("kafkette", process.pid, ports)


@contextmanager
def full_jit() -> Iterator[None]:
    """KafkaZkBroker starts Kafka with -XX:TieredStopAtLevel=1 (a quick start for tests). Code compiled
    by C1 only has no AES-GCM intrinsics, which makes Kafka's TLS many times dearer than in production,
    so here Kafka runs with the JVM's full JIT, as it does in production."""
    real = subprocess.Popen

    def popen(args: Any, *rest: Any, **kwargs: Any) -> Any:
        if isinstance(args, list) and "kafka.Kafka" in args:
            args = [a for a in args if a != "-XX:TieredStopAtLevel=1"]
        return real(args, *rest, **kwargs)

    subprocess.Popen = popen  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        subprocess.Popen = real  # type: ignore[misc]


@contextmanager
def apache_kafka_broker(directory: Path) -> Iterator[Broker]:
    from tests.ops.kafka_broker import KafkaZkBroker

    ports = PORTS["kafka"]
    kafka = KafkaZkBroker(broker_configs(directory, ports))
    kafka.port = ports["PLAINTEXT"]
    try:
        with full_jit():
            kafka.start()
        assert kafka.process is not None
        yield Broker("kafka", kafka.process.pid, ports)
    finally:
        kafka.stop()


STARTERS = {"kafkette": kafkette_broker, "kafka": apache_kafka_broker}


# --- load -----------------------------------------------------------------------------------------


def java(main_class: str, *args: str) -> str:
    from tests.kafka_dist import classpath

    proc = subprocess.run(["java", "-Xmx512m", "-cp", classpath(), main_class, *args],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{main_class} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def fill(broker: Broker, config: Path, records: int) -> None:
    from tests.integration.helpers import create_topic

    broker.topic = f"bench-tls-{int(time.time() * 1000) % 100000}"
    create_topic(broker.bootstrap("PLAINTEXT"), broker.topic, 1)
    java("org.apache.kafka.tools.ProducerPerformance", "--topic", broker.topic, "--num-records", str(records),
         "--record-size", str(RECORD_SIZE), "--throughput", "-1", "--producer.config", str(config),
         "--producer-props", f"bootstrap.servers={broker.bootstrap('PLAINTEXT')}", "acks=1", "linger.ms=5",
         "batch.size=262144", "buffer.memory=67108864")


def consume_mb_s(bootstrap: str, config: Path, topic: str, records: int, group: str) -> float:
    """MB/s of the fetch phase (ConsumerPerformance's fetch.MB.sec, the group join excluded)."""
    out = java("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
               "--messages", str(records), "--consumer.config", str(config), "--group", group,
               "--timeout", "60000", "--hide-header")
    rows = [ln.split(", ") for ln in out.splitlines() if ln.count(", ") >= 9]
    if not rows or int(rows[-1][4]) < records:
        raise RuntimeError(f"ConsumerPerformance did not read {records} records:\n{out[-2000:]}")
    return float(rows[-1][8]) * 1.048576  # its MB are MiB


def bench(brokers: list[Broker], configs: dict[str, Path], records: int, runs: int) -> Results:
    results = Results()
    print(f"ConsumerPerformance reading {records:,} records of {RECORD_SIZE} B "
          f"({records * RECORD_SIZE / 1e6:.0f} MB) from one partition; {runs} runs per broker and protocol, "
          "alternating", flush=True)
    for run in range(runs):
        for protocol in PROTOCOLS:
            for broker in brokers:
                cpu0 = cpu_seconds(broker.pid)
                mb_s = consume_mb_s(broker.bootstrap(protocol), configs[protocol], broker.topic, records,
                                    f"bench-tls-{protocol}-{run}-{time.monotonic_ns()}")
                cpu = cpu_seconds(broker.pid) - cpu0
                results.add(broker.name, protocol, mb_s, cpu)
                print(f"  run {run + 1} {broker.name:9} {protocol:10} consume {mb_s:7.1f} MB/s   "
                      f"broker CPU {cpu:5.2f} s", flush=True)
    return results


def report(results: Results, names: list[str]) -> None:
    med = statistics.median
    print("\nmedians")
    print(f"  {'broker':9} {'protocol':10} {'consume MB/s':>12} {'CPU s':>6}")
    for name in names:
        for protocol in PROTOCOLS:
            print(f"  {name:9} {protocol:10} {med(results.mb_s[(name, protocol)]):>12.1f} "
                  f"{med(results.cpu[(name, protocol)]):>6.2f}")
    print("\nSSL / PLAINTEXT (consume throughput; broker CPU seconds per run)")
    for name in names:
        tput = med(results.mb_s[(name, "SSL")]) / med(results.mb_s[(name, "PLAINTEXT")])
        plain_cpu = med(results.cpu[(name, "PLAINTEXT")])
        cpu = med(results.cpu[(name, "SSL")]) / plain_cpu if plain_cpu else float("nan")
        print(f"  {name:9} throughput {tput:.2f}   CPU {cpu:.2f}")
    if set(names) == {"kafkette", "kafka"}:
        print("\nkafkette / Apache Kafka (consume throughput)")
        for protocol in PROTOCOLS:
            ratio = med(results.mb_s[("kafkette", protocol)]) / med(results.mb_s[("kafka", protocol)])
            print(f"  {protocol:10} {ratio:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--brokers", default="kafkette,kafka", help="comma-separated: kafkette, kafka")
    # tests.bench calls main() with no arguments (its own argv names the benchmarks to run).
    args = ap.parse_args(argv or [])
    names = [n for n in args.brokers.split(",") if n]
    records = int(os.environ.get("KAFKETTE_BENCH_RECORDS", "200000"))
    runs = int(os.environ.get("KAFKETTE_BENCH_RUNS", "3"))
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        write_certificates(directory)
        configs = {p: client_config(directory, p) for p in PROTOCOLS}
        brokers = []
        for name in names:
            broker = stack.enter_context(STARTERS[name](directory))
            fill(broker, configs["PLAINTEXT"], records)
            brokers.append(broker)
        results = bench(brokers, configs, records, runs)
        report(results, names)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
