"""What the streaming job must have written, computed from the generated events without Spark."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from clients.pipeline.generate_events import PageView

WINDOW_MS = 60_000          # streaming_job.py --window default: 1 minute
WATERMARK_MS = 600_000      # streaming_job.py --watermark default: 10 minutes
SHOP = "https://shop.example.com"


def iso_s(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def emitted_windows(events: Iterable[PageView]) -> dict[tuple[str, str], dict[str, int]]:
    """Per (window start, page): the counts of every window the watermark has closed.

    In append mode a window is written once the watermark (the largest event time seen minus 10 minutes)
    reaches its end; later windows stay in the job's state until a later run.
    """
    events = list(events)
    watermark = max(e.event_time_ms for e in events) - WATERMARK_MS
    out: dict[tuple[str, str], dict[str, int]] = {}
    for e in events:
        start = e.event_time_ms - e.event_time_ms % WINDOW_MS
        if start + WINDOW_MS > watermark:
            continue
        row = out.setdefault((iso_s(start), e.page), {"views": 0, "direct_views": 0, "external_views": 0,
                                                      "total_duration_ms": 0})
        row["views"] += 1
        row["direct_views"] += e.referrer is None
        row["external_views"] += e.referrer is not None and not e.referrer.startswith(SHOP)
        row["total_duration_ms"] += e.duration_ms
    return out


def from_topic(records: list[tuple[str, dict[str, Any]]]) -> tuple[dict[tuple[str, str], dict[str, int]], Counter[str]]:
    """The result topic's records as the same mapping, plus how often each key occurs (duplicates)."""
    keys = Counter(k for k, _ in records)
    got = {}
    for key, v in records:
        start, page = key.split("|", 1)
        assert (v["window_start"], v["page"]) == (start, page), (key, v)
        assert v["window_end"] == iso_s(int(datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp() * 1000)
                                        + WINDOW_MS), v
        got[(start, page)] = {k: v[k] for k in ("views", "direct_views", "external_views", "total_duration_ms")}
    return got, keys


def from_parquet(rows: list[dict[str, Any]]) -> tuple[dict[tuple[str, str], dict[str, int]], Counter[tuple[str, str]]]:
    keys: Counter[tuple[str, str]] = Counter()
    got = {}
    for r in rows:
        ws = r["window_start"]
        if ws.tzinfo is None:
            ws = ws.replace(tzinfo=UTC)
        key = (ws.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), r["page"])
        keys[key] += 1
        got[key] = {k: r[k] for k in ("views", "direct_views", "external_views", "total_duration_ms")}
    return got, keys


def diff(expected: dict[Any, Any], got: dict[Any, Any], limit: int = 10) -> str:
    missing = [k for k in expected if k not in got]
    extra = [k for k in got if k not in expected]
    wrong = [(k, expected[k], got[k]) for k in expected if k in got and expected[k] != got[k]]
    return (f"{len(missing)} missing {missing[:limit]}; {len(extra)} unexpected {extra[:limit]}; "
            f"{len(wrong)} wrong {wrong[:limit]}")
