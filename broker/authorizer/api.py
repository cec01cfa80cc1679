"""The authorizer's interface, with Kafka's resource, operation and permission types and wire codes.

This is the contract between request handlers (which ask "may this principal do this?") and the
authorizer (which answers from ACLs). It mirrors org.apache.kafka.server.authorizer.Authorizer:
``authorize`` takes a request context and a batch of actions and returns one result per action, in
order, and ``authorize_by_resource_type`` answers "is the principal allowed this operation on at least
one resource of this type" (Kafka uses it for IDEMPOTENT_WRITE and for transactional producers).

A broker with no authorizer configured (``authorizer.class.name`` empty) holds ``None`` instead of an
Authorizer: every action is allowed, and the ACL APIs answer SECURITY_DISABLED.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from broker.security.principal import KafkaPrincipal

# The value of authorizer.class.name that turns ACLs on (Kafka's ZooKeeper-mode authorizer).
ACL_AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"
WILDCARD_RESOURCE = "*"  # a LITERAL pattern named "*" matches every resource of its type
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class AuthorizationResult(enum.Enum):
    ALLOWED = "allowed"
    DENIED = "denied"


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:  # as Kafka's ResourcePattern.toString (logs, kafka-acls.sh output)
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True)
class Action:
    """One question to the authorizer (Kafka's Action). ``log_if_allowed`` / ``log_if_denied`` say
    whether the answer goes to the authorizer log: a Metadata request filtering topics it may not
    see does not log each denial, a Produce to a forbidden topic does."""

    operation: AclOperation
    pattern: ResourcePattern
    reference_count: int = 1
    log_if_allowed: bool = True
    log_if_denied: bool = True


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asks, from where, through which listener (Kafka's AuthorizableRequestContext)."""

    principal: KafkaPrincipal
    client_host: str
    listener: str
    security_protocol: str
    api_key: int = -1
    api_version: int = -1
    client_id: str | None = None
    correlation_id: int = -1


class Authorizer(Protocol):
    def authorize(self, ctx: RequestContext, actions: Sequence[Action]) -> list[AuthorizationResult]: ...

    def authorize_by_resource_type(self, ctx: RequestContext, operation: AclOperation,
                                   resource_type: ResourceType) -> AuthorizationResult: ...
