"""Old protocol versions side by side: the same requests to kafkette and to Apache Kafka 3.9.1, the same answers.

Both brokers (kafkette with a private ZooKeeper, Kafka 3.9.1 in ZooKeeper mode from the Maven Central
jars) get the same topics, the same v2 batches (plain, gzip, snappy, lz4, zstd; LogAppendTime;
transactions committed and aborted by the same kafka-python producer), and then the same old requests:

* Produce v0-2 with message sets v0/v1, good and bad: the same error codes and offsets, and the same
  v2 batches stored (records, codec, timestamps);
* Fetch v0-3 from many offsets: the same error codes, high watermarks and record bytes: identical
  bytes for uncompressed data (overflow padding included), and for compressed data the same entries
  (offsets, attributes, timestamps, inner records; the compressed bytes themselves depend on the codec
  library) with the same response size;
* ListOffsets v0, OffsetCommit/OffsetFetch v0, Metadata v0, CreateTopics v0/v1, DeleteTopics v0,
  OffsetForLeaderEpoch v0/v1, DescribeConfigs v0, DescribeAcls v0.

Timestamps the brokers set (LogAppendTime, transaction markers, producers' clocks) are compared as
"now".
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaProducer

from protocol.api_versions import ApiKey
from protocol.compression import CompressionType
from protocol.legacy_records import (
    LegacyFormatError,
    LegacyRecord,
    build_message_set,
    iter_deep,
    iter_shallow,
)
from protocol.messages import request_type
from protocol.records import NewRecord, build_batch
from tests.integration.helpers import RawClient, wait_until
from tests.integration.old_versions_helpers import fetch_old, produce_old

RUN = f"ov{os.getpid()}"
STARTED_MS = int(time.time() * 1000)
TS = 1_700_000_000_000
TOPICS = {
    "plain": {},
    "mixed": {},
    "lat": {"message.timestamp.type": "LogAppendTime"},
    "compact": {"cleanup.policy": "compact"},
    "bounded": {"message.timestamp.before.max.ms": "60000", "max.message.bytes": "1000"},
    "gzip": {"compression.type": "gzip"},
    "txn": {},
    "nodc": {"message.downconversion.enable": "false"},
    "zstd": {"compression.type": "zstd"},
}


def name(kind: str) -> str:
    return f"{RUN}-{kind}"


@pytest.fixture(scope="module")
def brokers() -> Iterator[dict[str, str]]:
    from clients.devcluster import LocalCluster
    from tests.ops.kafka_broker import KafkaZkBroker

    kafka = KafkaZkBroker()
    with LocalCluster(1, metrics_base_port=None, overrides={"offsets.topic.num.partitions": "5"}) as cluster:
        try:
            kafka.start()
            yield {"kafkette": cluster.bootstrap, "kafka": kafka.bootstrap}
        finally:
            kafka.stop()


def _now(ts: int) -> int | str:
    return "now" if STARTED_MS - 1000 <= ts <= int(time.time() * 1000) + 60_000 else ts


def _entries(data: bytes) -> list[Any]:
    """A message set's whole entries, compressed ones by content (their bytes depend on the codec library)."""
    out: list[Any] = []
    try:
        for m in iter_shallow(data):
            if m.is_compressed:
                inner = [(x.offset, x.magic, x.attributes, _now(x.timestamp), x.key, x.value) for x in iter_deep(m)]
                out.append(("wrapper", m.offset, m.magic, m.attributes, _now(m.timestamp), inner))
            else:
                ts = _now(m.timestamp)  # a CRC covers the timestamp: one the broker or producer set differs
                out.append(("message", m.offset, m.magic, m.attributes, ts, m.key, m.value, m.crc if ts != "now"
                            else "crc"))
    except LegacyFormatError as e:
        out.append(("error", e.message))
    return out


def _fetch_answer(pd: Any) -> dict[str, Any]:
    data = None if pd.records is None else bytes(pd.records)
    answer: dict[str, Any] = {"error": pd.error_code, "hw": pd.high_watermark,
                              "size": None if data is None else len(data)}
    if data is not None:
        answer["entries"] = _entries(data)
        compressed = any(e[0] == "wrapper" for e in answer["entries"])
        stamped = any(e[-1] == "crc" for e in answer["entries"])
        # Uncompressed, no timestamp of this run's clocks: the very same bytes.
        answer["bytes"] = data if not compressed and not stamped else None
    return answer


def _prefix(a: list[Any], b: list[Any]) -> tuple[list[Any], list[Any]]:
    n = min(len(a), len(b))
    return a[:n], b[:n]


def scenario(bootstrap: str) -> dict[str, Any]:
    """One fixed sequence of old-version requests; what the broker answered, normalized."""
    out: dict[str, Any] = {}
    ct = request_type(ApiKey.CREATE_TOPICS)
    with RawClient(bootstrap, timeout=60) as raw:
        # CreateTopics v0/v1 make the topics (v1 may only validate).
        for i, (kind, configs) in enumerate(TOPICS.items()):
            version = i % 2
            r = raw.request(ApiKey.CREATE_TOPICS, version, timeout_ms=30000, validate_only=False, topics=[
                ct.CreatableTopic(name=name(kind), num_partitions=1, replication_factor=1, assignments=[],
                                  configs=[ct.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])])
            out[f"create {kind} v{version}"] = [t.error_code for t in r.topics]
        wait_until(lambda: all(raw.leaders(name(kind)) == 1 for kind in TOPICS), 30, "a leader for every topic")
        r = raw.request(ApiKey.CREATE_TOPICS, 1, timeout_ms=30000, validate_only=True, topics=[ct.CreatableTopic(
            name=name("plain"), num_partitions=1, replication_factor=1, assignments=[], configs=[])])
        out["create existing v1"] = [t.error_code for t in r.topics]

        # Produce v0-2.
        cases = {
            "v0 magic0": (0, "plain", _legacy(0, 3)),
            "v1 magic0 gzip": (1, "plain", _legacy(0, 3, CompressionType.GZIP)),
            "v2 magic1": (2, "plain", _legacy(1, 3)),
            "v2 magic1 snappy": (2, "plain", _legacy(1, 4, CompressionType.SNAPPY)),
            "v2 magic1 lz4": (2, "plain", _legacy(1, 2, CompressionType.LZ4)),
            "v1 magic0 lz4": (1, "plain", _legacy(0, 2, CompressionType.LZ4)),
            "v2 magic2 batch": (2, "plain", build_batch([NewRecord(b"k", b"v2 in v2", TS)])),
            "v2 to gzip topic": (2, "gzip", _legacy(1, 3)),
            "v2 lat": (2, "lat", _legacy(1, 2)),
            "v2 no key compacted": (2, "compact", _legacy(1, 2, keys=False)),
            "v2 no key compacted gzip": (2, "compact", _legacy(1, 2, CompressionType.GZIP, keys=False)),
            "v2 keyed compacted": (2, "compact", _legacy(1, 2)),
            "v2 too old": (2, "bounded", _legacy(1, 1, ts=1000)),
            "v2 too old magic0": (2, "bounded", _legacy(0, 1, ts=1000)),
            "v2 too big": (2, "bounded", build_message_set([LegacyRecord(0, TS, None, b"x" * 2000)], magic=1)),
            "v2 crc": (2, "bounded", _corrupted(_legacy(1, 2))),
            "v2 two wrappers": (2, "bounded", _legacy(1, 1, CompressionType.GZIP) * 2),
            "v2 mixed magic": (2, "bounded", _legacy(0, 1) + _legacy(1, 1)),
            "v2 empty": (2, "bounded", b""),
            "v2 truncated": (2, "bounded", _legacy(1, 1)[:20]),
            "v2 claims log append time": (2, "lat", _with_attributes(_legacy(1, 1), 0x08)),
            "v0 to unknown topic": (0, "nonexistent", _legacy(0, 1)),
        }
        for case, (version, kind, records) in cases.items():
            r = produce_old(raw, version, name(kind), 0, records)
            lat = getattr(r, "log_append_time_ms", -1)
            out[f"produce {case}"] = (r.error_code, r.base_offset, _now(lat) if lat != -1 else -1)
        out["stored plain"] = _stored(raw, "plain")
        out["stored gzip"] = _stored(raw, "gzip")
        out["stored compact"] = _stored(raw, "compact")

        # v2 batches for down-conversion.
        for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                      CompressionType.NONE):
            batch = build_batch([NewRecord(f"k{i}".encode() if i % 2 else None, f"{codec}-{i}".encode(), TS + i,
                                           [("h", b"v")]) for i in range(4)], compression=codec)
            assert raw.produce(name("mixed"), 0, batch).error_code == 0
        assert raw.produce(name("mixed"), 0, build_batch([NewRecord(None, b"z", TS)],
                                                         compression=CompressionType.ZSTD)).error_code == 0
        assert raw.produce(name("mixed"), 0, build_batch([NewRecord(None, b"after zstd", TS)])).error_code == 0
        for kind in ("nodc", "zstd"):
            assert raw.produce(name(kind), 0, build_batch([NewRecord(None, b"v", TS)])).error_code == 0
    transactions(bootstrap)
    with RawClient(bootstrap, timeout=60) as raw:
        wait_until(lambda: raw.fetch(name("txn"), 0, 0).last_stable_offset == 12, 30, "transaction markers")
        # Three batches of three records, each followed by its marker: the answers below depend on that layout.
        layout = [(b.base_offset, b.records_count) for b in raw.fetch_batches(name("txn"), 0)]
        assert layout == [(0, 3), (3, 1), (4, 3), (7, 1), (8, 3), (11, 1)], layout
        for version in range(4):
            for offset in (0, 1, 3, 4, 6, 10, 12, 19, 20, 21, 22):
                out[f"fetch mixed v{version} @{offset}"] = _fetch_answer(fetch_old(raw, version, name("mixed"), 0,
                                                                                     offset))
            for offset in (0, 2, 3, 5, 7, 11, 12):
                out[f"fetch txn v{version} @{offset}"] = _fetch_answer(fetch_old(raw, version, name("txn"), 0, offset))
            for offset in (0, 3, 6, 9):
                out[f"fetch plain v{version} @{offset}"] = _fetch_answer(fetch_old(raw, version, name("plain"), 0,
                                                                                     offset))
            for kind in ("lat", "nodc", "zstd", "gzip"):
                out[f"fetch {kind} v{version}"] = _fetch_answer(fetch_old(raw, version, name(kind), 0, 0))
            out[f"fetch mixed v{version} small"] = _fetch_answer(fetch_old(raw, version, name("mixed"), 0, 0,
                                                                           partition_max_bytes=90))
        out.update(other_apis(raw))
    return out


def _legacy(magic: int, n: int, codec: int = CompressionType.NONE, *, ts: int = TS, keys: bool = True) -> bytes:
    return build_message_set([LegacyRecord(i, ts + i, f"k{i}".encode() if keys else None, f"m{magic}-{i}".encode())
                              for i in range(n)], magic=magic, codec=codec)


def _corrupted(data: bytes) -> bytes:
    out = bytearray(data)
    out[-1] ^= 0xFF
    return bytes(out)


def _with_attributes(data: bytes, bits: int) -> bytes:
    out = bytearray(data)
    out[17] |= bits
    struct.pack_into(">I", out, 12, zlib.crc32(bytes(out[16:])))
    return bytes(out)


def _stored(raw: RawClient, kind: str) -> list[Any]:
    out = []
    for b in raw.fetch_batches(name(kind), 0):
        out.append((b.base_offset, b.records_count, int(b.compression), int(b.timestamp_type),
                    [(r.offset, r.key, r.value, _now(r.timestamp), r.headers) for r in b.records()]))
    return out


def transactions(bootstrap: str) -> None:
    # Each transaction's three records must make one batch on both brokers: the down-converted answers carry the
    # batches' sizes. With no linger, the sender thread may drain the first record before the next two are added,
    # and the log then holds one batch more on one side than on the other. The long linger leaves it to flush().
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{RUN}-txn", compression_type="gzip",
                             linger_ms=60_000)
    try:
        producer.init_transactions()
        for outcome in ("commit", "abort", "commit"):
            producer.begin_transaction()
            for i in range(3):
                producer.send(name("txn"), key=b"k", value=f"{outcome}-{i}".encode(), partition=0)
            producer.flush()
            if outcome == "commit":
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close()


def other_apis(raw: RawClient) -> dict[str, Any]:
    out: dict[str, Any] = {}
    lo = request_type(ApiKey.LIST_OFFSETS)
    for ts in (-1, -2, -3, TS):
        r = raw.request(ApiKey.LIST_OFFSETS, 0, replica_id=-1, topics=[lo.ListOffsetsTopic(name=name("mixed"), partitions=[
            lo.ListOffsetsPartition(partition_index=0, timestamp=ts, max_num_offsets=5),
            lo.ListOffsetsPartition(partition_index=7, timestamp=ts, max_num_offsets=5)])])
        out[f"list offsets v0 {ts}"] = [(p.partition_index, p.error_code, list(p.old_style_offsets))
                                        for p in r.topics[0].partitions]
    oc, of = request_type(ApiKey.OFFSET_COMMIT), request_type(ApiKey.OFFSET_FETCH)
    group = f"{RUN}-group"
    r = raw.request(ApiKey.OFFSET_COMMIT, 0, group_id=group, topics=[oc.OffsetCommitRequestTopic(
        name=name("plain"), partitions=[oc.OffsetCommitRequestPartition(partition_index=p, committed_offset=5 + p,
                                                                        committed_metadata="m") for p in (0, 3)])])
    out["offset commit v0"] = [(p.partition_index, p.error_code) for p in r.topics[0].partitions]
    r = raw.request(ApiKey.OFFSET_COMMIT, 0, group_id=group, topics=[oc.OffsetCommitRequestTopic(
        name=name("plain"), partitions=[oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                        committed_metadata="m" * 5000)])])
    out["offset commit v0 big metadata"] = [p.error_code for p in r.topics[0].partitions]
    r = raw.request(ApiKey.OFFSET_FETCH, 0, group_id=group, topics=[of.OffsetFetchRequestTopic(
        name=name("plain"), partition_indexes=[0, 3])])
    out["offset fetch v0"] = sorted((p.partition_index, p.committed_offset, p.metadata, p.error_code)
                                    for p in r.topics[0].partitions)
    r = raw.request(ApiKey.OFFSET_FETCH, 0, group_id=f"{group}-none", topics=[of.OffsetFetchRequestTopic(
        name=name("plain"), partition_indexes=[0])])
    out["offset fetch v0 nothing committed"] = [(p.committed_offset, p.error_code) for p in r.topics[0].partitions]
    md = request_type(ApiKey.METADATA)
    r = raw.request(ApiKey.METADATA, 0, topics=[md.MetadataRequestTopic(name=name("plain")),
                                                md.MetadataRequestTopic(name=name("nonexistent-md"))])
    out["metadata v0"] = [(t.name.removeprefix(RUN), t.error_code, [(p.partition_index, p.error_code, p.leader_id,
                                                                     p.replica_nodes, p.isr_nodes)
                                                                    for p in t.partitions]) for t in r.topics]
    ep = request_type(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    for version in (0, 1):
        r = raw.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, topics=[ep.OffsetForLeaderTopic(
            topic=name("mixed"), partitions=[ep.OffsetForLeaderPartition(partition=0, leader_epoch=0),
                                             ep.OffsetForLeaderPartition(partition=4, leader_epoch=0)])])
        out[f"offset for leader epoch v{version}"] = [(p.partition, p.error_code, p.leader_epoch, p.end_offset)
                                                      for p in r.topics[0].partitions]
    dc = request_type(ApiKey.DESCRIBE_CONFIGS)
    r = raw.request(ApiKey.DESCRIBE_CONFIGS, 0, resources=[dc.DescribeConfigsResource(
        resource_type=2, resource_name=name("nodc"), configuration_keys=["message.downconversion.enable",
                                                                         "retention.ms"])])
    out["describe configs v0"] = [(c.name, c.value, c.read_only, c.is_default, c.is_sensitive)
                                  for c in sorted(r.results[0].configs, key=lambda c: c.name)]
    r = raw.request(ApiKey.DESCRIBE_ACLS, 0, resource_type_filter=1, resource_name_filter=None, principal_filter=None,
                    host_filter=None, operation=1, permission_type=1)
    out["describe acls v0"] = (r.error_code, len(r.resources))
    r = raw.request(ApiKey.DELETE_TOPICS, 0, timeout_ms=30000, topic_names=[name("nonexistent-dt")])
    out["delete topics v0"] = [x.error_code for x in r.responses]
    out.update(update_features(raw))
    r = raw.request(ApiKey.ALLOCATE_PRODUCER_IDS, 0, broker_id=0, broker_epoch=-1)
    out["allocate producer ids, stale epoch"] = (r.error_code, r.producer_id_start, r.producer_id_len)
    r = raw.request(ApiKey.ALLOCATE_PRODUCER_IDS, 0, broker_id=7, broker_epoch=-1)
    out["allocate producer ids, unknown broker"] = (r.error_code, r.producer_id_start, r.producer_id_len)
    return out


def update_features(raw: RawClient) -> dict[str, Any]:
    """UpdateFeatures, which a ZooKeeper-mode Kafka 3.9 advertises: what it says to each kind of update."""
    out: dict[str, Any] = {}
    uf = request_type(ApiKey.UPDATE_FEATURES)
    many = [(f, 3, False, 1) for f in ("metadata.version", "group.version", "kraft.version", "transaction.version",
                                       "zz", "a", "B", "feature.with.a.longer.name", "x1", "x2", "x3", "x4", "x5")]
    cases = {
        "upgrade": [("metadata.version", 20, False, 1)],
        "empty name": [("", 1, False, 1)],
        "delete": [("group.version", 0, True, 2)],
        "unsafe delete": [("group.version", 0, False, 3)],
        "level 0 upgrade": [("group.version", 0, False, 1)],
        "unknown upgrade type": [("group.version", 2, False, 7)],
        "named twice": [("dup", 0, False, 1), ("dup", 4, True, 2)],
        "many": many,
        "none": [],
    }
    for version in (0, 1):
        for case, updates in cases.items():
            r = raw.request(ApiKey.UPDATE_FEATURES, version, timeout_ms=5000, validate_only=False, feature_updates=[
                uf.FeatureUpdateKey(feature=f, max_version_level=level, allow_downgrade=down, upgrade_type=kind)
                for f, level, down, kind in updates])
            out[f"update features v{version} {case}"] = (r.error_code, r.error_message, [
                (x.feature, x.error_code, x.error_message) for x in r.results])
    return out


def test_old_versions_answer_as_kafka_391(brokers: dict[str, str]) -> None:
    ours = scenario(brokers["kafkette"])
    theirs = scenario(brokers["kafka"])
    assert ours.keys() == theirs.keys()
    different = {}
    for key in ours:
        a, b = ours[key], theirs[key]
        if isinstance(a, dict) and "entries" in a and "entries" in b:
            # Compressed entries may end the (same-size) response at a different entry.
            a, b = dict(a), dict(b)
            a["entries"], b["entries"] = _prefix(a["entries"], b["entries"])
            assert a["entries"] or not b["entries"] or key.endswith("small"), key
        if a != b:
            different[key] = (a, b)
    assert not different, "kafkette (left) and Kafka 3.9.1 (right) differ:\n" + "\n".join(
        f"{k}:\n  {a}\n  {b}" for k, (a, b) in different.items())
