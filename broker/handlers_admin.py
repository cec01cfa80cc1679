"""Cluster and admin APIs: Metadata, topic CRUD, configs, the cluster's description.

Topic changes go through ZooKeeper exactly as Kafka's ZooKeeper-mode admin path does: the handler
writes the assignment (``/brokers/topics/<t>``) and configs (``/config/topics/<t>``), the controller
picks the change up from its watch, elects leaders and tells every broker; the handler waits (until the
request's timeout) for this broker's metadata cache to show the result.

Authorization, as Kafka 3.9's KafkaApis (ZooKeeper mode):

* Metadata: topics the caller may not DESCRIBE are left out of an all-topics answer and answered
  TOPIC_AUTHORIZATION_FAILED when named (never UNKNOWN: their existence is not disclosed); creating a
  missing topic automatically needs CREATE on the cluster or on the topic.
* CreateTopics: CREATE on the cluster or on each topic; the created topic's configs (and partition
  count, replication factor and id) are returned only with DESCRIBE_CONFIGS on it, else
  ``topic_config_error_code`` says TOPIC_AUTHORIZATION_FAILED. DeleteTopics: DELETE on each topic (a
  topic named by id the caller may not DESCRIBE is answered without its name). CreatePartitions: ALTER
  (a topic named twice is answered once with INVALID_REQUEST, before any authorization).
* DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: DESCRIBE_CONFIGS / ALTER_CONFIGS on the
  topic, or on the cluster for broker resources (CLUSTER_AUTHORIZATION_FAILED then).
* DescribeCluster needs nothing; it reports the caller's cluster operations when asked (0 without
  DESCRIBE on the cluster). (The log dir APIs are in broker/handlers_log_dirs.py.)
* DescribeTopicPartitions: as Metadata, with every returned topic's authorized operations.

CreateTopics, DeleteTopics and CreatePartitions are controller requests in ZooKeeper mode: a broker
whose controller is not the active one answers each topic NOT_CONTROLLER (no message), before any
authorization or validation, and changes nothing. Clients route them to Metadata's controller and
retry there. Automatic creation (Metadata, FindCoordinator) is the broker's own path and works on any
broker.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from broker.authorizer.api import CLUSTER_NAME, AclOperation, ResourceType
from broker.internal_topics import INTERNAL_TOPICS, internal_topic_spec
from broker.listeners import listener_config_name
from broker.quota.mutation import record_controller_mutation
from broker.rate_limited_log import RateLimitedLog
from broker.request_authorization import (
    ALLOW_ALL,
    CLUSTER_AUTHORIZATION_FAILED_MESSAGE,
    OPERATIONS_OMITTED,
    TOPIC_AUTHORIZATION_FAILED_MESSAGE,
    RequestAuthorizer,
)
from config.registry import REGISTRY, ConfigError, ConfigSource, LogConfig, format_value
from controller import zk_data as zd
from controller.assignment import (
    AssignmentError,
    assign_new_partitions,
    assign_replicas,
    validate_manual_assignment,
)
from controller.zk_client import InvalidTopicError, NoNodeError, TopicExistsError
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.kafka_apis import KafkaApis
    from broker.metadata_cache import MetadataCache
    from broker.purgatory import Purgatory
    from broker.wiring import ZkCall
    from config.registry import BrokerConfig
    from controller.controller import KafkaController
    from controller.zk_client import KafkaZkClient
    from protocol.messages import Request

log = logging.getLogger(__name__)

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
# KRaft's metadata log: no CreateTopics may make a topic of that name, in ZooKeeper mode either.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
# Partitions one CreateTopics or CreatePartitions request may create. Kafka's KRaft controller refuses
# operations of more than 10,000 records (MAX_RECORDS_PER_USER_OP) with POLICY_VIOLATION; ZooKeeper
# mode has no bound, and one request asking for 2^31-1 partitions would exhaust the broker's memory.
MAX_PARTITIONS_PER_REQUEST = 10_000
_TOO_LARGE = "Unable to perform excessively large batch operation."
# DescribeConfigs resource types (Kafka's ConfigResource.Type ids).
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP = 2, 4, 8, 16, 32
# The resource types ConfigAdminManager lets through to the config store (BROKER_LOGGER: incremental only).
_ALTERABLE_RESOURCE_TYPES = (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP)
_OPS_UNKNOWN = OPERATIONS_OMITTED  # "authorized operations not requested"
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_ZERO_UUID = uuid.UUID(int=0)
# How long a Metadata request waits for the controller's first UpdateMetadata after a (re)start. Until
# then the cache is empty, and Kafka's ZooKeeper-mode broker answers from it: no brokers, every topic
# UNKNOWN_TOPIC_OR_PARTITION. The Java client ignores an answer without brokers; librdkafka takes it
# and marks a topic it has known for more than topic.metadata.propagation.max.ms as gone, so its
# produce() fails at once with "Unknown topic". A KRaft broker serves nothing before it has caught up
# with the metadata log; waiting here does the same for Metadata, bounded for a broker the controller
# never reaches.
_FIRST_METADATA_WAIT_MS = 10_000

_META = response_type(ApiKey.METADATA)
_CT = response_type(ApiKey.CREATE_TOPICS)
_DT = response_type(ApiKey.DELETE_TOPICS)
_CP = response_type(ApiKey.CREATE_PARTITIONS)
_DC = response_type(ApiKey.DESCRIBE_CONFIGS)
_AC = response_type(ApiKey.ALTER_CONFIGS)
_IAC = response_type(ApiKey.INCREMENTAL_ALTER_CONFIGS)
_CLUSTER = response_type(ApiKey.DESCRIBE_CLUSTER)
_DTP = response_type(ApiKey.DESCRIBE_TOPIC_PARTITIONS)


def topic_name_error(name: str) -> str | None:
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL_TOPIC.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, "
                "'.', '_' and '-'")
    return None


class BrokerConfigSource(Protocol):
    """The broker's configuration as the admin APIs see it: current (dynamic) broker config, per-topic
    configs, and the hooks that apply a change at once on this broker."""

    @property
    def config(self) -> BrokerConfig: ...

    def topic_config(self, topic: str) -> LogConfig: ...

    def set_topic_overrides(self, topic: str, overrides: dict[str, str]) -> None: ...

    async def reload_dynamic_broker_config(self) -> None: ...

    def validate_dynamic_update(self, entity: str, configs: dict[str, str]) -> None: ...


class AdminHandlers:
    """Metadata, topic and config administration, DescribeCluster and DescribeTopicPartitions."""

    def __init__(self, zk: KafkaZkClient, zk_call: ZkCall, broker_id: int, metadata: MetadataCache,
                 config_source: BrokerConfigSource, metadata_waiters: Purgatory,
                 controller: Callable[[], KafkaController | None], auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.auth = auth
        self.controller = controller  # this broker's KafkaController, once started
        self.zk = zk
        self.zk_call = zk_call
        self.broker_id = broker_id
        self.metadata = metadata
        self.configs = config_source
        self.metadata_waiters = metadata_waiters  # woken by UpdateMetadata
        self._holding_metadata_logged = False
        self._rate_limited = RateLimitedLog(log, 60.0)  # a broker no controller reaches: every request waits

    # ------------------------------------------------------------------------------------------------
    # Metadata

    async def metadata_request(self, conn: Connection, req: Request) -> Any:
        b, v = req.body, req.api_version
        md = self.metadata
        if not md.initialized:
            await self._wait_for_first_update_metadata()
        auth = self.auth
        by_id: list[Any] = []  # the topic id a name was looked up by, else None
        if b.topics is None or (v == 0 and not b.topics):
            names: list[str | None] = [n for n in sorted(md.topics)]  # noqa: C416 - typed as optional
            by_id = [None] * len(names)
            requested = False
        else:
            names = []
            for t in b.topics:
                name = t.name
                looked_up = None
                if name is None and v >= 10 and t.topic_id.int:
                    name = md.topics_by_id.get(t.topic_id)
                    looked_up = t.topic_id
                names.append(name)
                by_id.append(looked_up)
            requested = True
        auto = v < 4 or b.allow_auto_topic_creation
        auto_create = requested and auto and self.configs.config.get("auto.create.topics.enable")
        hidden: set[str] = set()  # no DESCRIBE: not disclosed
        not_creatable: set[str] = set()  # missing, and no CREATE to create it automatically
        if auth.enabled:
            wanted = [n for n in names if n is not None]
            # Listing all topics does not log a denial per topic it leaves out (Kafka: logIfDenied).
            visible = auth.filter_by_authorized(conn, req, AclOperation.DESCRIBE, TOPIC, wanted,
                                                log_if_denied=requested)
            hidden = set(wanted) - visible
            missing = {n for n in visible if n not in md.topics}
            if auto_create and missing and not auth.authorize_cluster(conn, req, AclOperation.CREATE,
                                                                      log_if_denied=False):
                not_creatable = missing - auth.filter_by_authorized(conn, req, AclOperation.CREATE, TOPIC, missing)
        topic_ops = v >= 8 and b.include_topic_authorized_operations
        topics = []
        for name, topic_id in zip(names, by_id, strict=True):
            if name is None:  # an unknown id, echoed as Kafka does
                topics.append(_META.MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                                          topic_id=topic_id if topic_id is not None else _ZERO_UUID,
                                                          topic_authorized_operations=_OPS_UNKNOWN))
                continue
            if name in hidden:
                if requested:
                    # Named by id: the id is no secret, the name is.
                    topics.append(_META.MetadataResponseTopic(
                        error_code=_TOPIC_DENIED, name=None if topic_id is not None else name,
                        topic_id=topic_id if topic_id is not None else _ZERO_UUID, is_internal=False,
                        topic_authorized_operations=_OPS_UNKNOWN))
                continue
            if name in not_creatable:
                topics.append(_META.MetadataResponseTopic(error_code=_TOPIC_DENIED, name=name,
                                                          is_internal=name in INTERNAL_TOPICS,
                                                          topic_authorized_operations=_OPS_UNKNOWN))
                continue
            info = md.topics.get(name)
            if info is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if auto_create:
                    code = await self.auto_create(name)
                entry = _META.MetadataResponseTopic(error_code=code, name=name, is_internal=name in INTERNAL_TOPICS,
                                                    topic_authorized_operations=_OPS_UNKNOWN)
            else:
                entry = self._topic_metadata(info, conn.listener, v)
            if topic_ops:
                entry.topic_authorized_operations = auth.authorized_operations(conn, req, TOPIC, name)
            topics.append(entry)
        cluster_ops = _OPS_UNKNOWN
        if 8 <= v <= 10 and b.include_cluster_authorized_operations:
            cluster_ops = auth.cluster_authorized_operations(conn, req)
        return _META(brokers=self._brokers(conn.listener), cluster_id=md.cluster_id,
                     controller_id=md.controller_id, topics=topics, cluster_authorized_operations=cluster_ops)

    async def _wait_for_first_update_metadata(self) -> None:
        if not self._holding_metadata_logged:
            self._holding_metadata_logged = True
            log.info("[KafkaApi-%d] holding Metadata requests until the controller's first UpdateMetadata "
                     "(at most %d ms)", self.broker_id, _FIRST_METADATA_WAIT_MS)
        md = self.metadata
        if not await self.wait_for_metadata(lambda: md.initialized, _FIRST_METADATA_WAIT_MS):
            self._rate_limited.log(logging.WARNING, "uninitialized metadata",
                                   "[KafkaApi-%d] no UpdateMetadata from a controller within %d ms: answering "
                                   "Metadata from an empty cache", self.broker_id, _FIRST_METADATA_WAIT_MS)

    def _brokers(self, listener: str) -> list[Any]:
        out = []
        for bid, b in sorted(self.metadata.brokers.items()):
            ep = b.endpoints.get(listener)
            if ep is not None:
                out.append(_META.MetadataResponseBroker(node_id=bid, host=ep[0], port=ep[1], rack=b.rack))
        return out

    def _topic_metadata(self, info: Any, listener: str, version: int = 12) -> Any:
        parts = []
        md = self.metadata
        for pid in sorted(info.partitions):
            p = info.partitions[pid]
            code, leader = ErrorCode.NONE, p.leader
            replicas, isr = p.replicas, p.isr
            if version == 0:
                # v0 (Kafka's errorUnavailableEndpoints): only brokers reachable on this listener are
                # listed, and a partition missing some says REPLICA_NOT_AVAILABLE.
                replicas = [b for b in p.replicas if md.endpoint(b, listener) is not None]
                isr = [b for b in p.isr if md.endpoint(b, listener) is not None]
            if p.leader < 0 or md.endpoint(p.leader, listener) is None:
                # As Kafka's MetadataCache: no leader id that the broker list cannot resolve. A leader
                # that is not alive is LEADER_NOT_AVAILABLE; one alive without this listener,
                # LISTENER_NOT_FOUND (LEADER_NOT_AVAILABLE again before v6).
                alive = p.leader >= 0 and md.alive(p.leader)
                code = ErrorCode.LISTENER_NOT_FOUND if alive and version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
                leader = -1
            elif len(replicas) < len(p.replicas) or len(isr) < len(p.isr):
                code = ErrorCode.REPLICA_NOT_AVAILABLE
            parts.append(_META.MetadataResponsePartition(
                error_code=code, partition_index=pid, leader_id=leader, leader_epoch=p.leader_epoch,
                replica_nodes=replicas, isr_nodes=isr, offline_replicas=p.offline_replicas))
        return _META.MetadataResponseTopic(error_code=0, name=info.name, topic_id=info.topic_id,
                                           is_internal=info.name in INTERNAL_TOPICS, partitions=parts,
                                           topic_authorized_operations=_OPS_UNKNOWN)

    async def auto_create(self, name: str) -> ErrorCode:
        if topic_name_error(name):
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        cfg = self.configs.config
        if name in INTERNAL_TOPICS:
            # Kafka creates an internal topic a Metadata request names with its own partition count,
            # replication factor and configs (Burrow, for one, looks up __consumer_offsets first).
            parts, rf, configs = internal_topic_spec(cfg, name)
            if len(self.metadata.brokers) < rf:
                return ErrorCode.INVALID_REPLICATION_FACTOR
            code, _ = await self.create_topic(name, parts, rf, None, configs, validate_only=False)
        else:
            code, _ = await self.create_topic(name, cfg.get("num.partitions"), cfg.get("default.replication.factor"),
                                              None, {}, validate_only=False)
        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            return ErrorCode.LEADER_NOT_AVAILABLE
        log.warning("auto-creation of topic %s failed: %s", name, code.name)
        return code

    # ------------------------------------------------------------------------------------------------
    # Topic creation

    def live_brokers(self) -> list[tuple[int, str | None]]:
        return [(bid, b.rack) for bid, b in sorted(self.metadata.brokers.items())]

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignment: dict[int, list[int]] | None, configs: dict[str, str],
                           validate_only: bool) -> tuple[ErrorCode, str | None]:
        """Validate and (unless validate_only) write the topic to ZooKeeper. (error, message)."""
        err = topic_name_error(name)
        if err:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, err
        try:
            LogConfig.from_broker(self.configs.config, configs)
        except ConfigError as e:
            return ErrorCode.INVALID_CONFIG, str(e)
        brokers = self.live_brokers()
        if not brokers:
            brokers = [(self.broker_id, self.configs.config.get("broker.rack"))]
        try:
            if assignment:
                validate_manual_assignment(assignment, [b for b, _ in brokers])
            else:
                assignment = assign_replicas(brokers, num_partitions, replication_factor)
        except AssignmentError as e:
            return ErrorCode(e.error_code), str(e)
        if validate_only:
            if await self.zk_call(self.zk.topic_exists, name):
                return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
            return ErrorCode.NONE, None
        throttled = record_controller_mutation(len(assignment))
        if throttled is not None:
            return throttled
        try:
            await self.zk_call(self.zk.create_topic, name, assignment, configs)
        except TopicExistsError as e:
            return ErrorCode.TOPIC_ALREADY_EXISTS, str(e)
        except InvalidTopicError as e:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)
        # The logs this broker creates for the topic (and DescribeConfigs) use its overrides at once,
        # and a topic deleted and created again does not inherit the old ones.
        self.configs.set_topic_overrides(name, configs)
        log.info("created topic %s with %d partitions, replication factor %d", name, len(assignment),
                 len(next(iter(assignment.values()))))
        return ErrorCode.NONE, None

    async def wait_for_metadata(self, ready: Any, timeout_ms: int) -> bool:
        waiters = self.metadata_waiters
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        while not ready():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await waiters.wait(["metadata"], min(remaining, 0.5))
        return True

    def _topic_ready(self, name: str, partitions: int | None = None) -> bool:
        info = self.metadata.topics.get(name)
        if info is None:
            return False
        if partitions is not None and len(info.partitions) < partitions:
            return False
        return all(p.leader >= 0 for p in info.partitions.values())

    def _controller_active(self) -> bool:
        """Kafka's ``controller.isActive``: this broker's own controller holds the election, whatever
        controller id the metadata cache last heard of."""
        ctrl = self.controller()
        return ctrl is not None and ctrl.is_active

    async def create_topics(self, conn: Connection, req: Request) -> Any:
        b, v = req.body, req.api_version
        if not self._controller_active():
            # Kafka leaves the result's message at its default: an empty string, not null.
            return _CT(topics=[_CT.CreatableTopicResult(
                name=t.name, error_code=ErrorCode.NOT_CONTROLLER, error_message="", num_partitions=-1,
                replication_factor=-1, configs=[]) for t in b.topics])
        seen: dict[str, int] = {}
        for t in b.topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        auth = self.auth
        creatable: set[str] | None = None  # None: every topic (no authorizer)
        describable: set[str] | None = None
        if auth.enabled:
            creatable = set(seen) if auth.authorize_cluster(conn, req, AclOperation.CREATE, log_if_denied=False) \
                else auth.filter_by_authorized(conn, req, AclOperation.CREATE, TOPIC, seen)
            describable = auth.filter_by_authorized(conn, req, AclOperation.DESCRIBE_CONFIGS, TOPIC, seen,
                                                    log_if_denied=False)
        results = []
        waiting = []
        creating = 0  # partitions this request creates, so far
        for t in b.topics:
            r = _CT.CreatableTopicResult(name=t.name, error_code=0, num_partitions=-1, replication_factor=-1,
                                         configs=None)
            results.append(r)
            if t.name == CLUSTER_METADATA_TOPIC:  # refused before anything else, configs error unset
                r.error_code = ErrorCode.INVALID_REQUEST
                r.error_message = f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."
                continue
            shows_configs = describable is None or t.name in describable
            if not shows_configs:
                r.topic_config_error_code = _TOPIC_DENIED
            if seen[t.name] > 1:
                r.error_code, r.error_message = ErrorCode.INVALID_REQUEST, "Create topics request from client "\
                    f"contains a duplicate topic: {t.name}"
                continue
            if creatable is not None and t.name not in creatable:
                r.error_code, r.error_message = _TOPIC_DENIED, "Authorization failed."
                continue
            if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
                r.error_code = ErrorCode.INVALID_REQUEST
                r.error_message = "Both numPartitions or replicationFactor and replicasAssignments were set. " \
                                  "Both cannot be used at the same time."
                continue
            cfg = self.configs.config
            nparts = t.num_partitions if t.num_partitions != -1 else cfg.get("num.partitions")
            rf = t.replication_factor if t.replication_factor != -1 else cfg.get("default.replication.factor")
            creating += len(t.assignments) or max(nparts, 0)
            if creating > MAX_PARTITIONS_PER_REQUEST:
                r.error_code, r.error_message = ErrorCode.POLICY_VIOLATION, _TOO_LARGE
                continue
            assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            configs = {c.name: c.value for c in t.configs}
            code, msg = await self.create_topic(t.name, nparts, rf, assignment, configs, b.validate_only)
            r.error_code, r.error_message = code, msg
            if code != ErrorCode.NONE:
                r.topic_config_error_code = ErrorCode.NONE
            elif not shows_configs:
                # Created, but without DESCRIBE_CONFIGS the caller learns nothing about it.
                if not b.validate_only:
                    waiting.append((r, t.name))
            else:
                r.num_partitions = len(assignment) if assignment else nparts
                r.replication_factor = len(next(iter(assignment.values()))) if assignment else rf
                if v >= 5:
                    r.configs = self._created_configs(t.name, configs)
                if not b.validate_only:
                    waiting.append((r, t.name))
        if waiting:
            await self.wait_for_metadata(lambda: all(self._topic_ready(n) for _, n in waiting), b.timeout_ms)
            for r, n in waiting:
                info = self.metadata.topics.get(n)
                if info is None or not self._topic_ready(n):
                    r.error_code = ErrorCode.REQUEST_TIMED_OUT
                    r.error_message = f"topic {n} was created but its leaders were not elected within timeout_ms"
                elif describable is None or n in describable:
                    r.topic_id = info.topic_id
        return _CT(topics=results)

    def _created_configs(self, topic: str, overrides: dict[str, str]) -> list[Any]:
        lc = LogConfig.from_broker(self.configs.config, overrides, strict=False)
        out = []
        for name, d in sorted(REGISTRY.items()):
            if not d.topic:
                continue
            out.append(_CT.CreatableTopicConfigs(
                name=name, value=None if d.sensitive else format_value(name, lc.get(name)), read_only=False,
                config_source=int(lc.source_of(name)), is_sensitive=d.sensitive))
        return out

    # ------------------------------------------------------------------------------------------------
    # Topic deletion and partitions

    async def delete_topics(self, conn: Connection, req: Request) -> Any:
        b, v = req.body, req.api_version
        if not self._controller_active():
            return _DT(responses=[_DT.DeletableTopicResult(name=t.name, topic_id=t.topic_id,
                                                           error_code=ErrorCode.NOT_CONTROLLER, error_message=None)
                                  for t in b.topics] if v >= 6 else
                       [_DT.DeletableTopicResult(name=n, error_code=ErrorCode.NOT_CONTROLLER, error_message=None)
                        for n in b.topic_names])
        names: list[tuple[str | None, Any]] = []
        if v >= 6:
            for t in b.topics:
                name = t.name if t.name is not None else self.metadata.topics_by_id.get(t.topic_id)
                names.append((name, t.topic_id))
        else:
            names = [(n, None) for n in b.topic_names]
        results = []
        pending = []
        enabled = self.configs.config.get("delete.topic.enable")
        auth = self.auth
        describable = deletable = None
        if auth.enabled and enabled:
            named = [n for n, _ in names if n is not None]
            describable = auth.filter_by_authorized(conn, req, AclOperation.DESCRIBE, TOPIC, named)
            deletable = auth.filter_by_authorized(conn, req, AclOperation.DELETE, TOPIC, named)
        for (name, tid), by_id in zip(names, ([t.name is None for t in b.topics] if v >= 6 else [False] * len(names)),
                                      strict=True):
            r = _DT.DeletableTopicResult(name=name, error_code=0)
            results.append(r)
            if tid is not None:
                r.topic_id = tid
            if name is None:
                r.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if not enabled:
                # Versions before 3 have no TOPIC_DELETION_DISABLED: Kafka answers them INVALID_REQUEST.
                r.error_code = ErrorCode.TOPIC_DELETION_DISABLED if v >= 3 else ErrorCode.INVALID_REQUEST
                continue
            if describable is not None and by_id and name not in describable:
                r.name, r.error_code = None, _TOPIC_DENIED  # the id is no secret, the name is
                continue
            if deletable is not None and name not in deletable:
                r.error_code = _TOPIC_DENIED
                continue
            if name in INTERNAL_TOPICS:
                r.error_code, r.error_message = ErrorCode.INVALID_TOPIC_EXCEPTION, "internal topics cannot be deleted"
                continue
            # A name no topic can have (not a valid ZooKeeper path either) is simply unknown.
            if topic_name_error(name) or not await self.zk_call(self.zk.topic_exists, name):
                r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            info = self.metadata.topics.get(name)
            throttled = record_controller_mutation(len(info.partitions) if info is not None else 0)
            if throttled is not None:
                r.error_code, r.error_message = throttled
                continue
            await self.zk_call(self.zk.mark_topic_for_deletion, name)
            pending.append((r, name))
        if pending:
            ok = await self.wait_for_metadata(lambda: all(n not in self.metadata.topics for _, n in pending),
                                              b.timeout_ms)
            if not ok:
                for r, n in pending:
                    if n in self.metadata.topics:
                        r.error_code = ErrorCode.REQUEST_TIMED_OUT
        return _DT(responses=results)

    async def create_partitions(self, conn: Connection, req: Request) -> Any:
        b = req.body
        if not self._controller_active():
            # Kafka answers from a map by topic name: a topic named twice is answered once.
            return _CP(results=[_CP.CreatePartitionsTopicResult(name=n, error_code=ErrorCode.NOT_CONTROLLER,
                                                                error_message=None)
                                for n in dict.fromkeys(t.name for t in b.topics)])
        results = []
        pending = []
        creating = 0  # partitions this request creates, so far
        # A topic named more than once is answered once, INVALID_REQUEST, before any authorization
        # (Kafka's handleCreatePartitionsRequest: its results are a map by topic name).
        counts: dict[str, int] = {}
        for t in b.topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        alterable = self.auth.filter_by_authorized(conn, req, AclOperation.ALTER, TOPIC,
                                                   (n for n, c in counts.items() if c == 1)) \
            if self.auth.enabled else None
        answered: set[str] = set()
        for t in b.topics:
            if t.name in answered:
                continue
            answered.add(t.name)
            r = _CP.CreatePartitionsTopicResult(name=t.name, error_code=0)
            results.append(r)
            if counts[t.name] > 1:
                r.error_code, r.error_message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
                continue
            if alterable is not None and t.name not in alterable:
                r.error_code, r.error_message = _TOPIC_DENIED, "The topic authorization is failed."
                continue
            # An illegal name is no topic (and no valid ZooKeeper path either).
            current = None if topic_name_error(t.name) else await self.zk_call(
                self.zk.get_topic_assignment, t.name)
            if current is None:
                r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            existing = {p: list(ra.replicas) if hasattr(ra, "replicas") else list(ra)
                        for p, ra in current.partitions.items()}
            creating += max(t.count - len(existing), 0) + len(t.assignments or ())
            if creating > MAX_PARTITIONS_PER_REQUEST:
                r.error_code, r.error_message = ErrorCode.POLICY_VIOLATION, _TOO_LARGE
                continue
            try:
                if t.assignments:
                    new = {len(existing) + i: list(a.broker_ids) for i, a in enumerate(t.assignments)}
                    if len(existing) + len(new) != t.count:
                        raise AssignmentError(f"Increasing the number of partitions by {len(new)} but "
                                              f"{t.count - len(existing)} assignments provided.",
                                              ErrorCode.INVALID_REPLICA_ASSIGNMENT)
                    validate_manual_assignment(new, [bid for bid, _ in self.live_brokers()],
                                               expected_replication_factor=len(existing[0]),
                                               first_partition=len(existing))
                else:
                    new = assign_new_partitions(self.live_brokers(), existing, t.count)
            except AssignmentError as e:
                r.error_code, r.error_message = ErrorCode(e.error_code), str(e)
                continue
            if not b.validate_only:
                throttled = record_controller_mutation(len(new))
                if throttled is not None:
                    r.error_code, r.error_message = throttled
                    continue
                try:
                    await self.zk_call(self.zk.add_partitions, t.name, new)
                except ValueError as e:  # another request added partitions since we read the topic
                    r.error_code, r.error_message = ErrorCode.INVALID_PARTITIONS, str(e)
                    continue
                except NoNodeError:  # the topic was deleted meanwhile
                    r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                pending.append((t.name, t.count))
        if pending:
            await self.wait_for_metadata(lambda: all(self._topic_ready(n, c) for n, c in pending), b.timeout_ms)
        return _CP(results=results)

    # ------------------------------------------------------------------------------------------------
    # Configs

    def _describe_topic_config(self, lc: LogConfig, names: list[str] | None, synonyms: bool,
                               documentation: bool) -> list[Any]:
        out = []
        for name, d in sorted(REGISTRY.items()):
            if not d.topic or (names is not None and name not in names):
                continue
            src = lc.source_of(name)
            entry = _DC.DescribeConfigsResourceResult(
                name=name, value=None if d.sensitive else format_value(name, lc.get(name)), read_only=False,
                config_source=int(src), is_sensitive=d.sensitive, config_type=int(d.type),
                documentation=d.doc if documentation else None)
            if synonyms:
                entry.synonyms = [_DC.DescribeConfigsSynonym(name=s.name, value=format_value(s.name, s.value),
                                                             source=int(s.source))
                                  for s in lc.synonyms(name)]
            out.append(entry)
        return out

    def _describe_broker_config(self, names: list[str] | None, synonyms: bool, documentation: bool) -> list[Any]:
        cfg = self.configs.config
        out = []
        for name, d in sorted(REGISTRY.items()):
            if not d.broker or (names is not None and name not in names):
                continue
            value = cfg.get(name)
            entry = _DC.DescribeConfigsResourceResult(
                name=name, value=None if d.sensitive else format_value(name, value),
                read_only=d.update_mode is None or d.update_mode.name == "READ_ONLY",
                config_source=int(cfg.source_of(name)), is_sensitive=d.sensitive, config_type=int(d.type),
                documentation=d.doc if documentation else None)
            if synonyms:
                entry.synonyms = [_DC.DescribeConfigsSynonym(name=s.name, value=format_value(s.name, s.value),
                                                             source=int(s.source))
                                  for s in cfg.synonyms(name)]
            out.append(entry)
        # Listener overrides (listener.name.<l>.max.connections, ...ssl.keystore.location, ...), as Kafka
        # lists the prefixed keys set statically or dynamically: kafka-configs deletes only what it sees.
        for key, raw, source in cfg.listener_entries():
            if names is not None and key not in names:
                continue
            base = REGISTRY[cfg.listener_override_of(key) or ""]
            entry = _DC.DescribeConfigsResourceResult(
                name=key, value=None if base.sensitive else raw,
                read_only=base.update_mode is None or base.update_mode.name == "READ_ONLY",
                config_source=int(source), is_sensitive=base.sensitive, config_type=int(base.type),
                documentation=base.doc if documentation else None)
            if synonyms:
                entry.synonyms = [_DC.DescribeConfigsSynonym(name=key, value=entry.value, source=int(source))]
            out.append(entry)
        return out

    async def _describe_cluster_defaults(self, names: list[str] | None, synonyms: bool,
                                         documentation: bool) -> list[Any]:
        """The cluster-wide dynamic broker defaults (resource name ""): only the configs set there, as
        Kafka answers with currentDynamicDefaultConfigs. Read from ZooKeeper's /config/brokers/<default>
        rather than this broker's copy, so a default set through another broker shows at once, before its
        change notification arrives (the same read-your-writes as topic configs)."""
        cfg = self.configs.config
        try:
            defaults = await self.zk_call(self.zk.get_entity_config, "brokers", "<default>")
        except Exception as e:  # ZooKeeper unreachable: this broker's copy is the best answer left
            log.warning("reading the cluster-wide broker defaults from ZooKeeper failed (%s); answering from "
                        "the cache", e)
            defaults = {n: format_value(n, cfg.get(n)) for n, d in REGISTRY.items()
                        if d.broker and cfg.source_of(n) is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG}
        out = []
        for name, value in sorted(defaults.items()):
            # A listener override (listener.name.<l>.max.connections) is described as its base config.
            d = REGISTRY.get(name) or REGISTRY.get(cfg.listener_override_of(name) or "")
            if d is None or not d.broker or (names is not None and name not in names):
                continue
            entry = _DC.DescribeConfigsResourceResult(
                name=name, value=None if d.sensitive else value,
                read_only=d.update_mode is None or d.update_mode.name == "READ_ONLY",
                config_source=int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG), is_sensitive=d.sensitive,
                config_type=int(d.type), documentation=d.doc if documentation else None)
            if synonyms:
                # Kafka leaves the per-broker layer out of the default's synonyms; the default itself
                # comes from ZooKeeper, the static file and the built-in default from this broker.
                below = [x for x in cfg.synonyms(name) if x.source not in (
                    ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
                ] if name in REGISTRY else []
                entry.synonyms = [_DC.DescribeConfigsSynonym(
                    name=name, value=None if d.sensitive else value,
                    source=int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))] + [
                    _DC.DescribeConfigsSynonym(name=x.name,
                                               value=None if d.sensitive else format_value(x.name, x.value),
                                               source=int(x.source)) for x in below]
            out.append(entry)
        return out

    async def describe_configs(self, conn: Connection, req: Request) -> Any:
        b = req.body
        results = []
        for res in b.resources:
            r = _DC.DescribeConfigsResult(resource_type=res.resource_type, resource_name=res.resource_name,
                                          error_code=0, configs=[])
            results.append(r)
            names = list(res.configuration_keys) if res.configuration_keys is not None else None
            refused = self._config_refused(conn, req, AclOperation.DESCRIBE_CONFIGS, res.resource_type,
                                           res.resource_name)
            if refused is not None:
                r.error_code = refused
                r.error_message = TOPIC_AUTHORIZATION_FAILED_MESSAGE if refused == _TOPIC_DENIED \
                    else CLUSTER_AUTHORIZATION_FAILED_MESSAGE
                continue
            if res.resource_type == RESOURCE_TOPIC:
                if res.resource_name not in self.metadata.topics:
                    r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                # ZooKeeper, not this broker's cache, as Kafka's ZkConfigRepository: an alter just done
                # through another broker shows at once, before its change notification reaches us.
                try:
                    overrides = await self.zk_call(self.zk.get_topic_config, res.resource_name)
                    lc = LogConfig.from_broker(self.configs.config, dict(overrides), strict=False)
                except Exception as e:  # ZooKeeper unreachable: the cache is the best answer left
                    log.warning("reading topic %s's config from ZooKeeper failed (%s); answering from the cache",
                                res.resource_name, e)
                    lc = self.configs.topic_config(res.resource_name)
                r.configs = self._describe_topic_config(lc, names, b.include_synonyms, b.include_documentation)
            elif res.resource_type == RESOURCE_BROKER:
                if res.resource_name not in ("", str(self.broker_id)):
                    r.error_code, r.error_message = ErrorCode.INVALID_REQUEST, \
                        f"Unexpected broker id, expected {self.broker_id} or empty string, " \
                        f"but received {res.resource_name}"
                    continue
                if res.resource_name == "":
                    r.configs = await self._describe_cluster_defaults(names, b.include_synonyms,
                                                                      b.include_documentation)
                else:
                    r.configs = self._describe_broker_config(names, b.include_synonyms, b.include_documentation)
            else:
                r.error_code = ErrorCode.INVALID_REQUEST
                r.error_message = f"unsupported resource type {res.resource_type}"
        return _DC(results=results)

    def _config_refused(self, conn: Connection, req: Request, operation: AclOperation, resource_type: int,
                        name: str) -> ErrorCode | None:
        """The error for a config resource the caller may not ``operation``, None when it may."""
        if not self.auth.enabled:
            return None
        if resource_type == RESOURCE_TOPIC:
            return None if self.auth.authorize(conn, req, operation, TOPIC, name) else _TOPIC_DENIED
        if resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER):
            return None if self.auth.authorize(conn, req, operation, CLUSTER, CLUSTER_NAME) \
                else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return None  # refused as an unsupported resource type

    @staticmethod
    def _resource_name_error(resource_type: int, name: str) -> tuple[ErrorCode, str] | None:
        """Kafka's checks of a config resource's name, before ZooKeeper sees it as part of a path."""
        if resource_type == RESOURCE_TOPIC:
            err = topic_name_error(name)
            if err:
                return ErrorCode.INVALID_TOPIC_EXCEPTION, err
        elif resource_type == RESOURCE_BROKER and name and not name.isdigit():
            return ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        return None

    async def _apply_config(self, resource_type: int, name: str, new: dict[str, str | None],
                            validate_only: bool) -> tuple[ErrorCode, str | None]:
        """Validate and store a full replacement config for one resource (None values removed)."""
        bad_name = self._resource_name_error(resource_type, name)
        if bad_name:
            return bad_name
        clean = {k: v for k, v in new.items() if v is not None}
        if resource_type == RESOURCE_TOPIC:
            if not await self.zk_call(self.zk.topic_exists, name):
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
            for k in clean:
                d = REGISTRY.get(k)
                if d is None or not d.topic:
                    return ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {k}"
            try:
                LogConfig.from_broker(self.configs.config, clean)
            except ConfigError as e:
                return ErrorCode.INVALID_CONFIG, str(e)
            if not validate_only:
                await self.zk_call(self.zk.set_or_create_entity_config, zd.CONFIG_TYPE_TOPIC, name, clean)
                self.configs.set_topic_overrides(name, clean)
            return ErrorCode.NONE, None
        if resource_type == RESOURCE_BROKER:
            entity = name or "<default>"
            for k in clean:
                d = REGISTRY.get(listener_config_name(k) or k)  # listener.name.<l>.<config> overrides too
                if d is None or not d.broker:
                    # Kafka refuses dynamic broker configs it does not know ("Unknown Dynamic Configuration").
                    return ErrorCode.INVALID_CONFIG, f"Unknown broker config: {k}"
            try:
                if entity == "<default>":
                    self.configs.config.with_dynamic(dynamic_default=clean)
                else:
                    self.configs.config.with_dynamic(dynamic_broker=clean)
                self.configs.validate_dynamic_update(entity, clean)  # e.g. a new keystore that cannot be loaded
            except ConfigError as e:
                return ErrorCode.INVALID_CONFIG, str(e)
            if not validate_only:
                await self.zk_call(self.zk.set_or_create_entity_config, zd.CONFIG_TYPE_BROKER, entity, clean)
                await self.configs.reload_dynamic_broker_config()
            return ErrorCode.NONE, None
        return ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource_type}"

    def _preprocess_alter_configs(self, resources: list[Any], incremental: bool) -> dict[int, tuple[ErrorCode, str]]:
        """Kafka's ConfigAdminManager.preprocess, which runs before authorization: a resource named twice,
        a key named twice within a resource, a null value (other than an incremental DELETE), a broker
        resource naming another broker and an unknown resource type are INVALID_REQUEST. Keyed by id()."""
        errors: dict[int, tuple[ErrorCode, str]] = {}
        seen: dict[tuple[int, str], Any] = {}
        for res in resources:
            key = (res.resource_type, res.resource_name)
            earlier = seen.get(key)
            seen[key] = res
            if earlier is not None:
                for r in (earlier, res):
                    errors[id(r)] = (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
        for res in resources:
            if id(res) in errors:
                continue
            names = [c.name for c in res.configs]
            nulls = [c.name for c in res.configs
                     if c.value is None and not (incremental and c.config_operation == 1)]
            if len(set(names)) != len(names):
                errors[id(res)] = (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            elif nulls:
                errors[id(res)] = (ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
            elif res.resource_type == RESOURCE_BROKER and res.resource_name:
                if not res.resource_name.lstrip("-").isdigit():
                    errors[id(res)] = (ErrorCode.INVALID_REQUEST,
                                       f"Node id must be an integer, but it is: {res.resource_name}")
                elif int(res.resource_name) != self.broker_id:
                    errors[id(res)] = (ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {self.broker_id}, "
                                                                  f"but received {res.resource_name}")
            elif res.resource_type not in _ALTERABLE_RESOURCE_TYPES + ((RESOURCE_BROKER_LOGGER,) if incremental else ()):
                errors[id(res)] = (ErrorCode.INVALID_REQUEST, f"Unknown resource type {res.resource_type}")
        return errors

    async def alter_configs(self, conn: Connection, req: Request) -> Any:
        b = req.body
        out = []
        preprocessed = self._preprocess_alter_configs(b.resources, incremental=False)
        for res in b.resources:
            new = {c.name: c.value for c in res.configs}
            refused = self._config_refused(conn, req, AclOperation.ALTER_CONFIGS, res.resource_type, res.resource_name)
            if id(res) in preprocessed:
                code, msg = preprocessed[id(res)]
            elif refused is not None:
                code, msg = refused, None
            else:
                code, msg = await self._apply_config(res.resource_type, res.resource_name, new, b.validate_only)
            out.append(_AC.AlterConfigsResourceResponse(error_code=code, error_message=msg,
                                                        resource_type=res.resource_type,
                                                        resource_name=res.resource_name))
        return _AC(responses=out)

    async def incremental_alter_configs(self, conn: Connection, req: Request) -> Any:
        b = req.body
        out = []
        preprocessed = self._preprocess_alter_configs(b.resources, incremental=True)
        for res in b.resources:
            refused = self._config_refused(conn, req, AclOperation.ALTER_CONFIGS, res.resource_type, res.resource_name)
            bad_name: tuple[ErrorCode, str | None] | None = preprocessed.get(id(res))
            if bad_name is None:
                bad_name = (refused, None) if refused is not None else \
                    self._resource_name_error(res.resource_type, res.resource_name)
            if bad_name:
                out.append(_IAC.AlterConfigsResourceResponse(error_code=bad_name[0], error_message=bad_name[1],
                                                             resource_type=res.resource_type,
                                                             resource_name=res.resource_name))
                continue
            if res.resource_type == RESOURCE_TOPIC:
                current = dict(await self.zk_call(self.zk.get_topic_config, res.resource_name))
            else:
                current = dict(await self.zk_call(self.zk.get_entity_config, zd.CONFIG_TYPE_BROKER,
                                                         res.resource_name or "<default>"))
            code, msg = ErrorCode.NONE, None
            for c in res.configs:
                d = REGISTRY.get(c.name)
                if c.config_operation == 0:  # SET
                    current[c.name] = c.value
                elif c.config_operation == 1:  # DELETE
                    current.pop(c.name, None)
                elif c.config_operation in (2, 3):  # APPEND / SUBTRACT on list configs
                    if d is None or d.type.name != "LIST":
                        code, msg = ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config key: {c.name}"
                        break
                    items = [x.strip() for x in (current.get(c.name) or "").split(",") if x.strip()]
                    if not items and d.default is not None and c.name not in current:
                        items = list(d.default)
                    vals = [x.strip() for x in (c.value or "").split(",") if x.strip()]
                    if c.config_operation == 2:
                        items += [x for x in vals if x not in items]
                    else:
                        items = [x for x in items if x not in vals]
                    current[c.name] = ",".join(items)
                else:
                    code, msg = ErrorCode.INVALID_REQUEST, f"unknown config operation {c.config_operation}"
                    break
            if code == ErrorCode.NONE:
                code, msg = await self._apply_config(res.resource_type, res.resource_name, current, b.validate_only)
            out.append(_IAC.AlterConfigsResourceResponse(error_code=code, error_message=msg,
                                                         resource_type=res.resource_type,
                                                         resource_name=res.resource_name))
        return _IAC(responses=out)

    # ------------------------------------------------------------------------------------------------
    # Cluster, topic partitions

    async def describe_cluster(self, conn: Connection, req: Request) -> Any:
        brokers = []
        for bid, b in sorted(self.metadata.brokers.items()):
            ep = b.endpoints.get(conn.listener)
            if ep is not None:
                brokers.append(_CLUSTER.DescribeClusterBroker(broker_id=bid, host=ep[0], port=ep[1], rack=b.rack))
        ops = self.auth.cluster_authorized_operations(conn, req) if req.body.include_cluster_authorized_operations \
            else _OPS_UNKNOWN
        return _CLUSTER(error_code=0, endpoint_type=1, cluster_id=self.metadata.cluster_id or "",
                        controller_id=self.metadata.controller_id, brokers=brokers,
                        cluster_authorized_operations=ops)

    async def describe_topic_partitions(self, conn: Connection, req: Request) -> Any:
        b = req.body
        md = self.metadata
        auth = self.auth
        names = sorted(t.name for t in b.topics) if b.topics else sorted(md.topics)
        hidden: list[str] = []
        if auth.enabled:
            visible = auth.filter_by_authorized(conn, req, AclOperation.DESCRIBE, TOPIC, names)
            hidden = [n for n in names if n not in visible]
            names = [n for n in names if n in visible]
        start_topic, start_part = (b.cursor.topic_name, b.cursor.partition_index) if b.cursor else (None, 0)
        limit = max(b.response_partition_limit, 1)
        topics, count, next_cursor = [], 0, None
        for name in names:
            if start_topic is not None and name < start_topic:
                continue
            info = md.topics.get(name)
            if info is None:
                topics.append(_DTP.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name,
                    topic_authorized_operations=auth.authorized_operations(conn, req, TOPIC, name)))
                continue
            parts = []
            for pid in sorted(info.partitions):
                if name == start_topic and pid < start_part:
                    continue
                if count >= limit:
                    next_cursor = _DTP.Cursor(topic_name=name, partition_index=pid)
                    break
                p = info.partitions[pid]
                # ELR lists are empty, never null, as Kafka sends them: the Java admin client streams them.
                parts.append(_DTP.DescribeTopicPartitionsResponsePartition(
                    error_code=0, partition_index=pid, leader_id=p.leader, leader_epoch=p.leader_epoch,
                    replica_nodes=p.replicas, isr_nodes=p.isr, eligible_leader_replicas=[],
                    last_known_elr=[], offline_replicas=p.offline_replicas))
                count += 1
            topics.append(_DTP.DescribeTopicPartitionsResponseTopic(
                error_code=0, name=name, topic_id=info.topic_id, is_internal=name in INTERNAL_TOPICS,
                partitions=parts, topic_authorized_operations=auth.authorized_operations(conn, req, TOPIC, name)))
            if next_cursor is not None:
                break
        if b.topics:  # named topics the caller may not DESCRIBE (left out of an all-topics answer)
            topics.extend(_DTP.DescribeTopicPartitionsResponseTopic(
                error_code=_TOPIC_DENIED, name=name, topic_id=_ZERO_UUID, is_internal=False, partitions=[],
                topic_authorized_operations=_OPS_UNKNOWN)
                for name in hidden if start_topic is None or name >= start_topic)
        return _DTP(topics=topics, next_cursor=next_cursor)

    def register(self, apis: KafkaApis) -> None:
        apis.register(ApiKey.METADATA, self.metadata_request)
        apis.register(ApiKey.CREATE_TOPICS, self.create_topics)
        apis.register(ApiKey.DELETE_TOPICS, self.delete_topics)
        apis.register(ApiKey.CREATE_PARTITIONS, self.create_partitions)
        apis.register(ApiKey.DESCRIBE_CONFIGS, self.describe_configs)
        apis.register(ApiKey.ALTER_CONFIGS, self.alter_configs)
        apis.register(ApiKey.INCREMENTAL_ALTER_CONFIGS, self.incremental_alter_configs)
        apis.register(ApiKey.DESCRIBE_CLUSTER, self.describe_cluster)
        apis.register(ApiKey.DESCRIBE_TOPIC_PARTITIONS, self.describe_topic_partitions)
