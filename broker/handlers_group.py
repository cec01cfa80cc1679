"""Consumer groups on this broker: FindCoordinator, the group APIs' wire side, and ``__consumer_offsets``.

The group coordinator for a group is the leader of the ``__consumer_offsets`` partition its id hashes
to. ``__consumer_offsets`` is created on first use (FindCoordinator), compacted, with
``offsets.topic.num.partitions`` partitions and ``offsets.topic.replication.factor`` replicas; as in
Kafka, creation fails (COORDINATOR_NOT_AVAILABLE) while fewer brokers are alive than that factor.
When this broker becomes leader of one of its partitions the coordinator loads the groups from it;
when it stops leading one, they are unloaded.

``GroupApis`` translates the group APIs between the wire and the ``GroupCoordinator``: request
bodies become calls with plain values, results become response bodies of the request's version.
``AuthorizedGroupApis`` puts Kafka 3.9's authorization in front of it:

* FindCoordinator: DESCRIBE on the group, or on the transactional id (per key).
* JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group (GROUP_AUTHORIZATION_FAILED).
* OffsetCommit: READ on the group, then READ on each topic; TxnOffsetCommit: WRITE on the
  transactional id first. OffsetDelete: DELETE on the group, READ on each topic. A refused topic's
  partitions get TOPIC_AUTHORIZATION_FAILED and the others are committed (deleted) as usual.
* OffsetFetch: DESCRIBE on each group; offsets of topics the caller may not DESCRIBE are refused
  (named) or left out (all of a group's offsets).
* DescribeGroups: DESCRIBE on each group, with the authorized operations when asked. ListGroups: all
  groups with DESCRIBE on the cluster, else those the caller may DESCRIBE. DeleteGroups: DELETE.

ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) are answered UNSUPPORTED_VERSION, as a
ZooKeeper-mode Kafka 3.9 answers them (the new group coordinator they need does not run there).

OffsetCommit v0 and OffsetFetch v0 keep offsets in ZooKeeper, as Kafka 3.9 does in ZooKeeper mode
(broker/zk_consumer_offsets.py, with its own checks); OffsetCommit v1's commit timestamp, when set, is
the offset's commit timestamp.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from broker.authorizer.api import AclOperation, ResourceType
from broker.group_coordinator import INVALID_OFFSET, NO_GENERATION, GroupCoordinator, LogEntry
from broker.group_membership import UNKNOWN_MEMBER_ID
from broker.group_metadata import (
    GROUP_TYPE_CLASSIC,
    GroupState,
    JoinResult,
    OffsetAndMetadata,
    SyncResult,
    TopicPartition,
)
from broker.internal_topics import internal_topic_spec
from broker.request_authorization import ALLOW_ALL, RequestAuthorizer
from broker.txn_verification import CONFIG as VERIFICATION_ENABLE
from broker.txn_verification import TxnOffsetsVerification, TxnVerifier, require_verified
from broker.zk_consumer_offsets import ZkConsumerOffsets
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import response_type
from protocol.records import BatchView, NewRecord, build_batch, iter_batches, parse_control_record
from protocol.schema import Struct
from storage.producer_state import REQUEST_VERIFICATION_GUARDS

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.kafka_apis import KafkaApis
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager
    from broker.txn_coordinator import TransactionCoordinator
    from config.registry import BrokerConfig
    from protocol.messages import Request

# AdminHandlers.create_topic(name, partitions, replication factor, assignment, configs, validate_only=)
CreateTopic = Callable[..., Awaitable[tuple[ErrorCode, "str | None"]]]

log = logging.getLogger(__name__)

E = ErrorCode
AUTHORIZED_OPERATIONS_OMITTED = -2147483648

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
_FC = response_type(ApiKey.FIND_COORDINATOR)


class ReplicatedOffsetsLog:
    """The coordinator's view of the ``__consumer_offsets`` partitions, on the real partition logs."""

    def __init__(self, replica_manager: ReplicaManager, config: Callable[[], BrokerConfig]) -> None:
        self.rm = replica_manager
        self.config = config  # dynamic broker config (offsets.commit.timeout.ms)

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                     producer_epoch: int = -1, transactional: bool = False, required_acks: int = -1) -> int:
        rm = self.rm
        tp = (OFFSETS_TOPIC, partition)
        # offsets.topic.compression.codec (Kafka's offsetsTopicCompressionType): commits and group metadata.
        batch = build_batch([NewRecord(k, v) for k, v in records], producer_id=producer_id,
                            producer_epoch=producer_epoch, base_sequence=0 if producer_id >= 0 else -1,
                            is_transactional=transactional,
                            compression=self.config().get("offsets.topic.compression.codec"))
        # A TxnOffsetCommit's guards (KIP-890), set by the group coordinator; None: not verifying.
        guards = REQUEST_VERIFICATION_GUARDS.get() if transactional else None
        try:
            if guards is not None:
                # Checked here, with no await before the append: a marker cannot come in between.
                require_verified(rm.leader_partition(tp).log, producer_id, guards.get(tp))
            info = rm.append_internal(tp, memoryview(bytearray(batch)), required_acks)
        except Exception as e:
            code: Any = getattr(e, "code", None) or getattr(e, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
            raise KafkaError(int(code), str(e)) from None
        if required_acks == -1:
            timeout_s = self.config().get("offsets.commit.timeout.ms") / 1000.0
            code = await rm.wait_for_hw(tp, info.last_offset + 1, timeout_s)
            if code != ErrorCode.NONE:
                raise KafkaError(int(code))
        return info.first_offset

    def read_all(self, partition: int) -> Iterator[LogEntry]:
        p = self.rm.partitions.get((OFFSETS_TOPIC, partition))
        if p is None:
            return
        lg = p.log
        for raw in lg.batches(lg.log_start_offset, lg.log_end_offset):
            for batch in iter_batches(raw):
                yield from _entries(batch)


def _entries(batch: BatchView) -> Iterator[LogEntry]:
    for rec in batch.records():
        control = parse_control_record(rec)[0].lower() if batch.is_control else None
        yield LogEntry(rec.offset, rec.key, rec.value, batch.producer_id, batch.is_transactional, control)


class GroupHandlers:
    """FindCoordinator (creating the internal topics on first use) and the group coordinator's
    ``__consumer_offsets`` leadership (a LeadershipListener of the replica manager)."""

    def __init__(self, coordinator: GroupCoordinator, replica_manager: ReplicaManager, metadata: MetadataCache,
                 config: Callable[[], BrokerConfig], create_topic: CreateTopic,
                 txn_coordinator: Callable[[], TransactionCoordinator | None],
                 auth: RequestAuthorizer = ALLOW_ALL, zk_offsets: ZkConsumerOffsets | None = None,
                 verifier: TxnVerifier | None = None) -> None:
        self.auth = auth
        self.verifier = verifier  # KIP-890 for TxnOffsetCommit: the produce path's verifier
        self.zk_offsets = zk_offsets  # OffsetCommit/OffsetFetch v0 (see zk_offsets_of)
        self.coordinator = coordinator
        self.rm = replica_manager
        self.metadata = metadata
        self.config = config
        self.create_topic = create_topic  # AdminHandlers.create_topic
        self.txn_coordinator = txn_coordinator  # built after this object
        self._last_internal_topic_warning = -1e9

    async def ensure_internal_topic(self, topic: str) -> ErrorCode:
        """Create ``__consumer_offsets`` / ``__transaction_state`` on first use, like Kafka."""
        if topic in self.metadata.topics:
            return ErrorCode.NONE
        parts, rf, configs = internal_topic_spec(self.config(), topic)
        live = len(self.metadata.brokers)
        if live < rf:
            # Clients retry FindCoordinator every ~100 ms: say it once a minute. No live broker at all
            # means this broker has not heard from the controller yet (it is starting): not worth a word.
            now = time.monotonic()
            if live > 0 and now - self._last_internal_topic_warning > 60.0:
                self._last_internal_topic_warning = now
                log.warning("cannot create %s yet: %d alive brokers, replication factor %d needed",
                            topic, live, rf)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        code, msg = await self.create_topic(topic, parts, rf, None, configs, validate_only=False)
        if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.warning("creating %s failed: %s %s", topic, code.name, msg or "")
        return ErrorCode.COORDINATOR_NOT_AVAILABLE

    def _coordinator_for(self, key: str, key_type: int, listener: str) -> tuple[ErrorCode, int, str, int]:
        topic = OFFSETS_TOPIC if key_type == KEY_TYPE_GROUP else TXN_TOPIC
        info = self.metadata.topics.get(topic)
        if info is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        if key_type == KEY_TYPE_GROUP:
            partition = self.coordinator.partition_for(key)
        else:
            txn = self.txn_coordinator()
            if txn is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
            partition = txn.partition_for(key)
        p = info.partitions.get(partition)
        if p is None or p.leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        ep = self.metadata.endpoint(p.leader, listener)
        if ep is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return ErrorCode.NONE, p.leader, ep[0], ep[1]

    async def find_coordinator(self, conn: Connection, req: Request) -> Any:
        b, v = req.body, req.api_version
        keys = list(b.coordinator_keys) if v >= 4 else [b.key]
        key_type = b.key_type if v >= 1 else KEY_TYPE_GROUP
        results = []
        for key in keys:
            if key_type == KEY_TYPE_GROUP and not self.auth.authorize(conn, req, AclOperation.DESCRIBE, GROUP, key):
                code, node, host, port = ErrorCode.GROUP_AUTHORIZATION_FAILED, -1, "", -1
            elif key_type == KEY_TYPE_TRANSACTION and not self.auth.authorize(conn, req, AclOperation.DESCRIBE,
                                                                              ResourceType.TRANSACTIONAL_ID, key):
                code, node, host, port = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, "", -1
            elif key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
                code, node, host, port = ErrorCode.INVALID_REQUEST, -1, "", -1
            elif key_type == KEY_TYPE_TRANSACTION and not key:
                code, node, host, port = ErrorCode.INVALID_REQUEST, -1, "", -1
            else:
                topic = OFFSETS_TOPIC if key_type == KEY_TYPE_GROUP else TXN_TOPIC
                code = await self.ensure_internal_topic(topic)
                if code == ErrorCode.NONE:
                    code, node, host, port = self._coordinator_for(key, key_type, conn.listener)
                else:
                    node, host, port = -1, "", -1
            results.append((key, code, node, host, port))
        if v >= 4:
            return _FC(coordinators=[_FC.Coordinator(key=k, node_id=n, host=h, port=p, error_code=c)
                                     for k, c, n, h, p in results])
        _k, c, n, h, p = results[0]
        return _FC(error_code=c, node_id=n, host=h, port=p)

    async def on_leadership_change(self, became_leader: list[tuple[str, int]],
                                   became_follower: list[tuple[str, int, int]]) -> None:
        for topic, partition in became_leader:
            if topic == OFFSETS_TOPIC:
                p = self.rm.partitions.get((topic, partition))
                epoch = p.leader_epoch if p is not None else None
                asyncio.get_running_loop().create_task(self.coordinator.load_partition(partition, epoch))
        for topic, partition, _leader in became_follower:
            if topic == OFFSETS_TOPIC:
                self.coordinator.unload_partition(partition)


# ------------------------------------------------------------------------------------------------
# The group APIs on the wire


def _normalize_host(host: str) -> str:
    # Kafka reports a member's host as Java's InetAddress.toString(), e.g. "/127.0.0.1".
    return host if host.startswith("/") else "/" + host


class GroupApis:
    """The group APIs' wire translation: request bodies -> ``GroupCoordinator`` calls -> response bodies.

    Each ``handle_*`` coroutine takes a decoded request body and its version and returns the response
    body built with the compiled message type of that version; version differences (fields that
    exist only in some versions, errors reported differently by old versions) are settled here.
    """

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    def _split_known_partitions(self, topics: Iterable[Any], partitions_of: Callable[[Any], Iterable[int]]
                                ) -> tuple[list[TopicPartition], dict[TopicPartition, int]]:
        """Requested partitions in order, and UNKNOWN_TOPIC_OR_PARTITION for those the cluster lacks."""
        topic_exists = self.coordinator.topic_exists
        ordered: dict[TopicPartition, None] = {}
        unknown: dict[TopicPartition, int] = {}
        for t in topics:
            for p in partitions_of(t):
                tp = (t.name, p)
                ordered[tp] = None
                if topic_exists is not None and not topic_exists(t.name, p):
                    unknown[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
        return list(ordered), unknown

    @staticmethod
    def _by_topic(ordered: list[TopicPartition], errors: Mapping[TopicPartition, int]
                  ) -> list[tuple[str, list[tuple[int, int]]]]:
        out: dict[str, list[tuple[int, int]]] = {}
        for tp in ordered:
            out.setdefault(tp[0], []).append((tp[1], int(errors[tp])))
        return list(out.items())

    async def handle_join_group(self, req: Struct, version: int, client_id: str | None, client_host: str) -> Struct:
        r: Any = req
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[JoinResult] = loop.create_future()

        def callback(result: JoinResult) -> None:
            if not fut.done():
                fut.set_result(result)

        session_timeout = r.session_timeout_ms
        rebalance_timeout = session_timeout if version == 0 else r.rebalance_timeout_ms
        instance_id = r.group_instance_id if version >= 5 else None
        protocols = [(p.name, bytes(p.metadata)) for p in r.protocols]
        if r.reason:
            log.debug("group %s: JoinGroup from %s, reason: %s", r.group_id, r.member_id, r.reason)
        self.coordinator.join_group(r.group_id, r.member_id, instance_id, version >= 4 and instance_id is None, version >= 9,
                         client_id or "", _normalize_host(client_host), rebalance_timeout, session_timeout,
                         r.protocol_type, protocols, callback)
        result = await fut
        return self._join_response(result, version)

    @staticmethod
    def _join_response(result: JoinResult, version: int) -> Struct:
        mt: Any = response_type(ApiKey.JOIN_GROUP)
        protocol_name = result.protocol_name
        if version < 7 and protocol_name is None:
            protocol_name = ""
        elif version >= 7 and protocol_name == "":
            protocol_name = None
        return mt(error_code=int(result.error), generation_id=result.generation_id,
                  protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader_id,
                  skip_assignment=result.skip_assignment, member_id=result.member_id,
                  members=[mt.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
                           for m, i, meta in result.members])

    async def handle_sync_group(self, req: Struct, version: int, client_id: str | None = None,
                                client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.SYNC_GROUP)
        if version >= 5 and (r.protocol_type is None or r.protocol_name is None):
            return mt(error_code=E.INCONSISTENT_GROUP_PROTOCOL, assignment=b"")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[SyncResult] = loop.create_future()

        def callback(result: SyncResult) -> None:
            if not fut.done():
                fut.set_result(result)

        assignment: dict[str, bytes] = {}
        for a in r.assignments:
            assignment[a.member_id] = bytes(a.assignment)
        instance_id = r.group_instance_id if version >= 3 else None
        protocol_type = r.protocol_type if version >= 5 else None
        protocol_name = r.protocol_name if version >= 5 else None
        self.coordinator.sync_group(r.group_id, r.generation_id, r.member_id, protocol_type, protocol_name, instance_id,
                         assignment, callback)
        result = await fut
        return mt(error_code=int(result.error), protocol_type=result.protocol_type,
                  protocol_name=result.protocol_name, assignment=result.assignment)

    async def handle_heartbeat(self, req: Struct, version: int, client_id: str | None = None,
                               client_host: str | None = None) -> Struct:
        r: Any = req
        instance_id = r.group_instance_id if version >= 3 else None
        error = self.coordinator.heartbeat(r.group_id, r.member_id, instance_id, r.generation_id)
        return response_type(ApiKey.HEARTBEAT)(error_code=int(error))

    async def handle_leave_group(self, req: Struct, version: int, client_id: str | None = None,
                                 client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.LEAVE_GROUP)
        leaving: list[tuple[str, str | None, str | None]]
        if version < 3:
            leaving = [(r.member_id, None, None)]
        else:
            leaving = [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None) for m in r.members]
        top, members = self.coordinator.leave_group(r.group_id, leaving)
        if version < 3:
            code = top if top != E.NONE else next((e for _, _, e in members if e != E.NONE), E.NONE)
            return mt(error_code=int(code))
        return mt(error_code=int(top), members=[
            mt.MemberResponse(member_id=m, group_instance_id=i, error_code=int(e)) for m, i, e in members])

    async def handle_offset_commit(self, req: Struct, version: int, client_id: str | None = None,
                                   client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.OFFSET_COMMIT)
        now = self.coordinator.clock.now_ms()
        retention = r.retention_time_ms if 2 <= version <= 4 else -1
        expire = None if retention == -1 else now + retention
        ordered, errors = self._split_known_partitions(r.topics, lambda t: [p.partition_index for p in t.partitions])
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for t in r.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp in errors:
                    continue
                # v1 carries the commit timestamp (-1: now), as Kafka's createOffsetAndMetadata reads it.
                committed_at = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now
                offsets[tp] = OffsetAndMetadata(
                    p.committed_offset, p.committed_leader_epoch if version >= 6 else -1,
                    "" if p.committed_metadata is None else p.committed_metadata, committed_at, expire)
        if offsets:
            instance_id = r.group_instance_id if version >= 7 else None
            errors.update(await self.coordinator.commit_offsets(r.group_id, r.member_id, instance_id,
                                                     r.generation_id_or_member_epoch, offsets))
        return mt(topics=[mt.OffsetCommitResponseTopic(name=name, partitions=[
            mt.OffsetCommitResponsePartition(partition_index=p, error_code=e) for p, e in parts])
            for name, parts in self._by_topic(ordered, errors)])

    async def handle_txn_offset_commit(self, req: Struct, version: int, client_id: str | None = None,
                                       client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.TXN_OFFSET_COMMIT)
        now = self.coordinator.clock.now_ms()
        ordered, errors = self._split_known_partitions(r.topics, lambda t: [p.partition_index for p in t.partitions])
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for t in r.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp not in errors:
                    offsets[tp] = OffsetAndMetadata(
                        p.committed_offset, p.committed_leader_epoch if version >= 2 else -1,
                        "" if p.committed_metadata is None else p.committed_metadata, now, None)
        if offsets:
            generation = r.generation_id if version >= 3 else NO_GENERATION
            member_id = r.member_id if version >= 3 else UNKNOWN_MEMBER_ID
            instance_id = r.group_instance_id if version >= 3 else None
            results = await self.coordinator.txn_commit_offsets(r.group_id, r.producer_id, r.producer_epoch, member_id,
                                                     instance_id, generation, offsets,
                                                     transactional_id=r.transactional_id, version=version)
            if version < 2:
                # Clients before 2.0 could crash on COORDINATOR_LOAD_IN_PROGRESS here (KAFKA-7296).
                results = {tp: (E.COORDINATOR_NOT_AVAILABLE if e == E.COORDINATOR_LOAD_IN_PROGRESS else e)
                           for tp, e in results.items()}
            errors.update(results)
        return mt(topics=[mt.TxnOffsetCommitResponseTopic(name=name, partitions=[
            mt.TxnOffsetCommitResponsePartition(partition_index=p, error_code=e) for p, e in parts])
            for name, parts in self._by_topic(ordered, errors)])

    async def handle_offset_fetch(self, req: Struct, version: int, client_id: str | None = None,
                                  client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.OFFSET_FETCH)
        require_stable = bool(r.require_stable) if version >= 7 else False
        if version >= 8:
            groups = []
            for g in r.groups:
                tps = None if g.topics is None else [(t.name, p) for t in g.topics for p in t.partition_indexes]
                error, rows = self.coordinator.fetch_offsets(g.group_id, require_stable, tps)
                topics: dict[str, list[Any]] = {}
                for (topic, part), off, epoch, meta, perr in rows:
                    topics.setdefault(topic, []).append(mt.OffsetFetchResponsePartitions(
                        partition_index=part, committed_offset=off, committed_leader_epoch=epoch, metadata=meta,
                        error_code=perr))
                groups.append(mt.OffsetFetchResponseGroup(
                    group_id=g.group_id, error_code=int(error),
                    topics=[mt.OffsetFetchResponseTopics(name=n, partitions=ps) for n, ps in topics.items()]))
            return mt(groups=groups)
        tps = None if r.topics is None else [(t.name, p) for t in r.topics for p in t.partition_indexes]
        error, rows = self.coordinator.fetch_offsets(r.group_id, require_stable, tps)
        if error != E.NONE and version < 2 and tps is not None:
            # Version 1 has no top-level error code: report it on every requested partition.
            rows = [(tp, INVALID_OFFSET, -1, "", error) for tp in tps]
        topics = {}
        for (topic, part), off, epoch, meta, perr in rows:
            topics.setdefault(topic, []).append(mt.OffsetFetchResponsePartition(
                partition_index=part, committed_offset=off, committed_leader_epoch=epoch, metadata=meta,
                error_code=perr))
        return mt(error_code=int(error),
                  topics=[mt.OffsetFetchResponseTopic(name=n, partitions=ps) for n, ps in topics.items()])

    async def handle_list_groups(self, req: Struct, version: int, client_id: str | None = None,
                                 client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.LIST_GROUPS)
        states = {s.lower() for s in (r.states_filter or [])} if version >= 4 else set()
        types = {t.lower() for t in (r.types_filter or [])} if version >= 5 else set()
        error, groups = self.coordinator.list_groups(states, types)
        return mt(error_code=error, groups=[
            mt.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state.value,
                           group_type=GROUP_TYPE_CLASSIC) for g in groups])

    async def handle_describe_groups(self, req: Struct, version: int, client_id: str | None = None,
                                     client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.DESCRIBE_GROUPS)
        return mt(groups=[self._describe_group(mt, gid) for gid in r.groups])

    def _describe_group(self, mt: Any, group_id: str) -> Any:
        error, group = self.coordinator.describe_group(group_id)
        if error != ErrorCode.NONE:
            return mt.DescribedGroup(error_code=error, group_id=group_id, group_state="", protocol_type="",
                                     protocol_data="", members=[])
        if group is None:
            return mt.DescribedGroup(error_code=0, group_id=group_id, group_state=GroupState.DEAD.value,
                                     protocol_type="", protocol_data="", members=[])
        stable = group.is_state(GroupState.STABLE) and group.protocol_name is not None
        members = []
        for m in group.members.values():
            members.append(mt.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if stable else b"",  # type: ignore[arg-type]
                member_assignment=m.assignment if stable else b""))
        return mt.DescribedGroup(
            error_code=0, group_id=group_id, group_state=group.state.value, protocol_type=group.protocol_type or "",
            protocol_data=group.protocol_name if stable else "", members=members,
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

    async def handle_delete_groups(self, req: Struct, version: int, client_id: str | None = None,
                                   client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.DELETE_GROUPS)
        results = await self.coordinator.delete_groups(list(dict.fromkeys(r.groups_names)))
        return mt(results=[mt.DeletableGroupResult(group_id=g, error_code=int(e)) for g, e in results.items()])

    async def handle_offset_delete(self, req: Struct, version: int, client_id: str | None = None,
                                   client_host: str | None = None) -> Struct:
        r: Any = req
        mt: Any = response_type(ApiKey.OFFSET_DELETE)
        ordered, errors = self._split_known_partitions(r.topics, lambda t: [p.partition_index for p in t.partitions])
        wanted = [tp for tp in ordered if tp not in errors]
        group_error, results = await self.coordinator.delete_offsets(r.group_id, wanted)
        if group_error != E.NONE:
            return mt(error_code=int(group_error), topics=[])
        errors.update(results)
        return mt(error_code=0, topics=[mt.OffsetDeleteResponseTopic(name=name, partitions=[
            mt.OffsetDeleteResponsePartition(partition_index=p, error_code=e) for p, e in parts])
            for name, parts in self._by_topic(ordered, errors)])


async def start_group_coordinator(config: Callable[[], BrokerConfig], broker_id: int, metadata: MetadataCache,
                                  replica_manager: ReplicaManager) -> GroupCoordinator:
    """The broker's group coordinator on ``__consumer_offsets`` (not yet following leadership: see
    GroupHandlers)."""

    def topic_exists(topic: str, partition: int) -> bool:
        return metadata.partition(topic, partition) is not None

    coordinator = GroupCoordinator(ReplicatedOffsetsLog(replica_manager, config), config(), broker_id=broker_id,
                                   topic_exists=topic_exists)
    await coordinator.start()
    return coordinator


def zk_offsets_of(h: GroupHandlers) -> ZkConsumerOffsets | None:
    """The ZooKeeper offset store of OffsetCommit/OffsetFetch v0: the one given, else one on the
    ZooKeeper client of the admin handlers whose ``create_topic`` the group handlers were given."""
    if h.zk_offsets is not None:
        return h.zk_offsets
    admin = getattr(h.create_topic, "__self__", None)
    zk, zk_call = getattr(admin, "zk", None), getattr(admin, "zk_call", None)
    if zk is None or zk_call is None:
        return None
    h.zk_offsets = ZkConsumerOffsets(zk, zk_call, h.metadata, lambda: h.config().get("offset.metadata.max.bytes"),
                                     h.auth)
    return h.zk_offsets


async def consumer_group_heartbeat(conn: Connection, req: Request) -> Any:
    return response_type(ApiKey.CONSUMER_GROUP_HEARTBEAT)(error_code=E.UNSUPPORTED_VERSION)


async def consumer_group_describe(conn: Connection, req: Request) -> Any:
    mt: Any = response_type(ApiKey.CONSUMER_GROUP_DESCRIBE)
    r: Any = req.body
    return mt(groups=[mt.DescribedGroup(group_id=g, error_code=E.UNSUPPORTED_VERSION) for g in r.group_ids])


def _version_zero_to(zk_handler: Any, handler: Any) -> Any:
    async def dispatch(conn: Connection, req: Request) -> Any:
        if req.api_version == 0:
            return await zk_handler(conn, req)
        return await handler(conn, req)
    return dispatch


def register_group_apis(apis: KafkaApis, h: GroupHandlers) -> None:
    """FindCoordinator and the group APIs (authorized by AuthorizedGroupApis, translated by GroupApis)."""
    _register_group_apis(apis, h)
    if h.verifier is not None:
        h.coordinator.verify_txn_offsets = TxnOffsetsVerification(
            h.rm, lambda: h.verifier, lambda: bool(h.config().get(VERIFICATION_ENABLE)))
    apis.register(ApiKey.CONSUMER_GROUP_HEARTBEAT, consumer_group_heartbeat)
    apis.register(ApiKey.CONSUMER_GROUP_DESCRIBE, consumer_group_describe)
    zk_offsets = zk_offsets_of(h)
    if zk_offsets is not None:
        apis.register(ApiKey.OFFSET_COMMIT, _version_zero_to(zk_offsets.offset_commit, apis.handlers[ApiKey.OFFSET_COMMIT]))
        apis.register(ApiKey.OFFSET_FETCH, _version_zero_to(zk_offsets.offset_fetch, apis.handlers[ApiKey.OFFSET_FETCH]))


def _register_group_apis(apis: KafkaApis, h: GroupHandlers) -> None:
    from broker.group_authorization import AuthorizedGroupApis

    wire = GroupApis(h.coordinator)
    authorized = AuthorizedGroupApis(wire, h.auth)

    def route(method: Any) -> Any:
        async def handler(conn: Connection, req: Request) -> Any:
            return await method(req.body, req.api_version, req.header.client_id, conn.client_host)
        return handler

    apis.register(ApiKey.FIND_COORDINATOR, h.find_coordinator)
    # DescribeGroups always goes through the authorization layer: it reports authorized operations
    # (every group operation when there is no authorizer, as Kafka).
    apis.register(ApiKey.DESCRIBE_GROUPS, authorized.describe_groups)
    if not h.auth.enabled:
        apis.register(ApiKey.JOIN_GROUP, route(wire.handle_join_group))
        apis.register(ApiKey.SYNC_GROUP, route(wire.handle_sync_group))
        apis.register(ApiKey.HEARTBEAT, route(wire.handle_heartbeat))
        apis.register(ApiKey.LEAVE_GROUP, route(wire.handle_leave_group))
        apis.register(ApiKey.OFFSET_COMMIT, route(wire.handle_offset_commit))
        apis.register(ApiKey.OFFSET_FETCH, route(wire.handle_offset_fetch))
        apis.register(ApiKey.LIST_GROUPS, route(wire.handle_list_groups))
        apis.register(ApiKey.DELETE_GROUPS, route(wire.handle_delete_groups))
        apis.register(ApiKey.OFFSET_DELETE, route(wire.handle_offset_delete))
        apis.register(ApiKey.TXN_OFFSET_COMMIT, route(wire.handle_txn_offset_commit))
        return
    apis.register(ApiKey.JOIN_GROUP, authorized.join_group)
    apis.register(ApiKey.SYNC_GROUP, authorized.sync_group)
    apis.register(ApiKey.HEARTBEAT, authorized.heartbeat)
    apis.register(ApiKey.LEAVE_GROUP, authorized.leave_group)
    apis.register(ApiKey.OFFSET_COMMIT, authorized.offset_commit)
    apis.register(ApiKey.OFFSET_FETCH, authorized.offset_fetch)
    apis.register(ApiKey.LIST_GROUPS, authorized.list_groups)
    apis.register(ApiKey.DELETE_GROUPS, authorized.delete_groups)
    apis.register(ApiKey.OFFSET_DELETE, authorized.offset_delete)
    apis.register(ApiKey.TXN_OFFSET_COMMIT, authorized.txn_offset_commit)
