"""The compiled Produce codec (``protocol/_produce_wire.c``), where it is built.

The broker decodes every produce request and encodes every answer; in Python the two cost about as
much as the rest of a request's framing. The compiled pair takes the common shapes (versions 3 to 11,
no tagged fields in the request, an answer without record errors, error messages or leader hints) and
gives None for everything else, so the generated codec (``protocol/schema.py``) decides there, with
its own errors. Without a C compiler the extension is not built and both functions always give None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.api_versions import ApiKey
from protocol.messages import request_type, response_type
from protocol.schema import Struct

_Decoder = Callable[[memoryview, int, int], "tuple[Struct, int] | None"]
_Encoder = Callable[[int, int, Any], "bytes | None"]


def _load() -> tuple[_Decoder, _Encoder] | None:
    try:
        from protocol import _produce_wire
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
    _produce_wire.configure(mt.cls, mt.TopicProduceData, mt.PartitionProduceData)
    return _produce_wire.decode_produce, _produce_wire.encode_produce_response


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
