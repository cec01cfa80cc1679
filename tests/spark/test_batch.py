"""The batch job reads exactly the requested slices: offset ranges and timestamp ranges.

One spark-submit reads several slices (``--spec``); each is compared with positions the broker
acknowledged to the producer, and with timestamps the generator chose.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from pathlib import Path
from typing import Any

import pytest

from clients.pipeline import generate_events, submit
from tests.integration.helpers import unique

BATCH_JOB = submit.PIPELINE_DIR / "batch_job.py"


def positions(slice_result: dict[str, Any]) -> list[tuple[int, int, str]]:
    return [(r["partition"], r["offset"], r["event_id"]) for r in slice_result["records"]]


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_offset_and_timestamp_ranges(spark_jars: Path, cluster3: Any, tmp_path: Path) -> None:
    bootstrap = cluster3.bootstrap
    topic = unique("batch-views")
    generate_events.create_topics(bootstrap, [topic], partitions=3, configs={"retention.ms": "-1"})
    events = generate_events.produce(generate_events.generate(900, seed=21), bootstrap, topic)

    by_part: dict[int, list[Any]] = {}
    for e in sorted(events, key=lambda e: (e.partition, e.offset)):
        by_part.setdefault(e.partition, []).append(e)
    assert sorted(by_part) == [0, 1, 2]
    for part in by_part.values():  # what the expectations below rely on
        assert [e.offset for e in part] == list(range(len(part)))
        assert all(a.arrival_ms <= b.arrival_ms for a, b in zip(part, part[1:], strict=False))

    def expect(ranges: dict[int, tuple[int, int]]) -> list[tuple[int, int, str]]:
        return [(p, e.offset, e.event_id) for p in sorted(ranges) for e in by_part[p][ranges[p][0]:ranges[p][1]]]

    def first_at_or_after(part: int, ts: int) -> int:
        return bisect_left([e.arrival_ms for e in by_part[part]], ts)

    ends = {p: len(v) for p, v in by_part.items()}
    ts_sorted = sorted(e.arrival_ms for e in events)
    t1, t2 = ts_sorted[len(events) // 4], ts_sorted[(len(events) * 3) // 5]
    # A timestamp between records: the range starts at the next record.
    t_between = next(ts_sorted[i] + 1 for i in range(len(ts_sorted) // 2, len(ts_sorted))
                     if ts_sorted[i + 1] > ts_sorted[i] + 1)

    specs = [
        {"name": "offsets", "topic": topic, "records": True,
         "startingOffsets": {topic: {"0": 5, "1": -2, "2": 3}},
         "endingOffsets": {topic: {"0": 40, "1": 17, "2": -1}}},
        {"name": "earliest-latest", "topic": topic, "records": True,
         "startingOffsets": "earliest", "endingOffsets": "latest"},
        {"name": "timestamps", "topic": topic, "records": True,
         "startingOffsetsByTimestamp": {topic: {str(p): t1 for p in by_part}},
         "endingOffsetsByTimestamp": {topic: {str(p): t2 for p in by_part}}},
        {"name": "timestamp-to-latest", "topic": topic, "records": True,
         "startingTimestamp": str(t_between), "endingOffsets": "latest"},
    ]
    spec_file = tmp_path / "slices.json"
    spec_file.write_text(json.dumps(specs))
    out = tmp_path / "slices-out.json"
    submit.run(BATCH_JOB, ["--bootstrap-servers", bootstrap, "--spec", str(spec_file), "--output", str(out)],
               tmp_path / "spark-submit.log", timeout=600)
    got = {r["name"]: r for r in json.loads(out.read_text())}

    assert positions(got["offsets"]) == expect({0: (5, 40), 1: (0, 17), 2: (3, ends[2])})
    assert got["offsets"]["records_read"] == 35 + 17 + ends[2] - 3
    assert positions(got["earliest-latest"]) == expect({p: (0, n) for p, n in ends.items()})
    assert sum(x["views"] for x in got["earliest-latest"]["pages"]) == len(events)
    assert positions(got["timestamps"]) == expect(
        {p: (first_at_or_after(p, t1), first_at_or_after(p, t2)) for p in by_part})
    assert all(t1 <= r["timestamp_ms"] < t2 for r in got["timestamps"]["records"])
    assert positions(got["timestamp-to-latest"]) == expect(
        {p: (first_at_or_after(p, t_between), ends[p]) for p in by_part})
    # The per-page summary (SQL over the slice) agrees with the records it covers.
    want_pages: dict[str, int] = {}
    chosen = {eid for _, _, eid in positions(got["timestamps"])}
    for e in events:
        if e.event_id in chosen:
            want_pages[e.page] = want_pages.get(e.page, 0) + 1
    assert {x["page"]: x["views"] for x in got["timestamps"]["pages"]} == want_pages
