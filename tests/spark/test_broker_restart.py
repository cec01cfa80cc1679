"""A broker restarts while the streaming job runs: the job finishes with failOnDataLoss=true and its
results count every event exactly once.

The job reads a replicated topic (RF 3, min.insync.replicas 2) in many small micro-batches
(``maxOffsetsPerTrigger``); once the first is committed, the broker leading the most input partitions
is stopped, the job commits more batches without it, and the broker is started again
(or, in ``make test-slow``, killed with SIGKILL and started again). Its consumers, admin client and idempotent producer must ride over the
leader changes; the Kafka sink's output must hold each window once and the counts must match.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from clients.pipeline import generate_events, results, submit
from tests.integration.helpers import unique
from tests.spark import expected

STREAMING_JOB = submit.PIPELINE_DIR / "streaming_job.py"
REPLICATED = {"retention.ms": "-1", "min.insync.replicas": "2"}


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else 0


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="it-admin")
    try:
        (t,) = admin.describe_topics([topic])
        return {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
    finally:
        admin.close()


@pytest.mark.timeout(900)
@pytest.mark.slow
@pytest.mark.parametrize("how", ["restart", "crash"])
def test_broker_restart_during_streaming_job(how: str, spark_jars: Path, cluster_factory: Any, tmp_path: Path) -> None:
    """``restart``: SIGTERM (controlled shutdown), then start. ``crash`` (make test-slow): SIGKILL, then start."""
    cluster = cluster_factory(3)
    bootstrap = cluster.bootstrap
    topic, output_topic = unique("views"), unique("views-per-minute")
    generate_events.create_topics(bootstrap, [topic], partitions=3, configs=REPLICATED)
    generate_events.create_topics(bootstrap, [output_topic], partitions=3, configs=REPLICATED)
    events = generate_events.produce(generate_events.generate(2400, seed=31), bootstrap, topic)

    log = tmp_path / "spark-submit.log"
    checkpoint = tmp_path / "checkpoints"
    proc = submit.start(STREAMING_JOB, [
        "--bootstrap-servers", bootstrap, "--topic", topic, "--output-topic", output_topic,
        "--parquet-dir", str(tmp_path / "parquet"), "--checkpoint-dir", str(checkpoint),
        "--max-offsets-per-trigger", "100", "--fail-on-data-loss", "true",
    ], log)
    try:
        def wait_for_batches(n: int, timeout: float) -> bool:
            """Until ``n`` micro-batches are committed (True) or the job has ended (False)."""
            deadline = time.monotonic() + timeout
            while committed_batches(checkpoint / "kafka") < n:
                if proc.poll() is not None:
                    return False
                assert time.monotonic() < deadline, f"fewer than {n} batches after {timeout}s:\n{submit.log_tail(log)}"
                time.sleep(0.1)
            return True

        if not wait_for_batches(1, 300):
            submit.wait(proc, log, 0)  # raises with the log's tail
            pytest.fail("the job finished before the broker went down; give it more input")
        counts: dict[int, int] = {}
        for b in leaders(bootstrap, topic).values():
            counts[b] = counts.get(b, 0) + 1
        victim = cluster.brokers[max(counts, key=lambda b: counts[b])]
        if how == "crash":
            victim.kill()
        else:
            victim.stop()
        down = committed_batches(checkpoint / "kafka")
        # The job goes on without the broker (new leaders, ISR of two)...
        wait_for_batches(down + 2, 300)
        progressed = committed_batches(checkpoint / "kafka")
        # ...and while the broker comes back and catches up.
        victim.start()
        submit.wait(proc, log, timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert progressed > down >= 1, f"no micro-batch committed while broker {victim.broker_id} was down"
    assert "data loss" not in log.read_text(errors="replace").lower(), submit.log_tail(log)

    want = expected.emitted_windows(events)
    got, keys = expected.from_topic(results.read_topic(bootstrap, output_topic))
    dupes = {k: n for k, n in keys.items() if n > 1}
    assert not dupes, f"windows written twice: {list(dupes.items())[:10]}"
    assert got == want, f"result topic vs expected: {expected.diff(want, got)}"
    pq_got, pq_keys = expected.from_parquet(results.read_parquet(tmp_path / "parquet"))
    assert all(n == 1 for n in pq_keys.values())
    assert pq_got == want, f"Parquet vs expected: {expected.diff(want, pq_got)}"
