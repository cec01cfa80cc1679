"""Describe/Create/DeleteAcls against two live brokers with the ACL authorizer on (real ZooKeeper).

kafka-python's admin client creates, lists and deletes ACLs; the znodes it leaves are Kafka's; the
other broker's cache follows each change through the notification znodes; bad requests get Kafka's
errors; the cluster permissions the ACL APIs need are enforced from ACLs written to ZooKeeper.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kazoo.client import KazooClient

from clients.connection import BrokerConnection
from clients.devcluster import LocalCluster
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}
ANY_ACL = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
_CA = request_type(ApiKey.CREATE_ACLS)
_XA = request_type(ApiKey.DELETE_ACLS)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(2, overrides=AUTHORIZER) as c:
        yield c


@pytest.fixture(scope="module")
def zk(cluster: LocalCluster) -> Iterator[KazooClient]:
    client = KazooClient(cluster.zk.connect_string + cluster.chroot)
    client.start()
    yield client
    client.stop()
    client.close()


def admin(cluster: LocalCluster, i: int) -> KafkaAdminClient:
    """kafka-python's admin client held to broker ``i``. It sends ACL requests to whichever broker it
    finds least loaded, so a client bootstrapped on one broker may ask another: these tests are about
    what each broker itself answers (and one of them pauses a broker, which must not be asked)."""
    client = KafkaAdminClient(bootstrap_servers=cluster.brokers[i].bootstrap, client_id=f"acl-test-{i}")
    manager = client._manager
    broker_id = cluster.brokers[i].broker_id
    any_node = manager.least_loaded_node

    def this_broker() -> Any:
        return broker_id if manager.cluster.broker_metadata(broker_id) is not None else any_node()

    manager.least_loaded_node = this_broker
    return client


@pytest.fixture
def admins(cluster: LocalCluster) -> Iterator[tuple[KafkaAdminClient, KafkaAdminClient]]:
    a0, a1 = admin(cluster, 0), admin(cluster, 1)
    yield a0, a1
    a0.delete_acls([ANY_ACL])  # each test starts without ACLs
    wait_for(lambda: not a1.describe_acls(ANY_ACL)[0], "broker 1 to forget every ACL")
    a0.close()
    a1.close()


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def call(cluster: LocalCluster, api: ApiKey, version: int, **fields: Any) -> Any:
    b = cluster.brokers[0]
    conn = BrokerConnection(b.host, b.port, client_id="acl-test", timeout=30.0)
    try:
        return conn.call(api, version, **fields)
    finally:
        conn.close()


def acl(principal: str, op: ACLOperation, perm: ACLPermissionType, rtype: ResourceType, name: str,
        pattern: ACLResourcePatternType = ACLResourcePatternType.LITERAL, host: str = "*") -> ACL:
    return ACL(principal, host, op, perm, ResourcePattern(rtype, name, pattern))


def keys(acls: list[ACL]) -> set[tuple[str, str, int, int, int, str, int]]:
    return {(a.principal, a.host, a.operation, a.permission_type, a.resource_pattern.resource_type,
             a.resource_pattern.resource_name, a.resource_pattern.pattern_type) for a in acls}


def test_create_describe_delete_through_kafka_python(cluster: LocalCluster, zk: KazooClient,
                                                     admins: tuple[KafkaAdminClient, KafkaAdminClient]) -> None:
    a0, _ = admins
    read_orders = acl("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, "orders")
    write_logs = acl("User:bob", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC, "log-",
                     ACLResourcePatternType.PREFIXED)
    deny_group = acl("User:*", ACLOperation.READ, ACLPermissionType.DENY, ResourceType.GROUP, "*", host="10.0.0.9")
    result = a0.create_acls([read_orders, write_logs, deny_group])
    assert not result["failed"] and len(result["succeeded"]) == 3

    listed, error = a0.describe_acls(ANY_ACL)
    assert error.errno == 0
    assert keys(listed) == keys([read_orders, write_logs, deny_group])

    # Stored as Kafka stores them.
    data, _ = zk.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    data, _ = zk.get("/kafka-acl-extended/prefixed/Topic/log-")
    assert json.loads(data)["acls"] == [{"principal": "User:bob", "permissionType": "Allow", "operation": "Write",
                                         "host": "*"}]
    assert json.loads(zk.get("/kafka-acl/Group/*")[0])["acls"][0]["permissionType"] == "Deny"
    literal_changes = [zk.get(f"/kafka-acl-changes/{n}")[0] for n in zk.get_children("/kafka-acl-changes")]
    assert b"TOPIC:orders" in literal_changes and b"GROUP:*" in literal_changes
    extended = [json.loads(zk.get(f"/kafka-acl-extended-changes/{n}")[0])
                for n in zk.get_children("/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "TOPIC", "name": "log-", "patternType": "PREFIXED"} in extended

    # MATCH: the ACLs that apply to one topic (its literal name and the prefixes it starts with).
    applying, _ = a0.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                             ResourcePatternFilter(ResourceType.TOPIC, "log-app",
                                                                   ACLResourcePatternType.MATCH)))
    assert keys(applying) == keys([write_logs])

    deleted = a0.delete_acls([ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                                        ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))])
    (_filter, matched, err), = deleted
    assert err.errno == 0 and keys(matched) == keys([write_logs])
    assert not zk.exists("/kafka-acl-extended/prefixed/Topic/log-")
    assert keys(a0.describe_acls(ANY_ACL)[0]) == keys([read_orders, deny_group])


def test_second_broker_follows_changes(cluster: LocalCluster,
                                       admins: tuple[KafkaAdminClient, KafkaAdminClient]) -> None:
    a0, a1 = admins
    tx = acl("User:carol", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TRANSACTIONAL_ID, "tx-",
             ACLResourcePatternType.PREFIXED)
    assert not a0.create_acls([tx])["failed"]
    wait_for(lambda: keys(a1.describe_acls(ANY_ACL)[0]) == keys([tx]), "broker 1 to see the ACL made through 0")
    more = acl("User:carol", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW, ResourceType.TRANSACTIONAL_ID, "tx-",
               ACLResourcePatternType.PREFIXED)
    assert not a1.create_acls([more])["failed"]
    wait_for(lambda: keys(a0.describe_acls(ANY_ACL)[0]) == keys([tx, more]), "broker 0 to see the added entry")
    a1.delete_acls([ACLFilter(None, None, ACLOperation.WRITE, ACLPermissionType.ANY,
                              ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))])
    wait_for(lambda: keys(a0.describe_acls(ANY_ACL)[0]) == keys([more]), "broker 0 to see the deletion through 1")


def test_concurrent_changes_through_both_brokers_lose_nothing(cluster: LocalCluster, zk: KazooClient,
                                                              admins: tuple[KafkaAdminClient, KafkaAdminClient]) -> None:
    """Both brokers add entries to one znode at once: conditional writes (znode version) make the
    loser of each race re-read and retry, so every entry survives."""
    def create(i: int) -> int:
        b = cluster.brokers[i % 2]
        conn = BrokerConnection(b.host, b.port, client_id=f"racer-{i}", timeout=30.0)
        try:
            (r,) = conn.call(ApiKey.CREATE_ACLS, 3, creations=[_CA.AclCreation(
                resource_type=2, resource_name="contended", resource_pattern_type=3, principal=f"User:u{i}",
                host="*", operation=3, permission_type=3)]).results
            return int(r.error_code)
        finally:
            conn.close()

    with ThreadPoolExecutor(16) as pool:
        assert list(pool.map(create, range(16))) == [0] * 16
    stored = json.loads(zk.get("/kafka-acl/Topic/contended")[0])["acls"]
    assert sorted(a["principal"] for a in stored) == sorted(f"User:u{i}" for i in range(16))
    for a in admins:
        wait_for(lambda a=a: len(a.describe_acls(ANY_ACL)[0]) == 16, "both brokers to hold all 16 entries")


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_advertised_version(cluster: LocalCluster, version: int) -> None:
    creation = _CA.AclCreation(resource_type=3, resource_name=f"g{version}", resource_pattern_type=4,
                               principal="User:dave", host="127.0.0.1", operation=3, permission_type=3)
    created = call(cluster, ApiKey.CREATE_ACLS, version, creations=[creation])
    assert [(r.error_code, r.error_message) for r in created.results] == [(0, None)]
    described = call(cluster, ApiKey.DESCRIBE_ACLS, version, resource_type_filter=3, resource_name_filter=None,
                     pattern_type_filter=1, principal_filter="User:dave", host_filter=None, operation=1,
                     permission_type=1)
    assert described.error_code == 0
    assert [(r.resource_type, r.resource_name, r.pattern_type, [(a.principal, a.host, a.operation, a.permission_type)
                                                                for a in r.acls]) for r in described.resources] == [
        (3, f"g{version}", 4, [("User:dave", "127.0.0.1", 3, 3)])]
    deleted = call(cluster, ApiKey.DELETE_ACLS, version, filters=[_XA.DeleteAclsFilter(
        resource_type_filter=3, resource_name_filter=f"g{version}", pattern_type_filter=4, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)])
    (result,) = deleted.filter_results
    assert result.error_code == 0 and [(m.resource_name, m.principal, m.error_code) for m in result.matching_acls] == [
        (f"g{version}", "User:dave", 0)]


def test_invalid_requests(cluster: LocalCluster) -> None:
    def create(**overrides: Any) -> tuple[int, str | None]:
        fields = dict(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
                      operation=3, permission_type=3)
        fields.update(overrides)
        (r,) = call(cluster, ApiKey.CREATE_ACLS, 3, creations=[_CA.AclCreation(**fields)]).results
        return r.error_code, r.error_message

    assert create(resource_type=4, resource_name="other") == (
        ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")
    assert create(resource_name="") == (ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
    assert create(resource_type=0)[0] == ErrorCode.INVALID_REQUEST
    assert create(operation=99)[0] == ErrorCode.INVALID_REQUEST  # unknown code: UNKNOWN
    code, message = create(resource_name="a/b")
    assert code == ErrorCode.INVALID_REQUEST and "invalid resource name: a/b" in (message or "")
    code, message = create(resource_pattern_type=2)
    assert code == ErrorCode.INVALID_REQUEST and "MATCH" in (message or "")
    code, message = create(principal="alice")
    assert code == ErrorCode.INVALID_REQUEST and "principalType:principalName" in (message or "")
    assert create(operation=1)[0] == ErrorCode.INVALID_REQUEST  # ANY is a filter value, not an operation

    described = call(cluster, ApiKey.DESCRIBE_ACLS, 3, resource_type_filter=0, resource_name_filter=None,
                     pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1, permission_type=1)
    assert described.error_code == ErrorCode.INVALID_REQUEST and "UNKNOWN" in described.error_message
    deleted = call(cluster, ApiKey.DELETE_ACLS, 3, filters=[_XA.DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=0, permission_type=1)])
    assert [r.error_code for r in deleted.filter_results] == [ErrorCode.INVALID_REQUEST]
    # Nothing was stored by any of these.
    assert call(cluster, ApiKey.DESCRIBE_ACLS, 3, resource_type_filter=1, resource_name_filter=None,
                pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
                permission_type=1).resources == []


def _write_cluster_acls(zk: KazooClient, acls: list[dict[str, str]]) -> None:
    """What kafka-acls.sh --authorizer-properties does: the znode, then a change notification."""
    path = "/kafka-acl/Cluster/kafka-cluster"
    if acls:
        data = json.dumps({"version": 1, "acls": acls}).encode()
        if zk.exists(path):
            zk.set(path, data)
        else:
            zk.create(path, data, makepath=True)
    elif zk.exists(path):
        zk.delete(path)
    zk.create("/kafka-acl-changes/acl_changes_", b"Cluster:kafka-cluster", sequence=True)


def test_acl_apis_need_cluster_permissions(cluster: LocalCluster, zk: KazooClient) -> None:
    def anonymous(op: str, perm: str = "Allow", principal: str = "User:ANONYMOUS") -> dict[str, str]:
        return {"principal": principal, "permissionType": perm, "operation": op, "host": "*"}

    # Everything on the cluster except Alter (so the brokers' own requests still pass).
    everything_but_alter = [anonymous(op) for op in ("Describe", "ClusterAction", "IdempotentWrite", "Create",
                                                     "DescribeConfigs", "AlterConfigs")]
    describe = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                    host_filter=None, operation=1, permission_type=1)
    creation = _CA.AclCreation(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a",
                               host="*", operation=3, permission_type=3)
    try:
        _write_cluster_acls(zk, everything_but_alter)
        wait_for(lambda: len(call(cluster, ApiKey.DESCRIBE_ACLS, 3, **describe).resources) == 1,
                 "the broker to load the cluster ACLs")
        (r,) = call(cluster, ApiKey.CREATE_ACLS, 3, creations=[creation]).results
        assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        (f,) = call(cluster, ApiKey.DELETE_ACLS, 3, filters=[_XA.DeleteAclsFilter(**describe)]).filter_results
        assert f.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert zk.exists("/kafka-acl/Cluster/kafka-cluster")  # the refused delete deleted nothing

        _write_cluster_acls(zk, everything_but_alter + [anonymous("Describe", "Deny", "User:*")])
        wait_for(lambda: call(cluster, ApiKey.DESCRIBE_ACLS, 3, **describe).error_code
                 == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "DescribeAcls to be denied")
    finally:
        _write_cluster_acls(zk, [])
    wait_for(lambda: call(cluster, ApiKey.DESCRIBE_ACLS, 3, **describe).resources == [], "the cluster ACLs to go")


@pytest.mark.slow
def test_broker_catches_up_after_its_zookeeper_session_expired(cluster_factory: Callable[..., LocalCluster]) -> None:
    """A broker whose session expired (paused past the session timeout) gets its ACLs right again on
    the new session: watches re-armed, changes made meanwhile applied (it also reloads every ACL, in
    case notifications expired while it was away), later changes followed."""
    c = cluster_factory(2, overrides={**AUTHORIZER, "zookeeper.session.timeout.ms": "6000"})
    a0, a1 = admin(c, 0), admin(c, 1)
    try:
        before = acl("User:zed", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, "before")
        assert not a0.create_acls([before])["failed"]
        wait_for(lambda: keys(a1.describe_acls(ANY_ACL)[0]) == keys([before]), "broker 1 to see the first ACL")
        a1.close()
        c.brokers[1].pause()
        try:
            during = acl("User:zed", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.GROUP, "during")
            assert not a0.create_acls([during])["failed"]
            a0.delete_acls([ACLFilter(None, None, ACLOperation.READ, ACLPermissionType.ANY, ResourcePatternFilter(
                ResourceType.TOPIC, "before", ACLResourcePatternType.LITERAL))])
            # Its session expires: its ephemeral registration goes away.
            watcher = KazooClient(c.zk.connect_string + c.chroot)
            watcher.start()
            try:
                wait_for(lambda: watcher.exists("/brokers/ids/1") is None, "broker 1's session to expire", 30)
            finally:
                watcher.stop()
                watcher.close()
        finally:
            c.brokers[1].resume()
        a1 = admin(c, 1)
        wait_for(lambda: keys(a1.describe_acls(ANY_ACL)[0]) == keys([during]), "broker 1 to catch up", 60)
        after = acl("User:zed", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW, ResourceType.GROUP, "during")
        assert not a0.create_acls([after])["failed"]
        wait_for(lambda: keys(a1.describe_acls(ANY_ACL)[0]) == keys([during, after]),
                 "broker 1 to follow notifications on its new session")
    finally:
        a0.close()
        a1.close()
