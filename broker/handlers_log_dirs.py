"""Log dir APIs: DescribeLogDirs and AlterReplicaLogDirs (KIP-113), as Kafka 3.9's KafkaApis and
ReplicaManager answer them in ZooKeeper mode.

* DescribeLogDirs (DESCRIBE on the cluster): each configured log dir with its volume's total and usable
  bytes (v4), and the logs in it of the partitions asked for (all when the request says null). A partition
  being moved shows twice: its current log, with ``offset_lag`` = HW - LEO (never below 0), and its future
  log in the destination dir, with ``is_future_key`` and ``offset_lag`` = how far it is behind the current
  log's end. The lag is -1 for a log whose partition is not online here. An offline dir answers
  KAFKA_STORAGE_ERROR and nothing else.
* AlterReplicaLogDirs (ALTER on the cluster, else every partition CLUSTER_AUTHORIZATION_FAILED): moves
  each named replica to the named dir (broker/alter_log_dirs.py). Per partition: LOG_DIR_NOT_FOUND for a
  path that is not one of log.dirs, KAFKA_STORAGE_ERROR for an offline dir or replica,
  REPLICA_NOT_AVAILABLE for a partition of the cluster this broker does not host (the dir is remembered
  and used when the replica comes), UNKNOWN_TOPIC_OR_PARTITION for one the cluster does not know, NONE
  for a move started or in progress, or a replica in that dir already. A partition named twice goes to
  the last dir named.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from broker.authorizer.api import AclOperation
from broker.request_authorization import ALLOW_ALL, RequestAuthorizer
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.alter_log_dirs import AlterLogDirsManager
    from broker.connection import Connection
    from broker.kafka_apis import KafkaApis
    from broker.replica_manager import ReplicaManager
    from protocol.messages import Request
    from storage.log import PartitionLog
    from storage.log_manager import LogManager

TP = tuple[str, int]
INVALID_OFFSET_LAG = -1  # Kafka's DescribeLogDirsResponse.INVALID_OFFSET_LAG

_DESCRIBE = response_type(ApiKey.DESCRIBE_LOG_DIRS)
_ALTER = response_type(ApiKey.ALTER_REPLICA_LOG_DIRS)


class LogDirHandlers:
    def __init__(self, log_manager: LogManager, replica_manager: ReplicaManager, mover: AlterLogDirsManager,
                 auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.log_manager = log_manager
        self.rm = replica_manager
        self.mover = mover
        self.auth = auth

    # ------------------------------------------------------------------------------------------------
    # DescribeLogDirs

    async def describe_log_dirs(self, conn: Connection, req: Request) -> Any:
        if not self.auth.authorize_cluster(conn, req, AclOperation.DESCRIBE):
            return _DESCRIBE(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
        lm = self.log_manager
        topics = req.body.topics
        wanted = None if topics is None else {(t.topic, p) for t in topics for p in t.partitions}
        logs: dict[str, list[tuple[PartitionLog, bool]]] = {d: [] for d in lm.log_dirs}
        for lg in lm.all_logs():
            d = lm.log_dir_of(lg.topic, lg.partition)
            if d in logs:
                logs[d].append((lg, False))
        for lg in lm.all_future_logs():
            d = lm.future_log_dir_of(lg.topic, lg.partition)
            if d in logs:
                logs[d].append((lg, True))
        results = []
        for d in lm.log_dirs:
            r = _DESCRIBE.DescribeLogDirsResult(error_code=ErrorCode.NONE, log_dir=d, topics=[])
            results.append(r)
            if d in lm.offline_dirs:
                r.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            by_topic: dict[str, list[Any]] = {}
            for lg, is_future in logs[d]:
                if wanted is not None and (lg.topic, lg.partition) not in wanted:
                    continue
                by_topic.setdefault(lg.topic, []).append(_DESCRIBE.DescribeLogDirsPartition(
                    partition_index=lg.partition, partition_size=lg.size_in_bytes,
                    offset_lag=self._offset_lag(lg, is_future), is_future_key=is_future))
            r.topics = [_DESCRIBE.DescribeLogDirsTopic(name=t, partitions=sorted(ps, key=lambda x: x.partition_index))
                        for t, ps in sorted(by_topic.items())]
            try:
                st = os.statvfs(d)
            except OSError:
                continue
            r.total_bytes = st.f_blocks * st.f_frsize
            r.usable_bytes = st.f_bavail * st.f_frsize
        return _DESCRIBE(error_code=ErrorCode.NONE, results=results)

    def _offset_lag(self, lg: PartitionLog, is_future: bool) -> int:
        """Kafka's getLogEndOffsetLag: against the partition's current log, when it is online here."""
        p = self.rm.partitions.get((lg.topic, lg.partition))
        if p is None or p.log.is_offline:
            return INVALID_OFFSET_LAG
        if is_future:
            return p.log.log_end_offset - lg.log_end_offset
        return max(p.log.high_watermark - lg.log_end_offset, 0)

    # ------------------------------------------------------------------------------------------------
    # AlterReplicaLogDirs

    async def alter_replica_log_dirs(self, conn: Connection, req: Request) -> Any:
        b = req.body
        if not self.auth.authorize_cluster(conn, req, AclOperation.ALTER):
            # Kafka's getErrorResponse: every partition as the request names it, dir by dir.
            return _ALTER(results=[_ALTER.AlterReplicaLogDirTopicResult(topic_name=t.name, partitions=[
                _ALTER.AlterReplicaLogDirPartitionResult(partition_index=p,
                                                         error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                for p in t.partitions]) for d in b.dirs for t in d.topics])
        requested: dict[TP, str] = {}
        for d in b.dirs:
            for t in d.topics:
                for p in t.partitions:
                    requested[(t.name, p)] = d.path
        errors = await self.mover.alter_replica_log_dirs(requested)
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), code in errors.items():
            by_topic.setdefault(topic, []).append(
                _ALTER.AlterReplicaLogDirPartitionResult(partition_index=partition, error_code=code))
        return _ALTER(results=[_ALTER.AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps)
                               for t, ps in by_topic.items()])

    def register(self, apis: KafkaApis) -> None:
        apis.register(ApiKey.DESCRIBE_LOG_DIRS, self.describe_log_dirs)
        apis.register(ApiKey.ALTER_REPLICA_LOG_DIRS, self.alter_replica_log_dirs)
