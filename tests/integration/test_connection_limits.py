"""Bounded resources per client, over real sockets against real broker processes.

max.connections.per.ip (and its overrides, changed at run time through IncrementalAlterConfigs and the
CLI), max.connections, the connection creation rates of KIP-612 (max.connection.creation.rate and IP
connection_creation_rate quotas, set with Kafka's own kafka-configs), connections.max.idle.ms,
socket.request.max.bytes and queued.max.requests.
Test clients connect from 127.0.0.2 (any 127/8 address is loopback on Linux), so the per-address
counts are ours alone: the broker's own controller and replica connections come from 127.0.0.1.
"""

from __future__ import annotations

import socket
import struct
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from protocol.api_versions import ApiKey
from protocol.messages import decode_response, encode_request, new_request, request_type
from tests.benchmark_clients_support import java_tool
from tests.conftest import attach_cluster, shared_cluster
from tests.integration.helpers import RawClient, create_topic, unique, wait_until
from tests.ops.helpers import fails, ok

CLIENT_IP = "127.0.0.2"


class Client(RawClient):
    """RawClient from CLIENT_IP."""

    def __init__(self, bootstrap: str, timeout: float = 15.0) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout, source_address=(CLIENT_IP, 0))
        self.client_id = "limits"
        self._cid = 0

    def api_versions(self) -> None:
        r = self.request(ApiKey.API_VERSIONS, 3, client_software_name="limits", client_software_version="1")
        assert r.error_code == 0, r


def served(c: Client) -> bool:
    """The connection answers a request; False when the broker closed it (EOF or reset)."""
    try:
        c.api_versions()
        return True
    except TimeoutError:
        raise
    except (ConnectionError, OSError):
        return False


def metric(url: str | None, sample: str) -> float:
    """One sample of the broker's Prometheus endpoint, by its full name and labels."""
    assert url is not None
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{sample} not in the metrics")


def alter_broker_config(bootstrap: str, broker: str, configs: dict[str, str]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="limits-admin")
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, broker, configs=configs)], incremental=True)
    finally:
        admin.close()


def fill_until_the_acceptor_blocks(bootstrap: str, attempts: int, clients: list[Client]) -> Client | None:
    """Open connections one by one into ``clients`` until one gets no answer: the kernel accepted it but
    the broker's acceptor did not (it waits in the backlog). That one, or None if all were served."""
    for _ in range(attempts):
        c = Client(bootstrap, timeout=3.0)
        try:
            c.api_versions()
            clients.append(c)
        except TimeoutError:
            return c
    return None


def served_once_one_closes(clients: list[Client], blocked: Client) -> None:
    """Close the oldest served connection; the blocked one is then accepted and answers the request it
    sent. It joins ``clients``."""
    clients.pop(0).close()
    blocked.sock.settimeout(30)
    (size,) = struct.unpack(">i", blocked._recv_exact(4))
    blocked._recv_exact(size)
    clients.append(blocked)


def connect_all_served(bootstrap: str, n: int, clients: list[Client], what: str) -> None:
    """Open ``n`` connections into ``clients``, each served however long its acceptor held it."""
    for _ in range(n):
        c = Client(bootstrap)
        clients.append(c)
        assert served(c), f"connection {len(clients)} refused under {what}"


# ------------------------------------------------------------------------------------------------
# Connection counts


def test_max_connections_per_ip_and_dynamic_overrides(cluster_factory: Callable[..., Any]) -> None:
    cluster = cluster_factory(1, overrides={"max.connections.per.ip": "50"})
    b = cluster.brokers[0]
    bootstrap = b.bootstrap
    refused_metric = 'kafka_server_socket_server_metrics_connections_refused_total{listener="PLAINTEXT",' \
                     'reason="max.connections.per.ip"}'
    clients: list[Client] = []
    try:
        for _ in range(50):
            c = Client(bootstrap)
            clients.append(c)
            c.api_versions()
        extra = Client(bootstrap)
        assert not served(extra), "the 51st connection from one address was served"
        extra.close()
        for c in clients:  # the first 50 keep working
            c.api_versions()
        assert metric(b.metrics_url, refused_metric) >= 1

        # Per broker, through IncrementalAlterConfigs (kafka-python): an override for our address.
        alter_broker_config(bootstrap, "0", {"max.connections.per.ip.overrides": f"{CLIENT_IP}:55"})

        def one_more() -> bool:
            c = Client(bootstrap)
            if served(c):
                clients.append(c)
                return True
            c.close()
            return False

        wait_until(one_more, 30, "the override to let a 51st connection in")
        while len(clients) < 55:
            assert one_more(), f"connection {len(clients) + 1} refused under an override of 55"
        extra = Client(bootstrap)
        assert not served(extra), "the 56th connection was served under an override of 55"
        extra.close()

        # The cluster-wide default, through the CLI: a lower per-address limit applies to new
        # connections (open ones stay, as in Kafka); removing the override makes it ours.
        ok("configs", "--alter", "--bootstrap-server", bootstrap, "--entity-type", "brokers", "--entity-default",
           "--add-config", "max.connections.per.ip=40")
        ok("configs", "--alter", "--bootstrap-server", bootstrap, "--entity-type", "brokers", "--entity-name", "0",
           "--delete-config", "max.connections.per.ip.overrides")
        for c in clients[40:]:
            c.close()
        del clients[40:]

        def refused_at_40() -> bool:
            c = Client(bootstrap)
            try:
                return not served(c)
            finally:
                c.close()

        wait_until(refused_at_40, 30, "the cluster-wide max.connections.per.ip=40 to refuse the 41st")
        for c in clients:
            c.api_versions()
        # Kafka closes one refused connection after another; each counts, none is logged per connection.
        assert metric(b.metrics_url, refused_metric) >= 3
        log = b.log_text()
        assert log.count("Rejected connection from 127.0.0.2") <= 3, "a log line per refused connection"
        # A malformed override is refused by AlterConfigs, as Kafka refuses it.
        fails("configs", "--alter", "--bootstrap-server", bootstrap, "--entity-type", "brokers", "--entity-name", "0",
              "--add-config", f"max.connections.per.ip.overrides={CLIENT_IP}", rc=1, match="INVALID_CONFIG")
    finally:
        for c in clients:
            c.close()


def test_max_connections_blocks_the_acceptor_until_one_closes(cluster_factory: Callable[..., Any]) -> None:
    cluster = cluster_factory(1)
    b = cluster.brokers[0]
    gauge = 'kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"}'
    open_now = int(metric(b.metrics_url, gauge))
    limit = open_now + 4
    alter_broker_config(b.bootstrap, "0", {"max.connections": str(limit)})
    # The admin client's connection is gone again; the broker's own ones remain.
    wait_until(lambda: metric(b.metrics_url, gauge) <= open_now, 30, "the admin connection to close")
    clients: list[Client] = []
    try:
        blocked = fill_until_the_acceptor_blocks(b.bootstrap, 8, clients)
        assert blocked is not None, f"{len(clients)} connections served with max.connections={limit}"
        assert len(clients) <= 4
        assert metric(b.metrics_url, 'kafka_network_acceptor_blocked_total{listener="PLAINTEXT"}') >= 1
        served_once_one_closes(clients, blocked)
    finally:
        for c in clients:
            c.close()
        alter_broker_config(b.bootstrap, "0", {"max.connections": "2147483647"})


# ------------------------------------------------------------------------------------------------
# Connection creation rates (KIP-612)


def kafka_configs(bootstrap: str, *args: str) -> str:
    """Apache Kafka 3.9.1's kafka-configs.sh (kafka.admin.ConfigCommand), from its jars."""
    return java_tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, *args)


def test_ip_connection_creation_rate_closes_connections_past_it_unserved(cluster_factory: Callable[..., Any]) -> None:
    cluster = cluster_factory(1)
    b = cluster.brokers[0]
    kafka_configs(b.bootstrap, "--alter", "--entity-type", "ips", "--entity-name", CLIENT_IP,
                  "--add-config", "connection_creation_rate=1")
    assert "connection_creation_rate=1" in kafka_configs(b.bootstrap, "--describe", "--entity-type", "ips",
                                                          "--entity-name", CLIENT_IP)
    wait_until(lambda: f"max connection rate override for {CLIENT_IP} now 1" in b.log_text(), 30,
               "the broker to apply the IP quota")
    # One a second, measured over at least ten one-second samples: a burst of ten fits, the eleventh
    # does not. It is held unread, then closed, and so are the next ones while the burst is in the window.
    results = []
    for _ in range(14):
        c = Client(b.bootstrap)
        results.append(served(c))
        c.close()
    assert results[:10] == [True] * 10, results
    assert not all(results[10:]), f"no connection past the rate was throttled: {results}"
    with RawClient(b.bootstrap) as other:  # 127.0.0.1 has no quota
        other.request(ApiKey.API_VERSIONS, 3, client_software_name="limits", client_software_version="1")
    throttled = 'kafka_network_acceptor_throttled_total{listener="PLAINTEXT",quota="connection_creation_rate"}'
    assert metric(b.metrics_url, throttled) >= 1
    # Removed, the address connects again at once.
    kafka_configs(b.bootstrap, "--alter", "--entity-type", "ips", "--entity-name", CLIENT_IP,
                  "--delete-config", "connection_creation_rate")
    wait_until(lambda: f"max connection rate override for {CLIENT_IP} removed" in b.log_text(), 30,
               "the broker to drop the IP quota")
    clients = [Client(b.bootstrap) for _ in range(20)]
    try:
        assert all(served(c) for c in clients)
    finally:
        for c in clients:
            c.close()


def test_max_connection_creation_rate_holds_accepts_but_serves_every_connection(
        cluster_factory: Callable[..., Any]) -> None:
    cluster = cluster_factory(1)
    b = cluster.brokers[0]
    kafka_configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
                  "--add-config", "max.connection.creation.rate=2")
    wait_until(lambda: "max connection creation rate now 2 a second" in b.log_text(), 30,
               "the broker to apply max.connection.creation.rate")
    # Twenty in the first ten-second window fit (with the tool's own connections, a few less); past
    # them the acceptor holds each new connection until the rate is back at 2, then serves it.
    clients: list[Client] = []
    try:
        connect_all_served(b.bootstrap, 26, clients, "max.connection.creation.rate")
        for c in clients:  # and they all stay served
            c.api_versions()
        throttled = 'kafka_network_acceptor_throttled_total{listener="PLAINTEXT",quota="max.connection.creation.rate"}'
        assert metric(b.metrics_url, throttled) >= 1
    finally:
        for c in clients:
            c.close()


def test_listener_limits_set_per_broker_with_kafka_configs(cluster_factory: Callable[..., Any]) -> None:
    """listener.name.<l>.max.connections and listener.name.<l>.max.connection.creation.rate, set on one
    broker at run time with Apache Kafka's own kafka-configs: the listener's acceptor blocks at its own
    count (the broker's max.connections is far away) and holds connections past its own rate."""
    cluster = cluster_factory(1)
    b = cluster.brokers[0]
    gauge = 'kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"}'
    open_now = int(metric(b.metrics_url, gauge))
    limit = open_now + 3
    kafka_configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                  "--add-config", f"listener.name.plaintext.max.connections={limit}")
    wait_until(lambda: f"(per listener {{'PLAINTEXT': {limit}}})" in b.log_text(), 30,
               "the broker to apply the listener's max.connections")
    wait_until(lambda: metric(b.metrics_url, gauge) <= open_now, 30, "the tool's connection to close")
    clients: list[Client] = []
    try:
        blocked = fill_until_the_acceptor_blocks(b.bootstrap, 6, clients)
        assert blocked is not None, f"{len(clients)} connections served with the listener's limit at {limit}"
        served_once_one_closes(clients, blocked)
    finally:
        for c in clients:
            c.close()
    kafka_configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                  "--delete-config", "listener.name.plaintext.max.connections",
                  "--add-config", "listener.name.plaintext.max.connection.creation.rate=2")
    wait_until(lambda: "max connection creation rate of listener PLAINTEXT now 2 a second" in b.log_text(), 30,
               "the broker to apply the listener's rate")
    clients = []
    try:
        connect_all_served(b.bootstrap, 26, clients, "the listener's creation rate")
        throttled = 'kafka_network_acceptor_throttled_total{listener="PLAINTEXT",quota="max.connection.creation.rate"}'
        assert metric(b.metrics_url, throttled) >= 1
    finally:
        for c in clients:
            c.close()


# ------------------------------------------------------------------------------------------------
# Idle connections, oversized requests, the request queue (one broker shared by these tests)


@pytest.fixture(scope="module")
def limited_broker() -> Iterator[Any]:
    yield from shared_cluster(1, {"connections.max.idle.ms": "2000", "socket.request.max.bytes": "1048576",
                                  "queued.max.requests": "2"})


@pytest.fixture
def broker(request: pytest.FixtureRequest, limited_broker: Any) -> Any:
    attach_cluster(request, limited_broker)
    return limited_broker.brokers[0]


def test_idle_connections_are_closed(broker: Any) -> None:
    idle, busy = Client(broker.bootstrap), Client(broker.bootstrap)
    try:
        idle.api_versions()
        busy.api_versions()

        def idle_closed() -> bool:
            busy.api_versions()  # traffic keeps this one open throughout
            idle.sock.settimeout(0.2)
            try:
                return idle.sock.recv(1) == b""
            except TimeoutError:
                return False
            except ConnectionError:
                return True

        wait_until(idle_closed, 30, "the idle connection to be closed", interval=0.3)
        busy.api_versions()
        assert metric(broker.metrics_url, "kafka_network_socketserver_expiredconnectionskilledcount") >= 1
    finally:
        idle.close()
        busy.close()


def test_request_over_socket_request_max_bytes_closes_only_that_connection(broker: Any) -> None:
    topic = unique("max-bytes")
    create_topic(broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        producer.send(topic, b"before", partition=0).get(30)
        big = Client(broker.bootstrap)
        mt = request_type(ApiKey.PRODUCE)
        body = new_request(ApiKey.PRODUCE, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            mt.TopicProduceData(name=topic, partition_data=[
                mt.PartitionProduceData(index=0, records=b"\0" * (2 << 20))])])
        frame = encode_request(ApiKey.PRODUCE, 9, 1, "big", body)
        assert len(frame) > 1048576
        try:
            big.sock.sendall(frame)
        except (ConnectionError, OSError):
            pass  # the broker may close while we are still sending: that is the point
        with pytest.raises((ConnectionError, OSError)):
            big.recv_frame()
        big.close()
        assert metric(broker.metrics_url, 'kafka_server_socket_server_metrics_connections_refused_total{listener="",'
                                          'reason="socket.request.max.bytes"}') >= 1
        # Other clients carry on: the producer's connection was never touched.
        producer.send(topic, b"after", partition=0).get(30)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=2000)
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            got: list[bytes] = []
            wait_until(lambda: got.extend(r.value for r in consumer) or len(got) >= 2, 30, "both records")
            assert got == [b"before", b"after"]
        finally:
            consumer.close()
    finally:
        producer.close()


def test_queued_max_requests_bounds_requests_in_flight(broker: Any) -> None:
    """Four fetches that each wait 2.5 s in the fetch purgatory: two are read and parked, the other two
    wait unread until a permit is free, and all four are answered."""
    topic = unique("queued")
    create_topic(broker.bootstrap, topic)
    url = broker.metrics_url
    waits_before = metric(url, "kafka_network_requestchannel_requestqueuewaits_total")
    mt = request_type(ApiKey.FETCH)
    clients = [Client(broker.bootstrap, timeout=60) for _ in range(4)]
    try:
        for c in clients:
            body = new_request(ApiKey.FETCH, replica_id=-1, max_wait_ms=2500, min_bytes=1 << 20, max_bytes=1 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                   mt.FetchTopic(topic=topic, partitions=[mt.FetchPartition(
                                       partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                       log_start_offset=-1, partition_max_bytes=1 << 20)])],
                               forgotten_topics_data=[], rack_id="")
            c.send_frame(encode_request(ApiKey.FETCH, 12, 1, "queued", body))
        wait_until(lambda: metric(url, "kafka_network_requestchannel_requestqueuewaits_total") >= waits_before + 2,
                   30, "two fetches to wait for a permit")
        assert metric(url, "kafka_network_requestchannel_requestqueuesize") <= 2
        for c in clients:
            _cid, r = decode_response(ApiKey.FETCH, 12, c.recv_frame())
            assert r.responses[0].partitions[0].error_code == 0
        assert metric(url, "kafka_network_requestchannel_requestqueuesize_peak") <= 2
    finally:
        for c in clients:
            c.close()


def test_abandoned_requests_give_their_permits_back(broker: Any) -> None:
    """Two clients park fetches for ten minutes and go away; the two permits come back and a third
    client is served (a client can slow itself down, never others)."""
    topic = unique("abandoned")
    create_topic(broker.bootstrap, topic)
    mt = request_type(ApiKey.FETCH)
    body = new_request(ApiKey.FETCH, replica_id=-1, max_wait_ms=600_000, min_bytes=1 << 20, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[
                           mt.FetchTopic(topic=topic, partitions=[mt.FetchPartition(
                               partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                               log_start_offset=-1, partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id="")
    url = broker.metrics_url
    for _ in range(2):
        c = Client(broker.bootstrap)
        c.send_frame(encode_request(ApiKey.FETCH, 12, 1, "abandoned", body))
        wait_until(lambda: metric(url, "kafka_network_requestchannel_requestqueuesize") >= 1, 30, "a parked fetch")
        c.close()
    third = Client(broker.bootstrap, timeout=60)
    try:
        third.api_versions()
        wait_until(lambda: metric(url, "kafka_network_requestchannel_requestqueuesize") == 0, 30,
                   "the abandoned fetches to be dropped")
    finally:
        third.close()


# ------------------------------------------------------------------------------------------------
# The bookkeeping on its own (no sockets): permits and quotas


def test_request_permits_bound_count_and_bytes_first_come_first_served() -> None:
    import asyncio

    from broker.request_queue import RequestPermits

    async def run() -> None:
        permits = RequestPermits(max_requests=3, max_bytes=1000)
        await permits.acquire(600)
        await permits.acquire(600)  # over the bytes bound now (non-strict, like Kafka's pool)
        order: list[str] = []

        async def take(name: str, size: int) -> None:
            await permits.acquire(size)
            order.append(name)

        a = asyncio.ensure_future(take("a", 10))
        cancelled = asyncio.ensure_future(take("cancelled", 10))
        b = asyncio.ensure_future(take("b", 10))
        c = asyncio.ensure_future(take("c", 10))
        await asyncio.sleep(0)
        assert order == [] and permits.waited == 4  # 1200 bytes in flight: everybody waits
        cancelled.cancel()
        await asyncio.sleep(0)
        permits.release(600)  # 600 bytes left in flight: the waiters fit again, in arrival order ...
        await asyncio.sleep(0)
        assert order == ["a", "b"]  # ... until the count bound (3) stops "c"
        assert permits.in_flight == 3 and permits.bytes == 620 and permits.peak == 3
        permits.release(10)
        await asyncio.sleep(0)
        assert order == ["a", "b", "c"]
        await asyncio.gather(a, b, c)
        assert cancelled.cancelled()

    asyncio.run(run())


def test_connection_quotas_per_ip_overrides_and_validation() -> None:
    from broker.connection_quotas import ConnectionQuotas, TooManyConnections, limits_from
    from config.registry import ConfigError

    def limits(**kw: object) -> Any:
        values = {"max.connections": 10, "max.connections.per.ip": 2, "max.connections.per.ip.overrides": ""}
        values.update({k.replace("_", "."): v for k, v in kw.items()})
        return limits_from(values.__getitem__, resolve=resolve)

    def resolve(host: str) -> str:
        if host != "db.example":
            raise socket.gaierror(f"unknown host {host}")
        return "10.0.0.9"

    q = ConnectionQuotas(limits(), "PLAINTEXT", ["PLAINTEXT"])
    q.inc("PLAINTEXT", "10.0.0.1")
    q.inc("PLAINTEXT", "10.0.0.1")
    with pytest.raises(TooManyConnections, match="maximum of 2 connections"):
        q.inc("PLAINTEXT", "10.0.0.1")
    q.reconfigure(limits(max_connections_per_ip_overrides="10.0.0.1:3, db.example:0"))
    q.inc("PLAINTEXT", "10.0.0.1")
    with pytest.raises(TooManyConnections):
        q.inc("PLAINTEXT", "10.0.0.9")  # a host name resolved to its address
    assert q.total == 3 and q.refused_per_ip["PLAINTEXT"] == 2
    q.dec("PLAINTEXT", "10.0.0.1")
    assert q.counts == {"10.0.0.1": 2}
    with pytest.raises(ConfigError, match="can be set to zero only if"):
        limits(max_connections_per_ip=0)
    with pytest.raises(ConfigError, match="is not of the form host:count"):
        limits(max_connections_per_ip_overrides="10.0.0.1")
    with pytest.raises(ConfigError, match="invalid addresses"):
        limits(max_connections_per_ip_overrides="no.such.host:1")


def test_inter_broker_listener_is_protected_at_max_connections(cluster_factory: Callable[..., Any]) -> None:
    """At max.connections, a connection on the inter-broker listener is still accepted, and the least
    recently active connection of another listener is closed to make room (Kafka's ConnectionQuotas)."""
    from clients.zookeeper_server import free_port

    port, internal = free_port(), free_port()
    cluster = cluster_factory(1, base_port=port, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "max.connections": "6",
    })
    b = cluster.brokers[0]
    clients: list[Client] = []
    try:
        blocked: Client | None = None
        for _ in range(8):
            c = Client(b.bootstrap, timeout=3.0)
            try:
                c.api_versions()
                clients.append(c)
            except TimeoutError:
                blocked = c
                break
        assert blocked is not None and clients, f"{len(clients)} client connections served with max.connections=6"
        for c in clients[1:]:
            c.api_versions()  # clients[0] is now the least recently active one
        inter_broker = Client(f"127.0.0.1:{internal}")
        inter_broker.api_versions()  # accepted although the broker is full
        clients.append(inter_broker)
        assert not served(clients[0]), "the least recently active client connection was not closed"
        for c in clients[1:]:
            c.api_versions()
        assert metric(b.metrics_url, 'kafka_server_socket_server_metrics_connections_refused_total'
                                     '{listener="PLAINTEXT",reason="max.connections"}') == 1
        blocked.close()
    finally:
        for c in clients:
            c.close()


def _join(c: Client, group: str, member_id: str = "") -> Any:
    mt = request_type(ApiKey.JOIN_GROUP)
    return c.request(ApiKey.JOIN_GROUP, 5, group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=600_000,
                     member_id=member_id, group_instance_id=None, protocol_type="consumer",
                     protocols=[mt.JoinGroupRequestProtocol(name="range", metadata=b"")])


def test_abandoned_join_group_runs_on_but_gives_its_permit_back(broker: Any) -> None:
    """A JoinGroup parks until the group's other member rejoins (up to its rebalance timeout, ten
    minutes here). Its client leaving does not cut the group coordinator short, but the request
    permit comes back: two such abandoned joins do not lock everybody else out."""
    group = unique("abandoned-join")
    url = broker.metrics_url
    leader = Client(broker.bootstrap, timeout=30)
    try:
        # The single broker is the coordinator once __consumer_offsets exists and is loaded.
        def coordinator_join() -> Any:
            leader.request(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[group])  # creates the topic
            r = _join(leader, group)
            return r if r.error_code not in (14, 15, 16) else None

        first = wait_until(coordinator_join, 60, "the group coordinator", interval=0.5)
        assert first.error_code == 79, first  # MEMBER_ID_REQUIRED (KIP-394)
        joined = _join(leader, group, first.member_id)
        assert joined.error_code == 0, joined
        mt = request_type(ApiKey.SYNC_GROUP)
        synced = leader.request(ApiKey.SYNC_GROUP, 3, group_id=group, generation_id=joined.generation_id,
                                member_id=joined.member_id, group_instance_id=None, assignments=[
                                    mt.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"")])
        assert synced.error_code == 0, synced
        for _ in range(2):
            newcomer = Client(broker.bootstrap, timeout=30)
            required = _join(newcomer, group)
            assert required.error_code == 79, required
            mt_join = request_type(ApiKey.JOIN_GROUP)
            newcomer.send_frame(encode_request(ApiKey.JOIN_GROUP, 5, 99, "limits", new_request(
                ApiKey.JOIN_GROUP, group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=600_000,
                member_id=required.member_id, group_instance_id=None, protocol_type="consumer",
                protocols=[mt_join.JoinGroupRequestProtocol(name="range", metadata=b"")])))
            wait_until(lambda: metric(url, "kafka_network_requestchannel_requestqueuesize") >= 1, 30,
                       "a parked JoinGroup")
            newcomer.close()
            wait_until(lambda: metric(url, "kafka_network_requestchannel_requestqueuesize") == 0, 30,
                       "the abandoned JoinGroup's permit")
        bystander = Client(broker.bootstrap, timeout=30)
        bystander.api_versions()
        bystander.close()
    finally:
        leader.close()


def test_one_request_cannot_ask_for_billions_of_partitions(broker: Any) -> None:
    """CreateTopics / CreatePartitions for 2^31-1 partitions would exhaust the broker's memory while
    it computed the assignment; they are refused as Kafka's controller refuses excessively large
    operations (more than 10,000 records): POLICY_VIOLATION."""
    topic = unique("bomb")
    with Client(broker.bootstrap, timeout=60) as c:
        mt = request_type(ApiKey.CREATE_TOPICS)
        r = c.request(ApiKey.CREATE_TOPICS, 5, timeout_ms=30000, validate_only=False, topics=[
            mt.CreatableTopic(name=topic, num_partitions=2**31 - 1, replication_factor=1, assignments=[],
                              configs=[])])
        assert (r.topics[0].error_code, r.topics[0].error_message) == (
            44, "Unable to perform excessively large batch operation."), r.topics[0]
        create_topic(broker.bootstrap, topic)
        mt = request_type(ApiKey.CREATE_PARTITIONS)
        r = c.request(ApiKey.CREATE_PARTITIONS, 3, timeout_ms=30000, validate_only=False, topics=[
            mt.CreatePartitionsTopic(name=topic, count=2**31 - 1, assignments=None)])
        assert r.results[0].error_code == 44, r.results[0]
        c.api_versions()
    assert broker.running


def test_listener_overrides_are_described_and_deleted_by_kafka_configs(cluster_factory: Callable[..., Any]) -> None:
    """kafka-configs lists a broker's (and the cluster default's) listener.name.<l>.* overrides and deletes
    them: it refuses to delete a config DescribeConfigs does not show."""
    cluster = cluster_factory(1)
    b = cluster.brokers[0]
    for entity in (("--entity-name", "0"), ("--entity-default",)):
        kafka_configs(b.bootstrap, "--alter", "--entity-type", "brokers", *entity,
                      "--add-config", "listener.name.plaintext.max.connection.creation.rate=500")
        described = kafka_configs(b.bootstrap, "--describe", "--entity-type", "brokers", *entity)
        assert "listener.name.plaintext.max.connection.creation.rate=500" in described, described
        kafka_configs(b.bootstrap, "--alter", "--entity-type", "brokers", *entity,
                      "--delete-config", "listener.name.plaintext.max.connection.creation.rate")
        described = kafka_configs(b.bootstrap, "--describe", "--entity-type", "brokers", *entity)
        assert "listener.name.plaintext" not in described, described
