"""A consumer group member for the CLI (classic protocol, consumer protocol type, range assignment).

Why ours and not kafka-python's: kafka-python's group membership lives inside ``KafkaConsumer``
(its coordinator runs a heartbeat thread on kafka-python's own network client), so using it would
put a second, separately configured client stack under the CLI beside the one every other
connection uses, with its own version negotiation and retry rules. The CLI needs only join, sync,
heartbeat on demand, commit and leave, which is the little code below, on the one client.
"""

from __future__ import annotations

import contextlib
import struct
import time
from typing import TYPE_CHECKING

from clients.connection import WireError, check
from protocol.api_versions import ApiKey
from protocol.messages import request_type
from protocol.schema import message_type

if TYPE_CHECKING:
    from clients.admin import WireClient

__all__ = ["GroupMember", "decode_assignment", "decode_subscription", "encode_assignment", "encode_subscription",
           "range_assign"]


def encode_subscription(topics: list[str]) -> bytes:
    mt = message_type("ConsumerProtocolSubscription")
    return struct.pack(">h", 0) + mt.encode(mt(topics=sorted(topics), user_data=None), 0)


def decode_subscription(data: bytes | None) -> list[str]:
    if not data or len(data) < 2:
        return []
    mt = message_type("ConsumerProtocolSubscription")
    (v,) = struct.unpack_from(">h", data)
    try:
        sub, _ = mt.decode(memoryview(data), min(max(v, 0), 3), 2, exact=False)
    except Exception:
        return []
    return list(sub.topics)


def encode_assignment(parts: dict[str, list[int]]) -> bytes:
    mt = message_type("ConsumerProtocolAssignment")
    body = mt(assigned_partitions=[mt.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(parts.items())],
              user_data=None)
    return struct.pack(">h", 0) + mt.encode(body, 0)


def decode_assignment(data: bytes | None) -> dict[str, list[int]]:
    if not data or len(data) < 2:
        return {}
    mt = message_type("ConsumerProtocolAssignment")
    (v,) = struct.unpack_from(">h", data)
    try:
        a, _ = mt.decode(memoryview(data), min(max(v, 0), 3), 2, exact=False)
    except Exception:
        return {}
    return {tp.topic: list(tp.partitions) for tp in a.assigned_partitions}


def range_assign(members: dict[str, list[str]], partitions: dict[str, int]) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, consecutive partition ranges to members sorted by id."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    topics = sorted({t for ts in members.values() for t in ts})
    for t in topics:
        subs = sorted(m for m, ts in members.items() if t in ts)
        n = partitions.get(t, 0)
        if not subs or not n:
            continue
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = per + (1 if i < extra else 0)
            if count:
                out[m][t] = list(range(start, start + count))
            start += count
    return out


class GroupMember:
    """Joins a consumer group, keeps the membership alive with heartbeats and commits offsets."""

    def __init__(self, client: WireClient, group: str, topics: list[str], *, session_timeout_ms: int = 10000,
                 rebalance_timeout_ms: int = 30000, heartbeat_interval_ms: int = 3000) -> None:
        self.client = client
        self.group = group
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.member_id = ""
        self.generation = -1
        self.assignment: dict[str, list[int]] = {}
        self._last_heartbeat = 0.0

    def join(self) -> dict[str, list[int]]:
        for _ in range(20):
            r = self.client.call_coordinator(
                self.group, ApiKey.JOIN_GROUP, group_id=self.group, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id, group_instance_id=None,
                protocol_type="consumer", reason=None,
                protocols=[request_type(ApiKey.JOIN_GROUP).JoinGroupRequestProtocol(
                    name="range", metadata=encode_subscription(self.topics))])
            if r.error_code == 79:  # MEMBER_ID_REQUIRED
                self.member_id = r.member_id
                continue
            if r.error_code in (25, 22):  # unknown member / illegal generation: start over
                self.member_id = ""
                continue
            if r.error_code == 27:
                continue
            check(r.error_code, context=f"JoinGroup '{self.group}'")
            self.member_id = r.member_id
            self.generation = r.generation_id
            assignments = []
            if r.leader == r.member_id:
                members = {m.member_id: decode_subscription(bytes(m.metadata)) for m in r.members}
                counts = {t: len(info.partitions) for t, info in
                          self.client.topics(sorted({t for ts in members.values() for t in ts})).items()
                          if info.error_code == 0}
                plan = range_assign(members, counts)
                mt = request_type(ApiKey.SYNC_GROUP)
                assignments = [mt.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(a))
                               for m, a in plan.items()]
            s = self.client.call_coordinator(
                self.group, ApiKey.SYNC_GROUP, group_id=self.group, generation_id=self.generation,
                member_id=self.member_id, group_instance_id=None, protocol_type="consumer", protocol_name="range",
                assignments=assignments)
            if s.error_code in (27, 22, 25):
                if s.error_code == 25:
                    self.member_id = ""
                continue
            check(s.error_code, context=f"SyncGroup '{self.group}'")
            self.assignment = decode_assignment(bytes(s.assignment))
            self._last_heartbeat = time.monotonic()
            return self.assignment
        raise WireError(f"could not join group '{self.group}' (it keeps rebalancing)")

    def heartbeat(self, force: bool = False) -> bool:
        """Heartbeat when due; False when the group rebalanced (call join again)."""
        if not force and time.monotonic() - self._last_heartbeat < self.heartbeat_s:
            return True
        r = self.client.call_coordinator(self.group, ApiKey.HEARTBEAT, group_id=self.group,
                                         generation_id=self.generation, member_id=self.member_id,
                                         group_instance_id=None)
        self._last_heartbeat = time.monotonic()
        if r.error_code in (27, 22, 25):
            if r.error_code == 25:
                self.member_id = ""
            return False
        check(r.error_code, context=f"Heartbeat '{self.group}'")
        return True

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        if offsets:
            self.client.commit_offsets(self.group, offsets, generation=self.generation, member_id=self.member_id)

    def leave(self) -> None:
        if not self.member_id:
            return
        mt = request_type(ApiKey.LEAVE_GROUP)
        with contextlib.suppress(WireError):
            self.client.call_coordinator(self.group, ApiKey.LEAVE_GROUP, group_id=self.group,
                                         members=[mt.MemberIdentity(member_id=self.member_id, group_instance_id=None,
                                                                    reason="the consumer is closing")])
        self.member_id = ""
