"""Client quotas, enforced as Kafka enforces them (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599).

``QuotaManagers`` holds the four managers (Kafka's QuotaFactory.QuotaManagers without the replication
ones, which live in broker/replication_quota.py). The dispatcher (broker/kafka_apis.py) asks them for
a throttle time after each request, puts it in the response and mutes the connection for that long.
``start_client_quotas`` builds them from the broker config, loads the quota configs from ZooKeeper
and keeps them current.

Until a quota of some type is configured, that manager is off and records nothing; until any is,
``active`` is False and the dispatcher takes its ordinary path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from broker.handlers_security import sanitize
from broker.quota.config_cache import QuotaConfigCache
from broker.quota.entities import ClientKey, UserKey
from broker.quota.managers import (
    ClientQuotaManager,
    ClientRequestQuotaManager,
    ControllerMutationQuotaManager,
    monotonic_ms,
)

if TYPE_CHECKING:
    from broker.config_changes import ConfigChangeListener
    from broker.kafka_apis import KafkaApis
    from broker.security.principal import KafkaPrincipal
    from broker.wiring import ZkCall
    from controller.zk_client import KafkaZkClient

__all__ = ["QuotaManagers", "start_client_quotas"]

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"

_SANITIZED_CACHE_MAX = 10_000


class QuotaManagers:
    def __init__(self, samples: int, window_s: int, controller_samples: int, controller_window_s: int,
                 clock: Callable[[], float] = monotonic_ms) -> None:
        self.produce = ClientQuotaManager("Produce", samples, window_s, clock)
        self.fetch = ClientQuotaManager("Fetch", samples, window_s, clock)
        self.request = ClientRequestQuotaManager(samples, window_s, clock)
        self.controller_mutation = ControllerMutationQuotaManager(controller_samples, controller_window_s, clock)
        self.active = False  # any manager enabled: the dispatcher's one check on its ordinary path
        self._sanitized: dict[str, str] = {}

    @classmethod
    def from_config(cls, get: Callable[[str], Any]) -> QuotaManagers:
        return cls(int(get("quota.window.num")), int(get("quota.window.size.seconds")),
                   int(get("controller.quota.window.num")), int(get("controller.quota.window.size.seconds")))

    @property
    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return self.produce, self.fetch, self.request, self.controller_mutation

    def apply_entity_config(self, user: UserKey, client: ClientKey, config: Mapping[str, str]) -> None:
        """One entity's config from ZooKeeper: each quota it holds is set, each it lacks removed."""
        for key, manager, integral in ((PRODUCER_BYTE_RATE, self.produce, True),
                                       (CONSUMER_BYTE_RATE, self.fetch, True),
                                       (REQUEST_PERCENTAGE, self.request, False),
                                       (CONTROLLER_MUTATION_RATE, self.controller_mutation, False)):
            raw = config.get(key)
            value: float | None = None
            if raw is not None:
                try:
                    # Kafka reads the byte rates as longs, the other two as doubles.
                    value = float(int(float(raw))) if integral else float(raw)
                except ValueError:
                    value = None
            manager.update_quota(user, client, value)
        self.active = any(m.enabled for m in self.managers)

    def user_of(self, principal: KafkaPrincipal) -> str:
        """The quota user of a principal: its name, sanitized (Kafka's Session.sanitizedUser)."""
        name = principal.name
        sanitized = self._sanitized.get(name)
        if sanitized is None:
            if len(self._sanitized) >= _SANITIZED_CACHE_MAX:
                self._sanitized.clear()
            sanitized = self._sanitized[name] = sanitize(name)
        return sanitized


async def start_client_quotas(apis: KafkaApis, get_config: Callable[[str], Any], zk: KafkaZkClient,
                              zk_call: ZkCall, changes: ConfigChangeListener) -> QuotaManagers:
    """Build the quota managers, load the quotas in ZooKeeper, follow their changes, and have the
    dispatcher enforce them."""
    quotas = QuotaManagers.from_config(get_config)
    await QuotaConfigCache(quotas, zk, zk_call).start(changes)
    apis.quotas = quotas
    return quotas
