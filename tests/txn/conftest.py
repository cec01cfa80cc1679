"""Fixtures of the exactly-once tests: a shared 3-broker cluster (ZooKeeper + broker processes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import attach_cluster, shared_cluster

# Small internal topics keep startup quick; the timeout check runs every second so the abort test is short.
TXN_OVERRIDES = {
    "transaction.state.log.num.partitions": "5",
    "offsets.topic.num.partitions": "5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


@pytest.fixture(scope="session")
def txn_cluster() -> Iterator[object]:
    yield from shared_cluster(3, TXN_OVERRIDES)


@pytest.fixture
def cluster3(txn_cluster: object, request: pytest.FixtureRequest) -> object:
    """The shared cluster; its broker logs are attached to the report of a failing test."""
    return attach_cluster(request, txn_cluster)
