"""Fencing of the controller-to-broker APIs (LeaderAndIsr, UpdateMetadata, StopReplica).

Forged requests come from an ordinary client socket: a stale (known) broker epoch is refused with
STALE_BROKER_EPOCH, a stale controller epoch with STALE_CONTROLLER_EPOCH, and a controller epoch
ZooKeeper never issued (2^31-1) with STALE_CONTROLLER_EPOCH too. None of them changes anything: the
partition stays readable and the real controller keeps working. With a control-plane listener, the
same requests on the client listener get the connection closed, as Kafka's network layer answers an
API its listener does not serve.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.listeners import inter_broker_and_control_plane, parse_listeners, parse_protocol_map
from config.registry import BrokerConfig, ConfigError
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import encode_request, new_request, request_type
from tests.cluster.helpers import Admin, ZkView, unique
from tests.integration.helpers import RawClient, wait_until

pytestmark = pytest.mark.timeout(240)

INT32_MAX = 2**31 - 1
RECORDS = 50


# ------------------------------------------------------------------------------------------------
# Forged requests


def stop_replica(topic: str, partition: int, *, broker_epoch: int, controller_epoch: int,
                 controller_id: int = 0) -> Any:
    mt = request_type(ApiKey.STOP_REPLICA)
    return new_request(ApiKey.STOP_REPLICA, controller_id=controller_id, is_k_raft_controller=False,
                       controller_epoch=controller_epoch, broker_epoch=broker_epoch, topic_states=[
                           mt.StopReplicaTopicState(topic_name=topic, partition_states=[
                               mt.StopReplicaPartitionState(partition_index=partition, leader_epoch=-2,
                                                            delete_partition=True)])])


def leader_and_isr(topic: str, partition: int, topic_id: uuid.UUID, *, broker_epoch: int,
                   controller_epoch: int, controller_id: int = 0) -> Any:
    """Hand leadership to a broker that does not exist, at a leader epoch far ahead."""
    mt = request_type(ApiKey.LEADER_AND_ISR)
    return new_request(ApiKey.LEADER_AND_ISR, controller_id=controller_id, is_k_raft_controller=False,
                       controller_epoch=controller_epoch, broker_epoch=broker_epoch, type=1, topic_states=[
                           mt.LeaderAndIsrTopicState(topic_name=topic, topic_id=topic_id, partition_states=[
                               mt.LeaderAndIsrPartitionState(
                                   partition_index=partition, controller_epoch=controller_epoch, leader=99,
                                   leader_epoch=100_000, isr=[99], partition_epoch=100_000, replicas=[99, 0, 1, 2],
                                   adding_replicas=[], removing_replicas=[], is_new=False,
                                   leader_recovery_state=0)])],
                       live_leaders=[mt.LeaderAndIsrLiveLeader(broker_id=99, host_name="127.0.0.1", port=1)])


def update_metadata(topic: str, partition: int, topic_id: uuid.UUID, *, broker_epoch: int,
                    controller_epoch: int, controller_id: int = 0) -> Any:
    """No live brokers, and the topic marked for deletion (leader -2)."""
    mt = request_type(ApiKey.UPDATE_METADATA)
    return new_request(ApiKey.UPDATE_METADATA, controller_id=controller_id, is_k_raft_controller=False, type=0,
                       controller_epoch=controller_epoch, broker_epoch=broker_epoch, topic_states=[
                           mt.UpdateMetadataTopicState(topic_name=topic, topic_id=topic_id, partition_states=[
                               mt.UpdateMetadataPartitionState(
                                   partition_index=partition, controller_epoch=controller_epoch, leader=-2,
                                   leader_epoch=100_000, isr=[], zk_version=100_000, replicas=[0],
                                   offline_replicas=[])])],
                       live_brokers=[])


FORGERIES: dict[str, tuple[int, Callable[..., Any]]] = {
    "StopReplica": (ApiKey.STOP_REPLICA, lambda t, p, tid, **kw: stop_replica(t, p, **kw)),
    "LeaderAndIsr": (ApiKey.LEADER_AND_ISR, leader_and_isr),
    "UpdateMetadata": (ApiKey.UPDATE_METADATA, update_metadata),
}
VERSIONS = {ApiKey.STOP_REPLICA: 4, ApiKey.LEADER_AND_ISR: 7, ApiKey.UPDATE_METADATA: 8}


def send_forged(bootstrap: str, api_key: int, body: Any) -> Any:
    """Send one forged controller request from an ordinary client connection; the response body."""
    from protocol.messages import decode_response

    with RawClient(bootstrap, client_id="forger") as raw:
        raw.send_frame(encode_request(api_key, VERSIONS[api_key], 7, "forger", body))
        _cid, resp = decode_response(api_key, VERSIONS[api_key], raw.recv_frame())
    return resp


# ------------------------------------------------------------------------------------------------
# Cluster views


def broker_epochs(zk: ZkView, ids: list[int]) -> dict[int, int]:
    regs = zk.zk.get_brokers(ids)
    return {i: regs[i].broker_epoch for i in ids}


def topic_id(zk: ZkView, topic: str) -> uuid.UUID:
    a = zk.zk.get_topic_assignment(topic)
    assert a is not None and a.topic_id is not None
    return a.topic_id


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=5)
    try:
        for v in values:
            producer.send(topic, v, partition=0).get(timeout=30)
    finally:
        producer.close()


def consume(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        wait_until(lambda: got.extend(r.value for r in consumer) or len(got) >= expect, 60,
                   lambda: f"{expect} records of {topic} (got {len(got)})")
        return got
    finally:
        consumer.close()


def partition_dirs(cluster: Any, topic: str) -> list[Path]:
    return sorted(p for b in cluster.brokers for p in (b.dir / "data").glob(f"{topic}-*"))


def assert_cluster_still_works(bootstrap: str, admin: Admin, replication: int) -> None:
    """The real controller is obeyed: a new topic gets leaders everywhere, and data flows through it."""
    fresh = unique("after-forgery")
    admin.create_topic(fresh, 1, replication)
    values = [f"after-{i}".encode() for i in range(10)]
    produce(bootstrap, fresh, values)
    assert consume(bootstrap, fresh, len(values)) == values


# ------------------------------------------------------------------------------------------------
# Tests


@pytest.fixture
def cluster(cluster_factory: Callable[..., Any]) -> Iterator[Any]:
    yield cluster_factory(3)


def test_forged_controller_requests_are_refused_and_change_nothing(cluster: Any) -> None:
    topic = unique("fenced")
    values = [f"v{i}".encode() for i in range(RECORDS)]
    with Admin(cluster.bootstrap) as admin, ZkView(cluster) as zk:
        admin.create_topic(topic, 1, 3)
        produce(cluster.bootstrap, topic, values)
        tid = topic_id(zk, topic)
        epochs = broker_epochs(zk, [0, 1, 2])
        controller_epoch = zk.controller_epoch()
        controller = zk.controller()
        assert controller is not None and controller_epoch >= 1
        dirs_before = partition_dirs(cluster, topic)
        assert len(dirs_before) == 3

        for b in cluster.brokers:
            for name, (api_key, build) in FORGERIES.items():
                cases = {
                    # A request for a previous incarnation of the broker (stale, known broker epoch).
                    "stale broker epoch": (dict(broker_epoch=epochs[b.broker_id] - 1,
                                                controller_epoch=controller_epoch), ErrorCode.STALE_BROKER_EPOCH),
                    # A controller that has been replaced.
                    "stale controller epoch": (dict(broker_epoch=epochs[b.broker_id],
                                                    controller_epoch=controller_epoch - 1),
                                               ErrorCode.STALE_CONTROLLER_EPOCH),
                    # "Unknown" broker epoch with an epoch ZooKeeper never issued.
                    "forged future controller epoch": (dict(broker_epoch=-1, controller_epoch=INT32_MAX),
                                                       ErrorCode.STALE_CONTROLLER_EPOCH),
                }
                for case, (epochs_kw, want) in cases.items():
                    resp = send_forged(b.bootstrap, api_key, build(topic, 0, tid, controller_id=controller,
                                                                   **epochs_kw))
                    assert resp.error_code == want, f"{name} with a {case} to broker {b.broker_id}: {resp}"
                    if api_key == ApiKey.LEADER_AND_ISR:  # as Kafka: the error for each partition too
                        assert [p.error_code for t in resp.topics for p in t.partition_errors] == [want]

        # Nothing moved: the logs are where they were (none renamed for deletion), the data reads back.
        assert partition_dirs(cluster, topic) == dirs_before
        assert consume(cluster.bootstrap, topic, RECORDS) == values
        for b in cluster.brokers:  # every broker still has the topic's metadata and a leader for it
            with RawClient(b.bootstrap) as raw:
                assert raw.leaders(topic) == 1, f"broker {b.broker_id} lost {topic}"
        # The real controller's epoch was not overtaken by the forged 2^31-1: it is still obeyed.
        assert_cluster_still_works(cluster.bootstrap, admin, 3)
        assert consume(cluster.bootstrap, topic, RECORDS) == values


# ------------------------------------------------------------------------------------------------
# Control-plane listener


def _control_plane_broker_class() -> type:
    from clients.devcluster import BrokerProcess

    class ControlPlaneBroker(BrokerProcess):
        """A broker with a second listener, CONTROL_PLANE, on a port of its own (0: any free port)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            for key in ("listeners", "advertised.listeners"):
                self.props[key] += f",CONTROL_PLANE://{self.host}:0"
            self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))

    return ControlPlaneBroker


def _no_response(bootstrap: str, api_key: int, body: Any) -> bool:
    """True when the broker closes the connection instead of answering."""
    with RawClient(bootstrap, client_id="forger", timeout=15) as raw:
        raw.send_frame(encode_request(api_key, VERSIONS[api_key], 7, "forger", body))
        try:
            raw.recv_frame()
        except ConnectionError:  # EOF or reset; a timeout (open but silent) is not what Kafka does
            return True
        return False


@pytest.mark.slow
def test_control_plane_listener_serves_controller_requests_only_there(
        cluster_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import clients.devcluster as devcluster

    monkeypatch.setattr(devcluster, "BrokerProcess", _control_plane_broker_class())
    cluster = cluster_factory(2, overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT",
        "control.plane.listener.name": "CONTROL_PLANE",
    })
    topic = unique("cp")
    values = [f"cp{i}".encode() for i in range(RECORDS)]
    with Admin(cluster.bootstrap) as admin, ZkView(cluster) as zk:
        regs = zk.zk.get_brokers([0, 1])
        for reg in regs.values():
            assert {ep.listener_name for ep in reg.endpoints} == {"PLAINTEXT", "CONTROL_PLANE"}
        # Controller traffic (LeaderAndIsr, UpdateMetadata) travels on CONTROL_PLANE: topics work.
        admin.create_topic(topic, 1, 2)
        produce(cluster.bootstrap, topic, values)
        assert consume(cluster.bootstrap, topic, RECORDS) == values
        tid = topic_id(zk, topic)
        epochs = broker_epochs(zk, [0, 1])
        controller_epoch = zk.controller_epoch()
        controller = zk.controller()
        for b in cluster.brokers:
            for name, (api_key, build) in FORGERIES.items():
                # Even with the right epochs, the client listener does not take controller requests.
                body = build(topic, 0, tid, controller_id=controller, broker_epoch=epochs[b.broker_id],
                             controller_epoch=controller_epoch)
                assert _no_response(b.bootstrap, api_key, body), f"{name} answered on PLAINTEXT of {b.broker_id}"
            # The same connection kind still serves clients.
            with RawClient(b.bootstrap) as raw:
                assert raw.leaders(topic) == 1
        assert consume(cluster.bootstrap, topic, RECORDS) == values
        assert_cluster_still_works(cluster.bootstrap, admin, 2)
        for b in cluster.brokers:
            text = _metrics(b.metrics_url)
            assert 'reason="control.plane.listener.name"} 3.0' in text, text[-2000:]
            cp = [line for line in text.splitlines()
                  if line.startswith('kafka_server_socket_server_metrics_connection_creation_total{listener="CONTROL_PLANE"}')]
            assert cp and float(cp[0].split()[-1]) >= 1, "no controller connection on CONTROL_PLANE"


def _metrics(url: str | None) -> str:
    import urllib.request

    assert url is not None
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


@pytest.mark.parametrize(("props", "message"), [
    ({"control.plane.listener.name": "PLAINTEXT"}, "should have a different value from the inter broker listener"),
    ({"control.plane.listener.name": "NOPE"}, "not found in listener.security.protocol.map"),
    ({"control.plane.listener.name": "SSL"}, "must be a listener name defined in advertised.listeners"),
    ({"inter.broker.listener.name": "CONTROL_PLANE"}, "not found in listener.security.protocol.map"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."),
])
def test_listener_name_validation(props: dict[str, str], message: str) -> None:
    base = {"listeners": "PLAINTEXT://127.0.0.1:9092", "zookeeper.connect": "127.0.0.1:2181"}
    config = BrokerConfig({**base, **props})
    pmap = parse_protocol_map(config.get("listener.security.protocol.map"))
    listeners = parse_listeners("listeners", config.get("listeners"), pmap)
    with pytest.raises(ConfigError, match=message):
        inter_broker_and_control_plane(config, listeners, listeners, pmap)


def test_listener_names_resolved() -> None:
    config = BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROL_PLANE://127.0.0.1:9093,REPL://127.0.0.1:9094",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,REPL:PLAINTEXT",
        "inter.broker.listener.name": "repl", "control.plane.listener.name": "control_plane",
        "zookeeper.connect": "127.0.0.1:2181"})
    pmap = parse_protocol_map(config.get("listener.security.protocol.map"))
    listeners = parse_listeners("listeners", config.get("listeners"), pmap)
    assert inter_broker_and_control_plane(config, listeners, listeners, pmap) == ("REPL", "CONTROL_PLANE")
