"""SASL/PLAIN on the broker (RFC 4616; Kafka's PlainSaslServer with PlainServerCallbackHandler).

The client's one token is ``authzid NUL username NUL password``; the password is checked in constant
time against the ``user_<name>`` options of the listener's PlainLoginModule JAAS entry. The messages
are Kafka's: they go to the client as they are.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from broker.security.sasl_mechanism import SaslAuthenticationFailed

MECHANISM = "PLAIN"


class PlainSaslServer:
    mechanism = MECHANISM

    def __init__(self, users: Callable[[], Mapping[str, str]]) -> None:
        # Read when the token arrives, so a reconfigured JAAS applies to the next authentication.
        self._users = users
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    # PLAIN has no delegation tokens and its passwords do not expire.
    token_authenticated = False
    credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes | None:
        if self.complete:
            raise SaslAuthenticationFailed("Unexpected SASL/PLAIN token after the exchange completed")
        # Kafka decodes the token as UTF-8 with replacement, then splits on NUL into at most 4 parts.
        text = token.decode("utf-8", errors="replace")
        parts = text.split("\0", 3)
        if len(parts) != 3:
            raise SaslAuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self._users().get(username)
        if expected is None or not hmac.compare_digest(password.encode("utf-8"), expected.encode("utf-8")):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._authorization_id = username
        return b""
