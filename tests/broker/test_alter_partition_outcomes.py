"""What a partition leader does with each outcome of an AlterPartition proposal (Kafka's
AlterPartitionManager and Partition.handleAlterPartitionError).

A proposal that got no answer may have been written by the controller: the leader sends it again until it
is answered or a LeaderAndIsr replaces it, and meanwhile computes the HW over the old and proposed ISR
together. Going back to the old ISR instead let the HW, and so acks=all, pass a replica that ZooKeeper
listed as in sync; had that replica been elected, the records acknowledged meanwhile would have been lost.

A real ReplicaManager, Partition and IsrManager; the controller's channel is replaced by scripted answers.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.isr_manager import IsrManager
from broker.metadata_cache import MetadataCache
from broker.partition import Partition
from broker.replica_manager import ReplicaManager
from config.registry import BrokerConfig, LogConfig
from controller.client import ControllerNotAvailableError
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type
from protocol.records import NewRecord, build_batch
from storage.log_manager import LogManager
from tests.controller.fakes import wait_for

TP = ("events", 0)
_AP_RESP = response_type(ApiKey.ALTER_PARTITION)


class ScriptedController:
    """Stands in for the broker's channel to the controller: each AlterPartition gets the next scripted
    outcome (a response body, or an exception raised), once the test lets it through."""

    def __init__(self, outcomes: list[Any]) -> None:
        self.outcomes = outcomes
        self.bodies: list[Any] = []
        self.gates: list[asyncio.Event] = []
        self.moved = 0

    async def alter_partition(self, body: Any, timeout: float | None = None) -> Any:
        self.bodies.append(body)
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        outcome = self.outcomes[len(self.bodies) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def controller_moved(self) -> None:
        self.moved += 1

    async def close(self) -> None:
        pass

    def release(self, n: int) -> None:
        self.gates[n].set()


def answer(code: ErrorCode = ErrorCode.NONE, *, top: ErrorCode = ErrorCode.NONE, isr: list[int] | None = None,
           leader_epoch: int = 0, partition_epoch: int = 1) -> Any:
    if top != ErrorCode.NONE:
        return _AP_RESP(error_code=top, topics=[])
    data = _AP_RESP.PartitionData(partition_index=TP[1], error_code=code, leader_id=0 if isr else -1,
                                  leader_epoch=leader_epoch if isr else -1, isr=isr or [],
                                  partition_epoch=partition_epoch if isr else -1)
    return _AP_RESP(error_code=ErrorCode.NONE, topics=[_AP_RESP.TopicData(topic_id=uuid.uuid4(), partitions=[data])])


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[tuple[ReplicaManager, Partition]]:
    """Broker 0 leading TP at leader epoch 0, partition epoch 0: replicas [0, 1, 2], ISR [0, 1],
    min.insync.replicas=2; replica 2 has caught up to the log end (3)."""
    config = BrokerConfig({"min.insync.replicas": "2"})
    lm = LogManager([str(tmp_path)], broker_id=0, cluster_id="c", default_config=LogConfig.from_broker(config, {}))
    lm.startup()
    rm = ReplicaManager(0, config, lm, MetadataCache(0), lambda _topic: LogConfig.from_broker(config, {}))
    p = rm.get_or_create_partition(TP[0], TP[1], uuid.uuid4())
    assert p.make_leader(0, [0, 1], [0, 1, 2], 0, 0)
    append(p)
    p.update_follower_fetch(1, 3)
    p.update_follower_fetch(2, 3)
    assert p.high_watermark == 3
    yield rm, p
    lm.shutdown()


def append(p: Partition) -> None:
    records = [NewRecord(b"k", b"v", 1_700_000_000_000) for _ in range(3)]
    p.append_as_leader(memoryview(bytearray(build_batch(records))), -1, 0)


def isr_manager(rm: ReplicaManager, controller: ScriptedController, broker_epoch: list[int] | None = None) -> IsrManager:
    epochs = broker_epoch or [7]
    mgr = IsrManager(0, None, "PLAINTEXT", lambda: epochs[0], lambda: rm.config, lambda: rm)  # type: ignore[arg-type]
    mgr.client = controller
    return mgr


async def until(condition: Any, what: str) -> None:
    # A resend waits a short backoff first; the bound only keeps a broken build from hanging.
    await wait_for(condition, timeout=60, interval=0.001, what=what)


async def sent(controller: ScriptedController, n: int) -> None:
    await until(lambda: len(controller.gates) == n, f"send {n}")


async def one_answer(rm: ReplicaManager, p: Partition, outcome: Any) -> tuple[ScriptedController, IsrManager]:
    """Propose adding replica 2, answer with ``outcome``, and wait until the proposal's task ends."""
    controller = ScriptedController([outcome])
    mgr = isr_manager(rm, controller)
    mgr.maybe_expand(p)
    await sent(controller, 1)
    controller.release(0)
    await until(lambda: not mgr._sending, "the proposal is answered")
    return controller, mgr


def test_an_expansion_without_an_answer_is_sent_again_and_the_hw_waits_for_the_new_member(
        leader: tuple[ReplicaManager, Partition]) -> None:
    rm, p = leader

    async def scenario() -> None:
        # The controller writes the ISR [0, 1, 2] but its answer never arrives (the channel gives up on
        # it); asked again, it answers with what it wrote.
        controller = ScriptedController([ControllerNotAvailableError("no response from the controller"),
                                         answer(isr=[0, 1, 2], partition_epoch=1)])
        mgr = isr_manager(rm, controller)
        mgr.maybe_expand(p)
        assert p.pending_isr == {0, 1, 2}
        await sent(controller, 1)
        controller.release(0)
        await sent(controller, 2)  # sent again
        # Still pending: the HW is computed over [0, 1, 2], so records that replica 1 alone has are
        # not acknowledged.
        assert p.maximal_isr == {0, 1, 2}
        append(p)
        p.update_follower_fetch(1, 6)
        assert p.high_watermark == 3
        assert p.ack_satisfied(6) == (False, ErrorCode.NONE)
        controller.release(1)
        await until(lambda: p.pending_isr is None, "the answer is applied")
        assert p.isr == {0, 1, 2} and p.partition_epoch == 1
        assert p.high_watermark == 3
        p.update_follower_fetch(2, 6)
        assert p.high_watermark == 6
        assert p.ack_satisfied(6) == (True, ErrorCode.NONE)
        assert controller.bodies[1].topics[0].partitions[0].partition_epoch == 0  # the same proposal
        assert not mgr._sending
    asyncio.run(scenario())


def test_a_refusal_for_a_stale_state_keeps_the_proposal_until_leader_and_isr(
        leader: tuple[ReplicaManager, Partition]) -> None:
    rm, p = leader

    async def scenario() -> None:
        for code in (ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.FENCED_LEADER_EPOCH):
            controller, mgr = await one_answer(rm, p, answer(code))
            # Not sent again, and not dropped: the controller knows a newer state (maybe this very ISR,
            # written for an earlier copy of the proposal), which only a LeaderAndIsr settles.
            assert len(controller.bodies) == 1
            assert p.pending_isr == {0, 1, 2} and p.maximal_isr == {0, 1, 2}
            assert p.isr == {0, 1}
            mgr.maybe_expand(p)  # no other change is proposed meanwhile
            assert len(controller.bodies) == 1 and not mgr._sending
            p.pending_isr = None  # the next round starts from the committed state again
        # The controller's LeaderAndIsr brings the state it has.
        p.pending_isr = {0, 1, 2}
        assert p.make_leader(0, [0, 1, 2], [0, 1, 2], 2, 0)
        assert p.pending_isr is None and p.isr == {0, 1, 2} and p.partition_epoch == 2
    asyncio.run(scenario())


def test_a_proposal_the_controller_did_not_apply_goes_back_to_the_committed_isr(
        leader: tuple[ReplicaManager, Partition]) -> None:
    rm, p = leader

    async def scenario() -> None:
        for code in (ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED):
            controller, mgr = await one_answer(rm, p, answer(code))
            assert len(controller.bodies) == 1
            assert p.pending_isr is None and p.isr == {0, 1} and p.partition_epoch == 0
    asyncio.run(scenario())


def test_top_level_errors_and_unexpected_partition_errors_are_sent_again(
        leader: tuple[ReplicaManager, Partition]) -> None:
    rm, p = leader

    async def scenario() -> None:
        epochs = [7]
        controller = ScriptedController([answer(top=ErrorCode.NOT_CONTROLLER),
                                         answer(top=ErrorCode.STALE_BROKER_EPOCH),
                                         answer(ErrorCode.UNKNOWN_SERVER_ERROR),
                                         answer(ErrorCode.NOT_CONTROLLER),
                                         answer(isr=[0, 1, 2], partition_epoch=1)])
        mgr = isr_manager(rm, controller, epochs)
        mgr.maybe_expand(p)
        for n in range(5):
            await sent(controller, n + 1)
            assert p.maximal_isr == {0, 1, 2}
            if n == 1:
                epochs[0] = 8  # registered again meanwhile: the next send carries the new broker epoch
            controller.release(n)
        await until(lambda: p.pending_isr is None, "the answer is applied")
        assert p.isr == {0, 1, 2}
        assert controller.moved == 2  # NOT_CONTROLLER (top level or the partition's): looked up again
        assert [b.broker_epoch for b in controller.bodies] == [7, 7, 8, 8, 8]
    asyncio.run(scenario())


def test_a_leader_and_isr_ends_the_resending_and_stop_cancels_it(leader: tuple[ReplicaManager, Partition]) -> None:
    rm, p = leader

    async def scenario() -> None:
        lost = ControllerNotAvailableError("no response from the controller")
        controller = ScriptedController([lost] * 10)
        mgr = isr_manager(rm, controller)
        mgr.maybe_expand(p)
        await sent(controller, 1)
        controller.release(0)
        await sent(controller, 2)  # sent again
        # A new leader epoch from the controller replaces the proposal: once the send under way ends,
        # nothing more is sent and the new state is left as it came.
        assert p.make_leader(1, [0, 1], [0, 1, 2], 3, 0)
        controller.release(1)
        await until(lambda: not mgr._sending, "the resending ends")
        assert len(controller.bodies) == 2
        assert p.pending_isr is None and p.isr == {0, 1} and p.partition_epoch == 3
        # A broker that stops cancels a proposal still being sent.
        p.update_follower_fetch(2, 3)
        mgr.maybe_expand(p)
        await sent(controller, 3)  # the next proposal
        await mgr.stop()
        await until(lambda: not mgr._sending, "stop cancels it")
    asyncio.run(scenario())
