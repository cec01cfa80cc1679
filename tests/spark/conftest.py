"""Fixtures of the Spark pipeline tests: the install step and a shared 3-broker cluster."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import attach_cluster, shared_cluster

# Few partitions for the internal topics: quicker startup on a busy machine.
OVERRIDES = {"offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "5"}


@pytest.fixture(scope="session")
def spark_jars() -> Path:
    """PySpark in the venv and the connector jars in .cache/spark-jars (deploy/spark/install.sh)."""
    if shutil.which("java") is None:
        pytest.fail("no java: deploy/install-sysdeps.sh installs a JDK")
    if shutil.which("mvn") is None and not any((Path(__file__).resolve().parents[2] / ".cache" / "spark-jars").glob("*/.complete")):
        pytest.fail("no mvn to resolve the Spark Kafka connector from Maven Central (deploy/install-sysdeps.sh installs it)")
    from clients.pipeline import submit

    return submit.install()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[object]:
    yield from shared_cluster(3, OVERRIDES)


@pytest.fixture
def cluster3(spark_cluster: object, request: pytest.FixtureRequest) -> object:
    """The shared cluster (tests that restart brokers make their own); its broker logs are attached to the report of a failing test."""
    return attach_cluster(request, spark_cluster)
