"""The classic group membership state machine (the membership half of Kafka's ``GroupCoordinator``).

It owns what happens to members: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, the rebalance
that they drive, static membership and the timers that remove silent members. The group's data and
per-group rules are ``GroupMetadata`` (``broker/group_metadata.py``); writing a generation to
``__consumer_offsets`` is the ``GroupMetadataManager``'s job. Calls take plain values and answer
through callbacks (a JoinGroup or SyncGroup may be parked until the rebalance completes); turning
requests into calls and results into responses is ``broker/handlers_group.py``'s.

The behaviour is Apache Kafka's classic group protocol:

* JoinGroup v4+ first answers MEMBER_ID_REQUIRED with a fresh member id (KIP-394); static members
  (``group.instance.id``, KIP-345) get a new member id on every join, fencing the previous holder
  (FENCED_INSTANCE_ID), and rejoin a Stable group without a rebalance when their protocol allows.
* A rebalance waits up to the rebalance timeout for every member to rejoin; members that do not are
  dropped. The first rebalance of an empty group waits ``group.initial.rebalance.delay.ms``, extended
  by the same delay whenever a new member arrives, up to the rebalance timeout.
* After the join phase, the leader's SyncGroup assignment is written to the log and then handed to
  every member; members that do not send SyncGroup within the rebalance timeout are dropped.
* Members that miss heartbeats for their session timeout are removed, which triggers a rebalance.

Timers come from the injected ``Clock`` (``storage/clock.py``): they play the role of Kafka's
heartbeat and rebalance purgatories, each operation completing early on its event or on its
deadline, and tests drive them with a ``ManualClock``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.group_config import GroupCoordinatorConfig
from broker.group_metadata import (
    GroupMetadata,
    GroupState,
    IllegalGroupStateError,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from broker.group_metadata_manager import GroupMetadataManager
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from storage.clock import Clock, TimerHandle

log = logging.getLogger(__name__)

E = ErrorCode
UNKNOWN_MEMBER_ID = ""
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

@dataclass(slots=True)
class _JoinOp:
    """The join phase of a rebalance: completes when every member rejoined, or at its deadline.

    An initial join (the first rebalance of an empty group) never completes early; at its deadline
    it extends itself while new members keep arriving and rebalance time remains.
    """

    initial: bool
    delay_ms: int
    remaining_ms: int = 0
    timer: TimerHandle | None = None


@dataclass(slots=True)
class _SyncOp:
    """The sync phase: members that have not sent SyncGroup by the deadline are removed."""

    generation: int
    timer: TimerHandle | None = None

class GroupMembership:
    """Join, sync, heartbeat and leave for the groups a ``GroupMetadataManager`` holds."""

    def __init__(self, manager: GroupMetadataManager, config: GroupCoordinatorConfig, clock: Clock) -> None:
        self.config = config
        self._manager = manager
        self._clock = clock
        manager.on_group_loaded = self.on_group_loaded
        manager.on_group_unloaded = self.on_group_unloaded

    def _now(self) -> int:
        return self._clock.now_ms()

    def _call_later(self, delay_ms: float, fn: Callable[..., None], *args: object) -> TimerHandle:
        return self._clock.schedule(delay_ms, fn, *args)

    # -- groups loaded and unloaded by the manager -------------------------------------------------

    def on_group_loaded(self, group: GroupMetadata) -> None:
        log.info("loaded group %s generation %d (%s)", group.group_id, group.generation_id, group.state.value)
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(group, f"loaded group is over capacity ({self.config.group_max_size})")
        for member in list(group.members.values()):
            self.complete_and_schedule_next_heartbeat(group, member)

    def on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(GroupState.DEAD, self._now())
        if previous is GroupState.PREPARING_REBALANCE:
            for member in list(group.members.values()):
                group.maybe_invoke_join_callback(member, JoinResult(member.member_id, E.NOT_COORDINATOR))
        elif previous in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            for member in list(group.members.values()):
                group.maybe_invoke_sync_callback(member, SyncResult(E.NOT_COORDINATOR))
        self._cancel_group_timers(group)

    def _cancel_group_timers(self, group: GroupMetadata) -> None:
        for member in group.members.values():
            member.cancel_heartbeat()
        for handle in group.pending_member_timers.values():
            handle.cancel()
        group.pending_member_timers.clear()
        self._cancel_join_op(group)
        self._remove_sync_expiration(group)

    # -- validation ------------------------------------------------------------------------------

    @staticmethod
    def validate_current_member(group: GroupMetadata, member_id: str, instance_id: str | None,
                                operation: str) -> int | None:
        if instance_id is not None:
            current = group.current_static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("group %s: %s by %s fenced: instance %s belongs to %s", group.group_id, operation,
                         member_id, instance_id, current)
                return E.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        return None

    # -- heartbeat timers --------------------------------------------------------------------------

    def complete_and_schedule_next_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                                             timeout_ms: int | None = None) -> None:
        member.heartbeat_satisfied = True
        member.cancel_heartbeat()
        member.heartbeat_satisfied = False
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self._call_later(timeout, self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_state(GroupState.DEAD) or group.members.get(member.member_id) is not member:
            return
        if not member.has_satisfied_heartbeat():
            log.info("group %s: member %s failed its session timeout, removing it", group.group_id, member.member_id)
            self._remove_member_and_update_group(group, member, "session timeout")

    def _add_pending_member_expiration(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        old = group.pending_member_timers.pop(member_id, None)
        if old is not None:
            old.cancel()
        group.pending_member_timers[member_id] = self._call_later(
            timeout_ms, self._on_pending_member_expired, group, member_id)

    def _cancel_pending_member_expiration(self, group: GroupMetadata, member_id: str) -> None:
        handle = group.pending_member_timers.pop(member_id, None)
        if handle is not None:
            handle.cancel()

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_member_timers.pop(member_id, None)
        if group.is_state(GroupState.DEAD) or group.has(member_id):
            return
        if group.is_pending_member(member_id):
            log.info("group %s: pending member %s never joined, removed", group.group_id, member_id)
            self._remove_pending_member_and_update_group(group, member_id)

    # -- rebalance: join phase ---------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_state(GroupState.EMPTY)
        delay = self.config.group_initial_rebalance_delay_ms
        group.transition_to(GroupState.PREPARING_REBALANCE, self._now())
        log.info("group %s: preparing to rebalance (generation %d, partition %d): %s", group.group_id,
                 group.generation_id, self._manager.partition_for(group.group_id), reason)
        if initial:
            self._start_join_op(group, _JoinOp(True, delay, max(group.rebalance_timeout_ms() - delay, 0)))
        else:
            self._start_join_op(group, _JoinOp(False, group.rebalance_timeout_ms()))
            self._try_complete_join(group)

    def _start_join_op(self, group: GroupMetadata, op: _JoinOp) -> None:
        self._cancel_join_op(group)
        group.join_op = op
        op.timer = self._call_later(op.delay_ms, self._on_join_deadline, group, op)

    def _cancel_join_op(self, group: GroupMetadata) -> None:
        op = group.join_op
        if op is not None:
            if op.timer is not None:
                op.timer.cancel()
            group.join_op = None

    def _try_complete_join(self, group: GroupMetadata) -> None:
        op = group.join_op
        if op is not None and not op.initial and group.has_all_members_joined():
            self._cancel_join_op(group)
            self._on_complete_join(group)

    def _on_join_deadline(self, group: GroupMetadata, op: _JoinOp) -> None:
        if group.join_op is not op:
            return
        op.timer = None
        group.join_op = None
        if op.initial and group.new_member_added and op.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, op.remaining_ms)
            remaining = max(op.remaining_ms - op.delay_ms, 0)
            self._start_join_op(group, _JoinOp(True, delay, remaining))
            return
        self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                log.info("group %s: member %s did not rejoin in time, removed", group.group_id, member.member_id)
                self._remove_member(group, member)
        if group.is_state(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout while session timeouts clear the group.
            log.warning("group %s: no member rejoined, the rebalance waits longer", group.group_id)
            self._start_join_op(group, _JoinOp(False, group.rebalance_timeout_ms()))
            self._try_complete_join(group)
            return
        group.init_next_generation(self._now())
        if group.is_state(GroupState.EMPTY):
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)

            def on_stored(error: int) -> None:
                if error != E.NONE:
                    log.warning("group %s: writing the empty generation failed with %s", group.group_id,
                                ErrorCode(error).name if error in ErrorCode._value2member_map_ else error)

            self._manager.store_group(group, {}, on_stored)
            return
        log.info("group %s: generation %d with %d members (protocol %s)", group.group_id, group.generation_id,
                 group.size, group.protocol_name)
        all_members = group.current_member_metadata()
        for member in list(group.members.values()):
            is_leader = group.is_leader(member.member_id)
            group.maybe_invoke_join_callback(member, JoinResult(
                member.member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                group.leader_id or "", False, all_members if is_leader else []))
            self.complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Drop a member outright (no rebalance decision here); answers its parked requests."""
        group.remove(member.member_id)
        member.cancel_heartbeat()
        group.maybe_invoke_sync_callback(member, SyncResult(E.UNKNOWN_MEMBER_ID))

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A new member may time out while its JoinGroup is parked: answer it so that it can retry.
        group.maybe_invoke_join_callback(member, JoinResult(UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID))
        self._remove_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        self._cancel_pending_member_expiration(group, member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- rebalance: sync phase ---------------------------------------------------------------------

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self._remove_sync_op(group)
        op = _SyncOp(group.generation_id)
        group.sync_op = op
        op.timer = self._call_later(group.rebalance_timeout_ms(), self._on_sync_deadline, group, op)
        self._maybe_complete_sync_expiration(group)

    def _remove_sync_op(self, group: GroupMetadata) -> None:
        op = group.sync_op
        if op is not None:
            if op.timer is not None:
                op.timer.cancel()
            group.sync_op = None

    def _maybe_complete_sync_expiration(self, group: GroupMetadata) -> None:
        op = group.sync_op
        if op is None:
            return
        if (op.generation != group.generation_id
                or group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
                or group.has_received_sync_from_all_members()):
            self._remove_sync_op(group)

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self._maybe_complete_sync_expiration(group)

    def _on_sync_deadline(self, group: GroupMetadata, op: _SyncOp) -> None:
        if group.sync_op is not op:
            return
        group.sync_op = None
        if op.generation != group.generation_id or group.state not in (
                GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if group.has_received_sync_from_all_members():
            return
        missing = list(group.pending_sync_members)
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
        log.info("group %s: members %s did not send SyncGroup in time, removed", group.group_id, missing)
        self._prepare_rebalance(group, f"removing {missing} on pending sync expiration")

    def _set_and_propagate_assignment(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, E.NONE)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        ok = error == E.NONE
        for member in list(group.members.values()):
            result = SyncResult(error, group.protocol_type if ok else None, group.protocol_name if ok else None,
                                member.assignment)
            if group.maybe_invoke_sync_callback(member, result):
                # Members parked in SyncGroup did not heartbeat meanwhile: restart their session.
                self.complete_and_schedule_next_heartbeat(group, member)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        state = group.state
        if state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if state is GroupState.PREPARING_REBALANCE:
            return ((group.has(member_id) and group.get(member_id).is_awaiting_join)
                    or group.num_awaiting < self.config.group_max_size)
        return group.has(member_id) or group.size < self.config.group_max_size

    def join_group(self, group_id: str, member_id: str, instance_id: str | None, require_known_member_id: bool,
                   support_skip_assignment: bool, client_id: str, client_host: str, rebalance_timeout_ms: int,
                   session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                   callback: Callable[[JoinResult], None]) -> None:
        error = self._manager.validate_group_status(group_id, ApiKey.JOIN_GROUP)
        if error is not None:
            callback(JoinResult(member_id, error))
            return
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            callback(JoinResult(member_id, E.INVALID_SESSION_TIMEOUT))
            return
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self._manager.get_group(group_id)
        if group is None:
            if not is_unknown:
                callback(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))
                return
            group = self._manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self._now()))
        if not self._accept_joining_member(group, member_id):
            removed = group.remove(member_id)
            if removed is not None:
                removed.cancel_heartbeat()
            callback(JoinResult(UNKNOWN_MEMBER_ID, E.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._new_member_join(group, instance_id, require_known_member_id, support_skip_assignment, client_id,
                                  client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                  callback)
        else:
            self._current_member_join(group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                      session_timeout_ms, protocol_type, protocols, callback)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _new_member_join(self, group: GroupMetadata, instance_id: str | None, require_known_member_id: bool,
                         support_skip_assignment: bool, client_id: str, client_host: str, rebalance_timeout_ms: int,
                         session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                         callback: Callable[[JoinResult], None]) -> None:
        if group.is_state(GroupState.DEAD):
            callback(JoinResult(UNKNOWN_MEMBER_ID, E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, [p for p, _ in protocols]):
            callback(JoinResult(UNKNOWN_MEMBER_ID, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = group.generate_member_id(client_id, instance_id)
        if instance_id is not None:
            old_member_id = group.current_static_member_id(instance_id)
            if old_member_id is not None:
                log.info("group %s: static member %s rejoins with a new member id %s (replacing %s)",
                         group.group_id, instance_id, new_member_id, old_member_id)
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, instance_id, protocols,
                                                         rebalance_timeout_ms, session_timeout_ms, callback,
                                                         support_skip_assignment)
            else:
                self._add_member_and_rebalance(group, new_member_id, instance_id, client_id, client_host,
                                               rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                               callback)
        elif require_known_member_id:
            # KIP-394: hand out the member id and make the client come back with it.
            group.add_pending_member(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, session_timeout_ms)
            callback(JoinResult(new_member_id, E.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_member_id, None, client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, callback)

    def _current_member_join(self, group: GroupMetadata, member_id: str, instance_id: str | None, client_id: str,
                             client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                             protocol_type: str, protocols: list[tuple[str, bytes]],
                             callback: Callable[[JoinResult], None]) -> None:
        if group.is_state(GroupState.DEAD):
            callback(JoinResult(member_id, E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, [p for p, _ in protocols]):
            callback(JoinResult(member_id, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if instance_id is not None:
                # Pending members are dynamic by construction; a static id here is a confused client.
                callback(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))
                return
            self._add_member_and_rebalance(group, member_id, None, client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, callback)
            return
        error = self.validate_current_member(group, member_id, instance_id, "join-group")
        if error is not None:
            callback(JoinResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              callback, "member rejoining during PreparingRebalance")
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # Probably a retry after a lost JoinGroup response: answer with the current generation.
                callback(JoinResult(member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                                    group.leader_id or "", False,
                                    group.current_member_metadata() if group.is_leader(member_id) else []))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, callback, "member metadata changed")
        elif state is GroupState.STABLE:
            if group.is_leader(member_id):
                # The leader rejoins to make the group rebalance (e.g. its topics' metadata changed).
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, callback, "leader rejoining")
            elif not member.matches(protocols):
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, callback, "member metadata changed")
            else:
                callback(JoinResult(member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                                    group.leader_id or "", False, []))
        else:
            log.warning("group %s: member %s rejoins a group in state %s", group.group_id, member_id, state.value)
            callback(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                                  client_id: str, client_host: str, rebalance_timeout_ms: int,
                                  session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                                  callback: Callable[[JoinResult], None]) -> None:
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, protocols)
        member.is_new = True
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        self._cancel_pending_member_expiration(group, member_id)
        # A new member cannot heartbeat before its first join response; a parked JoinGroup of a client
        # that went away must not hold the rebalance forever, so new members get a join deadline.
        self.complete_and_schedule_next_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"new member {member_id} (instance {instance_id}) joined")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, callback: Callable[[JoinResult], None],
                                     reason: str) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, f"{reason} ({member.member_id})")

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                            instance_id: str, protocols: list[tuple[str, bytes]],
                                            rebalance_timeout_ms: int, session_timeout_ms: int,
                                            callback: Callable[[JoinResult], None],
                                            support_skip_assignment: bool) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.complete_and_schedule_next_heartbeat(group, member)
        old_protocols = member.supported_protocols
        old_rebalance_timeout, old_session_timeout = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol next generation: persist the new member id, no rebalance.
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def on_stored(error: int) -> None:
                    if error != E.NONE:
                        log.warning("group %s: persisting static member %s failed (%d); reverting",
                                    group.group_id, instance_id, error)
                        group.update_member(member, old_protocols, old_rebalance_timeout, old_session_timeout, None)
                        if group.has(new_member_id):
                            old = group.replace_static_member(instance_id, new_member_id, old_member_id)
                            self.complete_and_schedule_next_heartbeat(group, old)
                        callback(JoinResult(UNKNOWN_MEMBER_ID, error, group.generation_id, group.protocol_type,
                                            group.protocol_name, current_leader))
                    elif support_skip_assignment:
                        # JoinGroup v9+: a static leader learns it leads but must not run the assignor.
                        is_leader = group.is_leader(new_member_id)
                        group.maybe_invoke_join_callback(member, JoinResult(
                            new_member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                            group.leader_id or "", is_leader,
                            group.current_member_metadata() if is_leader else []))
                    else:
                        # Older clients: report the old leader id so the rejoining member never thinks it
                        # must assign (a Stable group would ignore that assignment anyway).
                        group.maybe_invoke_join_callback(member, JoinResult(
                            new_member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                            current_leader, False, []))

                self._manager.store_group(group, assignment, on_stored)
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} rejoined with a protocol change")
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may be assigning for the old member id: start over.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        elif state is GroupState.PREPARING_REBALANCE:
            pass
        else:
            raise IllegalGroupStateError(f"static member {instance_id} rejoined group {group.group_id} "
                                         f"in state {state.value}")

    def sync_group(self, group_id: str, generation: int, member_id: str, protocol_type: str | None,
                   protocol_name: str | None, instance_id: str | None, assignment: dict[str, bytes],
                   callback: Callable[[SyncResult], None]) -> None:
        error = self._manager.validate_group_status(group_id, ApiKey.SYNC_GROUP)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the old coordinator; make the member rejoin.
            callback(SyncResult(E.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncResult(error))
            return
        group = self._manager.get_group(group_id)
        if group is None:
            callback(SyncResult(E.UNKNOWN_MEMBER_ID))
            return
        if group.is_state(GroupState.DEAD):
            callback(SyncResult(E.COORDINATOR_NOT_AVAILABLE))
            return
        error = self.validate_current_member(group, member_id, instance_id, "sync-group")
        if error is None:
            if generation != group.generation_id:
                error = E.ILLEGAL_GENERATION
            elif protocol_type is not None and protocol_type != group.protocol_type:
                error = E.INCONSISTENT_GROUP_PROTOCOL
            elif protocol_name is not None and protocol_name != group.protocol_name:
                error = E.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            callback(SyncResult(error))
            return
        state = group.state
        if state is GroupState.EMPTY:
            callback(SyncResult(E.UNKNOWN_MEMBER_ID))
        elif state is GroupState.PREPARING_REBALANCE:
            callback(SyncResult(E.REBALANCE_IN_PROGRESS))
        elif state is GroupState.COMPLETING_REBALANCE:
            member = group.get(member_id)
            member.awaiting_sync = callback
            group.remove_pending_sync_member(member_id)
            self._maybe_complete_sync_expiration(group)
            if group.is_leader(member_id):
                log.info("group %s: assignment from leader %s for generation %d (%d members, %d static)",
                         group.group_id, member_id, group.generation_id, group.size, len(group.static_members))
                full = {m: assignment.get(m, b"") for m in group.members}
                missing = [m for m in group.members if m not in assignment]
                if missing:
                    log.warning("group %s: empty assignment for members %s", group.group_id, missing)
                gen = group.generation_id

                def on_stored(error: int) -> None:
                    if group.is_state(GroupState.COMPLETING_REBALANCE) and gen == group.generation_id:
                        if error != E.NONE:
                            self._reset_and_propagate_assignment_error(group, error)
                            self._maybe_prepare_rebalance(group, f"storing the assignment failed ({error})")
                        else:
                            self._set_and_propagate_assignment(group, full)
                            group.transition_to(GroupState.STABLE, self._now())

                self._manager.store_group(group, full, on_stored)
        elif state is GroupState.STABLE:
            group.remove_pending_sync_member(member_id)
            self._maybe_complete_sync_expiration(group)
            member = group.get(member_id)
            callback(SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self.complete_and_schedule_next_heartbeat(group, member)

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> int:
        error = self._manager.validate_group_status(group_id, ApiKey.HEARTBEAT)
        if error is not None:
            # While loading we know nothing about the member: let it carry on.
            return E.NONE if error == E.COORDINATOR_LOAD_IN_PROGRESS else error
        group = self._manager.get_group(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        error = self.validate_current_member(group, member_id, instance_id, "heartbeat")
        if error is not None:
            return error
        if generation != group.generation_id:
            return E.ILLEGAL_GENERATION
        state = group.state
        if state is GroupState.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self.complete_and_schedule_next_heartbeat(group, group.get(member_id))
        return E.REBALANCE_IN_PROGRESS if state is GroupState.PREPARING_REBALANCE else E.NONE

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]
                     ) -> tuple[int, list[tuple[str, str | None, int]]]:
        error = self._manager.validate_group_status(group_id, ApiKey.LEAVE_GROUP)
        if error is not None:
            return error, []
        group = self._manager.get_group(group_id)
        if group is None:
            return E.NONE, [(m, i, E.UNKNOWN_MEMBER_ID) for m, i, _ in leaving]
        if group.is_state(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, []
        results: list[tuple[str, str | None, int]] = []
        for member_id, instance_id, reason in leaving:
            if member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal by group.instance.id (KIP-345).
                current = group.current_static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                else:
                    self._leave_member(group, group.get(current), reason)
                    results.append((member_id, instance_id, E.NONE))
            elif group.is_pending_member(member_id):
                self._remove_pending_member_and_update_group(group, member_id)
                results.append((member_id, instance_id, E.NONE))
            else:
                error = self.validate_current_member(group, member_id, instance_id, "leave-group")
                if error is None:
                    self._leave_member(group, group.get(member_id), reason)
                results.append((member_id, instance_id, error if error is not None else E.NONE))
        return E.NONE, results

    def _leave_member(self, group: GroupMetadata, member: MemberMetadata, reason: str | None) -> None:
        log.info("group %s: member %s left (reason: %s)", group.group_id, member.member_id, reason or "not provided")
        self._remove_member_and_update_group(group, member, f"member {member.member_id} left")
