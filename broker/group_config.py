"""The broker configs the group coordinator reads: a view of the registry, no defaults of its own.

Kafka splits them between ``GroupConfig`` (membership: session timeout bounds, initial rebalance
delay, group size) and ``OffsetConfig`` (``__consumer_offsets``: retention, metadata size, partition
count); the membership state machine and the group metadata manager each read their half of this one
object. Offset commits are written with acks=all, as Kafka 4.0 does since it removed
``offsets.commit.required.acks``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.views import ConfigView, config_field


@dataclass(slots=True)
class GroupCoordinatorConfig(ConfigView):
    group_min_session_timeout_ms: int = config_field("group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = config_field("group.max.session.timeout.ms")
    group_initial_rebalance_delay_ms: int = config_field("group.initial.rebalance.delay.ms")
    group_max_size: int = config_field("group.max.size")
    offset_metadata_max_bytes: int = config_field("offset.metadata.max.bytes")
    offsets_retention_minutes: int = config_field("offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = config_field("offsets.retention.check.interval.ms")
    offsets_topic_num_partitions: int = config_field("offsets.topic.num.partitions")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


def coordinator_config(config: Any) -> GroupCoordinatorConfig:
    """A ``GroupCoordinatorConfig`` from one, from a ``BrokerConfig``, from a mapping, or None (defaults)."""
    if isinstance(config, GroupCoordinatorConfig):
        return config
    return GroupCoordinatorConfig.from_config(config)
