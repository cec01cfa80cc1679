"""free_port(): ports for servers a test starts, from a range of their own (clients/zookeeper_server.py)."""

from __future__ import annotations

import pytest

from clients.zookeeper_server import FREE_PORT_RANGE, free_port, free_port_slice


def test_ports_come_from_below_the_ephemeral_range() -> None:
    ports = {free_port() for _ in range(50)}
    assert len(ports) == 50  # none handed out twice in a row
    assert all(FREE_PORT_RANGE[0] <= p < FREE_PORT_RANGE[1] for p in ports)


def test_a_narrowed_range_is_kept_to(monkeypatch: pytest.MonkeyPatch) -> None:
    # What each parallel worker of `make test` sets (tests/conftest.py): its slice only.
    monkeypatch.setenv("KAFKETTE_FREE_PORT_RANGE", "28000-28040")
    ports = {free_port() for _ in range(30)}
    assert len(ports) == 30 and all(28000 <= p < 28040 for p in ports)


@pytest.mark.parametrize("value", ["28000", "x-y", "100-200", "29000-28000", "27000-40000"])
def test_a_range_outside_the_default_one_is_ignored(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("KAFKETTE_FREE_PORT_RANGE", value)
    assert FREE_PORT_RANGE[0] <= free_port() < FREE_PORT_RANGE[1]


def test_parallel_workers_get_disjoint_slices_of_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    slices = [free_port_slice(i, 3) for i in range(3)]
    bounds = [tuple(int(x) for x in s.split("-")) for s in slices]
    assert bounds[0][0] == FREE_PORT_RANGE[0] and bounds[-1][1] <= FREE_PORT_RANGE[1]
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(bounds, bounds[1:], strict=False))
    for s, (low, high) in zip(slices, bounds, strict=True):
        monkeypatch.setenv("KAFKETTE_FREE_PORT_RANGE", s)
        assert all(low <= free_port() < high for _ in range(20))
