"""Kafka's error codes: numbers, names, retriability and a short default message for each.

The numbers and names are Kafka's wire contract (``org.apache.kafka.common.protocol.Errors``, up to
Kafka 4.1). ``retriable`` is true exactly when Kafka's exception class for the code extends
``RetriableException``: clients use that flag to decide whether to retry a request on their own, so
it must match Kafka or stock clients behave differently against us. The messages are ours.

No I/O here: handlers put ``ErrorCode`` values in responses and raise ``KafkaError`` internally.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "ERRORS",
    "ErrorCode",
    "ErrorInfo",
    "KafkaError",
    "error_info",
    "is_retriable",
]


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """One row of the error table."""

    code: int
    name: str
    retriable: bool
    message: str


# (code, Kafka name, retriable, our default message). Kept as one literal table so a reviewer can
# hold it next to Kafka's enum; ErrorCode and the lookup dict below are derived from it.
# fmt: off
_TABLE: tuple[tuple[int, str, bool, str], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", False, "The broker failed unexpectedly while handling the request."),
    (0, "NONE", False, "No error."),
    (1, "OFFSET_OUT_OF_RANGE", False, "The offset is outside the range the partition's log holds."),
    (2, "CORRUPT_MESSAGE", True, "A record batch is corrupt: bad CRC, bad size, or a null key on a compacted topic."),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, "This broker does not host the topic-partition."),
    (4, "INVALID_FETCH_SIZE", False, "The fetch size is not valid."),
    (5, "LEADER_NOT_AVAILABLE", True, "The partition has no leader right now (an election is under way)."),
    (6, "NOT_LEADER_OR_FOLLOWER", True, "This broker is not the partition's leader (or, for replica requests, not a replica)."),
    (7, "REQUEST_TIMED_OUT", True, "The request timed out."),
    (8, "BROKER_NOT_AVAILABLE", False, "The broker is not available."),
    (9, "REPLICA_NOT_AVAILABLE", True, "The replica for the topic-partition is not available."),
    (10, "MESSAGE_TOO_LARGE", False, "A record batch is larger than the broker accepts."),
    (11, "STALE_CONTROLLER_EPOCH", False, "The request carries an old controller epoch; the controller has moved."),
    (12, "OFFSET_METADATA_TOO_LARGE", False, "The offset commit metadata is too large."),
    (13, "NETWORK_EXCEPTION", True, "The connection closed before a response arrived."),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True, "The coordinator is still loading its state."),
    (15, "COORDINATOR_NOT_AVAILABLE", True, "The coordinator is not available."),
    (16, "NOT_COORDINATOR", True, "This broker is not the coordinator for the group or transactional id."),
    (17, "INVALID_TOPIC_EXCEPTION", False, "The topic name is invalid or the operation is not allowed on it."),
    (18, "RECORD_LIST_TOO_LARGE", False, "A record batch is larger than the topic's segment size."),
    (19, "NOT_ENOUGH_REPLICAS", True, "Fewer in-sync replicas than min.insync.replicas: records rejected."),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, "Records were appended, but the ISR shrank below min.insync.replicas."),
    (21, "INVALID_REQUIRED_ACKS", False, "The produce request's acks value is not valid."),
    (22, "ILLEGAL_GENERATION", False, "The group generation id is not current."),
    (23, "INCONSISTENT_GROUP_PROTOCOL", False, "The member's protocols do not match the group's."),
    (24, "INVALID_GROUP_ID", False, "The group id is not valid."),
    (25, "UNKNOWN_MEMBER_ID", False, "The coordinator does not know this member id."),
    (26, "INVALID_SESSION_TIMEOUT", False, "The session timeout is outside group.min/max.session.timeout.ms."),
    (27, "REBALANCE_IN_PROGRESS", False, "The group is rebalancing; the member must rejoin."),
    (28, "INVALID_COMMIT_OFFSET_SIZE", False, "The offset commit is too large."),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, "Not authorized to access the topic."),
    (30, "GROUP_AUTHORIZATION_FAILED", False, "Not authorized to access the group."),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, "Not authorized for this cluster operation."),
    (32, "INVALID_TIMESTAMP", False, "A record timestamp is outside the accepted range."),
    (33, "UNSUPPORTED_SASL_MECHANISM", False, "The broker does not support this SASL mechanism."),
    (34, "ILLEGAL_SASL_STATE", False, "The request is not valid in the current SASL state."),
    (35, "UNSUPPORTED_VERSION", False, "The broker does not support this API version."),
    (36, "TOPIC_ALREADY_EXISTS", False, "A topic with this name already exists."),
    (37, "INVALID_PARTITIONS", False, "The partition count is not valid."),
    (38, "INVALID_REPLICATION_FACTOR", False, "The replication factor is below 1 or above the number of brokers."),
    (39, "INVALID_REPLICA_ASSIGNMENT", False, "The replica assignment is not valid."),
    (40, "INVALID_CONFIG", False, "The configuration is not valid."),
    (41, "NOT_CONTROLLER", True, "This broker is not the active controller."),
    (42, "INVALID_REQUEST", False, "The request is malformed or not valid for this broker."),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False, "The topic's message format does not support this request."),
    (44, "POLICY_VIOLATION", False, "The request breaks a configured policy."),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, "The producer's sequence number is out of order."),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, "The producer's sequence number is a duplicate."),
    (47, "INVALID_PRODUCER_EPOCH", False, "The producer epoch is older than the current one."),
    (48, "INVALID_TXN_STATE", False, "The transactional operation is not valid in the transaction's state."),
    (49, "INVALID_PRODUCER_ID_MAPPING", False, "The producer id is not the one assigned to this transactional id."),
    (50, "INVALID_TRANSACTION_TIMEOUT", False, "The transaction timeout exceeds transaction.max.timeout.ms."),
    (51, "CONCURRENT_TRANSACTIONS", True, "Another operation on this transaction is still in progress."),
    (52, "TRANSACTION_COORDINATOR_FENCED", False, "The transaction coordinator sending markers is no longer current."),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, "Not authorized to use the transactional id."),
    (54, "SECURITY_DISABLED", False, "Security features are disabled."),
    (55, "OPERATION_NOT_ATTEMPTED", False, "The broker skipped this operation because another in the batch failed."),
    (56, "KAFKA_STORAGE_ERROR", True, "A disk error occurred while accessing the log."),
    (57, "LOG_DIR_NOT_FOUND", False, "The log directory is not one of the broker's log.dirs."),
    (58, "SASL_AUTHENTICATION_FAILED", False, "SASL authentication failed."),
    (59, "UNKNOWN_PRODUCER_ID", False, "The broker has no state for this producer id."),
    (60, "REASSIGNMENT_IN_PROGRESS", False, "A partition reassignment is in progress."),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", False, "Delegation tokens are not enabled."),
    (62, "DELEGATION_TOKEN_NOT_FOUND", False, "The delegation token does not exist."),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", False, "The principal is not the token's owner or renewer."),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", False, "Delegation token requests are not allowed on this channel."),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", False, "Not authorized for this delegation token operation."),
    (66, "DELEGATION_TOKEN_EXPIRED", False, "The delegation token has expired."),
    (67, "INVALID_PRINCIPAL_TYPE", False, "The principal type is not supported."),
    (68, "NON_EMPTY_GROUP", False, "The group still has members."),
    (69, "GROUP_ID_NOT_FOUND", False, "The group does not exist."),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True, "The fetch session does not exist."),
    (71, "INVALID_FETCH_SESSION_EPOCH", True, "The fetch session epoch is not the expected one."),
    (72, "LISTENER_NOT_FOUND", True, "The leader has no listener matching the one this request came on."),
    (73, "TOPIC_DELETION_DISABLED", False, "Topic deletion is disabled."),
    (74, "FENCED_LEADER_EPOCH", True, "The request's leader epoch is older than the broker's."),
    (75, "UNKNOWN_LEADER_EPOCH", True, "The request's leader epoch is newer than the broker's."),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False, "The client does not support the partition's compression type."),
    (77, "STALE_BROKER_EPOCH", False, "The broker epoch is stale."),
    (78, "OFFSET_NOT_AVAILABLE", True, "The new leader's high watermark has not caught up yet."),
    (79, "MEMBER_ID_REQUIRED", False, "The member must rejoin with the member id it was given."),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True, "The preferred leader is not available."),
    (81, "GROUP_MAX_SIZE_REACHED", False, "The group has reached group.max.size members."),
    (82, "FENCED_INSTANCE_ID", False, "Another member with this group.instance.id has a different member id."),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True, "No eligible leader is available for the partition."),
    (84, "ELECTION_NOT_NEEDED", True, "The partition does not need a leader election."),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False, "No partition reassignment is in progress."),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", False, "The group is subscribed to the topic, so its offsets cannot be deleted."),
    (87, "INVALID_RECORD", False, "A record failed the broker's validation."),
    (88, "UNSTABLE_OFFSET_COMMIT", True, "Pending transactional offsets must be resolved first."),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, "The throttling quota has been exceeded."),
    (90, "PRODUCER_FENCED", False, "A newer producer with the same transactional id has fenced this one."),
    (91, "RESOURCE_NOT_FOUND", False, "The request refers to a resource that does not exist."),
    (92, "DUPLICATE_RESOURCE", False, "The request names the same resource twice."),
    (93, "UNACCEPTABLE_CREDENTIAL", False, "The credential does not meet the acceptance criteria."),
    (94, "INCONSISTENT_VOTER_SET", False, "The sender or receiver is not one of the expected voters."),
    (95, "INVALID_UPDATE_VERSION", False, "The update version is not valid."),
    (96, "FEATURE_UPDATE_FAILED", False, "Updating the finalized features failed on the server."),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", False, "The forwarded request's principal could not be deserialized."),
    (98, "SNAPSHOT_NOT_FOUND", False, "The snapshot does not exist."),
    (99, "POSITION_OUT_OF_RANGE", False, "The position is negative or beyond the snapshot's size."),
    (100, "UNKNOWN_TOPIC_ID", True, "This broker does not host the topic id."),
    (101, "DUPLICATE_BROKER_REGISTRATION", False, "The broker id is already registered."),
    (102, "BROKER_ID_NOT_REGISTERED", False, "The broker id is not registered."),
    (103, "INCONSISTENT_TOPIC_ID", True, "The topic id does not match the log's topic id."),
    (104, "INCONSISTENT_CLUSTER_ID", False, "The cluster id does not match this server's."),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", False, "The transactional id does not exist."),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True, "The fetch session used topic ids inconsistently."),
    (107, "INELIGIBLE_REPLICA", False, "The proposed ISR contains an ineligible replica."),
    (108, "NEW_LEADER_ELECTED", False, "The partition state was updated, but the leader has changed."),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", False, "The offset is now only in tiered storage."),
    (110, "FENCED_MEMBER_EPOCH", False, "The member epoch is fenced; the member must give up its partitions and rejoin."),
    (111, "UNRELEASED_INSTANCE_ID", False, "Another member still holds this instance id."),
    (112, "UNSUPPORTED_ASSIGNOR", False, "The group does not support this assignor or assignor version."),
    (113, "STALE_MEMBER_EPOCH", False, "The member epoch is stale; retry with the epoch from the latest heartbeat."),
    (114, "MISMATCHED_ENDPOINT_TYPE", False, "The request reached an endpoint of the wrong type."),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", False, "This endpoint type is not supported."),
    (116, "UNKNOWN_CONTROLLER_ID", False, "The controller id is unknown."),
    (117, "UNKNOWN_SUBSCRIPTION_ID", False, "The telemetry subscription id is unknown or outdated."),
    (118, "TELEMETRY_TOO_LARGE", False, "The telemetry push is larger than the broker accepts."),
    (119, "INVALID_REGISTRATION", False, "The controller rejected the broker registration."),
    (120, "TRANSACTION_ABORTABLE", False, "The transaction failed; abort it to keep using the transactional id."),
    (121, "INVALID_RECORD_STATE", False, "The record's delivery state does not allow this acknowledgement."),
    (122, "SHARE_SESSION_NOT_FOUND", True, "The share session does not exist."),
    (123, "INVALID_SHARE_SESSION_EPOCH", True, "The share session epoch is not the expected one."),
    (124, "FENCED_STATE_EPOCH", False, "The share-group state epoch does not match the share coordinator's."),
    (125, "INVALID_VOTER_KEY", False, "The voter key does not match the receiving replica's."),
    (126, "DUPLICATE_VOTER", False, "The voter is already in the voter set."),
    (127, "VOTER_NOT_FOUND", False, "The voter is not in the voter set."),
    (128, "INVALID_REGULAR_EXPRESSION", False, "The regular expression is not valid."),
    (129, "REBOOTSTRAP_REQUIRED", False, "The client's metadata is stale; it must bootstrap again."),
    (130, "STREAMS_INVALID_TOPOLOGY", False, "The streams topology is not valid."),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", False, "The streams topology epoch is not valid."),
    (132, "STREAMS_TOPOLOGY_FENCED", False, "The streams topology epoch is outdated."),
    (133, "SHARE_SESSION_LIMIT_REACHED", True, "The broker has reached its limit of share sessions."),
)
# fmt: on

# Members are Kafka's names, so ErrorCode.NOT_LEADER_OR_FOLLOWER == 6 and ErrorCode(6).name matches.
# Built from the table so the two cannot disagree; a type checker cannot list the members of an enum
# made this way, and treats member access as the IntEnum it is.
ErrorCode = IntEnum("ErrorCode", [(name, code) for code, name, _, _ in _TABLE], module=__name__)  # type: ignore[misc]
ErrorCode.__doc__ = "Kafka error codes, named as in Kafka's ``Errors`` enum."

ERRORS: dict[int, ErrorInfo] = {
    code: ErrorInfo(code, name, retriable, msg) for code, name, retriable, msg in _TABLE
}


def error_info(code: int) -> ErrorInfo:
    """The table row for ``code``; an unknown code gets a synthetic, non-retriable row.

    Never raises: a broker or client decoding a response from a newer peer must still be able to
    log and surface the code.
    """
    info = ERRORS.get(int(code))
    if info is not None:
        return info
    return ErrorInfo(int(code), f"UNKNOWN_ERROR_CODE_{int(code)}", False, f"Unknown error code {int(code)}.")


def is_retriable(code: int) -> bool:
    """Whether Kafka's clients retry this error by themselves (unknown codes: no)."""
    return error_info(code).retriable


class KafkaError(Exception):
    """An error a broker component reports with a Kafka error code.

    Handlers catch it and put ``.code`` into the response. ``.message`` is the given message or the
    table's default one; ``str()`` prefixes it with the name and code for logs.
    """

    def __init__(self, code: int, message: str | None = None) -> None:
        info = error_info(code)
        self.code: int = info.code
        self.name: str = info.name
        self.retriable: bool = info.retriable
        self.message: str = message if message is not None else info.message
        super().__init__(self.message)

    @classmethod
    def from_code(cls, code: int, message: str | None = None) -> KafkaError:
        return cls(code, message)

    @property
    def error_code(self) -> ErrorCode | int:
        """The code as an ``ErrorCode`` when known, else the bare int."""
        try:
            return ErrorCode(self.code)
        except ValueError:
            return self.code

    def __repr__(self) -> str:
        return f"KafkaError({self.name}={self.code}, {self.message!r})"

    def __str__(self) -> str:
        return f"{self.name} ({self.code}): {self.message}"
