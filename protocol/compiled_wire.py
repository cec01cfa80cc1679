"""The compiled codec of the busiest messages (``protocol/_wire.c``), where it is built.

The broker decodes every produce and fetch request and encodes every answer to them; in Python these
cost about as much as the rest of a request's framing. The compiled functions take the common shapes
(produce versions 3 to 11 and fetch versions 4 to 17, requests without tagged fields, answers without
record errors, error messages, leader hints or other tagged fields set) and give None for everything
else, so the generated codec (``protocol/schema.py``) decides there, with its own errors. Without a C
compiler the extension is not built and every function always gives None.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from protocol.api_versions import ApiKey
from protocol.messages import request_type, response_type
from protocol.schema import MISSING, ZERO_UUID, FileRegion, FileRegions, Struct, StructSpec, in_versions

_Decoder = Callable[[memoryview, int, int], "tuple[Struct, int] | None"]
_Encoder = Callable[[int, int, Any], "bytes | None"]
_PartsEncoder = Callable[[int, int, Any], "list[bytes | memoryview | FileRegion] | None"]


def _absent_field_defaults(spec: StructSpec, version: int) -> tuple[tuple[str, int, Any], ...]:
    """(name, kind, value) for each field of ``spec`` that ``version`` does not carry on the wire (or
    carries tagged), with the generated decoder's default: kind 0 shares ``value`` (immutable), 1 calls
    it for a fresh struct, 2 makes a fresh empty list."""
    out: list[tuple[str, int, Any]] = []
    for f in spec.fields:
        if in_versions(f.versions, version) and not in_versions(f.tagged, version):
            continue
        if f.type == "struct" and f.struct is not None and f.default_spec is MISSING:
            out.append((f.name, 1, f.struct.cls))
        elif f.type == "array" and f.default_spec == []:
            out.append((f.name, 2, None))
        else:
            out.append((f.name, 0, f.default_spec))
    return tuple(out)


def _load() -> tuple[_Decoder, _Encoder, _PartsEncoder, _Decoder] | None:
    try:
        from protocol import _wire
    except ImportError:  # pragma: no cover - the slim image has no compiler
        return None
    mt = request_type(ApiKey.PRODUCE)
    fields = (mt.cls._fields, mt.TopicProduceData._fields, mt.PartitionProduceData._fields)
    if fields != (("transactional_id", "acks", "timeout_ms", "topic_data"), ("name", "partition_data"),
                  ("index", "records")):
        return None  # a schema the compiled codec does not know: the generated one decodes
    rs = response_type(ApiKey.PRODUCE)
    if (rs.cls._fields, rs.TopicProduceResponse._fields, rs.PartitionProduceResponse._fields) != (
            ("responses", "throttle_time_ms", "node_endpoints"), ("name", "partition_responses"),
            ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset", "record_errors",
             "error_message", "current_leader")):
        return None
    fetch = response_type(ApiKey.FETCH)
    if (fetch.cls._fields, fetch.FetchableTopicResponse._fields, fetch.PartitionData._fields) != (
            ("throttle_time_ms", "error_code", "session_id", "responses", "node_endpoints"),
            ("topic", "topic_id", "partitions"),
            ("partition_index", "error_code", "high_watermark", "last_stable_offset", "log_start_offset",
             "diverging_epoch", "current_leader", "snapshot_id", "aborted_transactions", "preferred_read_replica",
             "records")):
        return None
    fr = request_type(ApiKey.FETCH)
    structs = [fr.structs[name] for name in ("FetchRequest", "FetchTopic", "FetchPartition", "ForgottenTopic")]
    if tuple(tuple(f.name for f in s.fields) for s in structs) != (
            ("cluster_id", "replica_id", "replica_state", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level",
             "session_id", "session_epoch", "topics", "forgotten_topics_data", "rack_id"),
            ("topic", "topic_id", "partitions"),
            ("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch", "log_start_offset",
             "partition_max_bytes", "replica_directory_id"),
            ("topic", "topic_id", "partitions")):
        return None
    request, topic, partition, forgotten = (s.cls for s in structs)
    if request is None or topic is None or partition is None or forgotten is None:
        return None
    _wire.configure(mt.cls, mt.TopicProduceData, mt.PartitionProduceData, FileRegions)
    _wire.configure_fetch((request, topic, partition, forgotten), uuid.UUID, ZERO_UUID,
                          {v: tuple(_absent_field_defaults(s, v) for s in structs) for v in range(4, 18)})
    return (_wire.decode_produce, _wire.encode_produce_response, _wire.encode_fetch_response,
            _wire.decode_fetch)


_COMPILED = _load()
COMPILED = _COMPILED is not None


def decode_produce(frame: memoryview, pos: int, version: int) -> tuple[Struct, int] | None:
    """A produce request's body from ``pos`` in ``frame``, or None (decode it with the schema)."""
    if _COMPILED is None:
        return None
    return _COMPILED[0](frame, pos, version)


def encode_produce_response(version: int, correlation_id: int, body: Any) -> bytes | None:
    """The whole answer frame (size prefix and header included), or None (encode it with the schema)."""
    if _COMPILED is None:
        return None
    return _COMPILED[1](version, correlation_id, body)


def decode_fetch(frame: memoryview, pos: int, version: int) -> tuple[Struct, int] | None:
    """A fetch request's body from ``pos`` in ``frame`` (versions 4 to 17), or None (decode it with the
    schema)."""
    if _COMPILED is None:
        return None
    return _COMPILED[3](frame, pos, version)


def encode_fetch_response(version: int, correlation_id: int,
                          body: Any) -> list[bytes | memoryview | FileRegion] | None:
    """The whole answer frame as parts in wire order (``encode_response``'s form: record sets spliced
    in, not copied), or None (encode it with the schema)."""
    if _COMPILED is None:
        return None
    return _COMPILED[2](version, correlation_id, body)
