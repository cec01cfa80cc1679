"""The fault matrix: each scenario says what it breaks, what Kafka promises, what kafkette promises.

A scenario's ``fault`` runs with a ``Ctx`` (the cluster, its seeded random generator, the workloads and
the timings) after the workloads are warm, applies its faults, holds them, and heals them. Everything
random in a schedule (which broker, how long, in which order) comes from ``ctx.rng``, seeded from the
run's seed and the scenario's key, so ``CHAOS_SEED=<seed> CHAOS_SCENARIOS=<key>`` replays it.

Topics (all RF=3, min.insync.replicas=2): ``events`` (3 partitions, the idempotent acks=all producer,
read by the copy job and the consumer group), ``events-acks1`` (the acks=1 producer), ``copy`` (the copy
job's output). Partition 0 of ``events`` is the one aimed at: the scenario picks its leader.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.cluster import ChaosCluster
from tests.chaos.disks import FaultyDir, SmallDisk
from tests.chaos.nodes import wait

TOPIC = "events"
ACKS1_TOPIC = "events-acks1"
COPY_TOPIC = "copy"
PARTITIONS = 3


@dataclass
class Timings:
    hold: float  # how long a fault stays once it took effect
    warmup_acks: int  # acknowledged records before the first fault
    settle: float  # producing after the heal, before the workloads stop

    @staticmethod
    def for_run(quick: bool) -> Timings:
        return Timings(hold=8.0, warmup_acks=100, settle=3.0) if quick else Timings(hold=25.0, warmup_acks=400,
                                                                                      settle=10.0)


@dataclass
class Ctx:
    cluster: ChaosCluster
    rng: random.Random
    timings: Timings
    workloads: Any  # tests.chaos.runner.Workloads
    events: list[str] = field(default_factory=list)  # the timeline, for the report
    t0: float = field(default_factory=time.monotonic)
    fault_start: float = 0.0
    healed_at: float = 0.0
    problems: list[str] = field(default_factory=list)  # the harness could not do what the schedule said

    def note(self, what: str) -> None:
        line = f"+{time.monotonic() - self.t0:6.1f}s {what}"
        self.events.append(line)
        print(f"    {line}", flush=True)

    def hold(self, seconds: float | None = None) -> None:
        """Keep the faults as they are: this is the schedule, not a wait for a condition."""
        time.sleep(self.timings.hold if seconds is None else seconds)

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float) -> bool:
        ok = wait(check, timeout)
        self.note(f"{what}: {'yes' if ok else f'NOT within {timeout:.0f}s'}")
        return ok

    def start_fault(self, what: str) -> None:
        if not self.fault_start:
            self.fault_start = time.monotonic()
        self.note(what)

    def heal(self) -> None:
        self.cluster.net.heal()
        for p in self.cluster.proxies.values():
            p.set()
        self.healed_at = time.monotonic()
        self.note("healed")


Placement = Callable[[ChaosCluster, random.Random], dict[str, int]]


@dataclass
class Scenario:
    key: str
    title: str
    kafka_promise: str
    our_promise: str
    fault: Callable[[Ctx], None]
    brokers: int = 3
    proxied: bool = False
    # Roles chosen before the cluster starts (the broker whose clock is faked must be known then).
    clock_broker: Callable[[random.Random], int] | None = None
    clock_start_offset: int = 0
    # The leader of events-0: "non-controller", "controller", or a broker id from the clock choice.
    leader: str = "non-controller"
    # A second log dir on every broker: "fuse" (tests/chaos/faultfs.py) or "small" (a small ext4).
    disks: str | None = None
    # Kafka's guarantee allows acknowledged writes to be lost (unclean leader election on): the rows
    # show the loss and it is not a violation.
    loss_allowed: bool = False
    topic_configs: dict[str, str] | None = None  # for events, at creation
    # Which producer's acknowledgments after the heal show that writing works again. After an unclean
    # election the idempotent producer's sequence numbers run ahead of the new leader's log: librdkafka
    # declares a fatal error only after retrying for a while (then the harness starts a new one), so
    # row 13 watches the acks=1 producer.
    recovery_by_acks1: bool = False


# ------------------------------------------------------------------------------------------------
# Roles


def leader0(ctx: Ctx) -> int:
    return ctx.cluster.leader(TOPIC, 0)


def followers0(ctx: Ctx) -> list[int]:
    replicas = ctx.cluster.zkv.get_topic_assignment(TOPIC).partitions[0].replicas
    lead = leader0(ctx)
    return [r for r in replicas if r != lead]


def name(broker_id: int) -> str:
    return f"b{broker_id}"


def wait_rejoined(ctx: Ctx, broker_id: int) -> None:
    ctx.wait_for(f"broker {broker_id} registered again", lambda: broker_id in ctx.cluster.registered(), 60)


# ------------------------------------------------------------------------------------------------
# The faults


def leader_cut_from_zookeeper(ctx: Ctx) -> None:
    lead = leader0(ctx)
    ctx.start_fault(f"cut leader {lead} (not the controller) off from ZooKeeper; clients still reach it")
    ctx.cluster.net.partition(name(lead), "zk")
    ctx.wait_for(f"leadership of {TOPIC}-0 moved away from {lead}", lambda: leader0(ctx) not in (lead, -1), 60)
    ctx.hold()
    ctx.heal()
    wait_rejoined(ctx, lead)


def leader_cut_from_followers(ctx: Ctx) -> None:
    lead = leader0(ctx)
    others = [name(b.broker_id) for b in ctx.cluster.brokers if b.broker_id != lead]
    ctx.start_fault(f"cut leader {lead} off from the other brokers ({', '.join(others)}); ZooKeeper and clients "
                    "still reach it")
    ctx.cluster.net.isolate(name(lead), others)
    ctx.hold(ctx.timings.hold + 6)  # past replica.lag.time.max.ms, so the ISR question comes up
    ctx.heal()


def controller_cut_from_zookeeper(ctx: Ctx) -> None:
    old = ctx.cluster.controller()
    ctx.start_fault(f"cut controller {old} (also leader of {TOPIC}-0) off from ZooKeeper")
    ctx.cluster.net.partition(name(old), "zk")
    ctx.wait_for("another broker became controller", lambda: ctx.cluster.controller() not in (old, -1), 60)
    ctx.hold()
    ctx.heal()
    wait_rejoined(ctx, old)


def one_way_leader_to_follower(ctx: Ctx) -> None:
    lead = leader0(ctx)
    # A follower that is not the controller: when the cut-off follower is the controller, the leader's
    # AlterPartition cannot reach it either, so the ISR cannot shrink and acks=all waits out the whole
    # fault (as in Kafka; seed 777 of the quick run showed a 68 s stall that way).
    controller = ctx.cluster.controller()
    candidates = followers0(ctx)
    follower = ctx.rng.choice([f for f in candidates if f != controller] or candidates)
    ctx.start_fault(f"drop every packet from leader {lead} to follower {follower} (the other way still works)")
    ctx.cluster.net.block(name(lead), name(follower))
    ctx.wait_for(f"follower {follower} left the ISR of {TOPIC}-0",
                 lambda: follower not in ctx.cluster.isr(TOPIC, 0), 60)
    ctx.hold()
    ctx.heal()
    ctx.wait_for(f"follower {follower} back in the ISR", lambda: follower in ctx.cluster.isr(TOPIC, 0), 90)


def loss_and_jitter(ctx: Ctx) -> None:
    ctx.start_fault("10% packet loss on every link (nftables numgen), every connection delayed 0-200 ms per "
                    "chunk (proxies)")
    for p in ctx.cluster.proxies.values():
        p.set(latency_ms=100, jitter_ms=100)
    ctx.cluster.net.loss(10)
    ctx.hold(ctx.timings.hold * 2)
    ctx.heal()


def session_expiry_in_burst(ctx: Ctx) -> None:
    lead = leader0(ctx)
    producer = ctx.workloads.producer
    ctx.start_fault(f"produce burst; cut leader {lead} off from ZooKeeper until its session expires")
    producer.burst(True)
    try:
        ctx.cluster.net.partition(name(lead), "zk")
        ctx.wait_for(f"broker {lead}'s ZooKeeper session expired (registration gone)",
                     lambda: lead not in ctx.cluster.registered(), 60)
        ctx.heal()
        wait_rejoined(ctx, lead)
        ctx.hold(ctx.timings.hold / 2)
    finally:
        producer.burst(False)


def clock_jumps(ctx: Ctx) -> None:
    """The leader started 1 h behind; its clock steps +1 h (to real time), +1 h (ahead), -1 h (back)."""
    lead = leader0(ctx)
    clock = ctx.cluster.clocks[lead]
    ctx.start_fault(f"leader {lead}'s wall clock ran {clock.offset_s:+d} s off since its start")
    for offset in (0, 3600, 0):
        step = offset - clock.offset_s
        clock.set(offset)
        ctx.note(f"leader {lead}'s wall clock jumps {step:+d} s (now {offset:+d} s off)")
        ctx.hold()
    ctx.heal()


def preload(ctx: Ctx, records: int, size: int) -> None:
    """Filler records in ``events`` (other values than the producer's: its checker skips them; the copy
    job and the group read them like the rest)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": ctx.cluster.bootstrap, "acks": "all", "linger.ms": 20})
    pad = b"x" * size
    for i in range(records):
        p.produce(TOPIC, value=b"fill:%d:" % i + pad, partition=i % 3)
        if i % 100 == 0:
            p.poll(0)
    left = p.flush(60)
    ctx.note(f"preloaded {records - left} records of {size} bytes into {TOPIC}")


def rolling_restart_during_reassignment(ctx: Ctx) -> None:
    from clients.admin import RESOURCE_BROKER, RESOURCE_TOPIC

    cluster = ctx.cluster
    admin = cluster.admin()
    n = len(cluster.brokers)
    # Enough data, copied slowly enough (a follower throttle for replicas out of sync, as
    # kafka-reassign-partitions --throttle sets), that the new replicas are still catching up while
    # every broker restarts.
    preload(ctx, 1500, 1000)
    admin.incremental_alter_configs(RESOURCE_TOPIC, TOPIC, {"follower.replication.throttled.replicas": "*"}, [])
    admin.incremental_alter_configs(RESOURCE_BROKER, "", {"follower.replication.throttled.rate": "65536"}, [])
    current = {p: list(r.replicas) for p, r in cluster.zkv.get_topic_assignment(TOPIC).partitions.items()}
    target = {p: [b for b in range(n) if b not in reps][:1] + reps[1:] for p, reps in current.items()}
    ctx.start_fault("reassign " + ", ".join(f"{TOPIC}-{p}: {current[p]} -> {target[p]}" for p in sorted(target))
                    + " (replication throttled to 64 KiB/s)")
    result = admin.alter_reassignments({(TOPIC, p): r for p, r in target.items()})
    bad = {tp: r for tp, r in result.items() if r[0]}
    if bad:
        ctx.problems.append(f"reassignment refused: {bad}")
    order = list(range(n))
    ctx.rng.shuffle(order)
    for b in order:
        broker = cluster.brokers[b]
        ctx.note(f"restart broker {b} (SIGTERM, controlled shutdown)")
        broker.stop(timeout=60)
        broker.start()
        try:
            broker.wait_ready(1, timeout=90)
        except RuntimeError as e:
            ctx.problems.append(str(e).splitlines()[0])
        ctx.wait_for(f"broker {b} back in every ISR it belongs to", lambda b=b: all(
            b in cluster.isr(TOPIC, p) for p, reps in cluster.zkv.get_topic_assignment(TOPIC).partitions.items()
            if b in reps.replicas), 90)
    ctx.note(f"reassignments still running after the restarts: {len(admin.list_reassignments())}")
    ctx.heal()
    done = ctx.wait_for("reassignment complete", lambda: all(
        list(cluster.zkv.get_topic_assignment(TOPIC).partitions[p].replicas) == target[p] for p in target)
        and not admin.list_reassignments(), 120)
    if not done:
        ctx.problems.append("the reassignment did not complete after the restarts")
    admin.incremental_alter_configs(RESOURCE_BROKER, "", {}, ["follower.replication.throttled.rate"])


def coordinator_cut_during_commit(ctx: Ctx) -> None:
    job = ctx.workloads.copy_job
    coord = -1

    def find() -> bool:
        nonlocal coord
        coord = ctx.cluster.transaction_coordinator(job.TRANSACTIONAL_ID)
        return coord >= 0

    ctx.wait_for("transaction coordinator known", find, 30)
    cut = threading.Event()

    def isolate() -> None:  # runs in the copy job's thread, right before commit_transaction
        ctx.start_fault(f"cut transaction coordinator {coord} off from everything (clients, brokers, ZooKeeper) "
                        "as a commit starts")
        ctx.cluster.net.isolate(name(coord))
        cut.set()

    job.before_commit = isolate
    if not ctx.wait_for("a commit started and the coordinator is cut off", cut.is_set, 60):
        job.before_commit = None
        ctx.problems.append("no transaction commit started within 60s")
        return
    ctx.hold()
    ctx.heal()
    wait_rejoined(ctx, coord)


def restart_broker(ctx: Ctx, broker_id: int) -> None:
    """SIGTERM (SIGKILL if it will not go), start again, wait until it serves and is registered."""
    broker = ctx.cluster.brokers[broker_id]
    ctx.note(f"restart broker {broker_id}")
    broker.stop(timeout=30)
    broker.start()
    try:
        broker.wait_ready(1, timeout=90)
    except RuntimeError as e:
        ctx.problems.append(str(e).splitlines()[0])
    wait_rejoined(ctx, broker_id)


def _on_disk(ctx: Ctx, broker_id: int, topic: str = TOPIC) -> list[int]:
    """The partitions of ``topic`` whose replica on ``broker_id`` lives on its faulty log dir."""
    disk = ctx.cluster.disks[broker_id]
    return [p for p in range(PARTITIONS) if disk.holds(f"{topic}-{p}")]


def _dir_failure_seen(ctx: Ctx, broker_id: int, partitions: list[int], what: str) -> None:
    """KIP-112: the failed dir's replicas leave every ISR, leadership of them moves to other brokers, and
    the broker, still up, keeps leading what lives in its other dir."""
    cluster = ctx.cluster
    ok = ctx.wait_for(f"broker {broker_id}'s replicas on the {what} dir ({TOPIC} {partitions}) left the ISR and "
                      "lost leadership", lambda: all(
                          broker_id not in cluster.isr(TOPIC, p) and cluster.leader(TOPIC, p) not in (broker_id, -1)
                          for p in partitions), 60)
    if not ok:
        ctx.problems.append(f"the {what} log dir of broker {broker_id} did not go offline: its replicas of "
                            f"{TOPIC} {partitions} stayed in the ISR or kept leadership")
    if not cluster.brokers[broker_id].running:
        ctx.problems.append(f"broker {broker_id} exited although it had a healthy log dir left")
    elsewhere = [p for p in range(PARTITIONS) if p not in partitions]
    if elsewhere and not all(broker_id in cluster.isr(TOPIC, p) for p in elsewhere):
        ctx.note(f"broker {broker_id} also left the ISR of {TOPIC} {elsewhere} (on its healthy dir)")


def full_disk_on_one_replica(ctx: Ctx) -> None:
    replicas = [b.broker_id for b in ctx.cluster.brokers]
    victim = ctx.rng.choice(replicas)
    disk = ctx.cluster.disks[victim]
    assert isinstance(disk, SmallDisk)
    held = _on_disk(ctx, victim)
    ctx.start_fault(f"fill broker {victim}'s small log dir (it holds {TOPIC} {held})")
    ctx.note(f"filler wrote {disk.fill() >> 20} MiB; the filesystem is full")
    if held:
        _dir_failure_seen(ctx, victim, held, "full")
    ctx.hold()
    disk.free()
    ctx.note(f"freed broker {victim}'s disk")
    restart_broker(ctx, victim)
    ctx.heal()


def readonly_dir_on_leader(ctx: Ctx) -> None:
    lead = leader0(ctx)
    disk = ctx.cluster.disks[lead]
    assert isinstance(disk, FaultyDir)
    held = _on_disk(ctx, lead)
    ctx.start_fault(f"leader {lead}'s faulty log dir turns read-only (EROFS; it holds {TOPIC} {held})")
    disk.set("readonly")
    if held:
        _dir_failure_seen(ctx, lead, held, "read-only")
    ctx.hold()
    disk.set("ok")
    ctx.note(f"broker {lead}'s dir writable again")
    restart_broker(ctx, lead)
    ctx.heal()


def slow_fsync_on_leader(ctx: Ctx) -> None:
    from clients.admin import RESOURCE_TOPIC

    lead = leader0(ctx)
    disk = ctx.cluster.disks[lead]
    assert isinstance(disk, FaultyDir)
    admin = ctx.cluster.admin()
    ctx.start_fault(f"flush.messages=1 on {TOPIC}; every fsync on leader {lead}'s faulty dir (holding {TOPIC} "
                    f"{_on_disk(ctx, lead)}) waits 200 ms")
    admin.incremental_alter_configs(RESOURCE_TOPIC, TOPIC, {"flush.messages": "1"}, [])
    disk.set("ok", fsync_delay_ms=200)
    ctx.hold()
    delayed = disk.delayed_fsyncs()
    ctx.note(f"about {delayed} fsyncs delayed on broker {lead}'s faulty dir")
    if not delayed:
        ctx.problems.append("flush.messages=1 made no fsync reach the slow filesystem")
    disk.set("ok")
    admin.incremental_alter_configs(RESOURCE_TOPIC, TOPIC, {}, ["flush.messages"])
    ctx.heal()


def lagging_replica_left_alone(ctx: Ctx) -> None:
    """A follower falls out of the ISR; then both in-sync replicas die and only the lagging one is left."""
    cluster = ctx.cluster
    lead = leader0(ctx)
    # Not the controller: cut off from the brokers, it could not shrink the ISR (see scenario 4).
    controller = cluster.controller()
    candidates = followers0(ctx)
    lagging = ctx.rng.choice([f for f in candidates if f != controller] or candidates)
    in_sync = [b.broker_id for b in cluster.brokers if b.broker_id != lagging]
    ctx.start_fault(f"cut follower {lagging} off from the other brokers (it still reaches ZooKeeper)")
    cluster.net.isolate(name(lagging), [name(b) for b in in_sync])
    # The partitions it follows (it leads one of the three, and with the controller out of reach its own
    # ISR cannot change).
    followed = [p for p in range(PARTITIONS) if cluster.leader(TOPIC, p) != lagging]
    ctx.wait_for(f"follower {lagging} left the ISR of {TOPIC} {followed}", lambda: all(
        lagging not in cluster.isr(TOPIC, p) for p in followed), 60)
    ctx.hold(ctx.timings.hold / 2)  # acks=all writes go on with two replicas; the lagging one misses them
    ctx.note(f"SIGKILL the in-sync replicas {in_sync} (leader {lead}); heal the lagging one's links")
    for b in in_sync:
        cluster.brokers[b].kill()
    cluster.net.heal()
    unclean = ctx.wait_for(f"{TOPIC}-0 led by the lagging replica {lagging}",
                           lambda: cluster.leader(TOPIC, 0) == lagging, 30)
    ctx.note(f"{TOPIC}-0 {'elected' if unclean else 'did not elect'} the out-of-sync replica")
    ctx.hold(ctx.timings.hold / 2)
    for b in in_sync:
        cluster.brokers[b].start()
    for b in in_sync:
        try:
            cluster.brokers[b].wait_ready(1, timeout=90)
        except RuntimeError as e:
            ctx.problems.append(str(e).splitlines()[0])
        wait_rejoined(ctx, b)
    ctx.heal()


def _random_broker(n: int) -> Callable[[random.Random], int]:
    return lambda rng: rng.randrange(n)


NO_LOSS = "acks=all with min.insync.replicas=2: no acknowledged write lost, no duplicate or reordering with " \
          "idempotence; transactions all or nothing; committed offsets never go back."

SCENARIOS: list[Scenario] = [
    Scenario("1", "leader isolated from ZooKeeper, not from clients",
             "acks=all: the old leader cannot advance its high watermark once followers follow the new leader, "
             "so nothing it acknowledges is lost; acks=1 writes it takes meanwhile are truncated (lost).",
             NO_LOSS + " acks=1 may lose the same writes.", leader_cut_from_zookeeper),
    Scenario("2", "leader isolated from followers only",
             "acks=all writes to the leader stall (followers cannot fetch, the ISR cannot shrink without the "
             "controller); nothing acknowledged is lost.", NO_LOSS, leader_cut_from_followers),
    Scenario("3", "controller isolated from ZooKeeper",
             "A new controller is elected; the old one resigns when its session expires and its requests carry "
             "a stale controller epoch; no acknowledged write lost.", NO_LOSS, controller_cut_from_zookeeper,
             leader="controller"),
    Scenario("4", "one-way partition leader -> follower",
             "The follower's fetches get no answers, it leaves the ISR, writes go on with the other two "
             "replicas; nothing acknowledged is lost.", NO_LOSS, one_way_leader_to_follower),
    Scenario("5", "10% packet loss + 0-200 ms jitter on every link",
             "Slower, with retries; nothing acknowledged is lost or duplicated.", NO_LOSS, loss_and_jitter,
             proxied=True),
    Scenario("6", "ZooKeeper session expiry during a produce burst",
             "The broker re-registers with a new session; leadership may move; requests in flight fail and "
             "are retried; nothing acknowledged is lost.", NO_LOSS, session_expiry_in_burst),
    Scenario("9", "leader's clock 1 h behind at start, then jumps +1 h, +1 h, -1 h",
             "Kafka reads the wall clock (System.currentTimeMillis) for timestamps, retention, ISR lag and group "
             "session deadlines: a jump may shrink an ISR or expire sessions (rebalances) but loses nothing "
             "acknowledged.", NO_LOSS, clock_jumps,
             clock_broker=_random_broker(3), clock_start_offset=-3600, leader="clock"),
    Scenario("10", "rolling restart during partition reassignment (4 brokers)",
             "Each broker's controlled shutdown moves leadership first; the reassignment completes; nothing "
             "acknowledged is lost.", NO_LOSS, rolling_restart_during_reassignment, brokers=4),
    Scenario("11", "transaction coordinator partitioned away during a commit",
             "The transaction commits or aborts as a whole (KIP-98): read_committed output equals the input "
             "exactly.", NO_LOSS, coordinator_cut_during_commit),
    Scenario("7", "a full disk on one replica (a small ext4 log dir filled up)",
             "KIP-112: an IOException (no space left) takes the log dir offline; its replicas leave the ISR, "
             "leadership moves to other brokers, the broker keeps serving its other dirs; after the disk is freed "
             "and the broker restarted, its replicas catch up; nothing acknowledged is lost.",
             NO_LOSS + " The same log dir handling as Kafka's.", full_disk_on_one_replica, disks="small"),
    Scenario("8", "a read-only log dir on the leader (FUSE: EROFS from then on)",
             "KIP-112: the dir goes offline, leadership of its partitions moves away, the broker keeps serving "
             "from its other dirs; nothing acknowledged is lost.",
             NO_LOSS + " The same log dir handling as Kafka's.", readonly_dir_on_leader, disks="fuse"),
    Scenario("12", "slow fsync: flush.messages=1, each fsync on the leader's dir 200 ms late (FUSE)",
             "Writes slow down (every append waits for its fsync); nothing acknowledged is lost.", NO_LOSS,
             slow_fsync_on_leader, disks="fuse"),
    Scenario("13", "unclean election ON: the in-sync replicas die, a lagging one is left",
             "unclean.leader.election.enable=true trades durability for availability: the out-of-sync replica "
             "becomes leader and acknowledged writes it never got are lost (acks=all included); the others "
             "truncate to it when they come back.",
             "The same: the loss is counted and allowed (ok (loss allowed)); order and idempotence still hold.",
             lagging_replica_left_alone, loss_allowed=True, recovery_by_acks1=True,
             topic_configs={"unclean.leader.election.enable": "true"}),
    Scenario("14", "unclean election OFF (the default): the same fault",
             "The partition stays offline (no leader) until an in-sync replica returns; nothing acknowledged is "
             "lost; the outage shows as unavailability.", NO_LOSS, lagging_replica_left_alone),
]

SCENARIOS.sort(key=lambda s: int(s.key))  # the table in row order


def by_key(keys: list[str] | None) -> list[Scenario]:
    if not keys:
        return list(SCENARIOS)
    known = {s.key: s for s in SCENARIOS}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise SystemExit(f"no scenario {', '.join(unknown)}; there are {', '.join(known)}")
    return [known[k] for k in keys]
