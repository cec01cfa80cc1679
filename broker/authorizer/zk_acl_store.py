"""ACLs in ZooKeeper, laid out exactly as Kafka's ZooKeeper-mode AclAuthorizer lays them out.

* LITERAL patterns: ``/kafka-acl/<ResourceType>/<name>``; PREFIXED patterns:
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` (``Topic``, ``Group``, ``Cluster``,
  ``TransactionalId``, ``DelegationToken``, ``User``). The znode holds
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``.
* Every change writes a sequential notification: ``/kafka-acl-changes/acl_changes_<seq>`` holding
  ``TOPIC:<name>`` for a literal pattern, ``/kafka-acl-extended-changes/acl_changes_<seq>`` holding
  ``{"version":1,"resourceType":"TOPIC","name":"<name>","patternType":"PREFIXED"}`` otherwise. Each
  broker watches both and re-reads the named pattern.
* Updates are conditional on the znode version (create-if-absent, set-if-version, delete-if-version),
  so two brokers (or kafka-acls.sh) changing one pattern at once never lose an entry: the loser
  re-reads and retries.

Kafka's tools read and write the same znodes, so ``kafka-acls.sh --authorizer-properties
zookeeper.connect=...`` and kafkette brokers see each other's ACLs. All functions here block (kazoo):
run them off the event loop.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.authorizer.acl_cache import NO_ACLS, VersionedAcls
from broker.authorizer.acls import (
    CONCRETE_RESOURCE_TYPES,
    AccessControlEntry,
    enum_from_string,
    operation_name,
    parse_operation,
    parse_permission_type,
    parse_resource_type,
    permission_type_name,
    resource_type_name,
)
from broker.authorizer.api import PatternType, ResourcePattern, ResourceType

if TYPE_CHECKING:
    from controller.zk_client import KafkaZkClient

log = logging.getLogger(__name__)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGE_PATH = "/kafka-acl-changes"
EXTENDED_CHANGE_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_PATHS = (LITERAL_CHANGE_PATH, EXTENDED_CHANGE_PATH)
ACL_JSON_VERSION = 1
CHANGE_EVENT_VERSION = 1
# Kafka's ZkNodeChangeNotificationListener deletes notifications older than this once processed.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000

STORED_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)


def store_path(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"Invalid pattern type: {pattern_type.name}")


def type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{store_path(pattern_type)}/{resource_type_name(resource_type)}"


def resource_path(pattern: ResourcePattern) -> str:
    return f"{type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def change_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGE_PATH if pattern_type == PatternType.LITERAL else EXTENDED_CHANGE_PATH


# -- znode contents ----------------------------------------------------------------------------------


def encode_acls(entries: frozenset[AccessControlEntry]) -> bytes:
    acls = [{"principal": e.principal, "permissionType": permission_type_name(e.permission_type),
             "operation": operation_name(e.operation), "host": e.host}
            for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type))]
    return json.dumps({"version": ACL_JSON_VERSION, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """Entries of a resource znode (Kafka's AclEntry.fromBytes); empty data means no entries."""
    if not data:
        return frozenset()
    doc = json.loads(data)
    if doc.get("version") != ACL_JSON_VERSION:
        raise ValueError(f"unsupported ACL JSON version {doc.get('version')!r}")
    out = set()
    for item in doc.get("acls", []):
        principal = item["principal"]
        if ":" not in principal:
            raise ValueError(f"expected a string in format principalType:principalName but got {principal}")
        out.add(AccessControlEntry(principal, item["host"], parse_operation(item["operation"]),
                                   parse_permission_type(item["permissionType"])))
    return frozenset(out)


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps({"version": CHANGE_EVENT_VERSION, "resourceType": pattern.resource_type.name,
                       "name": pattern.name, "patternType": pattern.pattern_type.name},
                      separators=(",", ":")).encode()


def decode_change(path: str, data: bytes) -> ResourcePattern:
    text = data.decode()
    if path == LITERAL_CHANGE_PATH:
        if ":" not in text:
            raise ValueError(f"expected a string in format ResourceType:ResourceName but got {text}")
        rtype, name = text.split(":", 1)
        return ResourcePattern(ResourceType(enum_from_string(ResourceType, rtype)), name, PatternType.LITERAL)
    event = json.loads(text)
    if int(event.get("version", 0)) > CHANGE_EVENT_VERSION:
        raise ValueError(f"Acl change event received for unsupported version: {event.get('version')}")
    return ResourcePattern(ResourceType(enum_from_string(ResourceType, event["resourceType"])), event["name"],
                           PatternType(enum_from_string(PatternType, event["patternType"])))


# -- blocking ZooKeeper operations ------------------------------------------------------------------


class ZkAclStore:
    """Kafka's ACL znodes through one broker's ZooKeeper session."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk
        self._kz = zk.kazoo

    def _retry(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        # kazoo's retry re-runs the call after a connection loss (same session); errors pass through.
        return self._kz.retry(fn, *args, **kwargs)

    def create_acl_paths(self) -> None:
        """The store roots, one znode per resource type under each, and the change roots (Kafka's
        createAclPaths), so kafka-acls.sh and the brokers find the layout they expect."""
        for pt in STORED_PATTERN_TYPES:
            for rt in CONCRETE_RESOURCE_TYPES:
                self._retry(self._kz.ensure_path, type_path(pt, rt))
        for path in CHANGE_PATHS:
            self._retry(self._kz.ensure_path, path)

    def get_acls(self, pattern: ResourcePattern) -> VersionedAcls:
        try:
            data, stat = self._retry(self._kz.get, resource_path(pattern))
        except NoNodeError:
            return NO_ACLS
        return VersionedAcls(decode_acls(data), stat.version)

    def load_all(self) -> dict[ResourcePattern, VersionedAcls]:
        """Every pattern with its ACLs (Kafka's loadAllAcls); unknown resource types are skipped."""
        out: dict[ResourcePattern, VersionedAcls] = {}
        for pt in STORED_PATTERN_TYPES:
            try:
                type_names = self._retry(self._kz.get_children, store_path(pt))
            except NoNodeError:
                continue
            for type_name in type_names:
                rt = parse_resource_type(type_name)
                if rt in (ResourceType.UNKNOWN, ResourceType.ANY):
                    log.warning("Ignoring unknown ResourceType: %s", type_name)
                    continue
                try:
                    names = self._retry(self._kz.get_children, type_path(pt, rt))
                except NoNodeError:
                    continue
                for name in names:
                    pattern = ResourcePattern(rt, name, pt)
                    versioned = self.get_acls(pattern)
                    if versioned.exists:
                        out[pattern] = versioned
        return out

    def conditional_set(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry],
                        expected_version: int) -> tuple[bool, int]:
        """(True, new version), or (False, -1) when the znode changed or vanished meanwhile."""
        if expected_version < 0:
            raise ValueError(f"Invalid version {expected_version} provided for conditional update")
        try:
            stat = self._retry(self._kz.set, resource_path(pattern), encode_acls(entries), version=expected_version)
        except (BadVersionError, NoNodeError):
            return False, -1
        return True, stat.version

    def create_if_absent(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> tuple[bool, int]:
        try:
            self._retry(self._kz.create, resource_path(pattern), encode_acls(entries), makepath=True)
        except NodeExistsError:
            return False, -1
        return True, 0

    def conditional_delete(self, pattern: ResourcePattern, expected_version: int) -> bool:
        try:
            self._retry(self._kz.delete, resource_path(pattern), version=expected_version)
        except NoNodeError:
            return True
        except BadVersionError:
            return False
        return True

    def create_change_notification(self, pattern: ResourcePattern) -> None:
        path = change_path(pattern.pattern_type)
        self._retry(self._kz.create, f"{path}/{CHANGE_PREFIX}", encode_change(pattern), sequence=True,
                    makepath=True)

    # -- change notifications (read side) ----------------------------------------------------------

    def change_names(self, path: str, watch: Any) -> list[str]:
        """Notification znode names under ``path`` in sequence order; sets ``watch`` on the children."""
        try:
            names = self._retry(self._kz.get_children, path, watch=watch)
        except NoNodeError:
            self._retry(self._kz.ensure_path, path)
            names = self._retry(self._kz.get_children, path, watch=watch)
        return sorted(n for n in names if n.startswith(CHANGE_PREFIX))

    def read_change(self, path: str, name: str) -> tuple[ResourcePattern | None, int]:
        """(changed pattern, creation time in ms) of one notification; (None, 0) if it is gone."""
        try:
            data, stat = self._retry(self._kz.get, f"{path}/{name}")
        except NoNodeError:
            return None, 0
        return decode_change(path, data), int(stat.ctime)

    def created_ms(self, path: str, name: str) -> int:
        """Creation time (ms) of one notification; 0 if it is gone."""
        stat = self._retry(self._kz.exists, f"{path}/{name}")
        return int(stat.ctime) if stat is not None else 0

    def delete_change(self, path: str, name: str) -> None:
        try:
            self._retry(self._kz.delete, f"{path}/{name}")
        except NoNodeError:
            pass
