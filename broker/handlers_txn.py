"""Producer ids and transactions: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, DescribeProducers, DescribeTransactions and ListTransactions.

The transactional APIs go to the transaction coordinator (``broker/txn_coordinator.py``); WriteTxnMarkers
to the partition side (``broker/txn_markers.py``); DescribeProducers reads the producer state of the
partitions this broker leads. Like Kafka, clients of old versions get INVALID_PRODUCER_EPOCH where
newer ones get PRODUCER_FENCED (InitProducerId below v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
below v2). TxnOffsetCommit is served by the group coordinator (``broker/handlers_group.py``).

Authorization, as Kafka 3.9's KafkaApis:

* InitProducerId: WRITE on the transactional id; without one (an idempotent producer) IDEMPOTENT_WRITE
  on the cluster, or WRITE on at least one topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
* AddPartitionsToTxn below v4 (clients): WRITE on the transactional id, then WRITE on each topic;
  internal topics are always refused there, with or without an authorizer, and any refused or unknown
  partition fails the whole transaction's request (OPERATION_NOT_ATTEMPTED for the others). v4 and
  above come from brokers: CLUSTER_ACTION on the cluster.
* AddOffsetsToTxn: WRITE on the transactional id, then READ on the group. EndTxn: WRITE on the id.
* WriteTxnMarkers: ALTER or CLUSTER_ACTION on the cluster.
* DescribeProducers: READ on each topic. DescribeTransactions: DESCRIBE on each transactional id,
  and only the partitions of topics the caller may DESCRIBE are listed. ListTransactions lists only
  the transactional ids the caller may DESCRIBE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.authorizer.api import AclOperation, ResourceType
from broker.request_authorization import ALLOW_ALL, RequestAuthorizer
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.group_coordinator import GroupCoordinator
    from broker.kafka_apis import KafkaApis
    from broker.metadata_cache import MetadataCache
    from broker.producer_ids import ProducerIdManager
    from broker.replica_manager import ReplicaManager
    from broker.txn_coordinator import TransactionCoordinator
    from broker.txn_markers import TxnMarkerWriter
    from protocol.messages import Request

_IPI = response_type(ApiKey.INIT_PRODUCER_ID)
_APT = response_type(ApiKey.ADD_PARTITIONS_TO_TXN)
_AOT = response_type(ApiKey.ADD_OFFSETS_TO_TXN)
_END = response_type(ApiKey.END_TXN)
_DP = response_type(ApiKey.DESCRIBE_PRODUCERS)
_DT = response_type(ApiKey.DESCRIBE_TRANSACTIONS)
_LT = response_type(ApiKey.LIST_TRANSACTIONS)

_WM = response_type(ApiKey.WRITE_TXN_MARKERS)

OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})
TXN_ID, TOPIC, GROUP = ResourceType.TRANSACTIONAL_ID, ResourceType.TOPIC, ResourceType.GROUP
_TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _fenced(code: ErrorCode, old_client: bool) -> ErrorCode:
    """Clients that predate PRODUCER_FENCED get INVALID_PRODUCER_EPOCH instead."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if old_client and code == ErrorCode.PRODUCER_FENCED else code


class TxnApis:
    """The producer-id and transaction APIs. The coordinators are accessors: this object is built
    before them (the transaction coordinator needs the producer id manager first)."""

    def __init__(self, producer_ids: ProducerIdManager, metadata: MetadataCache, replica_manager: ReplicaManager,
                 markers: TxnMarkerWriter, txn_coordinator: Callable[[], TransactionCoordinator | None],
                 group_coordinator: Callable[[], GroupCoordinator | None], auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.auth = auth
        self.pids = producer_ids
        self.metadata = metadata
        self.rm = replica_manager
        self.markers = markers
        self.coordinator = txn_coordinator
        self.group_coordinator = group_coordinator

    async def init_producer_id(self, conn: Connection, req: Request) -> Any:
        b, v = req.body, req.api_version
        auth = self.auth
        if b.transactional_id is not None:
            if not auth.authorize(conn, req, AclOperation.WRITE, TXN_ID, b.transactional_id):
                return _IPI(error_code=_TXN_DENIED, producer_id=-1, producer_epoch=-1)
        elif auth.enabled and not auth.authorize_cluster(conn, req, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False) \
                and not auth.authorize_by_resource_type(conn, req, AclOperation.WRITE, TOPIC):
            return _IPI(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
        if b.transactional_id is None:
            # Without a transactional id the request is always accepted, whatever its transaction timeout
            # (librdkafka's idempotent producer sends -1), and gets a fresh id with epoch 0, as in Kafka.
            pid = await self.pids.generate()
            return _IPI(error_code=0, producer_id=pid, producer_epoch=0)
        txn = self.coordinator()
        if txn is None:
            return _IPI(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
        pid_in = b.producer_id if v >= 3 else -1
        epoch_in = b.producer_epoch if v >= 3 else -1
        if pid_in == -1 and epoch_in == -1:
            expected = None
        elif pid_in == -1 or epoch_in == -1:
            return _IPI(error_code=ErrorCode.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
        else:
            expected = (pid_in, epoch_in)
        code, pid, epoch = await txn.init_producer_id(b.transactional_id, b.transaction_timeout_ms, expected)
        return _IPI(error_code=int(_fenced(code, v < 4)), producer_id=pid, producer_epoch=epoch)

    async def add_partitions_to_txn(self, conn: Connection, req: Request) -> Any:
        b, v = req.body, req.api_version
        txn = self.coordinator()
        if v < 4:
            topics = [(t.name, list(t.partitions)) for t in b.v3_and_below_topics]
            txn_id = b.v3_and_below_transactional_id
            if not self.auth.authorize(conn, req, AclOperation.WRITE, TXN_ID, txn_id):
                return _APT(results_by_topic_v3_and_below=self._results(
                    {(n, p): _TXN_DENIED for n, ps in topics for p in ps}))
            # Clients may not add internal topics (Kafka leaves them out of its WRITE check).
            writable = self.auth.filter_by_authorized(conn, req, AclOperation.WRITE, TOPIC,
                                                      (n for n, ps in topics for _ in ps if n not in INTERNAL_TOPICS))
            refused = {n for n, _ in topics if n not in writable}
            result = await self._add_partitions(txn, txn_id, b.v3_and_below_producer_id,
                                           b.v3_and_below_producer_epoch, topics, verify_only=False, old=v < 2,
                                           refused=refused)
            return _APT(results_by_topic_v3_and_below=result)
        if not self.auth.authorize_cluster(conn, req, AclOperation.CLUSTER_ACTION):
            # Kafka's getErrorResponse for v4+: the error at the top only.
            return _APT(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])
        results = []
        for t in b.transactions:
            topics = [(x.name, list(x.partitions)) for x in t.topics]
            res = await self._add_partitions(txn, t.transactional_id, t.producer_id, t.producer_epoch, topics,
                                        verify_only=bool(t.verify_only), old=False)
            results.append(_APT.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=res))
        return _APT(error_code=0, results_by_transaction=results)

    async def _add_partitions(self, txn: TransactionCoordinator | None, transactional_id: str, producer_id: int,
                              producer_epoch: int, topics: list[tuple[str, list[int]]], *, verify_only: bool,
                              old: bool, refused: frozenset[str] | set[str] = frozenset()) -> list[Any]:
        tps = [(name, p) for name, parts in topics for p in parts]
        errors: dict[tuple[str, int], ErrorCode] = {}
        unknown = {tp for tp in tps if self.metadata.partition(*tp) is None}
        if refused or unknown:
            # Any refused or unknown partition fails the whole request; the others were not attempted.
            errors = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] in refused
                      else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                      for tp in tps}
        elif txn is None:
            errors = dict.fromkeys(tps, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif verify_only:
            errors = txn.verify_partitions(transactional_id, producer_id, producer_epoch, tps)
        else:
            code = await txn.add_partitions(transactional_id, producer_id, producer_epoch, tps)
            errors = dict.fromkeys(tps, _fenced(code, old))
        return self._results(errors)

    @staticmethod
    def _results(errors: dict[tuple[str, int], ErrorCode]) -> list[Any]:
        by_topic: dict[str, list[Any]] = {}
        for (name, p), code in errors.items():
            by_topic.setdefault(name, []).append(
                _APT.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=int(code)))
        return [_APT.AddPartitionsToTxnTopicResult(name=n, results_by_partition=rs) for n, rs in by_topic.items()]

    async def add_offsets_to_txn(self, conn: Connection, req: Request) -> Any:
        b, v = req.body, req.api_version
        if not self.auth.authorize(conn, req, AclOperation.WRITE, TXN_ID, b.transactional_id):
            return _AOT(error_code=_TXN_DENIED)
        if not self.auth.authorize(conn, req, AclOperation.READ, GROUP, b.group_id):
            return _AOT(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        txn = self.coordinator()
        gc = self.group_coordinator()
        if txn is None or gc is None:
            return _AOT(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        tp = (OFFSETS_TOPIC, gc.partition_for(b.group_id))
        code = await txn.add_partitions(b.transactional_id, b.producer_id, b.producer_epoch, [tp])
        return _AOT(error_code=int(_fenced(code, v < 2)))

    async def end_txn(self, conn: Connection, req: Request) -> Any:
        b, v = req.body, req.api_version
        if not self.auth.authorize(conn, req, AclOperation.WRITE, TXN_ID, b.transactional_id):
            return _END(error_code=_TXN_DENIED)
        txn = self.coordinator()
        if txn is None:
            return _END(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        code = await txn.end_transaction(b.transactional_id, b.producer_id, b.producer_epoch, bool(b.committed))
        return _END(error_code=int(_fenced(code, v < 2)))

    async def write_txn_markers(self, conn: Connection, req: Request) -> Any:
        auth = self.auth
        if auth.enabled and not auth.authorize_cluster(conn, req, AclOperation.ALTER, log_if_denied=False) \
                and not auth.authorize_cluster(conn, req, AclOperation.CLUSTER_ACTION):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return _WM(markers=[_WM.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
                _WM.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                    _WM.WritableTxnMarkerPartitionResult(partition_index=p, error_code=code)
                    for p in t.partition_indexes]) for t in m.topics]) for m in req.body.markers])
        return await self.markers.handle_write_txn_markers(req.body)

    async def describe_producers(self, conn: Connection, req: Request) -> Any:
        rm = self.rm
        topics = []
        auth = self.auth
        for t in req.body.topics:
            parts = []
            readable = auth.authorize(conn, req, AclOperation.READ, TOPIC, t.name)
            for idx in t.partition_indexes:
                r = _DP.PartitionResponse(partition_index=idx, error_code=0, error_message=None, active_producers=[])
                parts.append(r)
                if not readable:
                    r.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                p = rm.partitions.get((t.name, idx))
                if p is None:
                    r.error_code = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if self.metadata.partition(t.name, idx)
                                    is None else ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    continue
                if not p.is_leader:
                    r.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    continue
                for pid, e in sorted(p.log.producer_state.producers.items()):
                    first = e.current_txn_first_offset
                    r.active_producers.append(_DP.ProducerState(
                        producer_id=pid, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                        last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                        current_txn_start_offset=first if first is not None else -1))
            topics.append(_DP.TopicResponse(name=t.name, partitions=parts))
        return _DP(topics=topics)

    async def describe_transactions(self, conn: Connection, req: Request) -> Any:
        txn = self.coordinator()
        states = []
        for tid in req.body.transactional_ids:
            st = _DT.TransactionState(error_code=0, transactional_id=tid, transaction_state="",
                                      transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                                      producer_epoch=-1, topics=[])
            states.append(st)
            if not self.auth.authorize(conn, req, AclOperation.DESCRIBE, TXN_ID, tid):
                st.error_code = _TXN_DENIED
                continue
            if txn is None:
                st.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                continue
            code, meta = txn.describe(tid)
            st.error_code = int(code)
            if meta is None:
                continue
            st.transaction_state = meta.state.kafka_name
            st.transaction_timeout_ms = meta.timeout_ms
            st.transaction_start_time_ms = meta.start_ms
            st.producer_id = meta.producer_id
            st.producer_epoch = meta.producer_epoch
            # Only the partitions of topics the caller may DESCRIBE.
            st.topics = [_DT.TopicData(topic=name, partitions=ps) for name, ps in meta.topics().items()
                         if self.auth.authorize(conn, req, AclOperation.DESCRIBE, TOPIC, name)]
        return _DT(transaction_states=states)

    async def list_transactions(self, conn: Connection, req: Request) -> Any:
        b, v = req.body, req.api_version
        txn = self.coordinator()
        if txn is None:
            return _LT(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, unknown_state_filters=[], transaction_states=[])
        duration = b.duration_filter if v >= 1 else -1
        code, unknown, metas = txn.list_transactions(b.producer_id_filters, b.state_filters, duration)
        if self.auth.enabled:  # only the transactional ids the caller may DESCRIBE
            metas = [m for m in metas if self.auth.authorize(conn, req, AclOperation.DESCRIBE, TXN_ID,
                                                             m.transactional_id)]
        return _LT(error_code=int(code), unknown_state_filters=unknown, transaction_states=[
            _LT.TransactionState(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                 transaction_state=m.state.kafka_name) for m in metas])

    def register(self, apis: KafkaApis) -> None:
        apis.register(ApiKey.INIT_PRODUCER_ID, self.init_producer_id)
        apis.register(ApiKey.ADD_PARTITIONS_TO_TXN, self.add_partitions_to_txn)
        apis.register(ApiKey.ADD_OFFSETS_TO_TXN, self.add_offsets_to_txn)
        apis.register(ApiKey.END_TXN, self.end_txn)
        apis.register(ApiKey.WRITE_TXN_MARKERS, self.write_txn_markers)
        apis.register(ApiKey.DESCRIBE_PRODUCERS, self.describe_producers)
        apis.register(ApiKey.DESCRIBE_TRANSACTIONS, self.describe_transactions)
        apis.register(ApiKey.LIST_TRANSACTIONS, self.list_transactions)
