"""The CLI's cluster client: bootstrap, metadata, request routing (leaders, coordinators, the
controller) and the admin calls the ``kafkette`` subcommands make.

Every request goes over ``clients.connection.BrokerConnection`` (the blocking wrapper of the one
client state machine), one connection per broker, opened on demand and re-opened after a failure
once the reconnect backoff (``reconnect.backoff.ms`` doubling to ``reconnect.backoff.max.ms``) has
passed.

Why ours and not kafka-python's ``KafkaAdminClient``: it brings its own network client (connection
state, version probing, a selector loop), so the CLI would have two stacks with different retry,
timeout and version rules, and it does not cover all the calls the CLI makes with Kafka's error
texts (reassignments, log dirs, DeleteRecords, IncrementalAlterConfigs on broker defaults). Each
admin call here is a request and a check of Kafka's error codes; the protocol package already
builds and parses every message.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from clients.client_config import client_security, parse_bootstrap
from clients.connection import (
    BrokerConnection,
    ConnectionFailed,
    KafkaWireError,
    WireError,
    check,
)
from protocol.api_versions import ApiKey
from protocol.messages import request_type

__all__ = ["CONFIG_SOURCES", "EARLIEST", "ELECTION_PREFERRED", "ELECTION_UNCLEAN", "ISOLATION_LEVELS", "LATEST",
           "READ_COMMITTED", "READ_UNCOMMITTED", "RESOURCE_BROKER", "RESOURCE_TOPIC", "BrokerInfo", "ClusterInfo",
           "PartitionInfo", "TopicInfo", "WireClient"]

EARLIEST, LATEST = -2, -1
# The isolation_level field of Fetch and ListOffsets requests, by the name of Kafka's isolation.level config.
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}

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


def _says_not_controller(body: Any, depth: int = 0) -> bool:
    """Whether a response, or an entry of its result lists (two levels deep), is NOT_CONTROLLER (41)."""
    if getattr(body, "error_code", 0) == 41:
        return True
    if depth >= 2:
        return False
    for name in getattr(body, "__slots__", ()):
        value = getattr(body, name, None)
        if isinstance(value, list) and any(_says_not_controller(v, depth + 1) for v in value):
            return True
    return False


class WireClient:
    """Bootstrap, metadata and request routing (to leaders, coordinators, the controller)."""

    def __init__(self, bootstrap: str, *, config: dict[str, str] | None = None, client_id: str | None = None,
                 timeout: float | None = None) -> None:
        self.config = dict(config or {})
        self.security = client_security(self.config)  # security.protocol, ssl.*, sasl.*
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id or self.config.get("client.id", "kafkette-cli")
        self.timeout = timeout if timeout is not None else int(self.config.get("request.timeout.ms", "30000")) / 1000
        self.connect_timeout = int(self.config.get("socket.connection.setup.timeout.ms", "10000")) / 1000
        self.reconnect_backoff = int(self.config.get("reconnect.backoff.ms", "50")) / 1000
        self.reconnect_backoff_max = int(self.config.get("reconnect.backoff.max.ms", "1000")) / 1000
        self._conns: dict[int, BrokerConnection] = {}
        self._boot: BrokerConnection | None = None
        self._failures: dict[tuple[str, int], tuple[int, float]] = {}
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

    def _open(self, host: str, port: int, node_id: int = -1) -> BrokerConnection:
        """A new connection, after the reconnect backoff if the last attempt at this address failed."""
        key = (host, port)
        failures, next_at = self._failures.get(key, (0, 0.0))
        wait = next_at - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        try:
            conn = BrokerConnection(host, port, client_id=self.client_id, timeout=self.timeout, node_id=node_id,
                                    connect_timeout=self.connect_timeout, security=self.security)
        except ConnectionFailed:
            backoff = min(self.reconnect_backoff * 2 ** failures, self.reconnect_backoff_max)
            self._failures[key] = (failures + 1, time.monotonic() + backoff * (0.8 + 0.4 * random.random()))
            raise
        self._failures.pop(key, None)
        return conn

    def any_connection(self) -> BrokerConnection:
        for conn in list(self._conns.values()):
            if not conn.sm.closed:
                return conn
            self.drop(conn.node_id)
        if self._boot is not None and not self._boot.sm.closed:
            return self._boot
        self._boot = None
        errors = []
        candidates = [(b.host, b.port) for b in self.cluster.brokers.values()] if self.cluster else []
        candidates += [a for a in self.bootstrap if a not in candidates]
        for host, port in candidates:
            try:
                self._boot = self._open(host, port)
                return self._boot
            except ConnectionFailed as e:
                errors.append(str(e))
        raise ConnectionFailed("no bootstrap server is reachable (" + "; ".join(errors) + ")")

    def connection(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is not None and not conn.sm.closed:
            return conn
        if self.cluster is None or node_id not in self.cluster.brokers:
            self.refresh()
        assert self.cluster is not None
        b = self.cluster.brokers.get(node_id)
        if b is None:
            raise KafkaWireError(8, f"broker {node_id} is not in the cluster metadata")
        conn = self._open(b.host, b.port, node_id)
        self._conns[node_id] = conn
        return conn

    def drop(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close()

    def _forget(self, conn: BrokerConnection) -> None:
        conn.close()
        if self._conns.get(conn.node_id) is conn:
            del self._conns[conn.node_id]
        if conn is self._boot:
            self._boot = None

    def call(self, api_key: int, node: int | None = None, **fields: Any) -> Any:
        """One request to broker ``node``, or to any broker (trying the next one if it is unreachable)."""
        attempts = 1 if node is not None else 1 + len(self.bootstrap) + (len(self.cluster.brokers) if self.cluster
                                                                         else 0)
        for attempt in range(attempts):
            conn = self.any_connection() if node is None else self.connection(node)
            try:
                return conn.call(api_key, **fields)
            except WireError:
                if conn.sm.closed:  # lost, timed out, or out of step: never reuse it
                    self._forget(conn)
                    if node is None and attempt + 1 < attempts:
                        continue
                raise
        raise AssertionError("unreachable")

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
        """Send to the active controller, again (with fresh metadata) while the answer says NOT_CONTROLLER:
        at the top level, or per topic, partition or user as CreateTopics, DeleteTopics, CreatePartitions,
        ElectLeaders and AlterUserScramCredentials say it. The controller moved (the Java admin client
        retries these too)."""
        for attempt in range(5):
            node = self.controller()
            r = self.call(api_key, node=node, **fields)
            if _says_not_controller(r) and attempt < 4:
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

    def list_offsets(self, partitions: Iterable[tuple[str, int]], timestamp: int, *,
                     isolation_level: int = READ_UNCOMMITTED) -> dict[tuple[str, int], int]:
        """Offset per partition for ``timestamp`` (EARLIEST, LATEST or ms since the epoch; -1 if none).

        LATEST is the high watermark, or with READ_COMMITTED the last stable offset (the first offset of
        the oldest open transaction), where a read_committed consumer's reading ends."""
        by_leader: dict[int, dict[str, list[int]]] = {}
        for t, p in partitions:
            by_leader.setdefault(self.leader_of(t, p), {}).setdefault(t, []).append(p)
        mt = request_type(ApiKey.LIST_OFFSETS)
        out: dict[tuple[str, int], int] = {}
        for leader, topics in by_leader.items():
            r = self.call(ApiKey.LIST_OFFSETS, node=leader, replica_id=-1, isolation_level=isolation_level, topics=[
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

    def alter_replica_log_dirs(self, node: int, dirs: dict[tuple[str, int], str]) -> dict[tuple[str, int], int]:
        """Ask broker ``node`` to move its replicas of these partitions to these log dirs (KIP-113);
        the error code of each partition."""
        mt = request_type(ApiKey.ALTER_REPLICA_LOG_DIRS)
        by_dir: dict[str, dict[str, list[int]]] = {}
        for (t, p), d in sorted(dirs.items()):
            by_dir.setdefault(d, {}).setdefault(t, []).append(p)
        r = self.call(ApiKey.ALTER_REPLICA_LOG_DIRS, node=node, dirs=[
            mt.AlterReplicaLogDir(path=d, topics=[mt.AlterReplicaLogDirTopic(name=t, partitions=ps)
                                                  for t, ps in topics.items()])
            for d, topics in by_dir.items()])
        return {(t.topic_name, p.partition_index): p.error_code for t in r.results for p in t.partitions}

    # -- data -------------------------------------------------------------------------------------

    def fetch(self, positions: dict[tuple[str, int], int], *, max_wait_ms: int = 500, max_bytes: int = 8 << 20,
              partition_max_bytes: int = 1 << 20,
              isolation_level: int = READ_UNCOMMITTED) -> Iterator[tuple[tuple[str, int], int, Any]]:
        """One fetch round: yields (partition, error code, partition data) per partition asked for.

        With READ_COMMITTED the leader returns records up to the last stable offset only, and each
        partition's data lists the aborted transactions among them (``aborted_transactions``), which the
        reader must leave out (``clients.consumer_records.records_of``)."""
        by_leader: dict[int, dict[str, list[tuple[int, int]]]] = {}
        for (t, p), off in positions.items():
            by_leader.setdefault(self.leader_of(t, p), {}).setdefault(t, []).append((p, off))
        mt = request_type(ApiKey.FETCH)
        sent = []
        for leader, topics in by_leader.items():
            conn = self.connection(leader)
            body = mt(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                      isolation_level=isolation_level,
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
