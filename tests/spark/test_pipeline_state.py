"""The pipeline's checks that need no Spark (part of `make test`): state keyed by cluster and topics, the
exit status of a run with no new input, inputs that would cover the output topic, and event time that
never runs ahead of the wall clock.

The runs here are ``python -m clients.pipeline.run`` against real 1-broker clusters; with nothing to
process they stop before spark-submit, so they take seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.pipeline import generate_events, state, topic_collision

REPO = Path(__file__).resolve().parents[2]
OVERRIDES = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}


@pytest.fixture(scope="module")
def two_clusters() -> Iterator[tuple[Any, Any]]:
    from clients.devcluster import LocalCluster

    with LocalCluster(1, overrides=OVERRIDES) as a, LocalCluster(1, overrides=OVERRIDES) as b:
        yield a, b


def run_pipeline(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clients.pipeline.run", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout)


def broker_cluster_id(cluster: Any) -> str:
    props = (cluster.brokers[0].dir / "data" / "meta.properties").read_text().splitlines()
    return next(line.split("=", 1)[1] for line in props if line.startswith("cluster.id="))


def state_dirs(root: Path) -> dict[str, dict[str, Any]]:
    return {d.name: json.loads((d / state.MANIFEST).read_text()) for d in root.iterdir() if (d / state.MANIFEST).exists()}


def test_state_directory_per_cluster_id_bootstrap_servers_and_topics(tmp_path: Path) -> None:
    def open_(bootstrap: str = "a:9092,b:9092", cid: str = "c1", inputs: tuple[str, ...] = ("page-views",),
              output: str = "page-views-per-minute") -> state.PipelineState:
        return state.open_state(tmp_path, bootstrap=bootstrap, cluster_id=cid, input_topics=inputs,
                                output_topic=output, local_cluster=False)

    first = open_()
    assert first.new and first.path.parent == tmp_path
    assert json.loads((first.path / "state.json").read_text())["cluster_id"] == "c1"
    # The same cluster, servers listed in another order or case: the same state, resumed.
    again = open_("B:9092, a:9092")
    assert again.path == first.path and not again.new
    others = [open_(cid="c2"), open_(bootstrap="a:9092"), open_(inputs=("clicks",)), open_(output="other")]
    assert len({first.path, *(o.path for o in others)}) == 5
    assert all(o.new for o in others)
    # generated-until belongs to one state only
    first.set_generated_until(1234)
    assert first.generated_until() == 1234 and all(o.generated_until() is None for o in others)
    # a run holds its state: a second one is refused while the first runs
    with state.locked(first), pytest.raises(state.StateInUse), state.locked(again):
        pass
    # the cluster under another address: a note names the other directory
    assert state.others_for_cluster(tmp_path, others[1]) == [first.path]


def test_no_new_input_exits_3_and_each_cluster_has_its_own_state(two_clusters: tuple[Any, Any], tmp_path: Path) -> None:
    a, b = two_clusters
    proc = run_pipeline("--bootstrap-servers", a.bootstrap, "--events", "0", "--work-dir", str(tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "no new input: page-views is empty" in proc.stdout, proc.stdout
    assert "spark-submit" not in proc.stdout
    proc = run_pipeline("--bootstrap-servers", b.bootstrap, "--events", "0", "--work-dir", str(tmp_path), "--allow-empty")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no new input" in proc.stdout and "--allow-empty" in proc.stdout
    # Two clusters, two state directories, each naming the id its brokers wrote into meta.properties.
    dirs = state_dirs(tmp_path)
    assert len(dirs) == 2, dirs
    assert {m["cluster_id"] for m in dirs.values()} == {broker_cluster_id(a), broker_cluster_id(b)}
    assert sorted(m["bootstrap_servers"][0] for m in dirs.values()) == sorted([a.bootstrap, b.bootstrap])
    assert all(m["input_topics"] == ["page-views"] and not m["local_cluster"] for m in dirs.values())
    # Nothing of Spark's ran: no checkpoints, no log.
    assert not any((tmp_path / d / sub).exists() for d in dirs for sub in ("checkpoints", "spark-submit.log"))
    # The same cluster again: the same directory (still nothing to do).
    proc = run_pipeline("--bootstrap-servers", a.bootstrap, "--events", "0", "--work-dir", str(tmp_path))
    assert proc.returncode == 3 and len(state_dirs(tmp_path)) == 2, proc.stdout + proc.stderr


def test_input_that_covers_the_output_topic_is_refused() -> None:
    out = ["page-views-per-minute"]
    with pytest.raises(topic_collision.TopicCollisionError, match="matches the output topic page-views-per-minute"):
        topic_collision.check(out, pattern="page-views.*")
    with pytest.raises(topic_collision.TopicCollisionError, match="also the output topic"):
        topic_collision.check(out, topics=["page-views-per-minute"])
    with pytest.raises(topic_collision.TopicCollisionError, match="not a regular expression"):
        topic_collision.check(out, pattern="page-views(")
    # Spark's Kafka source takes every topic in which the pattern is found, not only whole-name matches.
    for pattern in (r"page-views(\..+)?", "page-views", "views-per"):
        with pytest.raises(topic_collision.TopicCollisionError, match="whose name contains a match"):
            topic_collision.check(out, pattern=pattern)
    assert topic_collision.suggest("page-views.*", out) == r"^page-views(\..+)?$"
    # Anchored, or not found in the output's name: these leave the output out.
    for pattern in (r"^page-views(\..+)?$", "^page-views$", "page-views-(eu|us|apac)", "^page-views-[a-z]{2}$"):
        topic_collision.check(out, pattern=pattern)
    # run.py refuses before it connects anywhere (port 1: nothing listens there).
    proc = run_pipeline("--bootstrap-servers", "127.0.0.1:1", "--input-topic", "t", "--output-topic", "t")
    assert proc.returncode == 2 and "the job would read its own results back as input" in proc.stderr, proc.stderr


def test_generated_event_time_never_runs_ahead_of_the_clock() -> None:
    now = int(time.time() * 1000)
    events = generate_events.generate(3000, seed=5, start_ms=now - 3600_000, span_s=3600, now_ms=now)
    assert max(e.event_time_ms for e in events) < now
    # Late events whose delay would reach past now arrive now, not later.
    assert max(e.arrival_ms for e in events) <= now
    assert sum(e.arrival_ms - e.event_time_ms >= 1000 for e in events) > 100
    with pytest.raises(ValueError, match="after the current time"):
        generate_events.generate(10, start_ms=now - 1000, span_s=60, now_ms=now)
    # The command line says so instead of producing events from the future.
    proc = subprocess.run([sys.executable, "-m", "clients.pipeline.generate_events", "--events", "5",
                           "--start", generate_events.iso_ms(now + 3600_000)], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 2 and "after the current time" in proc.stderr, proc.stderr
