"""OffsetCommit v0 and OffsetFetch v0: offsets kept in ZooKeeper, as Kafka 3.9 keeps them in ZooKeeper mode.

Kafka's first offset API stored offsets in ZooKeeper, at ``/consumers/<group>/offsets/<topic>/<partition>``
(the offset as a decimal string). A 3.9 broker in ZooKeeper mode still answers version 0 of both APIs
that way, on any broker (no group coordinator, no group membership, no generation check), and later
versions from ``__consumer_offsets``: the two stores are separate, as they are in Kafka.

Kafka's checks, in its order (``KafkaApis.handleOffsetCommitRequest`` / ``handleOffsetFetchRequestFromZookeeper``):

* OffsetCommit v0: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), READ on each
  topic (TOPIC_AUTHORIZATION_FAILED), the partition must exist (UNKNOWN_TOPIC_OR_PARTITION), the
  metadata at most ``offset.metadata.max.bytes`` (OFFSET_METADATA_TOO_LARGE; the metadata itself is
  not stored). Then the znode is set, or created.
* OffsetFetch v0: DESCRIBE on the group (else every partition GROUP_AUTHORIZATION_FAILED), DESCRIBE
  on each topic (TOPIC_AUTHORIZATION_FAILED); a partition the cluster does not have, or that has no
  znode, is UNKNOWN_TOPIC_OR_PARTITION with offset -1; found, its offset, no metadata.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from broker.authorizer.api import AclOperation, ResourceType
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.metadata_cache import MetadataCache
    from broker.request_authorization import RequestAuthorizer
    from controller.zk_client import KafkaZkClient
    from protocol.messages import Request

_COMMIT = response_type(ApiKey.OFFSET_COMMIT)
_FETCH = response_type(ApiKey.OFFSET_FETCH)
ZkCall = Callable[..., Awaitable[Any]]


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    """Kafka's ``ConsumerOffset.path``."""
    return f"/consumers/{group}/offsets/{topic}/{partition}"


def _set_or_create(zk: KafkaZkClient, path: str, data: bytes) -> None:
    client = zk.kazoo
    while True:
        try:
            client.retry(client.set, path, data)
            return
        except NoNodeError:
            pass
        try:
            client.retry(client.create, path, data, makepath=True)
            return
        except NodeExistsError:
            continue  # created meanwhile by another commit: set it


def _get(zk: KafkaZkClient, path: str) -> int | None:
    found = zk.get_data(path)
    return None if found is None else int(found[0].decode())


class ZkConsumerOffsets:
    """The v0 offset APIs, answered from ZooKeeper."""

    def __init__(self, zk: KafkaZkClient, zk_call: ZkCall, metadata: MetadataCache,
                 max_metadata_bytes: Callable[[], int], auth: RequestAuthorizer) -> None:
        self.zk = zk
        self.zk_call = zk_call
        self.metadata = metadata
        self.max_metadata_bytes = max_metadata_bytes  # offset.metadata.max.bytes, read each time
        self.auth = auth

    def _topics_allowed(self, conn: Connection, req: Request, operation: AclOperation, names: list[str]) -> set[str]:
        if not self.auth.enabled:
            return set(names)
        return self.auth.filter_by_authorized(conn, req, operation, ResourceType.TOPIC, names)

    async def offset_commit(self, conn: Connection, req: Request) -> Any:
        r: Any = req.body
        group_allowed = self.auth.authorize(conn, req, AclOperation.READ, ResourceType.GROUP, r.group_id)
        allowed = self._topics_allowed(conn, req, AclOperation.READ, [t.name for t in r.topics]) \
            if group_allowed else set()
        limit = self.max_metadata_bytes()
        # Kafka's OffsetCommitResponse.Builder: the refusals found while checking the request come
        # first, then the partitions committed, each topic's partitions in the order they were added.
        answers: dict[str, list[Any]] = {}

        def answer(topic: str, partition: int, code: ErrorCode) -> None:
            answers.setdefault(topic, []).append(
                _COMMIT.OffsetCommitResponsePartition(partition_index=partition, error_code=code))

        to_commit = []
        for t in r.topics:
            for p in t.partitions:
                if not group_allowed:
                    answer(t.name, p.partition_index, ErrorCode.GROUP_AUTHORIZATION_FAILED)
                elif t.name not in allowed:
                    answer(t.name, p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                elif self.metadata.partition(t.name, p.partition_index) is None:
                    answer(t.name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    to_commit.append((t.name, p))
        for topic, p in to_commit:
            if p.committed_metadata is not None and len(p.committed_metadata) > limit:
                code = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                code = await self._commit(r.group_id, topic, p.partition_index, p.committed_offset)
            answer(topic, p.partition_index, code)
        return _COMMIT(topics=[_COMMIT.OffsetCommitResponseTopic(name=n, partitions=ps) for n, ps in answers.items()])

    async def _commit(self, group: str, topic: str, partition: int, offset: int) -> ErrorCode:
        try:
            await self.zk_call(_set_or_create, self.zk, consumer_offset_path(group, topic, partition),
                               str(offset).encode())
        except Exception:  # noqa: BLE001 - Kafka answers whatever went wrong with its error code
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return ErrorCode.NONE

    async def offset_fetch(self, conn: Connection, req: Request) -> Any:
        r: Any = req.body
        group_allowed = self.auth.authorize(conn, req, AclOperation.DESCRIBE, ResourceType.GROUP, r.group_id)
        topics_in = list(r.topics or [])
        allowed = self._topics_allowed(conn, req, AclOperation.DESCRIBE, [t.name for t in topics_in]) \
            if group_allowed else set()
        topics = []
        for t in topics_in:
            parts = []
            for index in t.partition_indexes:
                offset, code = -1, ErrorCode.NONE
                if not group_allowed:
                    code = ErrorCode.GROUP_AUTHORIZATION_FAILED
                elif t.name not in allowed:
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif self.metadata.partition(t.name, index) is None:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    try:
                        found = await self.zk_call(_get, self.zk, consumer_offset_path(r.group_id, t.name, index))
                    except Exception:  # noqa: BLE001 - as Kafka: the error, offset -1
                        found, code = None, ErrorCode.UNKNOWN_SERVER_ERROR
                    if found is not None:
                        offset = found
                    elif code == ErrorCode.NONE:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                parts.append(_FETCH.OffsetFetchResponsePartition(partition_index=index, committed_offset=offset,
                                                                 committed_leader_epoch=-1, metadata="",
                                                                 error_code=code))
            topics.append(_FETCH.OffsetFetchResponseTopic(name=t.name, partitions=parts))
        return _FETCH(error_code=0, topics=topics)
