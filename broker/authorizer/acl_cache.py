"""The authorizer's in-memory ACL index: every decision is answered from here.

ZooKeeper holds one znode per resource pattern; this cache holds the same, indexed for the two
questions the authorizer asks on the request path:

* "which ACL entries apply to resource R?" -- the literal pattern named R, the literal wildcard ``*``
  and the prefixed patterns that R starts with. Literal lookups are dict hits; prefixed lookups try
  only the prefix lengths that exist for the resource type (usually a handful), never a scan of all
  patterns. Within one pattern, entries are grouped by principal, so a decision looks only at the
  entries of the caller and of ``User:*``.
* "does any pattern of type T allow/deny operation O to principal P from host H?" -- for
  ``authorize_by_resource_type``: the names of the patterns per (type, pattern type, permission,
  principal, host, operation), Kafka's ``resourceCache``.

Updates replace a pattern's entries wholesale (ZooKeeper is the source of truth; a change
notification makes the authorizer re-read one pattern), and they happen on the broker's event loop,
as do the lookups, so no lock is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from broker.authorizer.acls import AccessControlEntry, AclBinding
from broker.authorizer.api import (
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

UNKNOWN_VERSION = -1  # no znode: the pattern has no ACLs


@dataclass(frozen=True, slots=True)
class VersionedAcls:
    """A pattern's entries and the version of the znode they were read from (conditional updates)."""

    entries: frozenset[AccessControlEntry]
    version: int = UNKNOWN_VERSION

    @property
    def exists(self) -> bool:
        return self.version != UNKNOWN_VERSION


NO_ACLS = VersionedAcls(frozenset(), UNKNOWN_VERSION)

# principal -> that principal's entries on one pattern
PrincipalIndex = dict[str, tuple[AccessControlEntry, ...]]
# (resource type, pattern type, permission, principal, host, operation)
TypeKey = tuple[ResourceType, PatternType, AclPermissionType, str, str, AclOperation]


def _by_principal(entries: frozenset[AccessControlEntry]) -> PrincipalIndex:
    grouped: dict[str, list[AccessControlEntry]] = {}
    for e in entries:
        grouped.setdefault(e.principal, []).append(e)
    # DENY entries first: the authorizer looks for a DENY before any ALLOW.
    return {p: tuple(sorted(es, key=lambda e: e.permission_type != AclPermissionType.DENY))
            for p, es in grouped.items()}


class AclCache:
    def __init__(self) -> None:
        self._acls: dict[ResourcePattern, VersionedAcls] = {}
        self._literal: dict[ResourceType, dict[str, PrincipalIndex]] = {}
        self._prefixed: dict[ResourceType, dict[str, PrincipalIndex]] = {}
        # resource type -> {prefix length: number of prefixed patterns of that length}
        self._prefix_lengths: dict[ResourceType, dict[int, int]] = {}
        self._sorted_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._by_type: dict[TypeKey, set[str]] = {}
        self.acl_count = 0

    # -- reads ---------------------------------------------------------------------------------------

    def get(self, pattern: ResourcePattern) -> VersionedAcls:
        return self._acls.get(pattern, NO_ACLS)

    def __contains__(self, pattern: ResourcePattern) -> bool:
        return pattern in self._acls

    def patterns(self) -> list[ResourcePattern]:
        return list(self._acls)

    def bindings(self) -> Iterator[AclBinding]:
        for pattern, versioned in self._acls.items():
            for entry in versioned.entries:
                yield AclBinding(pattern, entry)

    def matching(self, resource_type: ResourceType, name: str) -> list[PrincipalIndex]:
        """The entry indexes of every pattern that applies to the literal resource (type, name)."""
        found: list[PrincipalIndex] = []
        literal = self._literal.get(resource_type)
        if literal:
            exact = literal.get(name)
            if exact is not None:
                found.append(exact)
            if name != WILDCARD_RESOURCE:
                wildcard = literal.get(WILDCARD_RESOURCE)
                if wildcard is not None:
                    found.append(wildcard)
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            n = len(name)
            for length in self._sorted_lengths[resource_type]:
                if length > n:
                    break
                hit = prefixed.get(name[:length])
                if hit is not None:
                    found.append(hit)
        return found

    def names_for(self, key: TypeKey) -> set[str] | None:
        return self._by_type.get(key)

    # -- updates -------------------------------------------------------------------------------------

    def update(self, pattern: ResourcePattern, acls: VersionedAcls) -> None:
        """Make ``acls`` the entries of ``pattern`` (none: the pattern is forgotten)."""
        old = self._acls.get(pattern, NO_ACLS).entries
        new = acls.entries
        rt, pt = pattern.resource_type, pattern.pattern_type
        for e in new - old:
            self._by_type.setdefault((rt, pt, e.permission_type, e.principal, e.host, e.operation),
                                     set()).add(pattern.name)
        for e in old - new:
            key = (rt, pt, e.permission_type, e.principal, e.host, e.operation)
            names = self._by_type.get(key)
            if names is not None:
                names.discard(pattern.name)
                if not names:
                    del self._by_type[key]
        self.acl_count += len(new) - len(old)
        table = self._literal if pt == PatternType.LITERAL else self._prefixed
        if new:
            self._acls[pattern] = acls
            names_of_type = table.setdefault(rt, {})
            if pt == PatternType.PREFIXED and pattern.name not in names_of_type:
                self._count_prefix(rt, len(pattern.name), +1)
            names_of_type[pattern.name] = _by_principal(new)
        else:
            self._acls.pop(pattern, None)
            names_of_type = table.get(rt, {})
            if names_of_type.pop(pattern.name, None) is not None and pt == PatternType.PREFIXED:
                self._count_prefix(rt, len(pattern.name), -1)

    def _count_prefix(self, rt: ResourceType, length: int, delta: int) -> None:
        counts = self._prefix_lengths.setdefault(rt, {})
        counts[length] = counts.get(length, 0) + delta
        if counts[length] <= 0:
            del counts[length]
        self._sorted_lengths[rt] = tuple(sorted(counts))
