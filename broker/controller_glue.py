"""The broker's side of the controller protocol, and the controller services every broker runs.

Requests from a controller (LeaderAndIsr, UpdateMetadata, StopReplica) are fenced in Kafka 3.9's
order (KafkaApis.handle*Request, then ReplicaManager):

1. broker epoch: a request for an older incarnation of this broker (broker epoch below the czxid of
   our /brokers/ids registration) is refused with STALE_BROKER_EPOCH; -1 means "unknown" and passes;
2. controller epoch: anything older than the highest controller epoch seen is refused with
   STALE_CONTROLLER_EPOCH, so a controller that lost its ZooKeeper session cannot change anything.

Beyond Kafka: a controller epoch *above* the one we know is only believed once ZooKeeper's
/controller_epoch has reached it. Without that, one forged request claiming epoch 2^31-1 would make
the broker refuse the real controller forever. Either way, a refused request changes no state, not
even the remembered epoch.

When ``control.plane.listener.name`` is set, these three requests are served only on that listener
(see ``KafkaApis.listener_refuses``).

With an authorizer, all five controller APIs (these three, ControlledShutdown and AlterPartition) need
CLUSTER_ACTION on the cluster, checked before anything else as Kafka checks it; a refused request is
answered with the API's error form (CLUSTER_AUTHORIZATION_FAILED, on every partition where the
response has partitions) and changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.authorizer.api import AclOperation
from broker.request_authorization import ALLOW_ALL, RequestAuthorizer
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.kafka_apis import KafkaApis
    from broker.metadata_cache import MetadataCache
    from broker.purgatory import Purgatory
    from broker.replica_manager import ReplicaManager
    from broker.wiring import ZkCall
    from config.registry import BrokerConfig
    from controller.client import InterBrokerClient
    from controller.controller import KafkaController
    from controller.zk_client import KafkaZkClient
    from protocol.messages import Request

log = logging.getLogger(__name__)

_LAI = response_type(ApiKey.LEADER_AND_ISR)
_UM = response_type(ApiKey.UPDATE_METADATA)
_SR = response_type(ApiKey.STOP_REPLICA)
_CS = response_type(ApiKey.CONTROLLED_SHUTDOWN)
_AP = response_type(ApiKey.ALTER_PARTITION)
_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _leader_and_isr_error(body: Any, err: ErrorCode) -> Any:
    """Kafka's LeaderAndIsrRequest.getErrorResponse: the error for every partition too (v7, the one
    version served)."""
    return _LAI(error_code=err, topics=[
        _LAI.LeaderAndIsrTopicError(topic_id=ts.topic_id, partition_errors=[
            _LAI.LeaderAndIsrPartitionError(partition_index=ps.partition_index, error_code=err)
            for ps in ts.partition_states])
        for ts in body.topic_states])


class ControllerRequestState:
    """Highest controller epoch seen, shared by the three controller request handlers.

    Control requests are handled one at a time (Kafka's replicaStateChangeLock): the checks, a
    possible ZooKeeper read and the state change must not interleave with another control request.
    """

    def __init__(self, broker_epoch: Callable[[], int], zk: KafkaZkClient, zk_call: ZkCall) -> None:
        self.broker_epoch = broker_epoch  # the czxid of our registration; changes on re-registration
        self.zk = zk
        self.zk_call = zk_call
        self.controller_epoch = -1
        self.controller_id = -1
        self.lock = asyncio.Lock()
        self.refused = 0  # requests refused by a fencing check (metrics)

    async def check(self, api: str, controller_id: int, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        """Fence one request; on NONE the caller applies it (still under ``lock``) and calls accept()."""
        current_broker_epoch = self.broker_epoch()
        if broker_epoch != -1 and broker_epoch < current_broker_epoch:
            # A request meant for a previous incarnation of this broker (it restarted quickly).
            log.info("Received %s request with broker epoch %d smaller than the current broker epoch %d from "
                     "controller %d with epoch %d.", api, broker_epoch, current_broker_epoch, controller_id,
                     controller_epoch)
            self.refused += 1
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            log.warning("refusing a request from controller %d with stale controller epoch %d (current %d): %s",
                        controller_id, controller_epoch, self.controller_epoch, api)
            self.refused += 1
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if controller_epoch > self.controller_epoch:
            zk_epoch = await self._zk_controller_epoch()
            if zk_epoch is None or controller_epoch > zk_epoch:
                log.warning("Ignoring %s request from controller %d with controller epoch %d: ZooKeeper's "
                            "controller epoch is %s", api, controller_id, controller_epoch,
                            "unreadable" if zk_epoch is None else zk_epoch)
                self.refused += 1
                return ErrorCode.STALE_CONTROLLER_EPOCH
        return ErrorCode.NONE

    def accept(self, controller_id: int, controller_epoch: int) -> None:
        self.controller_epoch = controller_epoch
        self.controller_id = controller_id

    async def _zk_controller_epoch(self) -> int | None:
        """/controller_epoch as ZooKeeper's leader has it (sync first: a follower may lag behind the
        controller's write, which happened before it sent this request)."""
        zk = self.zk

        def read() -> int | None:
            from controller import zk_data as zd

            zk.kazoo.sync(zd.CONTROLLER_EPOCH_PATH)
            got = zk.get_controller_epoch()
            return got[0] if got is not None else None

        try:
            return await self.zk_call(read)  # type: ignore[no-any-return]
        except Exception as e:  # noqa: BLE001 - an unverifiable epoch is refused, never trusted
            log.warning("cannot read the controller epoch from ZooKeeper: %s", e)
            return None


def _stop_replica_error(body: Any, err: ErrorCode) -> Any:
    """Kafka's StopReplicaRequest.getErrorResponse: the error for every partition too (v4, the one
    version served)."""
    return _SR(error_code=err, partition_errors=[
        _SR.StopReplicaPartitionError(topic_name=t.topic_name, partition_index=p.partition_index, error_code=err)
        for t in body.topic_states for p in t.partition_states])


class ControllerApis:
    """LeaderAndIsr, UpdateMetadata and StopReplica (fenced, then applied by the replica manager and
    the metadata cache), and ControlledShutdown / AlterPartition (answered by the active controller)."""

    def __init__(self, state: ControllerRequestState, replica_manager: ReplicaManager, metadata: MetadataCache,
                 metadata_waiters: Purgatory, controller: Callable[[], KafkaController | None],
                 auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.state = state
        self.auth = auth
        self.rm = replica_manager
        self.metadata = metadata
        self.metadata_waiters = metadata_waiters
        self.controller = controller

    def _refused(self, conn: Connection, req: Request) -> bool:
        return not self.auth.authorize_cluster(conn, req, AclOperation.CLUSTER_ACTION)

    async def leader_and_isr(self, conn: Connection, req: Request) -> Any:
        b, state = req.body, self.state
        if self._refused(conn, req):
            return _leader_and_isr_error(b, _DENIED)
        async with state.lock:
            err = await state.check("LeaderAndIsr", b.controller_id, b.controller_epoch, b.broker_epoch)
            if err:
                return _leader_and_isr_error(b, err)
            state.accept(b.controller_id, b.controller_epoch)
            return await self.rm.become_leader_or_follower(b)

    async def update_metadata(self, conn: Connection, req: Request) -> Any:
        b, state = req.body, self.state
        if self._refused(conn, req):
            return _UM(error_code=_DENIED)
        async with state.lock:
            err = await state.check("UpdateMetadata", b.controller_id, b.controller_epoch, b.broker_epoch)
            if err:
                return _UM(error_code=err)
            state.accept(b.controller_id, b.controller_epoch)
            self.metadata.update(b)
        self.metadata_waiters.notify("metadata")
        return _UM(error_code=0)

    async def stop_replica(self, conn: Connection, req: Request) -> Any:
        b, state = req.body, self.state
        if self._refused(conn, req):
            return _stop_replica_error(b, _DENIED)
        async with state.lock:
            err = await state.check("StopReplica", b.controller_id, b.controller_epoch, b.broker_epoch)
            if err:
                return _SR(error_code=err)
            state.accept(b.controller_id, b.controller_epoch)
            return await self.rm.stop_replicas(b)

    async def controlled_shutdown(self, conn: Connection, req: Request) -> Any:
        if self._refused(conn, req):
            return _CS(error_code=_DENIED, remaining_partitions=[])
        ctrl = self.controller()
        if ctrl is None or not ctrl.is_active:
            return _CS(error_code=ErrorCode.NOT_CONTROLLER)
        return await ctrl.handle_controlled_shutdown(req.body.broker_id, req.body.broker_epoch)

    async def alter_partition(self, conn: Connection, req: Request) -> Any:
        if self._refused(conn, req):
            return _AP(error_code=_DENIED, topics=[])
        ctrl = self.controller()
        if ctrl is None or not ctrl.is_active:
            return _AP(error_code=ErrorCode.NOT_CONTROLLER)
        return await ctrl.handle_alter_partition(req.body)

    def register(self, apis: KafkaApis) -> None:
        apis.register(ApiKey.LEADER_AND_ISR, self.leader_and_isr)
        apis.register(ApiKey.UPDATE_METADATA, self.update_metadata)
        apis.register(ApiKey.STOP_REPLICA, self.stop_replica)
        apis.register(ApiKey.CONTROLLED_SHUTDOWN, self.controlled_shutdown)
        apis.register(ApiKey.ALTER_PARTITION, self.alter_partition)


class ControllerServices:
    """The KafkaController every broker runs (the one whose elector wins ZooKeeper's race is active),
    and the client that asks the active controller for a controlled shutdown."""

    def __init__(self, zk: KafkaZkClient, broker_id: int, config: Callable[[], BrokerConfig],
                 listener_name: str, broker_epoch: Callable[[], int]) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.config = config  # dynamic broker config: read at each use
        # Kafka's ControllerChannelManager and NodeToControllerChannelManager (ZooKeeper mode): the
        # control-plane listener when there is one, else the inter-broker listener.
        self.listener_name = listener_name
        self.broker_epoch = broker_epoch
        self.controller: KafkaController | None = None
        self.client: InterBrokerClient | None = None

    async def start(self) -> None:
        from broker.security.inter_broker import inter_broker_security
        from controller.channel import ControllerChannelManager
        from controller.controller import KafkaController

        channel = ControllerChannelManager(self.broker_id, asyncio.get_running_loop(), listener_name=self.listener_name,
                                           security=inter_broker_security(self.config(), self.listener_name))
        self.controller = KafkaController(self.zk, self.broker_id, asyncio.get_running_loop(), channel_manager=channel,
                                          config_getter=lambda name: self.config().get(name),
                                          listener_name=self.listener_name)
        await self.controller.start()

    async def stop(self) -> None:
        ctrl, self.controller = self.controller, None
        if ctrl is not None:
            try:
                await ctrl.shutdown()
            except Exception:
                log.exception("stopping the controller failed")
        client, self.client = self.client, None
        if client is not None:
            await client.close()

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move our leaderships away before we go (controlled.shutdown.*); True
        when it did."""
        from broker.security.inter_broker import inter_broker_security
        from controller.client import InterBrokerClient

        if self.client is None:
            self.client = InterBrokerClient(self.zk, self.broker_id, asyncio.get_running_loop(),
                                            listener_name=self.listener_name,
                                            security=inter_broker_security(self.config(), self.listener_name))
            await self.client.start()
        config = self.config()
        return await self.client.controlled_shutdown_until_done(
            self.broker_epoch(), max_retries=config.get("controlled.shutdown.max.retries"),
            retry_backoff_ms=config.get("controlled.shutdown.retry.backoff.ms"))
