"""Shared helpers for the group coordinator tests: an in-memory ``__consumer_offsets`` and a client.

The client speaks to the coordinator through its public handler API with request bodies built from
the compiled message types, and every response goes through an encode/decode round trip at the
requested version, so a response that could not be put on the wire fails the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from broker.group_coordinator import GroupCoordinator, GroupCoordinatorConfig, LogEntry
from broker.handlers_group import GroupApis
from protocol.api_versions import ApiKey
from protocol.errors import KafkaError
from protocol.messages import request_type, response_type
from protocol.schema import message_type
from storage.clock import ManualClock

FAST = {
    "group.min.session.timeout.ms": 10,
    "group.max.session.timeout.ms": 60_000,
    "group.initial.rebalance.delay.ms": 0,
}


class MemoryOffsetsLog:
    """``OffsetsLog`` over Python lists; offsets are list indexes."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[LogEntry]] = {}
        self.fail_with: int | None = None  # Kafka error code the next appends raise
        self.append_delay_s = 0.0

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                     producer_epoch: int = -1, transactional: bool = False, required_acks: int = -1) -> int:
        if self.fail_with is not None:
            raise KafkaError(self.fail_with)
        entries = self.partitions.setdefault(partition, [])
        base = len(entries)
        for i, (key, value) in enumerate(records):
            entries.append(LogEntry(base + i, key, value, producer_id, transactional))
        if self.append_delay_s:
            await asyncio.sleep(self.append_delay_s)
        return base

    def write_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        entries = self.partitions.setdefault(partition, [])
        entries.append(LogEntry(len(entries), None, None, producer_id, True, "commit" if commit else "abort"))

    def read_all(self, partition: int) -> list[LogEntry]:
        return list(self.partitions.get(partition, []))

    def records(self, partition: int) -> list[LogEntry]:
        return [e for e in self.partitions.get(partition, []) if e.control is None]


def make_coordinator(log: MemoryOffsetsLog | None = None, num_partitions: int = 1, *,
                     clock: ManualClock | None = None, **config: Any) -> GroupCoordinator:
    """A coordinator on a ``ManualClock`` (``coord.clock``): no timer fires unless a test advances it."""
    settings = dict(FAST)
    settings.update({k.replace("_", "."): v for k, v in config.items()})
    return GroupCoordinator(log or MemoryOffsetsLog(), GroupCoordinatorConfig.from_config(settings),
                            num_partitions=num_partitions, clock=clock or ManualClock())


async def until(condition: Callable[[], bool], what: str = "condition", max_turns: int = 1000) -> None:
    """Let the event loop run (zero-delay yields, no wall-clock wait) until ``condition()`` holds."""
    for _ in range(max_turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{what} never became true")


async def parked(coro: Any) -> asyncio.Future[Any]:
    """Start a request that the coordinator parks (JoinGroup/SyncGroup) and let it reach the coordinator."""
    fut = asyncio.ensure_future(coro)
    for _ in range(5):
        await asyncio.sleep(0)
    return fut


async def loaded(coord: GroupCoordinator) -> GroupCoordinator:
    for p in range(coord.num_partitions):
        await coord.load_partition(p)
    return coord


def subscription(*topics: str) -> bytes:
    """Consumer protocol member metadata: int16 version 0, then ConsumerProtocolSubscription v0."""
    mt = message_type("ConsumerProtocolSubscription")
    return b"\x00\x00" + mt.encode(mt(topics=list(topics), user_data=None), 0)


def roundtrip_response(api: ApiKey, body: Any, version: int) -> Any:
    mt = response_type(api)
    decoded, _ = mt.decode(mt.encode(body, version), version)
    return decoded


def req(api: ApiKey, **fields: Any) -> Any:
    return request_type(api)(**fields)


class Client:
    """One consumer's view of a group, driving the coordinator's handlers."""

    def __init__(self, coord: GroupCoordinator, group_id: str = "g", *, client_id: str = "c",
                 instance_id: str | None = None, session_timeout_ms: int = 300, rebalance_timeout_ms: int = 300,
                 topics: tuple[str, ...] = ("t",), protocols: list[tuple[str, bytes]] | None = None,
                 version: int = 9) -> None:
        self.coord = coord
        self.group_id = group_id
        self.client_id = client_id
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.protocols = protocols if protocols is not None else [("range", subscription(*topics))]
        self.protocol_type = "consumer"
        self.version = version
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.last_join: Any = None

    async def join_once(self, version: int | None = None) -> Any:
        v = self.version if version is None else version
        body = req(ApiKey.JOIN_GROUP, group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                   rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                   group_instance_id=self.instance_id, protocol_type=self.protocol_type,
                   protocols=[request_type(ApiKey.JOIN_GROUP).JoinGroupRequestProtocol(name=n, metadata=m)  # type: ignore[attr-defined]
                              for n, m in self.protocols])
        resp = roundtrip_response(ApiKey.JOIN_GROUP, await GroupApis(self.coord).handle_join_group(body, v, self.client_id,
                                                                                        "127.0.0.1"), v)
        self.last_join = resp
        if resp.error_code in (0, 79):
            self.member_id = resp.member_id
        if resp.error_code == 0:
            self.generation = resp.generation_id
            self.leader = resp.leader
        return resp

    async def join(self, version: int | None = None) -> Any:
        """JoinGroup, repeating once after MEMBER_ID_REQUIRED as clients do."""
        resp = await self.join_once(version)
        if resp.error_code == 79:
            resp = await self.join_once(version)
        return resp

    async def sync(self, assignments: dict[str, bytes] | None = None, version: int = 5,
                   generation: int | None = None) -> Any:
        smt: Any = request_type(ApiKey.SYNC_GROUP)
        body = smt(group_id=self.group_id, generation_id=self.generation if generation is None else generation,
                   member_id=self.member_id, group_instance_id=self.instance_id, protocol_type=self.protocol_type,
                   protocol_name=self.protocols[0][0] if version >= 5 else None,
                   assignments=[smt.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                for m, a in (assignments or {}).items()])
        return roundtrip_response(ApiKey.SYNC_GROUP, await GroupApis(self.coord).handle_sync_group(body, version), version)

    async def heartbeat(self, version: int = 4) -> int:
        body = req(ApiKey.HEARTBEAT, group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                   group_instance_id=self.instance_id)
        resp = roundtrip_response(ApiKey.HEARTBEAT, await GroupApis(self.coord).handle_heartbeat(body, version), version)
        return resp.error_code

    async def leave(self, version: int = 5) -> Any:
        lmt: Any = request_type(ApiKey.LEAVE_GROUP)
        body = lmt(group_id=self.group_id, member_id=self.member_id,
                   members=[lmt.MemberIdentity(member_id=self.member_id, group_instance_id=self.instance_id,
                                               reason="bye")])
        return roundtrip_response(ApiKey.LEAVE_GROUP, await GroupApis(self.coord).handle_leave_group(body, version), version)

    async def commit(self, offsets: dict[tuple[str, int], int], version: int = 9, generation: int | None = None,
                     member_id: str | None = None, metadata: str | None = "", retention_ms: int = -1) -> dict:
        return await commit(self.coord, self.group_id, offsets, version=version,
                            generation=self.generation if generation is None else generation,
                            member_id=self.member_id if member_id is None else member_id,
                            instance_id=self.instance_id, metadata=metadata, retention_ms=retention_ms)


async def commit(coord: GroupCoordinator, group_id: str, offsets: dict[tuple[str, int], int], *, version: int = 9,
                 generation: int = -1, member_id: str = "", instance_id: str | None = None,
                 metadata: str | None = "", retention_ms: int = -1, leader_epoch: int = -1) -> dict:
    cmt: Any = request_type(ApiKey.OFFSET_COMMIT)
    topics: dict[str, list[Any]] = {}
    for (t, p), off in offsets.items():
        topics.setdefault(t, []).append(cmt.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=off, committed_leader_epoch=leader_epoch,
            committed_metadata=metadata))
    body = cmt(group_id=group_id, generation_id_or_member_epoch=generation, member_id=member_id,
               group_instance_id=instance_id, retention_time_ms=retention_ms,
               topics=[cmt.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()])
    resp = roundtrip_response(ApiKey.OFFSET_COMMIT, await GroupApis(coord).handle_offset_commit(body, version), version)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


async def fetch(coord: GroupCoordinator, group_id: str, tps: list[tuple[str, int]] | None, *, version: int = 7,
                require_stable: bool = False) -> tuple[int, dict]:
    """(error, {tp: (offset, leader_epoch, metadata, error)}) through OffsetFetch v1-v7."""
    fmt: Any = request_type(ApiKey.OFFSET_FETCH)
    topics = None
    if tps is not None:
        by: dict[str, list[int]] = {}
        for t, p in tps:
            by.setdefault(t, []).append(p)
        topics = [fmt.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by.items()]
    body = fmt(group_id=group_id, topics=topics, require_stable=require_stable)
    resp = roundtrip_response(ApiKey.OFFSET_FETCH, await GroupApis(coord).handle_offset_fetch(body, version), version)
    out = {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
           for t in resp.topics for p in t.partitions}
    return resp.error_code, out


def run(coro: Any) -> Any:
    return asyncio.run(coro)
