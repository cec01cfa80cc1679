"""Sequence numbers reused across transactions are refused, never answered as duplicates.

librdkafka's abort_transaction() purges the messages waiting in its queues, retries included, and
moves the partition's sequence base past them, so the next transaction's first batch carries the
sequence numbers of a batch that may already be in the log (sent, answered REQUEST_TIMED_OUT, queued
for a retry). Kafka 3.9 matches that batch with the cached one of the aborted transaction, answers
it as a duplicate and appends nothing: the next transaction then commits without those records
(a torn transaction; the chaos suite's row 2 found it). A retry can only be of a batch of the
transaction still open, so kafkette answers OUT_OF_ORDER_SEQUENCE_NUMBER instead, which makes
librdkafka abort the transaction and bump its epoch.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from clients.admin import WireClient
from clients.devcluster import LocalCluster
from protocol.errors import ErrorCode as E
from protocol.records import NewRecord, build_batch
from tests.integration.helpers import RawClient, unique, wait_until
from tests.txn.ctp import create_topic, read_all
from tests.txn.test_txn_protocol import Txn, leader_bootstrap, offsets


def _settled(bootstrap: str, topic: str) -> bool:
    hw, lso = offsets(bootstrap, topic, 0)
    return hw == lso


def test_sequences_of_an_aborted_transaction_are_not_a_retry(cluster3: Any) -> None:
    bootstrap = cluster3.bootstrap
    topic = unique("seq-reuse")
    create_topic(bootstrap, topic, 1, 3)
    t = Txn(bootstrap, unique("seq-reuse-txn"))
    try:
        t.init()
        assert t.retry(lambda: t.add(topic, [0]), "AddPartitionsToTxn") == E.NONE
        first = t.produce(topic, 0, [f"aborted-{i}".encode() for i in range(6)])
        assert first.error_code == E.NONE
        assert t.end(commit=False) == E.NONE
        wait_until(lambda: _settled(bootstrap, topic), 30, "the ABORT marker")

        assert t.retry(lambda: t.add(topic, [0]), "AddPartitionsToTxn") == E.NONE
        t.seq[(topic, 0)] = 0  # the aborted batch's sequence numbers, again
        reused = t.produce(topic, 0, [f"lost-{i}".encode() for i in range(6)])
        assert reused.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER, reused

        # Within the open transaction a retry is still a duplicate, answered with the first offsets.
        t.seq[(topic, 0)] = 6
        batch = build_batch([NewRecord(None, f"kept-{i}".encode()) for i in range(3)], producer_id=t.pid,
                            producer_epoch=t.epoch, base_sequence=6, is_transactional=True)
        with RawClient(bootstrap) as raw:
            addr = leader_bootstrap(raw, topic, 0)
        with RawClient(addr) as leader:
            sent = leader.produce(topic, 0, batch, transactional_id=t.txn_id)
            again = leader.produce(topic, 0, batch, transactional_id=t.txn_id)
        assert sent.error_code == E.NONE and again.error_code == E.NONE
        assert again.base_offset == sent.base_offset
        assert t.end(commit=True) == E.NONE
        wait_until(lambda: _settled(bootstrap, topic), 30, "the COMMIT marker")
    finally:
        t.close()
    assert read_all(bootstrap, topic, "read_committed") == [f"kept-{i}".encode() for i in range(3)]


# ------------------------------------------------------------------------------------------------
# The same with librdkafka itself: a follower that stops answering makes the produce time out, the
# batch waits for its retry, and the application aborts. The next transaction must keep its records.

_OVERRIDES = {
    "replica.lag.time.max.ms": "600000",  # the paused follower stays in the ISR: acks=all waits
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
}


@pytest.fixture
def two_brokers() -> Iterator[LocalCluster]:
    with LocalCluster(2, overrides=_OVERRIDES) as c:
        yield c


@pytest.mark.slow
def test_librdkafka_abort_with_a_batch_waiting_for_its_retry(two_brokers: LocalCluster) -> None:
    from confluent_kafka import KafkaException, Producer

    c = two_brokers
    topic = unique("seq-reuse-rdkafka")
    admin = WireClient(c.bootstrap, timeout=10.0)
    admin.create_topic(topic, assignment={0: [0, 1]})
    # The transaction coordinator on broker 0 with one replica: only the data partition stalls.
    admin.create_topic("__transaction_state", assignment={0: [0]},
                           configs={"cleanup.policy": "compact", "min.insync.replicas": "1"})
    txn_id = unique("seq-reuse-rdkafka")

    def new_producer() -> Any:
        return Producer({
            "bootstrap.servers": c.bootstrap, "transactional.id": txn_id,
            "request.timeout.ms": 2000, "retry.backoff.ms": 6000, "retry.backoff.max.ms": 6000,
            "message.timeout.ms": 120000, "transaction.timeout.ms": 120000, "linger.ms": 0})

    producer = new_producer()
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, b"first", partition=0)
    producer.commit_transaction(60)
    wait_until(lambda: _settled(c.bootstrap, topic), 30, "the first COMMIT marker on both replicas")

    follower = c.brokers[1]
    follower.pause()
    try:
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, f"aborted-{i}".encode(), partition=0)
        # The leader appends the batch (sequences 1-6) and, with the follower silent, answers
        # REQUEST_TIMED_OUT after 2 s; librdkafka then holds the batch 6 s for its retry. Abort in
        # that window, once the answer came (the poll loop runs past the request timeout).
        wait_until(lambda: last_sequence(c.bootstrap, topic) == 6, 30, "the batch appended on the leader")
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            producer.poll(0.1)
        producer.abort_transaction(60)
    finally:
        follower.resume()

    # librdkafka gives the next transaction's first batch the aborted batch's sequence numbers. The
    # refusal is fatal to this producer ("sequence desynchronization"); as an application would, start
    # a new one with the same transactional.id: its InitProducerId fences the old epoch.
    kept = [f"kept-{i}".encode() for i in range(6)]
    refused = 0
    for _attempt in range(5):
        try:
            producer.begin_transaction()
            for v in kept:
                producer.produce(topic, v, partition=0)
            producer.commit_transaction(60)
            break
        except KafkaException as e:
            refused += 1
            if e.args[0].txn_requires_abort():
                producer.abort_transaction(60)
            else:
                assert e.args[0].fatal(), e
                producer = new_producer()
                producer.init_transactions(60)
    else:
        pytest.fail("no transaction committed in 5 attempts")
    wait_until(lambda: _settled(c.bootstrap, topic), 30, "the last COMMIT marker")
    assert read_all(c.bootstrap, topic, "read_committed") == [b"first", *kept]
    assert refused >= 1  # the reused sequences were refused, not taken as a duplicate


def last_sequence(bootstrap: str, topic: str) -> int:
    """The last sequence number partition 0's leader has appended for its one producer (-1: none)."""
    from protocol.api_versions import ApiKey
    from protocol.messages import request_type

    dp = request_type(ApiKey.DESCRIBE_PRODUCERS)
    with RawClient(bootstrap) as raw:
        addr = leader_bootstrap(raw, topic, 0)
    with RawClient(addr) as leader:
        r = leader.request(ApiKey.DESCRIBE_PRODUCERS, 0, topics=[dp.TopicRequest(name=topic, partition_indexes=[0])])
    producers = r.topics[0].partitions[0].active_producers
    return max((p.last_sequence for p in producers), default=-1)
