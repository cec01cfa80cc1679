"""The one table of API versions this broker implements; ApiVersions is built from it.

The ranges are exactly what Apache Kafka 3.9.1 advertises in ZooKeeper mode, old versions included:
Produce v0-2 with message formats v0/v1 (converted to v2 batches on the way in), Fetch v0-3 (stored
batches down-converted on the way out), ListOffsets v0, OffsetCommit v0 and OffsetFetch v0 (offsets
kept in ZooKeeper), and the other APIs' version 0s. Kafka 4 dropped many of these versions from its
message schemas (KIP-896), so their Kafka 3.9 schemas are in ``protocol/schemas``.
tests/ops/test_api_versions_vs_kafka.py compares this table with a live Kafka 3.9.1, API by API.

Where it differs from Kafka 3.9.1 (the test's allow-list, each with its reason):

* Inter-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, AlterPartition)
  are spoken only between kafkette brokers, so each is implemented, and advertised, at one version:
  3.9's newest.
* APIs not implemented (yet) are not advertised; DescribeTopicPartitions, which a 3.9 ZooKeeper
  broker does not offer, is.
"""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75


# api key -> (min version, max version, schema base name)
SUPPORTED: dict[ApiKey, tuple[int, int, str]] = {
    ApiKey.PRODUCE: (0, 11, "Produce"),
    ApiKey.FETCH: (0, 17, "Fetch"),
    ApiKey.LIST_OFFSETS: (0, 9, "ListOffsets"),
    ApiKey.METADATA: (0, 12, "Metadata"),
    ApiKey.LEADER_AND_ISR: (7, 7, "LeaderAndIsr"),
    ApiKey.STOP_REPLICA: (4, 4, "StopReplica"),
    ApiKey.UPDATE_METADATA: (8, 8, "UpdateMetadata"),
    ApiKey.CONTROLLED_SHUTDOWN: (3, 3, "ControlledShutdown"),
    ApiKey.OFFSET_COMMIT: (0, 9, "OffsetCommit"),
    ApiKey.OFFSET_FETCH: (0, 9, "OffsetFetch"),
    ApiKey.FIND_COORDINATOR: (0, 6, "FindCoordinator"),
    ApiKey.JOIN_GROUP: (0, 9, "JoinGroup"),
    ApiKey.HEARTBEAT: (0, 4, "Heartbeat"),
    ApiKey.LEAVE_GROUP: (0, 5, "LeaveGroup"),
    ApiKey.SYNC_GROUP: (0, 5, "SyncGroup"),
    ApiKey.DESCRIBE_GROUPS: (0, 5, "DescribeGroups"),
    ApiKey.LIST_GROUPS: (0, 5, "ListGroups"),
    ApiKey.SASL_HANDSHAKE: (0, 1, "SaslHandshake"),
    ApiKey.API_VERSIONS: (0, 4, "ApiVersions"),
    ApiKey.CREATE_TOPICS: (0, 7, "CreateTopics"),
    ApiKey.DELETE_TOPICS: (0, 6, "DeleteTopics"),
    ApiKey.DELETE_RECORDS: (0, 2, "DeleteRecords"),
    ApiKey.INIT_PRODUCER_ID: (0, 5, "InitProducerId"),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4, "OffsetForLeaderEpoch"),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5, "AddPartitionsToTxn"),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4, "AddOffsetsToTxn"),
    ApiKey.END_TXN: (0, 4, "EndTxn"),
    ApiKey.WRITE_TXN_MARKERS: (0, 1, "WriteTxnMarkers"),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4, "TxnOffsetCommit"),
    ApiKey.DESCRIBE_ACLS: (0, 3, "DescribeAcls"),
    ApiKey.CREATE_ACLS: (0, 3, "CreateAcls"),
    ApiKey.DELETE_ACLS: (0, 3, "DeleteAcls"),
    ApiKey.DESCRIBE_CONFIGS: (0, 4, "DescribeConfigs"),
    ApiKey.ALTER_CONFIGS: (0, 2, "AlterConfigs"),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2, "AlterReplicaLogDirs"),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4, "DescribeLogDirs"),
    ApiKey.SASL_AUTHENTICATE: (0, 2, "SaslAuthenticate"),
    ApiKey.CREATE_PARTITIONS: (0, 3, "CreatePartitions"),
    # KIP-48 delegation tokens (broker/delegation_tokens.py); Kafka 4 dropped the v0s, so these are
    # Kafka 3.9's schemas, in protocol/schemas.
    ApiKey.CREATE_DELEGATION_TOKEN: (0, 3, "CreateDelegationToken"),
    ApiKey.RENEW_DELEGATION_TOKEN: (0, 2, "RenewDelegationToken"),
    ApiKey.EXPIRE_DELEGATION_TOKEN: (0, 2, "ExpireDelegationToken"),
    ApiKey.DESCRIBE_DELEGATION_TOKEN: (0, 3, "DescribeDelegationToken"),
    ApiKey.DELETE_GROUPS: (0, 2, "DeleteGroups"),
    ApiKey.ELECT_LEADERS: (0, 2, "ElectLeaders"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1, "IncrementalAlterConfigs"),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0, "AlterPartitionReassignments"),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0, "ListPartitionReassignments"),
    ApiKey.OFFSET_DELETE: (0, 0, "OffsetDelete"),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1, "DescribeClientQuotas"),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1, "AlterClientQuotas"),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0, "DescribeUserScramCredentials"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0, "AlterUserScramCredentials"),
    ApiKey.ALTER_PARTITION: (3, 3, "AlterPartition"),
    # Every update refused, as a ZooKeeper-mode Kafka 3.9 (no supported features) refuses them.
    ApiKey.UPDATE_FEATURES: (0, 1, "UpdateFeatures"),
    # Served as a ZooKeeper-mode Kafka 3.9 serves it without migration: the connection is closed.
    ApiKey.ENVELOPE: (0, 0, "Envelope"),
    ApiKey.DESCRIBE_CLUSTER: (0, 1, "DescribeCluster"),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0, "DescribeProducers"),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0, "DescribeTransactions"),
    ApiKey.LIST_TRANSACTIONS: (0, 1, "ListTransactions"),
    # Answered by the active controller, as Kafka 3.9's; kafkette brokers still claim their producer id
    # blocks in ZooKeeper themselves, as Kafka brokers did before inter.broker.protocol.version 3.0.
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0, "AllocateProducerIds"),
    # KIP-848's APIs, advertised by a ZooKeeper-mode Kafka 3.9 and answered UNSUPPORTED_VERSION (its
    # new group coordinator cannot run there).
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 0, "ConsumerGroupHeartbeat"),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0, "ConsumerGroupDescribe"),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0, "DescribeTopicPartitions"),
}

def version_range(api_key: int) -> tuple[int, int] | None:
    entry = SUPPORTED.get(api_key)  # type: ignore[call-overload]
    return (entry[0], entry[1]) if entry else None


def is_supported(api_key: int, version: int) -> bool:
    rng = version_range(api_key)
    return rng is not None and rng[0] <= version <= rng[1]


def advertised() -> list[tuple[int, int, int]]:
    """(api_key, min_version, max_version) rows for an ApiVersions response, by api key."""
    return [(int(k), lo, hi) for k, (lo, hi, _name) in sorted(SUPPORTED.items())]
