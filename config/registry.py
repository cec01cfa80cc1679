"""The configuration registry: every broker and topic config kafkette knows, in one place.

Names, types, defaults, validators and dynamic-update modes are Apache Kafka's (3.9); the docs are
ours. The broker (``server.properties``), DescribeConfigs / AlterConfigs / CreateTopics, the CLI and
the generated docs (``config/docs.py``) all read ``REGISTRY``. It is a bottom-layer package of its own,
beside protocol/, because every layer reads configs: storage (log configs), the controller, the
coordinators and the CLI. Standard library only, no I/O.

Main pieces:

* ``ConfigDef`` rows in ``REGISTRY`` (name -> ConfigDef); ``topic_configs()`` / ``broker_configs()``.
* ``parse_value`` / ``validate`` / ``format_value``: Kafka's string <-> typed conversions.
* ``BrokerConfig``: static properties plus dynamic (per-broker and cluster-default) layers.
* ``LogConfig``: a topic's effective configuration, topic overrides over broker defaults through the
  synonym chain, with the source of every value for DescribeConfigs.

Configs Kafka 4.0 removed are flagged ``removed_in``. The three topic configs among them stay,
because the topic config set is exactly Kafka 3.9's and 3.x clients still send them. Of their broker
synonyms only ``log.message.downconversion.enable`` is defined, because kafkette still serves the
Fetch versions it governs (v0-3, down-converted); ``log.message.format.version``,
``log.message.timestamp.difference.max.ms`` and ``offsets.commit.required.acks`` are not, and a
``server.properties`` that sets them gets them reported as unknown.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum, IntEnum
from types import MappingProxyType
from typing import Any

__all__ = [
    "REGISTRY",
    "BrokerConfig",
    "Check",
    "ConfigDef",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "EachOneOf",
    "Importance",
    "LogConfig",
    "OneOf",
    "Password",
    "Range",
    "Synonym",
    "UpdateMode",
    "at_least",
    "between",
    "broker_configs",
    "format_value",
    "parse_value",
    "python_name",
    "topic_configs",
    "validate",
]

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308  # Java's Double.MAX_VALUE

LISTENER_PREFIX = "listener.name."

MS_PER_MINUTE = 60_000
MS_PER_HOUR = 3_600_000


# ---------------------------------------------------------------------------------------------------
# Enums with Kafka's wire values
# ---------------------------------------------------------------------------------------------------


class ConfigType(IntEnum):
    """Config value types; the numbers are DescribeConfigs' ConfigType codes."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Where a value came from; the numbers are DescribeConfigs' ConfigSource codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class UpdateMode(Enum):
    """How a broker config may change at run time, as Kafka's DynamicBrokerConfig classifies it."""

    READ_ONLY = "read-only"  # server.properties only; needs a restart
    PER_BROKER = "per-broker"  # dynamic, for one broker id only
    CLUSTER_WIDE = "cluster-wide"  # dynamic, per broker or as the cluster-wide default


# ---------------------------------------------------------------------------------------------------
# Errors, passwords, validators
# ---------------------------------------------------------------------------------------------------


class ConfigError(ValueError):
    """An invalid or unknown config value. ``str()`` always names the key."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        self.name = name
        self.value = value
        self.reason = reason
        defn = REGISTRY.get(name)
        # Kafka's ConfigException text: the value as Java prints it (a list as "[a, b]"), unquoted.
        shown = "[hidden]" if defn is not None and defn.sensitive else \
            "[" + ", ".join(map(str, value)) + "]" if isinstance(value, (list, tuple)) else value
        super().__init__(f"Invalid value {shown} for configuration {name}: {reason}")


class Password:
    """A secret string whose repr never shows it (so configs can be logged)."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return "Password([hidden])"

    __str__ = __repr__


Validator = Callable[[str, Any], None]
"""Any callable ``(name, value) -> None`` that raises ConfigError; ``str()`` of it goes in the docs."""


@dataclass(frozen=True, slots=True)
class Range:
    """Numeric bounds, inclusive; either side may be open."""

    min: float | None = None
    max: float | None = None

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigError(name, value, "value must not be null")
        if self.min is not None and value < self.min:
            raise ConfigError(name, value, f"value must be at least {_num(self.min)}")
        if self.max is not None and value > self.max:
            raise ConfigError(name, value, f"value must be no more than {_num(self.max)}")

    def __str__(self) -> str:
        if self.max is None:
            return f"[{_num(self.min)},...]"
        if self.min is None:
            return f"[...,{_num(self.max)}]"
        return f"[{_num(self.min)},...,{_num(self.max)}]"


def at_least(minimum: float) -> Range:
    return Range(minimum, None)


def between(minimum: float, maximum: float) -> Range:
    return Range(minimum, maximum)


@dataclass(frozen=True, slots=True)
class OneOf:
    """A string from a fixed, case-sensitive set (Kafka's ValidString)."""

    options: tuple[str, ...]

    def __call__(self, name: str, value: Any) -> None:
        if value not in self.options:
            raise ConfigError(name, value, f"must be one of: {', '.join(self.options)}")

    def __str__(self) -> str:
        return "[" + ", ".join(self.options) + "]"


@dataclass(frozen=True, slots=True)
class EachOneOf:
    """A list whose every element is from a fixed, case-sensitive set (Kafka's ValidList)."""

    options: tuple[str, ...]

    def __call__(self, name: str, value: Any) -> None:
        for item in value or ():
            if item not in self.options:
                raise ConfigError(name, value, f"every element must be one of: {', '.join(self.options)}")

    def __str__(self) -> str:
        return "[" + ", ".join(self.options) + "]"


@dataclass(frozen=True, slots=True)
class Check:
    """A custom rule: ``predicate(value)`` must hold."""

    predicate: Callable[[Any], bool]
    reason: str
    description: str

    def __call__(self, name: str, value: Any) -> None:
        if not self.predicate(value):
            raise ConfigError(name, value, self.reason)

    def __str__(self) -> str:
        return self.description


def _num(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else str(x)


_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")
# Apache Kafka 3.9's MetadataVersion table (release, internal version), oldest first: what
# inter.broker.protocol.version and the deprecated message.format.version accept.
_METADATA_VERSIONS = (
    [(r, "") for r in ("0.8.0", "0.8.1", "0.8.2", "0.9.0")]
    + [("0.10.0", "IV0"), ("0.10.0", "IV1"), ("0.10.1", "IV0"), ("0.10.1", "IV1"), ("0.10.1", "IV2"),
       ("0.10.2", "IV0"), ("0.11.0", "IV0"), ("0.11.0", "IV1"), ("0.11.0", "IV2"), ("1.0", "IV0"), ("1.1", "IV0"),
       ("2.0", "IV0"), ("2.0", "IV1"), ("2.1", "IV0"), ("2.1", "IV1"), ("2.1", "IV2"), ("2.2", "IV0"), ("2.2", "IV1"),
       ("2.3", "IV0"), ("2.3", "IV1"), ("2.4", "IV0"), ("2.4", "IV1"), ("2.5", "IV0"), ("2.6", "IV0"), ("2.7", "IV0"),
       ("2.7", "IV1"), ("2.7", "IV2"), ("2.8", "IV0"), ("2.8", "IV1"), ("3.0", "IV0"), ("3.0", "IV1"), ("3.1", "IV0"),
       ("3.2", "IV0"), ("3.3", "IV0"), ("3.3", "IV1"), ("3.3", "IV2"), ("3.3", "IV3"), ("3.4", "IV0"), ("3.5", "IV0"),
       ("3.5", "IV1"), ("3.5", "IV2"), ("3.6", "IV0"), ("3.6", "IV1"), ("3.6", "IV2"), ("3.7", "IV0"), ("3.7", "IV1"),
       ("3.7", "IV2"), ("3.7", "IV3"), ("3.7", "IV4"), ("3.8", "IV0"), ("3.9", "IV0")]
)
# 4.0-IV0 and 4.0-IV1 exist in 3.9 but are not production versions: only their full names are known.
_UNSTABLE_METADATA_VERSIONS = ("4.0-IV0", "4.0-IV1")
_IBP_VERSIONS = frozenset(
    [f"{r}-{iv}" if iv else r for r, iv in _METADATA_VERSIONS] + [r for r, _ in _METADATA_VERSIONS]
    + list(_UNSTABLE_METADATA_VERSIONS)
)


def metadata_version_key(value: str) -> str:
    """The table key Kafka's MetadataVersion.fromVersionString looks up: a "0.x" version is cut to three
    dotted parts and any other to two, so "0.10.0.0" means 0.10.0 and "3.9.1" means 3.9."""
    parts = value.split(".")
    while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
        parts.pop()
    keep = 3 if value.startswith("0.") else 2
    return value if keep >= len(parts) else ".".join(parts[:keep])


def is_metadata_version(value: str) -> bool:
    return metadata_version_key(value) in _IBP_VERSIONS


def _throttled_replicas_ok(value: tuple[str, ...]) -> bool:
    items = [item.strip() for item in value]
    return "".join(items) == "*" or all(_THROTTLED_REPLICA.fullmatch(item) for item in items)


THROTTLED_REPLICAS = Check(
    _throttled_replicas_ok,
    "must be '*' or a list of partitionId:brokerId pairs",
    "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
)
class MetadataVersionCheck:
    """Kafka's MetadataVersionValidator: the value must name a row of the MetadataVersion table."""

    def __call__(self, name: str, value: Any) -> None:
        if not is_metadata_version(str(value)):
            raise ConfigError(name, value, f"Version {value} is not a valid version")

    def __str__(self) -> str:
        return "[" + ", ".join([f"{r}-{iv}" if iv else r for r, iv in _METADATA_VERSIONS]
                               + list(_UNSTABLE_METADATA_VERSIONS)) + "]"


METADATA_VERSION = MetadataVersionCheck()
_HOST_CHARACTERS = re.compile(r"[0-9a-zA-Z\-%._:]*")  # Kafka's Utils.validHostPattern


def _connection_overrides_ok(value: str) -> bool:
    """``host:count,...`` as Kafka's Csv.parseCsvMap reads it (split at the last colon)."""
    for item in (v.strip() for v in value.split(",") if v.strip()):
        host, sep, count = item.rpartition(":")
        if not sep or not _HOST_CHARACTERS.fullmatch(host.strip()) or not count.strip().lstrip("-").isdigit():
            return False
    return True


CONNECTION_OVERRIDES = Check(_connection_overrides_ok, "must be a list of host:count pairs with valid host names",
                             "host1:count1,host2:count2,...")
# Kafka's gzip levels are java.util.zip.Deflater's: 1..9, or -1 for the library default.
GZIP_LEVEL = Check(lambda v: v == -1 or 1 <= v <= 9, "must be between 1 and 9, or -1", "[1,...,9] or -1")

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


# ---------------------------------------------------------------------------------------------------
# The definition row
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config that supplies a topic config's default, and its unit in milliseconds
    (``log.retention.hours`` has ``unit_ms=3_600_000``; a same-unit synonym has 1)."""

    name: str
    unit_ms: int = 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One config. ``default`` is typed (tuples for lists) or None for "no default"."""

    name: str
    type: ConfigType
    default: Any
    doc: str
    importance: Importance = Importance.MEDIUM
    validator: Validator | None = None
    broker: bool = False  # a broker config (server.properties and/or dynamic broker config)
    topic: bool = False  # a per-topic (log) config
    # Topic configs: broker configs that supply the default, highest precedence first.
    synonyms: tuple[Synonym, ...] = ()
    # Broker configs: Kafka's dynamic update mode (None for topic-only configs).
    update_mode: UpdateMode | None = None
    dynamic_only: bool = False  # exists only as a dynamic config; Kafka ignores it in server.properties
    removed_in: str | None = None  # the Kafka release that dropped it
    kafkette: bool = False  # ours, not Kafka's

    @property
    def python_name(self) -> str:
        return python_name(self.name)

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    @property
    def valid_values(self) -> str:
        """Human-readable valid values for docs ("" when anything of the type goes)."""
        return "" if self.validator is None else str(self.validator)


def python_name(name: str) -> str:
    """``log.retention.ms`` -> ``log_retention_ms``: the attribute name on BrokerConfig / LogConfig."""
    return name.replace(".", "_")


_DEFS: dict[str, ConfigDef] = {}
H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
RO, PB, CW = UpdateMode.READ_ONLY, UpdateMode.PER_BROKER, UpdateMode.CLUSTER_WIDE
T = ConfigType


def _define(defn: ConfigDef) -> None:
    if defn.name in _DEFS:
        raise RuntimeError(f"config {defn.name} defined twice")
    _DEFS[defn.name] = defn


def _topic(
    name: str,
    type_: ConfigType,
    default: Any,
    doc: str,
    *,
    validator: Validator | None = None,
    synonyms: Iterable[Synonym | str] = (),
    importance: Importance = M,
    removed_in: str | None = None,
) -> None:
    """A topic-only config (its broker-level synonyms, if any, are separate rows)."""
    syns = tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms)
    _define(
        ConfigDef(
            name, type_, default, doc, importance, validator, topic=True, synonyms=syns, removed_in=removed_in
        )
    )


def _broker(
    name: str,
    type_: ConfigType,
    default: Any,
    doc: str,
    *,
    validator: Validator | None = None,
    importance: Importance = M,
    mode: UpdateMode = RO,
    dynamic_only: bool = False,
    kafkette: bool = False,
    removed_in: str | None = None,
) -> None:
    _define(
        ConfigDef(
            name,
            type_,
            default,
            doc,
            importance,
            validator,
            broker=True,
            update_mode=mode,
            dynamic_only=dynamic_only,
            removed_in=removed_in,
            kafkette=kafkette,
        )
    )


def _shared(
    name: str,
    type_: ConfigType,
    default: Any,
    doc: str,
    *,
    validator: Validator | None = None,
    importance: Importance = M,
) -> None:
    """A config with the same name at topic and broker level (the broker value is the topic default)."""
    _define(
        ConfigDef(
            name,
            type_,
            default,
            doc,
            importance,
            validator,
            broker=True,
            topic=True,
            synonyms=(Synonym(name),),
            update_mode=UpdateMode.CLUSTER_WIDE,
        )
    )


# ---------------------------------------------------------------------------------------------------
# Topic configs: exactly Kafka 3.9's set (TopicConfig, LogConfig, QuotaConfigs).
# Broker synonyms and their order are ServerTopicConfigSynonyms'.
# ---------------------------------------------------------------------------------------------------

# fmt: off
_topic("cleanup.policy", T.LIST, ("delete",), "Retention policy for old segments: delete, compact, or both.",
       validator=EachOneOf(CLEANUP_POLICIES), synonyms=["log.cleanup.policy"])
_shared("compression.type", T.STRING, "producer",
        "Final compression codec for stored batches; 'producer' keeps whatever the producer used.",
        validator=OneOf(COMPRESSION_TYPES), importance=H)
_shared("compression.gzip.level", T.INT, -1, "Gzip level used when the broker (re)compresses with gzip.",
        validator=GZIP_LEVEL)
_shared("compression.lz4.level", T.INT, 9, "LZ4 level used when the broker (re)compresses with lz4.",
        validator=between(1, 17))
_shared("compression.zstd.level", T.INT, 3, "Zstd level used when the broker (re)compresses with zstd.",
        validator=between(-131072, 22))
_topic("delete.retention.ms", T.LONG, 86_400_000,
       "How long tombstones stay readable on a compacted topic before the cleaner may drop them.",
       validator=at_least(0), synonyms=["log.cleaner.delete.retention.ms"])
_topic("file.delete.delay.ms", T.LONG, 60_000, "Delay before a deleted segment's files are removed from disk.",
       validator=at_least(0), synonyms=["log.segment.delete.delay.ms"])
_topic("flush.messages", T.LONG, INT64_MAX, "Force an fsync after this many messages (default: leave it to the OS).",
       validator=at_least(1), synonyms=["log.flush.interval.messages"])
_topic("flush.ms", T.LONG, INT64_MAX, "Force an fsync when data is older than this (default: leave it to the OS).",
       validator=at_least(0), synonyms=["log.flush.interval.ms", "log.flush.scheduler.interval.ms"])
_topic("follower.replication.throttled.replicas", T.LIST, (),
       "Replicas whose follower-side replication is throttled: '*' or partition:broker pairs.",
       validator=THROTTLED_REPLICAS)
_topic("index.interval.bytes", T.INT, 4096, "Bytes appended between two offset-index entries.",
       validator=at_least(0), synonyms=["log.index.interval.bytes"])
_topic("leader.replication.throttled.replicas", T.LIST, (),
       "Replicas whose leader-side replication is throttled: '*' or partition:broker pairs.",
       validator=THROTTLED_REPLICAS)
_topic("local.retention.bytes", T.LONG, -2,
       "Local size limit for a tiered partition; -2 means use retention.bytes.",
       validator=at_least(-2), synonyms=["log.local.retention.bytes"])
_topic("local.retention.ms", T.LONG, -2,
       "Local time limit for a tiered partition's segments; -2 means use retention.ms.",
       validator=at_least(-2), synonyms=["log.local.retention.ms"])
_topic("max.compaction.lag.ms", T.LONG, INT64_MAX,
       "Longest a record may stay uncompacted once the topic is compacted.",
       validator=at_least(1), synonyms=["log.cleaner.max.compaction.lag.ms"])
_topic("max.message.bytes", T.INT, 1_048_588, "Largest record batch the topic accepts, after compression.",
       validator=at_least(0), synonyms=["message.max.bytes"])
_topic("message.downconversion.enable", T.BOOLEAN, True,
       "Whether fetches from old clients may be down-converted to old message formats.",
       importance=L, synonyms=["log.message.downconversion.enable"], removed_in="4.0")
_topic("message.format.version", T.STRING, "3.0-IV1",
       "Legacy on-disk message format version; ignored since inter-broker protocol 3.0.",
       validator=METADATA_VERSION, removed_in="4.0")
_topic("message.timestamp.after.max.ms", T.LONG, INT64_MAX,
       "How far in the future a CreateTime timestamp may be, relative to the broker clock.",
       validator=at_least(0), synonyms=["log.message.timestamp.after.max.ms"])
_topic("message.timestamp.before.max.ms", T.LONG, INT64_MAX,
       "How far in the past a CreateTime timestamp may be, relative to the broker clock.",
       validator=at_least(0), synonyms=["log.message.timestamp.before.max.ms"])
_topic("message.timestamp.difference.max.ms", T.LONG, INT64_MAX,
       "Legacy two-sided limit on CreateTime skew; used only while before/after are unset.",
       validator=at_least(0), removed_in="4.0")
_topic("message.timestamp.type", T.STRING, "CreateTime",
       "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).",
       validator=OneOf(TIMESTAMP_TYPES), synonyms=["log.message.timestamp.type"])
_topic("min.cleanable.dirty.ratio", T.DOUBLE, 0.5,
       "Dirty/total ratio a compacted log must reach before the cleaner considers it.",
       validator=between(0, 1), synonyms=["log.cleaner.min.cleanable.ratio"])
_topic("min.compaction.lag.ms", T.LONG, 0, "Shortest time a record stays uncompacted.",
       validator=at_least(0), synonyms=["log.cleaner.min.compaction.lag.ms"])
_shared("min.insync.replicas", T.INT, 1,
        "In-sync replicas that must have a write before an acks=all produce succeeds, capped by the "
        "number of assigned replicas (as from Kafka 3.7). While the ISR is smaller, acks=all produces are "
        "refused and the high watermark does not advance.",
        validator=at_least(1), importance=H)
_topic("preallocate", T.BOOLEAN, False, "Preallocate segment files on disk when they are created.",
       synonyms=["log.preallocate"])
_topic("remote.log.copy.disable", T.BOOLEAN, False,
       "Stop copying segments of a tiered topic to remote storage (remote data becomes read-only).")
_topic("remote.log.delete.on.disable", T.BOOLEAN, False,
       "Delete the topic's remote data when tiered storage is turned off for it.")
_topic("remote.storage.enable", T.BOOLEAN, False, "Enable tiered (remote) storage for the topic.")
_topic("retention.bytes", T.LONG, -1, "Size limit of a partition before old segments are deleted; -1 means none.",
       synonyms=["log.retention.bytes"])
_topic("retention.ms", T.LONG, 604_800_000, "Age limit of a segment before it is deleted; -1 means forever.",
       validator=at_least(-1),
       synonyms=[Synonym("log.retention.ms"), Synonym("log.retention.minutes", MS_PER_MINUTE),
                 Synonym("log.retention.hours", MS_PER_HOUR)])
_topic("segment.bytes", T.INT, 1_073_741_824, "Size at which the active segment is rolled.",
       validator=at_least(14), synonyms=["log.segment.bytes"])  # 14 = smallest legacy record
_topic("segment.index.bytes", T.INT, 10_485_760, "Size preallocated for each segment's offset and time indexes.",
       validator=at_least(4), synonyms=["log.index.size.max.bytes"])
_topic("segment.jitter.ms", T.LONG, 0, "Random jitter subtracted from segment.ms to spread segment rolls.",
       validator=at_least(0),
       synonyms=[Synonym("log.roll.jitter.ms"), Synonym("log.roll.jitter.hours", MS_PER_HOUR)])
_topic("segment.ms", T.LONG, 604_800_000, "Age at which the active segment is rolled even if not full.",
       validator=at_least(1), synonyms=[Synonym("log.roll.ms"), Synonym("log.roll.hours", MS_PER_HOUR)])
_shared("unclean.leader.election.enable", T.BOOLEAN, False,
        "Allow an out-of-sync replica to become leader as a last resort (may lose data).", importance=H)

# ---------------------------------------------------------------------------------------------------
# Broker configs. Defaults from Kafka 3.9's ServerConfigs, ServerLogConfigs, LogConfig, CleanerConfig,
# ReplicationConfigs, ZkConfigs, SocketServerConfigs, GroupCoordinatorConfig, TransactionLogConfigs,
# TransactionStateManagerConfigs, QuotaConfigs, RemoteLogManagerConfig. Update modes: only the
# first broker synonym of each topic config is dynamic (DynamicLogConfig), so e.g. log.retention.ms
# is cluster-wide but log.retention.hours is read-only.
# ---------------------------------------------------------------------------------------------------

# Identity and general
_broker("broker.id", T.INT, -1, "This broker's id; -1 asks ZooKeeper to generate one.", importance=H)
_broker("broker.id.generation.enable", T.BOOLEAN, True, "Allow generated broker ids when broker.id is -1.")
_broker("reserved.broker.max.id", T.INT, 1000, "Largest id a configured broker.id may use; generated ids start above it.",
        validator=at_least(0))
_broker("broker.rack", T.STRING, None, "Rack of this broker, used for rack-aware replica placement.")
_broker("message.max.bytes", T.INT, 1_048_588, "Largest record batch the broker accepts (topic default of max.message.bytes).",
        validator=at_least(0), importance=H, mode=CW)
_broker("num.io.threads", T.INT, 8, "Threads that execute requests.", validator=at_least(1), importance=H, mode=CW)
_broker("background.threads", T.INT, 10, "Threads for background work such as deleting files.",
        validator=at_least(1), importance=H, mode=CW)
_broker("request.timeout.ms", T.INT, 30_000, "How long the broker's own clients wait for a response.", importance=H)
_broker("socket.connection.setup.timeout.ms", T.LONG, 10_000,
        "Initial time the broker's own clients wait for a connection to be established.")
_broker("socket.connection.setup.timeout.max.ms", T.LONG, 30_000,
        "Upper bound of the exponential connection setup timeout of the broker's own clients.")
_broker("delete.topic.enable", T.BOOLEAN, True, "Whether topics may be deleted.", importance=H)
_broker("auto.create.topics.enable", T.BOOLEAN, True, "Create a topic when metadata for an unknown one is requested.",
        importance=H)
_broker("num.partitions", T.INT, 1, "Partition count of automatically created topics.", validator=at_least(1))
_broker("default.replication.factor", T.INT, 1, "Replication factor of automatically created topics.")
_broker("controlled.shutdown.enable", T.BOOLEAN, True, "Move leadership away through the controller before shutting down.")
_broker("controlled.shutdown.max.retries", T.INT, 3, "Attempts at a controlled shutdown before shutting down anyway.")
_broker("controlled.shutdown.retry.backoff.ms", T.LONG, 5000, "Wait between controlled shutdown attempts.")
_broker("max.incremental.fetch.session.cache.slots", T.INT, 1000, "Incremental fetch sessions the broker keeps.",
        validator=at_least(0))
_broker("fetch.max.bytes", T.INT, 57_671_680, "Upper bound on the bytes a consumer fetch response carries.",
        validator=at_least(1024))
_broker("inter.broker.protocol.version", T.STRING, "3.9-IV0", "Protocol version brokers use with each other.",
        validator=METADATA_VERSION)
_broker("metrics.port", T.INT, 9404,
        "kafkette only: HTTP port of the Prometheus metrics endpoint; 0 picks a free port, -1 disables it.",
        validator=between(-1, 65535), kafkette=True)

# ZooKeeper
_broker("zookeeper.connect", T.STRING, None, "ZooKeeper connection string host:port[,host:port...][/chroot].", importance=H)
_broker("zookeeper.session.timeout.ms", T.INT, 18_000, "ZooKeeper session timeout.", importance=H)
_broker("zookeeper.connection.timeout.ms", T.INT, None,
        "How long to wait for the ZooKeeper connection; unset means the session timeout.", importance=H)
_broker("zookeeper.max.in.flight.requests", T.INT, 10, "Unacknowledged requests the ZooKeeper client may have.",
        validator=at_least(1), importance=H)

# Sockets and listeners
_broker("listeners", T.STRING, "PLAINTEXT://:9092", "Comma-separated NAME://host:port endpoints to listen on.",
        importance=H, mode=PB)
_broker("advertised.listeners", T.STRING, None, "Endpoints published to clients; unset means listeners.",
        importance=H, mode=PB)
_broker("listener.security.protocol.map", T.STRING,
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "Security protocol of each listener name, as NAME:PROTOCOL pairs.", importance=L, mode=PB)
_broker("inter.broker.listener.name", T.STRING, None, "Listener brokers use to talk to each other.")
_broker("security.inter.broker.protocol", T.STRING, "PLAINTEXT",
        "Security protocol between brokers when inter.broker.listener.name is unset.",
        validator=OneOf(SECURITY_PROTOCOLS))
_broker("control.plane.listener.name", T.STRING, None,
        "Listener dedicated to controller-to-broker requests; unset means the inter-broker listener.", importance=H)
_broker("socket.send.buffer.bytes", T.INT, 102_400, "SO_SNDBUF of client sockets; -1 keeps the OS default.", importance=H)
_broker("socket.receive.buffer.bytes", T.INT, 102_400, "SO_RCVBUF of client sockets; -1 keeps the OS default.",
        importance=H)
_broker("socket.request.max.bytes", T.INT, 104_857_600, "Largest request the broker reads.", validator=at_least(1),
        importance=H)
_broker("socket.listen.backlog.size", T.INT, 50, "Listen backlog of server sockets.", validator=at_least(1))
_broker("max.connections.per.ip", T.INT, INT32_MAX, "Connections allowed from one IP address.",
        validator=at_least(0), mode=CW)
_broker("max.connections.per.ip.overrides", T.STRING, "", "Per-host limits as host:count pairs, overriding max.connections.per.ip.",
        validator=CONNECTION_OVERRIDES, mode=CW)
_broker("max.connections", T.INT, INT32_MAX, "Connections the broker accepts in total.", validator=at_least(0), mode=CW)
_broker("max.connection.creation.rate", T.INT, INT32_MAX, "New connections per second the broker accepts.",
        validator=at_least(0), mode=CW)
_broker("connections.max.idle.ms", T.LONG, 600_000, "Idle time after which a connection is closed.")
_broker("queued.max.requests", T.INT, 500, "Requests queued before the network layer stops reading.",
        validator=at_least(1), importance=H)
_broker("queued.max.request.bytes", T.LONG, -1, "Bytes of queued requests before reading stops; -1 means no limit.")
_broker("num.network.threads", T.INT, 3, "Threads that read requests and write responses.", validator=at_least(1),
        importance=H, mode=CW)

# Log layout, segments, retention (broker-level synonyms of topic configs)
_broker("log.dir", T.STRING, "/tmp/kafka-logs", "Log directory, used when log.dirs is unset.", importance=H)
_broker("log.dirs", T.STRING, None, "Comma-separated log directories; unset means log.dir.", importance=H)
_broker("log.segment.bytes", T.INT, 1_073_741_824, "Default segment.bytes.", validator=at_least(14), importance=H, mode=CW)
_broker("log.roll.ms", T.LONG, None, "Default segment.ms; overrides log.roll.hours.", importance=H, mode=CW)
_broker("log.roll.hours", T.INT, 168, "Default segment.ms in hours, when log.roll.ms is unset.", validator=at_least(1),
        importance=H)
_broker("log.roll.jitter.ms", T.LONG, None, "Default segment.jitter.ms; overrides log.roll.jitter.hours.",
        importance=H, mode=CW)
_broker("log.roll.jitter.hours", T.INT, 0, "Default segment.jitter.ms in hours, when log.roll.jitter.ms is unset.",
        validator=at_least(0), importance=H)
_broker("log.retention.ms", T.LONG, None, "Default retention.ms; beats log.retention.minutes and .hours; -1 is forever.",
        importance=H, mode=CW)
_broker("log.retention.minutes", T.INT, None, "Default retention.ms in minutes; beats log.retention.hours.", importance=H)
_broker("log.retention.hours", T.INT, 168, "Default retention.ms in hours, when neither ms nor minutes is set.",
        importance=H)
_broker("log.retention.bytes", T.LONG, -1, "Default retention.bytes.", importance=H, mode=CW)
_broker("log.retention.check.interval.ms", T.LONG, 300_000, "How often logs are checked for segments to delete.",
        validator=at_least(1))
_broker("log.cleanup.policy", T.LIST, ("delete",), "Default cleanup.policy.", validator=EachOneOf(CLEANUP_POLICIES),
        mode=CW)
_broker("log.index.size.max.bytes", T.INT, 10_485_760, "Default segment.index.bytes.", validator=at_least(4), mode=CW)
_broker("log.index.interval.bytes", T.INT, 4096, "Default index.interval.bytes.", validator=at_least(0), mode=CW)
_broker("log.segment.delete.delay.ms", T.LONG, 60_000, "Default file.delete.delay.ms.", validator=at_least(0),
        importance=H, mode=CW)
_broker("log.preallocate", T.BOOLEAN, False, "Default preallocate.", mode=CW)
_broker("log.message.timestamp.type", T.STRING, "CreateTime", "Default message.timestamp.type.",
        validator=OneOf(TIMESTAMP_TYPES), mode=CW)
_broker("log.message.timestamp.before.max.ms", T.LONG, INT64_MAX, "Default message.timestamp.before.max.ms.",
        validator=at_least(0), mode=CW)
_broker("log.message.timestamp.after.max.ms", T.LONG, INT64_MAX, "Default message.timestamp.after.max.ms.",
        validator=at_least(0), mode=CW)
_broker("log.message.downconversion.enable", T.BOOLEAN, True, "Default message.downconversion.enable.",
        importance=L, mode=CW, removed_in="4.0")
_broker("log.local.retention.ms", T.LONG, -2, "Default local.retention.ms.", validator=at_least(-2), mode=CW)
_broker("log.local.retention.bytes", T.LONG, -2, "Default local.retention.bytes.", validator=at_least(-2), mode=CW)
_broker("remote.log.storage.system.enable", T.BOOLEAN, False, "Enable tiered storage support on this broker.")
_broker("log.segment.open.files.max", T.INT, 10_000,
        "kafkette only: segment file descriptors (.log files and active indexes) kept open across all logs; "
        "the least recently used idle ones are closed beyond it and reopened on demand. Lowered at start to "
        "what the open files limit (RLIMIT_NOFILE) leaves after connections and headroom.",
        validator=at_least(64), kafkette=True)
_broker("num.recovery.threads.per.data.dir", T.INT, 1, "Threads per log directory for recovery at startup and flush at shutdown.",
        validator=at_least(1), importance=H, mode=CW)

# Flushing and checkpoints
_broker("log.flush.interval.messages", T.LONG, INT64_MAX, "Default flush.messages.", validator=at_least(1),
        importance=H, mode=CW)
_broker("log.flush.interval.ms", T.LONG, None, "Default flush.ms; unset means log.flush.scheduler.interval.ms.",
        importance=H, mode=CW)
_broker("log.flush.scheduler.interval.ms", T.LONG, INT64_MAX, "How often the flusher checks whether logs need an fsync.",
        importance=H)
_broker("log.flush.offset.checkpoint.interval.ms", T.INT, 60_000, "How often recovery points are checkpointed.",
        validator=at_least(0), importance=H)
_broker("log.flush.start.offset.checkpoint.interval.ms", T.INT, 60_000, "How often log start offsets are checkpointed.",
        validator=at_least(0), importance=H)

# Log cleaner
_broker("log.cleaner.enable", T.BOOLEAN, True, "Run the log cleaner (needed by compacted topics such as __consumer_offsets).")
_broker("log.cleaner.threads", T.INT, 1, "Log cleaner threads.", validator=at_least(0), mode=CW)
_broker("log.cleaner.io.max.bytes.per.second", T.DOUBLE, DOUBLE_MAX, "Throttle on the cleaner's combined read and write I/O.",
        mode=CW)
_broker("log.cleaner.dedupe.buffer.size", T.LONG, 134_217_728, "Memory for the cleaner's key-offset maps, over all threads.",
        mode=CW)
_broker("log.cleaner.io.buffer.size", T.INT, 524_288, "Memory for the cleaner's I/O buffers, over all threads.",
        validator=at_least(0), mode=CW)
_broker("log.cleaner.io.buffer.load.factor", T.DOUBLE, 0.9, "How full the cleaner's key-offset map may get.", mode=CW)
_broker("log.cleaner.backoff.ms", T.LONG, 15_000, "Sleep when no log needs cleaning.", validator=at_least(0), mode=CW)
_broker("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, "Default min.cleanable.dirty.ratio.", validator=between(0, 1),
        mode=CW)
_broker("log.cleaner.delete.retention.ms", T.LONG, 86_400_000, "Default delete.retention.ms.", validator=at_least(0), mode=CW)
_broker("log.cleaner.min.compaction.lag.ms", T.LONG, 0, "Default min.compaction.lag.ms.", validator=at_least(0), mode=CW)
_broker("log.cleaner.max.compaction.lag.ms", T.LONG, INT64_MAX, "Default max.compaction.lag.ms.", validator=at_least(1),
        mode=CW)

# Replication
_broker("replica.lag.time.max.ms", T.LONG, 30_000,
        "A follower that has not caught up with the leader for this long leaves the ISR; one whose last fetch "
        "reached the leader's log end stays in it.", importance=H)
_broker("replica.socket.timeout.ms", T.INT, 30_000, "Socket timeout of follower fetch requests.", importance=H)
_broker("replica.socket.receive.buffer.bytes", T.INT, 65_536, "SO_RCVBUF of follower fetch connections.", importance=H)
_broker("replica.fetch.max.bytes", T.INT, 1_048_576, "Bytes a follower fetch asks for per partition.", validator=at_least(0))
_broker("replica.fetch.min.bytes", T.INT, 1, "Bytes a follower fetch waits for.", importance=H)
_broker("replica.fetch.wait.max.ms", T.INT, 500, "Longest a follower fetch waits for data.", importance=H)
_broker("replica.fetch.backoff.ms", T.INT, 1000, "Sleep after a follower fetch error.", validator=at_least(0))
_broker("replica.fetch.response.max.bytes", T.INT, 10_485_760, "Bytes a follower fetch response may carry in total.",
        validator=at_least(0))
_broker("num.replica.fetchers", T.INT, 1, "Fetcher tasks per source broker.", importance=H, mode=CW)
_broker("replica.high.watermark.checkpoint.interval.ms", T.LONG, 5000, "How often high watermarks are checkpointed.",
        importance=H)
_broker("fetch.purgatory.purge.interval.requests", T.INT, 1000, "Purge interval, in requests, of the fetch purgatory.")
_broker("producer.purgatory.purge.interval.requests", T.INT, 1000, "Purge interval, in requests, of the produce purgatory.")
_broker("delete.records.purgatory.purge.interval.requests", T.INT, 1,
        "Purge interval, in requests, of the delete-records purgatory.")
_broker("controller.socket.timeout.ms", T.INT, 30_000,
        "Socket timeout of the channels between the controller and the brokers (its requests, and AlterPartition).")
_broker("auto.leader.rebalance.enable", T.BOOLEAN, True, "Periodically move leadership back to preferred replicas.",
        importance=H)
_broker("leader.imbalance.per.broker.percentage", T.INT, 10, "Leader imbalance per broker, in percent, that triggers a rebalance.",
        importance=H)
_broker("leader.imbalance.check.interval.seconds", T.LONG, 300, "How often the controller checks leader balance.",
        validator=at_least(1), importance=H)
_broker("leader.replication.throttled.rate", T.LONG, INT64_MAX, "Bytes/s cap on leader-side throttled replication.",
        validator=at_least(0), mode=CW, dynamic_only=True)
_broker("follower.replication.throttled.rate", T.LONG, INT64_MAX, "Bytes/s cap on follower-side throttled replication.",
        validator=at_least(0), mode=CW, dynamic_only=True)
_broker("replication.quota.window.num", T.INT, 11, "Samples kept for replication quotas.", validator=at_least(1),
        importance=L)
_broker("replication.quota.window.size.seconds", T.INT, 1, "Length of one replication quota sample.",
        validator=at_least(1), importance=L)
_broker("replica.alter.log.dirs.io.max.bytes.per.second", T.LONG, INT64_MAX,
        "Bytes/s cap on copying replicas between this broker's log dirs (AlterReplicaLogDirs).",
        validator=at_least(0), mode=CW, dynamic_only=True)
_broker("alter.log.dirs.replication.quota.window.num", T.INT, 11, "Samples kept for the alter-log-dirs quota.",
        validator=at_least(1), importance=L)
_broker("alter.log.dirs.replication.quota.window.size.seconds", T.INT, 1,
        "Length of one alter-log-dirs quota sample.", validator=at_least(1), importance=L)
_broker("quota.window.num", T.INT, 11, "Samples kept for client quotas.", validator=at_least(1), importance=L)
_broker("quota.window.size.seconds", T.INT, 1, "Length of one client quota sample.", validator=at_least(1),
        importance=L)
_broker("controller.quota.window.num", T.INT, 11, "Samples kept for controller mutation quotas.",
        validator=at_least(1), importance=L)
_broker("controller.quota.window.size.seconds", T.INT, 1, "Length of one controller mutation quota sample.",
        validator=at_least(1), importance=L)
_broker("client.quota.callback.class", T.CLASS, None, "Custom client quota callback; not supported (must stay unset).",
        importance=L)

# Security: TLS. Every ssl.* config can also be set per listener (listener.name.<listener>.ssl.*) and,
# as in Kafka, updated dynamically per broker, which is how certificates are rotated without a restart.
_broker("ssl.protocol", T.STRING, "TLSv1.3", "TLS protocol used to build the SSL context.", importance=H, mode=PB)
_broker("ssl.provider", T.STRING, None, "Security provider; only the default is supported.", mode=PB)
_broker("ssl.cipher.suites", T.LIST, (), "Enabled cipher suites; empty means the TLS library's defaults.",
        importance=L, mode=PB)
_broker("ssl.enabled.protocols", T.LIST, ("TLSv1.2", "TLSv1.3"), "TLS protocol versions enabled.", mode=PB)
_broker("ssl.keystore.type", T.STRING, "JKS", "Keystore format: PEM or PKCS12 (JKS is not readable here).",
        mode=PB)
_broker("ssl.keystore.location", T.STRING, None, "Keystore file (PEM or PKCS12).", importance=H, mode=PB)
_broker("ssl.keystore.password", T.PASSWORD, None, "Keystore password.", importance=H, mode=PB)
_broker("ssl.key.password", T.PASSWORD, None, "Password of the private key in the keystore.", importance=H, mode=PB)
_broker("ssl.keystore.key", T.PASSWORD, None, "Private key in PEM, inline (ssl.keystore.type=PEM).", importance=H,
        mode=PB)
_broker("ssl.keystore.certificate.chain", T.PASSWORD, None, "Certificate chain in PEM, inline (ssl.keystore.type=PEM).",
        importance=H, mode=PB)
_broker("ssl.truststore.type", T.STRING, "JKS", "Truststore format: PEM or PKCS12.", mode=PB)
_broker("ssl.truststore.location", T.STRING, None, "Truststore file (PEM or PKCS12).", importance=H, mode=PB)
_broker("ssl.truststore.password", T.PASSWORD, None, "Truststore password.", importance=H, mode=PB)
_broker("ssl.truststore.certificates", T.PASSWORD, None, "Trusted certificates in PEM, inline.", importance=H,
        mode=PB)
_broker("ssl.keymanager.algorithm", T.STRING, "SunX509", "Key manager algorithm (accepted for compatibility).",
        importance=L, mode=PB)
_broker("ssl.trustmanager.algorithm", T.STRING, "PKIX", "Trust manager algorithm (accepted for compatibility).",
        importance=L, mode=PB)
_broker("ssl.endpoint.identification.algorithm", T.STRING, "https",
        "Host name verification of the peer's certificate on connections the broker opens; empty disables it.",
        importance=L, mode=PB)
_broker("ssl.secure.random.implementation", T.STRING, None, "Accepted for compatibility; the OS generator is used.",
        importance=L, mode=PB)
_broker("ssl.client.auth", T.STRING, "none", "Client certificates: required, requested or none.",
        validator=OneOf(("required", "requested", "none")), mode=PB)
_broker("ssl.principal.mapping.rules", T.STRING, "DEFAULT",
        "Rules mapping a certificate's distinguished name to a principal name.", importance=L)
_broker("ssl.engine.factory.class", T.CLASS, None, "Custom SSL engine factory; not supported.", importance=L,
        mode=PB)
_broker("ssl.allow.dn.changes", T.BOOLEAN, False, "Whether a rotated keystore may change the certificate's DN.",
        importance=L)
_broker("ssl.allow.san.changes", T.BOOLEAN, False, "Whether a rotated keystore may change the certificate's SANs.",
        importance=L)

# Security: SASL. sasl.jaas.config is normally set per listener and mechanism,
# listener.name.<listener>.<mechanism>.sasl.jaas.config.
_broker("sasl.enabled.mechanisms", T.LIST, ("GSSAPI",), "SASL mechanisms offered: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.",
        importance=M, mode=PB)
_broker("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI", "SASL mechanism brokers use with each other.",
        mode=PB)
_broker("sasl.jaas.config", T.PASSWORD, None, "JAAS login context in Kafka's format.", mode=PB)
_broker("sasl.server.max.receive.size", T.INT, 524_288, "Largest SASL token read before authentication.",
        importance=L)
_broker("connections.max.reauth.ms", T.LONG, 0,
        "Longest SASL session before the client must re-authenticate (KIP-368); 0 disables re-authentication.")
_broker("connection.failed.authentication.delay.ms", T.INT, 100,
        "Delay before closing a connection whose authentication failed.", validator=at_least(0), importance=L)
# Security: delegation tokens (KIP-48, broker/delegation_tokens.py). Without a secret key every token
# API answers DELEGATION_TOKEN_AUTH_DISABLED.
_broker("delegation.token.secret.key", T.PASSWORD, None,
        "Secret key that signs and verifies delegation tokens; the same on every broker. Unset or empty: "
        "delegation tokens are disabled.")
_broker("delegation.token.master.key", T.PASSWORD, None,
        "DEPRECATED: an alias for delegation.token.secret.key, read when that is not set.")
_broker("delegation.token.max.lifetime.ms", T.LONG, 7 * 24 * MS_PER_HOUR,
        "Longest lifetime of a delegation token; it cannot be renewed beyond it.", validator=at_least(1))
_broker("delegation.token.expiry.time.ms", T.LONG, 24 * MS_PER_HOUR,
        "How long a delegation token stays valid before it must be renewed.", validator=at_least(1))
_broker("delegation.token.expiry.check.interval.ms", T.LONG, MS_PER_HOUR,
        "How often expired delegation tokens are removed.", validator=at_least(1), importance=L)
_broker("principal.builder.class", T.CLASS, "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        "Principal builder; only Kafka's default is supported.")

# Security: the authorizer (Kafka's AclAuthorizer in ZooKeeper mode).
_broker("authorizer.class.name", T.STRING, "",
        "Authorizer class; kafka.security.authorizer.AclAuthorizer turns on ACLs stored in ZooKeeper.", importance=L)
_broker("super.users", T.STRING, None, "Principals allowed everything, separated by ';' (User:admin;User:broker).")
_broker("allow.everyone.if.no.acl.found", T.BOOLEAN, False,
        "Whether a resource with no matching ACL is open to everyone.")

# Group coordinator and offsets
_broker("group.min.session.timeout.ms", T.INT, 6000, "Smallest session timeout a group member may ask for.")
_broker("group.max.session.timeout.ms", T.INT, 1_800_000, "Largest session timeout a group member may ask for.")
_broker("group.initial.rebalance.delay.ms", T.INT, 3000, "Wait for more members before the first rebalance of an empty group.")
_broker("group.max.size", T.INT, INT32_MAX, "Members a consumer group may have.", validator=at_least(1))
_broker("offset.metadata.max.bytes", T.INT, 4096, "Largest metadata string stored with a committed offset.", importance=H)
_broker("offsets.load.buffer.size", T.INT, 5_242_880, "Read batch size when loading __consumer_offsets.",
        validator=at_least(1), importance=H)
_broker("offsets.topic.replication.factor", T.SHORT, 3, "Replication factor of __consumer_offsets.",
        validator=at_least(1), importance=H)
_broker("offsets.topic.num.partitions", T.INT, 50, "Partition count of __consumer_offsets.", validator=at_least(1),
        importance=H)
_broker("offsets.topic.segment.bytes", T.INT, 104_857_600, "Segment size of __consumer_offsets.",
        validator=at_least(1), importance=H)
_broker("offsets.topic.compression.codec", T.INT, 0, "Compression codec id for __consumer_offsets writes.", importance=H)
_broker("offsets.retention.minutes", T.INT, 10_080, "How long committed offsets of an empty group are kept.",
        validator=at_least(1), importance=H)
_broker("offsets.retention.check.interval.ms", T.LONG, 600_000, "How often stale offsets are looked for.",
        validator=at_least(1), importance=H)
_broker("offsets.commit.timeout.ms", T.INT, 5000, "Longest an offset commit waits for __consumer_offsets replication.",
        validator=at_least(1), importance=H)

# Transactions and producer state
_broker("transaction.state.log.num.partitions", T.INT, 50, "Partition count of __transaction_state.",
        validator=at_least(1), importance=H)
_broker("transaction.state.log.replication.factor", T.SHORT, 3, "Replication factor of __transaction_state.",
        validator=at_least(1), importance=H)
_broker("transaction.state.log.min.isr", T.INT, 2, "min.insync.replicas of __transaction_state.",
        validator=at_least(1), importance=H)
_broker("transaction.state.log.segment.bytes", T.INT, 104_857_600, "Segment size of __transaction_state.",
        validator=at_least(1), importance=H)
_broker("transaction.state.log.load.buffer.size", T.INT, 5_242_880, "Read batch size when loading __transaction_state.",
        validator=at_least(1), importance=H)
_broker("transaction.max.timeout.ms", T.INT, 900_000, "Largest transaction timeout a producer may ask for.",
        validator=at_least(1), importance=H)
_broker("transactional.id.expiration.ms", T.INT, 604_800_000, "Idle time after which a transactional id is forgotten.",
        validator=at_least(1), importance=H)
_broker("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10_000,
        "How often timed-out transactions are looked for and aborted.", validator=at_least(1), importance=L)
_broker("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3_600_000,
        "How often expired transactional ids are removed.", validator=at_least(1), importance=L)
_broker("transaction.partition.verification.enable", T.BOOLEAN, True,
        "Check with the transaction coordinator before a transactional write to a new partition.",
        importance=L, mode=CW)
_broker("producer.id.expiration.ms", T.INT, 86_400_000, "Idle time after which a producer id's state is dropped.",
        validator=at_least(1), importance=L, mode=CW)
_broker("producer.id.expiration.check.interval.ms", T.INT, 600_000,
        "How often producer ids idle for producer.id.expiration.ms are dropped.", validator=at_least(1),
        importance=L)
# fmt: on

REGISTRY: Mapping[str, ConfigDef] = MappingProxyType(dict(sorted(_DEFS.items())))
del H, M, L, RO, PB, CW, T

_BROKER_ATTRS = {d.python_name: d.name for d in REGISTRY.values() if d.broker}
_TOPIC_ATTRS = {d.python_name: d.name for d in REGISTRY.values() if d.topic}

# DescribeConfigs synonyms between broker configs (Kafka's DynamicBrokerConfig.brokerConfigSynonyms):
# any member of a group reports the whole group. log.flush.scheduler.interval.ms stands in for
# log.flush.interval.ms but not the other way round, so it has no entry.
_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
_ROLL = ("log.roll.ms", "log.roll.hours")
_JITTER = ("log.roll.jitter.ms", "log.roll.jitter.hours")
_BROKER_SYNONYM_GROUPS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(_RETENTION, _RETENTION),
    **dict.fromkeys(_ROLL, _ROLL),
    **dict.fromkeys(_JITTER, _JITTER),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}


def topic_configs() -> dict[str, ConfigDef]:
    """Every per-topic config, by name."""
    return {name: d for name, d in REGISTRY.items() if d.topic}


def broker_configs() -> dict[str, ConfigDef]:
    """Every broker config (static or dynamic), by name."""
    return {name: d for name, d in REGISTRY.items() if d.broker}


# ---------------------------------------------------------------------------------------------------
# Parsing, validation, formatting
# ---------------------------------------------------------------------------------------------------

_INTEGER = re.compile(r"[+-]?[0-9]+")
_COMMA = re.compile(r"\s*,\s*")
_INT_RANGES = {
    ConfigType.SHORT: (INT16_MIN, INT16_MAX, "16-bit integer"),
    ConfigType.INT: (INT32_MIN, INT32_MAX, "32-bit integer"),
    ConfigType.LONG: (INT64_MIN, INT64_MAX, "64-bit integer"),
}


def _definition(name: str, value: object) -> ConfigDef:
    defn = REGISTRY.get(name)
    if defn is None:
        raise ConfigError(name, value, "unknown configuration")
    return defn


def _parse_string(defn: ConfigDef, raw: str) -> Any:
    """Kafka's ConfigDef.parseType for a string input (surrounding whitespace is ignored)."""
    name, text = defn.name, raw.strip()
    kind = defn.type
    if kind is ConfigType.BOOLEAN:
        if text.lower() == "true":
            return True
        if text.lower() == "false":
            return False
        raise ConfigError(name, raw, "expected true or false")
    if kind in _INT_RANGES:
        low, high, label = _INT_RANGES[kind]
        # Java's parseInt/parseLong: optional sign and decimal digits only (no '_', no '1e3').
        if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise ConfigError(name, raw, f"not a {label}")
        return int(text)
    if kind is ConfigType.DOUBLE:
        try:
            if "_" in text:
                raise ValueError(text)
            return float(text)
        except ValueError:
            raise ConfigError(name, raw, "not a number") from None
    if kind is ConfigType.LIST:
        return () if not text else tuple(_COMMA.split(text))
    if kind is ConfigType.PASSWORD:
        return Password(text)
    return text  # STRING, CLASS (a class name; we never load classes)


def _coerce_typed(defn: ConfigDef, value: Any) -> Any:
    """Accept an already-typed Python value (as code and tests pass them) after a type check."""
    name, kind = defn.name, defn.type
    if kind is ConfigType.BOOLEAN and isinstance(value, bool):
        return value
    if kind in _INT_RANGES and isinstance(value, int) and not isinstance(value, bool):
        low, high, label = _INT_RANGES[kind]
        if not low <= value <= high:
            raise ConfigError(name, value, f"not a {label}")
        return value
    if kind is ConfigType.DOUBLE and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is ConfigType.LIST and isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    if kind is ConfigType.PASSWORD and isinstance(value, Password):
        return value
    raise ConfigError(name, value, f"expected a {kind.name.lower()} value, got {type(value).__name__}")


def parse_value(name: str, raw: object) -> Any:
    """Parse and validate one value. ``raw`` is normally the string from a properties file or a
    request; typed Python values are accepted too. Raises ConfigError naming the key."""
    defn = _definition(name, raw)
    if raw is None:
        value = None
    elif isinstance(raw, str):
        value = _parse_string(defn, raw)
    else:
        value = _coerce_typed(defn, raw)
    validate(name, value)
    return value


def validate(name: str, value: Any) -> None:
    """Check a typed value against the config's validator. None is allowed only where the config
    has no default (it then means "unset")."""
    defn = _definition(name, value)
    if value is None:
        if defn.default is not None:
            raise ConfigError(name, value, "value must not be null")
        return
    if defn.validator is not None:
        defn.validator(name, value)


def format_value(name: str, value: Any) -> str | None:
    """Render a typed value as Kafka does in DescribeConfigs and docs. Passwords render as None
    (Kafka never returns sensitive values)."""
    defn = _definition(name, value)
    if value is None or defn.type is ConfigType.PASSWORD:
        return None
    if defn.type is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if defn.type is ConfigType.LIST:
        return ",".join(value)
    if defn.type is ConfigType.DOUBLE:
        return _java_double(float(value))
    return str(value)


def _java_double(x: float) -> str:
    """Java's Double.toString, so DescribeConfigs shows what Kafka shows (0.5, 1.7976931348623157E308)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = repr(x)  # plain decimal in this range
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) - 1 + exponent
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


# ---------------------------------------------------------------------------------------------------
# Broker configuration
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One link of a DescribeConfigs synonym chain: which config, its value, where it was set."""

    name: str
    value: Any
    source: ConfigSource


_LAYER_SOURCES = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
)


class BrokerConfig:
    """A broker's configuration: defaults < static (server.properties, then overrides) < dynamic
    cluster-wide default < dynamic per-broker.

    Unknown keys are not errors (Kafka warns and ignores them): they are kept in ``unknown`` for the
    caller to log. Invalid values raise ConfigError. Values are typed; read them with ``get(name)``
    or as attributes (``config.log_segment_bytes``). Immutable; ``with_dynamic`` makes a new one.
    """

    __slots__ = ("_layers", "_listener_layers", "originals", "unknown", "_values")

    def __init__(
        self,
        props: Mapping[str, object] | None = None,
        overrides: Mapping[str, object] | None = None,
        *,
        dynamic_default: Mapping[str, object] | None = None,
        dynamic_broker: Mapping[str, object] | None = None,
    ) -> None:
        originals = {**(props or {}), **(overrides or {})}
        unknown: dict[str, object] = {}
        static: dict[str, Any] = {}
        for key, raw in originals.items():
            defn = REGISTRY.get(key)
            if defn is None or not defn.broker or defn.dynamic_only:
                unknown[key] = raw
            else:
                static[key] = parse_value(key, raw)
        per_broker = self._parse_dynamic(dynamic_broker or {}, unknown, cluster_default=False)
        cluster = self._parse_dynamic(dynamic_default or {}, unknown, cluster_default=True)
        # Highest precedence first, matching _LAYER_SOURCES.
        layers = (MappingProxyType(per_broker), MappingProxyType(cluster), MappingProxyType(static))
        object.__setattr__(self, "_layers", layers)
        # get()'s answers, kept: the object never changes (a dynamic update makes a new one), and the
        # replication and produce paths ask for the same few configs on every request.
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "originals", MappingProxyType(originals))
        object.__setattr__(self, "unknown", MappingProxyType(unknown))
        # listener.name.<listener>.<config> keys, per layer (highest precedence first): Kafka's
        # per-listener overrides of ssl.*, sasl.* and connection configs, read with listener_get().
        object.__setattr__(self, "_listener_layers", tuple(
            {k: v for k, v in raw.items() if k.startswith(LISTENER_PREFIX)}
            for raw in (dynamic_broker or {}, dynamic_default or {}, originals)))
        self._check_consistency()

    @staticmethod
    def _parse_dynamic(
        raw: Mapping[str, object], unknown: dict[str, object], *, cluster_default: bool
    ) -> dict[str, Any]:
        parsed: dict[str, Any] = {}
        for key, value in raw.items():
            defn = REGISTRY.get(key)
            if defn is None or not defn.broker:
                unknown[key] = value  # Kafka keeps custom dynamic keys without interpreting them
                continue
            if defn.update_mode is UpdateMode.READ_ONLY:
                raise ConfigError(key, value, "cannot be updated dynamically (read-only)")
            if cluster_default and defn.update_mode is UpdateMode.PER_BROKER:
                raise ConfigError(key, value, "can only be set per broker, not as a cluster-wide default")
            parsed[key] = parse_value(key, value)
        return parsed

    def with_dynamic(
        self,
        *,
        dynamic_default: Mapping[str, object] | None = None,
        dynamic_broker: Mapping[str, object] | None = None,
    ) -> BrokerConfig:
        """The same static config with new dynamic layers (e.g. after a /config/brokers change)."""
        return BrokerConfig(
            dict(self.originals), dynamic_default=dynamic_default, dynamic_broker=dynamic_broker
        )

    # -- lookups ------------------------------------------------------------------------------------

    def get(self, name: str) -> Any:
        """The effective typed value (None for an unset config without default)."""
        try:
            return self._values[name]
        except KeyError:
            pass
        value = self._broker_def(name).default
        for layer in self._layers:
            if name in layer:
                value = layer[name]
                break
        self._values[name] = value
        return value

    def listener_get(self, listener: str, name: str, mechanism: str | None = None) -> Any:
        """A config as one listener sees it: ``listener.name.<listener>.[<mechanism>.]<name>`` when
        set in any layer (parsed as ``name``), else the broker-wide ``name``. Listener and mechanism
        are lower-cased in the key, as Kafka's ListenerName.configPrefix and saslMechanismPrefix do."""
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        key = f"{prefix}{mechanism.lower()}.{name}" if mechanism else f"{prefix}{name}"
        for layer in self._listener_layers:
            if key in layer:
                return parse_value(name, layer[key])
        return self.get(name)

    @staticmethod
    def listener_override_of(key: str) -> str | None:
        """The broker config a ``listener.name.<l>.[<mech>.]<config>`` key overrides, or None when the
        key is not such an override (so callers do not report it as unknown, as Kafka does not)."""
        if not key.startswith(LISTENER_PREFIX):
            return None
        _listener, _, tail = key[len(LISTENER_PREFIX):].partition(".")
        for candidate in (tail, tail.partition(".")[2]):
            defn = REGISTRY.get(candidate)
            if defn is not None and defn.broker:
                return candidate
        return None

    def listener_entries(self) -> list[tuple[str, str, ConfigSource]]:
        """Every ``listener.name.<l>.[<mech>.]<config>`` key set in some layer, with its raw value and the
        source of the layer that wins (Kafka's DescribeConfigs lists them among a broker's configs)."""
        out: dict[str, tuple[str, ConfigSource]] = {}
        for layer, source in zip(self._listener_layers, _LAYER_SOURCES, strict=True):
            for key, raw in layer.items():
                if key not in out and self.listener_override_of(key) is not None:
                    out[key] = (str(raw), source)
        return [(key, raw, source) for key, (raw, source) in sorted(out.items())]

    def listener_is_set(self, listener: str, name: str, mechanism: str | None = None) -> bool:
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        key = f"{prefix}{mechanism.lower()}.{name}" if mechanism else f"{prefix}{name}"
        return any(key in layer for layer in self._listener_layers) or self.is_set(name)

    def source_of(self, name: str) -> ConfigSource:
        self._broker_def(name)
        for layer, source in zip(self._layers, _LAYER_SOURCES, strict=True):
            if name in layer:
                return source
        return ConfigSource.DEFAULT_CONFIG

    def is_set(self, name: str) -> bool:
        """Whether any layer sets the config (as opposed to it taking its default)."""
        return self.source_of(name) is not ConfigSource.DEFAULT_CONFIG

    def entries(self, name: str) -> list[ConfigSynonym]:
        """Every value ``name`` has in the layers, highest precedence first, then its default
        (when not None). This is one config's part of a DescribeConfigs synonym chain."""
        defn = self._broker_def(name)
        found = [
            ConfigSynonym(name, layer[name], source)
            for layer, source in zip(self._layers, _LAYER_SOURCES, strict=True)
            if name in layer
        ]
        if defn.default is not None:
            found.append(ConfigSynonym(name, defn.default, ConfigSource.DEFAULT_CONFIG))
        return found

    def synonyms(self, name: str) -> list[ConfigSynonym]:
        """DescribeConfigs synonyms of a broker config: itself plus configs that stand in for it
        (log.retention.ms -> .minutes -> .hours), highest precedence first."""
        self._broker_def(name)
        chain: list[ConfigSynonym] = []
        for member in _BROKER_SYNONYM_GROUPS.get(name, (name,)):
            chain.extend(self.entries(member))
        return chain

    def topic_default(self, topic_name: str) -> tuple[Any, ConfigSource, str | None]:
        """The broker's default for a topic config: (value in the topic config's unit, its source,
        the broker config it came from). Synonyms are tried in order, first one set in any layer,
        else the first one with a default, else the topic config's own default."""
        defn = REGISTRY.get(topic_name)
        if defn is None or not defn.topic:
            raise KeyError(f"{topic_name} is not a topic configuration")
        for synonym in defn.synonyms:
            if self.is_set(synonym.name):
                value = self._convert(topic_name, self.get(synonym.name), synonym)
                return value, self.source_of(synonym.name), synonym.name
        for synonym in defn.synonyms:
            default = REGISTRY[synonym.name].default
            if default is not None:
                return self._convert(topic_name, default, synonym), ConfigSource.DEFAULT_CONFIG, synonym.name
        return defn.default, ConfigSource.DEFAULT_CONFIG, None

    @staticmethod
    def _convert(topic_name: str, value: Any, synonym: Synonym) -> Any:
        if synonym.unit_ms != 1:
            value = value * synonym.unit_ms
        # Kafka folds every negative broker retention (e.g. log.retention.hours=-1) into -1, "forever".
        if topic_name == "retention.ms" and value < 0:
            value = -1
        return value

    @property
    def log_dir_list(self) -> tuple[str, ...]:
        """The log directories: log.dirs when set, else log.dir, split on commas."""
        raw = self.get("log.dirs")
        if raw is None:
            raw = self.get("log.dir")
        return tuple(part for part in _COMMA.split(raw.strip()) if part)

    # -- checks across configs (Kafka's KafkaConfig.validateValues, the parts that apply) -------------

    def _check_consistency(self) -> None:
        roll, _, roll_name = self.topic_default("segment.ms")
        if roll < 1:
            raise ConfigError(roll_name or "log.roll.ms", roll, "segment roll time must be at least 1 ms")
        jitter, _, jitter_name = self.topic_default("segment.jitter.ms")
        if jitter < 0:
            raise ConfigError(jitter_name or "log.roll.jitter.ms", jitter, "roll jitter must not be negative")
        retention, _, retention_name = self.topic_default("retention.ms")
        if retention == 0:
            raise ConfigError(
                retention_name or "log.retention.ms",
                retention,
                "retention must be -1 (forever) or at least 1 ms",
            )
        if not self.log_dir_list:
            raise ConfigError("log.dirs", self.get("log.dirs"), "at least one log directory is required")
        threads = self.get("log.cleaner.threads")
        if threads > 0 and self.get("log.cleaner.dedupe.buffer.size") // threads <= 1024 * 1024:
            raise ConfigError(
                "log.cleaner.dedupe.buffer.size",
                self.get("log.cleaner.dedupe.buffer.size"),
                "must be more than 1 MiB per cleaner thread",
            )
        codec = self.get("offsets.topic.compression.codec")
        if not 0 <= codec <= 4:  # Kafka's CompressionType.forId: none, gzip, snappy, lz4, zstd
            raise ConfigError("offsets.topic.compression.codec", codec, f"Unknown compression type id: {codec}")
        wait = self.get("replica.fetch.wait.max.ms")
        if wait > self.get("replica.socket.timeout.ms"):
            raise ConfigError(
                "replica.socket.timeout.ms",
                self.get("replica.socket.timeout.ms"),
                "must be at least replica.fetch.wait.max.ms",
            )
        if wait > self.get("replica.lag.time.max.ms"):
            raise ConfigError("replica.fetch.wait.max.ms", wait, "must be at most replica.lag.time.max.ms")

    # -- attribute access ---------------------------------------------------------------------------

    @staticmethod
    def _broker_def(name: str) -> ConfigDef:
        defn = REGISTRY.get(name)
        if defn is None or not defn.broker:
            raise KeyError(f"{name} is not a broker configuration")
        return defn

    def __getattr__(self, attr: str) -> Any:
        name = _BROKER_ATTRS.get(attr)
        if name is None:
            raise AttributeError(f"{type(self).__name__} has no attribute {attr!r}")
        return self.get(name)

    def __setattr__(self, attr: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(_BROKER_ATTRS))

    def __repr__(self) -> str:
        shown = {
            k: ("[hidden]" if REGISTRY[k].sensitive else v)
            for layer in self._layers
            for k, v in layer.items()
        }
        return f"BrokerConfig({shown!r})"


# ---------------------------------------------------------------------------------------------------
# Topic (log) configuration
# ---------------------------------------------------------------------------------------------------


class LogConfig:
    """A topic's effective configuration: topic overrides, else the broker's defaults through the
    synonym chain, else Kafka's defaults. Immutable. Read values as attributes named like the
    config (``segment_bytes``, ``retention_ms``, ``cleanup_policy`` (a tuple), ...) or with
    ``get(name)``; ``source_of`` and ``synonyms`` give DescribeConfigs what it reports.
    """

    __slots__ = ("_values", "_sources", "_broker", "overrides", "unknown")

    # Attribute types for readers and type checkers; __getattr__ serves them.
    cleanup_policy: tuple[str, ...]
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    follower_replication_throttled_replicas: tuple[str, ...]
    index_interval_bytes: int
    leader_replication_throttled_replicas: tuple[str, ...]
    local_retention_bytes: int
    local_retention_ms: int
    max_compaction_lag_ms: int
    max_message_bytes: int
    message_downconversion_enable: bool
    message_format_version: str
    message_timestamp_difference_max_ms: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    min_insync_replicas: int
    preallocate: bool
    remote_log_copy_disable: bool
    remote_log_delete_on_disable: bool
    remote_storage_enable: bool
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_jitter_ms: int
    segment_ms: int
    unclean_leader_election_enable: bool

    def __init__(
        self,
        topic_overrides: Mapping[str, object] | None = None,
        broker: BrokerConfig | None = None,
        *,
        strict: bool = True,
    ) -> None:
        overrides: dict[str, Any] = {}
        unknown: dict[str, object] = {}
        for key, raw in (topic_overrides or {}).items():
            defn = REGISTRY.get(key)
            if defn is None or not defn.topic:
                # CreateTopics/AlterConfigs must reject these (strict); a config already stored in
                # ZooKeeper is loaded anyway, as Kafka does, and the caller may log `unknown`.
                if strict:
                    raise ConfigError(key, raw, "unknown topic configuration")
                unknown[key] = raw
                continue
            overrides[key] = parse_value(key, raw)

        values: dict[str, Any] = {}
        sources: dict[str, ConfigSource] = {}
        for name, defn in REGISTRY.items():
            if not defn.topic:
                continue
            if name in overrides:
                values[name], sources[name] = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
            elif broker is not None:
                values[name], sources[name], _ = broker.topic_default(name)
            else:
                values[name], sources[name], _ = _static_topic_default(defn)

        if values["min.compaction.lag.ms"] > values["max.compaction.lag.ms"]:
            raise ConfigError(
                "min.compaction.lag.ms",
                values["min.compaction.lag.ms"],
                f"must not exceed max.compaction.lag.ms ({values['max.compaction.lag.ms']})",
            )

        object.__setattr__(self, "_values", MappingProxyType(values))
        object.__setattr__(self, "_sources", MappingProxyType(sources))
        object.__setattr__(self, "_broker", broker)
        object.__setattr__(self, "overrides", MappingProxyType(overrides))
        object.__setattr__(self, "unknown", MappingProxyType(unknown))

    @classmethod
    def from_broker(
        cls,
        broker_config: BrokerConfig | None,
        topic_overrides: Mapping[str, object] | None = None,
        *,
        strict: bool = True,
    ) -> LogConfig:
        """The effective config of a topic with ``topic_overrides`` (raw strings, as stored in
        /config/topics/<t>) on a broker configured by ``broker_config``."""
        return cls(topic_overrides, broker_config, strict=strict)

    # -- lookups ------------------------------------------------------------------------------------

    def get(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"{name} is not a topic configuration") from None

    def source_of(self, name: str) -> ConfigSource:
        try:
            source: ConfigSource = self._sources[name]
            return source
        except KeyError:
            raise KeyError(f"{name} is not a topic configuration") from None

    def synonyms(self, name: str) -> list[ConfigSynonym]:
        """DescribeConfigs' synonym chain for a topic config, highest precedence first: the topic
        override, then each broker synonym's dynamic/static/default values (in the broker's units,
        e.g. log.retention.hours=168)."""
        defn = REGISTRY.get(name)
        if defn is None or not defn.topic:
            raise KeyError(f"{name} is not a topic configuration")
        chain: list[ConfigSynonym] = []
        if name in self.overrides:
            chain.append(ConfigSynonym(name, self.overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker = self._broker
        for synonym in defn.synonyms:
            if broker is not None:
                chain.extend(broker.entries(synonym.name))
            elif REGISTRY[synonym.name].default is not None:
                chain.append(
                    ConfigSynonym(synonym.name, REGISTRY[synonym.name].default, ConfigSource.DEFAULT_CONFIG)
                )
        return chain

    def as_dict(self) -> dict[str, Any]:
        """Every topic config's effective value, by name."""
        return dict(self._values)

    # -- derived values (Kafka's LogConfig computes the same) ----------------------------------------

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def message_timestamp_before_max_ms(self) -> int:
        """Effective lower skew bound: the legacy difference setting applies while this one is unset."""
        return self._timestamp_bound("message.timestamp.before.max.ms")

    @property
    def message_timestamp_after_max_ms(self) -> int:
        """Effective upper skew bound: the legacy difference setting applies while this one is unset."""
        return self._timestamp_bound("message.timestamp.after.max.ms")

    def _timestamp_bound(self, name: str) -> int:
        value: int = self._values[name]
        if value == INT64_MAX:  # unset: the deprecated difference config still bounds it, as in Kafka 3.9
            value = self._values["message.timestamp.difference.max.ms"]
        return value

    # -- attribute access ---------------------------------------------------------------------------

    def __getattr__(self, attr: str) -> Any:
        name = _TOPIC_ATTRS.get(attr)
        if name is None:
            raise AttributeError(f"{type(self).__name__} has no attribute {attr!r}")
        return self._values[name]

    def __setattr__(self, attr: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LogConfig) and dict(self._values) == dict(other._values)

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self._values.items())))

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(_TOPIC_ATTRS))

    def __repr__(self) -> str:
        return f"LogConfig(overrides={dict(self.overrides)!r})"


def _static_topic_default(defn: ConfigDef) -> tuple[Any, ConfigSource, str | None]:
    """A topic config's default with no broker config at hand (all broker configs at defaults)."""
    return _DEFAULT_BROKER.topic_default(defn.name)


# The all-defaults broker, for topic defaults when no BrokerConfig is given. Built last, once every
# definition exists.
_DEFAULT_BROKER = BrokerConfig()
