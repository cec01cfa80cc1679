"""The ACL authorizer's decisions, in memory (no ZooKeeper): Kafka's AclAuthorizer semantics.

Cases follow Kafka's AclAuthorizerTest / BaseAuthorizerTest: super users, allow.everyone.if.no.acl.found,
LITERAL (and the wildcard name "*") and PREFIXED patterns, the User:* principal, hosts, DENY over
ALLOW, implied operations, authorize_by_resource_type, the authorized-operations bit field, filters,
the ZooKeeper encodings and the authorizer log lines.
"""

from __future__ import annotations

import logging

import pytest

from broker.authorizer import authorized_operations
from broker.authorizer.acl_authorizer import AclAuthorizer, create_authorizer, java_host_address
from broker.authorizer.acl_cache import VersionedAcls
from broker.authorizer.acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePatternFilter,
    binding_problem,
)
from broker.authorizer.api import (
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
)
from broker.authorizer.zk_acl_store import (
    EXTENDED_CHANGE_PATH,
    LITERAL_CHANGE_PATH,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
    resource_path,
)
from broker.security.principal import KafkaPrincipal
from config.registry import BrokerConfig, ConfigError
from protocol.api_versions import ApiKey

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALLOW, DENY = Perm.ALLOW, Perm.DENY
HOST1, HOST2 = "192.168.1.1", "192.168.1.2"


def topic(name: str, pt: PatternType = PT.LITERAL) -> ResourcePattern:
    return ResourcePattern(RT.TOPIC, name, pt)


def group(name: str, pt: PatternType = PT.LITERAL) -> ResourcePattern:
    return ResourcePattern(RT.GROUP, name, pt)


def ace(principal: str, op: AclOperation, perm: AclPermissionType = ALLOW, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def ctx(user: str = "alice", host: str = HOST1, api: int = ApiKey.PRODUCE) -> RequestContext:
    return RequestContext(KafkaPrincipal("User", user), host, "PLAINTEXT", "PLAINTEXT", api_key=api, api_version=9)


def add(auth: AclAuthorizer, pattern: ResourcePattern, *entries: AccessControlEntry) -> None:
    current = auth.cache.get(pattern).entries
    auth.cache.update(pattern, VersionedAcls(current | frozenset(entries), 0))


def remove(auth: AclAuthorizer, pattern: ResourcePattern, *entries: AccessControlEntry) -> None:
    current = auth.cache.get(pattern).entries
    auth.cache.update(pattern, VersionedAcls(current - frozenset(entries), 0))


def allowed(auth: AclAuthorizer, c: RequestContext, op: AclOperation, resource: ResourcePattern) -> bool:
    return auth.authorize(c, [Action(op, resource)]) == [AuthorizationResult.ALLOWED]


def by_type(auth: AclAuthorizer, c: RequestContext, op: AclOperation, rt: ResourceType) -> bool:
    return auth.authorize_by_resource_type(c, op, rt) == AuthorizationResult.ALLOWED


@pytest.fixture
def auth() -> AclAuthorizer:
    return AclAuthorizer(super_users=["User:admin", "User:broker"])


# -- basic decisions -------------------------------------------------------------------------------------


def test_no_acls_denies_unless_allow_everyone(auth: AclAuthorizer) -> None:
    assert not allowed(auth, ctx(), Op.READ, topic("t"))
    open_auth = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    assert allowed(open_auth, ctx(), Op.READ, topic("t"))
    # Once any ACL applies to the resource, allow.everyone no longer opens it.
    add(open_auth, topic("t"), ace("User:bob", Op.READ))
    assert not allowed(open_auth, ctx(), Op.READ, topic("t"))
    assert allowed(open_auth, ctx(), Op.READ, topic("other"))
    # A prefixed or wildcard ACL counts as "an ACL for the resource" too.
    add(open_auth, topic("ord", PT.PREFIXED), ace("User:bob", Op.READ))
    assert not allowed(open_auth, ctx(), Op.READ, topic("orders"))


def test_super_users_are_allowed_everything_despite_deny(auth: AclAuthorizer) -> None:
    add(auth, topic("*"), ace("User:*", Op.ALL, DENY))
    add(auth, ResourcePattern(RT.CLUSTER, "kafka-cluster"), ace("User:*", Op.ALL, DENY))
    assert allowed(auth, ctx("admin"), Op.WRITE, topic("t"))
    assert allowed(auth, ctx("broker"), Op.CLUSTER_ACTION, ResourcePattern(RT.CLUSTER, "kafka-cluster"))
    assert not allowed(auth, ctx("alice"), Op.WRITE, topic("t"))
    # Principal types matter: a super user is a (type, name) pair.
    other_type = RequestContext(KafkaPrincipal("Group", "admin"), HOST1, "L", "PLAINTEXT")
    assert not allowed(auth, other_type, Op.WRITE, topic("t"))


def test_super_users_config_is_semicolon_separated() -> None:
    cfg = BrokerConfig({"zookeeper.connect": "x", "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                        "super.users": "User:admin; User:CN=broker,O=kafkette ;User:x:y",
                        "allow.everyone.if.no.acl.found": "true"})
    a = create_authorizer(cfg)
    assert a is not None
    assert a.super_users == {"User:admin", "User:CN=broker,O=kafkette", "User:x:y"}
    assert a.allow_everyone_if_no_acl_found
    assert create_authorizer(BrokerConfig({"zookeeper.connect": "x"})) is None
    with pytest.raises(ConfigError, match="authorizer.class.name.*cannot be found"):
        create_authorizer(BrokerConfig({"zookeeper.connect": "x", "authorizer.class.name": "com.example.Custom"}))
    with pytest.raises(ConfigError, match="super.users"):
        create_authorizer(BrokerConfig({"zookeeper.connect": "x", "super.users": "admin",
                                        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}))


def test_literal_wildcard_and_prefixed_patterns(auth: AclAuthorizer) -> None:
    add(auth, topic("orders"), ace("User:alice", Op.READ))
    add(auth, topic("log-", PT.PREFIXED), ace("User:alice", Op.WRITE))
    add(auth, group("*"), ace("User:alice", Op.READ))
    assert allowed(auth, ctx(), Op.READ, topic("orders"))
    assert not allowed(auth, ctx(), Op.READ, topic("orders2"))  # literal is exact
    assert allowed(auth, ctx(), Op.WRITE, topic("log-app"))
    assert allowed(auth, ctx(), Op.WRITE, topic("log-"))
    assert not allowed(auth, ctx(), Op.WRITE, topic("log"))  # shorter than the prefix
    assert not allowed(auth, ctx(), Op.WRITE, topic("xlog-app"))
    assert allowed(auth, ctx(), Op.READ, group("anything"))
    assert allowed(auth, ctx(), Op.READ, group("*"))
    assert not allowed(auth, ctx(), Op.READ, topic("anything"))  # resource types are separate
    # A PREFIXED pattern named "*" is a prefix like any other, not a wildcard.
    add(auth, topic("*", PT.PREFIXED), ace("User:alice", Op.DELETE))
    assert not allowed(auth, ctx(), Op.DELETE, topic("orders"))
    assert allowed(auth, ctx(), Op.DELETE, topic("*x"))


def test_principal_wildcard_and_hosts(auth: AclAuthorizer) -> None:
    add(auth, topic("t"), ace("User:*", Op.READ, host=HOST1), ace("User:bob", Op.WRITE, host="*"))
    assert allowed(auth, ctx("alice", HOST1), Op.READ, topic("t"))
    assert allowed(auth, ctx("carol", HOST1), Op.READ, topic("t"))
    assert not allowed(auth, ctx("alice", HOST2), Op.READ, topic("t"))
    assert allowed(auth, ctx("bob", HOST2), Op.WRITE, topic("t"))
    assert not allowed(auth, ctx("alice", HOST2), Op.WRITE, topic("t"))
    # "User:*" is the only principal wildcard: a principal named "*" of another type is literal.
    add(auth, topic("u"), ace("Group:*", Op.READ))
    assert not allowed(auth, ctx("alice"), Op.READ, topic("u"))


def test_deny_wins_over_allow(auth: AclAuthorizer) -> None:
    add(auth, topic("t"), ace("User:alice", Op.READ), ace("User:alice", Op.READ, DENY, host=HOST2))
    assert allowed(auth, ctx(host=HOST1), Op.READ, topic("t"))
    assert not allowed(auth, ctx(host=HOST2), Op.READ, topic("t"))
    # A DENY on any matching pattern beats an ALLOW on another: wildcard principal, prefix, ALL.
    add(auth, topic("pay", PT.PREFIXED), ace("User:*", Op.READ, DENY))
    add(auth, topic("payments"), ace("User:alice", Op.READ))
    assert not allowed(auth, ctx(), Op.READ, topic("payments"))
    add(auth, topic("x"), ace("User:alice", Op.WRITE), ace("User:alice", Op.ALL, DENY))
    assert not allowed(auth, ctx(), Op.WRITE, topic("x"))
    add(auth, topic("*"), ace("User:mallory", Op.ALL, DENY))
    add(auth, topic("y"), ace("User:mallory", Op.ALL))
    assert not allowed(auth, ctx("mallory"), Op.READ, topic("y"))
    assert not allowed(auth, ctx("mallory"), Op.READ, topic("*"))


def test_implied_operations(auth: AclAuthorizer) -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        name = f"t-{op.name}"
        add(auth, topic(name), ace("User:alice", op))
        assert allowed(auth, ctx(), Op.DESCRIBE, topic(name)), op
        assert allowed(auth, ctx(), op, topic(name))
    add(auth, topic("c"), ace("User:alice", Op.ALTER_CONFIGS))
    assert allowed(auth, ctx(), Op.DESCRIBE_CONFIGS, topic("c"))
    assert not allowed(auth, ctx(), Op.DESCRIBE, topic("c"))
    add(auth, topic("d"), ace("User:alice", Op.DESCRIBE))
    assert not allowed(auth, ctx(), Op.READ, topic("d"))  # implication goes one way only
    add(auth, topic("r"), ace("User:alice", Op.READ))
    assert not allowed(auth, ctx(), Op.WRITE, topic("r"))
    add(auth, topic("all"), ace("User:alice", Op.ALL))
    assert all(allowed(auth, ctx(), op, topic("all")) for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER,
                                                                    Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
    # A DENY of READ does not deny the DESCRIBE that READ would imply (Kafka: deny is op or ALL).
    add(auth, topic("rd"), ace("User:alice", Op.DESCRIBE), ace("User:alice", Op.READ, DENY))
    assert allowed(auth, ctx(), Op.DESCRIBE, topic("rd"))
    assert not allowed(auth, ctx(), Op.READ, topic("rd"))


def test_removing_acls_updates_the_index(auth: AclAuthorizer) -> None:
    a, b = ace("User:alice", Op.READ), ace("User:alice", Op.READ, DENY)
    add(auth, topic("abc", PT.PREFIXED), a)
    add(auth, topic("ab", PT.PREFIXED), b)
    assert not allowed(auth, ctx(), Op.READ, topic("abcd"))
    remove(auth, topic("ab", PT.PREFIXED), b)
    assert allowed(auth, ctx(), Op.READ, topic("abcd"))
    remove(auth, topic("abc", PT.PREFIXED), a)
    assert not allowed(auth, ctx(), Op.READ, topic("abcd"))
    assert auth.cache.acl_count == 0 and auth.cache.patterns() == []


def test_only_literal_resources_can_be_authorized(auth: AclAuthorizer) -> None:
    with pytest.raises(ValueError, match="Only literal"):
        auth.authorize(ctx(), [Action(Op.READ, topic("t", PT.PREFIXED))])


def test_ipv6_hosts_compare_in_javas_form(auth: AclAuthorizer) -> None:
    assert java_host_address("::1") == "0:0:0:0:0:0:0:1"
    assert java_host_address("fe80::a:0:12") == "fe80:0:0:0:0:a:0:12"
    assert java_host_address("::ffff:10.0.0.1") == "10.0.0.1"
    assert java_host_address("10.0.0.1") == "10.0.0.1"
    add(auth, topic("t"), ace("User:alice", Op.READ, host="0:0:0:0:0:0:0:1"))
    assert allowed(auth, ctx(host="::1"), Op.READ, topic("t"))


# -- authorize_by_resource_type (Kafka's default Authorizer implementation) --------------------------------


def test_by_resource_type_allow_then_deny(auth: AclAuthorizer) -> None:
    r = topic("sb1")
    allow_read, deny_read = ace("User:user1", Op.READ, host=HOST1), ace("User:user1", Op.READ, DENY, host=HOST1)
    c = ctx("user1", HOST1)
    assert not by_type(auth, c, Op.READ, RT.TOPIC)
    add(auth, r, allow_read)
    assert by_type(auth, c, Op.READ, RT.TOPIC)
    add(auth, r, deny_read)
    assert not by_type(auth, c, Op.READ, RT.TOPIC)
    remove(auth, r, deny_read)
    assert by_type(auth, c, Op.READ, RT.TOPIC)
    assert not by_type(auth, c, Op.WRITE, RT.TOPIC)  # no implications here
    assert not by_type(auth, c, Op.READ, RT.GROUP)


def test_by_resource_type_unrelated_deny_does_not_dominate(auth: AclAuthorizer) -> None:
    r1, r2, r3 = topic("sb1"), topic("sb2"), group("s", PT.PREFIXED)
    add(auth, r1, ace("User:user1", Op.READ, DENY, HOST1), ace("User:user2", Op.READ, DENY, HOST1),
        ace("User:user1", Op.WRITE, DENY, HOST2), ace("User:user2", Op.READ, DENY, HOST2),
        ace("User:user1", Op.READ, ALLOW, HOST2))
    add(auth, r2, ace("User:user1", Op.READ, DENY, HOST2))
    add(auth, r3, ace("User:user1", Op.READ, DENY, HOST2))
    assert not by_type(auth, ctx("user1", HOST1), Op.READ, RT.TOPIC)
    assert not by_type(auth, ctx("user1", HOST1), Op.READ, RT.GROUP)
    assert not by_type(auth, ctx("user1", HOST1), Op.READ, RT.TRANSACTIONAL_ID)
    assert by_type(auth, ctx("user1", HOST2), Op.READ, RT.TOPIC)


def test_by_resource_type_prefixed_deny_dominates(auth: AclAuthorizer) -> None:
    allow_ace, deny_ace = ace("User:user1", Op.READ, host=HOST1), ace("User:user1", Op.READ, DENY, host=HOST1)
    c = ctx("user1", HOST1)
    add(auth, group("abcde", PT.PREFIXED), allow_ace)
    assert by_type(auth, c, Op.READ, RT.GROUP)
    add(auth, group("abcd", PT.PREFIXED), deny_ace)
    assert not by_type(auth, c, Op.READ, RT.GROUP)
    add(auth, group("abc", PT.PREFIXED), allow_ace)
    assert by_type(auth, c, Op.READ, RT.GROUP)
    add(auth, group("a", PT.PREFIXED), deny_ace)
    assert not by_type(auth, c, Op.READ, RT.GROUP)
    add(auth, group("ab", PT.PREFIXED), allow_ace)
    assert not by_type(auth, c, Op.READ, RT.GROUP)


def test_by_resource_type_wildcard_deny_dominates(auth: AclAuthorizer) -> None:
    allow_ace, deny_ace = ace("User:user1", Op.WRITE, host=HOST1), ace("User:user1", Op.WRITE, DENY, host=HOST1)
    c = ctx("user1", HOST1)
    add(auth, group("hello", PT.PREFIXED), allow_ace)
    assert by_type(auth, c, Op.WRITE, RT.GROUP)
    add(auth, group("*"), deny_ace)
    assert not by_type(auth, c, Op.WRITE, RT.GROUP)
    add(auth, group("*"), allow_ace)
    add(auth, group("aloha"), allow_ace)
    assert not by_type(auth, c, Op.WRITE, RT.GROUP)


def test_by_resource_type_all_operation_hosts_and_principals(auth: AclAuthorizer) -> None:
    c1 = ctx("user1", HOST1)
    r1, r2 = topic("sb1"), topic("sb2")
    add(auth, r1, ace("User:user1", Op.WRITE, DENY, HOST1), ace("User:user1", Op.ALL, ALLOW, HOST1))
    assert by_type(auth, c1, Op.READ, RT.TOPIC)
    add(auth, r1, ace("User:user1", Op.ALL, DENY, HOST1))
    assert not by_type(auth, c1, Op.READ, RT.TOPIC)
    add(auth, r2, ace("User:*", Op.READ, ALLOW, "*"))
    assert by_type(auth, ctx("user2", HOST2), Op.READ, RT.TOPIC)
    add(auth, r2, ace("User:*", Op.READ, DENY, HOST2))
    assert not by_type(auth, ctx("user2", HOST2), Op.READ, RT.TOPIC)
    assert by_type(auth, ctx("user2", HOST1), Op.READ, RT.TOPIC)


def test_by_resource_type_super_users_and_allow_everyone(auth: AclAuthorizer) -> None:
    for rt in (RT.TOPIC, RT.GROUP, RT.CLUSTER, RT.TRANSACTIONAL_ID):
        add(auth, ResourcePattern(rt, "*"), ace("User:*", Op.ALL, DENY))
    assert by_type(auth, ctx("admin"), Op.READ, RT.TOPIC)
    assert not by_type(auth, ctx("alice"), Op.READ, RT.TOPIC)
    assert by_type(AclAuthorizer(allow_everyone_if_no_acl_found=True), ctx(), Op.IDEMPOTENT_WRITE, RT.CLUSTER)
    with pytest.raises(ValueError):
        auth.authorize_by_resource_type(ctx(), Op.READ, RT.ANY)
    with pytest.raises(ValueError):
        auth.authorize_by_resource_type(ctx(), Op.ANY, RT.TOPIC)


# -- authorized operations bit field -----------------------------------------------------------------------


def test_authorized_operations_bits(auth: AclAuthorizer) -> None:
    add(auth, topic("t"), ace("User:alice", Op.READ), ace("User:alice", Op.ALTER_CONFIGS))
    bits = authorized_operations(auth, ctx(), RT.TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    every_topic_op = authorized_operations(None, ctx(), RT.TOPIC, "t")
    assert every_topic_op == sum(1 << op for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                                                     Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
    assert authorized_operations(auth, ctx("admin"), RT.CLUSTER, "kafka-cluster") == sum(
        1 << op for op in (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                           Op.ALTER, Op.DESCRIBE))
    assert authorized_operations(auth, ctx(), RT.GROUP, "g") == 0


# -- filters (DescribeAcls / DeleteAcls) ---------------------------------------------------------------------


def test_pattern_filters() -> None:
    literal, wildcard, prefixed = topic("orders"), topic("*"), topic("ord", PT.PREFIXED)

    def f(rt: ResourceType, name: str | None, pt: PatternType) -> ResourcePatternFilter:
        return ResourcePatternFilter(rt, name, pt)

    match = f(RT.TOPIC, "orders", PT.MATCH)
    assert match.matches(literal) and match.matches(wildcard) and match.matches(prefixed)
    assert not match.matches(topic("ord"))  # a literal "ord" does not apply to "orders"
    assert match.matches(topic("orders", PT.PREFIXED))  # a prefix may be the whole name
    assert not f(RT.TOPIC, "ord", PT.MATCH).matches(literal)
    any_pt = f(RT.TOPIC, "orders", PT.ANY)
    assert any_pt.matches(literal) and any_pt.matches(topic("orders", PT.PREFIXED)) and not any_pt.matches(wildcard)
    assert f(RT.ANY, None, PT.ANY).matches(group("g"))
    assert not f(RT.GROUP, None, PT.ANY).matches(literal)
    assert f(RT.TOPIC, "ord", PT.PREFIXED).matches(prefixed) and not f(RT.TOPIC, "ord", PT.LITERAL).matches(prefixed)
    assert f(RT.TOPIC, None, PT.MATCH).matches(prefixed)
    assert f(RT.TOPIC, "x", PT.LITERAL).indefinite_field() is None
    assert f(RT.TOPIC, None, PT.LITERAL).indefinite_field() == "Resource name is NULL."


def test_entry_filters() -> None:
    e = ace("User:alice", Op.READ, ALLOW, HOST1)
    assert AccessControlEntryFilter(None, None, Op.ANY, Perm.ANY).matches(e)
    assert AccessControlEntryFilter("User:alice", HOST1, Op.READ, ALLOW).matches(e)
    assert not AccessControlEntryFilter("User:bob", None, Op.ANY, Perm.ANY).matches(e)
    assert not AccessControlEntryFilter(None, "*", Op.ANY, Perm.ANY).matches(e)  # "*" is a literal host here
    assert not AccessControlEntryFilter(None, None, Op.ALL, Perm.ANY).matches(e)  # ALL is a literal operation
    assert not AccessControlEntryFilter(None, None, Op.ANY, DENY).matches(e)
    binding = AclBinding(topic("t"), e)
    assert AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "t", PT.MATCH),
                            AccessControlEntryFilter(None, None, Op.READ, Perm.ANY)).matches(binding)


def test_binding_validation() -> None:
    ok = AclBinding(topic("t"), ace("User:alice", Op.READ))
    assert binding_problem(ok) is None
    assert binding_problem(AclBinding(topic("a/b"), ace("User:alice", Op.READ))) == \
        "ACL binding contains invalid resource name: a/b"
    assert binding_problem(AclBinding(topic("t", PT.MATCH), ace("User:alice", Op.READ))) == "patternType must not be MATCH"
    assert binding_problem(AclBinding(topic("t"), ace("User:alice", Op.ANY))) == "operation must not be ANY"
    assert "principalType:principalName" in (binding_problem(AclBinding(topic("t"), ace("alice", Op.READ))) or "")


def test_acls_lists_what_a_filter_matches(auth: AclAuthorizer) -> None:
    add(auth, topic("orders"), ace("User:alice", Op.READ))
    add(auth, topic("ord", PT.PREFIXED), ace("User:bob", Op.WRITE))
    add(auth, group("g"), ace("User:alice", Op.READ))
    alice = AclBindingFilter(ResourcePatternFilter(RT.ANY, None, PT.ANY),
                             AccessControlEntryFilter("User:alice", None, Op.ANY, Perm.ANY))
    assert {b.pattern for b in auth.acls(alice)} == {topic("orders"), group("g")}
    applying = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "orders", PT.MATCH),
                                AccessControlEntryFilter(None, None, Op.ANY, Perm.ANY))
    assert {b.pattern for b in auth.acls(applying)} == {topic("orders"), topic("ord", PT.PREFIXED)}


# -- ZooKeeper encodings (Kafka's exact layout) -------------------------------------------------------------


def test_znode_paths_and_json() -> None:
    assert resource_path(topic("orders")) == "/kafka-acl/Topic/orders"
    assert resource_path(ResourcePattern(RT.TRANSACTIONAL_ID, "tx-", PT.PREFIXED)) == \
        "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    assert resource_path(ResourcePattern(RT.CLUSTER, "kafka-cluster")) == "/kafka-acl/Cluster/kafka-cluster"
    data = encode_acls(frozenset({ace("User:alice", Op.READ)}))
    assert data == b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",' \
                   b'"host":"*"}]}'
    entries = frozenset({ace("User:alice", Op.DESCRIBE_CONFIGS, DENY, HOST1), ace("User:*", Op.IDEMPOTENT_WRITE)})
    assert decode_acls(encode_acls(entries)) == entries
    assert b'"operation":"DescribeConfigs"' in encode_acls(entries)
    # Older writers used upper case names; Kafka reads them case-insensitively.
    assert decode_acls(b'{"version":1,"acls":[{"principal":"User:a","permissionType":"ALLOW","operation":"READ",'
                       b'"host":"*"}]}') == {ace("User:a", Op.READ)}


def test_change_notifications() -> None:
    assert encode_change(topic("orders")) == b"TOPIC:orders"
    assert decode_change(LITERAL_CHANGE_PATH, b"Topic:a:b") == topic("a:b")
    prefixed = ResourcePattern(RT.GROUP, "g-", PT.PREFIXED)
    assert encode_change(prefixed) == b'{"version":1,"resourceType":"GROUP","name":"g-","patternType":"PREFIXED"}'
    assert decode_change(EXTENDED_CHANGE_PATH, encode_change(prefixed)) == prefixed


# -- the authorizer log -------------------------------------------------------------------------------------


def test_audit_log_lines(auth: AclAuthorizer, caplog: pytest.LogCaptureFixture) -> None:
    add(auth, topic("t"), ace("User:alice", Op.READ))
    caplog.set_level(logging.DEBUG, logger="kafka.authorizer.logger")
    auth.authorize(ctx(api=ApiKey.FETCH), [Action(Op.READ, topic("t"))])
    auth.authorize(ctx(api=ApiKey.PRODUCE), [Action(Op.WRITE, topic("t"), reference_count=2)])
    auth.authorize(ctx(api=ApiKey.METADATA), [Action(Op.WRITE, topic("t"), log_if_denied=False)])
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.getMessage().startswith("Principal =")]
    assert lines == [
        ("DEBUG", "Principal = User:alice is Allowed Operation = Read from host = 192.168.1.1 on resource = "
                  "Topic:LITERAL:t for request = Fetch with resourceRefCount = 1"),
        ("INFO", "Principal = User:alice is Denied Operation = Write from host = 192.168.1.1 on resource = "
                 "Topic:LITERAL:t for request = Produce with resourceRefCount = 2"),
    ]
