"""Fetch sessions (KIP-227) on the wire: raw Fetch requests against one broker.

``session_transcript`` drives a fixed sequence of full and incremental fetches (partitions added,
altered and forgotten, wrong epochs, unknown sessions, a version switch across v13, records, a log start
offset change) and writes down what each response says, without the random session ids. The fast test
checks the transcript against what KIP-227 requires; the slow one runs the same sequence against Apache
Kafka 3.9.1 and requires the two transcripts to be equal.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type
from protocol.records import build_batch
from tests.integration.helpers import RawClient, create_topic, unique, wait_until

_FETCH = request_type(ApiKey.FETCH)
_DELETE_RECORDS = request_type(ApiKey.DELETE_RECORDS)
_METADATA = request_type(ApiKey.METADATA)

NONE = ErrorCode.NONE
NOT_FOUND = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
BAD_EPOCH = ErrorCode.INVALID_FETCH_SESSION_EPOCH
TOPIC_ID_ERROR = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


class SessionFetcher:
    """Fetch requests with explicit session ids and epochs, by topic name (v12) or by topic id (v13+)."""

    def __init__(self, raw: RawClient, topic: str, topic_id: uuid.UUID, *, replica_id: int = -1,
                 max_wait_ms: int = 50) -> None:
        self.raw = raw
        self.topic = topic
        self.topic_id = topic_id
        self.replica_id = replica_id
        self.max_wait_ms = max_wait_ms

    def fetch(self, session_id: int, epoch: int, partitions: dict[int, int], *, forget: tuple[int, ...] = (),
              version: int = 12, max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20,
              topic_id: uuid.UUID | None = None) -> Any:
        """``partitions``: partition -> fetch offset."""
        tid = topic_id or self.topic_id
        by_id = version >= 13
        topics = []
        if partitions:
            topics.append(_FETCH.FetchTopic(
                topic=None if by_id else self.topic, topic_id=tid if by_id else None, partitions=[
                    _FETCH.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=off, last_fetched_epoch=-1,
                                          log_start_offset=-1, partition_max_bytes=partition_max_bytes)
                    for p, off in partitions.items()]))
        forgotten = [_FETCH.ForgottenTopic(topic=None if by_id else self.topic, topic_id=tid if by_id else None,
                                           partitions=list(forget))] if forget else []
        return self.raw.request(ApiKey.FETCH, version, replica_id=self.replica_id, max_wait_ms=self.max_wait_ms,
                                min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=session_id,
                                session_epoch=epoch, topics=topics, forgotten_topics_data=forgotten, rack_id="")


def summary(resp: Any) -> tuple[Any, ...]:
    """A response without its session id's value: (error, has a session, {partition: (error, HW, log
    start, bytes?)}) ; a partition named twice would show as a clash of keys, so it is counted too."""
    parts = {}
    count = 0
    for t in resp.responses:
        for p in t.partitions:
            count += 1
            parts[p.partition_index] = (ErrorCode(p.error_code).name, p.high_watermark, p.log_start_offset,
                                        bool(p.records))
    assert count == len(parts), resp
    return ErrorCode(resp.error_code).name, resp.session_id != 0, parts


def topic_id_of(raw: RawClient, topic: str) -> uuid.UUID:
    md = raw.request(ApiKey.METADATA, 12, topics=[_METADATA.MetadataRequestTopic(name=topic, topic_id=None)],
                     allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return md.topics[0].topic_id


def produce_one(raw: RawClient, topic: str, partition: int, value: bytes) -> int:
    r = raw.produce(topic, partition, build_batch([(None, value, int(time.time() * 1000))]), acks=-1)
    assert r.error_code == 0, r
    return r.base_offset


def delete_records(raw: RawClient, topic: str, partition: int, offset: int) -> None:
    r = raw.request(ApiKey.DELETE_RECORDS, 2, timeout_ms=10000, topics=[_DELETE_RECORDS.DeleteRecordsTopic(
        name=topic, partitions=[_DELETE_RECORDS.DeleteRecordsPartition(partition_index=partition, offset=offset)])])
    assert r.topics[0].partitions[0].error_code == 0, r


def session_transcript(bootstrap: str, version: int) -> list[tuple[str, Any]]:
    """One pass of the scenario; ``version`` is 12 (topic names) or 13 (topic ids)."""
    topic = unique("fs-wire")
    create_topic(bootstrap, topic, 3)
    out: list[tuple[str, Any]] = []
    other = 13 if version == 12 else 12
    with RawClient(bootstrap, client_id="fs-wire") as raw:
        tid = topic_id_of(raw, topic)
        f = SessionFetcher(raw, topic, tid)
        for p in range(3):
            produce_one(raw, topic, p, b"first-%d" % p)

        def step(name: str, resp: Any) -> Any:
            out.append((name, summary(resp)))
            return resp

        full = step("full fetch opens a session", f.fetch(0, 0, {0: 0, 1: 0, 2: 0}, version=version))
        sid = full.session_id
        step("altered offsets, nothing new: no partitions", f.fetch(sid, 1, {0: 1, 1: 1, 2: 1}, version=version))
        produce_one(raw, topic, 1, b"second-1")
        step("new records: only that partition", f.fetch(sid, 2, {}, version=version))
        step("caught up again", f.fetch(sid, 3, {1: 2}, version=version))
        step("wrong epoch", f.fetch(sid, 7, {}, version=version))
        step("the right epoch still works", f.fetch(sid, 4, {}, version=version))
        step("the other side of v13", f.fetch(sid, 5, {}, version=other))
        delete_records(raw, topic, 0, 1)
        step("a log start offset change", f.fetch(sid, 5, {}, version=version))
        produce_one(raw, topic, 2, b"second-2")
        step("a forgotten partition is not read", f.fetch(sid, 6, {}, forget=(2,), version=version))
        step("added back", f.fetch(sid, 7, {2: 1}, version=version))
        step("forgetting everything closes the session", f.fetch(sid, 8, {}, forget=(0, 1, 2), version=version))
        step("the closed session", f.fetch(sid, 9, {}, version=version))
        step("a session that never was", f.fetch(0x1234567, 1, {}, version=version))
        step("a full fetch with the final epoch opens none", f.fetch(0, -1, {0: 1, 1: 2, 2: 2}, version=version))
        second = step("a second session", f.fetch(0, 0, {0: 1, 1: 2, 2: 2}, version=version))
        third = step("a full fetch naming it replaces it", f.fetch(second.session_id, 0, {1: 2}, version=version))
        step("the replaced session", f.fetch(second.session_id, 1, {}, version=version))
        step("the new one", f.fetch(third.session_id, 1, {}, version=version))
        step("final epoch on a session closes it", f.fetch(third.session_id, -1, {1: 2}, version=version))
        step("so it is gone", f.fetch(third.session_id, 2, {}, version=version))
        if version >= 13:
            ghost = uuid.uuid4()
            full = step("an unknown topic id", f.fetch(0, 0, {0: 0}, version=version, topic_id=ghost))
            step("stays in the session, answered each time", f.fetch(full.session_id, 1, {}, version=version))
    return out


def rotation_transcript(bootstrap: str) -> list[tuple[str, Any]]:
    """Partitions that returned records to an incremental fetch move to the back of the session: a
    fetch too small for all of them reads the others first next time. (A full fetch keeps the order it
    was given.)"""
    topic = unique("fs-rotate")
    create_topic(bootstrap, topic, 3)
    out: list[tuple[str, Any]] = []
    with RawClient(bootstrap, client_id="fs-rotate") as raw:
        f = SessionFetcher(raw, topic, topic_id_of(raw, topic))
        for p in range(3):
            produce_one(raw, topic, p, b"x" * 2000)
        offsets = {0: 0, 1: 0, 2: 0}
        resp = f.fetch(0, 0, offsets, max_bytes=100)
        out.append(("full", summary(resp)))
        for epoch in (1, 2, 3):
            # The fetcher does not move its offsets: only the session's order decides who is read.
            resp = f.fetch(resp.session_id, epoch, {}, max_bytes=100)
            out.append((f"incremental {epoch}", summary(resp)))
    return out


def _with_records(step: tuple[str, Any]) -> set[int]:
    return {p for p, (_e, _hw, _ls, data) in step[1][2].items() if data}


def check_transcript(t: list[tuple[str, Any]], version: int) -> None:
    steps = dict(t)
    assert steps["full fetch opens a session"] == ("NONE", True, {
        0: ("NONE", 1, 0, True), 1: ("NONE", 1, 0, True), 2: ("NONE", 1, 0, True)})
    assert steps["altered offsets, nothing new: no partitions"] == ("NONE", True, {})
    assert steps["new records: only that partition"] == ("NONE", True, {1: ("NONE", 2, 0, True)})
    assert steps["caught up again"] == ("NONE", True, {})
    assert steps["wrong epoch"] == (BAD_EPOCH.name, False, {})
    assert steps["the right epoch still works"] == ("NONE", True, {})
    assert steps["the other side of v13"] == (TOPIC_ID_ERROR.name, False, {})
    assert steps["a log start offset change"] == ("NONE", True, {0: ("NONE", 1, 1, False)})
    assert steps["a forgotten partition is not read"] == ("NONE", True, {})
    assert steps["added back"] == ("NONE", True, {2: ("NONE", 2, 0, True)})
    assert steps["forgetting everything closes the session"] == ("NONE", False, {})
    assert steps["the closed session"] == (NOT_FOUND.name, False, {})
    assert steps["a session that never was"] == (NOT_FOUND.name, False, {})
    final = steps["a full fetch with the final epoch opens none"]
    assert final[:2] == ("NONE", False) and sorted(final[2]) == [0, 1, 2]
    assert steps["a second session"][:2] == ("NONE", True)
    assert steps["a full fetch naming it replaces it"] == ("NONE", True, {1: ("NONE", 2, 0, False)})
    assert steps["the replaced session"] == (NOT_FOUND.name, False, {})
    assert steps["the new one"] == ("NONE", True, {})
    assert steps["final epoch on a session closes it"] == ("NONE", False, {1: ("NONE", 2, 0, False)})
    assert steps["so it is gone"] == (NOT_FOUND.name, False, {})
    if version >= 13:
        unknown = ("NONE", True, {0: ("UNKNOWN_TOPIC_ID", -1, -1, False)})
        assert steps["an unknown topic id"] == unknown
        assert steps["stays in the session, answered each time"] == unknown


@pytest.mark.parametrize("version", [12, 13])
def test_session_lifecycle_and_errors(kafka_cluster: Any, version: int) -> None:
    check_transcript(session_transcript(kafka_cluster.bootstrap, version), version)


def test_partitions_with_records_move_to_the_back(kafka_cluster: Any) -> None:
    t = rotation_transcript(kafka_cluster.bootstrap)
    assert [_with_records(s) for s in t] == [{0}, {0}, {1}, {2}]


# ---------------------------------------------------------------------------------------------------
# The cache bound: max.incremental.fetch.session.cache.slots over 8 shards, Kafka's eviction rules.


@pytest.fixture
def small_cache(cluster_factory: Any) -> Iterator[Any]:
    # 8 slots: one session per shard, new sessions given to the shards in turn.
    yield cluster_factory(1, overrides={"max.incremental.fetch.session.cache.slots": "8"})


def _metric(bootstrap_cluster: Any, name: str) -> float:
    import urllib.request

    port = bootstrap_cluster.brokers[0].metrics_port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric {name}")


def test_follower_sessions_evict_consumer_sessions(small_cache: Any) -> None:
    bootstrap = small_cache.bootstrap
    topic = unique("fs-evict")
    create_topic(bootstrap, topic, 1)
    with RawClient(bootstrap, client_id="fs-evict") as raw:
        tid = topic_id_of(raw, topic)
        consumer = SessionFetcher(raw, topic, tid)
        # Eight consumer sessions fill the eight shards; a ninth finds no room and no session it may evict
        # (consumer sessions are evictable by consumers only once 120 s old).
        sessions = [consumer.fetch(0, 0, {0: 0}).session_id for _ in range(8)]
        assert all(sessions) and len(set(sessions)) == 8
        assert consumer.fetch(0, 0, {0: 0}).session_id == 0
        assert _metric(small_cache, "kafka_server_fetchsessioncache_numincrementalfetchsessions") == 8
        assert _metric(small_cache, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") == 8
        # A follower's session (replica id >= 0) is privileged: it evicts a consumer's.
        follower = SessionFetcher(raw, topic, tid, replica_id=1)
        assert follower.fetch(0, 0, {}).session_id != 0
        assert _metric(small_cache, "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total") == 1
        survivors = [sid for sid in sessions if consumer.fetch(sid, 1, {}).error_code == 0]
        assert len(survivors) == 7
        evicted = next(sid for sid in sessions if sid not in survivors)
        assert summary(consumer.fetch(evicted, 1, {}))[:2] == (NOT_FOUND.name, False)


def test_fewer_slots_than_shards_means_no_sessions(cluster_factory: Any) -> None:
    cluster = cluster_factory(1, overrides={"max.incremental.fetch.session.cache.slots": "7"})
    topic = unique("fs-noslots")
    create_topic(cluster.bootstrap, topic, 1)
    with RawClient(cluster.bootstrap, client_id="fs-noslots") as raw:
        f = SessionFetcher(raw, topic, topic_id_of(raw, topic))
        produce_one(raw, topic, 0, b"one")
        resp = f.fetch(0, 0, {0: 0})
        assert resp.error_code == 0 and resp.session_id == 0
        assert summary(f.fetch(0, 0, {0: 0})) == ("NONE", False, {0: ("NONE", 1, 0, True)})


# ---------------------------------------------------------------------------------------------------
# Beside Apache Kafka 3.9.1 (slow: the JVM broker takes a while to start)


@pytest.fixture(scope="module")
def apache_kafka() -> Iterator[Any]:
    from tests.ops.kafka_broker import KafkaZkBroker

    broker = KafkaZkBroker()
    try:
        broker.start()
    except Exception as e:  # no Java or no jars
        broker.stop()
        pytest.fail(f"cannot start Apache Kafka: {e}")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.mark.slow
def test_same_transcript_as_apache_kafka(kafka_cluster: Any, apache_kafka: Any) -> None:
    for version in (12, 13):
        ours = session_transcript(kafka_cluster.bootstrap, version)
        theirs = session_transcript(apache_kafka.bootstrap, version)
        assert ours == theirs, f"v{version}:\nkafkette {ours}\nKafka    {theirs}"
    assert rotation_transcript(kafka_cluster.bootstrap) == rotation_transcript(apache_kafka.bootstrap)


# ---------------------------------------------------------------------------------------------------
# A consumer fetch throttled by a client quota is answered without data (KIP-219). Kafka's
# getThrottledResponse keeps an incremental session going, and the session must not count what the
# empty answer did not carry.

QUOTA = 102_400  # bytes/s


def _alter_consumer_quota(bootstrap: str, client_id: str, rate: float) -> None:
    mt = request_type(ApiKey.ALTER_CLIENT_QUOTAS)
    with RawClient(bootstrap, client_id="fs-quota-admin") as raw:
        r = raw.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, validate_only=False, entries=[mt.EntryData(
            entity=[mt.EntityData(entity_type="client-id", entity_name=client_id)],
            ops=[mt.OpData(key="consumer_byte_rate", value=rate, remove=False)])])
    assert r.entries[0].error_code == 0, r


def test_throttled_incremental_fetch_keeps_the_session_and_its_news(cluster_factory: Any) -> None:
    cluster = cluster_factory(1, overrides={"quota.window.num": "2", "quota.window.size.seconds": "1"})
    topic, client = unique("fs-throttle"), unique("fs-slow-consumer")
    create_topic(cluster.bootstrap, topic, 2)
    with RawClient(cluster.bootstrap, client_id="fs-filler") as raw:
        for _ in range(40):
            assert raw.produce(topic, 0, build_batch([(None, b"q" * (QUOTA // 2))]), acks=1).error_code == 0
        for i in range(60):
            produce_one(raw, topic, 1, b"small-%d" % i)
    _alter_consumer_quota(cluster.bootstrap, client, QUOTA)
    with RawClient(cluster.bootstrap, client_id=client, timeout=60) as raw:
        f = SessionFetcher(raw, topic, topic_id_of(raw, topic))
        # A full fetch opens a session unless it is throttled (then none is left behind).
        while True:
            full = f.fetch(0, 0, {0: 0, 1: 60})
            if full.session_id:
                break
            assert full.throttle_time_ms > 0 and full.responses == [], full
        sid, epoch, offset, log_start = full.session_id, 1, 0, 0
        throttled = None
        for _ in range(200):
            # Each fetch has news about partition 1 (its log start offset moved) besides records of 0.
            log_start += 1
            delete_records(raw, topic, 1, log_start)
            r = f.fetch(sid, epoch, {0: offset})
            epoch += 1
            if r.throttle_time_ms > 0:
                throttled = r
                break
            assert summary(r)[2][1] == ("NONE", 60, log_start, False)
            offset += 1
        assert throttled is not None, "no fetch was throttled"
        assert (throttled.error_code, throttled.session_id, throttled.responses) == (0, sid, [])
        # The next answers that get through still carry the log start offset the throttled one did not.
        # Partition 0 is forgotten so that they are small enough not to be throttled again.
        forget: tuple[int, ...] = (0,)
        while True:
            r = f.fetch(sid, epoch, {}, forget=forget)
            epoch += 1
            forget = ()
            assert (r.error_code, r.session_id) == (0, sid), r
            if r.throttle_time_ms == 0:
                break
        assert summary(r)[2] == {1: ("NONE", 60, log_start, False)}


# ---------------------------------------------------------------------------------------------------
# Authorization is checked on every partition a fetch reads, cached ones included (as in Kafka): an ACL
# that takes READ away stops an incremental session at its next fetch.


def test_revoked_read_applies_to_partitions_cached_in_a_session(cluster_factory: Any) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    cluster = cluster_factory(1, overrides={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                            "allow.everyone.if.no.acl.found": "true"})
    topic = unique("fs-acl")
    create_topic(cluster.bootstrap, topic, 1)
    deny = ACL("User:ANONYMOUS", "*", ACLOperation.READ, ACLPermissionType.DENY,
               ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL))
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="fs-acl-admin")
    with RawClient(cluster.bootstrap, client_id="fs-acl") as raw:
        produce_one(raw, topic, 0, b"secret")
        f = SessionFetcher(raw, topic, topic_id_of(raw, topic))
        full = f.fetch(0, 0, {0: 1})
        sid, epoch = full.session_id, 1
        assert sid and summary(full)[2] == {0: ("NONE", 1, 0, False)}

        def next_fetch() -> Any:
            nonlocal epoch
            r = f.fetch(sid, epoch, {})
            epoch += 1
            return r

        try:
            admin.create_acls([deny])
            denied = ("NONE", True, {0: ("TOPIC_AUTHORIZATION_FAILED", -1, -1, False)})
            wait_until(lambda: summary(next_fetch()) == denied, 20, "the cached partition refused")
            assert summary(next_fetch()) == denied  # refused at every fetch, not once
        finally:
            admin.delete_acls([ACLFilter("User:ANONYMOUS", "*", ACLOperation.READ, ACLPermissionType.DENY,
                                         ResourcePatternFilter(ResourceType.TOPIC, topic,
                                                               ACLResourcePatternType.LITERAL))])
            admin.close()
        # Allowed again: the partition comes back (its cached HW was reset by the error).
        wait_until(lambda: summary(next_fetch()) == ("NONE", True, {0: ("NONE", 1, 0, False)}), 20,
                   "the partition served again")
