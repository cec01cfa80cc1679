"""SCRAM credentials as every broker knows them: a cache of ZooKeeper's ``/config/users`` (Kafka's
CredentialCache, kept current by the ZooKeeper-mode UserConfigHandler).

A user's entity config ``/config/users/<sanitized user>`` holds one key per mechanism,
``SCRAM-SHA-256`` / ``SCRAM-SHA-512``, in Kafka's format (``protocol.scram.ScramCredential``). The cache
is loaded once at start-up and then follows the change notifications AlterUserScramCredentials (or
Kafka's kafka-configs.sh) writes, on every broker: a new user or a changed password counts at the next
authentication, without a restart. Lookups are plain dictionary reads on the event loop.

Beside the users' credentials, the cache holds the broker's delegation tokens (``tokens``, Kafka's
CredentialProvider.tokenCache), which the SCRAM server reads for ``tokenauth=true`` clients and
``broker/delegation_tokens.py`` keeps in step with ZooKeeper.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from broker.security.delegation_token_cache import DelegationTokenCache
from protocol import scram

if TYPE_CHECKING:
    from broker.config_changes import ConfigChangeListener
    from controller.zk_client import KafkaZkClient

log = logging.getLogger(__name__)

USERS = "users"  # the entity type of /config/users
ZkCall = Callable[..., Awaitable[Any]]


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize: entity names in ZooKeeper are URL-encoded user names."""
    return urllib.parse.unquote(name)


class ScramCredentialCache:
    def __init__(self) -> None:
        self._by_mechanism: dict[str, dict[str, scram.ScramCredential]] = {m: {} for m in scram.MECHANISMS}
        self.tokens = DelegationTokenCache()
        self._zk: KafkaZkClient | None = None
        self._zk_call: ZkCall | None = None

    def get(self, mechanism: str, user: str) -> scram.ScramCredential | None:
        return self._by_mechanism.get(mechanism, {}).get(user)

    def users(self, mechanism: str) -> list[str]:
        return sorted(self._by_mechanism.get(mechanism, {}))

    def update_user(self, user: str, config: Mapping[str, str]) -> None:
        """Replace what is known of ``user`` with the SCRAM keys of its entity config (none: removed)."""
        for mechanism, known in self._by_mechanism.items():
            stored = config.get(mechanism)
            if stored is None:
                known.pop(user, None)
                continue
            try:
                known[user] = scram.ScramCredential.parse(stored)
            except scram.ScramError as e:
                # Kafka's CredentialCache skips what it cannot parse; the user cannot log in with it.
                known.pop(user, None)
                log.error("ignoring the %s credential of user %s in ZooKeeper: %s", mechanism, user, e)

    async def start(self, zk: KafkaZkClient, zk_call: ZkCall, changes: ConfigChangeListener) -> None:
        """Follow change notifications (subscribed first, so none falls between the load and the
        subscription), then load every user present now."""
        self._zk, self._zk_call = zk, zk_call
        changes.subscribe(USERS, self.on_user_change)
        names = await zk_call(zk.get_all_entities_with_config, USERS)
        configs = await zk_call(zk.get_entity_configs, USERS, names)
        for raw, config in configs.items():
            self.update_user(desanitize(raw), config)
        total = sum(len(known) for known in self._by_mechanism.values())
        log.info("loaded %d SCRAM credentials of %d users from ZooKeeper", total, len(names))

    async def on_user_change(self, name: str) -> None:
        """A change notification for ``/config/users/<name>``: re-read that user's credentials.
        ``<user>/clients/<client-id>`` names quota entities, which hold no credentials."""
        if "/" in name or name == "<default>" or self._zk is None or self._zk_call is None:
            return
        config = await self._zk_call(self._zk.get_entity_config, USERS, name)
        self.update_user(desanitize(name), config)
        log.info("SCRAM credentials of user %s reloaded from ZooKeeper", desanitize(name))
