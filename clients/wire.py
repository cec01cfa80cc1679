"""The CLI's Kafka client, by part; this module keeps the names the subcommands and tests import.

- ``clients/connection.py``: one blocking connection (the blocking wrapper of the one client state
  machine in ``protocol/client_connection.py``) and the CLI's error types.
- ``clients/admin.py``: bootstrap, metadata, request routing and the admin calls (``WireClient``).
- ``clients/producer.py``: the producer, retrying on leader changes, idempotent by default.
- ``clients/partitioner.py``: Kafka's default partitioning (kafka-python's murmur2).
- ``clients/group_member.py``: a consumer group member.
- ``clients/consumer_records.py``: reading fetched records; ``clients/client_config.py``:
  bootstrap lists and .properties files.
"""

from __future__ import annotations

from clients.admin import (
    CONFIG_SOURCES,
    EARLIEST,
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    LATEST,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    BrokerInfo,
    ClusterInfo,
    PartitionInfo,
    TopicInfo,
    WireClient,
)
from clients.client_config import load_properties, parse_bootstrap
from clients.connection import (
    CAPS,
    CLIENT_SOFTWARE,
    BrokerConnection,
    ConnectionFailed,
    KafkaWireError,
    UsageError,
    WireError,
    check,
)
from clients.consumer_records import next_offset_after, records_of
from clients.group_member import (
    GroupMember,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)
from clients.partitioner import StickyPartitioner, murmur2, partition_for_key
from clients.producer import COMPRESSION, DeliveryConfig, Producer, parse_acks, produce_batches

__all__ = [
    "CAPS", "CLIENT_SOFTWARE", "COMPRESSION", "CONFIG_SOURCES", "EARLIEST", "ELECTION_PREFERRED", "ELECTION_UNCLEAN",
    "LATEST", "RESOURCE_BROKER", "RESOURCE_TOPIC", "BrokerConnection", "BrokerInfo", "ClusterInfo", "ConnectionFailed",
    "DeliveryConfig", "GroupMember", "KafkaWireError", "PartitionInfo", "Producer", "StickyPartitioner", "TopicInfo",
    "UsageError", "WireClient", "WireError", "check", "decode_assignment", "decode_subscription", "encode_assignment",
    "encode_subscription", "load_properties", "murmur2", "next_offset_after", "parse_acks", "parse_bootstrap",
    "partition_for_key", "produce_batches", "range_assign", "records_of",
]
