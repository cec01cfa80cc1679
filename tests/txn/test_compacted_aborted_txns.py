"""Compaction of a topic with aborted transactions: read_committed readers never see aborted records.

A compacted topic (``cleanup.policy=compact``, small segments, ``min.cleanable.dirty.ratio`` 0.01, a
cleaner that wakes every 100 ms) gets a seeded mix of committed and aborted transactions over a few
overlapping keys, with non-transactional writes in between. Transactions of two batches often cross a
segment roll, so a transaction's batches and its ABORT marker end up in different segments. Then an
aborted transaction writes the latest record of several keys, and enough other records follow for it to
land in the cleaned part of the log; one more aborted transaction stays in the active segment, which is
never cleaned. Once the cleaner checkpoint has reached the active segment, the
topic is read from the beginning at read_committed by kafka-python, confluent-kafka (librdkafka) and the
Java consumer (kafka-clients 3.9.1).

What a correct compaction may leave to a read_committed reader: only committed records, each key's
latest committed record among them (last for its key), in log order, no control record, and fewer records
than were committed. The three readers see the same records. A read_uncommitted reader may also see the
aborted records the cleaner has not reached (exactly those of the active segment), and never loses a
key's latest committed record.
Kafka's own DumpLogSegments reads the cleaned segments: every aborted record still in the log lies in a
``.txnindex`` range of its producer, every entry ends at an ABORT marker, and the aborted transaction that
wrote the keys' latest records has its entry in the ``.txnindex`` of a cleaned segment (its emptied last
batch stays for the producer's sequence).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import unique, wait_until

SEED = 14
KEYS = [b"k%02d" % i for i in range(10)]
ROUNDS = 24
END = (b"end", b"end")  # a last non-transactional record: every reader reads until it has it
CLUSTER = {
    "log.cleaner.backoff.ms": "100",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01",
                 "min.compaction.lag.ms": "0"}

Pair = tuple[bytes, bytes]


@dataclass
class Written:
    """What the workload wrote, in log order: committed records (transactional or not) and aborted ones."""

    committed: list[Pair] = field(default_factory=list)
    aborted: set[Pair] = field(default_factory=set)
    # The keys whose latest record was written by an aborted transaction, since cleaned.
    latest_aborted_keys: list[bytes] = field(default_factory=list)
    # An aborted transaction left in the active segment, which the cleaner does not touch.
    tail_aborted: list[Pair] = field(default_factory=list)
    # Aborted transactions whose first batch and ABORT marker went into different segments.
    aborts_across_segments: int = 0

    def latest_committed(self) -> dict[bytes, bytes]:
        return dict(self.committed)


# ------------------------------------------------------------------------------------------------
# The broker, the topic and the workload


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str, Written]]:
    """A one-broker cluster with the workload written to a compacted topic and cleaned up to the active
    segment: (cluster, topic, what was written)."""
    from clients.devcluster import LocalCluster

    with LocalCluster(1, metrics_base_port=None, overrides=CLUSTER,
                      base_dir=tmp_path_factory.mktemp("compacted-txns")) as cluster:
        topic = unique("compacted-txns")
        _create_topic(cluster.bootstrap, topic)
        written = _write(cluster.bootstrap, topic, _partition_dir(cluster, topic))
        _wait_cleaned(cluster, topic)
        yield cluster, topic, written


def _create_topic(bs: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    from tests.integration.helpers import RawClient

    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs=TOPIC_CONFIGS)])
    finally:
        admin.close()
    with RawClient(bs) as raw:
        wait_until(lambda: raw.leaders(topic) == 1, 30, f"the leader of {topic}")


def _partition_dir(cluster: Any, topic: str) -> Path:
    return Path(cluster.brokers[0].props["log.dirs"]) / f"{topic}-0"


def _segment_bases(part_dir: Path) -> list[int]:
    return sorted(int(n[:-4]) for n in os.listdir(part_dir) if n.endswith(".log"))


def _write(bs: str, topic: str, part_dir: Path) -> Written:
    """Seeded rounds of non-transactional writes and a committed or aborted transaction of one or two
    batches; then an aborted transaction over several keys, pushed out of the active segment."""
    from kafka import KafkaProducer

    rnd = random.Random(SEED)
    w = Written()
    plain = KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=0)
    txn = KafkaProducer(bootstrap_servers=bs, transactional_id=unique("compacted-txn"), linger_ms=0)
    n = 0

    def value(kind: str, key: bytes) -> bytes:
        nonlocal n
        n += 1
        return b"%s-%04d-%s" % (kind.encode(), n, key)

    def plain_write(key: bytes, kind: str = "plain") -> None:
        v = value(kind, key)
        plain.send(topic, key=key, value=v).get(30)
        w.committed.append((key, v))

    def transaction(commit: bool, batches: list[list[bytes]]) -> list[Pair]:
        first = _end_offset(bs, topic)
        txn.begin_transaction()
        pairs = []
        for keys in batches:
            for k in keys:
                v = value("committed" if commit else "aborted", k)
                txn.send(topic, key=k, value=v)
                pairs.append((k, v))
            txn.flush()  # one batch each
        if commit:
            txn.commit_transaction()
            w.committed.extend(pairs)
        else:
            txn.abort_transaction()
            w.aborted.update(pairs)
            marker = _end_offset(bs, topic) - 1
            w.aborts_across_segments += any(first < b <= marker for b in _segment_bases(part_dir))
        return pairs

    try:
        txn.init_transactions()
        for _ in range(ROUNDS):
            for _ in range(rnd.randrange(3)):
                plain_write(rnd.choice(KEYS))
            transaction(rnd.random() < 0.5, [rnd.sample(KEYS, rnd.randrange(1, 4))
                                             for _ in range(rnd.randrange(1, 3))])
        # The latest record of these keys is aborted; their latest committed one must stay.
        w.latest_aborted_keys = KEYS[:4]
        transaction(False, [w.latest_aborted_keys])
        abort_marker = _end_offset(bs, topic) - 1
        # Other keys until the transaction and its marker are out of the active segment (cleanable).
        while _segment_bases(part_dir)[-1] <= abort_marker:
            plain_write(b"filler", "filler")
        # The new active segment holds one record: the last aborted transaction and END fit in it.
        tail_start = _end_offset(bs, topic)
        w.tail_aborted = transaction(False, [KEYS[4:6]])
        plain.send(topic, key=END[0], value=END[1]).get(30)
        w.committed.append(END)
    finally:
        txn.close(timeout=5)
        plain.close(timeout=5)
    assert len(_segment_bases(part_dir)) > 3 and w.aborts_across_segments > 0
    assert _segment_bases(part_dir)[-1] <= tail_start, "the last transaction is not in the active segment"
    return w


def _end_offset(bs: str, topic: str) -> int:
    """The partition's log end offset: its high watermark, on one broker with no transaction open."""
    from tests.txn.test_txn_protocol import offsets

    return offsets(bs, topic, 0)[0]


def _cleaner_checkpoint(cluster: Any, topic: str) -> int:
    """The partition's offset in the broker's cleaner-offset-checkpoint (-1: none yet)."""
    path = Path(cluster.brokers[0].props["log.dirs"]) / "cleaner-offset-checkpoint"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return -1
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and parts[1] == "0":
            return int(parts[2])
    return -1


def _wait_cleaned(cluster: Any, topic: str) -> None:
    """Until the cleaner has cleaned everything before the active segment (all transactions are done,
    so the last stable offset is the log end and the active segment is the first uncleanable one)."""
    part_dir = _partition_dir(cluster, topic)
    wait_until(lambda: _cleaner_checkpoint(cluster, topic) == _segment_bases(part_dir)[-1], 60,
               f"the cleaner checkpoint of {topic} to reach the active segment", interval=0.1)


# ------------------------------------------------------------------------------------------------
# Readers: each reads partition 0 from the beginning until the END record


def _read_kafka_python(bs: str, topic: str, isolation: str) -> list[Pair]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bs, isolation_level=isolation, enable_auto_commit=False, group_id=None)
    out: list[Pair] = []
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)

        def until_end() -> bool:
            for msgs in c.poll(timeout_ms=200).values():
                out.extend((m.key, m.value) for m in msgs)
            return bool(out) and out[-1] == END
        wait_until(until_end, 60, f"kafka-python ({isolation}) to read {topic} to its end", interval=0)
    finally:
        c.close()
    return out


def _read_confluent(bs: str, topic: str, isolation: str) -> list[Pair]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": unique("compacted-reader"), "isolation.level": isolation,
                  "enable.auto.commit": False})
    out: list[Pair] = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

        def until_end() -> bool:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                out.append((m.key(), m.value()))
            return bool(out) and out[-1] == END
        wait_until(until_end, 60, f"confluent-kafka ({isolation}) to read {topic} to its end", interval=0)
    finally:
        c.close()
    return out


JAVA_READER = """
import java.time.Duration;
import java.util.Collections;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** Reads partition 0 of a topic from the beginning at an isolation level, printing "key value" lines
 *  (ISO-8859-1), until the record whose key and value are both "end". */
public class CompactedTopicReader {
    public static void main(String[] args) throws Exception {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, args[2]);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        long deadline = System.currentTimeMillis() + 60_000;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(args[1], 0);
            consumer.assign(Collections.singletonList(tp));
            consumer.seekToBeginning(Collections.singletonList(tp));
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    String key = new String(r.key(), "ISO-8859-1");
                    String value = new String(r.value(), "ISO-8859-1");
                    System.out.println(key + " " + value);
                    if (key.equals("end") && value.equals("end")) {
                        return;
                    }
                }
            }
        }
        System.exit(3);
    }
}
"""


def _read_java(bs: str, topic: str, isolation: str, workdir: Path) -> list[Pair]:
    """The Java consumer of kafka-clients 3.9.1 (the Kafka jars of tests/kafka_dist.py)."""
    from tests.kafka_dist import classpath, compile_java

    source = workdir / "CompactedTopicReader.java"
    source.write_text(JAVA_READER)
    classes = compile_java(source)
    proc = subprocess.run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", f"{classes}:{classpath()}",
                           "CompactedTopicReader", bs, topic, isolation], capture_output=True, timeout=180)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    out: list[Pair] = []
    for line in proc.stdout.decode("latin-1").splitlines():
        key, value = line.split(" ", 1)
        out.append((key.encode("latin-1"), value.encode("latin-1")))
    return out


# ------------------------------------------------------------------------------------------------
# What a reader may see after compaction


def _assert_in_log_order(seen: list[Pair], allowed: list[Pair], who: str) -> None:
    position = {p: i for i, p in enumerate(allowed)}
    unknown = [p for p in seen if p not in position]
    assert not unknown, f"{who} read records that were never written as allowed: {unknown[:5]}"
    indices = [position[p] for p in seen]
    assert indices == sorted(set(indices)), f"{who} read records out of log order or twice"


def assert_read_committed(seen: list[Pair], w: Written, who: str) -> None:
    aborted = [p for p in seen if p in w.aborted]
    assert not aborted, f"{who} read aborted records: {aborted[:5]}"
    _assert_in_log_order(seen, w.committed, who)  # no control record either: it was never written
    last_seen: dict[bytes, bytes] = dict(seen)
    latest = w.latest_committed()
    assert last_seen == latest, (f"{who}: the latest committed record per key differs: "
                                 f"{ {k: (last_seen.get(k), v) for k, v in latest.items() if last_seen.get(k) != v} }")
    assert len(seen) < len(w.committed), f"{who} read every committed record: nothing was compacted"


def assert_read_uncommitted(seen: list[Pair], w: Written, who: str) -> None:
    every = set(w.committed) | w.aborted
    assert all(p in every for p in seen), f"{who} read records never written"
    assert len(set(seen)) == len(seen), f"{who} read a record twice"
    committed_seen = [p for p in seen if p not in w.aborted]
    _assert_in_log_order(committed_seen, w.committed, who)
    assert dict(committed_seen) == w.latest_committed(), f"{who} lost a key's latest committed record"


# ------------------------------------------------------------------------------------------------
# Tests


@pytest.mark.slow  # make test keeps its budget; make test-slow runs it
def test_read_committed_after_compaction_with_kafka_python(compacted: tuple[Any, str, Written]) -> None:
    cluster, topic, w = compacted
    seen = _read_kafka_python(cluster.bootstrap, topic, "read_committed")
    assert_read_committed(seen, w, "kafka-python read_committed")
    for k in w.latest_aborted_keys:
        assert dict(seen)[k] == w.latest_committed()[k]
    uncommitted = _read_kafka_python(cluster.bootstrap, topic, "read_uncommitted")
    assert_read_uncommitted(uncommitted, w, "kafka-python read_uncommitted")
    assert [p for p in uncommitted if p in w.aborted] == w.tail_aborted, "only the uncleaned aborted records"


@pytest.mark.slow
def test_read_committed_after_compaction_with_three_clients(compacted: tuple[Any, str, Written],
                                                           tmp_path: Path) -> None:
    cluster, topic, w = compacted
    bs = cluster.bootstrap
    readers = {
        "kafka-python": _read_kafka_python(bs, topic, "read_committed"),
        "confluent-kafka": _read_confluent(bs, topic, "read_committed"),
        "Java": _read_java(bs, topic, "read_committed", tmp_path),
    }
    for who, seen in readers.items():
        assert_read_committed(seen, w, f"{who} read_committed")
    assert readers["confluent-kafka"] == readers["kafka-python"] == readers["Java"]
    for who, seen in {"confluent-kafka": _read_confluent(bs, topic, "read_uncommitted"),
                      "Java": _read_java(bs, topic, "read_uncommitted", tmp_path)}.items():
        assert_read_uncommitted(seen, w, f"{who} read_uncommitted")
        assert [p for p in seen if p in w.aborted] == w.tail_aborted, who


_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*producerId: (-?\d+) .*"
                    r"isTransactional: (true|false) isControl: (true|false)")
_RECORD = re.compile(r"^\| offset: (\d+) .*?(?: endTxnMarker: (ABORT|COMMIT)| key: (\S+) payload: (\S+))")
_TXN_ENTRY = re.compile(r"^version: 0 producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+) lastStableOffset: (\d+)")


@pytest.mark.slow  # make test keeps its budget; make test-slow runs it
def test_kafka_dump_log_sees_the_aborted_ranges(compacted: tuple[Any, str, Written], tmp_path: Path) -> None:
    """Kafka's DumpLogSegments on a copy of the cleaned partition: the .txnindex entries cover every
    aborted record left, each ends at an ABORT marker, and a cleaned segment holds one."""
    from tests.kafka_dist import dump_log_segments

    cluster, topic, w = compacted
    part_dir = _partition_dir(cluster, topic)
    cleaned_up_to = _cleaner_checkpoint(cluster, topic)
    copy = tmp_path / part_dir.name
    copy.mkdir()
    files = []
    for name in sorted(os.listdir(part_dir)):
        if name.endswith((".log", ".txnindex")):
            shutil.copy(part_dir / name, copy / name)
            files.append(str(copy / name))
    out = dump_log_segments("--files", ",".join(files), "--print-data-log")

    entries: list[tuple[int, int, int, int]] = []  # (segment base, producer id, first offset, last offset)
    aborted_records: list[tuple[int, int]] = []  # (producer id, offset)
    markers: dict[int, tuple[int, str]] = {}  # offset -> (producer id, ABORT/COMMIT)
    segment, producer = -1, -1
    for line in out.splitlines():
        if line.startswith("Dumping "):
            segment = int(Path(line.split(" ", 1)[1]).name.split(".")[0])
        elif m := _BATCH.match(line):
            producer = int(m.group(4))
        elif m := _RECORD.match(line):
            if m.group(2):
                markers[int(m.group(1))] = (producer, m.group(2))
            elif (m.group(3).encode(), m.group(4).encode()) in w.aborted:
                aborted_records.append((producer, int(m.group(1))))
        elif m := _TXN_ENTRY.match(line):
            entries.append((segment, int(m.group(1)), int(m.group(2)), int(m.group(3))))
    assert entries, out[-3000:]
    assert len(aborted_records) == len(w.tail_aborted), "the aborted records of the active segment"
    for pid, offset in aborted_records:
        assert any(p == pid and first <= offset <= last for _, p, first, last in entries), (pid, offset, entries)
    for _, pid, _first, last in entries:
        assert markers.get(last) == (pid, "ABORT"), (last, markers.get(last))
    # The last transaction (aborted) is in the cleaned part: its data is gone, its entry stays there.
    assert any(seg < cleaned_up_to and last < cleaned_up_to for seg, _, _, last in entries), (entries, cleaned_up_to)
    assert not any(offset < cleaned_up_to for _, offset in aborted_records), "the cleaner left aborted records"
