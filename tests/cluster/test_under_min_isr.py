"""min.insync.replicas as Apache Kafka 3.9.1 applies it, side by side on two 3-broker clusters.

Since Kafka 3.7 (KAFKA-15583) a partition leader:

* caps min.insync.replicas at the number of assigned replicas: a one-replica topic with
  min.insync.replicas=2 takes acks=all writes;
* does not advance the high watermark while its ISR is below that minimum. A record written with
  acks=1 then is stored but stays invisible to consumers (ListOffsets, Fetch) until enough replicas
  are back in the ISR: otherwise a consumer could read a record that an election among the replicas
  left could lose.

The same steps run on a kafkette cluster and on an Apache Kafka 3.9.1 cluster (ZooKeeper mode, from
the Maven Central jars), and what each answers is compared step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from protocol.records import build_batch
from tests.cluster.helpers import Admin, RawClient, produce_once_hosted, unique, wait_until

REPLICATED = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
NOT_ENOUGH_REPLICAS = 19


class Side:
    """One system's cluster, as the steps need it: broker 0's address, and stopping and starting the
    two others."""

    def __init__(self, name: str, bootstrap: str, leader: str, stop: Callable[[int], None],
                 start: Callable[[int], None]) -> None:
        self.name, self.bootstrap, self.leader = name, bootstrap, leader
        self.stop, self.start = stop, start


@pytest.fixture
def sides(cluster_factory: Callable[..., Any]) -> Iterator[list[Side]]:
    from tests.cluster.helpers import start_broker
    from tests.ops.kafka_cluster import KafkaZkCluster

    ours = cluster_factory(3, overrides={"offsets.topic.num.partitions": "3", "auto.leader.rebalance.enable": "false"})
    kafka = KafkaZkCluster(3, zk_connect=ours.zk.connect_string,
                           overrides={"auto.leader.rebalance.enable": "false"}).start()
    try:
        yield [
            Side("kafkette", ours.bootstrap, ours.brokers[0].bootstrap, lambda i: ours.brokers[i].stop(),
                 lambda i: start_broker(ours.brokers[i])),
            Side("kafka", kafka.bootstrap, f"127.0.0.1:{kafka.ports[0]}", kafka.stop_broker, kafka.start_broker),
        ]
    finally:
        kafka.stop()


def _steps(side: Side) -> dict[str, Any]:
    """What the leader answers at each step; broker 0 leads both topics throughout."""
    seen: dict[str, Any] = {}
    one_replica, replicated = unique("min-isr-rf1"), unique("min-isr-rf3")
    with Admin(side.bootstrap) as admin:
        admin.create_topic(one_replica, configs=REPLICATED, assignment={0: [0]})
        admin.create_topic(replicated, configs=REPLICATED, assignment={0: [0, 1, 2]})
        seen["rf1 acks=all"] = produce_once_hosted(side.leader, one_replica, 0,
                                                   build_batch([(None, b"r1")])).error_code
        first = produce_once_hosted(side.leader, replicated, 0, build_batch([(None, b"m1")]))
        seen["rf3 acks=all, full ISR"] = (first.error_code, first.base_offset)

        side.stop(1)
        side.stop(2)
        admin.wait_isr(replicated, 0, [0])
        with RawClient(side.leader) as raw:
            second = raw.produce(replicated, 0, build_batch([(None, b"m2")]), acks=1)
            seen["rf3 acks=1, ISR [0]"] = (second.error_code, second.base_offset)
            seen["rf3 acks=all, ISR [0]"] = raw.produce(replicated, 0, build_batch([(None, b"m3")])).error_code
            seen["latest offset, ISR [0]"] = raw.list_offset(replicated, 0)
            fetched = raw.fetch(replicated, 0, 0, max_wait_ms=0)
            seen["fetch HW, ISR [0]"] = fetched.high_watermark
            seen["values fetched, ISR [0]"] = _values(fetched)

        side.start(1)
        admin.wait_isr(replicated, 0, [0, 1], timeout=90)
        with RawClient(side.leader) as raw:
            # The HW moves with the next follower fetch after the ISR change.
            seen["latest offset, ISR [0, 1]"] = wait_until(
                lambda: (lambda o: o if o == 2 else None)(raw.list_offset(replicated, 0)), 30,
                f"{side.name}: the HW of {replicated}-0 at 2")
            seen["values fetched, ISR [0, 1]"] = _values(raw.fetch(replicated, 0, 0, max_wait_ms=0))
    return seen


def _values(pd: Any) -> list[bytes | None]:
    from protocol.records import iter_batches

    assert pd.error_code == 0, pd
    return [r.value for b in iter_batches(memoryview(bytes(pd.records or b""))) for r in b.records()]


def test_min_insync_replicas_applied_as_kafka_applies_it(sides: list[Side]) -> None:
    answers = {side.name: _steps(side) for side in sides}
    expected = {
        "rf1 acks=all": 0,
        "rf3 acks=all, full ISR": (0, 0),
        "rf3 acks=1, ISR [0]": (0, 1),
        "rf3 acks=all, ISR [0]": NOT_ENOUGH_REPLICAS,
        "latest offset, ISR [0]": 1,
        "fetch HW, ISR [0]": 1,
        "values fetched, ISR [0]": [b"m1"],
        "latest offset, ISR [0, 1]": 2,
        "values fetched, ISR [0, 1]": [b"m1", b"m2"],
    }
    assert answers["kafka"] == expected, "Apache Kafka 3.9.1 answered otherwise than this test expects"
    assert answers["kafkette"] == answers["kafka"]
