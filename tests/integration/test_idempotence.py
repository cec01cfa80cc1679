"""Idempotent produce over a raw socket: a replayed batch gets its original offset and stores nothing,
also after the broker restarts (SIGTERM) and after it crashes (SIGKILL) between the two sends."""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode
from protocol.records import build_batch
from tests.integration.helpers import RawClient, create_topic, unique, wait_until


def _batch(pid: int, epoch: int, seq: int, n: int, tag: str) -> bytes:
    return build_batch([(b"k%d" % i, f"{tag}-{i}".encode()) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def _restart(cluster: Any, topic: str, *, crash: bool) -> None:
    broker = cluster.brokers[0]
    if crash:
        broker.kill()
    else:
        assert broker.stop() == 0, broker.log_text()[-3000:]
    broker.start()
    with RawClient(cluster.bootstrap) as raw:
        wait_until(lambda: raw.leaders(topic) == 1, 30, f"a leader for {topic} after the restart")


def test_replayed_produce_is_deduplicated_across_restarts(cluster_factory: Any) -> None:
    # A short ZooKeeper session: after the crash, the restarted broker waits for its old one to expire.
    cluster = cluster_factory(1, overrides={"zookeeper.session.timeout.ms": "4000"})
    topic = unique("idem")
    create_topic(cluster.bootstrap, topic, partitions=1)
    with RawClient(cluster.bootstrap) as raw:
        pid, epoch = raw.init_producer_id()
        first = _batch(pid, epoch, 0, 5, "first")
        r = raw.produce(topic, 0, first)
        assert (r.error_code, r.base_offset) == (0, 0)
        second = _batch(pid, epoch, 5, 3, "second")
        r = raw.produce(topic, 0, second)
        assert (r.error_code, r.base_offset) == (0, 5)
        assert raw.list_offset(topic, 0) == 8
        # The same batch again (same producer id, epoch, sequence): original offset, nothing stored.
        r = raw.produce(topic, 0, second)
        assert (r.error_code, r.base_offset) == (0, 5)
        r = raw.produce(topic, 0, first)  # an older one of the last five batches, too
        assert (r.error_code, r.base_offset) == (0, 0)
        assert raw.list_offset(topic, 0) == 8
        # A gap in the sequence is refused.
        r = raw.produce(topic, 0, _batch(pid, epoch, 20, 1, "gap"))
        assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    for crash in (False, True):
        _restart(cluster, topic, crash=crash)
        with RawClient(cluster.bootstrap) as raw:
            r = raw.produce(topic, 0, second)
            assert (r.error_code, r.base_offset) == (0, 5), f"replay after {'crash' if crash else 'restart'}: {r}"
            assert raw.list_offset(topic, 0) == 8

    with RawClient(cluster.bootstrap) as raw:
        # The producer carries on with the next sequence after both restarts.
        r = raw.produce(topic, 0, _batch(pid, epoch, 8, 2, "third"))
        assert (r.error_code, r.base_offset) == (0, 8)
        assert raw.list_offset(topic, 0) == 10
        values = [rec.value.decode() for b in raw.fetch_batches(topic, 0) for rec in b.records()]
    assert values == [f"first-{i}" for i in range(5)] + [f"second-{i}" for i in range(3)] + ["third-0", "third-1"]
