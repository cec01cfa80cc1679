"""Old protocol versions for real: kafka-python pinned to old ``api_version`` values, and raw old requests.

* kafka-python with ``api_version`` (0, 9) (Produce v1 / Fetch v1: message format v0), (0, 10, 1)
  (Produce v2 / Fetch v3: format v1), (0, 11), (1, 0) and (2, 0) produces, consumes in a group and
  commits; a current client reads what it wrote and the other way round.
* Fetch v0-3 of stored v2 batches (plain, gzip, snappy, lz4, LogAppendTime, transactional): records
  down-converted to v0/v1 as Kafka does (control batches dropped, aborted records kept: old fetches
  have no isolation level), read back with kafka-python's own message set reader.
* Produce v0-2 validation, ListOffsets v0, OffsetCommit/OffsetFetch v0 in ZooKeeper,
  ``message.downconversion.enable``, zstd below Fetch v10, KIP-848's APIs and Envelope.

tests/integration/test_old_versions_vs_kafka.py runs the same requests against Apache Kafka 3.9.1 and
compares the answers.
"""

from __future__ import annotations

import socket
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kazoo.client import KazooClient

from protocol.api_versions import ApiKey
from protocol.compression import CompressionType
from protocol.errors import ErrorCode
from protocol.legacy_records import LegacyRecord, build_message_set
from protocol.messages import encode_request, new_request, request_type
from protocol.records import NewRecord, build_batch, iter_batches
from tests.integration.helpers import RawClient, create_topic, unique, wait_until
from tests.integration.in_process_broker import in_process_broker
from tests.integration.old_versions_helpers import fetch_old, produce_old, read_message_set

OLD_CLIENTS = [((0, 9), "gzip"), ((0, 9), None), ((0, 10, 1), None), ((0, 10, 1), "snappy"), ((0, 10, 1), "lz4"),
               ((0, 11), "gzip"), ((1, 0), "lz4"), ((2, 0), "snappy")]


def _consume(bootstrap: str, topic: str, expected: int, *, api_version: tuple[int, ...] | None = None,
             group: str | None = None, timeout: float = 30.0) -> list[Any]:
    kwargs: dict[str, Any] = {"api_version": api_version} if api_version is not None else {}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", **kwargs)
    try:
        if group is None:
            consumer.assign([TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or {0}])
        else:
            consumer.subscribe([topic])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=300).values():
                out.extend(msgs)
        if group is not None:
            consumer.commit()
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize(("api_version", "codec"), OLD_CLIENTS,
                         ids=[f"{'.'.join(map(str, v))}-{c or 'none'}" for v, c in OLD_CLIENTS])
def test_kafka_python_pinned_to_an_old_version(kafka_cluster: Any, api_version: tuple[int, ...],
                                                codec: str | None) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("old-client")
    create_topic(bootstrap, topic, partitions=2)
    old = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, compression_type=codec, linger_ms=5)
    sent_old = [(f"k{i}".encode(), f"old {i}".encode()) for i in range(40)]
    for i, (k, v) in enumerate(sent_old):
        old.send(topic, key=k, value=v, partition=i % 2)
    old.flush(30)
    old.close()
    new = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5)
    sent_new = [(f"n{i}".encode(), f"new {i}".encode()) for i in range(40)]
    for i, (k, v) in enumerate(sent_new):
        new.send(topic, key=k, value=v, partition=i % 2, headers=[("h", b"x")])
    new.flush(30)
    new.close()

    # A current client reads both.
    current = _consume(bootstrap, topic, 80)
    assert sorted((m.key, m.value) for m in current) == sorted(sent_old + sent_new)
    if api_version == (0, 9):  # message format v0 has no timestamps
        assert all(m.timestamp == -1 for m in current if m.value.startswith(b"old"))

    # The old client reads both in a group (headers dropped, timestamps only from format v1) and commits.
    group = unique("old-group")
    seen = _consume(bootstrap, topic, 80, api_version=api_version, group=group)
    assert sorted((m.key, m.value) for m in seen) == sorted(sent_old + sent_new)
    for p in (0, 1):
        offsets = [m.offset for m in seen if m.partition == p]
        assert offsets == list(range(40)), (p, offsets)
    if api_version < (0, 11):
        assert all(not m.headers for m in seen)
    if api_version < (0, 10):
        assert all(m.timestamp in (None, -1) for m in seen)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        committed = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    assert {tp.partition: om.offset for tp, om in committed.items() if tp.topic == topic} == {0: 40, 1: 40}


# ------------------------------------------------------------------------------------------------
# Fetch v0-3: down-conversion


def _produce_v2(raw: RawClient, topic: str, batch: bytes) -> int:
    r = raw.produce(topic, 0, batch)
    assert r.error_code == 0, r
    return int(r.base_offset)


def _expected(raw: RawClient, topic: str, offset: int, magic: int) -> list[list[tuple[int, bytes | None,
                                                                                  bytes | None, int | None]]]:
    """What Kafka gives an old fetcher from ``offset``, batch by batch: every data record of the stored
    batches from the one holding ``offset`` (an uncompressed batch's records below it left out), control
    batches dropped, aborted records kept; timestamps from format v1 on."""
    pd = raw.fetch(topic, 0, offset)
    assert pd.error_code == 0
    out = []
    for batch in iter_batches(bytes(pd.records), allow_partial_tail=True):
        if batch.is_control:
            continue
        records = [(r.offset, r.key, r.value, r.timestamp if magic == 1 else None) for r in batch.records()
                   if batch.compression != CompressionType.NONE or r.offset >= offset]
        if records:
            out.append(records)
    return out


def _seen(records: list[Any]) -> list[tuple[int, bytes | None, bytes | None, int | None]]:
    return [(r.offset, r.key, r.value, r.timestamp if r.magic == 1 else None) for r in records]


def test_fetch_v0_to_v3_down_converts_plain_and_compressed_batches(kafka_cluster: Any) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("downconvert")
    create_topic(bootstrap, topic)
    now = int(time.time() * 1000)
    with RawClient(bootstrap) as raw:
        for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                      CompressionType.NONE):
            recs = [NewRecord(f"k{codec}-{i}".encode() if i % 3 else None, f"v{codec}-{i}".encode(), now + i,
                              [("h", b"dropped")]) for i in range(5)]
            _produce_v2(raw, topic, build_batch(recs, compression=codec))
        for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
            for offset in (0, 2, 7, 21):
                pd = fetch_old(raw, version, topic, 0, offset)
                assert pd.error_code == 0 and pd.high_watermark == 25
                got = read_message_set(bytes(pd.records))
                assert all(r.magic == magic for r in got)
                want = _expected(raw, topic, offset, magic)
                # Converted records are bigger than v2 ones: the response may end before the last ones,
                # never before the first batch's.
                flat = [r for batch in want for r in batch]
                assert _seen(got) == flat[:len(got)], (version, offset)
                assert len(got) >= len(want[0]), (version, offset)
        # A consumer pinned to format v1 reads everything, in order, without headers.
        seen = _consume(bootstrap, topic, 25, api_version=(0, 10, 1))
        everything = [(o, k, v) for batch in _expected(raw, topic, 0, 1) for o, k, v, _t in batch]
        assert [(m.offset, m.key, m.value) for m in seen] == everything
        assert all(not m.headers for m in seen)


def test_fetch_v1_of_log_append_time_and_empty_partitions(kafka_cluster: Any) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("downconvert-lat")
    create_topic(bootstrap, topic, configs={"message.timestamp.type": "LogAppendTime"})
    with RawClient(bootstrap) as raw:
        empty = fetch_old(raw, 3, topic, 0, 0, max_wait_ms=10)
        assert (empty.error_code, bytes(empty.records or b"")) == (0, b"")
        _produce_v2(raw, topic, build_batch([NewRecord(b"a", b"1", 5), NewRecord(b"b", b"2", 6)],
                                            compression=CompressionType.GZIP))
        stored = raw.fetch_batches(topic, 0)[0]
        for version in (2, 3):
            got = read_message_set(bytes(fetch_old(raw, version, topic, 0, 0).records))
            assert [(r.offset, r.timestamp, r.timestamp_type, r.value) for r in got] == [
                (0, stored.max_timestamp, 1, b"1"), (1, stored.max_timestamp, 1, b"2")]


def test_fetch_v0_to_v3_of_transactional_data_keeps_aborted_records(kafka_cluster: Any) -> None:
    """Old fetch versions have no isolation level: they read uncommitted, aborted records included, as
    Kafka's down-conversion gives them; only the transaction markers (control batches) are dropped."""
    bootstrap = kafka_cluster.bootstrap
    topic = unique("downconvert-txn")
    create_topic(bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("old-txn"),
                             compression_type="gzip")
    producer.init_transactions()
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, key=b"k", value=f"{outcome}-{i}".encode(), partition=0)
        producer.flush()
        if outcome == "commit":
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()
    with RawClient(bootstrap) as raw:
        wait_until(lambda: raw.fetch(topic, 0, 0).last_stable_offset == 12, 15, "markers written")
        for version, magic in ((0, 0), (3, 1)):
            got = read_message_set(bytes(fetch_old(raw, version, topic, 0, 0).records))
            values = [r.value for r in got]
            assert values == [b"commit-0", b"commit-1", b"commit-2", b"abort-0", b"abort-1", b"abort-2",
                              b"commit-0", b"commit-1", b"commit-2"], version
            assert [r.offset for r in got] == [0, 1, 2, 4, 5, 6, 8, 9, 10]
            assert all(r.magic == magic for r in got)
    seen = _consume(bootstrap, topic, 9, api_version=(0, 10, 1))
    assert [m.value for m in seen].count(b"abort-1") == 1 and len(seen) == 9


def test_fetch_v0_to_v2_are_bounded_by_partition_max_bytes(kafka_cluster: Any) -> None:
    """Fetch v0-2 read at most partition_max_bytes, even when the first batch is bigger (Kafka's
    hardMaxBytesLimit): nothing whole to convert, no records. v3 returns the first batch whole."""
    bootstrap = kafka_cluster.bootstrap
    topic = unique("downconvert-max")
    create_topic(bootstrap, topic)
    with RawClient(bootstrap) as raw:
        _produce_v2(raw, topic, build_batch([NewRecord(None, b"x" * 2000)]))
        for version in (0, 1, 2):
            pd = fetch_old(raw, version, topic, 0, 0, partition_max_bytes=500)
            assert pd.error_code == 0 and bytes(pd.records or b"") == b""
        pd = fetch_old(raw, 3, topic, 0, 0, partition_max_bytes=500)
        assert [r.value for r in read_message_set(bytes(pd.records))] == [b"x" * 2000]


def test_down_conversion_disabled_and_zstd(kafka_cluster: Any) -> None:
    bootstrap = kafka_cluster.bootstrap
    off = unique("no-downconversion")
    create_topic(bootstrap, off, configs={"message.downconversion.enable": "false"})
    zstd = unique("zstd-topic")
    create_topic(bootstrap, zstd, configs={"compression.type": "zstd"})
    mixed = unique("zstd-batch")
    create_topic(bootstrap, mixed)
    mt = request_type(ApiKey.FETCH)
    with RawClient(bootstrap) as raw:
        _produce_v2(raw, off, build_batch([NewRecord(None, b"v")]))
        _produce_v2(raw, zstd, build_batch([NewRecord(None, b"z")]))
        _produce_v2(raw, mixed, build_batch([NewRecord(None, b"z")], compression=CompressionType.ZSTD))
        pd = fetch_old(raw, 3, off, 0, 0)
        assert (pd.error_code, pd.high_watermark, pd.records) == (ErrorCode.UNSUPPORTED_VERSION, -1, None)
        assert raw.fetch(off, 0, 0).error_code == 0  # current versions are not converted
        for version in (3, 9):
            r = raw.request(ApiKey.FETCH, version, replica_id=-1, max_wait_ms=10, min_bytes=1, max_bytes=1 << 20,
                            isolation_level=0, topics=[mt.FetchTopic(topic=zstd, partitions=[
                                mt.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
            assert r.responses[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, version
        assert raw.fetch(zstd, 0, 0).error_code == 0  # Fetch v10+ may read zstd
        assert fetch_old(raw, 2, mixed, 0, 0).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


# ------------------------------------------------------------------------------------------------
# Produce v0-2


def _legacy(magic: int, n: int = 3, codec: int = CompressionType.NONE, ts: int | None = None,
            keys: bool = True) -> bytes:
    now = int(time.time() * 1000) if ts is None else ts
    return build_message_set([LegacyRecord(i, now, f"k{i}".encode() if keys else None, f"v{i}".encode())
                              for i in range(n)], magic=magic, codec=codec)


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (2, 0)])
@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
                                   CompressionType.LZ4])
def test_produce_v0_to_v2_stores_v2_batches(kafka_cluster: Any, version: int, magic: int, codec: int) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("old-produce")
    create_topic(bootstrap, topic)
    with RawClient(bootstrap) as raw:
        first = produce_old(raw, version, topic, 0, _legacy(magic, 4, codec, ts=1_700_000_000_000))
        second = produce_old(raw, version, topic, 0, _legacy(magic, 2, codec, ts=1_700_000_000_000))
        assert (first.error_code, first.base_offset, second.base_offset) == (0, 0, 4)
        if version == 2:
            assert first.log_append_time_ms == -1
        batches = raw.fetch_batches(topic, 0)
        assert [(b.base_offset, b.records_count, b.compression) for b in batches] == [(0, 4, codec), (4, 2, codec)]
        values = [(r.offset, r.key, r.value, r.timestamp) for b in batches for r in b.records()]
        ts = 1_700_000_000_000 if magic == 1 else -1
        assert values == [(i, f"k{j}".encode(), f"v{j}".encode(), ts) for i, j in enumerate([0, 1, 2, 3, 0, 1])]


def test_produce_v2_validation_as_kafka(kafka_cluster: Any) -> None:
    """Kafka's codes (Produce v0-2 answers carry no error messages or record errors: those came in v8)."""
    bootstrap = kafka_cluster.bootstrap
    compacted = unique("old-compacted")
    create_topic(bootstrap, compacted, configs={"cleanup.policy": "compact"})
    lat = unique("old-lat")
    create_topic(bootstrap, lat, configs={"message.timestamp.type": "LogAppendTime"})
    bounded = unique("old-bounded")
    create_topic(bootstrap, bounded, configs={"message.timestamp.before.max.ms": "60000", "max.message.bytes": "1000"})
    with RawClient(bootstrap) as raw:
        def code(topic: str, records: bytes) -> int:
            return int(produce_old(raw, 2, topic, 0, records).error_code)

        assert code(compacted, _legacy(1, keys=False)) == ErrorCode.INVALID_RECORD
        assert code(compacted, _legacy(1, keys=False, codec=CompressionType.GZIP)) == ErrorCode.INVALID_RECORD
        assert code(compacted, _legacy(1)) == 0
        assert code(bounded, _legacy(1, ts=1_000)) == ErrorCode.INVALID_TIMESTAMP
        assert code(bounded, _legacy(0, ts=1_000)) == 0  # format v0 has no timestamps
        assert code(bounded, build_message_set([LegacyRecord(0, 0, None, b"x" * 2000)], magic=1)) == \
            ErrorCode.MESSAGE_TOO_LARGE
        corrupt = bytearray(_legacy(1))
        corrupt[-1] ^= 0xFF
        assert code(bounded, bytes(corrupt)) == ErrorCode.CORRUPT_MESSAGE
        assert code(bounded, _legacy(1, codec=CompressionType.GZIP) * 2) == ErrorCode.INVALID_RECORD
        assert code(bounded, _legacy(0, 1) + _legacy(1, 1)) == ErrorCode.INVALID_RECORD
        empty = produce_old(raw, 2, bounded, 0, b"")
        assert (empty.error_code, empty.base_offset) == (0, -1)
        # LogAppendTime: the broker's clock, and a producer may not claim it.
        before = int(time.time() * 1000)
        r = produce_old(raw, 2, lat, 0, _legacy(1, ts=5))
        assert r.error_code == 0 and r.log_append_time_ms >= before
        claimed = bytearray(_legacy(1, 1, ts=5))
        claimed[17] |= 0x08  # attributes: LogAppendTime
        claimed[12:16] = struct.pack(">I", zlib.crc32(bytes(claimed[16:])))
        assert code(lat, bytes(claimed)) == ErrorCode.INVALID_TIMESTAMP


# ------------------------------------------------------------------------------------------------
# ListOffsets v0, OffsetCommit/OffsetFetch v0


def test_list_offsets_v0(kafka_cluster: Any) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("list-offsets-v0")
    create_topic(bootstrap, topic, configs={"segment.bytes": "1024"})
    mt = request_type(ApiKey.LIST_OFFSETS)
    with RawClient(bootstrap) as raw:
        for i in range(6):
            _produce_v2(raw, topic, build_batch([NewRecord(None, bytes([i]) * 600)]))

        def offsets(timestamp: int, n: int) -> tuple[int, list[int]]:
            r = raw.request(ApiKey.LIST_OFFSETS, 0, replica_id=-1, topics=[mt.ListOffsetsTopic(name=topic, partitions=[
                mt.ListOffsetsPartition(partition_index=0, timestamp=timestamp, max_num_offsets=n)])])
            p = r.topics[0].partitions[0]
            return p.error_code, list(p.old_style_offsets)

        # One batch per segment (each is over half of segment.bytes): segments start at 0..5, the log ends at 6.
        assert offsets(-1, 10) == (0, [6, 5, 4, 3, 2, 1, 0])
        assert offsets(-1, 2) == (0, [6, 5])
        assert offsets(-2, 10) == (0, [0])
        assert offsets(int(time.time() * 1000) + 3_600_000, 3) == (0, [6, 5, 4])
        assert offsets(1_000, 5) == (0, [])  # nothing was modified that long ago
        assert offsets(-3, 1) == (ErrorCode.UNSUPPORTED_VERSION, [])
        r = raw.request(ApiKey.LIST_OFFSETS, 0, replica_id=-1, topics=[mt.ListOffsetsTopic(name=topic, partitions=[
            mt.ListOffsetsPartition(partition_index=9, timestamp=-1, max_num_offsets=1)])])
        assert r.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_offset_commit_and_fetch_v0_use_zookeeper(kafka_cluster: Any) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("zk-offsets")
    create_topic(bootstrap, topic, partitions=2)
    group = unique("zk-group")
    oc, of = request_type(ApiKey.OFFSET_COMMIT), request_type(ApiKey.OFFSET_FETCH)
    with RawClient(bootstrap) as raw:
        def commit(version: int, offsets: dict[int, int], metadata: str = "") -> dict[int, int]:
            r = raw.request(ApiKey.OFFSET_COMMIT, version, group_id=group, generation_id_or_member_epoch=-1,
                            member_id="", retention_time_ms=-1, topics=[oc.OffsetCommitRequestTopic(
                                name=topic, partitions=[oc.OffsetCommitRequestPartition(
                                    partition_index=p, committed_offset=o, committed_metadata=metadata)
                                    for p, o in offsets.items()])])
            return {p.partition_index: p.error_code for p in r.topics[0].partitions}

        def fetch(version: int, partitions: list[int]) -> dict[int, tuple[int, int]]:
            r = raw.request(ApiKey.OFFSET_FETCH, version, group_id=group, topics=[
                of.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)])
            return {p.partition_index: (p.committed_offset, p.error_code) for p in r.topics[0].partitions}

        assert commit(0, {0: 7, 5: 1}) == {0: 0, 5: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert commit(0, {1: 3}, metadata="m" * 5000) == {1: ErrorCode.OFFSET_METADATA_TOO_LARGE}
        assert fetch(0, [0, 1]) == {0: (7, 0), 1: (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
        # The coordinator's store (v1+) is another one, as in Kafka.
        def through_coordinator() -> bool:
            raw.request(ApiKey.FIND_COORDINATOR, 1, key=group, key_type=0)
            return commit(2, {1: 11}) == {1: 0}

        wait_until(through_coordinator, 30, "a commit through the group coordinator")
        assert fetch(1, [0, 1]) == {0: (-1, 0), 1: (11, 0)}
        assert fetch(0, [0, 1]) == {0: (7, 0), 1: (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
    zk = KazooClient(hosts=kafka_cluster.zk_connect)
    zk.start(15)
    try:
        data, _stat = zk.get(f"/consumers/{group}/offsets/{topic}/0")
        assert data == b"7"
    finally:
        zk.stop()
        zk.close()


def test_offset_commit_v1_keeps_the_commit_timestamp_it_carries(kafka_cluster: Any) -> None:
    """OffsetCommit v1 names each offset's commit timestamp (-1: the broker's clock), as Kafka stores it."""
    from broker.offsets_topic_format import (
        OffsetCommitKey,
        decode_key,
        decode_offset_commit_value,
        partition_for,
    )

    bootstrap = kafka_cluster.bootstrap
    topic = unique("commit-v1")
    create_topic(bootstrap, topic, partitions=2)
    group = unique("commit-v1-group")
    oc = request_type(ApiKey.OFFSET_COMMIT)
    before = int(time.time() * 1000)
    with RawClient(bootstrap) as raw:
        def commit() -> bool:
            raw.request(ApiKey.FIND_COORDINATOR, 1, key=group, key_type=0)
            r = raw.request(ApiKey.OFFSET_COMMIT, 1, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                            topics=[oc.OffsetCommitRequestTopic(name=topic, partitions=[
                                oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                                commit_timestamp=1_234_567_890_123),
                                oc.OffsetCommitRequestPartition(partition_index=1, committed_offset=6,
                                                                commit_timestamp=-1)])])
            return all(p.error_code == 0 for p in r.topics[0].partitions)

        wait_until(commit, 30, "a v1 commit through the group coordinator")
        records: list[Any] = []
        for batch in iter_batches(bytes(raw.fetch("__consumer_offsets", partition_for(group, 50), 0).records),
                                  allow_partial_tail=True):
            records.extend(batch.records())
    stored = {}
    for r in records:
        key = decode_key(r.key) if r.key is not None else None
        if isinstance(key, OffsetCommitKey) and key.group == group:
            stored[key.partition] = decode_offset_commit_value(r.value)
    assert stored[0] is not None and (stored[0].offset, stored[0].commit_timestamp) == (5, 1_234_567_890_123)
    assert stored[1] is not None and stored[1].offset == 6 and stored[1].commit_timestamp >= before


# ------------------------------------------------------------------------------------------------
# APIs a ZooKeeper-mode Kafka 3.9 advertises without serving them


def test_kip_848_apis_are_unsupported_and_envelope_closes_the_connection(kafka_cluster: Any) -> None:
    bootstrap = kafka_cluster.bootstrap
    with RawClient(bootstrap) as raw:
        hb = raw.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, group_id="g", member_id="m", member_epoch=0,
                         subscribed_topic_names=["t"], topic_partitions=[])
        assert hb.error_code == ErrorCode.UNSUPPORTED_VERSION
        described = raw.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=["a", "b"],
                                include_authorized_operations=False)
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            ("a", ErrorCode.UNSUPPORTED_VERSION), ("b", ErrorCode.UNSUPPORTED_VERSION)]
        raw.send_frame(encode_request(ApiKey.ENVELOPE, 0, 99, "it", new_request(
            ApiKey.ENVELOPE, request_data=b"", request_principal=None, client_host_address=b"\x7f\x00\x00\x01")))
        with pytest.raises((ConnectionError, socket.timeout)):
            raw.recv_frame()


def test_update_features_refuses_every_update_as_zookeeper_mode_kafka(kafka_cluster: Any) -> None:
    uf = request_type(ApiKey.UPDATE_FEATURES)
    with RawClient(kafka_cluster.bootstrap) as raw:
        r = raw.request(ApiKey.UPDATE_FEATURES, 1, timeout_ms=5000, validate_only=False, feature_updates=[
            uf.FeatureUpdateKey(feature="metadata.version", max_version_level=21, upgrade_type=1),
            uf.FeatureUpdateKey(feature="group.version", max_version_level=0, upgrade_type=2)])
    assert (r.error_code, r.error_message) == (0, None)
    assert sorted((x.feature, x.error_code, x.error_message) for x in r.results) == [
        ("group.version", ErrorCode.INVALID_REQUEST, "Can not delete non-existing finalized feature."),
        ("metadata.version", ErrorCode.INVALID_REQUEST,
         "Could not apply finalized feature update because the provided feature is not supported.")]


def test_allocate_producer_ids_from_the_controller(kafka_cluster: Any) -> None:
    zk = KazooClient(hosts=kafka_cluster.zk_connect)
    zk.start(15)
    try:
        _data, stat = zk.get("/brokers/ids/0")
    finally:
        zk.stop()
        zk.close()
    epoch = stat.czxid  # a broker's epoch is the zxid that created its registration
    with RawClient(kafka_cluster.bootstrap) as raw:
        first = raw.request(ApiKey.ALLOCATE_PRODUCER_IDS, 0, broker_id=0, broker_epoch=epoch)
        second = raw.request(ApiKey.ALLOCATE_PRODUCER_IDS, 0, broker_id=0, broker_epoch=epoch)
        stale = raw.request(ApiKey.ALLOCATE_PRODUCER_IDS, 0, broker_id=0, broker_epoch=epoch - 1)
        unknown = raw.request(ApiKey.ALLOCATE_PRODUCER_IDS, 0, broker_id=9, broker_epoch=epoch)
    assert (first.error_code, first.producer_id_len, second.producer_id_len) == (0, 1000, 1000)
    assert second.producer_id_start >= first.producer_id_start + 1000
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert unknown.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED


# ------------------------------------------------------------------------------------------------
# Kafka's conversion metrics, read from a broker running in this process


def test_conversion_counters(zookeeper_server: Any, zk_chroot: str, tmp_path: Path) -> None:
    from broker.conversion_metrics import FETCH, PRODUCE, conversion_metrics_for

    with in_process_broker(zookeeper_server.connect_string + zk_chroot, tmp_path / "data") as (broker, bootstrap):
        topic = unique("conversions")
        create_topic(bootstrap, topic)
        metrics = conversion_metrics_for(broker.replica_manager)
        with RawClient(bootstrap) as raw:
            assert produce_old(raw, 2, topic, 0, _legacy(1, 5, CompressionType.GZIP)).error_code == 0
            assert produce_old(raw, 1, topic, 0, _legacy(0, 2)).error_code == 0
            assert metrics.produce_conversions == {topic: 7}
            assert metrics.conversion_time_ms[PRODUCE].count == 2
            assert metrics.temporary_memory_bytes[PRODUCE].total > 0
            # The response may end inside the second batch's converted records; both were converted.
            assert len(read_message_set(bytes(fetch_old(raw, 1, topic, 0, 0).records))) >= 5
            assert raw.fetch(topic, 0, 0).error_code == 0  # a current fetch converts nothing
            assert metrics.fetch_conversions == {topic: 7}
            assert metrics.conversion_time_ms[FETCH].count == 1 and metrics.total(FETCH) == 7
