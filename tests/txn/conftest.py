"""Fixtures of the exactly-once tests: a shared 3-broker cluster (ZooKeeper + broker processes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

# Small internal topics keep startup quick; the timeout check runs every second so the abort test is short.
TXN_OVERRIDES = {
    "transaction.state.log.num.partitions": "5",
    "offsets.topic.num.partitions": "5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


@pytest.fixture(scope="session")
def txn_cluster() -> Iterator[object]:
    from clients.devcluster import LocalCluster

    cluster = LocalCluster(3, overrides=TXN_OVERRIDES)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.__exit__(None, None, None)


@pytest.fixture
def cluster3(txn_cluster: object, request: pytest.FixtureRequest) -> object:
    """The shared cluster; its broker logs are attached to the report of a failing test."""
    clusters = getattr(request.node, "_local_clusters", [])
    clusters.append(txn_cluster)
    request.node._local_clusters = clusters  # type: ignore[attr-defined]
    return txn_cluster
