"""The authorizer's view of a request: who sent it, from where, on which listener (Kafka's
RequestContext as an AuthorizableRequestContext)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authorizer.api import RequestContext

if TYPE_CHECKING:
    from broker.connection import Connection
    from protocol.messages import Request


def request_context(conn: Connection, request: Request) -> RequestContext:
    h = request.header
    return RequestContext(principal=conn.principal, client_host=conn.client_host, listener=conn.listener,
                          security_protocol=conn.security_protocol, api_key=h.api_key, api_version=h.api_version,
                          client_id=h.client_id, correlation_id=h.correlation_id)
