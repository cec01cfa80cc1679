"""Kafka's ZooKeeper-mode ACL authorizer (kafka.security.authorizer.AclAuthorizer).

A request is allowed when the principal is a super user (``super.users``), or when no ACL applies to
the resource and ``allow.everyone.if.no.acl.found`` is true, or when no DENY ACL matches and an
ALLOW ACL does. An ACL applies to a resource through its LITERAL name, the LITERAL wildcard ``*`` or
a PREFIXED pattern the name starts with; it matches a request when its principal is the caller's or
``User:*``, its host is the caller's address or ``*``, and its operation is the one asked for or
ALL. An ALLOW for READ, WRITE, DELETE or ALTER also allows DESCRIBE, and one for ALTER_CONFIGS
allows DESCRIBE_CONFIGS.

Decisions come from ``AclCache`` (memory); ZooKeeper is read only at start-up, when a change
notification names a pattern, and by the ACL APIs. Changes made through any broker (or by
kafka-acls.sh writing ZooKeeper directly) reach every broker through the notification znodes.

Every decision is logged to ``kafka.authorizer.logger`` as Kafka logs it: DEBUG for allowed, INFO for
denied, TRACE (level 5) when the action asked not to be logged (authorized-operations bits,
filtering of what a client may see).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.authorizer.acl_cache import NO_ACLS, AclCache, PrincipalIndex, VersionedAcls
from broker.authorizer.acls import (
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    binding_problem,
    operation_name,
    resource_type_name,
)
from broker.authorizer.api import (
    ACL_AUTHORIZER_CLASS,
    WILDCARD_HOST,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
)
from broker.authorizer.zk_acl_store import CHANGE_EXPIRATION_MS, CHANGE_PATHS, ZkAclStore
from broker.security.principal import KafkaPrincipal
from broker.zk_change_follower import ZkChangeFollower
from protocol.api_versions import SUPPORTED
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from config.registry import BrokerConfig

log = logging.getLogger(__name__)
authorizer_log = logging.getLogger("kafka.authorizer.logger")
TRACE = 5
logging.addLevelName(TRACE, "TRACE")

# The class names authorizer.class.name may hold: Kafka 3.9's ZooKeeper-mode ACL authorizer.
ACCEPTED_CLASS_NAMES = frozenset({ACL_AUTHORIZER_CLASS})
MAX_UPDATE_RETRIES = 10  # conditional ZooKeeper updates of one pattern (Kafka's maxUpdateRetries)
RETRY_BACKOFF_MS, RETRY_BACKOFF_JITTER_MS = 100, 50

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALL = AclOperation.ALL

# An ALLOW of any of these operations also allows the key (Kafka's ACL inheritance).
_ALLOWING: dict[AclOperation, tuple[AclOperation, ...]] = {
    AclOperation.DESCRIBE: (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                            AclOperation.ALTER, ALL),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, ALL),
}

ZkCall = Callable[..., Awaitable[Any]]


@functools.lru_cache(maxsize=4096)
def java_host_address(host: str) -> str:
    """The client address as Java's InetAddress.getHostAddress writes it, which is what ACL hosts
    are compared with: IPv4 dotted quads unchanged, IPv6 as eight uncompressed hex groups."""
    if ":" not in host:
        return host
    try:
        addr = ipaddress.IPv6Address(host.split("%", 1)[0])
    except ValueError:
        return host
    if addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return ":".join(f"{int(group, 16):x}" for group in addr.exploded.split(":"))


def parse_super_users(value: str | None) -> frozenset[str]:
    if not value or not value.strip():
        return frozenset()
    return frozenset(str(KafkaPrincipal.parse(s.strip())) for s in value.split(";") if s.strip())


@dataclass(slots=True)
class AclResult:
    """The outcome of one ACL creation (or of one deletion of a matching binding)."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(slots=True)
class AclDeleteResult:
    """One DeleteAcls filter's outcome: each binding it matched and whether deleting it worked."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    deleted: list[tuple[AclBinding, AclResult]] = field(default_factory=list)


class AclAuthorizer:
    """Implements ``broker.authorizer.api.Authorizer`` from an in-memory index of ZooKeeper's ACLs."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 store: ZkAclStore | None = None, zk_call: ZkCall | None = None) -> None:
        self.super_users = frozenset(str(KafkaPrincipal.parse(s)) for s in super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.cache = AclCache()
        self.store = store
        self.zk_call = zk_call
        self._lock = asyncio.Lock()  # one ACL update (or notification) at a time, as Kafka's lock
        self._changes: AclChangeListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reloads: set[asyncio.Task[None]] = set()

    @classmethod
    def from_config(cls, config: BrokerConfig, store: ZkAclStore | None = None,
                    zk_call: ZkCall | None = None) -> AclAuthorizer:
        return cls(parse_super_users(config.get("super.users")), bool(config.get("allow.everyone.if.no.acl.found")),
                   store, zk_call)

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Create the ZooKeeper layout, watch change notifications, then load every ACL (listening
        first: a change made while loading is not missed, at worst read twice)."""
        assert self.store is not None and self.zk_call is not None
        self._loop = loop
        await self.zk_call(self.store.create_acl_paths)
        self._changes = AclChangeListener(self.store, self.zk_call, loop, self._process_change)
        await self._changes.start()
        await self._reload_all()
        # A new ZooKeeper session has lost our watches, and notifications may have expired meanwhile:
        # then everything is read again (Kafka's listener re-processes after a new session too).
        self.store.zk.add_state_listener(self._on_zk_state)
        log.info("ACL authorizer started with %d ACLs on %d resource patterns", self.cache.acl_count,
                 len(self.cache.patterns()))

    async def close(self) -> None:
        if self.store is not None:
            self.store.zk.remove_state_listener(self._on_zk_state)
        for task in list(self._reloads):
            task.cancel()
        if self._changes is not None:
            await self._changes.stop()
            self._changes = None

    async def _reload_all(self) -> None:
        assert self.store is not None and self.zk_call is not None
        async with self._lock:  # no ACL update interleaves with the reload
            loaded = await self.zk_call(self.store.load_all)
            for pattern in self.cache.patterns():
                if pattern not in loaded:
                    self.cache.update(pattern, NO_ACLS)
            for pattern, versioned in loaded.items():
                self.cache.update(pattern, versioned)

    def _on_zk_state(self, state: str) -> None:
        # kazoo's thread: hand over to the loop.
        loop = self._loop
        if state == "new_session" and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._after_new_session)

    def _after_new_session(self) -> None:
        if self._changes is not None:
            self._changes.wake()

        async def reload() -> None:
            try:
                await self._reload_all()
                log.info("reloaded %d ACLs after a new ZooKeeper session", self.cache.acl_count)
            except Exception:
                log.exception("reloading ACLs after a new ZooKeeper session failed")

        task = asyncio.ensure_future(reload())
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    # -- decisions -------------------------------------------------------------------------------------

    def authorize(self, ctx: RequestContext, actions: Sequence[Action]) -> list[AuthorizationResult]:
        principal = str(ctx.principal)
        host = java_host_address(ctx.client_host)
        return [self._authorize_action(ctx, principal, host, action) for action in actions]

    def _authorize_action(self, ctx: RequestContext, principal: str, host: str, action: Action) -> AuthorizationResult:
        pattern = action.pattern
        if pattern.pattern_type != PatternType.LITERAL:
            raise ValueError(f"Only literal resources are supported. Got: {pattern.pattern_type.name}")
        if principal in self.super_users:
            authorizer_log.debug("principal = %s is a super user, allowing operation without checking acls.",
                                 principal)
            authorized = True
        else:
            authorized = self._acls_allow(principal, host, action.operation, pattern)
        self._audit(ctx, principal, host, action, authorized)
        return ALLOWED if authorized else DENIED

    def _acls_allow(self, principal: str, host: str, op: AclOperation, pattern: ResourcePattern) -> bool:
        indexes = self.cache.matching(pattern.resource_type, pattern.name)
        if not indexes:
            authorizer_log.debug("No acl found for resource %s, authorized = %s", pattern,
                                 self.allow_everyone_if_no_acl_found)
            return self.allow_everyone_if_no_acl_found
        if _find(indexes, principal, host, DENY, (op, ALL), op, pattern):
            return False
        return _find(indexes, principal, host, ALLOW, _ALLOWING.get(op, (op, ALL)), op, pattern)

    def authorize_by_resource_type(self, ctx: RequestContext, operation: AclOperation,
                                   resource_type: ResourceType) -> AuthorizationResult:
        """Is the principal allowed ``operation`` on at least one resource of this type? As Kafka's
        default Authorizer.authorizeByResourceType: first the question for an arbitrary name (super
        users, allow.everyone.if.no.acl.found, wildcard and prefix ACLs that cover every name), then
        an ALLOW on some literal or prefixed pattern that no DENY (literal, or prefixed on a prefix
        of it) overrides. Operations are matched exactly or through ALL, without implications."""
        _check_by_resource_type_args(operation, resource_type)
        probe = Action(operation, ResourcePattern(resource_type, "hardcode", PatternType.LITERAL), 0, True, False)
        if self.authorize(ctx, [probe])[0] == ALLOWED:
            return ALLOWED
        principal = str(ctx.principal)
        host = java_host_address(ctx.client_host)
        keys = [(p, h, o) for p in (principal, WILDCARD_PRINCIPAL) for h in (host, WILDCARD_HOST)
                for o in (operation, ALL)]
        cache = self.cache

        def names(pt: PatternType, perm: AclPermissionType) -> set[str]:
            out: set[str] = set()
            for p, h, o in keys:
                found = cache.names_for((resource_type, pt, perm, p, h, o))
                if found:
                    out |= found
            return out

        deny_literal = names(PatternType.LITERAL, DENY)
        result = DENIED
        if WILDCARD_RESOURCE not in deny_literal:
            allow_literal = names(PatternType.LITERAL, ALLOW)
            if WILDCARD_RESOURCE in allow_literal:
                result = ALLOWED
            else:
                deny_prefixed = names(PatternType.PREFIXED, DENY)

                def dominated(name: str) -> bool:
                    return any(name[:i] in deny_prefixed for i in range(1, len(name) + 1))

                if (any(n not in deny_literal and not dominated(n) for n in allow_literal)
                        or any(not dominated(n) for n in names(PatternType.PREFIXED, ALLOW))):
                    result = ALLOWED
        action = Action(operation, ResourcePattern(resource_type, "NONE", PatternType.UNKNOWN), 0, True, True)
        self._audit(ctx, principal, host, action, result == ALLOWED)
        return result

    def _audit(self, ctx: RequestContext, principal: str, host: str, action: Action, authorized: bool) -> None:
        if authorized:
            level = logging.DEBUG if action.log_if_allowed else TRACE
        else:
            level = logging.INFO if action.log_if_denied else TRACE
        if not authorizer_log.isEnabledFor(level):
            return
        p = action.pattern
        entry = SUPPORTED.get(ctx.api_key)  # type: ignore[call-overload]
        api = entry[2] if entry is not None else str(ctx.api_key)
        authorizer_log.log(
            level, "Principal = %s is %s Operation = %s from host = %s on resource = %s:%s:%s for request = %s "
            "with resourceRefCount = %d", principal, "Allowed" if authorized else "Denied",
            operation_name(action.operation), host, resource_type_name(p.resource_type), p.pattern_type.name, p.name,
            api, action.reference_count)

    # -- the ACL APIs --------------------------------------------------------------------------------

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """Every ACL the filter matches (DescribeAcls), from the cache."""
        return [b for b in self.cache.bindings() if binding_filter.matches(b)]

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclResult]:
        results: list[AclResult | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            problem = binding_problem(binding)
            if problem is not None:
                results[i] = AclResult(ErrorCode.INVALID_REQUEST, f"Failed to create ACL: {problem}")
            else:
                by_pattern.setdefault(binding.pattern, []).append(i)
        async with self._lock:
            for pattern, indexes in by_pattern.items():
                new = frozenset(bindings[i].entry for i in indexes)
                try:
                    await self._update_pattern(pattern, lambda current, new=new: current | new)  # type: ignore[misc]
                    outcome = AclResult()
                except Exception as e:  # one pattern failing does not fail the others
                    log.warning("creating ACLs on %s failed: %s", pattern, e)
                    outcome = AclResult(ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or type(e).__name__)
                for i in indexes:
                    results[i] = outcome
        return [r if r is not None else AclResult() for r in results]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """Delete what each filter matches; a binding matched by several filters is reported once, by
        the first. Patterns named exactly by a filter are read from ZooKeeper even if this broker has
        not heard of them yet (Kafka's guarantee for definite filters)."""
        out = [AclDeleteResult() for _ in filters]
        async with self._lock:
            candidates = dict.fromkeys(self.cache.patterns())
            for f in filters:
                candidates.update(dict.fromkeys(_definite_patterns(f)))
            for pattern in candidates:
                matching = [(i, f) for i, f in enumerate(filters) if f.pattern_filter.matches(pattern)]
                if not matching:
                    continue
                deleted: dict[AclBinding, int] = {}

                def remove(current: frozenset[AccessControlEntry], pattern: ResourcePattern = pattern,
                           matching: list[tuple[int, AclBindingFilter]] = matching,
                           deleted: dict[AclBinding, int] = deleted) -> frozenset[AccessControlEntry]:
                    deleted.clear()  # a retried update recomputes what it deletes
                    keep = set()
                    for entry in current:
                        index = next((i for i, f in matching if f.entry_filter.matches(entry)), None)
                        if index is None:
                            keep.add(entry)
                        else:
                            deleted[AclBinding(pattern, entry)] = index
                    return frozenset(keep)

                try:
                    await self._update_pattern(pattern, remove)
                    outcome = AclResult()
                except Exception as e:
                    log.warning("deleting ACLs on %s failed: %s", pattern, e)
                    outcome = AclResult(ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or type(e).__name__)
                for binding, index in deleted.items():
                    out[index].deleted.append((binding, outcome))
        return out

    async def _update_pattern(self, pattern: ResourcePattern,
                              change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]) -> bool:
        """Apply ``change`` to the pattern's ACLs with conditional ZooKeeper writes, retrying on a
        concurrent change; then update the cache and tell every broker. True if anything changed."""
        assert self.store is not None and self.zk_call is not None
        store, zk_call = self.store, self.zk_call
        current = self.cache.get(pattern) if pattern in self.cache else await zk_call(store.get_acls, pattern)
        for attempt in range(MAX_UPDATE_RETRIES + 1):
            new = change(current.entries)
            if new:
                if current.exists:
                    ok, version = await zk_call(store.conditional_set, pattern, new, current.version)
                else:
                    ok, version = await zk_call(store.create_if_absent, pattern, new)
            elif current.exists:
                ok, version = await zk_call(store.conditional_delete, pattern, current.version), -1
            else:
                ok, version = True, -1  # nothing stored, nothing to delete
            if ok:
                break
            log.debug("ACLs of %s changed meanwhile (attempt %d); re-reading", pattern, attempt + 1)
            await asyncio.sleep((RETRY_BACKOFF_MS + random.randrange(RETRY_BACKOFF_JITTER_MS)) / 1000.0)
            current = await zk_call(store.get_acls, pattern)
        else:
            raise RuntimeError(f"Failed to update ACLs for {pattern} after trying a maximum of "
                               f"{MAX_UPDATE_RETRIES} times")
        updated = VersionedAcls(new, version) if new else NO_ACLS
        self.cache.update(pattern, updated)
        if new == current.entries:
            return False
        log.info("Updated ACLs for %s with new version %d", pattern, version)
        await zk_call(store.create_change_notification, pattern)
        return True

    async def _process_change(self, pattern: ResourcePattern) -> None:
        assert self.store is not None and self.zk_call is not None
        async with self._lock:
            versioned = await self.zk_call(self.store.get_acls, pattern)
            log.info("Processing Acl change notification for %s, %d ACLs, zkVersion : %d", pattern,
                     len(versioned.entries), versioned.version)
            self.cache.update(pattern, versioned)


def _find(indexes: list[PrincipalIndex], principal: str, host: str, permission: AclPermissionType,
          operations: tuple[AclOperation, ...], asked: AclOperation, pattern: ResourcePattern) -> bool:
    """Is there an entry with this permission for the caller (or User:*), from its host (or *), for
    one of ``operations``? Looks only at the entries of the two principals on the matching patterns."""
    for index in indexes:
        for p in (principal, WILDCARD_PRINCIPAL):
            for e in index.get(p, ()):
                if (e.permission_type == permission and e.operation in operations
                        and (e.host == host or e.host == WILDCARD_HOST)):
                    if authorizer_log.isEnabledFor(logging.DEBUG):
                        authorizer_log.debug("operation = %s on resource = %s from host = %s is %s based on acl = %s",
                                             asked.name, pattern, host, permission.name, e.describe())
                    return True
    return False


def _definite_patterns(f: AclBindingFilter) -> list[ResourcePattern]:
    pf = f.pattern_filter
    if pf.indefinite_field() is not None or pf.name is None:
        return []
    if pf.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        return [ResourcePattern(pf.resource_type, pf.name, pf.pattern_type)]
    if pf.pattern_type == PatternType.ANY:
        return [ResourcePattern(pf.resource_type, pf.name, PatternType.LITERAL),
                ResourcePattern(pf.resource_type, pf.name, PatternType.PREFIXED)]
    return []


def _check_by_resource_type_args(op: AclOperation, rt: ResourceType) -> None:
    if rt == ResourceType.ANY:
        raise ValueError("Must specify a non-filter resource type for authorizeByResourceType")
    if rt == ResourceType.UNKNOWN:
        raise ValueError("Unknown resource type")
    if op == AclOperation.ANY:
        raise ValueError("Must specify a non-filter operation type for authorizeByResourceType")
    if op == AclOperation.UNKNOWN:
        raise ValueError("Unknown operation type")


class AclChangeListener(ZkChangeFollower):
    """Follows ``/kafka-acl-changes`` and ``/kafka-acl-extended-changes`` (Kafka's
    ZkNodeChangeNotificationListener): each new notification names one pattern, which ``on_change``
    re-reads. Notifications older than 15 minutes are deleted once seen, as every Kafka broker does.

    Watches wake the task on the loop (broker/zk_change_follower.py), which re-lists the children
    (re-arming the watch) with blocking calls run in the executor.
    """

    what = "ACL change notifications"

    def __init__(self, store: ZkAclStore, zk_call: ZkCall, loop: asyncio.AbstractEventLoop,
                 on_change: Callable[[ResourcePattern], Awaitable[None]]) -> None:
        super().__init__(loop)
        self.store = store
        self.zk_call = zk_call
        self.on_change = on_change
        self._last: dict[str, str | None] = {}
        self._created_ms: dict[tuple[str, str], int] = {}

    async def start(self) -> None:
        """Notifications present now are not replayed: the caller loads every ACL next."""
        for path in CHANGE_PATHS:
            names = await self.zk_call(self.store.change_names, path, self._watch)
            self._last[path] = names[-1] if names else None
        self._follow()
        self._wake.set()  # a first pass deletes expired notifications

    async def _process(self) -> None:
        for path in CHANGE_PATHS:
            await self._process_path(path)

    async def _process_path(self, path: str) -> None:
        store = self.store
        names = await self.zk_call(store.change_names, path, self._watch)
        last = self._last.get(path)
        for name in names:
            if last is not None and name <= last:
                continue
            pattern, created_ms = await self.zk_call(store.read_change, path, name)
            self._last[path] = name
            if pattern is None:
                continue
            self._created_ms[(path, name)] = created_ms
            if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or pattern.pattern_type not in (
                    PatternType.LITERAL, PatternType.PREFIXED):
                log.warning("ignoring ACL change notification %s/%s for %s", path, name, pattern)
                continue
            await self.on_change(pattern)
        await self._purge_obsolete(path, names)

    async def _purge_obsolete(self, path: str, names: list[str]) -> None:
        now_ms = int(time.time() * 1000)  # wall clock, as the znodes' ctime is
        live = set(names)
        for key in [k for k in self._created_ms if k[0] == path and k[1] not in live]:
            del self._created_ms[key]
        for name in names:
            created = self._created_ms.get((path, name))
            if created is None:
                created = await self.zk_call(self.store.created_ms, path, name)
                self._created_ms[(path, name)] = created
            if created and created + CHANGE_EXPIRATION_MS < now_ms:
                await self.zk_call(self.store.delete_change, path, name)
                self._created_ms.pop((path, name), None)


def create_authorizer(config: BrokerConfig, store: ZkAclStore | None = None,
                      zk_call: ZkCall | None = None) -> AclAuthorizer | None:
    """The authorizer ``authorizer.class.name`` names: None when empty, Kafka's AclAuthorizer for its
    class name; any other class fails start-up (kafkette cannot load Java classes)."""
    from config.registry import ConfigError

    name = (config.get("authorizer.class.name") or "").strip()
    if not name:
        return None
    if name not in ACCEPTED_CLASS_NAMES:
        raise ConfigError("authorizer.class.name", name,
                          f"Class {name} cannot be found (the only supported authorizer is {ACL_AUTHORIZER_CLASS})")
    try:
        return AclAuthorizer.from_config(config, store, zk_call)
    except ValueError as e:
        raise ConfigError("super.users", config.get("super.users"), str(e)) from None
