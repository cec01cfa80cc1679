"""The classic group state machine: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, static members."""

from __future__ import annotations

import asyncio

from broker.group_metadata import GroupState
from broker.handlers_group import GroupApis
from broker.offsets_topic_format import decode_group_metadata_value
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode as E
from protocol.messages import request_type
from tests.broker.test_group_helpers import (
    Client,
    MemoryOffsetsLog,
    loaded,
    make_coordinator,
    parked,
    req,
    roundtrip_response,
    run,
    subscription,
    until,
)


async def _stable_group(coord, n: int, **kw):
    """n members that joined together and synced; returns the clients (leader first)."""
    clients = [Client(coord, client_id=f"c{i}", **kw) for i in range(n)]
    for c in clients:  # get member ids first (MEMBER_ID_REQUIRED), as the real clients do
        assert (await c.join_once()).error_code == E.MEMBER_ID_REQUIRED
    joins = await asyncio.gather(*(c.join_once() for c in clients))
    assert all(j.error_code == 0 for j in joins)
    leader = next(c for c in clients if c.member_id == joins[0].leader)
    assignment = {c.member_id: f"a-{c.client_id}".encode() for c in clients}
    syncs = await asyncio.gather(*(c.sync(assignment if c is leader else None) for c in clients))
    for c, s in zip(clients, syncs, strict=True):
        assert s.error_code == 0 and s.assignment == f"a-{c.client_id}".encode()
    clients.sort(key=lambda c: c is not leader)
    return clients


def test_single_member_join_sync_heartbeat():
    async def main():
        log = MemoryOffsetsLog()
        coord = await loaded(make_coordinator(log))
        c = Client(coord, client_id="app")
        first = await c.join_once()
        assert first.error_code == E.MEMBER_ID_REQUIRED
        assert first.member_id.startswith("app-") and len(first.member_id) == len("app-") + 36
        resp = await c.join_once()
        assert resp.error_code == 0
        assert resp.generation_id == 1 and resp.leader == c.member_id
        assert resp.protocol_type == "consumer" and resp.protocol_name == "range"
        assert [(m.member_id, bytes(m.metadata)) for m in resp.members] == [(c.member_id, subscription("t"))]
        sync = await c.sync({c.member_id: b"assign"})
        assert (sync.error_code, sync.assignment, sync.protocol_type, sync.protocol_name) == (
            0, b"assign", "consumer", "range")
        assert coord.get_group("g").state is GroupState.STABLE
        assert await c.heartbeat() == 0
        # The completed generation was written to the group's partition.
        assert any(e.value is not None and e.key.startswith(b"\x00\x02") for e in log.records(0))
        await coord.close()

    run(main())


def test_three_members_rebalance_and_leave():
    async def main():
        coord = await loaded(make_coordinator())
        a, b, c = await _stable_group(coord, 3)
        gen = a.generation
        assert gen == 1
        assert len(a.last_join.members) == 3 and b.last_join.members == [] and c.last_join.members == []
        # c leaves: the others learn it through their heartbeats and rejoin.
        leave = await c.leave()
        assert leave.error_code == 0 and [m.error_code for m in leave.members] == [0]
        assert coord.get_group("g").state is GroupState.PREPARING_REBALANCE
        assert await a.heartbeat() == E.REBALANCE_IN_PROGRESS
        ja, jb = await asyncio.gather(a.join(), b.join())
        assert ja.error_code == jb.error_code == 0 and ja.generation_id == gen + 1
        assert {m.member_id for m in ja.members} == {a.member_id, b.member_id}
        s = await asyncio.gather(a.sync({a.member_id: b"x", b.member_id: b"y"}), b.sync())
        assert [r.assignment for r in s] == [b"x", b"y"]
        assert await b.heartbeat() == 0
        # Unknown members and stale generations are refused.
        assert await c.heartbeat() == E.UNKNOWN_MEMBER_ID
        b.generation -= 1
        assert await b.heartbeat() == E.ILLEGAL_GENERATION
        await coord.close()

    run(main())


def test_new_member_triggers_rebalance_of_stable_group():
    async def main():
        coord = await loaded(make_coordinator())
        (a,) = await _stable_group(coord, 1)
        b = Client(coord, client_id="b")
        assert (await b.join_once()).error_code == E.MEMBER_ID_REQUIRED
        join_b = await parked(b.join_once())
        assert await a.heartbeat() == E.REBALANCE_IN_PROGRESS
        ja = await a.join()
        jb = await join_b
        assert ja.error_code == jb.error_code == 0 and ja.generation_id == 2
        assert ja.leader == a.member_id and len(ja.members) == 2 and jb.members == []
        await coord.close()

    run(main())


def test_session_timeout_removes_member_and_rebalances():
    async def main():
        coord = await loaded(make_coordinator())
        clock = coord.clock
        a, b = await _stable_group(coord, 2, session_timeout_ms=150, rebalance_timeout_ms=400)
        # a keeps heartbeating, b goes silent: just short of the session timeout nothing happens.
        clock.advance(100)
        assert await a.heartbeat() == 0
        clock.advance(49)
        assert coord.get_group("g").has(b.member_id)
        assert await a.heartbeat() == 0
        # b's session ends 150 ms after its last sign of life; a's heartbeat moved its own deadline.
        clock.advance(1)
        assert not coord.get_group("g").has(b.member_id)
        assert coord.get_group("g").state is GroupState.PREPARING_REBALANCE
        assert await a.heartbeat() == E.REBALANCE_IN_PROGRESS
        ja = await a.join()
        assert ja.error_code == 0 and [m.member_id for m in ja.members] == [a.member_id]
        assert await b.heartbeat() == E.UNKNOWN_MEMBER_ID
        await coord.close()

    run(main())


def test_member_that_does_not_rejoin_is_dropped_after_rebalance_timeout():
    async def main():
        coord = await loaded(make_coordinator())
        clock = coord.clock
        a, b = await _stable_group(coord, 2, session_timeout_ms=5000, rebalance_timeout_ms=200)
        join_a = await parked(a.join())  # the leader rejoins: rebalance; b never comes back
        clock.advance(199)
        await asyncio.sleep(0)
        assert not join_a.done() and coord.get_group("g").has(b.member_id)
        clock.advance(1)
        ja = await join_a
        assert ja.error_code == 0 and [m.member_id for m in ja.members] == [a.member_id]
        assert not coord.get_group("g").has(b.member_id)
        await coord.close()

    run(main())


def test_member_that_does_not_sync_is_dropped():
    async def main():
        coord = await loaded(make_coordinator())
        clock = coord.clock
        a = Client(coord, client_id="a", rebalance_timeout_ms=200, session_timeout_ms=5000)
        b = Client(coord, client_id="b", rebalance_timeout_ms=200, session_timeout_ms=5000)
        await a.join_once()
        await b.join_once()
        ja, jb = await asyncio.gather(a.join_once(), b.join_once())
        leader = a if ja.leader == a.member_id else b
        other = b if leader is a else a
        s = await leader.sync({leader.member_id: b"l", other.member_id: b"o"})
        assert s.error_code == 0
        group = coord.get_group("g")
        clock.advance(199)  # other never syncs
        assert group.has(other.member_id) and group.state is GroupState.STABLE
        clock.advance(1)
        assert not group.has(other.member_id)
        assert group.state is GroupState.PREPARING_REBALANCE
        assert await leader.heartbeat() == E.REBALANCE_IN_PROGRESS
        await coord.close()

    run(main())


def test_member_id_required_only_from_v4_and_pending_member_expires():
    async def main():
        coord = await loaded(make_coordinator())
        old = Client(coord, client_id="old", version=3)
        resp = await old.join_once()
        assert resp.error_code == 0 and resp.member_id.startswith("old-")
        await old.sync({old.member_id: b""}, version=2)
        new = Client(coord, client_id="new", session_timeout_ms=100)
        r = await new.join_once()
        assert r.error_code == E.MEMBER_ID_REQUIRED
        group = coord.get_group("g")
        assert group.is_pending_member(new.member_id)
        coord.clock.advance(99)
        assert group.is_pending_member(new.member_id)
        coord.clock.advance(1)  # never comes back
        assert not group.is_pending_member(new.member_id)
        await coord.close()

    run(main())


def test_static_member_rejoins_without_rebalance_and_fences_old_id():
    async def main():
        log = MemoryOffsetsLog()
        coord = await loaded(make_coordinator(log))
        a = Client(coord, client_id="a", instance_id="ia", session_timeout_ms=5000)
        b = Client(coord, client_id="b", instance_id="ib", session_timeout_ms=5000)
        # Static members get their member id right away (no MEMBER_ID_REQUIRED).
        ja, jb = await asyncio.gather(a.join_once(), b.join_once())
        assert ja.error_code == jb.error_code == 0
        assert a.member_id.startswith("ia-") and b.member_id.startswith("ib-")
        leader = a if ja.leader == a.member_id else b
        follower = b if leader is a else a
        await asyncio.gather(leader.sync({a.member_id: b"A", b.member_id: b"B"}), follower.sync())
        gen = a.generation
        old_member_id = follower.member_id
        # The follower restarts: same instance id, no member id.
        restarted = Client(coord, client_id=follower.client_id, instance_id=follower.instance_id,
                           session_timeout_ms=5000)
        rj = await restarted.join_once()
        assert rj.error_code == 0 and rj.generation_id == gen
        assert restarted.member_id != old_member_id
        assert coord.get_group("g").state is GroupState.STABLE
        s = await restarted.sync()
        assert s.error_code == 0 and s.assignment == (b"A" if follower is a else b"B")
        # The old incarnation is fenced, whatever it sends.
        assert await follower.heartbeat() == E.FENCED_INSTANCE_ID
        assert (await follower.join_once()).error_code == E.FENCED_INSTANCE_ID
        assert (await follower.sync()).error_code == E.FENCED_INSTANCE_ID
        assert (await follower.commit({("t", 0): 1})) == {("t", 0): E.FENCED_INSTANCE_ID}
        # The new member id was persisted without a new generation.
        last = decode_group_metadata_value(log.records(0)[-1].value)
        assert last.generation == gen
        assert restarted.member_id in {m.member_id for m in last.members}
        await coord.close()

    run(main())


def test_static_leader_rejoin_v9_skips_assignment():
    async def main():
        coord = await loaded(make_coordinator())
        a = Client(coord, client_id="a", instance_id="ia", session_timeout_ms=5000)
        ja = await a.join_once()
        await a.sync({a.member_id: b"A"})
        again = Client(coord, client_id="a", instance_id="ia", session_timeout_ms=5000)
        r = await again.join_once(version=9)
        assert r.error_code == 0 and r.skip_assignment and r.leader == again.member_id
        assert r.generation_id == ja.generation_id and len(r.members) == 1
        again2 = Client(coord, client_id="a", instance_id="ia", session_timeout_ms=5000)
        r2 = await again2.join_once(version=8)
        # Older clients are told the previous leader id so that they do not run the assignor.
        assert r2.error_code == 0 and not r2.skip_assignment and r2.leader == again.member_id
        assert r2.members == []
        await coord.close()

    run(main())


def test_leave_by_instance_id_and_unknown_members():
    async def main():
        coord = await loaded(make_coordinator())
        a = Client(coord, client_id="a", instance_id="ia", session_timeout_ms=5000)
        await a.join_once()
        await a.sync({a.member_id: b""})
        lmt = request_type(ApiKey.LEAVE_GROUP)
        body = lmt(group_id="g", members=[lmt.MemberIdentity(member_id="", group_instance_id="ia"),
                                          lmt.MemberIdentity(member_id="", group_instance_id="nope"),
                                          lmt.MemberIdentity(member_id="ghost", group_instance_id=None)])
        resp = roundtrip_response(ApiKey.LEAVE_GROUP, await GroupApis(coord).handle_leave_group(body, 4), 4)
        assert [m.error_code for m in resp.members] == [0, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
        group = coord.get_group("g")
        assert group.size == 0
        assert group.state is GroupState.EMPTY  # the rebalance with nobody left completes at once
        # v0-2: one member, error at the top level.
        body = lmt(group_id="g", member_id="ghost")
        resp = roundtrip_response(ApiKey.LEAVE_GROUP, await GroupApis(coord).handle_leave_group(body, 1), 1)
        assert resp.error_code == E.UNKNOWN_MEMBER_ID
        await coord.close()

    run(main())


def test_initial_rebalance_delay_gathers_members():
    async def main():
        coord = await loaded(make_coordinator(group_initial_rebalance_delay_ms=150))
        clock = coord.clock
        clients = [Client(coord, client_id=f"c{i}", rebalance_timeout_ms=2000) for i in range(3)]
        for c in clients:
            await c.join_once()
        first = await parked(clients[0].join_once())
        clock.advance(100)
        second = await parked(clients[1].join_once())  # a new member: the delay is extended at its end
        clock.advance(100)
        await asyncio.sleep(0)
        assert not first.done() and not second.done()
        third = await parked(clients[2].join_once())
        # The first delay ended at 150 ms and was extended by another 150 ms (to 300 ms), which saw
        # the third member arrive and extends once more (to 450 ms).
        clock.advance(249)
        await asyncio.sleep(0)
        assert not first.done()
        clock.advance(1)
        results = await asyncio.gather(first, second, third)
        assert all(r.error_code == 0 for r in results)
        assert {r.generation_id for r in results} == {1}
        assert len(next(r for r in results if r.members).members) == 3
        await coord.close()

    run(main())


def test_initial_rebalance_delay_is_capped_by_rebalance_timeout():
    async def main():
        coord = await loaded(make_coordinator(group_initial_rebalance_delay_ms=300))
        clock = coord.clock
        clients = [Client(coord, client_id=f"c{i}", rebalance_timeout_ms=500) for i in range(2)]
        for c in clients:
            await c.join_once()
        first = await parked(clients[0].join_once())
        clock.advance(100)
        second = await parked(clients[1].join_once())
        # 300 ms of delay, then at most the 200 ms the rebalance timeout leaves: done at 500 ms.
        clock.advance(399)
        await asyncio.sleep(0)
        assert not first.done()
        clock.advance(1)
        results = await asyncio.gather(first, second)
        assert [r.error_code for r in results] == [0, 0] and results[0].generation_id == 1
        await coord.close()

    run(main())


def test_session_timeout_bounds_and_group_max_size():
    async def main():
        coord = await loaded(make_coordinator(group_min_session_timeout_ms=100, group_max_session_timeout_ms=1000,
                                              group_max_size=1))
        r = await Client(coord, session_timeout_ms=50).join_once()
        assert r.error_code == E.INVALID_SESSION_TIMEOUT
        r = await Client(coord, session_timeout_ms=5000).join_once()
        assert r.error_code == E.INVALID_SESSION_TIMEOUT
        (a,) = await _stable_group(coord, 1, session_timeout_ms=500)
        b = Client(coord, client_id="b", session_timeout_ms=500)
        assert (await b.join()).error_code == E.GROUP_MAX_SIZE_REACHED
        await coord.close()

    run(main())


def test_inconsistent_protocols_and_protocol_vote():
    async def main():
        coord = await loaded(make_coordinator())
        a = Client(coord, client_id="a", protocols=[("range", b"1"), ("roundrobin", b"2")])
        b = Client(coord, client_id="b", protocols=[("roundrobin", b"3"), ("range", b"4")])
        c = Client(coord, client_id="c", protocols=[("roundrobin", b"5")])
        for x in (a, b, c):
            await x.join_once()
        rs = await asyncio.gather(a.join_once(), b.join_once(), c.join_once())
        assert {r.protocol_name for r in rs} == {"roundrobin"}
        leader_resp = next(r for r in rs if r.members)
        assert sorted(bytes(m.metadata) for m in leader_resp.members) == [b"2", b"3", b"5"]
        d = Client(coord, client_id="d", protocols=[("sticky", b"")])
        assert (await d.join_once()).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        # SyncGroup v5 checks the protocol type and name.
        a.protocols = [("range", b"1")]
        s = await a.sync(version=5)
        assert s.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        await coord.close()

    run(main())


def test_not_coordinator_and_loading_and_unload():
    async def main():
        log = MemoryOffsetsLog()
        coord = make_coordinator(log, num_partitions=4)
        c = Client(coord, group_id="g")
        assert (await c.join_once()).error_code == E.NOT_COORDINATOR
        assert await c.heartbeat() == E.NOT_COORDINATOR
        p = coord.partition_for("g")
        coord.manager.loading.add(p)  # a load in progress
        assert (await c.join_once()).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        assert await c.heartbeat() == 0  # Kafka answers heartbeats blindly while loading
        assert (await c.sync()).error_code == E.REBALANCE_IN_PROGRESS
        coord.manager.loading.discard(p)
        await coord.load_partition(p)
        assert coord.is_loaded(p)
        a = Client(coord, client_id="a", rebalance_timeout_ms=5000)
        b = Client(coord, client_id="b", rebalance_timeout_ms=5000)
        (a,) = await _stable_group(coord, 1, rebalance_timeout_ms=5000)
        await b.join_once()
        pending_b = await parked(b.join_once())  # parked: a has not rejoined
        coord.unload_partition(p)
        r = await pending_b
        assert r.error_code == E.NOT_COORDINATOR
        assert coord.get_group("g") is None and not coord.is_loaded(p)
        await coord.close()

    run(main())


def test_describe_and_list_groups():
    async def main():
        coord = await loaded(make_coordinator())
        a, b = await _stable_group(coord, 2)
        dmt = request_type(ApiKey.DESCRIBE_GROUPS)
        resp = await GroupApis(coord).handle_describe_groups(dmt(groups=["g", "missing"], include_authorized_operations=True), 5)
        resp = roundtrip_response(ApiKey.DESCRIBE_GROUPS, resp, 5)
        g, missing = resp.groups
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
        assert g.authorized_operations == -2147483648
        by_id = {m.member_id: m for m in g.members}
        assert set(by_id) == {a.member_id, b.member_id}
        assert by_id[a.member_id].client_host == "/127.0.0.1" and by_id[a.member_id].client_id == a.client_id
        assert by_id[a.member_id].member_metadata == subscription("t")
        assert by_id[a.member_id].member_assignment == f"a-{a.client_id}".encode()
        assert (missing.error_code, missing.group_state, missing.members) == (0, "Dead", [])

        lmt = request_type(ApiKey.LIST_GROUPS)
        for version, body, expected in [
            (0, lmt(), ["g"]),
            (4, lmt(states_filter=["stable"]), ["g"]),
            (4, lmt(states_filter=["Empty"]), []),
            (5, lmt(types_filter=["classic"]), ["g"]),
            (5, lmt(types_filter=["consumer"]), []),
        ]:
            resp = roundtrip_response(ApiKey.LIST_GROUPS, await GroupApis(coord).handle_list_groups(body, version), version)
            assert resp.error_code == 0
            assert [x.group_id for x in resp.groups] == expected, (version, body)
            if expected and version >= 4:
                assert resp.groups[0].group_state == "Stable"
            if expected and version >= 5:
                assert resp.groups[0].group_type == "classic"
        await coord.close()

    run(main())


def test_join_response_versions_encode():
    async def main():
        coord = await loaded(make_coordinator())
        for v in range(0, 10):
            c = Client(coord, group_id=f"g{v}", client_id="c", version=v)
            r = await c.join()
            assert r.error_code == 0, v
            assert r.protocol_name == "range"
        # An error response in every version (protocol name null -> "" before v7).
        jmt = request_type(ApiKey.JOIN_GROUP)
        for v in range(0, 10):
            body = jmt(group_id="", session_timeout_ms=1000, member_id="", protocol_type="consumer", protocols=[])
            r = roundtrip_response(ApiKey.JOIN_GROUP, await GroupApis(coord).handle_join_group(body, v, "c", "h"), v)
            assert r.error_code == E.INVALID_GROUP_ID
        await coord.close()

    run(main())


def test_empty_group_after_last_leave_is_written():
    async def main():
        log = MemoryOffsetsLog()
        coord = await loaded(make_coordinator(log))
        (a,) = await _stable_group(coord, 1)
        await a.leave()
        await until(lambda: not decode_group_metadata_value(log.records(0)[-1].value).members,
                    "the empty generation written")
        last = decode_group_metadata_value(log.records(0)[-1].value)
        assert last.members == [] and last.generation == a.generation + 1 and last.protocol is None
        assert coord.get_group("g").state is GroupState.EMPTY
        await coord.close()

    run(main())


def test_heartbeat_request_helper_builds():
    # Guard for the helpers themselves: request bodies at their lowest versions encode.
    body = req(ApiKey.HEARTBEAT, group_id="g", generation_id=1, member_id="m")
    assert body.group_id == "g"
