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
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.connection import Connection
    from protocol.messages import Request

log = logging.getLogger(__name__)

_LAI = response_type(ApiKey.LEADER_AND_ISR)
_UM = response_type(ApiKey.UPDATE_METADATA)
_SR = response_type(ApiKey.STOP_REPLICA)
_CS = response_type(ApiKey.CONTROLLED_SHUTDOWN)
_AP = response_type(ApiKey.ALTER_PARTITION)


class ControllerRequestState:
    """Highest controller epoch seen, shared by the three controller request handlers.

    Control requests are handled one at a time (Kafka's replicaStateChangeLock): the checks, a
    possible ZooKeeper read and the state change must not interleave with another control request.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.controller_epoch = -1
        self.controller_id = -1
        self.lock = asyncio.Lock()
        self.refused = 0  # requests refused by a fencing check (metrics)

    async def check(self, api: str, controller_id: int, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        """Fence one request; on NONE the caller applies it (still under ``lock``) and calls accept()."""
        broker = self.broker
        if broker_epoch != -1 and broker_epoch < broker.broker_epoch:
            # A request meant for a previous incarnation of this broker (it restarted quickly).
            log.info("Received %s request with broker epoch %d smaller than the current broker epoch %d from "
                     "controller %d with epoch %d.", api, broker_epoch, broker.broker_epoch, controller_id,
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
        zk = self.broker.zk
        if zk is None:
            return None

        def read() -> int | None:
            from controller import zk_data as zd

            zk.kazoo.sync(zd.CONTROLLER_EPOCH_PATH)
            got = zk.get_controller_epoch()
            return got[0] if got is not None else None

        try:
            return await self.broker.zk_call(read)  # type: ignore[no-any-return]
        except Exception as e:  # noqa: BLE001 - an unverifiable epoch is refused, never trusted
            log.warning("cannot read the controller epoch from ZooKeeper: %s", e)
            return None


def register(broker: Broker) -> None:
    state = ControllerRequestState(broker)
    broker.components.controller_requests = state
    rm = broker.replica_manager
    assert rm is not None

    async def leader_and_isr(conn: Connection, req: Request) -> Any:
        b = req.body
        async with state.lock:
            err = await state.check("LeaderAndIsr", b.controller_id, b.controller_epoch, b.broker_epoch)
            if err:
                # Kafka's LeaderAndIsrRequest.getErrorResponse: the error for every partition too.
                return _LAI(error_code=err, topics=[
                    _LAI.LeaderAndIsrTopicError(topic_id=ts.topic_id, partition_errors=[
                        _LAI.LeaderAndIsrPartitionError(partition_index=ps.partition_index, error_code=err)
                        for ps in ts.partition_states])
                    for ts in b.topic_states])
            state.accept(b.controller_id, b.controller_epoch)
            return await rm.become_leader_or_follower(b)

    async def update_metadata(conn: Connection, req: Request) -> Any:
        b = req.body
        async with state.lock:
            err = await state.check("UpdateMetadata", b.controller_id, b.controller_epoch, b.broker_epoch)
            if err:
                return _UM(error_code=err)
            state.accept(b.controller_id, b.controller_epoch)
            broker.metadata.update(b)
        broker.components.metadata_waiters.notify("metadata")
        return _UM(error_code=0)

    async def stop_replica(conn: Connection, req: Request) -> Any:
        b = req.body
        async with state.lock:
            err = await state.check("StopReplica", b.controller_id, b.controller_epoch, b.broker_epoch)
            if err:
                return _SR(error_code=err)
            state.accept(b.controller_id, b.controller_epoch)
            return await rm.stop_replicas(b)

    async def controlled_shutdown(conn: Connection, req: Request) -> Any:
        ctrl = broker.components.controller
        if ctrl is None or not ctrl.is_active:
            return _CS(error_code=ErrorCode.NOT_CONTROLLER)
        return await ctrl.handle_controlled_shutdown(req.body.broker_id, req.body.broker_epoch)

    async def alter_partition(conn: Connection, req: Request) -> Any:
        ctrl = broker.components.controller
        if ctrl is None or not ctrl.is_active:
            return _AP(error_code=ErrorCode.NOT_CONTROLLER)
        return await ctrl.handle_alter_partition(req.body)

    apis = broker.apis
    apis.register(ApiKey.LEADER_AND_ISR, leader_and_isr)
    apis.register(ApiKey.UPDATE_METADATA, update_metadata)
    apis.register(ApiKey.STOP_REPLICA, stop_replica)
    apis.register(ApiKey.CONTROLLED_SHUTDOWN, controlled_shutdown)
    apis.register(ApiKey.ALTER_PARTITION, alter_partition)


async def start_controller_services(broker: Broker) -> None:
    """Every broker runs a KafkaController; the one whose elector wins ZooKeeper's race is active."""
    from controller.controller import KafkaController

    assert broker.zk is not None
    # Kafka's ControllerChannelManager: the control-plane listener when there is one, else the
    # inter-broker listener.
    ctrl = KafkaController(broker.zk, broker.broker_id, asyncio.get_running_loop(),
                           config_getter=lambda name: broker.config.get(name),
                           listener_name=broker.controller_listener)
    broker.components.controller = ctrl
    await ctrl.start()


async def stop_controller_services(broker: Broker) -> None:
    ctrl, broker.components.controller = broker.components.controller, None
    if ctrl is not None:
        try:
            await ctrl.shutdown()
        except Exception:
            log.exception("stopping the controller failed")
    client, broker.components.controller_client = broker.components.controller_client, None
    if client is not None:
        await client.close()


async def controlled_shutdown(broker: Broker) -> None:
    """Ask the controller to move our leaderships away before we go (controlled.shutdown.*)."""
    from controller.client import InterBrokerClient

    assert broker.zk is not None
    client = broker.components.controller_client
    if client is None:
        # As Kafka's NodeToControllerChannelManager in ZooKeeper mode: the controller's control-plane
        # endpoint when there is one.
        client = InterBrokerClient(broker.zk, broker.broker_id, asyncio.get_running_loop(),
                                   listener_name=broker.controller_listener)
        await client.start()
        broker.components.controller_client = client
    await client.controlled_shutdown_until_done(
        broker.broker_epoch, max_retries=broker.config.get("controlled.shutdown.max.retries"),
        retry_backoff_ms=broker.config.get("controlled.shutdown.retry.backoff.ms"))
