"""A restarted broker does not answer Metadata from its empty cache.

Until the controller's first UpdateMetadata reaches it, a broker knows no broker and no topic. Kafka's
ZooKeeper-mode broker answers from that cache anyway (no brokers, UNKNOWN_TOPIC_OR_PARTITION), and a
librdkafka producer that has known the topic for longer than topic.metadata.propagation.max.ms then
fails its produce() calls with "Unknown topic". Here the request waits for the first UpdateMetadata.

The window is made wide on purpose: the controller is frozen (SIGSTOP) while the broker restarts, so
nothing can initialize the broker's cache until the test thaws it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from clients.devcluster import wait_for_port
from protocol.api_versions import ApiKey
from tests.cluster.helpers import Admin, RawClient, ZkView, unique, wait_until
from tests.integration.helpers import _metadata_topic

HOLDING = "holding Metadata requests until the controller's first UpdateMetadata"


def test_metadata_waits_for_the_first_update_metadata_after_a_restart(cluster3: Callable[..., Any]) -> None:
    # A session long enough that the frozen controller keeps its role while the broker restarts: a new
    # controller would initialize the broker's cache before the test asks.
    cluster = cluster3(zookeeper_session_timeout_ms="30000")
    topic = unique("restart-md")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, 3, 3)
        wait_until(lambda: (lambda d: len(d) == 3 and all(p["leader"] >= 0 for p in d.values()))(
            admin.describe(topic)), 30, f"{topic} online")
    with ZkView(cluster) as zk:
        c = wait_until(lambda: (lambda cid: None if cid is None else (cid,))(zk.controller()), 30, "a controller")[0]
    b = next(i for i in range(3) if i != c)
    controller, broker = cluster.brokers[c], cluster.brokers[b]
    broker.stop()
    mark = len(broker.log_text())
    answers: list[Any] = []
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            with RawClient(broker.bootstrap, timeout=60) as raw:
                answers.append(raw.request(ApiKey.METADATA, 12, topics=[_metadata_topic(topic)],
                                           allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False))
        except BaseException as e:  # reported below
            errors.append(e)

    asker = threading.Thread(target=ask, name="metadata-after-restart", daemon=True)
    controller.pause()
    try:
        broker.start(wait=False)
        assert broker.process is not None
        wait_for_port(broker.host, broker.port, 60, broker.process)
        asker.start()
        # The request is parked: nothing can have initialized the cache while the controller is frozen.
        wait_until(lambda: answers or errors or HOLDING in broker.log_text()[mark:], 30,
                   "the restarted broker answering or holding Metadata")
        # A premise, not the behaviour under test: had the controller been resumed from outside, it
        # would have sent its UpdateMetadata and the answer below would prove nothing.
        assert controller.paused, "the frozen controller was resumed from outside the test"
        assert not answers and not errors, f"answered before any UpdateMetadata: {answers or errors}"
    finally:
        controller.resume()
    asker.join(60)
    assert not asker.is_alive() and not errors, errors
    md = answers[0]
    assert sorted(x.node_id for x in md.brokers) == [0, 1, 2]
    (t,) = md.topics
    assert t.name == topic and t.error_code == 0
    assert sorted(p.partition_index for p in t.partitions) == [0, 1, 2]
    assert "answering Metadata from an empty cache" not in broker.log_text()[mark:]
    broker.wait_ready(60)
