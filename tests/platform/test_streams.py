"""Kafka Streams on kafkette: the repo's exactly-once app through failures, and Kafka's WordCountDemo.

The app (deploy/platform/streams-app, ClicksPerRegion) joins clicks with their users' regions, counts
them per region and minute and emits each window once when it closes. Two instances run against three
brokers with RF=3 internal topics while the input is produced; one broker is SIGKILLed and one instance
is SIGKILLed and started again. The output, read with read_committed, must be exactly the counts the
input implies: every window once, none missing, none twice.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.helpers import cluster_options, start_broker, unique
from tests.integration.helpers import wait_until
from tests.platform import kafka_ops
from tests.platform.java import CLICKS_PER_REGION, WORD_COUNT_DEMO, JavaProcess, write_properties

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

WINDOW_MS = 60_000
GRACE_MS = 86_400_000  # see ClicksPerRegion: windows close only once every upstream task is past them
PARTITIONS = 3
USERS = 60
REGIONS = ["emea", "apac", "amer", "latam", "anz"]
CLICKS = 6_000
SPAN_MS = 30 * WINDOW_MS  # event time the clicks cover: 30 windows


def region_of(user: int) -> str:
    return REGIONS[(user * 7) % len(REGIONS)]


def click(j: int, base: int) -> tuple[str, str, int]:
    """The j-th click: (user, page, event time); users and times interleave so every window and region
    gets clicks from several users and partitions."""
    user = (j * 31) % USERS
    return f"user-{user}", f"/page/{j % 17}", base + (j * SPAN_MS) // CLICKS


def app_instance(java: Callable[..., JavaProcess], tmp_path: Path, name: str, app_id: str, bootstrap: str,
                 topics: dict[str, str]) -> JavaProcess:
    config = write_properties(tmp_path / f"{name}.properties", {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "state.dir": str(tmp_path / f"{name}-state"),
        "processing.guarantee": "exactly_once_v2",
        "replication.factor": "3",
        # A SIGKILLed instance leaves no LeaveGroup behind: the group notices after this long (45 s by
        # default), during which the tasks it had stand still.
        "consumer.session.timeout.ms": "10000",
        "consumer.heartbeat.interval.ms": "1000",
        **topics,
        "window.size.ms": str(WINDOW_MS),
        "window.grace.ms": str(GRACE_MS),
    })
    return java(name, CLICKS_PER_REGION, str(config))


def test_clicks_per_region_exactly_once_through_broker_and_instance_kills(
        cluster_factory: Callable[..., Any], java: Callable[..., JavaProcess], tmp_path: Path) -> None:
    cluster = cluster_factory(3, **cluster_options(**{"min.insync.replicas": "2"}))
    bootstrap = cluster.bootstrap
    app_id = unique("clicks-app")
    topics = {"clicks.topic": unique("clicks"), "users.topic": unique("users"), "output.topic": unique("per-region")}
    kafka_ops.create_topics(bootstrap, {topics["clicks.topic"]: PARTITIONS, topics["output.topic"]: PARTITIONS})
    kafka_ops.create_topics(bootstrap, {topics["users.topic"]: PARTITIONS}, configs={"cleanup.policy": "compact"})

    # Event time an hour back, on a window boundary: well inside every retention.
    base = (int(time.time() * 1000) - 3_600_000) // WINDOW_MS * WINDOW_MS
    producer = kafka_ops.Producer(bootstrap)
    for u in range(USERS):  # the table first, stamped before every click
        producer.send(topics["users.topic"], f"user-{u}", region_of(u), timestamp=base - 60_000)
    producer.flush()

    a = app_instance(java, tmp_path, "app-a", app_id, bootstrap, topics).start()
    b = app_instance(java, tmp_path, "app-b", app_id, bootstrap, topics).start()
    for inst in (a, b):
        inst.wait_for(r"^STATE RUNNING", 180)

    # The clicks, produced at a steady pace while things break.
    sent = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            for j in range(CLICKS):
                user, page, ts = click(j, base)
                producer.send(topics["clicks.topic"], user, page, timestamp=ts)
                if j % 100 == 99:
                    time.sleep(0.5)
            producer.flush(300)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
        finally:
            sent.set()

    feeder = threading.Thread(target=produce, name="clicks-producer", daemon=True)
    feeder.start()

    def acked() -> int:
        return len(producer.acked)

    wait_until(lambda: acked() >= USERS + CLICKS // 5, 120, "a fifth of the clicks acknowledged")
    victim = cluster.brokers[1]
    victim.kill()  # SIGKILL
    wait_until(lambda: acked() >= USERS + CLICKS * 2 // 5, 180, "two fifths of the clicks acknowledged")
    b.kill()  # SIGKILL the instance, mid-transaction as likely as not
    wait_until(lambda: acked() >= USERS + CLICKS * 3 // 5, 180, "three fifths of the clicks acknowledged")
    b.start()
    b.wait_for(r"^STATE RUNNING", 180)
    start_broker(victim)
    feeder.join(600)
    assert sent.is_set() and not errors, errors
    assert len(producer.acked) == USERS + CLICKS

    # Every click processed (committed offsets at the end), then one late click per region closes every window.
    clicks_end = kafka_ops.end_offsets(bootstrap, topics["clicks.topic"], PARTITIONS)
    wait_until(lambda: all(kafka_ops.committed(bootstrap, app_id).get((topics["clicks.topic"], p), -1) >= end
                           for p, end in clicks_end.items()), 300,
               lambda: f"{app_id} to commit {clicks_end} (now {kafka_ops.committed(bootstrap, app_id)})")
    closing = base + SPAN_MS + GRACE_MS + 2 * WINDOW_MS
    for region in REGIONS:
        user = next(u for u in range(USERS) if region_of(u) == region)
        producer.send(topics["clicks.topic"], f"user-{user}", "/closing", timestamp=closing)
    producer.flush()

    expected: collections.Counter[str] = collections.Counter()
    for j in range(CLICKS):
        user, _, ts = click(j, base)
        expected[f"{region_of(int(user.split('-')[1]))}@{ts // WINDOW_MS * WINDOW_MS}"] += 1

    def output() -> list[kafka_ops.Record]:
        return kafka_ops.read_all(bootstrap, topics["output.topic"], PARTITIONS)

    wait_until(lambda: len(output()) >= len(expected), 300,
               lambda: f"{len(expected)} windows in {topics['output.topic']} (have {len(output())})", interval=2)
    records = output()
    got = [(r.key.decode(), int(r.value.decode())) for r in records if r.key and r.value]
    keys = collections.Counter(k for k, _ in got)
    assert not [k for k, n in keys.items() if n > 1], f"windows emitted twice: {[k for k, n in keys.items() if n > 1]}"
    assert dict(got) == dict(expected)
    assert len(records) == len(expected) == len(REGIONS) * SPAN_MS // WINDOW_MS

    # The restarted instance rebuilt its stores from the changelogs.
    restored = b.wait_for(r"^RESTORED (\S+) (\S+) records (\d+)$", 10)
    assert any(int(m.group(3)) > 0 for m in restored), [m.group(0) for m in restored]
    print(f"[streams] {len(records)} windows exactly once; restarted instance restored:",
          *[m.group(0) for m in restored], sep="\n  ")

    # Internal topics: replicated three times, changelogs compacted.
    internal = sorted(t for t in kafka_ops.topic_names(bootstrap) if t.startswith(app_id))
    assert any(t.endswith("-repartition") for t in internal), internal
    changelogs = [t for t in internal if t.endswith("-changelog")]
    assert len(changelogs) == 3, internal  # users, clicks-per-region, final-counts
    for t in internal:
        assert all(len(replicas) == 3 for replicas, _ in kafka_ops.replication(bootstrap, t).values()), t
    for t in changelogs:
        assert "compact" in kafka_ops.topic_config(bootstrap, t)["cleanup.policy"], t


def test_word_count_demo(cluster_factory: Callable[..., Any], java: Callable[..., JavaProcess],
                         tmp_path: Path) -> None:
    """Kafka's WordCountDemo, unchanged: its fixed topic names, default settings but the bootstrap."""
    cluster = cluster_factory(1)
    bootstrap = cluster.bootstrap
    kafka_ops.create_topics(bootstrap, {"streams-plaintext-input": 1, "streams-wordcount-output": 1}, replication=1)
    lines = ["all streams lead to kafka", "hello kafka streams", "join kafka summit",
             *[f"line {i % 13} of many streams" for i in range(200)]]
    kafka_ops.produce_lines(bootstrap, "streams-plaintext-input", lines)
    expected = collections.Counter(w for line in lines for w in line.lower().split(" "))

    config = write_properties(tmp_path / "wordcount.properties",
                              {"bootstrap.servers": bootstrap, "state.dir": str(tmp_path / "wordcount-state")})
    demo = java("wordcount-demo", WORD_COUNT_DEMO, str(config)).start()

    def counts() -> dict[str, int]:
        latest: dict[str, int] = {}
        for r in kafka_ops.read_all(bootstrap, "streams-wordcount-output", 1, isolation="read_uncommitted"):
            assert r.key is not None and r.value is not None
            latest[r.key.decode()] = int.from_bytes(r.value, "big")  # LongSerializer: 8 bytes big-endian
        return latest

    wait_until(lambda: counts() == dict(expected), 180, lambda: f"word counts {dict(expected)} (have {counts()})",
               interval=1)
    demo.stop()
    assert demo.process is not None and demo.process.returncode in (0, 143), demo.current_run()[-3000:]
