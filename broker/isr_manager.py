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

    async def start(self) -> None:
        from broker.security.inter_broker import inter_broker_security
        from controller.client import InterBrokerClient

        self.client = InterBrokerClient(self.zk, self.broker_id, asyncio.get_running_loop(),
                                        listener_name=self.listener_name,
                                        security=inter_broker_security(self.config(), self.listener_name))
        await self.client.start()
        self._task = asyncio.ensure_future(self._shrink_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
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

    def submit(self, p: Partition, new_isr: set[int], *, expand: bool) -> None:
        p.pending_isr = set(new_isr)
        asyncio.ensure_future(self._send(p, set(new_isr), p.leader_epoch, p.partition_epoch, expand))

    async def _send(self, p: Partition, new_isr: set[int], leader_epoch: int, partition_epoch: int,
                    expand: bool) -> None:
        body = _AP(broker_id=self.broker_id, broker_epoch=self.broker_epoch(), topics=[
            _AP.TopicData(topic_id=p.topic_id, partitions=[_AP.PartitionData(
                partition_index=p.partition, leader_epoch=leader_epoch,
                new_isr_with_epochs=[_AP.BrokerState(broker_id=r, broker_epoch=(
                    p.remote[r].broker_epoch if r in p.remote else self.broker_epoch())) for r in sorted(new_isr)],
                leader_recovery_state=0, partition_epoch=partition_epoch)])])
        try:
            resp = await self.client.alter_partition(body)
        except Exception as e:
            log.warning("[Partition %s-%d] AlterPartition failed: %r; will retry", p.topic, p.partition, e)
            self.failed += 1
            if p.pending_isr == new_isr:
                p.pending_isr = None
            return
        code = resp.error_code
        result = None
        if code == ErrorCode.NONE and resp.topics and resp.topics[0].partitions:
            result = resp.topics[0].partitions[0]
            code = result.error_code
        if p.pending_isr != new_isr or p.leader_epoch != leader_epoch:
            return  # a LeaderAndIsr arrived meanwhile and superseded this proposal
        p.pending_isr = None
        if code != ErrorCode.NONE or result is None:
            self.failed += 1
            log.info("[Partition %s-%d] AlterPartition refused: %s", p.topic, p.partition, ErrorCode(code).name)
            return
        if result.leader_epoch != p.leader_epoch:
            return
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
