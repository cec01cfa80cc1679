"""Delegation tokens as one broker knows them (Kafka's DelegationTokenCache), and what a token is.

A token (KIP-48) is a ``TokenInformation`` (id, owner, requester, renewers, timestamps) plus its HMAC:
HmacSHA512 of the token id under ``delegation.token.secret.key``. Clients authenticate with SCRAM,
the token id as user name and the base64 HMAC as password; so the cache holds, next to each token,
a SCRAM credential per mechanism derived from that password, as Kafka's DelegationTokenManager
prepares them (a fresh salt, the mechanism's minimum iterations). Every broker derives its own
credentials from the same HMAC, so a token created through one broker authenticates on any other.

The cache is filled and emptied by ``broker/delegation_tokens.py`` (from ZooKeeper) and read by the
SCRAM server (``broker/security/sasl_scram.py``) and the token APIs. Plain dictionaries, used on the
broker's event loop only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass, field, replace

from broker.security.principal import KafkaPrincipal
from protocol import scram


def same_principal(a: KafkaPrincipal, b: KafkaPrincipal) -> bool:
    """Kafka's KafkaPrincipal.equals: type and name (whether a token authenticated it does not count)."""
    return a.principal_type == b.principal_type and a.name == b.name


@dataclass(frozen=True)
class TokenInformation:
    token_id: str
    owner: KafkaPrincipal
    token_requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Kafka's TokenInformation.ownerOrRenewer: who may describe a token without an ACL."""
        return (same_principal(self.owner, principal) or same_principal(self.token_requester, principal)
                or any(same_principal(r, principal) for r in self.renewers))

    def allowed_to_renew(self, principal: KafkaPrincipal) -> bool:
        """Kafka's DelegationTokenManagerZk.allowedToRenew: the owner or a renewer (not the requester)."""
        return same_principal(self.owner, principal) or any(same_principal(r, principal) for r in self.renewers)

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms

    def with_expiry(self, expiry_timestamp: int) -> TokenInformation:
        return replace(self, expiry_timestamp=expiry_timestamp)


def create_hmac(token_id: str, secret_key: str) -> bytes:
    """Kafka's DelegationTokenManager.createHmac: HmacSHA512 of the token id's UTF-8 bytes, keyed with
    the secret key's UTF-8 bytes."""
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def hmac_base64(mac: bytes) -> str:
    """The token's SCRAM password (Kafka's DelegationToken.hmacAsBase64String: standard base64)."""
    return base64.b64encode(mac).decode("ascii")


def scram_credentials(password: str) -> dict[str, scram.ScramCredential]:
    """One credential per SCRAM mechanism for a token's password (Kafka's prepareScramCredentials)."""
    return {m: scram.credential_from_password(m, password, scram.MIN_ITERATIONS) for m in scram.MECHANISMS}


@dataclass
class _Entry:
    info: TokenInformation
    hmac: bytes
    credentials: dict[str, scram.ScramCredential] = field(default_factory=dict)


class DelegationTokenCache:
    def __init__(self) -> None:
        self._tokens: dict[str, _Entry] = {}
        self._by_hmac: dict[str, str] = {}  # base64 HMAC -> token id (renew and expire name tokens by HMAC)

    def update(self, info: TokenInformation, mac: bytes) -> None:
        """Add or replace a token. The SCRAM credentials are derived only for a token not yet known
        (or whose HMAC changed): a renewal changes timestamps, not the password."""
        known = self._tokens.get(info.token_id)
        password = hmac_base64(mac)
        if known is not None and known.hmac == mac:
            known.info = info
            return
        if known is not None:
            self._by_hmac.pop(hmac_base64(known.hmac), None)
        self._tokens[info.token_id] = _Entry(info, mac, scram_credentials(password))
        self._by_hmac[password] = info.token_id

    def remove(self, token_id: str) -> None:
        entry = self._tokens.pop(token_id, None)
        if entry is not None:
            self._by_hmac.pop(hmac_base64(entry.hmac), None)

    def token(self, token_id: str) -> TokenInformation | None:
        entry = self._tokens.get(token_id)
        return entry.info if entry is not None else None

    def hmac_of(self, token_id: str) -> bytes | None:
        entry = self._tokens.get(token_id)
        return entry.hmac if entry is not None else None

    def token_for_hmac(self, mac: bytes) -> TokenInformation | None:
        token_id = self._by_hmac.get(hmac_base64(mac))
        return self.token(token_id) if token_id is not None else None

    def tokens(self) -> list[TokenInformation]:
        return [e.info for e in self._tokens.values()]

    def credential(self, mechanism: str, token_id: str) -> scram.ScramCredential | None:
        entry = self._tokens.get(token_id)
        return entry.credentials.get(mechanism) if entry is not None else None

    def owner(self, token_id: str) -> str | None:
        """The owner's name, the authorization id of a session the token authenticates."""
        entry = self._tokens.get(token_id)
        return entry.info.owner.name if entry is not None else None
