"""Mutated real requests against a live broker, with a well-behaved producer and consumer beside it.

1. Capture: kafka-python and confluent-kafka (librdkafka) run a short workload (admin, idempotent and
   transactional produce, group consumption, offset commits), and the Java consumer reads a
   partition, all through a recording proxy: the broker advertises the proxy's port, so every
   request those clients send passes through it and is kept (a few frames per API and version).
2. Fuzz: the frames are mutated (bit flips, truncation, lying size prefixes, varint runs, array
   counts, random versions, inserted and deleted bytes) with a fixed seed and fired at the broker's
   own port, many connections at a time, each sent and half-closed, in two identical passes (the
   first is the warm-up for the memory check). Count and time are bounded.
3. Meanwhile a producer (acks=all) and a consumer keep going. The broker must survive, its memory
   (RSS) stay bounded after warm-up, its connections and request permits come back, and every
   acknowledged record be read back, in order. Throughput with and without the fuzzer is printed;
   nothing is asserted about time.

The broker has a control-plane listener, as a broker exposed to untrusted clients should: mutated
controller requests sent to the client listener are refused there.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from clients.zookeeper_server import free_port
from protocol.api_versions import ApiKey
from tests.integration.helpers import unique, wait_until

SEED = 20261123
FRAMES = 2500  # distinct mutated frames, each fired twice
MAX_FUZZ_S = 40.0  # a bound on the run, not an assertion
PER_API_VERSION = 6  # frames kept per (api key, version)
RSS_GROWTH_LIMIT = 64 << 20
ADDRESS_SPACE_LIMIT = 4 << 30  # the broker's virtual memory during the test (it needs under 1 GiB)


# ------------------------------------------------------------------------------------------------
# Recording proxy


class RecordingProxy:
    """Relays TCP connections to the broker and keeps the request frames clients send."""

    def __init__(self, upstream: tuple[str, int], port: int) -> None:
        self.upstream = upstream
        self.server = socket.create_server(("127.0.0.1", port))
        self.frames: dict[tuple[int, int], list[bytes]] = {}
        self.lock = threading.Lock()
        self.closed = False
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                broker = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.socks += [client, broker]
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=self._pipe, args=(broker, client), daemon=True).start()

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        """Client to broker: relay bytes, cutting them into frames on the way."""
        buf = bytearray()
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
                buf += chunk
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf)
                    if len(buf) < 4 + size:
                        break
                    self._keep(bytes(buf[4:4 + size]))
                    del buf[:4 + size]
        except OSError:
            pass
        finally:
            _close_both(src, dst)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            _close_both(src, dst)

    def _keep(self, payload: bytes) -> None:
        if len(payload) < 8 or len(payload) > 1 << 20:
            return
        key = struct.unpack_from(">hh", payload)
        with self.lock:
            kept = self.frames.setdefault(key, [])
            if len(kept) < PER_API_VERSION:
                kept.append(payload)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.server.close()
        with self.lock:
            for s in self.socks:
                with contextlib.suppress(OSError):
                    s.close()


def _close_both(a: socket.socket, b: socket.socket) -> None:
    for s in (a, b):
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)


# ------------------------------------------------------------------------------------------------
# Client workloads recorded through the proxy


def kafka_python_workload(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic

    topic, group = unique("fz-kp"), unique("fz-kp-group")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="fz-admin")
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")])
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "3600000"})],
                            incremental=True)
        admin.create_partitions({topic: NewPartitions(3)})
        admin.describe_cluster()
        wait_until(lambda: topic in admin.list_topics(), 15, "the topic")
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                 compression_type="gzip", linger_ms=5)
        for i in range(30):
            producer.send(topic, key=str(i % 5).encode(), value=f"kp-{i}".encode(), headers=[("h", b"v")])
        producer.flush(30)
        producer.close()
        txn = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("fz-txn"))
        txn.init_transactions()
        txn.begin_transaction()
        txn.send(topic, b"in-txn")
        txn.commit_transaction()
        txn.close()
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=3000,
                                 isolation_level="read_committed")
        got = 0
        for _ in consumer:
            got += 1
            if got >= 31:
                break
        consumer.commit()
        consumer.close()
        admin.list_groups()
        admin.describe_groups([group])
        admin.delete_topics([topic])
    finally:
        admin.close()


def confluent_workload(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    topic, group = unique("fz-ck"), unique("fz-ck-group")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    for f in admin.describe_configs([ConfigResource("topic", topic)]).values():
        f.result(30)
    admin.list_topics(timeout=10)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "lz4",
                         "linger.ms": 5})
    for i in range(30):
        producer.produce(topic, key=str(i).encode(), value=f"ck-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < 30 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    admin.list_consumer_groups().result(30)
    admin.describe_consumer_groups([group])[group].result(30)
    for f in admin.delete_topics([topic]).values():
        f.result(30)


def java_workload(bootstrap: str) -> None:
    """The Java consumer (Apache Kafka 3.9.1's client) reads a partition to its end."""
    from kafka import KafkaProducer

    from tests.integration.read_to_end import java_read

    topic = unique("fz-java")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(5):
        producer.send(topic, f"j-{i}".encode(), partition=0).get(30)
    producer.close()
    assert len(java_read(bootstrap, topic, 0)) == 5


def client_id(payload: bytes) -> str:
    (n,) = struct.unpack_from(">h", payload, 8)
    return payload[10:10 + n].decode(errors="replace") if n >= 0 else ""


# ------------------------------------------------------------------------------------------------
# Mutations


def mutate(rng: random.Random, payload: bytes) -> tuple[str, bytes]:
    """One mutated frame, size prefix included (sometimes a lying one)."""
    b = bytearray(payload)
    kind = rng.choice(("bitflip", "bitflip", "truncate", "size-lie", "varint", "array-count", "version",
                       "insert", "delete", "splice"))
    if kind == "bitflip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        b = b[:rng.randrange(len(b))]
    elif kind == "size-lie":
        lie = rng.choice((len(b) + rng.randint(1, 64), max(0, len(b) - rng.randint(1, 16)), 0x7FFFFFFF, -1,
                          len(b) * 2))
        return kind, struct.pack(">i", lie) + bytes(b)
    elif kind == "varint":
        i = rng.randrange(8, len(b)) if len(b) > 8 else 0
        b[i:i + 5] = b"\xff" * rng.randint(1, 6)
    elif kind == "array-count":
        i = rng.randrange(8, max(9, len(b) - 3))
        b[i:i + 4] = struct.pack(">i", rng.choice((0x7FFFFFFF, -1, -2, 0x10000, 0x7FFF)))
    elif kind == "version":
        struct.pack_into(">h", b, 2, rng.choice((-1, 0, 1, 3, 7, 12, 17, 100, 0x7FFF)))
    elif kind == "insert":
        i = rng.randrange(len(b) + 1)
        b[i:i] = rng.randbytes(rng.randint(1, 16))
    elif kind == "delete":
        i = rng.randrange(len(b))
        del b[i:i + rng.randint(1, 16)]
    else:  # splice: the head of one request with random bytes after the header
        cut = rng.randrange(8, max(9, len(b)))
        b = b[:cut] + rng.randbytes(rng.randint(0, 64))
    return kind, struct.pack(">i", len(b)) + bytes(b)


def fire(addr: tuple[str, int], frame: bytes) -> str:
    """Send one frame on a connection of its own, half-close, read until the broker closes."""
    try:
        with socket.create_connection(addr, timeout=10) as s:
            with contextlib.suppress(OSError):
                s.sendall(frame)
                s.shutdown(socket.SHUT_WR)
            got = 0
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return "answered" if got else "closed"
                got += len(chunk)
    except TimeoutError:
        return "timeout"
    except ConnectionError:
        return "reset"


# ------------------------------------------------------------------------------------------------
# The well-behaved clients


class Witness:
    """A producer (acks=all) and a consumer on one partition: every acknowledged record must be read
    back, in order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.acked: list[tuple[int, bytes]] = []  # (offset, value)
        self.consumed: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        # Set once the producer thread has recorded its last acknowledgment: until then an ack may
        # still arrive for a record the consumer has not read, so the consumer must not leave.
        self.produced_all = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._produce, daemon=True, name="witness-producer"),
                        threading.Thread(target=self._consume, daemon=True, name="witness-consumer")]

    def start(self) -> Witness:
        for t in self.threads:
            t.start()
        return self

    def _produce(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True,
                                 linger_ms=2, request_timeout_ms=30000)
        seq = 0
        try:
            while not self.stop.is_set():
                futures = []
                for _ in range(50):
                    value = f"w-{seq}".encode()
                    futures.append((value, producer.send(self.topic, value, partition=0)))
                    seq += 1
                for value, f in futures:
                    try:
                        md = f.get(60)
                    except Exception as e:  # noqa: BLE001 - recorded: an unacknowledged record may be lost
                        self.errors.append(repr(e))
                        continue
                    with self.lock:
                        self.acked.append((md.offset, value))
        finally:
            producer.close()

    def _consume(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        tp = TopicPartition(self.topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        try:
            while not self.produced_all.is_set() or self.behind():
                for records in consumer.poll(timeout_ms=200).values():
                    with self.lock:
                        self.consumed.extend((r.offset, r.value) for r in records)
        finally:
            consumer.close()

    def behind(self) -> bool:
        with self.lock:
            last_acked = max((o for o, _v in self.acked), default=-1)
            last_read = self.consumed[-1][0] if self.consumed else -1
        return last_read < last_acked

    def acks(self) -> int:
        with self.lock:
            return len(self.acked)

    def finish(self) -> None:
        # The producer first: it may still wait for the acknowledgments of its last batch. Only then
        # is the set of acknowledged records final, and the consumer reads up to its end.
        self.stop.set()
        producer, consumer = self.threads
        producer.join(90)
        self.produced_all.set()
        consumer.join(90)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def metric(url: str | None, sample: str) -> float:
    import urllib.request

    assert url is not None
    with urllib.request.urlopen(url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(sample + " "):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{sample} not in the metrics")


_last_partitions: dict[str, float] = {}


def partitions_settled(url: str | None) -> bool:
    """The broker's partition count is what it was at the previous poll and every one has a leader."""
    count = metric(url, "kafka_server_replicamanager_partitioncount")
    offline = metric(url, "kafka_controller_kafkacontroller_offlinepartitionscount")
    previous = _last_partitions.get(url or "")
    _last_partitions[url or ""] = count
    return previous == count and offline == 0


# ------------------------------------------------------------------------------------------------
# The test


@pytest.fixture
def fuzz_broker(cluster_factory: Callable[..., Any]) -> Iterator[tuple[Any, RecordingProxy]]:
    port, proxy_port = free_port(), free_port()
    proxy = RecordingProxy(("127.0.0.1", port), proxy_port)
    try:
        cluster = cluster_factory(1, base_port=port, overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROL_PLANE://127.0.0.1:0",
            # Clients learn the proxy's address from Metadata; the controller uses its own listener.
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port},CONTROL_PLANE://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT",
            "control.plane.listener.name": "CONTROL_PLANE",
            "offsets.topic.num.partitions": "2",
        })
        yield cluster, proxy
    finally:
        proxy.close()


def test_fuzzed_requests_do_not_hurt_the_broker_or_other_clients(fuzz_broker: tuple[Any, RecordingProxy]) -> None:
    cluster, proxy = fuzz_broker
    broker = cluster.brokers[0]
    assert broker.process is not None
    pid = broker.process.pid
    # A request that makes the broker allocate without bound must fail this test, not the machine.
    resource.prlimit(pid, resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    via_proxy = f"127.0.0.1:{proxy.server.getsockname()[1]}"

    kafka_python_workload(via_proxy)
    confluent_workload(via_proxy)
    java_workload(via_proxy)
    corpus = [(key, f) for key, frames in sorted(proxy.frames.items()) for f in frames]
    client_ids = sorted({client_id(f) for _key, f in corpus})
    print(f"client ids: {', '.join(client_ids)}")
    for library in ("kafka-python", "rdkafka", "consumer-"):  # the last is the Java consumer's default id
        assert any(c.startswith(library) for c in client_ids), f"no request from {library} captured"
    apis = sorted({ApiKey(k).name for (k, _v), _f in corpus if k in ApiKey._value2member_map_})
    print(f"\ncaptured {len(corpus)} frames of {len(proxy.frames)} API versions: {', '.join(apis)}")
    for must in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.JOIN_GROUP, ApiKey.OFFSET_COMMIT,
                 ApiKey.INIT_PRODUCER_ID, ApiKey.CREATE_TOPICS, ApiKey.API_VERSIONS, ApiKey.END_TXN):
        assert any(k == must for (k, _v), _f in corpus), f"no {must.name} captured"

    topic = unique("fz-witness")
    from tests.integration.helpers import create_topic

    create_topic(broker.bootstrap, topic)
    witness = Witness(via_proxy, topic).start()
    try:
        wait_until(lambda: witness.acks() >= 200, 60, "the witness producer to get going")
        base_start, base_acks = time.monotonic(), witness.acks()
        wait_until(lambda: witness.acks() >= base_acks + 1000, 60, "1000 acknowledgments without the fuzzer")
        baseline_rate = (witness.acks() - base_acks) / (time.monotonic() - base_start)
        conns_before = metric(broker.metrics_url, 'kafka_server_socket_server_metrics_connection_count'
                                                  '{listener="PLAINTEXT"}')

        rng = random.Random(SEED)
        addr = ("127.0.0.1", broker.port)
        frames: list[bytes] = []
        kinds: dict[str, int] = {}
        for _ in range(FRAMES):
            _key, payload = rng.choice(corpus)
            kind, frame = mutate(rng, payload)
            kinds[kind] = kinds.get(kind, 0) + 1
            frames.append(frame)
        outcomes: dict[str, int] = {}
        rss: list[int] = []
        sent = 0
        fuzz_start, fuzz_acks = time.monotonic(), witness.acks()
        # Two passes of the same frames: the first finds every high-water mark of memory (a request
        # may legitimately need a lot once), the second must not climb further. Growth there is a leak.
        with ThreadPoolExecutor(16) as pool:
            for _pass in range(2):
                for i in range(0, len(frames), 200):
                    if time.monotonic() - fuzz_start > MAX_FUZZ_S:
                        break
                    for outcome in pool.map(lambda fr: fire(addr, fr), frames[i:i + 200]):
                        outcomes[outcome] = outcomes.get(outcome, 0) + 1
                    sent += len(frames[i:i + 200])
                    assert broker.running, f"the broker died after {sent} fuzzed frames"
                # Fuzzed CreateTopics / CreatePartitions really create partitions (thousands, with a
                # mutated count), and their logs cost memory: real state, not a leak. The second pass
                # repeats them and fails (the topics exist), so once the partition count has settled
                # the memory must not climb any further.
                wait_until(lambda: partitions_settled(broker.metrics_url), 120, "the partition count to settle",
                           interval=1.0)
                rss.append(rss_bytes(pid))
        warm_rss, end_rss = rss
        fuzz_s = time.monotonic() - fuzz_start
        fuzz_rate = (witness.acks() - fuzz_acks) / fuzz_s
        assert witness.acks() > fuzz_acks, "the producer made no progress while the fuzzer ran"
    finally:
        witness.finish()

    print(f"fuzz: {sent} frames in {fuzz_s:.1f}s (seed {SEED}); mutations {kinds}; outcomes {outcomes}")
    print(f"witness producer: {baseline_rate:.0f} acked records/s without the fuzzer, {fuzz_rate:.0f} with it")
    print(f"broker RSS: {warm_rss / 2**20:.1f} MiB after the first pass, {end_rss / 2**20:.1f} MiB after the second")

    assert broker.running
    assert not witness.errors, f"witness producer errors: {witness.errors[:5]}"
    # Every acknowledged record read back, in order, at the offset its acknowledgment named.
    acked = sorted(witness.acked)
    consumed = dict(witness.consumed)
    never_read = [o for o, _v in acked if o not in consumed]
    misread = [(o, v, consumed[o]) for o, v in acked if o in consumed and consumed[o] != v]
    assert not never_read, (f"{len(never_read)} of {len(acked)} acknowledged records never read: offsets "
                            f"{never_read[:5]} .. {never_read[-5:]}; the consumer read up to "
                            f"{max(consumed, default=-1)}")
    assert not misread, f"{len(misread)} acknowledged records read with another value: {misread[:5]}"
    offsets = [o for o, _v in witness.consumed]
    assert offsets == sorted(set(offsets)), "consumer saw records out of order or twice"
    assert end_rss - warm_rss < RSS_GROWTH_LIMIT, f"RSS grew {(end_rss - warm_rss) >> 20} MiB after warm-up"
    # Nothing left behind: fuzz connections are all gone, and no request permit is held.
    wait_until(lambda: metric(broker.metrics_url, 'kafka_server_socket_server_metrics_connection_count'
                                                  '{listener="PLAINTEXT"}') <= conns_before, 30,
               "the fuzz connections to be gone")
    wait_until(lambda: metric(broker.metrics_url, "kafka_network_requestchannel_requestqueuesize") == 0, 30,
               "every request permit back")
    log = broker.log_text()
    crashes = log.split("after an unexpected error")[1:]
    assert not crashes, "handler errors on fuzzed input:\n" + "\n---\n".join(c[:3000] for c in crashes[:3])
    assert os.path.exists(f"/proc/{pid}")
