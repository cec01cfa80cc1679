"""Producer id allocation (Kafka's ZkProducerIdManager): blocks of ids claimed from ZooKeeper.

Each broker claims a block (``/latest_producer_id_block``, conditional update, so blocks never overlap
across the cluster) and hands out ids from it; the next block is claimed when this one runs out.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.wiring import ZkCall
    from controller.zk_client import KafkaZkClient
    from controller.zk_data import ProducerIdBlock


class ProducerIdManager:
    def __init__(self, zk: KafkaZkClient, broker_id: int, zk_call: ZkCall) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.zk_call = zk_call
        self._block: ProducerIdBlock | None = None
        self._next = 0
        self._lock = asyncio.Lock()

    async def generate(self) -> int:
        async with self._lock:
            if self._block is None or self._next > self._block.last_producer_id:
                self._block = await self.zk_call(self.zk.allocate_producer_id_block, self.broker_id)
                self._next = self._block.first_producer_id
            pid = self._next
            self._next += 1
            return pid
