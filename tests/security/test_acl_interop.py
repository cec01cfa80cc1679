"""Kafka's own kafka-acls.sh (kafka.admin.AclCommand 3.9.1, from Maven Central) against kafkette.

* Through ZooKeeper (``--authorizer-properties zookeeper.connect=...``, the tool runs Kafka's
  AclAuthorizer itself): what the tool writes, kafkette brokers load, list and enforce; what kafkette
  writes, the tool lists and removes.
* Through the broker (``--bootstrap-server``): the tool's Java admin client adds, lists and removes
  ACLs with our CreateAcls / DescribeAcls / DeleteAcls.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
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

from clients.connection import BrokerConnection
from clients.devcluster import LocalCluster
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type
from tests.kafka_dist import run_java

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}
ANY_ACL = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                    ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
_CA = request_type(ApiKey.CREATE_ACLS)
# Every cluster operation but Alter: the ACL APIs that change ACLs are then refused to ANONYMOUS,
# while the brokers' own requests (ClusterAction, ...) and DescribeAcls still pass.
ALL_BUT_ALTER = ("Describe", "ClusterAction", "IdempotentWrite", "Create", "DescribeConfigs", "AlterConfigs")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(1, overrides=AUTHORIZER) as c:
        yield c


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=cluster.brokers[0].bootstrap, client_id="acl-interop")
    yield a
    wait_for(lambda: _try_delete_all(a), "every ACL to be deleted")
    a.close()


def _try_delete_all(a: KafkaAdminClient) -> bool:
    a.delete_acls([ANY_ACL])
    return not a.describe_acls(ANY_ACL)[0]


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def kafka_acls_zk(cluster: LocalCluster, *args: str) -> str:
    zk = cluster.zk.connect_string + cluster.chroot
    return run_java("kafka.admin.AclCommand", "--authorizer-properties", f"zookeeper.connect={zk}", *args)


def kafka_acls_broker(cluster: LocalCluster, *args: str) -> str:
    return run_java("kafka.admin.AclCommand", "--bootstrap-server", cluster.brokers[0].bootstrap, *args)


def listed(output: str) -> set[tuple[str, str]]:
    """(resource pattern, entry) pairs from kafka-acls.sh's "Current ACLs for resource" blocks."""
    out: set[tuple[str, str]] = set()
    for block in output.split("Current ACLs for resource `")[1:]:
        resource, _, rest = block.partition("`:")
        for entry in re.findall(r"\(principal=[^)]*\)", rest):
            out.add((resource, entry))
    return out


def keys(acls: list[ACL]) -> set[tuple[str, str, int, int, int, str, int]]:
    return {(a.principal, a.host, a.operation, a.permission_type, a.resource_pattern.resource_type,
             a.resource_pattern.resource_name, a.resource_pattern.pattern_type) for a in acls}


def create_error(cluster: LocalCluster) -> int:
    b = cluster.brokers[0]
    conn = BrokerConnection(b.host, b.port, client_id="acl-interop", timeout=30.0)
    try:
        resp = conn.call(ApiKey.CREATE_ACLS, 3, creations=[_CA.AclCreation(
            resource_type=2, resource_name="probe", resource_pattern_type=3, principal="User:probe", host="*",
            operation=3, permission_type=3)])
    finally:
        conn.close()
    code: int = resp.results[0].error_code
    return code


def test_acls_written_by_kafka_acls_through_zookeeper_are_loaded_and_enforced(
        cluster: LocalCluster, client: KafkaAdminClient) -> None:
    ops = [a for op in ALL_BUT_ALTER for a in ("--operation", op)]
    kafka_acls_zk(cluster, "--add", "--allow-principal", "User:ANONYMOUS", *ops, "--cluster")
    kafka_acls_zk(cluster, "--add", "--allow-principal", "User:alice", "--producer", "--topic", "orders-",
                  "--resource-pattern-type", "prefixed")
    expected = {
        ("User:ANONYMOUS", "*", ACLOperation[op], ACLPermissionType.ALLOW, ResourceType.CLUSTER, "kafka-cluster",
         ACLResourcePatternType.LITERAL)
        for op in ("DESCRIBE", "CLUSTER_ACTION", "IDEMPOTENT_WRITE", "CREATE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS")
    } | {("User:alice", "*", op, ACLPermissionType.ALLOW, ResourceType.TOPIC, "orders-", ACLResourcePatternType.PREFIXED)
         for op in (ACLOperation.WRITE, ACLOperation.DESCRIBE, ACLOperation.CREATE)}
    wait_for(lambda: keys(client.describe_acls(ANY_ACL)[0]) == expected, "the broker to load the tool's ACLs")
    # Enforced: ANONYMOUS may describe ACLs but not change them.
    assert create_error(cluster) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    kafka_acls_zk(cluster, "--remove", "--cluster", "--force")
    wait_for(lambda: create_error(cluster) == ErrorCode.NONE, "CreateAcls to be allowed again")


def test_acls_written_by_kafkette_are_read_and_removed_by_kafka_acls(
        cluster: LocalCluster, client: KafkaAdminClient) -> None:
    created = client.create_acls([
        ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL)),
        ACL("User:bob", "10.1.2.3", ACLOperation.ALL, ACLPermissionType.DENY,
            ResourcePattern(ResourceType.GROUP, "billing-", ACLResourcePatternType.PREFIXED)),
        ACL("User:*", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TRANSACTIONAL_ID, "*", ACLResourcePatternType.LITERAL)),
    ])
    assert not created["failed"]
    out = kafka_acls_zk(cluster, "--list")
    assert listed(out) == {
        ("ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)",
         "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"),
        ("ResourcePattern(resourceType=GROUP, name=billing-, patternType=PREFIXED)",
         "(principal=User:bob, host=10.1.2.3, operation=ALL, permissionType=DENY)"),
        ("ResourcePattern(resourceType=TRANSACTIONAL_ID, name=*, patternType=LITERAL)",
         "(principal=User:*, host=*, operation=DESCRIBE, permissionType=ALLOW)"),
    }, out
    kafka_acls_zk(cluster, "--remove", "--force", "--group", "billing-", "--resource-pattern-type", "prefixed")
    wait_for(lambda: len(client.describe_acls(ANY_ACL)[0]) == 2, "the broker to see the tool's removal")


def test_kafka_acls_through_bootstrap_server(cluster: LocalCluster, client: KafkaAdminClient) -> None:
    out = kafka_acls_broker(cluster, "--add", "--allow-principal", "User:bob", "--consumer", "--topic", "events",
                            "--group", "readers")
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=events, patternType=LITERAL)`" in out
    kafka_acls_broker(cluster, "--add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.66", "--operation",
                      "Write", "--topic", "*")
    out = kafka_acls_broker(cluster, "--list", "--topic", "events", "--resource-pattern-type", "match")
    assert listed(out) == {
        ("ResourcePattern(resourceType=TOPIC, name=events, patternType=LITERAL)",
         "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)"),
        ("ResourcePattern(resourceType=TOPIC, name=events, patternType=LITERAL)",
         "(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)"),
        ("ResourcePattern(resourceType=TOPIC, name=*, patternType=LITERAL)",
         "(principal=User:eve, host=10.0.0.66, operation=WRITE, permissionType=DENY)"),
    }, out
    assert ("ResourcePattern(resourceType=GROUP, name=readers, patternType=LITERAL)",
            "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)") in listed(
        kafka_acls_broker(cluster, "--list", "--principal", "User:bob"))
    kafka_acls_broker(cluster, "--remove", "--force", "--allow-principal", "User:bob", "--consumer", "--topic",
                      "events", "--group", "readers")
    assert keys(client.describe_acls(ANY_ACL)[0]) == {
        ("User:eve", "10.0.0.66", ACLOperation.WRITE, ACLPermissionType.DENY, ResourceType.TOPIC, "*",
         ACLResourcePatternType.LITERAL)}
