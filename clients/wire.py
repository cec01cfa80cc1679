"""A small synchronous Kafka client on top of the protocol package: admin calls, produce, fetch, groups.

Everything goes over the wire protocol, so it works against any Kafka-compatible cluster, Apache
Kafka included. One blocking socket per broker, one request in flight per socket (plus a pipelined
``send``/``receive`` pair for the load generators). Version negotiation: ApiVersions on every new
connection; each request uses the highest version both sides speak, capped where this client only
implements an older layout (e.g. Fetch by topic name, not topic id).

Errors: :class:`KafkaWireError` carries Kafka's error code and name; :class:`ConnectionFailed` says
which address could not be reached.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from protocol.api_versions import SUPPORTED, ApiKey
from protocol.errors import error_info
from protocol.messages import decode_response, encode_request, request_type
from protocol.records import CompressionType, NewRecord, Record, build_batch, iter_batches
from protocol.schema import message_type

CLIENT_SOFTWARE = ("kafkette-cli", "0.1.0")

# Highest version of each API this client builds requests for (the layout it knows).
_CAPS: dict[int, int] = {
    ApiKey.METADATA: 12,
    ApiKey.FETCH: 12,
    ApiKey.PRODUCE: 11,
    ApiKey.OFFSET_FETCH: 7,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.DELETE_TOPICS: 5,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.JOIN_GROUP: 7,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.HEARTBEAT: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 4,
    ApiKey.DESCRIBE_CLUSTER: 1,
}

EARLIEST, LATEST = -2, -1
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}


class WireError(Exception):
    """Anything the CLI reports as one line and a non-zero exit status."""


class UsageError(WireError):
    """Bad input found before anything was sent (the CLI exits with status 2)."""


class ConnectionFailed(WireError):
    pass


class KafkaWireError(WireError):
    def __init__(self, code: int, message: str | None = None, context: str = "") -> None:
        info = error_info(code)
        self.code = code
        self.name = info.name
        detail = message or info.message
        prefix = f"{context}: " if context else ""
        super().__init__(f"{prefix}{info.name}: {detail}")


def check(code: int, message: str | None = None, context: str = "") -> None:
    if code:
        raise KafkaWireError(code, message, context)


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise UsageError(f"invalid bootstrap server {item!r}: expected host:port")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise UsageError("no bootstrap servers given")
    return out


def load_properties(path: str | None) -> dict[str, str]:
    """A Java-style .properties file (key=value or key: value, # and ! comments)."""
    if not path:
        return {}
    props: dict[str, str] = {}
    try:
        text = open(path, encoding="utf-8").read()  # noqa: SIM115
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1:].strip()
                break
        else:
            props[line] = ""
    return props


# ------------------------------------------------------------------------------------------------
# One connection


class BrokerConnection:
    def __init__(self, host: str, port: int, *, client_id: str, timeout: float, node_id: int = -1) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        self.client_id = client_id
        self.timeout = timeout
        try:
            self.sock = socket.create_connection((host, port), timeout=min(timeout, 10.0))
        except OSError as e:
            raise ConnectionFailed(f"cannot connect to {host}:{port}: {e.strerror or e}") from None
        self.sock.settimeout(timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._cid = 0
        self._inflight: list[tuple[int, int, int]] = []  # (correlation id, api key, version)
        self.versions: dict[int, tuple[int, int]] = {}
        self._negotiate()

    def _negotiate(self) -> None:
        mt = request_type(ApiKey.API_VERSIONS)
        for version in (3, 0):
            body = mt(client_software_name=CLIENT_SOFTWARE[0], client_software_version=CLIENT_SOFTWARE[1])
            resp = self._call(ApiKey.API_VERSIONS, version, body)
            if resp.error_code == 35 and version > 0:
                continue
            check(resp.error_code, context=f"ApiVersions to {self.host}:{self.port}")
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return

    def version(self, api_key: int) -> int:
        ours = SUPPORTED.get(api_key)  # type: ignore[call-overload]
        theirs = self.versions.get(api_key)
        if ours is None or theirs is None:
            name = ours[2] if ours else str(api_key)
            raise WireError(f"UNSUPPORTED_VERSION: broker {self.host}:{self.port} does not support {name}")
        hi = min(ours[1], theirs[1], _CAPS.get(api_key, 1 << 15))
        lo = max(ours[0], theirs[0])
        if hi < lo:
            raise WireError(f"UNSUPPORTED_VERSION: no common version of {ours[2]} with {self.host}:{self.port}")
        return hi

    def send(self, api_key: int, version: int, body: Any, expect_response: bool = True) -> int:
        self._cid += 1
        frame = encode_request(api_key, version, self._cid, self.client_id, body)
        try:
            self.sock.sendall(frame)
        except OSError as e:
            self.close()
            raise ConnectionFailed(f"lost connection to {self.host}:{self.port}: {e}") from None
        if expect_response:
            self._inflight.append((self._cid, api_key, version))
        return self._cid

    def receive(self) -> Any:
        cid, api_key, version = self._inflight.pop(0)
        try:
            (size,) = struct.unpack(">i", self._recv_exact(4))
            frame = self._recv_exact(size)
        except TimeoutError:
            self.close()
            raise KafkaWireError(7, f"no answer from {self.host}:{self.port} within {self.timeout:.0f}s") from None
        except OSError as e:
            self.close()
            raise ConnectionFailed(f"lost connection to {self.host}:{self.port}: {e}") from None
        got, body = decode_response(api_key, version, frame)
        if got != cid:
            self.close()
            raise WireError(f"correlation id mismatch from {self.host}:{self.port}")
        return body

    def _call(self, api_key: int, version: int, body: Any) -> Any:
        self.send(api_key, version, body)
        return self.receive()

    def call(self, api_key: int, version: int | None = None, **fields: Any) -> Any:
        v = self.version(api_key) if version is None else version
        return self._call(api_key, v, request_type(api_key)(**fields))

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


# ------------------------------------------------------------------------------------------------
# Cluster metadata


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline: list[int] = field(default_factory=list)
    leader_epoch: int = -1
    error_code: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: str | None
    internal: bool
    partitions: dict[int, PartitionInfo]
    error_code: int = 0


@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass
class ClusterInfo:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo]


class WireClient:
    """Bootstrap, metadata and request routing (to leaders, coordinators, the controller)."""

    def __init__(self, bootstrap: str, *, config: dict[str, str] | None = None, client_id: str | None = None,
                 timeout: float | None = None) -> None:
        self.config = dict(config or {})
        proto = self.config.get("security.protocol", "PLAINTEXT").upper()
        if proto != "PLAINTEXT":
            raise UsageError(f"security.protocol={proto} is not supported by this client (PLAINTEXT only)")
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id or self.config.get("client.id", "kafkette-cli")
        self.timeout = timeout if timeout is not None else int(self.config.get("request.timeout.ms", "30000")) / 1000
        self._conns: dict[int, BrokerConnection] = {}
        self._boot: BrokerConnection | None = None
        self.cluster: ClusterInfo | None = None

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()
        if self._boot is not None:
            self._boot.close()
            self._boot = None

    # -- connections ------------------------------------------------------------------------------

    def any_connection(self) -> BrokerConnection:
        if self._conns:
            return next(iter(self._conns.values()))
        if self._boot is not None:
            return self._boot
        errors = []
        for host, port in self.bootstrap:
            try:
                self._boot = BrokerConnection(host, port, client_id=self.client_id, timeout=self.timeout)
                return self._boot
            except ConnectionFailed as e:
                errors.append(str(e))
        raise ConnectionFailed("no bootstrap server is reachable (" + "; ".join(errors) + ")")

    def connection(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is not None:
            return conn
        if self.cluster is None or node_id not in self.cluster.brokers:
            self.refresh()
        assert self.cluster is not None
        b = self.cluster.brokers.get(node_id)
        if b is None:
            raise KafkaWireError(8, f"broker {node_id} is not in the cluster metadata")
        conn = BrokerConnection(b.host, b.port, client_id=self.client_id, timeout=self.timeout, node_id=node_id)
        self._conns[node_id] = conn
        return conn

    def drop(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close()

    def call(self, api_key: int, node: int | None = None, **fields: Any) -> Any:
        conn = self.any_connection() if node is None else self.connection(node)
        try:
            return conn.call(api_key, **fields)
        except ConnectionFailed:
            if node is not None:
                self.drop(node)
            elif conn is self._boot:
                self._boot = None
            raise

    def version(self, api_key: int, node: int | None = None) -> int:
        conn = self.any_connection() if node is None else self.connection(node)
        return conn.version(api_key)

    # -- metadata ---------------------------------------------------------------------------------

    def refresh(self, topics: Iterable[str] | None = None, node: int | None = None) -> ClusterInfo:
        """Metadata (of ``topics``, None for all) from any broker, or from broker ``node``."""
        mt = request_type(ApiKey.METADATA)
        wanted = None if topics is None else [mt.MetadataRequestTopic(name=t) for t in topics]
        r = self.call(ApiKey.METADATA, node=node, topics=wanted, allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False)
        brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in r.brokers}
        out: dict[str, TopicInfo] = {}
        for t in r.topics:
            parts = {p.partition_index: PartitionInfo(p.partition_index, p.leader_id, list(p.replica_nodes),
                                                      list(p.isr_nodes), list(p.offline_replicas or []),
                                                      p.leader_epoch, p.error_code)
                     for p in t.partitions}
            tid = None
            if getattr(t, "topic_id", None) is not None and t.topic_id.int:
                tid = _topic_id_str(t.topic_id)
            out[t.name] = TopicInfo(t.name, tid, bool(t.is_internal), parts, t.error_code)
        info = ClusterInfo(r.cluster_id, r.controller_id, brokers, out)
        if topics is None or self.cluster is None:
            self.cluster = info
        else:
            self.cluster.brokers = brokers
            self.cluster.controller_id = r.controller_id
            self.cluster.topics.update(out)
        # Forget connections to brokers that left.
        for nid in list(self._conns):
            if nid not in brokers:
                self.drop(nid)
        return info

    def topics(self, names: Iterable[str] | None = None) -> dict[str, TopicInfo]:
        return self.refresh(names).topics

    def topic(self, name: str) -> TopicInfo:
        t = self.topics([name]).get(name)
        if t is None:
            raise KafkaWireError(3, f"Topic '{name}' does not exist.")
        check(t.error_code, f"Topic '{name}' does not exist." if t.error_code == 3 else None)
        return t

    def leader_of(self, topic: str, partition: int, retries: int = 10) -> int:
        for attempt in range(retries):
            t = self.cluster.topics.get(topic) if self.cluster else None
            p = t.partitions.get(partition) if t else None
            if p is not None and p.leader >= 0:
                return p.leader
            if attempt:
                time.sleep(0.2)
            self.refresh([topic])
            t = self.cluster.topics.get(topic) if self.cluster else None
            if t is not None and t.error_code == 3:
                raise KafkaWireError(3, f"Topic '{topic}' does not exist.")
            if t is not None and partition not in t.partitions:
                raise KafkaWireError(3, f"Partition {topic}-{partition} does not exist.")
        raise KafkaWireError(5, f"partition {topic}-{partition} has no leader")

    def controller(self) -> int:
        info = self.refresh([])
        if info.controller_id < 0:
            raise KafkaWireError(41, "the cluster has no active controller")
        return info.controller_id

    def call_controller(self, api_key: int, **fields: Any) -> Any:
        """Send to the active controller, retrying once if it moved (NOT_CONTROLLER)."""
        for attempt in range(5):
            node = self.controller()
            r = self.call(api_key, node=node, **fields)
            if getattr(r, "error_code", 0) == 41 and attempt < 4:
                time.sleep(0.5)
                continue
            return r
        return r

    def coordinator(self, group: str) -> int:
        for attempt in range(20):
            r = self.call(ApiKey.FIND_COORDINATOR, key=group, key_type=0)
            if r.error_code in (14, 15) and attempt < 19:  # loading / not available yet
                time.sleep(0.25)
                continue
            check(r.error_code, r.error_message, f"FindCoordinator for group '{group}'")
            if self.cluster is None or r.node_id not in self.cluster.brokers:
                self.refresh([])
            return r.node_id
        raise AssertionError("unreachable")

    def call_coordinator(self, group: str, api_key: int, **fields: Any) -> Any:
        for attempt in range(10):
            node = self.coordinator(group)
            r = self.call(api_key, node=node, **fields)
            code = getattr(r, "error_code", 0)
            if code in (14, 15, 16) and attempt < 9:
                time.sleep(0.3)
                continue
            return r
        return r

    # -- topics -----------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, assignment: dict[int, list[int]] | None = None,
                     validate_only: bool = False, timeout_ms: int = 30000) -> None:
        mt = request_type(ApiKey.CREATE_TOPICS)
        topic = mt.CreatableTopic(
            name=name, num_partitions=-1 if assignment else partitions,
            replication_factor=-1 if assignment else replication_factor,
            assignments=[mt.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                         for p, b in sorted((assignment or {}).items())],
            configs=[mt.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        r = self.call_controller(ApiKey.CREATE_TOPICS, topics=[topic], timeout_ms=timeout_ms,
                                 validate_only=validate_only)
        for t in r.topics:
            check(t.error_code, t.error_message)

    def delete_topics(self, names: list[str], timeout_ms: int = 30000) -> dict[str, tuple[int, str | None]]:
        r = self.call_controller(ApiKey.DELETE_TOPICS, topic_names=names, timeout_ms=timeout_ms)
        return {t.name: (t.error_code, getattr(t, "error_message", None)) for t in r.responses}

    def create_partitions(self, name: str, count: int, assignment: list[list[int]] | None = None,
                          validate_only: bool = False, timeout_ms: int = 30000) -> None:
        mt = request_type(ApiKey.CREATE_PARTITIONS)
        topic = mt.CreatePartitionsTopic(
            name=name, count=count,
            assignments=None if assignment is None else [mt.CreatePartitionsAssignment(broker_ids=b)
                                                         for b in assignment])
        r = self.call_controller(ApiKey.CREATE_PARTITIONS, topics=[topic], timeout_ms=timeout_ms,
                                 validate_only=validate_only)
        for t in r.results:
            check(t.error_code, t.error_message)

    # -- configs ----------------------------------------------------------------------------------

    def describe_configs(self, resource_type: int, name: str, keys: list[str] | None = None,
                         node: int | None = None) -> list[Any]:
        mt = request_type(ApiKey.DESCRIBE_CONFIGS)
        if node is None and resource_type == RESOURCE_BROKER and name:
            node = int(name)
        elif node is None and resource_type == RESOURCE_TOPIC:
            node = self.controller()  # where topic config changes are sent: reads see our own writes
        r = self.call(ApiKey.DESCRIBE_CONFIGS, node=node, resources=[
            mt.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                       configuration_keys=keys)],
            include_synonyms=True, include_documentation=False)
        res = r.results[0]
        check(res.error_code, res.error_message)
        return list(res.configs)

    def incremental_alter_configs(self, resource_type: int, name: str, set_: dict[str, str],
                                  delete: list[str], validate_only: bool = False) -> None:
        mt = request_type(ApiKey.INCREMENTAL_ALTER_CONFIGS)
        ops = [mt.AlterableConfig(name=k, config_operation=0, value=v) for k, v in set_.items()]
        ops += [mt.AlterableConfig(name=k, config_operation=1, value=None) for k in delete]
        # A broker's own configs go to that broker; topic configs and the cluster-wide broker default
        # to the controller (which DescribeConfigs also asks, so a change is seen at once).
        node = int(name) if resource_type == RESOURCE_BROKER and name else self.controller()
        r = self.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, node=node, resources=[
            mt.AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=ops)],
            validate_only=validate_only)
        res = r.responses[0]
        check(res.error_code, res.error_message)

    # -- offsets ----------------------------------------------------------------------------------

    def list_offsets(self, partitions: Iterable[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        """Offset per partition for ``timestamp`` (EARLIEST, LATEST or ms since the epoch; -1 if none)."""
        by_leader: dict[int, dict[str, list[int]]] = {}
        for t, p in partitions:
            by_leader.setdefault(self.leader_of(t, p), {}).setdefault(t, []).append(p)
        mt = request_type(ApiKey.LIST_OFFSETS)
        out: dict[tuple[str, int], int] = {}
        for leader, topics in by_leader.items():
            r = self.call(ApiKey.LIST_OFFSETS, node=leader, replica_id=-1, isolation_level=0, topics=[
                mt.ListOffsetsTopic(name=t, partitions=[
                    mt.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                    for p in ps]) for t, ps in topics.items()])
            for t in r.topics:
                for p in t.partitions:
                    check(p.error_code, context=f"ListOffsets {t.name}-{p.partition_index}")
                    out[(t.name, p.partition_index)] = p.offset
        return out

    def delete_records(self, offsets: dict[tuple[str, int], int], timeout_ms: int = 30000
                       ) -> dict[tuple[str, int], tuple[int, int]]:
        """(error code, low watermark) per partition."""
        by_leader: dict[int, dict[str, list[tuple[int, int]]]] = {}
        for (t, p), off in offsets.items():
            by_leader.setdefault(self.leader_of(t, p), {}).setdefault(t, []).append((p, off))
        mt = request_type(ApiKey.DELETE_RECORDS)
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for leader, topics in by_leader.items():
            r = self.call(ApiKey.DELETE_RECORDS, node=leader, timeout_ms=timeout_ms, topics=[
                mt.DeleteRecordsTopic(name=t, partitions=[
                    mt.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in ps])
                for t, ps in topics.items()])
            for t in r.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = (p.error_code, p.low_watermark)
        return out

    # -- groups -----------------------------------------------------------------------------------

    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) for every group on every broker."""
        self.refresh([])
        assert self.cluster is not None
        out = []
        for node in sorted(self.cluster.brokers):
            kwargs: dict[str, Any] = {}
            if self.version(ApiKey.LIST_GROUPS, node) >= 4:
                kwargs["states_filter"] = []
            r = self.call(ApiKey.LIST_GROUPS, node=node, **kwargs)
            check(r.error_code, context=f"ListGroups on broker {node}")
            for g in r.groups:
                out.append((g.group_id, g.protocol_type, getattr(g, "group_state", "") or ""))
        return sorted(out)

    def describe_group(self, group: str) -> Any:
        r = self.call_coordinator(group, ApiKey.DESCRIBE_GROUPS, groups=[group],
                                  include_authorized_operations=False)
        g = r.groups[0]
        check(g.error_code, getattr(g, "error_message", None), f"group '{group}'")
        return g

    def committed_offsets(self, group: str, partitions: list[tuple[str, int]] | None = None
                          ) -> dict[tuple[str, int], int]:
        mt = request_type(ApiKey.OFFSET_FETCH)
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [mt.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        r = self.call_coordinator(group, ApiKey.OFFSET_FETCH, group_id=group, topics=topics, require_stable=False)
        check(r.error_code, context=f"OffsetFetch for group '{group}'")
        out = {}
        for t in r.topics:
            for p in t.partitions:
                check(p.error_code, context=f"OffsetFetch {t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return out

    def commit_offsets(self, group: str, offsets: dict[tuple[str, int], int], *, generation: int = -1,
                       member_id: str = "", instance_id: str | None = None) -> None:
        mt = request_type(ApiKey.OFFSET_COMMIT)
        by_topic: dict[str, list[Any]] = {}
        for (t, p), off in sorted(offsets.items()):
            by_topic.setdefault(t, []).append(mt.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=off, committed_leader_epoch=-1, committed_metadata=""))
        r = self.call_coordinator(group, ApiKey.OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=generation,
                                  member_id=member_id, group_instance_id=instance_id, retention_time_ms=-1,
                                  topics=[mt.OffsetCommitRequestTopic(name=t, partitions=ps)
                                          for t, ps in by_topic.items()])
        for t in r.topics:
            for p in t.partitions:
                check(p.error_code, context=f"OffsetCommit {t.name}-{p.partition_index} for group '{group}'")

    def delete_groups(self, groups: list[str]) -> dict[str, int]:
        out = {}
        for g in groups:
            r = self.call_coordinator(g, ApiKey.DELETE_GROUPS, groups_names=[g])
            out[g] = r.results[0].error_code
        return out

    def delete_offsets(self, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        mt = request_type(ApiKey.OFFSET_DELETE)
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        r = self.call_coordinator(group, ApiKey.OFFSET_DELETE, group_id=group, topics=[
            mt.OffsetDeleteRequestTopic(name=t, partitions=[mt.OffsetDeleteRequestPartition(partition_index=p)
                                                            for p in ps])
            for t, ps in by_topic.items()])
        check(r.error_code, context=f"group '{group}'")
        return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}

    # -- controller operations ---------------------------------------------------------------------

    def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None,
                      timeout_ms: int = 30000) -> dict[tuple[str, int], tuple[int, str | None]]:
        mt = request_type(ApiKey.ELECT_LEADERS)
        tps = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            tps = [mt.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]
        r = self.call_controller(ApiKey.ELECT_LEADERS, election_type=election_type, topic_partitions=tps,
                                 timeout_ms=timeout_ms)
        check(getattr(r, "error_code", 0))
        return {(t.topic, p.partition_id): (p.error_code, p.error_message)
                for t in r.replica_election_results for p in t.partition_result}

    def alter_reassignments(self, targets: dict[tuple[str, int], list[int] | None], timeout_ms: int = 30000
                            ) -> dict[tuple[str, int], tuple[int, str | None]]:
        mt = request_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
        by_topic: dict[str, list[Any]] = {}
        for (t, p), replicas in sorted(targets.items()):
            by_topic.setdefault(t, []).append(mt.ReassignablePartition(partition_index=p, replicas=replicas))
        r = self.call_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, timeout_ms=timeout_ms,
                                 allow_replication_factor_change=True,
                                 topics=[mt.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        check(r.error_code, r.error_message)
        return {(t.name, p.partition_index): (p.error_code, p.error_message)
                for t in r.responses for p in t.partitions}

    def list_reassignments(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        r = self.call_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, timeout_ms=30000, topics=None)
        check(r.error_code, r.error_message)
        return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in r.topics for p in t.partitions}

    def describe_cluster(self) -> Any:
        r = self.call(ApiKey.DESCRIBE_CLUSTER, include_cluster_authorized_operations=False, endpoint_type=1)
        check(r.error_code, r.error_message)
        return r

    def describe_log_dirs(self, node: int) -> Any:
        return self.call(ApiKey.DESCRIBE_LOG_DIRS, node=node, topics=None)

    # -- data -------------------------------------------------------------------------------------

    def produce(self, batches: dict[tuple[str, int], bytes], acks: int = -1, timeout_ms: int = 30000
                ) -> dict[tuple[str, int], tuple[int, int, str | None]]:
        """One batch per partition, sent to each leader; (error code, base offset, message) per partition."""
        out: dict[tuple[str, int], tuple[int, int, str | None]] = {}
        pending = dict(batches)
        for attempt in range(6):
            sent = self._send_produce(pending, acks, timeout_ms)
            retry: dict[tuple[str, int], bytes] = {}
            for conn in sent:
                if acks == 0:
                    continue
                r = conn.receive()
                for t in r.responses:
                    for p in t.partition_responses:
                        tp = (t.name, p.index)
                        if p.error_code in (3, 5, 6) and attempt < 5:  # metadata moved: retry
                            retry[tp] = pending[tp]
                        else:
                            out[tp] = (p.error_code, p.base_offset, getattr(p, "error_message", None))
            if acks == 0:
                return {tp: (0, -1, None) for tp in pending}
            if not retry:
                break
            time.sleep(0.2 * (attempt + 1))
            self.refresh(list({t for t, _ in retry}))
            pending = retry
        return out

    def _send_produce(self, batches: dict[tuple[str, int], bytes], acks: int, timeout_ms: int
                      ) -> list[BrokerConnection]:
        by_leader: dict[int, dict[str, list[tuple[int, bytes]]]] = {}
        for (t, p), data in batches.items():
            by_leader.setdefault(self.leader_of(t, p), {}).setdefault(t, []).append((p, data))
        mt = request_type(ApiKey.PRODUCE)
        sent = []
        for leader, topics in by_leader.items():
            conn = self.connection(leader)
            body = mt(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
                mt.TopicProduceData(name=t, partition_data=[mt.PartitionProduceData(index=p, records=d)
                                                            for p, d in ps])
                for t, ps in topics.items()])
            conn.send(ApiKey.PRODUCE, conn.version(ApiKey.PRODUCE), body, expect_response=acks != 0)
            sent.append(conn)
        return sent

    def fetch(self, positions: dict[tuple[str, int], int], *, max_wait_ms: int = 500, max_bytes: int = 8 << 20,
              partition_max_bytes: int = 1 << 20) -> Iterator[tuple[tuple[str, int], int, Any]]:
        """One fetch round: yields (partition, error code, partition data) per partition asked for."""
        by_leader: dict[int, dict[str, list[tuple[int, int]]]] = {}
        for (t, p), off in positions.items():
            by_leader.setdefault(self.leader_of(t, p), {}).setdefault(t, []).append((p, off))
        mt = request_type(ApiKey.FETCH)
        sent = []
        for leader, topics in by_leader.items():
            conn = self.connection(leader)
            body = mt(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                      session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                          mt.FetchTopic(topic=t, partitions=[
                              mt.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=off,
                                                last_fetched_epoch=-1, log_start_offset=-1,
                                                partition_max_bytes=partition_max_bytes) for p, off in ps])
                          for t, ps in topics.items()])
            conn.send(ApiKey.FETCH, conn.version(ApiKey.FETCH), body)
            sent.append(conn)
        stale = False
        for conn in sent:
            r = conn.receive()
            check(getattr(r, "error_code", 0), context="Fetch")
            for t in r.responses:
                for p in t.partitions:
                    if p.error_code in (3, 5, 6):
                        stale = True
                    yield (t.topic, p.partition_index), p.error_code, p
        if stale:
            self.refresh([t for t, _ in positions])


def _topic_id_str(u: uuid.UUID) -> str:
    """Kafka prints topic ids as URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def records_of(data: Any, from_offset: int) -> Iterator[tuple[Any, Record]]:
    """Records at or after ``from_offset`` in a fetch response's records, skipping control batches."""
    if not data:
        return
    buf = bytes(data)
    for batch in iter_batches(buf, allow_partial_tail=True):
        if batch.next_offset <= from_offset:
            continue
        if batch.is_control:
            continue
        for rec in batch.records():
            if rec.offset >= from_offset:
                yield batch, rec


def next_offset_after(data: Any, from_offset: int) -> int:
    """The next fetch position after the whole batches in ``data`` (control batches included)."""
    nxt = from_offset
    if data:
        for batch in iter_batches(bytes(data), allow_partial_tail=True):
            nxt = max(nxt, batch.next_offset)
    return nxt


# ------------------------------------------------------------------------------------------------
# Partitioning (Kafka's default: murmur2 of the key; no key: sticky per batch)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c), as a signed 32-bit int."""
    length = len(data)
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[i * 4:i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = n4 * 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


COMPRESSION = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
               "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}


def parse_acks(value: str) -> int:
    v = value.strip().lower()
    if v == "all":
        return -1
    try:
        acks = int(v)
    except ValueError:
        raise UsageError(f"invalid acks {value!r}: expected all, -1, 0 or 1") from None
    if acks not in (-1, 0, 1):
        raise UsageError(f"invalid acks {value!r}: expected all, -1, 0 or 1")
    return acks


class Producer:
    """Buffers records per partition and sends one batch per partition per request round."""

    def __init__(self, client: WireClient, *, acks: int = -1, compression: str = "none",
                 batch_size: int = 16384, linger_ms: int = 0, request_timeout_ms: int = 30000) -> None:
        if compression not in COMPRESSION:
            raise WireError(f"unknown compression type {compression!r} (none, gzip, snappy, lz4, zstd)")
        self.client = client
        self.acks = acks
        self.compression = COMPRESSION[compression]
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.timeout_ms = request_timeout_ms
        self._buf: dict[tuple[str, int], list[NewRecord]] = {}
        self._buf_bytes = 0
        self._first_at: float | None = None
        self._sticky: dict[str, int] = {}
        self.sent = 0

    def partition(self, topic: str, key: bytes | None) -> int:
        t = self.client.cluster.topics.get(topic) if self.client.cluster else None
        if t is None:
            t = self.client.topic(topic)
        n = len(t.partitions)
        if key is not None:
            return partition_for_key(key, n)
        p = self._sticky.get(topic)
        if p is None:
            p = self._sticky[topic] = random.randrange(n)
        return p

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None,
             headers: list[tuple[str, bytes | None]] | None = None, timestamp: int | None = None) -> None:
        if partition is None:
            partition = self.partition(topic, key)
        self._buf.setdefault((topic, partition), []).append(NewRecord(key, value, timestamp, headers or ()))
        self._buf_bytes += len(value or b"") + len(key or b"") + 16
        if self._first_at is None:
            self._first_at = time.monotonic()
        if self._buf_bytes >= self.batch_size or (self._first_at and
                                                  time.monotonic() - self._first_at >= self.linger_s):
            self.flush()

    def flush(self) -> dict[tuple[str, int], tuple[int, int, str | None]]:
        if not self._buf:
            return {}
        batches = {tp: build_batch(recs, compression=self.compression) for tp, recs in self._buf.items()}
        counts = {tp: len(recs) for tp, recs in self._buf.items()}
        self._buf.clear()
        self._buf_bytes = 0
        self._first_at = None
        self._sticky.clear()
        results = self.client.produce(batches, self.acks, self.timeout_ms)
        for tp, (code, _off, msg) in results.items():
            check(code, msg, f"produce to {tp[0]}-{tp[1]}")
            self.sent += counts[tp]
        return results


# ------------------------------------------------------------------------------------------------
# A group member (classic protocol, consumer protocol type, range assignment)


def encode_subscription(topics: list[str]) -> bytes:
    mt = message_type("ConsumerProtocolSubscription")
    return struct.pack(">h", 0) + mt.encode(mt(topics=sorted(topics), user_data=None), 0)


def decode_subscription(data: bytes | None) -> list[str]:
    if not data or len(data) < 2:
        return []
    mt = message_type("ConsumerProtocolSubscription")
    (v,) = struct.unpack_from(">h", data)
    try:
        sub, _ = mt.decode(memoryview(data), min(max(v, 0), 3), 2, exact=False)
    except Exception:
        return []
    return list(sub.topics)


def encode_assignment(parts: dict[str, list[int]]) -> bytes:
    mt = message_type("ConsumerProtocolAssignment")
    body = mt(assigned_partitions=[mt.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(parts.items())],
              user_data=None)
    return struct.pack(">h", 0) + mt.encode(body, 0)


def decode_assignment(data: bytes | None) -> dict[str, list[int]]:
    if not data or len(data) < 2:
        return {}
    mt = message_type("ConsumerProtocolAssignment")
    (v,) = struct.unpack_from(">h", data)
    try:
        a, _ = mt.decode(memoryview(data), min(max(v, 0), 3), 2, exact=False)
    except Exception:
        return {}
    return {tp.topic: list(tp.partitions) for tp in a.assigned_partitions}


def range_assign(members: dict[str, list[str]], partitions: dict[str, int]) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, consecutive partition ranges to members sorted by id."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    topics = sorted({t for ts in members.values() for t in ts})
    for t in topics:
        subs = sorted(m for m, ts in members.items() if t in ts)
        n = partitions.get(t, 0)
        if not subs or not n:
            continue
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = per + (1 if i < extra else 0)
            if count:
                out[m][t] = list(range(start, start + count))
            start += count
    return out


class GroupMember:
    """Joins a consumer group, keeps the membership alive with heartbeats and commits offsets."""

    def __init__(self, client: WireClient, group: str, topics: list[str], *, session_timeout_ms: int = 10000,
                 rebalance_timeout_ms: int = 30000, heartbeat_interval_ms: int = 3000) -> None:
        self.client = client
        self.group = group
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.member_id = ""
        self.generation = -1
        self.assignment: dict[str, list[int]] = {}
        self._last_heartbeat = 0.0

    def join(self) -> dict[str, list[int]]:
        for _ in range(20):
            r = self.client.call_coordinator(
                self.group, ApiKey.JOIN_GROUP, group_id=self.group, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id, group_instance_id=None,
                protocol_type="consumer", reason=None,
                protocols=[request_type(ApiKey.JOIN_GROUP).JoinGroupRequestProtocol(
                    name="range", metadata=encode_subscription(self.topics))])
            if r.error_code == 79:  # MEMBER_ID_REQUIRED
                self.member_id = r.member_id
                continue
            if r.error_code in (25, 22):  # unknown member / illegal generation: start over
                self.member_id = ""
                continue
            if r.error_code == 27:
                continue
            check(r.error_code, context=f"JoinGroup '{self.group}'")
            self.member_id = r.member_id
            self.generation = r.generation_id
            assignments = []
            if r.leader == r.member_id:
                members = {m.member_id: decode_subscription(bytes(m.metadata)) for m in r.members}
                counts = {t: len(info.partitions) for t, info in
                          self.client.topics(sorted({t for ts in members.values() for t in ts})).items()
                          if info.error_code == 0}
                plan = range_assign(members, counts)
                mt = request_type(ApiKey.SYNC_GROUP)
                assignments = [mt.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(a))
                               for m, a in plan.items()]
            s = self.client.call_coordinator(
                self.group, ApiKey.SYNC_GROUP, group_id=self.group, generation_id=self.generation,
                member_id=self.member_id, group_instance_id=None, protocol_type="consumer", protocol_name="range",
                assignments=assignments)
            if s.error_code in (27, 22, 25):
                if s.error_code == 25:
                    self.member_id = ""
                continue
            check(s.error_code, context=f"SyncGroup '{self.group}'")
            self.assignment = decode_assignment(bytes(s.assignment))
            self._last_heartbeat = time.monotonic()
            return self.assignment
        raise WireError(f"could not join group '{self.group}' (it keeps rebalancing)")

    def heartbeat(self, force: bool = False) -> bool:
        """Heartbeat when due; False when the group rebalanced (call join again)."""
        if not force and time.monotonic() - self._last_heartbeat < self.heartbeat_s:
            return True
        r = self.client.call_coordinator(self.group, ApiKey.HEARTBEAT, group_id=self.group,
                                         generation_id=self.generation, member_id=self.member_id,
                                         group_instance_id=None)
        self._last_heartbeat = time.monotonic()
        if r.error_code in (27, 22, 25):
            if r.error_code == 25:
                self.member_id = ""
            return False
        check(r.error_code, context=f"Heartbeat '{self.group}'")
        return True

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        if offsets:
            self.client.commit_offsets(self.group, offsets, generation=self.generation, member_id=self.member_id)

    def leave(self) -> None:
        if not self.member_id:
            return
        mt = request_type(ApiKey.LEAVE_GROUP)
        with contextlib.suppress(WireError):
            self.client.call_coordinator(self.group, ApiKey.LEAVE_GROUP, group_id=self.group,
                                         members=[mt.MemberIdentity(member_id=self.member_id, group_instance_id=None,
                                                                    reason="the consumer is closing")])
        self.member_id = ""
