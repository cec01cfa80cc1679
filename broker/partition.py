"""One partition replica on this broker: its log, its role, and (as leader) the replication state.

Kafka's names: LEO (log end offset), HW (high watermark = the smallest LEO over the ISR, the
offset below which records are committed), ISR (in-sync replicas), leader epoch (bumped by the
controller on every leadership change), partition epoch (the ZooKeeper version of the partition's
state node, which fences AlterPartition requests).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from protocol.errors import ErrorCode
from storage.log import AppendInfo, PartitionLog

if TYPE_CHECKING:
    from config.registry import LogConfig

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class PartitionError(Exception):
    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows about one follower, from its fetch requests."""

    log_end_offset: int = -1
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0
    # LEO of the leader when the follower's previous fetch arrived (Kafka's lastFetchLeaderLogEndOffset).
    last_fetch_leader_leo: int = 0
    broker_epoch: int = -1


class FollowerEligibility(Protocol):
    """What a leader needs to know of a follower outside the ISR to let its HW wait for it (Kafka's
    replica.lag.time.max.ms and isReplicaIsrEligible, which in ZooKeeper mode asks whether the broker
    is alive in the metadata cache)."""

    def lag_time_max_ms(self) -> int: ...

    def alive(self, broker_id: int) -> bool: ...


@dataclass
class Partition:
    topic: str
    partition: int
    broker_id: int
    log: PartitionLog
    config: LogConfig
    topic_id: object = None
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = 0
    controller_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: set[int] = field(default_factory=set)
    # ISR change sent to the controller and not yet answered (Kafka's PendingExpand/PendingShrink).
    pending_isr: set[int] | None = None
    remote: dict[int, ReplicaState] = field(default_factory=dict)
    # Set by the ReplicaManager; None (a partition built alone) waits for no replica outside the ISR.
    eligibility: FollowerEligibility | None = field(default=None, repr=False, compare=False)
    # The copy of this replica being made in another log dir (AlterReplicaLogDirs, KIP-113), which replaces
    # ``log`` once caught up: broker/alter_log_dirs.py.
    future_log: PartitionLog | None = None
    # ReplicaManager's LogValidator settings for produce, built from ``config`` (and kept with it).
    # The last item: what accept_as_produced needs, when the topic stores plain batches as produced.
    produce_validation: tuple[Any, Any, dict[str, Any], str, str, tuple[int, int, int, bool] | None] | None = field(
        default=None, repr=False, compare=False)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def maximal_isr(self) -> set[int]:
        """The ISR used for HW and acks: includes replicas being added while that is pending."""
        return self.isr | self.pending_isr if self.pending_isr else self.isr

    @property
    def effective_min_isr(self) -> int:
        """Kafka's effectiveMinIsr (from 3.7, KAFKA-15583): min.insync.replicas capped by the number of
        assigned replicas, so that a topic whose min.insync.replicas exceeds its replication factor
        still takes acks=all writes once all its replicas are in sync."""
        return min(self.config.min_insync_replicas, len(self.replicas) or 1)

    @property
    def is_under_min_isr(self) -> bool:
        """Kafka's isUnderMinIsr, on the leader: the committed ISR is below the effective minimum."""
        return self.is_leader and len(self.isr) < self.effective_min_isr

    def replace_log_with_future(self, moved: PartitionLog) -> None:
        """The future log, reopened in its dir as the current one, becomes this replica's log (Kafka's
        maybeReplaceCurrentWithFutureReplica). Called on the event loop, between two appends."""
        moved.update_config(self.config)  # the topic's config may have changed while the copy ran
        self.log = moved
        self.future_log = None

    # -- role changes --------------------------------------------------------------------------------

    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int], partition_epoch: int,
                    controller_epoch: int, *, write_epoch_checkpoint: bool = True) -> bool:
        """Become leader (LeaderAndIsr). Returns False if the request's leader or partition epoch is stale.

        ``write_epoch_checkpoint=False``: the caller writes the leader-epoch-checkpoint afterwards, for many
        partitions at once (ReplicaManager.checkpoint_leader_epochs)."""
        if leader_epoch < self.leader_epoch or partition_epoch < self.partition_epoch:
            # An older partition epoch: AlterPartition already gave us a newer state (Kafka's "the leader is
            # already at a newer partition epoch"). Applying it would put back an ISR ZooKeeper no longer
            # has, and every AlterPartition from it would be refused with INVALID_UPDATE_VERSION.
            return False
        new_epoch = leader_epoch != self.leader_epoch or not self.is_leader
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.isr = set(isr)
        self.pending_isr = None
        self.replicas = list(replicas)
        self.partition_epoch = partition_epoch
        self.controller_epoch = controller_epoch
        if new_epoch:
            # KIP-101: the new epoch starts at our LEO; followers truncate against this.
            self.log.maybe_assign_epoch_start_offset(leader_epoch, self.log.log_end_offset,
                                                     write_checkpoint=write_epoch_checkpoint)
            t = now_ms()
            leo = self.log.log_end_offset
            self.remote = {r: ReplicaState(last_caught_up_ms=t if r in self.isr else 0, last_fetch_leader_leo=leo)
                           for r in replicas if r != self.broker_id}
        self.maybe_increment_hw()
        return True

    def make_follower(self, leader_id: int, leader_epoch: int, isr: list[int], replicas: list[int],
                      partition_epoch: int, controller_epoch: int) -> bool:
        if leader_epoch < self.leader_epoch or partition_epoch < self.partition_epoch:
            return False  # stale (see make_leader)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.isr = set(isr)
        self.pending_isr = None
        self.replicas = list(replicas)
        self.partition_epoch = partition_epoch
        self.controller_epoch = controller_epoch
        self.remote = {}
        return True

    # -- leader: produce ---------------------------------------------------------------------------

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """KIP-320 fencing for requests that carry the leader epoch the client believes in."""
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        if not self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def append_as_leader(self, records: memoryview, required_acks: int, log_append_time_ms: int) -> AppendInfo:
        self.check_leader()
        self._check_min_isr(required_acks)
        info = self.log.append_as_leader(records, self.leader_epoch, log_append_time_ms)
        self.maybe_increment_hw()
        return info

    def _check_min_isr(self, required_acks: int) -> None:
        """Kafka's appendRecordsToLeader: an acks=all write is refused before it is appended while the ISR
        is below min.insync.replicas (what is appended anyway would not be acknowledged)."""
        if required_acks == -1 and len(self.isr) < (min_isr := self.effective_min_isr):
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"the ISR of {self.topic}-{self.partition} has {len(self.isr)} members, "
                f"min.insync.replicas is {min_isr}")

    def append_internal(self, records: memoryview | bytes, required_acks: int = -1) -> AppendInfo:
        """Coordinator writes (offsets, group metadata, markers): leader-assigned offsets, no client rules;
        an acks=all one (all but offset commits with offsets.commit.required.acks other than -1) is
        refused below min.insync.replicas, as a client's is."""
        self.check_leader()
        self._check_min_isr(required_acks)
        data = records if isinstance(records, memoryview) else memoryview(bytearray(records))
        info = self.log.append(data, assign_offsets=True, leader_epoch=self.leader_epoch, from_client=False)
        self.maybe_increment_hw()
        return info

    def maybe_increment_hw(self) -> bool:
        """HW = min LEO over the (maximal) ISR; only ever moves forward. Returns True if it moved.

        As in Kafka from 3.7 (KAFKA-15583), the HW stands still while the committed ISR is below the
        effective min.insync.replicas: records written then with acks=0 or 1 stay invisible to consumers
        until enough replicas have them, so that no consumer reads a record that an election among the
        replicas left could still lose."""
        if not self.is_leader or len(self.isr) < self.effective_min_isr:
            return False
        leo = self.log.log_end_offset
        new_hw = leo
        isr = self.maximal_isr
        for r in isr:
            if r == self.broker_id:
                continue
            st = self.remote.get(r)
            if st is None or st.log_end_offset < 0:
                new_hw = min(new_hw, self.log.high_watermark)
            else:
                new_hw = min(new_hw, st.log_end_offset)
        if len(self.remote) >= len(isr) and self.eligibility is not None:  # a replica outside the ISR
            new_hw = self._wait_for_replicas_joining_isr(isr, new_hw, self.eligibility)
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            return True
        return False

    def _wait_for_replicas_joining_isr(self, isr: set[int], new_hw: int, eligibility: FollowerEligibility) -> int:
        """Kafka's shouldWaitForReplicaToJoinIsr: the HW also waits for a live follower outside the ISR
        that has caught up within replica.lag.time.max.ms. Without it a follower catching up under
        steady acks=1 load could stay behind an HW that moves with every append, and never reach the HW
        that joining the ISR takes."""
        t = now_ms()
        lag_max = eligibility.lag_time_max_ms()
        for r, st in self.remote.items():
            # Only a follower below the HW so far matters, so never one at the leader's LEO (Kafka's
            # other way of being caught up).
            if r in isr or not 0 <= st.log_end_offset < new_hw:
                continue
            if t - st.last_caught_up_ms <= lag_max and eligibility.alive(r):
                new_hw = st.log_end_offset
        return new_hw

    def ack_satisfied(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """Has an acks=all produce up to ``required_offset`` (exclusive) been replicated?"""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= required_offset:
            # Kafka's checkEnoughReplicasReachOffset counts the maximal ISR: a replica whose addition is
            # pending already holds the HW back, so it counts towards min.insync.replicas too.
            if len(self.maximal_isr) < self.effective_min_isr:
                return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, ErrorCode.NONE
        return False, ErrorCode.NONE

    # -- leader: follower fetches ------------------------------------------------------------------------

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, broker_epoch: int = -1) -> bool:
        """Record a follower's fetch position; returns True if the HW moved."""
        st = self.remote.get(replica_id)
        if st is None:
            return False
        t = now_ms()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            st.last_caught_up_ms = t
        elif fetch_offset >= st.last_fetch_leader_leo:
            # Caught up to where the leader was at the previous fetch (Kafka's rule).
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.log_end_offset = fetch_offset
        st.last_fetch_ms = t
        st.last_fetch_leader_leo = leo
        st.broker_epoch = broker_epoch
        return self.maybe_increment_hw()

    def out_of_sync_replicas(self, max_lag_ms: int) -> set[int]:
        """ISR members that have not caught up within replica.lag.time.max.ms.

        As Kafka's Replica.isCaughtUp, a follower whose last fetch reached the leader's LEO is in sync
        however long ago that fetch was: on an idle partition there is nothing to fall behind on. A
        follower that has stopped for good loses its ZooKeeper session, and the controller takes it out
        of the ISR then."""
        t = now_ms()
        leo = self.log.log_end_offset
        out = set()
        for r in self.isr:
            if r == self.broker_id:
                continue
            st = self.remote.get(r)
            if st is None or (st.log_end_offset != leo and t - st.last_caught_up_ms > max_lag_ms):
                out.add(r)
        return out

    def caught_up_followers(self) -> set[int]:
        """Replicas outside the ISR whose LEO reached the HW and our current epoch: ready to expand."""
        hw = self.high_watermark
        out = set()
        for r, st in self.remote.items():
            if r not in self.isr and st.log_end_offset >= hw and st.log_end_offset >= 0:
                start = self.log.leader_epoch_cache.entries()
                epoch_start = next((o for e, o in reversed(start) if e == self.leader_epoch), 0)
                if st.log_end_offset >= epoch_start:
                    out.add(r)
        return out
