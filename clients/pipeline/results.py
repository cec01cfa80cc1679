"""Reading what the streaming job wrote: the result topic (kafka-python) and its Parquet files (pyarrow)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def read_topic(bootstrap_servers: str, topic: str, timeout: float = 60.0,
               client_config: Mapping[str, Any] | None = None,
               start_offsets: Mapping[int, int] | None = None) -> list[tuple[str | None, dict[str, Any]]]:
    """Every record of ``topic`` from the beginning (or from ``start_offsets``, partition -> offset) to its
    current end: ``(key, decoded JSON value)``. ``client_config``: extra kafka-python arguments (security settings)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, client_id="pipeline-results",
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             isolation_level="read_committed", **(client_config or {}))
    try:
        deadline = time.monotonic() + timeout
        parts = consumer.partitions_for_topic(topic)
        while not parts:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no metadata for {topic}")
            time.sleep(0.2)
            parts = consumer.partitions_for_topic(topic)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        for tp in tps:
            if start_offsets and tp.partition in start_offsets:
                consumer.seek(tp, start_offsets[tp.partition])
        end = consumer.end_offsets(tps)
        out: list[tuple[str | None, dict[str, Any]]] = []
        while any(consumer.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: at {[consumer.position(tp) for tp in tps]} of {end}")
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    out.append((r.key.decode() if r.key is not None else None, json.loads(r.value)))
        return out
    finally:
        consumer.close()


def committed_parquet_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files Spark's file sink committed, from its ``_spark_metadata`` log (not a directory listing:
    a batch that failed half-way may have left files that no reader must see)."""
    log_dir = Path(path) / "_spark_metadata"
    files: dict[str, Path] = {}
    if not log_dir.is_dir():
        return []
    for entry in sorted(log_dir.iterdir()):
        if entry.name.startswith(".") or not entry.name.split(".")[0].isdigit():
            continue
        lines = entry.read_text().splitlines()
        for line in lines[1:]:  # the first line is the log's format version, "v1"
            if not line.strip():
                continue
            f = json.loads(line)
            p = f["path"].removeprefix("file://")
            if f.get("action", "add") == "add":
                files[p] = Path(p)
            else:
                files.pop(p, None)
    return sorted(files.values())


def read_parquet_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def read_parquet(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of every committed Parquet file of the streaming job's output."""
    rows: list[dict[str, Any]] = []
    for f in committed_parquet_files(path):
        rows.extend(read_parquet_file(f))
    return rows
