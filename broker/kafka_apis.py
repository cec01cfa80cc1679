"""Request dispatch: one coroutine per API key, each returning a response body (Kafka's KafkaApis).

Handlers receive the decoded request and return the response body for the same version; the
dispatcher encodes it with the right header. A handler that raises gets its request answered with
the API's error form where one exists, else the connection is closed; either way one line is logged
and the broker carries on.

With ``control.plane.listener.name`` set, the controller-to-broker APIs (LeaderAndIsr, UpdateMetadata,
StopReplica) are served only on that listener. A request for one of them on another listener is
answered the way Kafka's network layer answers an API its listener does not enable (and the way it
treats an Envelope off the privileged listener): no response, the connection is closed. Kafka 3.9 in
ZooKeeper mode itself serves them on every listener and relies on CLUSTER_ACTION authorization alone;
here both apply: the listener check, and CLUSTER_ACTION when an authorizer is configured
(broker/controller_glue.py).

Client quotas (broker/quota/) are enforced here, after the handler, as Kafka's KafkaApis and
RequestHandlerHelper do: Produce records its request bytes, a consumer Fetch its response bytes (and is
answered without data when throttled, its bytes taken back), every other API its share of the event
loop; CreateTopics, CreatePartitions and DeleteTopics also count partitions against the controller
mutation quota. The largest throttle time goes into the response's ``throttle_time_ms`` and the
connection is muted for that long after the response (KIP-219). Replica fetches and the
controller/inter-broker APIs are exempt. With no quota configured anywhere the ordinary path costs one
attribute check.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.connection import CloseConnection, limited_log
from broker.deferred_response import DeferredResponse
from broker.fetch_session import throttled_fetch_response
from broker.quota.loop_time import LoopTimed
from broker.quota.mutation import (
    STRICT_SINCE_VERSION,
    PermissiveMutationQuota,
    StrictMutationQuota,
    current_mutation_quota,
)
from protocol.api_versions import ApiKey
from protocol.compiled_wire import (
    decode_fetch,
    decode_produce,
    encode_fetch_response,
    encode_produce_response,
)
from protocol.errors import ErrorCode
from protocol.exceptions import ProtocolError, UnsupportedVersionError
from protocol.messages import (
    Request,
    api_versions_body,
    decode_request_header,
    encode_response,
    peek_header,
    request_type,
    unsupported_api_versions_response,
)
from protocol.schema import FileRegion, FileRegions, Struct

if TYPE_CHECKING:
    from broker.connection import Connection, HandlerResult, Parts
    from broker.metrics_timing import RequestClock
    from broker.quota import QuotaManagers

log = logging.getLogger(__name__)

# Sent by the controller to brokers: served only on the control-plane listener when there is one.
CONTROL_PLANE_APIS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA})

# KIP-511: client software name and version must look like this, else INVALID_REQUEST.
_SOFTWARE_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

# Answered without counting against request quotas, as Kafka answers them: the controller and
# inter-broker requests whose KafkaApis handlers answer with sendResponseExemptThrottle, and SASL
# authentication (done before requests are served). Not every clusterAction API is exempt: Kafka 3.9
# answers AllocateProducerIds and UpdateFeatures with sendResponseMaybeThrottle (in ZooKeeper and KRaft
# mode alike), so they count and may be throttled, here as there.
QUOTA_EXEMPT_APIS = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.WRITE_TXN_MARKERS, ApiKey.ALTER_PARTITION, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
# APIs that may create or delete partitions: CreateTopics, DeleteTopics and CreatePartitions, and the
# automatic topic creation of Metadata and FindCoordinator (always permissive).
_MUTATING_APIS = frozenset({ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
                            ApiKey.METADATA, ApiKey.FIND_COORDINATOR})

HandlerFn = Callable[["Connection", Request], Awaitable[Any]]


class KafkaApis:
    def __init__(self, control_plane_listener: str | None) -> None:
        # Controller-to-broker APIs are served only on this listener when it is set.
        self.control_plane_listener = control_plane_listener
        self.handlers: dict[int, HandlerFn] = {ApiKey.API_VERSIONS: self.handle_api_versions}
        self.request_stats: dict[int, list[float]] = {}  # api key -> [count, total seconds]
        # Request metrics (broker/metrics_requests.py): (clock, request, response body, handler start,
        # handler end), called once a response body is ready.
        self.observer: Callable[[RequestClock, Request, Any, float, float], None] | None = None
        self.refused_off_control_plane = 0  # connections closed by the listener check (metrics)
        self.quotas: QuotaManagers | None = None  # client quotas, once loaded (broker/quota)

    def register(self, api_key: int, fn: HandlerFn) -> None:
        self.handlers[api_key] = fn

    async def handle_frame(self, conn: Connection, frame: memoryview) -> HandlerResult:
        if self.listener_refuses(conn, frame):
            raise CloseConnection()
        quotas = self.quotas
        decode_started = time.perf_counter_ns() if quotas is not None and quotas.active else 0
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
        handler = self.handlers.get(hdr.api_key)
        started = time.monotonic()
        if handler is None:
            raise ProtocolError(f"api key {hdr.api_key} is not served by this broker")
        elif decode_started and quotas is not None and quotas.active and hdr.api_key not in QUOTA_EXEMPT_APIS:
            decode_ns = time.perf_counter_ns() - decode_started
            return await self._handle_with_quotas(conn, request, handler, quotas, started, decode_ns)
        else:
            body = await handler(conn, request)
            if type(body) is DeferredResponse:
                # The connection goes on to the next request; this one is answered (in order) later.
                return DeferredResponse(self._respond_later(conn, request, body, started, conn.clock))
        return self._respond(conn, request, body, started)

    async def _respond_later(self, conn: Connection, request: Request, deferred: DeferredResponse, started: float,
                             clock: RequestClock) -> Parts | None:
        return self._respond(conn, request, await deferred.result(), started, clock=clock)

    def _respond(self, conn: Connection, request: Request, body: Any, started: float,
                 parts: Parts | None = None, clock: RequestClock | None = None) -> Parts | None:
        """Count the request (stats, latency) and encode its response (None: no response)."""
        hdr = request.header
        done = time.monotonic()
        stats = self.request_stats.setdefault(hdr.api_key, [0, 0.0])
        stats[0] += 1
        stats[1] += done - started
        observer = self.observer
        if observer is not None:  # request metrics: errors now, the phases once the response is written
            observer(clock or conn.clock, request, body, started, done)
        if body is None:
            return None  # acks=0 produce
        if parts is not None:
            return parts
        if hdr.api_key == ApiKey.FETCH:
            compiled = encode_fetch_response(hdr.api_version, hdr.correlation_id, body)
            if compiled is not None:
                return compiled
        elif hdr.api_key == ApiKey.PRODUCE:
            frame = encode_produce_response(hdr.api_version, hdr.correlation_id, body)
            if frame is not None:
                return [frame]
        return encode_response(hdr.api_key, hdr.api_version, hdr.correlation_id, body)

    async def _handle_with_quotas(self, conn: Connection, request: Request, handler: HandlerFn,
                                  quotas: QuotaManagers, started: float, decode_ns: int) -> Parts | None:
        """Run the handler, then record the request against the client's quotas and throttle it."""
        hdr = request.header
        api_key, version = hdr.api_key, hdr.api_version
        req: Any = request.body
        if api_key == ApiKey.FETCH and (req.replica_id if version < 15 else req.replica_state.replica_id) >= 0:
            return self._respond(conn, request, await handler(conn, request), started)  # replication is exempt
        user = quotas.user_of(conn.principal)
        client_id = hdr.client_id or ""
        fetch_quota = quotas.fetch
        if api_key == ApiKey.FETCH and fetch_quota.enabled and version >= 3:
            # A fetch bigger than the quota allows over the window would be throttled however
            # quiet the consumer had been: ask for no more (KafkaApis' maxQuotaWindowBytes).
            cap = fetch_quota.max_value_in_window(user, client_id)
            if cap < req.max_bytes:
                req.max_bytes = int(cap)
                req.min_bytes = min(req.min_bytes, req.max_bytes)

        mutation = quotas.controller_mutation
        mutation_quota: StrictMutationQuota | PermissiveMutationQuota | None = None
        token = None
        if mutation.enabled and api_key in _MUTATING_APIS:
            sensors = mutation.sensors_for(user, client_id)
            strict_since = STRICT_SINCE_VERSION.get(api_key)
            if strict_since is not None and version >= strict_since:
                mutation_quota = StrictMutationQuota(mutation, sensors)
            else:
                mutation_quota = PermissiveMutationQuota(mutation, sensors)
            token = current_mutation_quota.set(mutation_quota)
        request_quota = quotas.request
        timed: LoopTimed | None = None
        try:
            if request_quota.enabled:
                timed = LoopTimed(handler(conn, request))
                body = await timed
            else:
                body = await handler(conn, request)
            if type(body) is DeferredResponse:
                # Throttling applies to the whole request: it is answered here, not deferred.
                body = await body.result()
        finally:
            if token is not None:
                current_mutation_quota.reset(token)

        now = request_quota.clock()
        request_ms = 0
        request_sensors = None
        # acks=0 produce is exempt from the request quota (its bytes still count).
        if timed is not None and not (api_key == ApiKey.PRODUCE and req.acks == 0):
            request_sensors = request_quota.sensors_for(user, client_id)
            request_ms = request_quota.record_time(request_sensors, decode_ns + timed.busy_ns, now)
        other_ms = 0
        other = None  # (manager, sensors) of the quota other than the request quota
        parts: Parts | None = None
        if api_key == ApiKey.PRODUCE and quotas.produce.enabled:
            sensors = quotas.produce.sensors_for(user, client_id)
            other_ms = quotas.produce.record(sensors, request.size, now)
            other = (quotas.produce, sensors)
        elif api_key == ApiKey.FETCH:
            if fetch_quota.enabled:
                parts = encode_response(api_key, version, hdr.correlation_id, body)
                size = _response_size(parts)
                sensors = fetch_quota.sensors_for(user, client_id)
                other_ms = fetch_quota.record(sensors, size, now)
                other = (fetch_quota, sensors)
                if max(other_ms, request_ms) > 0:
                    fetch_quota.unrecord(sensors, size, now)
            if max(other_ms, request_ms) > 0:
                # Throttled: answered without data (Kafka's getThrottledResponse: an incremental
                # fetch session goes on, a full fetch opens none).
                _release_fetch_regions(body)
                parts = None
                body = throttled_fetch_response(body)
        elif mutation_quota is not None and api_key in STRICT_SINCE_VERSION:
            other_ms = mutation_quota.throttle_time()
            other = (mutation, mutation_quota.sensors)

        throttle_ms = max(request_ms, other_ms)
        if throttle_ms > 0:
            if other is not None and other_ms > request_ms:
                other[0].record_throttle(other[1], other_ms, now)
            elif request_sensors is not None:
                request_quota.record_throttle(request_sensors, request_ms, now)
            if body is not None and "throttle_time_ms" in body._fields:
                body.throttle_time_ms = max(body.throttle_time_ms or 0, throttle_ms)
            conn.throttle(throttle_ms)
        return self._respond(conn, request, body, started, parts)

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
        if header.api_key == ApiKey.FETCH:
            decoded = decode_fetch(frame, pos, header.api_version)
            if decoded is not None:
                return Request(header, decoded[0], len(frame))
        elif header.api_key == ApiKey.PRODUCE:
            decoded = decode_produce(frame, pos, header.api_version)
            if decoded is not None:
                return Request(header, decoded[0], len(frame))
        body, _end = request_type(header.api_key).decode(frame, header.api_version, pos, exact=False)
        return Request(header, body, len(frame))

    async def handle_api_versions(self, conn: Connection, request: Request) -> Any:
        body = request.body
        if request.api_version >= 3:
            name, version = body.client_software_name, body.client_software_version
            if not (_SOFTWARE_NAME.match(name or "") and _SOFTWARE_NAME.match(version or "")):
                return api_versions_body(error_code=ErrorCode.INVALID_REQUEST)
        return api_versions_body()


def _release_fetch_regions(body: Struct) -> None:
    """Let go of the segment file regions a fetch response would have sent (it is not sent)."""
    for topic in body.responses or ():
        for partition in topic.partitions or ():
            records = partition.records
            if isinstance(records, FileRegions):
                for region in records:
                    if type(region) is FileRegion:
                        region.release()


def _response_size(parts: Parts) -> int:
    """Bytes of an encoded response after its size prefix."""
    size = -4
    for part in parts:
        size += part.length if isinstance(part, FileRegion) else len(part)
    return size
