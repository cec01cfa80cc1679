"""The transaction coordinator's periodic tasks on a ``ManualClock``: a transaction past its timeout
is aborted by the timer itself (``transaction.abort.timed.out.transaction.cleanup.interval.ms``),
with no test calling the abort pass and no waiting on real time."""

from __future__ import annotations

import asyncio

from broker.txn_coordinator import TransactionCoordinator, TxnCoordinatorConfig
from broker.txn_log_format import TxnState
from protocol.errors import ErrorCode as E
from storage.clock import ManualClock
from tests.txn.test_txn_coordinator import FakeLog, FakeMarkers


async def _until(condition: object, what: str) -> None:
    for _ in range(1000):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{what} never happened")


def test_periodic_abort_runs_on_the_clock_and_fences_the_producer() -> None:
    async def main() -> None:
        clock = ManualClock()
        markers = FakeMarkers()
        pids = iter(range(1000, 2000))

        async def gen() -> int:
            return next(pids)

        cfg = TxnCoordinatorConfig.from_config(num_partitions=1, retry_backoff_s=0.001, abort_interval_ms=10_000,
                                   expire_interval_ms=3_600_000)
        c = TransactionCoordinator(FakeLog(), markers, gen, cfg, clock=clock)
        await c.start()
        await c.load_partition(0, coordinator_epoch=5)
        try:
            code, pid, epoch = await c.init_producer_id("t", 15_000)
            assert code == E.NONE
            assert await c.add_partitions("t", pid, epoch, [("out", 0)]) == E.NONE
            # The pass at 10 s finds the transaction 5 s short of its timeout.
            clock.advance(10_000)
            await _until(lambda: clock.pending == 2, "the next abort pass scheduled")
            assert c.metadata("t").state == TxnState.ONGOING and markers.calls == []
            # The pass at 20 s aborts it with a bumped epoch, which fences the producer.
            clock.advance(10_000)
            await _until(lambda: c.metadata("t").state == TxnState.COMPLETE_ABORT, "the abort to complete")
            assert c.metadata("t").producer_epoch == epoch + 1
            assert markers.calls == [(7, pid, epoch + 1, False, 5, [("out", 0)])]
            assert await c.end_transaction("t", pid, epoch, True) == E.PRODUCER_FENCED
        finally:
            await c.close()
        # Closed: the periodic tasks are cancelled and nothing more runs when time moves on.
        assert clock.pending == 0
        assert clock.advance(3_600_000) == 0

    asyncio.run(main())
