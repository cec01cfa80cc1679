"""The fetch session cache's eviction rules and the follower's session bookkeeping, on their own.

Kafka's rules depend on a 120 s age (MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS) that a test against a
real broker cannot wait for, so these drive ``FetchManager`` with a clock of their own and Fetch
request bodies built with kafkette's codec classes, the way the broker's handler calls it. The wire
behaviour is in test_fetch_sessions_protocol.py (beside Apache Kafka too); these pin what lies behind it.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.fetch_session import (
    MIN_EVICTION_MS,
    FetchManager,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    next_epoch,
)
from broker.replica_fetcher import FollowerFetchSession
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type, response_type

_REQ = request_type(ApiKey.FETCH)
_RESP = response_type(ApiKey.FETCH)


class Clock:
    def __init__(self) -> None:
        self.s = 1000.0

    def __call__(self) -> float:
        return self.s


def request(session_id: int, epoch: int, partitions: int, topic: str = "t", forget: tuple[int, ...] = ()) -> Any:
    return _REQ(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                session_id=session_id, session_epoch=epoch,
                topics=[_REQ.FetchTopic(topic=topic, partitions=[
                    _REQ.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                        log_start_offset=-1, partition_max_bytes=1024)
                    for p in range(partitions)])] if partitions else [],
                forgotten_topics_data=[_REQ.ForgottenTopic(topic=topic, partitions=list(forget))] if forget else [])


def answer(topics: list[Any], hw: int = 0, records: bytes = b"") -> Any:
    """What the replica manager would answer for ``topics``: every partition, HW ``hw``."""
    return _RESP(error_code=0, session_id=0, responses=[_RESP.FetchableTopicResponse(topic=t.topic, partitions=[
        _RESP.PartitionData(partition_index=p.partition, high_watermark=hw, last_stable_offset=hw, log_start_offset=0,
                            records=records) for p in t.partitions]) for t in topics])


def open_session(m: FetchManager, partitions: int, follower: bool = False) -> int:
    ctx = m.new_context(12, request(0, 0, partitions), follower, {})
    assert isinstance(ctx, FullFetchContext)
    return int(ctx.response(answer(ctx.topics)).session_id)


def test_sessions_get_ids_of_their_shard_in_turn() -> None:
    m = FetchManager(16)
    ids = [open_session(m, 1) for _ in range(16)]
    shards = [sid // m.cache.shards[0].session_id_range for sid in ids]
    assert shards == [0, 1, 2, 3, 4, 5, 6, 7] * 2
    assert m.cache.size == 16 and m.cache.total_partitions == 16
    assert open_session(m, 1) == 0  # two a shard, all taken by young consumer sessions


def test_privileged_evicts_unprivileged_then_more_partitions_evict_fewer() -> None:
    clock = Clock()
    m = FetchManager(8, clock=clock)
    consumers = [open_session(m, 3) for _ in range(8)]
    # A consumer may not evict a young consumer session, even with more partitions.
    assert open_session(m, 100) == 0
    # A follower may (and the next consumer in that shard then finds no room).
    assert open_session(m, 1, follower=True) != 0
    assert sum(m.cache.get(s) is None for s in consumers) == 1
    assert m.cache.evictions == 1
    # Once older than 120 s (at their last use), consumer sessions are evictable by a consumer with
    # more partitions, not by one with as many.
    clock.s += MIN_EVICTION_MS / 1000 + 1
    live = [s for s in consumers if m.cache.get(s) is not None]
    for sid in live:
        session = m.cache.get(sid)
        assert session is not None
        ctx = m.new_context(12, request(sid, session.epoch, 0), False, {})  # touched now, 120 s after creation
        assert isinstance(ctx, IncrementalFetchContext)
    assert open_session(m, 3) == 0
    assert open_session(m, 4) != 0


def test_a_stale_session_is_evicted_by_anyone() -> None:
    clock = Clock()
    m = FetchManager(8, clock=clock)
    followers = [open_session(m, 10, follower=True) for _ in range(8)]
    assert open_session(m, 1) == 0
    clock.s += MIN_EVICTION_MS / 1000 + 0.001
    assert open_session(m, 1) != 0  # unused for more than 120 s: stale
    assert sum(m.cache.get(s) is None for s in followers) == 1


def test_incremental_updates_forgets_and_bumps_the_epoch() -> None:
    m = FetchManager(1000)
    sid = open_session(m, 3)
    session = m.cache.get(sid)
    assert session is not None and session.epoch == 1
    ctx = m.new_context(12, request(sid, 1, 0, forget=(1,)), False, {})
    assert isinstance(ctx, IncrementalFetchContext)
    assert [p.partition for t in ctx.topics for p in t.partitions] == [0, 2]
    assert session.epoch == 2
    # Nothing new: nothing in the answer; records: only that partition.
    assert ctx.response(answer(ctx.topics)).responses == []
    ctx = m.new_context(12, request(sid, 2, 0), False, {})
    out = ctx.response(answer(ctx.topics, hw=5))
    assert sorted(p.partition_index for t in out.responses for p in t.partitions) == [0, 2]  # the HW moved
    ctx = m.new_context(12, request(sid, 3, 0), False, {})
    assert ctx.response(answer(ctx.topics, hw=5)).responses == []
    # An epoch from the past, a version across v13: errors, and the session stays as it was.
    for version, epoch, code in ((12, 3, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                                 (13, 4, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)):
        ctx = m.new_context(version, request(sid, epoch, 0), False, {})
        assert isinstance(ctx, SessionErrorContext)
        r = ctx.response(None)
        assert (r.error_code, r.session_id, r.responses) == (code, 0, [])
    assert session.epoch == 4


def test_a_duplicate_request_is_answered_with_the_epoch_error() -> None:
    m = FetchManager(1000)
    sid = open_session(m, 1)
    first = m.new_context(12, request(sid, 1, 0), False, {})
    second = m.new_context(12, request(sid, 2, 0), False, {})  # sent before the first was answered
    r = first.response(answer(first.topics))
    assert (r.error_code, r.session_id) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid)
    assert second.response(answer(second.topics)).error_code == 0


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0x7FFFFFFF) == 1 and next_epoch(0) == 1 and next_epoch(-1) == -1


def _follower_response(session_id: int, partitions: list[tuple[str, int]], error: int = 0) -> Any:
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    return _RESP(error_code=error, session_id=session_id, responses=[_RESP.FetchableTopicResponse(
        topic=t, partitions=[_RESP.PartitionData(partition_index=p) for p in ps]) for t, ps in by_topic.items()])


def test_follower_session_sends_only_changes() -> None:
    s = FollowerFetchSession(leader_id=1)
    wanted = {("t", 0): (0, 0, 5, 1024), ("t", 1): (0, 0, 5, 1024)}
    send, forget = s.build(dict(wanted))
    assert (s.session_id, s.epoch, set(send), forget) == (0, 0, set(wanted), [])
    assert s.handle_response(_follower_response(77, list(wanted)))
    assert (s.session_id, s.epoch) == (77, 1)
    # t-0 moved on, t-1 is unchanged, t-2 is new: t-0 and t-2 are sent.
    wanted[("t", 0)] = (10, 0, 5, 1024)
    wanted[("t", 2)] = (0, 0, 5, 1024)
    send, forget = s.build(dict(wanted))
    assert (set(send), forget) == ({("t", 0), ("t", 2)}, [])
    assert s.handle_response(_follower_response(77, [("t", 0)]))
    assert s.epoch == 2
    # t-1 is no longer wanted: forgotten.
    del wanted[("t", 1)]
    send, forget = s.build(dict(wanted))
    assert (send, forget) == ({}, [("t", 1)])
    # A response naming a partition outside the session: start over with a full fetch, same session id.
    assert not s.handle_response(_follower_response(77, [("t", 1)]))
    assert (s.session_id, s.epoch) == (77, 0)
    send, _ = s.build(dict(wanted))
    assert set(send) == set(wanted)
    # The session is gone on the leader: a full fetch without a session id.
    assert not s.handle_response(_follower_response(0, [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
    assert (s.session_id, s.epoch) == (0, 0)
    s.build(dict(wanted))
    assert s.handle_response(_follower_response(0, list(wanted)))  # no room on the leader: sessionless
    assert (s.session_id, s.epoch) == (0, 0)
    s.build(dict(wanted))
    assert s.handle_response(_follower_response(78, list(wanted)))
    s.handle_error()  # a broken connection: a full fetch replacing session 78
    assert (s.session_id, s.epoch) == (78, 0)


def test_unknown_topic_ids_stay_in_a_session() -> None:
    m = FetchManager(1000)
    ghost = uuid.uuid4()
    body = request(0, 0, 1)
    body.topics[0].topic, body.topics[0].topic_id = None, ghost
    ctx = m.new_context(13, body, False, {})
    r = _RESP(error_code=0, session_id=0, responses=[_RESP.FetchableTopicResponse(topic_id=ghost, partitions=[
        _RESP.PartitionData(partition_index=0, error_code=ErrorCode.UNKNOWN_TOPIC_ID, high_watermark=-1)])])
    sid = ctx.response(r).session_id
    session = m.cache.get(sid)
    assert session is not None and [(p.topic, p.topic_id) for p in session.partitions.values()] == [(None, ghost)]
    # Once the broker learns the id, the name is filled in.
    ctx = m.new_context(13, _REQ(session_id=sid, session_epoch=1, topics=[_REQ.FetchTopic(topic_id=ghost, partitions=[
        _REQ.FetchPartition(partition=0, fetch_offset=3, partition_max_bytes=1)])], forgotten_topics_data=[]),
        False, {ghost: "born"})
    assert [(p.topic, p.fetch_offset) for p in session.partitions.values()] == [("born", 3)]
