"""Consumer groups on this broker: FindCoordinator, the group APIs, and ``__consumer_offsets``.

The group coordinator for a group is the leader of the ``__consumer_offsets`` partition its id hashes
to. ``__consumer_offsets`` is created on first use (FindCoordinator), compacted, with
``offsets.topic.num.partitions`` partitions and ``offsets.topic.replication.factor`` replicas; as in
Kafka, creation fails (COORDINATOR_NOT_AVAILABLE) while fewer brokers are alive than that factor.
When this broker becomes leader of one of its partitions the coordinator loads the groups from it;
when it stops leading one, they are unloaded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from broker.group_coordinator import GroupCoordinator, LogEntry
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import response_type
from protocol.records import BatchView, NewRecord, build_batch, iter_batches, parse_control_record

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.connection import Connection
    from protocol.messages import Request

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1
_FC = response_type(ApiKey.FIND_COORDINATOR)


class ReplicatedOffsetsLog:
    """The coordinator's view of the ``__consumer_offsets`` partitions, on the real partition logs."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                     producer_epoch: int = -1, transactional: bool = False, required_acks: int = -1) -> int:
        rm = self.broker.replica_manager
        assert rm is not None
        tp = (OFFSETS_TOPIC, partition)
        batch = build_batch([NewRecord(k, v) for k, v in records], producer_id=producer_id,
                            producer_epoch=producer_epoch, base_sequence=0 if producer_id >= 0 else -1,
                            is_transactional=transactional)
        try:
            info = rm.append_internal(tp, memoryview(bytearray(batch)))
        except Exception as e:
            code = getattr(e, "code", None) or getattr(e, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
            raise KafkaError(int(code), str(e)) from None
        if required_acks == -1:
            timeout_s = self.broker.config.get("offsets.commit.timeout.ms") / 1000.0
            code = await rm.wait_for_hw(tp, info.last_offset + 1, timeout_s)
            if code != ErrorCode.NONE:
                raise KafkaError(int(code))
        return info.first_offset

    def read_all(self, partition: int) -> Iterator[LogEntry]:
        rm = self.broker.replica_manager
        assert rm is not None
        p = rm.partitions.get((OFFSETS_TOPIC, partition))
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
    def __init__(self, broker: Broker, coordinator: GroupCoordinator) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self._last_internal_topic_warning = -1e9

    async def ensure_internal_topic(self, topic: str) -> ErrorCode:
        """Create ``__consumer_offsets`` / ``__transaction_state`` on first use, like Kafka."""
        if topic in self.broker.metadata.topics:
            return ErrorCode.NONE
        cfg = self.broker.config
        if topic == OFFSETS_TOPIC:
            parts, rf = cfg.get("offsets.topic.num.partitions"), cfg.get("offsets.topic.replication.factor")
            configs = {"cleanup.policy": "compact", "compression.type": "producer",
                       "segment.bytes": str(cfg.get("offsets.topic.segment.bytes"))}
        else:
            parts, rf = cfg.get("transaction.state.log.num.partitions"), cfg.get("transaction.state.log.replication.factor")
            configs = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                       "min.insync.replicas": str(cfg.get("transaction.state.log.min.isr")),
                       "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes"))}
        live = len(self.broker.metadata.brokers)
        if live < rf:
            # Clients retry FindCoordinator every ~100 ms: say it once a minute. No live broker at all
            # means this broker has not heard from the controller yet (it is starting): not worth a word.
            now = time.monotonic()
            if live > 0 and now - self._last_internal_topic_warning > 60.0:
                self._last_internal_topic_warning = now
                log.warning("cannot create %s yet: %d alive brokers, replication factor %d needed",
                            topic, live, rf)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        admin = self.broker.services["admin"]
        code, msg = await admin.create_topic(topic, parts, rf, None, configs, validate_only=False)
        if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.warning("creating %s failed: %s %s", topic, code.name, msg or "")
        return ErrorCode.COORDINATOR_NOT_AVAILABLE

    def _coordinator_for(self, key: str, key_type: int, listener: str) -> tuple[ErrorCode, int, str, int]:
        topic = OFFSETS_TOPIC if key_type == KEY_TYPE_GROUP else TXN_TOPIC
        info = self.broker.metadata.topics.get(topic)
        if info is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        if key_type == KEY_TYPE_GROUP:
            partition = self.coordinator.partition_for(key)
        else:
            txn = self.broker.services.get("txn_coordinator")
            if txn is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
            partition = txn.partition_for(key)
        p = info.partitions.get(partition)
        if p is None or p.leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        ep = self.broker.metadata.endpoint(p.leader, listener)
        if ep is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return ErrorCode.NONE, p.leader, ep[0], ep[1]

    async def find_coordinator(self, conn: Connection, req: Request) -> Any:
        b, v = req.body, req.api_version
        keys = list(b.coordinator_keys) if v >= 4 else [b.key]
        key_type = b.key_type if v >= 1 else KEY_TYPE_GROUP
        results = []
        for key in keys:
            if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
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

    async def on_leadership(self, became_leader: list[tuple[str, int]],
                            became_follower: list[tuple[str, int, int]]) -> None:
        for topic, partition in became_leader:
            if topic == OFFSETS_TOPIC:
                p = self.broker.replica_manager.partitions.get((topic, partition))  # type: ignore[union-attr]
                epoch = p.leader_epoch if p is not None else None
                self.broker.loop.create_task(self.coordinator.load_partition(partition, epoch))  # type: ignore[union-attr]
        for topic, partition, _leader in became_follower:
            if topic == OFFSETS_TOPIC:
                self.coordinator.unload_partition(partition)


async def register(broker: Broker) -> None:
    rm = broker.replica_manager
    assert rm is not None

    def topic_exists(topic: str, partition: int) -> bool:
        return broker.metadata.partition(topic, partition) is not None

    coordinator = GroupCoordinator(ReplicatedOffsetsLog(broker), broker.config, broker_id=broker.broker_id,
                                   topic_exists=topic_exists)
    await coordinator.start()
    broker.services["group_coordinator"] = coordinator
    h = GroupHandlers(broker, coordinator)
    broker.services["groups"] = h
    broker.services.setdefault("on_leadership", []).append(h.on_leadership)

    def route(method: Any) -> Any:
        async def handler(conn: Connection, req: Request) -> Any:
            return await method(req.body, req.api_version, req.header.client_id, conn.client_host)
        return handler

    apis = broker.apis
    apis.register(ApiKey.FIND_COORDINATOR, h.find_coordinator)
    apis.register(ApiKey.JOIN_GROUP, route(coordinator.handle_join_group))
    apis.register(ApiKey.SYNC_GROUP, route(coordinator.handle_sync_group))
    apis.register(ApiKey.HEARTBEAT, route(coordinator.handle_heartbeat))
    apis.register(ApiKey.LEAVE_GROUP, route(coordinator.handle_leave_group))
    apis.register(ApiKey.OFFSET_COMMIT, route(coordinator.handle_offset_commit))
    apis.register(ApiKey.OFFSET_FETCH, route(coordinator.handle_offset_fetch))
    apis.register(ApiKey.LIST_GROUPS, route(coordinator.handle_list_groups))
    apis.register(ApiKey.DESCRIBE_GROUPS, route(coordinator.handle_describe_groups))
    apis.register(ApiKey.DELETE_GROUPS, route(coordinator.handle_delete_groups))
    apis.register(ApiKey.OFFSET_DELETE, route(coordinator.handle_offset_delete))
    apis.register(ApiKey.TXN_OFFSET_COMMIT, route(coordinator.handle_txn_offset_commit))
