"""Request dispatch: one coroutine per API key, each returning a response body (Kafka's KafkaApis).

Handlers receive the decoded request and return the response body for the same version; the
dispatcher encodes it with the right header. A handler that raises gets its request answered with
the API's error form where one exists, else the connection is closed; either way one line is logged
and the broker carries on.

With ``control.plane.listener.name`` set, the controller-to-broker APIs (LeaderAndIsr, UpdateMetadata,
StopReplica) are served only on that listener. A request for one of them on another listener is
answered the way Kafka's network layer answers an API its listener does not enable (and the way it
treats an Envelope off the privileged listener): no response, the connection is closed. Kafka 3.9 in
ZooKeeper mode itself serves them on every listener and relies on CLUSTER_ACTION authorization; the
listener check is what stands in for it here, since kafkette has no authorizer.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.connection import CloseConnection, limited_log
from protocol.api_versions import REFUSED, ApiKey
from protocol.errors import ErrorCode
from protocol.exceptions import ProtocolError, UnsupportedVersionError
from protocol.messages import (
    Request,
    api_versions_body,
    decode_request_header,
    encode_response,
    peek_header,
    request_type,
    response_type,
    unsupported_api_versions_response,
)

if TYPE_CHECKING:
    from broker.connection import Connection, Parts

log = logging.getLogger(__name__)

# Sent by the controller to brokers: served only on the control-plane listener when there is one.
CONTROL_PLANE_APIS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA})

# KIP-511: client software name and version must look like this, else INVALID_REQUEST.
_SOFTWARE_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

HandlerFn = Callable[["Connection", Request], Awaitable[Any]]


class KafkaApis:
    def __init__(self, control_plane_listener: str | None) -> None:
        # Controller-to-broker APIs are served only on this listener when it is set.
        self.control_plane_listener = control_plane_listener
        self.handlers: dict[int, HandlerFn] = {ApiKey.API_VERSIONS: self.handle_api_versions}
        self.request_stats: dict[int, list[float]] = {}  # api key -> [count, total seconds]
        self.observer: Callable[[Request, float], None] | None = None
        self.refused_off_control_plane = 0  # connections closed by the listener check (metrics)

    def register(self, api_key: int, fn: HandlerFn) -> None:
        self.handlers[api_key] = fn

    async def handle_frame(self, conn: Connection, frame: memoryview) -> Parts | None:
        if self.listener_refuses(conn, frame):
            raise CloseConnection()
        try:
            request = self.decode(frame)
        except UnsupportedVersionError as e:
            if e.api_key == ApiKey.API_VERSIONS and e.correlation_id is not None:
                # KIP-511: answer a too-new ApiVersions with v0, error 35 and our ranges.
                return [unsupported_api_versions_response(e.correlation_id)]
            raise ProtocolError(str(e)) from None  # the connection logs it once and closes
        except ProtocolError as e:
            try:
                api_key, api_version, _ = peek_header(frame)
                what = f"api key {api_key} v{api_version}"
            except ProtocolError:
                what = "request"
            raise ProtocolError(f"malformed {what}: {e}") from None
        hdr = request.header
        refused = REFUSED.get(hdr.api_key)  # type: ignore[call-overload]
        handler = self.handlers.get(hdr.api_key)
        started = time.monotonic()
        if refused and refused[0] <= hdr.api_version <= refused[1]:
            body = self.refuse(request)
        elif handler is None:
            raise ProtocolError(f"api key {hdr.api_key} is not served by this broker")
        else:
            body = await handler(conn, request)
        elapsed = time.monotonic() - started
        stats = self.request_stats.setdefault(hdr.api_key, [0, 0.0])
        stats[0] += 1
        stats[1] += elapsed
        if self.observer is not None:  # request latency histograms (broker/metrics.py)
            self.observer(request, elapsed)
        if body is None:
            return None  # acks=0 produce
        return encode_response(hdr.api_key, hdr.api_version, hdr.correlation_id, body)

    def listener_refuses(self, conn: Connection, frame: memoryview) -> bool:
        control_plane = self.control_plane_listener
        if control_plane is None or conn.listener == control_plane or len(frame) < 2:
            return False
        api_key = int.from_bytes(frame[:2], "big", signed=True)
        if api_key not in CONTROL_PLANE_APIS:
            return False
        self.refused_off_control_plane += 1
        limited_log.log(logging.INFO, "control-plane", "Closing connection %s from listener %s because it sent a "
                        "%s request, which is only accepted on the control plane listener %s.", conn.peer,
                        conn.listener, ApiKey(api_key).name, control_plane)
        return True

    @staticmethod
    def decode(frame: memoryview) -> Request:
        """Decode a request; bytes after the body's last field are ignored, as Kafka ignores them.

        librdkafka (2.x) sends Metadata v9+ for all topics with the null topic array padded to four
        bytes, so a strict decoder would drop every librdkafka client.
        """
        header, pos = decode_request_header(frame)
        body, _end = request_type(header.api_key).decode(frame, header.api_version, pos, exact=False)
        return Request(header, body, len(frame))

    def refuse(self, request: Request) -> Any:
        """Produce v0-2: advertised for librdkafka's sake, answered UNSUPPORTED_VERSION per partition."""
        mt = response_type(ApiKey.PRODUCE)
        return mt(responses=[
            mt.TopicProduceResponse(name=t.name, partition_responses=[
                mt.PartitionProduceResponse(index=p.index, error_code=ErrorCode.UNSUPPORTED_VERSION,
                                            base_offset=-1)
                for p in t.partition_data])
            for t in request.body.topic_data])

    async def handle_api_versions(self, conn: Connection, request: Request) -> Any:
        body = request.body
        if request.api_version >= 3:
            name, version = body.client_software_name, body.client_software_version
            if not (_SOFTWARE_NAME.match(name or "") and _SOFTWARE_NAME.match(version or "")):
                return api_versions_body(error_code=ErrorCode.INVALID_REQUEST)
        return api_versions_body()
