"""Bad produce batches: kafkette answers every one with Apache Kafka 3.9.1's error code, stores none.

Each case is a hand-built Produce request (v9) over a plain socket, carrying the bad batch for
partition 0 and a good batch for partition 1 of the same topic. The same bytes go to kafkette and to
a real Apache Kafka 3.9.1 broker (ZooKeeper mode); both answers must carry the same error code per
partition, and, where Kafka fills them, the same record_errors indexes and error message. Afterwards
kafka-python, confluent-kafka and the Java consumer each read every partition to its end with no
error: nothing refused was stored. While refusing the decompression bombs, the broker's peak RSS
stays bounded.
"""

from __future__ import annotations

import functools
import gzip
import os
import random
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import crc32c
import lz4.frame
import pytest
import zstandard

from protocol.api_versions import ApiKey
from protocol.compression import CompressionType, compress
from protocol.messages import request_type
from protocol.records import build_batch
from tests.integration.helpers import RawClient, create_topic
from tests.integration.read_to_end import READERS, java_read_all

_HEADER = struct.Struct(">qiibIhiqqqhii")
NOW_MS = int(time.time() * 1000)
TOPICS = {
    # name suffix -> topic configs; the same names on both brokers so error messages compare equal
    "plain": {},
    "compact": {"cleanup.policy": "compact"},
    "ts": {"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "3600000"},
    "small": {"max.message.bytes": "2000"},
}
RUN = f"pv{os.getpid()}"


def topic_name(kind: str) -> str:
    return f"{RUN}-{kind}"


# --- building bad batches ------------------------------------------------------------------------


def records_section(n: int = 3, *, key: bytes | None = b"k", value: bytes = b"value", ts: int = NOW_MS) -> bytes:
    """The uncompressed records of a good batch of ``n`` records."""
    return build_batch([(key, value, ts) for _ in range(n)])[61:]


def raw_batch(section: bytes, *, count: int, codec: int = 0, last_delta: int | None = None, base_offset: int = 0,
              attributes: int | None = None, base_ts: int = NOW_MS, max_ts: int = NOW_MS, producer_id: int = -1,
              producer_epoch: int = -1, base_sequence: int = -1, magic: int = 2, crc: int | None = None) -> bytes:
    """A v2 batch around ``section`` with whatever header fields a case needs, CRC made to match."""
    attrs = codec if attributes is None else attributes
    lod = count - 1 if last_delta is None else last_delta
    head = _HEADER.pack(base_offset, 49 + len(section), -1, magic, 0, attrs, lod, base_ts, max_ts, producer_id,
                        producer_epoch, base_sequence, count)
    out = bytearray(head + section)
    struct.pack_into(">I", out, 17, crc32c.crc32c(out[21:]) if crc is None else crc)
    return bytes(out)


def good_batch(n: int = 3, codec: int = 0) -> bytes:
    return build_batch([(b"k%d" % i, b"good value %d" % i, NOW_MS) for i in range(n)], compression=codec)


def legacy_message_set(magic: int) -> bytes:
    """One uncompressed message in the v0/v1 format: offset, size, crc32, magic, attributes, [ts], key, value."""
    body = bytes([magic, 0]) + (struct.pack(">q", NOW_MS) if magic == 1 else b"") + struct.pack(">i", 1) + b"k"
    body += struct.pack(">i", 5) + b"value"
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def record(body_fields: bytes) -> bytes:
    """One record with a raw body (the length prefix is computed)."""
    return _varint(len(body_fields)) + body_fields


def _varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _bomb_records(codec: int, payload: bytes) -> bytes:
    if codec == CompressionType.GZIP:
        return gzip.compress(payload, compresslevel=9, mtime=0)
    if codec == CompressionType.LZ4:
        return lz4.frame.compress(payload, compression_level=16, block_size=lz4.frame.BLOCKSIZE_MAX4MB,
                                  block_linked=False, content_checksum=False, store_size=False)
    if codec == CompressionType.ZSTD:
        return zstandard.ZstdCompressor(level=19).compress(payload)
    return compress(codec, payload)


_BOMB_SIZE = {CompressionType.GZIP: 200 << 20, CompressionType.LZ4: 200 << 20, CompressionType.ZSTD: 200 << 20,
              # snappy's best ratio is about 21:1, and the batch must stay under max.message.bytes (1 MiB)
              CompressionType.SNAPPY: 20 << 20}


@functools.cache
def zero_bomb(codec: int) -> bytes:
    """Hundreds of MB of zeros behind a small compressed batch claiming one record."""
    return raw_batch(_bomb_records(codec, bytes(_BOMB_SIZE[codec])), count=1, codec=codec)


@functools.cache
def giant_record_bomb(codec: int) -> bytes:
    """One record whose length prefix claims nearly the whole bomb, the rest zeros: a 'valid' giant."""
    size = _BOMB_SIZE[codec] - 8
    payload = _varint(size) + bytes(size)
    return raw_batch(_bomb_records(codec, payload), count=1, codec=codec)


@functools.cache
def trailing_records_bomb(codec: int) -> bytes:
    """One good record, then the same record repeated for hundreds of MB (recordsCount says 1)."""
    one = records_section(1)
    payload = one * (_BOMB_SIZE[codec] // len(one))
    return raw_batch(_bomb_records(codec, payload), count=1, codec=codec)


def with_crc_broken(batch: bytes) -> bytes:
    out = bytearray(batch)
    out[-1] ^= 0xFF
    return bytes(out)


def with_magic(batch: bytes, magic: int) -> bytes:
    out = bytearray(batch)
    out[16] = magic
    return bytes(out)


CODECS = {"gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY, "lz4": CompressionType.LZ4,
          "zstd": CompressionType.ZSTD}
# Fixed bytes, not os.urandom: what Kafka answers for garbage depends on the bytes (snappy-java throws
# a different exception for some random inputs and Kafka then answers UNKNOWN_SERVER_ERROR), so the
# side-by-side comparison must see the same garbage every run.
GARBAGE = random.Random(20261123).randbytes(4000)
# Two records with offset deltas 0 and 2 (a batch of two must say 0 and 1).
GAPPED = build_batch([(b"a", b"1", NOW_MS, (), 0), (b"b", b"2", NOW_MS, (), 2)])[61:]

# case name -> (topic kind, builder of the partition-0 records)
CASES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "good batch": ("plain", lambda: good_batch()),
    "good gzip batch": ("plain", lambda: good_batch(codec=1)),
    "bad crc": ("plain", lambda: with_crc_broken(good_batch())),
    "magic 3": ("plain", lambda: with_magic(good_batch(), 3)),
    "magic -1": ("plain", lambda: with_magic(good_batch(), 0xFF)),
    "magic 1 message set": ("plain", lambda: legacy_message_set(1)),
    "magic 0 message set": ("plain", lambda: legacy_message_set(0)),
    "batchLength past the end": ("plain", lambda: good_batch()[:-10]),
    "empty record set": ("plain", lambda: b""),
    "batchLength below the minimum": ("plain", lambda: struct.pack(">qi", 0, 10) + bytes(60)),
    "batchLength below the v2 header": ("plain", lambda: struct.pack(">qi", 0, 40) + bytes([0, 0, 0, 0, 2])
                                        + bytes(35)),
    "codec id 5": ("plain", lambda: raw_batch(records_section(), count=3, codec=5)),
    "codec id 6": ("plain", lambda: raw_batch(records_section(), count=3, codec=6)),
    "codec id 7": ("plain", lambda: raw_batch(records_section(), count=3, codec=7)),
    "uncompressed garbage records": ("plain", lambda: raw_batch(GARBAGE, count=3)),
    "trailing 5 bytes": ("plain", lambda: good_batch() + b"\x01\x02\x03\x04\x05"),
    "trailing 20 bytes claiming a long batch": ("plain", lambda: good_batch() + struct.pack(">qi", 0, 5000)
                                                 + bytes([0, 0, 0, 0, 2]) + bytes(3)),
    "trailing 20 bytes with a short length": ("plain", lambda: good_batch() + struct.pack(">qi", 0, 3) + bytes(8)),
    "two batches": ("plain", lambda: good_batch() + good_batch()),
    "records count above lastOffsetDelta+1": ("plain", lambda: raw_batch(records_section(), count=3, last_delta=1)),
    "records count below lastOffsetDelta+1": ("plain", lambda: raw_batch(records_section(), count=3, last_delta=5)),
    "records count 0": ("plain", lambda: raw_batch(b"", count=0, last_delta=0)),
    "negative lastOffsetDelta": ("plain", lambda: raw_batch(records_section(), count=3, last_delta=-1)),
    "fewer records than counted": ("plain", lambda: raw_batch(records_section(2), count=3)),
    "more records than counted": ("plain", lambda: raw_batch(records_section(4), count=3)),
    "truncated record": ("plain", lambda: raw_batch(records_section()[:-1], count=3)),
    "record length past the batch": ("plain", lambda: raw_batch(record(bytes(10))[:1] + b"\x7f" + bytes(8),
                                                                count=1)),
    "record with bytes left over": ("plain", lambda: raw_batch(record(b"\x00\x00\x00\x01\x01\x00\xaa"), count=1)),
    "negative header count": ("plain", lambda: raw_batch(record(b"\x00\x00\x00\x01\x01\x01"), count=1)),
    "negative header key length": ("plain", lambda: raw_batch(record(b"\x00\x00\x00\x01\x01\x02\x01\x01"),
                                                              count=1)),
    "header count past the batch": ("plain", lambda: raw_batch(record(b"\x00\x00\x00\x01\x01\x7e"), count=1)),
    "varint too long": ("plain", lambda: raw_batch(record(b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00"
                                                          b"\x01\x01\x00"), count=1)),
    "non-consecutive offset deltas": ("plain", lambda: raw_batch(GAPPED, count=2)),
    "non-consecutive offset deltas, gzip": ("plain", lambda: raw_batch(compress(1, GAPPED), count=2, codec=1)),
    "non-consecutive offset deltas, lz4": ("plain", lambda: raw_batch(compress(3, GAPPED), count=2, codec=3)),
    "control batch": ("plain", lambda: raw_batch(records_section(1), count=1, attributes=0x30, producer_id=5,
                                                 producer_epoch=0, base_sequence=0)),
    "producer id without a sequence": ("plain", lambda: raw_batch(records_section(), count=3, producer_id=7,
                                                                  producer_epoch=0)),
    "base offset not 0": ("plain", lambda: raw_batch(records_section(), count=3, base_offset=42)),
    "batch above max.message.bytes": ("small", lambda: good_batch(200)),
    "keyless record on a compacted topic": ("compact", lambda: build_batch(
        [(b"k", b"v", NOW_MS), (None, b"v", NOW_MS), (None, b"w", NOW_MS)])),
    "timestamp too old": ("ts", lambda: build_batch([(b"k", b"v", NOW_MS), (b"k", b"v", NOW_MS - 86_400_000)])),
    "timestamp too new": ("ts", lambda: build_batch([(b"k", b"v", NOW_MS + 86_400_000)])),
    "timestamp -1 passes": ("ts", lambda: build_batch([(b"k", b"v", -1)], base_timestamp=-1)),
    "lz4 frame of dependent blocks": ("plain", lambda: raw_batch(
        # (large enough that the frame has several blocks: lz4 marks one-block frames independent)
        lz4.frame.compress(records_section(3000, value=b"x" * 50), block_linked=True), count=3000, codec=3)),
    "transactional batch without a transactional id": ("plain", lambda: raw_batch(
        records_section(), count=3, attributes=0x10, producer_id=5, producer_epoch=0, base_sequence=0)),
    "log-append-time bit from the producer": ("plain", lambda: raw_batch(records_section(), count=3,
                                                                          attributes=0x08)),
    # Kafka refuses the bit only for records whose timestamp it does not check: NO_TIMESTAMP.
    "log-append-time bit from the producer, max timestamp -1": ("plain", lambda: raw_batch(
        records_section(), count=3, attributes=0x08, max_ts=-1)),
    "max timestamp below the records'": ("plain", lambda: raw_batch(records_section(), count=3, max_ts=5)),
}
for _name, _codec in CODECS.items():
    CASES[f"{_name} garbage"] = ("plain", lambda c=_codec: raw_batch(GARBAGE, count=3, codec=c))
    CASES[f"{_name} wrapping garbage records"] = ("plain", lambda c=_codec: raw_batch(
        compress(c, GARBAGE), count=3, codec=c))
    CASES[f"{_name} truncated"] = ("plain", lambda c=_codec: raw_batch(
        compress(c, records_section(50, value=random.Random(40).randbytes(40)))[:-7], count=50, codec=c))
    CASES[f"{_name} good"] = ("plain", lambda c=_codec: good_batch(codec=c))
    CASES[f"{_name} two frames or members"] = ("plain", lambda c=_codec: raw_batch(
        compress(c, records_section(2)) + compress(c, records_section(1)), count=3, codec=c))
    CASES[f"{_name} data after the frame"] = ("plain", lambda c=_codec: raw_batch(
        compress(c, records_section(2)) + compress(c, records_section(1)), count=2, codec=c))
    CASES[f"{_name} fewer records than counted"] = ("plain", lambda c=_codec: raw_batch(
        compress(c, records_section(2)), count=3, codec=c))
    CASES[f"{_name} bytes after the last record"] = ("plain", lambda c=_codec: raw_batch(
        compress(c, records_section(3) + b"\x00"), count=3, codec=c))
    CASES[f"{_name} keyless record on a compacted topic"] = ("compact", lambda c=_codec: build_batch(
        [(None, b"v", NOW_MS)], compression=c))
    CASES[f"{_name} timestamp out of range"] = ("ts", lambda c=_codec: build_batch(
        [(b"k", b"v", NOW_MS), (b"k", b"v", 1000)], compression=c))
    CASES[f"{_name} bomb of zeros"] = ("plain", lambda c=_codec: zero_bomb(c))
    CASES[f"{_name} bomb of one giant record"] = ("plain", lambda c=_codec: giant_record_bomb(c))
    CASES[f"{_name} bomb of trailing records"] = ("plain", lambda c=_codec: trailing_records_bomb(c))
BOMBS = [name for name in CASES if "bomb" in name]
# Cases Kafka answers for the whole request, not just partition 0 (see the test below).
WHOLE_REQUEST_REFUSED_BY_KAFKA = {"magic 3", "magic -1", "batchLength below the minimum", "control batch",
                                  "transactional batch without a transactional id"}
# Of those, the ones kafkette also refuses for the whole request: transactional records (a control batch
# is one) without a transactional id fail authorization before any partition is looked at, as in
# Kafka's KafkaApis (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition).
WHOLE_REQUEST_REFUSED_BY_KAFKETTE = {"control batch", "transactional batch without a transactional id"}


# --- brokers -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def brokers() -> Iterator[dict[str, Any]]:
    """kafkette (one broker, private ZooKeeper) and Apache Kafka 3.9.1, each started once for the module."""
    from clients.devcluster import LocalCluster
    from tests.ops.kafka_broker import KafkaZkBroker

    kafka = KafkaZkBroker()
    with LocalCluster(1) as cluster:
        try:
            kafka.start()
            both = {"kafkette": cluster.bootstrap, "kafka": kafka.bootstrap}
            for bootstrap in both.values():
                for kind, configs in TOPICS.items():
                    create_topic(bootstrap, topic_name(kind), partitions=2, configs=configs)
            # The broker's peak RSS before it has seen any bomb.
            hwm = _vm_hwm_kib(cluster.brokers[0].process.pid)
            yield {"bootstraps": both, "cluster": cluster, "kafka": kafka, "hwm_before_bombs": hwm}
        finally:
            kafka.stop()


def produce_pair(bootstrap: str, topic: str, bad: bytes, good: bytes, version: int = 9) -> list[Any]:
    """One Produce request: ``bad`` to partition 0, ``good`` to partition 1; both partition answers."""
    mt = request_type(ApiKey.PRODUCE)
    with RawClient(bootstrap, timeout=60) as raw:
        body = raw.request(ApiKey.PRODUCE, version, transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
            mt.TopicProduceData(name=topic, partition_data=[
                mt.PartitionProduceData(index=0, records=bad), mt.PartitionProduceData(index=1, records=good)])])
    by_index = {p.index: p for p in body.responses[0].partition_responses}
    return [by_index[0], by_index[1]]


def _answer(p: Any) -> dict[str, Any]:
    return {"error_code": p.error_code, "record_errors": [r.batch_index for r in p.record_errors or []],
            "error_message": p.error_message}


@pytest.mark.parametrize("case", list(CASES))
def test_same_error_code_as_apache_kafka(brokers: dict[str, Any], case: str) -> None:
    kind, build = CASES[case]
    bad = build()
    topic = topic_name(kind)
    answers = {}
    for name, bootstrap in brokers["bootstraps"].items():
        with RawClient(bootstrap) as raw:
            end_before = raw.list_offset(topic, 0)
        first, second = produce_pair(bootstrap, topic, bad, good_batch(2))
        whole_request = WHOLE_REQUEST_REFUSED_BY_KAFKETTE if name == "kafkette" else WHOLE_REQUEST_REFUSED_BY_KAFKA
        if case not in whole_request:
            assert second.error_code == 0, f"{name}: the good partition in the same request failed: {second}"
        else:
            # A request-level check fails every partition of the request. Kafka's scan for
            # transactional batches also trips over unframeable batches; kafkette refuses only the
            # bad partition for those.
            assert second.error_code == first.error_code, f"{name}: {second}"
        answers[name] = _answer(first)
        with RawClient(bootstrap) as raw:
            end_after = raw.list_offset(topic, 0)
        if first.error_code != 0:
            assert end_after == end_before, f"{name} stored a refused batch: {case}"
    ours, theirs = answers["kafkette"], answers["kafka"]
    assert ours["error_code"] == theirs["error_code"], f"{case}: kafkette {ours} vs Apache Kafka {theirs}"
    assert ours["record_errors"] == theirs["record_errors"], f"{case}: kafkette {ours} vs Apache Kafka {theirs}"
    if "timestamp" not in case:  # timestamp messages hold each broker's clock
        assert ours["error_message"] == theirs["error_message"], f"{case}: kafkette {ours} vs Apache Kafka {theirs}"
    else:
        assert (ours["error_message"] is None) == (theirs["error_message"] is None)


@pytest.mark.parametrize("version", [3, 6, 7])
def test_zstd_needs_produce_v7_as_in_kafka(brokers: dict[str, Any], version: int) -> None:
    codes = {name: [p.error_code for p in produce_pair(bootstrap, topic_name("plain"), good_batch(codec=4),
                                                       good_batch(), version)]
             for name, bootstrap in brokers["bootstraps"].items()}
    assert codes["kafkette"] == codes["kafka"], codes


def _vm_hwm_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status").read().splitlines():  # noqa: SIM115
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM line")


def test_bombs_cost_bounded_memory(brokers: dict[str, Any]) -> None:
    """Refusing every bomb (again), the broker's peak RSS grows by far less than one bomb's size."""
    broker = brokers["cluster"].brokers[0]
    pid = broker.process.pid
    before = brokers["hwm_before_bombs"]
    for case in BOMBS:
        first, _ = produce_pair(broker.bootstrap, topic_name("plain"), CASES[case][1](), good_batch(1))
        assert first.error_code != 0, case
    grown_mib = (_vm_hwm_kib(pid) - before) / 1024
    # A bomb holds 200 MiB of output (20 MiB for snappy); decompressing one whole would grow the peak by
    # at least that. Streaming keeps a chunk and a record at a time.
    assert grown_mib < 64, f"peak RSS grew by {grown_mib:.0f} MiB while refusing bombs"


@pytest.mark.parametrize("client", list(READERS))
def test_every_client_reads_every_partition_to_its_end(brokers: dict[str, Any], client: str) -> None:
    """After all the refused batches (the tests above ran first), nothing unreadable was stored."""
    bootstrap = brokers["bootstraps"]["kafkette"]
    partitions = [(topic_name(kind), p) for kind in TOPICS for p in (0, 1)]
    if client == "java":  # one JVM for all partitions
        read = java_read_all(bootstrap, partitions)
    else:
        read = {tp: READERS[client](bootstrap, *tp) for tp in partitions}
    with RawClient(bootstrap) as raw:
        for kind in TOPICS:
            for partition in (0, 1):
                end = raw.list_offset(topic_name(kind), partition)
                rows = read[(topic_name(kind), partition)]
                offsets = [r[0] for r in rows]
                # Accepted batches only: as in Kafka, an uncompressed batch whose offset deltas skip
                # one (accepted, stored as is) shows its consumers that gap.
                assert offsets == sorted(offsets) and offsets[-1] >= end - 1 if end else not rows, (kind, partition)
