"""The broker configs the controller reads, with Kafka's names and defaults, and how it reads them.

Shared by the controller and the modules it delegates to (topic deletion, elections, the state
machines), which all take their values through ``KafkaController.config``.
"""

from __future__ import annotations

from typing import Any

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1

# Broker-level defaults the controller reads through its ``config_getter``.
CONTROLLER_CONFIG_DEFAULTS: dict[str, Any] = {
    "unclean.leader.election.enable": False,
    "delete.topic.enable": True,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.per.broker.percentage": 10,
    "leader.imbalance.check.interval.seconds": 300,
}


def as_bool(v: Any) -> bool:
    """A boolean config: typed from the config registry, or a string from a plain properties mapping."""
    if isinstance(v, str):
        return v.strip().lower() == "true"
    return bool(v)
