"""Fixtures for the cluster tests, and the unavailability numbers in the terminal summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.cluster import helpers


@pytest.fixture
def cluster3(cluster_factory: Callable[..., Any]) -> Callable[..., Any]:
    """``cluster3(**extra_configs)``: ZooKeeper plus three brokers tuned for quick failure detection."""

    def make(**extra: str) -> Any:
        return cluster_factory(3, **helpers.cluster_options(**extra))

    return make


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if helpers.REPORTS:
        terminalreporter.section("cluster availability")
        for line in helpers.REPORTS:
            terminalreporter.write_line(line)
