"""Many partitions: kafkette against Apache Kafka 3.9.1 on one broker, and kafkette on three.

One broker (real ZooKeeper) with a topic of 10,000 partitions (``KAFKETTE_BENCH_PARTITIONS``), kafkette
and Apache Kafka 3.9.1 (one ZooKeeper-mode broker from the Maven Central jars, full JIT) in alternating
runs (``KAFKETTE_BENCH_RUNS``, 3), each run on a fresh broker:

* RSS of the idle broker, then RSS per idle partition (RSS with the topic minus RSS without it, over
  the partition count);
* create: from sending CreateTopics until Metadata shows a leader for every partition;
* Metadata latency for all topics (v12, no topic list): the time from sending the request to the last
  byte of the answer, median and p99 of 100 requests on one connection after 5 to warm up;
* one record to every partition, then restart after a clean stop (SIGTERM) and after SIGKILL: from
  starting the process until Metadata shows every partition led, and every partition's end offset
  is back. After SIGKILL the dead broker's ZooKeeper registration holds its id until the session
  expires (``zookeeper.session.timeout.ms`` = 6000 here, for both): kafkette is started at once and
  waits for that itself; Apache Kafka refuses to start while the old registration exists (KAFKA-7165
  check in ``KafkaZkClient``), so it is started once the registration is gone. "kill to all led"
  counts from the SIGKILL for both.

Then (``KAFKETTE_BENCH_CLUSTER_PARTITIONS``, 30,000; 0 skips it) kafkette alone on 3 brokers, RF=1:
create, Metadata latency, one broker's restart after SIGKILL, and controller failover: SIGKILL the
controller and time until another broker is controller and has handled the dead one's partitions.
With one replica nobody else can lead them, so "handled" means what Kafka's controller does then:
they are marked offline (leader -1) everywhere and every other partition keeps its leader.

Targets: Metadata for all topics under 100 ms, restart to all led under 10 s, controller failover
under 5 s beyond the session timeout. Descriptors at idle are counted too (kafkette: at most 1.2 per
partition plus connections). ``KAFKETTE_BENCH_QUICK=1`` uses 1,000 and 3,000 partitions and one
run of each (and says so). ``KAFKETTE_BENCH_KAFKA=0`` leaves out Apache Kafka, ``KAFKETTE_BENCH_RUNS=0``
the single broker. ``KAFKETTE_PROFILE=path``
profiles the kafkette brokers with cProfile (each writes the stats when it exits cleanly, so the
file holds the last one that did). Run: ``python -m tests.bench partitions``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from clients.devcluster import LocalCluster
from protocol.api_versions import ApiKey
from protocol.messages import decode_response, encode_request, new_request, request_type
from tests import benchmark_clients_support as bu
from tests.integration.helpers import RawClient
from tests.integration.partition_records import (
    View,
    cluster_view,
    end_offsets,
    produce_one_each,
)

QUICK = os.environ.get("KAFKETTE_BENCH_QUICK", "") not in ("", "0")
PARTITIONS = int(os.environ.get("KAFKETTE_BENCH_PARTITIONS", "1000" if QUICK else "10000"))
CLUSTER_PARTITIONS = int(os.environ.get("KAFKETTE_BENCH_CLUSTER_PARTITIONS", "3000" if QUICK else "30000"))
RUNS = int(os.environ.get("KAFKETTE_BENCH_RUNS", "1" if QUICK else "3"))
WITH_KAFKA = os.environ.get("KAFKETTE_BENCH_KAFKA", "1") != "0"

SESSION_TIMEOUT_MS = 6000
METADATA_GOAL_S = 0.100
RESTART_GOAL_S = 10.0
FAILOVER_GOAL_BEYOND_SESSION_S = 5.0
FDS_PER_PARTITION_GOAL = 1.2
METADATA_WARMUP, METADATA_REQUESTS = 5, 100
LONG = 900.0  # seconds: generous bounds for anything with tens of thousands of partitions on 2 cores

COMMON = {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), "auto.leader.rebalance.enable": "false",
          "offsets.topic.num.partitions": "1"}


# ---------------------------------------------------------------------------------------------------
# Wire helpers (raw protocol, so the same bytes go to both brokers; also used by
# tests/integration/test_many_partitions.py)

# Partitions one CreateTopics or CreatePartitions may add (kafkette refuses more, as KRaft does).
MAX_PARTITIONS_PER_REQUEST = 10_000


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int, timeout: float = LONG) -> None:
    """CreateTopics to the controller (a ZooKeeper-mode broker that is not answers NOT_CONTROLLER); beyond
    10,000 partitions, CreatePartitions adds the rest 10,000 at a time."""
    v = cluster_view(bootstrap, topic)
    mt = request_type(ApiKey.CREATE_TOPICS)
    first = min(partitions, MAX_PARTITIONS_PER_REQUEST)
    with RawClient(v.brokers[v.controller], timeout=timeout) as raw:
        r = raw.request(ApiKey.CREATE_TOPICS, 5, topics=[mt.CreatableTopic(
            name=topic, num_partitions=first, replication_factor=replication, assignments=[], configs=[])],
            timeout_ms=int(timeout * 1000), validate_only=False)
        assert r.topics[0].error_code == 0, r.topics[0]
        cp = request_type(ApiKey.CREATE_PARTITIONS)
        count = first
        while count < partitions:
            count = min(partitions, count + MAX_PARTITIONS_PER_REQUEST)
            r = raw.request(ApiKey.CREATE_PARTITIONS, 3, timeout_ms=int(timeout * 1000), validate_only=False,
                            topics=[cp.CreatePartitionsTopic(name=topic, count=count, assignments=None)])
            assert r.results[0].error_code == 0, r.results[0]


def view_or_none(bootstrap: str, topic: str) -> View | None:
    """``cluster_view``, or None while the broker does not answer (starting, loading its logs)."""
    try:
        return cluster_view(bootstrap, topic, timeout=30)
    except (OSError, ConnectionError, struct.error, AssertionError):
        return None


def poll(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> float:
    """Seconds until ``check()`` holds."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(interval)
    return time.monotonic() - start


def all_led(bootstrap: str, topic: str, partitions: int) -> bool:
    v = view_or_none(bootstrap, topic)
    return v is not None and len(v.leaders) == partitions and all(leader >= 0 for leader in v.leaders.values())


def metadata_latencies(bootstrap: str, expect_partitions: int) -> list[float]:
    """Seconds from sending Metadata v12 for all topics to the last byte of its answer, one connection."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        times: list[float] = []
        last = b""
        for i in range(METADATA_WARMUP + METADATA_REQUESTS):
            frame = encode_request(ApiKey.METADATA, 12, i + 1, "bench", new_request(
                ApiKey.METADATA, topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False))
            t0 = time.perf_counter()
            sock.sendall(frame)
            last = bu.recv_frame(sock)
            if i >= METADATA_WARMUP:
                times.append(time.perf_counter() - t0)
    _, md = decode_response(ApiKey.METADATA, 12, last)
    got = sum(len(t.partitions) for t in md.topics)
    assert got >= expect_partitions, f"Metadata listed {got} partitions, expected at least {expect_partitions}"
    return times




# ---------------------------------------------------------------------------------------------------
# Process measurements

def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def settled_rss_mib(pid: int, timeout: float = 30.0) -> float:
    """RSS once it stops moving (within 1% over 2 s): background work after a change has finished."""
    samples: list[float] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        samples.append(rss_mib(pid))
        recent = samples[-5:]
        if len(recent) == 5 and max(recent) - min(recent) <= 0.01 * max(recent):
            break
        time.sleep(0.5)
    return samples[-1]


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) the process has used: on a shared machine, the
    figure that does not depend on what else runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def p99(values: list[float]) -> float:
    """Nearest rank: with 100 values, the second largest."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(0.99 * len(ordered) + 0.999999) - 1))]


# ---------------------------------------------------------------------------------------------------
# The two single brokers, behind one interface

class Kafkette:
    name = "kafkette"

    def __init__(self) -> None:
        self.cluster = LocalCluster(1, overrides=dict(COMMON), metrics_base_port=None).start()
        self.broker = self.cluster.brokers[0]

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def pid(self) -> int:
        assert self.broker.process is not None
        return self.broker.process.pid

    def stop_clean(self) -> None:
        rc = self.broker.stop(timeout=LONG)
        assert rc == 0, f"clean stop exited with {rc}"

    def kill(self) -> None:
        self.broker.kill()

    def start_after_kill(self) -> None:
        self.broker.start(wait=False)  # waits itself for the dead session's registration to expire

    def start(self) -> None:
        self.broker.start(wait=False)

    def log_text(self) -> str:
        return self.broker.log_text()

    def close(self) -> None:
        self.cluster.__exit__(None, None, None)


class ApacheKafka:
    name = "Apache Kafka"

    def __init__(self) -> None:
        from tests.ops.kafka_broker import KafkaZkBroker

        # The full JIT, as production runs it (the fixture's default stops at C1 to start faster).
        self.k = KafkaZkBroker(overrides=dict(COMMON), jvm_options=())
        self.k.start(timeout=300)
        assert self.k.process is not None
        self.command = list(self.k.process.args)  # type: ignore[arg-type]

    @property
    def bootstrap(self) -> str:
        return self.k.bootstrap

    @property
    def pid(self) -> int:
        assert self.k.process is not None
        return self.k.process.pid

    def stop_clean(self) -> None:
        assert self.k.process is not None
        self.k.process.terminate()
        self.k.process.wait(LONG)

    def kill(self) -> None:
        assert self.k.process is not None
        self.k.process.kill()
        self.k.process.wait()

    def start_after_kill(self) -> None:
        # Kafka exits at start when its id is still registered by another session: wait for it to go.
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.k.zk.connect_string)
        zk.start(timeout=30)
        try:
            poll(lambda: zk.exists("/kafka/brokers/ids/0") is None, 120, "the dead broker's registration expires")
        finally:
            zk.stop()
            zk.close()
        self.start()

    def start(self) -> None:
        self.k.process = subprocess.Popen(self.command, stdout=open(self.k.log_path, "ab"),  # noqa: SIM115
                                          stderr=subprocess.STDOUT)

    def log_text(self) -> str:
        try:
            return self.k.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        self.k.stop()


# ---------------------------------------------------------------------------------------------------
# One run on one broker

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \w+ \S+: (.*)$")


def kafkette_phases(log_text: str, led_at: float) -> list[tuple[str, float]]:
    """A kafkette restart's phases from its log (and ``led_at``, the wall-clock time Metadata showed
    every partition led): (name, seconds), in order."""
    marks: dict[str, float] = {}
    for line in log_text.splitlines():
        m = _STAMP.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        msg = m.group(2)
        marks.setdefault("first line", t)
        if msg.startswith("loaded ") and " logs in " in msg:
            marks["logs loaded"] = t
        elif "starting failover" in msg:
            marks["failover started"] = t
        elif "failover done" in msg:
            marks["failover done"] = t
    order = ["first line", "logs loaded", "failover started", "failover done"]
    names = {"logs loaded": "logs loaded", "failover started": "registration + election",
             "failover done": "controller failover"}
    out = [(names[b], marks[b] - marks[a]) for a, b in zip(order, order[1:], strict=False)
           if a in marks and b in marks]
    if "failover done" in marks:
        out.append(("LeaderAndIsr + UpdateMetadata until all led", led_at - marks["failover done"]))
    return out


def _check_data(bootstrap: str, topic: str, partitions: int, what: str) -> None:
    """Every partition's end offset is 1 again (one record each), within a minute of all being led
    (Metadata can show a leader a moment before that leader has applied its LeaderAndIsr)."""
    last: dict[int, int] = {}

    def complete() -> bool:
        nonlocal last
        try:
            last = end_offsets(bootstrap, topic, partitions)
        except (OSError, ConnectionError, AssertionError, KeyError):
            return False
        return len(last) == partitions and all(o == 1 for o in last.values())

    try:
        poll(complete, 60, what, interval=0.5)
    except TimeoutError:
        wrong = [(p, o) for p, o in last.items() if o != 1]
        raise AssertionError(f"{what}: {len(wrong)} end offsets not 1, e.g. {wrong[:5]}") from None


def one_run(kind: type[Kafkette] | type[ApacheKafka], run: int) -> dict[str, Any]:
    topic = f"many-{run}"
    subject = kind()
    r: dict[str, Any] = {}
    try:
        r["rss_idle"] = settled_rss_mib(subject.pid)
        c0 = cpu_s(subject.pid)
        t0 = time.monotonic()
        create_topic(subject.bootstrap, topic, PARTITIONS, 1)
        poll(lambda: all_led(subject.bootstrap, topic, PARTITIONS), LONG, "every partition led after create")
        r["create"] = time.monotonic() - t0
        r["create_cpu"] = cpu_s(subject.pid) - c0
        r["rss_full"] = settled_rss_mib(subject.pid)
        r["rss_per_partition_kib"] = (r["rss_full"] - r["rss_idle"]) * 1024 / PARTITIONS
        r["fds"] = open_fds(subject.pid)
        produce_one_each(subject.bootstrap, topic, PARTITIONS)
        lat = metadata_latencies(subject.bootstrap, PARTITIONS)
        r["md_median"], r["md_p99"] = statistics.median(lat), p99(lat)

        subject.stop_clean()
        mark = len(subject.log_text())
        t0 = time.monotonic()
        subject.start()
        poll(lambda: all_led(subject.bootstrap, topic, PARTITIONS), LONG, "every partition led after a clean restart")
        r["restart_clean"] = time.monotonic() - t0
        r["restart_clean_cpu"] = cpu_s(subject.pid)  # a new process: all it used until every partition was led
        if isinstance(subject, Kafkette):
            r["phases"] = kafkette_phases(subject.log_text()[mark:], time.time())
        _check_data(subject.bootstrap, topic, PARTITIONS, "after a clean restart")
        r["rss_restarted"] = settled_rss_mib(subject.pid)
        r["fds_restarted"] = open_fds(subject.pid)

        subject.kill()
        killed = time.monotonic()
        subject.start_after_kill()
        started = time.monotonic()
        poll(lambda: all_led(subject.bootstrap, topic, PARTITIONS), LONG, "every partition led after SIGKILL")
        r["restart_kill"] = time.monotonic() - started
        r["kill_to_led"] = time.monotonic() - killed
        r["restart_kill_cpu"] = cpu_s(subject.pid)
        _check_data(subject.bootstrap, topic, PARTITIONS, "after SIGKILL")
    finally:
        subject.close()
    print(f"run {run} {subject.name:>12}: idle RSS {r['rss_idle']:.0f} MiB, create {r['create']:.1f} s "
          f"({r['create_cpu']:.1f} CPU s), "
          f"RSS {r['rss_full']:.0f} MiB ({r['rss_per_partition_kib']:.1f} KiB/partition), "
          f"Metadata median {r['md_median'] * 1000:.1f} ms p99 {r['md_p99'] * 1000:.1f} ms, "
          f"restart clean {r['restart_clean']:.1f} s ({r['restart_clean_cpu']:.1f} CPU s), after SIGKILL "
          f"{r['restart_kill']:.1f} s ({r['restart_kill_cpu']:.1f} CPU s; kill to all led {r['kill_to_led']:.1f} s), "
          f"descriptors {r['fds']} / {r['fds_restarted']} "
          f"after restart, RSS after restart {r['rss_restarted']:.0f} MiB", flush=True)
    if r.get("phases"):
        print("    restart phases (broker log): " + ", ".join(f"{n} {s:.1f}s" for n, s in r["phases"]), flush=True)
    return r


# ---------------------------------------------------------------------------------------------------
# kafkette on three brokers

def cluster_runs() -> dict[str, float]:
    n = CLUSTER_PARTITIONS
    topic = "many-cluster"
    out: dict[str, float] = {}
    with LocalCluster(3, overrides=dict(COMMON), metrics_base_port=None) as cluster:
        boot = cluster.bootstrap
        t0 = time.monotonic()
        create_topic(boot, topic, n, 1)
        poll(lambda: all_led(boot, topic, n), LONG, "every partition led after create")
        out["create"] = time.monotonic() - t0
        print(f"3 brokers, {n} partitions RF=1: created and all led in {out['create']:.1f} s", flush=True)
        produce_one_each(boot, topic, n)
        lat = metadata_latencies(cluster.brokers[0].bootstrap, n)
        out["md_median"], out["md_p99"] = statistics.median(lat), p99(lat)
        print(f"  Metadata for all topics: median {out['md_median'] * 1000:.1f} ms, "
              f"p99 {out['md_p99'] * 1000:.1f} ms", flush=True)

        before = cluster_view(boot, topic)
        victim = next(b for b in cluster.brokers if b.broker_id != before.controller)
        others = [b.bootstrap for b in cluster.brokers if b is not victim]
        theirs = {p for p, leader in before.leaders.items() if leader == victim.broker_id}

        def back(where: str) -> bool:
            # Led everywhere, the victim's partitions by a leader epoch newer than before the kill:
            # until its old session expires the others still name it leader without asking.
            v = view_or_none(where, topic)
            return (v is not None and len(v.leaders) == n and all(x >= 0 for x in v.leaders.values())
                    and all(v.epochs[p] > before.epochs[p] for p in theirs))

        victim.kill()
        killed = time.monotonic()
        victim.start(wait=False)
        started = time.monotonic()
        poll(lambda: back(victim.bootstrap) and back(others[0]), LONG,
             "every partition led after a broker's SIGKILL restart")
        out["restart_kill"] = time.monotonic() - started
        out["kill_to_led"] = time.monotonic() - killed
        assert victim.process is not None
        out["restart_kill_cpu"] = cpu_s(victim.process.pid)
        _check_data(boot, topic, n, "after a broker's SIGKILL restart")
        print(f"  broker {victim.broker_id} (not the controller; it led {len(theirs)}) SIGKILLed and started at "
              f"once: all led {out['restart_kill']:.1f} s after its start ({out['kill_to_led']:.1f} s after the "
              f"kill; {out['restart_kill_cpu']:.1f} CPU s in the restarted broker)", flush=True)

        before = cluster_view(boot, topic)
        controller = before.controller
        dead = cluster.brokers[controller]
        survivors = [b.bootstrap for b in cluster.brokers if b is not dead]
        led_by_dead = {p for p, leader in before.leaders.items() if leader == controller}

        def handled() -> bool:
            v = view_or_none(survivors[0], topic)
            if v is None or v.controller in (-1, controller):
                return False
            return len(v.leaders) == n and all((v.leaders[p] < 0) == (p in led_by_dead) for p in v.leaders)

        pids = {b.broker_id: b.process.pid for b in cluster.brokers if b is not dead and b.process is not None}
        cpu_before = {i: cpu_s(pid) for i, pid in pids.items()}
        dead.kill()
        killed = time.monotonic()
        poll(handled, LONG, "a new controller took over")
        out["failover"] = time.monotonic() - killed
        new_controller = cluster_view(survivors[0], topic).controller
        out["failover_cpu"] = cpu_s(pids[new_controller]) - cpu_before[new_controller]
        print(f"  controller {controller} SIGKILLed (it led {len(led_by_dead)} partitions): broker "
              f"{new_controller} controller and those partitions offline, the rest led, "
              f"{out['failover']:.1f} s after the kill (zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}; "
              f"{out['failover_cpu']:.1f} CPU s in the new controller's broker meanwhile)", flush=True)
        dead.start(wait=False)
        poll(lambda: all_led(boot, topic, n), LONG, "every partition led once the old controller is back")
        _check_data(boot, topic, n, "after the controller's SIGKILL restart")
    return out


# ---------------------------------------------------------------------------------------------------

def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> int:
    if QUICK:
        print(f"QUICK MODE: {PARTITIONS} partitions on one broker, {CLUSTER_PARTITIONS} on three, "
              f"{RUNS} run(s) each: not the benchmark's numbers")
    print(f"{PARTITIONS} partitions on one broker, RF=1; zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}; "
          f"{RUNS} alternating run(s) per broker", flush=True)
    kinds: list[type[Kafkette] | type[ApacheKafka]] = [Kafkette]
    if WITH_KAFKA:
        if shutil.which("java") is None:
            print("no java on PATH: Apache Kafka left out")
        else:
            kinds.append(ApacheKafka)
    results: dict[str, list[dict[str, Any]]] = {k.name: [] for k in kinds}
    for run in range(1, RUNS + 1):
        order = kinds if run % 2 else list(reversed(kinds))
        for kind in order:
            results[kind.name].append(one_run(kind, run))
    if RUNS > 0:
        single_broker_summary(results)
    if CLUSTER_PARTITIONS:
        print()
        c = cluster_runs()
        beyond = c["failover"] - SESSION_TIMEOUT_MS / 1000
        print(f"targets (3 brokers): Metadata p99 < {METADATA_GOAL_S * 1000:.0f} ms: "
              f"{_met(c['md_p99'] < METADATA_GOAL_S)}; broker restart after SIGKILL < {RESTART_GOAL_S:.0f} s: "
              f"{_met(c['restart_kill'] < RESTART_GOAL_S)}; controller failover {beyond:.1f} s beyond the "
              f"{SESSION_TIMEOUT_MS / 1000:.0f} s session timeout, goal < {FAILOVER_GOAL_BEYOND_SESSION_S:.0f} s: "
              f"{_met(beyond < FAILOVER_GOAL_BEYOND_SESSION_S)}")
    with contextlib.suppress(OSError):
        print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    return 0


def single_broker_summary(results: dict[str, list[dict[str, Any]]]) -> None:
    ours = results["kafkette"]
    theirs = results.get("Apache Kafka", [])
    rows = [("create until all led (s)", "create", 1.0), ("  broker CPU for it (s)", "create_cpu", 1.0),
            ("idle broker RSS (MiB)", "rss_idle", 1.0),
            ("RSS per idle partition (KiB)", "rss_per_partition_kib", 1.0),
            ("Metadata all topics, median (ms)", "md_median", 1000.0),
            ("Metadata all topics, p99 (ms)", "md_p99", 1000.0),
            ("restart after clean stop (s)", "restart_clean", 1.0),
            ("  broker CPU until all led (s)", "restart_clean_cpu", 1.0),
            ("restart after SIGKILL, from start (s)", "restart_kill", 1.0),
            ("  broker CPU until all led (s)", "restart_kill_cpu", 1.0),
            ("SIGKILL to all led (s)", "kill_to_led", 1.0)]
    print(f"\nmedians of {RUNS} run(s), {PARTITIONS} partitions; ratio = Apache Kafka / kafkette "
          "(above 1: kafkette faster or smaller)")
    for label, key, scale in rows:
        a = _median(ours, key) * scale
        line = f"  {label:<40} kafkette {a:9.1f}"
        if theirs:
            b = _median(theirs, key) * scale
            line += f"   Apache Kafka {b:9.1f}   ratio {b / a if a else float('inf'):.2f}"
        print(line)
    md, md99 = _median(ours, "md_median"), _median(ours, "md_p99")
    clean, kill = _median(ours, "restart_clean"), _median(ours, "restart_kill")
    fds = _median(ours, "fds_restarted") / PARTITIONS
    print(f"targets (kafkette): Metadata p99 < {METADATA_GOAL_S * 1000:.0f} ms: {_met(md99 < METADATA_GOAL_S)} "
          f"(median {md * 1000:.1f}); restart < {RESTART_GOAL_S:.0f} s clean: {_met(clean < RESTART_GOAL_S)}, "
          f"after SIGKILL: {_met(kill < RESTART_GOAL_S)}; descriptors <= {FDS_PER_PARTITION_GOAL} per partition "
          f"+ connections: {_met(fds <= FDS_PER_PARTITION_GOAL)} ({fds:.2f})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
