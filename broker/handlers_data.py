"""Data-path APIs: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.api_versions import ApiKey

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.connection import Connection
    from protocol.messages import Request


def register(broker: Broker) -> None:
    rm = broker.replica_manager
    assert rm is not None

    async def produce(conn: Connection, req: Request) -> Any:
        return await rm.append_records(req.body, req.api_version)

    async def fetch(conn: Connection, req: Request) -> Any:
        return await rm.fetch_messages(req.body, req.api_version)

    async def list_offsets(conn: Connection, req: Request) -> Any:
        return rm.list_offsets(req.body, req.api_version)

    async def offsets_for_leader_epoch(conn: Connection, req: Request) -> Any:
        return rm.offsets_for_leader_epoch(req.body, req.api_version)

    async def delete_records(conn: Connection, req: Request) -> Any:
        return rm.delete_records(req.body, req.api_version)

    apis = broker.apis
    apis.register(ApiKey.PRODUCE, produce)
    apis.register(ApiKey.FETCH, fetch)
    apis.register(ApiKey.LIST_OFFSETS, list_offsets)
    apis.register(ApiKey.OFFSET_FOR_LEADER_EPOCH, offsets_for_leader_epoch)
    apis.register(ApiKey.DELETE_RECORDS, delete_records)
