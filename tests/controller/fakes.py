"""Test doubles: a broker that only answers the controller's requests, and cluster helpers."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from controller.zk_client import KafkaZkClient
from controller.zk_data import BrokerRegistration, EndPoint
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import frame_size
from protocol.messages import decode_request, encode_response_bytes, response_type


@dataclass
class FakeBroker:
    """Registers in ZooKeeper like a broker and answers LeaderAndIsr / UpdateMetadata / StopReplica
    with success, recording every request."""

    broker_id: int
    zk_connect: str
    rack: str | None = None
    session_timeout_ms: int = 4000
    requests: list[tuple[int, Any]] = field(default_factory=list)
    zk: KafkaZkClient | None = None
    server: asyncio.AbstractServer | None = None
    port: int = 0
    epoch: int = -1
    stop_replica_error: int = ErrorCode.NONE
    controller: Any = None  # a KafkaController to hand AlterPartition / ControlledShutdown to
    delay: float = 0.0

    async def start(self) -> FakeBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        loop = asyncio.get_running_loop()
        self.zk = KafkaZkClient(self.zk_connect, self.session_timeout_ms)
        await loop.run_in_executor(None, self.zk.start)
        await loop.run_in_executor(None, self.zk.create_top_level_paths)
        self.epoch = await loop.run_in_executor(None, self.zk.register_broker, self.registration())
        return self

    def registration(self) -> BrokerRegistration:
        return BrokerRegistration(self.broker_id, (EndPoint("127.0.0.1", self.port),), rack=self.rack)

    async def kill(self) -> None:
        """Like kill -9: the ZooKeeper session ends, the socket stops answering."""
        if self.zk is not None:
            zk, self.zk = self.zk, None
            await asyncio.get_running_loop().run_in_executor(None, zk.close)
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()
            self.server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                prefix = await reader.readexactly(4)
                frame = await reader.readexactly(frame_size(prefix))
                req = decode_request(frame)
                self.requests.append((req.api_key, req.body))
                if self.delay:
                    await asyncio.sleep(self.delay)
                if req.api_key == ApiKey.ALTER_PARTITION and self.controller is not None:
                    body = await self.controller.handle_alter_partition(req.body)
                    out = encode_response_bytes(req.api_key, req.api_version, req.header.correlation_id, body)
                elif req.api_key == ApiKey.CONTROLLED_SHUTDOWN and self.controller is not None:
                    body = await self.controller.handle_controlled_shutdown(req.body.broker_id, req.body.broker_epoch)
                    out = encode_response_bytes(req.api_key, req.api_version, req.header.correlation_id, body)
                else:
                    out = self._answer(req)
                writer.write(out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, req: Any) -> bytes:
        key, ver, corr = req.api_key, req.api_version, req.header.correlation_id
        rt = response_type(key)
        if key == ApiKey.LEADER_AND_ISR:
            body = rt(error_code=0, topics=[rt.LeaderAndIsrTopicError(
                topic_id=t.topic_id, partition_errors=[rt.LeaderAndIsrPartitionError(
                    partition_index=p.partition_index, error_code=0) for p in t.partition_states])
                for t in req.body.topic_states])
        elif key == ApiKey.STOP_REPLICA:
            body = rt(error_code=0, partition_errors=[rt.StopReplicaPartitionError(
                topic_name=t.topic_name, partition_index=p.partition_index, error_code=self.stop_replica_error)
                for t in req.body.topic_states for p in t.partition_states])
        else:
            body = rt(error_code=0)
        return encode_response_bytes(key, ver, corr, body)

    def received(self, api_key: int) -> list[Any]:
        return [b for k, b in self.requests if k == api_key]

    def last_leader_and_isr(self, topic: str, partition: int) -> Any:
        for body in reversed(self.received(ApiKey.LEADER_AND_ISR)):
            for t in body.topic_states:
                if t.topic_name == topic:
                    for p in t.partition_states:
                        if p.partition_index == partition:
                            return body, p
        return None


async def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.02, what: str = "condition") -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)


async def in_thread(fn: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
