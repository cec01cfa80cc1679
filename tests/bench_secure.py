"""What security costs: produce and consume throughput over SASL_SSL (SCRAM-SHA-512) against PLAINTEXT,
on kafkette and on Apache Kafka 3.9.1 configured alike.

Each broker has a PLAINTEXT and a SASL_SSL listener (TLS with a PEM keystore, SCRAM-SHA-512 with a
user made through AlterUserScramCredentials). Kafka's own ``ProducerPerformance`` and
``ConsumerPerformance`` drive them, with a client config file holding the security settings. Runs
alternate between the brokers and the protocols; each run produces RECORDS records of RECORD_SIZE
bytes (acks=1, linger.ms=5, batch.size 64 KiB, uncompressed) to a fresh one-partition topic, then a
consumer group reads them back. Printed: every run (records/s, MB/s, the broker's CPU seconds from
/proc/<pid>/stat), the medians, the SASL_SSL/PLAINTEXT ratio per broker and the kafkette/Kafka ratio
per protocol.

    python -m tests.bench secure               # or: make bench
    KAFKETTE_BENCH_RECORDS=200000 KAFKETTE_BENCH_RUNS=3 python -m tests.bench_secure [--brokers kafkette,kafka]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests import benchmark_clients_support as bu

RECORD_SIZE = 1024
PROTOCOLS = ("PLAINTEXT", "SASL_SSL")
MECHANISM = "SCRAM-SHA-512"
USER, PASSWORD = "bench", "bench-secret"
HOST = "127.0.0.1"
# Ports 24200-24201 for kafkette, 24210-24211 for Apache Kafka (PLAINTEXT, SASL_SSL).
PORTS = {"kafkette": {"PLAINTEXT": 24200, "SASL_SSL": 24201}, "kafka": {"PLAINTEXT": 24210, "SASL_SSL": 24211}}
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PRODUCER_PROPS = ("linger.ms=5", "batch.size=65536", "buffer.memory=67108864")
# The client JVMs this benchmark's numbers in BENCHMARKS.md were measured with: a heap limit and the
# JVM's defaults otherwise.
TOOL_JVM_OPTIONS = ("-Xmx512m",)


@dataclass
class Broker:
    name: str
    pid: int
    ports: dict[str, int]

    def bootstrap(self, protocol: str) -> str:
        return f"{HOST}:{self.ports[protocol]}"


@dataclass
class Run:
    produce_rps: float
    produce_cpu: float
    consume_rps: float
    consume_cpu: float


@dataclass
class Results:
    runs: dict[tuple[str, str], list[Run]] = field(default_factory=dict)

    def add(self, broker: str, protocol: str, run: Run) -> None:
        self.runs.setdefault((broker, protocol), []).append(run)

    def median(self, broker: str, protocol: str, attr: str) -> float:
        return bu.median(getattr(r, attr) for r in self.runs[(broker, protocol)])


def _mb(rps: float) -> float:
    return rps * RECORD_SIZE / 1e6


# --- brokers --------------------------------------------------------------------------------------


def broker_configs(directory: Path, ports: dict[str, int]) -> dict[str, str]:
    """The security part of server.properties, the same for both brokers."""
    listeners = ",".join(f"{p}://{HOST}:{port}" for p, port in ports.items())
    return {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "security.inter.broker.protocol": "PLAINTEXT",
        # Unencrypted key: Kafka on Java 17 cannot read PBES2-encrypted PEM keys.
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(directory / "broker-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(directory / "ca.pem"),
        "sasl.enabled.mechanisms": MECHANISM,
        f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": f"{SCRAM_MODULE} required;",
    }


def write_certificates(directory: Path) -> None:
    from clients.certificates import CertificateAuthority

    ca = CertificateAuthority.create("CN=kafkette bench CA")
    ca.write_pem(directory / "ca.pem")
    ca.issue_server("CN=localhost").write_pem(directory, "broker")


def client_config(directory: Path, protocol: str) -> Path:
    """A Java client properties file for ``protocol``."""
    props = {"security.protocol": protocol}
    if protocol == "SASL_SSL":
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(directory / "ca.pem"),
                      "sasl.mechanism": MECHANISM,
                      "sasl.jaas.config": f'{SCRAM_MODULE} required username="{USER}" password="{PASSWORD}";'})
    path = directory / f"client-{protocol}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def add_scram_user(plaintext_bootstrap: str) -> None:
    from kafka.admin import KafkaAdminClient, UserScramCredentialUpsertion

    admin = KafkaAdminClient(bootstrap_servers=plaintext_bootstrap, client_id="bench-admin")
    try:
        result = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(USER, MECHANISM, PASSWORD)])
    finally:
        admin.close()
    if any(error is not None for error in result.values()):
        raise RuntimeError(f"AlterUserScramCredentials: {result}")


@contextmanager
def kafkette_broker(directory: Path) -> Iterator[Broker]:
    from clients.devcluster import LocalCluster

    ports = PORTS["kafkette"]
    overrides = {"offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "5",
                 **broker_configs(directory, ports)}
    with LocalCluster(1, base_port=ports["PLAINTEXT"], overrides=overrides, metrics_base_port=None) as cluster:
        process = cluster.brokers[0].process
        assert process is not None
        yield Broker("kafkette", process.pid, ports)


@contextmanager
def apache_kafka_broker(directory: Path) -> Iterator[Broker]:
    from tests.ops.kafka_broker import KafkaZkBroker

    ports = PORTS["kafka"]
    kafka = KafkaZkBroker(broker_configs(directory, ports), jvm_options=())  # the full JIT, as in production
    kafka.port = ports["PLAINTEXT"]
    try:
        kafka.start()
        assert kafka.process is not None
        yield Broker("kafka", kafka.process.pid, ports)
    finally:
        kafka.stop()


STARTERS = {"kafkette": kafkette_broker, "kafka": apache_kafka_broker}


# --- load -----------------------------------------------------------------------------------------


def produce(bootstrap: str, config: Path, topic: str, records: int) -> float:
    """Records/s as ProducerPerformance reports them."""
    return bu.producer_performance(bootstrap, topic, records, RECORD_SIZE, "1", PRODUCER_PROPS,
                                   producer_config=config, jvm_options=TOOL_JVM_OPTIONS).records_per_s


def consume(bootstrap: str, config: Path, topic: str, records: int) -> float:
    """Records/s of the fetch phase (after the group's join, which is no throughput), from
    ConsumerPerformance's fetch.nMsg.sec."""
    return bu.consumer_performance(bootstrap, topic, records, f"{topic}-reader", consumer_config=config,
                                   jvm_options=TOOL_JVM_OPTIONS).fetch_records_per_s


def create_topic(bootstrap: str, topic: str) -> None:
    from tests.integration.helpers import create_topic as create

    create(bootstrap, topic, 1)


def one_run(broker: Broker, protocol: str, config: Path, records: int, label: str) -> Run:
    topic = f"bench-{protocol.lower()}-{int(time.time() * 1000) % 10_000_000}"
    create_topic(broker.bootstrap("PLAINTEXT"), topic)
    cpu0 = bu.cpu_seconds(broker.pid)
    p_rps = produce(broker.bootstrap(protocol), config, topic, records)
    cpu1 = bu.cpu_seconds(broker.pid)
    c_rps = consume(broker.bootstrap(protocol), config, topic, records)
    cpu2 = bu.cpu_seconds(broker.pid)
    r = Run(p_rps, cpu1 - cpu0, c_rps, cpu2 - cpu1)
    print(f"  {label:7} {broker.name:9} {protocol:10} produce {p_rps:>9,.0f} rec/s {_mb(p_rps):>6.1f} MB/s "
          f"CPU {r.produce_cpu:5.1f} s | consume {c_rps:>9,.0f} rec/s {_mb(c_rps):>6.1f} MB/s "
          f"CPU {r.consume_cpu:5.1f} s", flush=True)
    return r


def bench(brokers: list[Broker], configs: dict[str, Path], records: int, runs: int) -> Results:
    results = Results()
    print(f"ProducerPerformance then ConsumerPerformance: {records:,} records of {RECORD_SIZE} B per run, "
          f"acks=1, linger.ms=5, batch.size 64 KiB, 1 partition; {runs} runs per broker and protocol, "
          f"alternating, after a warm-up run of {records // 5:,} records (the JVMs' JIT, the first sessions)",
          flush=True)
    for protocol in PROTOCOLS:
        for broker in brokers:
            one_run(broker, protocol, configs[protocol], records // 5, "warm-up")
    for run in range(runs):
        for protocol in PROTOCOLS:
            for broker in brokers:
                results.add(broker.name, protocol, one_run(broker, protocol, configs[protocol], records,
                                                           f"run {run + 1}"))
    return results


def report(results: Results, names: list[str]) -> None:
    print("\nmedians")
    print(f"  {'broker':9} {'protocol':10} {'produce MB/s':>12} {'CPU s':>6} {'consume MB/s':>12} {'CPU s':>6}")
    for name in names:
        for protocol in PROTOCOLS:
            p_rps, p_cpu, c_rps, c_cpu = (results.median(name, protocol, attr) for attr in
                                          ("produce_rps", "produce_cpu", "consume_rps", "consume_cpu"))
            print(f"  {name:9} {protocol:10} {_mb(p_rps):>12.1f} {p_cpu:>6.1f} {_mb(c_rps):>12.1f} {c_cpu:>6.1f}")
    print("\nSASL_SSL / PLAINTEXT (throughput; CPU seconds per run)")
    for name in names:
        ratios = []
        for attr in ("produce_rps", "produce_cpu", "consume_rps", "consume_cpu"):
            plain = results.median(name, "PLAINTEXT", attr)
            ratios.append(results.median(name, "SASL_SSL", attr) / plain if plain else float("nan"))
        print(f"  {name:9} produce {ratios[0]:.2f} (CPU {ratios[1]:.2f})   consume {ratios[2]:.2f} (CPU {ratios[3]:.2f})")
    if set(names) == {"kafkette", "kafka"}:
        print("\nkafkette / Apache Kafka (throughput)")
        for protocol in PROTOCOLS:
            p = results.median("kafkette", protocol, "produce_rps") / results.median("kafka", protocol, "produce_rps")
            c = results.median("kafkette", protocol, "consume_rps") / results.median("kafka", protocol, "consume_rps")
            print(f"  {protocol:10} produce {p:.2f}   consume {c:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--brokers", default="kafkette,kafka", help="comma-separated: kafkette, kafka")
    args = ap.parse_args(argv or [])  # tests.bench calls main() with its own argv in sys.argv
    names = [n for n in args.brokers.split(",") if n]
    records = int(os.environ.get("KAFKETTE_BENCH_RECORDS", "200000"))
    runs = int(os.environ.get("KAFKETTE_BENCH_RUNS", "3"))
    with tempfile.TemporaryDirectory(prefix="bench-secure-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        write_certificates(directory)
        configs = {p: client_config(directory, p) for p in PROTOCOLS}
        brokers = []
        for name in names:
            broker = stack.enter_context(STARTERS[name](directory))
            add_scram_user(broker.bootstrap("PLAINTEXT"))
            brokers.append(broker)
        # The first SCRAM login may race the credential's arrival; a short produce waits for it.
        for broker in brokers:
            _wait_for_login(broker, configs["SASL_SSL"])
        results = bench(brokers, configs, records, runs)
        report(results, names)
    return 0


def _wait_for_login(broker: Broker, config: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    topic = f"bench-login-{int(time.time() * 1000) % 100000}"
    create_topic(broker.bootstrap("PLAINTEXT"), topic)
    while True:
        try:
            produce(broker.bootstrap("SASL_SSL"), config, topic, 10)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
