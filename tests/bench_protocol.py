"""Protocol codec benchmark: our schema compiler against kafka-python's ``kafka.protocol`` classes.

Run with ``make bench`` (all benchmarks) or ``.venv/bin/python -m tests.bench_protocol``.

Messages (bodies only, the version a current client sends):

* Produce request v11 with 1 MiB of record batches: in one partition (one batch of 10 records, one
  of 10,000 records, 1,000 batches of 10 records) and spread over 100 partitions;
* Fetch response v16 over 100 partitions, records as file regions (small and large) and in memory;
* Metadata response v12 with 1,000 partitions (10 topics of 100, 5 brokers);
* JoinGroup response v9 (10 members) and OffsetCommit request v9 (5 topics x 20 partitions).

Each cost is the best of several repeats of CPU time (``time.process_time``), interleaved between
the two codecs so that load on the machine hits both alike. Ratios above 1 mean kafka-python takes
longer.
"""

from __future__ import annotations

import gc
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafka.protocol.consumer import FetchResponse as KpFetchResponse
from kafka.protocol.consumer import JoinGroupResponse as KpJoinGroupResponse
from kafka.protocol.consumer import OffsetCommitRequest as KpOffsetCommitRequest
from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse
from kafka.protocol.producer import ProduceRequest as KpProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.api_versions import ApiKey
from protocol.messages import decode_request, encode_request, encode_response, request_type, response_type
from protocol.schema import FileRegion, FileRegions, MessageType, Struct

MIB = 1 << 20
# CPU time of this process: other work on a shared machine delays us but does not count against us.
_clock = time.process_time
QUICK = os.environ.get("KAFKETTE_BENCH_QUICK") == "1"
TARGET_S = 0.02 if QUICK else 0.05  # time per repeat
REPEATS = 3 if QUICK else 7


# ---------------------------------------------------------------------------------------------
# Timing


def _calibrate(fn: Callable[[], Any]) -> int:
    n = 1
    while True:
        t0 = _clock()
        for _ in range(n):
            fn()
        if _clock() - t0 >= TARGET_S / 4 or n >= 1 << 20:
            return max(1, int(n * TARGET_S / max(_clock() - t0, 1e-9)))
        n *= 4


def _run(fn: Callable[[], Any], n: int) -> float:
    gc.disable()
    try:
        t0 = _clock()
        for _ in range(n):
            fn()
        return (_clock() - t0) / n
    finally:
        gc.enable()


def best_of(*fns: Callable[[], Any]) -> list[float]:
    """Seconds per call of each function: best of REPEATS, the functions interleaved."""
    counts = [_calibrate(f) for f in fns]
    best = [float("inf")] * len(fns)
    for _ in range(REPEATS):
        for i, (f, n) in enumerate(zip(fns, counts, strict=True)):
            best[i] = min(best[i], _run(f, n))
    return best


# ---------------------------------------------------------------------------------------------
# Messages


def record_batch(n_records: int, total: int, base_offset: int = 0) -> bytes:
    """A magic-2 batch of ``n_records`` uncompressed records, padded to about ``total`` bytes."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=total * 2)
    overhead = 61 + n_records * 12
    value = b"v" * max(0, (total - overhead) // n_records)
    for i in range(n_records):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce_request(partitions: list[bytes]) -> Struct:
    mt = request_type(ApiKey.PRODUCE)
    per_topic = 10
    topics = []
    for t in range(0, len(partitions), per_topic):
        topics.append(mt.TopicProduceData(name=f"bench-topic-{t // per_topic}", partition_data=[
            mt.PartitionProduceData(index=i, records=rec) for i, rec in enumerate(partitions[t:t + per_topic])]))
    return mt(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=topics)


def fetch_response(records: list[Any]) -> Struct:
    mt = response_type(ApiKey.FETCH)
    topics = []
    for t in range(0, len(records), 10):
        topics.append(mt.FetchableTopicResponse(topic=f"bench-topic-{t // 10}", topic_id=uuid.UUID(int=t + 1),
                                                partitions=[mt.PartitionData(
                                                    partition_index=i, error_code=0, high_watermark=1_000_000,
                                                    last_stable_offset=1_000_000, log_start_offset=0,
                                                    aborted_transactions=None, preferred_read_replica=-1,
                                                    records=rec) for i, rec in enumerate(records[t:t + 10])]))
    return mt(throttle_time_ms=0, error_code=0, session_id=12345, responses=topics)


def metadata_response(n_topics: int = 10, per_topic: int = 100) -> Struct:
    mt = response_type(ApiKey.METADATA)
    brokers = [mt.MetadataResponseBroker(node_id=i, host=f"broker-{i}.kafkette.internal", port=9092,
                                         rack=f"rack-{i % 3}") for i in range(5)]
    topics = []
    for t in range(n_topics):
        parts = [mt.MetadataResponsePartition(error_code=0, partition_index=p, leader_id=p % 5, leader_epoch=17,
                                              replica_nodes=[p % 5, (p + 1) % 5, (p + 2) % 5],
                                              isr_nodes=[p % 5, (p + 1) % 5, (p + 2) % 5], offline_replicas=[])
                 for p in range(per_topic)]
        topics.append(mt.MetadataResponseTopic(error_code=0, name=f"bench-topic-{t}", topic_id=uuid.UUID(int=t + 1),
                                               is_internal=False, partitions=parts,
                                               topic_authorized_operations=-2147483648))
    return mt(throttle_time_ms=0, brokers=brokers, cluster_id="kafkette-bench-cluster", controller_id=1,
              topics=topics)


def join_group_response(members: int = 10) -> Struct:
    mt = response_type(ApiKey.JOIN_GROUP)
    meta = b"\x00\x03" + b"\x00\x00\x00\x02" + b"\x00\x05orders\x00\x08payments" + b"\xff\xff\xff\xff" + bytes(40)
    return mt(throttle_time_ms=0, error_code=0, generation_id=42, protocol_type="consumer", protocol_name="cooperative-sticky",
              leader="consumer-1-3f1c", skip_assignment=False, member_id="consumer-1-3f1c",
              members=[mt.JoinGroupResponseMember(member_id=f"consumer-{i}-3f1c", group_instance_id=None,
                                                  metadata=meta) for i in range(members)])


def offset_commit_request(topics: int = 5, per_topic: int = 20) -> Struct:
    mt = request_type(ApiKey.OFFSET_COMMIT)
    return mt(group_id="bench-group", generation_id_or_member_epoch=42, member_id="consumer-1-3f1c",
              group_instance_id=None, topics=[
                  mt.OffsetCommitRequestTopic(name=f"bench-topic-{t}", partitions=[
                      mt.OffsetCommitRequestPartition(partition_index=p, committed_offset=1_000_000 + p,
                                                      committed_leader_epoch=17, committed_metadata="")
                      for p in range(per_topic)]) for t in range(topics)])


# ---------------------------------------------------------------------------------------------
# Rows


ROWS: list[tuple[str, str, float, float | None, int | None]] = []


def row(name: str, op: str, ours: float, theirs: float | None = None, nbytes: int | None = None) -> None:
    ROWS.append((name, op, ours, theirs, nbytes))
    ratio = f"{theirs / ours:6.2f}x" if theirs else "      -"
    kp = f"{theirs * 1e6:12.1f}" if theirs else f"{'-':>12}"
    rate = f"{nbytes / ours / 1e6:10.0f}" if nbytes else f"{'-':>10}"
    print(f"{name:<50} {op:<7} {ours * 1e6:10.1f} {kp} {ratio} {rate}", flush=True)


def compare(name: str, mt: MessageType, kp_cls: Any, msg: Struct, version: int) -> None:
    """Decode and encode of ``msg`` by both codecs; checks both produce the same bytes first."""
    wire = mt.encode(msg, version)
    view = memoryview(bytearray(wire))
    kp_msg = kp_cls.decode(wire, version=version)
    assert kp_msg.encode() == wire, f"kafka-python encodes {name} differently"
    ours_dec, kp_dec = best_of(lambda: mt.decode(view, version), lambda: kp_cls.decode(view, version=version))
    row(name, "decode", ours_dec, kp_dec, len(wire))
    ours_enc, kp_enc = best_of(lambda: mt.encode(msg, version), lambda: kp_msg.encode())
    row(name, "encode", ours_enc, kp_enc, len(wire))


def flat(label: str, costs: dict[str, float]) -> float:
    lo, hi = min(costs.values()), max(costs.values())
    parts = ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in costs.items())
    print(f"  flat-cost check, {label}: {parts} -> max/min {hi / lo:.2f}", flush=True)
    return hi / lo


def main() -> int:
    print(f"Protocol codec: kafkette schema compiler vs kafka-python {_kp_version()} kafka.protocol "
          f"(Python {sys.version.split()[0]}; best of {REPEATS})")
    print(f"{'message (body codec; Produce flat rows: whole frame)':<50} {'op':<7} {'ours us':>10} "
          f"{'kafka-py us':>12} {'ratio':>7} {'ours MB/s':>10}")

    # -- Produce request: 1 MiB of batches ------------------------------------------------------------
    pt = request_type(ApiKey.PRODUCE)
    v = 11
    variants = {
        "1 batch x 10 records": [record_batch(10, MIB)],
        "1 batch x 10,000 records": [record_batch(10_000, MIB)],
        "1,000 batches x 10 records": [b"".join(record_batch(10, MIB // 1000, i * 10) for i in range(1000))],
    }
    produce_costs = {}
    for label, parts in variants.items():
        msg = produce_request(parts)
        frame = memoryview(bytearray(encode_request(ApiKey.PRODUCE, v, 1, "bench", msg)[4:]))
        (cost,) = best_of(lambda frame=frame: decode_request(frame))
        produce_costs[label] = cost
        row(f"Produce 1 MiB in 1 partition: {label}", "decode", cost)  # zero copy: MB/s says nothing
    produce_flat = flat("Produce decode of 1 MiB in one partition", produce_costs)

    hundred = [record_batch(10, MIB // 100) for _ in range(100)]
    compare("Produce v11, 1 MiB over 100 partitions", pt, KpProduceRequest, produce_request(hundred), v)
    compare("Produce v11, 1 MiB in 1 partition (10k records)", pt, KpProduceRequest,
            produce_request(variants["1 batch x 10,000 records"]), v)

    # -- Fetch response: 100 partitions ---------------------------------------------------------------
    ft = response_type(ApiKey.FETCH)
    v = 16
    fetch_costs = {}
    for label, size in (("4 KiB regions", 4096), ("1 MiB regions", MIB), ("16 MiB regions", 16 * MIB)):
        msg = fetch_response([FileRegions([FileRegion(7, i * size, size)]) for i in range(100)])

        def encode_fetch(msg: Struct = msg) -> list[Any]:
            return encode_response(ApiKey.FETCH, 16, 1, msg)

        (cost,) = best_of(encode_fetch)
        fetch_costs[label] = cost
        row(f"Fetch 100 partitions, {label}", "encode", cost)  # sendfile moves the bytes later
    fetch_flat = flat("Fetch encode of 100 file-region partitions", fetch_costs)
    in_memory = fetch_response([record_batch(10, 10_000, i) for i in range(100)])
    compare("Fetch v16, 100 partitions of 10 KB in memory", ft, KpFetchResponse, in_memory, v)

    # -- Metadata, JoinGroup, OffsetCommit ----------------------------------------------------------
    compare("Metadata v12 response, 1,000 partitions", response_type(ApiKey.METADATA), KpMetadataResponse,
            metadata_response(), 12)
    compare("JoinGroup v9 response, 10 members", response_type(ApiKey.JOIN_GROUP), KpJoinGroupResponse,
            join_group_response(), 9)
    compare("OffsetCommit v9 request, 100 partitions", request_type(ApiKey.OFFSET_COMMIT), KpOffsetCommitRequest,
            offset_commit_request(), 9)

    # The flat-cost claims hold when the spread is noise-sized.
    ok = produce_flat < 1.5 and fetch_flat < 1.5
    losses = [(n, op) for n, op, ours, theirs, _ in ROWS if theirs is not None and theirs < ours]
    print(f"flat cost: {'yes' if ok else 'NO'}; kafka-python faster on: {losses or 'nothing'}")
    return 0 if ok else 1


def _kp_version() -> str:
    from importlib.metadata import version

    return version("kafka-python")


if __name__ == "__main__":
    sys.exit(main())
