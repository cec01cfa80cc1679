"""Incremental fetch sessions (KIP-227), the broker's side: Kafka 3.9's FetchSession.scala.

A fetcher (a consumer, or a follower broker) that sends Fetch v7+ with session id 0 and epoch 0 asks
for a session. The broker remembers the partitions of that *full* fetch with their request parameters
(fetch offset, max bytes, leader epoch...) and what it last told the fetcher about each (high watermark,
log start offset), and answers with a session id. After that the fetcher sends *incremental* fetches:
session id, next epoch, and only the partitions it adds or whose parameters changed; partitions it no
longer wants go in ``forgotten_topics_data``. The broker reads every partition of the session, and
answers only the partitions that have something to say: records, an error, a new high watermark or log
start offset, a preferred read replica or a diverging epoch. With thousands of partitions per fetcher
that is the difference between listing every partition twice per fetch and listing almost none.

Errors, as Kafka: an incremental fetch naming an unknown session gets FETCH_SESSION_ID_NOT_FOUND, the
wrong epoch INVALID_FETCH_SESSION_EPOCH, a version on the other side of v13 (topic ids) than the
session's FETCH_SESSION_TOPIC_ID_ERROR; each with session id 0 and no partitions. The fetcher then
starts over with a full fetch.

The cache, as Kafka's: ``max.incremental.fetch.session.cache.slots`` split evenly over 8 shards (so
fewer than 8 slots means no sessions at all, as in Kafka), new sessions handed to the shards in turn,
each shard owning a range of session ids. A full shard makes room only by evicting, in this order:

1. the least recently used session if it is *stale* (unused for 120 s, Kafka's fixed
   MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS; it is not a broker config);
2. else the least valuable *evictable* session, if the new one is worth more. A follower's session
   (privileged) is worth more than a consumer's, then more partitions are worth more. A session is
   evictable by a follower if it is a consumer's or older than 120 s, by a consumer only if older than
   120 s; that is decided when the session is last used, as Kafka does.

A client quota that throttles a consumer fetch answers it without data (KIP-219); the session must then
not believe the fetcher saw what was read. ``throttled_fetch_response`` (called by the dispatcher) gives
Kafka's getThrottledResponse: no session for a full fetch, the session kept, but not advanced, for an
incremental one.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type
from protocol.schema import ZERO_UUID, FileRegions

log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch that asks for a session
FINAL_EPOCH = -1  # a full fetch that wants no session (and closes the one it names)
NUM_CACHE_SHARDS = 8  # KafkaBroker.NumFetchSessionCacheShards
MIN_EVICTION_MS = 120_000  # KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
TOPIC_IDS_SINCE = 13  # Fetch v13 names topics by id

_FETCH = response_type(ApiKey.FETCH)
_INT32_MAX = 0x7FFFFFFF

# A partition of a session: (topic id, partition) for sessions on v13+, (topic name, partition) before.
PartitionKey = tuple[Any, int]


def next_epoch(prev: int) -> int:
    """FetchMetadata.nextEpoch: epochs count 1, 2, ..., 2^31-1, 1, ...; a negative epoch stays final."""
    if prev < 0:
        return FINAL_EPOCH
    return 1 if prev == _INT32_MAX else prev + 1


def _records_size(records: Any) -> int:
    if records is None:
        return 0
    if isinstance(records, FileRegions):
        return records.size
    return len(records)


@dataclass(slots=True, eq=False)
class CachedPartition:
    """One partition of a session. The request fields carry FetchRequest's names, so the replica
    manager reads a cached partition as it reads a partition of a request."""

    topic: str | None  # None: a topic id this broker does not know (yet)
    topic_id: uuid.UUID
    partition: int
    partition_max_bytes: int
    fetch_offset: int
    current_leader_epoch: int
    log_start_offset: int  # the fetcher's log start offset (a follower's)
    last_fetched_epoch: int
    high_watermark: int = -1  # as last sent to the fetcher
    local_log_start_offset: int = -1  # this broker's log start offset, as last sent

    @classmethod
    def from_request(cls, topic: str | None, topic_id: uuid.UUID, fp: Any) -> CachedPartition:
        return cls(topic, topic_id, fp.partition, fp.partition_max_bytes, fp.fetch_offset, fp.current_leader_epoch,
                   fp.log_start_offset, fp.last_fetched_epoch)

    def update_request_params(self, fp: Any) -> None:
        self.partition_max_bytes = fp.partition_max_bytes
        self.fetch_offset = fp.fetch_offset
        self.log_start_offset = fp.log_start_offset
        self.current_leader_epoch = fp.current_leader_epoch
        self.last_fetched_epoch = fp.last_fetched_epoch

    def must_respond(self, pd: Any) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: whether an incremental response must carry
        this partition. (Kafka does not compare the last stable offset: a read_committed fetcher gets
        records, at least the transaction marker, whenever it moves.)"""
        return (pd.error_code != ErrorCode.NONE
                or _records_size(pd.records) > 0
                or pd.high_watermark != self.high_watermark
                or pd.log_start_offset != self.local_log_start_offset
                or pd.preferred_read_replica != -1
                or pd.diverging_epoch.epoch != -1)

    def remember_response(self, pd: Any) -> None:
        """What the fetcher now knows. After an error the cached HW is -1, so the partition is sent again
        once the error is gone."""
        self.high_watermark = -1 if pd.error_code != ErrorCode.NONE else pd.high_watermark
        self.local_log_start_offset = pd.log_start_offset


@dataclass(slots=True, eq=False)
class SessionTopic:
    """Consecutive partitions of one topic in a session, shaped like a FetchRequest topic."""

    topic: str | None
    topic_id: uuid.UUID
    partitions: list[CachedPartition]


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool  # a follower's
    partitions: dict[PartitionKey, CachedPartition]  # in fetch order
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    # Set by the cache when the session is last touched (Kafka keeps these in its sorted sets).
    cached_size: int = -1  # -1: not in the cache
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False
    # What the last response told the fetcher, applied when the session is next used, or dropped when
    # the response was throttled (and so carried nothing): (partition, its response data) pairs.
    pending: list[tuple[CachedPartition, Any]] | None = None

    def key_of(self, topic: str | None, topic_id: uuid.UUID, partition: int) -> PartitionKey:
        return (topic_id, partition) if self.uses_topic_ids else (topic, partition)

    def apply_pending(self) -> None:
        pending, self.pending = self.pending, None
        if not pending:
            return
        parts = self.partitions
        for cp, pd in pending:
            cp.remember_response(pd)
            if _records_size(pd.records) > 0:
                # Partitions that returned data go to the back, so that the next fetches, bounded by
                # max_bytes, read the others first (Kafka does the same).
                key = self.key_of(cp.topic, cp.topic_id, cp.partition)
                if key in parts:
                    parts[key] = parts.pop(key)

    def topics(self) -> list[SessionTopic]:
        out: list[SessionTopic] = []
        current: SessionTopic | None = None
        for cp in self.partitions.values():
            if current is None or current.topic_id != cp.topic_id or current.topic != cp.topic:
                current = SessionTopic(cp.topic, cp.topic_id, [])
                out.append(current)
            current.partitions.append(cp)
        return out


class FetchSessionCacheShard:
    """One shard of the cache; session ids in [max(1, shard * range), (shard + 1) * range)."""

    def __init__(self, max_entries: int, eviction_ms: int, session_id_range: int, shard_num: int) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.session_id_range = session_id_range
        self.shard_num = shard_num
        self.sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0
        self.evictions = 0

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def new_session_id(self) -> int:
        low = max(1, self.shard_num * self.session_id_range)
        high = (self.shard_num + 1) * self.session_id_range
        while True:
            sid = random.randrange(low, high)
            if sid not in self.sessions and sid != INVALID_SESSION_ID:
                return sid

    def maybe_create_session(self, now: int, privileged: bool, size: int, uses_topic_ids: bool,
                             create_partitions: Callable[[], dict[PartitionKey, CachedPartition]]) -> int:
        """The new session's id, or INVALID_SESSION_ID when there is no room for it."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now):
            log.debug("No fetch session created for privileged=%s, size=%d.", privileged, size)
            return INVALID_SESSION_ID
        session = FetchSession(self.new_session_id(), privileged, create_partitions(), uses_topic_ids, now, now,
                               next_epoch(INITIAL_EPOCH))
        self.sessions[session.id] = session
        self.touch(session, now)
        log.debug("Created fetch session %d (privileged=%s, %d partitions).", session.id, privileged, size)
        return session.id

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - oldest.last_used_ms > self.eviction_ms:
            log.debug("Evicting stale fetch session %d.", oldest.id)
            self.remove(oldest)
            self.evictions += 1
            return True
        candidates = [s for s in self.sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        # The new session's key has id 0: it must be strictly more valuable than the victim.
        if (privileged, size, 0) < (victim.privileged, victim.cached_size, victim.id):
            return False
        log.debug("Evicting fetch session %d (privileged=%s, %d partitions) for a new one (privileged=%s, %d "
                  "partitions).", victim.id, victim.privileged, victim.cached_size, privileged, size)
        self.remove(victim)
        self.evictions += 1
        return True

    def remove(self, session: FetchSession) -> FetchSession | None:
        removed = self.sessions.pop(session.id, None)
        if removed is not None:
            self.num_partitions -= max(removed.cached_size, 0)
            removed.cached_size = -1
        return removed

    def touch(self, session: FetchSession, now: int) -> None:
        """Mark the session used now, and recount its size and evictability."""
        session.last_used_ms = now
        if session.cached_size != -1:
            self.num_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        old_enough = now - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old_enough
        session.evictable_by_all = old_enough
        self.num_partitions += session.cached_size


class FetchSessionCache:
    """The shards, with Kafka's metrics: NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached
    and the IncrementalFetchSessionEvictionsPerSec count."""

    def __init__(self, max_slots: int, eviction_ms: int = MIN_EVICTION_MS, shards: int = NUM_CACHE_SHARDS) -> None:
        id_range = _INT32_MAX // shards
        self.shards = [FetchSessionCacheShard(max_slots // shards, eviction_ms, id_range, n) for n in range(shards)]
        self._next_shard = 0

    def shard_of(self, session_id: int) -> FetchSessionCacheShard | None:
        n = session_id // self.shards[0].session_id_range
        return self.shards[n] if 0 <= n < len(self.shards) else None

    def next_shard(self) -> FetchSessionCacheShard:
        shard = self.shards[self._next_shard % len(self.shards)]
        self._next_shard += 1
        return shard

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.shard_of(session_id)
        return shard.get(session_id) if shard is not None else None

    @property
    def size(self) -> int:
        return sum(len(s.sessions) for s in self.shards)

    @property
    def total_partitions(self) -> int:
        return sum(s.num_partitions for s in self.shards)

    @property
    def evictions(self) -> int:
        return sum(s.evictions for s in self.shards)


# ---------------------------------------------------------------------------------------------------
# Fetch contexts: what one Fetch request reads, and how its response is shaped.


class _SessionFetchResponse(_FETCH.cls):  # type: ignore[misc,name-defined]
    """A FetchResponse that knows how to answer instead when a quota throttles it."""

    __slots__ = ("throttled",)


def _response(resp: Any, session_id: int, responses: list[Any], throttled: Callable[[], Any]) -> Any:
    """``resp`` with this session id and these partitions, able to answer for itself when throttled."""
    body = _SessionFetchResponse(**{f: getattr(resp, f) for f in resp._fields})
    body.session_id = session_id
    body.responses = responses
    body.throttled = throttled
    return body


def throttled_fetch_response(body: Any) -> Any:
    """The empty answer to a fetch a client quota throttles (Kafka's FetchContext.getThrottledResponse):
    session id 0, unless an incremental session goes on."""
    throttled = getattr(body, "throttled", None)
    if throttled is not None:
        return throttled()
    return _FETCH(error_code=ErrorCode.NONE, session_id=INVALID_SESSION_ID, responses=[])


def _empty() -> Any:
    return _FETCH(error_code=ErrorCode.NONE, session_id=INVALID_SESSION_ID, responses=[])


class FetchContext:
    """``topics`` are what to read, shaped like FetchRequest topics; ``response`` turns the replica
    manager's answer (one entry per topic read, plus refused ones) into the Fetch response."""

    error: ErrorCode = ErrorCode.NONE
    topics: list[Any]

    def response(self, resp: Any) -> Any:
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    def __init__(self, error: ErrorCode) -> None:
        self.error = error
        self.topics = []

    def response(self, resp: Any) -> Any:
        return _FETCH(error_code=self.error, session_id=INVALID_SESSION_ID, responses=[])


class SessionlessFetchContext(FetchContext):
    def __init__(self, topics: list[Any]) -> None:
        self.topics = topics

    def response(self, resp: Any) -> Any:
        resp.session_id = INVALID_SESSION_ID
        return resp


class FullFetchContext(FetchContext):
    """A full fetch that may open a session holding every partition of its response."""

    def __init__(self, manager: FetchManager, topics: list[Any], version: int, privileged: bool,
                 topic_names: dict[uuid.UUID, str]) -> None:
        self.manager = manager
        self.topics = topics
        self.uses_topic_ids = version >= TOPIC_IDS_SINCE
        self.privileged = privileged
        self.topic_names = topic_names

    def response(self, resp: Any) -> Any:
        ids = self.uses_topic_ids
        requested: dict[PartitionKey, tuple[str | None, uuid.UUID, Any]] = {}
        for t in self.topics:
            name = self.topic_names.get(t.topic_id) if ids else t.topic
            tid = t.topic_id if ids else ZERO_UUID
            for fp in t.partitions:
                requested[(tid if ids else name, fp.partition)] = (name, tid, fp)

        def create_partitions() -> dict[PartitionKey, CachedPartition]:
            cached: dict[PartitionKey, CachedPartition] = {}
            for tr in resp.responses:
                topic_key = tr.topic_id if ids else tr.topic
                for pd in tr.partitions:
                    key = (topic_key, pd.partition_index)
                    req = requested.get(key)
                    if req is None or key in cached:
                        continue
                    cp = CachedPartition.from_request(req[0], req[1], req[2])
                    cp.remember_response(pd)
                    cached[key] = cp
            return cached

        size = sum(len(tr.partitions) for tr in resp.responses)
        cache = self.manager.cache
        shard = cache.next_shard()
        session_id = shard.maybe_create_session(self.manager.now_ms(), self.privileged, size, ids, create_partitions)
        if session_id == INVALID_SESSION_ID:
            resp.session_id = INVALID_SESSION_ID
            return resp

        def throttled() -> Any:
            # Kafka decides about throttling before it creates the session: none is left behind.
            session = shard.get(session_id)
            if session is not None:
                shard.remove(session)
            return _empty()

        return _response(resp, session_id, resp.responses, throttled)


class IncrementalFetchContext(FetchContext):
    """An incremental fetch: reads every partition of the session, answers only those with news."""

    def __init__(self, session: FetchSession, request_epoch: int) -> None:
        self.session = session
        self.expected_epoch = next_epoch(request_epoch)
        self.topics = session.topics()

    def response(self, resp: Any) -> Any:
        session = self.session
        if session.epoch != self.expected_epoch:
            # Another fetch moved the session on meanwhile (a duplicate request): this one is stale.
            log.info("Incremental fetch session %d expected epoch %d, but got %d.  Possible duplicate request.",
                     session.id, self.expected_epoch, session.epoch)
            return _FETCH(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=session.id, responses=[])
        parts = session.partitions
        ids = session.uses_topic_ids
        pending: list[tuple[CachedPartition, Any]] = []
        responses = []
        for tr in resp.responses:
            topic_key = tr.topic_id if ids else tr.topic
            kept = []
            for pd in tr.partitions:
                cp = parts.get((topic_key, pd.partition_index))
                if cp is None:  # not in the session (cannot happen): sent, as Kafka would fail instead
                    kept.append(pd)
                elif cp.must_respond(pd):
                    kept.append(pd)
                    pending.append((cp, pd))
            if kept:
                tr.partitions = kept
                responses.append(tr)
        session.pending = pending

        def throttled() -> Any:
            session.pending = None  # nothing of this response reaches the fetcher
            if session.epoch != self.expected_epoch:
                return _FETCH(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=session.id, responses=[])
            return _FETCH(error_code=ErrorCode.NONE, session_id=session.id, responses=[])

        return _response(resp, session.id, responses, throttled)


class FetchManager:
    """Turns each Fetch request into a fetch context (Kafka's FetchManager.newContext)."""

    def __init__(self, max_slots: int, *, eviction_ms: int = MIN_EVICTION_MS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cache = FetchSessionCache(max_slots, eviction_ms)
        self._clock = clock

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def new_context(self, version: int, body: Any, is_follower: bool,
                    topic_names: dict[uuid.UUID, str]) -> FetchContext:
        session_id: int = body.session_id
        epoch: int = body.session_epoch
        topics = body.topics
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch
            closing = self.cache.shard_of(session_id) if session_id != INVALID_SESSION_ID else None
            session = closing.get(session_id) if closing is not None else None
            if closing is not None and session is not None:  # a full fetch closes the session it names
                closing.remove(session)
                log.debug("Removed fetch session %d.", session_id)
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(topics)
            return FullFetchContext(self, topics, version, is_follower, topic_names)
        shard = self.cache.shard_of(session_id)
        session = shard.get(session_id) if shard is not None else None
        if shard is None or session is None:
            log.debug("Session error for %d: no such session ID found.", session_id)
            return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        session.apply_pending()
        if session.epoch != epoch:
            log.debug("Session error for %d: expected epoch %d, but got %d instead.", session_id, session.epoch, epoch)
            return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= TOPIC_IDS_SINCE):
            log.debug("Session error for %d: the session %s topic ids, request version %d", session_id,
                      "uses" if session.uses_topic_ids else "does not use", version)
            return SessionErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        self._update(session, topics, body.forgotten_topics_data, topic_names)
        if not session.partitions:
            log.debug("Closing fetch session %d: no partitions left.", session_id)
            shard.remove(session)
            return SessionlessFetchContext(topics)
        shard.touch(session, self.now_ms())
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session, epoch)

    @staticmethod
    def _update(session: FetchSession, topics: Iterable[Any], forgotten: Iterable[Any],
                topic_names: dict[uuid.UUID, str]) -> None:
        """Add the request's new partitions, update the ones it names again, drop the forgotten ones."""
        parts = session.partitions
        ids = session.uses_topic_ids
        for t in topics:
            if ids:
                topic_id, name = t.topic_id, topic_names.get(t.topic_id)
            else:
                topic_id, name = ZERO_UUID, t.topic
            for fp in t.partitions:
                key = (topic_id if ids else name, fp.partition)
                cp = parts.get(key)
                if cp is None:
                    parts[key] = CachedPartition.from_request(name, topic_id, fp)
                else:
                    cp.update_request_params(fp)
                    if cp.topic is None:
                        cp.topic = name
        for ft in forgotten:
            topic_key = ft.topic_id if ids else ft.topic
            for p in ft.partitions:
                parts.pop((topic_key, p), None)

