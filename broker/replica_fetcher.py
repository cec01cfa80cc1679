"""Follower replication: one fetcher per leader broker, fetching every partition it follows there.

A partition enters a fetcher in the *truncating* state (KIP-101/279): before fetching, the follower
asks the leader (OffsetForLeaderEpoch) where its own latest leader epoch ends in the leader's log and
truncates to that point (or to its own end of that epoch when the leader answers with an older
epoch). Truncating to the high watermark instead would lose committed data or let replicas diverge.
Then it fetches from its LEO with ``replica_id`` set, appends the leader's batches as they are (the
offsets and epochs the leader assigned), and takes the HW from the leader's responses.

Fetches go through an incremental fetch session with the leader (KIP-227), kept as Kafka's
FetchSessionHandler keeps it: a full fetch first, then fetches that name only the partitions whose fetch
offset, log start offset or leader epoch changed, forget the ones no longer fetched (removed, truncating,
backing off, throttled), and get back only the partitions with records or a new HW or log start offset.
On FETCH_SESSION_ID_NOT_FOUND the next fetch is a full one without a session; on any other session error,
an unexpected response or a connection failure, a full one that closes the old session and opens a new
one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from broker.security.inter_broker import inter_broker_security
from controller.network_client import ConnectionSettings, KafkaConnectionError, NodeClient
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type
from protocol.records import whole_batches_size
from storage.errors import CorruptRecordError

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.partition import Partition
    from broker.replica_manager import ReplicaManager
    from broker.replication_quota import ReplicationQuota
    from config.registry import BrokerConfig

log = logging.getLogger(__name__)

TP = tuple[str, int]
FETCH_VERSION = 11  # topic names, current leader epoch (KIP-320), log start offsets, rack id, sessions (v7+)
EPOCH_VERSION = 3  # replica id + current leader epoch
_FETCH_REQ = request_type(ApiKey.FETCH)
_EPOCH_REQ = request_type(ApiKey.OFFSET_FOR_LEADER_EPOCH)


@dataclass(slots=True)
class FetchState:
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0
    last_error: int = 0  # the previous fetch's error for this partition (logged when it changes)


# What a follower asks of one partition: (fetch offset, log start offset, current leader epoch, max bytes).
PartitionRequest = tuple[int, int, int, int]


class FollowerFetchSession:
    """The follower's side of a fetch session with one leader (Kafka's FetchSessionHandler)."""

    def __init__(self, leader_id: int) -> None:
        self.leader_id = leader_id
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.partitions: dict[TP, PartitionRequest] = {}  # what the leader's session holds

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def build(self, wanted: dict[TP, PartitionRequest]) -> tuple[dict[TP, PartitionRequest], list[TP]]:
        """The partitions to send and the ones to forget, for the fetch that wants ``wanted``."""
        if self.is_full:
            self.partitions = dict(wanted)
            return wanted, []
        send: dict[TP, PartitionRequest] = {}
        forget: list[TP] = []
        session = self.partitions
        for tp in list(session):
            req = wanted.get(tp)
            if req is None:
                del session[tp]
                forget.append(tp)
            elif req != session[tp]:
                session[tp] = req
                send[tp] = req
        for tp, req in wanted.items():
            if tp not in session:
                session[tp] = req
                send[tp] = req
        return send, forget

    def handle_response(self, resp: Any) -> bool:
        """Move the session on after a response; False when its partitions must not be processed."""
        if resp.error_code != ErrorCode.NONE:
            log.info("[ReplicaFetcher leader=%d] fetch session %d at epoch %d: %s", self.leader_id, self.session_id,
                     self.epoch, ErrorCode(resp.error_code).name)
            if resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.epoch = INITIAL_EPOCH  # close the session and open a new one
            return False
        returned = {(t.topic, p.partition_index) for t in resp.responses for p in t.partitions}
        if self.is_full:
            if returned != set(self.partitions):
                log.info("[ReplicaFetcher leader=%d] full fetch response with %d partitions for %d asked: starting "
                         "over", self.leader_id, len(returned), len(self.partitions))
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
                return False
            self.session_id = resp.session_id
            self.epoch = INITIAL_EPOCH if resp.session_id == INVALID_SESSION_ID else next_epoch(INITIAL_EPOCH)
            return True
        if not returned <= self.partitions.keys():
            log.info("[ReplicaFetcher leader=%d] incremental fetch response names partitions outside session %d: "
                     "starting over", self.leader_id, self.session_id)
            self.epoch = INITIAL_EPOCH
            return False
        if resp.session_id == INVALID_SESSION_ID:  # the leader closed the session
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The fetch failed (connection, timeout): the next one is full and replaces the session."""
        self.epoch = INITIAL_EPOCH


@functools.lru_cache(maxsize=4096)  # per topic name: a LeaderAndIsr may name thousands of its partitions
def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def fetcher_id_for(tp: TP, num_fetchers: int) -> int:
    """Kafka's AbstractFetcherManager.getFetcherId: which of a leader's num.replica.fetchers fetchers
    replicates ``tp`` (Utils.abs(31 * topic.hashCode + partition) % num.replica.fetchers)."""
    if num_fetchers == 1:
        return 0
    n = (31 * java_string_hash(tp[0]) + tp[1]) & 0xFFFFFFFF
    n = n - (1 << 32) if n >= 1 << 31 else n
    return (0 if n == -(1 << 31) else abs(n)) % num_fetchers


class ReplicaFetcher:
    """Replicates the partitions this broker follows whose leader is ``leader_id`` and whose fetcher id
    (``fetcher_id_for``) is ``fetcher_id``: one fetch session with the leader each."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, fetcher_id: int = 0) -> None:
        self.manager = manager
        self.broker_id = manager.broker_id
        self.quota = manager.follower_quota
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.partitions: dict[TP, FetchState] = {}
        self.wakeup = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.conn: NodeClient | None = None
        self.session = FollowerFetchSession(leader_id)
        cfg = manager.config()
        self.max_wait_ms = cfg.get("replica.fetch.wait.max.ms")
        self.min_bytes = cfg.get("replica.fetch.min.bytes")
        self.max_bytes = cfg.get("replica.fetch.response.max.bytes")
        self.partition_max_bytes = cfg.get("replica.fetch.max.bytes")
        self.backoff_s = cfg.get("replica.fetch.backoff.ms") / 1000.0
        self.timeout_s = cfg.get("replica.socket.timeout.ms") / 1000.0

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def add(self, tp: TP, leader_epoch: int) -> None:
        self.partitions[tp] = FetchState(leader_epoch)
        self.wakeup.set()

    def remove(self, tp: TP) -> None:
        self.partitions.pop(tp, None)

    # ------------------------------------------------------------------------------------------------

    def _partition(self, tp: TP) -> Partition | None:
        rm = self.manager.replica_manager()
        p = rm.partitions.get(tp) if rm is not None else None
        if p is None or p.is_leader or p.leader_id != self.leader_id:
            return None
        return p

    async def _connection(self) -> NodeClient:
        if self.conn is None:
            ep = self.manager.metadata.endpoint(self.leader_id, self.manager.listener_name)
            if ep is None:
                raise ConnectionError(f"no endpoint known for leader {self.leader_id}")
            # Versions pinned (no ApiVersions round trip): the leader is a kafkette broker. One request
            # at a time: the fetcher waits for each response before building the next fetch.
            self.conn = NodeClient(ep[0], ep[1], ConnectionSettings(
                client_id=f"replica-fetcher-{self.broker_id}-{self.leader_id}"
                          + (f"-{self.fetcher_id}" if self.fetcher_id else ""),
                connect_timeout_s=self.timeout_s, request_timeout_s=self.timeout_s, max_in_flight=1,
                negotiate_versions=False, reconnect_backoff_s=self.backoff_s,
                reconnect_backoff_max_s=max(self.backoff_s, 1.0), security=self.manager.security))
        return self.conn

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.partitions:
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            try:
                truncating = [tp for tp, st in self.partitions.items() if st.truncating]
                if truncating:
                    await self._truncate(truncating)
                ready = {tp: st for tp, st in self.partitions.items()
                         if not st.truncating and st.delayed_until <= loop.time()}
                if not ready:
                    await asyncio.sleep(self.backoff_s)
                    continue
                await self._fetch(ready)
            except asyncio.CancelledError:
                raise
            except (OSError, TimeoutError, ConnectionError, KafkaConnectionError) as e:
                log.info("[ReplicaFetcher leader=%d] connection problem: %r; retrying", self.leader_id, e)
                self.session.handle_error()
                if self.conn is not None:
                    self.conn.close()
                    self.conn = None
                await asyncio.sleep(self.backoff_s * (0.8 + 0.4 * random.random()))
            except Exception:
                log.exception("[ReplicaFetcher leader=%d] unexpected error", self.leader_id)
                self.session.handle_error()
                if self.conn is not None:
                    self.conn.close()
                    self.conn = None
                await asyncio.sleep(self.backoff_s)

    # -- truncation (KIP-101 / KIP-279) ---------------------------------------------------------------

    async def _truncate(self, tps: list[TP]) -> None:
        by_topic: dict[str, list[Any]] = {}
        no_epoch: list[TP] = []
        for tp in tps:
            p = self._partition(tp)
            if p is None:
                self.partitions.pop(tp, None)
                continue
            latest = p.log.latest_epoch
            if latest is None:
                # Nothing with an epoch locally: nothing to compare; fetch from our LEO (usually 0).
                no_epoch.append(tp)
                continue
            by_topic.setdefault(tp[0], []).append(_EPOCH_REQ.OffsetForLeaderPartition(
                partition=tp[1], current_leader_epoch=self.partitions[tp].leader_epoch, leader_epoch=latest))
        for tp in no_epoch:
            self.partitions[tp].truncating = False
        if not by_topic:
            return
        asked = {tp: self.partitions[tp] for tp in tps if tp in self.partitions}
        body = _EPOCH_REQ(replica_id=self.broker_id, topics=[
            _EPOCH_REQ.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        conn = await self._connection()
        resp = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body, version=EPOCH_VERSION)
        for topic in resp.topics:
            for r in topic.partitions:
                tp = (topic.topic, r.partition)
                st = self.partitions.get(tp)
                p = self._partition(tp)
                if st is None or p is None or st is not asked.get(tp):
                    # Removed, or added again (a new leader epoch) while the answer was on its way: the
                    # new state truncates against its own epoch.
                    continue
                if r.error_code != ErrorCode.NONE:
                    log.info("[ReplicaFetcher leader=%d] OffsetForLeaderEpoch for %s-%d: %s", self.leader_id,
                             tp[0], tp[1], ErrorCode(r.error_code).name)
                    st.delayed_until = asyncio.get_running_loop().time() + self.backoff_s
                    continue
                target = self._truncation_offset(p, r.leader_epoch, r.end_offset)
                if target < p.log.log_end_offset:
                    log.info("[ReplicaFetcher leader=%d] truncating %s-%d from %d to %d (leader epoch %d ends at %d)",
                             self.leader_id, tp[0], tp[1], p.log.log_end_offset, target, r.leader_epoch,
                             r.end_offset)
                    await self.manager.change_log(tp, p.log.truncate_to, target)
                else:
                    log.info("[ReplicaFetcher leader=%d] %s-%d: no truncation needed, log end %d (leader epoch %d "
                             "ends at %d; high watermark %d)", self.leader_id, tp[0], tp[1], p.log.log_end_offset,
                             r.leader_epoch, r.end_offset, p.log.high_watermark)
                st.truncating = False

    @staticmethod
    def _truncation_offset(p: Partition, leader_epoch: int, leader_end_offset: int) -> int:
        leo = p.log.log_end_offset
        if leader_epoch < 0 or leader_end_offset < 0:
            # The leader knows no epoch at or below ours (KIP-279: UNDEFINED): keep our HW.
            return min(p.log.high_watermark, leo)
        local_epoch = p.log.latest_epoch
        if local_epoch is not None and leader_epoch == local_epoch:
            return min(leader_end_offset, leo)
        # The leader's answer is an older epoch: truncate to where *that* epoch ends for both of us.
        _e, local_end = p.log.end_offset_for_epoch(leader_epoch)
        return min(leader_end_offset, local_end if local_end >= 0 else leo, leo)

    # -- fetching ---------------------------------------------------------------------------------------

    async def _fetch(self, ready: dict[TP, FetchState]) -> None:
        wanted: dict[TP, PartitionRequest] = {}
        quota = self.quota
        over_quota = quota is not None and quota.is_exceeded()
        for tp, st in ready.items():
            p = self._partition(tp)
            if p is None:
                self.partitions.pop(tp, None)
                continue
            if over_quota and quota.is_throttled(*tp):
                continue  # over follower.replication.throttled.rate: throttled replicas wait
            wanted[tp] = (p.log.log_end_offset, p.log.log_start_offset, st.leader_epoch, self.partition_max_bytes)
        session = self.session
        if not wanted and not session.partitions:
            # Nothing to ask for: every ready partition is throttled and the follower is over its rate (or
            # none is followed from this leader any more).
            # As Kafka's fetcher thread, back off before building the next fetch, unless a partition is
            # added meanwhile. Returning at once made _run call this again without ever yielding, and the
            # broker's whole event loop spun (no requests answered, no controller work, no other
            # fetcher) until the rate fell back under follower.replication.throttled.rate, which after
            # one full fetch takes the quota's window.
            self.wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wakeup.wait(), self.backoff_s)
            return
        send, forget = session.build(wanted)
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), (offset, log_start, epoch, max_bytes) in send.items():
            by_topic.setdefault(topic, []).append(_FETCH_REQ.FetchPartition(
                partition=partition, current_leader_epoch=epoch, fetch_offset=offset, log_start_offset=log_start,
                partition_max_bytes=max_bytes))
        forgotten: dict[str, list[int]] = {}
        for topic, partition in forget:
            forgotten.setdefault(topic, []).append(partition)
        body = _FETCH_REQ(replica_id=self.broker_id, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
                          max_bytes=self.max_bytes, isolation_level=0, session_id=session.session_id,
                          session_epoch=session.epoch,
                          topics=[_FETCH_REQ.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
                          forgotten_topics_data=[_FETCH_REQ.ForgottenTopic(topic=t, partitions=ps)
                                                 for t, ps in forgotten.items()],
                          rack_id=self.manager.config().get("broker.rack") or "")
        conn = await self._connection()
        # The leader may hold the fetch for max_wait_ms before it answers.
        resp = await conn.request(ApiKey.FETCH, body, version=FETCH_VERSION,
                                  timeout=self.timeout_s + self.max_wait_ms / 1000.0)
        if not session.handle_response(resp):
            return
        loop = asyncio.get_running_loop()
        for topic in resp.responses:
            for pd in topic.partitions:
                tp = (topic.topic, pd.partition_index)
                state = self.partitions.get(tp)
                p = self._partition(tp)
                if state is None or p is None:
                    continue
                asked = wanted.get(tp)
                if (state is not ready.get(tp) or state.truncating or asked is None
                        or asked[0] != p.log.log_end_offset):
                    # As Kafka's fetcher: a partition removed and added again (a new leader epoch, so it
                    # truncates first) or whose log moved while the fetch was out takes no part of the
                    # answer; its next fetch asks again from where its log ends.
                    log.info("[ReplicaFetcher leader=%d] %s-%d changed while fetching at offset %s (log end now "
                             "%d): response ignored", self.leader_id, tp[0], tp[1],
                             asked[0] if asked else None, p.log.log_end_offset)
                    continue
                code = pd.error_code
                if code != state.last_error:
                    if code != ErrorCode.NONE:
                        log.info("[ReplicaFetcher leader=%d] fetching %s-%d at leader epoch %d: %s; waiting for the "
                                 "controller", self.leader_id, tp[0], tp[1], state.leader_epoch, ErrorCode(code).name)
                    state.last_error = code
                if code == ErrorCode.NONE:
                    try:
                        await self._process(p, pd)
                    except CorruptRecordError as e:
                        # As Kafka's fetcher: the partition waits out a backoff and is fetched again
                        # from the same offset; the other partitions of the response go on.
                        log.error("[ReplicaFetcher leader=%d] Found invalid messages during fetch for partition "
                                  "%s-%d offset %d: %s", self.leader_id, tp[0], tp[1], p.log.log_end_offset, e)
                        state.delayed_until = loop.time() + self.backoff_s
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._handle_out_of_range(p, pd)
                elif code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                              ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    # Our view of leadership is stale or ahead: wait for the controller's LeaderAndIsr.
                    state.delayed_until = loop.time() + self.backoff_s
                else:
                    log.warning("[ReplicaFetcher leader=%d] fetch of %s-%d failed: %s", self.leader_id, tp[0], tp[1],
                                ErrorCode(code).name)
                    state.delayed_until = loop.time() + self.backoff_s

    async def _process(self, p: Partition, pd: Any) -> None:
        records = pd.records
        quota = self.quota
        if quota is not None and records is not None and quota.is_throttled(*p.tp):
            quota.record(len(records))
        if records is not None and len(records):
            end = whole_batches_size(records)
            if end:
                p.log.append_as_follower(records[:end])
                self.manager.replication_bytes_in += end
                rm = self.manager.replica_manager()
                if rm is not None:
                    rm.notify_append(p.tp)
        # Kafka's FetcherLagMetrics: the leader's HW minus the next offset we fetch (MaxLag reads it).
        self.manager.lags[p.tp] = max(0, pd.high_watermark - p.log.log_end_offset)
        # The follower's HW is the leader's, bounded by what we hold.
        hw = min(pd.high_watermark, p.log.log_end_offset)
        if hw > p.log.high_watermark:
            p.log.high_watermark = hw
        if pd.log_start_offset > p.log.log_start_offset and pd.log_start_offset <= p.log.high_watermark:
            p.log.delete_records(pd.log_start_offset)

    async def _handle_out_of_range(self, p: Partition, pd: Any) -> None:
        """Our LEO is outside the leader's log: after an unclean election, or behind its log start."""
        leo = p.log.log_end_offset
        if pd.log_start_offset >= 0 and leo < pd.log_start_offset:
            log.warning("[ReplicaFetcher leader=%d] %s-%d is behind the leader's log start %d: starting over there",
                        self.leader_id, p.topic, p.partition, pd.log_start_offset)
            await self.manager.change_log(p.tp, p.log.truncate_fully_and_start_at, pd.log_start_offset)
        elif pd.high_watermark >= 0 and leo > pd.high_watermark:
            # Ahead of the leader (it was elected uncleanly): redo epoch-based truncation.
            self.partitions[p.tp].truncating = True


class ReplicaFetcherManager:
    """One ReplicaFetcher per leader broker. The replica manager is an accessor: it is built after this
    object and receives it through its constructor."""

    def __init__(self, broker_id: int, metadata: MetadataCache, listener_name: str, config: Callable[[], BrokerConfig],
                 replica_manager: Callable[[], ReplicaManager | None], follower_quota: ReplicationQuota) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.listener_name = listener_name  # the inter-broker listener of the leaders
        self.config = config  # dynamic broker config: read when a fetcher starts
        self.replica_manager = replica_manager
        self.follower_quota = follower_quota
        # TLS / SASL towards the leaders' inter-broker listener, settled at start-up as Kafka's fetcher
        # channel builder is (a misconfiguration fails here, not in every fetcher's retry loop).
        self.security = inter_broker_security(config(), listener_name)
        # By (leader, fetcher id): num.replica.fetchers fetchers per leader at most, each with its share.
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self.follower_of: dict[TP, tuple[int, int]] = {}
        self.leader_epochs: dict[TP, int] = {}  # of the partitions followed (for a resize)
        self.num_fetchers = max(1, int(config().get("num.replica.fetchers")))
        # Metrics: per followed partition, the lag the last fetch response showed; bytes replicated here.
        self.lags: dict[TP, int] = {}
        self.replication_bytes_in = 0
        # Truncations running off the event loop, by partition (see quiesce).
        self.log_changes: dict[TP, asyncio.Future[Any]] = {}
        self.closed = False  # after shutdown(): a late LeaderAndIsr starts no fetcher

    def add_partition(self, tp: TP, leader_id: int, leader_epoch: int) -> None:
        self.remove_partition(tp)
        if leader_id < 0 or self.closed:
            return
        key = (leader_id, fetcher_id_for(tp, self.num_fetchers))
        f = self.fetchers.get(key)
        if f is None:
            f = self.fetchers[key] = ReplicaFetcher(self, *key)
            f.start()
        f.add(tp, leader_epoch)
        self.follower_of[tp] = key
        self.leader_epochs[tp] = leader_epoch

    async def resize(self, num_fetchers: int) -> None:
        """A new num.replica.fetchers (dynamic, as Kafka's resizeThreadPool): a followed partition whose
        fetcher id changes moves to that fetcher, and fetchers left without partitions stop. A moved
        partition starts with the epoch check (KIP-101) again, which finds nothing to truncate."""
        num_fetchers = max(1, num_fetchers)
        if num_fetchers == self.num_fetchers or self.closed:
            return
        log.info("num.replica.fetchers now %d (was %d): moving %d partitions", num_fetchers, self.num_fetchers,
                 len(self.follower_of))
        self.num_fetchers = num_fetchers
        await self.quiesce(list(self.follower_of))  # no truncation still running as a partition moves
        for tp, (leader_id, fetcher_id) in list(self.follower_of.items()):
            if fetcher_id != fetcher_id_for(tp, num_fetchers):
                self.add_partition(tp, leader_id, self.leader_epochs[tp])
        for key, f in list(self.fetchers.items()):
            if not f.partitions:
                del self.fetchers[key]
                await f.stop()

    async def change_log(self, tp: TP, change: Callable[..., Any], *args: Any) -> Any:
        """Run a fetcher's change to a followed partition's log (a truncation) off the event loop, where
        :meth:`quiesce` can wait for it. Stopping the fetcher does not stop the change: it runs to its end."""
        fut = asyncio.get_running_loop().run_in_executor(None, change, *args)
        changes = self.log_changes
        changes[tp] = fut

        def done(f: asyncio.Future[Any]) -> None:
            if changes.get(tp) is f:
                del changes[tp]
            if not f.cancelled():
                f.exception()  # retrieved here too: the fetcher awaiting it may have been stopped

        fut.add_done_callback(done)
        return await asyncio.shield(fut)

    async def quiesce(self, tps: Iterable[TP]) -> None:
        """Wait until no fetcher is changing the log of any of ``tps``. Kafka's ReplicaManager removes a
        partition's fetcher, which waits for a truncation in progress, before it makes the partition
        leader or stops it; here the truncation runs on a thread beside the event loop, so a role change
        waits for it instead of applying a new leader epoch to a log that is still being cut."""
        changes = self.log_changes
        tps = list(tps)
        # Checked again after each wait: a fetcher truncating several partitions starts the next one as
        # the previous ends. The caller resumes in the same turn as the last check, before any other starts.
        while changes and (pending := [changes[tp] for tp in tps if tp in changes]):
            await asyncio.wait(pending)

    def remove_partition(self, tp: TP) -> None:
        self.lags.pop(tp, None)
        self.leader_epochs.pop(tp, None)
        key = self.follower_of.pop(tp, None)
        if key is not None and key in self.fetchers:
            self.fetchers[key].remove(tp)

    async def shutdown(self) -> None:
        self.closed = True
        for f in self.fetchers.values():
            await f.stop()
        self.fetchers.clear()
        if self.log_changes:  # a stopped fetcher's truncation still runs: the logs close after it
            await asyncio.wait(list(self.log_changes.values()))

    def max_lag(self) -> int:
        """Kafka's ReplicaFetcherManager MaxLag: the largest lag over the partitions followed, as the
        leaders' last fetch responses showed it (a follower's own HW never runs ahead of its LEO)."""
        lags = self.lags
        return max((lags.get(tp, 0) for tp in self.follower_of), default=0)
