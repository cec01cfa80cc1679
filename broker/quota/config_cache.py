"""Client quota configs from ZooKeeper, kept current on every broker (Kafka's QuotaConfigHandler).

AlterClientQuotas on any broker writes ``/config/users/<user>[/clients/<client-id>]`` or
``/config/clients/<client-id>`` (names sanitized, ``<default>`` for defaults) and a change notification.
Each broker loads every such entity at start-up, then re-reads an entity whenever a notification
names it (``ConfigChangeListener.subscribe``), so a quota change applies cluster-wide without a
restart. As in Kafka, an entity's config is applied whole: a quota key missing from it removes that
quota.

Start-up and notifications are serialised by one lock and always read ZooKeeper afresh, so a full
load running alongside a change can never apply an older value after a newer one.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from typing import TYPE_CHECKING

from broker.quota.entities import DEFAULT, ClientKey, UserKey

if TYPE_CHECKING:
    from broker.config_changes import ConfigChangeListener
    from broker.quota import QuotaManagers
    from broker.wiring import ZkCall
    from controller.zk_client import KafkaZkClient

log = logging.getLogger(__name__)

_DEFAULT = "<default>"
USERS, CLIENTS = "users", "clients"


def _user_key(raw: str) -> UserKey:
    return DEFAULT if raw == _DEFAULT else raw  # users stay sanitized, as in Kafka's metric tags


def _client_key(raw: str) -> ClientKey:
    return DEFAULT if raw == _DEFAULT else urllib.parse.unquote(raw)


class QuotaConfigCache:
    def __init__(self, quotas: QuotaManagers, zk: KafkaZkClient, zk_call: ZkCall) -> None:
        self.quotas = quotas
        self.zk = zk
        self.zk_call = zk_call
        self._lock = asyncio.Lock()

    async def start(self, changes: ConfigChangeListener) -> None:
        """Subscribe first, then load: a change made during the load is applied after it."""
        changes.subscribe(USERS, self.on_user_change)
        changes.subscribe(CLIENTS, self.on_client_change)
        async with self._lock:
            await self._load_all()

    async def _load_all(self) -> None:
        zk = self.zk
        clients = await self.zk_call(zk.get_all_entities_with_config, CLIENTS)
        for raw, cfg in (await self.zk_call(zk.get_entity_configs, CLIENTS, clients)).items():
            self.quotas.apply_entity_config(None, _client_key(raw), cfg)
        users = await self.zk_call(zk.get_all_entities_with_config, USERS)
        for raw, cfg in (await self.zk_call(zk.get_entity_configs, USERS, users)).items():
            self.quotas.apply_entity_config(_user_key(raw), None, cfg)
        for raw in users:
            children = await self.zk_call(zk.get_children, f"/config/{USERS}/{raw}/clients") or []
            if not children:
                continue
            names = [f"{raw}/clients/{c}" for c in children]
            configs = await self.zk_call(zk.get_entity_configs, USERS, names)
            for child in children:
                self.quotas.apply_entity_config(_user_key(raw), _client_key(child),
                                                configs.get(f"{raw}/clients/{child}", {}))

    async def on_client_change(self, name: str) -> None:
        async with self._lock:
            cfg = await self.zk_call(self.zk.get_entity_config, CLIENTS, name)
            self.quotas.apply_entity_config(None, _client_key(name), cfg)

    async def on_user_change(self, name: str) -> None:
        """``name`` is ``<user>`` or ``<user>/clients/<client-id>`` (sanitized)."""
        parts = name.split("/")
        if len(parts) not in (1, 3):
            log.warning("ignoring a change notification for an invalid quota entity path: %s", name)
            return
        async with self._lock:
            cfg = await self.zk_call(self.zk.get_entity_config, USERS, name)
            client = _client_key(parts[2]) if len(parts) == 3 else None
            self.quotas.apply_entity_config(_user_key(parts[0]), client, cfg)
