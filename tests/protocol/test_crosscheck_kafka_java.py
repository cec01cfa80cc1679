"""Cross-check the schema codec, and the v0/v1 record formats, against Apache Kafka 3.9.1's own classes.

kio (test_crosscheck_kio.py) models the versions Kafka 4 kept; the versions Kafka 4 dropped (KIP-896)
and that a Kafka 3.9 broker still serves (Produce v0-2, Fetch v0-3, ListOffsets v0, OffsetCommit
v0/v1, OffsetFetch v0, CreateTopics v0/v1, DeleteTopics v0, OffsetForLeaderEpoch v0/v1, the ACL
APIs' v0, DescribeConfigs v0, DescribeLogDirs v0, WriteTxnMarkers v0) are checked here against the
real thing: Kafka 3.9.1's generated message classes, from the Maven Central jars, driven by
KafkaMessageProbe.java in one JVM for the module.

For every such (api, version), requests and responses alike, seeded random messages (and three
shapes: every array non-empty and every nullable field set; every nullable field null; arrays empty)
go both ways:

* Kafka encodes the message from its JSON form (``*JsonConverter.read``) and the bytes equal ours;
  we decode Kafka's bytes back to the same message;
* Kafka decodes our bytes and encodes them again: the same bytes; its JSON of what it decoded has
  our values, field by field (record sets are compared as bytes only: Kafka's JSON omits them).

The message set formats v0/v1 (protocol/legacy_records.py) are checked the same way against Kafka's
``MemoryRecords``: it reads what we build (gzip, snappy, lz4 with v0's odd header checksum), and we
read what its ``MemoryRecordsBuilder`` writes.
"""

from __future__ import annotations

import base64
import json
import random
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.api_versions import SUPPORTED, ApiKey
from protocol.compression import CompressionType
from protocol.legacy_records import LegacyRecord, build_message_set, iter_deep, iter_shallow
from protocol.messages import request_type, response_type
from protocol.schema import FieldSpec, MessageType, Struct, StructSpec
from tests.protocol.test_crosscheck_kio import UNMODELLED

# kafkette's inter-broker schemas (protocol/schemas: LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8,
# ControlledShutdown v3) are written by us, for the one version each we speak: checked here against
# Kafka's classes too, so what our brokers exchange is byte for byte what Kafka 3.9's would.
KAFKETTE_ONLY: set[ApiKey] = set()
JAVA_CHECKED = [(k, v) for k, v in UNMODELLED if k not in KAFKETTE_ONLY]
CASES = [(k, v, kind) for k, v in JAVA_CHECKED for kind in ("Request", "Response")]
RANDOM_EXAMPLES = 25
SHAPES = ("full", "null", "empty")
INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


class Probe:
    """One JVM running KafkaMessageProbe; ``ask`` sends a JSON line and reads the answer."""

    def __init__(self) -> None:
        from tests.kafka_dist import classpath, compile_java

        classes = compile_java(Path(__file__).with_name("KafkaMessageProbe.java"))
        self.proc = subprocess.Popen(
            ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", f"{classes}:{classpath()}", "KafkaMessageProbe"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the Kafka probe JVM exited"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(30)


@pytest.fixture(scope="module")
def probe() -> Iterator[Probe]:
    p = Probe()
    try:
        yield p
    finally:
        p.close()


# ---------------------------------------------------------------------------------------------
# Messages: random values from our schema, and their JSON form as Kafka's converters read it


def _present(f: FieldSpec, v: int) -> bool:
    return f.versions is not None and f.versions[0] <= v <= f.versions[1]


def _nullable(f: FieldSpec, v: int) -> bool:
    return f.nullable is not None and f.nullable[0] <= v <= f.nullable[1]


def _leaf(rnd: random.Random, t: str) -> Any:
    if t in INT_BITS:
        bits = INT_BITS[t]
        return rnd.choice([0, -1, 1, 2 ** (bits - 1) - 1, -(2 ** (bits - 1)), rnd.randrange(-(2 ** (bits - 1)),
                                                                                          2 ** (bits - 1))])
    if t == "uint16":
        return rnd.randrange(0, 1 << 16)
    if t == "uint32":
        return rnd.randrange(0, 1 << 32)
    if t == "float64":
        return rnd.choice([0.0, -1.5, rnd.uniform(-1e9, 1e9)])
    if t == "bool":
        return rnd.random() < 0.5
    if t == "string":
        return "".join(rnd.choice("aZ9-_.é€日") for _ in range(rnd.randrange(0, 8)))
    if t in ("bytes", "records"):
        return rnd.randbytes(rnd.randrange(0, 20))
    if t == "uuid":
        return uuid.UUID(int=0) if rnd.random() < 0.1 else uuid.UUID(int=rnd.getrandbits(128))
    raise AssertionError(f"no generator for {t}")


def _value(rnd: random.Random, f: FieldSpec, v: int, shape: str, depth: int) -> Any:
    if _nullable(f, v) and (shape == "null" or (shape == "random" and rnd.random() < 0.2)):
        return None
    if f.type == "array":
        assert f.item is not None
        n = 0 if shape == "empty" or depth > 3 else (rnd.randrange(1, 3) if shape in ("full", "null") else rnd.randrange(0, 3))
        if f.item.struct is not None:
            return [_message(rnd, f.item.struct, v, shape, depth + 1) for _ in range(n)]
        return [_leaf(rnd, f.item.type) for _ in range(n)]
    if f.type == "struct":
        assert f.struct is not None
        return _message(rnd, f.struct, v, shape, depth + 1)
    return _leaf(rnd, f.type)


def _message(rnd: random.Random, spec: StructSpec, v: int, shape: str, depth: int = 0) -> Struct:
    assert spec.cls is not None
    return spec.cls(**{f.name: _value(rnd, f, v, shape, depth) for f in spec.fields if _present(f, v)})


def _camel(json_name: str) -> str:
    return json_name[:1].lower() + json_name[1:]


def _kafka_uuid(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def to_kafka_json(msg: Struct, spec: StructSpec, v: int) -> dict[str, Any]:
    """Our message as Kafka's generated JsonConverter reads and writes it."""
    out: dict[str, Any] = {}
    for f in spec.fields:
        if _present(f, v):
            out[_camel(f.json_name)] = _json_value(getattr(msg, f.name), f, v)
    return out


def _json_value(value: Any, f: FieldSpec, v: int) -> Any:
    if value is None:
        return None
    if f.type == "array":
        assert f.item is not None
        if f.item.struct is not None:
            return [to_kafka_json(x, f.item.struct, v) for x in value]
        return [_json_leaf(x, f.item.type) for x in value]
    if f.type == "struct":
        assert f.struct is not None
        return to_kafka_json(value, f.struct, v)
    return _json_leaf(value, f.type)


def _json_leaf(value: Any, t: str) -> Any:
    if t == "uuid":
        return _kafka_uuid(value)
    if t in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode()
    return value


def _without_records(doc: Any, spec: StructSpec, v: int) -> Any:
    """Kafka's JSON of a message, record sets left out (its converter writes them as "")."""
    out = {}
    for f in spec.fields:
        key = _camel(f.json_name)
        if key not in doc or f.type == "records":
            continue
        value = doc[key]
        if value is not None and f.type == "array" and f.item is not None and f.item.struct is not None:
            value = [_without_records(x, f.item.struct, v) for x in value]
        elif value is not None and f.type == "struct" and f.struct is not None:
            value = _without_records(value, f.struct, v)
        out[key] = value
    return out


def _name(api_key: int) -> str:
    return SUPPORTED[ApiKey(api_key)][2]


def _without_default_tagged(doc: dict[str, Any], kafka: dict[str, Any], spec: StructSpec) -> dict[str, Any]:
    """Kafka's JSON leaves out a tagged field at its default (its bytes leave it out too)."""
    out = dict(doc)
    for f in spec.fields:
        key = _camel(f.json_name)
        if f.tag is not None and key in out and key not in kafka and out[key] in (0, False, None, "", []):
            del out[key]
    return out


def _type(api_key: int, kind: str) -> MessageType:
    return request_type(api_key) if kind == "Request" else response_type(api_key)


def test_every_version_kio_lacks_is_checked_here() -> None:
    # Every advertised version kio does not model is either checked against Kafka here or is one of
    # kafkette's own inter-broker schemas (hand-checked in test_crosscheck_kio.py).
    assert {(k, v) for k, v in UNMODELLED if k not in KAFKETTE_ONLY} == set(JAVA_CHECKED)
    assert {ApiKey(k).name for k, _v in JAVA_CHECKED} >= {
        "PRODUCE", "FETCH", "LIST_OFFSETS", "OFFSET_COMMIT", "OFFSET_FETCH", "CREATE_TOPICS", "DELETE_TOPICS",
        "OFFSET_FOR_LEADER_EPOCH", "DESCRIBE_ACLS", "CREATE_ACLS", "DELETE_ACLS", "DESCRIBE_CONFIGS",
        "DESCRIBE_LOG_DIRS", "WRITE_TXN_MARKERS"}


@pytest.mark.parametrize(("api_key", "version", "kind"), CASES,
                         ids=[f"{ApiKey(k).name}-v{v}-{kind}" for k, v, kind in CASES])
def test_codec_against_kafka_39(probe: Probe, api_key: int, version: int, kind: str) -> None:
    mt = _type(api_key, kind)
    rnd = random.Random(f"{api_key}-{version}-{kind}")
    shapes = ["random"] * RANDOM_EXAMPLES + list(SHAPES)
    for shape in shapes:
        msg = _message(rnd, mt.root, version, shape)
        ours = mt.encode(msg, version)
        doc = to_kafka_json(msg, mt.root, version)
        answer = probe.ask({"op": "message", "name": _name(api_key), "kind": kind, "version": version,
                            "json": doc, "ours": bytes(ours).hex()})
        assert "error" not in answer, (shape, doc, answer)
        kafka_bytes = bytes.fromhex(answer["encoded"])
        assert kafka_bytes == bytes(ours), (shape, doc)
        assert bytes.fromhex(answer["reencoded"]) == bytes(ours)
        back, end = mt.decode(memoryview(bytearray(kafka_bytes)), version)
        assert end == len(kafka_bytes)
        assert to_kafka_json(back, mt.root, version) == doc
        assert _without_records(answer["decoded"], mt.root, version) == _without_default_tagged(
            _without_records(doc, mt.root, version), answer["decoded"], mt.root)


# ---------------------------------------------------------------------------------------------
# Message formats v0/v1


def _records_of(rnd: random.Random, n: int, first: int) -> list[LegacyRecord]:
    def blob() -> bytes | None:
        return None if rnd.random() < 0.2 else rnd.randbytes(rnd.randrange(0, 30))
    return [LegacyRecord(first + i, 1_600_000_000_000 + rnd.randrange(100_000), blob(), blob()) for i in range(n)]


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


LEGACY = [(magic, codec, lat) for magic in (0, 1) for codec in ("none", "gzip", "snappy", "lz4")
          for lat in (False, True) if not (magic == 0 and lat)]


@pytest.mark.parametrize(("magic", "codec", "log_append_time"), LEGACY)
def test_kafka_reads_the_message_sets_we_build(probe: Probe, magic: int, codec: str, log_append_time: bool) -> None:
    rnd = random.Random(f"build-{magic}-{codec}-{log_append_time}")
    ids = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
           "lz4": CompressionType.LZ4}
    records = _records_of(rnd, 17, 40)
    lat = 1_650_000_000_000 if log_append_time else None
    data = build_message_set(records, magic=magic, codec=ids[codec], log_append_time=lat)
    answer = probe.ask({"op": "parse_records", "hex": data.hex()})
    assert "error" not in answer, answer
    batches = answer["batches"]
    assert len(batches) == (len(records) if codec == "none" else 1)
    for b in batches:
        assert b["magic"] == magic and b["valid"] and b["compression"] == codec
        assert b["timestampType"] == ("NoTimestampType" if magic == 0 else
                                      "LogAppendTime" if log_append_time else "CreateTime")
    got = [(r["offset"], r["timestamp"], r["key"], r["value"]) for b in batches for r in b["records"]]
    want = [(r.offset, -1 if magic == 0 else (lat if lat is not None else r.timestamp), _b64(r.key), _b64(r.value))
            for r in records]
    assert got == want
    if codec != "none":
        assert batches[0]["lastOffset"] == records[-1].offset
        assert batches[0]["maxTimestamp"] == (-1 if magic == 0 else lat if lat is not None
                                              else max(r.timestamp for r in records))


@pytest.mark.parametrize(("magic", "codec", "log_append_time"), LEGACY)
def test_we_read_the_message_sets_kafka_builds(probe: Probe, magic: int, codec: str, log_append_time: bool) -> None:
    rnd = random.Random(f"parse-{magic}-{codec}-{log_append_time}")
    records = _records_of(rnd, 23, 1000)
    lat = 1_650_000_000_000 if log_append_time else -1
    answer = probe.ask({"op": "build_records", "magic": magic, "codec": codec,
                        "timestampType": "NoTimestampType" if magic == 0 else
                        "LogAppendTime" if log_append_time else "CreateTime",
                        "logAppendTime": lat, "baseOffset": records[0].offset,
                        "records": [{"offset": r.offset, "timestamp": r.timestamp, "key": _b64(r.key),
                                     "value": _b64(r.value)} for r in records]})
    assert "error" not in answer, answer
    data = bytes.fromhex(answer["hex"])
    got = []
    for entry in iter_shallow(data):
        assert entry.is_valid and entry.magic == magic
        for m in (iter_deep(entry) if entry.is_compressed else [entry]):
            assert m.is_valid
            got.append((m.offset, m.timestamp, m.key, m.value))
    want = [(r.offset, -1 if magic == 0 else (lat if log_append_time else r.timestamp), r.key, r.value)
            for r in records]
    assert got == want
