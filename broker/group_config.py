"""The broker configs the group coordinator reads, with Kafka's names and defaults.

Kafka splits them between ``GroupConfig`` (membership: session timeout bounds, initial rebalance
delay, group size) and ``OffsetConfig`` (``__consumer_offsets``: retention, metadata size, partition
count, required acks); the membership state machine and the group metadata manager each read their
half of this one object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class GroupCoordinatorConfig:
    """The group coordinator's configs (Kafka's names and defaults)."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2_147_483_647
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 10_080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    offsets_topic_num_partitions: int = 50
    offsets_commit_required_acks: int = -1

    _NAMES = {
        "group.min.session.timeout.ms": "group_min_session_timeout_ms",
        "group.max.session.timeout.ms": "group_max_session_timeout_ms",
        "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
        "group.max.size": "group_max_size",
        "offset.metadata.max.bytes": "offset_metadata_max_bytes",
        "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
        "offsets.topic.num.partitions": "offsets_topic_num_partitions",
        "offsets.commit.required.acks": "offsets_commit_required_acks",
    }

    @classmethod
    def from_config(cls, config: Any) -> GroupCoordinatorConfig:
        """From a ``BrokerConfig`` (anything with ``.get(name)``) or a plain mapping of Kafka names."""
        out = cls()

        def get(name: str) -> Any:
            try:
                return config.get(name)
            except KeyError:
                return None

        for name, attr in cls._NAMES.items():
            v = get(name)
            if v is not None:
                setattr(out, attr, int(v))
        minutes = get("offsets.retention.minutes")
        if minutes is not None:
            out.offsets_retention_ms = int(minutes) * 60_000
        return out


def coordinator_config(config: Any) -> GroupCoordinatorConfig:
    """A ``GroupCoordinatorConfig`` from one, from a ``BrokerConfig``, from a mapping, or None (defaults)."""
    if config is None:
        return GroupCoordinatorConfig()
    if isinstance(config, GroupCoordinatorConfig):
        return config
    return GroupCoordinatorConfig.from_config(config)
