"""ZooKeeper paths and the JSON kept in them, exactly as Apache Kafka (3.9, ZooKeeper mode) writes them.

Kafka's tools (``kafka-topics --zookeeper``, ``zookeeper-shell``, Burrow, Cruise Control) read these
znodes, so field names, value types (some numbers are written as strings!) and optional fields follow
Kafka's ``ZkData``. JSON is written compactly, like Jackson does; decoders accept any key order and
the older versions Kafka itself still reads.

No I/O here: ``controller.zk_client`` does the reading and writing.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

# ------------------------------------------------------------------------------------------------
# Paths

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
CONSUMERS_PATH = "/consumers"
FEATURE_PATH = "/feature"

# ConfigType.ALL
CONFIG_TYPE_TOPIC = "topics"
CONFIG_TYPE_CLIENT = "clients"
CONFIG_TYPE_USER = "users"
CONFIG_TYPE_BROKER = "brokers"
CONFIG_TYPE_IP = "ips"
CONFIG_TYPES = (CONFIG_TYPE_TOPIC, CONFIG_TYPE_CLIENT, CONFIG_TYPE_USER, CONFIG_TYPE_BROKER, CONFIG_TYPE_IP)

# ZkData.PersistentZkPaths: created (empty) at broker start-up.
PERSISTENT_PATHS = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
) + tuple(f"{CONFIG_PATH}/{t}" for t in CONFIG_TYPES)

INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0
INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0
NO_LEADER = -1
LEADER_DURING_DELETE = -2
MATCH_ANY_VERSION = -1
UNKNOWN_VERSION = -2
PRODUCER_ID_BLOCK_SIZE = 1000

LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


# ------------------------------------------------------------------------------------------------
# JSON helpers


def _dumps(obj: Any) -> bytes:
    """Compact JSON, as Jackson writes it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data: bytes | str | None) -> Any:
    if data is None or len(data) == 0:
        return None
    if isinstance(data, bytes | bytearray | memoryview):
        data = bytes(data).decode("utf-8")
    return json.loads(data)


class ZkDataError(ValueError):
    """A znode holds data we cannot parse."""


# ------------------------------------------------------------------------------------------------
# Kafka's Uuid text form: URL-safe base64 of the 16 bytes, without padding (22 characters)

ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_UUID = uuid.UUID(int=1)


def uuid_to_str(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def uuid_from_str(s: str) -> uuid.UUID:
    if len(s) != 22:
        raise ZkDataError(f"not a Kafka uuid: {s!r}")
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=="))
    except (ValueError, TypeError) as e:
        raise ZkDataError(f"not a Kafka uuid: {s!r}") from e


def random_uuid() -> uuid.UUID:
    """Like Kafka's ``Uuid.randomUuid``: never the reserved ids, never a string starting with '-'."""
    while True:
        u = uuid.uuid4()
        if u in (ZERO_UUID, METADATA_TOPIC_UUID):
            continue
        if uuid_to_str(u).startswith("-"):
            continue
        return u


def generate_cluster_id() -> str:
    return uuid_to_str(random_uuid())


# ------------------------------------------------------------------------------------------------
# /controller and /controller_epoch


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    broker_id: int
    timestamp: int = -1
    kraft_controller_epoch: int | None = None
    zk_version: int = 0


def encode_controller(broker_id: int, timestamp_ms: int | None = None, kraft_controller_epoch: int = -1) -> bytes:
    """Kafka 3.9 writes version 2 with ``kraftControllerEpoch`` = -1 for a ZooKeeper-mode controller."""
    if timestamp_ms is None:
        timestamp_ms = int(time.time() * 1000)
    return _dumps({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms),
                   "kraftControllerEpoch": kraft_controller_epoch})


def decode_controller(data: bytes, zk_version: int = 0) -> ControllerRegistration:
    js = _loads(data)
    if not isinstance(js, dict) or "brokerid" not in js:
        raise ZkDataError(f"bad /controller data: {data!r}")
    ts = js.get("timestamp", -1)
    return ControllerRegistration(int(js["brokerid"]), int(ts) if ts not in (None, "") else -1,
                                  js.get("kraftControllerEpoch"), zk_version)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(bytes(data).decode("ascii"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ZkDataError(f"bad /controller_epoch data: {data!r}") from e


# ------------------------------------------------------------------------------------------------
# /brokers/ids/<id>

SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_ENDPOINT_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class EndPoint:
    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @property
    def security_protocol_id(self) -> int:
        return SECURITY_PROTOCOLS.get(self.security_protocol, 0)

    @staticmethod
    def parse(connection_string: str, protocol_map: Mapping[str, str] | None = None) -> EndPoint:
        m = _ENDPOINT_RE.match(connection_string.strip())
        if not m:
            raise ZkDataError(f"unable to parse {connection_string!r} to a broker endpoint")
        listener = m.group(1)
        if protocol_map is None:
            protocol_map = {p: p for p in SECURITY_PROTOCOLS}
        if listener not in protocol_map:
            raise ZkDataError(f"no security protocol defined for listener {listener}")
        return EndPoint(m.group(2), int(m.group(3)), listener, protocol_map[listener])


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """The ephemeral ``/brokers/ids/<id>`` znode (JSON version 5), plus its czxid, the broker epoch."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    jmx_port: int = -1
    version: int = 5
    timestamp: int = -1
    broker_epoch: int = -1

    def endpoint(self, listener_name: str) -> EndPoint | None:
        for ep in self.endpoints:
            if ep.listener_name == listener_name:
                return ep
        return None

    def with_epoch(self, broker_epoch: int) -> BrokerRegistration:
        return replace(self, broker_epoch=broker_epoch)


def encode_broker_registration(reg: BrokerRegistration, timestamp_ms: int | None = None) -> bytes:
    if timestamp_ms is None:
        timestamp_ms = int(time.time() * 1000)
    plaintext = next((ep for ep in reg.endpoints if ep.security_protocol == "PLAINTEXT"), None)
    js: dict[str, Any] = {
        "features": {name: dict(rng) for name, rng in reg.features.items()},
        "listener_security_protocol_map": {ep.listener_name: ep.security_protocol for ep in reg.endpoints},
        "endpoints": [ep.connection_string for ep in reg.endpoints],
        "jmx_port": reg.jmx_port,
        "port": plaintext.port if plaintext else -1,
        "host": plaintext.host if plaintext else None,
        "version": reg.version,
        "timestamp": str(timestamp_ms),
    }
    if reg.rack is not None:
        js["rack"] = reg.rack
    return _dumps(js)


def decode_broker_registration(broker_id: int, data: bytes, broker_epoch: int = -1) -> BrokerRegistration:
    js = _loads(data)
    if not isinstance(js, dict):
        raise ZkDataError(f"failed to parse ZooKeeper registration for broker {broker_id}: {data!r}")
    version = int(js.get("version", 0))
    if version < 1:
        raise ZkDataError(f"unsupported version of broker registration: {data!r}")
    if version == 1:
        endpoints: tuple[EndPoint, ...] = (EndPoint(js["host"], int(js["port"])),)
    else:
        pmap = js.get("listener_security_protocol_map")
        endpoints = tuple(EndPoint.parse(s, pmap) for s in js.get("endpoints", []))
    ts = js.get("timestamp")
    features = js.get("features") or {}
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=endpoints,
        rack=js.get("rack"),
        features={k: {kk: int(vv) for kk, vv in v.items()} for k, v in features.items()},
        jmx_port=int(js.get("jmx_port", -1)),
        version=version,
        timestamp=int(ts) if ts not in (None, "") else -1,
        broker_epoch=broker_epoch,
    )


# ------------------------------------------------------------------------------------------------
# /brokers/topics/<topic>


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas (preferred leader first), plus those being added/removed by a reassignment."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding_replicas)


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    topic: str
    topic_id: uuid.UUID | None
    partitions: Mapping[int, ReplicaAssignment]
    zk_version: int = 0

    def replicas(self) -> dict[int, list[int]]:
        return {p: list(a.replicas) for p, a in sorted(self.partitions.items())}


def as_replica_assignments(assignment: Mapping[int, Iterable[int] | ReplicaAssignment]) -> dict[int, ReplicaAssignment]:
    out: dict[int, ReplicaAssignment] = {}
    for p, a in assignment.items():
        out[int(p)] = a if isinstance(a, ReplicaAssignment) else ReplicaAssignment(tuple(int(r) for r in a))
    return out


def encode_topic_assignment(topic_id: uuid.UUID | None,
                            assignment: Mapping[int, Iterable[int] | ReplicaAssignment]) -> bytes:
    parts = as_replica_assignments(assignment)
    js: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(a.replicas) for p, a in sorted(parts.items())},
        "adding_replicas": {str(p): list(a.adding_replicas) for p, a in sorted(parts.items()) if a.adding_replicas},
        "removing_replicas": {str(p): list(a.removing_replicas)
                              for p, a in sorted(parts.items()) if a.removing_replicas},
    }
    if topic_id is not None:
        js["topic_id"] = uuid_to_str(topic_id)
    return _dumps(js)


def decode_topic_assignment(topic: str, data: bytes | None, zk_version: int = 0) -> TopicAssignment:
    js = _loads(data)
    if not isinstance(js, dict):
        return TopicAssignment(topic, None, {}, zk_version)
    tid = js.get("topic_id")
    adding = js.get("adding_replicas") or {}
    removing = js.get("removing_replicas") or {}
    partitions = {
        int(p): ReplicaAssignment(tuple(int(r) for r in reps), tuple(int(r) for r in adding.get(p, ())),
                                  tuple(int(r) for r in removing.get(p, ())))
        for p, reps in (js.get("partitions") or {}).items()
    }
    return TopicAssignment(topic, uuid_from_str(tid) if tid else None, partitions, zk_version)


# ------------------------------------------------------------------------------------------------
# /brokers/topics/<topic>/partitions/<p>/state


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """A partition's leader, leader epoch and ISR, the controller epoch that wrote them, and the znode
    version (the *partition epoch* that fences AlterPartition)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    controller_epoch: int = 0
    zk_version: int = 0

    @property
    def partition_epoch(self) -> int:
        return self.zk_version

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderIsrAndControllerEpoch:
        """A new leader and ISR: the leader epoch goes up by one, the recovery state is kept."""
        return replace(self, leader=leader, isr=tuple(isr), leader_epoch=self.leader_epoch + 1)

    def new_recovering_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderIsrAndControllerEpoch:
        """After an unclean election: the new leader must recover before it may grow the ISR."""
        return replace(self, leader=leader, isr=tuple(isr), leader_epoch=self.leader_epoch + 1,
                       leader_recovery_state=LEADER_RECOVERY_RECOVERING)

    def new_leader(self, leader: int) -> LeaderIsrAndControllerEpoch:
        return self.new_leader_and_isr(leader, self.isr)

    def new_epoch(self) -> LeaderIsrAndControllerEpoch:
        return self.new_leader_and_isr(self.leader, self.isr)

    def with_controller_epoch(self, controller_epoch: int) -> LeaderIsrAndControllerEpoch:
        return replace(self, controller_epoch=controller_epoch)

    def with_zk_version(self, zk_version: int) -> LeaderIsrAndControllerEpoch:
        return replace(self, zk_version=zk_version)

    def same_state(self, other: LeaderIsrAndControllerEpoch) -> bool:
        """Equal leader, leader epoch, ISR and recovery state (partition epochs may differ)."""
        return (self.leader == other.leader and self.leader_epoch == other.leader_epoch
                and list(self.isr) == list(other.isr)
                and self.leader_recovery_state == other.leader_recovery_state)


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    js: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
        js["leader_recovery_state"] = state.leader_recovery_state
    return _dumps(js)


def decode_partition_state(data: bytes, zk_version: int = 0) -> LeaderIsrAndControllerEpoch | None:
    js = _loads(data)
    if not isinstance(js, dict):
        return None
    try:
        return LeaderIsrAndControllerEpoch(
            leader=int(js["leader"]),
            leader_epoch=int(js["leader_epoch"]),
            isr=tuple(int(r) for r in js["isr"]),
            leader_recovery_state=int(js.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED)),
            controller_epoch=int(js["controller_epoch"]),
            zk_version=zk_version,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ZkDataError(f"bad partition state: {data!r}") from e


# ------------------------------------------------------------------------------------------------
# /config/<type>/<name> and /config/changes/config_change_NNNNNNNNNN


def encode_config(config: Mapping[str, Any]) -> bytes:
    return _dumps({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})


def decode_config(data: bytes | None) -> dict[str, str]:
    js = _loads(data)
    if not isinstance(js, dict):
        return {}
    cfg = js.get("config")
    if not isinstance(cfg, dict):
        return {}
    return {str(k): ("" if v is None else str(v)) for k, v in cfg.items()}


def encode_config_change(entity_path: str) -> bytes:
    """A change notification, e.g. ``entity_path`` = ``topics/my-topic`` or ``brokers/<default>``."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) of a change notification (versions 1 and 2)."""
    js = _loads(data)
    if not isinstance(js, dict):
        raise ZkDataError(f"bad config change notification: {data!r}")
    if int(js.get("version", 1)) == 1:
        return str(js["entity_type"]), str(js["entity_name"])
    entity_path = str(js["entity_path"])
    etype, _, name = entity_path.partition("/")
    return etype, name


# ------------------------------------------------------------------------------------------------
# /cluster/id, /latest_producer_id_block


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    js = _loads(data)
    if not isinstance(js, dict) or "id" not in js:
        raise ZkDataError(f"failed to parse the cluster id json {data!r}")
    return str(js["id"])


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    broker_id: int
    first_producer_id: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dumps({"version": 1, "broker": block.broker_id, "block_start": str(block.first_producer_id),
                   "block_end": str(block.last_producer_id)})


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    js = _loads(data)
    try:
        start = int(js["block_start"])
        end = int(js["block_end"])
        return ProducerIdBlock(int(js["broker"]), start, end - start + 1)
    except (KeyError, TypeError, ValueError) as e:
        raise ZkDataError(f"failed to parse the producer id block json {data!r}") from e


# ------------------------------------------------------------------------------------------------
# /admin/reassign_partitions, /admin/preferred_replica_election, /isr_change_notification/isr_change_N


def encode_reassignment(reassignment: Mapping[tuple[str, int], Iterable[int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(reps)} for (t, p), reps in reassignment.items()]})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    js = _loads(data)
    if not isinstance(js, dict):
        raise ZkDataError(f"bad reassignment json {data!r}")
    return {(str(e["topic"]), int(e["partition"])): [int(r) for r in e["replicas"]]
            for e in js.get("partitions", [])}


def encode_log_dir_event(broker_id: int) -> bytes:
    """A /log_dir_event_notification/log_dir_event_N znode: a broker's log dir failed (KIP-112)."""
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int | None:
    """The broker id of a log dir failure event, None for anything else."""
    js = _loads(data)
    if not isinstance(js, dict) or js.get("event") != LOG_DIR_FAILURE_EVENT:
        return None
    return int(js["broker"])


def encode_partition_set(partitions: Iterable[tuple[str, int]]) -> bytes:
    """The JSON of preferred-replica-election and ISR-change notification znodes (version 1)."""
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_partition_set(data: bytes) -> set[tuple[str, int]]:
    js = _loads(data)
    if not isinstance(js, dict):
        return set()
    return {(str(e["topic"]), int(e["partition"])) for e in js.get("partitions", [])}
