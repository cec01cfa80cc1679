"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the broker (RFC 5802, RFC 7677; Kafka's ScramSaslServer).

Two rounds: client-first -> server-first (nonce, salt, iterations of the stored credential);
client-final (proof) -> server-final (server signature). Credentials come from the broker's cache of
ZooKeeper's ``/config/users`` (``broker/security/scram_credentials.py``), looked up when the client's
first message names the user, so a credential changed a moment ago is the one that counts.

Failures are Kafka's SaslException (``SaslFailed``): the client learns only that the credentials were
invalid, never whether the user exists. The one exception is an authorization id other than the user
name, which Kafka reports to the client as it is.

Delegation tokens (KIP-48): a client-first message with the extension ``tokenauth=true`` names a token
id as its user. The credential is then the token's (derived from its HMAC, see
``broker/security/delegation_token_cache.py``) and the session's authorization id is the token's
owner, as Kafka's ScramSaslServer does with its DelegationTokenCredentialCallback. The server then
says so (``token_authenticated``: such a session may not create or renew tokens) and gives the token's
expiry as the credential's lifetime, which ends the session then (Kafka's CREDENTIAL_LIFETIME_MS).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.security.delegation_token_cache import DelegationTokenCache
from broker.security.principal import KafkaPrincipal
from broker.security.sasl_mechanism import SaslAuthenticationFailed, SaslFailed
from protocol import scram

MECHANISMS = tuple(scram.MECHANISMS)  # SCRAM-SHA-256, SCRAM-SHA-512
CredentialLookup = Callable[[str, str], scram.ScramCredential | None]  # (mechanism, user) -> credential


def token_authenticated(principal: KafkaPrincipal) -> bool:
    """Whether a delegation token authenticated this principal's session (Kafka's
    KafkaPrincipal.tokenAuthenticated)."""
    return principal.token_authenticated


class ScramSaslServer:
    def __init__(self, mechanism: str, credentials: CredentialLookup,
                 tokens: DelegationTokenCache | None = None) -> None:
        if mechanism not in scram.MECHANISMS:
            raise ValueError(f"Requested mechanism '{mechanism}' is not supported. Supported mechanisms are "
                             f"'{set(MECHANISMS)}'.")
        self.mechanism = mechanism
        self._credentials = credentials
        self._tokens = tokens
        self._state = "client-first"
        self._first: scram.ClientFirstMessage | None = None
        self._server_first: scram.ServerFirstMessage | None = None
        self._credential: scram.ScramCredential | None = None
        self._authorization_id: str | None = None
        self.token_authenticated = False
        self.credential_expiry_ms: int | None = None

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def authorization_id(self) -> str:
        if not self.complete or self._authorization_id is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    def evaluate(self, token: bytes) -> bytes | None:
        try:
            if self._state == "client-first":
                return self._client_first(token)
            if self._state == "client-final":
                return self._client_final(token)
            raise SaslFailed(f"Unexpected challenge in Sasl server state {self._state}")
        except (SaslFailed, SaslAuthenticationFailed):
            self._fail()
            raise
        except (scram.ScramError, UnicodeDecodeError) as e:
            self._fail()
            raise SaslFailed(str(e)) from None

    def _fail(self) -> None:
        self._state = "failed"
        self._credential = self._first = self._server_first = None
        self.token_authenticated = False
        self.credential_expiry_ms = None

    def _client_first(self, token: bytes) -> bytes:
        first = scram.ClientFirstMessage.decode(token)
        authorization_id: str
        if any(key == "tokenauth" and value.lower() == "true" for key, value in first.extensions):
            tokens = self._tokens
            owner = tokens.owner(first.username) if tokens is not None else None
            if tokens is None or owner is None:
                raise SaslFailed(f"Token Authentication failed: Invalid tokenId : {first.username}")
            info = tokens.token(first.username)
            if info is None or info.expired(int(time.time() * 1000)):
                # Expired but not yet removed by the expiry check: Kafka lets the login through with a
                # session that has already ended, which closes the connection; refusing says why.
                raise SaslFailed(f"Token Authentication failed: token {first.username} has expired")
            credential = tokens.credential(self.mechanism, first.username)
            authorization_id = owner
            self.token_authenticated = True
            self.credential_expiry_ms = info.expiry_timestamp if info is not None else None
        else:
            credential = self._credentials(self.mechanism, first.username)
            authorization_id = first.username
        if credential is None:
            raise SaslFailed("Authentication failed: Invalid user credentials")
        if first.authorization_id and first.authorization_id != first.username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < scram.MIN_ITERATIONS:
            raise SaslFailed(f"Iterations {credential.iterations} is less than the minimum {scram.MIN_ITERATIONS} "
                             f"for {self.mechanism}")
        self._first, self._credential = first, credential
        self._server_first = scram.ServerFirstMessage(first.nonce + scram.new_nonce(), credential.salt,
                                                      credential.iterations)
        self._authorization_id = authorization_id
        self._state = "client-final"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        first, server_first, credential = self._first, self._server_first, self._credential
        assert first is not None and server_first is not None and credential is not None
        final = scram.ClientFinalMessage.decode(token)
        # Kafka checks that the nonce ends with ours and does not look at the channel binding attribute
        # (no channel binding is offered); both are kept as Kafka has them.
        if not final.nonce.endswith(server_first.nonce):
            raise SaslFailed("Invalid client nonce in the final client message.")
        message = scram.auth_message(first, server_first, final)
        if not scram.verify_client_proof(self.mechanism, credential.stored_key, message, final.proof):
            raise SaslFailed("Invalid client credentials")
        signature = scram.server_signature(self.mechanism, credential.server_key, message)
        self._credential = self._first = self._server_first = None
        self._state = "complete"
        return scram.ServerFinalMessage(signature).encode()
