"""``python -m tests.bench``: the names it is given are checked before any benchmark runs."""

from __future__ import annotations

import pytest

from tests import bench


def test_every_benchmark_module_is_known() -> None:
    assert {"clients", "partitions", "replication"} <= set(bench.discover())


def test_an_option_given_as_a_name_stops_it_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["clients", "--phases", "replicated"]) == 2
    out, err = capsys.readouterr()
    assert "=== bench" not in out  # nothing ran, not even the valid name before them
    assert "unknown benchmark(s): --phases, replicated" in err
    assert "python -m tests.bench_<name> [options]" in err
