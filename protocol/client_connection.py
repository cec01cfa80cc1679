"""The client side of one Kafka connection, sans-I/O: requests in, bytes out; bytes in, responses out.

Every outgoing connection (controller to broker, follower to leader, forwarding, transaction
markers, the CLI) runs this state machine under one of two wrappers: ``controller/network_client.py``
(asyncio) and ``clients/connection.py`` (blocking sockets). It owns what Kafka's ``NetworkClient``
and ``InFlightRequests`` own for one node:

- **correlation ids**: one counter per connection. Kafka brokers answer a connection's requests in
  order, so a response must carry the correlation id of the oldest request in flight; anything else
  means the stream is out of step and the connection is dead (``CorrelationMismatchError``), as
  Kafka's ``NetworkClient.correlate`` decides.
- **in-flight limit** (``max.in.flight.requests.per.connection``): ``send`` refuses a request past
  the limit with ``InFlightLimitError``; a wrapper waits for ``can_send``.
- **version negotiation**: the connection starts with ApiVersions (v3, falling back to the version
  the broker names when it answers UNSUPPORTED_VERSION, KIP-511) and then picks, per API, the highest
  version both sides implement (optionally capped where the caller only builds an older layout).
  Connections between kafkette brokers may instead pin their versions (``negotiate_versions=False``):
  each inter-broker API exists at exactly one version, so the extra round trip buys nothing.
- **authentication steps**: after ApiVersions and before the connection is ready, each
  ``AuthStep`` runs in turn. A step issues requests and reads their responses until it is done, so a
  SASL mechanism is a step that sends SaslHandshake and then SaslAuthenticate rounds
  (``protocol/sasl_client.py``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). A step may record the session
  lifetime the broker granted (KIP-368) in ``session_lifetime_ms``; the wrapper acts on it.

``ConnectionSecurity`` bundles what ``security.protocol`` decides for one outgoing connection: the TLS
context the wrapper wraps the socket with (SSL, SASL_SSL) and a factory of fresh authentication steps
(SASL_PLAINTEXT, SASL_SSL). Steps keep per-exchange state (a SCRAM nonce), so every connection gets
new ones from the factory.

States: ``NEGOTIATING`` (ApiVersions in flight) -> ``AUTHENTICATING`` (steps running) -> ``READY``
-> ``CLOSED``. Requests sent before ``READY`` are refused; a wrapper waits for the ready event.
"""

from __future__ import annotations

import enum
import itertools
import ssl
import struct
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.api_versions import SUPPORTED, ApiKey
from protocol.errors import ErrorCode
from protocol.exceptions import ProtocolError
from protocol.framing import FrameReader
from protocol.messages import decode_response, encode_request, request_type
from protocol.schema import Struct

__all__ = [
    "API_VERSIONS_REQUEST_VERSION", "PLAINTEXT", "AuthStep", "AuthStepFactory", "AuthenticationError",
    "ClientConnection", "ConnectionClosedError", "ConnectionReady", "ConnectionSecurity", "ConnectionState",
    "CorrelationMismatchError", "InFlightLimitError", "InFlightRequest", "NoAuthStep", "NoCommonVersionError",
    "NotReadyError", "Response", "StepRequest",
]

API_VERSIONS_REQUEST_VERSION = 3  # the first flexible version; carries client software name/version (KIP-511)
DEFAULT_MAX_RESPONSE_BYTES = 1 << 30
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


class ConnectionState(enum.Enum):
    NEGOTIATING = "negotiating"
    AUTHENTICATING = "authenticating"
    READY = "ready"
    CLOSED = "closed"


class ConnectionClosedError(ConnectionError):
    """The connection is closed: nothing more can be sent or received on it."""


class CorrelationMismatchError(ProtocolError):
    """A response whose correlation id is not the oldest request's in flight (the connection dies)."""


class InFlightLimitError(Exception):
    """``max_in_flight`` requests already await responses on this connection."""


class NotReadyError(Exception):
    """A request before negotiation and authentication finished."""


class NoCommonVersionError(ProtocolError):
    """The broker does not implement any version of an API that this client implements."""

    error_code = ErrorCode.UNSUPPORTED_VERSION


class AuthenticationError(Exception):
    """An authentication step failed; the connection is closed.

    ``error_code`` is Kafka's error (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
    ILLEGAL_SASL_STATE) when the broker named one, else None (e.g. a bad SCRAM server signature).
    """

    def __init__(self, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(slots=True)
class StepRequest:
    """A request an authentication step wants sent (``version`` None: the negotiated one)."""

    api_key: int
    body: Struct
    version: int | None = None


class AuthStep(Protocol):
    """One authentication exchange run after ApiVersions and before the connection is ready.

    ``start`` returns the first request, or None when there is nothing to exchange. Each response is
    handed to ``on_response``, which returns the next request or None when the step is done. Raise
    ``AuthenticationError`` to fail the connection. A SASL mechanism maps onto this directly:
    SaslHandshake (mechanism), then SaslAuthenticate rounds until the server's last token.
    """

    def start(self, conn: ClientConnection) -> StepRequest | None: ...

    def on_response(self, conn: ClientConnection, api_key: int, body: Struct) -> StepRequest | None: ...


class NoAuthStep:
    """PLAINTEXT: nothing to exchange."""

    def start(self, conn: ClientConnection) -> StepRequest | None:
        return None

    def on_response(self, conn: ClientConnection, api_key: int, body: Struct) -> StepRequest | None:
        raise AuthenticationError(f"unexpected response to api key {api_key} during PLAINTEXT setup")


AuthStepFactory = Callable[[], Sequence[AuthStep]]


@dataclass(frozen=True, slots=True)
class ConnectionSecurity:
    """How one outgoing connection is secured (the parts of Kafka's ``security.protocol``).

    ``ssl_context`` set: the wrapper speaks TLS (SSL, SASL_SSL); ``server_hostname`` is the name the
    broker's certificate is checked against (None: the host connected to; only consulted when the
    context checks host names, i.e. ``ssl.endpoint.identification.algorithm=https``). ``auth`` set:
    a factory of fresh authentication steps run on every new connection (SASL_*).
    """

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    server_hostname: str | None = None
    auth: AuthStepFactory | None = None

    def auth_steps(self) -> Sequence[AuthStep]:
        return self.auth() if self.auth is not None else ()


PLAINTEXT = ConnectionSecurity()


@dataclass(slots=True)
class InFlightRequest:
    correlation_id: int
    api_key: int
    api_version: int
    token: Any  # the caller's handle for this request (a future, a queue item...)
    internal: bool = False  # ApiVersions or an authentication step's request


@dataclass(slots=True)
class Response:
    correlation_id: int
    api_key: int
    api_version: int
    body: Struct
    token: Any


@dataclass(slots=True)
class ConnectionReady:
    """Negotiation and authentication are done: requests may be sent."""


Event = Response | ConnectionReady


class ClientConnection:
    """One connection's protocol state; the wrapper moves the bytes."""

    def __init__(self, client_id: str | None, *, max_in_flight: int = 5, negotiate_versions: bool = True,
                 version_caps: dict[int, int] | None = None, auth_steps: Sequence[AuthStep] = (),
                 client_software: tuple[str, str] = ("kafkette", "0.1.0"),
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES, first_correlation_id: int = 1) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.client_id = client_id
        self.max_in_flight = max_in_flight
        self.negotiate_versions = negotiate_versions
        self.version_caps = dict(version_caps or {})
        self.client_software = client_software
        self.state = ConnectionState.NEGOTIATING
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.close_reason: BaseException | None = None
        # The session lifetime the broker granted at authentication (SaslAuthenticate v1+, KIP-368);
        # 0: none, the session does not expire.
        self.session_lifetime_ms = 0
        self._steps: deque[AuthStep] = deque(auth_steps or (NoAuthStep(),))
        self._step: AuthStep | None = None
        self._reader = FrameReader(max_response_bytes)
        self._correlation = itertools.count(first_correlation_id)
        self._in_flight: deque[InFlightRequest] = deque()
        self._out: list[bytes] = []
        self._started = False

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> list[Event]:
        """Call once the transport is connected: queues ApiVersions (or the first auth step's request)."""
        if self._started:
            raise RuntimeError("connection already started")
        self._started = True
        if self.negotiate_versions:
            self._send_api_versions(API_VERSIONS_REQUEST_VERSION)
            return []
        self.state = ConnectionState.AUTHENTICATING
        return self._next_step()

    @property
    def is_ready(self) -> bool:
        return self.state is ConnectionState.READY

    @property
    def closed(self) -> bool:
        return self.state is ConnectionState.CLOSED

    def close(self, reason: BaseException | None = None) -> list[InFlightRequest]:
        """Mark the connection dead; returns the caller's requests that will never be answered
        (also after the state machine itself found the stream broken), each once."""
        if self.state is not ConnectionState.CLOSED:
            self.state = ConnectionState.CLOSED
            self.close_reason = reason
        lost = [r for r in self._in_flight if not r.internal]
        self._in_flight.clear()
        self._out.clear()
        return lost

    # -- versions ---------------------------------------------------------------------------------

    def version(self, api_key: int, cap: int | None = None) -> int:
        """The highest version of ``api_key`` both sides implement (at most ``cap`` / the configured cap)."""
        # ApiKey is an IntEnum, so a plain int finds its member; the dict's declared key type hides that.
        ours: tuple[int, int, str] | None = SUPPORTED.get(api_key)  # type: ignore[call-overload]
        if ours is None:
            raise NoCommonVersionError(f"this client does not implement api key {api_key}")
        lo, hi = ours[0], ours[1]
        for c in (cap, self.version_caps.get(api_key)):
            if c is not None:
                hi = min(hi, c)
        if self.negotiate_versions:
            theirs = self.broker_versions.get(api_key)
            if theirs is None:
                raise NoCommonVersionError(f"the broker does not support {ours[2]}")
            lo, hi = max(lo, theirs[0]), min(hi, theirs[1])
        if hi < lo:
            raise NoCommonVersionError(f"no common version of {ours[2]} with the broker")
        return hi

    def supports(self, api_key: int) -> bool:
        try:
            self.version(api_key)
        except NoCommonVersionError:
            return False
        return True

    # -- sending ----------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def can_send(self) -> bool:
        return self.state is ConnectionState.READY and len(self._in_flight) < self.max_in_flight

    def send(self, api_key: int, body: Struct, *, version: int | None = None, expect_response: bool = True,
             token: Any = None) -> int:
        """Queue a request; returns its correlation id. ``version`` None: the negotiated version.

        ``expect_response=False`` is for Produce with acks=0, which the broker never answers.
        """
        if self.state is ConnectionState.CLOSED:
            raise ConnectionClosedError(f"connection closed: {self.close_reason!r}")
        if self.state is not ConnectionState.READY:
            raise NotReadyError(f"connection is {self.state.value}")
        if expect_response and len(self._in_flight) >= self.max_in_flight:
            raise InFlightLimitError(f"{len(self._in_flight)} requests already in flight")
        v = self.version(api_key) if version is None else version
        return self._enqueue(api_key, v, body, token, expect_response=expect_response)

    def data_to_send(self) -> bytes:
        """Everything encoded since the last call, in order (empty when nothing is pending)."""
        if not self._out:
            return b""
        out = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        return out

    def _enqueue(self, api_key: int, version: int, body: Struct, token: Any, *, expect_response: bool = True,
                 internal: bool = False) -> int:
        corr = next(self._correlation) & 0x7FFFFFFF
        self._out.append(encode_request(api_key, version, corr, self.client_id, body))
        if expect_response:
            self._in_flight.append(InFlightRequest(corr, api_key, version, token, internal))
        return corr

    # -- receiving --------------------------------------------------------------------------------

    def get_buffer(self) -> memoryview:
        """Memory to receive into (``recv_into`` / ``BufferedProtocol``); then call ``buffer_updated``."""
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> list[Event]:
        return self._frames(self._reader.buffer_updated(nbytes))

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Bytes from the socket in; responses (and ``ConnectionReady``) out."""
        return self._frames(self._reader.feed(data))

    @property
    def pending_bytes(self) -> int:
        return self._reader.pending

    def _frames(self, frames: Iterable[memoryview]) -> list[Event]:
        if self.state is ConnectionState.CLOSED:
            raise ConnectionClosedError(f"connection closed: {self.close_reason!r}")
        events: list[Event] = []
        for frame in frames:
            events += self._response(frame)
        return events

    def _response(self, frame: memoryview) -> list[Event]:
        if len(frame) < 4:
            raise self._fail(ProtocolError(f"response of {len(frame)} bytes has no correlation id"))
        (corr,) = _I32.unpack_from(frame, 0)
        if not self._in_flight:
            raise self._fail(CorrelationMismatchError(f"response with correlation id {corr} but nothing in flight"))
        req = self._in_flight[0]
        if corr != req.correlation_id:
            raise self._fail(CorrelationMismatchError(
                f"correlation id {corr} does not match the oldest request in flight ({req.correlation_id}, "
                f"api key {req.api_key})"))
        self._in_flight.popleft()
        try:
            if req.api_key == ApiKey.API_VERSIONS and req.internal:
                return self._on_api_versions(req, frame)
            _c, body = decode_response(req.api_key, req.api_version, frame)
        except ProtocolError as e:
            raise self._fail(e) from None
        except (ValueError, IndexError, struct.error, UnicodeDecodeError) as e:
            raise self._fail(ProtocolError(f"undecodable response to api key {req.api_key}: {e}")) from None
        if req.internal:
            return self._on_step_response(req.api_key, body)
        return [Response(corr, req.api_key, req.api_version, body, req.token)]

    def _fail(self, err: BaseException) -> BaseException:
        # The requests in flight stay listed: the wrapper's close() collects them to fail them.
        if self.state is not ConnectionState.CLOSED:
            self.state = ConnectionState.CLOSED
            self.close_reason = err
        self._out.clear()
        return err

    # -- negotiation and authentication ------------------------------------------------------------

    def _send_api_versions(self, version: int) -> None:
        body = request_type(ApiKey.API_VERSIONS)(client_software_name=self.client_software[0],
                                                 client_software_version=self.client_software[1])
        self._enqueue(ApiKey.API_VERSIONS, version, body, None, internal=True)

    def _on_api_versions(self, req: InFlightRequest, frame: memoryview) -> list[Event]:
        # A broker that does not speak our ApiVersions version answers UNSUPPORTED_VERSION with a v0
        # body (header v0 always, then the error code) listing its ranges; retry at its highest.
        (code,) = _I16.unpack_from(frame, 4) if len(frame) >= 6 else (-1,)
        version = 0 if code == ErrorCode.UNSUPPORTED_VERSION else req.api_version
        _c, body = decode_response(ApiKey.API_VERSIONS, version, frame)
        if body.error_code == ErrorCode.UNSUPPORTED_VERSION and req.api_version > 0:
            theirs = {k.api_key: k.max_version for k in body.api_keys}
            retry = min(theirs.get(ApiKey.API_VERSIONS, 0), req.api_version - 1)
            self._send_api_versions(max(retry, 0))
            return []
        if body.error_code != ErrorCode.NONE:
            raise self._fail(ProtocolError(f"ApiVersions failed with error {body.error_code}"))
        self.broker_versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        self.state = ConnectionState.AUTHENTICATING
        return self._next_step()

    def _next_step(self) -> list[Event]:
        while self._steps:
            self._step = self._steps.popleft()
            try:
                first = self._step.start(self)
            except AuthenticationError as e:
                raise self._fail(e) from None
            if first is not None:
                self._send_step_request(first)
                return []
        self._step = None
        self.state = ConnectionState.READY
        return [ConnectionReady()]

    def _send_step_request(self, r: StepRequest) -> None:
        v = r.version if r.version is not None else self.version(r.api_key)
        self._enqueue(r.api_key, v, r.body, None, internal=True)

    def _on_step_response(self, api_key: int, body: Struct) -> list[Event]:
        assert self._step is not None
        try:
            nxt = self._step.on_response(self, api_key, body)
        except AuthenticationError as e:
            raise self._fail(e) from None
        if nxt is not None:
            self._send_step_request(nxt)
            return []
        return self._next_step()

