"""Transaction markers that cannot be written yet are retried until they are, across a coordinator failover.

The coordinator answers EndTxn as soon as PrepareCommit/PrepareAbort is in ``__transaction_state``;
the markers follow. Like Kafka's TransactionMarkerChannelManager, a marker whose partition has no
leader waits for one (``markersQueueForUnknownBroker``), a leader that answers NOT_LEADER_OR_FOLLOWER
or UNKNOWN_TOPIC_OR_PARTITION is asked again, and a coordinator that loads a transaction left in
PrepareCommit (its predecessor died) writes the markers again and then CompleteCommit. Real brokers,
real ZooKeeper, raw requests.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode as E
from protocol.messages import request_type
from tests.integration.helpers import RawClient, _metadata_topic, create_topic, unique, wait_until
from tests.txn.test_failover import FAILOVER_OVERRIDES, initialized_txn, transaction_state

_WTM = request_type(ApiKey.WRITE_TXN_MARKERS)


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> leader id in the metadata of the broker asked (-1: none, or a broker no longer registered)."""
    with RawClient(bootstrap) as raw:
        md = raw.request(ApiKey.METADATA, 12, topics=[_metadata_topic(topic)], allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
    live = {b.node_id for b in md.brokers}
    return {p.partition_index: (p.leader_id if p.leader_id in live else -1)
            for t in md.topics if t.name == topic for p in t.partitions}


def lso_and_hw(bootstrap: str, topic: str, partition: int) -> tuple[int, int] | None:
    from tests.txn.test_txn_protocol import offsets

    try:
        hw, lso = offsets(bootstrap, topic, partition)
    except (OSError, StopIteration):
        return None  # no leader yet
    return lso, hw


def read_committed(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    """The values of one partition up to its LSO, with kafka-python at read_committed (the other
    partitions of the topic may have no leader)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                      group_id=None)
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        out: list[bytes] = []

        def read_to_end() -> bool:
            for msgs in c.poll(timeout_ms=500).values():
                out.extend(m.value for m in msgs)
            return c.position(tp) >= end

        wait_until(read_to_end, 30, lambda: f"{topic}-{partition} read to {end}", interval=0)
        return out
    finally:
        c.close()


@pytest.mark.slow
def test_marker_for_a_leaderless_partition_waits_through_a_coordinator_failover(cluster_factory: Any) -> None:
    """The partition's only replica is down when the commit is prepared, and the coordinator is killed
    before it comes back: the new coordinator loads PrepareCommit and keeps retrying the marker until the
    partition has a leader again, then completes the transaction."""
    cluster = cluster_factory(3, overrides=FAILOVER_OVERRIDES)
    bs = cluster.bootstrap
    topic = unique("mk-offline")
    create_topic(bs, topic, partitions=3)  # replication factor 1: a stopped leader leaves its partition leaderless
    t = initialized_txn(bs, unique("mk-offline-txn"))
    coordinator = t.coordinator_id
    partition, leader = next((p, b) for p, b in sorted(leaders(bs, topic).items()) if b != coordinator)
    survivor = ({0, 1, 2} - {coordinator, leader}).pop()
    at = {i: b.bootstrap for i, b in enumerate(cluster.brokers)}
    try:
        assert t.add(topic, [partition]) == 0
        assert t.produce(topic, partition, [b"a", b"b"]).error_code == 0
        cluster.brokers[leader].stop()
        wait_until(lambda: leaders(at[coordinator], topic)[partition] == -1, 30,
                   f"{topic}-{partition} without a leader in the coordinator's metadata")
        assert t.end(commit=True) == E.NONE
        # The marker has nowhere to go: the transaction stays prepared.
        assert transaction_state(at[coordinator], t.txn_id) == "PrepareCommit"
    finally:
        t.close()

    cluster.brokers[coordinator].kill()
    # The survivor leads the __transaction_state partition once the dead broker's session expires; it loads
    # the prepared transaction and cannot finish it either while the data partition has no leader.
    wait_until(lambda: transaction_state(at[survivor], t.txn_id) == "PrepareCommit", 60,
               "the survivor coordinating the prepared transaction")
    assert lso_and_hw(at[survivor], topic, partition) is None

    cluster.brokers[leader].start()
    live = f"{at[survivor]},{at[leader]}"
    seen: list[tuple[int, int] | None] = [None]

    def committed() -> bool:
        got = seen[0] = lso_and_hw(live, topic, partition)
        return got == (3, 3)  # two records and the commit marker, written once

    wait_until(committed, 60, lambda: f"the commit marker on {topic}-{partition} (LSO, HW: {seen[0]})")
    assert read_committed(live, topic, partition) == [b"a", b"b"]
    wait_until(lambda: transaction_state(live, t.txn_id) == "CompleteCommit", 60, "CompleteCommit")


def test_write_txn_markers_to_a_non_leader_is_refused_with_a_retriable_error(cluster3: Any) -> None:
    """The partition side of a coordinator's retries: a broker that does not lead the partition answers
    NOT_LEADER_OR_FOLLOWER, one that does not know it UNKNOWN_TOPIC_OR_PARTITION, and writes nothing;
    the coordinator's own marker then goes to the leader."""
    bs = cluster3.bootstrap
    topic = unique("mk-nl")
    create_topic(bs, topic, partitions=1)
    t = initialized_txn(bs, unique("mk-nl-txn"))
    try:
        assert t.add(topic, [0]) == 0
        assert t.produce(topic, 0, [b"x"]).error_code == 0
        leader = leaders(bs, topic)[0]
        by_id = {i: b.bootstrap for i, b in enumerate(cluster3.brokers)}

        def marker(at: str, name: str) -> int:
            with RawClient(at) as raw:
                r = raw.request(ApiKey.WRITE_TXN_MARKERS, 1, markers=[_WTM.WritableTxnMarker(
                    producer_id=t.pid, producer_epoch=t.epoch, transaction_result=True,
                    topics=[_WTM.WritableTxnMarkerTopic(name=name, partition_indexes=[0])], coordinator_epoch=0)])
            return int(r.markers[0].topics[0].partitions[0].error_code)

        not_leader = next(a for i, a in by_id.items() if i != leader)
        assert marker(not_leader, topic) == E.NOT_LEADER_OR_FOLLOWER  # replication factor 1: not even a replica
        assert marker(by_id[leader], unique("mk-nl-missing")) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert lso_and_hw(bs, topic, 0) == (0, 1), "nothing was written"
        assert t.end(commit=True) == E.NONE
        wait_until(lambda: lso_and_hw(bs, topic, 0) == (2, 2), 30, "the coordinator's commit marker")
    finally:
        t.close()


@pytest.mark.slow
def test_marker_to_a_frozen_leader_is_retried_at_the_partition_s_next_leader(cluster_factory: Any) -> None:
    """The data partition's leader is frozen (SIGSTOP) when the commit is prepared: the coordinator's
    WriteTxnMarkers to it gets no answer, and once the controller has moved the partition (the frozen
    broker's ZooKeeper session expired) the request times out and the marker goes to the new leader."""
    from broker.txn_log_format import partition_for

    overrides = dict(FAILOVER_OVERRIDES, **{
        # Two replicas per __transaction_state partition, so that one of them can leave out the frozen broker.
        "transaction.state.log.replication.factor": "2",
        "request.timeout.ms": "10000",  # the WriteTxnMarkers to the frozen broker times out after 15 s
    })
    cluster = cluster_factory(3, overrides=overrides)
    bs = cluster.bootstrap
    topic = unique("mk-frozen")
    from tests.txn.ctp import create_topic as create_replicated_topic

    create_replicated_topic(bs, topic, partitions=3, rf=3)
    initialized_txn(bs, unique("mk-frozen-warm-up")).close()  # creates __transaction_state
    txn_replicas = replicas(bs, "__transaction_state")
    data_leaders = leaders(bs, topic)
    # A transaction partition whose replicas leave out the leader of one of the data partitions.
    txn_partition, partition, frozen = next(
        (tp, p, b) for tp, rs in sorted(txn_replicas.items()) for p, b in sorted(data_leaders.items()) if b not in rs)
    txn_id = next(i for i in (unique("mk-frozen-txn") for _ in range(500)) if partition_for(i, 5) == txn_partition)
    t = initialized_txn(bs, txn_id)
    at = {i: b.bootstrap for i, b in enumerate(cluster.brokers)}
    live = ",".join(a for i, a in at.items() if i != frozen)
    try:
        assert t.add(topic, [partition]) == 0
        assert t.produce(topic, partition, [b"a", b"b"]).error_code == 0
        cluster.brokers[frozen].pause()
        try:
            assert t.end(commit=True) == E.NONE
            assert transaction_state(at[t.coordinator_id], txn_id) == "PrepareCommit"
            seen: list[tuple[int, int] | None] = [None]

            def committed() -> bool:
                got = seen[0] = lso_and_hw(live, topic, partition) if leaders(live, topic)[partition] != frozen \
                    else None
                return got == (3, 3)

            wait_until(committed, 60, lambda: f"the commit marker at {topic}-{partition}'s new leader "
                                              f"(LSO, HW: {seen[0]})")
            wait_until(lambda: transaction_state(live, txn_id) == "CompleteCommit", 30, "CompleteCommit")
        finally:
            cluster.brokers[frozen].resume()
    finally:
        t.close()
    assert read_committed(live, topic, partition) == [b"a", b"b"]


def replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    with RawClient(bootstrap) as raw:
        md = raw.request(ApiKey.METADATA, 12, topics=[_metadata_topic(topic)], allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
    return {p.partition_index: list(p.replica_nodes) for t in md.topics if t.name == topic for p in t.partitions}
