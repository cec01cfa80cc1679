"""The broker's syscall ceiling (raw protocol, pre-built batch, not a real client): produce and consume
records/s and MB/s on one broker, and RF=3 acks=all.

What a user's client gets is measured by tests/bench_clients.py (Kafka's own performance tools and
librdkafka, side by side with Apache Kafka). Here the load generator speaks the raw protocol from
several processes, resending one pre-built batch (100-byte records in 64 KiB batches, uncompressed,
no producer id) with a window of in-flight requests per connection, so the generator costs little
next to the broker. Consumers fetch with large
``max_bytes`` and count records from batch headers only. The same run measures the machine's
limits: sequential ``write`` of 64 KiB chunks to the broker's disk, and ``sendfile`` from a file to a
loopback socket; results are reported as ratios to those.

    python -m tests.bench broker          # or: make bench
    KAFKETTE_BENCH_SECONDS=10 python -m tests.bench broker

With KAFKETTE_BENCH_PROFILE=1 the one-broker run is profiled (cProfile) and the top functions by
internal time are printed: where the broker's time goes.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pstats
import socket
import tempfile
import threading
import time
from pathlib import Path

from clients.devcluster import LocalCluster
from protocol.api_versions import ApiKey
from protocol.messages import decode_response, encode_request, new_request, request_type
from protocol.records import NewRecord, build_batch, iter_batches
from tests import benchmark_clients_support as bu
from tests.integration.helpers import controller_bootstrap

SECONDS = float(os.environ.get("KAFKETTE_BENCH_SECONDS", "6"))
RECORD_SIZE = 100
BATCH_BYTES = 64 * 1024
PROCS = 3
WINDOW = 5
PRODUCE_VERSION = 9
FETCH_VERSION = 12




def _request(sock: socket.socket, api_key: int, version: int, body: object, corr: int = 1) -> object:
    sock.sendall(encode_request(api_key, version, corr, "bench", body))
    return decode_response(api_key, version, bu.recv_frame(sock))[1]


def _connect(addr: tuple[str, int]) -> socket.socket:
    s = socket.create_connection(addr)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _records_per_batch() -> int:
    return BATCH_BYTES // (RECORD_SIZE + 12)


def _produce_worker(addr: tuple[str, int], topic: str, partition: int, acks: int, seconds: float,
                    out: mp.Queue) -> None:
    n = _records_per_batch()
    payload = os.urandom(RECORD_SIZE)
    batch = build_batch([NewRecord(None, payload) for _ in range(n)])
    mt = request_type(ApiKey.PRODUCE)
    body = mt(acks=acks, timeout_ms=30000, topic_data=[mt.TopicProduceData(name=topic, partition_data=[
        mt.PartitionProduceData(index=partition, records=batch)])])
    frame = encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "bench", body)
    sock = _connect(addr)
    sent = acked = errors = 0
    deadline = time.monotonic() + seconds
    inflight = 0
    while True:
        now = time.monotonic()
        while inflight < WINDOW and now < deadline:
            sock.sendall(frame)
            inflight += 1
            sent += 1
        if inflight == 0:
            break
        resp = decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, bu.recv_frame(sock))[1]
        inflight -= 1
        if resp.responses[0].partition_responses[0].error_code == 0:  # type: ignore[attr-defined]
            acked += 1
        else:
            errors += 1
    sock.close()
    out.put((acked * n, acked * len(batch), errors))


def _consume_worker(addr: tuple[str, int], topic: str, partition: int, end_offset: int, out: mp.Queue) -> None:
    mt = request_type(ApiKey.FETCH)
    sock = _connect(addr)
    offset = records = nbytes = 0
    started = time.perf_counter()
    while offset < end_offset:
        body = mt(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=32 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, topics=[mt.FetchTopic(topic=topic, partitions=[
                      mt.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=16 << 20)])])
        resp = _request(sock, ApiKey.FETCH, FETCH_VERSION, body)
        data = resp.responses[0].partitions[0].records  # type: ignore[attr-defined]
        if not data:
            continue
        for b in iter_batches(data, allow_partial_tail=True):
            records += b.records_count
            nbytes += b.size
            offset = b.next_offset
    elapsed = time.perf_counter() - started
    sock.close()
    out.put((records, nbytes, elapsed))


def _raw_write_mb_s(directory: str, seconds: float = 2.0) -> float:
    chunk = os.urandom(BATCH_BYTES)
    path = os.path.join(directory, "raw-write.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(64):
            written += os.write(fd, chunk)
    elapsed = time.perf_counter() - start
    os.close(fd)
    os.unlink(path)
    return written / elapsed / 1e6


def _raw_sendfile_mb_s(directory: str, size: int = 256 << 20) -> float:
    path = os.path.join(directory, "raw-sendfile.bin")
    with open(path, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(size >> 20):
            f.write(block)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def drain() -> None:
        c, _ = srv.accept()
        buf = bytearray(1 << 20)
        while c.recv_into(buf):
            pass
        c.close()

    t = threading.Thread(target=drain)
    t.start()
    s = socket.create_connection(srv.getsockname())
    fd = os.open(path, os.O_RDONLY)
    start = time.perf_counter()
    off = 0
    while off < size:
        off += os.sendfile(s.fileno(), fd, off, size - off)
    elapsed = time.perf_counter() - start
    s.close()
    t.join()
    os.close(fd)
    os.unlink(path)
    srv.close()
    return size / elapsed / 1e6


def _create_topic(addr: tuple[str, int], topic: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
    mt = request_type(ApiKey.CREATE_TOPICS)
    body = mt(topics=[mt.CreatableTopic(name=topic, num_partitions=partitions, replication_factor=rf, configs=[
        mt.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])], timeout_ms=30000)
    # To the active controller: any other broker answers NOT_CONTROLLER, as Kafka does.
    host, port = controller_bootstrap(f"{addr[0]}:{addr[1]}").rsplit(":", 1)
    with _connect((host, int(port))) as s:
        resp = _request(s, ApiKey.CREATE_TOPICS, 7, body)
    code = resp.topics[0].error_code  # type: ignore[attr-defined]
    if code not in (0, 36):
        raise RuntimeError(f"CreateTopics failed with error {code}")


def _leaders(addr: tuple[str, int], topic: str) -> dict[int, tuple[str, int]]:
    with _connect(addr) as s:
        md = _request(s, ApiKey.METADATA, 12, new_request(ApiKey.METADATA, topics=[
            request_type(ApiKey.METADATA).MetadataRequestTopic(name=topic)]))
    nodes = {b.node_id: (b.host, b.port) for b in md.brokers}  # type: ignore[attr-defined]
    return {p.partition_index: nodes[p.leader_id] for p in md.topics[0].partitions}  # type: ignore[attr-defined]


def _run_produce(cluster: LocalCluster, topic: str, acks: int) -> tuple[float, float, int]:
    leaders = _leaders((cluster.brokers[0].host, cluster.brokers[0].port), topic)
    q: mp.Queue = mp.Queue()
    procs = [mp.Process(target=_produce_worker, args=(leaders[i % len(leaders)], topic, i % len(leaders), acks,
                                                      SECONDS, q)) for i in range(PROCS)]
    start = time.perf_counter()
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - start
    recs = sum(r[0] for r in results)
    nbytes = sum(r[1] for r in results)
    errors = sum(r[2] for r in results)
    return recs / elapsed, nbytes / elapsed / 1e6, errors


def _run_consume(cluster: LocalCluster, topic: str) -> tuple[float, float]:
    addr = (cluster.brokers[0].host, cluster.brokers[0].port)
    leaders = _leaders(addr, topic)
    ends = {}
    mt = request_type(ApiKey.LIST_OFFSETS)
    for p, leader in leaders.items():
        with _connect(leader) as s:
            resp = _request(s, ApiKey.LIST_OFFSETS, 7, mt(replica_id=-1, topics=[mt.ListOffsetsTopic(
                name=topic, partitions=[mt.ListOffsetsPartition(partition_index=p, timestamp=-1)])]))
        ends[p] = resp.topics[0].partitions[0].offset  # type: ignore[attr-defined]
    q: mp.Queue = mp.Queue()
    procs = [mp.Process(target=_consume_worker, args=(leaders[p], topic, p, ends[p], q)) for p in leaders]
    start = time.perf_counter()
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - start
    return sum(r[0] for r in results) / elapsed, sum(r[1] for r in results) / elapsed / 1e6


def main() -> int:
    profile = os.environ.get("KAFKETTE_BENCH_PROFILE") == "1"
    base = Path(tempfile.mkdtemp(prefix="kafkette-bench-"))
    raw_write = _raw_write_mb_s(str(base))
    raw_sendfile = _raw_sendfile_mb_s(str(base))
    print("the broker's syscall ceiling (raw protocol, pre-built batch, not a real client)")
    print(f"machine limits: sequential write {raw_write:,.0f} MB/s, sendfile to loopback {raw_sendfile:,.0f} MB/s")
    prof_path = base / "broker.prof"
    if profile:
        os.environ["KAFKETTE_PROFILE"] = str(prof_path)
    rows = []
    with LocalCluster(1, base_dir=base / "one") as c1:
        os.environ.pop("KAFKETTE_PROFILE", None)
        addr = (c1.brokers[0].host, c1.brokers[0].port)
        _create_topic(addr, "bench", PROCS, 1, {})
        rps, mbps, errors = _run_produce(c1, "bench", 1)
        rows.append(("produce, 1 broker, acks=1", rps, mbps, mbps / raw_write, "write", errors))
        rps, mbps = _run_consume(c1, "bench")
        rows.append(("consume, 1 broker", rps, mbps, mbps / raw_sendfile, "sendfile", 0))
    if profile and prof_path.exists():
        print("\nbroker profile, produce + consume phases (top 20 by internal time):")
        pstats.Stats(str(prof_path)).sort_stats("tottime").print_stats(20)
    with LocalCluster(3, base_dir=base / "three") as c3:
        addr = (c3.brokers[0].host, c3.brokers[0].port)
        _create_topic(addr, "bench3", PROCS, 3, {"min.insync.replicas": "2"})
        time.sleep(1.0)
        rps, mbps, errors = _run_produce(c3, "bench3", -1)
        rows.append(("produce, 3 brokers RF=3, acks=all", rps, mbps, mbps / raw_write, "write", errors))
    print("\nthe broker's syscall ceiling (raw protocol, pre-built batch, not a real client; "
          "real clients: python -m tests.bench clients)")
    print(f"{'scenario':38} {'records/s':>12} {'MB/s':>8} {'ratio':>7}  vs       errors")
    for name, rps, mbps, ratio, vs, errors in rows:
        print(f"{name:38} {rps:>12,.0f} {mbps:>8,.1f} {ratio:>7.2f}  {vs:8} {errors}")
    print(f"(records of {RECORD_SIZE} B in {BATCH_BYTES // 1024} KiB batches, {PROCS} generator processes, "
          f"window {WINDOW}, {SECONDS:.0f} s per produce phase)")
    import shutil

    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
