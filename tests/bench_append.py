"""The leader's produce path in-process: what ``ReplicaManager.append_records`` costs per batch; and
a follower's append of the same batches (``PartitionLog.append_as_follower``).

Run: ``python -m tests.bench append`` (part of ``make bench``; about 45 s).

The requests have the shape Kafka's ProducerPerformance sends with its defaults (full 16 KiB batches
of 100-byte records from an idempotent producer, acks=1): one partition a request, and twelve
partitions of a 1,000-partition topic a request (the fewest the Java producer's metrics showed it
sending to one broker: 12 to 35 batches a request). Their records are writable memoryviews, as the
broker decodes them from its receive buffer. A real ReplicaManager, LogManager and logs on the disk of ``.cache/``; no sockets and no event-loop
turns between requests, so the figures are the append path alone: LogValidator, the producer-state
check, offset assignment, the segment write and its indexes, the HW and the answer. The follower's
case appends what the leader stored, one and two batches a fetch (the replica fetcher's append: the
CRC check, the write, the indexes, the producer state and the leader epochs; not the fetch itself).

Each figure is the best of three passes of CPU time (``time.process_time``), which other load on the
machine changes less than it changes elapsed time. Beside it: ``pwrite`` of the same batches to one
file on the same disk, which any broker pays in the kernel, so that the Python share can be read off.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from typing import Any

from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from config.registry import BrokerConfig, LogConfig
from protocol.api_versions import ApiKey
from protocol.messages import request_type
from protocol.records import NewRecord, build_batch
from storage.log import PartitionLog
from storage.log_manager import LogManager

BENCH_DIR = os.environ.get("KAFKETTE_BENCH_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), ".cache"))
RECORDS_PER_BATCH = 147  # 100-byte records: 16,167 bytes a batch (ProducerPerformance averaged 16,223)
VALUE = b"x" * 100
PRODUCER_ID = 1000
QUICK = bool(os.environ.get("KAFKETTE_BENCH_QUICK"))


class Leader:
    """A ReplicaManager leading ``partitions`` partitions of topic ``p``, in a directory of its own."""

    def __init__(self, root: str, partitions: int) -> None:
        self.dir = tempfile.mkdtemp(prefix="bench-append-", dir=root)
        config = BrokerConfig()
        self.log_manager = LogManager([self.dir], broker_id=0, cluster_id="bench",
                                      default_config=LogConfig.from_broker(config, {}))
        self.log_manager.startup()
        self.rm = ReplicaManager(0, config, self.log_manager, MetadataCache(0),
                                 lambda _topic: LogConfig.from_broker(config, {}, strict=False))
        topic_id = uuid.uuid4()
        for i in range(partitions):
            self.rm.get_or_create_partition("p", i, topic_id).make_leader(0, [0], [0], 0, 0)

    def close(self) -> None:
        self.log_manager.shutdown()
        shutil.rmtree(self.dir, ignore_errors=True)


def produce_requests(partitions: int, per_request: int, requests: int) -> list[Any]:
    """Produce v9 bodies as the broker decodes them, each partition's sequence numbers continuing."""
    mt = request_type(ApiKey.PRODUCE)
    sequences = [0] * partitions
    timestamp = int(time.time() * 1000)
    records = [NewRecord(None, VALUE, timestamp, (), k) for k in range(RECORDS_PER_BATCH)]
    bodies = []
    partition = 0
    for _ in range(requests):
        data = []
        for _ in range(per_request):
            batch = build_batch(records, producer_id=PRODUCER_ID, producer_epoch=0,
                                base_sequence=sequences[partition], base_timestamp=timestamp,
                                last_offset_delta=RECORDS_PER_BATCH - 1)
            sequences[partition] += RECORDS_PER_BATCH
            data.append(mt.PartitionProduceData(index=partition, records=memoryview(bytearray(batch))))
            partition = (partition + 1) % partitions
        bodies.append(mt(transactional_id=None, acks=1, timeout_ms=30000,
                         topic_data=[mt.TopicProduceData(name="p", partition_data=data)]))
    return bodies


def append_cpu(root: str, partitions: int, per_request: int, requests: int) -> tuple[float, int]:
    """CPU seconds for appending ``requests`` requests to a fresh leader, and the batch size. Each
    partition gets two batches first, not counted: a log's first appends map its indexes and allocate
    their first pages (once per 4 KiB of index after that)."""
    warm_up = 2 * -(-partitions // per_request)
    bodies = produce_requests(partitions, per_request, warm_up + requests)
    size = len(bodies[0].topic_data[0].partition_data[0].records)
    leader = Leader(root, partitions)
    try:
        async def append(some: list[Any]) -> None:
            for body in some:
                resp = await leader.rm.append_records(body, 9, defer=True)
                errors = [p.error_code for t in resp.responses for p in t.partition_responses if p.error_code]
                if errors:
                    raise RuntimeError(f"append refused: {errors}")

        async def run() -> float:
            await append(bodies[:warm_up])
            started = time.process_time()
            await append(bodies[warm_up:])
            return time.process_time() - started

        return asyncio.run(run()), size
    finally:
        leader.close()


def fetched_pieces(root: str, batches: int, per_fetch: int) -> list[bytes]:
    """What a follower's fetches bring: the leader's stored batches (offsets and epoch assigned), joined
    ``per_fetch`` at a time (the Java producer's acks=all load gave its followers about two a fetch)."""
    leader = Leader(root, 1)
    try:
        stored = []
        for body in produce_requests(1, 1, batches):
            data = body.topic_data[0].partition_data[0].records
            resp = asyncio.run(leader.rm.append_records(body, 9))
            if resp.responses[0].partition_responses[0].error_code:
                raise RuntimeError("append refused")
            stored.append(bytes(data))  # appended in place: now the leader's bytes
        return [b"".join(stored[i:i + per_fetch]) for i in range(0, len(stored), per_fetch)]
    finally:
        leader.close()


def follower_append_cpu(root: str, pieces: list[bytes]) -> float:
    """CPU seconds for a fresh follower log appending ``pieces`` as the replica fetcher does (the first
    two, which map its indexes, not counted)."""
    directory = tempfile.mkdtemp(prefix="bench-follower-", dir=root)
    lg = PartitionLog(os.path.join(directory, "p-0"), LogConfig.from_broker(BrokerConfig(), {}))
    try:
        views = [memoryview(p) for p in pieces]
        for v in views[:2]:
            lg.append_as_follower(v)
        started = time.process_time()
        for v in views[2:]:
            lg.append_as_follower(v)
        return time.process_time() - started
    finally:
        lg.close()
        shutil.rmtree(directory, ignore_errors=True)


def pwrite_cpu(root: str, size: int, batches: int) -> float:
    """CPU seconds for pwrite-appending ``batches`` chunks of ``size`` bytes to one file."""
    path = os.path.join(root, f"bench-append-raw-{os.getpid()}")
    chunk = os.urandom(size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.process_time()
        position = 0
        for _ in range(batches):
            position += os.pwrite(fd, chunk, position)
        return time.process_time() - started
    finally:
        os.close(fd)
        os.unlink(path)


def main() -> None:
    os.makedirs(BENCH_DIR, exist_ok=True)
    requests = 600 if QUICK else 3000
    print(f"ReplicaManager.append_records in-process: 16 KiB idempotent batches of {RECORDS_PER_BATCH} "
          "records of 100 B, acks=1; CPU us per batch, best of 3 passes")
    print(f"  {'case':<40} {'append':>8} {'per record':>11} {'pwrite alone':>13} {'the rest':>9}")
    for label, partitions, per_request in (("1 partition, 1 a request", 1, 1),
                                           ("1,000 partitions, 12 a request", 1000, 12)):
        n_requests = requests // per_request
        batches = n_requests * per_request
        runs = [append_cpu(BENCH_DIR, partitions, per_request, n_requests) for _ in range(3)]
        cpu = min(r[0] for r in runs)
        size = runs[0][1]
        raw = min(pwrite_cpu(BENCH_DIR, size, batches) for _ in range(3))
        per_batch, raw_per_batch = cpu / batches * 1e6, raw / batches * 1e6
        print(f"  {label:<40} {per_batch:7.1f}  {per_batch * 1000 / RECORDS_PER_BATCH:8.0f} ns "
              f"{raw_per_batch:11.1f}  {per_batch - raw_per_batch:8.1f}")
    print("PartitionLog.append_as_follower in-process: the same batches as the leader stored them, as the "
          "replica fetcher appends them; CPU us per fetch, best of 3 passes")
    print(f"  {'case':<40} {'append':>8} {'per record':>11} {'pwrite alone':>13} {'the rest':>9}")
    for per_fetch in (1, 2):
        pieces = fetched_pieces(BENCH_DIR, requests, per_fetch)
        cpu = min(follower_append_cpu(BENCH_DIR, pieces) for _ in range(3))
        fetches = len(pieces) - 2
        raw = min(pwrite_cpu(BENCH_DIR, len(pieces[0]), fetches) for _ in range(3))
        per_fetch_us, raw_us = cpu / fetches * 1e6, raw / fetches * 1e6
        label = f"{per_fetch} batch{'es' if per_fetch > 1 else ''} a fetch"
        print(f"  {label:<40} {per_fetch_us:7.1f}  {per_fetch_us * 1000 / (per_fetch * RECORDS_PER_BATCH):8.0f} ns "
              f"{raw_us:11.1f}  {per_fetch_us - raw_us:8.1f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
