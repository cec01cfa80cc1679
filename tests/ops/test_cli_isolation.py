"""``kafkette console-consumer --isolation-level``: read_committed leaves out aborted and open transactions.

A transactional producer (confluent-kafka) writes, interleaved on both partitions of a topic, one
transaction that commits and one that aborts, then a third that stays open. Each console consumer runs
as its own process (``python -m clients.cli``) from the beginning: read_committed prints exactly the
committed records, read_uncommitted (the default) every record of the three, in text and in JSON mode,
and neither prints a transaction marker. Once the open transaction commits, read_committed prints its
records too.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clients.admin import LATEST, READ_COMMITTED, READ_UNCOMMITTED, WireClient
from clients.consumer_records import records_of
from protocol.records import build_batch, build_control_batch
from tests.ops.helpers import Result, fails, ok, unique, wait_until

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "clients.cli"]
PARTITIONS = (0, 1)
PER_PARTITION = 3
# The consumers stop once nothing new arrived for this long; every record is written before they start.
IDLE_MS = "3000"

Delivered = tuple[int, int, str]  # partition, offset, value


class TxnWriter:
    """One transactional confluent-kafka producer and the (partition, offset, value) of what it wrote."""

    def __init__(self, bs: str, txn_id: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bs, "transactional.id": txn_id})
        self.producer.init_transactions(30)
        self.delivered: list[Delivered] = []
        self.in_transaction = False

    def begin(self) -> None:
        self.producer.begin_transaction()
        self.in_transaction = True

    def end(self, commit: bool) -> None:
        self.in_transaction = False
        if commit:
            self.producer.commit_transaction(30)
        else:
            self.producer.abort_transaction(30)

    def close(self) -> None:
        """Abort what is still open (a failed test leaves no transaction hanging) and disconnect."""
        try:
            if self.in_transaction:
                self.end(commit=False)
        finally:
            self.producer.close()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        assert err is None, err
        self.delivered.append((msg.partition(), msg.offset(), msg.value().decode()))

    def write(self, topic: str, partition: int, value: str) -> None:
        """One record, acknowledged before this returns, so the log holds the writers' records in call order."""
        self.producer.produce(topic, value=value.encode(), partition=partition, on_delivery=self._on_delivery)
        assert self.producer.flush(30) == 0


@pytest.fixture(scope="module")
def bs(kafka_cluster: Any) -> str:
    """The session's one-broker cluster (tests/conftest.py); this module's topics have names of their own."""
    return str(kafka_cluster.bootstrap)


def write_three_transactions(bs: str, topic: str, stack: contextlib.ExitStack
                             ) -> tuple[list[Delivered], list[Delivered], TxnWriter]:
    """A committed and an aborted transaction, interleaved on every partition, then an open one."""
    committed, aborted, open_ = (TxnWriter(bs, unique(f"txn-{kind}")) for kind in ("commit", "abort", "open"))
    for writer in (committed, aborted, open_):
        stack.callback(writer.close)
    committed.begin()
    aborted.begin()
    # Interleaved batch by batch, so that the reader has to tell the two producers' batches apart.
    for i in range(PER_PARTITION):
        for p in PARTITIONS:
            committed.write(topic, p, f"committed-{p}-{i}")
            aborted.write(topic, p, f"aborted-{p}-{i}")
    committed.end(commit=True)
    aborted.end(commit=False)
    open_.begin()
    for i in range(PER_PARTITION):
        for p in PARTITIONS:
            open_.write(topic, p, f"open-{p}-{i}")
    # The markers may be written after EndTxn answers: wait until the last stable offset of each partition is
    # the open transaction's first offset (where it stays while that transaction is open).
    first_open = {(topic, p): min(o for q, o, _ in open_.delivered if q == p) for p in PARTITIONS}
    with WireClient(bs) as client:
        wait_until(lambda: client.list_offsets(list(first_open), LATEST, isolation_level=READ_COMMITTED)
                   == first_open, 30, "the commit and abort markers")
    return committed.delivered, aborted.delivered, open_


def consumers(*argvs: tuple[str, ...]) -> list[Result]:
    """Run console consumers side by side, each as its own process."""
    procs = [subprocess.Popen([*CLI, "console-consumer", *argv], cwd=REPO, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv in argvs]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        results.append(Result(proc.returncode, out, err))
    for argv, r in zip(argvs, results, strict=True):
        assert r.rc == 0, f"console-consumer {' '.join(argv)}:\n{r}"
    return results


def args(bs: str, topic: str, *extra: str) -> tuple[str, ...]:
    return ("--bootstrap-server", bs, "--topic", topic, "--from-beginning", "--timeout-ms", IDLE_MS, *extra)


def check_text(r: Result, expected: list[Delivered]) -> None:
    assert sorted(r.out.splitlines()) == sorted(v for _, _, v in expected), str(r)
    assert f"Processed a total of {len(expected)} messages" in r.err, str(r)


def check_json(r: Result, expected: list[Delivered]) -> None:
    got = [json.loads(line) for line in r.out.splitlines()]
    assert sorted((j["partition"], j["offset"], j["value"]) for j in got) == sorted(expected), str(r)
    for p in PARTITIONS:  # each partition in offset order
        offsets = [j["offset"] for j in got if j["partition"] == p]
        assert offsets == sorted(offsets), str(r)
    assert f"Processed a total of {len(expected)} messages" in r.err, str(r)


@pytest.mark.slow  # about 8 s of transactions and consumer processes
def test_read_committed_and_read_uncommitted(bs: str) -> None:
    topic = unique("isolation")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", topic, "--partitions", str(len(PARTITIONS)),
       "--replication-factor", "1")
    with contextlib.ExitStack() as stack:
        committed, aborted, open_writer = write_three_transactions(bs, topic, stack)
        opened = open_writer.delivered
        assert len(committed) == len(aborted) == len(opened) == PER_PARTITION * len(PARTITIONS)
        everything = committed + aborted + opened
        rc_text, rc_json, ru_text, ru_json, default_json, prop_text = consumers(
            args(bs, topic, "--isolation-level", "read_committed"),
            args(bs, topic, "--isolation-level", "read_committed", "--output", "json"),
            args(bs, topic, "--isolation-level", "read_uncommitted"),
            args(bs, topic, "--isolation-level", "read_uncommitted", "--output", "json"),
            args(bs, topic, "--output", "json"),
            # Kafka's consumer config name works too (the flag wins when both are given).
            args(bs, topic, "--consumer-property", "isolation.level=read_committed"),
        )
        check_text(rc_text, committed)
        check_json(rc_json, committed)
        check_text(ru_text, everything)
        check_json(ru_json, everything)
        check_json(default_json, everything)
        check_text(prop_text, committed)

        # Once the open transaction commits, read_committed reads on through its records.
        open_writer.end(commit=True)
    tps = [(topic, p) for p in PARTITIONS]
    with WireClient(bs) as client:
        wait_until(lambda: client.list_offsets(tps, LATEST, isolation_level=READ_COMMITTED)
                   == client.list_offsets(tps, LATEST, isolation_level=READ_UNCOMMITTED), 30, "the commit markers")
    (r,) = consumers(args(bs, topic, "--isolation-level", "read_committed", "--output", "json"))
    check_json(r, committed + opened)


def test_isolation_level_refused_when_unknown(bs: str) -> None:
    fails("console-consumer", "--bootstrap-server", bs, "--topic", "any", "--consumer-property",
          "isolation.level=serializable", rc=2, match="isolation.level")
    fails("console-consumer", "--bootstrap-server", bs, "--topic", "any", "--isolation-level", "read_dirty", rc=2,
          match="read_committed")


# -- the read_committed filter on one fetch response, as Kafka's consumer applies it -------------------


def _log() -> bytes:
    """Producer 1 aborts a transaction that spans offsets 0-2 and then commits a new one; producer 2 commits."""
    def data(offset: int, pid: int, *values: str) -> bytes:
        txn = pid >= 0
        return build_batch([(None, v.encode(), 1) for v in values], base_offset=offset, producer_id=pid,
                           producer_epoch=0 if txn else -1, base_sequence=offset if txn else -1, is_transactional=txn)

    def marker(offset: int, pid: int, commit: bool) -> bytes:
        return build_control_batch(commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                   timestamp=1, base_offset=offset)

    return b"".join([data(0, 1, "a0"), data(1, 2, "c0", "c1"), data(3, 1, "a1"), marker(4, 1, False),
                     data(5, 1, "c2"), marker(6, 2, True), data(7, -1, "plain"), marker(8, 1, True)])


@pytest.mark.parametrize("start, committed, uncommitted", [
    (0, ["c0", "c1", "c2", "plain"], ["a0", "c0", "c1", "a1", "c2", "plain"]),
    # From inside an aborted transaction (it began before the fetch position) and inside a batch.
    (2, ["c1", "c2", "plain"], ["c1", "a1", "c2", "plain"]),
    (5, ["c2", "plain"], ["c2", "plain"]),
])
def test_records_of_leaves_out_aborted_batches(start: int, committed: list[str], uncommitted: list[str]) -> None:
    log = _log()
    aborted = [(1, 0)]  # what the broker lists: producer 1's transaction from offset 0
    assert [r.value.decode() for _, r in records_of(log, start, aborted) if r.value] == committed
    assert [r.value.decode() for _, r in records_of(log, start) if r.value] == uncommitted
