"""``kafkette`` as a process against a live 2-broker cluster: ``--output json`` on every command that prints
data, the idempotent console producer and perf producer (their batches carry a producer id and sequence
numbers, as dump-log shows), the COORDINATOR column, and progress lines on a terminal.

Every command runs as its own process (``python -m clients.cli``), so stdout holds exactly what the
command printed: in JSON mode it must parse as JSON (JSON Lines for the console tools) with nothing
else around it.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ops.helpers import Result, running_cluster, unique

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "clients.cli"]
# The ACL authorizer, so that ``acls`` has something to answer; everyone is allowed where no ACL is set.
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    yield from running_cluster(2, metrics_base_port=None, overrides=AUTHORIZER)


@pytest.fixture(scope="module")
def bs(cluster: Any) -> str:
    return str(cluster.bootstrap)


def cli(*argv: str, stdin: str | None = None, timeout: float = 90) -> Result:
    r = subprocess.run([*CLI, *argv], input=stdin, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                       stdin=None if stdin is not None else subprocess.DEVNULL)
    return Result(r.returncode, r.stdout, r.stderr)


def ok(*argv: str, stdin: str | None = None) -> Result:
    r = cli(*argv, stdin=stdin)
    assert r.rc == 0, f"kafkette {' '.join(argv)} failed:\n{r}"
    return r


def as_json(*argv: str, stdin: str | None = None) -> Any:
    """Run with --output json: stdout is one JSON document and nothing else."""
    r = ok(*argv, "--output", "json", stdin=stdin)
    return json.loads(r.out)


def as_json_lines(*argv: str, stdin: str | None = None) -> list[Any]:
    """Run with --output json: every line of stdout is one JSON object."""
    r = ok(*argv, "--output", "json", stdin=stdin)
    assert r.out.endswith("\n") or r.out == ""
    return [json.loads(line) for line in r.out.splitlines()]


def create(bs: str, topic: str, *extra: str) -> None:
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", topic, *extra)


def segment(cluster: Any, topic: str, partition: int = 0, broker: int = 0) -> Path:
    return Path(cluster.brokers[broker].props["log.dirs"]) / f"{topic}-{partition}" / "00000000000000000000.log"


def batches(seg: Path) -> list[dict[str, Any]]:
    doc = as_json("dump-log", "--files", str(seg), "--deep-iteration")
    assert [d["type"] for d in doc] == ["log"] and doc[0]["problems"] == []
    return list(doc[0]["batches"])


# ------------------------------------------------------------------------------------------------
# --output json on every command that prints data

# Every subcommand (and, for the tools whose action is a flag, every action) that prints data, and so
# takes --output json; the tests below run each of them in JSON mode.
JSON_COMMANDS = {
    ("cluster", "describe"), ("leader-election",), ("delete-records",), ("console-producer",),
    ("console-consumer",), ("dump-log",), ("perf", "produce"), ("perf", "consume"),
    ("topics", "create"), ("topics", "list"), ("topics", "describe"), ("topics", "alter"), ("topics", "delete"),
    ("consumer-groups", "list"), ("consumer-groups", "describe"), ("consumer-groups", "delete"),
    ("consumer-groups", "reset-offsets"), ("consumer-groups", "delete-offsets"),
    ("configs", "describe"), ("configs", "alter"), ("acls", "add"), ("acls", "remove"), ("acls", "list"),
    ("reassign-partitions", "generate"), ("reassign-partitions", "execute"), ("reassign-partitions", "verify"),
    ("reassign-partitions", "cancel"), ("scram", "describe"), ("scram", "alter"),
    ("client-quotas", "describe"), ("client-quotas", "alter"),
}


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                              argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
    for a in subs:
        for name, sub in a.choices.items():
            yield from _commands(sub, (*prefix, name))


def test_every_data_command_takes_output_json() -> None:
    from clients.cli import build_parser

    found = set()
    for cmd, parser in _commands(build_parser()):
        options = {o for a in parser._actions for o in a.option_strings}
        if cmd == ("broker", "start"):  # runs a broker, prints no data
            assert "--output" not in options
            continue
        assert "--output" in options, f"kafkette {' '.join(cmd)} has no --output"
        output = next(a for a in parser._actions if "--output" in a.option_strings)
        assert output.choices is not None and "json" in output.choices
        actions = [a.const for a in parser._actions if a.dest == "action" and a.option_strings]
        found |= {(*cmd, a) for a in actions} if actions else {cmd}
    assert found == JSON_COMMANDS


def test_json_topics_configs_and_cluster(bs: str) -> None:
    t = unique("jtop")
    assert as_json("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "2",
                   "--replication-factor", "2") == {"created": t}
    assert as_json("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--if-not-exists") == \
        {"created": None, "exists": t}
    assert t in as_json("topics", "--list", "--bootstrap-server", bs)
    d = as_json("topics", "--describe", "--bootstrap-server", bs, "--topic", t)
    assert d[0]["topic"] == t and d[0]["partition_count"] == 2
    assert as_json("topics", "--alter", "--bootstrap-server", bs, "--topic", t, "--partitions", "3") == \
        {"altered": [t], "partitions": 3}
    ent = ("--entity-type", "topics", "--entity-name", t)
    assert as_json("configs", "--alter", "--bootstrap-server", bs, *ent, "--add-config", "retention.ms=60000") == \
        {"entity": f"topic {t}", "set": {"retention.ms": "60000"}, "deleted": []}
    cfg = as_json("configs", "--describe", "--bootstrap-server", bs, *ent)
    assert {c["name"]: c["value"] for c in cfg[0]["configs"]} == {"retention.ms": "60000"}
    cl = as_json("cluster", "describe", "--bootstrap-server", bs)
    assert sorted(b["id"] for b in cl["brokers"]) == [0, 1]
    assert as_json("topics", "--delete", "--bootstrap-server", bs, "--topic", t) == {"deleted": [t]}


def test_json_console_tools_and_groups(bs: str) -> None:
    t, g = unique("jcon"), unique("jgrp")
    create(bs, t, "--partitions", "2", "--replication-factor", "2")
    acks = as_json_lines("console-producer", "--bootstrap-server", bs, "--topic", t, "--property", "parse.key=true",
                         "--property", "key.separator=:", "--property", "parse.headers=true",
                         stdin="".join(f"h:{i}\tk{i % 2}:v{i}\n" for i in range(6)))
    assert len(acks) == 6 and all(set(a) == {"topic", "partition", "offset"} and a["topic"] == t for a in acks)
    # each partition's records got consecutive offsets from 0, in the order they were sent
    for p in {a["partition"] for a in acks}:
        assert [a["offset"] for a in acks if a["partition"] == p] == list(range(sum(a["partition"] == p
                                                                                    for a in acks)))
    records = as_json_lines("console-consumer", "--bootstrap-server", bs, "--topic", t, "--from-beginning",
                            "--group", g, "--timeout-ms", "3000")
    assert sorted(r["value"] for r in records) == [f"v{i}" for i in range(6)]
    by_value = {r["value"]: r for r in records}
    for i, a in enumerate(acks):  # the consumer sees each record where the producer's acknowledgement said
        r = by_value[f"v{i}"]
        assert (r["topic"], r["partition"], r["offset"]) == (a["topic"], a["partition"], a["offset"])
        assert r["key"] == f"k{i % 2}" and r["headers"] == [{"key": "h", "value": str(i)}]
        assert r["timestampType"] == "CreateTime" and r["timestamp"] > 0

    assert {"group": g, "state": "Empty", "protocol_type": "consumer"} in \
        as_json("consumer-groups", "--list", "--bootstrap-server", bs)
    d = as_json("consumer-groups", "--describe", "--bootstrap-server", bs, "--group", g)[0]
    assert sum(o["current_offset"] for o in d["offsets"]) == 6
    reset = as_json("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t,
                    "--to-earliest", "--execute")
    assert sorted((r["partition"], r["new_offset"]) for r in reset) == [(0, 0), (1, 0)]
    assert as_json("consumer-groups", "--delete-offsets", "--bootstrap-server", bs, "--group", g,
                   "--topic", f"{t}:1") == [{"group": g, "topic": t, "partition": 1, "status": "Successful"}]
    assert as_json("consumer-groups", "--delete", "--bootstrap-server", bs, "--group", g) == \
        {"deleted": [g], "errors": {}}


def test_json_dump_log_deletes_and_elections(cluster: Any, bs: str, tmp_path: Path) -> None:
    t = unique("jdump")
    create(bs, t, "--replica-assignment", "0")
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, stdin="a\nb\nc\n")
    seg = segment(cluster, t)
    idx = seg.with_suffix(".index")
    doc = as_json("dump-log", "--files", f"{seg},{idx}", "--print-data-log")
    assert [(d["file"], d["type"]) for d in doc] == [(str(seg), "log"), (str(idx), "index")]
    log = doc[0]
    assert log["logStartOffset"] == 0 and log["problems"] == []
    [batch] = log["batches"]
    assert (batch["baseOffset"], batch["lastOffset"], batch["count"], batch["isvalid"]) == (0, 2, 3, True)
    assert [(r["offset"], r["payload"]) for r in batch["records"]] == [(0, "a"), (1, "b"), (2, "c")]
    assert as_json("dump-log", "--files", str(idx), "--index-sanity-check")[0]["sanityCheck"] == \
        {"passed": True, "problem": None}

    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "offset": 2}]}))
    assert as_json("delete-records", "--bootstrap-server", bs, "--offset-json-file", str(spec)) == \
        [{"topic": t, "partition": 0, "low_watermark": 2, "error": None}]
    le = as_json("leader-election", "--bootstrap-server", bs, "--election-type", "preferred", "--topic", t,
                 "--partition", "0")
    assert le == {"elected": [], "not_needed": [f"{t}-0"], "failed": {}}


def test_json_reassignment(bs: str, tmp_path: Path) -> None:
    t = unique("jmove")
    create(bs, t, "--replica-assignment", "0,0")
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, stdin="x\ny\nz\n")
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": t}]}))
    gen = as_json("reassign-partitions", "--generate", "--bootstrap-server", bs, "--topics-to-move-json-file",
                  str(move), "--broker-list", "1")
    assert [p["replicas"] for p in gen["current"]["partitions"]] == [[0], [0]]
    assert [p["replicas"] for p in gen["proposed"]["partitions"]] == [[1], [1]]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(gen["proposed"]))
    ex = as_json("reassign-partitions", "--execute", "--bootstrap-server", bs, "--reassignment-json-file",
                 str(plan), "--throttle", "10000000", "--wait")
    assert ex["started"] == [f"{t}-0", f"{t}-1"] and ex["throttle"] == 10000000 and ex["completed"] is True
    assert ex["current"] == gen["current"]
    v = as_json("reassign-partitions", "--verify", "--bootstrap-server", bs, "--reassignment-json-file", str(plan))
    assert v["completed"] is True and v["throttle_removed"] is True
    assert [(p["partition"], p["status"], p["replicas"]) for p in v["partitions"]] == \
        [(0, "completed", [1]), (1, "completed", [1])]
    assert as_json("reassign-partitions", "--cancel", "--bootstrap-server", bs, "--reassignment-json-file",
                   str(plan)) == {"cancelled": [f"{t}-0", f"{t}-1"]}


def test_json_perf(bs: str) -> None:
    t = unique("jperf")
    create(bs, t, "--partitions", "2", "--replication-factor", "1")
    s = as_json("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "500", "--record-size",
                "50", "--throughput", "-1")
    assert s["records"] == 500 and s["idempotent"] is True
    assert {"records_per_sec", "mb_per_sec", "avg_latency_ms", "max_latency_ms", "p50_ms", "p99_ms"} <= set(s)
    c = as_json("perf", "consume", "--bootstrap-server", bs, "--topic", t, "--messages", "500")
    assert c["data.consumed.in.nMsg"] == 500 and c["data.consumed.in.MB"] > 0
    assert {"start.time", "end.time", "MB.sec", "nMsg.sec", "fetch.time.ms"} <= set(c)


def test_json_acls_scram_and_quotas(bs: str) -> None:
    t = unique("jacl")
    added = as_json("acls", "--add", "--bootstrap-server", bs, "--allow-principal", "User:alice", "--operation",
                    "Read", "--topic", t)
    acl = {"principal": "User:alice", "host": "*", "operation": "READ", "permissionType": "ALLOW"}
    assert added == {"added": [{"resourceType": "TOPIC", "name": t, "patternType": "LITERAL", "acls": [acl]}]}
    listed = as_json("acls", "--list", "--bootstrap-server", bs, "--topic", t)
    assert listed == added["added"]
    removed = as_json("acls", "--remove", "--force", "--bootstrap-server", bs, "--allow-principal", "User:alice",
                      "--operation", "Read", "--topic", t)
    assert removed == {"removed": [{"resourceType": "TOPIC", "name": t, "patternType": "LITERAL", **acl}]}
    assert as_json("acls", "--list", "--bootstrap-server", bs, "--topic", t) == []

    user = unique("juser")
    assert as_json("scram", "--alter", "--bootstrap-server", bs, "--user", user, "--add-config",
                   "SCRAM-SHA-256=[iterations=4096,password=pw]") == \
        {"user": user, "added": ["SCRAM-SHA-256"], "deleted": []}
    [cred] = as_json("scram", "--describe", "--bootstrap-server", bs, "--user", user)
    assert cred["credentials"] == [{"mechanism": "SCRAM-SHA-256", "iterations": 4096}]
    client = unique("jclient")
    assert as_json("client-quotas", "--alter", "--bootstrap-server", bs, "--client", client, "--add-config",
                   "producer_byte_rate=1024")["set"] == {"producer_byte_rate": 1024.0}
    quotas = as_json("client-quotas", "--describe", "--bootstrap-server", bs, "--client", client)
    assert quotas == [{"entity": {"client-id": client}, "quotas": {"producer_byte_rate": 1024.0}}]


# ------------------------------------------------------------------------------------------------
# Idempotent producing by default, as Kafka 3.x's console producer and perf test


def _sequences_follow(bs_: list[dict[str, Any]]) -> bool:
    """Each batch starts where the one before ended, from sequence 0."""
    expected = 0
    for b in bs_:
        if b["baseSequence"] != expected or b["lastSequence"] != expected + b["count"] - 1:
            return False
        expected = b["lastSequence"] + 1
    return True


def test_console_producer_is_idempotent(cluster: Any, bs: str) -> None:
    t = unique("jidem")
    create(bs, t, "--replica-assignment", "0")  # one partition, on broker 0, whose files dump-log reads
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, "--batch-size", "3",
       stdin="".join(f"r{i}\n" for i in range(7)))
    first = batches(segment(cluster, t))
    assert [b["count"] for b in first] == [3, 3, 1]
    pid = first[0]["producerId"]
    assert pid >= 0 and all(b["producerId"] == pid and b["producerEpoch"] >= 0 for b in first)
    assert _sequences_follow(first)
    assert [r["sequence"] for b in first for r in b["records"]] == list(range(7))
    # A second run is a new producer: a new producer id, sequences from 0 again.
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, stdin="again\n")
    second = batches(segment(cluster, t))[3:]
    assert len(second) == 1 and second[0]["producerId"] not in (-1, pid) and second[0]["baseSequence"] == 0

    # Turned off as in Kafka: enable.idempotence=false, or acks other than all without enable.idempotence.
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, "--producer-property",
       "enable.idempotence=false", stdin="plain\n")
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, "--request-required-acks", "1", stdin="acks1\n")
    rest = batches(segment(cluster, t))[4:]
    assert [(b["producerId"], b["baseSequence"]) for b in rest] == [(-1, -1), (-1, -1)]
    # Asking for both is Kafka's configuration error, and nothing is sent.
    r = cli("console-producer", "--bootstrap-server", bs, "--topic", t, "--request-required-acks", "1",
            "--producer-property", "enable.idempotence=true", stdin="never\n")
    assert r.rc == 2 and "Must set acks to all in order to use the idempotent producer" in r.err, str(r)
    assert len(batches(segment(cluster, t))) == 6


def test_perf_producer_is_idempotent(cluster: Any, bs: str) -> None:
    t = unique("jpidem")
    create(bs, t, "--replica-assignment", "0,0")
    ok("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "300", "--record-size", "20",
       "--throughput", "-1", "--producer-props", "batch.size=1000")
    pids = set()
    for p in (0, 1):
        bs_ = batches(segment(cluster, t, p))
        assert len(bs_) > 1 and sum(b["count"] for b in bs_) == 150
        assert _sequences_follow(bs_)
        pids |= {b["producerId"] for b in bs_}
    assert len(pids) == 1 and pids.pop() >= 0  # one producer id for the whole run, on every partition
    ok("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "10", "--record-size", "20",
       "--throughput", "-1", "--producer-props", "acks=1")
    ok("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "10", "--record-size", "20",
       "--throughput", "-1", "--producer-props", "enable.idempotence=false")
    later = [b for p in (0, 1) for b in batches(segment(cluster, t, p)) if b["baseOffset"] >= 150]
    assert later and {b["producerId"] for b in later} == {-1}


# ------------------------------------------------------------------------------------------------
# The coordinator as kafka-consumer-groups.sh shows it


def test_coordinator_column_shows_host_port_and_id(bs: str) -> None:
    t, g = unique("jcoord"), unique("jcg")
    create(bs, t, "--partitions", "1")
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, stdin="m\n")
    ok("console-consumer", "--bootstrap-server", bs, "--topic", t, "--group", g, "--from-beginning",
       "--max-messages", "1")
    coord = as_json("consumer-groups", "--describe", "--bootstrap-server", bs, "--group", g)[0]["coordinator"]
    brokers = {b["id"]: b for b in as_json("cluster", "describe", "--bootstrap-server", bs)["brokers"]}
    b = brokers[coord["id"]]
    assert (coord["host"], coord["port"]) == (b["host"], b["port"])
    table = ok("consumer-groups", "--describe", "--bootstrap-server", bs, "--group", g, "--state").out.splitlines()
    assert table[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    # kafka-consumer-groups.sh's cell: "host:port  (id)"
    assert table[1].startswith(f"{g}  {b['host']}:{b['port']}  ({b['id']})  "), table
    assert table[1].split()[-2:] == ["Empty", "0"]


# ------------------------------------------------------------------------------------------------
# Progress on a terminal (stderr), never in JSON mode


def run_with_terminal_stderr(*argv: str, timeout: float = 90) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal and stdout on a pipe: (status, stdout, terminal text)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
                            cwd=REPO)
    os.close(slave)
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else b""))
    reader.start()
    seen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the process and its children closed the terminal
                break
            if not data:
                break
            seen += data
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        reader.join(timeout=30)
    return rc, out[0].decode() if out else "", seen.decode(errors="replace")


def test_progress_on_a_terminal_only(bs: str, tmp_path: Path) -> None:
    t = unique("jprog")
    create(bs, t, "--partitions", "40", "--replication-factor", "1")
    perf = ("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "2000", "--record-size",
            "20", "--throughput", "-1")
    rc, out, term = run_with_terminal_stderr(*perf)
    assert rc == 0, term
    assert "sending: " in term and "/2000 records" in term and "2000/2000 records (100%)" in term
    assert "sending" not in out and out.strip().splitlines()[-1].startswith("2000 records sent,")
    assert term.rstrip(" \r").endswith("\x1b[K")  # the meter is erased when done
    rc, out, term = run_with_terminal_stderr(*perf, "--output", "json")
    assert rc == 0 and term == "" and json.loads(out)["records"] == 2000

    # offset resets and record deletion over many partitions
    g = unique("jpg")
    ok("console-consumer", "--bootstrap-server", bs, "--topic", t, "--group", g, "--from-beginning",
       "--max-messages", "1")
    reset = ("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t,
             "--to-earliest", "--execute")
    rc, out, term = run_with_terminal_stderr(*reset)
    assert rc == 0 and "resetting offsets: " in term and "40/40 partitions" in term, term
    rc, out, term = run_with_terminal_stderr(*reset, "--output", "json")
    assert rc == 0 and term == "" and len(json.loads(out)) == 40
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "offset": -1}
                                                             for p in range(40)]}))
    rc, out, term = run_with_terminal_stderr("delete-records", "--bootstrap-server", bs, "--offset-json-file",
                                             str(spec))
    assert rc == 0 and "deleting records: " in term and "40/40 partitions" in term, term
    assert out.startswith("Records delete operation completed:")
    rc, out, term = run_with_terminal_stderr("delete-records", "--bootstrap-server", bs, "--offset-json-file",
                                             str(spec), "--output", "json")
    assert rc == 0 and term == "" and len(json.loads(out)) == 40
    # With stderr on a pipe (not a terminal) there is no meter either.
    r = ok(*perf)
    assert "sending" not in r.err and "\x1b" not in r.err


def test_reassignment_progress_on_a_terminal(bs: str, tmp_path: Path) -> None:
    t = unique("jrprog")
    create(bs, t, "--partitions", "4", "--replica-assignment", "0,0,0,0")
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, stdin="".join(f"{i}\n" for i in range(100)))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": [0, 1]}
                                                             for p in range(4)]}))
    rc, out, term = run_with_terminal_stderr("reassign-partitions", "--execute", "--bootstrap-server", bs,
                                             "--reassignment-json-file", str(plan), "--wait")
    assert rc == 0 and "reassigning: " in term and "4/4 partitions" in term, term
    assert "Reassignment of 4 partition(s) is completed." in out
    rc, out, term = run_with_terminal_stderr("reassign-partitions", "--verify", "--bootstrap-server", bs,
                                             "--reassignment-json-file", str(plan), "--wait", "--output", "json")
    assert rc == 0 and term == "" and json.loads(out)["completed"] is True
