"""What every server-side SASL mechanism is (javax.security.sasl.SaslServer, as Kafka uses it), and the
two ways an exchange fails.

Kafka distinguishes the failures by what the client may learn:

- ``SaslAuthenticationFailed`` (Kafka's SaslAuthenticationException) carries a message meant for the
  client, sent in the SaslAuthenticate response as it is ("Authentication failed: Invalid username or
  password" from PLAIN).
- ``SaslFailed`` (Kafka's SaslException) may say more than a client should learn (whether a user
  exists); the client gets a generic text naming only the mechanism, and the detail goes to the log.
"""

from __future__ import annotations

from typing import Protocol


class SaslFailed(Exception):
    """The exchange failed; the message is for the broker's log only."""


class SaslAuthenticationFailed(Exception):
    """The exchange failed; the message is sent to the client."""


class SaslMechanismServer(Protocol):
    mechanism: str

    def evaluate(self, token: bytes) -> bytes | None:
        """The challenge for the client's ``token`` (None: nothing to send). Raises SaslFailed or
        SaslAuthenticationFailed."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """Who the client is, once complete: the name its principal gets (User:<authorization id>)."""
        ...

    @property
    def token_authenticated(self) -> bool:
        """Whether a delegation token authenticated the client (SCRAM with ``tokenauth=true``)."""
        ...

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential the client used stops being valid (wall-clock ms), if it does: a
        delegation token's expiry. Kafka's CREDENTIAL_LIFETIME_MS negotiated property."""
        ...
