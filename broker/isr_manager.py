"""ISR changes proposed by partition leaders to the controller with AlterPartition (KIP-497).

A leader shrinks the ISR when a follower has not caught up for ``replica.lag.time.max.ms`` and
expands it when a follower's LEO reaches the HW (and the current leader epoch). The proposal carries
the leader epoch and the partition epoch (the ZooKeeper version of the partition's state node) the
leader last saw, so the controller refuses proposals based on stale state. While a proposal is in
flight the HW is computed over the union of the old and proposed ISR ("maximal ISR"), so an
expansion never lets the HW get ahead of the replica being added, and a shrink takes effect only
once committed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from controller.client import ControllerNotAvailableError
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type

if TYPE_CHECKING:
    from broker.partition import Partition
    from broker.replica_manager import ReplicaManager
    from config.registry import BrokerConfig
    from controller.zk_client import KafkaZkClient

log = logging.getLogger(__name__)
_AP = request_type(ApiKey.ALTER_PARTITION)

# Between sends of a proposal that got no answer (the channel to the controller already retried it until
# its request timeout) or a top-level error (Kafka waits 50 ms after those).
_RESEND_BACKOFF_S = 0.05

# Partition errors after which the controller has written nothing and the leader's partition epoch is the
# current one, so the leader may go back to its committed ISR.
_NOT_APPLIED = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})
# Partition errors that say the leader's view is stale: only a LeaderAndIsr can settle what the ISR is.
_AWAIT_LEADER_AND_ISR = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED})


class IsrManager:
    """Kafka's AlterPartitionManager plus the ISR expiration task.

    The replica manager is handed in as an accessor: it is built after this object (it receives this
    one through its constructor), so the two are not each other's constructor arguments.
    """

    def __init__(self, broker_id: int, zk: KafkaZkClient, listener_name: str, broker_epoch: Callable[[], int],
                 config: Callable[[], BrokerConfig], replica_manager: Callable[[], ReplicaManager | None]) -> None:
        self.broker_id = broker_id
        self.zk = zk
        # The controller channel's listener: control plane when control.plane.listener.name is set.
        self.listener_name = listener_name
        self.broker_epoch = broker_epoch
        self.config = config
        self.replica_manager = replica_manager
        self.client: Any = None
        self.shrinks = 0
        self.expands = 0
        self.failed = 0
        self._task: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()  # proposals not answered yet, each sent until it is

    async def start(self) -> None:
        from broker.security.inter_broker import inter_broker_security
        from controller.client import InterBrokerClient

        # Kafka's broker-to-controller channel waits controller.socket.timeout.ms for each answer.
        self.client = InterBrokerClient(self.zk, self.broker_id, asyncio.get_running_loop(),
                                        listener_name=self.listener_name,
                                        request_timeout_ms=self.config().get("controller.socket.timeout.ms"),
                                        security=inter_broker_security(self.config(), self.listener_name))
        await self.client.start()
        self._task = asyncio.ensure_future(self._shrink_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in list(self._sending):
            task.cancel()
        if self.client is not None:
            await self.client.close()

    async def _shrink_loop(self) -> None:
        max_lag = self.config().get("replica.lag.time.max.ms")
        while True:
            await asyncio.sleep(max_lag / 2000.0)
            rm = self.replica_manager()
            if rm is None:
                continue
            for p in list(rm.partitions.values()):
                if not p.is_leader or p.pending_isr is not None:
                    continue
                out = p.out_of_sync_replicas(max_lag)
                if out:
                    new_isr = p.isr - out
                    log.info("[Partition %s-%d broker=%d] Shrinking ISR from %s to %s (out of sync: %s)",
                             p.topic, p.partition, self.broker_id, sorted(p.isr), sorted(new_isr), sorted(out))
                    self.submit(p, new_isr, expand=False)

    def maybe_expand(self, p: Partition) -> None:
        if not p.is_leader or p.pending_isr is not None:
            return
        caught_up = p.caught_up_followers()
        if caught_up:
            new_isr = p.isr | caught_up
            log.info("[Partition %s-%d broker=%d] Expanding ISR from %s to %s", p.topic, p.partition,
                     self.broker_id, sorted(p.isr), sorted(new_isr))
            self.submit(p, new_isr, expand=True)

    @staticmethod
    def _superseded(p: Partition, new_isr: set[int], leader_epoch: int) -> bool:
        return p.pending_isr != new_isr or p.leader_epoch != leader_epoch or not p.is_leader

    def submit(self, p: Partition, new_isr: set[int], *, expand: bool) -> None:
        p.pending_isr = set(new_isr)
        task = asyncio.ensure_future(self._send(p, set(new_isr), p.leader_epoch, p.partition_epoch, expand))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, p: Partition, new_isr: set[int], leader_epoch: int, partition_epoch: int,
                    expand: bool) -> None:
        # As Kafka's AlterPartitionManager: the proposal is sent again until the controller answers it or a
        # LeaderAndIsr replaces it. Giving up while it is pending would be unsafe: the controller may have
        # written it (the answer lost with a connection or a controller that died), and a leader that went
        # back to its old ISR would compute the HW without a replica ZooKeeper lists as in sync. That replica
        # could then be elected while missing records acknowledged with acks=all.
        while True:
            if self._superseded(p, new_isr, leader_epoch):
                return
            body = _AP(broker_id=self.broker_id, broker_epoch=self.broker_epoch(), topics=[
                _AP.TopicData(topic_id=p.topic_id, partitions=[_AP.PartitionData(
                    partition_index=p.partition, leader_epoch=leader_epoch,
                    new_isr_with_epochs=[_AP.BrokerState(broker_id=r, broker_epoch=(
                        p.remote[r].broker_epoch if r in p.remote else self.broker_epoch())) for r in sorted(new_isr)],
                    leader_recovery_state=0, partition_epoch=partition_epoch)])])
            try:
                resp = await self.client.alter_partition(body)
            except ControllerNotAvailableError as e:
                log.warning("[Partition %s-%d] AlterPartition got no answer: %s; sending it again", p.topic,
                            p.partition, e)
                self.failed += 1
                await asyncio.sleep(_RESEND_BACKOFF_S)
                continue
            except Exception:
                # Whether it reached the controller is as unknown as after a lost answer.
                log.exception("[Partition %s-%d] AlterPartition failed; sending it again in a second", p.topic,
                              p.partition)
                self.failed += 1
                await asyncio.sleep(1.0)
                continue
            if resp.error_code != ErrorCode.NONE:
                # A top-level error (NOT_CONTROLLER, STALE_BROKER_EPOCH, ...): nothing was applied; ask again
                # shortly, with the broker epoch of then (Kafka retries these after 50 ms).
                log.info("[Partition %s-%d] AlterPartition: %s; sending it again", p.topic, p.partition,
                         ErrorCode(resp.error_code).name)
                self.failed += 1
                if resp.error_code == ErrorCode.NOT_CONTROLLER:
                    self.client.controller_moved()
                await asyncio.sleep(_RESEND_BACKOFF_S)
                continue
            result = resp.topics[0].partitions[0] if resp.topics and resp.topics[0].partitions else None
            if self._superseded(p, new_isr, leader_epoch):
                return  # a LeaderAndIsr arrived meanwhile and replaced this proposal
            code = ErrorCode.UNKNOWN_SERVER_ERROR if result is None else ErrorCode(result.error_code)
            if code == ErrorCode.NONE:
                break
            self.failed += 1
            if code in _NOT_APPLIED:
                # The controller says the current partition epoch is right and nothing was written: back to
                # the committed ISR (Kafka's handleAlterPartitionError).
                p.pending_isr = None
                log.info("[Partition %s-%d] AlterPartition to %s refused: %s", p.topic, p.partition,
                         sorted(new_isr), code.name)
                return
            if code in _AWAIT_LEADER_AND_ISR:
                # This leader's state is behind the controller's. Keep the proposal pending (the HW stays
                # computed over the union, no other ISR change is proposed) until a LeaderAndIsr brings the
                # current state.
                log.info("[Partition %s-%d] AlterPartition to %s refused: %s; the partition state may be out "
                         "of date, awaiting the latest from the controller", p.topic, p.partition, sorted(new_isr),
                         code.name)
                return
            log.warning("[Partition %s-%d] AlterPartition to %s failed: %s; sending it again", p.topic, p.partition,
                        sorted(new_isr), code.name)
            if code == ErrorCode.NOT_CONTROLLER:  # it knows an older state than ours: likely not controller now
                self.client.controller_moved()
            await asyncio.sleep(_RESEND_BACKOFF_S)
        assert result is not None
        if result.leader_epoch != p.leader_epoch:
            return  # written under another leader epoch: a LeaderAndIsr follows, and settles the ISR
        p.pending_isr = None
        p.isr = set(result.isr)
        p.partition_epoch = result.partition_epoch
        if expand:
            self.expands += 1
        else:
            self.shrinks += 1
        rm = self.replica_manager()
        if rm is not None and p.maybe_increment_hw():
            rm.notify_hw(p.tp)
        elif rm is not None:
            rm.notify_hw(p.tp)  # ISR size changed: acks=all waiters re-check min.insync.replicas
