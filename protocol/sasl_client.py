"""The client side of SASL (KIP-43, KIP-84, KIP-152, KIP-368) as authentication steps, sans-I/O.

``SaslStep`` is an ``AuthStep`` for ``protocol.client_connection.ClientConnection``: after ApiVersions
it sends SaslHandshake v1 naming the mechanism, then SaslAuthenticate rounds carrying the mechanism's
tokens until the mechanism is complete, as Kafka's ``SaslClientAuthenticator`` does:

- PLAIN (RFC 4616): one token, ``authzid NUL username NUL password`` (authzid empty); the broker's
  answer carries no token.
- SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka's ``ScramSaslClient``): client-first,
  server-first (its nonce must extend ours, its iteration count must be at least the mechanism's
  minimum of 4096), client-final with the proof, server-final, whose signature is verified; a server
  that cannot prove it knows the credential fails the connection.

Failures raise ``AuthenticationError`` with Kafka's error code and the broker's message when the broker
refused (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE), or with Kafka's
client-side text when the broker's messages do not check out.

KIP-368: every SaslAuthenticate v1+ response carries ``session_lifetime_ms``; the step records the
positive value on the connection (``ClientConnection.session_lifetime_ms``), for the wrapper to renew
the session before the broker would close the connection.

Only SaslHandshake v1 is spoken (SaslAuthenticate framing): Kafka brokers since 1.0 support it, and the
v0 path (raw tokens without a Kafka header) exists for clients older than that.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Callable, Sequence

from protocol import scram
from protocol.api_versions import ApiKey
from protocol.client_connection import AuthenticationError, AuthStep, ClientConnection, StepRequest
from protocol.errors import ErrorCode, error_info
from protocol.messages import new_request
from protocol.schema import Struct

__all__ = ["MECHANISMS", "PlainClient", "SaslMechanismClient", "SaslStep", "ScramClient", "mechanism_client",
           "sasl_auth_factory"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
HANDSHAKE_VERSION = 1


class SaslMechanismClient:
    """One mechanism's client exchange: the first token, then a token per server challenge."""

    mechanism = ""

    def initial_response(self) -> bytes:
        raise NotImplementedError

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next token for the server's ``challenge``; None when the exchange is complete."""
        raise NotImplementedError

    @property
    def complete(self) -> bool:
        raise NotImplementedError


class PlainClient(SaslMechanismClient):
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str, authorization_id: str = "") -> None:
        self.username, self.password, self.authorization_id = username, password, authorization_id
        self._sent = False

    def initial_response(self) -> bytes:
        self._sent = True
        return f"{self.authorization_id}\0{self.username}\0{self.password}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        return None  # PLAIN is one message; whatever the server answers ends it

    @property
    def complete(self) -> bool:
        return self._sent


class ScramClient(SaslMechanismClient):
    """Kafka's ScramSaslClient: states first -> server-first -> server-final -> complete."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        if mechanism not in scram.MECHANISMS:
            raise ValueError(f"Unsupported SCRAM mechanism {mechanism}")
        self.mechanism = mechanism
        self.username, self.password = username, password
        self._nonce = nonce or scram.new_nonce()
        self._first: scram.ClientFirstMessage | None = None
        self._server_first: scram.ServerFirstMessage | None = None
        self._final: scram.ClientFinalMessage | None = None
        self._salted = b""
        self._complete = False

    def initial_response(self) -> bytes:
        self._first = scram.ClientFirstMessage(self.username, self._nonce)
        return self._first.encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        try:
            if self._server_first is None:
                return self._on_server_first(challenge)
            if not self._complete:
                self._on_server_final(challenge)
                return None
        except scram.ScramError as e:
            raise AuthenticationError(str(e)) from None
        except UnicodeDecodeError:
            raise AuthenticationError(f"Invalid SCRAM message from the server for {self.mechanism}") from None
        raise AuthenticationError(f"Unexpected challenge in Sasl client state COMPLETE ({self.mechanism})")

    def _on_server_first(self, challenge: bytes) -> bytes:
        assert self._first is not None
        server_first = scram.ServerFirstMessage.decode(challenge)
        if not server_first.nonce.startswith(self._nonce):
            raise AuthenticationError("Invalid server nonce: does not start with client nonce")
        if server_first.iterations < scram.MIN_ITERATIONS:
            raise AuthenticationError(f"Requested iterations {server_first.iterations} is less than the minimum "
                                      f"{scram.MIN_ITERATIONS} for {self.mechanism}")
        self._server_first = server_first
        self._salted = scram.salted_password(self.mechanism, self.password, server_first.salt,
                                             server_first.iterations)
        without_proof = scram.ClientFinalMessage(_b64(self._first.gs2_header.encode()), server_first.nonce)
        message = scram.auth_message(self._first, server_first, without_proof)
        self._final = scram.ClientFinalMessage(without_proof.channel_binding, without_proof.nonce,
                                               scram.client_proof(self.mechanism, self._salted, message))
        return self._final.encode()

    def _on_server_final(self, challenge: bytes) -> None:
        assert self._first is not None and self._server_first is not None and self._final is not None
        server_final = scram.ServerFinalMessage.decode(challenge)
        if server_final.error is not None:
            raise AuthenticationError(f"Sasl authentication using {self.mechanism} failed with error: "
                                      f"{server_final.error}")
        message = scram.auth_message(self._first, self._server_first, self._final)
        expected = scram.server_signature(self.mechanism, scram.server_key(self.mechanism, self._salted), message)
        if not hmac.compare_digest(expected, server_final.server_signature):
            raise AuthenticationError("Invalid server signature in server final message")
        self._complete = True

    @property
    def complete(self) -> bool:
        return self._complete


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def mechanism_client(mechanism: str, username: str, password: str) -> SaslMechanismClient:
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    if mechanism in scram.MECHANISMS:
        return ScramClient(mechanism, username, password)
    raise ValueError(f"SASL mechanism {mechanism} is not supported (supported: {', '.join(MECHANISMS)})")


class SaslStep:
    """SaslHandshake v1, then SaslAuthenticate rounds driven by one mechanism client."""

    def __init__(self, client: SaslMechanismClient) -> None:
        self.client = client
        self.session_lifetime_ms = 0
        self._handshaken = False

    @property
    def mechanism(self) -> str:
        return self.client.mechanism

    def start(self, conn: ClientConnection) -> StepRequest | None:
        if conn.negotiate_versions:
            theirs = conn.broker_versions.get(ApiKey.SASL_HANDSHAKE)
            if theirs is None or theirs[1] < HANDSHAKE_VERSION or ApiKey.SASL_AUTHENTICATE not in conn.broker_versions:
                raise AuthenticationError("The broker does not support SaslHandshake v1 and SaslAuthenticate "
                                          "(KIP-152), which this client requires",
                                          ErrorCode.UNSUPPORTED_VERSION)
        return StepRequest(ApiKey.SASL_HANDSHAKE, new_request(ApiKey.SASL_HANDSHAKE, mechanism=self.mechanism),
                           version=HANDSHAKE_VERSION)

    def on_response(self, conn: ClientConnection, api_key: int, body: Struct) -> StepRequest | None:
        if api_key == ApiKey.SASL_HANDSHAKE and not self._handshaken:
            self._on_handshake(body)
            self._handshaken = True
            return self._authenticate(self.client.initial_response())
        if api_key != ApiKey.SASL_AUTHENTICATE or not self._handshaken:
            raise AuthenticationError(f"Unexpected response to api key {api_key} during SASL authentication",
                                      ErrorCode.ILLEGAL_SASL_STATE)
        code = int(body.error_code)
        if code != ErrorCode.NONE:
            message = body.error_message
            raise AuthenticationError(message if message else error_info(code).message, code)
        lifetime = int(getattr(body, "session_lifetime_ms", 0) or 0)
        if lifetime > 0:
            self.session_lifetime_ms = lifetime
            conn.session_lifetime_ms = lifetime
        if self.client.complete:
            return None
        token = self.client.evaluate(bytes(body.auth_bytes or b""))
        return None if token is None else self._authenticate(token)

    def _on_handshake(self, body: Struct) -> None:
        code = int(body.error_code)
        if code == ErrorCode.NONE:
            return
        enabled = "[" + ", ".join(body.mechanisms or []) + "]"
        if code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise AuthenticationError(f"Client SASL mechanism '{self.mechanism}' not enabled in the server, "
                                      f"enabled mechanisms are {enabled}", code)
        if code == ErrorCode.ILLEGAL_SASL_STATE:
            raise AuthenticationError(f"Unexpected handshake request with client mechanism {self.mechanism}, "
                                      f"enabled mechanisms are {enabled}", code)
        raise AuthenticationError(f"Unknown error code {code}, client mechanism is {self.mechanism}, "
                                  f"enabled mechanisms are {enabled}", code)

    @staticmethod
    def _authenticate(token: bytes) -> StepRequest:
        # version None: the negotiated SaslAuthenticate version (v1+ carries the session lifetime)
        return StepRequest(ApiKey.SASL_AUTHENTICATE, new_request(ApiKey.SASL_AUTHENTICATE, auth_bytes=token))


def sasl_auth_factory(mechanism: str, username: str, password: str) -> Callable[[], Sequence[AuthStep]]:
    """A factory of fresh SASL steps (one per connection: a SCRAM exchange has its own nonce)."""
    mechanism_client(mechanism, username, password)  # refuse an unsupported mechanism now, not per connection

    def steps() -> Sequence[AuthStep]:
        return (SaslStep(mechanism_client(mechanism, username, password)),)
    return steps
