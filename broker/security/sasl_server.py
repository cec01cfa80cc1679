"""SASL authentication on SASL_PLAINTEXT and SASL_SSL listeners (Kafka's SaslServerAuthenticator).

Each connection on a SASL listener gets a ``SaslAuthenticator`` in front of the broker's request
handler. Until the client has authenticated it serves, itself:

- ApiVersions (delegated to the broker: clients ask before they pick a handshake version), at most once;
- SaslHandshake v0-v1 naming an enabled mechanism (else UNSUPPORTED_SASL_MECHANISM, and the connection
  fails); v1 announces SaslAuthenticate framing, v0 raw tokens (KIP-43: after a v0 handshake the client
  sends each SASL token as a bare size-prefixed frame with no Kafka header, and gets bare frames back);
- SaslAuthenticate v0-v2 carrying the mechanism's tokens (KIP-152); v1+ responses carry the session
  lifetime (KIP-368).

Anything else before authentication fails the connection (Kafka's IllegalSaslStateException). Once
authenticated, ``conn.principal`` is ``User:<authorization id>`` and every frame goes to the broker.

Failures (Kafka's AuthenticationException) are counted per listener, logged (rate limited) and answered
as Kafka answers them, with the error response if the failure has one; the connection is then held,
reading nothing, for ``connection.failed.authentication.delay.ms`` (KIP-306: a client cannot hammer
the broker with password guesses over one connection) and closed. Kafka holds the response back for
the delay and closes right after sending it; sending it first means the response and the close do
not reach the client together (kafka-python drops a response that arrives with the end of the
stream, and would only see a lost connection). Other clients are not affected.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 (per listener, and per listener and
mechanism), a session ends that long after it was authenticated. A SaslHandshake on an authenticated
connection that has a session end starts re-authentication, with the same mechanism and principal, at
most once a second; a password changed meanwhile is the one checked. Any other request after the
session's end closes the connection (Kafka's SocketServer does the same; it counts them as
expired-connections-killed-count).

Before authentication, frames are bounded by ``sasl.server.max.receive.size`` (the connection's frame
limit is lowered until authentication completes), so an unauthenticated client cannot make the broker
allocate ``socket.request.max.bytes``.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from broker.connection import CloseConnection, Connection, Handler, HandlerResult, Parts
from broker.deferred_response import DeferredResponse
from broker.rate_limited_log import RateLimitedLog
from broker.security.jaas import plain_users, server_jaas_entries
from broker.security.principal import USER_TYPE, KafkaPrincipal
from broker.security.sasl_mechanism import SaslAuthenticationFailed, SaslFailed, SaslMechanismServer
from broker.security.sasl_plain import MECHANISM as PLAIN
from broker.security.sasl_plain import PlainSaslServer
from broker.security.sasl_scram import MECHANISMS as SCRAM_MECHANISMS
from broker.security.sasl_scram import ScramSaslServer
from broker.security.scram_credentials import ScramCredentialCache, ZkCall
from config.registry import BrokerConfig, ConfigError
from protocol.api_versions import ApiKey, is_supported
from protocol.errors import ErrorCode
from protocol.exceptions import ProtocolError
from protocol.messages import (
    Request,
    decode_request_header,
    encode_response,
    peek_header,
    request_type,
    response_type,
)
from protocol.schema import FileRegion

if TYPE_CHECKING:
    from broker.config_changes import ConfigChangeListener
    from controller.zk_client import KafkaZkClient

__all__ = ["SASL_PROTOCOLS", "SUPPORTED_MECHANISMS", "BrokerSasl", "SaslAuthenticator", "SaslServer", "SaslSettings",
           "SaslStats", "listener_settings"]

log = logging.getLogger(__name__)
# A client that fails on purpose, over and over, must not fill the log.
failure_log = RateLimitedLog(log, burst=5)

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
UNSUPPORTED_MECHANISMS = ("GSSAPI", "OAUTHBEARER")  # Kafka's other built-in mechanisms
MIN_REAUTH_INTERVAL_S = 1.0  # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS

_SH = response_type(ApiKey.SASL_HANDSHAKE)
_SA = response_type(ApiKey.SASL_AUTHENTICATE)
_SIZE = struct.Struct(">i")


# -- configuration --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SaslSettings:
    """What one listener's SASL configs say, read once per config generation."""

    mechanisms: tuple[str, ...]
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)  # passwords
    max_reauth_ms: dict[str, int] = field(default_factory=dict)  # per mechanism; 0 = sessions do not end
    max_receive_size: int = 524_288  # sasl.server.max.receive.size
    failed_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    request_max_bytes: int = 104_857_600  # socket.request.max.bytes, restored once authenticated


def _per_mechanism(config: BrokerConfig, listener: str, name: str, mechanism: str) -> Any:
    """``listener.name.<l>.<mech>.<name>``, else ``listener.name.<l>.<name>``, else ``<name>`` (the
    lookup order Kafka documents for connections.max.reauth.ms)."""
    with_mechanism = config.listener_get(listener, name, mechanism)
    if with_mechanism != config.get(name):
        return with_mechanism
    return config.listener_get(listener, name)


def listener_settings(config: BrokerConfig, listener: str) -> SaslSettings:
    """Check and read a SASL listener's configs; ConfigError names what is wrong."""
    configured = config.listener_get(listener, "sasl.enabled.mechanisms") or ()
    mechanisms = tuple(dict.fromkeys(m.strip() for m in configured if m.strip()))
    if not mechanisms:
        raise ConfigError("sasl.enabled.mechanisms", ",".join(configured),
                          f"No SASL mechanisms are enabled on listener {listener}")
    for mechanism in mechanisms:
        if mechanism in UNSUPPORTED_MECHANISMS:
            raise ConfigError("sasl.enabled.mechanisms", ",".join(mechanisms),
                              f"SASL mechanism {mechanism} is not supported (listener {listener}); kafkette "
                              f"supports {', '.join(SUPPORTED_MECHANISMS)}")
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError("sasl.enabled.mechanisms", ",".join(mechanisms),
                              f"unknown SASL mechanism {mechanism} (listener {listener}); kafkette supports "
                              f"{', '.join(SUPPORTED_MECHANISMS)}")
    users: dict[str, str] = {}
    for mechanism in mechanisms:
        # Kafka needs a JAAS login context for every enabled mechanism, SCRAM's too.
        entries = server_jaas_entries(config, listener, mechanism)
        if mechanism == PLAIN:
            users = plain_users(entries)
    return SaslSettings(
        mechanisms=mechanisms, plain_users=users,
        max_reauth_ms={m: int(_per_mechanism(config, listener, "connections.max.reauth.ms", m) or 0)
                       for m in mechanisms},
        max_receive_size=int(config.listener_get(listener, "sasl.server.max.receive.size")),
        failed_delay_ms=int(config.get("connection.failed.authentication.delay.ms")),
        request_max_bytes=int(config.get("socket.request.max.bytes")))


# -- counters -------------------------------------------------------------------------------------


class SaslStats:
    """Per-listener counters with Kafka's socket-server metric names (read by broker/metrics.py)."""

    NAMES = ("successful-authentication-total", "successful-reauthentication-total",
             "successful-authentication-no-reauth-total", "failed-authentication-total",
             "failed-reauthentication-total", "expired-connections-killed-count")

    def __init__(self) -> None:
        self.by_listener: dict[str, dict[str, int]] = {}

    def add(self, listener: str, name: str, n: int = 1) -> None:
        counters = self.by_listener.setdefault(listener, dict.fromkeys(self.NAMES, 0))
        counters[name] += n

    def get(self, listener: str, name: str) -> int:
        return self.by_listener.get(listener, {}).get(name, 0)

    def totals(self, listener: str) -> dict[str, int]:
        """Every counter of ``listener`` (zeros included), keyed by Kafka's metric name."""
        return dict(self.by_listener.get(listener, dict.fromkeys(self.NAMES, 0)))


# -- one listener ---------------------------------------------------------------------------------


class SaslServer:
    """One SASL listener: its settings (re-read when the broker's config changes) and a
    ``SaslAuthenticator`` per connection."""

    def __init__(self, config: Callable[[], BrokerConfig], listener: str, security_protocol: str,
                 credentials: ScramCredentialCache, stats: SaslStats) -> None:
        self._config = config
        self.listener = listener
        self.security_protocol = security_protocol
        self.credentials = credentials
        self.stats = stats
        self._seen = config()
        self._settings = listener_settings(self._seen, listener)  # ConfigError: start-up fails

    def settings(self) -> SaslSettings:
        config = self._config()
        if config is not self._seen:
            self._seen = config
            try:
                self._settings = listener_settings(config, self.listener)
            except ConfigError as e:
                log.error("keeping the previous SASL settings of listener %s: %s", self.listener, e)
        return self._settings

    def wrap(self, handler: Handler) -> Handler:
        """The handler for one new connection: authentication first, then ``handler``."""
        return SaslAuthenticator(self, handler).handle

    def attach(self, conn: Connection) -> None:
        """Put authentication in front of a new connection's handler (before it serves a request)."""
        conn.handler = self.wrap(conn.handler)
        conn.security_protocol = self.security_protocol
        conn.max_request_bytes = min(conn.max_request_bytes, self.settings().max_receive_size)

    def mechanism_server(self, mechanism: str) -> SaslMechanismServer:
        if mechanism == PLAIN:
            return PlainSaslServer(lambda: self.settings().plain_users)
        return ScramSaslServer(mechanism, self.credentials.get, self.credentials.tokens)


class BrokerSasl:
    """The broker's SASL side: a SaslServer per SASL listener, the SCRAM credential cache they share,
    and the counters. Built with the broker (a bad SASL config fails start-up), started once
    ZooKeeper is up."""

    def __init__(self, config: Callable[[], BrokerConfig], listeners: Iterable[_Listener]) -> None:
        self.credentials = ScramCredentialCache()
        self.stats = SaslStats()
        self.servers = {e.name: SaslServer(config, e.name, e.security_protocol, self.credentials, self.stats)
                        for e in listeners if e.security_protocol in SASL_PROTOCOLS}

    async def start(self, zk: KafkaZkClient, zk_call: ZkCall, changes: ConfigChangeListener) -> None:
        await self.credentials.start(zk, zk_call, changes)

    def attach(self, conn: Connection) -> None:
        """Authentication for ``conn`` when its listener is a SASL listener."""
        server = self.servers.get(conn.listener)
        if server is not None:
            server.attach(conn)


class _Listener(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def security_protocol(self) -> str: ...


# -- one connection -------------------------------------------------------------------------------


class _Failure(Exception):
    """Authentication failed: ``message`` is logged; ``response`` (if any) goes to the client before
    the connection closes."""

    def __init__(self, message: str, response: Parts | None = None) -> None:
        super().__init__(message)
        self.response = response


def _decode(frame: memoryview) -> Request:
    header, pos = decode_request_header(frame)
    body, _end = request_type(header.api_key).decode(frame, header.api_version, pos, exact=False)
    return Request(header, body, len(frame))


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


def _error_code_of_api_versions(parts: HandlerResult) -> int:
    """The error code of an encoded ApiVersions response (header v0: size, correlation id, then the
    body's error_code)."""
    if not parts or isinstance(parts, DeferredResponse):
        return -1
    head = b"".join(bytes(p) for p in parts if not isinstance(p, FileRegion))[:10]
    return int.from_bytes(head[8:10], "big", signed=True) if len(head) == 10 else -1


def session_lifetime_ms(max_reauth_ms: int, credential_expiry_ms: int | None, now_ms: int) -> int:
    """Kafka's SaslServerAuthenticator: a session ends after connections.max.reauth.ms, or when its
    credential expires (a delegation token), whichever comes first; 0 means it does not end, so a
    credential at its last millisecond still gets 1."""
    if credential_expiry_ms is None:
        return max(0, max_reauth_ms)
    left = max(1, credential_expiry_ms - now_ms)
    return min(left, max_reauth_ms) if max_reauth_ms > 0 else left


class SaslAuthenticator:
    """The SASL state of one connection (Kafka's SaslServerAuthenticator plus KafkaChannel's
    re-authentication bookkeeping)."""

    def __init__(self, server: SaslServer, inner: Handler) -> None:
        self.server = server
        self.inner = inner
        # initial -> (ApiVersions) handshake -> (SaslHandshake) authenticate -> complete; failed.
        # Re-authentication: complete -> (SaslHandshake) authenticate or reauth-bad-mechanism -> ...
        self.state = "initial"
        self.first_packet = True
        self.kafka_headers = False  # SaslAuthenticate framing (handshake v1) rather than raw tokens
        self.mechanism: str | None = None
        self.mechanism_server: SaslMechanismServer | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_end: float | None = None  # monotonic; None: the session does not end
        self.reauthenticating = False
        self.last_reauth_start: float | None = None
        self.client_supports_reauth = False
        self.bad_mechanism_message = ""

    @property
    def _what(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    async def handle(self, conn: Connection, frame: memoryview) -> HandlerResult:
        if self.state == "complete":
            return await self._authenticated(conn, frame)
        try:
            return await self._authenticating(conn, frame)
        except _Failure as failure:
            await self._fail(conn, failure)
            raise CloseConnection() from None

    # -- after authentication --------------------------------------------------------------------

    async def _authenticated(self, conn: Connection, frame: memoryview) -> HandlerResult:
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        now = time.monotonic()
        if api_key == ApiKey.SASL_HANDSHAKE and self._may_begin_reauthentication(now):
            self.reauthenticating = True
            self.last_reauth_start = now
            self.state = "handshake"
            conn.max_request_bytes = min(conn.max_request_bytes, self.server.settings().max_receive_size)
            log.debug("beginning re-authentication of %s (%s)", conn.peer, self.principal)
            try:
                return await self._handshake(conn, frame)
            except _Failure as failure:
                await self._fail(conn, failure)
                raise CloseConnection() from None
        if self.session_end is not None and now > self.session_end:
            self.server.stats.add(self.server.listener, "expired-connections-killed-count")
            log.debug("closing connection %s of %s: its SASL session ended and it did not re-authenticate",
                      conn.peer, self.principal)
            raise CloseConnection()
        # Another SaslHandshake/SaslAuthenticate here is answered ILLEGAL_SASL_STATE by the broker.
        return await self.inner(conn, frame)

    def _may_begin_reauthentication(self, now: float) -> bool:
        """Only sessions that end can be renewed, and not more than once a second (Kafka's rule);
        otherwise the handshake goes to the broker, which answers ILLEGAL_SASL_STATE."""
        if self.session_end is None:
            return False
        return self.last_reauth_start is None or now - self.last_reauth_start >= MIN_REAUTH_INTERVAL_S

    # -- before authentication -------------------------------------------------------------------

    async def _authenticating(self, conn: Connection, frame: memoryview) -> HandlerResult:
        if self.state == "reauth-bad-mechanism":
            raise _Failure(self.bad_mechanism_message)
        if self.state in ("initial", "handshake"):
            return await self._kafka_request(conn, frame)
        if self.state != "authenticate":
            raise CloseConnection()  # failed: nothing more is read from this client
        if self.kafka_headers:
            return self._authenticate_request(conn, frame)
        return self._raw_token(conn, frame)

    async def _kafka_request(self, conn: Connection, frame: memoryview) -> HandlerResult:
        first, self.first_packet = self.first_packet, False
        try:
            api_key, _version, _corr = peek_header(frame)
            ApiKey(api_key)
        except (ProtocolError, ValueError):
            if first:
                # Kafka would take this for a GSSAPI token from a 0.9 client (no handshake).
                raise _Failure("Exception handling first SASL packet from client, GSSAPI is not supported "
                               "by server") from None
            raise ProtocolError("not a Kafka request during the SASL handshake") from None
        if api_key == ApiKey.API_VERSIONS:
            if self.state != "initial" or self.reauthenticating:
                # Kafka: IllegalStateException, not an authentication failure: the connection just closes.
                log.debug("closing connection %s: a second ApiVersions request during SASL authentication",
                          conn.peer)
                raise CloseConnection()
            parts = await self.inner(conn, frame)
            # A version the broker does not speak (or an invalid request) is answered with an error, and
            # the client may ask again; an answered one moves on to the handshake.
            if _error_code_of_api_versions(parts) == ErrorCode.NONE:
                self.state = "handshake"
            return parts
        if api_key != ApiKey.SASL_HANDSHAKE:
            raise _Failure(f"Unexpected Kafka request of type {_api_name(api_key)} during SASL handshake.")
        return await self._handshake(conn, frame)

    async def _handshake(self, conn: Connection, frame: memoryview) -> Parts:
        request = _decode(frame)  # ProtocolError / UnsupportedVersionError close the connection
        header = request.header
        mechanism = request.body.mechanism
        self.kafka_headers = header.api_version >= 1
        enabled = list(self.server.settings().mechanisms)
        if mechanism not in enabled:
            response = encode_response(ApiKey.SASL_HANDSHAKE, header.api_version, header.correlation_id,
                                       _SH(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled))
            raise _Failure(f"Unsupported SASL mechanism {mechanism}", response)
        if self.reauthenticating and mechanism != self.mechanism:
            # Kafka answers the handshake and fails at the next token (so the failure is counted as
            # a failed re-authentication).
            self.bad_mechanism_message = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                          f"re-authentication of mechanism '{self.mechanism}'")
            self.state = "reauth-bad-mechanism"
        else:
            self.mechanism = mechanism
            self.mechanism_server = self.server.mechanism_server(mechanism)
            self.state = "authenticate"
        return encode_response(ApiKey.SASL_HANDSHAKE, header.api_version, header.correlation_id,
                               _SH(error_code=ErrorCode.NONE, mechanisms=enabled))

    def _authenticate_request(self, conn: Connection, frame: memoryview) -> Parts:
        api_key, version, correlation_id = peek_header(frame)
        if api_key != ApiKey.SASL_AUTHENTICATE:
            message = f"Unexpected Kafka request of type {_api_name(api_key)} during SASL authentication."
            response = None
            if api_key == ApiKey.SASL_HANDSHAKE and is_supported(api_key, version):
                response = encode_response(api_key, version, correlation_id,
                                           _SH(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]))
            raise _Failure(message, response)
        request = _decode(frame)  # an unsupported version: Kafka cannot answer it either, and closes
        # KIP-368: a client that speaks SaslAuthenticate v1+ learns its session lifetime.
        self.client_supports_reauth = self.client_supports_reauth or version > 0

        def failure(message: str) -> Parts:
            return encode_response(ApiKey.SASL_AUTHENTICATE, version, correlation_id, _SA(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message, auth_bytes=b""))

        try:
            challenge = self._evaluate(conn, bytes(request.body.auth_bytes))
        except SaslAuthenticationFailed as e:
            raise _Failure(str(e), failure(str(e))) from None
        except SaslFailed as e:
            # Kafka does not tell the client why (it could learn whether a user exists).
            message = (f"Authentication failed during {self._what} due to invalid credentials with SASL mechanism "
                       f"{self.mechanism}")
            raise _Failure(f"{message} ({e})", failure(message)) from None
        lifetime_ms = self._complete(conn) if self._mechanism().complete else 0
        return encode_response(ApiKey.SASL_AUTHENTICATE, version, correlation_id, _SA(
            error_code=ErrorCode.NONE, error_message=None, auth_bytes=challenge or b"",
            session_lifetime_ms=lifetime_ms))

    def _raw_token(self, conn: Connection, frame: memoryview) -> Parts | None:
        """SaslHandshake v0: the frame is the token itself; the answer is a bare size-prefixed token."""
        try:
            challenge = self._evaluate(conn, bytes(frame))
        except SaslAuthenticationFailed as e:
            raise _Failure(str(e)) from None
        except SaslFailed as e:
            raise _Failure(f"Authentication failed during {self._what} due to invalid credentials with SASL "
                           f"mechanism {self.mechanism} ({e})") from None
        if self._mechanism().complete:
            self._complete(conn)
        if challenge is None:
            return None
        return [_SIZE.pack(len(challenge)) + challenge]

    def _mechanism(self) -> SaslMechanismServer:
        assert self.mechanism_server is not None
        return self.mechanism_server

    def _evaluate(self, conn: Connection, token: bytes) -> bytes | None:
        mechanism = self._mechanism()
        challenge = mechanism.evaluate(token)
        if mechanism.complete:
            principal = KafkaPrincipal(USER_TYPE, mechanism.authorization_id, mechanism.token_authenticated)
            if self.reauthenticating and self.principal is not None and principal != self.principal:
                raise SaslAuthenticationFailed(
                    f"Cannot change principals during re-authentication from {self.principal.principal_type}."
                    f"{self.principal.name}: {principal.principal_type}.{principal.name}")
        return challenge

    def _complete(self, conn: Connection) -> int:
        """The exchange succeeded: the connection is this principal's until the session ends. Returns
        the session lifetime for the client (0: the session does not end)."""
        settings = self.server.settings()
        assert self.mechanism is not None
        mechanism = self._mechanism()
        lifetime_ms = session_lifetime_ms(settings.max_reauth_ms.get(self.mechanism, 0),
                                          mechanism.credential_expiry_ms, int(time.time() * 1000))
        self.session_end = time.monotonic() + lifetime_ms / 1000.0 if lifetime_ms > 0 else None
        self.principal = KafkaPrincipal(USER_TYPE, mechanism.authorization_id, mechanism.token_authenticated)
        conn.principal = self.principal
        conn.max_request_bytes = settings.request_max_bytes
        self.mechanism_server = None
        self.state = "complete"
        stats, listener = self.server.stats, self.server.listener
        if self.reauthenticating:
            stats.add(listener, "successful-reauthentication-total")
            log.debug("re-authenticated %s as %s", conn.peer, self.principal)
        else:
            stats.add(listener, "successful-authentication-total")
            if not self.client_supports_reauth:
                stats.add(listener, "successful-authentication-no-reauth-total")
            log.debug("authenticated %s as %s with %s", conn.peer, self.principal, self.mechanism)
        self.reauthenticating = False
        return lifetime_ms

    async def _fail(self, conn: Connection, failure: _Failure) -> None:
        """Count and log, send the failure's response (if any), then hold the connection, reading
        nothing, for connection.failed.authentication.delay.ms; the caller then closes it."""
        again = self.reauthenticating
        self.state = "failed"
        self.mechanism_server = None
        stats, listener = self.server.stats, self.server.listener
        stats.add(listener, "failed-reauthentication-total" if again else "failed-authentication-total")
        failure_log.log(logging.INFO, f"failed-{'re' if again else ''}auth-{listener}",
                        "Failed %sauthentication with %s on listener %s (%s)", "re-" if again else "", conn.peer,
                        listener, failure)
        if failure.response is not None:
            await conn.write_parts(failure.response)
        delay_ms = self.server.settings().failed_delay_ms
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000.0)
