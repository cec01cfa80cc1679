"""Runs the fault matrix and prints the table (``make chaos``; ``CHAOS_QUICK=1`` for the short version).

    python -m tests.chaos.runner [--quick] [--seed N] [--scenarios 1,4,11] [--keep]

Environment: CHAOS_QUICK=1, CHAOS_SEED=<n>, CHAOS_SCENARIOS=<keys>. Exit status 1 if any promise was
broken (or a scenario could not run), 0 otherwise. Needs root (network namespaces, nftables).

One scenario at a time: a fresh cluster in fresh namespaces, the workloads, the faults, the checks.
Data and logs of a scenario go to .cache/chaos/<seed>/<key>/ and are removed when the scenario passes
(``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import random
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from tests.chaos import netns
from tests.chaos.checkers import (
    HARNESS_ERROR,
    Records,
    Row,
    check_copy,
    check_group,
    check_producer,
    longest_gap,
)
from tests.chaos.cluster import ChaosCluster
from tests.chaos.scenarios import (
    ACKS1_TOPIC,
    COPY_TOPIC,
    PARTITIONS,
    TOPIC,
    Ctx,
    Scenario,
    Timings,
    by_key,
)
from tests.chaos.workloads import (
    CopyJob,
    GroupConsumer,
    OffsetMonitor,
    ProducerLog,
    VerifyingProducer,
    read_topic,
)

REPO = Path(__file__).resolve().parents[2]
RECOVERY_TIMEOUT = 90.0


@dataclass
class Workloads:
    producer: VerifyingProducer
    producer_acks1: VerifyingProducer
    copy_job: CopyJob
    group: GroupConsumer
    monitor: OffsetMonitor


def scenario_rng(seed: int, key: str) -> random.Random:
    return random.Random(f"{seed}/{key}")


def placement(cluster: ChaosCluster, scenario: Scenario, rng: random.Random, clock_broker: int | None
              ) -> dict[int, list[int]]:
    """Replicas of ``events`` on brokers 0-2, partition 0 led by the broker the scenario aims at."""
    hosts = [0, 1, 2]
    controller = cluster.controller()
    if scenario.leader == "controller":
        lead = controller
    elif scenario.leader == "clock" and clock_broker is not None:
        lead = clock_broker
    else:
        lead = rng.choice([b for b in hosts if b != controller])
    order = [lead] + [b for b in hosts if b != lead]
    return {p: order[p:] + order[:p] for p in range(PARTITIONS)}


def run_scenario(scenario: Scenario, seed: int, quick: bool, base: Path, keep: bool) -> tuple[list[Row], Ctx | None]:
    rng = scenario_rng(seed, scenario.key)
    timings = Timings.for_run(quick)
    clock_broker = scenario.clock_broker(rng) if scenario.clock_broker else None
    directory = base / scenario.key
    shutil.rmtree(directory, ignore_errors=True)  # a replay starts from nothing
    cluster = ChaosCluster(scenario.brokers, directory, proxied=scenario.proxied,
                           clocks={clock_broker} if clock_broker is not None else None, seed=rng.randrange(1 << 30),
                           disks=scenario.disks)
    if clock_broker is not None:
        cluster.clocks[clock_broker].set(scenario.clock_start_offset)
    rows = [Row(scenario.key, w) for w in ("acks=all idempotent", "acks=1", "transactional copy", "consumer group")]
    ctx: Ctx | None = None
    workloads: Workloads | None = None
    try:
        cluster.start()
        assignment = placement(cluster, scenario, rng, clock_broker)
        for topic in (TOPIC, ACKS1_TOPIC, COPY_TOPIC):
            cluster.create_topic(topic, assignment, configs=scenario.topic_configs if topic == TOPIC else None)
        workloads = Workloads(
            producer=VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS, rate=40, name="all",
                                       debug_log=directory / "producer-acks-all.log").start(),
            producer_acks1=VerifyingProducer(cluster.bootstrap, ACKS1_TOPIC, PARTITIONS, acks="1", idempotent=False,
                                             rate=20, name="one").start(),
            copy_job=CopyJob(cluster.bootstrap, TOPIC, COPY_TOPIC, PARTITIONS).start(),
            group=GroupConsumer(cluster.bootstrap, TOPIC).start(),
            monitor=OffsetMonitor(cluster.bootstrap, [CopyJob.GROUP, GroupConsumer.GROUP]).start(),
        )
        ctx = Ctx(cluster, rng, timings, workloads)
        ctx.note(f"cluster up: controller {cluster.controller()}, {TOPIC}-0 led by {cluster.leader(TOPIC, 0)}")
        if not ctx.wait_for(f"{timings.warmup_acks} acks and a committed transaction", lambda: (
                workloads.producer.log.ack_count() >= timings.warmup_acks and workloads.copy_job.stats.committed),
                60):
            ctx.problems.append("the workloads never got going before the fault")
        else:
            scenario.fault(ctx)
        healed = ctx.healed_at or time.monotonic()
        # Recovery: every partition takes acks=all writes again, and every replica is back in sync.
        witness = workloads.producer_acks1 if scenario.recovery_by_acks1 else workloads.producer
        recovered = ctx.wait_for(f"every partition acknowledges writes again ({witness.log.acks} producer)",
                                 lambda: _acked_since(witness, healed) >= set(range(PARTITIONS)), RECOVERY_TIMEOUT)
        if not recovered:
            ctx.problems.append(f"producing did not recover within {RECOVERY_TIMEOUT:.0f}s of the heal")
        ctx.wait_for("every partition of events has its full ISR", lambda: all(
            len(cluster.isr(TOPIC, p)) == 3 for p in range(PARTITIONS)), RECOVERY_TIMEOUT)
        ctx.hold(timings.settle)
        end = time.monotonic()
        plog = workloads.producer.stop()
        plog1 = workloads.producer_acks1.stop()
        ctx.note(f"producers stopped ({plog.ack_count()} + {plog1.ack_count()} acknowledged)")
        source = read_topic(cluster.bootstrap, TOPIC, PARTITIONS)
        expected = {v for recs in source.values() for _, v in recs}
        copied = ctx.wait_for("the copy job and the group caught up", lambda: (
            _copy_caught_up(cluster, workloads.copy_job, source)
            and expected <= workloads.group.values.keys()), RECOVERY_TIMEOUT)
        if not workloads.copy_job.stop(60):
            rows[2].notes.append("the copy job's last client call was still stuck at the end")
        if not copied:
            ctx.problems.append("the copy job or the group did not catch up; last copy job errors: "
                                f"{workloads.copy_job.stats.errors[-3:]}")
        workloads.group.stop()
        workloads.monitor.stop()
        start = ctx.fault_start or end
        check_producer(rows[0], plog, source, loss_allowed=scenario.loss_allowed)
        if workloads.producer.replaced_after_fatal:
            rows[0].notes.append(f"the idempotent producer hit {workloads.producer.replaced_after_fatal} fatal "
                                 "error(s) and was replaced by a new one (new producer id)")
        for w, row in ((workloads.producer, rows[0]), (workloads.producer_acks1, rows[1])):
            if w.unknown_topic_refusals:
                row.notes.append(f"produce() refused {w.unknown_topic_refusals} times with 'Unknown topic' "
                                 "(metadata without the topic)")
        for at, text in plog.fatal_errors:
            rows[0].notes.append(f"fatal at {at - healed:+.1f}s from the heal: {text}"[:600])
        rows[0].unavailable_s = _unavailable(plog, start, end)
        check_producer(rows[1], plog1, read_topic(cluster.bootstrap, ACKS1_TOPIC, PARTITIONS), loss_allowed=True)
        rows[1].unavailable_s = _unavailable(plog1, start, end)
        check_copy(rows[2], source, read_topic(cluster.bootstrap, COPY_TOPIC, PARTITIONS, read_committed=True),
                   input_loss_allowed=scenario.loss_allowed)
        rows[2].unavailable_s = longest_gap(workloads.copy_job.stats.commit_times, start, end)
        stats = workloads.copy_job.stats
        rows[2].notes.append(f"{stats.committed} committed, {stats.aborted} aborted, {stats.restarts} new "
                             f"incarnations ({stats.abandoned} replaced after a client call hung: "
                             "librdkafka#5456/#5511)")
        check_group(rows[3], source, workloads.group.values, workloads.monitor.seen[GroupConsumer.GROUP],
                    truncation_allowed=scenario.loss_allowed)
        rows[3].unavailable_s = longest_gap([t for t, _ in workloads.group.commits], start, end)
        for w in (workloads.producer, workloads.producer_acks1, workloads.copy_job, workloads.group):
            if w.error is not None:
                ctx.problems.append(f"{type(w).__name__} crashed: {w.error!r}")
    except Exception as e:
        traceback.print_exc()
        rows[0].violations.append(f"{HARNESS_ERROR}: {e!r}"[:500])
        if workloads is not None:
            _abort(workloads)
    finally:
        cluster.stop()
    if ctx is not None and ctx.problems:
        rows[0].violations.extend(ctx.problems)
    if not keep and not any(r.violations for r in rows):
        cluster.remove_data()
    return rows, ctx


def _unavailable(plog: ProducerLog, start: float, end: float) -> float:
    """The longest time any one partition acknowledged nothing, between the fault and the end."""
    return max(longest_gap(plog.ack_times(p), start, end) for p in range(PARTITIONS))


def _acked_since(producer: VerifyingProducer, since: float) -> set[int]:
    with producer.log.lock:
        return {a.partition for a in producer.log.acked if a.at > since}


def _copy_caught_up(cluster: ChaosCluster, job: CopyJob, source: Records) -> bool:
    """The copy job's group has committed a position past the last input record of every partition.

    Per partition, not summed: after an unclean election cut an input partition below the group's
    position, that partition's committed offset is past everything it holds, and a sum would count it
    for the partitions still being copied."""
    offsets = cluster.admin().committed_offsets(job.GROUP)
    return all(offsets.get((TOPIC, p), -1) > recs[-1][0] for p, recs in source.items() if recs)


def _abort(w: Workloads) -> None:
    for stop in (w.copy_job.stop, w.group.stop, w.monitor.stop):
        try:
            stop()
        except Exception:
            traceback.print_exc()
    for p in (w.producer, w.producer_acks1):
        try:
            p.stop(timeout=5)
        except Exception:
            traceback.print_exc()


# ------------------------------------------------------------------------------------------------
# The table


COLUMNS = ("scenario", "workload", "acked", "lost", "duplicated", "reordered", "unavailable s", "result")


def table(rows: list[Row]) -> str:
    cells = [COLUMNS] + [(r.scenario, r.workload, str(r.acked), str(r.lost), str(r.duplicated), str(r.reordered),
                          f"{r.unavailable_s:.1f}", r.result) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    lines = ["| " + " | ".join(c[i].ljust(widths[i]) for i in range(len(COLUMNS))) + " |" for c in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", default=os.environ.get("CHAOS_QUICK", "") not in ("", "0"))
    ap.add_argument("--seed", type=int, default=int(os.environ["CHAOS_SEED"]) if os.environ.get("CHAOS_SEED")
                    else random.SystemRandom().randrange(1, 1 << 31))
    ap.add_argument("--scenarios", default=os.environ.get("CHAOS_SCENARIOS", ""),
                    help="comma-separated keys (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep data and logs of passing scenarios too")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("the chaos suite needs root: network namespaces, veth pairs and nftables", file=sys.stderr)
        return 2
    scenarios = by_key([k.strip() for k in args.scenarios.split(",") if k.strip()])
    base = REPO / ".cache" / "chaos" / str(args.seed)
    mode = "quick" if args.quick else "full"
    print(f"chaos: seed {args.seed}, {mode} run, scenarios {', '.join(s.key for s in scenarios)}", flush=True)
    rows: list[Row] = []
    failed: list[str] = []
    began = time.monotonic()
    try:
        for s in scenarios:
            print(f"\n== scenario {s.key}: {s.title}", flush=True)
            t = time.monotonic()
            got, _ = run_scenario(s, args.seed, args.quick, base, args.keep)
            del _
            gc.collect()  # this scenario's clients go before the next cluster takes the same addresses
            rows.extend(got)
            bad = [r for r in got if r.violations]
            for r in got:
                for v in r.violations:
                    print(f"    VIOLATED [{r.workload}]: {v}", flush=True)
                for n in r.notes:
                    print(f"    note [{r.workload}]: {n}", flush=True)
            if bad:
                failed.append(s.key)
                print(f"    data and logs kept in {base / s.key}", flush=True)
            print(f"    scenario {s.key} took {time.monotonic() - t:.0f}s", flush=True)
    finally:
        netns.cleanup()
        # Every scenario that passed removed its own directory: an empty seed directory is all that is left.
        with contextlib.suppress(OSError):
            base.rmdir()
    print(f"\nchaos: seed {args.seed}, {mode} run, {time.monotonic() - began:.0f}s\n")
    print(table(rows))
    print("\npromises:")
    for s in scenarios:
        print(f"  {s.key}. {s.title}\n     Kafka: {s.kafka_promise}\n     kafkette: {s.our_promise}")
    if failed:
        flag = " CHAOS_QUICK=1" if args.quick else ""
        print(f"\nchaos: promises broken in scenarios {', '.join(failed)}; replay with:\n"
              f"  CHAOS_SEED={args.seed} CHAOS_SCENARIOS={','.join(failed)}{flag} make chaos")
        return 1
    print("\nchaos: every promise kept")
    return 0


if __name__ == "__main__":
    sys.exit(main())
