"""How ``__consumer_offsets`` and ``__transaction_state`` are created: the same partition count,
replication factor and configs whether a coordinator lookup (FindCoordinator) or a Metadata request
with auto-creation asks for them first, as in Kafka."""

from __future__ import annotations

from config.registry import BrokerConfig

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_TOPIC})


def internal_topic_spec(cfg: BrokerConfig, topic: str) -> tuple[int, int, dict[str, str]]:
    """(partitions, replication factor, topic configs) of an internal topic, from the broker config."""
    if topic == OFFSETS_TOPIC:
        return (cfg.get("offsets.topic.num.partitions"), cfg.get("offsets.topic.replication.factor"),
                {"cleanup.policy": "compact", "compression.type": "producer",
                 "segment.bytes": str(cfg.get("offsets.topic.segment.bytes"))})
    if topic == TXN_TOPIC:
        return (cfg.get("transaction.state.log.num.partitions"), cfg.get("transaction.state.log.replication.factor"),
                {"cleanup.policy": "compact", "compression.type": "uncompressed",
                 "min.insync.replicas": str(cfg.get("transaction.state.log.min.isr")),
                 "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes"))})
    raise ValueError(f"{topic} is not an internal topic")
