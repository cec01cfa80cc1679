"""Replicated acks=all against unreplicated, with Kafka's own clients, on a 3-broker cluster.

``python -m tests.bench replication`` (also part of ``make bench``) starts a 3-broker kafkette cluster
(clients/devcluster.py) and, unless ``--no-kafka`` is given, a 3-broker Apache Kafka 3.9.1 from the
Maven Central jars on the same ZooKeeper (its own chroot). On each it creates two topics of one
partition, ``rf1`` (replication factor 1) and ``rf3`` (replication factor 3, ``min.insync.replicas=2``),
and runs, alternating the topics and the brokers run after run:

* throughput: ``org.apache.kafka.tools.ProducerPerformance``, 100-byte records, ``acks=all``,
  ``linger.ms=5``, ``batch.size=65536``, as fast as it can (``--throughput -1``);
* latency: the same tool at a fixed 5,000 records/s, whose p50/p99 are the acks=all produce latency of
  a producer that is not queueing behind its own buffer, and ``org.apache.kafka.tools.EndToEndLatency``
  (one record at a time, produced with acks=all and consumed from the leader).

Each run is printed, then the medians, the replicated/unreplicated ratio and the CPU seconds the brokers
spent per million records (summed over the 3 brokers: on 2 shared cores the steadiest figure).

Environment: ``KAFKETTE_BENCH_RECORDS`` (throughput run size, default 500,000), ``KAFKETTE_BENCH_RUNS``
(default 3), ``KAFKETTE_BENCH_LATENCY_RECORDS`` (default 30,000); ``KAFKETTE_BENCH_NO_KAFKA=1`` (or
``--no-kafka``) leaves Apache Kafka out.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

RECORD_SIZE = 100
LATENCY_RATE = 5000
E2E_RECORDS = 2000
TOPICS = {"rf1": (1, {}), "rf3": (3, {"min.insync.replicas": "2"})}


def _cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


@dataclass
class PerfResult:
    records_per_s: float
    p50_ms: float
    p99_ms: float


def producer_performance(bootstrap: str, topic: str, records: int, throughput: int, acks: str = "all") -> PerfResult:
    """One ProducerPerformance run; its summary line gives records/s and the latency percentiles."""
    from tests.kafka_dist import classpath

    props = [f"bootstrap.servers={bootstrap}", f"acks={acks}", "linger.ms=5", "batch.size=65536"]
    proc = subprocess.run(
        ["java", "-Xmx512m", "-cp", classpath(), "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
         "--num-records", str(records), "--record-size", str(RECORD_SIZE), "--throughput", str(throughput),
         "--producer-props", *props],
        capture_output=True, text=True, timeout=900)
    summary = [ln for ln in proc.stdout.splitlines() if "records sent" in ln]
    if proc.returncode != 0 or not summary:
        raise RuntimeError(f"ProducerPerformance failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-3000:]}")
    # "500000 records sent, 98765.4 records/sec (9.42 MB/sec), 12.34 ms avg latency, 456.00 ms max latency,
    #  10 ms 50th, 30 ms 95th, 40 ms 99th, 50 ms 99.9th."
    parts = [p.strip() for p in summary[-1].split(",")]
    rps = float(parts[1].split()[0])
    p50 = float(next(p for p in parts if p.endswith("50th")).split()[0])
    p99 = float(next(p for p in parts if p.endswith("99th")).split()[0])
    return PerfResult(rps, p50, p99)


def end_to_end_latency(bootstrap: str, topic: str, records: int) -> tuple[float, float]:
    """EndToEndLatency's p50 and p99 (whole milliseconds, as the tool prints them)."""
    from tests.kafka_dist import classpath

    proc = subprocess.run(
        ["java", "-Xmx256m", "-cp", classpath(), "org.apache.kafka.tools.EndToEndLatency", bootstrap, topic,
         str(records), "all", str(RECORD_SIZE)],
        capture_output=True, text=True, timeout=900)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("Percentiles")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"EndToEndLatency failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    # "Percentiles: 50th = 1, 99th = 3, 99.9th = 7"
    values = dict(p.strip().split(" = ") for p in line.split(":", 1)[1].split(","))
    return float(values["50th"]), float(values["99th"])


def create_topics(bootstrap: str) -> None:
    """The two benchmark topics, waited for until every replica is in the ISR."""
    from kafka.admin import KafkaAdminClient, NewTopic

    from clients.admin import WireClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-replication")
    try:
        admin.create_topics([NewTopic(name, 1, rf, topic_configs=configs) for name, (rf, configs) in TOPICS.items()])
    finally:
        admin.close()
    deadline = time.monotonic() + 60
    with WireClient(bootstrap) as c:
        while time.monotonic() < deadline:
            info = c.refresh(list(TOPICS))
            if all(t in info.topics and info.topics[t].partitions and
                   all(p.leader >= 0 and len(p.isr) == rf for p in info.topics[t].partitions.values())
                   for t, (rf, _) in TOPICS.items()):
                return
            time.sleep(0.2)
    raise TimeoutError("the benchmark topics did not get their full ISR")


class ApacheKafkaCluster:
    """Three ``kafka.Kafka`` 3.9.1 brokers (ZooKeeper mode) on a given ZooKeeper, under their own chroot."""

    def __init__(self, zk_connect: str, n: int = 3) -> None:
        from clients.zookeeper_server import free_port

        self.dir = Path(tempfile.mkdtemp(prefix="apache-kafka-3-"))
        self.zk_connect = zk_connect + "/apache-kafka"
        self.ports = [free_port() for _ in range(n)]
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def start(self) -> ApacheKafkaCluster:
        from clients.devcluster import wait_for_cluster_metadata, wait_for_port
        from tests.kafka_dist import classpath

        cp = classpath()
        for i, port in enumerate(self.ports):
            d = self.dir / f"broker-{i}"
            d.mkdir(parents=True)
            props = {"broker.id": str(i), "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(d / "data"),
                     "zookeeper.connect": self.zk_connect, "offsets.topic.replication.factor": "3",
                     "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
                     "group.initial.rebalance.delay.ms": "0"}
            (d / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            self.processes.append(subprocess.Popen(
                ["java", "-Xmx512m", "-cp", cp, "kafka.Kafka", str(d / "server.properties")],
                stdout=open(d / "kafka.log", "wb"), stderr=subprocess.STDOUT))  # noqa: SIM115
        for port, proc in zip(self.ports, self.processes, strict=True):
            wait_for_port("127.0.0.1", port, 120, proc)
            wait_for_cluster_metadata("127.0.0.1", port, len(self.ports), 120, proc)
        return self

    def stop(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def clusters(with_kafka: bool) -> Iterator[dict[str, tuple[str, list[int]]]]:
    """name -> (bootstrap, broker pids), for kafkette and (with_kafka) Apache Kafka."""
    from clients.devcluster import LocalCluster

    with LocalCluster(3) as cluster:
        out = {"kafkette": (cluster.bootstrap, [b.process.pid for b in cluster.brokers if b.process is not None])}
        kafka = ApacheKafkaCluster(cluster.zk.connect_string) if with_kafka else None
        try:
            if kafka is not None:
                kafka.start()
                out["kafka"] = (kafka.bootstrap, kafka.pids)
            for bootstrap, _ in out.values():
                create_topics(bootstrap)
            yield out
        finally:
            if kafka is not None:
                kafka.stop()


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def run(records: int, runs: int, latency_records: int, with_kafka: bool) -> None:
    with clusters(with_kafka) as brokers:
        print(f"ProducerPerformance: {records:,} records of {RECORD_SIZE} B, acks=all linger.ms=5 batch.size=65536, "
              f"one partition; rf3 = replication factor 3 with min.insync.replicas=2; {runs} alternating runs")
        tput: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for run_no in range(runs):
            for name, (bootstrap, pids) in brokers.items():
                for topic in TOPICS:
                    cpu0 = _cpu_seconds(pids)
                    r = producer_performance(bootstrap, topic, records, -1)
                    cpu = (_cpu_seconds(pids) - cpu0) / records * 1e6
                    tput.setdefault((name, topic), []).append((r.records_per_s, cpu))
                    print(f"  run {run_no + 1} {name:9} {topic}: {r.records_per_s:>11,.0f} records/s  "
                          f"broker CPU {cpu:5.2f} s per M records", flush=True)
        print(f"\nLatency: ProducerPerformance at {LATENCY_RATE:,} records/s ({latency_records:,} records, acks=all) "
              f"and EndToEndLatency ({E2E_RECORDS:,} records, acks=all), ms")
        lat: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
        for run_no in range(runs):
            for name, (bootstrap, _pids) in brokers.items():
                for topic in TOPICS:
                    r = producer_performance(bootstrap, topic, latency_records, LATENCY_RATE)
                    e50, e99 = end_to_end_latency(bootstrap, topic, E2E_RECORDS)
                    lat.setdefault((name, topic), []).append((r.p50_ms, r.p99_ms, e50, e99))
                    print(f"  run {run_no + 1} {name:9} {topic}: produce p50 {r.p50_ms:5.1f} p99 {r.p99_ms:6.1f}   "
                          f"end-to-end p50 {e50:4.0f} p99 {e99:5.0f}", flush=True)
        print(f"\n  {'broker':9} {'topic':5} {'records/s':>11} {'CPU s/M':>8} {'prod p50':>9} {'prod p99':>9} "
              f"{'e2e p50':>8} {'e2e p99':>8}")
        for (name, topic), rs in tput.items():
            ls = lat.get((name, topic), [])
            print(f"  {name:9} {topic:5} {_median([r for r, _ in rs]):>11,.0f} {_median([c for _, c in rs]):>8.2f} "
                  f"{_median([x[0] for x in ls]):>9.1f} {_median([x[1] for x in ls]):>9.1f} "
                  f"{_median([x[2] for x in ls]):>8.0f} {_median([x[3] for x in ls]):>8.0f}")
        for name in brokers:
            rf1 = _median([r for r, _ in tput[(name, "rf1")]])
            rf3 = _median([r for r, _ in tput[(name, "rf3")]])
            print(f"  {name}: replicated/unreplicated {rf3 / rf1:.2f}")
        if "kafka" in brokers:
            ours = _median([r for r, _ in tput[("kafkette", "rf3")]])
            theirs = _median([r for r, _ in tput[("kafka", "rf3")]])
            p99_ours = _median([x[1] for x in lat[("kafkette", "rf3")]])
            p99_theirs = _median([x[1] for x in lat[("kafka", "rf3")]])
            print(f"  rf3 throughput kafkette/kafka {ours / theirs:.2f}; acks=all produce p99 {p99_ours:.1f} ms "
                  f"against {p99_theirs:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    run(int(os.environ.get("KAFKETTE_BENCH_RECORDS", "500000")), int(os.environ.get("KAFKETTE_BENCH_RUNS", "3")),
        int(os.environ.get("KAFKETTE_BENCH_LATENCY_RECORDS", "30000")), with_kafka="--no-kafka" not in args and not os.environ.get("KAFKETTE_BENCH_NO_KAFKA"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
