"""The CLI's producer: batches per partition, sent to each partition's leader, retried as Kafka's are.

Delivery follows the Java producer's rules (``Sender`` / ``RecordAccumulator``):

- A partition's batch that fails with a retriable error (NOT_LEADER_OR_FOLLOWER, a leader that is
  not available yet, NOT_ENOUGH_REPLICAS, a timeout, a lost connection...) is sent again after
  ``retry.backoff.ms``, up to ``retries`` times and within ``delivery.timeout.ms``. Errors that say
  our metadata is stale refresh it first, so the retry goes to the new leader.
- ``enable.idempotence`` (on by default with ``acks=all``, as in Kafka 3.x): the producer gets a
  producer id from InitProducerId and numbers each partition's batches. A retried batch is the same
  bytes with the same sequence, so a leader that already wrote it acknowledges it without writing it
  again: a batch whose first attempt was written but not acknowledged (the leader died after the
  append) appears once. One batch per partition is in flight at a time, so sequences stay in order.
- Without idempotence a retry may duplicate records, as with Kafka.

Why ours and not kafka-python's ``KafkaProducer``: it runs its own sender thread and network client,
and the CLI's producer must use the one client like every other connection. The partitioner is
kafka-python's murmur2 (``clients/partitioner.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clients.connection import ConnectionFailed, KafkaWireError, UsageError, WireError, check
from clients.partitioner import StickyPartitioner
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode, error_info
from protocol.messages import request_type
from protocol.records import CompressionType, NewRecord, build_batch

if TYPE_CHECKING:
    from clients.admin import WireClient

__all__ = ["COMPRESSION", "DeliveryConfig", "Producer", "parse_acks", "produce_batches"]

log = logging.getLogger(__name__)

TP = tuple[str, int]
COMPRESSION = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
               "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}

# Errors after which Kafka's producer refreshes metadata before retrying (InvalidMetadataException).
_STALE_METADATA = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                   ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.FENCED_LEADER_EPOCH,
                   ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_CONTROLLER}
_MAX_SEQUENCE = 0x7FFFFFFF


def parse_acks(value: str) -> int:
    v = value.strip().lower()
    if v == "all":
        return -1
    try:
        acks = int(v)
    except ValueError:
        raise UsageError(f"invalid acks {value!r}: expected all, -1, 0 or 1") from None
    if acks not in (-1, 0, 1):
        raise UsageError(f"invalid acks {value!r}: expected all, -1, 0 or 1")
    return acks


@dataclass(frozen=True, slots=True)
class DeliveryConfig:
    """Kafka's producer delivery settings, with Kafka's defaults."""

    acks: int = -1
    request_timeout_ms: int = 30000  # request.timeout.ms
    retries: int = 2147483647  # retries
    retry_backoff_ms: int = 100  # retry.backoff.ms
    delivery_timeout_ms: int = 120000  # delivery.timeout.ms

    @classmethod
    def from_properties(cls, props: dict[str, str], acks: int | None = None) -> DeliveryConfig:
        def num(name: str, default: int) -> int:
            raw = props.get(name)
            if raw is None or raw == "":
                return default
            try:
                return int(raw)
            except ValueError:
                raise UsageError(f"Invalid value {raw} for configuration {name}: Not a number of type INT") from None
        return cls(acks=acks if acks is not None else parse_acks(props.get("acks", "all")),
                   request_timeout_ms=num("request.timeout.ms", 30000), retries=num("retries", 2147483647),
                   retry_backoff_ms=num("retry.backoff.ms", 100),
                   delivery_timeout_ms=num("delivery.timeout.ms", 120000))


def produce_batches(client: WireClient, batches: dict[TP, bytes], delivery: DeliveryConfig,
                    on_retry: Callable[[int], None] | None = None) -> dict[TP, tuple[int, int, str | None]]:
    """Send one batch per partition to its leader, retrying per ``delivery``.

    Returns (error code, base offset, error message) per partition: 0 and the offset once written,
    else the last error (non-retriable, or retries / the delivery timeout exhausted). ``on_retry(n)``
    is told how many batches each retry round sends again.
    """
    out: dict[TP, tuple[int, int, str | None]] = {}
    pending = dict(batches)
    deadline = time.monotonic() + delivery.delivery_timeout_ms / 1000
    attempt = 0
    while pending:
        failed: dict[TP, tuple[int, str | None]] = {}
        for tp, code, offset, msg in _send_round(client, pending, delivery):
            if code == ErrorCode.NONE:
                out[tp] = (0, offset, None)
                del pending[tp]
            else:
                failed[tp] = (code, msg)
        if delivery.acks == 0:
            return {**out, **{tp: (0, -1, None) for tp in pending}}
        if not failed:
            break
        retriable = {tp for tp, (code, _m) in failed.items() if error_info(code).retriable}
        exhausted = attempt >= delivery.retries or time.monotonic() + delivery.retry_backoff_ms / 1000 > deadline
        for tp, (code, msg) in failed.items():
            if tp not in retriable or exhausted:
                out[tp] = (code, -1, msg)
                del pending[tp]
        if not pending:
            break
        attempt += 1
        if on_retry is not None:
            on_retry(len(pending))
        log.info("retrying %d batch(es) (attempt %d): %s", len(pending), attempt,
                 sorted({error_info(failed[tp][0]).name for tp in pending}))
        time.sleep(delivery.retry_backoff_ms / 1000)
        if any(failed[tp][0] in _STALE_METADATA or failed[tp][0] == ErrorCode.NETWORK_EXCEPTION for tp in pending):
            try:
                client.refresh(sorted({t for t, _ in pending}))
            except WireError as e:  # no broker answered yet: the next round tries again
                log.info("metadata refresh failed: %s", e)
    return out


def _send_round(client: WireClient, batches: dict[TP, bytes], delivery: DeliveryConfig
                ) -> list[tuple[TP, int, int, str | None]]:
    """One request per leader; (partition, error code, base offset, message) for every partition."""
    results: list[tuple[TP, int, int, str | None]] = []
    by_leader: dict[int, dict[str, list[tuple[int, bytes]]]] = {}
    for (t, p), data in batches.items():
        try:
            leader = client.leader_of(t, p, retries=1)
        except KafkaWireError as e:
            results.append(((t, p), e.code, -1, str(e)))
            continue
        except WireError as e:  # metadata could not be fetched (no broker reachable right now)
            results.append(((t, p), ErrorCode.NETWORK_EXCEPTION, -1, str(e)))
            continue
        by_leader.setdefault(leader, {}).setdefault(t, []).append((p, data))
    mt = request_type(ApiKey.PRODUCE)
    sent: list[tuple[Any, dict[str, list[tuple[int, bytes]]]]] = []
    for leader, topics in by_leader.items():
        body = mt(transactional_id=None, acks=delivery.acks, timeout_ms=delivery.request_timeout_ms, topic_data=[
            mt.TopicProduceData(name=t, partition_data=[mt.PartitionProduceData(index=p, records=d) for p, d in ps])
            for t, ps in topics.items()])
        try:
            conn = client.connection(leader)
            conn.send(ApiKey.PRODUCE, conn.version(ApiKey.PRODUCE), body, expect_response=delivery.acks != 0)
        except (ConnectionFailed, KafkaWireError) as e:
            client.drop(leader)
            results += _all(topics, ErrorCode.NETWORK_EXCEPTION, str(e))
            continue
        sent.append((conn, topics))
    if delivery.acks == 0:
        return results + _all({t: ps for _c, topics in sent for t, ps in topics.items()}, ErrorCode.NONE, None)
    for conn, topics in sent:
        try:
            r = conn.receive()
        except WireError as e:  # lost or timed out: the batch may or may not have been written
            client.drop(conn.node_id)
            code = e.code if isinstance(e, KafkaWireError) else ErrorCode.NETWORK_EXCEPTION
            results += _all(topics, code, str(e))
            continue
        for t in r.responses:
            for p in t.partition_responses:
                results.append(((t.name, p.index), p.error_code, p.base_offset, getattr(p, "error_message", None)))
    return results


def _all(topics: dict[str, list[tuple[int, bytes]]], code: int, msg: str | None
         ) -> list[tuple[TP, int, int, str | None]]:
    return [((t, p), code, -1, msg) for t, ps in topics.items() for p, _d in ps]


class Producer:
    """Buffers records per partition and sends one batch per partition per request round."""

    def __init__(self, client: WireClient, *, acks: int = -1, compression: str = "none",
                 batch_size: int = 16384, linger_ms: int = 0, request_timeout_ms: int = 30000,
                 retries: int = 2147483647, retry_backoff_ms: int = 100, delivery_timeout_ms: int = 120000,
                 enable_idempotence: bool | None = None) -> None:
        if compression not in COMPRESSION:
            raise WireError(f"unknown compression type {compression!r} (none, gzip, snappy, lz4, zstd)")
        if enable_idempotence and acks != -1:
            raise UsageError("Must set acks to all in order to use the idempotent producer. "
                             "Otherwise we cannot guarantee idempotence.")
        self.client = client
        self.acks = acks
        self.delivery = DeliveryConfig(acks=acks, request_timeout_ms=request_timeout_ms, retries=retries,
                                       retry_backoff_ms=retry_backoff_ms, delivery_timeout_ms=delivery_timeout_ms)
        # Kafka 3.x: idempotence is on unless disabled or contradicted by acks (left unset).
        self.idempotent = acks == -1 if enable_idempotence is None else enable_idempotence
        self.compression = COMPRESSION[compression]
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.timeout_ms = request_timeout_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[TP, int] = {}
        self._buf: dict[TP, list[NewRecord]] = {}
        self._buf_bytes = 0
        self._first_at: float | None = None
        self._partitioner = StickyPartitioner()
        self.sent = 0
        self.retried_batches = 0

    @classmethod
    def from_properties(cls, client: WireClient, props: dict[str, str], **overrides: Any) -> Producer:
        """A producer configured by Kafka's producer property names."""
        d = DeliveryConfig.from_properties(props, overrides.pop("acks", None))
        idem = props.get("enable.idempotence")
        kwargs: dict[str, Any] = dict(
            acks=d.acks, compression=props.get("compression.type", "none"),
            batch_size=int(props.get("batch.size", "16384")), linger_ms=int(props.get("linger.ms", "0")),
            request_timeout_ms=d.request_timeout_ms, retries=d.retries, retry_backoff_ms=d.retry_backoff_ms,
            delivery_timeout_ms=d.delivery_timeout_ms,
            enable_idempotence=None if idem is None else idem.strip().lower() == "true")
        kwargs.update(overrides)
        return cls(client, **kwargs)

    def partition(self, topic: str, key: bytes | None) -> int:
        t = self.client.cluster.topics.get(topic) if self.client.cluster else None
        if t is None:
            t = self.client.topic(topic)
        return self._partitioner.partition(topic, key, len(t.partitions))

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None,
             headers: list[tuple[str, bytes | None]] | None = None, timestamp: int | None = None) -> None:
        if partition is None:
            partition = self.partition(topic, key)
        self._buf.setdefault((topic, partition), []).append(NewRecord(key, value, timestamp, headers or ()))
        self._buf_bytes += len(value or b"") + len(key or b"") + 16
        if self._first_at is None:
            self._first_at = time.monotonic()
        if self._buf_bytes >= self.batch_size or (self._first_at and
                                                  time.monotonic() - self._first_at >= self.linger_s):
            self.flush()

    def _init_producer_id(self) -> None:
        """InitProducerId without a transactional id: a fresh producer id for idempotence."""
        for attempt in range(20):
            r = self.client.call(ApiKey.INIT_PRODUCER_ID, transactional_id=None, transaction_timeout_ms=60000,
                                 producer_id=-1, producer_epoch=-1)
            if error_info(r.error_code).retriable and attempt < 19:
                time.sleep(self.delivery.retry_backoff_ms / 1000)
                continue
            check(r.error_code, context="InitProducerId")
            self.producer_id, self.producer_epoch = r.producer_id, r.producer_epoch
            return

    def _batch(self, tp: TP, records: list[NewRecord]) -> bytes:
        if not self.idempotent:
            return build_batch(records, compression=self.compression)
        if self.producer_id < 0:
            self._init_producer_id()
        seq = self._sequences.get(tp, 0)
        self._sequences[tp] = (seq + len(records)) & _MAX_SEQUENCE  # sequences wrap at Integer.MAX_VALUE
        return build_batch(records, compression=self.compression, producer_id=self.producer_id,
                           producer_epoch=self.producer_epoch, base_sequence=seq)

    def _count_retry(self, n: int) -> None:
        self.retried_batches += n

    def flush(self) -> dict[TP, tuple[int, int, str | None]]:
        if not self._buf:
            return {}
        batches = {tp: self._batch(tp, recs) for tp, recs in self._buf.items()}
        counts = {tp: len(recs) for tp, recs in self._buf.items()}
        self._buf.clear()
        self._buf_bytes = 0
        self._first_at = None
        self._partitioner.batch_done()
        results = produce_batches(self.client, batches, self.delivery, self._count_retry)
        for tp, (code, _off, msg) in results.items():
            check(code, msg, f"produce to {tp[0]}-{tp[1]}")
            self.sent += counts[tp]
        return results
