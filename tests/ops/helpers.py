"""Helpers for the ops tests: run the ``kafkette`` CLI in-process, scrape metrics, wait."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


@dataclass
class Result:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def __str__(self) -> str:
        return f"rc={self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def kafkette(*argv: str, stdin: str | None = None) -> Result:
    """Run ``kafkette ARGV`` in this process (same code path as the console script)."""
    from clients.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(argv))
            except SystemExit as e:  # argparse: --help (0) and usage errors (2)
                rc = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stdin = old_stdin
    return Result(rc, out.getvalue(), err.getvalue())


def ok(*argv: str, stdin: str | None = None) -> Result:
    r = kafkette(*argv, stdin=stdin)
    assert r.rc == 0, f"kafkette {' '.join(argv)} failed:\n{r}"
    return r


def fails(*argv: str, rc: int | None = None, stdin: str | None = None, match: str | None = None) -> Result:
    """The command fails with one clear line on stderr (and ``match`` in it)."""
    r = kafkette(*argv, stdin=stdin)
    assert r.rc != 0, f"kafkette {' '.join(argv)} should have failed:\n{r}"
    if rc is not None:
        assert r.rc == rc, str(r)
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert lines, f"no error message:\n{r}"
    assert "Traceback" not in r.err, str(r)
    if match is not None:
        assert re.search(match, r.err), f"{match!r} not in stderr:\n{r}"
    return r


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(check: Callable[[], T], timeout: float, what: str, interval: float = 0.2) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(url: str, timeout: float = 10.0) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """One /metrics scrape as {(name, labels): value}."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            labels = frozenset(_LABEL.findall(m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float | None:
    want = frozenset(labels.items())
    for (n, ls), v in samples.items():
        if n == name and ls == want:
            return v
    return None


def running_cluster(n: int, **kwargs: Any) -> Iterator[Any]:
    """Body of a module fixture: a started ``LocalCluster`` of ``n`` brokers, stopped afterwards; a
    cluster that cannot start fails the tests that use it (with the reason) instead of erroring."""
    from clients.devcluster import LocalCluster

    c = LocalCluster(n, **kwargs)
    try:
        c.start()
    except Exception as e:  # pragma: no cover - environment problem
        c.__exit__(None, None, None)
        pytest.fail(f"cannot start a local cluster: {e}")
    try:
        yield c
    finally:
        c.__exit__(None, None, None)


def urls(cluster: Any) -> list[str]:
    """The Prometheus endpoint of each broker of a ``LocalCluster``."""
    return [b.metrics_url for b in cluster.brokers]
