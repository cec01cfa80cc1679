"""Data-path APIs: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.api_versions import ApiKey

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.kafka_apis import KafkaApis
    from broker.replica_manager import ReplicaManager
    from protocol.messages import Request


class DataApis:
    """The data-path APIs, served by the replica manager."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.rm = replica_manager

    async def produce(self, conn: Connection, req: Request) -> Any:
        return await self.rm.append_records(req.body, req.api_version)

    async def fetch(self, conn: Connection, req: Request) -> Any:
        return await self.rm.fetch_messages(req.body, req.api_version)

    async def list_offsets(self, conn: Connection, req: Request) -> Any:
        return self.rm.list_offsets(req.body, req.api_version)

    async def offsets_for_leader_epoch(self, conn: Connection, req: Request) -> Any:
        return self.rm.offsets_for_leader_epoch(req.body, req.api_version)

    async def delete_records(self, conn: Connection, req: Request) -> Any:
        return self.rm.delete_records(req.body, req.api_version)

    def register(self, apis: KafkaApis) -> None:
        apis.register(ApiKey.PRODUCE, self.produce)
        apis.register(ApiKey.FETCH, self.fetch)
        apis.register(ApiKey.LIST_OFFSETS, self.list_offsets)
        apis.register(ApiKey.OFFSET_FOR_LEADER_EPOCH, self.offsets_for_leader_epoch)
        apis.register(ApiKey.DELETE_RECORDS, self.delete_records)
