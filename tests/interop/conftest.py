"""Fixtures of the interoperability tests: the built interop binaries and a shared 3-broker cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import attach_cluster, shared_cluster
from tests.interop import clients

# A small offsets topic keeps startup quick; Burrow reads every partition of it.
INTEROP_OVERRIDES = {
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
}


@pytest.fixture(scope="session")
def interop_bin() -> Path:
    """deploy/interop/install.sh's bin directory: Sarama's console tools, sarama-client and Burrow."""
    return clients.install()


@pytest.fixture(scope="session")
def interop_cluster() -> Iterator[object]:
    yield from shared_cluster(3, INTEROP_OVERRIDES)


@pytest.fixture
def cluster(interop_cluster: object, request: pytest.FixtureRequest) -> object:
    """The shared cluster; its broker logs are attached to the report of a failing test."""
    return attach_cluster(request, interop_cluster)
