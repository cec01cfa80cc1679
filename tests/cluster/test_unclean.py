"""Unclean leader election: off by default, so a partition whose ISR members are all down stays
offline (and produce fails with a clean, retriable error) even though another replica is alive; turned
on for the topic, the controller elects that replica and logs the unclean election."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.records import build_batch
from tests.cluster.helpers import (
    Admin,
    RawClient,
    ZkView,
    produce_once_hosted,
    report,
    start_broker,
    unique,
    wait_until,
)


@pytest.mark.slow
def test_unclean_election_off_then_enabled_for_topic(cluster3: Callable[..., Any]) -> None:
    """Topic [A, B] (controller C elsewhere), min.insync.replicas=1. B is frozen until it drops out
    of the ISR; A (the last ISR member) is killed; B is thawed. With unclean election off the partition
    stays offline; after AlterConfigs unclean.leader.election.enable=true B leads."""
    from kafka import KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import KafkaError

    cluster = cluster3()
    with ZkView(cluster) as zk, Admin(cluster.bootstrap) as admin:
        c = wait_until(lambda: (lambda cid: None if cid is None else (cid,))(zk.controller()), 30, "a controller")[0]
        a, b = sorted({0, 1, 2} - {c})
        A, B, C = cluster.brokers[a], cluster.brokers[b], cluster.brokers[c]
        topic = unique("unclean")
        admin.create_topic(topic, configs={"min.insync.replicas": "1"}, assignment={0: [a, b]})
        assert produce_once_hosted(A.bootstrap, topic, 0, build_batch([(None, b"before-0")])).error_code == 0
        with RawClient(A.bootstrap) as raw:
            for i in range(1, 5):
                assert raw.produce(topic, 0, build_batch([(None, b"before-%d" % i)])).error_code == 0

        B.pause()
        try:
            wait_until(lambda: list(zk.state(topic, 0).isr) == [a], 60, "ISR [A] while B is frozen")
            A.kill()
        finally:
            B.resume()
        wait_until(lambda: zk.state(topic, 0).leader == -1, 60, "the partition offline after A's death")
        wait_until(lambda: b in zk.zk.get_sorted_broker_ids(), 60, "B registered again")
        ctrl_mark = len(C.log_text())
        t_offline = time.monotonic()

        # Offline, and staying offline: B is alive but was not in the ISR.
        time.sleep(5)
        st = zk.state(topic, 0)
        assert st.leader == -1 and list(st.isr) == [a], st
        with RawClient(B.bootstrap) as raw:
            r = raw.produce(topic, 0, build_batch([(None, b"refused")]))
        assert r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER, r
        producer = KafkaProducer(bootstrap_servers=B.bootstrap, acks="all", delivery_timeout_ms=4000,
                                 request_timeout_ms=3000, max_block_ms=4000, linger_ms=0)
        try:
            with pytest.raises(KafkaError):
                producer.send(topic, b"must-fail", partition=0).get(timeout=30)
        finally:
            producer.close(5)
        assert f"no leader for {topic}-0" in C.log_text(), "the controller did not log why the partition is offline"

        # Unclean election enabled for the topic: B leads, the controller logs the unclean election.
        admin.client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                   configs={"unclean.leader.election.enable": "true"})])
        st = wait_until(lambda: (lambda s: s if s.leader == b else None)(zk.state(topic, 0)), 60, "B elected")
        t_online = time.monotonic()
        assert list(st.isr) == [b]
        line = f"UNCLEAN leader election for {topic}-0: replica {b}"
        wait_until(lambda: line in C.log_text()[ctrl_mark:], 30, "the controller's unclean election log line")
        assert C.log_text()[ctrl_mark:].count(f"UNCLEAN leader election for {topic}-0") == 1
        offset = wait_until(lambda: _produce(B, topic, b"after"), 30, "B accepting records")
        assert offset == 5, "B holds the five records it had replicated before it was frozen"

        # A returns as a follower of B and rejoins the ISR.
        start_broker(A)
        admin.wait_isr(topic, 0, [a, b])
        report("unclean election", offline_for=t_online - t_offline)


def _produce(broker: Any, topic: str, value: bytes) -> int | None:
    with RawClient(broker.bootstrap) as raw:
        r = raw.produce(topic, 0, build_batch([(None, value)]))
    return r.base_offset if r.error_code == 0 else None
