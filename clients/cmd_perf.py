"""``kafkette perf produce`` / ``perf consume``: load generators with the perf-test tools' flags and output.

``perf produce`` is idempotent by default, as kafka-producer-perf-test.sh is in Kafka 3.x (its producer
has ``enable.idempotence=true`` and ``acks=all``): each batch carries a producer id and sequence
numbers. ``--producer-props enable.idempotence=false``, or acks other than all, turn it off.

``--output json`` prints one JSON object (the summary) and nothing else on stdout; on a terminal a
progress line is drawn on stderr unless the output is JSON.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from typing import Any

from clients.admin import EARLIEST, LATEST
from clients.client_config import load_properties
from clients.cmd_common import UsageError, add_connection_args, add_output_arg, connect, emit, parse_kv
from clients.cmd_progress import Progress
from clients.connection import KafkaWireError
from clients.consumer_records import next_offset_after
from clients.group_member import GroupMember
from clients.producer import COMPRESSION, Producer, parse_acks

REPORT_INTERVAL_S = 5.0


def register(sub: Any) -> None:
    p = sub.add_parser("perf", help="produce or consume load and report throughput and latency",
                       description="Load generators (kafka-producer-perf-test / kafka-consumer-perf-test).")
    psub = p.add_subparsers(dest="perf_command", required=True, metavar="ACTION")

    pr = psub.add_parser("produce", help="producer throughput and latency",
                         description="Send --num-records records of --record-size bytes, at most --throughput "
                                     "records/s (-1: no limit), and print throughput and latency percentiles. "
                                     "A progress line is printed every 5 seconds.")
    add_connection_args(pr, config_flag="--producer.config")
    add_output_arg(pr, "the summary as one object (records, records_per_sec, mb_per_sec, latencies in ms, "
                       "idempotent)")
    pr.add_argument("--topic", required=True, help="the topic to produce to (spread over all its partitions)")
    pr.add_argument("--num-records", type=int, required=True, help="how many records to send")
    pr.add_argument("--record-size", type=int, help="bytes per record (or --payload-file)")
    pr.add_argument("--payload-file", help="records are lines of this file, chosen at random")
    pr.add_argument("--throughput", type=float, required=True, help="records/s cap; -1 for none")
    pr.add_argument("--producer-props", nargs="+", action="extend", metavar="NAME=VALUE",
                    help="producer properties: acks (default all), enable.idempotence (default true; acks other "
                         "than all turns it off), compression.type, batch.size, retries, retry.backoff.ms, "
                         "delivery.timeout.ms, request.timeout.ms, bootstrap.servers, client.id")
    pr.set_defaults(func=run_produce)

    co = psub.add_parser("consume", help="consumer throughput",
                         description="Consume --messages records and print kafka-consumer-perf-test's summary.")
    add_connection_args(co, config_flag="--consumer.config")
    add_output_arg(co, "the summary as one object with the tool's column names (and the intervals of "
                       "--show-detailed-stats)")
    co.add_argument("--topic", required=True, help="the topic to consume")
    co.add_argument("--messages", type=int, required=True, help="records to consume")
    co.add_argument("--group", help="consume as a member of this group (default: no group, all partitions)")
    co.add_argument("--from-latest", action="store_true", help="start at the log end instead of the beginning")
    co.add_argument("--fetch-size", type=int, default=1 << 20, help="bytes per partition per fetch")
    co.add_argument("--timeout", type=int, default=10000, help="ms without records before giving up")
    co.add_argument("--reporting-interval", type=int, default=5000, help="ms between detailed stats lines")
    co.add_argument("--show-detailed-stats", action="store_true", help="print a stats line every interval")
    co.set_defaults(func=run_consume)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, int(q * len(sorted_values))))
    return sorted_values[i]


class Stats:
    """Throughput and latency bookkeeping with a progress line every REPORT_INTERVAL_S."""

    def __init__(self, total: int, out: Any, progress: Progress | None = None) -> None:
        self.out = out  # where the progress lines go (None: nowhere, as with --output json)
        self.progress = progress
        self.start = time.monotonic()
        self.latencies: list[float] = []
        self.count = self.bytes = 0
        self.window_start = self.start
        self.window_count = self.window_bytes = 0
        self.window_max = self.window_sum = 0.0
        self.max_latency = self.sum_latency = 0.0
        # Keep at most ~500k latency samples for percentiles (every n-th record).
        self.sampling = max(1, total // 500_000)

    def record(self, n: int, size: int, latency_ms: float) -> None:
        for i in range(n):
            if (self.count + i) % self.sampling == 0:
                self.latencies.append(latency_ms)
        self.count += n
        self.bytes += size
        self.window_count += n
        self.window_bytes += size
        self.sum_latency += latency_ms * n
        self.window_sum += latency_ms * n
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_max = max(self.window_max, latency_ms)
        now = time.monotonic()
        if now - self.window_start >= REPORT_INTERVAL_S:
            elapsed = now - self.window_start
            if self.progress is not None:
                self.progress.clear()
            if self.out is not None:
                    print(f"{self.window_count} records sent, {self.window_count / elapsed:.1f} records/sec "
                      f"({self.window_bytes / elapsed / (1 << 20):.2f} MB/sec), "
                      f"{self.window_sum / max(1, self.window_count):.1f} ms avg latency, "
                      f"{self.window_max:.1f} ms max latency.", file=self.out, flush=True)
            self.window_start = now
            self.window_count = self.window_bytes = 0
            self.window_max = self.window_sum = 0.0

    def summary(self) -> dict[str, float]:
        elapsed = max(1e-9, time.monotonic() - self.start)
        lat = sorted(self.latencies)
        return {"records": self.count, "records_per_sec": self.count / elapsed,
                "mb_per_sec": self.bytes / elapsed / (1 << 20),
                "avg_latency_ms": self.sum_latency / max(1, self.count), "max_latency_ms": self.max_latency,
                "p50_ms": percentile(lat, 0.5), "p95_ms": percentile(lat, 0.95), "p99_ms": percentile(lat, 0.99),
                "p999_ms": percentile(lat, 0.999)}


def run_produce(args: argparse.Namespace) -> int:
    if args.num_records < 1:
        raise UsageError("--num-records must be at least 1")
    if (args.record_size is None) == (args.payload_file is None):
        raise UsageError("give exactly one of --record-size and --payload-file")
    if args.record_size is not None and args.record_size < 0:
        raise UsageError("--record-size must not be negative")
    props = load_properties(args.command_config)
    props.update(parse_kv(args.producer_props, "producer property"))
    if "bootstrap.servers" in props and not args.bootstrap_server:
        args.bootstrap_server = props["bootstrap.servers"]
    acks = parse_acks(props.get("acks", "all"))
    compression = props.get("compression.type", "none")
    if compression not in COMPRESSION:
        raise UsageError(f"unknown compression.type {compression!r}")
    try:
        batch_bytes = int(props.get("batch.size", "16384"))
    except ValueError:
        raise UsageError(f"Invalid value {props['batch.size']} for configuration batch.size: Not a number of "
                         "type INT") from None
    if args.payload_file:
        try:
            with open(args.payload_file, "rb") as f:
                payloads = [line.rstrip(b"\n") for line in f if line.strip()]
        except OSError as e:
            raise UsageError(f"cannot read {args.payload_file}: {e.strerror}") from None
        if not payloads:
            raise UsageError(f"{args.payload_file} has no payloads")
    else:
        payloads = [os.urandom(args.record_size // 2 + 1).hex()[: args.record_size].encode()]
    as_json = args.output == "json"
    out = None if as_json else sys.stdout
    with connect(args, client_id=props.get("client.id", "perf-producer")) as client:
        info = client.topic(args.topic)
        parts = sorted(info.partitions)
        # The producer's own delivery rules (retries, delivery.timeout.ms) and, unless turned off,
        # idempotence. Batching is this tool's (a round of batch.size batches, sent by flush() below),
        # so the producer's own batch.size and linger.ms are out of the way.
        producer = Producer.from_properties(client, dict(props, **{"batch.size": "16384", "linger.ms": "0"}),
                                            acks=acks, compression=compression, batch_size=1 << 62,
                                            linger_ms=1 << 40)
        per_batch = max(1, batch_bytes // max(1, len(payloads[0]) + 20))
        with Progress.for_args(args, "sending", args.num_records, "records") as progress:
            stats = Stats(args.num_records, out, progress)
            sent = 0
            next_p = 0
            throttle_start = time.monotonic()
            while sent < args.num_records:
                # One request round: a batch for each partition (up to batch.size bytes each).
                counts: dict[tuple[str, int], tuple[int, int]] = {}
                round_start = time.monotonic()
                for _ in range(len(parts)):
                    if sent >= args.num_records:
                        break
                    n = min(per_batch, args.num_records - sent)
                    p = parts[next_p % len(parts)]
                    next_p += 1
                    size = 0
                    for _i in range(n):
                        value = payloads[0] if len(payloads) == 1 else random.choice(payloads)
                        producer.send(args.topic, value, partition=p)
                        size += len(value)
                    counts[(args.topic, p)] = (n, size)
                    sent += n
                producer.flush()  # raises the partition's error once retries are exhausted
                latency = (time.monotonic() - round_start) * 1000
                for n, size in counts.values():
                    stats.record(n, size, latency)
                progress.update(sent)
                if args.throughput > 0:
                    ahead = sent / args.throughput - (time.monotonic() - throttle_start)
                    if ahead > 0:
                        time.sleep(ahead)
            s = stats.summary()
    if as_json:
        emit(args, {**s, "idempotent": producer.idempotent})
        return 0
    print(f"{s['records']} records sent, {s['records_per_sec']:.1f} records/sec ({s['mb_per_sec']:.2f} MB/sec), "
          f"{s['avg_latency_ms']:.2f} ms avg latency, {s['max_latency_ms']:.2f} ms max latency, "
          f"{s['p50_ms']:.0f} ms 50th, {s['p95_ms']:.0f} ms 95th, {s['p99_ms']:.0f} ms 99th, "
          f"{s['p999_ms']:.0f} ms 99.9th.", file=sys.stdout)
    return 0


def run_consume(args: argparse.Namespace) -> int:
    if args.messages < 1:
        raise UsageError("--messages must be at least 1")
    props = load_properties(args.command_config)
    as_json = args.output == "json"
    out = sys.stdout
    intervals: list[dict[str, Any]] = []
    with connect(args, client_id=props.get("client.id", "perf-consumer")) as client:
        info = client.topic(args.topic)
        start_wall = time.time()
        rebalance_ms = 0.0
        member = None
        if args.group:
            t0 = time.monotonic()
            member = GroupMember(client, args.group, [args.topic])
            assignment = member.join()
            rebalance_ms = (time.monotonic() - t0) * 1000
            tps = [(t, p) for t, ps in assignment.items() for p in ps]
            positions = client.committed_offsets(args.group, tps) if tps else {}
        else:
            tps = [(args.topic, p) for p in sorted(info.partitions)]
            positions = {}
        missing = [tp for tp in tps if tp not in positions]
        if missing:
            positions.update(client.list_offsets(missing, LATEST if args.from_latest else EARLIEST))
        count = nbytes = 0
        fetch_start = time.monotonic()
        last_data = time.monotonic()
        last_report = time.monotonic()
        last_count = last_bytes = 0
        progress = Progress.for_args(args, "consuming", args.messages, "records")
        progress.draw(force=True)
        if args.show_detailed_stats and not as_json:
            print("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                  "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec", file=out)
        try:
            while count < args.messages and positions:
                if (time.monotonic() - last_data) * 1000 > args.timeout:
                    progress.clear()
                    print(f"WARNING: Exiting before consuming the expected number of messages: timeout "
                          f"({args.timeout} ms) exceeded.", file=sys.stderr)
                    break
                if member is not None:
                    member.heartbeat()
                for tp, code, pd in client.fetch(positions, max_wait_ms=200, partition_max_bytes=args.fetch_size):
                    if code:
                        if code in (3, 5, 6):
                            continue
                        raise KafkaWireError(code, None, f"fetch {tp[0]}-{tp[1]}")
                    start = positions[tp]
                    n, size, nxt = _count_records(pd.records, start, args.messages - count)
                    if n:
                        last_data = time.monotonic()
                    count += n
                    nbytes += size
                    positions[tp] = max(start, nxt)
                progress.update(count)
                now = time.monotonic()
                if args.show_detailed_stats and (now - last_report) * 1000 >= args.reporting_interval:
                    el = now - last_report
                    row = {"time": time.strftime('%Y-%m-%d %H:%M:%S'), "threadId": 0,
                           "data.consumed.in.MB": nbytes / (1 << 20),
                           "MB.sec": (nbytes - last_bytes) / (1 << 20) / el, "data.consumed.in.nMsg": count,
                           "nMsg.sec": (count - last_count) / el, "rebalance.time.ms": round(rebalance_ms),
                           "fetch.time.ms": round(el * 1000), "fetch.MB.sec": (nbytes - last_bytes) / (1 << 20) / el,
                           "fetch.nMsg.sec": (count - last_count) / el}
                    if as_json:
                        intervals.append(row)
                    else:
                        progress.clear()
                        print(", ".join(v if isinstance(v, str) else f"{v:.4f}" if isinstance(v, float) else str(v)
                                        for v in row.values()), file=out, flush=True)
                    last_report, last_count, last_bytes = now, count, nbytes
        finally:
            progress.clear()
            if member is not None:
                member.commit(positions)
                member.leave()
        end_wall = time.time()
        fetch_s = max(1e-9, time.monotonic() - fetch_start)
    total_s = max(1e-9, end_wall - start_wall)
    mb = nbytes / (1 << 20)
    fmt = "%Y-%m-%d %H:%M:%S"
    if as_json:
        summary: dict[str, Any] = {
            "start.time": time.strftime(fmt, time.localtime(start_wall)),
            "end.time": time.strftime(fmt, time.localtime(end_wall)), "data.consumed.in.MB": mb,
            "MB.sec": mb / total_s, "data.consumed.in.nMsg": count, "nMsg.sec": count / total_s,
            "rebalance.time.ms": round(rebalance_ms), "fetch.time.ms": round(fetch_s * 1000),
            "fetch.MB.sec": mb / fetch_s, "fetch.nMsg.sec": count / fetch_s}
        if args.show_detailed_stats:
            summary["intervals"] = intervals
        emit(args, summary)
        return 0
    print("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
          "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec", file=out)
    print(f"{time.strftime(fmt, time.localtime(start_wall))}, {time.strftime(fmt, time.localtime(end_wall))}, "
          f"{mb:.4f}, {mb / total_s:.4f}, {count}, {count / total_s:.4f}, {rebalance_ms:.0f}, {fetch_s * 1000:.0f}, "
          f"{mb / fetch_s:.4f}, {count / fetch_s:.4f}", file=out)
    return 0


def _count_records(data: Any, start: int, limit: int) -> tuple[int, int, int]:
    """(records at or after ``start``, at most ``limit``; their key+value bytes; the next offset)."""
    from clients.consumer_records import records_of

    n = size = 0
    for _batch, rec in records_of(data, start):
        if n >= limit:
            return n, size, rec.offset
        n += 1
        size += len(rec.value or b"") + len(rec.key or b"")
    return n, size, next_offset_after(data, start)

