"""Authorization of the group APIs, in front of ``GroupApis`` (Kafka 3.9's KafkaApis group handlers).

Each handler asks the authorizer first and answers a refused request with the API's error form, as
Kafka's ``getErrorResponse`` builds it. Where a request names topics, the refused topics are taken out
of the request before the coordinator sees it and put back into the response with
TOPIC_AUTHORIZATION_FAILED, so the coordinator commits (or deletes) the rest as usual. See
``broker/handlers_group.py`` for the table of operations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.authorizer.api import AclOperation, ResourceType
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.handlers_group import GroupApis
    from broker.request_authorization import RequestAuthorizer
    from protocol.messages import Request

GROUP, TOPIC, TXN_ID = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID
READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
_GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_OPS_OMITTED = -2147483648

_JOIN = response_type(ApiKey.JOIN_GROUP)
_SYNC = response_type(ApiKey.SYNC_GROUP)
_HEARTBEAT = response_type(ApiKey.HEARTBEAT)
_LEAVE = response_type(ApiKey.LEAVE_GROUP)
_COMMIT = response_type(ApiKey.OFFSET_COMMIT)
_TXN_COMMIT = response_type(ApiKey.TXN_OFFSET_COMMIT)
_FETCH = response_type(ApiKey.OFFSET_FETCH)
_LIST = response_type(ApiKey.LIST_GROUPS)
_DESCRIBE = response_type(ApiKey.DESCRIBE_GROUPS)
_DELETE = response_type(ApiKey.DELETE_GROUPS)
_OFFSET_DELETE = response_type(ApiKey.OFFSET_DELETE)


def _commit_errors(topics: list[Any], code: int) -> list[Any]:
    return [_COMMIT.OffsetCommitResponseTopic(name=t.name, partitions=[
        _COMMIT.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
        for p in t.partitions]) for t in topics]


def _txn_commit_errors(topics: list[Any], code: int) -> list[Any]:
    return [_TXN_COMMIT.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        _TXN_COMMIT.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
        for p in t.partitions]) for t in topics]


def _fetch_errors(topics: list[Any], code: int, grouped: bool) -> list[Any]:
    """OffsetFetch partitions refused with ``code``: committed offset -1 (v8+ layout when ``grouped``)."""
    topic_type = _FETCH.OffsetFetchResponseTopics if grouped else _FETCH.OffsetFetchResponseTopic
    part_type = _FETCH.OffsetFetchResponsePartitions if grouped else _FETCH.OffsetFetchResponsePartition
    return [topic_type(name=t.name, partitions=[
        part_type(partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=code)
        for p in t.partition_indexes]) for t in topics]


class AuthorizedGroupApis:
    """The group APIs' handlers (connection, request) with Kafka's authorization checks."""

    def __init__(self, wire: GroupApis, auth: RequestAuthorizer) -> None:
        self.wire = wire
        self.auth = auth

    def _group_allowed(self, conn: Connection, req: Request, operation: AclOperation, group_id: str) -> bool:
        return self.auth.authorize(conn, req, operation, GROUP, group_id)

    def _split_topics(self, conn: Connection, req: Request, operation: AclOperation,
                      topics: list[Any]) -> tuple[list[Any], list[Any]]:
        """(allowed, refused) topic entries of a request."""
        allowed = self.auth.filter_by_authorized(conn, req, operation, TOPIC, (t.name for t in topics))
        return [t for t in topics if t.name in allowed], [t for t in topics if t.name not in allowed]

    @staticmethod
    def _args(conn: Connection, req: Request) -> tuple[Any, int, str | None, str]:
        return req.body, req.api_version, req.header.client_id, conn.client_host

    async def join_group(self, conn: Connection, req: Request) -> Any:
        r: Any = req.body
        if not self._group_allowed(conn, req, READ, r.group_id):
            return _JOIN(error_code=_GROUP_DENIED, generation_id=-1, leader="", member_id="", members=[],
                         protocol_name=None if req.api_version >= 7 else "")
        return await self.wire.handle_join_group(*self._args(conn, req))

    async def sync_group(self, conn: Connection, req: Request) -> Any:
        r: Any = req.body
        # A v5+ request without protocol type and name is refused for that first, as in Kafka.
        incomplete = req.api_version >= 5 and (r.protocol_type is None or r.protocol_name is None)
        if not incomplete and not self._group_allowed(conn, req, READ, r.group_id):
            return _SYNC(error_code=_GROUP_DENIED, assignment=b"")
        return await self.wire.handle_sync_group(*self._args(conn, req))

    async def heartbeat(self, conn: Connection, req: Request) -> Any:
        if not self._group_allowed(conn, req, READ, req.body.group_id):  # type: ignore[attr-defined]
            return _HEARTBEAT(error_code=_GROUP_DENIED)
        return await self.wire.handle_heartbeat(*self._args(conn, req))

    async def leave_group(self, conn: Connection, req: Request) -> Any:
        if not self._group_allowed(conn, req, READ, req.body.group_id):  # type: ignore[attr-defined]
            return _LEAVE(error_code=_GROUP_DENIED, members=[])
        return await self.wire.handle_leave_group(*self._args(conn, req))

    async def offset_commit(self, conn: Connection, req: Request) -> Any:
        r: Any = req.body
        if not self._group_allowed(conn, req, READ, r.group_id):
            return _COMMIT(topics=_commit_errors(r.topics, _GROUP_DENIED))
        r.topics, refused = self._split_topics(conn, req, READ, r.topics)
        resp: Any = await self.wire.handle_offset_commit(*self._args(conn, req))
        resp.topics.extend(_commit_errors(refused, _TOPIC_DENIED))
        return resp

    async def txn_offset_commit(self, conn: Connection, req: Request) -> Any:
        r: Any = req.body
        if not self.auth.authorize(conn, req, AclOperation.WRITE, TXN_ID, r.transactional_id):
            return _TXN_COMMIT(topics=_txn_commit_errors(r.topics, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        if not self._group_allowed(conn, req, READ, r.group_id):
            return _TXN_COMMIT(topics=_txn_commit_errors(r.topics, _GROUP_DENIED))
        r.topics, refused = self._split_topics(conn, req, READ, r.topics)
        resp: Any = await self.wire.handle_txn_offset_commit(*self._args(conn, req))
        resp.topics.extend(_txn_commit_errors(refused, _TOPIC_DENIED))
        return resp

    async def offset_delete(self, conn: Connection, req: Request) -> Any:
        r: Any = req.body
        if not self._group_allowed(conn, req, DELETE, r.group_id):
            return _OFFSET_DELETE(error_code=_GROUP_DENIED, topics=[])
        r.topics, refused = self._split_topics(conn, req, READ, r.topics)
        resp: Any = await self.wire.handle_offset_delete(*self._args(conn, req))
        if resp.error_code == 0:  # a group-level error replaces the partition answers, as in Kafka
            resp.topics.extend(_OFFSET_DELETE.OffsetDeleteResponseTopic(name=t.name, partitions=[
                _OFFSET_DELETE.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=_TOPIC_DENIED)
                for p in t.partitions]) for t in refused)
        return resp

    async def offset_fetch(self, conn: Connection, req: Request) -> Any:
        r: Any = req.body
        v = req.api_version
        if v >= 8:
            return await self._offset_fetch_groups(conn, req, r)
        if not self._group_allowed(conn, req, DESCRIBE, r.group_id):
            # Kafka 3.9 builds the refusal as a group with no topics and moves the group's error to the
            # top level, which v1 does not have: a v1 client gets an empty answer.
            return _FETCH(error_code=_GROUP_DENIED, topics=[])
        refused: list[Any] = []
        if r.topics is not None:
            r.topics, refused = self._split_topics(conn, req, DESCRIBE, r.topics)
        resp: Any = await self.wire.handle_offset_fetch(*self._args(conn, req))
        if v >= 2 and resp.error_code != 0:
            return resp
        if r.topics is None:
            resp.topics = self._describable_only(conn, req, resp.topics)
        else:
            resp.topics.extend(_fetch_errors(refused, _TOPIC_DENIED, grouped=False))
        return resp

    async def _offset_fetch_groups(self, conn: Connection, req: Request, r: Any) -> Any:
        requested = list(r.groups)
        allowed = [g for g in requested if self._group_allowed(conn, req, DESCRIBE, g.group_id)]
        refused_topics: dict[int, list[Any]] = {}
        for g in allowed:
            if g.topics is not None:
                g.topics, refused_topics[id(g)] = self._split_topics(conn, req, DESCRIBE, g.topics)
        answered: Any = iter(())
        if allowed:
            r.groups = allowed
            answered = iter((await self.wire.handle_offset_fetch(*self._args(conn, req))).groups)
        out = []
        for g in requested:
            if not any(g is a for a in allowed):
                out.append(_FETCH.OffsetFetchResponseGroup(group_id=g.group_id, error_code=_GROUP_DENIED, topics=[]))
                continue
            result = next(answered)
            if result.error_code == 0:
                if g.topics is None:
                    result.topics = self._describable_only(conn, req, result.topics)
                else:
                    result.topics.extend(_fetch_errors(refused_topics[id(g)], _TOPIC_DENIED, grouped=True))
            out.append(result)
        return _FETCH(groups=out)

    def _describable_only(self, conn: Connection, req: Request, topics: list[Any]) -> list[Any]:
        """A group's offsets, without those of topics the caller may not DESCRIBE."""
        if not self.auth.enabled:
            return topics
        allowed = self.auth.filter_by_authorized(conn, req, DESCRIBE, TOPIC, (t.name for t in topics))
        return [t for t in topics if t.name in allowed]

    async def list_groups(self, conn: Connection, req: Request) -> Any:
        resp: Any = await self.wire.handle_list_groups(*self._args(conn, req))
        if not self.auth.authorize_cluster(conn, req, DESCRIBE, log_if_denied=False):
            # Without DESCRIBE on the cluster: the groups the caller may DESCRIBE.
            resp.groups = [g for g in resp.groups
                           if self.auth.authorize(conn, req, DESCRIBE, GROUP, g.group_id, log_if_denied=False)]
        return resp

    async def describe_groups(self, conn: Connection, req: Request) -> Any:
        r: Any = req.body
        requested = list(r.groups)
        allowed = [g for g in requested if self._group_allowed(conn, req, DESCRIBE, g)]
        allowed_ids = set(allowed)
        described: list[Any] = []
        if allowed:
            r.groups = allowed
            described = (await self.wire.handle_describe_groups(*self._args(conn, req))).groups
        with_ops = req.api_version >= 3 and r.include_authorized_operations
        by_position = iter(described)
        out = []
        for gid in requested:
            if gid not in allowed_ids:
                out.append(_DESCRIBE.DescribedGroup(error_code=_GROUP_DENIED, group_id=gid, group_state="",
                                                    protocol_type="", protocol_data="", members=[],
                                                    authorized_operations=_OPS_OMITTED))
                continue
            group = next(by_position)
            if with_ops and group.error_code == 0:
                group.authorized_operations = self.auth.authorized_operations(conn, req, GROUP, gid)
            out.append(group)
        return _DESCRIBE(groups=out)

    async def delete_groups(self, conn: Connection, req: Request) -> Any:
        r: Any = req.body
        requested = list(dict.fromkeys(r.groups_names))
        allowed = self.auth.filter_by_authorized(conn, req, DELETE, GROUP, requested)
        r.groups_names = [g for g in requested if g in allowed]
        resp: Any = await self.wire.handle_delete_groups(*self._args(conn, req))
        resp.results.extend(_DELETE.DeletableGroupResult(group_id=g, error_code=_GROUP_DENIED)
                            for g in requested if g not in allowed)
        return resp
