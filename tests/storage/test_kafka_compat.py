"""Our files against Apache Kafka 3.9.1's own code (jars from Maven Central, cached in .cache/kafka-jars).

Kafka -> us: DumpLogSegments and Kafka's LogSegment/OffsetIndex/TimeIndex/ProducerStateManager/
LeaderEpochCheckpointFile read what PartitionLog wrote. Us -> Kafka: a Java probe writes segments through
Kafka's LogSegment and we read them; re-appending Kafka's batches gives byte-identical index files.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from protocol.records import BatchView, build_control_batch
from storage.batch_headers import buffer_headers
from storage.log import PartitionLog
from storage.producer_state import BatchMetadata, ProducerStateEntry, ProducerStateManager
from tests import kafka_dist
from tests.storage.conftest import batch, records_of

PROBE = Path(__file__).parent / "java" / "KafkaFormatProbe.java"
CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd


@pytest.fixture(scope="module")
def probe_classes() -> str:
    return kafka_dist.compile_java(PROBE)


def write_sample_log(path: str) -> tuple[PartitionLog, list[tuple[int, bytes, bytes | None]]]:
    """A log with mixed codecs, leader epochs, an idempotent producer and an aborted transaction."""
    now = int(time.time() * 1000)
    lg = PartitionLog(path, {"segment_bytes": 1500, "index_interval_bytes": 200, "segment_index_bytes": 4096})
    expected: list[tuple[int, bytes, bytes | None]] = []
    seq = 0
    for i in range(40):
        recs = [(b"key-%d-%d" % (i, j), b"value-%d-%d" % (i, j) * (1 + j), now + i * 10 + j) for j in range(3)]
        if i % 7 == 6:
            recs[1] = (recs[1][0], None, recs[1][2])  # a tombstone
        kwargs = {}
        if i % 5 == 4:
            kwargs = {"producer_id": 1000, "producer_epoch": 2, "base_sequence": seq}
            seq += 3
        info = lg.append(batch(recs, compression=CODECS[i % 5], **kwargs), leader_epoch=i // 15)
        expected.extend((info.first_offset + j, r[0], r[1]) for j, r in enumerate(recs))
    info = lg.append(batch([(b"txn-key", b"txn-value", now + 500)], producer_id=2000, producer_epoch=0,
                           base_sequence=0, is_transactional=True), leader_epoch=2)
    expected.append((info.first_offset, b"txn-key", b"txn-value"))
    lg.append(bytearray(build_control_batch(commit=False, producer_id=2000, producer_epoch=0, coordinator_epoch=4,
                                            timestamp=now + 501)), leader_epoch=2, from_client=False)
    lg.flush()
    lg.close()
    return lg, expected


def test_dump_log_segments_reads_our_files(tmp_path):
    path = str(tmp_path / "compat-0")
    lg, expected = write_sample_log(path)
    logs = sorted(str(Path(path) / n) for n in os.listdir(path) if n.endswith(".log"))
    assert len(logs) >= 3
    out = kafka_dist.dump_log_segments("--files", ",".join(logs), "--print-data-log", "--deep-iteration")
    batch_lines = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    assert batch_lines and all("isvalid: true" in line for line in batch_lines)
    assert "compresscodec: zstd" in out and "compresscodec: gzip" in out and "compresscodec: lz4" in out
    assert "isControl: true" in out and "endTxnMarker: ABORT coordinatorEpoch: 4" in out
    assert "producerId: 1000 producerEpoch: 2" in out
    found = {}
    for m in re.finditer(r"^\| offset: (\d+) .*?key: (\S+)(?: payload: ?(.*))?$", out, re.M):
        found[int(m.group(1))] = (m.group(2), m.group(3) or "")
    for offset, key, value in expected:
        assert found[offset][0] == key.decode()
        assert found[offset][1] == (value.decode() if value is not None else "")
    epochs = {int(m.group(1)) for m in re.finditer(r"partitionLeaderEpoch: (\d+)", out)}
    assert epochs == {0, 1, 2}

    indexes = sorted(str(Path(path) / n) for n in os.listdir(path) if n.endswith((".index", ".timeindex")))
    out = kafka_dist.dump_log_segments("--files", ",".join(indexes), "--index-sanity-check")
    assert out.count("passed sanity check") + out.count(" is empty.") == len(indexes), out
    assert "Exception" not in out and "corrupt" not in out.lower()
    out = kafka_dist.dump_log_segments("--files", ",".join(indexes), "--verify-index-only")
    assert "Mismatches" not in out and "mismatch" not in out.lower(), out
    assert "isn't" not in out and "Found timestamp mismatch" not in out, out

    others = sorted(str(Path(path) / n) for n in os.listdir(path) if n.endswith((".snapshot", ".txnindex")))
    out = kafka_dist.dump_log_segments("--files", ",".join(others))
    assert "producerId: 1000 producerEpoch: 2" in out
    assert re.search(r"version: 0 producerId: 2000 firstOffset: (\d+) lastOffset: (\d+) lastStableOffset: (\d+)", out)


def test_kafka_storage_classes_read_our_files(tmp_path, probe_classes):
    path = str(tmp_path / "compat-0")
    _, expected = write_sample_log(path)
    ours = PartitionLog(path, {"segment_bytes": 1500}, had_clean_shutdown=True)
    our_index = {
        seg.base_offset: [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] for seg in ours.segments
    }
    our_time_index = {
        seg.base_offset: [seg.time_index.entry(i) for i in range(seg.time_index.entries)] for seg in ours.segments
    }
    epochs = ours.leader_epoch_cache.entries()
    ours.close()
    copy = str(tmp_path / "copy-0")
    shutil.copytree(path, copy)
    out = kafka_dist.run_java("KafkaFormatProbe", "read", copy, extra_classpath=probe_classes)
    lines = out.splitlines()
    records = {}
    for line in lines:
        if line.startswith("record "):
            _, off, _ts, key, value = line.split(" ", 4)
            records[int(off)] = (key, value)
    for offset, key, value in expected:
        assert records[offset] == (key.decode(), value.decode() if value is not None else "null")
    assert all("valid=true" in line for line in lines if line.startswith("batch "))
    kafka_index: dict[int, list[tuple[int, int]]] = {}
    kafka_time_index: dict[int, list[tuple[int, int]]] = {}
    for line in lines:
        parts = line.split()
        if parts[0] == "oidx":
            kafka_index.setdefault(int(parts[1]), []).append((int(parts[2]), int(parts[3])))
        elif parts[0] == "tidx":
            kafka_time_index.setdefault(int(parts[1]), []).append((int(parts[2]), int(parts[3])))
    assert {k: v for k, v in our_index.items() if v} == kafka_index
    assert {k: v for k, v in our_time_index.items() if v} == kafka_time_index
    # Kafka's translateOffset finds the batch holding every offset; its recovery truncates nothing
    assert sum(1 for line in lines if line.startswith("translate ")) == len(records)
    assert all(line.endswith("truncated=0") for line in lines if line.startswith("recover "))
    assert [line for line in lines if line.startswith("epoch ")] == [f"epoch {e} {o}" for e, o in epochs]
    snap = [line for line in lines if line.startswith("snapshot ")]
    assert any("pid=1000 epoch=2" in line for line in snap)
    assert any(line.startswith("aborted ") and " 2000 " in line for line in lines)


def test_we_read_kafka_written_log_and_write_identical_indexes(tmp_path, probe_classes):
    kafka_dir = tmp_path / "kafka-0"
    kafka_dist.run_java("KafkaFormatProbe", "write", str(kafka_dir), extra_classpath=probe_classes)
    expected = [(o, b"key-%d" % o, b"value-%d" % o) for o in range(120)]
    for clean in (True, False):
        work = tmp_path / f"read-{clean}-0"
        shutil.copytree(kafka_dir, work)
        lg = PartitionLog(str(work), {"segment_index_bytes": 4096, "index_interval_bytes": 256},
                          had_clean_shutdown=clean)
        assert lg.log_end_offset == 120
        assert [(o, k, v) for o, _, k, v in records_of(lg)] == expected
        assert lg.leader_epoch_cache.entries() == [(5, 0), (6, 60)]
        # The probe wrote a txn index entry without markers in the log: recovery rebuilds the index from
        # the log (as Kafka's LogSegment.recover does), so the entry only survives a clean open.
        aborted = [tuple(a) for a in lg.collect_aborted_transactions(0, 120)]
        assert aborted == ([(42, 61, 70, 61)] if clean else [])
        assert lg.offset_for_timestamp(1_700_000_000_050) == (50, 1_700_000_000_050)
        for o in (0, 1, 59, 60, 61, 119):
            assert BatchView(lg.read_bytes(o, 1)).base_offset == o - o % 3
        lg.close()
    # the producer snapshot Kafka wrote decodes to the same entry we encode byte for byte
    data = (kafka_dir / "00000000000000000120.snapshot").read_bytes()
    [entry] = ProducerStateManager.decode_snapshot(data)
    assert (entry.producer_id, entry.producer_epoch, entry.coordinator_epoch, entry.current_txn_first_offset) == (
        42, 3, 7, 100)
    assert entry.batches[-1] == BatchMetadata(7, 9, 116, 118, 1_700_000_000_099)
    psm = ProducerStateManager(str(tmp_path))
    e = ProducerStateEntry(42, 3, 7, 1_700_000_000_099, 100)
    e.batches.append(BatchMetadata(7, 9, 116, 118, 1_700_000_000_099))
    psm.producers[42] = e
    assert psm.encode_snapshot() == data
    # appending Kafka's batches (as a follower) reproduces Kafka's .log, .index and .timeindex exactly
    ours = tmp_path / "ours-0"
    lg = PartitionLog(str(ours), {"segment_index_bytes": 4096, "index_interval_bytes": 256})
    for base in (0, 60):
        raw = (kafka_dir / f"{base:020d}.log").read_bytes()
        if base:
            lg.roll(base)
        for h in buffer_headers(raw):
            lg.append(bytearray(raw[h.position : h.position + h.size]), assign_offsets=False)
    lg.flush()
    lg.close()
    for name in ("log", "index", "timeindex"):
        for base in (0, 60):
            fname = f"{base:020d}.{name}"
            assert (ours / fname).read_bytes() == (kafka_dir / fname).read_bytes(), fname
    assert (ours / "leader-epoch-checkpoint").read_bytes() == (kafka_dir / "leader-epoch-checkpoint").read_bytes()
