"""The blocking wrapper around ``protocol.client_connection``: the CLI's and tools' connections.

One socket per broker. The state machine does the protocol work (correlation ids, the in-flight
limit, ApiVersions negotiation, authentication steps); this module moves bytes with blocking
``sendall`` / ``recv_into`` and turns failures into the CLI's errors. ``send`` / ``receive`` may be
pipelined (the load generators keep several requests in flight); ``call`` is one round trip.

Security: a ``ConnectionSecurity`` (built from the client properties by ``clients/client_config.py``)
wraps the socket in TLS (``SSLContext.wrap_socket``; the handshake runs within the socket timeout) and
gives the SASL steps the state machine runs before the connection is ready.

Errors: :class:`KafkaWireError` carries Kafka's error code and name; :class:`ConnectionFailed` says
which address could not be reached or was lost; :class:`AuthenticationFailed` says the broker refused
who we are (SASL) or the TLS handshake failed, which retrying another broker does not fix.
"""

from __future__ import annotations

import contextlib
import random
import socket
import ssl
import time
from collections import deque
from typing import Any

from protocol.api_versions import SUPPORTED, ApiKey
from protocol.client_connection import (
    PLAINTEXT,
    AuthenticationError,
    ClientConnection,
    ConnectionSecurity,
    NoCommonVersionError,
    Response,
)
from protocol.errors import ErrorCode, error_info
from protocol.exceptions import ProtocolError
from protocol.messages import request_type

__all__ = ["CAPS", "CLIENT_SOFTWARE", "AuthenticationFailed", "BrokerConnection", "ConnectionFailed",
           "KafkaWireError", "UsageError", "WireError", "check"]

CLIENT_SOFTWARE = ("kafkette-cli", "0.1.0")

# Highest version of each API this client builds requests for (the layout it knows).
CAPS: dict[int, int] = {
    ApiKey.METADATA: 12,
    ApiKey.FETCH: 12,
    ApiKey.PRODUCE: 11,
    ApiKey.OFFSET_FETCH: 7,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.DELETE_TOPICS: 5,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.JOIN_GROUP: 7,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.HEARTBEAT: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 4,
    ApiKey.DESCRIBE_CLUSTER: 1,
    ApiKey.INIT_PRODUCER_ID: 4,
}


class WireError(Exception):
    """Anything the CLI reports as one line and a non-zero exit status."""


class UsageError(WireError):
    """Bad input found before anything was sent (the CLI exits with status 2)."""


class ConnectionFailed(WireError):
    pass


class AuthenticationFailed(WireError):
    """SASL refused or the TLS handshake failed (Kafka's AuthenticationException): not retried."""


class KafkaWireError(WireError):
    def __init__(self, code: int, message: str | None = None, context: str = "") -> None:
        info = error_info(code)
        self.code = code
        self.name = info.name
        detail = message or info.message
        prefix = f"{context}: " if context else ""
        super().__init__(f"{prefix}{info.name}: {detail}")


def check(code: int, message: str | None = None, context: str = "") -> None:
    if code:
        raise KafkaWireError(code, message, context)


class BrokerConnection:
    """One blocking connection, ready (negotiated and authenticated) once constructed.

    KIP-368: when the broker granted a SASL session lifetime, a request sent once the session is in its
    renewal window (85-95% of the lifetime) and nothing is in flight goes on a fresh connection
    (connected and authenticated again in place), so a long-running command never sends on a session
    the broker is about to close.
    """

    def __init__(self, host: str, port: int, *, client_id: str, timeout: float, node_id: int = -1,
                 connect_timeout: float = 10.0, max_in_flight: int = 5,
                 security: ConnectionSecurity = PLAINTEXT) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        self.client_id = client_id
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_in_flight = max_in_flight
        self.security = security
        self._responses: deque[Response] = deque()
        self.renewals = 0  # connections opened again to renew the SASL session
        self._open()

    def _open(self) -> None:
        host, port, security = self.host, self.port, self.security
        self.sm = ClientConnection(self.client_id, max_in_flight=self.max_in_flight, version_caps=CAPS,
                                   auth_steps=security.auth_steps(), client_software=CLIENT_SOFTWARE)
        self.renew_at: float | None = None
        try:
            sock = socket.create_connection((host, port), timeout=min(self.timeout, self.connect_timeout))
        except OSError as e:
            raise ConnectionFailed(f"cannot connect to {host}:{port}: {e.strerror or e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if security.ssl_context is not None:
            try:
                sock = security.ssl_context.wrap_socket(sock, server_hostname=security.server_hostname or host)
            except ssl.SSLError as e:
                sock.close()
                raise AuthenticationFailed(f"SSL handshake with {host}:{port} failed: {e}") from None
            except OSError as e:
                sock.close()
                raise ConnectionFailed(f"lost connection to {host}:{port} during the SSL handshake: "
                                       f"{e.strerror or e}") from None
        self.sock = sock
        self.sock.settimeout(self.timeout)
        self.sm.start()
        self._flush()
        while not self.sm.is_ready:
            self._pump()
        if self.sm.session_lifetime_ms > 0:
            lifetime = self.sm.session_lifetime_ms / 1000.0
            self.renew_at = time.monotonic() + lifetime * (0.85 + 0.10 * random.random())

    def _renew_if_due(self) -> None:
        if self.renew_at is None or time.monotonic() < self.renew_at or self.sm.in_flight or self.sm.closed:
            return
        self.sm.close(ConnectionFailed("session renewal"))
        with contextlib.suppress(OSError):
            self.sock.close()
        self.renewals += 1
        self._open()

    @property
    def versions(self) -> dict[int, tuple[int, int]]:
        return self.sm.broker_versions

    def version(self, api_key: int) -> int:
        try:
            return self.sm.version(api_key)
        except NoCommonVersionError as e:
            ours = SUPPORTED.get(api_key)  # type: ignore[call-overload]
            name = ours[2] if ours else str(api_key)
            raise WireError(f"UNSUPPORTED_VERSION: broker {self.host}:{self.port} ({name}): {e}") from None

    def supports(self, api_key: int) -> bool:
        return self.sm.supports(api_key)

    @property
    def in_flight(self) -> int:
        return self.sm.in_flight

    def send(self, api_key: int, version: int | None, body: Any, expect_response: bool = True) -> int:
        """Send one request (waiting for responses first when the in-flight limit is reached)."""
        self._renew_if_due()
        while expect_response and not self.sm.can_send and not self.sm.closed:
            self._pump()
        try:
            cid = self.sm.send(api_key, body, version=version, expect_response=expect_response)
        except ConnectionError as e:
            raise ConnectionFailed(f"lost connection to {self.host}:{self.port}: {e}") from None
        self._flush()
        return cid

    def receive(self) -> Any:
        """The body of the oldest response not yet received."""
        while not self._responses:
            if not self.sm.in_flight:
                raise WireError(f"no request in flight to {self.host}:{self.port}")
            self._pump()
        return self._responses.popleft().body

    def call(self, api_key: int, version: int | None = None, **fields: Any) -> Any:
        v = self.version(api_key) if version is None else version
        self.send(api_key, v, request_type(api_key)(**fields))
        return self.receive()

    def close(self) -> None:
        self.sm.close(ConnectionFailed("closed"))
        with contextlib.suppress(OSError):
            self.sock.close()

    # -- moving bytes -----------------------------------------------------------------------------

    def _flush(self) -> None:
        data = self.sm.data_to_send()
        if not data:
            return
        try:
            self.sock.sendall(data)
        except OSError as e:
            self.close()
            raise ConnectionFailed(f"lost connection to {self.host}:{self.port}: {e}") from None

    def _pump(self) -> None:
        """One ``recv`` into the state machine's buffer; queues complete responses."""
        try:
            n = self.sock.recv_into(self.sm.get_buffer())
        except TimeoutError:
            self.close()
            raise KafkaWireError(ErrorCode.REQUEST_TIMED_OUT,
                                 f"no answer from {self.host}:{self.port} within {self.timeout:.0f}s") from None
        except (OSError, ProtocolError) as e:
            self.close()
            raise ConnectionFailed(f"lost connection to {self.host}:{self.port}: {e}") from None
        if n == 0:
            self.close()
            raise ConnectionFailed(f"lost connection to {self.host}:{self.port}: connection closed by the broker")
        try:
            events = self.sm.buffer_updated(n)
        except ProtocolError as e:  # mismatched correlation id, undecodable response: the connection is dead
            self.close()
            raise WireError(f"bad response from {self.host}:{self.port}: {e}") from None
        except AuthenticationError as e:
            self.close()
            name = f"{error_info(e.error_code).name}: " if e.error_code is not None else ""
            raise AuthenticationFailed(f"authentication with {self.host}:{self.port} failed: {name}{e}") from None
        except Exception as e:
            self.close()
            raise ConnectionFailed(f"connection setup with {self.host}:{self.port} failed: {e}") from None
        self._flush()  # an authentication step may have queued its next request
        self._responses.extend(e for e in events if isinstance(e, Response))
