"""Fixtures of the platform tests: the Java jars (fetched once), and the Java processes a test starts,
stopped at teardown and whose logs are added to the report when the test fails."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.platform.java import JavaProcess, PlatformJars, platform_jars


@pytest.fixture(scope="session")
def jars() -> PlatformJars:
    return platform_jars()


@pytest.fixture
def java(request: pytest.FixtureRequest, jars: PlatformJars, tmp_path: Path) -> Iterator[Callable[..., JavaProcess]]:
    """``java(name, main_class, *args, **kw)``: a JavaProcess (not started) logging under tmp_path."""
    made: list[JavaProcess] = []
    request.node._java_processes = made  # type: ignore[attr-defined]

    def make(name: str, main_class: str, *args: str, **kwargs: Any) -> JavaProcess:
        p = JavaProcess(name, main_class, *args, log_dir=tmp_path, **kwargs)
        made.append(p)
        return p

    try:
        yield make
    finally:
        for p in made:
            with contextlib.suppress(Exception):
                p.stop(timeout=30)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    rep = yield
    if rep.when == "call" and rep.failed:
        for p in getattr(item, "_java_processes", []):
            rep.sections.append((f"log of {p.name}", p.log_text()[-8000:]))
    return rep
