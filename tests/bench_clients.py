"""Real clients, side by side with Apache Kafka 3.9.1: what a user sees.

kafkette and Apache Kafka 3.9.1 (ZooKeeper mode, from the Maven Central jars, with the JVM options
bin/kafka-server-start.sh uses) run on the same machine against the same ZooKeeper, both up for the
whole phase, and every case runs on each in turn: kafkette, Kafka, kafkette, Kafka, ... so that other
load on the machine falls on both alike. Records are 100 bytes. The clients:

* Kafka's own ``ProducerPerformance``, ``ConsumerPerformance`` and ``EndToEndLatency`` (kafka-tools
  3.9.1; producers with linger.ms=5, the rest of the client defaults);
* librdkafka (confluent-kafka): a producer loop with a delivery callback per record and a consumer
  loop, and a group member committing offsets, each in a process of its own
  (``python -m tests.bench_clients rdkafka-produce|rdkafka-consume|rdkafka-commits``).

Phase 1, one broker each: produce acks=1 and acks=all on 1 and on 1,000 partitions, consume, the
librdkafka producer and consumer, and end-to-end latency (acks=1, acks=all). Both consumers read three
runs' worth of records from a one-partition topic that ProducerPerformance fills before the warm-up, in
batches alike on both systems (``CONSUME_TOPIC``); the librdkafka consumer with ``fetch.queue.backoff.ms``
10 (``rdkafka_consume``). Phase 2, three brokers
each: produce to a topic of RF=1 with acks=1 and to one of RF=3, min.insync.replicas=2 with acks=all
(3 partitions each, so every broker leads one), with both clients, acks=all end-to-end latency on
RF=3, and a group member's synchronous offset commits to the 3-replica __consumer_offsets while
ProducerPerformance loads the RF=3 topic (``rdkafka-commits``: the commit latency, and whether the
member lost its group to a missed heartbeat), once as fast as the producer goes and once with it held
to 50,000 records/s on both systems. Each phase begins with one uncounted run of every case,
as large as a counted one, for the JVMs' JIT (Kafka's broker and the Java clients). Next to
throughput: the brokers' CPU seconds per million records (utime + stime from /proc/PID/stat, summed
over a cluster's brokers), the steadiest figure on shared cores, and the client's CPU seconds (its process, from getrusage of ended children):
the client takes from the same two cores, and a Java client started per run keeps compiling during it.

Printed: every run, the medians and ratios kafkette/Kafka, the replicated/unreplicated ratio of each
system (per run, then the median) and a table of the targets, met or not. A missed target does not
fail the benchmark; a benchmark that cannot run does.

    python -m tests.bench clients             # or: make bench
    KAFKETTE_BENCH_QUICK=1 python -m tests.bench_clients [--phases single,replicated]

``KAFKETTE_BENCH_RECORDS`` (default 1,000,000; 200,000 quick), ``KAFKETTE_BENCH_LATENCY_MESSAGES``
(10,000; 2,000 quick) and ``KAFKETTE_BENCH_RUNS`` (3, never fewer) set the size.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests import benchmark_clients_support as bu

RECORD_SIZE = 100
SYSTEMS = ("kafkette", "kafka")
# Apache Kafka needs fixed ports: 25000 for the one-broker phase, 25010-25012 for the three brokers.
KAFKA_PORTS = {1: 25000, 3: 25010}
PRODUCER_PROPS = ("linger.ms=5",)  # Kafka 4.0's default; 3.9's 0 makes every small send a request
REPLICATED_PARTITIONS = 3


@dataclass(frozen=True)
class Scale:
    records: int
    latency_messages: int
    runs: int

    @staticmethod
    def from_env() -> Scale:
        quick = os.environ.get("KAFKETTE_BENCH_QUICK") == "1"
        records = int(os.environ.get("KAFKETTE_BENCH_RECORDS", "200000" if quick else "1000000"))
        messages = int(os.environ.get("KAFKETTE_BENCH_LATENCY_MESSAGES", "2000" if quick else "10000"))
        runs = max(3, int(os.environ.get("KAFKETTE_BENCH_RUNS", "3")))  # fewer than 3 has no median worth one
        return Scale(records, messages, runs)

    def warm_up(self) -> Scale:
        """As large as a counted run: Kafka's JIT keeps compiling well past a fifth of a run (its broker
        CPU per record still fell from run to run after such a warm-up)."""
        return Scale(self.records, self.latency_messages, 1)


@dataclass
class System:
    name: str
    bootstrap: str
    pids: list[int]


@dataclass(frozen=True)
class Measurement:
    records: int
    cpu: float  # the brokers' CPU seconds during the run
    records_per_s: float = math.nan  # throughput cases
    p50_ms: float = math.nan  # latency cases
    p99_ms: float = math.nan
    avg_ms: float = math.nan
    load: float = math.nan  # 1-minute load average at the end of the run
    # The client's CPU seconds during the run (its process and threads, user and system). On two
    # shared cores the client and the brokers take from the same CPU, so a run's rate depends on both.
    client_cpu: float = math.nan
    # Offset commits under load: the times the group member lost its partitions during the run.
    partitions_lost: int | None = None

    @property
    def cpu_per_million(self) -> float:
        return bu.per_million(self.cpu, self.records)

    @property
    def client_cpu_per_million(self) -> float:
        return bu.per_million(self.client_cpu, self.records)


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # "throughput" or "latency"
    run: Callable[[System, Scale], Measurement]  # the brokers' CPU is filled in by measure()


@dataclass
class Results:
    runs: dict[tuple[str, str], list[Measurement]] = field(default_factory=dict)

    def add(self, case: str, system: str, m: Measurement) -> None:
        self.runs.setdefault((case, system), []).append(m)

    def median(self, case: str, system: str, attr: str) -> float:
        return bu.median(getattr(m, attr) for m in self.runs[(case, system)])

    def loads(self) -> list[float]:
        return [m.load for ms in self.runs.values() for m in ms]


# --- the librdkafka client, in a process of its own -----------------------------------------------


def rdkafka_produce(bootstrap: str, topic: str, records: int, acks: str) -> dict[str, float]:
    from confluent_kafka import KafkaException, Producer

    delivered = failed = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal delivered, failed
        if err is None:
            delivered += 1
        else:
            failed += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    producer.list_topics(topic, timeout=30)  # connections and metadata before the clock starts
    value = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ" * 3 + b"ABCDEFGHIJKLMNOPQRSTUV"
    assert len(value) == RECORD_SIZE
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:  # the local queue is full: serve delivery reports until there is room
                producer.poll(0.005)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise KafkaException(f"{topic}: records still undelivered after 300 s")
    elapsed = time.perf_counter() - started
    return {"records": delivered, "failed": failed, "seconds": elapsed}


RDKAFKA_FETCH_QUEUE_BACKOFF_MS = 10


def rdkafka_consume(bootstrap: str, topic: str, records: int, group: str) -> dict[str, Any]:
    """Reads ``records`` records from the beginning in a new group. The clock starts when the group
    assigns the partitions, as ConsumerPerformance's fetch rate excludes the join. ``marks``: the
    seconds from the assignment at each 100,000th record.

    ``fetch.queue.backoff.ms`` is 10 ms, not librdkafka's 1,000: with the default, the loop below drains
    its queue more slowly than a broker on loopback fills it, librdkafka stops fetching for a whole second
    each time the queue passes queued.min.messages, and a run measured the number of those pauses, which
    the faster broker triggers more often (BENCHMARKS.md, "The librdkafka consumer"). librdkafka's
    documentation names a lower value as the remedy for such one-second delays."""
    from confluent_kafka import Consumer, KafkaError, KafkaException

    assigned: list[float] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": RDKAFKA_FETCH_QUEUE_BACKOFF_MS})
    consumer.subscribe([topic], on_assign=lambda _c, _partitions: assigned.append(time.perf_counter()))
    count = 0
    marks: list[float] = []
    deadline = time.monotonic() + 300
    try:
        while count < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {count} of {records} records of {topic}")
            for msg in consumer.consume(num_messages=10000, timeout=1.0):
                err = msg.error()
                if err is None:
                    count += 1
                elif err.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(err)
            while count >= (len(marks) + 1) * 100_000:
                marks.append(round(time.perf_counter() - assigned[0], 3))
        elapsed = time.perf_counter() - assigned[0]
    finally:
        consumer.close()
    return {"records": count, "seconds": elapsed, "marks": marks}


COMMIT_SESSION_TIMEOUT_MS = 10_000  # Kafka's default before 3.0: a stricter test of heartbeats than 45 s


def rdkafka_commits(bootstrap: str, topic: str, group: str) -> dict[str, Any]:
    """A group member that commits an offset of ``topic``-0 synchronously, one commit after another,
    serving its group between commits, until its standard input closes. Prints ``ready`` once the group
    has assigned it the partition, so that the load starts after the join. Kafka's group coordinator
    answers a commit once it is written to the ISR of its __consumer_offsets partition, so under
    replicated load the commit's latency is that partition's acks=all latency; ``partitions_lost`` counts
    the times the member lost its partition meanwhile (a heartbeat missed for session.timeout.ms)."""
    import threading

    from confluent_kafka import Consumer, TopicPartition

    assigned = threading.Event()
    revoked = 0

    def on_revoke(_c: object, _partitions: object) -> None:
        nonlocal revoked
        revoked += 1

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "session.timeout.ms": COMMIT_SESSION_TIMEOUT_MS})
    consumer.subscribe([topic], on_assign=lambda _c, _partitions: assigned.set(), on_revoke=on_revoke)
    deadline = time.monotonic() + 120
    while not assigned.is_set():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{group}: no assignment of {topic} within 120 s")
        consumer.poll(0.1)
    stop = threading.Event()

    def wait_for_the_end_of_the_load() -> None:  # stdin closes then; a thread, so commits go on meanwhile
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait_for_the_end_of_the_load, daemon=True).start()
    print("ready", flush=True)
    latencies: list[float] = []
    offset = 0
    try:
        while True:  # at least one commit, however short the load
            consumer.poll(0.02)  # the group's callbacks; librdkafka heartbeats from its own thread
            offset += 1
            started = time.perf_counter()
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            latencies.append((time.perf_counter() - started) * 1000)
            if stop.is_set():
                break
        # Counted before close(), whose own revocation is no loss. A partition lost to an expired
        # session comes to on_revoke too (confluent-kafka calls it when no on_lost is given).
        lost = revoked
    finally:
        consumer.close()
    ordered = sorted(latencies)
    return {"commits": len(ordered), "p50_ms": ordered[len(ordered) // 2],
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
            "avg_ms": sum(ordered) / len(ordered), "max_ms": ordered[-1], "partitions_lost": lost}


def _rdkafka(command: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "tests.bench_clients", command, *args], capture_output=True,
                          text=True, timeout=900, cwd=_repo_root())
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"librdkafka {command} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- the cases ------------------------------------------------------------------------------------


def _java_produce(topic: str, acks: str) -> Callable[[System, Scale], Measurement]:
    def run(system: System, scale: Scale) -> Measurement:
        r = bu.producer_performance(system.bootstrap, topic, scale.records, RECORD_SIZE, acks, PRODUCER_PROPS)
        return Measurement(r.records, 0.0, records_per_s=r.records_per_s)
    return run


# The consumers read three runs' worth at a time. Read for a single run's worth, 1,000,000 records take
# the Java consumer under a second, much of it while its JIT still compiles the fetch path, and its runs
# against the same broker spread by 2x (BENCHMARKS.md, thirty-fourth invocation).
CONSUME_RUNS_WORTH = 3
# What they read is written before the warm-up by ProducerPerformance, whose batches under full load are
# all full (16,277 bytes of 100-byte records), so both systems serve the same bytes in the same batches.
# The produce cases' topic does not: librdkafka's batches (up to 1 MB) are as large as the records that
# queue while a produce request is out, which depends on the broker, and how many of them fit in a
# 1 MiB fetch set the number of fetches (366 against 353 for the same 3,000,000 records in one run;
# BENCHMARKS.md, thirty-sixth invocation).
CONSUME_TOPIC = "consume"


def _java_consume(topic: str, runs_worth: int = 1) -> Callable[[System, Scale], Measurement]:
    def run(system: System, scale: Scale) -> Measurement:
        r = bu.consumer_performance(system.bootstrap, topic, scale.records * runs_worth,
                                    f"bench-{uuid.uuid4().hex[:8]}")
        return Measurement(r.records, 0.0, records_per_s=r.fetch_records_per_s)
    return run


def _rdkafka_produce(topic: str, acks: str) -> Callable[[System, Scale], Measurement]:
    def run(system: System, scale: Scale) -> Measurement:
        r = _rdkafka("rdkafka-produce", system.bootstrap, topic, str(scale.records), acks)
        if r["failed"] or r["records"] != scale.records:
            raise RuntimeError(f"librdkafka delivered {r['records']} of {scale.records} records ({r['failed']} failed)")
        return Measurement(int(r["records"]), 0.0, records_per_s=r["records"] / r["seconds"])
    return run


def _rdkafka_consume(topic: str, runs_worth: int = 1) -> Callable[[System, Scale], Measurement]:
    def run(system: System, scale: Scale) -> Measurement:
        r = _rdkafka("rdkafka-consume", system.bootstrap, topic, str(scale.records * runs_worth),
                     f"bench-{uuid.uuid4().hex[:8]}")
        return Measurement(int(r["records"]), 0.0, records_per_s=r["records"] / r["seconds"])
    return run


def _latency(topic: str, acks: str) -> Callable[[System, Scale], Measurement]:
    def run(system: System, scale: Scale) -> Measurement:
        r = bu.end_to_end_latency(system.bootstrap, topic, scale.latency_messages, acks, RECORD_SIZE)
        return Measurement(r.messages, 0.0, p50_ms=r.p50_ms, p99_ms=r.p99_ms, avg_ms=r.avg_ms)
    return run


def _commits_under_load(load_topic: str, probe_topic: str, throughput: int = -1
                        ) -> Callable[[System, Scale], Measurement]:
    """Offset commits (the librdkafka worker above) for as long as ProducerPerformance sends
    ``scale.records`` records to ``load_topic`` with acks=all: as fast as it can (``throughput`` -1),
    or held to ``throughput`` records/s (half as many records then: the commits are what is measured)."""
    def run(system: System, scale: Scale) -> Measurement:
        group = f"bench-commits-{uuid.uuid4().hex[:8]}"
        with tempfile.TemporaryFile("w+") as err:  # librdkafka's log; a pipe could fill and stall it
            worker = subprocess.Popen(
                [sys.executable, "-m", "tests.bench_clients", "rdkafka-commits", system.bootstrap, probe_topic, group],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, cwd=_repo_root())
            try:
                assert worker.stdout is not None
                ready = worker.stdout.readline()  # "" if the worker failed before its group's assignment
                if ready.strip() != "ready":
                    worker.wait(30)
                    err.seek(0)
                    raise RuntimeError(f"commit worker failed ({worker.returncode}): {ready}{err.read()[-3000:]}")
                records = scale.records if throughput < 0 else scale.records // 2
                bu.producer_performance(system.bootstrap, load_topic, records, RECORD_SIZE, "all",
                                        PRODUCER_PROPS, throughput=throughput)
                out, _ = worker.communicate(input="", timeout=120)  # closes its stdin: the load is over
            finally:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()
            lines = [ln for ln in out.splitlines() if ln.startswith("{")]
            if worker.returncode != 0 or not lines:
                err.seek(0)
                raise RuntimeError(f"commit worker failed ({worker.returncode}):\n{out[-2000:]}\n{err.read()[-3000:]}")
        r = json.loads(lines[-1])
        return Measurement(int(r["commits"]), 0.0, p50_ms=r["p50_ms"], p99_ms=r["p99_ms"], avg_ms=r["avg_ms"],
                           partitions_lost=int(r["partitions_lost"]))
    return run


SINGLE_TOPICS = {"p1": (1, 1, {}), "p1000": (1000, 1, {}), "e2e": (1, 1, {}), CONSUME_TOPIC: (1, 1, {})}
SINGLE_PREFILL = {CONSUME_TOPIC: CONSUME_RUNS_WORTH}  # topic: runs' worth of records written before the warm-up
SINGLE_CASES = [
    Case("produce acks=1, 1 partition", "throughput", _java_produce("p1", "1")),
    Case("produce acks=all, 1 partition", "throughput", _java_produce("p1", "all")),
    Case("produce acks=1, 1,000 partitions", "throughput", _java_produce("p1000", "1")),
    Case("produce acks=all, 1,000 partitions", "throughput", _java_produce("p1000", "all")),
    Case("librdkafka produce acks=1, 1 partition", "throughput", _rdkafka_produce("p1", "1")),
    Case("consume, 1 partition", "throughput", _java_consume(CONSUME_TOPIC, CONSUME_RUNS_WORTH)),
    Case("librdkafka consume, 1 partition", "throughput", _rdkafka_consume(CONSUME_TOPIC, CONSUME_RUNS_WORTH)),
    Case("end-to-end latency acks=1", "latency", _latency("e2e", "1")),
    Case("end-to-end latency acks=all", "latency", _latency("e2e", "all")),
]

MIN_ISR_2 = {"min.insync.replicas": "2"}
REPLICATED_TOPICS = {"rf1": (REPLICATED_PARTITIONS, 1, {}), "rf3": (REPLICATED_PARTITIONS, 3, MIN_ISR_2),
                     "e2e-rf3": (1, 3, MIN_ISR_2), "commit-probe": (1, 3, MIN_ISR_2)}
RF1 = "produce RF=1 acks=1, 3 brokers"
RF3 = "produce RF=3 acks=all, 3 brokers"
RD_RF1 = "librdkafka produce RF=1 acks=1, 3 brokers"
RD_RF3 = "librdkafka produce RF=3 acks=all, 3 brokers"
LAT_RF3 = "end-to-end latency RF=3 acks=all"
COMMITS_RF3 = "offset commit under RF=3 acks=all load"
# Unpaced, each system's load is what it sustains (kafkette's often a fifth more). Held to a rate below
# what either sustains on this machine, the commits of both wait behind the same load.
COMMIT_LOAD_RATE = 50_000
COMMITS_RF3_PACED = f"offset commit under {COMMIT_LOAD_RATE // 1000}k rec/s RF=3 load"
REPLICATED_CASES = [
    Case(RF1, "throughput", _java_produce("rf1", "1")),
    Case(RF3, "throughput", _java_produce("rf3", "all")),
    Case(RD_RF1, "throughput", _rdkafka_produce("rf1", "1")),
    Case(RD_RF3, "throughput", _rdkafka_produce("rf3", "all")),
    Case(LAT_RF3, "latency", _latency("e2e-rf3", "all")),
    Case(COMMITS_RF3, "latency", _commits_under_load("rf3", "commit-probe")),
    Case(COMMITS_RF3_PACED, "latency", _commits_under_load("rf3", "commit-probe", COMMIT_LOAD_RATE)),
]


# --- running --------------------------------------------------------------------------------------


@contextmanager
def side_by_side(n: int) -> Iterator[list[System]]:
    """A kafkette cluster of ``n`` brokers and an Apache Kafka one of ``n`` on the same ZooKeeper
    (chroots /kafkette and /apache-kafka)."""
    from clients.devcluster import LocalCluster
    from tests.ops.kafka_cluster import KafkaZkCluster

    with LocalCluster(n, overrides={"offsets.topic.num.partitions": "5"}, metrics_base_port=None) as ours:
        with KafkaZkCluster(n, KAFKA_PORTS[n], zk_connect=ours.zk.connect_string) as kafka:
            pids = [b.process.pid for b in ours.brokers if b.process is not None]
            yield [System("kafkette", ours.bootstrap, pids), System("kafka", kafka.bootstrap, kafka.pids)]


def measure(case: Case, system: System, scale: Scale) -> Measurement:
    cpu0 = bu.total_cpu_seconds(system.pids)
    client0 = _ended_children_cpu_seconds()
    m = case.run(system, scale)
    cpu = bu.total_cpu_seconds(system.pids) - cpu0
    # Every client runs as a child process that has ended by now (the brokers and ZooKeeper, children
    # too, are still running and so not in this count).
    client = _ended_children_cpu_seconds() - client0
    return dataclasses.replace(m, cpu=cpu, load=bu.load_average()[0], client_cpu=client)


def _ended_children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def describe(m: Measurement, kind: str) -> str:
    if kind == "throughput":
        what = f"{m.records_per_s:>11,.0f} rec/s {m.records_per_s * RECORD_SIZE / 1e6:>6.1f} MB/s"
    else:
        what = f"p50 {m.p50_ms:>5.1f} ms  p99 {m.p99_ms:>5.1f} ms  avg {m.avg_ms:6.3f} ms"
        lost = "" if m.partitions_lost is None else f"  partitions lost {m.partitions_lost}"
        return (f"{what}  broker CPU {m.cpu:6.2f} s for {m.records:,} round trips  client CPU "
                f"{m.client_cpu:6.2f} s  load {m.load:4.1f}{lost}")
    return (f"{what}  broker CPU {m.cpu:6.2f} s = {m.cpu_per_million:6.2f} s/M records  client CPU "
            f"{m.client_cpu:6.2f} s  load {m.load:4.1f}")


def run_phase(title: str, n: int, topics: dict[str, tuple[int, int, dict[str, str]]], cases: list[Case],
              scale: Scale, results: Results, prefill: dict[str, int] | None = None) -> None:
    """``prefill``: topics written by ProducerPerformance (acks=1) before the warm-up, each with that many
    runs' worth of records, for the cases that read them."""
    print(f"\n## {title}", flush=True)
    with side_by_side(n) as systems:
        for s in systems:
            started = time.monotonic()
            for topic, (partitions, rf, configs) in topics.items():
                bu.create_topic(s.bootstrap, topic, partitions, rf, configs)
            print(f"  {s.name}: {s.bootstrap}, broker pids {s.pids}, topics {', '.join(topics)} created and in "
                  f"sync in {time.monotonic() - started:.1f} s", flush=True)
            for topic, runs_worth in (prefill or {}).items():
                started = time.monotonic()
                bu.producer_performance(s.bootstrap, topic, scale.records * runs_worth, RECORD_SIZE, "1",
                                        PRODUCER_PROPS)
                print(f"  {s.name}: {scale.records * runs_worth:,} records written to {topic} in "
                      f"{time.monotonic() - started:.1f} s, for the cases that read it", flush=True)
        width = max(len(c.name) for c in cases)
        warm = scale.warm_up()
        print(f"  warm-up, one run of each case, not counted ({warm.records:,} records, {warm.latency_messages:,} "
              "latency messages)")
        for case in cases:
            for s in systems:
                print(f"  warm-up {case.name:{width}} {s.name:9} {describe(measure(case, s, warm), case.kind)}",
                      flush=True)
        for run in range(scale.runs):
            for case in cases:
                for s in systems:
                    m = measure(case, s, scale)
                    results.add(case.name, s.name, m)
                    print(f"  run {run + 1}   {case.name:{width}} {s.name:9} {describe(m, case.kind)}", flush=True)


def report_medians(results: Results, cases: list[Case]) -> None:
    width = max(len(c.name) for c in cases)
    print(f"\n  {'case (medians)':{width}} {'kafkette':>12} {'kafka':>12} {'ratio':>6} "
          f"{'kafkette CPU s/M':>17} {'kafka CPU s/M':>14} {'client CPU s/M':>15}")
    for case in cases:
        cpu = [results.median(case.name, s, "cpu_per_million") for s in SYSTEMS]
        if case.kind == "throughput":
            ours, theirs = (results.median(case.name, s, "records_per_s") for s in SYSTEMS)
            client = "/".join(f"{results.median(case.name, s, 'client_cpu_per_million'):.2f}" for s in SYSTEMS)
            print(f"  {case.name:{width}} {ours:>12,.0f} {theirs:>12,.0f} {bu.ratio(ours, theirs):>6.2f} "
                  f"{cpu[0]:>17.2f} {cpu[1]:>14.2f} {client:>15}")
        else:
            # A latency run is round trips one at a time: its CPU per run, not per million records.
            run_cpu = [f"{results.median(case.name, s, 'cpu'):.2f} s/run" for s in SYSTEMS]
            client = "/".join(f"{results.median(case.name, s, 'client_cpu'):.2f}" for s in SYSTEMS) + " s/run"
            for pct in ("p50_ms", "p99_ms", "avg_ms"):
                ours, theirs = (results.median(case.name, s, pct) for s in SYSTEMS)
                label = f"{case.name} {pct.removesuffix('_ms')}"
                r = bu.ratio(ours, theirs)
                shown = f"{r:>6.2f}" if math.isfinite(r) else f"{'n/a':>6}"  # Kafka's under a millisecond
                print(f"  {label:{width}} {ours:>9.3g} ms {theirs:>9.3g} ms {shown} "
                      f"{run_cpu[0]:>17} {run_cpu[1]:>14} {client:>15}")
                run_cpu = ["", ""]
                client = ""
    print("  (ratio = kafkette / Kafka: above 1 is better for throughput, below 1 for latency; "
          "CPU s/M = the brokers' CPU seconds per million records; client CPU s/M = the client's, "
          "against kafkette / against Kafka)")


def replicated_ratio(results: Results, system: str, replicated: str, unreplicated: str) -> float:
    """RF=3 acks=all over RF=1 acks=1, per run (the two ran minutes apart at most), then the median."""
    pairs = zip(results.runs[(replicated, system)], results.runs[(unreplicated, system)], strict=True)
    return bu.median(r.records_per_s / u.records_per_s for r, u in pairs)


def targets(results: Results, phases: list[str]) -> list[tuple[str, str, bool]]:
    rows: list[tuple[str, str, bool]] = []

    def throughput(case: str) -> None:
        ours, theirs = (results.median(case, s, "records_per_s") for s in SYSTEMS)
        r = bu.ratio(ours, theirs)
        rows.append((f"{case}: kafkette/Kafka >= 1.0", f"{r:.2f}", r >= 1.0))

    def latency(case: str, what: str) -> None:
        ours, theirs = (results.median(case, s, "p99_ms") for s in SYSTEMS)
        rows.append((f"{what} p99 <= Kafka's", f"{ours:.0f} ms vs {theirs:.0f} ms", ours <= theirs))

    if "replicated" in phases:
        for client, rf3, rf1 in (("ProducerPerformance", RF3, RF1), ("librdkafka", RD_RF3, RD_RF1)):
            ours, theirs = (replicated_ratio(results, s, rf3, rf1) for s in SYSTEMS)
            rows.append((f"replicated/unreplicated >= 0.5 ({client})", f"{ours:.2f} (Kafka {theirs:.2f})",
                         ours >= 0.5))
        for case in (RF3, RD_RF3):
            ours, theirs = (results.median(case, s, "records_per_s") for s in SYSTEMS)
            r = bu.ratio(ours, theirs)
            rows.append((f"{case}: >= 1.0x 3-broker Kafka", f"{r:.2f}", r >= 1.0))
        latency(LAT_RF3, "acks=all, RF=3, 3 brokers:")
    if "single" in phases:
        latency("end-to-end latency acks=all", "acks=all, 1 broker:")
        for case in SINGLE_CASES:
            if case.kind == "throughput":
                throughput(case.name)
        latency("end-to-end latency acks=1", "acks=1, 1 broker:")
    return rows


def report(results: Results, phases: list[str], commit: str, load_before: tuple[float, float, float]) -> None:
    load_after = bu.load_average()
    loads = results.loads()
    print("\n## Medians")
    if "single" in phases:
        print("\n  one broker each")
        report_medians(results, SINGLE_CASES)
    if "replicated" in phases:
        print("\n  three brokers each")
        report_medians(results, REPLICATED_CASES)
        print("\n  replicated/unreplicated (RF=3 acks=all over RF=1 acks=1, same software, per run then median)")
        for client, rf3, rf1 in (("ProducerPerformance", RF3, RF1), ("librdkafka", RD_RF3, RD_RF1)):
            print(f"    {client:20} kafkette {replicated_ratio(results, 'kafkette', rf3, rf1):.2f}   "
                  f"Kafka {replicated_ratio(results, 'kafka', rf3, rf1):.2f}")
        for case in (COMMITS_RF3, COMMITS_RF3_PACED):
            lost = {s: sum(m.partitions_lost or 0 for m in results.runs.get((case, s), [])) for s in SYSTEMS}
            print(f"\n  {case}: times the group member lost its partition, all runs (session.timeout.ms "
                  f"{COMMIT_SESSION_TIMEOUT_MS:,}): kafkette {lost['kafkette']}, Kafka {lost['kafka']}")
    rows = targets(results, phases)
    width = max(len(r[0]) for r in rows)
    print("\n## Targets")
    for name, value, met in rows:
        print(f"  {name:{width}} {value:>22}  {'met' if met else 'MISSED'}")
    print(f"  {sum(met for _, _, met in rows)} of {len(rows)} met")
    print(f"\n  commit {commit}; load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; 1-minute load at the end of each "
          f"run {min(loads):.1f} to {max(loads):.1f} (median {bu.median(loads):.1f})")


def main(argv: list[str] | None = None) -> int:
    args = list(argv or [])  # tests.bench calls main() with its own argv in sys.argv
    if args and args[0] == "rdkafka-produce":
        print(json.dumps(rdkafka_produce(args[1], args[2], int(args[3]), args[4])), flush=True)
        return 0
    if args and args[0] == "rdkafka-commits":
        print(json.dumps(rdkafka_commits(args[1], args[2], args[3])), flush=True)
        return 0
    if args and args[0] == "rdkafka-consume":
        print(json.dumps(rdkafka_consume(args[1], args[2], int(args[3]), args[4])), flush=True)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--phases", default="single,replicated", help="comma-separated: single, replicated")
    opts = ap.parse_args(args)
    phases = [p for p in opts.phases.split(",") if p]
    scale = Scale.from_env()
    commit = bu.git_commit()
    load_before = bu.load_average()
    print(f"Real clients, side by side with Apache Kafka 3.9.1: commit {commit}, {scale.records:,} records of "
          f"{RECORD_SIZE} B per throughput run, {scale.latency_messages:,} messages per latency run, "
          f"{scale.runs} alternating runs per case and system; load average {load_before[0]:.2f} "
          f"{load_before[1]:.2f} {load_before[2]:.2f}", flush=True)
    results = Results()
    if "single" in phases:
        run_phase("one broker each", 1, SINGLE_TOPICS, SINGLE_CASES, scale, results, SINGLE_PREFILL)
    if "replicated" in phases:
        run_phase("three brokers each, same ZooKeeper", 3, REPLICATED_TOPICS, REPLICATED_CASES, scale, results)
    report(results, phases, commit, load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
