"""Replication throttles: leader.replication.throttled.rate holds a throttled replica's catch-up back.

Two brokers; a partition led by broker 0 with broker 1 as follower. With broker 1 down, 2 MB are
produced. A 200 KB/s leader-side throttle is set on broker 0 (a dynamic broker config) for that
partition (`leader.replication.throttled.replicas=0:0`), then broker 1 starts. A few seconds later
the follower holds far less than it would unthrottled (which is all of it within a second or two);
once the throttle is removed it catches up and rejoins the ISR.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kafka.admin import ConfigResource, ConfigResourceType

from tests.cluster.helpers import Admin, overrides, start_broker, unique
from tests.integration.helpers import wait_until


def _follower_bytes(broker: Any, topic: str) -> int:
    d = Path(broker.dir) / "data" / f"{topic}-0"
    return sum(f.stat().st_size for f in d.glob("*.log")) if d.exists() else 0


def test_leader_throttle_limits_catch_up(cluster_factory: Any) -> None:
    from kafka import KafkaProducer

    cluster = cluster_factory(2, overrides=overrides())
    topic = unique("throttled")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, assignment={0: [0, 1]})
        cluster.brokers[1].stop()
        admin.wait_isr(topic, 0, [0])
        producer = KafkaProducer(bootstrap_servers=cluster.brokers[0].bootstrap, acks=1, linger_ms=5,
                                 batch_size=64 * 1024, max_request_size=2 << 20)
        payload = b"x" * 1000
        for _ in range(2048):
            producer.send(topic, payload)
        producer.flush(60)
        producer.close()
        leader_bytes = _follower_bytes(cluster.brokers[0], topic)
        assert leader_bytes >= 2_000_000
        admin.client.alter_configs([
            ConfigResource(ConfigResourceType.BROKER, "0", configs={"leader.replication.throttled.rate": "200000"}),
        ])
        admin.client.alter_configs([
            ConfigResource(ConfigResourceType.TOPIC, topic, configs={"leader.replication.throttled.replicas": "0:0"}),
        ])
        time.sleep(2.0)  # the dynamic config change reaches broker 0 through ZooKeeper
        start_broker(cluster.brokers[1])
        time.sleep(4.0)
        held_back = _follower_bytes(cluster.brokers[1], topic)
        # Unthrottled, the follower copies everything at once; throttled, at most about one fetch of
        # replica.fetch.max.bytes (1 MiB) plus 200 KB/s.
        assert held_back < 0.8 * leader_bytes, (held_back, leader_bytes)
        admin.client.alter_configs([
            ConfigResource(ConfigResourceType.TOPIC, topic, configs={"leader.replication.throttled.replicas": ""}),
        ])
        admin.wait_isr(topic, 0, [0, 1], timeout=90)
        wait_until(lambda: _follower_bytes(cluster.brokers[1], topic) >= leader_bytes, 60, "follower caught up")
