"""A fetch response still being written never sends another file's bytes.

A slow consumer (small SO_RCVBUF, reading a little at a time) has a fetch of many MB in flight, so the
broker sits in the middle of a sendfile. Meanwhile the segment it reads goes away: the topic is deleted,
the cleaner swaps the segment for a compacted one, or DeleteRecords removes it. Right after, other
topics are created and written with different bytes, so freed descriptor numbers get reused. The
consumer then reads the rest: it must get either the original bytes (every batch's CRC valid, every
value the one written at that offset) or a closed connection, and never bytes of another file.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from protocol.api_versions import ApiKey
from protocol.messages import decode_response, encode_request, new_request, request_type
from protocol.records import build_batch, iter_batches
from tests.integration.helpers import RawClient, unique, wait_until

MIB = 1 << 20
VALUE_SIZE = 16 * 1024
# Far more than the kernel buffers between broker and client (send buffer autotuned up to a few MiB).
PAYLOAD = 24 * MIB
# Time spent per scenario (at least one iteration each).
BUDGET_S = float(os.environ.get("KAFKETTE_FD_LIFETIME_BUDGET_S", "5"))

CLUSTER = {"zookeeper.session.timeout.ms": "6000", "offsets.topic.num.partitions": "1",
           "log.segment.delete.delay.ms": "0", "log.cleaner.backoff.ms": "100",
           "log.retention.check.interval.ms": "200", "delete.topic.enable": "true",
           "auto.leader.rebalance.enable": "false"}


def value_for(tag: bytes, offset: int) -> bytes:
    head = b"%s:%012d:" % (tag, offset)
    return head + tag[:1] * (VALUE_SIZE - len(head))


def write(bootstrap: str, topic: str, tag: bytes, nbytes: int, *, key: bytes | None = None, start: int = 0) -> int:
    """Batches of ~1 MiB of values tagged with ``tag``; returns the next offset."""
    offset = start
    per_batch = MIB // VALUE_SIZE - 2
    with RawClient(bootstrap, timeout=60) as raw:
        written = 0
        while written < nbytes:
            batch = build_batch([(key, value_for(tag, offset + i), int(time.time() * 1000))
                                 for i in range(per_batch)])
            r = raw.produce(topic, 0, bytes(batch), acks=1)
            assert r.error_code == 0, r
            offset += per_batch
            written += per_batch * VALUE_SIZE
    return offset


def create(bootstrap: str, topic: str, partitions: int = 1, **configs: str) -> None:
    mt = request_type(ApiKey.CREATE_TOPICS)
    with RawClient(bootstrap, timeout=60) as raw:
        r = raw.request(ApiKey.CREATE_TOPICS, 5, topics=[mt.CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=1, assignments=[],
            configs=[mt.CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()])],
            timeout_ms=30000, validate_only=False)
        assert r.topics[0].error_code == 0, r.topics[0]
        wait_until(lambda: raw.leaders(topic) == partitions, 30, f"leaders of {topic}")


class SlowFetch:
    """A consumer Fetch of up to PAYLOAD bytes from offset 0, read a little at a time."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
        self.sock.settimeout(60)
        self.sock.connect((host, int(port)))
        mt = request_type(ApiKey.FETCH)
        body = new_request(ApiKey.FETCH, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=PAYLOAD * 2,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[
                               mt.FetchTopic(topic=topic, partitions=[
                                   mt.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                     last_fetched_epoch=-1, log_start_offset=-1,
                                                     partition_max_bytes=PAYLOAD * 2)])],
                           forgotten_topics_data=[], rack_id="")
        self.sock.sendall(encode_request(ApiKey.FETCH, 12, 1, "slow-consumer", body))
        self.buf = bytearray()

    def read_some(self, n: int) -> None:
        while n > 0:
            chunk = self.sock.recv(min(n, 4096))
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
            n -= len(chunk)

    def finish(self) -> bytes | None:
        """The records of the response, or None when the broker closed the connection instead."""
        try:
            self.sock.settimeout(120)
            while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">i", self.buf[:4])[0]:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    return None
                self.buf += chunk
        except OSError:
            return None
        finally:
            self.sock.close()
        size = struct.unpack(">i", self.buf[:4])[0]
        _cid, resp = decode_response(ApiKey.FETCH, 12, bytes(self.buf[4:4 + size]))
        pd = resp.responses[0].partitions[0]
        assert pd.error_code == 0, pd
        return bytes(pd.records or b"")


def check_original(records: bytes, tag: bytes, expected_first: int = 0) -> int:
    """Every complete batch has a valid CRC and the values written at its offsets; returns the count."""
    n = 0
    for batch in iter_batches(memoryview(records), allow_partial_tail=True):
        assert batch.verify_crc(), f"batch at offset {batch.base_offset}: CRC mismatch (bytes of another file?)"
        for rec in batch.records():
            assert rec.offset >= expected_first
            assert bytes(rec.value) == value_for(tag, rec.offset), f"record {rec.offset} is not what was written"
            n += 1
    return n


def scenario(cluster: Any, event: Callable[[str, bytes], None], prepare: Callable[[str, bytes], None]) -> dict[str, int]:
    """Iterations of: prepare a topic, start the slow fetch, run the event, reuse descriptors, check."""
    bootstrap = cluster.bootstrap
    deadline = time.monotonic() + BUDGET_S
    outcome = {"original": 0, "closed": 0, "iterations": 0}
    while outcome["iterations"] == 0 or time.monotonic() < deadline:
        topic = unique("pinned")
        tag = b"A" + topic[-6:].encode()
        prepare(topic, tag)
        fetch = SlowFetch(bootstrap, topic)
        fetch.read_some(64 * 1024)  # the response is under way; the broker now waits in sendfile
        event(topic, tag)
        # Reuse the freed descriptor numbers: new segments with other bytes.
        for i in range(3):
            other = unique("other")
            create(bootstrap, other, partitions=4)
            write(bootstrap, other, b"Z" + str(i).encode(), 2 * MIB)
        records = fetch.finish()
        if records is None:
            outcome["closed"] += 1
        else:
            assert check_original(records, tag) > 0
            outcome["original"] += 1
        outcome["iterations"] += 1
    return outcome


def assert_all_original(outcome: dict[str, int]) -> None:
    # Wrong bytes fail check_original above. The pinned descriptor also means the response is never cut
    # short: without it the broker's sendfile fails on the closed descriptor and drops the connection.
    assert outcome["iterations"] >= 1
    assert outcome["original"] == outcome["iterations"], outcome


def _data_dir(cluster: Any) -> str:
    return cluster.brokers[0].props["log.dirs"]


def _segment_gone(cluster: Any, topic: str, base_name: str, inode: int) -> bool:
    path = os.path.join(_data_dir(cluster), f"{topic}-0", base_name)
    try:
        return os.stat(path).st_ino != inode
    except FileNotFoundError:
        return True


def _listing(cluster: Any, topic: str) -> str:
    """The partition directory's files and sizes, for a failure message."""
    path = os.path.join(_data_dir(cluster), f"{topic}-0")
    try:
        return ", ".join(f"{n} {os.stat(os.path.join(path, n)).st_size}" for n in sorted(os.listdir(path)))
    except OSError as e:
        return f"{path}: {e}"


def _first_segment_inode(cluster: Any, topic: str) -> int:
    return os.stat(os.path.join(_data_dir(cluster), f"{topic}-0", "00000000000000000000.log")).st_ino


def test_topic_deleted_during_a_slow_fetch(cluster_factory: Any) -> None:
    cluster = cluster_factory(1, overrides=CLUSTER)
    bootstrap = cluster.bootstrap

    def prepare(topic: str, tag: bytes) -> None:
        create(bootstrap, topic)
        write(bootstrap, topic, tag, PAYLOAD)

    def delete(topic: str, tag: bytes) -> None:
        with RawClient(bootstrap, timeout=60) as raw:
            r = raw.request(ApiKey.DELETE_TOPICS, 4, topic_names=[topic], timeout_ms=30000)
            assert r.responses[0].error_code == 0, r
        wait_until(lambda: not any(n.startswith(f"{topic}-0") and not n.endswith("-delete")
                                   for n in os.listdir(_data_dir(cluster))), 30, f"{topic} deleted on disk")

    outcome = scenario(cluster, delete, prepare)
    assert_all_original(outcome)


def test_segment_compacted_and_swapped_during_a_slow_fetch(cluster_factory: Any) -> None:
    cluster = cluster_factory(1, overrides=CLUSTER)
    bootstrap = cluster.bootstrap

    def prepare(topic: str, tag: bytes) -> None:
        create(bootstrap, topic, cleanup_policy="compact", min_cleanable_dirty_ratio="0.01",
               segment_bytes=str(PAYLOAD + MIB))
        nxt = write(bootstrap, topic, tag, PAYLOAD, key=b"same-key")  # all but one record can go
        # Roll: the next batch does not fit the first segment, which becomes cleanable.
        write(bootstrap, topic, tag, 2 * MIB, key=b"same-key", start=nxt)

    def compact(topic: str, tag: bytes) -> None:
        inode = _first_segment_inode(cluster, topic)
        wait_until(lambda: _segment_gone(cluster, topic, "00000000000000000000.log", inode), 120,
                   lambda: f"the cleaner to swap the first segment of {topic} ({_listing(cluster, topic)})",
                   interval=0.2)

    outcome = scenario(cluster, compact, prepare)
    assert_all_original(outcome)


def test_segment_removed_by_delete_records_during_a_slow_fetch(cluster_factory: Any) -> None:
    cluster = cluster_factory(1, overrides=CLUSTER)
    bootstrap = cluster.bootstrap
    ends: dict[str, int] = {}

    def prepare(topic: str, tag: bytes) -> None:
        create(bootstrap, topic, segment_bytes=str(PAYLOAD + MIB))
        nxt = write(bootstrap, topic, tag, PAYLOAD)
        ends[topic] = write(bootstrap, topic, tag, 2 * MIB, start=nxt)
        # The topic's segment.bytes rolled the log at the second write, so DeleteRecords past it can
        # remove the whole first segment.
        rolled = os.path.join(_data_dir(cluster), f"{topic}-0", f"{nxt:020d}.log")
        assert os.path.exists(rolled), f"no segment at offset {nxt}: {_listing(cluster, topic)}"

    def delete_records(topic: str, tag: bytes) -> None:
        inode = _first_segment_inode(cluster, topic)
        mt = request_type(ApiKey.DELETE_RECORDS)
        with RawClient(bootstrap, timeout=60) as raw:
            r = raw.request(ApiKey.DELETE_RECORDS, 2, topics=[mt.DeleteRecordsTopic(name=topic, partitions=[
                mt.DeleteRecordsPartition(partition_index=0, offset=ends[topic] - 1)])], timeout_ms=30000)
            assert r.topics[0].partitions[0].error_code == 0, r
        low_watermark = r.topics[0].partitions[0].low_watermark
        wait_until(lambda: _segment_gone(cluster, topic, "00000000000000000000.log", inode), 60,
                   lambda: f"the first segment of {topic} removed (DeleteRecords to {ends[topic] - 1} answered "
                           f"low watermark {low_watermark}; {_listing(cluster, topic)})", interval=0.2)

    outcome = scenario(cluster, delete_records, prepare)
    assert_all_original(outcome)
