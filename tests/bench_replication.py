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
import sys
from collections.abc import Iterator

from tests import benchmark_clients_support as bu

RECORD_SIZE = 100
LATENCY_RATE = 5000
E2E_RECORDS = 2000
TOPICS: dict[str, tuple[int, dict[str, str]]] = {"rf1": (1, {}), "rf3": (3, {"min.insync.replicas": "2"})}
PRODUCER_PROPS = ("linger.ms=5", "batch.size=65536")
# The JVMs this benchmark's numbers in BENCHMARKS.md were measured with: a heap limit and the JVM's
# defaults otherwise, for the clients and for Apache Kafka's brokers alike.
PRODUCER_JVM_OPTIONS = ("-Xmx512m",)
E2E_JVM_OPTIONS = ("-Xmx256m",)
KAFKA_JVM_OPTIONS = ("-Xmx512m",)


def producer_performance(bootstrap: str, topic: str, records: int, throughput: int) -> bu.ProducerResult:
    return bu.producer_performance(bootstrap, topic, records, RECORD_SIZE, "all", PRODUCER_PROPS,
                                   throughput=throughput, jvm_options=PRODUCER_JVM_OPTIONS)


def end_to_end_latency(bootstrap: str, topic: str, records: int) -> bu.LatencyResult:
    return bu.end_to_end_latency(bootstrap, topic, records, "all", RECORD_SIZE, jvm_options=E2E_JVM_OPTIONS)


@contextlib.contextmanager
def clusters(with_kafka: bool) -> Iterator[dict[str, tuple[str, list[int]]]]:
    """name -> (bootstrap, broker pids), for kafkette and (with_kafka) Apache Kafka, each with the
    benchmark topics in full ISR."""
    from clients.devcluster import LocalCluster
    from tests.ops.kafka_cluster import KafkaZkCluster

    with LocalCluster(3) as cluster, contextlib.ExitStack() as stack:
        out = {"kafkette": (cluster.bootstrap, [b.process.pid for b in cluster.brokers if b.process is not None])}
        if with_kafka:
            kafka = stack.enter_context(KafkaZkCluster(3, zk_connect=cluster.zk.connect_string,
                                                       jvm_options=KAFKA_JVM_OPTIONS))
            out["kafka"] = (kafka.bootstrap, kafka.pids)
        for bootstrap, _ in out.values():
            for topic, (replication_factor, configs) in TOPICS.items():
                bu.create_topic(bootstrap, topic, 1, replication_factor, configs)
        yield out


def run(records: int, runs: int, latency_records: int, with_kafka: bool) -> None:
    with clusters(with_kafka) as brokers:
        print(f"ProducerPerformance: {records:,} records of {RECORD_SIZE} B, acks=all linger.ms=5 batch.size=65536, "
              f"one partition; rf3 = replication factor 3 with min.insync.replicas=2; {runs} alternating runs")
        tput: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for run_no in range(runs):
            for name, (bootstrap, pids) in brokers.items():
                for topic in TOPICS:
                    cpu0 = bu.total_cpu_seconds(pids)
                    r = producer_performance(bootstrap, topic, records, -1)
                    cpu = bu.per_million(bu.total_cpu_seconds(pids) - cpu0, records)
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
                    e2e = end_to_end_latency(bootstrap, topic, E2E_RECORDS)
                    e50, e99 = e2e.p50_ms, e2e.p99_ms
                    lat.setdefault((name, topic), []).append((r.p50_ms, r.p99_ms, e50, e99))
                    print(f"  run {run_no + 1} {name:9} {topic}: produce p50 {r.p50_ms:5.1f} p99 {r.p99_ms:6.1f}   "
                          f"end-to-end p50 {e50:4.0f} p99 {e99:5.0f}", flush=True)
        print(f"\n  {'broker':9} {'topic':5} {'records/s':>11} {'CPU s/M':>8} {'prod p50':>9} {'prod p99':>9} "
              f"{'e2e p50':>8} {'e2e p99':>8}")
        for (name, topic), rs in tput.items():
            ls = lat.get((name, topic), [])
            print(f"  {name:9} {topic:5} {bu.median([r for r, _ in rs]):>11,.0f} "
                  f"{bu.median([c for _, c in rs]):>8.2f} "
                  f"{bu.median([x[0] for x in ls]):>9.1f} {bu.median([x[1] for x in ls]):>9.1f} "
                  f"{bu.median([x[2] for x in ls]):>8.0f} {bu.median([x[3] for x in ls]):>8.0f}")
        for name in brokers:
            rf1 = bu.median([r for r, _ in tput[(name, "rf1")]])
            rf3 = bu.median([r for r, _ in tput[(name, "rf3")]])
            print(f"  {name}: replicated/unreplicated {rf3 / rf1:.2f}")
        if "kafka" in brokers:
            ours = bu.median([r for r, _ in tput[("kafkette", "rf3")]])
            theirs = bu.median([r for r, _ in tput[("kafka", "rf3")]])
            p99_ours = bu.median([x[1] for x in lat[("kafkette", "rf3")]])
            p99_theirs = bu.median([x[1] for x in lat[("kafka", "rf3")]])
            print(f"  rf3 throughput kafkette/kafka {ours / theirs:.2f}; acks=all produce p99 {p99_ours:.1f} ms "
                  f"against {p99_theirs:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    run(int(os.environ.get("KAFKETTE_BENCH_RECORDS", "500000")), int(os.environ.get("KAFKETTE_BENCH_RUNS", "3")),
        int(os.environ.get("KAFKETTE_BENCH_LATENCY_RECORDS", "30000")), with_kafka="--no-kafka" not in args and not os.environ.get("KAFKETTE_BENCH_NO_KAFKA"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
