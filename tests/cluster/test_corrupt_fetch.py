"""A follower never stores a batch whose CRC is wrong: it tries that partition again, the others go on.

Kafka's log checks every batch's CRC on every append, a follower's included (UnifiedLog's
analyzeAndValidateRecords), and its fetcher answers a CorruptRecordException by logging "Found invalid
messages during fetch" and fetching the partition again after a backoff, without holding back the
other partitions. Here a batch is corrupted in the leader's segment file, as a bad disk would, while
the follower is down; the follower then comes back and catches up.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from protocol.records import build_batch, iter_batches
from tests.cluster.helpers import (
    Admin,
    cluster_options,
    produce_once_hosted,
    segment_bytes,
    start_broker,
    unique,
)
from tests.integration.helpers import wait_until


def _batches(data: bytes) -> list[bytes]:
    return [bytes(b.buf[b.pos:b.pos + b.size]) for b in iter_batches(memoryview(data))]


def test_follower_refuses_a_corrupt_batch_and_goes_on_with_the_other_partitions(
        cluster_factory: Callable[..., Any]) -> None:
    cluster = cluster_factory(2, **cluster_options())
    leader, follower = cluster.brokers
    topic = unique("corrupt")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, configs={"min.insync.replicas": "1"},
                           assignment={0: [leader.broker_id, follower.broker_id],
                                       1: [leader.broker_id, follower.broker_id]})
        follower.stop()
        admin.wait_isr(topic, 0, [leader.broker_id])
        admin.wait_isr(topic, 1, [leader.broker_id])
        for partition in (0, 1):
            for n in range(3):
                r = produce_once_hosted(leader.bootstrap, topic, partition,
                                        build_batch([(b"k", b"value %d-%d" % (partition, n))] * 5), acks=1)
                assert r.error_code == 0, r

        # The second batch of partition 0 goes bad on the leader's disk: one byte of a value flipped,
        # the stored CRC left as it was.
        good = segment_bytes(leader, topic, 0)
        batches = _batches(good)
        assert len(batches) == 3
        at = len(batches[0]) + len(batches[1]) - 3  # inside the second batch's last record
        log_file = sorted((Path(leader.dir) / "data" / f"{topic}-0").glob("*.log"))[0]
        with open(log_file, "r+b") as f:
            f.seek(at)
            f.write(bytes([good[at] ^ 0x01]))

        start_broker(follower)
        admin.wait_for_broker(follower.broker_id)
        # Partition 1 is caught up and back in the ISR, while partition 0 stays out of it.
        admin.wait_isr(topic, 1, [leader.broker_id, follower.broker_id], timeout=90)
        wait_until(lambda: "Found invalid messages during fetch for partition " + f"{topic}-0" in follower.log_text(),
                   60, "the follower's log to report the corrupt batch")
        assert segment_bytes(follower, topic, 1) == segment_bytes(leader, topic, 1)
        # At most the batch before the corrupt one was stored (none when one fetch brought both: Kafka
        # refuses the whole append); the follower keeps asking from there.
        stored = _batches(segment_bytes(follower, topic, 0))
        assert len(stored) < 2 and stored == batches[:len(stored)], [b[:70].hex() for b in stored]
        assert admin.describe(topic)[0]["isr"] == [leader.broker_id]
