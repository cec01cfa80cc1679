"""Producer ids idle for ``producer.id.expiration.ms`` leave the partitions' producer state, checked every
``producer.id.expiration.check.interval.ms`` as Kafka's broker does; an idle producer's state (and any
verification that never led to an append) is not kept for good."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clients.admin import WireClient
from clients.devcluster import LocalCluster
from protocol.api_versions import ApiKey
from protocol.messages import request_type
from protocol.records import NewRecord, build_batch
from tests.integration.helpers import RawClient, wait_until

_DP = request_type(ApiKey.DESCRIBE_PRODUCERS)


@pytest.fixture(scope="module")
def short_expiry() -> Iterator[LocalCluster]:
    with LocalCluster(1, overrides={"producer.id.expiration.ms": "2000",
                                    "producer.id.expiration.check.interval.ms": "1000"}) as c:
        yield c


def producer_ids(raw: RawClient, topic: str) -> list[int]:
    r = raw.request(ApiKey.DESCRIBE_PRODUCERS, 0, topics=[_DP.TopicRequest(name=topic, partition_indexes=[0])])
    p = r.topics[0].partitions[0]
    assert p.error_code == 0, p
    return [s.producer_id for s in p.active_producers]


def test_an_idle_producer_expires(short_expiry: LocalCluster) -> None:
    WireClient(short_expiry.bootstrap, timeout=10.0).create_topic("expiring", 1, 1)
    with RawClient(short_expiry.bootstrap) as raw:
        wait_until(lambda: raw.leaders("expiring") == 1, 30, "a leader for expiring-0")
        pid, epoch = raw.init_producer_id()
        batch = build_batch([NewRecord(None, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        assert raw.produce("expiring", 0, batch).error_code == 0
        assert producer_ids(raw, "expiring") == [pid]
        wait_until(lambda: producer_ids(raw, "expiring") == [], 30, f"producer {pid} to expire")
        # The record stays; only the producer's state went. A new sequence 0 from the same id starts over.
        again = build_batch([NewRecord(None, b"w")], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        r = raw.produce("expiring", 0, again)
        assert r.error_code == 0 and r.base_offset == 1, r
