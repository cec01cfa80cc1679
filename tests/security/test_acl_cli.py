"""``kafkette acls`` against a live broker with the ACL authorizer: kafka-acls.sh's flags, ACLs and output."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePatternFilter,
    ResourceType,
)

from clients.cli import main
from clients.devcluster import LocalCluster
from tests.kafka_dist import run_java

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(1, overrides=AUTHORIZER) as c:
        yield c


def acls(cluster: LocalCluster, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["acls", *args, "--bootstrap-server", cluster.brokers[0].bootstrap])
    out, err = capsys.readouterr()
    return code, out, err


def blocks(output: str) -> set[tuple[str, str]]:
    """(resource pattern, entry) pairs of kafka-acls.sh's "Current ACLs for resource" blocks."""
    out: set[tuple[str, str]] = set()
    for block in output.split("Current ACLs for resource `")[1:]:
        resource, _, rest = block.partition("`:")
        out |= {(resource, e) for e in re.findall(r"\(principal=[^)]*\)", rest)}
    return out


@pytest.fixture(autouse=True)
def no_acls_left(cluster: LocalCluster) -> Iterator[None]:
    yield
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[0].bootstrap)
    try:
        admin.delete_acls([ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                     ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))])
        assert admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, ResourcePatternFilter(
            ResourceType.ANY, None, ACLResourcePatternType.ANY)))[0] == []
    finally:
        admin.close()


def test_add_list_remove_in_kafka_acls_format(cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = acls(cluster, capsys, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                        "--topic", "orders")
    assert code == 0
    assert out == ("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: "
                   "\n \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n")
    # Once the cluster resource has an ACL, allow.everyone.if.no.acl.found no longer covers it: this
    # client (User:ANONYMOUS) keeps the ALTER it needs to change ACLs through an ACL of its own.
    code, _, _ = acls(cluster, capsys, "--add", "--allow-principal", "User:ANONYMOUS", "--cluster")
    assert code == 0
    code, _, _ = acls(cluster, capsys, "add", "--allow-principal", "User:bob", "--producer", "--idempotent",
                      "--topic", "log-", "--transactional-id", "tx-", "--resource-pattern-type", "prefixed")
    assert code == 0
    code, _, _ = acls(cluster, capsys, "--add", "--allow-principal", "User:carol", "--consumer", "--topic", "orders",
                      "--group", "billing")
    assert code == 0
    code, _, _ = acls(cluster, capsys, "--add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9",
                      "--operation", "Write", "--operation", "Describe", "--topic", "*")
    assert code == 0

    code, ours, _ = acls(cluster, capsys, "--list")
    assert code == 0
    theirs = run_java("kafka.admin.AclCommand", "--bootstrap-server", cluster.brokers[0].bootstrap, "--list")
    assert blocks(ours) == blocks(theirs) and len(blocks(ours)) == 13, ours
    assert ("ResourcePattern(resourceType=TRANSACTIONAL_ID, name=tx-, patternType=PREFIXED)",
            "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)") in blocks(ours)
    # --idempotent grants IDEMPOTENT_WRITE on the (literal) cluster resource, whatever the pattern type.
    assert ("ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)",
            "(principal=User:bob, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW)") in blocks(ours)

    # --list with a resource and 'match': everything that applies to topic "orders".
    code, out, _ = acls(cluster, capsys, "list", "--topic", "orders", "--resource-pattern-type", "match")
    assert {(r, e) for r, e in blocks(out)} == {
        ("ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)", e) for e in (
            "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
            "(principal=User:carol, host=*, operation=READ, permissionType=ALLOW)",
            "(principal=User:carol, host=*, operation=DESCRIBE, permissionType=ALLOW)")} | {
        ("ResourcePattern(resourceType=TOPIC, name=*, patternType=LITERAL)", e) for e in (
            "(principal=User:eve, host=10.0.0.9, operation=WRITE, permissionType=DENY)",
            "(principal=User:eve, host=10.0.0.9, operation=DESCRIBE, permissionType=DENY)")}

    code, out, _ = acls(cluster, capsys, "--list", "--principal", "User:carol")
    assert out.startswith("ACLs for principal `User:carol`\n") and len(blocks(out)) == 3

    code, out, _ = acls(cluster, capsys, "--list", "--group", "billing", "--output", "json")
    assert json.loads(out) == [{"resourceType": "GROUP", "name": "billing", "patternType": "LITERAL", "acls": [
        {"principal": "User:carol", "host": "*", "operation": "READ", "permissionType": "ALLOW"}]}]

    # Remove one entry, then a whole resource.
    code, _, _ = acls(cluster, capsys, "--remove", "--force", "--allow-principal", "User:carol", "--operation", "Read",
                      "--topic", "orders")
    assert code == 0
    code, _, _ = acls(cluster, capsys, "--remove", "--force", "--topic", "log-", "--resource-pattern-type", "prefixed")
    assert code == 0
    _, out, _ = acls(cluster, capsys, "--list", "--topic", "orders", "--topic", "log-", "--resource-pattern-type", "any")
    assert blocks(out) == {
        ("ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)", e) for e in (
            "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
            "(principal=User:carol, host=*, operation=DESCRIBE, permissionType=ALLOW)")}


def test_remove_asks_first(cluster: LocalCluster, capsys: pytest.CaptureFixture[str],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    acls(cluster, capsys, "--add", "--allow-principal", "User:alice", "--group", "g")
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, out, _ = acls(cluster, capsys, "--remove", "--group", "g")
    assert code == 0
    assert out == ("Are you sure you want to delete all ACLs for resource filter "
                   "`ResourcePattern(resourceType=GROUP, name=g, patternType=LITERAL)`? (y/n)\n")
    assert len(blocks(acls(cluster, capsys, "--list")[1])) == 1
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    acls(cluster, capsys, "--remove", "--group", "g")
    assert blocks(acls(cluster, capsys, "--list")[1]) == set()


@pytest.mark.parametrize(("args", "message"), [
    (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
     "'MATCH' is not valid when adding acls"),
    (["--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"],
     "ResourceType GROUP only supports operations"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "principalType:principalName"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"], "Unknown operation"),
    (["--list", "--allow-principal", "User:a"], "can't be used with option"),
    (["--add", "--producer", "--allow-principal", "User:a"], "With --producer you must specify a --topic"),
    (["--add", "--consumer", "--allow-principal", "User:a", "--topic", "t"], "With --consumer you must specify"),
    (["--add", "--producer", "--operation", "Read", "--allow-principal", "User:a", "--topic", "t"],
     "can't be used with option"),
    (["--remove", "--principal", "User:a", "--topic", "t"], "only available if --list is set"),
])
def test_usage_errors_send_nothing(cluster: LocalCluster, capsys: pytest.CaptureFixture[str], args: list[str],
                                   message: str) -> None:
    code, _, err = acls(cluster, capsys, *args)
    assert code == 2 and message in err, err
