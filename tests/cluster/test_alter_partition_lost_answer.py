"""An ISR expansion that the controller writes while its leader stops waiting for the answer, on real
broker processes and a real ZooKeeper.

Setup: a 3-broker cluster whose active controller is C; the topic has one partition on all three, led
by A, with B the replica that falls behind, min.insync.replicas=2 and unclean election off.

B is frozen until A shrinks the ISR to [A, C]; then C (the controller) is frozen and B let go. B catches
up and A proposes the ISR [A, B, C] to C, which cannot answer within controller.socket.timeout.ms. When C
is let go it writes that ISR to ZooKeeper. From then on ZooKeeper may elect B, so A must not acknowledge
an acks=all record that B lacks while ZooKeeper lists B in the ISR. A leader that gave up on the
unanswered proposal went back to the ISR [A, C], acknowledged such records with B frozen again, and never
shrank B out, since it did not count B as in sync; had A and C died, B would have been elected without
them. As in Kafka, the proposal is sent until it is answered, and the HW counts B meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.records import build_batch
from tests.cluster.helpers import (
    Admin,
    RawClient,
    ZkView,
    disk_values,
    produce_once_hosted,
    roles,
    unique,
    wait_until,
)

TOPIC_CONFIGS = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}


def test_an_expansion_written_while_the_leader_waited_is_counted_before_acks_all(
        cluster3: Callable[..., Any]) -> None:
    # A ZooKeeper session long enough for the freezes below; a follower out of the ISR after 3 s of no
    # progress; the leader waits 2 s for each answer from the controller.
    cluster = cluster3(zookeeper_session_timeout_ms="20000", replica_lag_time_max_ms="3000",
                       controller_socket_timeout_ms="2000")
    a, b, c = roles(cluster)
    A, B, C = cluster.brokers[a], cluster.brokers[b], cluster.brokers[c]
    topic = unique("lost-answer")
    with Admin(cluster.bootstrap) as admin, ZkView(cluster) as zk:
        admin.create_topic(topic, configs=TOPIC_CONFIGS, assignment={0: [a, b, c]})
        assert zk.state(topic, 0).leader == a
        assert produce_once_hosted(A.bootstrap, topic, 0, build_batch([(None, b"m1")])).error_code == 0

        def isr() -> list[int]:
            return sorted(zk.state(topic, 0).isr)

        frozen: list[Any] = []
        try:
            # B falls behind and A takes it out of the ISR. (With nothing written, B would stay at A's
            # log end and in the ISR, as in Kafka, until its ZooKeeper session expired.)
            B.pause()
            frozen.append(B)
            assert produce_once_hosted(A.bootstrap, topic, 0, build_batch([(None, b"m2")]), acks=1).error_code == 0
            wait_until(lambda: isr() == sorted([a, c]), 60, "ISR [A, C] with B frozen")

            # The controller is frozen, B catches up and A proposes [A, B, C]; B falls behind again at
            # once, so A's next fetches from B bring no reason to propose it anew.
            mark_a, mark_c = len(A.log_text()), len(C.log_text())
            C.pause()
            frozen.append(C)
            B.resume()
            frozen.remove(B)
            wait_until(lambda: f"Partition {topic}-0 broker={a}] Expanding ISR" in A.log_text()[mark_a:], 60,
                       "A proposing B back into the ISR")
            B.pause()
            frozen.append(B)
            wait_until(lambda: f"[Partition {topic}-0] AlterPartition" in A.log_text()[mark_a:], 60,
                       "A's proposal left without an answer for controller.socket.timeout.ms")
            # Let go, the controller writes the proposal it received.
            C.resume()
            frozen.remove(C)
            written = f"ISR of {topic}-0 is now {sorted([a, b, c])}"
            wait_until(lambda: written in C.log_text()[mark_c:], 60, "the controller writing the ISR [A, B, C]")

            # With B still frozen, an acks=all record (m3) is acknowledged only once B is not in ZooKeeper's ISR
            # (A shrinks it out after replica.lag.time.max.ms), or once B has it.
            with RawClient(A.bootstrap) as raw:
                r = raw.produce(topic, 0, build_batch([(None, b"m3")]), acks=-1)
            assert r.error_code == 0, f"acks=all produce of m3: error {r.error_code}"
            in_sync = isr()
            assert b not in in_sync or b"m3" in disk_values(B, topic), (
                f"m3 acknowledged while ZooKeeper lists B (broker {b}) in the ISR {in_sync} and B's log lacks it")
        finally:
            for broker in frozen:
                broker.resume()
        # B comes back and catches up: all three end with the three records.
        wait_until(lambda: isr() == sorted([a, b, c]), 60, "B back in the ISR")
        for broker in (A, B, C):
            wait_until(lambda broker=broker: disk_values(broker, topic) == [b"m1", b"m2", b"m3"], 60,
                       f"broker {broker.broker_id} holding m1, m2 and m3")
