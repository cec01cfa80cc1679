"""The one client (asyncio wrapper and blocking wrapper) against kafkette and a real Apache Kafka 3.9.1.

Both wrappers run the same scenario against a broker: ApiVersions negotiation, Metadata, CreateTopics,
Produce (acks=all) and Fetch of what was produced. Then the CLI's producer on a kafkette 3-broker
cluster: the partition leader is killed (SIGKILL) in the middle of producing; every record must be
read back exactly once, in order.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest

from clients.connection import CAPS, BrokerConnection
from controller.network_client import ConnectionSettings, KafkaConnection
from protocol.api_versions import SUPPORTED, ApiKey
from protocol.messages import request_type
from protocol.records import NewRecord, build_batch, iter_batches
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.timeout(300)

_CREATE = request_type(ApiKey.CREATE_TOPICS)
_META = request_type(ApiKey.METADATA)
_PRODUCE = request_type(ApiKey.PRODUCE)
_FETCH = request_type(ApiKey.FETCH)


def _address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


# -- the requests of the scenario, built once for both wrappers -------------------------------------

def create_topics_fields(topic: str) -> dict[str, Any]:
    return dict(topics=[_CREATE.CreatableTopic(name=topic, num_partitions=1, replication_factor=1, assignments=[],
                                               configs=[])], timeout_ms=30000, validate_only=False)


def metadata_fields(topic: str | None) -> dict[str, Any]:
    topics = [] if topic is None else [_META.MetadataRequestTopic(name=topic)]
    return dict(topics=topics, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def produce_fields(topic: str, values: list[bytes]) -> dict[str, Any]:
    batch = build_batch([NewRecord(None, v) for v in values])
    return dict(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[_PRODUCE.TopicProduceData(
        name=topic, partition_data=[_PRODUCE.PartitionProduceData(index=0, records=batch)])])


def fetch_fields(topic: str, offset: int) -> dict[str, Any]:
    return dict(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[_FETCH.FetchTopic(
                    topic=topic, partitions=[_FETCH.FetchPartition(
                        partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                        log_start_offset=-1, partition_max_bytes=1 << 20)])])


def values_in(fetch_response: Any) -> list[bytes]:
    (t,) = fetch_response.responses
    (p,) = t.partitions
    assert p.error_code == 0
    return [bytes(r.value) for b in iter_batches(bytes(p.records or b"")) for r in b.records()]


def expected_version(versions: dict[int, tuple[int, int]], api_key: int) -> int:
    return min(SUPPORTED[api_key][1], versions[api_key][1], CAPS.get(api_key, 1 << 15))  # type: ignore[index]


def check_negotiation(versions: dict[int, tuple[int, int]], chosen: dict[int, int]) -> None:
    assert versions, "ApiVersions answered no APIs"
    for key, v in chosen.items():
        assert v == expected_version(versions, key), (key, v, versions[key])
        assert versions[key][0] <= v <= versions[key][1]


# -- the scenario through each wrapper ---------------------------------------------------------------

def run_blocking(bootstrap: str) -> None:
    topic = f"nc-blocking-{uuid.uuid4().hex[:8]}"
    host, port = _address(bootstrap)
    conn = BrokerConnection(host, port, client_id="nc-blocking", timeout=30.0)
    try:
        keys = (ApiKey.METADATA, ApiKey.CREATE_TOPICS, ApiKey.PRODUCE, ApiKey.FETCH)
        check_negotiation(conn.versions, {k: conn.version(k) for k in keys})
        md = conn.call(ApiKey.METADATA, **metadata_fields(None))
        assert md.controller_id >= 0 and md.brokers
        created = conn.call(ApiKey.CREATE_TOPICS, **create_topics_fields(topic))
        assert [(t.name, t.error_code) for t in created.topics] == [(topic, 0)]
        wait_until(lambda: (lambda m: m.topics[0].error_code == 0 and m.topics[0].partitions
                            and m.topics[0].partitions[0].leader_id >= 0)(
            conn.call(ApiKey.METADATA, **metadata_fields(topic))), 60, "a leader for the new topic")
        values = [f"blocking-{i}".encode() for i in range(20)]
        wait_until(lambda: (lambda r: r.responses[0].partition_responses[0].error_code == 0)(
            conn.call(ApiKey.PRODUCE, **produce_fields(topic, values))), 60, "produce accepted")
        got = wait_until(lambda: values_in(conn.call(ApiKey.FETCH, **fetch_fields(topic, 0))), 30, "fetched records")
        assert got == values
    finally:
        conn.close()


async def run_async(bootstrap: str) -> None:
    topic = f"nc-async-{uuid.uuid4().hex[:8]}"
    host, port = _address(bootstrap)
    conn = await KafkaConnection.open(host, port, ConnectionSettings(client_id="nc-async",
                                                                      version_caps=tuple(CAPS.items())))
    try:
        keys = (ApiKey.METADATA, ApiKey.CREATE_TOPICS, ApiKey.PRODUCE, ApiKey.FETCH)
        check_negotiation(conn.sm.broker_versions, {k: conn.version(k) for k in keys})
        # Several requests pipelined on the connection, answered in order.
        mds = await asyncio.gather(*(conn.request(ApiKey.METADATA, _META(**metadata_fields(None)))
                                     for _ in range(4)))
        assert all(m.controller_id >= 0 and m.brokers for m in mds)
        created = await conn.request(ApiKey.CREATE_TOPICS, _CREATE(**create_topics_fields(topic)))
        assert [(t.name, t.error_code) for t in created.topics] == [(topic, 0)]
        for _ in range(600):
            m = await conn.request(ApiKey.METADATA, _META(**metadata_fields(topic)))
            if m.topics[0].error_code == 0 and m.topics[0].partitions and m.topics[0].partitions[0].leader_id >= 0:
                break
            await asyncio.sleep(0.1)
        values = [f"async-{i}".encode() for i in range(20)]
        for _ in range(600):
            r = await conn.request(ApiKey.PRODUCE, _PRODUCE(**produce_fields(topic, values)))
            if r.responses[0].partition_responses[0].error_code == 0:
                break
            await asyncio.sleep(0.1)
        assert r.responses[0].partition_responses[0].error_code == 0
        got: list[bytes] = []
        for _ in range(300):
            got = values_in(await conn.request(ApiKey.FETCH, _FETCH(**fetch_fields(topic, 0))))
            if got:
                break
        assert got == values
    finally:
        conn.close()


# -- against kafkette ---------------------------------------------------------------------------------

def test_blocking_client_against_kafkette(kafka_cluster: Any) -> None:
    run_blocking(kafka_cluster.bootstrap)


def test_asyncio_client_against_kafkette(kafka_cluster: Any) -> None:
    asyncio.run(run_async(kafka_cluster.bootstrap))


# -- against Apache Kafka 3.9.1 -----------------------------------------------------------------------

@pytest.mark.slow
def test_blocking_client_against_apache_kafka(apache_kafka: Any) -> None:
    run_blocking(apache_kafka.bootstrap)


@pytest.mark.slow
def test_asyncio_client_against_apache_kafka(apache_kafka: Any) -> None:
    asyncio.run(run_async(apache_kafka.bootstrap))


# -- the CLI producer across a leader change ----------------------------------------------------------

@pytest.mark.slow
def test_cli_producer_retries_across_a_leader_kill(cluster_factory: Any) -> None:
    from kafka import KafkaConsumer, TopicPartition

    from clients.admin import WireClient
    from clients.producer import Producer
    from tests.cluster.helpers import overrides

    cluster = cluster_factory(3, overrides=overrides())
    topic = f"nc-failover-{uuid.uuid4().hex[:8]}"
    total, per_flush = 3000, 25
    with WireClient(cluster.bootstrap) as admin:
        admin.create_topic(topic, 1, 3, configs={"min.insync.replicas": "2"})
        info = wait_until(lambda: (lambda p: p if p is not None and p.leader >= 0 else None)(
            admin.topics([topic])[topic].partitions.get(0)), 60, "a leader")
        leader = info.leader
        wait_until(lambda: len(admin.topics([topic])[topic].partitions[0].isr) == 3, 60, "a full ISR")

    client = WireClient(cluster.bootstrap, config={"request.timeout.ms": "10000"})
    producer = Producer(client, acks=-1, batch_size=1 << 30, linger_ms=1 << 30, retry_backoff_ms=100)
    assert producer.idempotent
    failure: list[BaseException] = []

    def produce() -> None:
        try:
            for i in range(total):
                producer.send(topic, str(i).encode(), partition=0)
                if (i + 1) % per_flush == 0:
                    producer.flush()
            producer.flush()
        except BaseException as e:  # reported by the test thread
            failure.append(e)

    t = threading.Thread(target=produce, name="cli-producer")
    t.start()
    try:
        wait_until(lambda: producer.sent >= total // 3 or failure, 120, "a third of the records acknowledged")
        victim = next(b for b in cluster.brokers if b.broker_id == leader)
        victim.kill()  # SIGKILL, mid-produce
        t.join(240)
    finally:
        t.join(240)
        client.close()
    assert not t.is_alive(), "the producer did not finish"
    assert not failure, f"the producer failed: {failure[0]!r}"
    assert producer.sent == total
    assert producer.retried_batches > 0, "the leader kill never made the producer retry"

    survivors = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != leader)
    consumer = KafkaConsumer(bootstrap_servers=survivors, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=15000, request_timeout_ms=20000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[int] = []
        while len(got) < total:
            batch = consumer.poll(timeout_ms=2000)
            if not batch:
                end = consumer.end_offsets([tp])[tp]
                if consumer.position(tp) >= end:
                    break
                continue
            got += [int(r.value) for r in batch.get(tp, [])]
    finally:
        consumer.close()
    assert got == list(range(total)), (f"{len(got)} records read; duplicates: {len(got) - len(set(got))}, "
                                       f"missing: {sorted(set(range(total)) - set(got))[:10]}")
