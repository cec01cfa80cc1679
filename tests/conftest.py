"""Shared pytest fixtures."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from clients import devcluster
from clients.zookeeper_server import free_port_slice

# Test clusters: a controlled shutdown that cannot move leadership (the last broker of a cluster, or one
# whose peers were killed) retries after 200 ms instead of Kafka's 5 s, which only cost teardown time.
devcluster.BASE_OVERRIDES["controlled.shutdown.retry.backoff.ms"] = "200"


def _own_port_slice() -> None:
    """`make test` runs the suite in parallel workers (pytest-xdist): each hands out ports from a slice
    of its own, it and the processes it starts (brokers, ZooKeeper, the dev-cluster command), so two
    workers never give the same port to two servers. Fixed-port suites use ports below the slices."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count or not worker.startswith("gw"):
        return
    os.environ["KAFKETTE_FREE_PORT_RANGE"] = free_port_slice(int(worker[2:]), int(count))


_own_port_slice()

# ================================================================================================
# ZooKeeper (controller tests and anything else that needs a real ensemble)
#
# One standalone ZooKeeper per test session. Tests isolate themselves with a chroot of their own:
# connect with ``zk_connect`` (``host:port/t-<uuid>``), never with the bare server address.


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[object]:
    from clients.zookeeper_server import ZooKeeperServer

    try:
        server = ZooKeeperServer()
        server.start()
    except (RuntimeError, OSError, TimeoutError) as e:
        pytest.fail(f"cannot start ZooKeeper (deploy/install-sysdeps.sh installs it): {e}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_chroot() -> str:
    return f"/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_connect(zookeeper_server: object, zk_chroot: str) -> str:
    """``zookeeper.connect`` for this test: the session's server plus a fresh chroot."""
    return f"{zookeeper_server.connect_string}{zk_chroot}"  # type: ignore[attr-defined]


@pytest.fixture
def zk(zk_connect: str) -> Iterator[object]:
    """A started KafkaZkClient in this test's chroot, with Kafka's top-level paths."""
    from controller.zk_client import KafkaZkClient

    c = KafkaZkClient(zk_connect, 4000).start()
    c.create_top_level_paths()
    yield c
    c.close()


# ================================================================================================
# Local clusters of real broker processes (tests/integration)
#
# ``kafka_cluster``: one ZooKeeper and one broker for the whole session, shared by every test that
# does not stop, kill or restart brokers (they use names of their own, see tests/integration/helpers).
# ``cluster_factory``: private clusters for tests that restart or kill brokers; stopped at teardown.
# When a test fails, the tail of each of its brokers' logs is added to the failure report.


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[object]:
    from clients.devcluster import LocalCluster

    cluster = LocalCluster(1)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.__exit__(None, None, None)


@pytest.fixture
def cluster_factory(request: pytest.FixtureRequest) -> Iterator[object]:
    from clients.devcluster import LocalCluster

    made: list[LocalCluster] = []
    request.node._local_clusters = made  # type: ignore[attr-defined]

    def make(n: int = 1, **kwargs: object) -> LocalCluster:
        cluster = LocalCluster(n, **kwargs)  # type: ignore[arg-type]
        made.append(cluster)
        return cluster.start()

    try:
        yield make
    finally:
        for cluster in made:
            cluster.__exit__(None, None, None)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    rep = yield
    if rep.when == "call" and rep.failed:
        clusters = list(getattr(item, "_local_clusters", []))
        shared = getattr(item, "funcargs", {}).get("kafka_cluster")
        if shared is not None:
            clusters.append(shared)
        tails = [f"--- tail of {b.log_path}\n{b.log_text()[-6000:]}" for c in clusters for b in c.brokers]
        if tails:
            rep.sections.append(("broker logs", "\n".join(tails)))
    return rep


def shared_cluster(n: int, overrides: dict[str, str]) -> Iterator[object]:
    """Body of a session fixture: one ``LocalCluster`` shared by a test directory, stopped at the end."""
    from clients.devcluster import LocalCluster

    with LocalCluster(n, overrides=overrides) as cluster:
        yield cluster


def attach_cluster(request: pytest.FixtureRequest, cluster: object) -> object:
    """Have a failing test's report include ``cluster``'s broker logs (see pytest_runtest_makereport)."""
    clusters = getattr(request.node, "_local_clusters", [])
    clusters.append(cluster)
    request.node._local_clusters = clusters  # type: ignore[attr-defined]
    return cluster
