"""The replicated acks=all path: parked fetches woken by appends, delayed produces completed by the
follower fetch that moves the HW, and the purgatory those rely on.

The cluster tests set ``replica.fetch.wait.max.ms`` far above the produce timeout: a follower fetch that
only returned when its wait ran out, or a produce completed on a timer, would make the acks=all produces
below time out instead of succeeding.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.purgatory import Purgatory
from protocol.api_versions import ApiKey
from protocol.messages import request_type
from protocol.records import build_batch, iter_batches
from tests.cluster.helpers import Admin, cluster_options, unique
from tests.integration.helpers import RawClient, create_topic, wait_until
from tests.integration.in_process_broker import in_process_broker

LONG_WAIT_MS = 120_000  # far beyond any produce timeout here: a fetch must never wait it out
FOLLOWER_WAIT_MS = 60_000  # six times the acks=all produce timeout (10 s) of RawClient.produce


def test_purgatory_returns_the_keys_notified_and_nothing_after_a_timeout() -> None:
    async def scenario() -> tuple[list[Any], list[Any], int]:
        purgatory = Purgatory("Test")
        parked = asyncio.ensure_future(purgatory.wait(["a", "b", "c"], 60))
        while purgatory.waiting == 0:
            await asyncio.sleep(0)
        purgatory.notify("z")  # not watched: nothing happens
        purgatory.notify("b")
        purgatory.notify("c")  # in the same turn: both reported
        notified = await parked
        timed_out = await purgatory.wait(["a"], 0.001)
        return notified, timed_out, purgatory.waiting

    notified, timed_out, waiting = asyncio.run(scenario())
    assert sorted(notified) == ["b", "c"]
    assert timed_out == []
    assert waiting == 0


def test_purgatory_wakes_only_waiters_whose_ready_says_so() -> None:
    """Kafka's tryComplete on notification: a waiter that is not ready stays parked, untouched (same
    registration, no new wait), and is woken by the notification that makes it ready; a ready check
    that fails wakes its waiter, which meets the failure on its own task."""

    async def scenario() -> tuple[list[Any], list[Any], list[Any], int]:
        purgatory = Purgatory("Test")
        hw = {"p": 0}
        calls: list[Any] = []

        def reaches_3(key: Any) -> bool:
            calls.append(key)
            return hw["p"] >= 3

        def broken(key: Any) -> bool:
            raise RuntimeError("state gone")

        produce = asyncio.ensure_future(purgatory.wait(["p"], 60, reaches_3))
        plain = asyncio.ensure_future(purgatory.wait(["p"], 60))
        failing = asyncio.ensure_future(purgatory.wait(["q"], 60, broken))
        while purgatory.waiting < 3:
            await asyncio.sleep(0)
        for moved_to in (1, 2):
            hw["p"] = moved_to
            purgatory.notify("p")
            await asyncio.sleep(0)
            assert not produce.done() and purgatory.waiting >= 2
        assert plain.done()  # no ready check: woken by the first notification, as before
        purgatory.notify("q")
        assert await failing == ["q"]
        hw["p"] = 3
        purgatory.notify("p")
        return await produce, await plain, calls, purgatory.waiting

    produce, plain, calls, waiting = asyncio.run(scenario())
    assert produce == ["p"]  # only the notification that made it ready
    assert plain == ["p"]
    assert calls == ["p", "p", "p"]  # checked once per notification, never woken to check itself
    assert waiting == 0


def _consumer_fetch(bootstrap: str, topic: str, offset: int, out: list[Any]) -> None:
    mt = request_type(ApiKey.FETCH)
    with RawClient(bootstrap, timeout=LONG_WAIT_MS / 1000) as raw:
        r = raw.request(ApiKey.FETCH, 12, replica_id=-1, max_wait_ms=LONG_WAIT_MS, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            mt.FetchTopic(topic=topic, partitions=[mt.FetchPartition(
                                partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                                partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[], rack_id="")
    out.append(r.responses[0].partitions[0])


def _on_loop(broker: Any, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on the broker's event loop and return its result, after one more loop turn (so that
    whatever it woke has run)."""

    async def call() -> Any:
        result = fn()
        for _ in range(3):
            await asyncio.sleep(0)
        return result

    return asyncio.run_coroutine_threadsafe(call(), broker.loop).result(30)


def test_parked_fetch_stays_parked_on_a_wake_up_without_news_and_returns_on_the_append(
        zookeeper_server: Any, zk_chroot: str, tmp_path: Path) -> None:
    with in_process_broker(zookeeper_server.connect_string + zk_chroot, tmp_path / "data") as (broker, bootstrap):
        topic = unique("fast-path-park")
        create_topic(bootstrap, topic, partitions=1)
        rm = broker.replica_manager
        got: list[Any] = []
        fetcher = threading.Thread(target=_consumer_fetch, args=(bootstrap, topic, 0, got), daemon=True)
        fetcher.start()
        wait_until(lambda: rm.fetch_purgatory.waiting == 1, 30, "the fetch parked in the fetch purgatory")
        # The HW did not move: the wake-up reads nothing new, and the fetch goes back to waiting.
        assert _on_loop(broker, lambda: rm.notify_hw((topic, 0))) is None
        assert _on_loop(broker, lambda: rm.fetch_purgatory.waiting) == 1
        assert not got and fetcher.is_alive()
        with RawClient(bootstrap) as raw:
            assert raw.produce(topic, 0, build_batch([(None, b"wake")]), acks=1).error_code == 0
        fetcher.join(LONG_WAIT_MS / 2000)  # a bound on a failure, far below the fetch's own wait
        assert got, "the parked fetch did not return on the append"
        pd = got[0]
        assert pd.error_code == 0
        assert [r.value for b in iter_batches(memoryview(bytes(pd.records))) for r in b.records()] == [b"wake"]


def test_acks_all_completes_on_follower_fetches_not_on_their_wait(cluster_factory: Callable[..., Any]) -> None:
    """RF=3, min.insync.replicas=2, followers whose fetches may wait a minute: every acks=all produce
    (10 s timeout) is acknowledged, so each append woke the followers' parked fetches and the follower
    fetch that moved the HW completed the produce."""
    wait = str(FOLLOWER_WAIT_MS)  # Kafka's rule: replica.fetch.wait.max.ms <= replica.lag.time.max.ms
    cluster = cluster_factory(3, **cluster_options(**{"replica.fetch.wait.max.ms": wait, "replica.lag.time.max.ms": wait,
                                                     "replica.socket.timeout.ms": wait}))
    topic = unique("fast-path-acks")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, 1, 3, configs={"min.insync.replicas": "2"})
        leader = admin.describe(topic)[0]["leader"]
    with RawClient(cluster.brokers[leader].bootstrap) as raw:
        wait_until(lambda: raw.leads(topic), 30, f"broker {leader} to lead {topic}-0")
        offsets = []
        for i in range(20):
            r = raw.produce(topic, 0, build_batch([(None, b"v%d" % i)]), acks=-1)
            assert r.error_code == 0, r
            offsets.append(r.base_offset)
        assert offsets == list(range(20))
        # Everything acknowledged is committed: a consumer (reading up to the HW) gets all of it.
        values = [r.value for b in raw.fetch_batches(topic, 0) for r in b.records()]
    assert values == [b"v%d" % i for i in range(20)]
