"""KIP-890 part 1: a partition leader verifies a producer's first transactional write with the coordinator.

With ``transaction.partition.verification.enable`` on (the default), a transactional batch for a
partition where the producer has no open transaction is appended only after the transaction
coordinator confirms that the partition is in the transaction (AddPartitionsToTxn v4, verify_only).
Otherwise the produce is refused. Produce v10 and older get INVALID_TXN_STATE, with Kafka's message;
v11 gets TRANSACTION_ABORTABLE. Nothing is appended. With verification off, the same batch is appended
and opens a transaction that the coordinator does not know, which holds back the LSO.

The storage tests check the verification guard: a marker between the question and the append makes
the append fail. The verifier tests check Kafka's batching of questions per coordinator. The last test
sends the same requests to kafkette and to Apache Kafka 3.9.1 and compares the answers: Produce v3 to v11
to a partition never added, a late batch after an abort, and a fenced epoch.

TxnOffsetCommit is verified the same way: the group's ``__consumer_offsets`` partition must be in the
transaction (AddOffsetsToTxn) before the group coordinator appends the offsets. Versions 0 to 3 are
refused INVALID_TXN_STATE and v4 TRANSACTION_ABORTABLE, with nothing written; the same requests are
compared with Apache Kafka 3.9.1's answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.metadata_cache import BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
from broker.txn_log_format import partition_for
from broker.txn_verification import NO_SEQUENCE, TXN_TOPIC, TxnVerifier, require_verified
from clients.admin import RESOURCE_BROKER, WireClient
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode as E
from protocol.messages import request_type
from protocol.records import NewRecord, build_batch, build_control_batch
from storage.log import PartitionLog
from storage.producer_state import REQUEST_VERIFICATION_GUARDS, InvalidTxnStateError, VerificationGuard
from tests.integration.helpers import RawClient, unique, wait_until
from tests.txn.ctp import read_all
from tests.txn.test_txn_protocol import Txn, leader_bootstrap, offsets

_DP = request_type(ApiKey.DESCRIBE_PRODUCERS)
_WTM = request_type(ApiKey.WRITE_TXN_MARKERS)
NOT_ADDED = "Partition was not added to the transaction"
CONFIG = "transaction.partition.verification.enable"


# ------------------------------------------------------------------------------------------------
# The guard in the partition's producer state (a real log on disk, no broker)


def _txn_batch(pid: int, seq: int, n: int = 1, epoch: int = 0) -> bytearray:
    return bytearray(build_batch([NewRecord(None, b"r%d" % (seq + i)) for i in range(n)], producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq, is_transactional=True))


def _marker(pid: int, commit: bool, epoch: int = 0) -> bytearray:
    return bytearray(build_control_batch(commit=commit, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0,
                                         timestamp=1000))


@contextlib.contextmanager
def _guards(guards: dict[tuple[str, int], VerificationGuard] | None) -> Iterator[None]:
    """Serve appends as the produce handler does for a request carrying ``guards``."""
    token = REQUEST_VERIFICATION_GUARDS.set(guards)
    try:
        yield
    finally:
        REQUEST_VERIFICATION_GUARDS.reset(token)


@pytest.fixture
def txn_log(tmp_path: Any) -> Iterator[PartitionLog]:
    lg = PartitionLog(os.path.join(str(tmp_path), "t-0"), {"segment_bytes": 1 << 20})
    yield lg
    lg.close()


def test_a_transactional_append_needs_the_guard_of_its_verification(txn_log: PartitionLog) -> None:
    lg, tp, pid = txn_log, ("t", 0), 7
    with _guards({}), pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        lg.append(_txn_batch(pid, 0))
    assert lg.log_end_offset == 0
    guard = lg.maybe_start_transaction_verification(pid, 0, 0)
    assert guard is not None
    with _guards({tp: VerificationGuard()}), pytest.raises(InvalidTxnStateError):
        lg.append(_txn_batch(pid, 0))  # another verification's guard
    with _guards({tp: guard}):
        assert lg.append(_txn_batch(pid, 0, 2)).first_offset == 0
    # The transaction is open here now: no verification, and no guard needed.
    assert lg.maybe_start_transaction_verification(pid, 2, 0) is None
    with _guards({}):
        lg.append(_txn_batch(pid, 2))
    assert lg.first_unstable_offset == 0
    lg.append(_marker(pid, commit=True), from_client=False)
    assert lg.first_unstable_offset is None and lg.log_end_offset == 4


def test_a_marker_between_verification_and_append_makes_the_guard_stale(txn_log: PartitionLog) -> None:
    """Kafka's ABA case: verified, then the transaction ends (a marker), then the append arrives."""
    lg, tp, pid = txn_log, ("t", 0), 8
    first = lg.maybe_start_transaction_verification(pid, 0, 0)
    assert first is not None
    with _guards({tp: first}):
        lg.append(_txn_batch(pid, 0))
    lg.append(_marker(pid, commit=False), from_client=False)
    stale = lg.maybe_start_transaction_verification(pid, 1, 0)
    assert stale is not None and stale is not first
    # The coordinator timed the next transaction out and wrote its abort marker while we asked.
    lg.append(_marker(pid, commit=False), from_client=False)
    end = lg.log_end_offset
    with _guards({tp: stale}), pytest.raises(InvalidTxnStateError):
        lg.append(_txn_batch(pid, 1))
    assert lg.log_end_offset == end and lg.first_unstable_offset is None, "no transaction was opened"
    fresh = lg.maybe_start_transaction_verification(pid, 1, 0)
    assert fresh is not None and fresh is not stale
    with _guards({tp: fresh}):
        lg.append(_txn_batch(pid, 1))
    assert lg.first_unstable_offset == end


def test_a_higher_sequence_does_not_overtake_one_being_verified(txn_log: PartitionLog) -> None:
    lg, tp, pid = txn_log, ("t", 0), 9
    lg.maybe_start_transaction_verification(pid, 3, 0)
    guard = lg.maybe_start_transaction_verification(pid, 0, 0)  # a lower sequence: the same verification
    assert guard is not None
    with _guards({tp: guard}), pytest.raises(Exception, match="out of order sequence"):
        lg.append(_txn_batch(pid, 3))
    with _guards({tp: guard}):
        lg.append(_txn_batch(pid, 0, 3))
        lg.append(_txn_batch(pid, 3))
    assert lg.log_end_offset == 4


def test_a_coordinator_append_checks_its_verification_before_the_append(txn_log: PartitionLog) -> None:
    """The group coordinator's TxnOffsetCommit append (which the log does not check): a guard that a
    marker made stale is refused; the current one, or an open transaction, lets it in."""
    lg, pid = txn_log, 11
    stale = lg.maybe_start_transaction_verification(pid, NO_SEQUENCE, 0)
    assert stale is not None
    lg.append(_marker(pid, commit=False), from_client=False)  # the transaction timed out meanwhile
    with pytest.raises(InvalidTxnStateError):
        require_verified(lg, pid, stale)
    with pytest.raises(InvalidTxnStateError):
        require_verified(lg, pid, None)
    fresh = lg.maybe_start_transaction_verification(pid, NO_SEQUENCE, 0)
    require_verified(lg, pid, fresh)
    lg.append(_txn_batch(pid, 0), from_client=False)
    require_verified(lg, pid, None)  # open here now: no guard needed


def test_without_verification_the_append_needs_no_guard(txn_log: PartitionLog) -> None:
    with _guards(None):
        txn_log.append(_txn_batch(10, 0))
    assert txn_log.log_end_offset == 1 and txn_log.first_unstable_offset == 0


# ------------------------------------------------------------------------------------------------
# Produce to the shared 3-broker cluster


def _brokers(bootstrap: str) -> list[int]:
    with WireClient(bootstrap) as admin:
        return sorted(b.node_id for b in admin.refresh([]).brokers.values())


def _topic_led_by(bootstrap: str, leaders: list[int], all_brokers: list[int]) -> str:
    """A topic whose partition i is led by ``leaders[i]`` (three replicas each)."""
    topic = unique("kip890")
    assignment = {i: [b, *[x for x in all_brokers if x != b]] for i, b in enumerate(leaders)}
    with WireClient(bootstrap) as admin:
        admin.create_topic(topic, assignment=assignment)
        brokers = admin.refresh([]).brokers
        addresses = [f"{brokers[b].host}:{brokers[b].port}" for b in all_brokers]
    # Every broker, the transaction coordinator's included, must know the topic: AddPartitionsToTxn
    # answers UNKNOWN_TOPIC_OR_PARTITION for a topic missing from the coordinator's metadata cache.
    for address in addresses:
        with RawClient(address) as raw:
            wait_until(lambda raw=raw: raw.leaders(topic) == len(leaders), 30, f"leaders of {topic} at {address}")
    return topic


def _produce(t: Txn, topic: str, partition: int, values: list[bytes], seq: int, version: int = 9) -> Any:
    batch = build_batch([NewRecord(None, v) for v in values], producer_id=t.pid, producer_epoch=t.epoch,
                        base_sequence=seq, is_transactional=True)
    with RawClient(t.bootstrap) as raw:
        addr = leader_bootstrap(raw, topic, partition)
    with RawClient(addr) as leader:
        return leader.produce(topic, partition, batch, version=version, transactional_id=t.txn_id)


def _open_transaction_start(bootstrap: str, topic: str, partition: int, pid: int) -> int:
    """The producer's open transaction's first offset on the partition leader (-1: none)."""
    with RawClient(bootstrap) as raw:
        addr = leader_bootstrap(raw, topic, partition)
    with RawClient(addr) as leader:
        r = leader.request(ApiKey.DESCRIBE_PRODUCERS, 0, topics=[
            _DP.TopicRequest(name=topic, partition_indexes=[partition])])
    states = [s for s in r.topics[0].partitions[0].active_producers if s.producer_id == pid]
    return states[0].current_txn_start_offset if states else -1


def test_produce_to_a_partition_never_added_is_refused(cluster3: Any) -> None:
    bs = cluster3.bootstrap
    brokers = _brokers(bs)
    t = Txn(bs, unique("kip890-txn"))
    try:
        coordinator = t.coordinator_id
        others = [b for b in brokers if b != coordinator]
        # Partition 0 (added) on another broker; 1 led by the coordinator itself (answered locally);
        # 2 led by the third broker (asked over the inter-broker listener).
        topic = _topic_led_by(bs, [others[0], coordinator, others[1]], brokers)
        t.init()
        assert t.add(topic, [0]) == E.NONE
        assert _produce(t, topic, 0, [b"in"], 0).error_code == E.NONE
        for p in (1, 2):
            r = _produce(t, topic, p, [b"stray"], 0)
            assert (r.error_code, r.error_message, r.base_offset) == (E.INVALID_TXN_STATE, NOT_ADDED, -1), (p, r)
            # Produce v11 clients know TRANSACTION_ABORTABLE (KIP-890), with no message.
            r = _produce(t, topic, p, [b"stray"], 0, version=11)
            assert (r.error_code, r.error_message) == (E.TRANSACTION_ABORTABLE, None), (p, r)
            assert offsets(bs, topic, p) == (0, 0), "nothing appended"
        # Added later, the partition takes the batch.
        assert t.add(topic, [2]) == E.NONE
        assert _produce(t, topic, 2, [b"added-later"], 0).error_code == E.NONE
        assert t.end(commit=True) == E.NONE
        wait_until(lambda: offsets(bs, topic, 2) == (2, 2), 30, "the COMMIT marker on partition 2")
        wait_until(lambda: offsets(bs, topic, 0) == (2, 2), 30, "the COMMIT marker on partition 0")
        assert offsets(bs, topic, 1) == (0, 0)
    finally:
        t.close()
    assert sorted(read_all(bs, topic, "read_committed")) == [b"added-later", b"in"]


def test_a_producer_from_another_epoch_is_told_it_is_fenced(cluster3: Any) -> None:
    bs = cluster3.bootstrap
    brokers = _brokers(bs)
    t = Txn(bs, unique("kip890-fenced"))
    try:
        topic = _topic_led_by(bs, [t.coordinator_id], brokers)
        t.init()
        old_epoch = t.epoch
        t.init()  # a newer producer with the same transactional id
        new_epoch = t.epoch
        assert t.add(topic, [0]) == E.NONE
        t.epoch = old_epoch
        r = _produce(t, topic, 0, [b"zombie"], 0)
        # The coordinator answers PRODUCER_FENCED; producers expect INVALID_PRODUCER_EPOCH on Produce.
        assert r.error_code == E.INVALID_PRODUCER_EPOCH, r
        assert offsets(bs, topic, 0) == (0, 0)
        t.epoch = new_epoch
        assert t.end(commit=False) == E.NONE
    finally:
        t.close()


def test_a_late_batch_after_the_abort_does_not_hang_the_partition(cluster3: Any) -> None:
    """The batch that arrives after its transaction was aborted (a slow network, a retry) is refused;
    without verification it would open a transaction no coordinator will ever end."""
    bs = cluster3.bootstrap
    brokers = _brokers(bs)
    t = Txn(bs, unique("kip890-late"))
    try:
        # The partition on a broker other than the coordinator: the question goes over the network.
        topic = _topic_led_by(bs, [next(b for b in brokers if b != t.coordinator_id)], brokers)
        t.init()
        assert t.add(topic, [0]) == E.NONE
        assert _produce(t, topic, 0, [b"a1", b"a2"], 0).error_code == E.NONE
        assert t.end(commit=False) == E.NONE
        wait_until(lambda: offsets(bs, topic, 0) == (3, 3), 30, "the ABORT marker")
        wait_until(lambda: t.describe().transaction_state == "CompleteAbort", 30, "CompleteAbort")
        late = _produce(t, topic, 0, [b"late"], 2)
        assert (late.error_code, late.error_message) == (E.INVALID_TXN_STATE, NOT_ADDED), late
        assert offsets(bs, topic, 0) == (3, 3), "the LSO is not held back"
        assert _open_transaction_start(bs, topic, 0, t.pid) == -1
        assert read_all(bs, topic, "read_committed") == []
    finally:
        t.close()


def _set_verification(bootstrap: str, broker: int, enabled: bool | None) -> None:
    """Set (or with None remove) the broker's dynamic transaction.partition.verification.enable."""
    with WireClient(bootstrap) as admin:
        if enabled is None:
            admin.incremental_alter_configs(RESOURCE_BROKER, str(broker), {}, [CONFIG])
        else:
            admin.incremental_alter_configs(RESOURCE_BROKER, str(broker), {CONFIG: str(enabled).lower()}, [])
        want = "true" if enabled is None else str(enabled).lower()

        def applied() -> bool:
            return any(c.name == CONFIG and c.value == want
                       for c in admin.describe_configs(RESOURCE_BROKER, str(broker), [CONFIG]))
        wait_until(applied, 30, f"{CONFIG}={want} on broker {broker}")


def test_with_verification_off_the_stray_batch_is_appended_and_hangs(cluster3: Any) -> None:
    """Today's behaviour before KIP-890, with the config off (a dynamic broker config): appended, and
    the partition's LSO stays behind the transaction until someone writes a marker for it."""
    bs = cluster3.bootstrap
    brokers = _brokers(bs)
    t = Txn(bs, unique("kip890-off"))
    leader = next(b for b in brokers if b != t.coordinator_id)
    try:
        topic = _topic_led_by(bs, [leader], brokers)
        t.init()
        _set_verification(bs, leader, False)
        try:
            r = _produce(t, topic, 0, [b"unverified"], 0)
            assert r.error_code == E.NONE, r
        finally:
            _set_verification(bs, leader, None)
        assert offsets(bs, topic, 0) == (1, 0), "an open transaction the coordinator does not know"
        assert _open_transaction_start(bs, topic, 0, t.pid) == 0
        # Verification is back on: a second producer's stray batch is refused again.
        other = Txn(bs, unique("kip890-off-2"))
        try:
            other.init()
            assert _produce(other, topic, 0, [b"stray"], 0).error_code == E.INVALID_TXN_STATE
        finally:
            other.close()
        # What an operator does about a hanging transaction (kafka-transactions.sh abort): a marker.
        with RawClient(bs) as raw:
            addr = leader_bootstrap(raw, topic, 0)
        with RawClient(addr) as raw_leader:
            w = raw_leader.request(ApiKey.WRITE_TXN_MARKERS, 1, markers=[_WTM.WritableTxnMarker(
                producer_id=t.pid, producer_epoch=t.epoch, transaction_result=False,
                topics=[_WTM.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])], coordinator_epoch=0)])
        assert w.markers[0].topics[0].partitions[0].error_code == E.NONE
        wait_until(lambda: offsets(bs, topic, 0) == (2, 2), 30, "the LSO after the operator's marker")
    finally:
        t.close()


# ------------------------------------------------------------------------------------------------
# Brokers that ask each other over a SASL_SSL inter-broker listener


def test_verification_over_a_sasl_ssl_inter_broker_listener(cluster_factory: Any) -> None:
    """The leader's question goes over the inter-broker listener with the broker's own TLS and SCRAM
    login (a question that cannot be asked would be answered NOT_ENOUGH_REPLICAS)."""
    from kafka import KafkaProducer

    from tests.cluster.helpers import SecureInterBroker

    cluster = cluster_factory(3, metrics_base_port=None, **SecureInterBroker("SASL_SSL").options(
        transaction_state_log_num_partitions="3"))
    bs = cluster.bootstrap
    brokers = _brokers(bs)
    t = Txn(bs, unique("kip890-secure"))
    try:
        others = [b for b in brokers if b != t.coordinator_id]
        topic = _topic_led_by(bs, others, brokers)
        t.init()
        r = _produce(t, topic, 0, [b"stray"], 0)
        assert (r.error_code, r.error_message) == (E.INVALID_TXN_STATE, NOT_ADDED), r
        assert t.add(topic, [0, 1]) == E.NONE
        assert _produce(t, topic, 0, [b"raw-0"], 0).error_code == E.NONE
        assert _produce(t, topic, 1, [b"raw-1"], 0).error_code == E.NONE
        assert t.end(commit=True) == E.NONE
    finally:
        t.close()
    # A stock client's transaction, every partition led by a broker that is not its coordinator.
    producer = KafkaProducer(bootstrap_servers=bs, transactional_id=t.txn_id)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for p in (0, 1):
            producer.send(topic, value=b"kp-%d" % p, partition=p)
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    assert sorted(read_all(bs, topic, "read_committed")) == [b"kp-0", b"kp-1", b"raw-0", b"raw-1"]
    for b in cluster.brokers:
        assert "Failed authentication" not in b.log_text()


# ------------------------------------------------------------------------------------------------
# The verifier: questions batched per coordinator (Kafka's AddPartitionsToTxnManager)


def _metadata_of(bootstrap: str) -> MetadataCache:
    """A metadata cache holding the cluster's brokers and __transaction_state, as a broker's would."""
    md = MetadataCache(-1)
    with WireClient(bootstrap) as admin:
        info = admin.refresh([TXN_TOPIC])
    md.brokers = {b.node_id: BrokerInfo(b.node_id, None, {"PLAINTEXT": (b.host, b.port)})
                  for b in info.brokers.values()}
    t = info.topics[TXN_TOPIC]
    md.topics[TXN_TOPIC] = TopicInfo(TXN_TOPIC, uuid.uuid4(), {
        p.partition: PartitionInfo(TXN_TOPIC, p.partition, p.leader, 0, list(p.isr), list(p.replicas))
        for p in t.partitions.values()})
    return md


def _ids_coordinated_by(md: MetadataCache, n: int) -> list[str]:
    """``n`` new transactional ids with one coordinator."""
    parts = md.topics[TXN_TOPIC].partitions
    by_leader: dict[int, list[str]] = {}
    while True:
        txn_id = unique("kip890-batch")
        ids = by_leader.setdefault(parts[partition_for(txn_id, len(parts))].leader, [])
        ids.append(txn_id)
        if len(ids) == n:
            return ids


def test_concurrent_questions_to_one_coordinator_share_a_request(cluster3: Any) -> None:
    bs = cluster3.bootstrap
    md = _metadata_of(bs)
    brokers = _brokers(bs)
    producers = [Txn(bs, txn_id) for txn_id in _ids_coordinated_by(md, 6)]
    try:
        topic = _topic_led_by(bs, brokers[:2], brokers)
        for t in producers:
            t.init()
            assert t.add(topic, [0]) == E.NONE
        added, not_added = (topic, 0), (topic, 1)

        async def ask() -> tuple[list[dict[Any, Any]], TxnVerifier]:
            verifier = TxnVerifier(-1, md, "PLAINTEXT", lambda: None, 30_000)
            try:
                answers = await asyncio.gather(*(
                    verifier.verify(t.txn_id, t.pid, t.epoch, [added, not_added], generic_errors=i % 2 == 1)
                    for i, t in enumerate(producers)))
                # The same transactional id twice before the request goes: Kafka keeps the later
                # question; the earlier one is answered NETWORK_EXCEPTION (same epoch) or
                # INVALID_PRODUCER_EPOCH (an older epoch, either way round).
                t0 = producers[0]
                same = await asyncio.gather(
                    verifier.verify(t0.txn_id, t0.pid, t0.epoch, [added], generic_errors=False),
                    verifier.verify(t0.txn_id, t0.pid, t0.epoch, [added], generic_errors=False))
                older = await asyncio.gather(
                    verifier.verify(t0.txn_id, t0.pid, t0.epoch, [added], generic_errors=False),
                    verifier.verify(t0.txn_id, t0.pid, t0.epoch - 1, [added], generic_errors=False))
                return [*answers, *same, *older], verifier
            finally:
                verifier.close()

        answers, verifier = asyncio.run(ask())
        for i, answer in enumerate(answers[:len(producers)]):
            assert answer == {not_added: E.TRANSACTION_ABORTABLE if i % 2 else E.INVALID_TXN_STATE}, (i, answer)
        assert answers[len(producers):] == [{added: E.NETWORK_EXCEPTION}, {}, {}, {added: E.INVALID_PRODUCER_EPOCH}]
        assert verifier.stats.requests == 3, "one AddPartitionsToTxn per burst of questions"
    finally:
        for t in producers:
            t.close()


# ------------------------------------------------------------------------------------------------
# Side by side with Apache Kafka 3.9.1 (ZooKeeper mode, from the Maven Central jars)


@pytest.fixture(scope="module")
def kafkette_and_kafka() -> Iterator[dict[str, str]]:
    from clients.devcluster import LocalCluster
    from tests.ops.kafka_broker import KafkaZkBroker

    kafka = KafkaZkBroker({"transaction.state.log.num.partitions": "5"})
    overrides = {"transaction.state.log.num.partitions": "5", "transaction.state.log.replication.factor": "1",
                 "transaction.state.log.min.isr": "1", "offsets.topic.num.partitions": "5"}
    with LocalCluster(1, metrics_base_port=None, overrides=overrides) as cluster:
        try:
            kafka.start()
            yield {"kafkette": cluster.bootstrap, "kafka": kafka.bootstrap}
        finally:
            kafka.stop()


def _answer(r: Any) -> tuple[Any, ...]:
    return (E(r.error_code).name, r.error_message, r.base_offset, r.log_append_time_ms, r.log_start_offset)


def _verification_scenario(bootstrap: str) -> dict[str, Any]:
    topic = "kip890-side-by-side"
    with WireClient(bootstrap) as admin:
        admin.create_topic(topic, 2, 1)
    with RawClient(bootstrap) as raw:
        wait_until(lambda: raw.leaders(topic) == 2, 30, f"leaders of {topic}")
    out: dict[str, Any] = {}
    t = Txn(bootstrap, "kip890-side-by-side")
    try:
        t.init()
        out["add p0"] = t.add(topic, [0])
        out["produce p0 (added)"] = _answer(_produce(t, topic, 0, [b"a", b"b"], 0))
        for v in (3, 7, 9, 10, 11):
            out[f"produce p1 (never added) v{v}"] = _answer(_produce(t, topic, 1, [b"stray"], 0, version=v))
        out["p1 offsets"] = offsets(bootstrap, topic, 1)
        out["abort"] = t.end(commit=False)
        wait_until(lambda: offsets(bootstrap, topic, 0) == (3, 3), 30, "the ABORT marker")
        out["late batch after the abort"] = _answer(_produce(t, topic, 0, [b"late"], 2))
        out["p0 offsets"] = offsets(bootstrap, topic, 0)
        old_epoch = t.epoch
        t.init()
        out["new epoch add p1"] = t.add(topic, [1])
        t.epoch = old_epoch
        out["old epoch produce p1"] = _answer(_produce(t, topic, 1, [b"zombie"], 0))
        out["p1 offsets at the end"] = offsets(bootstrap, topic, 1)
    finally:
        t.close()
    return out


def test_verification_answers_as_kafka_391(kafkette_and_kafka: dict[str, str]) -> None:
    ours = _verification_scenario(kafkette_and_kafka["kafkette"])
    theirs = _verification_scenario(kafkette_and_kafka["kafka"])
    assert ours == theirs, "kafkette (left) and Kafka 3.9.1 (right) differ:\n" + "\n".join(
        f"{k}:\n  {ours[k]}\n  {theirs.get(k)}" for k in ours if ours[k] != theirs.get(k))


# ------------------------------------------------------------------------------------------------
# TxnOffsetCommit: the group's offsets partition must be in the transaction (AddOffsetsToTxn)

_TOC = request_type(ApiKey.TXN_OFFSET_COMMIT)
_OF = request_type(ApiKey.OFFSET_FETCH)
OFFSETS_TOPIC = "__consumer_offsets"


def _group_coordinator(bootstrap: str, group: str) -> tuple[int, str]:
    """(broker id, address) of the group's coordinator."""
    with RawClient(bootstrap) as raw:
        def find() -> Any:
            r = raw.request(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)
            return r if r.error_code == 0 else None
        fc = wait_until(find, 60, f"the coordinator of group {group}")
    return fc.node_id, f"{fc.host}:{fc.port}"


def _offsets_partition(bootstrap: str, group: str) -> int:
    _group_coordinator(bootstrap, group)  # FindCoordinator creates __consumer_offsets on first use
    with WireClient(bootstrap) as admin:
        def count() -> int:
            topic = admin.refresh([OFFSETS_TOPIC]).topics.get(OFFSETS_TOPIC)
            return len(topic.partitions) if topic is not None else 0
        parts = wait_until(count, 30, f"the partitions of {OFFSETS_TOPIC}")
    return partition_for(group, parts)  # the same hash as transactional ids (Utils.abs(hashCode) % n)


def _txn_offset_commit(t: Txn, group: str, topic: str, offset: int, version: int = 3) -> str:
    """One TxnOffsetCommit of ``offset`` for partition 0 of ``topic``, sent to the group's coordinator;
    the partition's error name."""
    _, addr = _group_coordinator(t.bootstrap, group)
    with RawClient(addr) as coordinator:
        r = coordinator.request(
            ApiKey.TXN_OFFSET_COMMIT, version, transactional_id=t.txn_id, group_id=group, producer_id=t.pid,
            producer_epoch=t.epoch, generation_id=-1, member_id="", group_instance_id=None, topics=[
                _TOC.TxnOffsetCommitRequestTopic(name=topic, partitions=[_TOC.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                    committed_metadata="")])])
    codes = [p.error_code for tr in r.topics for p in tr.partitions]
    assert len(codes) == 1, r
    return E(codes[0]).name


def _add_offsets(t: Txn, group: str) -> str:
    return E(t.retry(lambda: t.coord.request(
        ApiKey.ADD_OFFSETS_TO_TXN, 3, transactional_id=t.txn_id, producer_id=t.pid, producer_epoch=t.epoch,
        group_id=group).error_code, "AddOffsetsToTxn")).name


def _committed(bootstrap: str, group: str, topic: str) -> tuple[int, str]:
    """The group's stable committed offset of partition 0 (OffsetFetch v7, require_stable): (offset,
    error name), UNSTABLE_OFFSET_COMMIT while a transaction's offsets are pending."""
    _, addr = _group_coordinator(bootstrap, group)
    with RawClient(addr) as coordinator:
        r = coordinator.request(ApiKey.OFFSET_FETCH, 7, group_id=group, require_stable=True, topics=[
            _OF.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
    assert r.error_code == 0, r
    p = r.topics[0].partitions[0]
    return p.committed_offset, E(p.error_code).name


def _txn_offset_commit_scenario(bootstrap: str, topic: str, group: str, txn_id: str) -> dict[str, Any]:
    """TxnOffsetCommit v0-v4 before AddOffsetsToTxn, then after it, and what each left behind."""
    with WireClient(bootstrap) as admin:
        admin.create_topic(topic, 1, 1)
    # The group coordinator answers TxnOffsetCommit from its own metadata: until UpdateMetadata has
    # reached it, the topic is UNKNOWN_TOPIC_OR_PARTITION there, whatever the bootstrap broker knows.
    _, coordinator = _group_coordinator(bootstrap, group)
    with RawClient(coordinator) as raw:
        wait_until(lambda: raw.leaders(topic) == 1, 30, f"the coordinator to know the leader of {topic}")
    offsets_partition = _offsets_partition(bootstrap, group)
    out: dict[str, Any] = {}
    t = Txn(bootstrap, txn_id)
    try:
        t.init()
        for v in range(5):
            out[f"TxnOffsetCommit v{v} without AddOffsetsToTxn"] = _txn_offset_commit(t, group, topic, 10 + v, v)
        out["committed after the refusals"] = _committed(bootstrap, group, topic)
        out["transaction opened on the offsets partition"] = _open_transaction_start(
            bootstrap, OFFSETS_TOPIC, offsets_partition, t.pid) != -1
        out["AddOffsetsToTxn"] = _add_offsets(t, group)
        out["TxnOffsetCommit after AddOffsetsToTxn"] = _txn_offset_commit(t, group, topic, 42)
        out["committed while pending"] = _committed(bootstrap, group, topic)
        out["EndTxn commit"] = E(t.end(commit=True)).name
        out["committed at the end"] = wait_until(
            lambda: (c := _committed(bootstrap, group, topic)) != (-1, "UNSTABLE_OFFSET_COMMIT") and c, 30,
            "the transaction's offset")
    finally:
        t.close()
    return out


def test_txn_offset_commit_needs_the_offsets_partition_in_the_transaction(cluster3: Any) -> None:
    ours = _txn_offset_commit_scenario(cluster3.bootstrap, unique("kip890-toc"), unique("kip890-group"),
                                       unique("kip890-toc-txn"))
    # TxnOffsetCommit v4 clients know TRANSACTION_ABORTABLE; older ones get INVALID_TXN_STATE.
    assert ours == {
        **{f"TxnOffsetCommit v{v} without AddOffsetsToTxn": "INVALID_TXN_STATE" for v in range(4)},
        "TxnOffsetCommit v4 without AddOffsetsToTxn": "TRANSACTION_ABORTABLE",
        "committed after the refusals": (-1, "NONE"),
        "transaction opened on the offsets partition": False,
        "AddOffsetsToTxn": "NONE",
        "TxnOffsetCommit after AddOffsetsToTxn": "NONE",
        "committed while pending": (-1, "UNSTABLE_OFFSET_COMMIT"),
        "EndTxn commit": "NONE",
        "committed at the end": (42, "NONE"),
    }


def test_with_verification_off_txn_offset_commit_is_appended_unverified(cluster3: Any) -> None:
    """Before KIP-890 (the config off on the group's coordinator): the commit is written and opens a
    transaction on the offsets partition that the transaction coordinator does not know of."""
    bs = cluster3.bootstrap
    topic, group = unique("kip890-toc-off"), unique("kip890-group-off")
    with WireClient(bs) as admin:
        admin.create_topic(topic, 1, 1)
    coordinator, _ = _group_coordinator(bs, group)
    offsets_partition = _offsets_partition(bs, group)
    t = Txn(bs, unique("kip890-toc-off-txn"))
    try:
        t.init()
        _set_verification(bs, coordinator, False)
        try:
            assert _txn_offset_commit(t, group, topic, 7) == "NONE"
        finally:
            _set_verification(bs, coordinator, None)
        assert _committed(bs, group, topic) == (-1, "UNSTABLE_OFFSET_COMMIT")
        assert _open_transaction_start(bs, OFFSETS_TOPIC, offsets_partition, t.pid) >= 0
        # Verification is on again: another producer's commit without AddOffsetsToTxn is refused.
        other = Txn(bs, unique("kip890-toc-off-2"))
        try:
            other.init()
            assert _txn_offset_commit(other, group, topic, 8) == "INVALID_TXN_STATE"
        finally:
            other.close()
        # The coordinator learns of the partition late, and its abort marker ends the pending offsets.
        assert _add_offsets(t, group) == "NONE"
        assert t.end(commit=False) == E.NONE
        wait_until(lambda: _committed(bs, group, topic) == (-1, "NONE"), 30, "the aborted offsets dropped")
        assert _open_transaction_start(bs, OFFSETS_TOPIC, offsets_partition, t.pid) == -1
    finally:
        t.close()


def test_txn_offset_commit_verification_answers_as_kafka_391(kafkette_and_kafka: dict[str, str]) -> None:
    names = ("kip890-toc-side-by-side", "kip890-toc-group", "kip890-toc-txn")
    ours = _txn_offset_commit_scenario(kafkette_and_kafka["kafkette"], *names)
    theirs = _txn_offset_commit_scenario(kafkette_and_kafka["kafka"], *names)
    assert ours == theirs, "kafkette (left) and Kafka 3.9.1 (right) differ:\n" + "\n".join(
        f"{k}:\n  {ours[k]}\n  {theirs.get(k)}" for k in ours if ours[k] != theirs.get(k))
