"""Replica assignment for new topics and partitions: Kafka's algorithm (``AdminUtils``), as pure functions.

Goals, in Kafka's words: spread replicas evenly over brokers; for the partitions on one broker, spread
their other replicas over the other brokers; when every broker has a rack, put each partition's replicas
on different racks where possible.

Rack-unaware: the first replica of partition ``p`` is broker ``(p + start_index) % n``; the others
follow at an increasing *shift*, which grows by one each time the first replicas have gone once round
the broker list, so consecutive rounds do not repeat the same replica sets. ``start_index`` and the
initial shift are random unless given (Kafka uses its ``fixedStartIndex`` for both).

Rack-aware: the same round robin over a *rack-alternated* broker list (one broker from each rack in
turn), skipping a candidate whose rack already holds a replica while some rack holds none, and a
broker that already holds one while some broker holds none.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from protocol.errors import ErrorCode

__all__ = [
    "AssignmentError",
    "assign_new_partitions",
    "assign_replicas",
    "rack_alternated_brokers",
    "validate_manual_assignment",
]

BrokerInfo = tuple[int, str | None]


class AssignmentError(ValueError):
    """An assignment request that cannot be met; ``error_code`` is the Kafka error to answer with."""

    def __init__(self, message: str, error_code: int = ErrorCode.INVALID_REPLICATION_FACTOR) -> None:
        super().__init__(message)
        self.error_code = int(error_code)


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered by alternating racks: racks sorted by name, brokers sorted by id within a rack.

    {0: r1, 1: r3, 2: r3, 3: r2, 4: r2, 5: r1} -> [0, 3, 1, 5, 4, 2]
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    racks = sorted(by_rack)
    iters = {r: iter(sorted(by_rack[r])) for r in racks}
    out: list[int] = []
    i = 0
    while len(out) < len(broker_racks):
        b = next(iters[racks[i]], None)
        if b is not None:
            out.append(b)
        i = (i + 1) % len(racks)
    return out


def assign_replicas(brokers: Iterable[BrokerInfo | int], partitions: int, replication_factor: int,
                    start_index: int | None = None, next_replica_shift: int | None = None, *,
                    start_partition_id: int = 0, rng: random.Random | None = None) -> dict[int, list[int]]:
    """Assign ``partitions`` partitions of ``replication_factor`` replicas over ``brokers``.

    ``brokers`` are ``(id, rack or None)`` pairs (bare ids mean no rack); they are taken in id order,
    as Kafka's admin code sorts them. Returns ``{partition id: [replica broker ids]}`` with the
    preferred leader first. Raises ``AssignmentError`` (INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR
    / INVALID_REPLICA_ASSIGNMENT) like Kafka.
    """
    infos: list[BrokerInfo] = sorted(
        ((b, None) if isinstance(b, int) else (int(b[0]), b[1]) for b in brokers), key=lambda x: x[0])
    if partitions <= 0:
        raise AssignmentError("Number of partitions must be larger than 0.", ErrorCode.INVALID_PARTITIONS)
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.")
    if replication_factor > len(infos):
        raise AssignmentError(f"Replication factor: {replication_factor} larger than available brokers: "
                              f"{len(infos)}.")
    # Without a generator of its own, the module-level one (random.randrange is its bound method).
    randrange = rng.randrange if rng is not None else random.randrange
    if all(rack is None for _, rack in infos):
        ordered = [b for b, _ in infos]
        rack_of: dict[int, str] | None = None
    else:
        if any(rack is None for _, rack in infos):
            raise AssignmentError("Not all brokers have rack information for replica rack aware assignment.",
                                  ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        rack_of = {b: rack for b, rack in infos}  # type: ignore[misc]
        ordered = rack_alternated_brokers(rack_of)
    n = len(ordered)
    if start_index is None or start_index < 0:
        start = randrange(n)
        shift = randrange(n) if next_replica_shift is None or next_replica_shift < 0 else next_replica_shift
    else:
        start = start_index
        shift = start_index if next_replica_shift is None or next_replica_shift < 0 else next_replica_shift
    if rack_of is None:
        return _rack_unaware(ordered, partitions, replication_factor, start, shift, max(0, start_partition_id))
    return _rack_aware(ordered, rack_of, partitions, replication_factor, start, shift, max(0, start_partition_id))


def _rack_unaware(brokers: Sequence[int], partitions: int, rf: int, start: int, shift: int,
                  first_partition: int) -> dict[int, list[int]]:
    n = len(brokers)
    out: dict[int, list[int]] = {}
    pid = first_partition
    for _ in range(partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        replicas = [brokers[first]]
        for j in range(rf - 1):
            replicas.append(brokers[_replica_index(first, shift, j, n)])
        out[pid] = replicas
        pid += 1
    return out


def _rack_aware(brokers: Sequence[int], rack_of: Mapping[int, str], partitions: int, rf: int, start: int,
                shift: int, first_partition: int) -> dict[int, list[int]]:
    n = len(brokers)
    n_racks = len(set(rack_of.values()))
    out: dict[int, list[int]] = {}
    pid = first_partition
    for _ in range(partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = brokers[first]
        replicas = [leader]
        racks_used = {rack_of[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = brokers[_replica_index(first, shift * n_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                if ((rack not in racks_used or len(racks_used) == n_racks)
                        and (broker not in brokers_used or len(brokers_used) == n)):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        out[pid] = replicas
        pid += 1
    return out


def assign_new_partitions(brokers: Iterable[BrokerInfo | int], existing: Mapping[int, Sequence[int]],
                          total_partitions: int, rng: random.Random | None = None) -> dict[int, list[int]]:
    """CreatePartitions: replicas for partitions ``len(existing) .. total_partitions-1``.

    Like Kafka's ``AdminZkClient.createPartitions``: same replication factor as partition 0, the start
    index is partition 0's first replica's position in the broker list, partition ids continue.
    """
    infos = sorted(((b, None) if isinstance(b, int) else (int(b[0]), b[1]) for b in brokers), key=lambda x: x[0])
    if not existing:
        raise AssignmentError("The topic has no partitions.", ErrorCode.INVALID_PARTITIONS)
    count = len(existing)
    if total_partitions <= count:
        raise AssignmentError(f"Topic currently has {count} partitions, {total_partitions} would not be an "
                              "increase.", ErrorCode.INVALID_PARTITIONS)
    p0 = list(existing[min(existing)])
    ids = [b for b, _ in infos]
    start = next((i for i, b in enumerate(ids) if b >= p0[0]), 0)
    return assign_replicas(infos, total_partitions - count, len(p0), start, start_partition_id=count, rng=rng)


def validate_manual_assignment(assignment: Mapping[int, Sequence[int]], live_brokers: Iterable[int],
                               *, expected_replication_factor: int | None = None,
                               first_partition: int = 0) -> None:
    """Checks Kafka applies to a replica assignment given by the user (CreateTopics / CreatePartitions):
    partition ids consecutive from ``first_partition``, no duplicate replicas, same replication factor
    everywhere, every broker known."""
    live = set(live_brokers)
    if not assignment:
        raise AssignmentError("The replica assignment is empty.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    ids = sorted(assignment)
    if ids != list(range(first_partition, first_partition + len(ids))):
        raise AssignmentError("Partitions should be a consecutive 0-based integer sequence.",
                              ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    rf = expected_replication_factor
    for p in ids:
        reps = list(assignment[p])
        if not reps:
            raise AssignmentError(f"Partition {p} has an empty replica list.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        if len(set(reps)) != len(reps):
            raise AssignmentError(f"Duplicate replica assignment found: {reps}", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        if rf is None:
            rf = len(reps)
        elif len(reps) != rf:
            raise AssignmentError("All partitions should have the same number of replicas.",
                                  ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        unknown = [r for r in reps if r not in live]
        if unknown:
            raise AssignmentError(f"Unknown broker(s) {unknown} in the replica assignment.",
                                  ErrorCode.INVALID_REPLICA_ASSIGNMENT)
