"""Producer ids and transactions: InitProducerId (and, with the transaction coordinator, the txn APIs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.producer_ids import ProducerIdManager
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.connection import Connection
    from protocol.messages import Request

_IPI = response_type(ApiKey.INIT_PRODUCER_ID)


def register(broker: Broker) -> None:
    pids = ProducerIdManager(broker)
    broker.services["producer_ids"] = pids

    async def init_producer_id(conn: Connection, req: Request) -> Any:
        b = req.body
        if b.transactional_id is not None:
            txn = broker.services.get("txn_coordinator")
            if txn is None:
                # Transactions need the transaction coordinator; until it runs here, say so retriably.
                return _IPI(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
            return await txn.handle_init_producer_id(b, req.api_version)
        # Without a transactional id the request is always accepted, whatever its transaction timeout
        # (librdkafka's idempotent producer sends -1), and gets a fresh id with epoch 0, as in Kafka;
        # KIP-360's epoch bump applies to transactional ids.
        pid = await pids.generate()
        return _IPI(error_code=0, producer_id=pid, producer_epoch=0)

    broker.apis.register(ApiKey.INIT_PRODUCER_ID, init_producer_id)
