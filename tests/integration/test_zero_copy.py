"""Zero copy: the record bytes of a plain fetch response leave the broker through sendfile(2).

Two proofs. At the syscall level, ``strace`` attached to the broker process counts what the socket
that served the fetch received through ``sendfile`` and through everything else (``sendto``, ``write``,
...). In process, a broker run in a thread shows the same split in its ``ConnectionStats``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.helpers import RawClient, create_topic, unique, wait_until
from tests.integration.in_process_broker import in_process_broker

RECORD = 200 * 1024
COUNT = 5

_CALL = re.compile(r"^(?P<pid>\d+)\s+(?P<name>\w+)\((?P<fd>\d+),")
_UNFINISHED = re.compile(r"^(?P<pid>\d+)\s+(?P<name>\w+)\((?P<fd>\d+),.*<unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(?P<pid>\d+)\s+<\.\.\. (?P<name>\w+) resumed>.*= (?P<ret>-?\d+)")
_RETURN = re.compile(r"= (?P<ret>-?\d+)(?: [A-Z]+.*)?$")


def parse_strace(text: str) -> dict[int, dict[str, int]]:
    """Bytes written per fd and syscall: {fd: {"sendfile": n, "sendto": m, ...}} (failed calls count 0)."""
    out: dict[int, dict[str, int]] = {}
    pending: dict[tuple[str, str], int] = {}
    for line in text.splitlines():
        m = _UNFINISHED.match(line)
        if m:
            pending[(m["pid"], m["name"])] = int(m["fd"])
            continue
        m = _RESUMED.match(line)
        if m:
            fd = pending.pop((m["pid"], m["name"]), None)
            if fd is not None and int(m["ret"]) > 0:
                out.setdefault(fd, {}).setdefault(m["name"], 0)
                out[fd][m["name"]] += int(m["ret"])
            continue
        m = _CALL.match(line)
        r = _RETURN.search(line)
        if m and r and int(r["ret"]) > 0:
            out.setdefault(int(m["fd"]), {}).setdefault(m["name"], 0)
            out[int(m["fd"])][m["name"]] += int(r["ret"])
    return out


def _produce_incompressible(bootstrap: str, topic: str) -> list[bytes]:
    values = [os.urandom(RECORD) for _ in range(COUNT)]
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=2 * RECORD)
    for v in values:
        producer.send(topic, value=v, partition=0)
    producer.flush(15)
    producer.close(5)
    return values


def _consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_bytes=16 << 20,
                             max_partition_fetch_bytes=16 << 20)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=300).values():
                got.extend(m.value for m in msgs)
        return got
    finally:
        consumer.close()


def test_fetch_records_go_through_sendfile_syscall(kafka_cluster: Any, tmp_path: Path) -> None:
    strace = shutil.which("strace")
    assert strace, "strace is missing: deploy/install-sysdeps.sh installs it"
    bootstrap = kafka_cluster.bootstrap
    broker = kafka_cluster.brokers[0]
    topic = unique("zerocopy")
    create_topic(bootstrap, topic, partitions=1)
    values = _produce_incompressible(bootstrap, topic)
    with RawClient(bootstrap) as raw:
        stored = sum(b.size for b in raw.fetch_batches(topic, 0))
    assert stored >= COUNT * RECORD

    out = tmp_path / "strace.txt"
    proc = subprocess.Popen([strace, "-f", "-qq", "-p", str(broker.process.pid), "-o", str(out),
                             "-e", "trace=sendfile,sendto,sendmsg,write,writev"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # strace is attached once the broker's writes show up in its output: poke it with a request.
        def attached() -> bool:
            with RawClient(bootstrap) as raw:
                raw.leaders(topic)
            return out.exists() and out.stat().st_size > 0

        wait_until(attached, 15, "strace to attach to the broker")
        got = _consume(bootstrap, topic, COUNT)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(15)
    assert got == values, "the consumer read back what was produced"
    per_fd = parse_strace(out.read_text())
    fetch_fds = [fd for fd, calls in per_fd.items() if calls.get("sendfile", 0) >= stored]
    assert fetch_fds, f"no socket got the {stored} record bytes through sendfile: {per_fd}"
    for fd in fetch_fds:
        other = sum(n for name, n in per_fd[fd].items() if name != "sendfile")
        # Only response headers (and small non-fetch responses) went through send()/write().
        assert other < RECORD, f"fd {fd}: {other} bytes written without sendfile: {per_fd[fd]}"


def test_fetch_records_go_through_sendfile_in_process(zookeeper_server: Any, zk_chroot: str,
                                                      tmp_path: Path) -> None:
    """A broker in this process (its own event loop in a thread, its own ZooKeeper chroot): its
    ConnectionStats count sendfile bytes apart from the bytes sent with send()."""
    with in_process_broker(zookeeper_server.connect_string + zk_chroot, tmp_path / "data",
                           **{"group.initial.rebalance.delay.ms": "0"}) as (broker, bootstrap):
        topic = unique("zerocopy-inproc")
        create_topic(bootstrap, topic, partitions=1)
        values = _produce_incompressible(bootstrap, topic)
        stats = broker.stats
        sendfile_before, out_before = stats.sendfile_bytes, stats.bytes_out
        with RawClient(bootstrap) as raw:
            pd = raw.fetch(topic, 0, 0, max_bytes=16 << 20)
        record_bytes = len(pd.records)
        sent_by_sendfile = stats.sendfile_bytes - sendfile_before
        sent_by_send = (stats.bytes_out - out_before) - sent_by_sendfile
        assert record_bytes >= COUNT * RECORD
        assert all(v in bytes(pd.records) for v in values)
        assert sent_by_sendfile >= record_bytes
        assert sent_by_send < RECORD, f"{sent_by_send} bytes went through send()"
