"""Dynamic configs from ZooKeeper on every broker (Kafka's ZkConfigManager, broker side).

AlterConfigs / IncrementalAlterConfigs write ``/config/<type>/<name>`` and a sequential change
notification under ``/config/changes``; every broker watches those notifications and reloads the
entity named in each new one. Topic creation writes ``/config/topics/<t>`` without a notification, so
brokers also watch the children of ``/config/topics`` and load the overrides of topics they have not
seen (a broker that hosts a replica of a topic created through another broker gets its configs), and
forget those of deleted topics.

ZooKeeper watches wake a task on the broker's loop (broker/zk_change_follower.py), which re-reads
the state (and re-arms the watches) with blocking calls run in the executor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from broker.zk_change_follower import ZkChangeFollower
from controller import zk_data as zd

if TYPE_CHECKING:
    from broker.wiring import ZkCall
    from controller.zk_client import KafkaZkClient

log = logging.getLogger(__name__)

# Called with the changed entity's name as the notification names it (sanitized, and for a user's
# client-id quotas "<user>/clients/<client-id>"), after the change is in ZooKeeper.
EntityChangeCallback = Callable[[str], Awaitable[None]]


class DynamicConfigTarget(Protocol):
    """Where changed configs go (the broker: topic overrides and its dynamic broker config)."""

    def set_topic_overrides(self, topic: str, overrides: dict[str, str]) -> None: ...

    def forget_topic_overrides(self, topic: str) -> None: ...

    async def reload_dynamic_broker_config(self) -> None: ...


async def load_topic_overrides(zk: KafkaZkClient, zk_call: ZkCall, topics: list[str],
                               overrides: dict[str, dict[str, str]]) -> None:
    """Read the overrides of ``topics`` from ``/config/topics`` into ``overrides`` (one pipelined read).

    A broker about to create logs calls this, as Kafka's log creation reads the topic's config from
    ZooKeeper: the change listener applies a topic created elsewhere only on its next pass. A failed
    read keeps what ``overrides`` holds and is logged; the listener's next pass still applies them.
    """
    try:
        configs = await zk_call(zk.get_topic_configs, topics)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.warning("could not read the configs of %d topics from ZooKeeper before creating their logs: %s",
                    len(topics), e)
        return
    for topic in topics:
        overrides[topic] = configs.get(topic, {})


class ConfigChangeListener(ZkChangeFollower):
    what = "config changes"

    def __init__(self, zk: KafkaZkClient, zk_call: ZkCall, broker_id: int, loop: asyncio.AbstractEventLoop,
                 target: DynamicConfigTarget) -> None:
        super().__init__(loop)
        self.zk = zk
        self.zk_call = zk_call
        self.broker_id = broker_id
        self.target = target
        self._last_change: str | None = None
        self._known_topics: set[str] | None = None
        self._subscribers: dict[str, list[EntityChangeCallback]] = {}

    def subscribe(self, entity_type: str, callback: EntityChangeCallback) -> None:
        """Have ``callback`` run for every change notification about ``entity_type`` ("users",
        "clients", "ips"): SCRAM credentials and client quotas follow ZooKeeper this way."""
        self._subscribers.setdefault(entity_type, []).append(callback)

    async def start(self) -> None:
        """Call after the broker loaded the configs present at startup: only later changes apply."""
        names = await self.zk_call(self.zk.get_config_change_notifications, self._watch)
        self._last_change = names[-1] if names else None
        self._known_topics = set(await self.zk_call(self._topics_with_config, self._watch))
        self._follow()

    def _topics_with_config(self, watch: Any) -> list[str]:
        return self.zk.get_children(zd.config_entity_type_path(zd.CONFIG_TYPE_TOPIC), watch) or []

    async def _process(self) -> None:
        zk, target = self.zk, self.target
        topics: set[str] = set()
        broker_changed = False
        # New and deleted topics (re-arms the watch on /config/topics).
        current = set(await self.zk_call(self._topics_with_config, self._watch))
        known = self._known_topics or set()
        topics |= current - known
        for gone in known - current:
            target.forget_topic_overrides(gone)
        self._known_topics = current
        # Change notifications (re-arms the watch on /config/changes).
        names = await self.zk_call(zk.get_config_change_notifications, self._watch)
        fresh = [n for n in names if self._last_change is None or n > self._last_change]
        if fresh:
            self._last_change = fresh[-1]
        for n in fresh:
            entity, _ = await self.zk_call(zk.read_config_change_notification, n)
            if entity is None:
                continue
            etype, name = entity
            if etype == zd.CONFIG_TYPE_TOPIC:
                topics.add(name)
            elif etype == zd.CONFIG_TYPE_BROKER and name in ("<default>", str(self.broker_id)):
                broker_changed = True
            for callback in self._subscribers.get(etype, ()):
                try:
                    await callback(name)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("applying the config change of %s %s failed", etype, name)
        if topics:
            configs = await self.zk_call(zk.get_topic_configs, sorted(topics))
            for t in sorted(topics):
                target.set_topic_overrides(t, configs.get(t, {}))
            log.info("reloaded topic configs from ZooKeeper: %s", ", ".join(sorted(topics)))
        if broker_changed:
            await target.reload_dynamic_broker_config()
            log.info("reloaded dynamic broker configs from ZooKeeper")
