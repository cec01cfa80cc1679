"""Cluster operations that only the active controller can carry out: ElectLeaders (43),
AlterPartitionReassignments (45) and ListPartitionReassignments (46); and Envelope (58).

AllocateProducerIds (67), sent by brokers to the controller, is answered as Kafka 3.9's controller
answers it: CLUSTER_ACTION needed; NOT_CONTROLLER unless active (never forwarded); the broker must be
alive with the broker epoch given (BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH); then the next block
of producer ids is claimed in ZooKeeper (``/latest_producer_id_block``) for it.

UpdateFeatures (57) is answered by the active controller as a ZooKeeper-mode Kafka 3.9 controller
answers it: there are no features to update (broker/update_features.py).

Envelope is how brokers forward requests to a KRaft controller during a ZooKeeper migration. Kafka
3.9 in ZooKeeper mode advertises it and, forwarding not being enabled outside a migration, closes the
connection of whoever sends one; so does this broker.

Clients send these to the controller (Metadata names it). Kafka 3.9 in ZooKeeper mode forwards
nothing outside a KRaft migration: a broker whose controller is not the active one answers ElectLeaders
NOT_CONTROLLER on every partition (every partition it knows of when none is named; no message, no
top-level error), AlterPartitionReassignments and ListPartitionReassignments NOT_CONTROLLER at the top
level with Errors.NOT_CONTROLLER's message. Clients refresh their metadata and go to the controller.

Authorization comes first, as in Kafka:
ElectLeaders and AlterPartitionReassignments need ALTER on the cluster, ListPartitionReassignments
DESCRIBE; a refused request gets CLUSTER_AUTHORIZATION_FAILED (on every requested partition too).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.authorizer.api import AclOperation
from broker.connection import CloseConnection
from broker.request_authorization import ALLOW_ALL, RequestAuthorizer
from broker.update_features import refused as features_refused
from broker.update_features import update_features
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.kafka_apis import KafkaApis
    from broker.metadata_cache import MetadataCache
    from controller.controller import KafkaController
    from protocol.messages import Request

log = logging.getLogger(__name__)

_ELECT = response_type(ApiKey.ELECT_LEADERS)
_ALTER = response_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
_LIST = response_type(ApiKey.LIST_PARTITION_REASSIGNMENTS)
_PRODUCER_IDS = response_type(ApiKey.ALLOCATE_PRODUCER_IDS)
# Errors.NOT_CONTROLLER's default message: Kafka's ApiError(NOT_CONTROLLER) for the reassignment APIs.
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."


def _not_controller(api_key: int, body: Any, metadata: MetadataCache) -> Any:
    """Kafka's answer off the active controller (KafkaController's ReplicaLeaderElection and
    (List)PartitionReassignment events when not active)."""
    code = ErrorCode.NOT_CONTROLLER
    if api_key == ApiKey.ELECT_LEADERS:
        # A set of partitions: every one named (all in the metadata cache when none is), grouped by topic.
        by_topic: dict[str, dict[int, None]] = {}
        if body.topic_partitions is None:
            for name, info in metadata.topics.items():
                by_topic.setdefault(name, {}).update(dict.fromkeys(info.partitions))
        else:
            for t in body.topic_partitions:
                by_topic.setdefault(t.topic, {}).update(dict.fromkeys(t.partitions))
        return _ELECT(error_code=ErrorCode.NONE, replica_election_results=[
            _ELECT.ReplicaElectionResult(topic=topic, partition_result=[
                _ELECT.PartitionResult(partition_id=p, error_code=code, error_message=None) for p in parts])
            for topic, parts in by_topic.items()])
    if api_key == ApiKey.ALTER_PARTITION_REASSIGNMENTS:
        return _ALTER(error_code=code, error_message=NOT_CONTROLLER_MESSAGE, responses=[])
    return _LIST(error_code=code, error_message=NOT_CONTROLLER_MESSAGE, topics=[])


def _refused(api_key: int, body: Any, code: ErrorCode, msg: str | None) -> Any:
    """The request's error form: ``code`` at the top and on every partition it names."""
    if api_key == ApiKey.ELECT_LEADERS:
        tps = body.topic_partitions or []
        return _ELECT(error_code=code, replica_election_results=[
            _ELECT.ReplicaElectionResult(topic=t.topic, partition_result=[
                _ELECT.PartitionResult(partition_id=p, error_code=code, error_message=msg) for p in t.partitions])
            for t in tps])
    if api_key == ApiKey.ALTER_PARTITION_REASSIGNMENTS:
        return _ALTER(error_code=code, error_message=msg, responses=[
            _ALTER.ReassignableTopicResponse(name=t.name, partitions=[
                _ALTER.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code,
                                                     error_message=msg) for p in t.partitions])
            for t in body.topics])
    return _LIST(error_code=code, error_message=msg, topics=[
        _LIST.OngoingTopicReassignment(name=t.name, partitions=[
            _LIST.OngoingPartitionReassignment(partition_index=p, replicas=[], adding_replicas=[],
                                               removing_replicas=[]) for p in t.partition_indexes])
        for t in body.topics or ()])


class ClusterHandlers:
    def __init__(self, broker_id: int, metadata: MetadataCache, controller: Callable[[], KafkaController | None],
                 auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.broker_id = broker_id
        self.auth = auth
        self.metadata = metadata
        # This broker's KafkaController, once started. Nothing is forwarded to another broker's
        # controller (see the module docstring), so these handlers hold no connection.
        self.controller = controller

    def _active_controller(self) -> Any:
        ctrl = self.controller()
        return ctrl if ctrl is not None and ctrl.is_active else None

    async def elect_leaders(self, conn: Connection, req: Request) -> Any:
        if not self.auth.authorize_cluster(conn, req, AclOperation.ALTER):
            return _refused(ApiKey.ELECT_LEADERS, req.body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        ctrl = self._active_controller()
        if ctrl is None:
            return _not_controller(ApiKey.ELECT_LEADERS, req.body, self.metadata)
        return await ctrl.handle_elect_leaders(req.body)

    async def alter_partition_reassignments(self, conn: Connection, req: Request) -> Any:
        if not self.auth.authorize_cluster(conn, req, AclOperation.ALTER):
            return _refused(ApiKey.ALTER_PARTITION_REASSIGNMENTS, req.body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        ctrl = self._active_controller()
        if ctrl is None:
            return _not_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, req.body, self.metadata)
        return await ctrl.handle_alter_partition_reassignments(req.body)

    async def list_partition_reassignments(self, conn: Connection, req: Request) -> Any:
        if not self.auth.authorize_cluster(conn, req, AclOperation.DESCRIBE):
            return _refused(ApiKey.LIST_PARTITION_REASSIGNMENTS, req.body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        ctrl = self._active_controller()
        if ctrl is None:
            return _not_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, req.body, self.metadata)
        return await ctrl.handle_list_partition_reassignments(req.body)

    async def update_features(self, conn: Connection, req: Request) -> Any:
        if not self.auth.authorize_cluster(conn, req, AclOperation.ALTER):
            return features_refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if self._active_controller() is None:
            return features_refused(ErrorCode.NOT_CONTROLLER)  # not forwarded, as in Kafka's ZooKeeper mode
        return update_features(req.body, req.api_version)

    async def allocate_producer_ids(self, conn: Connection, req: Request) -> Any:
        if not self.auth.authorize_cluster(conn, req, AclOperation.CLUSTER_ACTION):
            return _PRODUCER_IDS(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        ctrl = self._active_controller()
        if ctrl is None:
            return _PRODUCER_IDS(error_code=ErrorCode.NOT_CONTROLLER)
        b: Any = req.body
        registration = ctrl.context.live_brokers.get(b.broker_id)
        if registration is None:
            return _PRODUCER_IDS(error_code=ErrorCode.BROKER_ID_NOT_REGISTERED)
        if registration.broker_epoch != b.broker_epoch:
            return _PRODUCER_IDS(error_code=ErrorCode.STALE_BROKER_EPOCH)
        # A blocking ZooKeeper read and conditional write: off the event loop.
        block = await asyncio.to_thread(ctrl.zk.allocate_producer_id_block, b.broker_id)
        return _PRODUCER_IDS(error_code=0, producer_id_start=block.first_producer_id, producer_id_len=block.size)

    async def envelope(self, conn: Connection, req: Request) -> Any:
        log.info("Closing connection %s because it sent an `Envelope` request even though forwarding has not "
                 "been enabled", conn.peer)
        raise CloseConnection()

    def register(self, apis: KafkaApis) -> None:
        apis.register(ApiKey.ALLOCATE_PRODUCER_IDS, self.allocate_producer_ids)
        apis.register(ApiKey.UPDATE_FEATURES, self.update_features)
        apis.register(ApiKey.ENVELOPE, self.envelope)
        apis.register(ApiKey.ELECT_LEADERS, self.elect_leaders)
        apis.register(ApiKey.ALTER_PARTITION_REASSIGNMENTS, self.alter_partition_reassignments)
        apis.register(ApiKey.LIST_PARTITION_REASSIGNMENTS, self.list_partition_reassignments)

