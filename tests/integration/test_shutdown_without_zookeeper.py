"""A broker told to stop while ZooKeeper is gone stops, closes its logs cleanly and comes back with its data.

Every ZooKeeper call waits for the session to return (as Kafka's retryRequestsUntilConnected does), so
a shutdown that needs ZooKeeper (controlled shutdown, the controller's resignation, deregistering
watchers) used to wait for ever. The broker gives ZooKeeper one session timeout, then closes its
client so those calls fail, and carries on with the rest of its shutdown.
"""

from __future__ import annotations

import signal
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from clients.devcluster import LocalCluster
from storage.log_manager import CLEAN_SHUTDOWN_FILE
from tests.integration.helpers import create_topic

SESSION_TIMEOUT_MS = 6000


def _wait_for_exit(process: object, limit: float) -> int | None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        rc = process.poll()  # type: ignore[attr-defined]
        if rc is not None:
            return int(rc)
        time.sleep(0.1)
    return None


@pytest.mark.slow
def test_sigterm_with_zookeeper_gone_finishes_and_keeps_the_data() -> None:
    overrides = {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), "num.partitions": "1"}
    with LocalCluster(1, overrides=overrides) as cluster:
        create_topic(cluster.bootstrap, "kept", 1)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        for i in range(100):
            producer.send("kept", b"v%d" % i)
        producer.flush()
        producer.close()

        broker = cluster.brokers[0]
        cluster.zk.stop()
        broker.process.send_signal(signal.SIGTERM)
        # Liveness, not timing: a broker that waits for ZooKeeper for ever never gets here.
        rc = _wait_for_exit(broker.process, 120)
        assert rc == 0, broker.log_text()[-4000:]
        log_text = broker.log_text()
        assert "ZooKeeper is unreachable: shutting down without it" in log_text
        assert "shut down completed" in log_text
        # The logs were closed cleanly: the next start needs no recovery.
        assert list(broker.dir.rglob(CLEAN_SHUTDOWN_FILE))

        cluster.zk.start()
        broker.start()
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=30_000)
        tp = TopicPartition("kept", 0)
        consumer.assign([tp])
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == 100:
                break
        consumer.close()
        assert values == [b"v%d" % i for i in range(100)]
