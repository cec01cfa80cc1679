"""ACL authorizer benchmark: what one authorization decision costs with 10 and with 1,000 ACLs.

Decisions come from the in-memory index (broker/authorizer/acl_cache.py), so the cost per decision
should not grow with the number of ACLs. Measured, best of several passes (the machine is shared),
for ACL sets of 10 and 1,000 entries built like a real deployment (per-user literal topic ACLs,
prefixed ACLs per team, group ACLs, a few DENY and User:* entries):

1. one ``authorize`` call with one action (a Produce or Fetch to one topic), over a mix of topics
   that are allowed through a literal ACL, through a prefix, denied, or without any ACL;
2. one ``authorize`` call with 100 actions (a Metadata request listing 100 topics), per topic;
3. ``authorized_operations`` for a topic (8 decisions, Metadata's authorized-operations bits);
4. ``authorize_by_resource_type`` (InitProducerId's "any transactional id" question);
5. for contrast, a decision made the naive way, by scanning every ACL.

Run: ``python -m tests.bench_authorizer`` (also part of ``make bench``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.authorizer import authorized_operations
from broker.authorizer.acl_authorizer import AclAuthorizer
from broker.authorizer.acl_cache import VersionedAcls
from broker.authorizer.acls import AccessControlEntry
from broker.authorizer.api import (
    AclOperation,
    AclPermissionType,
    Action,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
)
from broker.security.principal import KafkaPrincipal
from protocol.api_versions import ApiKey

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
PASSES = 5


def build(n_acls: int) -> AclAuthorizer:
    """An authorizer holding exactly ``n_acls`` ACL entries."""
    auth = AclAuthorizer(super_users=["User:admin"])
    entries: dict[ResourcePattern, set[AccessControlEntry]] = {}

    def add(pattern: ResourcePattern, entry: AccessControlEntry) -> None:
        entries.setdefault(pattern, set()).add(entry)

    # A few fixed ones: a team prefix, a deny, a wildcard-principal read, a group wildcard.
    add(ResourcePattern(ResourceType.TOPIC, "payments-", PatternType.PREFIXED),
        AccessControlEntry("User:user-1", "*", AclOperation.WRITE, ALLOW))
    add(ResourcePattern(ResourceType.TOPIC, "payments-secret", PatternType.LITERAL),
        AccessControlEntry("User:*", "*", AclOperation.ALL, DENY))
    add(ResourcePattern(ResourceType.TOPIC, "public", PatternType.LITERAL),
        AccessControlEntry("User:*", "*", AclOperation.READ, ALLOW))
    add(ResourcePattern(ResourceType.GROUP, "*", PatternType.LITERAL),
        AccessControlEntry("User:user-1", "*", AclOperation.READ, ALLOW))
    i = 0
    while sum(len(v) for v in entries.values()) < n_acls:
        user = f"User:user-{i % 97}"
        kind = i % 4
        if kind == 0:
            add(ResourcePattern(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL),
                AccessControlEntry(user, "*", AclOperation.READ, ALLOW))
        elif kind == 1:
            add(ResourcePattern(ResourceType.TOPIC, f"team-{i % 50}-", PatternType.PREFIXED),
                AccessControlEntry(user, "*", AclOperation.WRITE, ALLOW))
        elif kind == 2:
            add(ResourcePattern(ResourceType.GROUP, f"group-{i}", PatternType.LITERAL),
                AccessControlEntry(user, "*", AclOperation.READ, ALLOW))
        else:
            add(ResourcePattern(ResourceType.TOPIC, f"topic-{i - 3}", PatternType.LITERAL),
                AccessControlEntry(user, f"10.0.{i % 250}.1", AclOperation.WRITE, DENY))
        i += 1
    for pattern, es in entries.items():
        auth.cache.update(pattern, VersionedAcls(frozenset(es), 0))
    assert auth.cache.acl_count == n_acls, auth.cache.acl_count
    return auth


CTX = RequestContext(KafkaPrincipal("User", "user-1"), "10.1.2.3", "PLAINTEXT", "PLAINTEXT",
                     api_key=ApiKey.PRODUCE, api_version=9)
TOPICS = ["payments-eu", "payments-secret", "public", "topic-0", "team-7-orders", "no-acls-here", "topic-4",
          "a-rather-long-topic-name-with-no-acl-that-matches-anything"]
ACTIONS = [Action(AclOperation.WRITE, ResourcePattern(ResourceType.TOPIC, t)) for t in TOPICS]
METADATA = [Action(AclOperation.DESCRIBE, ResourcePattern(ResourceType.TOPIC, f"topic-{i}"), 1, False, False)
            for i in range(100)]


def per_call_ns(fn: Callable[[], object], calls: int) -> float:
    best = float("inf")
    for _ in range(PASSES):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e9


def naive_allowed(auth: AclAuthorizer, action: Action) -> bool:
    """The decision made by scanning every ACL (what the index avoids)."""
    name = action.pattern.name
    matching = [b.entry for b in auth.cache.bindings()
                if b.pattern.resource_type == action.pattern.resource_type
                and ((b.pattern.pattern_type == PatternType.LITERAL and b.pattern.name in (name, "*"))
                     or (b.pattern.pattern_type == PatternType.PREFIXED and name.startswith(b.pattern.name)))
                and b.entry.principal in ("User:user-1", "User:*") and b.entry.host in ("10.1.2.3", "*")]
    if any(e.permission_type == DENY and e.operation in (action.operation, AclOperation.ALL) for e in matching):
        return False
    return any(e.permission_type == ALLOW and e.operation in (action.operation, AclOperation.ALL) for e in matching)


def measure(n_acls: int) -> dict[str, float]:
    auth = build(n_acls)
    expected = [naive_allowed(auth, a) for a in ACTIONS]
    got = [r.value == "allowed" for r in auth.authorize(CTX, ACTIONS)]
    assert got == expected, (got, expected)  # the index answers what a full scan answers
    singles = [[a] for a in ACTIONS]
    k = len(singles)
    counter = iter(range(1 << 62))

    def one() -> None:
        auth.authorize(CTX, singles[next(counter) % k])

    out = {
        "authorize, 1 action": per_call_ns(one, 20_000),
        "authorize, 100 actions (per action)": per_call_ns(lambda: auth.authorize(CTX, METADATA), 200) / 100,
        "authorized_operations (8 ops)": per_call_ns(
            lambda: authorized_operations(auth, CTX, ResourceType.TOPIC, "topic-0"), 5_000),
        "authorize_by_resource_type": per_call_ns(
            lambda: auth.authorize_by_resource_type(CTX, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID), 5_000),
        "naive full scan, 1 action": per_call_ns(lambda: naive_allowed(auth, ACTIONS[0]), 50 if n_acls > 100 else 2_000),
    }
    return out


def main() -> int:
    small, large = measure(10), measure(1000)
    print(f"{'per decision (best of ' + str(PASSES) + ')':42} {'10 ACLs':>12} {'1,000 ACLs':>12} {'ratio':>7}")
    for name in small:
        a, b = small[name], large[name]
        print(f"{name:42} {a / 1000:10.2f}us {b / 1000:10.2f}us {b / a:7.2f}")
    worst = large["authorize, 1 action"]
    if worst > 50_000:
        print(f"FAIL: a decision with 1,000 ACLs takes {worst / 1000:.1f}us")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
