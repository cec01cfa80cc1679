"""The transaction coordinator's broker side: ``__transaction_state`` on the broker's own partition
logs, WriteTxnMarkers to partition leaders, and loading/unloading on leadership changes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from broker.security.inter_broker import inter_broker_security
from broker.txn_coordinator import TP, TXN_TOPIC, TransactionCoordinator, TxnCoordinatorConfig
from protocol.client_connection import PLAINTEXT, ConnectionSecurity
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.producer_ids import ProducerIdManager
    from broker.replica_manager import ReplicaManager
    from broker.txn_markers import TxnMarkerWriter
    from config.registry import BrokerConfig


class ReplicatedTxnLog:
    """``__transaction_state`` on the broker's own partition logs (leader appends, acks=all)."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.rm = replica_manager

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], timeout_s: float) -> ErrorCode:
        from broker.partition import PartitionError
        from protocol.records import NewRecord, build_batch

        rm = self.rm
        tp = (TXN_TOPIC, partition)
        now = int(time.time() * 1000)
        batch = build_batch([NewRecord(k, v, now) for k, v in records])
        try:
            info = rm.append_internal(tp, memoryview(bytearray(batch)))  # below min.insync.replicas: refused
        except PartitionError as e:
            return e.code
        return await rm.wait_for_hw(tp, info.last_offset + 1, timeout_s)

    def read(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        from protocol.records import iter_batches

        p = self.rm.partitions.get((TXN_TOPIC, partition))
        if p is None:
            return
        lg = p.log
        end = lg.log_end_offset
        if lg.log_start_offset >= end:
            return
        for raw in lg.batches(lg.log_start_offset, end):
            for batch in iter_batches(memoryview(raw)):
                if batch.is_control:
                    continue
                for rec in batch.records():
                    yield rec.key, rec.value


class BrokerMarkerSender:
    """WriteTxnMarkers to partition leaders: written directly when we lead, else over the inter-broker listener."""

    def __init__(self, broker_id: int, metadata: MetadataCache, inter_broker_listener: str, request_timeout_ms: int,
                 local: TxnMarkerWriter, security: ConnectionSecurity = PLAINTEXT) -> None:
        from controller.network_client import ConnectionPool, ConnectionSettings

        self.broker_id = broker_id
        self.metadata = metadata
        self.inter_broker_listener = inter_broker_listener
        self.local = local  # markers for partitions this broker leads are written directly
        # Each WriteTxnMarkers waits on the leader for acks=all, and a broker serves a connection's
        # requests one at a time: markers of concurrent transactions use up to 4 connections per
        # leader instead of queueing behind each other.
        self._pool = ConnectionPool(ConnectionSettings(
            client_id=f"txn-coordinator-{broker_id}", negotiate_versions=False, max_in_flight=1,
            request_timeout_s=request_timeout_ms / 1000.0 + 5.0, security=security), connections_per_node=4)

    def leader_of(self, tp: TP) -> int | None:
        md = self.metadata
        info = md.partition(*tp)
        if info is None:
            # Only a cache that knows the cluster may declare a partition gone; else wait for metadata.
            return None if md.brokers else -1
        if info.leader < 0 or not md.alive(info.leader):
            return -1
        return info.leader

    async def write_markers(self, broker_id: int, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: list[TP]) -> dict[TP, ErrorCode]:
        if broker_id == self.broker_id:
            return await self.local.write_markers(producer_id, producer_epoch, commit, coordinator_epoch, partitions)
        return await self._remote(broker_id, producer_id, producer_epoch, commit, coordinator_epoch, partitions)

    async def _remote(self, broker_id: int, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, partitions: list[TP]) -> dict[TP, ErrorCode]:
        from protocol.api_versions import ApiKey
        from protocol.messages import request_type

        ep = self.metadata.endpoint(broker_id, self.inter_broker_listener)
        if ep is None:
            return dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        mt = request_type(ApiKey.WRITE_TXN_MARKERS)
        topics: dict[str, list[int]] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        body = mt(markers=[mt.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[mt.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
            coordinator_epoch=coordinator_epoch)])
        resp = await self._pool.request(ep[0], ep[1], ApiKey.WRITE_TXN_MARKERS, body, version=1)
        out: dict[TP, ErrorCode] = {}
        for m in resp.markers:
            if m.producer_id != producer_id:
                continue
            for t in m.topics:
                for pr in t.partitions:
                    out[(t.name, pr.partition_index)] = ErrorCode(pr.error_code)
        return out

    def close(self) -> None:
        self._pool.close()


class TxnLeadershipListener:
    """Loads a ``__transaction_state`` partition's transactions when this broker becomes its leader,
    and unloads them when it stops leading it (ReplicaManager's LeadershipListener)."""

    def __init__(self, coordinator: TransactionCoordinator, replica_manager: ReplicaManager) -> None:
        self.coordinator = coordinator
        self.replica_manager = replica_manager

    async def on_leadership_change(self, became_leader: list[tuple[str, int]],
                                   became_follower: list[tuple[str, int, int]]) -> None:
        for topic, partition in became_leader:
            if topic == TXN_TOPIC:
                p = self.replica_manager.partitions.get((topic, partition))
                if p is not None:
                    self.coordinator.start_loading(partition, p.leader_epoch)
        for topic, partition, _leader in became_follower:
            if topic == TXN_TOPIC:
                self.coordinator.unload_partition(partition)


async def start_transaction_coordinator(config: BrokerConfig, broker_id: int, metadata: MetadataCache,
                                        replica_manager: ReplicaManager, producer_ids: ProducerIdManager,
                                        markers: TxnMarkerWriter, inter_broker_listener: str) -> TransactionCoordinator:
    """Create the broker's transaction coordinator and follow ``__transaction_state`` leadership."""

    def partition_count() -> int | None:
        info = metadata.topics.get(TXN_TOPIC)
        return len(info.partitions) if info is not None and info.partitions else None

    sender = BrokerMarkerSender(broker_id, metadata, inter_broker_listener, config.get("request.timeout.ms"), markers,
                                inter_broker_security(config, inter_broker_listener))
    coordinator = TransactionCoordinator(ReplicatedTxnLog(replica_manager), sender, producer_ids.generate,
                                         TxnCoordinatorConfig.from_config(config), partition_count=partition_count)
    coordinator.sender = sender  # type: ignore[attr-defined]
    await coordinator.start()
    replica_manager.add_leadership_listener(TxnLeadershipListener(coordinator, replica_manager))
    return coordinator


async def stop_transaction_coordinator(coordinator: TransactionCoordinator) -> None:
    await coordinator.close()
    sender = getattr(coordinator, "sender", None)
    if sender is not None:
        sender.close()
