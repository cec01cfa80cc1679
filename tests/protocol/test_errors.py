"""The error table against Kafka's facts and against kafka-python's independent copy."""

from __future__ import annotations

import inspect

import kafka.errors as kp
import pytest

from protocol.errors import ERRORS, ErrorCode, ErrorInfo, KafkaError, error_info, is_retriable

# Where kafka-python 3.0.12 differs from Kafka's Java source (Errors.java / common.errors.*).
# Each entry: code -> (kafka-python's name, kafka-python's retriable). Ours follows Java.
KAFKA_PYTHON_DIFFERENCES: dict[int, tuple[str, bool]] = {
    # Java: UNKNOWN_SERVER_ERROR(-1, ..., UnknownServerException::new); kafka-python keeps the old "UNKNOWN".
    -1: ("UNKNOWN", False),
    # Java: NONE(0, null, null); kafka-python calls it NO_ERROR.
    0: ("NO_ERROR", False),
    # Java: CorruptRecordException extends RetriableException, so CORRUPT_MESSAGE is retriable.
    2: ("CORRUPT_MESSAGE", False),
    # Java renamed NOT_LEADER_FOR_PARTITION to NOT_LEADER_OR_FOLLOWER (KIP-392); same code and retriability.
    6: ("NOT_LEADER_FOR_PARTITION", True),
    # Java: MESSAGE_TOO_LARGE(10, ..., RecordTooLargeException::new).
    10: ("MESSAGE_SIZE_TOO_LARGE", False),
    # Java: INVALID_TOPIC_EXCEPTION(17, ..., InvalidTopicException::new).
    17: ("INVALID_TOPIC", False),
    # Java: INVALID_REPLICA_ASSIGNMENT(39, ..., InvalidReplicaAssignmentException::new).
    39: ("INVALID_REPLICATION_ASSIGNMENT", False),
}


def _kafka_python_errors() -> dict[int, tuple[str, bool]]:
    """errno -> (message name, retriable) for every kafka-python broker error class."""
    found: dict[int, tuple[str, bool]] = {}
    for _, cls in inspect.getmembers(kp, inspect.isclass):
        if issubclass(cls, kp.KafkaError) and getattr(cls, "errno", None) is not None:
            found[cls.errno] = (cls.message, bool(cls.retriable))
    return found


def test_table_is_complete_and_contiguous() -> None:
    # Kafka numbers its errors -1, 0, 1, ... with no gaps; 133 is the newest (Kafka 4.1).
    assert sorted(ERRORS) == list(range(-1, 134))
    assert len({info.name for info in ERRORS.values()}) == len(ERRORS)


def test_enum_matches_table() -> None:
    assert len(ErrorCode) == len(ERRORS)
    for member in ErrorCode:
        assert ERRORS[member.value].name == member.name


@pytest.mark.parametrize(
    ("code", "name", "retriable"),
    [
        (-1, "UNKNOWN_SERVER_ERROR", False),
        (0, "NONE", False),
        (1, "OFFSET_OUT_OF_RANGE", False),
        (2, "CORRUPT_MESSAGE", True),
        (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
        (5, "LEADER_NOT_AVAILABLE", True),
        (6, "NOT_LEADER_OR_FOLLOWER", True),
        (7, "REQUEST_TIMED_OUT", True),
        (8, "BROKER_NOT_AVAILABLE", False),
        (10, "MESSAGE_TOO_LARGE", False),
        (14, "COORDINATOR_LOAD_IN_PROGRESS", True),
        (15, "COORDINATOR_NOT_AVAILABLE", True),
        (16, "NOT_COORDINATOR", True),
        (19, "NOT_ENOUGH_REPLICAS", True),
        (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True),
        (22, "ILLEGAL_GENERATION", False),
        (25, "UNKNOWN_MEMBER_ID", False),
        (27, "REBALANCE_IN_PROGRESS", False),
        (35, "UNSUPPORTED_VERSION", False),
        (36, "TOPIC_ALREADY_EXISTS", False),
        (41, "NOT_CONTROLLER", True),
        (42, "INVALID_REQUEST", False),
        (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False),
        (51, "CONCURRENT_TRANSACTIONS", True),
        (56, "KAFKA_STORAGE_ERROR", True),
        (74, "FENCED_LEADER_EPOCH", True),
        (75, "UNKNOWN_LEADER_EPOCH", True),
        (79, "MEMBER_ID_REQUIRED", False),
        (84, "ELECTION_NOT_NEEDED", True),
        (89, "THROTTLING_QUOTA_EXCEEDED", True),
        (90, "PRODUCER_FENCED", False),
        (100, "UNKNOWN_TOPIC_ID", True),
        (120, "TRANSACTION_ABORTABLE", False),
        (129, "REBOOTSTRAP_REQUIRED", False),
        (133, "SHARE_SESSION_LIMIT_REACHED", True),
    ],
)
def test_spot_checks(code: int, name: str, retriable: bool) -> None:
    info = error_info(code)
    assert (info.code, info.name, info.retriable) == (code, name, retriable)
    assert ErrorCode[name] == code
    assert is_retriable(code) is retriable


def test_agrees_with_kafka_python_on_whole_overlap() -> None:
    theirs = _kafka_python_errors()
    assert len(theirs) > 120  # the comparison is meaningful only if kafka-python's table was found
    mismatches = {}
    for code, (name, retriable) in theirs.items():
        assert code in ERRORS, f"kafka-python knows code {code} ({name}) and we do not"
        ours = ERRORS[code]
        if (ours.name, ours.retriable) != (name, retriable):
            mismatches[code] = (name, retriable)
    assert mismatches == KAFKA_PYTHON_DIFFERENCES


def test_every_entry_has_a_message() -> None:
    for info in ERRORS.values():
        assert isinstance(info, ErrorInfo)
        assert info.message and info.message.endswith(".")


def test_unknown_codes_never_raise() -> None:
    info = error_info(31000)
    assert info.code == 31000 and not info.retriable and "31000" in info.name
    assert is_retriable(-42) is False


def test_error_info_is_frozen() -> None:
    with pytest.raises(AttributeError):
        error_info(3).retriable = False  # type: ignore[misc]


def test_kafka_error() -> None:
    err = KafkaError.from_code(ErrorCode.NOT_ENOUGH_REPLICAS)
    assert isinstance(err, Exception)
    assert (err.code, err.name, err.retriable) == (19, "NOT_ENOUGH_REPLICAS", True)
    assert err.message == ERRORS[19].message
    assert err.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert "NOT_ENOUGH_REPLICAS" in str(err)

    custom = KafkaError.from_code(40, "segment.bytes must be at least 14")
    assert custom.message == "segment.bytes must be at least 14"
    assert not custom.retriable

    unknown = KafkaError(5000)
    assert unknown.code == 5000 and unknown.error_code == 5000
    with pytest.raises(KafkaError) as caught:
        raise KafkaError.from_code(6)
    assert caught.value.retriable
