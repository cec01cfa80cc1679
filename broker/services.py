"""Wiring of the request handlers and the broker's coordinators, in startup order."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.purgatory import Purgatory

if TYPE_CHECKING:
    from broker.broker import Broker

log = logging.getLogger(__name__)


async def start_services(broker: Broker) -> None:
    from broker import (
        controller_glue,
        handlers_admin,
        handlers_cluster,
        handlers_data,
        handlers_group,
        handlers_security,
        handlers_txn,
        txn_coordinator,
    )
    from broker.isr_manager import IsrManager
    from broker.replica_fetcher import ReplicaFetcherManager
    from broker.replication_quota import ReplicationQuota

    broker.services["metadata_waiters"] = Purgatory("Metadata")
    broker.services["replica_fetchers"] = ReplicaFetcherManager(broker)
    # Replication throttles; rates are dynamic broker configs, so read through broker.config each time.
    broker.replica_manager.leader_quota = ReplicationQuota(  # type: ignore[union-attr]
        broker.broker_id, "leader.replication.throttled.rate", "leader_replication_throttled_replicas",
        lambda name: broker.config.get(name), broker.topic_config)
    broker.services["follower_quota"] = ReplicationQuota(
        broker.broker_id, "follower.replication.throttled.rate", "follower_replication_throttled_replicas",
        lambda name: broker.config.get(name), broker.topic_config)
    isr = IsrManager(broker)
    broker.services["isr_manager"] = isr
    assert broker.replica_manager is not None
    broker.replica_manager.isr_manager = isr
    await isr.start()
    broker.services.setdefault("on_leadership", [])
    handlers_data.register(broker)
    controller_glue.register(broker)
    handlers_admin.register(broker)
    handlers_cluster.register(broker)
    handlers_security.register(broker)
    handlers_txn.register(broker)
    await handlers_group.register(broker)
    await txn_coordinator.register(broker)


async def stop_services(broker: Broker) -> None:
    from broker import handlers_cluster

    handlers_cluster.unregister(broker)  # the pooled forwarding connection to the controller
    fetchers = broker.services.pop("replica_fetchers", None)
    if fetchers is not None:
        await fetchers.shutdown()
    isr = broker.services.pop("isr_manager", None)
    if isr is not None:
        await isr.stop()
    from broker import txn_coordinator

    try:
        await txn_coordinator.unregister(broker)
    except Exception:
        log.exception("stopping the transaction coordinator failed")
    coordinator = broker.services.pop("group_coordinator", None)
    if coordinator is not None:
        try:
            await coordinator.close()
        except Exception:
            log.exception("stopping the group coordinator failed")
