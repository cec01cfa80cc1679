"""Kafka's authorized-operations bit field (KIP-430), for the ``include_*_authorized_operations``
fields of Metadata, DescribeCluster and DescribeGroups."""

from __future__ import annotations

from broker.authorizer.acls import SUPPORTED_OPERATIONS
from broker.authorizer.api import (
    Action,
    AuthorizationResult,
    Authorizer,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
)


def authorized_operations(authorizer: Authorizer | None, ctx: RequestContext, resource_type: ResourceType,
                          name: str) -> int:
    """Bit ``1 << op.code`` set for every operation the resource type supports that the caller may
    perform on the resource (Kafka's AuthHelper.authorizedOperations). Without an authorizer every
    supported operation is allowed. The questions are not logged (an answer here grants nothing)."""
    supported = SUPPORTED_OPERATIONS.get(resource_type, ())
    if authorizer is None:
        allowed = list(supported)
    else:
        pattern = ResourcePattern(resource_type, name, PatternType.LITERAL)
        results = authorizer.authorize(ctx, [Action(op, pattern, 1, False, False) for op in supported])
        allowed = [op for op, r in zip(supported, results, strict=True) if r == AuthorizationResult.ALLOWED]
    bits = 0
    for op in allowed:
        bits |= 1 << int(op)
    return bits
