"""A follower's fetcher and the role changes that overtake it.

Kafka's ReplicaManager removes a partition's fetcher before it makes the partition leader or stops it,
and that removal waits for whatever the fetcher thread is doing to the partition (a truncation, an
append). Its fetcher also ignores a fetch response for a partition whose fetch state changed while the
fetch was out (removed and added again, or moved to another offset).

Here the fetcher truncates on a thread beside the event loop. A LeaderAndIsr that made the partition
leader meanwhile read the log end before the cut and recorded the new leader epoch as starting there,
past the log's end once the cut was done: the epoch's first records were then listed under the previous
epoch, and a follower holding other records at those offsets would not have truncated them.

The leader is a stub connection here (its answers are the test's); the log, the ReplicaManager and the
fetcher manager are real.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker.metadata_cache import MetadataCache
from broker.replica_fetcher import ReplicaFetcher, ReplicaFetcherManager
from broker.replica_manager import ReplicaManager
from config.registry import BrokerConfig, LogConfig
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.records import build_batch
from storage.log_manager import LogManager

pytestmark = pytest.mark.timeout(60)

TOPIC = "t"
TP = (TOPIC, 0)
LEADER = 1


def _batch(base_offset: int, count: int, epoch: int) -> bytes:
    return build_batch([(None, b"v%d" % (base_offset + i)) for i in range(count)], base_offset=base_offset,
                       partition_leader_epoch=epoch)


class StubLeader:
    """The fetcher's connection to broker 1. Fetches are answered at once (the first with ``first_records``,
    later ones empty); OffsetForLeaderEpoch with ``epoch_answer``."""

    def __init__(self, first_records: bytes, epoch_answer: tuple[int, int]) -> None:
        self.first_records: bytes | None = first_records
        self.epoch_answer = epoch_answer
        self.epoch_requests = 0

    async def request(self, api_key: ApiKey, body: Any, version: int, timeout: float | None = None) -> Any:
        await asyncio.sleep(0.005)  # a leader's round trip; also keeps an idle fetcher from spinning
        if api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            self.epoch_requests += 1
            epoch, end = self.epoch_answer
            return SimpleNamespace(topics=[SimpleNamespace(topic=t.topic, partitions=[
                SimpleNamespace(partition=p.partition, error_code=0, leader_epoch=epoch, end_offset=end)
                for p in t.partitions]) for t in body.topics])
        records, self.first_records = self.first_records, None
        return SimpleNamespace(error_code=0, session_id=0, responses=[SimpleNamespace(topic=t.topic, partitions=[
            SimpleNamespace(partition_index=p.partition, error_code=0, records=records, high_watermark=0,
                            log_start_offset=0) for p in t.partitions]) for t in body.topics])

    def close(self) -> None:
        pass


def _lai(leader: int, epoch: int, isr: list[int]) -> Any:
    return SimpleNamespace(topic_states=[SimpleNamespace(topic_name=TOPIC, topic_id=uuid.UUID(int=7), partition_states=[
        SimpleNamespace(partition_index=0, leader=leader, leader_epoch=epoch, isr=isr, replicas=[0, 1],
                        partition_epoch=epoch, controller_epoch=1, is_new=True)])])


async def _until(what: str, check: Any, turns: int = 2000) -> None:
    for _ in range(turns):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


async def _time_to_finish(task: asyncio.Future[Any], turns: int = 100) -> None:
    """Give ``task`` a chance to end before the truncation it should wait for is let go (an order is
    asserted afterwards, never a time: a task that must wait cannot end here however long this is)."""
    for _ in range(turns):
        if task.done():
            return
        await asyncio.sleep(0.01)


def test_leader_and_isr_waits_for_the_truncation_in_progress(tmp_path: Path) -> None:
    config = BrokerConfig({"replica.fetch.backoff.ms": "10"})
    log_manager = LogManager([str(tmp_path)], broker_id=0, cluster_id="c",
                             default_config=LogConfig.from_broker(config, {}))
    log_manager.startup()
    rm: ReplicaManager | None = None
    fetchers = ReplicaFetcherManager(0, MetadataCache(0), "PLAINTEXT", lambda: config, lambda: rm,
                                     None)  # type: ignore[arg-type]  # no follower throttle
    rm = ReplicaManager(0, config, log_manager, MetadataCache(0), lambda topic: LogConfig.from_broker(config, {}),
                        fetcher_manager=fetchers)
    # Offsets 0-4 written in epoch 0 and 5-9 in epoch 1 (two batches); broker 1's epoch 1 ends at 8.
    leader = StubLeader(_batch(0, 5, 0) + _batch(5, 3, 1) + _batch(8, 2, 1), epoch_answer=(1, 8))
    cut_started, release = threading.Event(), threading.Event()
    events: list[str] = []

    async def scenario() -> tuple[list[tuple[int, int]], int, int]:
        assert rm is not None
        fetcher = fetchers.fetchers[(LEADER, 0)] = ReplicaFetcher(fetchers, LEADER)
        fetcher.conn = leader  # type: ignore[assignment]
        fetcher.start()
        await rm.become_leader_or_follower(_lai(LEADER, 1, [0, 1]))
        p = rm.partitions[TP]
        await _until("the follower fetched offsets 0-9", lambda: p.log.log_end_offset == 10)
        truncate_to = p.log.truncate_to

        def slow_truncate_to(offset: int) -> bool:
            # Runs on the executor's thread, holding nothing yet: the cut itself takes the log's lock.
            cut_started.set()
            release.wait(5)
            done = truncate_to(offset)
            events.append("truncated")
            return done

        p.log.truncate_to = slow_truncate_to  # type: ignore[method-assign]
        make_leader = p.make_leader

        def recorded_make_leader(*args: Any, **kwargs: Any) -> bool:
            events.append(f"leader at log end {p.log.log_end_offset}")
            return make_leader(*args, **kwargs)

        p.make_leader = recorded_make_leader  # type: ignore[method-assign]
        # A new epoch of the same leader: the partition is added again and truncates against it first.
        await rm.become_leader_or_follower(_lai(LEADER, 2, [0, 1]))
        await _until("the fetcher started truncating", cut_started.is_set)
        # Broker 1 is gone: this broker becomes leader while its fetcher is still cutting the log.
        became = asyncio.ensure_future(rm.become_leader_or_follower(_lai(0, 3, [0])))
        await _time_to_finish(became)
        release.set()
        await became
        await fetchers.shutdown()
        return p.log.leader_epoch_cache.entries(), p.log.log_end_offset, p.high_watermark

    try:
        entries, leo, hw = asyncio.run(scenario())
    finally:
        release.set()
        log_manager.shutdown()
    assert leader.epoch_requests == 1
    assert events == ["truncated", "leader at log end 8"], events
    assert leo == 8
    assert entries == [(0, 0), (1, 5), (3, 8)], (
        "the new leader epoch must start where the log ends once the truncation is done")
    assert hw == 8


def test_shutdown_waits_for_a_truncation_in_progress() -> None:
    """The logs close after the fetchers stop: a truncation still running on the executor ends first."""
    config = BrokerConfig()
    fetchers = ReplicaFetcherManager(0, MetadataCache(0), "PLAINTEXT", lambda: config, lambda: None,
                                     None)  # type: ignore[arg-type]
    started, release = threading.Event(), threading.Event()
    events: list[str] = []

    def slow_change() -> None:
        started.set()
        release.wait(5)
        events.append("truncated")

    async def scenario() -> None:
        change = asyncio.ensure_future(fetchers.change_log(TP, slow_change))
        await _until("the truncation started", started.is_set)
        change.cancel()  # as a fetcher stopped mid-truncation: the change itself runs on
        stopping = asyncio.ensure_future(fetchers.shutdown())
        await _time_to_finish(stopping)
        release.set()
        await stopping
        events.append("shut down")

    try:
        asyncio.run(scenario())
    finally:
        release.set()
    assert events == ["truncated", "shut down"], events
    assert fetchers.log_changes == {}


# --- the fetcher alone, against stubs ---------------------------------------------------------------


class _Log:
    def __init__(self, leo: int) -> None:
        self.log_end_offset = leo
        self.log_start_offset = 0
        self.high_watermark = 0
        self.latest_epoch: int | None = 0
        self.appended: list[bytes] = []
        self.truncated_to: list[int] = []

    def append_as_follower(self, records: bytes) -> None:
        self.appended.append(bytes(records))

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return epoch, self.log_end_offset

    def truncate_to(self, offset: int) -> bool:
        self.truncated_to.append(offset)
        return True


class _ParkedLeader:
    """Each request waits until the test answers it."""

    def __init__(self) -> None:
        self.waiting: asyncio.Queue[tuple[ApiKey, Any, asyncio.Future[Any]]] = asyncio.Queue()

    async def request(self, api_key: ApiKey, body: Any, version: int, timeout: float | None = None) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self.waiting.put((api_key, body, fut))
        return await fut

    def close(self) -> None:
        pass


def _stub_manager(log: _Log) -> Any:
    settings = {"replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
                "replica.fetch.response.max.bytes": 10 << 20, "replica.fetch.max.bytes": 1 << 20,
                "replica.fetch.backoff.ms": 10, "replica.socket.timeout.ms": 1000, "broker.rack": None}
    partition = SimpleNamespace(is_leader=False, leader_id=LEADER, tp=TP, log=log)
    replica_manager = SimpleNamespace(partitions={TP: partition}, notify_append=lambda tp: None)
    manager = SimpleNamespace(broker_id=0, follower_quota=None, config=lambda: settings,
                              replica_manager=lambda: replica_manager, lags={}, replication_bytes_in=0,
                              listener_name="PLAINTEXT", security=None, log_changes={})

    async def change_log(tp: Any, change: Any, *args: Any) -> Any:
        return change(*args)

    manager.change_log = change_log
    return manager


def _fetch_answer(body: Any, records: bytes) -> Any:
    return SimpleNamespace(error_code=0, session_id=0, responses=[SimpleNamespace(topic=t.topic, partitions=[
        SimpleNamespace(partition_index=p.partition, error_code=0, records=records, high_watermark=0,
                        log_start_offset=0) for p in t.partitions]) for t in body.topics])


def _run_with_parked_leader(log: _Log, while_out: Any, api: ApiKey = ApiKey.FETCH,
                            answer: Any = None) -> ReplicaFetcher:
    """Start a fetcher on ``TP``, let ``while_out(fetcher)`` change things while its first ``api`` request
    is out, then answer that request (``answer(body)``) and let the fetcher handle it."""

    async def scenario() -> ReplicaFetcher:
        fetcher = ReplicaFetcher(_stub_manager(log), LEADER)
        leader = _ParkedLeader()
        fetcher.conn = leader  # type: ignore[assignment]
        fetcher.add(TP, 5)
        if api == ApiKey.FETCH:
            fetcher.partitions[TP].truncating = False
        fetcher.start()
        try:
            got, body, fut = await asyncio.wait_for(leader.waiting.get(), 10)
            assert got == api
            while_out(fetcher)
            fut.set_result(answer(body))
            # The fetcher handles the answer, then sends its next request.
            nxt, _body, _fut = await asyncio.wait_for(leader.waiting.get(), 10)
            assert nxt in (ApiKey.FETCH, ApiKey.OFFSET_FOR_LEADER_EPOCH)
            return fetcher
        finally:
            await fetcher.stop()

    return asyncio.run(scenario())


def test_a_fetch_answer_is_appended_when_nothing_changed() -> None:
    """The control: the same exchange with nothing changed appends the records."""
    log = _Log(leo=5)
    records = _batch(5, 2, 5)
    _run_with_parked_leader(log, lambda fetcher: None, answer=lambda body: _fetch_answer(body, records))
    assert log.appended == [records]


def test_a_fetch_answer_for_a_partition_added_again_is_ignored() -> None:
    log = _Log(leo=5)
    fetcher = _run_with_parked_leader(log, lambda f: f.add(TP, 6),
                                      answer=lambda body: _fetch_answer(body, _batch(5, 2, 5)))
    assert log.appended == [], "records fetched under the old fetch state were appended"
    assert fetcher.partitions[TP].leader_epoch == 6


def test_a_fetch_answer_for_a_log_that_moved_is_ignored() -> None:
    log = _Log(leo=5)

    def moved(fetcher: ReplicaFetcher) -> None:
        log.log_end_offset = 3

    _run_with_parked_leader(log, moved, answer=lambda body: _fetch_answer(body, _batch(5, 2, 5)))
    assert log.appended == [], "records for offset 5 were appended to a log ending at 3"


def test_an_epoch_answer_for_a_partition_added_again_is_not_applied() -> None:
    log = _Log(leo=10)

    def answer(body: Any) -> Any:
        return SimpleNamespace(topics=[SimpleNamespace(topic=t.topic, partitions=[
            SimpleNamespace(partition=p.partition, error_code=ErrorCode.NONE, leader_epoch=0, end_offset=4)
            for p in t.partitions]) for t in body.topics])

    fetcher = _run_with_parked_leader(log, lambda f: f.add(TP, 6), api=ApiKey.OFFSET_FOR_LEADER_EPOCH, answer=answer)
    assert log.truncated_to == [], "the log was cut by the answer to the replaced fetch state's question"
    assert fetcher.partitions[TP].truncating, "the new fetch state must still ask where to truncate"
