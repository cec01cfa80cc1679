"""The transactional APIs over the wire, request by request, on the shared 3-broker cluster.

A transaction is scripted with raw requests (FindCoordinator, InitProducerId, AddPartitionsToTxn,
Produce, EndTxn) so the tests can look at every step: the LSO that read_committed ListOffsets and
Fetch report while it is open, DescribeProducers/DescribeTransactions/ListTransactions, the coordinator's
errors per API version, KIP-890 verification, WriteTxnMarkers fencing, and the timeout abort.
"""

from __future__ import annotations

import time
from typing import Any

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode as E
from protocol.messages import request_type
from protocol.records import NewRecord, build_batch
from tests.integration.helpers import RawClient, unique, wait_until
from tests.txn.ctp import create_topic, kafka_python_loop, read_all, seed

_APT = request_type(ApiKey.ADD_PARTITIONS_TO_TXN)
_LO = request_type(ApiKey.LIST_OFFSETS)
_DP = request_type(ApiKey.DESCRIBE_PRODUCERS)
_WTM = request_type(ApiKey.WRITE_TXN_MARKERS)


class Txn:
    """A transactional producer spoken in raw requests."""

    def __init__(self, bootstrap: str, txn_id: str, timeout_ms: int = 60_000) -> None:
        self.bootstrap = bootstrap
        self.txn_id = txn_id
        self.timeout_ms = timeout_ms
        self.seq: dict[tuple[str, int], int] = {}
        self.coord = self._find_coordinator()
        self.pid = self.epoch = -1

    def _find_coordinator(self) -> RawClient:
        with RawClient(self.bootstrap) as raw:
            def find() -> Any:
                r = raw.request(ApiKey.FIND_COORDINATOR, 3, key=self.txn_id, key_type=1)
                return r if r.error_code == 0 else None
            fc = wait_until(find, 30, f"a transaction coordinator for {self.txn_id}")
        self.coordinator_id = fc.node_id
        return RawClient(f"{fc.host}:{fc.port}")

    def close(self) -> None:
        self.coord.close()

    def retry(self, fn: Any, what: str) -> Any:
        """Repeat while the coordinator answers CONCURRENT_TRANSACTIONS or is loading."""
        def attempt() -> Any:
            r = fn()
            code = r if isinstance(r, int) else r.error_code
            return None if code in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS) else [r]
        return wait_until(attempt, 30, what)[0]

    def init(self, version: int = 4, expected: tuple[int, int] = (-1, -1)) -> Any:
        def attempt() -> Any:
            r = self.coord.request(
                ApiKey.INIT_PRODUCER_ID, version, transactional_id=self.txn_id,
                transaction_timeout_ms=self.timeout_ms, producer_id=expected[0], producer_epoch=expected[1])
            if r.error_code in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS):
                return None
            if r.error_code in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE):
                # FindCoordinator is answered from the asking broker's metadata, which can name the
                # leader of a __transaction_state partition before that broker has applied its
                # LeaderAndIsr (right after the topic is created). Clients look the coordinator up again.
                self.coord.close()
                self.coord = self._find_coordinator()
                return None
            return [r]

        r = wait_until(attempt, 30, f"InitProducerId of {self.txn_id}")[0]
        if r.error_code == 0:
            self.pid, self.epoch = r.producer_id, r.producer_epoch
            self.seq.clear()
        return r

    def add(self, topic: str, partitions: list[int], version: int = 3, epoch: int | None = None) -> int:
        deadline = time.monotonic() + 30
        while True:
            r = self.coord.request(
                ApiKey.ADD_PARTITIONS_TO_TXN, version, v3_and_below_transactional_id=self.txn_id,
                v3_and_below_producer_id=self.pid, v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
                v3_and_below_topics=[_APT.AddPartitionsToTxnTopic(name=topic, partitions=partitions)])
            codes = {p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}
            assert len(codes) == 1, r
            code = codes.pop()
            # A topic just created may not have reached the coordinator's metadata yet: clients retry
            # UNKNOWN_TOPIC_OR_PARTITION, as long as the cluster knows the topic.
            if code != E.UNKNOWN_TOPIC_OR_PARTITION or time.monotonic() > deadline or not self._topic_exists(topic):
                return code
            time.sleep(0.1)

    def _topic_exists(self, topic: str) -> bool:
        with RawClient(self.bootstrap) as raw:
            return raw.leaders(topic) > 0

    def produce(self, topic: str, partition: int, values: list[bytes]) -> Any:
        tp = (topic, partition)
        seq = self.seq.get(tp, 0)
        batch = build_batch([NewRecord(None, v) for v in values], producer_id=self.pid, producer_epoch=self.epoch,
                            base_sequence=seq, is_transactional=True)
        self.seq[tp] = seq + len(values)
        with RawClient(self.bootstrap) as raw:
            port = leader_bootstrap(raw, topic, partition)
        with RawClient(port) as leader:
            return leader.produce(topic, partition, batch, transactional_id=self.txn_id)

    def end(self, commit: bool, version: int = 3, epoch: int | None = None) -> int:
        return self.retry(lambda: self.coord.request(
            ApiKey.END_TXN, version, transactional_id=self.txn_id, producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch, committed=commit).error_code, "EndTxn")

    def describe(self) -> Any:
        r = self.coord.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[self.txn_id])
        return r.transaction_states[0]


def leader_bootstrap(raw: RawClient, topic: str, partition: int) -> str:
    from tests.integration.helpers import _metadata_topic

    md = raw.request(ApiKey.METADATA, 12, topics=[_metadata_topic(topic)], allow_auto_topic_creation=False,
                     include_topic_authorized_operations=False)
    leader = next(p.leader_id for t in md.topics if t.name == topic for p in t.partitions
                  if p.partition_index == partition)
    b = next(b for b in md.brokers if b.node_id == leader)
    return f"{b.host}:{b.port}"


def offsets(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(HW, LSO) from the partition leader's ListOffsets, read_uncommitted and read_committed."""
    with RawClient(bootstrap) as raw:
        addr = leader_bootstrap(raw, topic, partition)
    out = []
    with RawClient(addr) as leader:
        for isolation in (0, 1):
            r = leader.request(ApiKey.LIST_OFFSETS, 7, replica_id=-1, isolation_level=isolation, topics=[
                _LO.ListOffsetsTopic(name=topic, partitions=[
                    _LO.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-1)])])
            p = r.topics[0].partitions[0]
            assert p.error_code == 0, p
            out.append(p.offset)
    return out[0], out[1]


def test_lso_describe_apis_and_commit(cluster3: object) -> None:
    bs = cluster3.bootstrap  # type: ignore[attr-defined]
    topic = unique("raw")
    create_topic(bs, topic, partitions=2)
    seed(bs, topic, 4)  # some committed, non-transactional data first
    hw0 = offsets(bs, topic, 0)[0]
    t = Txn(bs, unique("raw-txn"))
    try:
        assert t.init().error_code == 0 and t.epoch == 0
        assert t.add(topic, [0, 1]) == 0
        assert t.produce(topic, 0, [b"x1", b"x2"]).error_code == 0
        hw, lso = offsets(bs, topic, 0)
        assert (hw, lso) == (hw0 + 2, hw0), "the LSO stops at the open transaction"
        # Fetch at read_committed stops at the LSO too.
        with RawClient(bs) as raw:
            addr = leader_bootstrap(raw, topic, 0)
        with RawClient(addr) as leader:
            pd = leader.fetch(topic, 0, hw0, max_wait_ms=0)
            assert pd.last_stable_offset == hw0 and pd.high_watermark == hw0 + 2
            r = leader.request(ApiKey.DESCRIBE_PRODUCERS, 0, topics=[
                _DP.TopicRequest(name=topic, partition_indexes=[0, 1])])
            p0, p1 = r.topics[0].partitions
            assert p0.error_code == 0 or p0.error_code == E.NOT_LEADER_OR_FOLLOWER
            mine = [s for s in p0.active_producers if s.producer_id == t.pid]
            assert mine and mine[0].current_txn_start_offset == hw0 and mine[0].last_sequence == 1
        st = t.describe()
        assert (st.error_code, st.transaction_state, st.producer_id) == (0, "Ongoing", t.pid)
        assert [(x.topic, sorted(x.partitions)) for x in st.topics] == [(topic, [0, 1])]
        lt = t.coord.request(ApiKey.LIST_TRANSACTIONS, 1, state_filters=["Ongoing", "Nope"],
                             producer_id_filters=[t.pid], duration_filter=-1)
        assert lt.error_code == 0 and lt.unknown_state_filters == ["Nope"]
        assert [(s.transactional_id, s.transaction_state) for s in lt.transaction_states] == [(t.txn_id, "Ongoing")]
        # KIP-890 verification form (v4, verify_only): answered from the coordinator's state.
        v = t.coord.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, transactions=[_APT.AddPartitionsToTxnTransaction(
            transactional_id=t.txn_id, producer_id=t.pid, producer_epoch=t.epoch, verify_only=True,
            topics=[_APT.AddPartitionsToTxnTopic(name=topic, partitions=[0, 1])])])
        res = {p.partition_index: p.partition_error_code for r in v.results_by_transaction for tr in r.topic_results
               for p in tr.results_by_partition}
        assert res == {0: 0, 1: 0}
        assert t.end(commit=True) == 0
        wait_until(lambda: offsets(bs, topic, 0)[1] == hw0 + 3, 30, "the LSO after the commit marker")
        assert offsets(bs, topic, 0) == (hw0 + 3, hw0 + 3)
        wait_until(lambda: t.describe().transaction_state == "CompleteCommit", 30, "CompleteCommit")
        assert sorted(read_all(bs, topic, "read_committed")) == sorted([b"v0", b"v1", b"v2", b"v3", b"x1", b"x2"])
    finally:
        t.close()


def test_coordinator_errors_by_version(cluster3: object) -> None:
    bs = cluster3.bootstrap  # type: ignore[attr-defined]
    topic = unique("raw-err")
    create_topic(bs, topic, partitions=1)
    t = Txn(bs, unique("raw-err-txn"))
    try:
        r = t.coord.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=t.txn_id, transaction_timeout_ms=900_001,
                            producer_id=-1, producer_epoch=-1)
        assert r.error_code == E.INVALID_TRANSACTION_TIMEOUT
        r = t.coord.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=t.txn_id, transaction_timeout_ms=1000,
                            producer_id=5, producer_epoch=-1)
        assert r.error_code == E.INVALID_REQUEST
        t.init()
        old_pid, old_epoch = t.pid, t.epoch
        assert t.end(commit=True) == E.INVALID_TXN_STATE  # nothing to commit
        assert t.add("no-such-topic-" + topic, [0]) == E.UNKNOWN_TOPIC_OR_PARTITION
        # A second InitProducerId bumps the epoch: the old epoch is fenced, reported per version.
        t.init()
        assert t.epoch == old_epoch + 1
        assert t.add(topic, [0], version=1, epoch=old_epoch) == E.INVALID_PRODUCER_EPOCH
        assert t.add(topic, [0], version=3, epoch=old_epoch) == E.PRODUCER_FENCED
        assert t.end(commit=False, version=1, epoch=old_epoch) == E.INVALID_PRODUCER_EPOCH
        assert t.end(commit=False, version=3, epoch=old_epoch) == E.PRODUCER_FENCED
        # KIP-360: a producer id that is not the current one is fenced (InitProducerId v3+).
        r = t.coord.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=t.txn_id, transaction_timeout_ms=1000,
                            producer_id=old_pid + 1000, producer_epoch=0)
        assert r.error_code == E.PRODUCER_FENCED
        r = t.coord.request(ApiKey.INIT_PRODUCER_ID, 3, transactional_id=t.txn_id, transaction_timeout_ms=1000,
                            producer_id=old_pid + 1000, producer_epoch=0)
        assert r.error_code == E.INVALID_PRODUCER_EPOCH
        assert t.init(expected=(t.pid, t.epoch)).error_code == 0 and t.epoch == old_epoch + 2
    finally:
        t.close()


def test_write_txn_markers_fencing(cluster3: object) -> None:
    """A marker with an older producer epoch or an older coordinator epoch is refused by the partition."""
    bs = cluster3.bootstrap  # type: ignore[attr-defined]
    topic = unique("raw-wtm")
    create_topic(bs, topic, partitions=1)
    t = Txn(bs, unique("raw-wtm-txn"))
    try:
        t.init()
        t.init()  # epoch 1, so that epoch 0 is a stale one
        assert t.epoch == 1
        assert t.add(topic, [0]) == 0
        assert t.produce(topic, 0, [b"m"]).error_code == 0
        assert t.end(commit=True) == 0
        wait_until(lambda: t.describe().transaction_state == "CompleteCommit", 30, "CompleteCommit")
        with RawClient(bs) as raw:
            addr = leader_bootstrap(raw, topic, 0)

        def marker(epoch: int, coordinator_epoch: int) -> int:
            with RawClient(addr) as leader:
                r = leader.request(ApiKey.WRITE_TXN_MARKERS, 1, markers=[_WTM.WritableTxnMarker(
                    producer_id=t.pid, producer_epoch=epoch, transaction_result=False,
                    topics=[_WTM.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])],
                    coordinator_epoch=coordinator_epoch)])
            return r.markers[0].topics[0].partitions[0].error_code

        assert marker(0, 10_000) == E.INVALID_PRODUCER_EPOCH
        assert marker(1, -1) == E.TRANSACTION_COORDINATOR_FENCED
        assert offsets(bs, topic, 0) == (2, 2), "refused markers are not written"
    finally:
        t.close()


def test_open_transaction_is_aborted_after_its_timeout(cluster3: object) -> None:
    bs = cluster3.bootstrap  # type: ignore[attr-defined]
    topic = unique("raw-timeout")
    create_topic(bs, topic, partitions=1)
    t = Txn(bs, unique("raw-timeout-txn"), timeout_ms=2000)
    try:
        t.init()
        epoch = t.epoch
        assert t.add(topic, [0]) == 0
        assert t.produce(topic, 0, [b"left", b"open"]).error_code == 0
        assert offsets(bs, topic, 0) == (2, 0)
        # transaction.abort.timed.out.transaction.cleanup.interval.ms is 1 s on this cluster.
        wait_until(lambda: offsets(bs, topic, 0) == (3, 3), 30, "the LSO to pass the aborted transaction")
        wait_until(lambda: t.describe().transaction_state == "CompleteAbort", 30, "CompleteAbort")
        assert t.describe().producer_epoch == epoch + 1
        assert read_all(bs, topic, "read_committed") == []
        assert sorted(read_all(bs, topic, "read_uncommitted")) == [b"left", b"open"]
        assert t.end(commit=True) == E.PRODUCER_FENCED  # the producer was fenced by the abort
    finally:
        t.close()


def test_kafka_python_producer_is_fenced(cluster3: object) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    bs = cluster3.bootstrap  # type: ignore[attr-defined]
    topic = unique("kp-fence")
    create_topic(bs, topic, partitions=1)
    txn_id = unique("kp-fence-txn")
    first = KafkaProducer(bootstrap_servers=bs, transactional_id=txn_id)
    second = KafkaProducer(bootstrap_servers=bs, transactional_id=txn_id)
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send(topic, b"first").get(30)
        second.init_transactions()  # aborts the open transaction and fences the first producer
        try:
            first.send(topic, b"late").get(30)
            raise AssertionError("a fenced producer's send succeeded")
        except KafkaError as e:
            assert "InvalidProducerEpoch" in type(e).__name__, e

        def fenced() -> bool:
            try:
                first.commit_transaction()
            except KafkaError as e:
                return "ProducerFenced" in str(e)
            raise AssertionError("a fenced producer committed")

        wait_until(fenced, 30, "the first producer to learn it is fenced", interval=0.5)
        second.begin_transaction()
        second.send(topic, b"second")
        second.commit_transaction()
    finally:
        first.close(timeout=5)
        second.close(timeout=5)
    assert read_all(bs, topic, "read_committed") == [b"second"]
    assert sorted(read_all(bs, topic, "read_uncommitted")) == [b"first", b"second"]


def test_abort_then_reuse_keeps_exactly_once_with_small_batches(cluster3: object) -> None:
    """A short loop where every second transaction aborts: aborted data interleaves committed data."""
    bs = cluster3.bootstrap  # type: ignore[attr-defined]
    src, dst, group = unique("kp2-in"), unique("kp2-out"), unique("kp2-g")
    create_topic(bs, src, partitions=1)
    create_topic(bs, dst, partitions=1)
    inputs = seed(bs, src, 60)
    # The loop gives up (and fails) if the 60 records are not all processed within its own timeout.
    out = kafka_python_loop(bs, src, dst, group, unique("kp2-txn"), 60, abort_every=2)
    committed = read_all(bs, dst, "read_committed")
    assert sorted(v.split(b":")[1] for v in committed) == sorted(inputs)
    assert not set(committed) & set(out.aborted)
