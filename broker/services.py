"""Wiring of the request handlers and the broker's coordinators, in startup order."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.purgatory import Purgatory

if TYPE_CHECKING:
    from broker.broker import Broker

log = logging.getLogger(__name__)


async def start_services(broker: Broker) -> None:
    from broker import controller_glue, handlers_admin, handlers_data, handlers_group, handlers_txn

    broker.services["metadata_waiters"] = Purgatory("Metadata")
    broker.services.setdefault("on_leadership", [])
    handlers_data.register(broker)
    controller_glue.register(broker)
    handlers_admin.register(broker)
    handlers_txn.register(broker)
    await handlers_group.register(broker)


async def stop_services(broker: Broker) -> None:
    coordinator = broker.services.pop("group_coordinator", None)
    if coordinator is not None:
        try:
            await coordinator.close()
        except Exception:
            log.exception("stopping the group coordinator failed")
