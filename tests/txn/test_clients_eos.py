"""Exactly-once consume-transform-produce with stock clients on a 3-broker cluster.

Each loop commits most batches and aborts every third one; read_committed readers of the output see
each input once and nothing aborted, read_uncommitted readers see the aborted attempts as well, and
the group's offsets (committed only inside transactions) reach the end of the input.
"""

from __future__ import annotations

from tests.integration.helpers import unique
from tests.txn import java_clients
from tests.txn.ctp import check_exactly_once, create_topic, kafka_python_loop, read_all, seed

N = 300


def test_kafka_python_consume_transform_produce(cluster3: object) -> None:
    bs = cluster3.bootstrap  # type: ignore[attr-defined]
    src, dst, group = unique("kp-in"), unique("kp-out"), unique("kp-g")
    create_topic(bs, src)
    create_topic(bs, dst)
    inputs = seed(bs, src, N)
    out = kafka_python_loop(bs, src, dst, group, unique("kp-txn"), N)
    assert out.aborted, "the loop should have aborted some transactions"
    check_exactly_once(bs, src, dst, group, inputs, out.aborted)


def test_confluent_kafka_consume_transform_produce(cluster3: object) -> None:
    from tests.txn.ctp import confluent_loop

    bs = cluster3.bootstrap  # type: ignore[attr-defined]
    src, dst, group = unique("ck-in"), unique("ck-out"), unique("ck-g")
    create_topic(bs, src)
    create_topic(bs, dst)
    inputs = seed(bs, src, N)
    out = confluent_loop(bs, src, dst, group, unique("ck-txn"), N)
    assert out.aborted
    check_exactly_once(bs, src, dst, group, inputs, out.aborted)


def test_java_client_consume_transform_produce(cluster3: object) -> None:
    bs = cluster3.bootstrap  # type: ignore[attr-defined]
    src, dst, group = unique("jv-in"), unique("jv-out"), unique("jv-g")
    create_topic(bs, src)
    create_topic(bs, dst)
    inputs = seed(bs, src, N)
    out = java_clients.run_harness("ctp", bs, src, dst, group, unique("jv-txn"), str(N), "3")
    assert "DONE" in out
    aborted = [line.split(" ", 1)[1].encode() for line in out.splitlines() if line.startswith("ABORTED ")]
    assert aborted
    check_exactly_once(bs, src, dst, group, inputs, aborted)


def test_java_client_is_fenced_by_a_newer_producer(cluster3: object) -> None:
    bs = cluster3.bootstrap  # type: ignore[attr-defined]
    dst = unique("jv-fence")
    create_topic(bs, dst, partitions=1)
    out = java_clients.run_harness("fence", bs, dst, unique("jv-fence-txn"))
    # As against Kafka: the fenced producer's send fails with INVALID_PRODUCER_EPOCH, its abort with PRODUCER_FENCED.
    assert "SEND_FAILED org.apache.kafka.common.errors.InvalidProducerEpochException" in out, out
    assert "FENCED org.apache.kafka.common.errors.ProducerFencedException" in out, out
    assert "DONE" in out
    assert read_all(bs, dst, "read_committed") == [b"second"]
    assert sorted(read_all(bs, dst, "read_uncommitted")) == [b"fenced", b"second"]
