"""Committed offsets: OffsetCommit/OffsetFetch, TxnOffsetCommit, DeleteGroups, OffsetDelete, expiry,
and rebuilding every group from ``__consumer_offsets`` after a coordinator change."""

from __future__ import annotations

from typing import Any

from broker.group_coordinator import GroupCoordinator, GroupCoordinatorConfig
from broker.group_metadata import GroupState
from broker.handlers_group import GroupApis
from broker.offsets_topic_format import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_offset_commit_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode as E
from protocol.messages import request_type
from storage.clock import ManualClock
from tests.broker.test_group_helpers import (
    FAST,
    Client,
    MemoryOffsetsLog,
    commit,
    fetch,
    loaded,
    make_coordinator,
    roundtrip_response,
    run,
    until,
)


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class _StampedTimers(ManualClock):
    """Timers that fire only when advanced, with timestamps from the test's ``Clock``: moving the
    commit clock by minutes (offset expiry) must not expire sessions along the way."""

    def __init__(self, stamps: Clock) -> None:
        super().__init__()
        self._stamps = stamps

    def now_ms(self) -> int:
        return self._stamps()


def _coordinator(log: MemoryOffsetsLog, clock: Clock | None = None, *, timers: ManualClock | None = None,
                 **cfg: Any) -> GroupCoordinator:
    """``clock`` sets commit timestamps; ``timers`` (a ``ManualClock``) replaces time and timers.
    Without ``timers`` no timer fires at all (no wall-clock session expiring under a slow test)."""
    settings = dict(FAST)
    settings.update(cfg)
    if timers is None:
        timers = _StampedTimers(clock or Clock())
    return GroupCoordinator(log, GroupCoordinatorConfig.from_config(settings), num_partitions=3,
                            clock=timers, topic_exists=lambda t, p: t != "missing")


async def _all_loaded(coord: GroupCoordinator) -> GroupCoordinator:
    for p in range(coord.num_partitions):
        await coord.load_partition(p)
    return coord


async def _stable(coord: GroupCoordinator, group_id: str = "g", topics: tuple[str, ...] = ("t",),
                  **kw: Any) -> Client:
    c = Client(coord, group_id, topics=topics, **kw)
    assert (await c.join()).error_code == 0
    assert (await c.sync({c.member_id: b"x"})).error_code == 0
    return c


def test_standalone_commit_and_fetch_all_versions():
    async def main():
        log = MemoryOffsetsLog()
        clock = Clock()
        coord = await _all_loaded(_coordinator(log, clock))
        errs = await commit(coord, "simple", {("t", 0): 10, ("t", 1): 11, ("u", 0): 5}, metadata="meta",
                            leader_epoch=3)
        assert errs == {("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
        for v in range(1, 8):
            err, got = await fetch(coord, "simple", [("t", 0), ("u", 0), ("t", 9)], version=v)
            assert err == 0
            assert got[("t", 0)][0] == 10 and got[("t", 0)][2] == "meta"
            assert got[("t", 0)][1] == (3 if v >= 5 else -1)
            assert got[("t", 9)] == (-1, -1, "", 0)
        # All-partitions form (topics null, v2+).
        err, got = await fetch(coord, "simple", None, version=7)
        assert set(got) == {("t", 0), ("t", 1), ("u", 0)}
        # Unknown group: -1 for requested partitions, nothing for the all-partitions form.
        assert (await fetch(coord, "nobody", [("t", 0)]))[1] == {("t", 0): (-1, -1, "", 0)}
        assert (await fetch(coord, "nobody", None))[1] == {}
        # The records are Kafka's: key v1, value v3 (value v1 when a retention time is given).
        entries = log.records(coord.partition_for("simple"))
        key = decode_key(entries[0].key)
        assert isinstance(key, OffsetCommitKey) and entries[0].key[:2] == b"\x00\x01"
        assert entries[0].value[:2] == b"\x00\x03"
        value = decode_offset_commit_value(entries[0].value)
        assert value.commit_timestamp == clock.now and value.leader_epoch == 3
        await commit(coord, "simple", {("t", 0): 12}, version=2, retention_ms=1000)
        last = log.records(coord.partition_for("simple"))[-1]
        assert last.value[:2] == b"\x00\x01"
        assert decode_offset_commit_value(last.value).expire_timestamp == clock.now + 1000
        await coord.close()

    run(main())


def test_offset_fetch_v8_multi_group():
    async def main():
        coord = await _all_loaded(_coordinator(MemoryOffsetsLog()))
        await commit(coord, "a", {("t", 0): 1})
        await commit(coord, "b", {("t", 0): 2, ("t", 1): 3})
        fmt: Any = request_type(ApiKey.OFFSET_FETCH)
        body = fmt(groups=[
            fmt.OffsetFetchRequestGroup(group_id="a", topics=[fmt.OffsetFetchRequestTopics(name="t",
                                                                                          partition_indexes=[0])]),
            fmt.OffsetFetchRequestGroup(group_id="b", topics=None),
            fmt.OffsetFetchRequestGroup(group_id="", topics=None),
        ], require_stable=True)
        for v in (8, 9):
            resp = roundtrip_response(ApiKey.OFFSET_FETCH, await GroupApis(coord).handle_offset_fetch(body, v), v)
            ga, gb, gempty = resp.groups
            assert (ga.group_id, ga.error_code) == ("a", 0)
            assert [(p.partition_index, p.committed_offset) for t in ga.topics for p in t.partitions] == [(0, 1)]
            assert sorted((p.partition_index, p.committed_offset) for t in gb.topics for p in t.partitions) == [
                (0, 2), (1, 3)]
            assert gempty.error_code == 0 and gempty.topics == []
        await coord.close()

    run(main())


def test_commit_rules_for_groups_with_members():
    async def main():
        coord = await _all_loaded(_coordinator(MemoryOffsetsLog()))
        c = await _stable(coord)
        assert await c.commit({("t", 0): 7}) == {("t", 0): 0}
        # Not a member / wrong generation / no group management while the group has members.
        assert await c.commit({("t", 0): 8}, member_id="intruder") == {("t", 0): E.UNKNOWN_MEMBER_ID}
        assert await c.commit({("t", 0): 8}, generation=c.generation + 1) == {("t", 0): E.ILLEGAL_GENERATION}
        assert await c.commit({("t", 0): 8}, generation=-1, member_id="") == {("t", 0): E.UNKNOWN_MEMBER_ID}
        # A commit to a group that does not exist with a generation is from a dead generation.
        assert await commit(coord, "gone", {("t", 0): 1}, generation=3, member_id="m") == {
            ("t", 0): E.ILLEGAL_GENERATION}
        # Too-large metadata fails only its partition; unknown topics are refused before the group.
        long = "x" * 5000
        errs = await commit(coord, "g", {("t", 0): 9, ("t", 1): 9}, generation=c.generation, member_id=c.member_id,
                            metadata=long)
        assert errs == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.OFFSET_METADATA_TOO_LARGE}
        errs = await commit(coord, "g", {("missing", 0): 1, ("t", 2): 4}, generation=c.generation,
                            member_id=c.member_id)
        assert errs == {("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("t", 2): 0}
        # During CompletingRebalance commits are refused with REBALANCE_IN_PROGRESS.
        group = coord.get_group("g")
        await c.join()  # leader rejoin -> new generation awaiting sync
        assert group.state is GroupState.COMPLETING_REBALANCE
        assert await c.commit({("t", 0): 10}) == {("t", 0): E.REBALANCE_IN_PROGRESS}
        err, got = await fetch(coord, "g", [("t", 0), ("t", 2)])
        assert got[("t", 0)][0] == 7 and got[("t", 2)][0] == 4
        await coord.close()

    run(main())


def test_append_failures_are_mapped():
    async def main():
        log = MemoryOffsetsLog()
        coord = await _all_loaded(_coordinator(log))
        log.fail_with = E.NOT_ENOUGH_REPLICAS
        assert await commit(coord, "s", {("t", 0): 1}) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
        log.fail_with = E.NOT_LEADER_OR_FOLLOWER
        assert await commit(coord, "s", {("t", 0): 1}) == {("t", 0): E.NOT_COORDINATOR}
        log.fail_with = E.MESSAGE_TOO_LARGE
        assert await commit(coord, "s", {("t", 0): 1}) == {("t", 0): E.INVALID_COMMIT_OFFSET_SIZE}
        log.fail_with = None
        assert (await fetch(coord, "s", [("t", 0)]))[1][("t", 0)][0] == -1
        # A failed assignment write makes the members rejoin.
        c = Client(coord, "g2")
        await c.join()
        log.fail_with = E.NOT_ENOUGH_REPLICAS
        s = await c.sync({c.member_id: b"x"})
        assert s.error_code == E.COORDINATOR_NOT_AVAILABLE
        assert coord.get_group("g2").state is GroupState.PREPARING_REBALANCE
        log.fail_with = None
        await coord.close()

    run(main())


def test_restart_rebuilds_groups_and_offsets():
    async def main():
        log = MemoryOffsetsLog()
        coord = await _all_loaded(_coordinator(log))
        c = await _stable(coord, "live", session_timeout_ms=5000)
        await c.commit({("t", 0): 42, ("t", 1): 43}, metadata="m")
        await commit(coord, "simple", {("u", 0): 5})
        await commit(coord, "simple", {("u", 0): 6})
        s = Client(coord, "static", instance_id="i1", session_timeout_ms=5000)
        await s.join()
        await s.sync({s.member_id: b"S"})
        await commit(coord, "deleted", {("u", 0): 1})
        dmt: Any = request_type(ApiKey.DELETE_GROUPS)
        await GroupApis(coord).handle_delete_groups(dmt(groups_names=["deleted"]), 2)
        await coord.close()

        # Another coordinator takes over the same partitions.
        coord2 = await _all_loaded(_coordinator(log))
        live = coord2.get_group("live")
        assert live.state is GroupState.STABLE and live.generation_id == c.generation
        assert list(live.members) == [c.member_id] and live.leader_id == c.member_id
        assert live.get(c.member_id).assignment == b"x"
        assert live.get(c.member_id).client_host == "/127.0.0.1"
        assert (await fetch(coord2, "live", [("t", 0), ("t", 1)]))[1] == {
            ("t", 0): (42, -1, "m", 0), ("t", 1): (43, -1, "m", 0)}
        assert (await fetch(coord2, "simple", [("u", 0)]))[1][("u", 0)][0] == 6
        assert coord2.get_group("simple").state is GroupState.EMPTY
        assert coord2.get_group("deleted") is None
        assert coord2.get_group("static").static_members == {"i1": s.member_id}
        # The loaded member keeps its generation: heartbeats and syncs go on without a rejoin.
        c.coord = coord2
        assert await c.heartbeat() == 0
        assert (await c.sync()).assignment == b"x"
        # And its session still expires when it goes away.
        await coord2.close()

    run(main())


def test_loaded_member_session_expires():
    async def main():
        log = MemoryOffsetsLog()
        coord = await _all_loaded(_coordinator(log))
        await _stable(coord, "g", session_timeout_ms=100)
        await coord.close()
        timers = ManualClock()
        coord2 = await _all_loaded(_coordinator(log, timers=timers))
        group = coord2.get_group("g")
        timers.advance(99)
        assert group.size == 1
        timers.advance(1)
        assert group.size == 0
        # The rebalance with nobody in it ends with an Empty generation.
        assert group.state is GroupState.EMPTY
        await coord2.close()

    run(main())


def test_delete_groups_rules():
    async def main():
        log = MemoryOffsetsLog()
        coord = await _all_loaded(_coordinator(log))
        await _stable(coord, "busy")
        await commit(coord, "idle", {("t", 0): 1})
        c = await _stable(coord, "was-busy")
        await c.leave()
        await until(lambda: coord.get_group(c.group_id).state is GroupState.EMPTY, "the group empty")
        dmt: Any = request_type(ApiKey.DELETE_GROUPS)
        resp = await GroupApis(coord).handle_delete_groups(dmt(groups_names=["busy", "idle", "was-busy", "never", "idle"]), 1)
        resp = roundtrip_response(ApiKey.DELETE_GROUPS, resp, 1)
        assert {r.group_id: r.error_code for r in resp.results} == {
            "busy": E.NON_EMPTY_GROUP, "idle": 0, "was-busy": 0, "never": E.GROUP_ID_NOT_FOUND}
        assert coord.get_group("idle") is None and coord.get_group("was-busy") is None
        assert (await fetch(coord, "idle", [("t", 0)]))[1][("t", 0)][0] == -1
        # Tombstones: the offsets of "idle"; the metadata of "was-busy" (it had generations).
        tombstones = [decode_key(e.key) for p in log.partitions for e in log.records(p) if e.value is None]
        assert OffsetCommitKey("idle", "t", 0) in tombstones
        assert GroupMetadataKey("was-busy") in tombstones
        assert GroupMetadataKey("idle") not in tombstones
        await coord.close()

    run(main())


def test_offset_delete_rules():
    async def main():
        coord = await _all_loaded(_coordinator(MemoryOffsetsLog()))
        c = await _stable(coord, "g", topics=("t",))
        await c.commit({("t", 0): 1, ("other", 0): 2})
        omt: Any = request_type(ApiKey.OFFSET_DELETE)

        def body(group: str, tps: list[tuple[str, int]]) -> Any:
            by: dict[str, list[Any]] = {}
            for t, p in tps:
                by.setdefault(t, []).append(omt.OffsetDeleteRequestPartition(partition_index=p))
            return omt(group_id=group, topics=[omt.OffsetDeleteRequestTopic(name=t, partitions=ps)
                                               for t, ps in by.items()])

        resp = roundtrip_response(ApiKey.OFFSET_DELETE, await GroupApis(coord).handle_offset_delete(
            body("g", [("t", 0), ("other", 0), ("missing", 0)]), 0), 0)
        assert resp.error_code == 0
        errs = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
        assert errs == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): 0,
                        ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        got = (await fetch(coord, "g", [("t", 0), ("other", 0)]))[1]
        assert got[("t", 0)][0] == 1 and got[("other", 0)][0] == -1
        resp = await GroupApis(coord).handle_offset_delete(body("nope", [("t", 0)]), 0)
        assert resp.error_code == E.GROUP_ID_NOT_FOUND
        # Once the group is empty, everything may go.
        await c.leave()
        await until(lambda: coord.get_group(c.group_id).state is GroupState.EMPTY, "the group empty")
        resp = await GroupApis(coord).handle_offset_delete(body("g", [("t", 0)]), 0)
        assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 0
        await coord.close()

    run(main())


def test_retention_expiry():
    async def main():
        log = MemoryOffsetsLog()
        clock = Clock()
        minute = 60_000
        coord = await _all_loaded(_coordinator(log, clock, **{"offsets.retention.minutes": 10}))
        # A standalone committer: offsets expire 10 minutes after their commit.
        await commit(coord, "simple", {("t", 0): 1})
        clock.now += 5 * minute
        await commit(coord, "simple", {("t", 1): 2})
        # A consumer group: its offsets live as long as it has members...
        c = await _stable(coord, "g", session_timeout_ms=60_000)
        await c.commit({("t", 0): 3, ("old-topic", 0): 4})
        clock.now += 6 * minute
        assert await coord.expire_offsets() == 1  # simple t-0
        assert (await fetch(coord, "simple", [("t", 0), ("t", 1)]))[1] == {
            ("t", 0): (-1, -1, "", 0), ("t", 1): (2, -1, "", 0)}
        clock.now += 5 * minute
        assert await coord.expire_offsets() == 2  # simple t-1, and g's no longer subscribed old-topic
        assert coord.get_group("simple") is None  # no offsets left: the group is gone
        assert (await fetch(coord, "g", [("t", 0), ("old-topic", 0)]))[1] == {
            ("t", 0): (3, -1, "", 0), ("old-topic", 0): (-1, -1, "", 0)}
        # ...and for the retention time after it becomes empty (even if the commit is older).
        await c.leave()
        await until(lambda: coord.get_group(c.group_id).state is GroupState.EMPTY, "the group empty")
        clock.now += 9 * minute
        assert await coord.expire_offsets() == 0
        clock.now += 2 * minute
        assert await coord.expire_offsets() == 1
        assert coord.get_group("g") is None
        tomb = [decode_key(e.key) for p in log.partitions for e in log.records(p) if e.value is None]
        assert GroupMetadataKey("g") in tomb and OffsetCommitKey("g", "t", 0) in tomb
        await coord.close()

        coord2 = await _all_loaded(_coordinator(log, clock))
        assert coord2.get_group("g") is None and coord2.get_group("simple") is None
        await coord2.close()

    run(main())


def test_transactional_offsets_commit_abort_and_reload():
    async def main():
        log = MemoryOffsetsLog()
        coord = await _all_loaded(_coordinator(log))
        tmt: Any = request_type(ApiKey.TXN_OFFSET_COMMIT)

        async def txn_commit(pid: int, off: int, version: int = 3) -> dict:
            body = tmt(transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=0, generation_id=-1,
                       member_id="", topics=[tmt.TxnOffsetCommitRequestTopic(name="t", partitions=[
                           tmt.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=off,
                                                               committed_metadata=None)])])
            resp = roundtrip_response(ApiKey.TXN_OFFSET_COMMIT, await GroupApis(coord).handle_txn_offset_commit(body, version),
                                      version)
            return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

        p = coord.partition_for("g")
        assert await txn_commit(1000, 5) == {("t", 0): 0}
        assert log.records(p)[-1].transactional
        # Pending: not visible, and require_stable reports it.
        assert (await fetch(coord, "g", [("t", 0)]))[1][("t", 0)][0] == -1
        assert (await fetch(coord, "g", [("t", 0)], require_stable=True))[1][("t", 0)][3] == E.UNSTABLE_OFFSET_COMMIT
        log.write_marker(p, 1000, commit=True)
        coord.complete_pending_txn_offsets(1000, commit=True, partitions=[p])
        assert (await fetch(coord, "g", [("t", 0)], require_stable=True))[1][("t", 0)][:1] == (5,)
        # An aborted transaction leaves the committed offset alone.
        assert await txn_commit(2000, 9, version=0) == {("t", 0): 0}
        log.write_marker(p, 2000, commit=False)
        coord.complete_pending_txn_offsets(2000, commit=False)
        assert (await fetch(coord, "g", [("t", 0)]))[1][("t", 0)][0] == 5
        # A transaction still open at the takeover stays pending until its marker.
        assert await txn_commit(3000, 11) == {("t", 0): 0}
        await coord.close()
        coord2 = await _all_loaded(_coordinator(log))
        assert (await fetch(coord2, "g", [("t", 0)]))[1][("t", 0)][0] == 5
        assert (await fetch(coord2, "g", [("t", 0)], require_stable=True))[1][("t", 0)][3] == \
            E.UNSTABLE_OFFSET_COMMIT
        log.write_marker(p, 3000, commit=True)
        coord2.complete_pending_txn_offsets(3000, commit=True)
        assert (await fetch(coord2, "g", [("t", 0)]))[1][("t", 0)][0] == 11
        await coord2.close()
        coord3 = await _all_loaded(_coordinator(log))
        assert (await fetch(coord3, "g", [("t", 0)]))[1][("t", 0)][0] == 11
        await coord3.close()

    run(main())


def test_group_lag_view_and_partition_ownership():
    async def main():
        coord = make_coordinator(num_partitions=3)
        target = coord.partition_for("g")
        await coord.load_partition(target)
        assert coord.is_loaded(target) and not coord.is_loaded((target + 1) % 3)
        await commit(coord, "g", {("t", 0): 3})
        view = coord.group_lag_view()
        assert [(v.group_id, v.state, v.offsets) for v in view] == [("g", "Empty", {("t", 0): 3})]
        other = next(f"x{i}" for i in range(100) if coord.partition_for(f"x{i}") != target)
        assert await commit(coord, other, {("t", 0): 1}) == {("t", 0): E.NOT_COORDINATOR}
        assert (await fetch(coord, other, [("t", 0)]))[0] == E.NOT_COORDINATOR
        assert (await fetch(coord, other, [("t", 0)], version=1))[1] == {("t", 0): (-1, -1, "", E.NOT_COORDINATOR)}
        await coord.close()

    run(main())


def test_coordinator_loads_before_answering():
    async def main():
        log = MemoryOffsetsLog()
        coord = await loaded(make_coordinator(log))
        await commit(coord, "g", {("t", 0): 1})
        await coord.close()
        coord2 = make_coordinator(log)
        assert (await fetch(coord2, "g", [("t", 0)]))[0] == E.NOT_COORDINATOR
        await coord2.load_partition(0)
        assert (await fetch(coord2, "g", [("t", 0)]))[1][("t", 0)][0] == 1
        await coord2.close()

    run(main())


def test_periodic_expiration_runs_after_start():
    async def main():
        timers = ManualClock()
        coord = await _all_loaded(_coordinator(MemoryOffsetsLog(), timers=timers, **{
            "offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 20_000}))
        await coord.start()
        await commit(coord, "s", {("t", 0): 1})
        for _ in range(2):  # the passes at 20 s and 40 s: too early for the offset
            timers.advance(20_000)
            await until(lambda: timers.pending == 1, "the next expiration pass scheduled")
            assert coord.get_group("s") is not None
        timers.advance(21_000)  # the pass at 61 s: a minute of retention is over
        await until(lambda: coord.get_group("s") is None, "group s expired")
        await coord.close()

    run(main())


def test_load_skips_unreadable_and_unknown_records():
    async def main():
        log = MemoryOffsetsLog()
        coord = await _all_loaded(_coordinator(log))
        await commit(coord, "g", {("t", 0): 1})
        await coord.close()
        p = coord.partition_for("g")
        await log.append(p, [(b"\x00\x09future-key", b"?"), (b"\x00\x01\x00", b"short"),
                             (b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00\x63bad-version")])
        await commit_direct(log, p)
        coord2 = await _all_loaded(_coordinator(log))
        assert (await fetch(coord2, "g", [("t", 0), ("t", 1)]))[1] == {
            ("t", 0): (1, -1, "", 0), ("t", 1): (7, -1, "", 0)}
        await coord2.close()

    async def commit_direct(log: MemoryOffsetsLog, p: int) -> None:
        await log.append(p, [(encode_offset_commit_key("g", "t", 1),
                              encode_offset_commit_value(OffsetCommitValue(7, "", 0)))])

    run(main())
