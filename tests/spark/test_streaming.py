"""The streaming job end to end: generated events -> Kafka -> spark-submit -> result topic + Parquet.

The job runs with ``trigger(availableNow=True)``: it processes what the topics hold, then stops. A second
run with more input (in the existing topics and in a new topic matching the pattern) resumes from the
checkpoint: the windows it writes are exactly the ones the first run had not written yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clients.pipeline import generate_events, results, submit
from tests.integration.helpers import unique
from tests.spark import expected

STREAMING_JOB = submit.PIPELINE_DIR / "streaming_job.py"
HOUR_MS = 3600_000


def run_job(bootstrap: str, pattern: str, output_topic: str, work: Path, run: int) -> None:
    submit.run(STREAMING_JOB, [
        "--bootstrap-servers", bootstrap, "--topic-pattern", pattern, "--output-topic", output_topic,
        "--parquet-dir", str(work / "parquet"), "--checkpoint-dir", str(work / "checkpoints"),
    ], work / f"spark-submit-{run}.log", timeout=600)


def check_outputs(bootstrap: str, output_topic: str, work: Path, events: list[Any]) -> int:
    want = expected.emitted_windows(events)
    got, keys = expected.from_topic(results.read_topic(bootstrap, output_topic))
    dupes = {k: n for k, n in keys.items() if n > 1}
    assert not dupes, f"windows written twice to {output_topic}: {list(dupes.items())[:10]}"
    assert got == want, f"result topic vs expected: {expected.diff(want, got)}"
    pq_got, pq_keys = expected.from_parquet(results.read_parquet(work / "parquet"))
    pq_dupes = {k: n for k, n in pq_keys.items() if n > 1}
    assert not pq_dupes, f"windows written twice to Parquet: {list(pq_dupes.items())[:10]}"
    assert pq_got == want, f"Parquet vs expected: {expected.diff(want, pq_got)}"
    return len(want)


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_windowed_counts_to_kafka_and_parquet_then_resume(spark_jars: Path, cluster3: Any, tmp_path: Path) -> None:
    bootstrap = cluster3.bootstrap
    prefix = unique("views")
    pattern = f"{prefix}-.*"
    eu, us, apac = f"{prefix}-eu", f"{prefix}-us", f"{prefix}-apac"
    output_topic = unique("views-per-minute")
    generate_events.create_topics(bootstrap, [eu, us], partitions=3, configs={"retention.ms": "-1"})
    generate_events.create_topics(bootstrap, [output_topic], partitions=3)
    start = generate_events.parse_time_ms(generate_events.DEFAULT_START)

    # Run 1: an hour of page views over two regional topics, subscribed by pattern.
    first = generate_events.produce(generate_events.generate(1500, seed=11, start_ms=start), bootstrap, [eu, us])
    assert {e.topic for e in first} == {eu, us}
    assert sum(e.arrival_ms - e.event_time_ms >= 1000 for e in first) > 50, "the input should hold late events"
    run_job(bootstrap, pattern, output_topic, tmp_path, 1)
    n1 = check_outputs(bootstrap, output_topic, tmp_path, first)
    assert n1 > 500

    # Run 2: the next hour, also in a third topic that only now matches the pattern. The job resumes
    # from its checkpoint: the windows the first run held back (not yet closed by the watermark) and the
    # new ones are written once, nothing from the first run again.
    generate_events.create_topics(bootstrap, [apac], partitions=3, configs={"retention.ms": "-1"})
    second = generate_events.produce(
        generate_events.generate(1500, seed=12, start_ms=start + HOUR_MS, id_prefix="e-12"),
        bootstrap, [eu, us, apac])
    assert apac in {e.topic for e in second}
    run_job(bootstrap, pattern, output_topic, tmp_path, 2)
    n2 = check_outputs(bootstrap, output_topic, tmp_path, first + second)
    assert n2 > n1 + 500
