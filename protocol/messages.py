"""Requests and responses as whole frames: headers plus bodies, for every API in the version table.

Server side: ``decode_request(frame)`` -> ``Request``; ``encode_response(request, body)`` -> wire parts
(bytes and ``FileRegion``s for sendfile). Client side (CLI, inter-broker calls, tests):
``encode_request`` and ``decode_response``.

Header rules (Kafka's): a request uses header v2 when its body version is flexible, else v1; a
response uses header v1 when flexible, else v0 -- except ApiVersions responses, which always use
header v0 so that a client can parse them before it knows which versions the broker speaks.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from protocol.api_versions import SUPPORTED, ApiKey, advertised, is_supported
from protocol.exceptions import ProtocolError, UnsupportedVersionError
from protocol.schema import FileRegion, MessageType, Output, Struct, message_type, skip_tagged_fields

_HDR = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@cache
def request_type(api_key: int) -> MessageType:
    entry = SUPPORTED.get(api_key)  # type: ignore[call-overload]
    if entry is None:
        raise KeyError(f"unknown api key {api_key}")
    return message_type(entry[2] + "Request")


@cache
def response_type(api_key: int) -> MessageType:
    entry = SUPPORTED.get(api_key)  # type: ignore[call-overload]
    if entry is None:
        raise KeyError(f"unknown api key {api_key}")
    return message_type(entry[2] + "Response")


def request_header_version(api_key: int, api_version: int) -> int:
    return 2 if request_type(api_key).is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if response_type(api_key).is_flexible(api_version) else 0


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int = 1


@dataclass(slots=True)
class Request:
    header: RequestHeader
    body: Struct
    size: int  # frame size in bytes, for metrics and quotas

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version


def peek_header(frame: memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame, for error handling before a full decode."""
    if len(frame) < 8:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a request header")
    return _HDR.unpack_from(frame, 0)


# (api key, version) -> (request header version, body MessageType), filled on first use
_REQUEST_PLANS: dict[tuple[int, int], tuple[int, MessageType]] = {}


def _request_plan(api_key: int, api_version: int, correlation_id: int) -> tuple[int, MessageType]:
    plan = _REQUEST_PLANS.get((api_key, api_version))
    if plan is None:
        if not is_supported(api_key, api_version):
            raise UnsupportedVersionError(
                f"unsupported api key {api_key} version {api_version}",
                api_key=api_key, api_version=api_version, correlation_id=correlation_id)
        plan = _REQUEST_PLANS[(api_key, api_version)] = (request_header_version(api_key, api_version),
                                                         request_type(api_key))
    return plan


def decode_request_header(frame: memoryview) -> tuple[RequestHeader, int]:
    api_key, api_version, correlation_id = peek_header(frame)
    hv = _request_plan(api_key, api_version, correlation_id)[0]
    try:
        (n,) = _I16.unpack_from(frame, 8)
        pos = 10
        if n < 0:
            client_id = None
        else:
            if pos + n > len(frame):
                raise ProtocolError("client id runs past the end of the frame")
            client_id = str(frame[pos:pos + n], "utf-8")
            pos += n
        if hv >= 2:
            pos = skip_tagged_fields(frame, pos)
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise ProtocolError(f"malformed request header: {e}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, hv), pos


def decode_request(frame: memoryview | bytes | bytearray) -> Request:
    """Decode one request frame (without its size prefix).

    Pass a memoryview over a ``bytearray`` to get writable zero-copy ``records`` views in Produce.
    Raises ``UnsupportedVersionError`` for unknown keys/versions and ``ProtocolError`` for anything
    malformed, trailing bytes included.
    """
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    header, pos = decode_request_header(view)
    body, _ = _REQUEST_PLANS[(header.api_key, header.api_version)][1].decode(view, header.api_version, pos)
    return Request(header, body, len(view))


def encode_response(api_key: int, api_version: int, correlation_id: int,
                    body: Struct) -> list[bytes | memoryview | FileRegion]:
    """A whole response frame, size prefix included, as parts in wire order."""
    out = Output()
    out += b"\0\0\0\0"  # size placeholder
    out += _I32.pack(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        out.append(0)  # no tagged fields in the header
    response_type(api_key).encode_into(body, api_version, out)
    struct.pack_into(">i", out, 0, out.total_size - 4)
    return out.parts()


def encode_response_bytes(api_key: int, api_version: int, correlation_id: int, body: Struct) -> bytes:
    parts = encode_response(api_key, api_version, correlation_id, body)
    if any(isinstance(p, FileRegion) for p in parts):
        raise ValueError("response holds file regions")
    return b"".join(bytes(p) for p in parts)


def api_versions_body(error_code: int = 0, throttle_time_ms: int = 0) -> Struct:
    """The ApiVersions response body, built from the one version table."""
    mt = response_type(ApiKey.API_VERSIONS)
    keys = [mt.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in advertised()]
    return mt(error_code=error_code, api_keys=keys, throttle_time_ms=throttle_time_ms)


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """Answer to an ApiVersions request newer than we speak: v0 body, UNSUPPORTED_VERSION, our ranges.

    The client then retries with the highest version both sides know (KIP-511).
    """
    return encode_response_bytes(ApiKey.API_VERSIONS, 0, correlation_id, api_versions_body(error_code=35))


# ------------------------------------------------------------------------------------------------
# Client side


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body: Struct) -> bytes:
    """A whole request frame, size prefix included."""
    out = Output()
    out += b"\0\0\0\0"
    out += _HDR.pack(api_key, api_version, correlation_id)
    if client_id is None:
        out += b"\xff\xff"
    else:
        cid = client_id.encode("utf-8")
        out += _I16.pack(len(cid))
        out += cid
    if request_header_version(api_key, api_version) >= 2:
        out.append(0)
    request_type(api_key).encode_into(body, api_version, out)
    struct.pack_into(">i", out, 0, out.total_size - 4)
    return out.to_bytes()


def decode_response(api_key: int, api_version: int, frame: memoryview | bytes | bytearray) -> tuple[int, Struct]:
    """(correlation_id, body) of one response frame (without its size prefix)."""
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        (correlation_id,) = _I32.unpack_from(view, 0)
        pos = 4
        if response_header_version(api_key, api_version) >= 1:
            pos = skip_tagged_fields(view, pos)
    except (struct.error, IndexError):
        raise ProtocolError("response shorter than its header") from None
    body, _ = response_type(api_key).decode(view, api_version, pos)
    return correlation_id, body


def new_request(api_key: int, **fields: Any) -> Struct:
    return request_type(api_key)(**fields)


def new_response(api_key: int, **fields: Any) -> Struct:
    return response_type(api_key)(**fields)
