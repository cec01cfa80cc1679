"""Replica assignment: Kafka's outputs for fixed start index / shift, rack awareness, validation."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from controller.assignment import (
    AssignmentError,
    assign_new_partitions,
    assign_replicas,
    rack_alternated_brokers,
    validate_manual_assignment,
)
from protocol.errors import ErrorCode


def test_rack_unaware_matches_kafka() -> None:
    # Kafka's AdminZkClientTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixed start 0.
    expected = {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}
    assert assign_replicas([(b, None) for b in range(5)], 10, 3, 0) == expected
    assert assign_replicas(range(5), 10, 3, start_index=0, next_replica_shift=0) == expected


def test_start_index_and_shift_are_separate_knobs() -> None:
    got = assign_replicas(range(4), 4, 2, start_index=1, next_replica_shift=2)
    # first replicas rotate from broker 1; followers at shift 1 + (2 + 0) % 3 = 3
    assert got == {0: [1, 0], 1: [2, 1], 2: [3, 2], 3: [0, 3]}


def test_brokers_taken_in_id_order() -> None:
    assert assign_replicas([3, 1, 2], 3, 1, 0) == {0: [1], 1: [2], 2: [3]}


def test_rack_alternated_list_matches_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({k: v for k, v in racks.items() if k != 5}) == [0, 3, 1, 4, 2]
    assert rack_alternated_brokers({0: "a", 1: "a", 2: "a", 3: "b", 4: "b", 5: "b", 6: "c", 7: "c", 8: "c"}) == \
        [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_matches_kafka() -> None:
    # Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    got = assign_replicas(list(racks.items()), 7, 3, 0, 0)
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
                   6: [0, 4, 2]}


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_spreads_over_racks(seed: int) -> None:
    rng = random.Random(seed)
    racks = {b: f"r{b % 3}" for b in range(9)}
    got = assign_replicas(list(racks.items()), 18, 3, rng=rng)
    for reps in got.values():
        assert len(set(reps)) == 3
        assert len({racks[r] for r in reps}) == 3  # RF == #racks: one replica per rack
    # Same number of brokers per rack and RF == #racks: perfectly even (Kafka's guarantee).
    assert set(Counter(reps[0] for reps in got.values()).values()) == {2}
    assert set(Counter(r for reps in got.values() for r in reps).values()) == {6}


def test_rack_aware_fewer_racks_than_replicas() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    got = assign_replicas(list(racks.items()), 8, 3, 0, 0)
    for reps in got.values():
        assert len(set(reps)) == 3 and {racks[r] for r in reps} == {"a", "b"}


@pytest.mark.parametrize("seed", range(10))
def test_rack_unaware_is_even(seed: int) -> None:
    got = assign_replicas(range(6), 12, 3, rng=random.Random(seed))
    assert sorted(got) == list(range(12))
    for reps in got.values():
        assert len(set(reps)) == 3
    assert set(Counter(r[0] for r in got.values()).values()) == {2}
    assert set(Counter(x for r in got.values() for x in r).values()) == {6}


def test_errors_are_kafkas() -> None:
    with pytest.raises(AssignmentError) as e:
        assign_replicas(range(3), 0, 1)
    assert e.value.error_code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(AssignmentError) as e:
        assign_replicas(range(3), 1, 4)
    assert e.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(AssignmentError) as e:
        assign_replicas(range(3), 1, 0)
    assert e.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(AssignmentError) as e:
        assign_replicas([(0, "a"), (1, None)], 1, 1)
    assert e.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_new_partitions_continue_the_pattern() -> None:
    existing = assign_replicas(range(5), 3, 3, 0)
    new = assign_new_partitions(range(5), existing, 10)
    full = assign_replicas(range(5), 10, 3, 0)
    assert new == {p: full[p] for p in range(3, 10)}
    with pytest.raises(AssignmentError) as e:
        assign_new_partitions(range(5), existing, 3)
    assert e.value.error_code == ErrorCode.INVALID_PARTITIONS


def test_manual_assignment_validation() -> None:
    validate_manual_assignment({0: [1, 2], 1: [2, 3]}, [1, 2, 3])
    for bad in ({0: [1, 1]}, {0: [1, 2], 1: [2]}, {1: [1]}, {0: [9]}, {0: []}):
        with pytest.raises(AssignmentError) as e:
            validate_manual_assignment(bad, [1, 2, 3])
        assert e.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
