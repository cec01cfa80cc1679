"""Produce validation benchmark: what Kafka's LogValidator rules cost us, and throughput against Kafka.

1. The validator alone: time per record and MB/s for 100-byte records, uncompressed and lz4, in
   16 KiB and 1 MiB batches (best of several passes: the machine is shared), with the compiled
   record scanner the broker uses and with the pure-Python reference scanner.
2. Where the time goes: a cProfile of validating 1 MiB batches.
3. Event-loop stall: the longest gap a 1 ms ticker sees on the broker's kind of loop while a 1 MiB
   batch (lz4, uncompressed) is validated on the loop and in a worker thread, with either scanner.
4. Throughput side by side: Kafka's own ``org.apache.kafka.tools.ProducerPerformance`` drives kafkette
   (full validation) and Apache Kafka 3.9.1 in alternating runs, 100-byte records, acks=1,
   uncompressed and lz4, batch.size 16 KiB and 1 MiB. Each run, the medians, the ratio and each
   broker's CPU seconds (utime + stime from /proc/<pid>/stat) are printed.

Run: ``python -m tests.bench_validation`` (``KAFKETTE_BENCH_RECORDS`` records per run, default
1,000,000; ``KAFKETTE_BENCH_RUNS`` runs per broker and setting, default 3; ``--no-kafka`` skips 4).
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import os
import pstats
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import broker.log_validator as log_validator
from broker.log_validator import validate_produce_records
from protocol.compression import CompressionType
from protocol.record_scan import scan_records_python
from protocol.records import build_batch
from tests import benchmark_clients_support as bu

RECORD_SIZE = 100
NOW = int(time.time() * 1000)
KWARGS: dict[str, Any] = dict(topic_partition="bench-0", max_message_bytes=4 << 20, timestamp_type="CreateTime",
                              before_max_ms=1 << 62, after_max_ms=1 << 62, now_ms=NOW, compacted=False,
                              max_decompressed_bytes=55 << 20)


def _batch(batch_bytes: int, codec: CompressionType) -> tuple[memoryview, int]:
    """Null keys and 100-byte values of random capital letters, as ProducerPerformance sends them."""
    count = batch_bytes // (RECORD_SIZE + 8)
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    rnd = os.urandom(RECORD_SIZE * count)
    values = [bytes(alphabet[b % 26] for b in rnd[i * RECORD_SIZE:(i + 1) * RECORD_SIZE]) for i in range(count)]
    data = build_batch([(None, v, NOW) for v in values], compression=codec)
    return memoryview(bytearray(data)), count


@contextmanager
def _scanner(name: str) -> Iterator[None]:
    """Validation with the named scanner: "broker" (what the broker runs) or "python" (the reference)."""
    saved = log_validator.scan_records, log_validator.COMPILED_SCANNER
    if name == "python":
        log_validator.scan_records, log_validator.COMPILED_SCANNER = scan_records_python, False
    try:
        yield
    finally:
        log_validator.scan_records, log_validator.COMPILED_SCANNER = saved


SCANNERS = ("broker", "python")


def validator_costs() -> None:
    print(f"validator alone (best pass); the broker's scanner: {log_validator.RECORD_SCANNER}")
    print(f"  {'scanner':>7} {'batch':>8} {'codec':>6} {'records':>8} {'wire KiB':>9} {'ms/batch':>9} "
          f"{'ns/record':>10} {'MB/s':>7}")
    for scanner in SCANNERS:
        with _scanner(scanner):
            _validator_costs(scanner)


def _validator_costs(scanner: str) -> None:
    for batch_bytes in (16 << 10, 1 << 20):
        for codec in (CompressionType.NONE, CompressionType.LZ4):
            data, count = _batch(batch_bytes, codec)
            passes = max(5, (8 << 20) // batch_bytes)
            best = float("inf")
            for _ in range(passes):
                start = time.perf_counter()
                validate_produce_records(data, **KWARGS)
                best = min(best, time.perf_counter() - start)
            print(f"  {scanner:>7} {batch_bytes >> 10:>6}Ki {codec.name.lower():>6} {count:>8} {len(data) / 1024:>9.0f} "
                  f"{best * 1e3:>9.2f} {best / count * 1e9:>10.0f} {count * RECORD_SIZE / best / 1e6:>7.1f}")


def profile() -> None:
    for codec in (CompressionType.NONE, CompressionType.LZ4):
        data, _ = _batch(1 << 20, codec)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(10):
            validate_produce_records(data, **KWARGS)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(6)
        lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
        start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
        print(f"\nprofile, 10 x 1 MiB {codec.name.lower()} batches (top by internal time):")
        print("\n".join(lines[start:start + 7]))


async def _max_stall(data: memoryview, mode: str, rounds: int = 10) -> float:
    loop = asyncio.get_running_loop()
    worst = 0.0
    stop = False

    async def ticker() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not stop:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst = max(worst, now - last - 0.001)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.02)
    for _ in range(rounds):
        if mode == "on the loop":
            validate_produce_records(data, **KWARGS)
        elif mode == "in a thread":
            await loop.run_in_executor(None, lambda: validate_produce_records(data, yield_gil=True, **KWARGS))
        await asyncio.sleep(0.005)
    stop = True
    await task
    return worst


def loop_stalls() -> None:
    """On the loop, and in a thread as ``ReplicaManager`` does it for big batches, with either scanner."""
    from broker import replica_manager

    for scanner in SCANNERS:
        with _scanner(scanner):
            _loop_stalls(scanner)
    print(f"  (thread switch interval {sys.getswitchinterval() * 1e3:.0f} ms; with its scanner the broker validates "
          f"compressed batches from {replica_manager._OFF_LOOP_COMPRESSED_BYTES >> 10} KiB and uncompressed ones "
          f"from {replica_manager._OFF_LOOP_UNCOMPRESSED_BYTES >> 10} KiB in a thread)")


def _loop_stalls(scanner: str) -> None:
    try:
        import uvloop

        new_loop = uvloop.new_event_loop
        kind = "uvloop"
    except ImportError:
        new_loop = asyncio.new_event_loop
        kind = "asyncio"
    for codec in (CompressionType.LZ4, CompressionType.NONE):
        data, _ = _batch(1 << 20, codec)
        print(f"\nlongest event-loop stall ({kind}, 1 ms ticker, 10 validations of a 1 MiB {codec.name.lower()} "
              f"batch, {scanner} scanner; best of 3 tries):")
        for mode in ("idle", "on the loop", "in a thread"):
            stalls = []
            for _ in range(3):
                loop = new_loop()
                try:
                    stalls.append(loop.run_until_complete(_max_stall(data, mode)))
                finally:
                    loop.close()
            print(f"  {mode:12} {min(stalls) * 1e3:7.2f} ms")


# --- side by side with Apache Kafka -------------------------------------------------------------


# The client JVM this benchmark's numbers in BENCHMARKS.md were measured with: a heap limit and the
# JVM's defaults otherwise.
PRODUCER_JVM_OPTIONS = ("-Xmx512m",)


def _producer_performance(bootstrap: str, topic: str, records: int, batch_size: int, codec: str) -> float:
    props = (f"batch.size={batch_size}", "linger.ms=5", f"compression.type={codec}", "max.request.size=4194304",
             "buffer.memory=67108864")
    return bu.producer_performance(bootstrap, topic, records, RECORD_SIZE, "1", props,
                                   jvm_options=PRODUCER_JVM_OPTIONS).records_per_s


def side_by_side(records: int, runs: int) -> None:
    from clients.devcluster import LocalCluster
    from tests.integration.helpers import create_topic
    from tests.ops.kafka_broker import KafkaZkBroker

    settings = [(16 << 10, "none"), (16 << 10, "lz4"), (1 << 20, "none"), (1 << 20, "lz4")]
    kafka = KafkaZkBroker()
    with LocalCluster(1) as cluster:
        try:
            kafka.start()
            brokers = {"kafkette": (cluster.bootstrap, cluster.brokers[0].process.pid),
                       "kafka": (kafka.bootstrap, kafka.process.pid)}
            print(f"\nProducerPerformance: {records:,} records of {RECORD_SIZE} B per run, acks=1, linger.ms=5, "
                  f"1 partition, alternating brokers, {runs} runs each")
            summary = []
            for batch_size, codec in settings:
                topic = f"perf-{batch_size >> 10}k-{codec}"
                for bootstrap, _ in brokers.values():
                    create_topic(bootstrap, topic, 1, {"max.message.bytes": str(4 << 20)})
                results: dict[str, list[tuple[float, float]]] = {name: [] for name in brokers}
                for run in range(runs):
                    for name, (bootstrap, pid) in brokers.items():
                        cpu0 = bu.cpu_seconds(pid)
                        rps = _producer_performance(bootstrap, topic, records, batch_size, codec)
                        cpu = bu.cpu_seconds(pid) - cpu0
                        results[name].append((rps, cpu))
                        print(f"  batch.size {batch_size >> 10:>5} KiB {codec:>4} run {run + 1} {name:9} "
                              f"{rps:>11,.0f} records/s {rps * RECORD_SIZE / 1e6:>7.1f} MB/s  "
                              f"broker CPU {cpu:6.1f} s", flush=True)
                med = {n: bu.median(r for r, _ in rs) for n, rs in results.items()}
                cpu_med = {n: bu.median(c for _, c in rs) for n, rs in results.items()}
                summary.append((batch_size, codec, med, cpu_med))
            print(f"\n  {'batch.size':>10} {'codec':>5} {'kafkette rec/s':>15} {'kafka rec/s':>13} {'ratio':>6} "
                  f"{'kafkette CPU s':>15} {'kafka CPU s':>12}")
            for batch_size, codec, med, cpu_med in summary:
                print(f"  {batch_size >> 10:>7}KiB {codec:>5} {med['kafkette']:>15,.0f} {med['kafka']:>13,.0f} "
                      f"{med['kafkette'] / med['kafka']:>6.2f} {cpu_med['kafkette']:>15.1f} {cpu_med['kafka']:>12.1f}")
        finally:
            kafka.stop()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    validator_costs()
    profile()
    loop_stalls()
    if "--no-kafka" not in args:
        side_by_side(int(os.environ.get("KAFKETTE_BENCH_RECORDS", "1000000")),
                     int(os.environ.get("KAFKETTE_BENCH_RUNS", "3")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
