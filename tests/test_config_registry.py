"""The config registry against Kafka 3.9's facts, and the parsing / precedence rules around it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from config.properties import parse_properties, read_properties
from config.registry import (
    DOUBLE_MAX,
    INT64_MAX,
    REGISTRY,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    LogConfig,
    Password,
    UpdateMode,
    broker_configs,
    format_value,
    parse_value,
    topic_configs,
    validate,
)

# Kafka 3.9's topic configs: TopicConfig's *_CONFIG names defined in LogConfig's ConfigDef, plus
# the two throttled-replica lists from QuotaConfigs.
KAFKA_39_TOPIC_CONFIGS = {
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
}

# (name, Kafka 3.9 default, typed). Sources: TopicConfig/LogConfig, ServerLogConfigs, ServerConfigs,
# CleanerConfig, ReplicationConfigs, ZkConfigs, SocketServerConfigs, GroupCoordinatorConfig,
# TransactionLogConfigs, TransactionStateManagerConfigs.
KAFKA_DEFAULTS = [
    ("cleanup.policy", ("delete",)),
    ("compression.type", "producer"),
    ("compression.gzip.level", -1),
    ("compression.lz4.level", 9),
    ("compression.zstd.level", 3),
    ("delete.retention.ms", 86_400_000),
    ("file.delete.delay.ms", 60_000),
    ("flush.messages", INT64_MAX),
    ("flush.ms", INT64_MAX),
    ("index.interval.bytes", 4096),
    ("local.retention.ms", -2),
    ("local.retention.bytes", -2),
    ("max.compaction.lag.ms", INT64_MAX),
    ("max.message.bytes", 1_048_588),
    ("message.downconversion.enable", True),
    ("message.format.version", "3.0-IV1"),
    ("message.timestamp.type", "CreateTime"),
    ("message.timestamp.before.max.ms", INT64_MAX),
    ("message.timestamp.after.max.ms", INT64_MAX),
    ("min.cleanable.dirty.ratio", 0.5),
    ("min.compaction.lag.ms", 0),
    ("min.insync.replicas", 1),
    ("preallocate", False),
    ("remote.storage.enable", False),
    ("retention.bytes", -1),
    ("retention.ms", 604_800_000),
    ("segment.bytes", 1_073_741_824),
    ("segment.index.bytes", 10_485_760),
    ("segment.jitter.ms", 0),
    ("segment.ms", 604_800_000),
    ("unclean.leader.election.enable", False),
    ("broker.id", -1),
    ("broker.rack", None),
    ("listeners", "PLAINTEXT://:9092"),
    ("advertised.listeners", None),
    (
        "listener.security.protocol.map",
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
    ),
    ("zookeeper.connect", None),
    ("zookeeper.session.timeout.ms", 18_000),
    ("zookeeper.connection.timeout.ms", None),
    ("log.dir", "/tmp/kafka-logs"),
    ("log.dirs", None),
    ("num.partitions", 1),
    ("default.replication.factor", 1),
    ("auto.create.topics.enable", True),
    ("delete.topic.enable", True),
    ("message.max.bytes", 1_048_588),
    ("socket.request.max.bytes", 104_857_600),
    ("socket.send.buffer.bytes", 102_400),
    ("socket.receive.buffer.bytes", 102_400),
    ("connections.max.idle.ms", 600_000),
    ("num.network.threads", 3),
    ("num.io.threads", 8),
    ("queued.max.requests", 500),
    ("fetch.max.bytes", 57_671_680),
    ("log.segment.bytes", 1_073_741_824),
    ("log.roll.hours", 168),
    ("log.roll.ms", None),
    ("log.roll.jitter.hours", 0),
    ("log.retention.hours", 168),
    ("log.retention.minutes", None),
    ("log.retention.ms", None),
    ("log.retention.bytes", -1),
    ("log.retention.check.interval.ms", 300_000),
    ("log.cleaner.enable", True),
    ("log.cleaner.threads", 1),
    ("log.cleaner.dedupe.buffer.size", 134_217_728),
    ("log.cleaner.io.buffer.size", 524_288),
    ("log.cleaner.io.buffer.load.factor", 0.9),
    ("log.cleaner.io.max.bytes.per.second", DOUBLE_MAX),
    ("log.cleaner.min.cleanable.ratio", 0.5),
    ("log.cleaner.delete.retention.ms", 86_400_000),
    ("log.cleaner.backoff.ms", 15_000),
    ("log.index.interval.bytes", 4096),
    ("log.index.size.max.bytes", 10_485_760),
    ("log.flush.interval.messages", INT64_MAX),
    ("log.flush.interval.ms", None),
    ("log.flush.scheduler.interval.ms", INT64_MAX),
    ("log.flush.offset.checkpoint.interval.ms", 60_000),
    ("log.flush.start.offset.checkpoint.interval.ms", 60_000),
    ("log.preallocate", False),
    ("log.message.timestamp.type", "CreateTime"),
    ("log.message.downconversion.enable", True),
    ("log.cleanup.policy", ("delete",)),
    ("num.recovery.threads.per.data.dir", 1),
    ("offsets.topic.num.partitions", 50),
    ("offsets.topic.replication.factor", 3),
    ("offsets.topic.segment.bytes", 104_857_600),
    ("offsets.retention.minutes", 10_080),
    ("offsets.retention.check.interval.ms", 600_000),
    ("offsets.commit.timeout.ms", 5000),
    ("offsets.load.buffer.size", 5_242_880),
    ("group.initial.rebalance.delay.ms", 3000),
    ("group.min.session.timeout.ms", 6000),
    ("group.max.session.timeout.ms", 1_800_000),
    ("group.max.size", 2_147_483_647),
    ("transaction.state.log.num.partitions", 50),
    ("transaction.state.log.replication.factor", 3),
    ("transaction.state.log.min.isr", 2),
    ("transaction.state.log.segment.bytes", 104_857_600),
    ("transaction.max.timeout.ms", 900_000),
    ("transactional.id.expiration.ms", 604_800_000),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000),
    ("producer.id.expiration.ms", 86_400_000),
    ("max.incremental.fetch.session.cache.slots", 1000),
    ("replica.lag.time.max.ms", 30_000),
    ("replica.fetch.max.bytes", 1_048_576),
    ("replica.fetch.min.bytes", 1),
    ("replica.fetch.wait.max.ms", 500),
    ("replica.fetch.backoff.ms", 1000),
    ("replica.fetch.response.max.bytes", 10_485_760),
    ("num.replica.fetchers", 1),
    ("replica.high.watermark.checkpoint.interval.ms", 5000),
    ("replica.socket.timeout.ms", 30_000),
    ("controller.socket.timeout.ms", 30_000),
    ("controlled.shutdown.enable", True),
    ("controlled.shutdown.max.retries", 3),
    ("controlled.shutdown.retry.backoff.ms", 5000),
    ("auto.leader.rebalance.enable", True),
    ("leader.imbalance.per.broker.percentage", 10),
    ("leader.imbalance.check.interval.seconds", 300),
    ("leader.replication.throttled.rate", INT64_MAX),
    ("follower.replication.throttled.rate", INT64_MAX),
    ("request.timeout.ms", 30_000),
]


# Broker configs Kafka 4.0 removed that are defined all the same: Kafka 3.9 has them and kafkette still
# serves what they govern (Fetch v0-3, down-converted unless log.message.downconversion.enable=false).
SERVED_REMOVED_BROKER_CONFIGS = {"log.message.downconversion.enable"}


# -- the registry itself ----------------------------------------------------------------------------


def test_topic_config_names_are_exactly_kafka_39s() -> None:
    assert set(topic_configs()) == KAFKA_39_TOPIC_CONFIGS


@pytest.mark.parametrize(("name", "default"), KAFKA_DEFAULTS)
def test_defaults_match_kafka(name: str, default: object) -> None:
    assert REGISTRY[name].default == default


def test_every_definition_is_complete() -> None:
    for name, defn in REGISTRY.items():
        assert defn.name == name
        assert defn.type is not ConfigType.UNKNOWN, name
        assert defn.doc and "\n" not in defn.doc and defn.doc.endswith("."), name
        assert defn.broker or defn.topic, name
        validate(name, defn.default)  # every default passes its own validator
        if defn.broker:
            assert isinstance(defn.update_mode, UpdateMode), name
        else:
            assert defn.update_mode is None, name
        for synonym in defn.synonyms:
            assert REGISTRY[synonym.name].broker, (name, synonym)
        if defn.removed_in is not None:
            assert not defn.broker or name in SERVED_REMOVED_BROKER_CONFIGS, (
                f"{name}: broker configs Kafka 4.0 removed are defined only while kafkette acts on them"
            )


def test_python_names_are_unique_and_do_not_shadow_methods() -> None:
    broker_attrs = [d.python_name for d in broker_configs().values()]
    topic_attrs = [d.python_name for d in topic_configs().values()]
    assert len(set(broker_attrs)) == len(broker_attrs)
    assert not set(broker_attrs) & set(vars(BrokerConfig))
    assert not set(topic_attrs) & {k for k, v in vars(LogConfig).items() if callable(v)}


def test_types_are_describe_configs_codes() -> None:
    assert [(t.name, t.value) for t in ConfigType] == [
        ("UNKNOWN", 0), ("BOOLEAN", 1), ("STRING", 2), ("INT", 3), ("SHORT", 4),
        ("LONG", 5), ("DOUBLE", 6), ("LIST", 7), ("CLASS", 8), ("PASSWORD", 9),
    ]  # fmt: skip
    assert ConfigSource.DYNAMIC_TOPIC_CONFIG == 1
    assert ConfigSource.DYNAMIC_BROKER_CONFIG == 2
    assert ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG == 3
    assert ConfigSource.STATIC_BROKER_CONFIG == 4
    assert ConfigSource.DEFAULT_CONFIG == 5


@pytest.mark.parametrize(
    ("name", "config_type"),
    [
        ("segment.bytes", ConfigType.INT),
        ("retention.ms", ConfigType.LONG),
        ("cleanup.policy", ConfigType.LIST),
        ("min.cleanable.dirty.ratio", ConfigType.DOUBLE),
        ("offsets.topic.replication.factor", ConfigType.SHORT),
        ("transaction.state.log.replication.factor", ConfigType.SHORT),
        ("log.retention.hours", ConfigType.INT),
        ("log.dirs", ConfigType.STRING),
        ("unclean.leader.election.enable", ConfigType.BOOLEAN),
    ],
)
def test_types_match_kafka(name: str, config_type: ConfigType) -> None:
    assert REGISTRY[name].type is config_type


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("broker.id", UpdateMode.READ_ONLY),
        ("listeners", UpdateMode.PER_BROKER),
        ("advertised.listeners", UpdateMode.PER_BROKER),
        ("num.network.threads", UpdateMode.CLUSTER_WIDE),
        ("num.io.threads", UpdateMode.CLUSTER_WIDE),
        ("message.max.bytes", UpdateMode.CLUSTER_WIDE),
        ("log.retention.ms", UpdateMode.CLUSTER_WIDE),
        # Only the first synonym of a topic config is dynamic in Kafka.
        ("log.retention.hours", UpdateMode.READ_ONLY),
        ("log.roll.hours", UpdateMode.READ_ONLY),
        ("log.flush.scheduler.interval.ms", UpdateMode.READ_ONLY),
        ("log.cleaner.threads", UpdateMode.CLUSTER_WIDE),
        ("log.cleaner.enable", UpdateMode.READ_ONLY),
        ("min.insync.replicas", UpdateMode.CLUSTER_WIDE),
        ("zookeeper.connect", UpdateMode.READ_ONLY),
        ("socket.request.max.bytes", UpdateMode.READ_ONLY),
        ("max.connections", UpdateMode.CLUSTER_WIDE),
        ("producer.id.expiration.ms", UpdateMode.CLUSTER_WIDE),
        ("leader.replication.throttled.rate", UpdateMode.CLUSTER_WIDE),
        ("log.message.downconversion.enable", UpdateMode.CLUSTER_WIDE),
    ],
)
def test_update_modes_match_kafka(name: str, mode: UpdateMode) -> None:
    assert REGISTRY[name].update_mode is mode


def test_synonym_chains_match_kafka() -> None:
    def names(topic: str) -> list[str]:
        return [s.name for s in REGISTRY[topic].synonyms]

    assert names("retention.ms") == ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    assert names("segment.ms") == ["log.roll.ms", "log.roll.hours"]
    assert names("segment.jitter.ms") == ["log.roll.jitter.ms", "log.roll.jitter.hours"]
    assert names("flush.ms") == ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    assert names("segment.bytes") == ["log.segment.bytes"]
    assert names("cleanup.policy") == ["log.cleanup.policy"]
    assert names("max.message.bytes") == ["message.max.bytes"]
    assert names("min.insync.replicas") == ["min.insync.replicas"]
    assert names("message.timestamp.type") == ["log.message.timestamp.type"]
    assert names("message.downconversion.enable") == ["log.message.downconversion.enable"]
    assert names("min.cleanable.dirty.ratio") == ["log.cleaner.min.cleanable.ratio"]
    assert names("file.delete.delay.ms") == ["log.segment.delete.delay.ms"]
    assert names("remote.storage.enable") == []


def test_metrics_port_is_ours() -> None:
    defn = REGISTRY["metrics.port"]
    assert defn.kafkette and defn.broker and not defn.topic
    assert "kafkette" in defn.doc


# -- parsing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("preallocate", "true", True),
        ("preallocate", " FALSE ", False),
        ("preallocate", "True", True),
        ("segment.bytes", " 1048576 ", 1_048_576),
        ("segment.bytes", "+2048", 2048),
        ("retention.ms", "-1", -1),
        ("retention.ms", "9223372036854775807", INT64_MAX),
        ("offsets.topic.replication.factor", "32767", 32767),
        ("min.cleanable.dirty.ratio", "0.25", 0.25),
        ("min.cleanable.dirty.ratio", "1", 1.0),
        ("cleanup.policy", "compact , delete", ("compact", "delete")),
        ("cleanup.policy", "compact", ("compact",)),
        ("cleanup.policy", "  ", ()),
        ("leader.replication.throttled.replicas", "0:1, 1:2", ("0:1", "1:2")),
        ("leader.replication.throttled.replicas", "*", ("*",)),
        ("compression.type", " zstd ", "zstd"),
        ("compression.gzip.level", "-1", -1),
        ("compression.zstd.level", "-131072", -131072),
        ("message.format.version", "2.8-IV1", "2.8-IV1"),
    ],
)
def test_parse_value(name: str, raw: str, expected: object) -> None:
    assert parse_value(name, raw) == expected


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("preallocate", "yes"),
        ("preallocate", "1"),
        ("segment.bytes", "1_000_000"),
        ("segment.bytes", "1e6"),
        ("segment.bytes", "4.0"),
        ("segment.bytes", ""),
        ("segment.bytes", "2147483648"),  # INT overflow
        ("offsets.topic.replication.factor", "32768"),  # SHORT overflow
        ("retention.ms", "9223372036854775808"),  # LONG overflow
        ("min.cleanable.dirty.ratio", "half"),
    ],
)
def test_unparseable_values_name_the_key(name: str, raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_value(name, raw)
    assert caught.value.name == name
    assert name in str(caught.value)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("segment.bytes", "13"),  # below Kafka's minimum of 14 (a v0 record's overhead)
        ("segment.bytes", "-1"),
        ("log.segment.bytes", "0"),
        ("min.insync.replicas", "0"),
        ("cleanup.policy", "remove"),
        ("cleanup.policy", "compact,Delete"),  # Kafka's valid-list check is case-sensitive
        ("compression.type", "GZIP"),
        ("compression.type", "brotli"),
        ("compression.gzip.level", "0"),
        ("compression.gzip.level", "10"),
        ("compression.lz4.level", "18"),
        ("compression.zstd.level", "23"),
        ("message.timestamp.type", "createtime"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("retention.ms", "-2"),
        ("max.compaction.lag.ms", "0"),
        ("segment.ms", "0"),
        ("segment.index.bytes", "3"),
        ("leader.replication.throttled.replicas", "0-1"),
        ("follower.replication.throttled.replicas", "*,0:1"),
        ("message.format.version", "latest"),
        ("fetch.max.bytes", "1023"),
        ("security.inter.broker.protocol", "plaintext"),
        ("metrics.port", "70000"),
    ],
)
def test_invalid_values_name_the_key(name: str, raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_value(name, raw)
    assert caught.value.name == name
    assert name in str(caught.value)


def test_unknown_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no.such.config"):
        parse_value("no.such.config", "1")


def test_typed_values_are_accepted_and_checked() -> None:
    assert parse_value("segment.bytes", 4096) == 4096
    assert parse_value("cleanup.policy", ["compact"]) == ("compact",)
    assert parse_value("min.cleanable.dirty.ratio", 1) == 1.0
    with pytest.raises(ConfigError, match="segment.bytes"):
        parse_value("segment.bytes", True)
    with pytest.raises(ConfigError, match="preallocate"):
        parse_value("preallocate", 1)
    with pytest.raises(ConfigError, match="segment.bytes"):
        validate("segment.bytes", 10)
    with pytest.raises(ConfigError, match="segment.bytes"):
        validate("segment.bytes", None)  # it has a default, so it cannot be unset
    validate("log.retention.ms", None)  # no default: None means unset


def test_passwords_are_hidden() -> None:
    secret = Password("hunter2")
    assert "hunter2" not in repr(secret) and secret.value == "hunter2"


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("preallocate", True, "true"),
        ("cleanup.policy", ("compact", "delete"), "compact,delete"),
        ("min.cleanable.dirty.ratio", 0.5, "0.5"),
        ("log.cleaner.io.max.bytes.per.second", DOUBLE_MAX, "1.7976931348623157E308"),
        ("log.cleaner.io.max.bytes.per.second", 1e7, "1.0E7"),
        ("log.cleaner.io.max.bytes.per.second", 1e-4, "1.0E-4"),
        ("log.cleaner.io.buffer.load.factor", 0.9, "0.9"),
        ("retention.ms", -1, "-1"),
        ("log.retention.ms", None, None),
    ],
)
def test_format_value_like_kafka(name: str, value: object, text: str | None) -> None:
    assert format_value(name, value) == text


# -- BrokerConfig -----------------------------------------------------------------------------------


def test_broker_config_defaults_and_attributes() -> None:
    config = BrokerConfig()
    assert config.get("num.partitions") == 1
    assert config.num_partitions == 1
    assert config.log_segment_bytes == 1_073_741_824
    assert config.zookeeper_connect is None
    assert config.source_of("num.partitions") is ConfigSource.DEFAULT_CONFIG
    assert config.log_dir_list == ("/tmp/kafka-logs",)
    assert not config.unknown


def test_broker_config_from_properties_and_overrides() -> None:
    props = {
        "broker.id": "3",
        "log.dirs": "/data/a, /data/b,",
        "zookeeper.connect": "localhost:2181/kafkette",
        "auto.create.topics.enable": "FALSE",
        "num.partitions": "6",
    }
    config = BrokerConfig(props, {"num.partitions": "12", "broker.rack": "r1"})
    assert config.broker_id == 3
    assert config.num_partitions == 12  # overrides beat the file
    assert config.broker_rack == "r1"
    assert config.auto_create_topics_enable is False
    assert config.log_dir_list == ("/data/a", "/data/b")
    assert config.source_of("broker.id") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.originals["broker.id"] == "3"


def test_unknown_broker_keys_are_collected_not_fatal() -> None:
    config = BrokerConfig(
        {
            "no.such.setting": "1",
            "retention.ms": "1000",  # a topic config name is not a broker config
            "leader.replication.throttled.rate": "1000",  # dynamic-only: Kafka ignores it in the file
            "log.message.format.version": "2.8",  # removed in Kafka 4.0
            "num.io.threads": "4",
        }
    )
    assert set(config.unknown) == {
        "no.such.setting",
        "retention.ms",
        "leader.replication.throttled.rate",
        "log.message.format.version",
    }
    assert config.num_io_threads == 4


def test_invalid_broker_values_raise() -> None:
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        BrokerConfig({"log.segment.bytes": "10"})
    with pytest.raises(ConfigError, match="min.insync.replicas"):
        BrokerConfig({"min.insync.replicas": "0"})
    with pytest.raises(ConfigError, match="delete.topic.enable"):
        BrokerConfig({"delete.topic.enable": "nope"})


def test_broker_cross_checks() -> None:
    with pytest.raises(ConfigError, match="replica.fetch.wait.max.ms"):
        BrokerConfig({"replica.fetch.wait.max.ms": "40000", "replica.socket.timeout.ms": "60000"})
    with pytest.raises(ConfigError, match="replica.socket.timeout.ms"):
        BrokerConfig({"replica.fetch.wait.max.ms": "600", "replica.socket.timeout.ms": "500"})
    with pytest.raises(ConfigError, match="log.cleaner.dedupe.buffer.size"):
        BrokerConfig({"log.cleaner.dedupe.buffer.size": "2097152", "log.cleaner.threads": "2"})
    with pytest.raises(ConfigError, match="log.retention.ms"):
        BrokerConfig({"log.retention.ms": "0"})
    with pytest.raises(ConfigError, match="log.roll.ms"):
        BrokerConfig({"log.roll.ms": "0"})
    with pytest.raises(ConfigError, match="log.dirs"):
        BrokerConfig({"log.dirs": " , "})
    BrokerConfig({"log.cleaner.threads": "0"})  # no cleaner threads: no per-thread buffer check


def test_broker_config_is_immutable() -> None:
    config = BrokerConfig()
    with pytest.raises(AttributeError):
        config.num_partitions = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        _ = config.not_a_config
    with pytest.raises(KeyError):
        config.get("retention.ms")  # topic-only


def test_dynamic_layers_take_precedence() -> None:
    static = BrokerConfig({"log.retention.ms": "1000", "num.io.threads": "4", "message.max.bytes": "2000"})
    config = static.with_dynamic(
        dynamic_default={"log.retention.ms": "2000", "num.io.threads": "6"},
        dynamic_broker={"log.retention.ms": "3000"},
    )
    assert config.log_retention_ms == 3000
    assert config.source_of("log.retention.ms") is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert config.num_io_threads == 6
    assert config.source_of("num.io.threads") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert config.message_max_bytes == 2000
    assert config.source_of("message.max.bytes") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.entries("log.retention.ms") == [
        ConfigSynonym("log.retention.ms", 3000, ConfigSource.DYNAMIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.ms", 2000, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigSynonym("log.retention.ms", 1000, ConfigSource.STATIC_BROKER_CONFIG),
    ]
    # Dynamic-only configs live in the dynamic layers.
    throttled = BrokerConfig(dynamic_broker={"leader.replication.throttled.rate": "1048576"})
    assert throttled.leader_replication_throttled_rate == 1_048_576


def test_a_value_read_before_a_dynamic_update_is_not_kept_past_it() -> None:
    # get() keeps its answers per object: the update makes a new object, which answers afresh.
    static = BrokerConfig({"log.retention.ms": "1000"})
    assert static.get("log.retention.ms") == 1000
    assert static.get("leader.replication.throttled.rate") == 2**63 - 1
    updated = static.with_dynamic(dynamic_broker={"log.retention.ms": "3000",
                                                  "leader.replication.throttled.rate": "1048576"})
    assert updated.get("log.retention.ms") == 3000
    assert updated.get("leader.replication.throttled.rate") == 1_048_576
    assert updated.leader_replication_throttled_rate == 1_048_576
    assert static.get("log.retention.ms") == 1000  # the old object is unchanged
    with pytest.raises(KeyError):
        updated.get("retention.ms")  # a topic-only name still raises, asked twice
    with pytest.raises(KeyError):
        updated.get("retention.ms")


def test_dynamic_update_rules() -> None:
    with pytest.raises(ConfigError, match="log.retention.hours"):
        BrokerConfig(dynamic_broker={"log.retention.hours": "1"})  # read-only
    with pytest.raises(ConfigError, match="broker.id"):
        BrokerConfig(dynamic_default={"broker.id": "1"})
    with pytest.raises(ConfigError, match="listeners"):
        BrokerConfig(dynamic_default={"listeners": "PLAINTEXT://:9093"})  # per-broker only
    assert BrokerConfig(dynamic_broker={"listeners": "PLAINTEXT://:9093"}).listeners == "PLAINTEXT://:9093"


def test_broker_synonym_groups() -> None:
    config = BrokerConfig({"log.retention.minutes": "30"})
    assert config.synonyms("log.retention.hours") == [
        ConfigSynonym("log.retention.minutes", 30, ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", 168, ConfigSource.DEFAULT_CONFIG),
    ]
    assert [s.name for s in config.synonyms("log.flush.interval.ms")] == ["log.flush.scheduler.interval.ms"]
    assert [s.name for s in config.synonyms("log.flush.scheduler.interval.ms")] == [
        "log.flush.scheduler.interval.ms"
    ]
    assert config.synonyms("num.partitions") == [
        ConfigSynonym("num.partitions", 1, ConfigSource.DEFAULT_CONFIG)
    ]


# -- LogConfig --------------------------------------------------------------------------------------


def test_log_config_defaults_equal_topic_defaults() -> None:
    config = LogConfig()
    assert set(config.as_dict()) == KAFKA_39_TOPIC_CONFIGS
    for name, defn in topic_configs().items():
        assert config.get(name) == defn.default, name
        assert config.source_of(name) is ConfigSource.DEFAULT_CONFIG
    assert LogConfig.from_broker(BrokerConfig()) == config
    assert config.segment_bytes == 1_073_741_824
    assert config.retention_ms == 604_800_000
    assert config.cleanup_policy == ("delete",)
    assert config.delete and not config.compact
    assert config.message_timestamp_type == "CreateTime"


@pytest.mark.parametrize(
    ("props", "retention_ms", "synonym"),
    [
        ({}, 604_800_000, "log.retention.hours"),
        ({"log.retention.hours": "2"}, 7_200_000, "log.retention.hours"),
        ({"log.retention.hours": "2", "log.retention.minutes": "5"}, 300_000, "log.retention.minutes"),
        (
            {"log.retention.hours": "2", "log.retention.minutes": "5", "log.retention.ms": "1234"},
            1234,
            "log.retention.ms",
        ),
        ({"log.retention.ms": "1234", "log.retention.hours": "2"}, 1234, "log.retention.ms"),
        ({"log.retention.hours": "-1"}, -1, "log.retention.hours"),  # any negative means forever
        ({"log.retention.minutes": "-5"}, -1, "log.retention.minutes"),
        ({"log.retention.ms": "-1"}, -1, "log.retention.ms"),
    ],
)
def test_retention_precedence(props: dict[str, str], retention_ms: int, synonym: str) -> None:
    broker = BrokerConfig(props)
    config = LogConfig.from_broker(broker, {})
    assert config.retention_ms == retention_ms
    assert broker.topic_default("retention.ms")[2] == synonym
    expected_source = ConfigSource.STATIC_BROKER_CONFIG if props else ConfigSource.DEFAULT_CONFIG
    assert config.source_of("retention.ms") is expected_source


def test_roll_and_flush_precedence() -> None:
    config = LogConfig.from_broker(BrokerConfig({"log.roll.hours": "1", "log.roll.jitter.hours": "1"}))
    assert config.segment_ms == 3_600_000 and config.segment_jitter_ms == 3_600_000
    config = LogConfig.from_broker(BrokerConfig({"log.roll.hours": "1", "log.roll.ms": "5000"}))
    assert config.segment_ms == 5000
    config = LogConfig.from_broker(BrokerConfig({"log.flush.scheduler.interval.ms": "7000"}))
    assert config.flush_ms == 7000
    config = LogConfig.from_broker(
        BrokerConfig({"log.flush.scheduler.interval.ms": "7000", "log.flush.interval.ms": "3000"})
    )
    assert config.flush_ms == 3000


def test_topic_overrides_beat_broker_values() -> None:
    broker = BrokerConfig(
        {"log.segment.bytes": "1000000", "log.retention.hours": "1", "log.cleanup.policy": "compact"}
    )
    config = LogConfig.from_broker(broker, {"segment.bytes": "2000000", "cleanup.policy": "compact,delete"})
    assert config.segment_bytes == 2_000_000
    assert config.source_of("segment.bytes") is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert config.cleanup_policy == ("compact", "delete") and config.compact and config.delete
    assert config.retention_ms == 3_600_000
    assert config.source_of("retention.ms") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.overrides == {"segment.bytes": 2_000_000, "cleanup.policy": ("compact", "delete")}
    assert config.synonyms("segment.bytes") == [
        ConfigSynonym("segment.bytes", 2_000_000, ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.segment.bytes", 1_000_000, ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.segment.bytes", 1_073_741_824, ConfigSource.DEFAULT_CONFIG),
    ]
    assert config.synonyms("retention.ms") == [
        ConfigSynonym("log.retention.hours", 1, ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", 168, ConfigSource.DEFAULT_CONFIG),
    ]
    assert config.synonyms("remote.storage.enable") == []


def test_dynamic_broker_values_reach_topics() -> None:
    broker = BrokerConfig({"log.retention.ms": "1000"}, dynamic_default={"log.retention.ms": "2000"})
    config = LogConfig.from_broker(broker)
    assert config.retention_ms == 2000
    assert config.source_of("retention.ms") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert config.max_message_bytes == 1_048_588
    shared = LogConfig.from_broker(BrokerConfig({"min.insync.replicas": "2", "compression.type": "lz4"}))
    assert shared.min_insync_replicas == 2 and shared.compression_type == "lz4"
    assert shared.source_of("min.insync.replicas") is ConfigSource.STATIC_BROKER_CONFIG


def test_topic_override_validation() -> None:
    with pytest.raises(ConfigError, match="segment.bytes"):
        LogConfig.from_broker(None, {"segment.bytes": "13"})
    with pytest.raises(ConfigError, match="min.insync.replicas"):
        LogConfig.from_broker(None, {"min.insync.replicas": "0"})
    with pytest.raises(ConfigError, match="cleanup.policy"):
        LogConfig.from_broker(None, {"cleanup.policy": "forever"})
    with pytest.raises(ConfigError, match="min.compaction.lag.ms"):
        LogConfig.from_broker(None, {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        LogConfig.from_broker(None, {"log.segment.bytes": "1000"})  # broker name, not a topic config
    lenient = LogConfig.from_broker(None, {"some.old.setting": "x", "retention.ms": "5"}, strict=False)
    assert lenient.unknown == {"some.old.setting": "x"} and lenient.retention_ms == 5


def test_downconversion_falls_back_to_the_broker_config() -> None:
    defn = REGISTRY["log.message.downconversion.enable"]
    assert defn.broker and not defn.topic and defn.type is ConfigType.BOOLEAN and defn.removed_in == "4.0"

    config = LogConfig.from_broker(BrokerConfig())
    assert config.message_downconversion_enable is True
    assert config.source_of("message.downconversion.enable") is ConfigSource.DEFAULT_CONFIG
    assert config.synonyms("message.downconversion.enable") == [
        ConfigSynonym("log.message.downconversion.enable", True, ConfigSource.DEFAULT_CONFIG)
    ]

    static = BrokerConfig({"log.message.downconversion.enable": "false"})
    assert static.log_message_downconversion_enable is False
    config = LogConfig.from_broker(static)
    assert config.message_downconversion_enable is False
    assert config.source_of("message.downconversion.enable") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.synonyms("message.downconversion.enable") == [
        ConfigSynonym("log.message.downconversion.enable", False, ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.message.downconversion.enable", True, ConfigSource.DEFAULT_CONFIG),
    ]

    # A cluster-wide dynamic value beats the file; a topic override beats both.
    dynamic = static.with_dynamic(dynamic_default={"log.message.downconversion.enable": "true"})
    config = LogConfig.from_broker(dynamic)
    assert config.message_downconversion_enable is True
    assert config.source_of("message.downconversion.enable") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    config = LogConfig.from_broker(static, {"message.downconversion.enable": "true"})
    assert config.message_downconversion_enable is True
    assert config.source_of("message.downconversion.enable") is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert [s.source for s in config.synonyms("message.downconversion.enable")] == [
        ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG,
    ]
    assert static.synonyms("log.message.downconversion.enable") == [
        ConfigSynonym("log.message.downconversion.enable", False, ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.message.downconversion.enable", True, ConfigSource.DEFAULT_CONFIG),
    ]
    # The other removed broker synonyms stay unknown to the broker.
    assert set(BrokerConfig({"log.message.format.version": "2.8"}).unknown) == {"log.message.format.version"}


def test_legacy_timestamp_difference_applies_while_before_after_unset() -> None:
    config = LogConfig.from_broker(None, {"message.timestamp.difference.max.ms": "1000"})
    assert config.message_timestamp_before_max_ms == 1000
    assert config.message_timestamp_after_max_ms == 1000
    config = LogConfig.from_broker(
        None, {"message.timestamp.difference.max.ms": "1000", "message.timestamp.after.max.ms": "50"}
    )
    assert config.message_timestamp_before_max_ms == 1000
    assert config.message_timestamp_after_max_ms == 50
    assert LogConfig().message_timestamp_before_max_ms == INT64_MAX


def test_log_config_is_immutable() -> None:
    config = LogConfig()
    with pytest.raises(AttributeError):
        config.segment_bytes = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        _ = config.not_a_config
    with pytest.raises(KeyError):
        config.get("log.segment.bytes")
    with pytest.raises(TypeError):
        config.overrides["segment.bytes"] = 1  # type: ignore[index]


# -- .properties files ------------------------------------------------------------------------------


def test_properties_basic_forms() -> None:
    text = (
        "# a comment\n"
        "   ! another comment\n"
        "\n"
        "broker.id=1\n"
        "log.dirs = /data/kafka\n"
        "zookeeper.connect: localhost:2181\n"
        "num.partitions 3\n"
        "   listeners\t=\tPLAINTEXT://:9092\n"
        "empty.value=\n"
        "no.separator\n"
        "key.with.equals=a=b:c\n"
        "broker.id=2\n"
    )
    assert parse_properties(text) == {
        "broker.id": "2",  # the later line wins
        "log.dirs": "/data/kafka",
        "zookeeper.connect": "localhost:2181",
        "num.partitions": "3",
        "listeners": "PLAINTEXT://:9092",
        "empty.value": "",
        "no.separator": "",
        "key.with.equals": "a=b:c",
    }


def test_properties_continuations_and_escapes() -> None:
    text = (
        "log.dirs=/a,\\\n"
        "         /b,\\\n"
        "  /c\n"
        "path=C:\\\\kafka\\\\logs\\\\\n"  # even number of trailing backslashes: no continuation
        "next=1\n"
        "tabbed=x\\ty\\nz\n"
        "unicode=\\u00e9t\\u00E9\n"
        "my\\ key\\:with\\=separators=v\n"
        "other\\q=\\q\n"
        "# comment ending in a backslash \\\n"
        "after.comment=yes\n"
        "continued.blank=a\\\n"
        "\n"
        "after.blank=b\n"
    )
    assert parse_properties(text) == {
        "log.dirs": "/a,/b,/c",
        "path": "C:\\kafka\\logs\\",
        "next": "1",
        "tabbed": "x\ty\nz",
        "unicode": "été",
        "my key:with=separators": "v",
        "otherq": "q",
        "after.comment": "yes",
        "continued.blank": "a",
        "after.blank": "b",
    }


def test_properties_line_endings_and_whitespace() -> None:
    props = parse_properties("a=1\r\nb=2\rc=3\nd = spaced value   \n")
    assert props == {"a": "1", "b": "2", "c": "3", "d": "spaced value   "}
    assert parse_value("retention.ms", "604800000   ") == 604_800_000  # values are trimmed when parsed


def test_properties_malformed_unicode_escape() -> None:
    with pytest.raises(ValueError, match="uXXXX"):
        parse_properties("bad=\\u12\n")


def test_read_properties_file_feeds_broker_config(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(
        b"# kafkette test broker\n"
        b"broker.id=7\n"
        b"log.dirs=/var/lib/kafkette/data-1,\\\n    /var/lib/kafkette/data-2\n"
        b"log.retention.hours=24\n"
        b"broker.rack=caf\xe9\n"  # Latin-1, as Kafka reads it
        b"unknown.thing=1\n"
    )
    config = BrokerConfig(read_properties(path))
    assert config.broker_id == 7
    assert config.log_dir_list == ("/var/lib/kafkette/data-1", "/var/lib/kafkette/data-2")
    assert config.broker_rack == "café"
    assert config.unknown == {"unknown.thing": "1"}
    assert LogConfig.from_broker(config).retention_ms == 86_400_000


def test_module_needs_only_the_standard_library() -> None:
    root = Path(__file__).resolve().parents[1]
    code = f"import sys; sys.path.insert(0, {str(root)!r}); import config.registry, config.properties"
    # -S: no site-packages, so any third-party import would fail.
    subprocess.run([sys.executable, "-S", "-c", code], check=True, cwd=root)
