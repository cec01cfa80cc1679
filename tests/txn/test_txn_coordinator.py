"""The transaction coordinator's state machine, with an in-memory ``__transaction_state`` and fake leaders."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from broker.txn_coordinator import TransactionCoordinator, TxnCoordinatorConfig, TxnMetadata, TxnStateError
from broker.txn_log_format import (
    TxnLogValue,
    TxnState,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from protocol.errors import ErrorCode as E

TP = tuple[str, int]


class FakeLog:
    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail: list[E] = []  # errors for the next appends

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], timeout_s: float) -> E:
        await asyncio.sleep(0)
        if self.fail:
            return self.fail.pop(0)
        self.records.setdefault(partition, []).extend(records)
        return E.NONE

    def read(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        yield from self.records.get(partition, [])

    def states(self, txn_id: str) -> list[TxnLogValue | None]:
        out = []
        for recs in self.records.values():
            for k, v in recs:
                if decode_txn_key(k) == txn_id:
                    out.append(decode_txn_value(v))
        return out


class FakeMarkers:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int, bool, int, list[TP]]] = []
        self.replies: list[E] = []  # error for every partition of the next calls
        self.gone: set[str] = set()

    def leader_of(self, tp: TP) -> int | None:
        return None if tp[0] in self.gone else 7

    async def write_markers(self, broker_id: int, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[TP]) -> dict[TP, E]:
        await asyncio.sleep(0)
        self.calls.append((broker_id, pid, epoch, commit, coordinator_epoch, list(partitions)))
        code = self.replies.pop(0) if self.replies else E.NONE
        return dict.fromkeys(partitions, code)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def run(test: Callable[[TransactionCoordinator, FakeLog, FakeMarkers, Clock], Awaitable[Any]],
        config: TxnCoordinatorConfig | None = None, load: bool = True) -> None:
    async def main() -> None:
        backend, markers, clock = FakeLog(), FakeMarkers(), Clock()
        pids = iter(range(1000, 2000))

        async def gen() -> int:
            return next(pids)

        cfg = config or TxnCoordinatorConfig.from_config(num_partitions=1, retry_backoff_s=0.001,
                                             abort_interval_ms=3_600_000, expire_interval_ms=3_600_000)
        c = TransactionCoordinator(backend, markers, gen, cfg, clock=clock)
        await c.start()
        if load:
            await c.load_partition(0, coordinator_epoch=5)
        try:
            await test(c, backend, markers, clock)
        finally:
            await c.close()

    asyncio.run(main())


async def settle(c: TransactionCoordinator, txn_id: str) -> TxnMetadata:
    for _ in range(1000):
        m = c.metadata(txn_id)
        if m is not None and not m.pending:
            return m
        await asyncio.sleep(0.001)
    raise AssertionError(f"{txn_id} never settled: {c.metadata(txn_id)}")


async def begin(c: TransactionCoordinator, txn_id: str = "t", parts: tuple[TP, ...] = (("out", 0), ("out", 1))
                ) -> tuple[int, int]:
    code, pid, epoch = await c.init_producer_id(txn_id, 60_000)
    assert code == E.NONE
    assert await c.add_partitions(txn_id, pid, epoch, parts) == E.NONE
    return pid, epoch


def test_new_transactional_id_gets_a_producer_id_and_epoch_zero_then_bumps() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        assert await c.init_producer_id("t", 60_000) == (E.NONE, 1000, 0)
        assert await c.init_producer_id("t", 30_000) == (E.NONE, 1000, 1)
        states = lg.states("t")
        assert [(s.state, s.producer_epoch, s.timeout_ms, s.partitions) for s in states] == [
            (TxnState.EMPTY, 0, 60_000, {}), (TxnState.EMPTY, 1, 30_000, {})]
    run(t)


def test_invalid_requests() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        assert (await c.init_producer_id("", 1000))[0] == E.INVALID_REQUEST
        assert (await c.init_producer_id("t", 0))[0] == E.INVALID_TRANSACTION_TIMEOUT
        assert (await c.init_producer_id("t", 900_001))[0] == E.INVALID_TRANSACTION_TIMEOUT
        assert await c.add_partitions("t", 1, 0, [("x", 0)]) == E.INVALID_PRODUCER_ID_MAPPING
        assert await c.end_transaction("t", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
        _, pid, epoch = await c.init_producer_id("t", 1000)
        assert await c.add_partitions("t", pid + 1, epoch, [("x", 0)]) == E.INVALID_PRODUCER_ID_MAPPING
        assert await c.add_partitions("t", pid, epoch + 1, [("x", 0)]) == E.PRODUCER_FENCED
        assert await c.end_transaction("t", pid, epoch, True) == E.INVALID_TXN_STATE  # Empty
    run(t)


def test_commit_writes_prepare_markers_then_complete() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        pid, epoch = await begin(c)
        assert await c.add_partitions("t", pid, epoch, [("out", 1)]) == E.NONE  # already in: no write
        assert await c.add_partitions("t", pid, epoch, [("__consumer_offsets", 3)]) == E.NONE
        assert await c.end_transaction("t", pid, epoch, True) == E.NONE
        # Until the markers are written and CompleteCommit is in the log, everything else waits.
        assert await c.add_partitions("t", pid, epoch, [("out", 2)]) == E.CONCURRENT_TRANSACTIONS
        assert (await c.init_producer_id("t", 60_000))[0] == E.CONCURRENT_TRANSACTIONS
        m = await settle(c, "t")
        assert m.state == TxnState.COMPLETE_COMMIT and not m.partitions
        assert mk.calls == [(7, pid, epoch, True, 5, [("__consumer_offsets", 3), ("out", 0), ("out", 1)])]
        states = [s.state for s in lg.states("t")]
        assert states == [TxnState.EMPTY, TxnState.ONGOING, TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                          TxnState.COMPLETE_COMMIT]
        prepare = lg.states("t")[3]
        assert prepare.partitions == {"__consumer_offsets": [3], "out": [0, 1]}
        assert lg.states("t")[4].partitions == {}
        # Retried EndTxn after completion is answered as done; the opposite result is refused.
        assert await c.end_transaction("t", pid, epoch, True) == E.NONE
        assert await c.end_transaction("t", pid, epoch, False) == E.INVALID_TXN_STATE
        # The next transaction starts from CompleteCommit.
        assert await c.add_partitions("t", pid, epoch, [("out", 5)]) == E.NONE
        assert c.metadata("t").state == TxnState.ONGOING
    run(t)


def test_abort_and_retries_of_end_txn() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        pid, epoch = await begin(c)
        mk.replies = [E.NOT_LEADER_OR_FOLLOWER, E.REQUEST_TIMED_OUT]  # two failed rounds, then success
        assert await c.end_transaction("t", pid, epoch, False) == E.NONE
        assert await c.end_transaction("t", pid, epoch, False) == E.CONCURRENT_TRANSACTIONS
        assert await c.end_transaction("t", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
        m = await settle(c, "t")
        assert m.state == TxnState.COMPLETE_ABORT
        assert len(mk.calls) == 3 and all(call[3] is False for call in mk.calls)
    run(t)


def test_markers_for_deleted_partitions_are_skipped() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        pid, epoch = await begin(c, parts=(("gone", 0), ("out", 0)))
        mk.gone.add("gone")
        assert await c.end_transaction("t", pid, epoch, True) == E.NONE
        assert (await settle(c, "t")).state == TxnState.COMPLETE_COMMIT
        assert [call[5] for call in mk.calls] == [[("out", 0)]]
    run(t)


def test_markers_given_up_when_producer_or_coordinator_epoch_is_stale() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        pid, epoch = await begin(c)
        mk.replies = [E.TRANSACTION_COORDINATOR_FENCED]
        assert await c.end_transaction("t", pid, epoch, True) == E.NONE
        for _ in range(50):
            await asyncio.sleep(0.001)
        assert len(mk.calls) == 1
        assert c.metadata("t").state == TxnState.PREPARE_COMMIT  # a newer coordinator finishes it
    run(t)


def test_new_producer_fences_the_old_one_and_aborts_its_transaction() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        pid, epoch = await begin(c)
        # A second producer with the same transactional id: the open transaction is aborted first.
        assert (await c.init_producer_id("t", 60_000))[0] == E.CONCURRENT_TRANSACTIONS
        m = await settle(c, "t")
        assert m.state == TxnState.COMPLETE_ABORT and m.producer_epoch == epoch + 1
        assert mk.calls == [(7, pid, epoch + 1, False, 5, [("out", 0), ("out", 1)])]
        assert await c.init_producer_id("t", 60_000) == (E.NONE, pid, epoch + 2)
        # The old producer is fenced everywhere.
        assert await c.add_partitions("t", pid, epoch, [("out", 0)]) == E.PRODUCER_FENCED
        assert await c.end_transaction("t", pid, epoch, True) == E.PRODUCER_FENCED
        assert [s.state for s in lg.states("t")][-3:] == [TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT,
                                                          TxnState.EMPTY]
    run(t)


def test_kip360_epoch_bump_with_expected_producer() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("t", 60_000)
        assert await c.init_producer_id("t", 60_000, (pid, epoch)) == (E.NONE, pid, epoch + 1)
        # The same request again (the answer was lost): the same epoch once more.
        assert await c.init_producer_id("t", 60_000, (pid, epoch)) == (E.NONE, pid, epoch + 1)
        assert (await c.init_producer_id("t", 60_000, (pid, epoch + 7)))[0] == E.PRODUCER_FENCED
        assert (await c.init_producer_id("t", 60_000, (pid + 50, 0)))[0] == E.PRODUCER_FENCED
    run(t)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        _, pid, _ = await c.init_producer_id("t", 60_000)
        c.metadata("t").producer_epoch = 32766
        code, new_pid, epoch = await c.init_producer_id("t", 60_000)
        assert (code, epoch) == (E.NONE, 0) and new_pid != pid
        assert c.metadata("t").last_producer_id == pid
    run(t)


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        code, pid, epoch = await c.init_producer_id("t", 10_000)
        assert await c.add_partitions("t", pid, epoch, [("out", 0)]) == E.NONE
        clock.now += 5_000
        await c.abort_timed_out_transactions()
        assert c.metadata("t").state == TxnState.ONGOING
        clock.now += 6_000
        await c.abort_timed_out_transactions()
        m = await settle(c, "t")
        assert m.state == TxnState.COMPLETE_ABORT and m.producer_epoch == epoch + 1
        assert mk.calls == [(7, pid, epoch + 1, False, 5, [("out", 0)])]
        assert await c.end_transaction("t", pid, epoch, True) == E.PRODUCER_FENCED
    run(t)


def test_failed_log_append_clears_the_pending_state_and_maps_the_error() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("t", 60_000)
        lg.fail = [E.NOT_ENOUGH_REPLICAS]
        assert await c.add_partitions("t", pid, epoch, [("out", 0)]) == E.COORDINATOR_NOT_AVAILABLE
        lg.fail = [E.NOT_LEADER_OR_FOLLOWER]
        assert await c.add_partitions("t", pid, epoch, [("out", 0)]) == E.NOT_COORDINATOR
        assert await c.add_partitions("t", pid, epoch, [("out", 0)]) == E.NONE
        # A failed completion write is retried until it lands.
        lg.fail = [E.REQUEST_TIMED_OUT]
        assert await c.end_transaction("t", pid, epoch, True) == E.COORDINATOR_NOT_AVAILABLE
        assert c.metadata("t").state == TxnState.ONGOING and not c.metadata("t").pending
        assert await c.end_transaction("t", pid, epoch, True) == E.NONE
        lg.fail = [E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS]
        assert (await settle(c, "t")).state == TxnState.COMPLETE_COMMIT
    run(t)


def test_not_coordinator_and_loading() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        assert (await c.init_producer_id("t", 60_000))[0] == E.NOT_COORDINATOR
        assert c.describe("t")[0] == E.NOT_COORDINATOR
        c._loading[0] = 9
        assert (await c.init_producer_id("t", 60_000))[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        assert c.list_transactions([], [])[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    run(t, load=False)


def test_failover_completes_prepared_transactions_from_the_log() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        now = clock.now
        lg.records[0] = [
            (encode_txn_key("a"), encode_txn_value(TxnLogValue(10, 2, 60_000, TxnState.PREPARE_COMMIT,
                                                                {"out": [0, 1]}, now, now - 10))),
            (encode_txn_key("b"), encode_txn_value(TxnLogValue(11, 0, 60_000, TxnState.PREPARE_ABORT,
                                                                {"out": [2]}, now, now - 10))),
            (encode_txn_key("c"), encode_txn_value(TxnLogValue(12, 4, 60_000, TxnState.ONGOING,
                                                                {"out": [3]}, now, now - 10))),
            (encode_txn_key("d"), encode_txn_value(TxnLogValue(13, 0, 60_000, TxnState.EMPTY, {}, now, -1))),
            (encode_txn_key("d"), None),  # expired
        ]
        await c.load_partition(0, coordinator_epoch=8)
        assert c.owned_partitions() == {0: 8}
        a, b = await settle(c, "a"), await settle(c, "b")
        assert (a.state, b.state) == (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        assert sorted(mk.calls) == [(7, 10, 2, True, 8, [("out", 0), ("out", 1)]), (7, 11, 0, False, 8, [("out", 2)])]
        assert c.metadata("c").state == TxnState.ONGOING and c.metadata("c").partitions == {("out", 3)}
        assert c.metadata("d") is None
        c.unload_partition(0)
        assert (await c.init_producer_id("c", 60_000))[0] == E.NOT_COORDINATOR
    run(t, load=False)


def test_unload_stops_marker_work() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        pid, epoch = await begin(c)
        mk.replies = [E.NOT_LEADER_OR_FOLLOWER] * 1000
        assert await c.end_transaction("t", pid, epoch, True) == E.NONE
        await asyncio.sleep(0.01)
        c.unload_partition(0)
        n = len(mk.calls)
        await asyncio.sleep(0.05)
        assert len(mk.calls) <= n + 1
        assert [s.state for s in lg.states("t")][-1] == TxnState.PREPARE_COMMIT
    run(t)


def test_transactional_id_expiration() -> None:
    cfg = TxnCoordinatorConfig.from_config(num_partitions=1, id_expiration_ms=1000, abort_interval_ms=3_600_000,
                               expire_interval_ms=3_600_000)

    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        await c.init_producer_id("idle", 60_000)
        pid, epoch = await begin(c, "busy")
        clock.now += 2000
        assert await c.expire_transactional_ids() == 1
        assert c.metadata("idle") is None and c.metadata("busy") is not None  # Ongoing never expires
        assert lg.states("idle")[-1] is None
    run(t, cfg)


def test_verify_describe_and_list() -> None:
    async def t(c: TransactionCoordinator, lg: FakeLog, mk: FakeMarkers, clock: Clock) -> None:
        pid, epoch = await begin(c, "t", (("out", 0),))
        await c.init_producer_id("idle", 60_000)
        assert c.verify_partitions("t", pid, epoch, [("out", 0), ("out", 9)]) == {
            ("out", 0): E.NONE, ("out", 9): E.TRANSACTION_ABORTABLE}
        assert c.verify_partitions("t", pid, epoch + 1, [("out", 0)]) == {("out", 0): E.PRODUCER_FENCED}
        assert c.verify_partitions("x", pid, epoch, [("out", 0)]) == {("out", 0): E.INVALID_PRODUCER_ID_MAPPING}
        code, meta = c.describe("t")
        assert code == E.NONE and meta.state.kafka_name == "Ongoing" and meta.topics() == {"out": [0]}
        assert c.describe("nope")[0] == E.TRANSACTIONAL_ID_NOT_FOUND
        code, unknown, metas = c.list_transactions([], ["Ongoing", "Bogus"])
        assert code == E.NONE and unknown == ["Bogus"] and [m.transactional_id for m in metas] == ["t"]
        assert {m.transactional_id for m in c.list_transactions([], [])[2]} == {"t", "idle"}
        assert [m.transactional_id for m in c.list_transactions([pid], [])[2]] == ["t"]
        clock.now += 100
        assert [m.transactional_id for m in c.list_transactions([], ["Ongoing"], 50)[2]] == ["t"]
        assert c.list_transactions([], ["Ongoing"], 500)[2] == []
    run(t)


def test_metadata_transitions_enforce_kafkas_rules() -> None:
    m = TxnMetadata("x", 1, producer_epoch=0)
    m.prepare_add_partitions([("a", 0)], 10)
    with pytest.raises(TxnStateError):
        m.prepare_add_partitions([("a", 1)], 11)  # one pending transition at a time
    m.pending_state = None
    with pytest.raises(TxnStateError):
        m.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 12)  # not from Empty
    t = m.prepare_add_partitions([("a", 0)], 13)
    m.complete_transition(t)
    assert m.state == TxnState.ONGOING and m.start_ms == 13
    bad = m.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 14)
    with pytest.raises(TxnStateError):
        m.complete_transition(bad.__class__(**{**{f: getattr(bad, f) for f in bad.__slots__}, "producer_epoch": 5}))
