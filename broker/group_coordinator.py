"""The group coordinator of one broker: the classic consumer group protocol, put together.

A broker is the coordinator of every group whose ``__consumer_offsets`` partition it leads. As in
Kafka, the work is split three ways, and this module joins them and owns the offset APIs:

* ``GroupMetadataManager`` (``broker/group_metadata_manager.py``): the groups in memory and in
  ``__consumer_offsets``: loading a partition, writing generations and offsets, offset expiry;
* ``GroupMembership`` (``broker/group_membership.py``): the membership state machine: JoinGroup,
  SyncGroup, Heartbeat, LeaveGroup, rebalances, static members, session timeouts;
* here: OffsetCommit / TxnOffsetCommit / OffsetFetch validation (who may commit for which
  generation), ListGroups, DescribeGroups, DeleteGroups and OffsetDelete, the lifecycle, and the
  entry points the transaction coordinator, the replica manager and metrics call.

Every call takes plain values; ``broker/handlers_group.py`` turns request bodies into calls and
results into response bodies. Time and timers come from one injected ``Clock``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from broker.group_config import GroupCoordinatorConfig, coordinator_config
from broker.group_membership import UNKNOWN_MEMBER_ID, GroupMembership
from broker.group_metadata import (
    GROUP_TYPE_CLASSIC,
    GroupMetadata,
    GroupState,
    JoinCallback,
    OffsetAndMetadata,
    SyncCallback,
    TopicPartition,
)
from broker.group_metadata_manager import GroupMetadataManager, GroupView, LogEntry, OffsetsLog
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from storage.clock import Clock, as_clock
from storage.producer_state import REQUEST_VERIFICATION_GUARDS, VerificationGuard

__all__ = ["GroupCoordinator", "GroupCoordinatorConfig", "GroupView", "LogEntry", "OffsetsLog"]

log = logging.getLogger(__name__)

E = ErrorCode
NO_GENERATION = -1
INVALID_OFFSET = -1

# KIP-890 for TxnOffsetCommit (broker/txn_verification.py): (transactional id, producer id, producer
# epoch, the group's offsets partition, request version) -> (error, the guards the append presents,
# None: verification is off).
VerifyTxnOffsets = Callable[[str, int, int, int, int],
                            Awaitable[tuple[int, "Mapping[tuple[str, int], VerificationGuard] | None"]]]


class GroupCoordinator:
    """The group coordinator of one broker."""

    def __init__(self, offsets_log: OffsetsLog, config: Any = None, *, num_partitions: int | None = None,
                 broker_id: int = 0, time_ms: Callable[[], int] | None = None,
                 topic_exists: Callable[[str, int], bool] | None = None, clock: Clock | None = None) -> None:
        """``config``: a ``GroupCoordinatorConfig``, a ``BrokerConfig`` or a mapping of Kafka config names.

        ``num_partitions``: the partition count of ``__consumer_offsets`` (default: the config's
        ``offsets.topic.num.partitions``). ``topic_exists(topic, partition)``: the metadata cache
        check that OffsetCommit, TxnOffsetCommit and OffsetDelete apply before reaching the group
        (UNKNOWN_TOPIC_OR_PARTITION); None skips it. ``clock``: time and timers (default: the event
        loop's); ``time_ms`` replaces only its timestamps.
        """
        cfg = coordinator_config(config)
        self.config = cfg
        self.num_partitions = num_partitions if num_partitions is not None else cfg.offsets_topic_num_partitions
        self.broker_id = broker_id
        self.clock = clock if clock is not None else as_clock(time_ms)
        self.topic_exists = topic_exists
        self.manager = GroupMetadataManager(offsets_log, cfg, self.num_partitions, self.clock)
        self._membership = GroupMembership(self.manager, cfg, self.clock)
        # Hook for pending transactional state the transaction coordinator tracks outside of the
        # groups (OffsetFetch require_stable); the groups' own pending offsets are always checked.
        self.has_pending_txn_offsets: Callable[[str, TopicPartition], bool] | None = None
        # Asks the transaction coordinator whether the group's offsets partition is in the
        # transaction before a TxnOffsetCommit is appended; None: no verification.
        self.verify_txn_offsets: VerifyTxnOffsets | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the periodic offset expiration."""
        self.manager.start()

    async def close(self) -> None:
        await self.manager.close()

    def _now(self) -> int:
        return self.clock.now_ms()

    # -- partitions (the manager's) --------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    def is_loaded(self, partition: int) -> bool:
        return self.manager.is_loaded(partition)

    def is_loading(self, partition: int) -> bool:
        return self.manager.is_loading(partition)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self.manager.owned)

    async def load_partition(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Become coordinator for ``partition`` (see ``GroupMetadataManager.load_partition``)."""
        await self.manager.load_partition(partition, coordinator_epoch)

    def unload_partition(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Stop coordinating ``partition``: its groups go Dead and waiting members get NOT_COORDINATOR."""
        self.manager.unload_partition(partition, coordinator_epoch)

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.manager.get_group(group_id)

    def group_lag_view(self) -> list[GroupView]:
        return self.manager.group_lag_view()

    async def expire_offsets(self) -> int:
        return await self.manager.expire_offsets()

    async def on_partitions_deleted(self, tps: Iterable[TopicPartition]) -> int:
        return await self.manager.on_partitions_deleted(tps)

    def complete_pending_txn_offsets(self, producer_id: int, commit: bool,
                                     partitions: Iterable[int] | None = None) -> None:
        self.manager.complete_pending_txn_offsets(producer_id, commit, partitions)

    # -- membership (the state machine's) ----------------------------------------------------------

    def join_group(self, group_id: str, member_id: str, instance_id: str | None, require_known_member_id: bool,
                   support_skip_assignment: bool, client_id: str, client_host: str, rebalance_timeout_ms: int,
                   session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                   callback: JoinCallback) -> None:
        self._membership.join_group(group_id, member_id, instance_id, require_known_member_id,
                                    support_skip_assignment, client_id, client_host, rebalance_timeout_ms,
                                    session_timeout_ms, protocol_type, protocols, callback)

    def sync_group(self, group_id: str, generation: int, member_id: str, protocol_type: str | None,
                   protocol_name: str | None, instance_id: str | None, assignment: dict[str, bytes],
                   callback: SyncCallback) -> None:
        self._membership.sync_group(group_id, generation, member_id, protocol_type, protocol_name, instance_id,
                                    assignment, callback)

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> int:
        return self._membership.heartbeat(group_id, member_id, instance_id, generation)

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]
                    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        return self._membership.leave_group(group_id, leaving)

    # ============================================================================================
    # OffsetCommit / TxnOffsetCommit

    def _validate_offset_commit(self, group: GroupMetadata, generation: int, member_id: str,
                                instance_id: str | None, transactional: bool) -> int | None:
        if group.is_state(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_state(GroupState.EMPTY):
            return None  # admin client or a consumer without group management
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error = self._membership.validate_current_member(group, member_id, instance_id,
                                                  "txn-offset-commit" if transactional else "offset-commit")
            if error is not None:
                return error
            return E.ILLEGAL_GENERATION if generation != group.generation_id else None
        if not transactional and not group.is_state(GroupState.EMPTY):
            return E.UNKNOWN_MEMBER_ID  # only members may commit for a group with members
        return None

    async def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                             offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        error = self.manager.validate_group_status(group_id, ApiKey.OFFSET_COMMIT)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation >= 0:
                # A commit from an old generation of a group that no longer exists.
                return dict.fromkeys(offsets, E.ILLEGAL_GENERATION)
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self._now()))
        error = self._validate_offset_commit(group, generation, member_id, instance_id, transactional=False)
        if error is not None:
            return dict.fromkeys(offsets, error)
        state = group.state
        if state is GroupState.COMPLETING_REBALANCE:
            # The member knows the new generation but has no assignment yet.
            return dict.fromkeys(offsets, E.REBALANCE_IN_PROGRESS)
        if state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._membership.complete_and_schedule_next_heartbeat(group, group.get(member_id))
        return await self.manager.store_offsets(group, offsets)

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                 instance_id: str | None, generation: int,
                                 offsets: dict[TopicPartition, OffsetAndMetadata], *,
                                 transactional_id: str | None = None, version: int = 4) -> dict[TopicPartition, int]:
        """``transactional_id`` and ``version`` (of the TxnOffsetCommit request) are for KIP-890
        verification, which runs, as in Kafka, after the group status and before the member checks."""
        error = self.manager.validate_group_status(group_id, ApiKey.TXN_OFFSET_COMMIT)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self._now()))
        guards = None
        if self.verify_txn_offsets is not None and transactional_id:
            code, guards = await self.verify_txn_offsets(transactional_id, producer_id, producer_epoch,
                                                         self.partition_for(group_id), version)
            if code != E.NONE:
                return dict.fromkeys(offsets, code)
        error = self._validate_offset_commit(group, generation, member_id, instance_id, transactional=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        # The append (a task of its own, which copies this context) presents the verification's guard.
        token = REQUEST_VERIFICATION_GUARDS.set(guards)
        try:
            return await self.manager.store_offsets(group, offsets, producer_id=producer_id,
                                                    producer_epoch=producer_epoch)
        finally:
            REQUEST_VERIFICATION_GUARDS.reset(token)

    # ============================================================================================
    # OffsetFetch

    def fetch_offsets(self, group_id: str, require_stable: bool, tps: list[TopicPartition] | None
                       ) -> tuple[int, list[tuple[TopicPartition, int, int, str, int]]]:
        error = self.manager.validate_group_status(group_id, ApiKey.OFFSET_FETCH)
        if error is not None:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return E.NONE, [(tp, INVALID_OFFSET, -1, "", E.NONE) for tp in (tps or [])]
        wanted = list(group.offsets) if tps is None else list(dict.fromkeys(tps))
        rows = []
        for tp in wanted:
            if require_stable and (group.has_pending_offset_commits_for(tp) or (
                    self.has_pending_txn_offsets is not None and self.has_pending_txn_offsets(group_id, tp))):
                rows.append((tp, INVALID_OFFSET, -1, "", int(E.UNSTABLE_OFFSET_COMMIT)))
                continue
            om = group.offset(tp)
            if om is None:
                rows.append((tp, INVALID_OFFSET, -1, "", int(E.NONE)))
            else:
                rows.append((tp, om.offset, om.leader_epoch, om.metadata, int(E.NONE)))
        return E.NONE, rows

    # ============================================================================================
    # ListGroups / DescribeGroups / DeleteGroups / OffsetDelete

    def list_groups(self, states: set[str], types: set[str]) -> tuple[int, list[GroupMetadata]]:
        """Groups whose state (lower case) is in ``states`` and type in ``types`` (empty: any)."""
        if not self.manager.active:
            return E.COORDINATOR_NOT_AVAILABLE, []
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading else E.NONE
        groups = []
        for g in self.manager.groups.values():
            if states and g.state.value.lower() not in states:
                continue
            if types and GROUP_TYPE_CLASSIC not in types:
                continue
            groups.append(g)
        return int(error), groups

    def describe_group(self, group_id: str) -> tuple[int, GroupMetadata | None]:
        """(error, the group or None when it does not exist)."""
        error = self.manager.validate_group_status(group_id, ApiKey.DESCRIBE_GROUPS)
        if error is not None:
            return int(error), None
        return E.NONE, self.manager.get_group(group_id)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        results: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for gid in group_ids:
            error = self.manager.validate_group_status(gid, ApiKey.DELETE_GROUPS)
            if error is not None:
                results[gid] = error
                continue
            group = self.manager.get_group(gid)
            if group is None or group.is_state(GroupState.DEAD):
                results[gid] = E.GROUP_ID_NOT_FOUND if self.manager.group_not_exists(gid) else E.NOT_COORDINATOR
            elif group.is_state(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self._now())
                eligible.append(group)
                results[gid] = E.NONE
            else:
                results[gid] = E.NON_EMPTY_GROUP
        if eligible:
            n = await self.manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
            log.info("deleted groups %s (%d offsets)", [g.group_id for g in eligible], n)
        return results

    async def delete_offsets(self, group_id: str, tps: list[TopicPartition]
                              ) -> tuple[int, dict[TopicPartition, int]]:
        error = self.manager.validate_group_status(group_id, ApiKey.OFFSET_DELETE)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return (E.GROUP_ID_NOT_FOUND if self.manager.group_not_exists(group_id) else E.NOT_COORDINATOR), {}
        results: dict[TopicPartition, int] = {}
        if group.is_state(GroupState.EMPTY):
            eligible = tps
        elif group.is_consumer_group:
            eligible = []
            for tp in tps:
                if group.is_subscribed_to_topic(tp[0]):
                    results[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return E.NON_EMPTY_GROUP, {}
        if eligible:
            n = await self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
            log.info("group %s: deleted offsets of %s (%d removed)", group_id, eligible, n)
            for tp in eligible:
                results[tp] = E.NONE
        return E.NONE, results
