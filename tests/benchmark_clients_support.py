"""Helpers shared by the side-by-side benchmarks: broker CPU seconds from /proc, Kafka's own performance
tools (ProducerPerformance, ConsumerPerformance, EndToEndLatency from the 3.9.1 jars) and the parsing
of what they print, topic creation that waits for full ISRs, medians and ratios, and reading one
response frame off a blocking socket (raw-protocol timings). Not named
``bench_*``: ``make bench`` runs every such module as a benchmark.
"""

from __future__ import annotations

import math
import os
import socket
import statistics
import struct
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Client JVMs run as kafka-run-class.sh starts them (full JIT, G1); a small heap suffices for 100-byte
# records and keeps the client from competing with the brokers for memory.
CLIENT_JVM_OPTIONS: tuple[str, ...] = ("-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                                       "-Djava.awt.headless=true")


# --- the machine ----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process, all its threads included."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def total_cpu_seconds(pids: Iterable[int]) -> float:
    """The sum over a cluster's broker processes."""
    return sum(cpu_seconds(pid) for pid in pids)


def load_average() -> tuple[float, float, float]:
    with open("/proc/loadavg") as f:
        one, five, fifteen = f.read().split()[:3]
    return float(one), float(five), float(fifteen)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
                              ).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


# --- raw protocol ---------------------------------------------------------------------------------


def recv_frame(sock: socket.socket) -> bytes:
    """One size-prefixed response frame from a blocking socket (without the size)."""
    (n,) = struct.unpack(">i", _recv_exact(sock, 4))
    return _recv_exact(sock, n)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("connection closed")
        got += k
    return bytes(buf)


# --- Kafka's performance tools --------------------------------------------------------------------


def java_tool(main_class: str, *args: str, jvm_options: Sequence[str] = CLIENT_JVM_OPTIONS,
              timeout: float = 900) -> str:
    """Run one of Kafka's tools on the 3.9.1 jars; its stdout, or RuntimeError with its output.
    ``jvm_options`` replace CLIENT_JVM_OPTIONS for a benchmark whose published numbers were measured
    with other client JVMs."""
    from tests.kafka_dist import classpath

    proc = subprocess.run(["java", *jvm_options, "-cp", classpath(), main_class, *args],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{main_class} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


@dataclass(frozen=True)
class ProducerResult:
    records: int
    records_per_s: float
    mb_per_s: float
    avg_latency_ms: float
    p50_ms: float
    p99_ms: float


def parse_producer_performance(out: str) -> ProducerResult:
    """The summary line of ProducerPerformance: "1000000 records sent, 241196.3 records/sec (23.00 MB/sec),
    12.34 ms avg latency, 300.00 ms max latency, 5 ms 50th, 20 ms 95th, 40 ms 99th, 50 ms 99.9th."."""
    summary = [ln for ln in out.splitlines() if "records sent" in ln and "50th" in ln]
    if not summary:
        raise RuntimeError(f"ProducerPerformance printed no summary:\n{out[-2000:]}")
    parts = [p.strip() for p in summary[-1].rstrip(".").split(",")]
    mb = parts[1].split("(")[1].split()[0]
    return ProducerResult(records=int(parts[0].split()[0]), records_per_s=float(parts[1].split()[0]),
                          mb_per_s=float(mb), avg_latency_ms=float(parts[2].split()[0]),
                          p50_ms=float(parts[4].split()[0]), p99_ms=float(parts[6].split()[0]))


def producer_performance(bootstrap: str, topic: str, records: int, record_size: int, acks: str,
                         extra_props: Sequence[str] = (), *, throughput: int = -1,
                         producer_config: str | os.PathLike[str] | None = None,
                         jvm_options: Sequence[str] = CLIENT_JVM_OPTIONS) -> ProducerResult:
    """``throughput``: records/s the tool holds to, -1 for as fast as it can; ``producer_config``: a
    client properties file (``--producer.config``: security settings a command line should not carry)."""
    config = ("--producer.config", os.fspath(producer_config)) if producer_config is not None else ()
    out = java_tool("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(records),
                    "--record-size", str(record_size), "--throughput", str(throughput), *config,
                    "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}", *extra_props,
                    jvm_options=jvm_options)
    return parse_producer_performance(out)


@dataclass(frozen=True)
class ConsumerResult:
    records: int
    mb: float
    fetch_records_per_s: float  # after the group's join: the fetch phase alone
    fetch_mb_per_s: float
    rebalance_ms: int


def parse_consumer_performance(out: str) -> ConsumerResult:
    """The data row of ConsumerPerformance --hide-header: start.time, end.time, data.consumed.in.MB,
    MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec,
    fetch.nMsg.sec."""
    rows = [ln.split(", ") for ln in out.splitlines() if ln.count(", ") >= 9]
    if not rows:
        raise RuntimeError(f"ConsumerPerformance printed no result:\n{out[-2000:]}")
    row = rows[-1]
    return ConsumerResult(records=int(row[4]), mb=float(row[2]), fetch_records_per_s=float(row[9]),
                          fetch_mb_per_s=float(row[8]), rebalance_ms=int(row[6]))


def consumer_performance(bootstrap: str, topic: str, records: int, group: str, *,
                         consumer_config: str | os.PathLike[str] | None = None,
                         jvm_options: Sequence[str] = CLIENT_JVM_OPTIONS) -> ConsumerResult:
    """``consumer_config``: a client properties file (``--consumer.config``, as for producers)."""
    config = ("--consumer.config", os.fspath(consumer_config)) if consumer_config is not None else ()
    out = java_tool("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
                    "--messages", str(records), *config, "--group", group, "--timeout", "60000", "--hide-header",
                    jvm_options=jvm_options)
    result = parse_consumer_performance(out)
    if result.records < records:
        raise RuntimeError(f"ConsumerPerformance read {result.records} of {records} records:\n{out[-2000:]}")
    return result


@dataclass(frozen=True)
class LatencyResult:
    messages: int
    avg_ms: float
    p50_ms: int  # EndToEndLatency truncates each latency to whole milliseconds
    p99_ms: int
    p999_ms: int


def parse_end_to_end_latency(out: str, messages: int) -> LatencyResult:
    """EndToEndLatency's last two lines: "Avg latency: 0.8123 ms" and
    "Percentiles: 50th = 0, 99th = 3, 99.9th = 12"."""
    avg = [ln for ln in out.splitlines() if ln.startswith("Avg latency:")]
    pct = [ln for ln in out.splitlines() if ln.startswith("Percentiles:")]
    if not avg or not pct:
        raise RuntimeError(f"EndToEndLatency printed no result:\n{out[-2000:]}")
    values = [int(part.split("=")[1]) for part in pct[-1].split(":", 1)[1].split(",")]
    return LatencyResult(messages=messages, avg_ms=float(avg[-1].split()[2]), p50_ms=values[0], p99_ms=values[1],
                         p999_ms=values[2])


def end_to_end_latency(bootstrap: str, topic: str, messages: int, acks: str, record_size: int, *,
                       jvm_options: Sequence[str] = CLIENT_JVM_OPTIONS) -> LatencyResult:
    out = java_tool("org.apache.kafka.tools.EndToEndLatency", bootstrap, topic, str(messages), acks, str(record_size),
                    jvm_options=jvm_options)
    return parse_end_to_end_latency(out, messages)


# --- topics ---------------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1,
                 configs: dict[str, str] | None = None, timeout: float = 120.0) -> None:
    """Create a topic (librdkafka's admin client) and wait until every partition has a leader and its
    full ISR on every broker's metadata: a measurement must not start while followers catch up."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor, config=configs or {})],
                                  request_timeout=timeout, operation_timeout=timeout)
    futures[topic].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=30)
        parts = md.topics[topic].partitions if topic in md.topics and md.topics[topic].error is None else {}
        if len(parts) == partitions and all(p.leader >= 0 and len(p.isrs) == replication_factor
                                            for p in parts.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: not every partition has a leader and {replication_factor} in sync")
        time.sleep(0.2)


# --- statistics -----------------------------------------------------------------------------------


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def ratio(a: float, b: float) -> float:
    """a / b; equal zeros (latencies under a millisecond on both) are 1.0."""
    if b == 0:
        return 1.0 if a == 0 else math.inf
    return a / b


def per_million(cpu: float, records: int) -> float:
    return cpu / records * 1e6 if records else math.nan
