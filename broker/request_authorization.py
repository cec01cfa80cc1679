"""How request handlers ask the authorizer (Kafka's AuthHelper).

Every handler holds one ``RequestAuthorizer``. Without an authorizer (``authorizer.class.name`` empty)
each question is answered "allowed" by its first line, before any context is built, so the ordinary
path costs one attribute test. With one, the caller's ``RequestContext`` (principal, client host,
listener, security protocol, client id) is built from the connection and the request header, and the
questions go to the authorizer as Kafka's KafkaApis asks them: one resource at a time, or a batch of
resource names with one action per distinct name (``filter_by_authorized``).

The error a denial turns into, and whether it hides the resource's existence, is decided by each
handler, as in Kafka: see the per-API notes in the handlers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

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
from broker.authorizer.operations import authorized_operations
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.authorizer.api import Authorizer, RequestContext
    from broker.connection import Connection
    from broker.kafka_apis import HandlerFn, KafkaApis
    from protocol.messages import Request

ALLOWED = AuthorizationResult.ALLOWED
# Authorized operations not asked for (the schemas' default for the *_authorized_operations fields).
OPERATIONS_OMITTED = -2147483648

# Kafka's Errors messages, sent where Kafka sends the generic message of an authorization error.
TOPIC_AUTHORIZATION_FAILED_MESSAGE = "Topic authorization failed."
CLUSTER_AUTHORIZATION_FAILED_MESSAGE = "Cluster authorization failed."


class RequestAuthorizer:
    """Kafka's AuthHelper over an optional ``Authorizer``."""

    __slots__ = ("authorizer",)

    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    @staticmethod
    def context(conn: Connection, req: Request) -> RequestContext:
        return request_context(conn, req)

    def authorize(self, conn: Connection, req: Request, operation: AclOperation, resource_type: ResourceType,
                  name: str, *, log_if_allowed: bool = True, log_if_denied: bool = True,
                  ref_count: int = 1) -> bool:
        authorizer = self.authorizer
        if authorizer is None:
            return True
        action = Action(operation, ResourcePattern(resource_type, name, PatternType.LITERAL), ref_count,
                        log_if_allowed, log_if_denied)
        return authorizer.authorize(request_context(conn, req), [action])[0] == ALLOWED

    def authorize_cluster(self, conn: Connection, req: Request, operation: AclOperation, *,
                          log_if_denied: bool = True) -> bool:
        if self.authorizer is None:
            return True
        return self.authorize(conn, req, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)

    def authorize_by_resource_type(self, conn: Connection, req: Request, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        authorizer = self.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize_by_resource_type(request_context(conn, req), operation, resource_type) == ALLOWED

    def filter_by_authorized(self, conn: Connection, req: Request, operation: AclOperation,
                             resource_type: ResourceType, names: Iterable[str | None], *,
                             log_if_allowed: bool = True, log_if_denied: bool = True) -> set[str]:
        """The names the caller may ``operation``: one question per distinct name, its reference
        count the number of times the request names it (Kafka's filterByAuthorized)."""
        counts: dict[str, int] = {}
        for name in names:
            if name is not None:
                counts[name] = counts.get(name, 0) + 1
        authorizer = self.authorizer
        if authorizer is None:
            return set(counts)
        if not counts:
            return set()
        actions = [Action(operation, ResourcePattern(resource_type, name, PatternType.LITERAL), n,
                          log_if_allowed, log_if_denied) for name, n in counts.items()]
        results = authorizer.authorize(request_context(conn, req), actions)
        return {name for name, r in zip(counts, results, strict=True) if r == ALLOWED}

    def authorized_operations(self, conn: Connection, req: Request, resource_type: ResourceType, name: str) -> int:
        """The KIP-430 bit field of what the caller may do on one resource (every supported
        operation without an authorizer, as Kafka answers)."""
        authorizer = self.authorizer
        if authorizer is None:
            return authorized_operations(None, None, resource_type, name)  # type: ignore[arg-type]
        return authorized_operations(authorizer, request_context(conn, req), resource_type, name)

    def cluster_authorized_operations(self, conn: Connection, req: Request) -> int:
        """Cluster operations for Metadata and DescribeCluster: 0 without DESCRIBE on the cluster."""
        if not self.authorize_cluster(conn, req, AclOperation.DESCRIBE):
            return 0
        return self.authorized_operations(conn, req, ResourceType.CLUSTER, CLUSTER_NAME)


# No authorizer: what handlers built without one (unit tests, tools) use.
ALLOW_ALL = RequestAuthorizer(None)


def authorize_quota_and_scram_apis(apis: KafkaApis, auth: RequestAuthorizer) -> None:
    """Put Kafka's cluster checks in front of the client-quota and SCRAM-credential handlers, already
    registered on ``apis``: DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster,
    AlterClientQuotas ALTER_CONFIGS, DescribeUserScramCredentials DESCRIBE and
    AlterUserScramCredentials ALTER; refused requests get their API's error form with
    CLUSTER_AUTHORIZATION_FAILED. Nothing is wrapped without an authorizer."""
    if not auth.enabled:
        return
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    def describe_quotas_refused(body: Any) -> Any:
        return response_type(ApiKey.DESCRIBE_CLIENT_QUOTAS)(error_code=code, error_message=None, entries=None)

    def alter_quotas_refused(body: Any) -> Any:
        mt = response_type(ApiKey.ALTER_CLIENT_QUOTAS)
        return mt(entries=[mt.EntryData(error_code=code, error_message=None, entity=[
            mt.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
            for entry in body.entries])

    def describe_scram_refused(body: Any) -> Any:
        mt = response_type(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
        return mt(error_code=code, error_message=None, results=[
            mt.DescribeUserScramCredentialsResult(user="", error_code=code, error_message=None, credential_infos=[])
            for _ in body.users or ()])

    def alter_scram_refused(body: Any) -> Any:
        mt = response_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
        users = sorted({d.name for d in body.deletions} | {u.name for u in body.upsertions})
        return mt(results=[mt.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=None)
                           for u in users])

    for api_key, operation, refused in (
            (ApiKey.DESCRIBE_CLIENT_QUOTAS, AclOperation.DESCRIBE_CONFIGS, describe_quotas_refused),
            (ApiKey.ALTER_CLIENT_QUOTAS, AclOperation.ALTER_CONFIGS, alter_quotas_refused),
            (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, AclOperation.DESCRIBE, describe_scram_refused),
            (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, AclOperation.ALTER, alter_scram_refused)):
        inner = apis.handlers.get(api_key)
        if inner is not None:
            apis.register(api_key, _cluster_guard(auth, inner, operation, refused))


def _cluster_guard(auth: RequestAuthorizer, inner: HandlerFn, operation: AclOperation,
                   refused: Callable[[Any], Any]) -> HandlerFn:
    async def handler(conn: Connection, req: Request) -> Any:
        if not auth.authorize_cluster(conn, req, operation):
            return refused(req.body)
        return await inner(conn, req)
    return handler
