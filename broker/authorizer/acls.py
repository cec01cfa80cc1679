"""ACL bindings and the filters that select them, with Kafka's matching rules and names.

An ACL binding is a resource pattern (``ResourcePattern`` in api.py) plus an access control entry
(principal, host, operation, permission). Filters are what DescribeAcls and DeleteAcls carry: the
same fields, where a null name/principal/host or an ANY type/operation/permission matches anything,
and pattern type MATCH selects every pattern that would apply to the named resource (the literal
name, the literal wildcard ``*`` and every prefix of it). These are Kafka's ``AclBinding``,
``ResourcePatternFilter``, ``AccessControlEntryFilter`` and ``AclBindingFilter``.

Names are Kafka's too: stored and shown in Pascal case (``Topic``, ``Read``, ``Allow``,
``TransactionalId``), parsed case-insensitively and with or without underscores (SecurityUtils).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.authorizer.api import (
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

WILDCARD_PRINCIPAL = "User:*"

# Operations each resource type supports (Kafka's AclEntry.supportedOperations): the bits of the
# include_*_authorized_operations fields, and what kafka-acls.sh accepts per resource.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}

# Resource types that hold ACLs (every type but UNKNOWN and ANY): one znode per type under each store.
CONCRETE_RESOURCE_TYPES = tuple(SUPPORTED_OPERATIONS)


def pascal_case(enum_name: str) -> str:
    """TRANSACTIONAL_ID -> TransactionalId (Kafka's SecurityUtils.toPascalCase)."""
    return "".join(part[:1].upper() + part[1:].lower() for part in enum_name.split("_"))


def resource_type_name(rt: ResourceType) -> str:
    return pascal_case(rt.name)


def operation_name(op: AclOperation) -> str:
    return pascal_case(op.name)


def permission_type_name(pt: AclPermissionType) -> str:
    return pascal_case(pt.name)


def _lookup(names: dict[str, int], text: str) -> int | None:
    return names.get(text, names.get(text.upper()))


_RESOURCE_TYPES = {**{pascal_case(t.name): t.value for t in ResourceType},
                   **{pascal_case(t.name).upper(): t.value for t in ResourceType}}
_OPERATIONS = {**{pascal_case(o.name): o.value for o in AclOperation},
               **{pascal_case(o.name).upper(): o.value for o in AclOperation}}
_PERMISSIONS = {**{pascal_case(p.name): p.value for p in AclPermissionType},
                **{pascal_case(p.name).upper(): p.value for p in AclPermissionType}}


def parse_resource_type(text: str) -> ResourceType:
    """``Topic``/``TOPIC``/``topic`` -> TOPIC; unknown names -> UNKNOWN (Kafka's SecurityUtils.resourceType)."""
    code = _lookup(_RESOURCE_TYPES, text)
    return ResourceType(code) if code is not None else ResourceType.UNKNOWN


def parse_operation(text: str) -> AclOperation:
    code = _lookup(_OPERATIONS, text)
    return AclOperation(code) if code is not None else AclOperation.UNKNOWN


def parse_permission_type(text: str) -> AclPermissionType:
    code = _lookup(_PERMISSIONS, text)
    return AclPermissionType(code) if code is not None else AclPermissionType.UNKNOWN


def enum_from_string(enum_type: type[ResourceType] | type[PatternType], text: str) -> int:
    """Kafka's ``ResourceType.fromString`` / ``PatternType.fromString``: the enum name in any case."""
    try:
        return enum_type[text.upper()].value
    except KeyError:
        return 0  # UNKNOWN


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (principal as ``Type:name``), from where (host or ``*``), what and whether: Kafka's ACE."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def __str__(self) -> str:  # Kafka's AccessControlEntry.toString, as kafka-acls.sh prints entries
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")

    def describe(self) -> str:  # Kafka's AclEntry.toString, as the authorizer log shows the deciding ACL
        return (f"{self.principal} has {self.permission_type.name} permission for operations: "
                f"{self.operation.name} from hosts: {self.host}")


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def is_unknown(self) -> bool:
        return (self.pattern.resource_type == ResourceType.UNKNOWN
                or self.pattern.pattern_type == PatternType.UNKNOWN or self.entry.is_unknown())


def binding_problem(binding: AclBinding) -> str | None:
    """Why a binding cannot be stored, as Kafka's AclBinding/ResourcePattern/AccessControlEntry
    constructors and AclAuthorizer.validateAclBinding say it; None when it can."""
    p, e = binding.pattern, binding.entry
    if p.resource_type == ResourceType.ANY:
        return "resourceType must not be ANY"
    if p.pattern_type in (PatternType.MATCH, PatternType.ANY):
        return f"patternType must not be {p.pattern_type.name}"
    if e.operation == AclOperation.ANY:
        return "operation must not be ANY"
    if e.permission_type == AclPermissionType.ANY:
        return "permissionType must not be ANY"
    if binding.is_unknown():
        return "ACL binding contains unknown elements"
    if "/" in p.name:
        return f"ACL binding contains invalid resource name: {p.name}"
    if ":" not in e.principal or not all(e.principal.split(":", 1)):
        return f"expected a string in format principalType:principalName but got {e.principal}"
    return None


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if pt == PatternType.ANY or pt == pattern.pattern_type:
            return self.name == pattern.name
        # MATCH: every pattern that applies to the resource named by the filter.
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def indefinite_field(self) -> str | None:
        """Why this filter may match more than one pattern (Kafka's findIndefiniteField), or None."""
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def is_unknown(self) -> bool:
        p, e = self.pattern_filter, self.entry_filter
        return (p.resource_type == ResourceType.UNKNOWN or p.pattern_type == PatternType.UNKNOWN
                or e.operation == AclOperation.UNKNOWN or e.permission_type == AclPermissionType.UNKNOWN)


ANY_BINDING = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                               AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))


def _enum(enum_type: type[ResourceType] | type[PatternType] | type[AclOperation] | type[AclPermissionType],
          code: int) -> int:
    try:
        return enum_type(code).value
    except ValueError:
        return 0  # Kafka's fromCode: an unknown code is UNKNOWN


def binding_from_wire(resource_type: int, name: str, pattern_type: int, principal: str, host: str,
                      operation: int, permission_type: int) -> AclBinding:
    """A binding from CreateAcls fields; unknown codes become UNKNOWN (then refused)."""
    return AclBinding(
        ResourcePattern(ResourceType(_enum(ResourceType, resource_type)), name,
                        PatternType(_enum(PatternType, pattern_type))),
        AccessControlEntry(principal, host, AclOperation(_enum(AclOperation, operation)),
                           AclPermissionType(_enum(AclPermissionType, permission_type))))


def filter_from_wire(resource_type: int, name: str | None, pattern_type: int, principal: str | None,
                     host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
    """A filter from DescribeAcls / DeleteAcls fields; unknown codes become UNKNOWN (then refused)."""
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType(_enum(ResourceType, resource_type)), name,
                              PatternType(_enum(PatternType, pattern_type))),
        AccessControlEntryFilter(principal, host, AclOperation(_enum(AclOperation, operation)),
                                 AclPermissionType(_enum(AclPermissionType, permission_type))))
