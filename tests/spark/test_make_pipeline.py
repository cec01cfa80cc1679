"""`make pipeline` as the README runs it, against two clusters in sequence, and the README's hand-run
commands from a fresh shell.

Each run keeps its state (checkpoints, Parquet, generated-until) in a directory of its own per cluster:
the second cluster's run counts exactly its own events, the first cluster's state is left as it was, and
a later run against the first cluster with nothing new says so and fails (unless --allow-empty). The two
runs produce different numbers of events, so a shared checkpoint (the old behaviour) would sit past the
second cluster's offsets and count nothing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clients.pipeline import cluster_info, generate_events, results
from clients.pipeline.generate_events import PageView, parse_time_ms
from tests.spark import expected

REPO = Path(__file__).resolve().parents[2]
OVERRIDES = {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}
INPUT, OUTPUT = "page-views", "page-views-per-minute"


@pytest.fixture(scope="module")
def cluster_a() -> Iterator[Any]:
    from clients.devcluster import LocalCluster

    with LocalCluster(1, overrides=OVERRIDES) as cluster:
        yield cluster


@dataclass
class Run:
    rc: int
    out: str
    state_dir: Path | None

    def number(self, pattern: str) -> tuple[int, ...]:
        m = re.search(pattern, self.out, re.M)
        assert m, f"no /{pattern}/ in:\n{self.out}"
        return tuple(int(g) for g in m.groups())


def make_pipeline(bootstrap: str, work: Path, args: str) -> Run:
    """`BOOTSTRAP_SERVERS=... make pipeline PIPELINE_ARGS=...` with the state under ``work``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_")}
    env.update(BOOTSTRAP_SERVERS=bootstrap, PIPELINE_WORK_DIR=str(work))
    proc = subprocess.run(["make", "--no-print-directory", "pipeline", f"PIPELINE_ARGS={args}"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    m = re.search(r"^cluster id \S+; state in (\S+) \(", out, re.M)
    # (printed relative to the repository when it is inside it)
    return Run(proc.returncode, out, REPO / m.group(1) if m else None)


def input_events(bootstrap: str) -> list[PageView]:
    """The page views in the input topic, read back (what the job had to count)."""
    return [PageView(v["event_id"], parse_time_ms(v["event_time"]), 0, v["user_id"], v["session_id"], v["page"],
                     v["referrer"], v["user_agent"], v["country"], v["duration_ms"])
            for _, v in results.read_topic(bootstrap, INPUT)]


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in directory.rglob("*") if p.is_file() and p.name != ".lock"}


def check_run(run: Run, bootstrap: str, events: int) -> dict[tuple[str, str], dict[str, int]]:
    """The run produced ``events`` page views and counted exactly the windows the watermark closed."""
    assert run.rc == 0, run.out[-6000:]
    for stage in ("using the cluster at", "generating", "spark-submit", "summary"):
        assert re.search(rf"^\[pipeline +\d+s\] {stage}", run.out, re.M), f"no stage line '{stage}':\n{run.out}"
    assert run.number(r"^produced (\d+) page views to page-views") == (events,)
    got_events = input_events(bootstrap)
    assert len(got_events) == events
    # No event from the future: every event time is behind the clock after the run.
    assert max(e.event_time_ms for e in got_events) <= time.time() * 1000
    want = expected.emitted_windows(got_events)
    got, keys = expected.from_topic(results.read_topic(bootstrap, OUTPUT))
    assert got == want, expected.diff(want, got)
    assert all(n == 1 for n in keys.values())
    windows, distinct, views = run.number(r"^page-views-per-minute: (\d+) window/page results \((\d+) distinct\), "
                                          r"(\d+) views counted")
    assert windows == distinct == len(want) and views == sum(v["views"] for v in want.values())
    assert run.state_dir is not None
    pq_got, pq_keys = expected.from_parquet(results.read_parquet(run.state_dir / "parquet"))
    assert pq_got == want and all(n == 1 for n in pq_keys.values()), expected.diff(want, pq_got)
    # Not a local cluster: the windows still open stay in the state, and the summary says so.
    assert "They stay in the job's state" in run.out and "never written" not in run.out
    return want


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_make_pipeline_against_two_clusters_in_sequence(spark_jars: Path, cluster_a: Any, tmp_path: Path) -> None:
    from clients.devcluster import LocalCluster

    work = tmp_path / "pipeline"
    first = make_pipeline(cluster_a.bootstrap, work, "--events 2000 --seed 3")
    check_run(first, cluster_a.bootstrap, 2000)
    assert first.state_dir is not None and first.state_dir.parent == work
    a_state = snapshot(first.state_dir)
    assert any(k.startswith("checkpoints/kafka/commits/") for k in a_state)

    with LocalCluster(1, overrides=OVERRIDES) as cluster_b:
        second = make_pipeline(cluster_b.bootstrap, work, "--events 1200 --seed 4")
        check_run(second, cluster_b.bootstrap, 1200)
        assert second.state_dir is not None and second.state_dir != first.state_dir
        assert "(new)" in second.out and "resumed" not in second.out
        manifests = [json.loads((d / "state.json").read_text()) for d in (first.state_dir, second.state_dir)]
        assert manifests[0]["cluster_id"] != manifests[1]["cluster_id"]
        assert [m["bootstrap_servers"] for m in manifests] == [[cluster_a.bootstrap], [cluster_b.bootstrap]]
    # The second run did not touch the first cluster's state.
    assert snapshot(first.state_dir) == a_state

    # The first cluster again, with nothing new: the same state, and a clear refusal (make fails).
    again = make_pipeline(cluster_a.bootstrap, work, "--events 0")
    assert again.rc != 0, again.out
    assert again.state_dir == first.state_dir and "resumed from earlier runs" in again.out
    assert "no new input: the job has processed every record in page-views already" in again.out, again.out
    assert "spark-submit" not in again.out
    fine = make_pipeline(cluster_a.bootstrap, work, "--events 0 --allow-empty")
    assert fine.rc == 0 and "no new input" in fine.out, fine.out
    assert snapshot(first.state_dir) == a_state


def fresh_shell(command: str) -> subprocess.CompletedProcess[str]:
    """``command`` in a login shell with an empty environment (no venv activated, no PYTHONPATH), in the repo."""
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    return subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", "-lc",
                           f"cd {shlex.quote(str(REPO))} && {command}"], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_hand_run_commands_from_a_fresh_shell(spark_jars: Path, cluster_a: Any, tmp_path: Path) -> None:
    """The README's commands, with the cluster's address for localhost:9092 and tmp_path for /tmp/pv."""
    bootstrap = cluster_a.bootstrap
    generate_events.create_topics(bootstrap, [INPUT], replication=1, configs={"retention.ms": "-1"})
    generate_events.create_topics(bootstrap, [OUTPUT], replication=1)
    start = generate_events.parse_time_ms(generate_events.DEFAULT_START)
    generate_events.produce(generate_events.generate(900, seed=9, start_ms=start, id_prefix="hand"), bootstrap, INPUT)
    pv = tmp_path / "pv"
    streaming = ("{py} -m clients.pipeline.submit clients/pipeline/streaming_job.py "
                 "--bootstrap-servers {b} --topic-pattern {pattern} "
                 "--output-topic page-views-per-minute --parquet-dir {pv}/parquet --checkpoint-dir {pv}/checkpoints")

    # The old pattern would read the output topic too: refused before Spark starts.
    refused = fresh_shell(streaming.format(py=".venv/bin/python", b=bootstrap, pattern="'page-views.*'", pv=pv))
    # (spark-submit passes the Python driver's stderr on to its stdout)
    said = refused.stdout + refused.stderr
    assert refused.returncode == 2 and "matches the output topic page-views-per-minute" in said, said
    assert not pv.exists()

    done = fresh_shell(streaming.format(py=".venv/bin/python", b=bootstrap, pattern=r"'^page-views(\..+)?$'", pv=pv))
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    # Spark read the input topic and nothing else: the source's first offsets name page-views only.
    initial = (pv / "checkpoints" / "kafka" / "sources" / "0" / "0").read_text().splitlines()[-1]
    assert list(json.loads(initial)) == [INPUT], initial
    assert results.read_parquet(pv / "parquet"), "the job wrote no Parquet rows"

    batch = fresh_shell(
        ".venv/bin/python -m clients.pipeline.submit clients/pipeline/batch_job.py "
        f"--bootstrap-servers {bootstrap} --topic page-views --records "
        """--starting-offsets '{"page-views":{"0":100,"1":-2,"2":-2}}' """
        """--ending-offsets '{"page-views":{"0":200,"1":-1,"2":50}}'""")
    assert batch.returncode == 0, batch.stderr[-5000:]
    out = json.loads(batch.stdout)
    _, end = cluster_info.offset_range(bootstrap, [INPUT])
    assert out["records_read"] == 100 + end[(INPUT, 1)] + 50
    assert {(r["partition"], r["offset"]) for r in out["records"] if r["partition"] == 0} == {(0, o) for o in range(100, 200)}
