"""The membership state machine's timers, driven by a ``ManualClock``: nothing here waits on real time.

Each test moves the clock to one millisecond before a deadline, checks that nothing happened, then
crosses it and checks what did.
"""

from __future__ import annotations

import asyncio

from broker.group_metadata import GroupState
from protocol.errors import ErrorCode as E
from storage.clock import ManualClock
from tests.broker.test_group_helpers import Client, loaded, make_coordinator, parked, run


def test_manual_clock_runs_due_callbacks_in_order_and_skips_cancelled():
    clock = ManualClock(now_ms=1000)
    seen: list[tuple[str, int]] = []
    clock.schedule(30, lambda: seen.append(("c", clock.now_ms())))
    clock.schedule(10, lambda: seen.append(("a", clock.now_ms())))
    dropped = clock.schedule(20, lambda: seen.append(("dropped", clock.now_ms())))
    # A callback that schedules another one inside the same advance.
    clock.schedule(15, lambda: clock.schedule(5, lambda: seen.append(("b", clock.now_ms()))))
    dropped.cancel()
    assert clock.pending == 3
    assert clock.advance(9) == 0 and seen == []
    assert clock.advance(21) == 4
    assert seen == [("a", 1010), ("b", 1020), ("c", 1030)]
    assert clock.now_ms() == 1030 and clock.pending == 0 and clock.next_deadline_ms() is None


def test_static_member_session_expiry_and_replacement():
    async def main():
        coord = await loaded(make_coordinator())
        clock: ManualClock = coord.clock  # type: ignore[assignment]
        a = Client(coord, client_id="a", instance_id="ia", session_timeout_ms=1000, rebalance_timeout_ms=1000)
        b = Client(coord, client_id="b", instance_id="ib", session_timeout_ms=1000, rebalance_timeout_ms=1000)
        ja, _ = await asyncio.gather(a.join_once(), b.join_once())
        leader, follower = (a, b) if ja.leader == a.member_id else (b, a)
        await asyncio.gather(leader.sync({a.member_id: b"A", b.member_id: b"B"}), follower.sync())
        group = coord.get_group("g")
        generation = group.generation_id
        # The follower restarts within its session: same instance id, new member id, no rebalance,
        # and the new incarnation's session starts now.
        clock.advance(600)
        assert await leader.heartbeat() == 0
        replacement = Client(coord, client_id=follower.client_id, instance_id=follower.instance_id,
                             session_timeout_ms=1000, rebalance_timeout_ms=1000)
        assert (await replacement.join_once()).error_code == 0
        assert group.state is GroupState.STABLE and group.generation_id == generation
        assert await follower.heartbeat() == E.FENCED_INSTANCE_ID
        clock.advance(999)  # 1599 ms after the old member's last heartbeat: the replacement is alive
        assert group.has(replacement.member_id) and not group.has(follower.member_id)
        assert await leader.heartbeat() == 0
        # Then the replacement goes silent: 1000 ms after its join it is removed and the group rebalances.
        clock.advance(1)
        assert not group.has(replacement.member_id)
        assert group.current_static_member_id(follower.instance_id) is None
        assert group.state is GroupState.PREPARING_REBALANCE
        assert await leader.heartbeat() == E.REBALANCE_IN_PROGRESS
        rejoin = await leader.join_once()
        assert rejoin.error_code == 0 and rejoin.generation_id == generation + 1
        assert [m.member_id for m in rejoin.members] == [leader.member_id]
        await coord.close()

    run(main())


def test_rebalance_timeout_keeps_static_members_that_did_not_rejoin():
    async def main():
        # Kafka drops dynamic members that miss the join deadline, but static ones stay: they are
        # expected back after a restart, and only their session timeout removes them.
        coord = await loaded(make_coordinator())
        clock: ManualClock = coord.clock  # type: ignore[assignment]
        dyn = Client(coord, client_id="d", session_timeout_ms=5000, rebalance_timeout_ms=300)
        static = Client(coord, client_id="s", instance_id="is", session_timeout_ms=5000, rebalance_timeout_ms=300)
        assert (await dyn.join_once()).error_code == E.MEMBER_ID_REQUIRED
        joins = await asyncio.gather(dyn.join_once(), static.join_once())
        leader = dyn if joins[0].leader == dyn.member_id else static
        other = static if leader is dyn else dyn
        await asyncio.gather(leader.sync({dyn.member_id: b"", static.member_id: b""}), other.sync())
        group = coord.get_group("g")
        # A third member arrives: a rebalance that neither old member rejoins.
        third = Client(coord, client_id="t", session_timeout_ms=5000, rebalance_timeout_ms=300)
        assert (await third.join_once()).error_code == E.MEMBER_ID_REQUIRED
        join_third = await parked(third.join_once())
        clock.advance(299)
        await asyncio.sleep(0)
        assert not join_third.done()
        clock.advance(1)
        result = await join_third
        assert result.error_code == 0
        assert group.has(static.member_id) and not group.has(dyn.member_id)
        assert group.state is GroupState.COMPLETING_REBALANCE
        await coord.close()

    run(main())


def test_heartbeats_keep_a_member_past_many_session_timeouts():
    async def main():
        coord = await loaded(make_coordinator())
        clock: ManualClock = coord.clock  # type: ignore[assignment]
        c = Client(coord, client_id="c", session_timeout_ms=100, rebalance_timeout_ms=100)
        await c.join()
        await c.sync({c.member_id: b"x"})
        for _ in range(50):  # 5 s of 99 ms heartbeat intervals
            clock.advance(99)
            assert await c.heartbeat() == 0
        assert coord.get_group("g").state is GroupState.STABLE
        clock.advance(100)
        assert coord.get_group("g").state is GroupState.EMPTY
        await coord.close()

    run(main())
