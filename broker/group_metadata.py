"""In-memory state of classic-protocol consumer groups: members, generations, committed offsets.

This is the bookkeeping of the group coordinator (``broker/group_membership.py`` drives it):
no I/O, no timers of its own, just the state machine's data and the rules that only look at one
group. It follows Apache Kafka's classic group semantics:

* states ``Empty -> PreparingRebalance -> CompletingRebalance -> Stable``, back to
  ``PreparingRebalance`` on any membership or metadata change, and ``Dead`` once the group is
  deleted, expired or its ``__consumer_offsets`` partition moves away;
* the protocol of a generation is chosen by vote among the protocols every member supports, each
  member voting for the first candidate in its own preference order;
* static members (``group.instance.id``) map an instance id to the member id currently holding it;
* offsets: committed offsets (with the log offset of the record that committed them, so that a
  transactional commit that completes late cannot overwrite a newer plain commit), commits in
  flight, and transactional commits pending on their transaction's outcome.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode
from protocol.schema import message_type

if TYPE_CHECKING:
    from storage.clock import TimerHandle

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_TYPE_CLASSIC = "classic"


class GroupState(enum.Enum):
    """A classic group's state; the value is Kafka's name for it (ListGroups, DescribeGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


class IllegalGroupStateError(RuntimeError):
    """An internal invariant of the group state machine was broken (a bug, never a client error)."""


TopicPartition = tuple[str, int]


@dataclass(slots=True)
class OffsetAndMetadata:
    """One committed offset as the coordinator keeps it (and writes it to ``__consumer_offsets``)."""

    offset: int
    leader_epoch: int = -1  # -1: none
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int | None = None  # only from OffsetCommit v2-v4 with a retention time


@dataclass(slots=True)
class CommitRecord:
    """A committed offset plus the log offset of the record that carried it (None until appended)."""

    log_offset: int | None
    value: OffsetAndMetadata

    def older_than(self, other: CommitRecord) -> bool:
        if self.log_offset is None or other.log_offset is None:
            raise IllegalGroupStateError("comparing offset commits that have not been appended")
        return self.log_offset < other.log_offset


@dataclass(slots=True)
class JoinResult:
    member_id: str
    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata) of every member: only in the leader's response
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


class MemberMetadata:
    """One member of a classic group."""

    __slots__ = (
        "assignment", "awaiting_join", "awaiting_sync", "client_host", "client_id", "group_instance_id",
        "heartbeat_satisfied", "heartbeat_timer", "is_new", "member_id", "protocol_type",
        "rebalance_timeout_ms", "session_timeout_ms", "supported_protocols",
    )

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 supported_protocols: list[tuple[str, bytes]], assignment: bytes = b"") -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = assignment
        self.awaiting_join: JoinCallback | None = None
        self.awaiting_sync: SyncCallback | None = None
        self.is_new = False
        # Liveness: set when a heartbeat (or anything proving the member alive) arrives; the
        # session timer only removes the member if it is still unset when the timer fires.
        self.heartbeat_satisfied = False
        self.heartbeat_timer: TimerHandle | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.supported_protocols:
            if name == protocol:
                return meta
        raise IllegalGroupStateError(f"member {self.member_id} does not support protocol {protocol}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            # New members can expire while awaiting their first join response.
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            # A member parked in a rebalance is alive by definition.
            return True
        return self.heartbeat_satisfied

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return len(protocols) == len(self.supported_protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.supported_protocols, strict=True))

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise IllegalGroupStateError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def cancel_heartbeat(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None

    def __repr__(self) -> str:
        return (f"MemberMetadata(member_id={self.member_id!r}, group_instance_id={self.group_instance_id!r}, "
                f"client_id={self.client_id!r}, client_host={self.client_host!r}, "
                f"session_timeout_ms={self.session_timeout_ms}, rebalance_timeout_ms={self.rebalance_timeout_ms}, "
                f"protocols={[p for p, _ in self.supported_protocols]})")


def subscribed_topics_of(metadata: bytes) -> set[str]:
    """Topics in a consumer protocol subscription (int16 version, then ConsumerProtocolSubscription).

    Every version starts with the topic list, so reading it as version 0 works for all of them,
    newer ones included. Raises ValueError when the bytes are not a subscription.
    """
    if len(metadata) < 2:
        raise ValueError("subscription shorter than its version")
    if int.from_bytes(metadata[:2], "big", signed=True) < 0:
        raise ValueError("negative consumer protocol version")
    try:
        sub, _ = message_type("ConsumerProtocolSubscription").decode(memoryview(metadata), 0, 2, exact=False)
    except Exception as e:  # ProtocolError and friends
        raise ValueError(f"unreadable subscription: {e}") from None
    return set(sub.topics)  # type: ignore[attr-defined]


class GroupMetadata:
    """One classic group: membership, generation, protocol, committed and pending offsets."""

    def __init__(self, group_id: str, state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp: int | None = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # member ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocol_counts: dict[str, int] = {}
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

        self.offsets: dict[TopicPartition, CommitRecord] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        self.pending_txn_offset_commits: dict[int, dict[TopicPartition, CommitRecord]] = {}
        self.received_consumer_offset_commits = False
        self.received_txn_offset_commits = False

        # Timers and delayed operations the coordinator hangs on the group.
        self.join_op: Any = None
        self.sync_op: Any = None
        self.pending_member_timers: dict[str, TimerHandle] = {}

    # -- basics ----------------------------------------------------------------------------------

    def is_state(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def current_state_timestamp_or_default(self) -> int:
        return -1 if self.current_state_timestamp is None else self.current_state_timestamp

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalGroupStateError(
                f"group {self.group_id} cannot move from {self.state.value} to {state.value}")
        self.state = state
        self.current_state_timestamp = now_ms

    # -- membership ------------------------------------------------------------------------------

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise IllegalGroupStateError(
                    f"static member {member.group_instance_id} is already in group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise IllegalGroupStateError("member protocol type differs from the group's")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, +1)
        member.awaiting_join = callback
        if callback is not None:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def _count_protocols(self, member: MemberMetadata, delta: int) -> None:
        for name, _ in member.supported_protocols:
            self.supported_protocol_counts[name] = self.supported_protocol_counts.get(name, 0) + delta

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                log.info("group %s: leader %s did not rejoin in time, %s leads now",
                         self.group_id, self.leader_id, member_id)
                self.leader_id = member_id
                return True
        return False

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        member = self.members.pop(old_member_id, None)
        if member is None:
            raise IllegalGroupStateError(f"cannot replace unknown member {old_member_id}")
        # The fenced member learns about it if it is parked in a join or a sync.
        self.maybe_invoke_join_callback(member, JoinResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return member

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add_pending_member(self, member_id: str) -> None:
        if self.has(member_id):
            raise IllegalGroupStateError(f"pending member {member_id} is already a member")
        self.pending_members.add(member_id)

    def add_pending_sync_member(self, member_id: str) -> None:
        if not self.has(member_id):
            raise IllegalGroupStateError(f"pending sync for non-member {member_id}")
        self.pending_sync_members.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        self.pending_sync_members.discard(member_id)

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def current_static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    @property
    def num_awaiting(self) -> int:
        return self.num_members_awaiting_join

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    # -- protocols -------------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocol_counts.items() if count == n}

    def select_protocol(self) -> str:
        if not self.members:
            raise IllegalGroupStateError("cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # Most votes wins; ties go to the protocol voted for first.
        return max(votes.items(), key=lambda kv: kv[1])[0]

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = set(protocols)
        if self.is_state(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocol_counts.get(p, 0) == n for p in names)

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, callback: JoinCallback | None) -> None:
        self._count_protocols(member, -1)
        member.supported_protocols = protocols
        self._count_protocols(member, +1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = callback

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, or None when unknown (not a consumer group, bad bytes)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscribed_topics_of(member.metadata(self.protocol_name))
        except (ValueError, IllegalGroupStateError) as e:
            log.warning("group %s: cannot read the consumer subscriptions (%s); treating every topic as "
                        "subscribed", self.group_id, e)
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    # -- callbacks -------------------------------------------------------------------------------

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinResult) -> None:
        callback = member.awaiting_join
        if callback is None:
            return
        member.awaiting_join = None
        self.num_members_awaiting_join -= 1
        try:
            callback(result)
        except Exception:
            log.exception("join callback of %s failed", member.member_id)

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncResult) -> bool:
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        try:
            callback(result)
        except Exception:
            log.exception("sync callback of %s failed", member.member_id)
        return True

    # -- generations -----------------------------------------------------------------------------

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.received_consumer_offset_commits = False
        self.received_txn_offset_commits = False
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE) or self.protocol_name is None:
            raise IllegalGroupStateError(f"no member metadata for a group in state {self.state.value}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    # -- offsets ---------------------------------------------------------------------------------

    def initialize_offsets(self, offsets: dict[TopicPartition, CommitRecord],
                           pending_txn: dict[int, dict[TopicPartition, CommitRecord]]) -> None:
        self.offsets.update(offsets)
        self.pending_txn_offset_commits.update(pending_txn)

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.received_consumer_offset_commits = True
        self.pending_offset_commits.update(offsets)

    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.received_txn_offset_commits = True
        pending = self.pending_txn_offset_commits.setdefault(producer_id, {})
        for tp, om in offsets.items():
            pending[tp] = CommitRecord(None, om)

    def has_received_consistent_offset_commits(self) -> bool:
        return not (self.received_consumer_offset_commits and self.received_txn_offset_commits)

    def on_offset_commit_append(self, tp: TopicPartition, record: CommitRecord) -> None:
        staged = self.pending_offset_commits.get(tp)
        if staged is not None:
            current = self.offsets.get(tp)
            if current is None or current.older_than(record):
                self.offsets[tp] = record
            if staged == record.value:
                del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, value: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == value:
            del self.pending_offset_commits[tp]

    def on_txn_offset_commit_append(self, producer_id: int, tp: TopicPartition, record: CommitRecord) -> None:
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None and tp in pending and pending[tp].value == record.value:
            pending[tp] = record

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: TopicPartition) -> None:
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None:
            pending.pop(tp, None)
            if not pending:
                del self.pending_txn_offset_commits[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, is_commit: bool) -> None:
        pending = self.pending_txn_offset_commits.pop(producer_id, None)
        if not is_commit or not pending:
            return
        for tp, record in pending.items():
            if record.log_offset is None:
                # The commit record never reached the log, so there is nothing to apply.
                log.warning("group %s: transactional offset for %s of producer %d completed before its "
                            "record was appended; ignored", self.group_id, tp, producer_id)
                continue
            current = self.offsets.get(tp)
            if current is None or current.older_than(record):
                self.offsets[tp] = record

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn_offset_commits

    def has_pending_offset_commits_for(self, tp: TopicPartition) -> bool:
        return tp in self.pending_offset_commits or any(
            tp in pending for pending in self.pending_txn_offset_commits.values())

    def remove_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        removed: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in list(tps):
            self.pending_offset_commits.pop(tp, None)
            for pending in self.pending_txn_offset_commits.values():
                pending.pop(tp, None)
            record = self.offsets.pop(tp, None)
            if record is not None:
                removed[tp] = record.value
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
        """Drop offsets past retention (Kafka 2.1+ rules, KIP-211) and return them.

        * a group with a protocol type that is Empty: ``retention`` after it became empty;
        * a Stable consumer group: offsets of topics it no longer subscribes to, ``retention``
          after their commit;
        * a group that never used group management (no protocol type): ``retention`` after commit;
        * an offset with an explicit expire timestamp (OffsetCommit v2-v4): at that time.
        """
        def expired(base: Callable[[CommitRecord], int], subscribed: set[str]) -> list[TopicPartition]:
            out = []
            for tp, record in self.offsets.items():
                if tp[0] in subscribed or tp in self.pending_offset_commits:
                    continue
                if record.value.expire_timestamp is not None:
                    if now_ms >= record.value.expire_timestamp:
                        out.append(tp)
                elif now_ms - base(record) >= retention_ms:
                    out.append(tp)
            return out

        if self.protocol_type is not None and self.is_state(GroupState.EMPTY):
            state_ts = self.current_state_timestamp
            tps = expired(lambda r: state_ts if state_ts is not None else r.value.commit_timestamp, set())
        elif (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None
              and self.is_state(GroupState.STABLE)):
            tps = expired(lambda r: r.value.commit_timestamp, self.subscribed_topics)
        elif self.protocol_type is None:
            tps = expired(lambda r: r.value.commit_timestamp, set())
        else:
            tps = []
        return {tp: self.offsets.pop(tp).value for tp in tps}

    def all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: r.value for tp, r in self.offsets.items()}

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        record = self.offsets.get(tp)
        return None if record is None else record.value

    def has_offsets(self) -> bool:
        return bool(self.offsets or self.pending_offset_commits or self.pending_txn_offset_commits)

    def __repr__(self) -> str:
        return (f"GroupMetadata(group_id={self.group_id!r}, generation={self.generation_id}, "
                f"protocol_type={self.protocol_type!r}, state={self.state.value}, members={list(self.members)})")
