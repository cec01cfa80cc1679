"""Where a pipeline run keeps its state: one directory per cluster and topics, never shared between clusters.

Spark's checkpoints hold Kafka offsets, and offsets mean something only in the cluster and topic that
issued them: checkpoints from one cluster, resumed against another, skip that cluster's records (or
fail on "data loss"), and the "generated-until" mark of one cluster's input says nothing about another's.
So everything a run writes goes to a directory of its own under the work dir (``.cache/pipeline`` by
default), named after a short hash of what identifies the state:

* the bootstrap servers (sorted; the same cluster under another address is treated as another cluster,
  so a note points at the older directory, see ``others_for_cluster``),
* the cluster id the brokers report (a local cluster started for one run has a new id each time, so a
  second ``make pipeline`` never resumes a stopped cluster's checkpoints),
* the input topics and the output topic.

Inside, ``state.json`` says what the directory belongs to (readable, for people and for the check that a
hash never mixes two identities), next to ``checkpoints/``, ``parquet/``, ``generated-until``,
``spark-submit.log`` and ``report.json`` (the streaming job's account of its last run). A lock file keeps
two runs from sharing one directory at the same time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MANIFEST = "state.json"
LOCK = ".lock"
IDENTITY = ("bootstrap_servers", "cluster_id", "input_topics", "output_topic")


class StateInUse(RuntimeError):
    """Another run holds the state directory."""


class CheckpointAhead(RuntimeError):
    """A checkpoint has processed a partition past its end: it cannot belong to this topic as it is now."""


def normalize_bootstrap(bootstrap: str) -> list[str]:
    """``host:port`` entries, lower case, sorted: the order in which servers are listed does not matter."""
    return sorted({s.strip().lower() for s in bootstrap.split(",") if s.strip()})


def identity(bootstrap: str, cluster_id: str, input_topics: Sequence[str], output_topic: str) -> dict[str, Any]:
    return {"bootstrap_servers": normalize_bootstrap(bootstrap), "cluster_id": cluster_id,
            "input_topics": sorted(input_topics), "output_topic": output_topic}


def key(ident: dict[str, Any]) -> str:
    canonical = json.dumps({k: ident[k] for k in IDENTITY}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def dir_name(ident: dict[str, Any]) -> str:
    """``<first server>-<first input topic>-<hash>``: readable in a listing, unique through the hash."""
    first = ident["bootstrap_servers"][0] if ident["bootstrap_servers"] else "cluster"
    topic = ident["input_topics"][0] if ident["input_topics"] else "input"
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{first}-{topic}")[:60]
    return f"{readable}-{key(ident)}"


@dataclass(frozen=True)
class PipelineState:
    path: Path
    manifest: dict[str, Any]
    new: bool   # created by this run

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def parquet(self) -> Path:
        return self.path / "parquet"

    @property
    def log(self) -> Path:
        return self.path / "spark-submit.log"

    @property
    def report(self) -> Path:
        return self.path / "report.json"

    @property
    def generated_until_file(self) -> Path:
        return self.path / "generated-until"

    def generated_until(self) -> int | None:
        """Epoch ms up to which (exclusive) earlier runs generated event time into this cluster's input."""
        try:
            return int(self.generated_until_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def set_generated_until(self, ms: int) -> None:
        tmp = self.generated_until_file.with_suffix(".tmp")
        tmp.write_text(f"{ms}\n")
        tmp.replace(self.generated_until_file)

    def query_checkpoints(self) -> list[Path]:
        """One checkpoint per streaming query of streaming_job.py (its ``--checkpoint-dir`` subdirectories)."""
        return [self.checkpoints / "kafka", self.checkpoints / "parquet"]

    def drop_checkpoints(self) -> None:
        shutil.rmtree(self.checkpoints, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.generated_until_file.unlink()


def read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def open_state(root: str | os.PathLike[str], *, bootstrap: str, cluster_id: str, input_topics: Sequence[str],
               output_topic: str, local_cluster: bool) -> PipelineState:
    """The state directory of this cluster and these topics under ``root``, created with its manifest if new."""
    ident = identity(bootstrap, cluster_id, input_topics, output_topic)
    path = Path(root) / dir_name(ident)
    existing = read_manifest(path)
    if existing is not None:
        if {k: existing.get(k) for k in IDENTITY} != ident:
            raise RuntimeError(f"{path / MANIFEST} belongs to {({k: existing.get(k) for k in IDENTITY})}, "
                               f"not to {ident}: move that directory away")
        return PipelineState(path, existing, new=False)
    path.mkdir(parents=True, exist_ok=True)
    manifest = {**ident, "local_cluster": local_cluster,
                "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    tmp = path / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(path / MANIFEST)
    return PipelineState(path, manifest, new=True)


@contextlib.contextmanager
def locked(state: PipelineState) -> Iterator[None]:
    """Hold the directory for the run; a second run against the same cluster and topics is refused."""
    with open(state.path / LOCK, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateInUse(f"another pipeline run is using {state.path}") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield


def _state_dirs(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    if not root.is_dir():
        return
    for d in sorted(root.iterdir()):
        manifest = read_manifest(d) if d.is_dir() else None
        if manifest is not None:
            yield d, manifest


def prune_stopped_local_clusters(root: str | os.PathLike[str], keep: Path) -> list[Path]:
    """Remove the state of local clusters that earlier runs started (they are gone with their run), except
    ``keep`` and directories a running run holds. Returns what was removed."""
    removed = []
    for d, manifest in _state_dirs(Path(root)):
        if not manifest.get("local_cluster") or d == keep:
            continue
        with open(d / LOCK, "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def others_for_cluster(root: str | os.PathLike[str], state: PipelineState) -> list[Path]:
    """Other state directories for the same cluster id and topics (the cluster listed under other addresses)."""
    same = {k: state.manifest[k] for k in ("cluster_id", "input_topics", "output_topic")}
    return [d for d, m in _state_dirs(Path(root))
            if d != state.path and {k: m.get(k) for k in same} == same]


# --- Spark's checkpoints ------------------------------------------------------------------------------
# A query's checkpoint holds ``offsets/<batch>`` (written when a batch is planned: a version line, a JSON
# line of batch metadata, then one line per source, for the Kafka source {"topic": {"partition": offset}})
# and ``commits/<batch>`` (written when the batch's output is committed). The input a query has fully
# processed ends at the offsets of its latest committed batch.

def _batches(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def processed_offsets(query_checkpoint: Path) -> dict[tuple[str, int], int] | None:
    """(topic, partition) -> the next offset the query has not yet processed; None without a committed batch.

    Raises ValueError when the checkpoint is not one this module can read (an unknown format version).
    """
    commits = _batches(query_checkpoint / "commits")
    if not commits:
        return None
    lines = (query_checkpoint / "offsets" / str(commits[-1])).read_text().splitlines()
    if not lines or lines[0] != "v1" or len(lines) < 3:
        raise ValueError(f"{query_checkpoint}/offsets/{commits[-1]}: not a v1 offset log entry")
    out: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        if not line.strip() or line.strip() == "-":
            continue
        source = json.loads(line)
        for topic, parts in source.items():
            for partition, offset in parts.items():
                out[(topic, int(partition))] = int(offset)
    return out


def batch_watermark_ms(query_checkpoint: Path) -> int | None:
    """The event-time watermark the query's latest committed batch ran with (Spark persists it per batch)."""
    commits = _batches(query_checkpoint / "commits")
    if not commits:
        return None
    try:
        lines = (query_checkpoint / "offsets" / str(commits[-1])).read_text().splitlines()
        return int(json.loads(lines[1])["batchWatermarkMs"]) or None
    except (OSError, ValueError, KeyError, IndexError):
        return None


def unprocessed_records(begin: dict[tuple[str, int], int], end: dict[tuple[str, int], int],
                        processed: dict[tuple[str, int], int] | None) -> int:
    """Records between what a query processed (or the beginning, for a query without a committed batch)
    and the end of each input partition. Raises CheckpointAhead if the checkpoint is past a partition's end:
    the topic was deleted and re-created, or the checkpoint belongs to other data."""
    total = 0
    for tp, end_offset in end.items():
        start = begin.get(tp, 0)
        if processed is not None and tp in processed:
            if processed[tp] > end_offset:
                raise CheckpointAhead(f"{tp[0]} partition {tp[1]} ends at offset {end_offset}, but the checkpoint has "
                                 f"processed it up to {processed[tp]}: the topic was re-created or the checkpoint "
                                 "belongs to other data")
            start = max(start, processed[tp])
        total += max(0, end_offset - start)
    return total
