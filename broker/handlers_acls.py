"""DescribeAcls, CreateAcls and DeleteAcls, as Kafka's AclApis answers them.

* Describe needs DESCRIBE on the cluster, Create and Delete need ALTER on it; a caller without it
  gets CLUSTER_AUTHORIZATION_FAILED (for every creation / filter).
* Without an authorizer (``authorizer.class.name`` empty) the answer is SECURITY_DISABLED.
* Requests naming UNKNOWN resource types, pattern types, operations or permissions are refused with
  INVALID_REQUEST (Kafka rejects them while parsing the request). A CLUSTER ACL must be on the
  resource ``kafka-cluster``; resource names must not be empty (or contain '/', the authorizer's
  check: they are znode names).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.authorizer.acl_authorizer import AclAuthorizer, AclDeleteResult, AclResult
from broker.authorizer.acls import AclBinding, AclBindingFilter, binding_from_wire, filter_from_wire
from broker.authorizer.api import (
    CLUSTER_NAME,
    AclOperation,
    Action,
    AuthorizationResult,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.authorizer.context import request_context
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.kafka_apis import KafkaApis
    from protocol.messages import Request

_DA = response_type(ApiKey.DESCRIBE_ACLS)
_CA = response_type(ApiKey.CREATE_ACLS)
_XA = response_type(ApiKey.DELETE_ACLS)

NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"  # Kafka's DescribeAcls wording


class AclHandlers:
    def __init__(self, authorizer: AclAuthorizer | None) -> None:
        self.authorizer = authorizer

    def register(self, apis: KafkaApis) -> None:
        apis.register(ApiKey.DESCRIBE_ACLS, self.describe_acls)
        apis.register(ApiKey.CREATE_ACLS, self.create_acls)
        apis.register(ApiKey.DELETE_ACLS, self.delete_acls)

    def _cluster_denied(self, conn: Connection, req: Request, operation: AclOperation) -> str | None:
        """Kafka's authorizeClusterOperation: None when allowed, else the error message."""
        auth = self.authorizer
        if auth is None:
            return None
        ctx = request_context(conn, req)
        action = Action(operation, ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
        if auth.authorize(ctx, [action])[0] == AuthorizationResult.ALLOWED:
            return None
        return (f"Request {ApiKey(req.api_key).name} (correlation id {req.header.correlation_id}, client id "
                f"{req.header.client_id}) from {ctx.principal} is not authorized.")

    async def describe_acls(self, conn: Connection, req: Request) -> Any:
        denied = self._cluster_denied(conn, req, AclOperation.DESCRIBE)
        if denied is not None:
            return _DA(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=denied, resources=[])
        if self.authorizer is None:
            return _DA(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER_DESCRIBE, resources=[])
        b = req.body
        acl_filter = filter_from_wire(b.resource_type_filter, b.resource_name_filter, b.pattern_type_filter,
                                      b.principal_filter, b.host_filter, b.operation, b.permission_type)
        if acl_filter.is_unknown():
            return _DA(error_code=ErrorCode.INVALID_REQUEST,
                       error_message=f"DescribeAclsRequest contains UNKNOWN elements: {_show_filter(acl_filter)}",
                       resources=[])
        return _DA(error_code=ErrorCode.NONE, error_message=None,
                   resources=describe_resources(self.authorizer.acls(acl_filter)))

    async def create_acls(self, conn: Connection, req: Request) -> Any:
        creations = req.body.creations
        denied = self._cluster_denied(conn, req, AclOperation.ALTER)
        if denied is not None:
            return _creation_errors(len(creations), ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
        if self.authorizer is None:
            return _creation_errors(len(creations), ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        bindings = [binding_from_wire(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                                      c.host, c.operation, c.permission_type) for c in creations]
        if any(b.is_unknown() for b in bindings):
            return _creation_errors(len(creations), ErrorCode.INVALID_REQUEST,
                                    "CreatableAcls contain unknown elements")
        results: list[AclResult | None] = [None] * len(bindings)
        valid: list[int] = []
        for i, binding in enumerate(bindings):
            pattern = binding.pattern
            if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
                results[i] = AclResult(ErrorCode.INVALID_REQUEST,
                                       f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
            elif not pattern.name:
                results[i] = AclResult(ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
            else:
                valid.append(i)
        created = await self.authorizer.create_acls([bindings[i] for i in valid])
        for i, result in zip(valid, created, strict=True):
            results[i] = result
        return _CA(throttle_time_ms=0, results=[
            _CA.AclCreationResult(error_code=r.error_code, error_message=r.error_message)
            for r in results if r is not None])

    async def delete_acls(self, conn: Connection, req: Request) -> Any:
        wire_filters = req.body.filters
        denied = self._cluster_denied(conn, req, AclOperation.ALTER)
        if denied is not None:
            return _filter_errors(len(wire_filters), ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
        if self.authorizer is None:
            return _filter_errors(len(wire_filters), ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        filters = [filter_from_wire(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                    f.principal_filter, f.host_filter, f.operation, f.permission_type)
                   for f in wire_filters]
        unknown = [f for f in filters if f.is_unknown()]
        if unknown:
            return _filter_errors(len(filters), ErrorCode.INVALID_REQUEST,
                                  f"Filters contain UNKNOWN elements, filters: {_show_filter(unknown[0])}")
        results = await self.authorizer.delete_acls(filters)
        return _XA(throttle_time_ms=0, filter_results=[_filter_result(r) for r in results])


def describe_resources(bindings: list[AclBinding]) -> list[Any]:
    """DescribeAcls resources: one per pattern, with its entries (Kafka's aclsResources)."""
    by_pattern: dict[ResourcePattern, list[Any]] = {}
    for b in bindings:
        e = b.entry
        by_pattern.setdefault(b.pattern, []).append(_DA.AclDescription(
            principal=e.principal, host=e.host, operation=e.operation, permission_type=e.permission_type))
    return [_DA.DescribeAclsResource(resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
                                     acls=acls) for p, acls in by_pattern.items()]


def _filter_result(result: AclDeleteResult) -> Any:
    return _XA.DeleteAclsFilterResult(
        error_code=result.error_code, error_message=result.error_message, matching_acls=[
            _XA.DeleteAclsMatchingAcl(
                error_code=outcome.error_code, error_message=outcome.error_message,
                resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
                operation=b.entry.operation, permission_type=b.entry.permission_type)
            for b, outcome in result.deleted])


def _creation_errors(n: int, code: int, message: str) -> Any:
    return _CA(throttle_time_ms=0, results=[_CA.AclCreationResult(error_code=code, error_message=message)
                                            for _ in range(n)])


def _filter_errors(n: int, code: int, message: str) -> Any:
    return _XA(throttle_time_ms=0, filter_results=[
        _XA.DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[]) for _ in range(n)])


def _show_filter(f: AclBindingFilter) -> str:
    p, e = f.pattern_filter, f.entry_filter
    return (f"(patternFilter=ResourcePattern(resourceType={p.resource_type.name}, name="
            f"{'<any>' if p.name is None else p.name}, patternType={p.pattern_type.name}), entryFilter=(principal="
            f"{'<any>' if e.principal is None else e.principal}, host={'<any>' if e.host is None else e.host}, "
            f"operation={e.operation.name}, permissionType={e.permission_type.name}))")
