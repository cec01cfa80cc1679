"""Data-path APIs: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords.

Authorization, as Kafka 3.9's KafkaApis (each refused partition is answered with
TOPIC_AUTHORIZATION_FAILED; the others are served as if the refused ones were not in the request):

* Produce: transactional records need WRITE on the request's transactional id (no id at all fails the
  whole request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, with or without an authorizer); each
  topic needs WRITE. Idempotent records need nothing more: IDEMPOTENT_WRITE is checked once, by
  InitProducerId.
* Fetch: a follower (replica id >= 0) needs CLUSTER_ACTION on the cluster, else every partition is
  refused; a consumer needs READ on each topic. Checked, as in Kafka, on every partition the fetch reads:
  for an incremental fetch (KIP-227, broker/fetch_session.py) that is every partition of its session.
* ListOffsets: DESCRIBE on each topic. OffsetForLeaderEpoch: CLUSTER_ACTION on the cluster (brokers),
  else DESCRIBE on each topic (consumers validating their position, KIP-320). DeleteRecords: DELETE.

Old versions (Produce v0-2 with message formats v0/v1, Fetch v0-9, ListOffsets v0) take the paths of
broker/old_versions_data.py; the current versions' paths pay one version comparison for them.

Transactional Produce requests go through KIP-890 verification first when
``transaction.partition.verification.enable`` is on (broker/txn_verification.py). A partition whose
transaction is already open here costs no question to the coordinator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from broker.authorizer.api import AclOperation, ResourceType
from broker.connection import CloseConnection
from broker.conversion_metrics import ConversionMetrics, conversion_metrics_for
from broker.deferred_response import DeferredResponse
from broker.fetch_session import TOPIC_IDS_SINCE
from broker.old_versions_data import OldVersionData
from broker.replica_manager import _has_transactional_batch
from broker.request_authorization import ALLOW_ALL, RequestAuthorizer
from broker.txn_verification import CONFIG as VERIFICATION_ENABLE
from broker.txn_verification import TxnVerifier, transactional_batch_producer, verify_produce
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type
from storage.producer_state import REQUEST_VERIFICATION_GUARDS

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.kafka_apis import KafkaApis
    from broker.replica_manager import ReplicaManager
    from protocol.messages import Request

_PRODUCE = response_type(ApiKey.PRODUCE)
_FETCH = response_type(ApiKey.FETCH)
_LIST_OFFSETS = response_type(ApiKey.LIST_OFFSETS)
_EPOCHS = response_type(ApiKey.OFFSET_FOR_LEADER_EPOCH)
_DELETE_RECORDS = response_type(ApiKey.DELETE_RECORDS)
_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
READ, WRITE, DESCRIBE, DELETE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DELETE
TOPIC = ResourceType.TOPIC


def _produce_refused(body: Any, code: ErrorCode) -> Any:
    """Kafka's ProduceRequest.getErrorResponse: ``code`` for every partition of the request."""
    return _PRODUCE(responses=[_PRODUCE.TopicProduceResponse(name=t.name, partition_responses=[
        _PRODUCE.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                          log_start_offset=-1)
        for p in t.partition_data]) for t in body.topic_data])


def _with_refused(resp: Any, errors: Mapping[tuple[str, int], tuple[int, str | None]]) -> Any:
    """A produce response with the partitions KIP-890 verification refused (never appended) added."""
    by_topic = {tr.name: tr for tr in resp.responses}
    for (topic, index), (code, message) in errors.items():
        tr = by_topic.get(topic)
        if tr is None:
            tr = by_topic[topic] = _PRODUCE.TopicProduceResponse(name=topic, partition_responses=[])
            resp.responses.append(tr)
        tr.partition_responses.append(_PRODUCE.PartitionProduceResponse(
            index=index, error_code=code, error_message=message, base_offset=-1, log_append_time_ms=-1,
            log_start_offset=-1))
    return resp


async def _with_refused_later(deferred: DeferredResponse, errors: Mapping[tuple[str, int], tuple[int, str | None]]
                              ) -> Any:
    return _with_refused(await deferred.result(), errors)


class DataApis:
    """The data-path APIs, served by the replica manager."""

    def __init__(self, replica_manager: ReplicaManager, auth: RequestAuthorizer = ALLOW_ALL,
                 conversions: ConversionMetrics | None = None, verifier: TxnVerifier | None = None) -> None:
        self.rm = replica_manager
        self.auth = auth
        self.verifier = verifier  # KIP-890 verification; None: transactional batches are appended unverified
        # Kafka's message conversion metrics (broker/conversion_metrics.py), one set per broker.
        self.conversions = conversions if conversions is not None else conversion_metrics_for(replica_manager)
        self.old = OldVersionData(replica_manager, self.conversions)

    async def _append_old(self, body: Any, version: int, *, defer: bool = False) -> Any:
        """Produce v0-2 (message formats v0/v1 converted to v2 on the way); answered whole, never deferred."""
        resp, failed = await self.old.produce(body, self.rm.append_records)
        if failed and body.acks == 0:
            raise CloseConnection()  # acks=0 has no response: Kafka closes the connection on an error
        return resp

    async def produce(self, conn: Connection, req: Request) -> Any:
        b: Any = req.body
        auth = self.auth
        # The current versions call the replica manager directly: no extra call on the fast path.
        append = self.rm.append_records if req.api_version > 2 else self._append_old
        if any(_has_transactional_batch(p.records) for t in b.topic_data for p in t.partition_data):
            if b.transactional_id is None or not auth.authorize(conn, req, WRITE, ResourceType.TRANSACTIONAL_ID,
                                                                b.transactional_id):
                if b.acks == 0:
                    raise CloseConnection()  # acks=0 has no response: Kafka closes the connection instead
                return _produce_refused(b, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            append = self._append_transactional
        # Connections write answers in request order themselves: the connection goes on to its client's
        # next request while this one waits for acks=all (broker/deferred_response.py).
        if not auth.enabled:
            return await append(b, req.api_version, defer=True)
        allowed = auth.filter_by_authorized(conn, req, WRITE, TOPIC, (t.name for t in b.topic_data))
        refused = [t for t in b.topic_data if t.name not in allowed]
        if not refused:
            return await append(b, req.api_version, defer=True)
        b.topic_data = [t for t in b.topic_data if t.name in allowed]
        resp = await append(b, req.api_version)  # not deferred: the refused partitions are added below
        if b.acks == 0:
            # Kafka answers an acks=0 produce with an error by closing the connection (after
            # appending what it could), so that the producer refreshes its metadata.
            raise CloseConnection()
        resp.responses.extend(_PRODUCE.TopicProduceResponse(name=t.name, partition_responses=[
            _PRODUCE.PartitionProduceResponse(index=p.index, error_code=_DENIED, base_offset=-1,
                                              log_append_time_ms=-1, log_start_offset=-1)
            for p in t.partition_data]) for t in refused)
        return resp

    async def _append_transactional(self, body: Any, version: int, *, defer: bool = False) -> Any:
        """Kafka's ReplicaManager.handleProduceAppend: one producer per request, then KIP-890
        verification of the partitions its transaction has not reached yet, then the append of the
        partitions that passed (with their guards: storage/producer_state.py). With ``defer``, the wait
        for acks=all is handed back once everything is appended (ReplicaManager.append_records)."""
        rm = self.rm
        batches: dict[tuple[str, int], int] = {}
        producers: set[tuple[int, int]] = set()
        for t in body.topic_data:
            for pd in t.partition_data:
                producer = transactional_batch_producer(pd.records)
                if producer is not None:
                    producers.add(producer[:2])
                    batches[(t.name, pd.index)] = producer[2]
        if len(producers) > 1:
            # "Transactional records contained more than one producer ID": the whole request fails.
            if body.acks == 0:
                raise CloseConnection()
            return _produce_refused(body, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not producers or self.verifier is None or not rm.config.get(VERIFICATION_ENABLE):
            return await rm.append_records(body, version, defer=defer)
        ((producer_id, producer_epoch),) = producers
        checked = await verify_produce(rm, self.verifier, body.transactional_id, producer_id, producer_epoch,
                                       batches.items(), version)
        errors = checked.errors
        if errors:
            # The refused partitions are answered without an append; the others go on.
            kept = []
            for t in body.topic_data:
                t.partition_data = [pd for pd in t.partition_data if (t.name, pd.index) not in errors]
                if t.partition_data:
                    kept.append(t)
            body.topic_data = kept
        token = REQUEST_VERIFICATION_GUARDS.set(checked.guards)
        try:
            # The guards apply to the appends, which are done when this returns (deferred or not).
            resp = await rm.append_records(body, version, defer=defer)
        finally:
            REQUEST_VERIFICATION_GUARDS.reset(token)
        if not errors:
            return resp
        if body.acks == 0:
            raise CloseConnection()  # acks=0 has no response: Kafka closes the connection on an error
        if isinstance(resp, DeferredResponse):
            return DeferredResponse(_with_refused_later(resp, errors))
        return _with_refused(resp, errors)

    async def fetch(self, conn: Connection, req: Request, convert: bool = True) -> Any:
        """Kafka's handleFetchRequest: the fetch session decides which partitions this request reads
        (for an incremental fetch, every partition of the session) and which the response carries.

        Below v10 the response then goes through the old versions' conversions (``convert``)."""
        b: Any = req.body
        if req.api_version < 10 and convert:
            resp = await self.fetch(conn, req, convert=False)
            return self.old.fetch_response(resp, b, req.api_version, b.replica_id >= 0)
        v = req.api_version
        follower = (b.replica_id if v < 15 else b.replica_state.replica_id) >= 0
        rm = self.rm
        topic_names = rm.metadata.topics_by_id if v >= TOPIC_IDS_SINCE else {}
        context = rm.fetch_sessions.new_context(v, b, follower, topic_names)
        if context.error:
            return context.response(None)
        b.topics = context.topics
        auth = self.auth
        if not auth.enabled:
            return context.response(await rm.fetch_messages(b, v))
        if follower:
            if auth.authorize_cluster(conn, req, AclOperation.CLUSTER_ACTION):
                return context.response(await rm.fetch_messages(b, v))
            refused = list(b.topics)
            b.topics = []
        else:
            names = self._fetch_topic_names(b, v)
            # A topic id this broker does not know is answered UNKNOWN_TOPIC_ID by the replica manager.
            allowed = auth.filter_by_authorized(conn, req, READ, TOPIC, (n for n in names if n is not None))
            refused = [t for t, n in zip(b.topics, names, strict=True) if n is not None and n not in allowed]
            if not refused:
                return context.response(await rm.fetch_messages(b, v))
            refused_ids = {id(t) for t in refused}
            b.topics = [t for t in b.topics if id(t) not in refused_ids]
        resp = await rm.fetch_messages(b, v)
        for t in refused:
            tr = _FETCH.FetchableTopicResponse(partitions=[
                _FETCH.PartitionData(partition_index=p.partition, error_code=_DENIED, high_watermark=-1,
                                     last_stable_offset=-1, log_start_offset=-1, records=b"")
                for p in t.partitions])
            if v >= 13:
                tr.topic_id = t.topic_id
            else:
                tr.topic = t.topic
            resp.responses.append(tr)
        return context.response(resp)

    def _fetch_topic_names(self, body: Any, version: int) -> list[str | None]:
        if version >= 13:
            by_id = self.rm.metadata.topics_by_id
            return [by_id.get(t.topic_id) for t in body.topics]
        return [t.topic for t in body.topics]

    async def list_offsets(self, conn: Connection, req: Request) -> Any:
        b: Any = req.body
        refused = self._refused_topics(conn, req, DESCRIBE, b.topics, lambda t: t.name)
        answer = self.old.list_offsets_v0 if req.api_version == 0 else self.rm.list_offsets
        if not refused:
            return answer(b, req.api_version)
        b.topics = [t for t in b.topics if all(t is not r for r in refused)]
        resp = answer(b, req.api_version)
        resp.topics.extend(_LIST_OFFSETS.ListOffsetsTopicResponse(name=t.name, partitions=[
            _LIST_OFFSETS.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=_DENIED,
                                                       timestamp=-1, offset=-1, leader_epoch=-1)
            for p in t.partitions]) for t in refused)
        return resp

    async def offsets_for_leader_epoch(self, conn: Connection, req: Request) -> Any:
        b: Any = req.body
        if not self.auth.enabled or self.auth.authorize_cluster(conn, req, AclOperation.CLUSTER_ACTION,
                                                                log_if_denied=False):
            return self.rm.offsets_for_leader_epoch(b, req.api_version)
        refused = self._refused_topics(conn, req, DESCRIBE, b.topics, lambda t: t.topic)
        if not refused:
            return self.rm.offsets_for_leader_epoch(b, req.api_version)
        b.topics = [t for t in b.topics if all(t is not r for r in refused)]
        resp = self.rm.offsets_for_leader_epoch(b, req.api_version)
        resp.topics.extend(_EPOCHS.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            _EPOCHS.EpochEndOffset(partition=p.partition, error_code=_DENIED, leader_epoch=-1, end_offset=-1)
            for p in t.partitions]) for t in refused)
        return resp

    async def delete_records(self, conn: Connection, req: Request) -> Any:
        b: Any = req.body
        refused = self._refused_topics(conn, req, DELETE, b.topics, lambda t: t.name)
        if not refused:
            return self.rm.delete_records(b, req.api_version)
        b.topics = [t for t in b.topics if all(t is not r for r in refused)]
        resp = self.rm.delete_records(b, req.api_version)
        resp.topics.extend(_DELETE_RECORDS.DeleteRecordsTopicResult(name=t.name, partitions=[
            _DELETE_RECORDS.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                                         error_code=_DENIED)
            for p in t.partitions]) for t in refused)
        return resp

    def _refused_topics(self, conn: Connection, req: Request, operation: AclOperation, topics: list[Any],
                        name_of: Any) -> list[Any]:
        """The request's topic entries the caller may not ``operation`` (none without an authorizer)."""
        if not self.auth.enabled:
            return []
        allowed = self.auth.filter_by_authorized(conn, req, operation, TOPIC, (name_of(t) for t in topics))
        return [t for t in topics if name_of(t) not in allowed]

    def register(self, apis: KafkaApis) -> None:
        apis.register(ApiKey.PRODUCE, self.produce)
        apis.register(ApiKey.FETCH, self.fetch)
        apis.register(ApiKey.LIST_OFFSETS, self.list_offsets)
        apis.register(ApiKey.OFFSET_FOR_LEADER_EPOCH, self.offsets_for_leader_epoch)
        apis.register(ApiKey.DELETE_RECORDS, self.delete_records)
