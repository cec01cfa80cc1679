"""The partition side of a transaction's end: WriteTxnMarkers.

The transaction coordinator asks each partition leader to write a COMMIT or ABORT control batch
(a *marker*) for a producer. The marker is appended as leader, bypassing the client rules, through
the log's coordinator path, which checks the producer epoch and the coordinator epoch
(INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED), ends the producer's open transaction,
records an aborted transaction in the segment's ``.txnindex`` and moves the last stable offset.
Like Kafka the append waits for acks=all. Markers written to ``__consumer_offsets`` also complete the
group coordinator's pending transactional offset commits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.partition import PartitionError, now_ms
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type
from protocol.records import build_control_batch

if TYPE_CHECKING:
    from broker.group_coordinator import GroupCoordinator
    from broker.replica_manager import ReplicaManager
    from config.registry import BrokerConfig

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TP = tuple[str, int]
_WTM = response_type(ApiKey.WRITE_TXN_MARKERS)


class TxnMarkerWriter:
    """Writes markers to the partitions this broker leads (for WriteTxnMarkers and for the local
    transaction coordinator)."""

    def __init__(self, replica_manager: ReplicaManager, config: Callable[[], BrokerConfig],
                 group_coordinator: Callable[[], GroupCoordinator | None]) -> None:
        self.rm = replica_manager
        self.config = config  # dynamic broker config (request.timeout.ms)
        self.group_coordinator = group_coordinator  # built after this object

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[TP], timeout_s: float | None = None) -> dict[TP, ErrorCode]:
        """Append one marker to each partition (as its leader) and wait for acks=all; the error of each."""
        rm = self.rm
        if timeout_s is None:
            timeout_s = self.config().get("request.timeout.ms") / 1000.0
        results: dict[TP, ErrorCode] = {}
        waits: dict[TP, int] = {}
        for tp in partitions:
            if tp in results or tp in waits:
                continue
            batch = build_control_batch(commit=commit, producer_id=producer_id, producer_epoch=producer_epoch,
                                        coordinator_epoch=coordinator_epoch, timestamp=now_ms())
            try:
                info = rm.append_internal(tp, memoryview(bytearray(batch)))  # below min.insync.replicas: refused
            except PartitionError as e:
                results[tp] = e.code
                if e.code not in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  ErrorCode.NOT_ENOUGH_REPLICAS):
                    log.info("marker for producer %d on %s-%d refused: %s", producer_id, tp[0], tp[1], e)
                continue
            except Exception:
                log.exception("writing a marker to %s-%d failed", *tp)
                results[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
                continue
            waits[tp] = info.last_offset + 1
        if waits:
            codes = await asyncio.gather(*(rm.wait_for_hw(tp, off, timeout_s) for tp, off in waits.items()))
            results.update(zip(waits, codes, strict=True))
        done = [tp[1] for tp, code in results.items() if tp[0] == OFFSETS_TOPIC and code == ErrorCode.NONE]
        if done:
            gc = self.group_coordinator()
            if gc is not None:
                try:
                    gc.complete_pending_txn_offsets(producer_id, commit, partitions=done)
                except Exception:
                    log.exception("completing transactional offset commits of producer %d failed", producer_id)
                    for partition in done:
                        results[(OFFSETS_TOPIC, partition)] = ErrorCode.UNKNOWN_SERVER_ERROR
        return results


    async def handle_write_txn_markers(self, body: Any) -> Any:
        """WriteTxnMarkers v1: every marker of the request, answered per producer and partition."""
        out = []
        for m in body.markers:
            tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
            res = await self.write_markers(m.producer_id, m.producer_epoch, bool(m.transaction_result),
                                      m.coordinator_epoch, tps)
            by_topic: dict[str, list[Any]] = {}
            for (topic, p), code in res.items():
                by_topic.setdefault(topic, []).append(
                    _WTM.WritableTxnMarkerPartitionResult(partition_index=p, error_code=int(code)))
            out.append(_WTM.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
                _WTM.WritableTxnMarkerTopicResult(name=t, partitions=ps) for t, ps in by_topic.items()]))
        return _WTM(markers=out)
