"""ZooKeeper JSON formats: znodes as Kafka writes them decode, and what we write is Kafka's shape."""

from __future__ import annotations

import json
import uuid

import pytest

from controller import zk_data as zd


def js(data: bytes) -> dict:
    return json.loads(data)


def test_paths() -> None:
    assert zd.broker_path(3) == "/brokers/ids/3"
    assert zd.topic_path("t") == "/brokers/topics/t"
    assert zd.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert zd.config_entity_path("topics", "t") == "/config/topics/t"
    assert zd.delete_topic_path("t") == "/admin/delete_topics/t"
    assert {"/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/changes", "/admin/delete_topics",
            "/isr_change_notification", "/latest_producer_id_block", "/config/topics",
            "/config/brokers"} <= set(zd.PERSISTENT_PATHS)


def test_kafka_uuid_text_form() -> None:
    assert zd.uuid_to_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert zd.uuid_to_str(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    for _ in range(50):
        u = zd.random_uuid()
        s = zd.uuid_to_str(u)
        assert len(s) == 22 and not s.startswith("-") and zd.uuid_from_str(s) == u
    with pytest.raises(zd.ZkDataError):
        zd.uuid_from_str("nope")


def test_broker_registration_as_kafka_writes_it() -> None:
    kafka = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
             b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,"host":"localhost",'
             b'"version":5,"timestamp":"1700000000000"}')
    reg = zd.decode_broker_registration(0, kafka, broker_epoch=42)
    assert reg.endpoints == (zd.EndPoint("localhost", 9092, "PLAINTEXT", "PLAINTEXT"),)
    assert (reg.rack, reg.jmx_port, reg.version, reg.timestamp, reg.broker_epoch) == (None, -1, 5, 1700000000000, 42)

    multi = (b'{"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXTERNAL":"SASL_SSL"},'
             b'"endpoints":["INTERNAL://10.0.0.1:9091","EXTERNAL://[::1]:9093"],"rack":"dc1","jmx_port":9999,'
             b'"features":{"metadata.version":{"min_version":1,"max_version":21}},"host":"10.0.0.1",'
             b'"timestamp":"1700000000000","port":9091,"version":5}')
    reg = zd.decode_broker_registration(7, multi)
    assert reg.rack == "dc1"
    assert reg.endpoint("EXTERNAL") == zd.EndPoint("::1", 9093, "EXTERNAL", "SASL_SSL")
    assert reg.endpoint("EXTERNAL").security_protocol_id == 3
    assert reg.endpoint("EXTERNAL").connection_string == "EXTERNAL://[::1]:9093"
    assert reg.features == {"metadata.version": {"min_version": 1, "max_version": 21}}

    # Older versions Kafka still reads.
    v2 = b'{"version":2,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://h:9092","SSL://h:9093"]}'
    assert [e.security_protocol for e in zd.decode_broker_registration(1, v2).endpoints] == ["PLAINTEXT", "SSL"]
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert zd.decode_broker_registration(1, v1).endpoints == (zd.EndPoint("localhost", 9092),)
    with pytest.raises(zd.ZkDataError):
        zd.decode_broker_registration(1, b"[]")


def test_broker_registration_round_trip_and_shape() -> None:
    reg = zd.BrokerRegistration(3, (zd.EndPoint("b3", 9092), zd.EndPoint("b3", 9093, "REPLICATION", "PLAINTEXT")),
                                rack="r1")
    data = zd.encode_broker_registration(reg, timestamp_ms=123)
    assert b" " not in data  # compact, like Jackson
    j = js(data)
    assert j == {"features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT",
                                                                    "REPLICATION": "PLAINTEXT"},
                 "endpoints": ["PLAINTEXT://b3:9092", "REPLICATION://b3:9093"], "jmx_port": -1, "port": 9092,
                 "host": "b3", "version": 5, "timestamp": "123", "rack": "r1"}
    back = zd.decode_broker_registration(3, data)
    assert back.endpoints == reg.endpoints and back.rack == "r1" and back.timestamp == 123


def test_topic_assignment() -> None:
    kafka = (b'{"removing_replicas":{},"partitions":{"2":[3,1],"1":[2,3],"0":[1,2]},'
             b'"topic_id":"Ln9ZSvtzSLudtgTYn3M4bg","adding_replicas":{},"version":3}')
    ta = zd.decode_topic_assignment("t", kafka, zk_version=4)
    assert ta.replicas() == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert zd.uuid_to_str(ta.topic_id) == "Ln9ZSvtzSLudtgTYn3M4bg" and ta.zk_version == 4
    reassigning = (b'{"version":3,"partitions":{"0":[1,2,3,4]},"adding_replicas":{"0":[4]},'
                   b'"removing_replicas":{"0":[1]}}')
    a = zd.decode_topic_assignment("t", reassigning).partitions[0]
    assert a.adding_replicas == (4,) and a.removing_replicas == (1,) and a.is_being_reassigned
    assert a.target_replicas == (2, 3, 4) and a.origin_replicas == (1, 2, 3)
    old = zd.decode_topic_assignment("t", b'{"version":1,"partitions":{"0":[0]}}')
    assert old.topic_id is None and old.replicas() == {0: [0]}

    tid = zd.random_uuid()
    data = zd.encode_topic_assignment(tid, {1: [2, 3], 0: zd.ReplicaAssignment((1, 2), (2,), ())})
    j = js(data)
    assert j == {"version": 3, "partitions": {"0": [1, 2], "1": [2, 3]}, "adding_replicas": {"0": [2]},
                 "removing_replicas": {}, "topic_id": zd.uuid_to_str(tid)}
    assert zd.decode_topic_assignment("t", data).partitions[0].adding_replicas == (2,)


def test_partition_state() -> None:
    kafka = b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}'
    st = zd.decode_partition_state(kafka, zk_version=9)
    assert st == zd.LeaderIsrAndControllerEpoch(1, 4, (1, 2), 0, 3, 9)
    assert st.partition_epoch == 9
    rec = zd.decode_partition_state(
        b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":5,"isr":[2],"leader_recovery_state":1}')
    assert rec.leader_recovery_state == zd.LEADER_RECOVERY_RECOVERING
    assert js(zd.encode_partition_state(st)) == {"controller_epoch": 3, "leader": 1, "version": 1,
                                                 "leader_epoch": 4, "isr": [1, 2]}
    assert js(zd.encode_partition_state(rec))["leader_recovery_state"] == 1
    assert zd.decode_partition_state(zd.encode_partition_state(rec)) == rec.with_zk_version(0)
    with pytest.raises(zd.ZkDataError):
        zd.decode_partition_state(b'{"leader":1}')


def test_state_transitions_bump_epochs() -> None:
    st = zd.LeaderIsrAndControllerEpoch(1, 4, (1, 2), 0, 3, 9)
    n = st.new_leader_and_isr(2, [2])
    assert (n.leader, n.leader_epoch, n.isr, n.zk_version) == (2, 5, (2,), 9)
    assert st.new_epoch().leader_epoch == 5 and st.new_leader(2).isr == (1, 2)
    r = st.new_recovering_leader_and_isr(3, [3])
    assert r.leader_recovery_state == 1 and r.leader_epoch == 5
    assert st.same_state(st.with_zk_version(1)) and not st.same_state(n)


def test_controller_znodes() -> None:
    data = zd.encode_controller(1, timestamp_ms=1700000000000)
    assert js(data) == {"version": 2, "brokerid": 1, "timestamp": "1700000000000", "kraftControllerEpoch": -1}
    assert zd.decode_controller(data, 3) == zd.ControllerRegistration(1, 1700000000000, -1, 3)
    old = zd.decode_controller(b'{"version":1,"brokerid":0,"timestamp":"1573050000000"}')
    assert old.broker_id == 0 and old.kraft_controller_epoch is None
    assert zd.encode_controller_epoch(12) == b"12" and zd.decode_controller_epoch(b"12") == 12
    with pytest.raises(zd.ZkDataError):
        zd.decode_controller_epoch(b"x")


def test_config_and_change_notifications() -> None:
    assert zd.decode_config(b'{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}') == \
        {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert js(zd.encode_config({"retention.ms": 1000})) == {"version": 1, "config": {"retention.ms": "1000"}}
    assert zd.decode_config(None) == {} and zd.decode_config(b"") == {}
    assert js(zd.encode_config_change("topics/foo")) == {"version": 2, "entity_path": "topics/foo"}
    assert zd.decode_config_change(b'{"version":2,"entity_path":"brokers/<default>"}') == ("brokers", "<default>")
    assert zd.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == ("topics", "t")


def test_cluster_id_and_producer_id_block() -> None:
    assert js(zd.encode_cluster_id("abc")) == {"version": "1", "id": "abc"}  # version is a string in Kafka
    assert zd.decode_cluster_id(b'{"version":"1","id":"Ln9ZSvtzSLudtgTYn3M4bg"}') == "Ln9ZSvtzSLudtgTYn3M4bg"
    assert len(zd.generate_cluster_id()) == 22
    blk = zd.decode_producer_id_block(b'{"version":1,"broker":1,"block_start":"1000","block_end":"1999"}')
    assert blk == zd.ProducerIdBlock(1, 1000, 1000) and blk.last_producer_id == 1999
    assert js(zd.encode_producer_id_block(zd.ProducerIdBlock(2, 2000))) == \
        {"version": 1, "broker": 2, "block_start": "2000", "block_end": "2999"}


def test_admin_znodes() -> None:
    kafka = b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}'
    assert zd.decode_reassignment(kafka) == {("foo", 0): [1, 2]}
    assert zd.decode_reassignment(zd.encode_reassignment({("a", 1): [3]})) == {("a", 1): [3]}
    ps = b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":2}]}'
    assert zd.decode_partition_set(ps) == {("a", 0), ("b", 2)}
    assert zd.decode_partition_set(zd.encode_partition_set([("x", 1)])) == {("x", 1)}
