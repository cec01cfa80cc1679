"""Delegation tokens (KIP-48) as a ZooKeeper-mode Kafka 3.9 broker manages them
(DelegationTokenManager / DelegationTokenManagerZk).

Every broker can create, renew and expire tokens: it writes the token's znode, updates its own cache
and writes a change notification (``broker/security/delegation_token_store.py``); every other broker
follows the notifications and re-reads the token, so a token created through one broker
authenticates on all of them at once. The HMAC (HmacSHA512 of the token id under
``delegation.token.secret.key``) is never stored: each broker computes it from the shared secret.

- Create: the token lives ``delegation.token.expiry.time.ms`` from now, at most its maximum lifetime
  (the request's, capped by ``delegation.token.max.lifetime.ms``; <= 0: the broker's).
- Renew: by the owner or a renewer, before expiry; the new expiry is now + the period (negative: the
  default), capped by the maximum lifetime.
- Expire: by the owner or a renewer; a negative period removes the token at once, otherwise the expiry
  becomes now + the period (capped).
- The active controller removes expired tokens every ``delegation.token.expiry.check.interval.ms``.

Without a secret key nothing starts, and every token API answers DELEGATION_TOKEN_AUTH_DISABLED.
Who may call which API, and the ACL checks, are the handlers' (``broker/handlers_security.py``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.security.delegation_token_cache import DelegationTokenCache, TokenInformation, create_hmac
from broker.security.delegation_token_store import ZkTokenStore
from broker.security.principal import KafkaPrincipal
from broker.zk_change_follower import ZkChangeFollower
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.wiring import ZkCall
    from config.registry import BrokerConfig

log = logging.getLogger(__name__)

ERROR_TIMESTAMP = -1


def now_ms() -> int:
    return int(time.time() * 1000)


def new_token_id() -> str:
    """Kafka's CoreUtils.generateUuidAsBase64: a random UUID's 16 bytes, URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class TokenSettings:
    secret_key: str | None  # None: delegation tokens are disabled
    max_lifetime_ms: int
    expiry_time_ms: int
    expiry_check_interval_ms: int

    @classmethod
    def from_config(cls, config: BrokerConfig) -> TokenSettings:
        """Kafka's KafkaConfig: the secret key, else its deprecated alias; empty counts as unset."""
        key = config.get("delegation.token.secret.key") or config.get("delegation.token.master.key")
        text = getattr(key, "value", key)
        return cls(text or None, config.get("delegation.token.max.lifetime.ms"),
                   config.get("delegation.token.expiry.time.ms"),
                   config.get("delegation.token.expiry.check.interval.ms"))


@dataclass(frozen=True)
class CreatedToken:
    error: ErrorCode
    info: TokenInformation | None = None
    hmac: bytes = b""


class DelegationTokenManager:
    def __init__(self, settings: TokenSettings, cache: DelegationTokenCache, store: ZkTokenStore, zk_call: ZkCall,
                 is_controller: Callable[[], bool] = lambda: True) -> None:
        self.settings = settings
        self.cache = cache
        self.store = store
        self.zk_call = zk_call
        self.is_controller = is_controller  # Kafka's expiry check runs on the active controller
        self._lock = asyncio.Lock()
        self._changes: _TokenChangeFollower | None = None

    @property
    def enabled(self) -> bool:
        return self.settings.secret_key is not None

    def hmac(self, token_id: str) -> bytes:
        assert self.settings.secret_key is not None
        return create_hmac(token_id, self.settings.secret_key)

    # -- start-up and following ZooKeeper --------------------------------------------------------------

    async def start(self) -> list[asyncio.Task[Any]]:
        """Create the paths, follow the change notifications (listed first, so none falls between the
        load and the watch), load every token; returns the background tasks (the caller cancels them
        at shutdown). Nothing when tokens are disabled."""
        if not self.enabled:
            return []
        await self.zk_call(self.store.create_paths)
        changes = self._changes = _TokenChangeFollower(self, asyncio.get_running_loop())
        names = await self.zk_call(self.store.changes, changes._watch)
        changes.last = names[-1] if names else None
        async with self._lock:
            ids = await self.zk_call(self.store.token_ids)
            log.info("Loading the token cache. Total token count: %d", len(ids))
            for token_id in ids:
                try:
                    await self._reload(token_id)
                except Exception:
                    log.exception("Error while getting Token for tokenId: %s", token_id)
        return [changes._follow(), asyncio.ensure_future(self._expiry_checks())]

    async def _reload(self, token_id: str) -> None:
        info = await self.zk_call(self.store.get, token_id)
        if info is None:
            self.cache.remove(token_id)
        else:
            self.cache.update(info, self.hmac(token_id))

    async def _expiry_checks(self) -> None:
        interval = self.settings.expiry_check_interval_ms / 1000.0
        while True:
            await asyncio.sleep(interval)
            if not self.is_controller():
                continue
            try:
                await self.expire_tokens()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("removing expired delegation tokens failed")

    # -- changes (each one: ZooKeeper, this broker's cache, then a notification for the others) ---------

    async def _update(self, info: TokenInformation, mac: bytes) -> None:
        await self.zk_call(self.store.set_or_create, info)
        self.cache.update(info, mac)
        await self.zk_call(self.store.notify, info.token_id)

    async def _remove(self, token_id: str) -> None:
        await self.zk_call(self.store.delete, token_id)
        self.cache.remove(token_id)
        await self.zk_call(self.store.notify, token_id)

    async def create(self, owner: KafkaPrincipal, requester: KafkaPrincipal, renewers: list[KafkaPrincipal],
                     max_lifetime_ms: int) -> CreatedToken:
        if not self.enabled:
            return CreatedToken(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        s = self.settings
        async with self._lock:
            token_id = new_token_id()
            issued = now_ms()
            lifetime = s.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, s.max_lifetime_ms)
            max_ts = issued + lifetime
            info = TokenInformation(token_id, _plain(owner), _plain(requester), tuple(_plain(r) for r in renewers),
                                    issued, max_ts, min(max_ts, issued + s.expiry_time_ms))
            mac = self.hmac(token_id)
            await self._update(info, mac)
        log.info("Created a delegation token: %s for owner: %s", token_id, info.owner)
        return CreatedToken(ErrorCode.NONE, info, mac)

    def _token_to_change(self, principal: KafkaPrincipal, mac: bytes) -> tuple[TokenInformation | None, ErrorCode]:
        """The token a renewal or expiry names, if ``principal`` may change it; else Kafka's refusal
        (an unknown HMAC before a principal that is neither owner nor renewer)."""
        info = self.cache.token_for_hmac(mac)
        if info is None:
            return None, ErrorCode.DELEGATION_TOKEN_NOT_FOUND
        if not info.allowed_to_renew(principal):
            return None, ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        return info, ErrorCode.NONE

    async def renew(self, principal: KafkaPrincipal, mac: bytes, renew_period_ms: int) -> tuple[ErrorCode, int]:
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP
        async with self._lock:
            info, refusal = self._token_to_change(principal, mac)
            if info is None:
                return refusal, ERROR_TIMESTAMP
            now = now_ms()
            if info.expired(now):
                return ErrorCode.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
            period = self.settings.expiry_time_ms if renew_period_ms < 0 else renew_period_ms
            expiry = min(info.max_timestamp, now + period)
            await self._update(info.with_expiry(expiry), mac)
        log.info("Delegation token renewed for token: %s for owner: %s", info.token_id, info.owner)
        return ErrorCode.NONE, expiry

    async def expire(self, principal: KafkaPrincipal, mac: bytes, expiry_period_ms: int) -> tuple[ErrorCode, int]:
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP
        async with self._lock:
            info, refusal = self._token_to_change(principal, mac)
            if info is None:
                return refusal, ERROR_TIMESTAMP
            now = now_ms()
            if expiry_period_ms < 0:  # expire at once
                await self._remove(info.token_id)
                log.info("Token expired for token: %s for owner: %s", info.token_id, info.owner)
                return ErrorCode.NONE, now
            if info.expired(now):
                return ErrorCode.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
            expiry = min(info.max_timestamp, now + expiry_period_ms)
            await self._update(info.with_expiry(expiry), mac)
        log.info("Updated expiry time for token: %s for owner: %s", info.token_id, info.owner)
        return ErrorCode.NONE, expiry

    async def expire_tokens(self) -> None:
        """Remove every token past its expiry or its maximum lifetime (Kafka's expireTokens)."""
        async with self._lock:
            for info in self.cache.tokens():
                if info.expired(now_ms()):
                    log.info("Delegation token expired for token: %s for owner: %s", info.token_id, info.owner)
                    await self._remove(info.token_id)

    def tokens(self, eligible: Callable[[TokenInformation], bool]) -> list[tuple[TokenInformation, bytes]]:
        """(information, HMAC) of the cached tokens ``eligible`` admits (Kafka's getTokens)."""
        return [(info, self.hmac(info.token_id)) for info in self.cache.tokens() if eligible(info)]


class _TokenChangeFollower(ZkChangeFollower):
    """``/delegation_token/token_changes``: each new notification names a token, which is read again
    (gone from ZooKeeper: gone from the cache); notifications seen are deleted."""

    what = "delegation token changes"

    def __init__(self, manager: DelegationTokenManager, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.manager = manager
        self.last: str | None = None

    async def _process(self) -> None:
        m = self.manager
        names = await m.zk_call(m.store.changes, self._watch)
        fresh = [n for n in names if self.last is None or n > self.last]
        for name in fresh:
            token_id, _ctime = await m.zk_call(m.store.read_change, name)
            if token_id is not None:
                log.info("Processing Token Notification for tokenId: %s", token_id)
                async with m._lock:
                    await m._reload(token_id)
            self.last = name
        if fresh:
            await m.zk_call(m.store.purge_changes, names)


def _plain(p: KafkaPrincipal) -> KafkaPrincipal:
    """A principal as stored: its type and name as plain strings."""
    return KafkaPrincipal(str(p.principal_type), str(p.name))


async def start_delegation_tokens(broker: Broker) -> DelegationTokenManager:
    """The broker's token manager over its SCRAM credential cache's token cache, started; its tasks
    join the broker's background tasks, which the broker cancels when it stops."""
    assert broker.zk is not None

    def is_controller() -> bool:
        controller = broker.components.controller
        return controller is not None and controller.is_active

    manager = DelegationTokenManager(TokenSettings.from_config(broker.config), broker.sasl.credentials.tokens,
                                     ZkTokenStore(broker.zk), broker.zk_call, is_controller)
    broker._tasks.extend(await manager.start())
    return manager
