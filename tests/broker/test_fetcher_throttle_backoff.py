"""A follower whose every partition is throttled backs off instead of spinning the event loop.

When a follower is over follower.replication.throttled.rate and all the partitions one of its fetchers
follows are throttled, that fetcher has nothing to ask its leader for. Kafka's fetcher thread then waits
replica.fetch.backoff.ms before it builds the next fetch. Ours returned at once and its loop called it
again without ever yielding, so the broker's event loop spun until the rate fell back under the bound
(after a full fetch, the quota's whole window): no request answered, no controller work, no other
fetcher. The chaos matrix found it: a rolling restart during a throttled reassignment, where the new
replica was also the controller, held a controlled shutdown for 19 s.

The fetcher runs here against stubs (no leader is reached). The quota counts how often it is asked
whether it is exceeded while the test's own task has not run in between; a hundred such calls in a row
is a spin, and the quota then gives in so that the test ends either way.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from broker.replica_fetcher import ReplicaFetcher

_SPIN_CALLS = 100


class _AlwaysExceeded:
    """A follower quota that is always exceeded and throttles everything, and notices a spinning caller."""

    def __init__(self) -> None:
        self.tick = 0  # advanced by the test's task each time the event loop runs it
        self.calls = 0
        self._last_tick = -1
        self._same_tick_calls = 0
        self.spun = False

    def is_throttled(self, topic: str, partition: int) -> bool:
        return True

    def is_exceeded(self) -> bool:
        self.calls += 1
        if self.tick == self._last_tick:
            self._same_tick_calls += 1
        else:
            self._last_tick, self._same_tick_calls = self.tick, 0
        if self._same_tick_calls >= _SPIN_CALLS:
            self.spun = True
            return False  # let the spinning loop move on (it then fails to connect, and sleeps)
        return True

    def record(self, nbytes: int) -> None:
        pass


def _manager(quota: _AlwaysExceeded, backoff_ms: int = 10) -> Any:
    settings = {"replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
                "replica.fetch.response.max.bytes": 10 << 20, "replica.fetch.max.bytes": 1 << 20,
                "replica.fetch.backoff.ms": backoff_ms, "replica.socket.timeout.ms": 1000, "broker.rack": None}
    replica_manager = SimpleNamespace(partitions={
        ("t", p): SimpleNamespace(is_leader=False, leader_id=0, log=SimpleNamespace(log_end_offset=0, log_start_offset=0))
        for p in (0, 1)})
    return SimpleNamespace(broker_id=1, follower_quota=quota, config=lambda: settings,
                           replica_manager=lambda: replica_manager,
                           metadata=SimpleNamespace(endpoint=lambda broker_id, listener: None),
                           listener_name="PLAINTEXT", security=None)


def test_fetcher_with_only_throttled_partitions_over_its_rate_yields() -> None:
    quota = _AlwaysExceeded()

    async def scenario() -> None:
        fetcher = ReplicaFetcher(_manager(quota), leader_id=0)
        fetcher.add(("t", 0), 5)
        fetcher.partitions[("t", 0)].truncating = False  # no OffsetsForLeaderEpoch round first
        fetcher.start()
        try:
            # Long enough for several backoffs of 10 ms; each turn of this task is a turn of the loop.
            for _ in range(200):
                await asyncio.sleep(0.001)
                quota.tick += 1
        finally:
            await fetcher.stop()

    asyncio.run(scenario())
    assert quota.calls > 1, "the fetcher never asked its quota again: nothing was exercised"
    assert not quota.spun, (f"the fetcher asked its quota {_SPIN_CALLS} times in a row without the event loop "
                            "running anything else: it spins while every partition is throttled")


def test_a_partition_added_during_the_backoff_ends_it() -> None:
    """As Kafka's partitionMapCond: the backoff waits for a partition change, at most replica.fetch.backoff.ms."""
    quota = _AlwaysExceeded()

    async def scenario() -> int:
        fetcher = ReplicaFetcher(_manager(quota, backoff_ms=600_000), leader_id=0)
        fetcher.add(("t", 0), 5)
        fetcher.partitions[("t", 0)].truncating = False
        fetcher.start()
        try:
            for _ in range(1000):  # the first fetch finds nothing to ask for and backs off
                await asyncio.sleep(0.001)
                if quota.calls:
                    break
            before = quota.calls
            fetcher.add(("t", 1), 5)
            fetcher.partitions[("t", 1)].truncating = False
            for _ in range(1000):
                await asyncio.sleep(0.001)
                quota.tick += 1
                if quota.calls > before:
                    break
            return quota.calls - before
        finally:
            await fetcher.stop()

    assert asyncio.run(scenario()) > 0, "the fetcher slept its whole backoff although a partition was added"
    assert not quota.spun
