"""What a scenario's workloads left behind, checked against what the clients were promised.

Each checker returns a ``Row`` of the report: counts (acknowledged, lost, duplicated, reordered), the
longest time nothing was acknowledged, and the list of broken promises (empty: the row passes).
Counts a promise allows (acks=1 may lose; a consumer group reads at least once, so it may read twice)
are shown and not counted as violations.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tests.chaos.workloads import ProducerLog

HARNESS_ERROR = "scenario could not run"
Records = dict[int, list[tuple[int, bytes]]]  # partition -> [(offset, value)]


@dataclass
class Row:
    scenario: str
    workload: str
    acked: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    unavailable_s: float = 0.0
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def result(self) -> str:
        if any(v.startswith(HARNESS_ERROR) for v in self.violations):
            return "ERROR"
        if self.violations:
            return "VIOLATED"
        if self.lost:
            return "ok (loss allowed)"
        return "ok"


def longest_gap(times: list[float], start: float, end: float) -> float:
    """Longest stretch inside [start, end] without an event: how long the service was unavailable."""
    inside = sorted(t for t in times if start <= t <= end)
    points = [start, *inside, end]
    return max((b - a for a, b in zip(points, points[1:], strict=False)), default=0.0)


def check_producer(row: Row, plog: ProducerLog, records: Records, *, loss_allowed: bool) -> Row:
    """Acknowledged records lost, duplicated, out of order, or not where their acknowledgment put them."""
    prefix = f"{plog.session}:".encode()
    where: dict[int, list[tuple[int, int]]] = {}  # seq -> [(partition, offset)]
    per_partition: dict[int, list[int]] = {}
    for p, recs in records.items():
        for offset, value in recs:
            if value is None or not value.startswith(prefix):
                continue
            seq = int(value[len(prefix):])
            where.setdefault(seq, []).append((p, offset))
            per_partition.setdefault(p, []).append(seq)
    with plog.lock:
        acked = list(plog.acked)
    row.acked = len(acked)
    lost = [a for a in acked if a.seq not in where]
    moved = [a for a in acked if a.seq in where and a.offset >= 0 and (a.partition, a.offset) not in where[a.seq]]
    row.lost = len(lost)
    row.duplicated = sum(len(v) - 1 for v in where.values())
    row.reordered = sum(sum(1 for a, b in zip(seqs, seqs[1:], strict=False) if b < a)
                        for seqs in per_partition.values())
    if lost:
        sample = ", ".join(f"{plog.session}:{a.seq}@{a.partition}/{a.offset}" for a in lost[:5])
        (row.notes if loss_allowed else row.violations).append(f"{len(lost)} acknowledged records lost ({sample})")
    if moved:
        row.violations.append(f"{len(moved)} acknowledged records not at the acknowledged offset "
                              f"(first: seq {moved[0].seq} acked at {moved[0].partition}/{moved[0].offset}, "
                              f"found at {where[moved[0].seq]})")
    if plog.idempotent and row.duplicated:
        row.violations.append(f"{row.duplicated} duplicates from an idempotent producer")
    if plog.idempotent and row.reordered:
        row.violations.append(f"{row.reordered} order violations from an idempotent producer")
    failed = len(plog.failed)
    if failed:
        row.notes.append(f"{failed} sends failed (not acknowledged)")
    return row


def check_copy(row: Row, source: Records, sink: Records, *, input_loss_allowed: bool = False) -> Row:
    """The transactional copy: read_committed output equals the input exactly, transactions whole.

    With ``input_loss_allowed`` (unclean election on the input), input records copied before the input
    lost them are counted as lost and noted, not a violation: the copy did its part exactly once. An
    input partition where that happened was cut below the copy's committed position, and its new
    records reuse the lost offsets: the copy's group is past them (or, once its position is out of
    range, reset by auto.offset.reset, as Kafka's consumers are). There, like the consumer group's
    reset (check_group), input records not copied or copied again are counted and noted, and the order
    is checked up to the cut."""
    inputs = Counter(v for recs in source.values() for _, v in recs)
    partition_of = {v: p for p, recs in source.items() for _, v in recs}
    copied: Counter[bytes] = Counter()
    txn_sizes: dict[str, tuple[int, int]] = {}  # tag -> (records seen, records the transaction wrote)
    cut: set[int] = set()  # input partitions the unclean election cut below what the copy had read
    for p, recs in sink.items():
        for _, value in recs:
            body, _, tag = value.rpartition(b"|")
            copied[body] += 1
            if input_loss_allowed and body not in inputs:
                cut.add(p)
            name, _, size = tag.decode().partition("/")
            seen, _ = txn_sizes.get(name, (0, int(size)))
            txn_sizes[name] = (seen + 1, int(size))
    row.acked = sum(inputs.values())
    missing = [v for v in inputs if copied[v] < inputs[v]]
    twice = [v for v in copied if v in inputs and copied[v] > inputs[v]]
    extra = [v for v in copied if v not in inputs]
    torn = {name: sizes for name, sizes in txn_sizes.items() if sizes[0] != sizes[1]}
    # Per partition, the copy keeps the input's order (in a cut partition: up to the cut).
    for p, recs in sink.items():
        order = {v: i for i, (_, v) in enumerate(source.get(p, []))}
        idx = [order.get(v.rpartition(b"|")[0], -1) for _, v in recs]
        if p in cut:
            idx = idx[:idx.index(-1)]
        row.reordered += sum(1 for a, b in zip(idx, idx[1:], strict=False) if b < a)
    missing_cut = [v for v in missing if partition_of[v] in cut]
    twice_cut = [v for v in twice if partition_of[v] in cut]
    missing = [v for v in missing if partition_of[v] not in cut]
    twice = [v for v in twice if partition_of[v] not in cut]
    row.lost = len(missing) + len(missing_cut)
    row.duplicated = sum(copied[v] - inputs[v] for v in twice + twice_cut)
    if missing:
        row.violations.append(f"{len(missing)} input records never copied (first {missing[0]!r})")
    if twice:
        row.violations.append(f"{len(twice)} input records copied twice (a transaction applied twice)")
    if extra and input_loss_allowed:
        row.lost += len(extra)
        row.notes.append(f"{len(extra)} copied records whose input the unclean election lost (first {extra[0]!r})")
    elif extra:
        row.violations.append(f"{len(extra)} output records with no input (first {extra[0]!r})")
    if missing_cut or twice_cut:
        row.notes.append(f"input partitions {sorted(cut)} cut below the copy's position by the unclean election: "
                         f"{len(missing_cut)} of their new records not copied, {len(twice_cut)} copied again")
    if torn:
        name, (seen, size) = next(iter(torn.items()))
        row.violations.append(f"{len(torn)} torn transactions (first {name}: {seen} of {size} records visible)")
    if row.reordered:
        row.violations.append(f"{row.reordered} order violations in the copy")
    row.notes.append(f"{len(txn_sizes)} transactions visible")
    return row


def check_group(row: Row, source: Records, consumed: dict[bytes, int],
                committed_seen: list[tuple[float, dict[tuple[str, int], int]]], *,
                truncation_allowed: bool = False) -> Row:
    """A group committing offsets: every record read at least once, committed offsets never go back.
    With ``truncation_allowed`` (unclean election), a log cut below the group's position resets it
    (OFFSET_OUT_OF_RANGE, auto.offset.reset), so its offsets may go back: noted, not a violation."""
    inputs = [v for recs in source.values() for _, v in recs]
    row.acked = len(inputs)
    never = [v for v in inputs if v not in consumed]
    row.lost = len(never)
    row.duplicated = sum(n - 1 for n in consumed.values() if n > 1)
    last: dict[tuple[str, int], int] = {}
    backwards: list[str] = []
    for _, offsets in committed_seen:
        for tp, off in offsets.items():
            if off < last.get(tp, -1):
                backwards.append(f"{tp[0]}-{tp[1]}: {last[tp]} -> {off}")
            last[tp] = max(off, last.get(tp, -1))
    row.reordered = len(backwards)
    if never:
        row.violations.append(f"{len(never)} records never consumed by the group (first {never[0]!r})")
    if backwards:
        (row.notes if truncation_allowed else row.violations).append(
            f"committed offsets went backwards {len(backwards)} times ({backwards[0]})")
    if row.duplicated:
        row.notes.append("records read again after a failed commit or a rebalance (at least once)")
    return row
