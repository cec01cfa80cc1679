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


class ErrorCode(IntEnum):
    """Kafka error codes, named as in Kafka's ``Errors`` enum: ``ErrorCode.NOT_LEADER_OR_FOLLOWER == 6``.

    Each member is one row of the table a reviewer holds next to Kafka's enum: code, whether Kafka's
    exception for it is retriable, and our default message.
    """

    retriable: bool
    message: str

    def __new__(cls, code: int, retriable: bool = False, message: str = "") -> ErrorCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.retriable = retriable
        member.message = message
        return member

    # fmt: off
    UNKNOWN_SERVER_ERROR = -1, False, "The broker failed unexpectedly while handling the request."
    NONE = 0, False, "No error."
    OFFSET_OUT_OF_RANGE = 1, False, "The offset is outside the range the partition's log holds."
    CORRUPT_MESSAGE = 2, True, "A record batch is corrupt: bad CRC, bad size, or a null key on a compacted topic."
    UNKNOWN_TOPIC_OR_PARTITION = 3, True, "This broker does not host the topic-partition."
    INVALID_FETCH_SIZE = 4, False, "The fetch size is not valid."
    LEADER_NOT_AVAILABLE = 5, True, "The partition has no leader right now (an election is under way)."
    NOT_LEADER_OR_FOLLOWER = 6, True, "This broker is not the partition's leader (or, for replica requests, not a replica)."
    REQUEST_TIMED_OUT = 7, True, "The request timed out."
    BROKER_NOT_AVAILABLE = 8, False, "The broker is not available."
    REPLICA_NOT_AVAILABLE = 9, True, "The replica for the topic-partition is not available."
    MESSAGE_TOO_LARGE = 10, False, "A record batch is larger than the broker accepts."
    STALE_CONTROLLER_EPOCH = 11, False, "The request carries an old controller epoch; the controller has moved."
    OFFSET_METADATA_TOO_LARGE = 12, False, "The offset commit metadata is too large."
    NETWORK_EXCEPTION = 13, True, "The connection closed before a response arrived."
    COORDINATOR_LOAD_IN_PROGRESS = 14, True, "The coordinator is still loading its state."
    COORDINATOR_NOT_AVAILABLE = 15, True, "The coordinator is not available."
    NOT_COORDINATOR = 16, True, "This broker is not the coordinator for the group or transactional id."
    INVALID_TOPIC_EXCEPTION = 17, False, "The topic name is invalid or the operation is not allowed on it."
    RECORD_LIST_TOO_LARGE = 18, False, "A record batch is larger than the topic's segment size."
    NOT_ENOUGH_REPLICAS = 19, True, "Fewer in-sync replicas than min.insync.replicas: records rejected."
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20, True, "Records were appended, but the ISR shrank below min.insync.replicas."
    INVALID_REQUIRED_ACKS = 21, False, "The produce request's acks value is not valid."
    ILLEGAL_GENERATION = 22, False, "The group generation id is not current."
    INCONSISTENT_GROUP_PROTOCOL = 23, False, "The member's protocols do not match the group's."
    INVALID_GROUP_ID = 24, False, "The group id is not valid."
    UNKNOWN_MEMBER_ID = 25, False, "The coordinator does not know this member id."
    INVALID_SESSION_TIMEOUT = 26, False, "The session timeout is outside group.min/max.session.timeout.ms."
    REBALANCE_IN_PROGRESS = 27, False, "The group is rebalancing; the member must rejoin."
    INVALID_COMMIT_OFFSET_SIZE = 28, False, "The offset commit is too large."
    TOPIC_AUTHORIZATION_FAILED = 29, False, "Not authorized to access the topic."
    GROUP_AUTHORIZATION_FAILED = 30, False, "Not authorized to access the group."
    CLUSTER_AUTHORIZATION_FAILED = 31, False, "Not authorized for this cluster operation."
    INVALID_TIMESTAMP = 32, False, "A record timestamp is outside the accepted range."
    UNSUPPORTED_SASL_MECHANISM = 33, False, "The broker does not support this SASL mechanism."
    ILLEGAL_SASL_STATE = 34, False, "The request is not valid in the current SASL state."
    UNSUPPORTED_VERSION = 35, False, "The broker does not support this API version."
    TOPIC_ALREADY_EXISTS = 36, False, "A topic with this name already exists."
    INVALID_PARTITIONS = 37, False, "The partition count is not valid."
    INVALID_REPLICATION_FACTOR = 38, False, "The replication factor is below 1 or above the number of brokers."
    INVALID_REPLICA_ASSIGNMENT = 39, False, "The replica assignment is not valid."
    INVALID_CONFIG = 40, False, "The configuration is not valid."
    NOT_CONTROLLER = 41, True, "This broker is not the active controller."
    INVALID_REQUEST = 42, False, "The request is malformed or not valid for this broker."
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43, False, "The topic's message format does not support this request."
    POLICY_VIOLATION = 44, False, "The request breaks a configured policy."
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45, False, "The producer's sequence number is out of order."
    DUPLICATE_SEQUENCE_NUMBER = 46, False, "The producer's sequence number is a duplicate."
    INVALID_PRODUCER_EPOCH = 47, False, "The producer epoch is older than the current one."
    INVALID_TXN_STATE = 48, False, "The transactional operation is not valid in the transaction's state."
    INVALID_PRODUCER_ID_MAPPING = 49, False, "The producer id is not the one assigned to this transactional id."
    INVALID_TRANSACTION_TIMEOUT = 50, False, "The transaction timeout exceeds transaction.max.timeout.ms."
    CONCURRENT_TRANSACTIONS = 51, True, "Another operation on this transaction is still in progress."
    TRANSACTION_COORDINATOR_FENCED = 52, False, "The transaction coordinator sending markers is no longer current."
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53, False, "Not authorized to use the transactional id."
    SECURITY_DISABLED = 54, False, "Security features are disabled."
    OPERATION_NOT_ATTEMPTED = 55, False, "The broker skipped this operation because another in the batch failed."
    KAFKA_STORAGE_ERROR = 56, True, "A disk error occurred while accessing the log."
    LOG_DIR_NOT_FOUND = 57, False, "The log directory is not one of the broker's log.dirs."
    SASL_AUTHENTICATION_FAILED = 58, False, "SASL authentication failed."
    UNKNOWN_PRODUCER_ID = 59, False, "The broker has no state for this producer id."
    REASSIGNMENT_IN_PROGRESS = 60, False, "A partition reassignment is in progress."
    DELEGATION_TOKEN_AUTH_DISABLED = 61, False, "Delegation tokens are not enabled."
    DELEGATION_TOKEN_NOT_FOUND = 62, False, "The delegation token does not exist."
    DELEGATION_TOKEN_OWNER_MISMATCH = 63, False, "The principal is not the token's owner or renewer."
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64, False, "Delegation token requests are not allowed on this channel."
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65, False, "Not authorized for this delegation token operation."
    DELEGATION_TOKEN_EXPIRED = 66, False, "The delegation token has expired."
    INVALID_PRINCIPAL_TYPE = 67, False, "The principal type is not supported."
    NON_EMPTY_GROUP = 68, False, "The group still has members."
    GROUP_ID_NOT_FOUND = 69, False, "The group does not exist."
    FETCH_SESSION_ID_NOT_FOUND = 70, True, "The fetch session does not exist."
    INVALID_FETCH_SESSION_EPOCH = 71, True, "The fetch session epoch is not the expected one."
    LISTENER_NOT_FOUND = 72, True, "The leader has no listener matching the one this request came on."
    TOPIC_DELETION_DISABLED = 73, False, "Topic deletion is disabled."
    FENCED_LEADER_EPOCH = 74, True, "The request's leader epoch is older than the broker's."
    UNKNOWN_LEADER_EPOCH = 75, True, "The request's leader epoch is newer than the broker's."
    UNSUPPORTED_COMPRESSION_TYPE = 76, False, "The client does not support the partition's compression type."
    STALE_BROKER_EPOCH = 77, False, "The broker epoch is stale."
    OFFSET_NOT_AVAILABLE = 78, True, "The new leader's high watermark has not caught up yet."
    MEMBER_ID_REQUIRED = 79, False, "The member must rejoin with the member id it was given."
    PREFERRED_LEADER_NOT_AVAILABLE = 80, True, "The preferred leader is not available."
    GROUP_MAX_SIZE_REACHED = 81, False, "The group has reached group.max.size members."
    FENCED_INSTANCE_ID = 82, False, "Another member with this group.instance.id has a different member id."
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83, True, "No eligible leader is available for the partition."
    ELECTION_NOT_NEEDED = 84, True, "The partition does not need a leader election."
    NO_REASSIGNMENT_IN_PROGRESS = 85, False, "No partition reassignment is in progress."
    GROUP_SUBSCRIBED_TO_TOPIC = 86, False, "The group is subscribed to the topic, so its offsets cannot be deleted."
    INVALID_RECORD = 87, False, "A record failed the broker's validation."
    UNSTABLE_OFFSET_COMMIT = 88, True, "Pending transactional offsets must be resolved first."
    THROTTLING_QUOTA_EXCEEDED = 89, True, "The throttling quota has been exceeded."
    PRODUCER_FENCED = 90, False, "A newer producer with the same transactional id has fenced this one."
    RESOURCE_NOT_FOUND = 91, False, "The request refers to a resource that does not exist."
    DUPLICATE_RESOURCE = 92, False, "The request names the same resource twice."
    UNACCEPTABLE_CREDENTIAL = 93, False, "The credential does not meet the acceptance criteria."
    INCONSISTENT_VOTER_SET = 94, False, "The sender or receiver is not one of the expected voters."
    INVALID_UPDATE_VERSION = 95, False, "The update version is not valid."
    FEATURE_UPDATE_FAILED = 96, False, "Updating the finalized features failed on the server."
    PRINCIPAL_DESERIALIZATION_FAILURE = 97, False, "The forwarded request's principal could not be deserialized."
    SNAPSHOT_NOT_FOUND = 98, False, "The snapshot does not exist."
    POSITION_OUT_OF_RANGE = 99, False, "The position is negative or beyond the snapshot's size."
    UNKNOWN_TOPIC_ID = 100, True, "This broker does not host the topic id."
    DUPLICATE_BROKER_REGISTRATION = 101, False, "The broker id is already registered."
    BROKER_ID_NOT_REGISTERED = 102, False, "The broker id is not registered."
    INCONSISTENT_TOPIC_ID = 103, True, "The topic id does not match the log's topic id."
    INCONSISTENT_CLUSTER_ID = 104, False, "The cluster id does not match this server's."
    TRANSACTIONAL_ID_NOT_FOUND = 105, False, "The transactional id does not exist."
    FETCH_SESSION_TOPIC_ID_ERROR = 106, True, "The fetch session used topic ids inconsistently."
    INELIGIBLE_REPLICA = 107, False, "The proposed ISR contains an ineligible replica."
    NEW_LEADER_ELECTED = 108, False, "The partition state was updated, but the leader has changed."
    OFFSET_MOVED_TO_TIERED_STORAGE = 109, False, "The offset is now only in tiered storage."
    FENCED_MEMBER_EPOCH = 110, False, "The member epoch is fenced; the member must give up its partitions and rejoin."
    UNRELEASED_INSTANCE_ID = 111, False, "Another member still holds this instance id."
    UNSUPPORTED_ASSIGNOR = 112, False, "The group does not support this assignor or assignor version."
    STALE_MEMBER_EPOCH = 113, False, "The member epoch is stale; retry with the epoch from the latest heartbeat."
    MISMATCHED_ENDPOINT_TYPE = 114, False, "The request reached an endpoint of the wrong type."
    UNSUPPORTED_ENDPOINT_TYPE = 115, False, "This endpoint type is not supported."
    UNKNOWN_CONTROLLER_ID = 116, False, "The controller id is unknown."
    UNKNOWN_SUBSCRIPTION_ID = 117, False, "The telemetry subscription id is unknown or outdated."
    TELEMETRY_TOO_LARGE = 118, False, "The telemetry push is larger than the broker accepts."
    INVALID_REGISTRATION = 119, False, "The controller rejected the broker registration."
    TRANSACTION_ABORTABLE = 120, False, "The transaction failed; abort it to keep using the transactional id."
    INVALID_RECORD_STATE = 121, False, "The record's delivery state does not allow this acknowledgement."
    SHARE_SESSION_NOT_FOUND = 122, True, "The share session does not exist."
    INVALID_SHARE_SESSION_EPOCH = 123, True, "The share session epoch is not the expected one."
    FENCED_STATE_EPOCH = 124, False, "The share-group state epoch does not match the share coordinator's."
    INVALID_VOTER_KEY = 125, False, "The voter key does not match the receiving replica's."
    DUPLICATE_VOTER = 126, False, "The voter is already in the voter set."
    VOTER_NOT_FOUND = 127, False, "The voter is not in the voter set."
    INVALID_REGULAR_EXPRESSION = 128, False, "The regular expression is not valid."
    REBOOTSTRAP_REQUIRED = 129, False, "The client's metadata is stale; it must bootstrap again."
    STREAMS_INVALID_TOPOLOGY = 130, False, "The streams topology is not valid."
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131, False, "The streams topology epoch is not valid."
    STREAMS_TOPOLOGY_FENCED = 132, False, "The streams topology epoch is outdated."
    SHARE_SESSION_LIMIT_REACHED = 133, True, "The broker has reached its limit of share sessions."
    # fmt: on


ERRORS: dict[int, ErrorInfo] = {
    int(e): ErrorInfo(int(e), e.name, e.retriable, e.message) for e in ErrorCode
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
