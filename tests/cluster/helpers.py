"""Helpers for the cluster failure tests: verifying producers, a reading consumer, waits on ISR state.

The invariant every test checks: each record a producer saw acknowledged (acks=all) is read back from
its partition at the offset the acknowledgment named, in the order it was sent, exactly once. Producers
are idempotent and tag every value with their session and a sequence number (``<session>:<seq>``), so
a consumer can tell duplicates, reordering and holes apart per producer session.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.helpers import RawClient, wait_until  # noqa: F401 - re-exported for the tests

log = logging.getLogger(__name__)

# Settings that make failures show up quickly: a SIGKILLed broker's ZooKeeper session expires after
# 6 s, a silent follower leaves the ISR after 5 s, and a follower gives up on a frozen leader after 8 s.
FAST_FAILOVER = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "5000",
    "replica.socket.timeout.ms": "8000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "offsets.topic.num.partitions": "3",
    "auto.leader.rebalance.enable": "false",
}


def overrides(**extra: str) -> dict[str, str]:
    out = dict(FAST_FAILOVER)
    out.update({k.replace("_", "."): v for k, v in extra.items()})
    return out


# ================================================================================================
# Secured inter-broker traffic
#
# ``KAFKETTE_TEST_INTER_BROKER=SASL_SSL`` (or SSL, SASL_PLAINTEXT) runs every test that builds its
# cluster through ``cluster_options`` (the ``cluster3`` fixture: test_failover, test_kip101,
# test_unclean, test_split_brain, ...) with an INTERNAL listener of that protocol between the brokers:
# replication, the controller's requests, AlterPartition, forwarding and transaction markers all go over
# it (SCRAM-SHA-512 for SASL, mutual TLS for SSL), while the tests' clients stay on the PLAINTEXT listener.

INTER_BROKER_PROTOCOL = os.environ.get("KAFKETTE_TEST_INTER_BROKER", "PLAINTEXT").strip().upper()
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


class SecureInterBroker:
    """An INTERNAL inter-broker listener secured with ``protocol``: the certificates (a CA of its own,
    one broker certificate, PEM files in ``directory``), the broker user's SCRAM-SHA-512 credential
    written to ZooKeeper before any broker starts (as ``kafka-configs --zookeeper`` would), and the
    listener settings; pass ``options()`` to ``LocalCluster``."""

    MECHANISM = "SCRAM-SHA-512"
    USER = "kafkette-broker"

    def __init__(self, protocol: str = "SASL_SSL", directory: Path | None = None) -> None:
        import secrets
        import tempfile

        if protocol not in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(f"no secured inter-broker protocol {protocol!r}")
        self.protocol = protocol
        if directory is None:
            import atexit
            import shutil

            directory = Path(tempfile.mkdtemp(prefix="kafkette-inter-broker-"))
            atexit.register(shutil.rmtree, directory, True)
        self.directory = directory
        self.password = secrets.token_urlsafe(12)
        self.key_password = secrets.token_urlsafe(12)
        self.ca_path: Path | None = None
        self.keystore_path: Path | None = None
        if protocol != "SASL_PLAINTEXT":
            from clients.certificates import CertificateAuthority

            ca = CertificateAuthority.create("CN=kafkette inter-broker test CA")
            self.ca_path = ca.write_pem(self.directory / "ca.pem")
            self.keystore_path = ca.issue_server("CN=kafkette-broker").write_pem(
                self.directory, "broker", key_password=self.key_password).keystore

    def overrides(self) -> dict[str, str]:
        """The settings every broker shares (the listener ports are per broker: ``broker_overrides``)."""
        out = {
            "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,INTERNAL:{self.protocol}",
            "inter.broker.listener.name": "INTERNAL",
        }
        if self.keystore_path is not None and self.ca_path is not None:
            out.update({
                "ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore_path),
                "ssl.key.password": self.key_password,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_path),
            })
            if self.protocol == "SSL":  # brokers prove who they are with their certificates
                out["listener.name.internal.ssl.client.auth"] = "required"
        if self.protocol.startswith("SASL_"):
            out.update({
                "sasl.enabled.mechanisms": self.MECHANISM,
                "sasl.mechanism.inter.broker.protocol": self.MECHANISM,
                f"listener.name.internal.{self.MECHANISM.lower()}.sasl.jaas.config":
                    f'{SCRAM_MODULE} required username="{self.USER}" password="{self.password}";',
            })
        return out

    @staticmethod
    def broker_overrides(broker_id: int, port: int) -> dict[str, str]:
        # Clients on PLAINTEXT at the broker's port; INTERNAL on a port the broker picks (advertised
        # with the port it bound, so a restarted broker re-registers wherever it landed).
        listeners = f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:0"
        return {"listeners": listeners, "advertised.listeners": listeners}

    def before_brokers(self, zk_connect: str) -> None:
        if not self.protocol.startswith("SASL_"):
            return
        from controller.zk_client import KafkaZkClient
        from protocol.scram import credential_from_password

        zk = KafkaZkClient(zk_connect, 30000, 15000, name="test-credentials")
        zk.start()
        try:
            credential = credential_from_password(self.MECHANISM, self.password, 4096)
            zk.set_or_create_entity_config("users", self.USER, {self.MECHANISM: credential.format()})
        finally:
            zk.close()

    def options(self, **extra: str) -> dict[str, Any]:
        """Keyword arguments for ``LocalCluster`` / ``cluster_factory``: FAST_FAILOVER plus ``extra``."""
        return {"overrides": {**overrides(**extra), **self.overrides()}, "broker_overrides": self.broker_overrides,
                "before_brokers": self.before_brokers}


def cluster_options(**extra: str) -> dict[str, Any]:
    """``LocalCluster`` keyword arguments for the cluster tests: FAST_FAILOVER plus ``extra``, with the
    inter-broker listener secured when KAFKETTE_TEST_INTER_BROKER asks for it."""
    if INTER_BROKER_PROTOCOL == "PLAINTEXT":
        return {"overrides": overrides(**extra)}
    return SecureInterBroker(INTER_BROKER_PROTOCOL).options(**extra)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ================================================================================================
# Admin views


class Admin:
    """kafka-python's admin client with the few calls the tests need, tolerant of brokers going away."""

    def __init__(self, bootstrap: str) -> None:
        from kafka.admin import KafkaAdminClient

        self.bootstrap = bootstrap
        self.client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=unique("cluster-admin"),
                                       request_timeout_ms=15000, reconnect_backoff_max_ms=1000)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_for_broker(self, broker_id: int, timeout: float = 60) -> None:
        """Wait until this client's metadata lists the broker again. A metadata refresh made while a
        broker was down lists only the others, as Kafka's does; kafka-python then fails a request for the
        missing id (UnknownBrokerIdError) without refreshing."""
        cluster = self.client._manager.cluster

        def known() -> bool:
            if cluster.broker_metadata(broker_id) is not None:
                return True
            cluster.request_update()
            return False

        wait_until(known, timeout, f"broker {broker_id} in the admin client's metadata")

    def create_topic(self, name: str, partitions: int = 1, replication: int = 3,
                     configs: dict[str, str] | None = None,
                     assignment: dict[int, list[int]] | None = None) -> None:
        from kafka.admin import NewTopic

        if assignment:
            topic = NewTopic(name, -1, -1, replica_assignments=assignment, topic_configs=configs or {})
            partitions = len(assignment)
        else:
            topic = NewTopic(name, partitions, replication, topic_configs=configs or {})
        self.client.create_topics([topic])
        want = len(assignment[0]) if assignment else replication
        # Every broker's metadata must show it (the admin client asks whichever broker it likes).
        for _ in range(3):
            wait_until(lambda: self._fully_replicated(name, partitions, want), 60,
                       f"{name}: {partitions} partitions with a leader and {want} in-sync replicas")

    def _fully_replicated(self, name: str, partitions: int, replication: int) -> bool:
        d = self.describe(name)
        return len(d) == partitions and all(p["leader"] >= 0 and len(p["isr"]) == replication for p in d.values())

    def describe(self, topic: str) -> dict[int, dict[str, Any]]:
        """Partition -> leader, leader_epoch, isr, replicas (from a broker's metadata cache)."""
        try:
            topics = self.client.describe_topics([topic])
        except Exception as e:  # a broker we asked just died: the caller polls again
            log.info("describe_topics failed: %r", e)
            return {}
        out: dict[int, dict[str, Any]] = {}
        for t in topics:
            if t.get("name") != topic or t.get("error_code"):
                continue
            for p in t["partitions"]:
                out[p["partition_index"]] = {"leader": p["leader_id"], "leader_epoch": p["leader_epoch"],
                                             "isr": sorted(p["isr_nodes"]), "replicas": list(p["replica_nodes"]),
                                             "error_code": p["error_code"]}
        return out

    def wait_isr(self, topic: str, partition: int, isr: Iterable[int], timeout: float = 60) -> dict[str, Any]:
        want = sorted(isr)
        return wait_until(lambda: (lambda d: d if d and d["isr"] == want else None)(
            self.describe(topic).get(partition)), timeout, f"ISR of {topic}-{partition} == {want}", interval=0.2)

    def wait_leader(self, topic: str, partition: int, check: Callable[[int], bool], timeout: float = 60,
                    what: str = "a leader") -> dict[str, Any]:
        return wait_until(lambda: (lambda d: d if d and check(d["leader"]) else None)(
            self.describe(topic).get(partition)), timeout, f"{what} for {topic}-{partition}", interval=0.2)


def roles(cluster: Any) -> tuple[int, int, int]:
    """(A, B, C) of a 3-broker cluster: C is the active controller, A and B the two other brokers."""
    with ZkView(cluster) as zk:
        c = wait_until(lambda: (lambda cid: None if cid is None else (cid,))(zk.controller()), 30, "a controller")[0]
    a, b = sorted({0, 1, 2} - {c})
    return a, b, c


class ZkView:
    """Read-only look at the cluster's ZooKeeper state (partition state znodes, controller)."""

    def __init__(self, cluster: Any) -> None:
        from controller.zk_client import KafkaZkClient

        self.zk = KafkaZkClient(cluster.zk.connect_string + cluster.chroot, 30000, 15000, name="test-view")
        self.zk.start()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.zk.close()

    def __enter__(self) -> ZkView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def controller(self) -> int | None:
        return self.zk.get_controller_id()

    def controller_epoch(self) -> int:
        got = self.zk.get_controller_epoch()
        return got[0] if got else -1

    def state(self, topic: str, partition: int) -> Any:
        return self.zk.get_partition_state(topic, partition)

    def assignment(self, topic: str) -> dict[int, list[int]]:
        a = self.zk.get_topic_assignment(topic)
        assert a is not None
        return {p: list(r.replicas) for p, r in a.partitions.items()}


# ================================================================================================
# Producers that remember what was acknowledged


@dataclass
class Ack:
    seq: int
    partition: int
    offset: int
    at: float


@dataclass
class ProducerLog:
    session: str
    topic: str
    sent: dict[int, int] = field(default_factory=dict)  # seq -> partition
    acked: list[Ack] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_ack(self, seq: int, partition: int, offset: int) -> None:
        with self.lock:
            self.acked.append(Ack(seq, partition, offset, time.monotonic()))

    def on_fail(self, seq: int, err: object) -> None:
        with self.lock:
            self.failed.append((seq, repr(err)))

    def ack_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def acks_by_partition(self) -> dict[int, int]:
        with self.lock:
            out: dict[int, int] = {}
            for a in self.acked:
                out[a.partition] = out.get(a.partition, 0) + 1
            return out

    def longest_gap(self, start: float, end: float | None = None, partition: int | None = None) -> float:
        """Longest time without an acknowledgment inside [start, end]: how long producing was unavailable
        (to ``partition``, or to any partition)."""
        with self.lock:
            times = sorted(a.at for a in self.acked if partition is None or a.partition == partition)
        return longest_gap(times, start, end)


def longest_gap(times: list[float], start: float, end: float | None = None) -> float:
    end = time.monotonic() if end is None else end
    inside = [t for t in times if start <= t <= end]
    points = [start, *inside, end]
    return max((b - a for a, b in zip(points, points[1:], strict=False)), default=0.0)


class _ProducerThread:
    """Sends ``<session>:<seq>`` round-robin over the partitions, one every ``interval`` seconds."""

    client = "?"

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.02) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.interval = interval
        self.log = ProducerLog(f"{self.client}-{uuid.uuid4().hex[:6]}", topic)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.log.session}", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> _ProducerThread:
        self._open()
        self._thread.start()
        return self

    def _run(self) -> None:
        seq = 0
        try:
            while not self._stop.is_set():
                partition = seq % self.partitions
                self.log.sent[seq] = partition
                self._send(seq, partition, f"{self.log.session}:{seq}".encode())
                seq += 1
                self._stop.wait(self.interval)
        except BaseException as e:  # surfaced by stop()
            self.error = e

    def wait_acks(self, more: int, timeout: float = 60) -> None:
        """Block until ``more`` further records are acknowledged (producing works again)."""
        target = self.log.ack_count() + more
        wait_until(lambda: self.log.ack_count() >= target, timeout, f"{more} more acks from {self.log.session}")

    def stop(self, timeout: float = 120) -> ProducerLog:
        self._stop.set()
        self._thread.join(timeout)
        self._close(timeout)
        if self.error is not None:
            raise AssertionError(f"producer {self.log.session} crashed: {self.error!r}")
        return self.log

    def abort(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with contextlib.suppress(Exception):
            self._close(0)

    def _open(self) -> None:
        raise NotImplementedError

    def _send(self, seq: int, partition: int, value: bytes) -> None:
        raise NotImplementedError

    def _close(self, timeout: float) -> None:
        raise NotImplementedError


class KafkaPythonProducer(_ProducerThread):
    client = "kp"

    def _open(self) -> None:
        from kafka import KafkaProducer

        self.producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True, retries=2**31 - 1,
            max_in_flight_requests_per_connection=5, linger_ms=5, request_timeout_ms=10000,
            delivery_timeout_ms=240000, retry_backoff_ms=100, reconnect_backoff_max_ms=1000,
            metadata_max_age_ms=5000, max_block_ms=240000, client_id=self.log.session)

    def _send(self, seq: int, partition: int, value: bytes) -> None:
        fut = self.producer.send(self.topic, value=value, partition=partition)
        fut.add_callback(lambda md, s=seq: self.log.on_ack(s, md.partition, md.offset))
        fut.add_errback(lambda e, s=seq: self.log.on_fail(s, e))

    def _close(self, timeout: float) -> None:
        self.producer.flush(timeout)
        self.producer.close(timeout)


class ConfluentProducer(_ProducerThread):
    client = "rdk"

    def _open(self) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 240000, "request.timeout.ms": 10000,
            "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 5000,
            "client.id": self.log.session}, logger=logging.getLogger("rdkafka"))

    def _send(self, seq: int, partition: int, value: bytes) -> None:
        def report(err: Any, msg: Any, s: int = seq) -> None:
            if err is not None:
                self.log.on_fail(s, err)
            else:
                self.log.on_ack(s, msg.partition(), msg.offset())

        while True:
            try:
                self.producer.produce(self.topic, value=value, partition=partition, on_delivery=report)
                break
            except BufferError:
                self.producer.poll(0.1)
        self.producer.poll(0)

    def _close(self, timeout: float) -> None:
        if timeout == 0:
            self.producer.purge()
        left = self.producer.flush(timeout)
        if left:
            self.error = self.error or AssertionError(f"{left} records still undelivered after {timeout}s")


# ================================================================================================
# Consumers


@dataclass
class Consumed:
    partition: int
    offset: int
    value: bytes
    at: float


class LiveConsumer:
    """Reads the topic continuously (kafka-python, assigned partitions) and timestamps each record."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                      auto_offset_reset="earliest", request_timeout_ms=15000,
                                      reconnect_backoff_max_ms=1000, metadata_max_age_ms=5000,
                                      fetch_max_wait_ms=200, client_id=unique("live-consumer"))
        self.consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        self.records: list[Consumed] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="live-consumer")
        self.error: BaseException | None = None
        self.client_errors: list[str] = []

    def start(self) -> LiveConsumer:
        self._thread.start()
        return self

    def _run(self) -> None:
        from kafka.errors import UnknownBrokerIdError

        try:
            while not self._stop.is_set():
                try:
                    batch = self.consumer.poll(timeout_ms=200)
                except UnknownBrokerIdError as e:
                    # kafka-python 3.0 follows a Fetch response's current-leader hint (KIP-951) to a broker
                    # its metadata does not list yet (one that just restarted) and raises this out of
                    # poll() instead of refreshing metadata; the next poll carries on.
                    self.client_errors.append(repr(e))
                    self._stop.wait(0.2)
                    continue
                now = time.monotonic()
                with self.lock:
                    for tp, msgs in batch.items():
                        self.records.extend(Consumed(tp.partition, m.offset, m.value, now) for m in msgs)
        except BaseException as e:
            self.error = e

    def count(self) -> int:
        with self.lock:
            return len(self.records)

    def by_partition(self) -> dict[int, int]:
        with self.lock:
            out: dict[int, int] = {}
            for r in self.records:
                out[r.partition] = out.get(r.partition, 0) + 1
            return out

    def longest_gap(self, start: float, end: float | None = None, partition: int | None = None) -> float:
        with self.lock:
            times = sorted({r.at for r in self.records if partition is None or r.partition == partition})
        return longest_gap(times, start, end)

    def stop(self) -> list[Consumed]:
        self._stop.set()
        self._thread.join(30)
        with contextlib.suppress(Exception):
            self.consumer.close()
        if self.error is not None:
            raise AssertionError(f"live consumer crashed: {self.error!r}")
        return self.records


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 90) -> dict[int, list[tuple[int, bytes]]]:
    """Every record below the high watermark of each partition, as (offset, value)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             request_timeout_ms=15000, client_id=unique("read-all"))
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic} to its end {ends} in {timeout}s")
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                out[tp.partition].extend((m.offset, m.value) for m in msgs if m.offset < ends[tp])
        return out
    finally:
        consumer.close()


def verify(logs: Iterable[ProducerLog], records: dict[int, list[tuple[int, bytes]]]) -> dict[str, int]:
    """Assert the invariant; returns counts for the report.

    - offsets read per partition are contiguous from 0 (no hole in the log) and unique;
    - every acknowledged record is at the offset its acknowledgment named, with its value;
    - per producer session and partition, sequence numbers appear strictly increasing (in order, no
      duplicates), and nothing between two records of the session is missing unless its send failed.
    """
    logs = list(logs)
    by_offset: dict[int, dict[int, bytes]] = {}
    for p, recs in records.items():
        offsets = [o for o, _ in recs]
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets not contiguous from 0: {offsets[:20]}..."
        by_offset[p] = dict(recs)
    acked_total = failed_total = 0
    for lg in logs:
        failed = {s for s, _ in lg.failed}
        failed_total += len(failed)
        acked_total += len(lg.acked)
        for a in lg.acked:
            want = f"{lg.session}:{a.seq}".encode()
            if a.offset is None or a.offset < 0:
                # Delivered without an offset in the report (librdkafka does this for some retried
                # batches): the record must still be in its partition.
                assert want in set(by_offset.get(a.partition, {}).values()), f"acked {want!r} is not in the log"
                continue
            got = by_offset.get(a.partition, {}).get(a.offset)
            assert got == want, (f"acked {want!r} at {a.partition}/{a.offset} but the log has {got!r} there")
        prefix = f"{lg.session}:".encode()
        for p, recs in records.items():
            seqs = [int(v[len(prefix):]) for _, v in recs if v is not None and v.startswith(prefix)]
            assert len(seqs) == len(set(seqs)), f"{lg.session} partition {p}: duplicates {_dups(seqs)}"
            assert seqs == sorted(seqs), f"{lg.session} partition {p}: out of order"
            if seqs:
                expected = [s for s in range(seqs[0], seqs[-1] + 1) if lg.sent.get(s) == p]
                missing = [s for s in expected if s not in set(seqs) and s not in failed]
                assert not missing, f"{lg.session} partition {p}: holes at seqs {missing[:20]}"
    return {"acked": acked_total, "failed": failed_total, "records": sum(len(r) for r in records.values())}


def _dups(seqs: list[int]) -> list[int]:
    seen: set[int] = set()
    return sorted({s for s in seqs if s in seen or seen.add(s)})  # type: ignore[func-returns-value]


def verify_live(consumed: list[Consumed], records: dict[int, list[tuple[int, bytes]]]) -> None:
    """What the live consumer saw is a prefix-consistent view of the final log (no phantom records)."""
    for r in consumed:
        final = dict(records.get(r.partition, []))
        assert final.get(r.offset) == r.value, (
            f"live consumer read {r.value!r} at {r.partition}/{r.offset}; the log now has {final.get(r.offset)!r}")
    per_partition: dict[int, list[int]] = {}
    for r in consumed:
        per_partition.setdefault(r.partition, []).append(r.offset)
    for p, offs in per_partition.items():
        assert offs == sorted(set(offs)), f"live consumer saw partition {p} out of order or twice"


# ================================================================================================
# Replica files


def segment_bytes(broker: Any, topic: str, partition: int) -> bytes:
    """The concatenated .log segment files of one replica (in offset order)."""
    d = Path(broker.dir) / "data" / f"{topic}-{partition}"
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def disk_values(broker: Any, topic: str, partition: int = 0) -> list[bytes]:
    """Every record value in the replica's segment files, committed or not."""
    from protocol.records import iter_batches

    data = segment_bytes(broker, topic, partition)
    return [r.value for batch in iter_batches(memoryview(data)) for r in batch.records()]


REPORTS: list[str] = []  # shown in the terminal summary by tests/cluster/conftest.py


def report(title: str, **numbers: Any) -> None:
    """One line for the terminal summary (and the test's own output)."""
    parts = ", ".join(f"{k}={v:.2f}s" if isinstance(v, float) else f"{k}={v}" for k, v in numbers.items())
    line = f"{title}: {parts}"
    REPORTS.append(line)
    print(f"[cluster] {line}", flush=True)


# ================================================================================================
# A workload: a kafka-python and a librdkafka producer plus a live consumer on one topic


class Workload:
    """Producers (acks=all, idempotent) and a live consumer running against ``topic`` while a test
    breaks things; ``finish()`` stops them, reads the whole topic back and checks the invariant."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, interval: float = 0.02,
                 clients: tuple[str, ...] = ("kp", "rdk")) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        kinds = {"kp": KafkaPythonProducer, "rdk": ConfluentProducer}
        self.producers = [kinds[c](bootstrap, topic, partitions, interval) for c in clients]
        self.consumer = LiveConsumer(bootstrap, topic, partitions)

    def start(self, warmup: int = 30) -> Workload:
        self.consumer.start()
        for p in self.producers:
            p.start()
        self.progress(warmup)
        return self

    def progress(self, more: int = 10, timeout: float = 90) -> None:
        """Wait until every producer has ``more`` further acknowledgments on every partition."""
        deadline = time.monotonic() + timeout
        for p in self.producers:
            base = p.log.acks_by_partition()
            for part in range(self.partitions):
                target = base.get(part, 0) + more
                wait_until(lambda p=p, part=part, t=target: p.log.acks_by_partition().get(part, 0) >= t,
                           max(1.0, deadline - time.monotonic()),
                           lambda p=p, part=part, t=target: f"{t} acks from {p.log.session} on partition {part} "
                           f"(acks per partition now {p.log.acks_by_partition()}, failed sends {len(p.log.failed)})")

    def consumer_caught_up(self, timeout: float = 90) -> None:
        """Wait until the live consumer has read at least as many records as were acknowledged so far."""
        acked = sum(p.log.ack_count() for p in self.producers)
        wait_until(lambda: self.consumer.count() >= acked, timeout,
                   lambda: f"live consumer reading {acked} records (read {self.consumer.count()}, "
                   f"per partition {self.consumer.by_partition()}, consumer error {self.consumer.error!r})")

    def unavailability(self, start: float, end: float | None = None, partition: int | None = None) -> dict[str, float]:
        end = time.monotonic() if end is None else end
        out = {f"produce_{p.client}": p.log.longest_gap(start, end, partition) for p in self.producers}
        out["consume"] = self.consumer.longest_gap(start, end, partition)
        return out

    def finish(self) -> dict[str, int]:
        logs = [p.stop() for p in self.producers]
        consumed = self.consumer.stop()
        records = read_all(self.bootstrap, self.topic, self.partitions)
        counts = verify(logs, records)
        verify_live(consumed, records)
        assert counts["acked"] > 0
        if self.consumer.client_errors:
            counts["consumer_poll_errors"] = len(self.consumer.client_errors)
        return counts

    def abort(self) -> None:
        """After a failure: stop everything without waiting for deliveries."""
        for p in self.producers:
            p.abort()
        self.consumer._stop.set()


def start_broker(broker: Any, timeout: float = 60) -> None:
    """(Re)start a broker process and wait until it listens; other brokers may be down meanwhile."""
    from clients.devcluster import wait_for_port

    broker.start(wait=False)
    wait_for_port(broker.host, broker.port, timeout, broker.process)


# A leader that has not yet processed the LeaderAndIsr for a partition answers these; nothing was
# appended, so the produce can be sent again (as every Kafka client does).
_NOT_YET_HOSTED = (3, 6)  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER


def produce_once_hosted(bootstrap: str, topic: str, partition: int, batch: bytes, acks: int = -1,
                        timeout: float = 30) -> Any:
    """Produce ``batch`` to the broker at ``bootstrap``, retrying while that broker does not host the
    partition yet (other brokers' metadata can show a new topic before its leader has taken it on)."""

    def attempt() -> Any:
        with RawClient(bootstrap) as raw:
            r = raw.produce(topic, partition, batch, acks=acks)
        return None if r.error_code in _NOT_YET_HOSTED else r

    return wait_until(attempt, timeout, f"{bootstrap} to host {topic}-{partition}")
