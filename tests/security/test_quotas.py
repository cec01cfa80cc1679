"""Client quotas on real brokers: throttle times in responses, muted connections, data held back.

A two-broker cluster with a real ZooKeeper; quotas are set with AlterClientQuotas (through one broker
while clients talk to the other, so the change travels through ZooKeeper's change notifications) and
requests go over plain sockets with kafkette's own codec, so every response field can be read.

The brokers keep two quota windows of one second (``quota.window.num=2``): a burst is then measured
over at least one second, and throttle times stay short. Time appears in these tests only as a lower
bound: a muted connection's next response cannot come before the throttle time has passed, and a
slow machine can only make that wait longer.

The 20-second measurements against stock clients are in ``test_quotas_rates.py`` (``make test-slow``).
"""

from __future__ import annotations

import math
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type
from protocol.records import build_batch
from tests.integration.helpers import RawClient, controller_bootstrap, wait_until

QUOTA = 102_400  # bytes/s
WINDOW_OVERRIDES = {"quota.window.num": "2", "quota.window.size.seconds": "1"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from clients.devcluster import LocalCluster

    with LocalCluster(2, overrides=dict(WINDOW_OVERRIDES)) as c:
        yield c


# -- helpers ---------------------------------------------------------------------------------------


def alter_quotas(bootstrap: str, entity: dict[str, str | None], **values: float | None) -> None:
    """AlterClientQuotas for one entity (None as a name: the default entity; None as a value: remove)."""
    mt = request_type(ApiKey.ALTER_CLIENT_QUOTAS)
    with RawClient(bootstrap, client_id=unique("quota-admin")) as raw:
        r = raw.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, validate_only=False, entries=[mt.EntryData(
            entity=[mt.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
            ops=[mt.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in values.items()])])
    assert r.entries[0].error_code == 0, r


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication: int = 2, version: int = 7,
                 client_id: str = "quota-admin") -> Any:
    mt = request_type(ApiKey.CREATE_TOPICS)
    with RawClient(controller_bootstrap(bootstrap), client_id=client_id) as raw:
        return raw.request(ApiKey.CREATE_TOPICS, version, timeout_ms=15000, validate_only=False, topics=[
            mt.CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication,
                              assignments=[], configs=[])])


def leader_of(cluster: Any, topic: str) -> Any:
    """The broker process leading partition 0 of ``topic`` (waiting for it to have one)."""
    with RawClient(cluster.bootstrap) as raw:
        wait_until(lambda: raw.leaders(topic) == 1, 15, f"a leader for {topic}")
        md = raw.request(ApiKey.METADATA, 12, topics=[request_type(ApiKey.METADATA).MetadataRequestTopic(
            name=topic, topic_id=None)], allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    leader_id = md.topics[0].partitions[0].leader_id
    leader = next(b for b in cluster.brokers if b.broker_id == leader_id)
    # The leader itself may learn of its leadership a moment after the metadata says so.
    with RawClient(leader.bootstrap) as raw:
        wait_until(lambda: raw.leads(topic), 15, f"broker {leader_id} to lead {topic}")
    return leader


def other_broker(cluster: Any, broker: Any) -> Any:
    return next(b for b in cluster.brokers if b.broker_id != broker.broker_id)


def batch(size: int, records: int = 1) -> bytes:
    value = b"q" * (size // records)
    return build_batch([(None, value)] * records)


def produce(raw: RawClient, topic: str, data: bytes, acks: int = 1) -> Any:
    """Produce v9 to partition 0; returns the whole response (throttle time included)."""
    mt = request_type(ApiKey.PRODUCE)
    r = raw.request(ApiKey.PRODUCE, 9, transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
        mt.TopicProduceData(name=topic, partition_data=[mt.PartitionProduceData(index=0, records=data)])])
    assert r.responses[0].partition_responses[0].error_code == 0, r
    return r


def produce_until_throttled(raw: RawClient, topic: str, data: bytes, timeout: float = 30.0) -> tuple[float, Any]:
    """Produce ``data`` every half second until a response carries a throttle time (the quota may still
    be on its way through ZooKeeper); returns when that request was sent, and its response.

    Paced, because once any quota is in use the broker measures every client (as Kafka does): bytes
    sent before the quota arrived count against it, and an unpaced loop would earn a throttle of
    minutes."""
    deadline = time.monotonic() + timeout
    while True:
        sent = time.monotonic()
        response = produce(raw, topic, data)
        if response.throttle_time_ms > 0:
            return sent, response
        assert time.monotonic() < deadline, "no produce was throttled"
        time.sleep(0.5)


def fetch(raw: RawClient, topic: str, offset: int, max_bytes: int = 8 << 20) -> Any:
    mt = request_type(ApiKey.FETCH)
    return raw.request(ApiKey.FETCH, 12, replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=max_bytes,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[mt.FetchTopic(
                           topic=topic, partitions=[mt.FetchPartition(
                               partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                               log_start_offset=-1, partition_max_bytes=max_bytes)])],
                       forgotten_topics_data=[], rack_id="")


def metadata(raw: RawClient) -> Any:
    return raw.request(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)


def scrape(broker: Any) -> str:
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as resp:
        return str(resp.read().decode())


def sample(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        got = dict(kv.split("=", 1) for kv in line[len(name) + 1:line.index("}")].split(","))
        if all(got.get(k) == f'"{v}"' for k, v in labels.items()) and set(got) == set(labels):
            return float(line.rsplit(" ", 1)[1])
    return None


# -- tests -----------------------------------------------------------------------------------------


def test_produce_over_quota_is_throttled_and_muted_others_are_not(cluster: Any) -> None:
    topic, slow, free = unique("pq"), unique("slow-producer"), unique("free-producer")
    assert create_topic(cluster.bootstrap, topic).topics[0].error_code == 0
    leader = leader_of(cluster, topic)
    # Set through the other broker: the leader learns it from ZooKeeper.
    alter_quotas(other_broker(cluster, leader).bootstrap, {"client-id": slow}, producer_byte_rate=QUOTA)
    data = batch(3 * QUOTA // 2)  # 150 KB at once: 1.5 times the quota over the one-second minimum span
    with RawClient(leader.bootstrap, client_id=slow, timeout=60) as raw, \
            RawClient(leader.bootstrap, client_id=free) as other:
        sent, response = produce_until_throttled(raw, topic, data)
        # The muted connection reads nothing before the throttle time is up: the response to the
        # next (cheap) request comes no earlier than that after the throttled request was sent.
        metadata(raw)
        assert time.monotonic() - sent >= response.throttle_time_ms / 1000.0
        # Another client on the same broker, same moment, same amount: no quota, no throttle.
        assert produce(other, topic, data).throttle_time_ms == 0
    # Kafka's quota metrics: the throttled client's byte rate and throttle time.
    text = scrape(leader)
    rate = sample(text, "kafka_server_quota_byte_rate", resource="Produce", clientId=slow)
    assert rate is not None and rate > 0
    throttle = sample(text, "kafka_server_quota_throttle_time", resource="Produce", clientId=slow)
    assert throttle is not None and throttle > 0
    # Once a quota is in use every client is measured (as in Kafka); the free one was never throttled.
    free_throttle = sample(text, "kafka_server_quota_throttle_time", resource="Produce", clientId=free)
    assert free_throttle is not None and math.isnan(free_throttle)


def test_quota_changes_apply_without_restart(cluster: Any) -> None:
    topic, client = unique("pchange"), unique("changing")
    assert create_topic(cluster.bootstrap, topic).topics[0].error_code == 0
    leader = leader_of(cluster, topic)
    data = batch(3 * QUOTA // 2)
    with RawClient(leader.bootstrap, client_id=client, timeout=60) as raw:
        assert produce(raw, topic, data).throttle_time_ms == 0
        alter_quotas(other_broker(cluster, leader).bootstrap, {"client-id": client}, producer_byte_rate=QUOTA)
        produce_until_throttled(raw, topic, data)
        # Removed: the next request is measured against no quota at all.
        alter_quotas(other_broker(cluster, leader).bootstrap, {"client-id": client}, producer_byte_rate=None)
        wait_until(lambda: produce(raw, topic, data).throttle_time_ms == 0, 60, "the quota to be removed", interval=0.5)
        assert all(produce(raw, topic, data).throttle_time_ms == 0 for _ in range(3))


def test_throttled_fetch_carries_no_data(cluster: Any) -> None:
    topic, consumer = unique("fq"), unique("slow-consumer")
    assert create_topic(cluster.bootstrap, topic).topics[0].error_code == 0
    leader = leader_of(cluster, topic)
    with RawClient(leader.bootstrap, client_id=unique("filler")) as raw:
        for _ in range(8):
            produce(raw, topic, batch(QUOTA // 2, records=8))
    alter_quotas(leader.bootstrap, {"client-id": consumer}, consumer_byte_rate=QUOTA)
    throttled = None
    offset = 0
    with RawClient(leader.bootstrap, client_id=consumer) as raw:
        wait_until(lambda: fetch(raw, topic, 0).throttle_time_ms > 0 or None, 30, "the quota to throttle a fetch")
        for _ in range(50):
            r = fetch(raw, topic, offset)
            if r.throttle_time_ms > 0:
                throttled = r
                break
            part = r.responses[0].partitions[0]
            # What a consumer may fetch at once is capped at the quota over the window (one second):
            # one 50 KB batch here, never the 8 MB asked for.
            assert len(part.records or b"") <= QUOTA
            offset = part.high_watermark if not part.records else offset + 8
    assert throttled is not None, "no fetch was throttled"
    assert throttled.responses == [] and throttled.error_code == 0 and throttled.session_id == 0


def test_request_percentage_throttles_a_client_hammering_metadata(cluster: Any) -> None:
    hammer, calm = unique("hammer"), unique("calm")
    # 0.01% of the event loop: 0.1 ms of handler time a second.
    alter_quotas(cluster.brokers[0].bootstrap, {"client-id": hammer}, request_percentage=0.01)
    with RawClient(cluster.brokers[1].bootstrap, client_id=hammer) as raw:
        r = wait_until(lambda: (m := metadata(raw)).throttle_time_ms > 0 and m, 30, "a throttled Metadata")
        # Request throttles are bounded by one quota window.
        assert 0 < r.throttle_time_ms <= 1000
    with RawClient(cluster.brokers[1].bootstrap, client_id=calm) as raw:
        assert all(metadata(raw).throttle_time_ms == 0 for _ in range(20))
    text = scrape(cluster.brokers[1])
    assert (sample(text, "kafka_server_quota_request_time", resource="Request", clientId=hammer) or 0) > 0


def test_controller_mutation_quota_strict_and_permissive(cluster: Any) -> None:
    admin = unique("topic-maker")
    # One partition a second, with a burst of controller.quota.window.num (11) windows of one second.
    alter_quotas(cluster.bootstrap, {"client-id": admin}, controller_mutation_rate=1.0)
    permissive = unique("m-permissive")

    def create_20() -> Any:
        r = create_topic(cluster.bootstrap, unique("m"), partitions=20, replication=1, client_id=admin)
        return r if r.topics[0].error_code != 0 else None

    # Once the quota is in place, a first request finds tokens left and is accepted, taking the
    # bucket below zero; CreateTopics v6+ is strict, so the next one is refused, with the time until
    # the bucket is back at zero.
    r = wait_until(create_20, 30, "a refused CreateTopics")
    t = r.topics[0]
    refused = t.name
    assert (t.error_code, t.error_message) == (ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                               "The throttling quota has been exceeded.")
    assert r.throttle_time_ms > 0
    # CreateTopics v5: permissive. Created, and the response is throttled instead.
    r = create_topic(cluster.bootstrap, permissive, partitions=1, replication=1, version=5, client_id=admin)
    assert r.topics[0].error_code == 0 and r.throttle_time_ms > 0
    with RawClient(cluster.bootstrap) as raw:
        assert raw.leaders(refused) == 0
        wait_until(lambda: raw.leaders(permissive) == 1, 15, "the permissively created topic")
