"""Every ``kafkette`` subcommand against one live 3-broker cluster, good input and bad.

Bad input must give one clear line on stderr naming the problem (Kafka's error name when the cluster
refused), a non-zero exit status, and leave the cluster as it was.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ops.helpers import fails, kafkette, ok, running_cluster, unique, wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    yield from running_cluster(3, metrics_base_port=None)


@pytest.fixture(scope="module")
def bs(cluster: object) -> str:
    return cluster.bootstrap  # type: ignore[attr-defined]


def topic_info(bs: str, topic: str) -> dict:
    return ok("topics", "--describe", "--bootstrap-server", bs, "--topic", topic, "--output", "json").json()[0]


def create(bs: str, topic: str, *extra: str, partitions: int = 3, rf: int = 3) -> None:
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", topic, "--partitions", str(partitions),
       "--replication-factor", str(rf), *extra)


def produce(bs: str, topic: str, lines: list[str], *extra: str) -> None:
    ok("console-producer", "--bootstrap-server", bs, "--topic", topic, *extra, stdin="".join(f"{x}\n" for x in lines))


def consume(bs: str, topic: str, *extra: str) -> list[str]:
    r = ok("console-consumer", "--bootstrap-server", bs, "--topic", topic, "--timeout-ms", "3000", *extra)
    return r.out.splitlines()


# ------------------------------------------------------------------------------------------------


def _leaf_commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _leaf_commands(sub, (*prefix, name))
    return out


def test_help_everywhere() -> None:
    from clients.cli import build_parser

    commands = _leaf_commands(build_parser())
    assert ("topics",) in commands and ("perf", "produce") in commands and ("cluster", "describe") in commands
    for cmd in commands:
        r = kafkette(*cmd, "--help")
        assert r.rc == 0, f"{cmd}: {r}"
        assert "usage: kafkette" in r.out, cmd
    # The action word form of Kafka's flag-style tools.
    assert kafkette("topics", "create", "--help").rc == 0
    r = kafkette("topics")
    assert r.rc == 2 and "one of the arguments" in r.err


def test_console_script_entry_point(bs: str) -> None:
    """The installed ``kafkette`` script (the same main) works as a process."""
    exe = shutil.which("kafkette", path=str(Path(sys.executable).parent)) or shutil.which("kafkette")
    cmd = [exe] if exe else [sys.executable, "-m", "clients.cli"]
    r = subprocess.run([*cmd, "cluster", "describe", "--bootstrap-server", bs, "--output", "json"],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["brokers"]) == 3


def test_cluster_describe(bs: str) -> None:
    data = ok("cluster", "describe", "--bootstrap-server", bs, "--output", "json").json()
    assert data["cluster_id"]
    assert sorted(b["id"] for b in data["brokers"]) == [0, 1, 2]
    assert [b["id"] for b in data["brokers"] if b["controller"]] == [data["controller_id"]]
    for b in data["brokers"]:
        assert b["listeners"].startswith("PLAINTEXT://")
    table = ok("cluster", "describe", "--bootstrap-server", bs).out
    assert f"Cluster ID: {data['cluster_id']}" in table and "LISTENERS" in table


def test_unreachable_broker() -> None:
    for argv in (["topics", "--list"], ["consumer-groups", "--list"], ["cluster", "describe"],
                 ["configs", "--describe", "--entity-type", "brokers", "--entity-name", "0"]):
        fails(*argv, "--bootstrap-server", "127.0.0.1:1", rc=1, match="no bootstrap server is reachable")
    fails("topics", "--list", "--bootstrap-server", "nohostport", rc=2, match="invalid bootstrap server")


# ------------------------------------------------------------------------------------------------
# topics


def test_topics_lifecycle(bs: str) -> None:
    t = unique("tp")
    r = ok("topics", "create", "--bootstrap-server", bs, "--topic", t, "--partitions", "3", "--replication-factor",
           "3", "--config", "retention.ms=86400000", "--config", "cleanup.policy=delete")
    assert f"Created topic {t}." in r.out
    assert t in ok("topics", "--list", "--bootstrap-server", bs).out.split()
    info = topic_info(bs, t)
    assert info["partition_count"] == 3 and info["replication_factor"] == 3
    assert info["configs"] == {"retention.ms": "86400000", "cleanup.policy": "delete"}
    for p in info["partitions"]:
        assert sorted(p["replicas"]) == [0, 1, 2] and sorted(p["isr"]) == [0, 1, 2] and p["leader"] in p["replicas"]
    table = ok("topics", "--describe", "--bootstrap-server", bs, "--topic", t).out
    assert f"Topic: {t}" in table and "PartitionCount: 3" in table and "retention.ms=86400000" in table
    assert "LEADER" in table and "ISR" in table
    # --if-not-exists makes a second create a no-op
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "1", "--if-not-exists")
    ok("topics", "--alter", "--bootstrap-server", bs, "--topic", t, "--partitions", "5")
    assert topic_info(bs, t)["partition_count"] == 5
    # manual assignment
    t2 = unique("tpa")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t2, "--replica-assignment", "2:1,0:2")
    parts = {p["partition"]: p["replicas"] for p in topic_info(bs, t2)["partitions"]}
    assert parts == {0: [2, 1], 1: [0, 2]}
    listed = ok("topics", "--list", "--bootstrap-server", bs, "--exclude-internal", "--output", "json").json()
    assert "__consumer_offsets" not in listed and t in listed
    ok("topics", "--delete", "--bootstrap-server", bs, "--topic", t)
    ok("topics", "delete", "--bootstrap-server", bs, "--topic", t2)
    wait_until(lambda: t not in ok("topics", "--list", "--bootstrap-server", bs).out.split(), 30, "topic deleted")
    ok("topics", "--delete", "--bootstrap-server", bs, "--topic", t, "--if-exists")


def test_topics_bad_input_changes_nothing(bs: str) -> None:
    t = unique("tbad")
    fails("topics", "--describe", "--bootstrap-server", bs, "--topic", "no-such-topic", rc=1,
          match="UNKNOWN_TOPIC_OR_PARTITION")
    fails("topics", "--delete", "--bootstrap-server", bs, "--topic", "no-such-topic", rc=1,
          match="UNKNOWN_TOPIC_OR_PARTITION")
    fails("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--partitions", "0", rc=2,
          match="invalid --partitions")
    fails("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--replication-factor", "4", rc=1,
          match="INVALID_REPLICATION_FACTOR")
    fails("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--config", "no.such.config=1", rc=1,
          match="INVALID_CONFIG")
    fails("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--config", "retention.ms=soon", rc=1,
          match="INVALID_CONFIG")
    fails("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--config", "retention.ms", rc=2)
    fails("topics", "--create", "--bootstrap-server", bs, "--topic", "bad/name", rc=1,
          match="INVALID_TOPIC_EXCEPTION")
    assert t not in ok("topics", "--list", "--bootstrap-server", bs).out.split()
    create(bs, t, partitions=2)
    fails("topics", "--create", "--bootstrap-server", bs, "--topic", t, rc=1, match="TOPIC_ALREADY_EXISTS")
    fails("topics", "--alter", "--bootstrap-server", bs, "--topic", t, "--partitions", "1", rc=1,
          match="INVALID_PARTITIONS")
    fails("topics", "--alter", "--bootstrap-server", bs, "--topic", t, rc=2, match="needs --partitions")
    assert topic_info(bs, t)["partition_count"] == 2
    fails("topics", "--bootstrap-server", bs, "--list", "--describe", rc=2)


def test_topics_health_filters(bs: str) -> None:
    t = unique("thealth")
    # min.insync.replicas above the replication factor: every partition is under min ISR.
    create(bs, t, "--config", "min.insync.replicas=4", partitions=2)
    t_at = unique("tatmin")
    create(bs, t_at, "--config", "min.insync.replicas=3", partitions=1)
    under = ok("topics", "--describe", "--bootstrap-server", bs, "--under-min-isr-partitions", "--output", "json").json()
    assert [d["topic"] for d in under if d["topic"] in (t, t_at)] == [t]
    assert len(next(d for d in under if d["topic"] == t)["partitions"]) == 2
    at = ok("topics", "--describe", "--bootstrap-server", bs, "--at-min-isr-partitions", "--output", "json").json()
    assert t_at in [d["topic"] for d in at]
    # A healthy cluster has nothing under-replicated or unavailable.
    assert ok("topics", "--describe", "--bootstrap-server", bs, "--under-replicated-partitions",
              "--output", "json").json() == []
    assert ok("topics", "--describe", "--bootstrap-server", bs, "--unavailable-partitions").out.strip() == ""
    overrides = ok("topics", "--describe", "--bootstrap-server", bs, "--topics-with-overrides", "--output",
                   "json").json()
    assert {t, t_at} <= {d["topic"] for d in overrides}


# ------------------------------------------------------------------------------------------------
# console producer and consumer


def test_console_producer_and_consumer(bs: str, tmp_path: Path) -> None:
    t = unique("tcon")
    create(bs, t, partitions=3)
    produce(bs, t, [f"k{i}:v{i}" for i in range(12)], "--property", "parse.key=true", "key.separator=:",
            "--request-required-acks", "all", "--compression-codec", "lz4")
    produce(bs, t, ["h1:a,h2:b\thk:with-headers"], "--property", "parse.key=true", "--property", "key.separator=:",
            "--property", "parse.headers=true", "--producer-property", "acks=1")
    f = tmp_path / "input.txt"
    f.write_text("from-file-1\nfrom-file-2\n")
    ok("console-producer", "--bootstrap-server", bs, "--topic", t, "--file", str(f), "--partition", "1",
       "--compression-codec")
    lines = consume(bs, t, "--from-beginning", "--property", "print.key=true", "print.partition=true",
                    "print.offset=true", "print.headers=true", "print.timestamp=true")
    assert len(lines) == 15
    rows = [line.split("\t") for line in lines]
    assert all(r[0].startswith("CreateTime:") and r[1].startswith("Partition:") and r[2].startswith("Offset:")
               for r in rows)
    by_key: dict[str, set[str]] = {}
    for r in rows:
        by_key.setdefault(r[4], set()).add(r[1])
    assert all(len(parts) == 1 for k, parts in by_key.items() if k != "null")  # a key sticks to a partition
    hrow = next(r for r in rows if r[4] == "hk")
    assert hrow[3] == "h1:a,h2:b" and hrow[5] == "with-headers"
    assert [r[5] for r in rows if r[4] == "null"] == ["from-file-1", "from-file-2"]
    assert {r[1] for r in rows if r[4] == "null"} == {"Partition:1"}
    # Murmur2 partitioning, as Kafka's default partitioner: k0 goes where Java clients would put it.
    from clients.partitioner import partition_for_key

    assert next(r[1] for r in rows if r[4] == "k0") == f"Partition:{partition_for_key(b'k0', 3)}"
    # --partition/--offset/--max-messages
    only = consume(bs, t, "--partition", "1", "--offset", "1", "--max-messages", "1", "--property", "print.offset=true")
    assert len(only) == 1 and only[0].startswith("Offset:1\t")
    assert consume(bs, t, "--max-messages", "0") == []
    # without --from-beginning a new consumer starts at the end: nothing within the timeout
    r = ok("console-consumer", "--bootstrap-server", bs, "--topic", t, "--timeout-ms", "1000")
    assert r.out == "" and "Processed a total of 0 messages" in r.err


def test_console_bad_input(bs: str) -> None:
    t = unique("tconbad")
    create(bs, t, partitions=1)
    fails("console-producer", "--bootstrap-server", bs, "--topic", "no-such-topic", stdin="x\n", rc=1,
          match="UNKNOWN_TOPIC_OR_PARTITION")
    fails("console-producer", "--bootstrap-server", bs, "--topic", t, "--property", "parse.key=true",
          stdin="no separator here\n", rc=2, match="no key separator")
    fails("console-producer", "--bootstrap-server", bs, "--topic", t, "--request-required-acks", "2",
          stdin="x\n", rc=2, match="invalid acks")
    fails("console-producer", "--bootstrap-server", bs, "--topic", t, "--compression-codec", "brotli",
          stdin="x\n", rc=2, match="unknown compression")
    fails("console-consumer", "--bootstrap-server", bs, "--topic", "no-such-topic", "--timeout-ms", "500", rc=1,
          match="UNKNOWN_TOPIC_OR_PARTITION")
    fails("console-consumer", "--bootstrap-server", bs, "--topic", t, "--partition", "7", "--timeout-ms", "500",
          rc=1, match="UNKNOWN_TOPIC_OR_PARTITION")
    fails("console-consumer", "--bootstrap-server", bs, "--topic", t, "--offset", "3", rc=2, match="--partition")
    assert consume(bs, t, "--from-beginning") == []  # nothing was produced by the failed runs


# ------------------------------------------------------------------------------------------------
# consumer groups


def _describe_group(bs: str, g: str) -> dict:
    return ok("consumer-groups", "--describe", "--bootstrap-server", bs, "--group", g, "--output", "json").json()[0]


def _offsets(bs: str, g: str) -> dict[int, tuple[int, int, int]]:
    return {o["partition"]: (o["current_offset"], o["log_end_offset"], o["lag"]) for o in _describe_group(bs, g)["offsets"]}


def test_consumer_groups(bs: str) -> None:
    t, g = unique("tgrp"), unique("grp")
    create(bs, t, partitions=2)
    produce(bs, t, [f"{i % 2}:m{i}" for i in range(10)], "--property", "parse.key=true", "key.separator=:")
    got = consume(bs, t, "--group", g, "--from-beginning")
    assert sorted(got) == sorted(f"m{i}" for i in range(10))
    assert g in ok("consumer-groups", "--list", "--bootstrap-server", bs).out.split()
    offs = _offsets(bs, g)
    assert sum(c for c, _, _ in offs.values()) == 10 and all(lag == 0 for _, _, lag in offs.values())
    # lag appears when more records arrive
    produce(bs, t, ["0:late1", "0:late2", "1:late3"], "--property", "parse.key=true", "key.separator=:")
    offs = _offsets(bs, g)
    assert sum(lag for _, _, lag in offs.values()) == 3
    table = ok("consumer-groups", "--describe", "--bootstrap-server", bs, "--group", g).out
    for col in ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"):
        assert col in table
    state = ok("consumer-groups", "--describe", "--bootstrap-server", bs, "--group", g, "--state").out
    assert "Empty" in state
    # the group consumes the rest: lag back to 0
    assert sorted(consume(bs, t, "--group", g)) == ["late1", "late2", "late3"]
    assert all(lag == 0 for _, _, lag in _offsets(bs, g).values())

    # resets: dry run changes nothing, --execute does
    before = _offsets(bs, g)
    dry = ok("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t,
             "--to-earliest", "--output", "json").json()
    assert {d["new_offset"] for d in dry} == {0}
    assert _offsets(bs, g) == before
    ok("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t, "--to-earliest",
       "--execute")
    assert {c for c, _, _ in _offsets(bs, g).values()} == {0}
    ok("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", f"{t}:0",
       "--shift-by", "2", "--execute")
    assert _offsets(bs, g)[0][0] == 2
    ok("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--all-topics", "--to-latest",
       "--execute")
    assert all(lag == 0 for _, _, lag in _offsets(bs, g).values())
    ok("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t, "--to-offset",
       "1", "--execute")
    assert {c for c, _, _ in _offsets(bs, g).values()} == {1}
    ok("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t,
       "--to-datetime", "2000-01-01T00:00:00.000", "--execute")
    assert {c for c, _, _ in _offsets(bs, g).values()} == {0}
    future = time.strftime("%Y-%m-%dT%H:%M:%S.000", time.gmtime(time.time() + 3600))
    ok("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t,
       "--to-datetime", future, "--execute")
    assert all(lag == 0 for _, _, lag in _offsets(bs, g).values())
    # delete offsets of one partition, then the group
    ok("consumer-groups", "--delete-offsets", "--bootstrap-server", bs, "--group", g, "--topic", f"{t}:1")
    assert 1 not in {o["partition"] for o in _describe_group(bs, g)["offsets"] if o["current_offset"] is not None}
    r = ok("consumer-groups", "--delete", "--bootstrap-server", bs, "--group", g)
    assert "was successful" in r.out
    assert g not in ok("consumer-groups", "--list", "--bootstrap-server", bs).out.split()


def test_consumer_groups_bad_input(bs: str) -> None:
    from clients.admin import WireClient
    from clients.group_member import GroupMember

    t, g = unique("tgbad"), unique("gbad")
    create(bs, t, partitions=1)
    fails("consumer-groups", "--describe", "--bootstrap-server", bs, "--group", "no-such-group", rc=1,
          match="GROUP_ID_NOT_FOUND")
    fails("consumer-groups", "--delete", "--bootstrap-server", bs, "--group", "no-such-group", rc=1,
          match="GROUP_ID_NOT_FOUND")
    fails("consumer-groups", "--describe", "--bootstrap-server", bs, rc=2, match="--group")
    fails("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t, rc=2,
          match="needs one of")
    fails("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t,
          "--to-datetime", "yesterday", rc=2, match="invalid --to-datetime")
    fails("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", "no-such-topic",
          "--to-earliest", rc=1, match="UNKNOWN_TOPIC_OR_PARTITION")
    # An active group cannot be reset, and is not deleted.
    produce(bs, t, ["a", "b", "c"])
    ok("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t, "--to-latest",
       "--execute")
    with WireClient(bs) as client:
        member = GroupMember(client, g, [t], session_timeout_ms=30000)
        member.join()
        try:
            fails("consumer-groups", "--reset-offsets", "--bootstrap-server", bs, "--group", g, "--topic", t,
                  "--to-earliest", "--execute", rc=1, match="inactive")
            fails("consumer-groups", "--delete", "--bootstrap-server", bs, "--group", g, rc=1,
                  match="NON_EMPTY_GROUP")
            members = ok("consumer-groups", "--describe", "--bootstrap-server", bs, "--group", g, "--members",
                         "--verbose").out
            assert member.member_id in members and f"{t}-0" in members
        finally:
            member.leave()
    assert _offsets(bs, g)[0][0] == 3


# ------------------------------------------------------------------------------------------------
# configs


def _dynamic(bs: str, *entity: str) -> dict[str, str]:
    data = ok("configs", "--describe", "--bootstrap-server", bs, *entity, "--output", "json").json()
    return {c["name"]: c["value"] for c in data[0]["configs"]}


def test_configs_topics(bs: str) -> None:
    t = unique("tcfg")
    create(bs, t, partitions=1)
    ent = ("--entity-type", "topics", "--entity-name", t)
    assert _dynamic(bs, *ent) == {}
    ok("configs", "--alter", "--bootstrap-server", bs, *ent, "--add-config",
       "retention.ms=3600000,cleanup.policy=[compact,delete]")
    assert _dynamic(bs, *ent) == {"retention.ms": "3600000", "cleanup.policy": "compact,delete"}
    assert "retention.ms" in ok("configs", "--describe", "--bootstrap-server", bs, "--topic", t).out
    full = ok("configs", "--describe", "--bootstrap-server", bs, *ent, "--all", "--output", "json").json()[0]
    assert len(full["configs"]) > 10
    ok("configs", "alter", "--bootstrap-server", bs, "--topic", t, "--delete-config", "cleanup.policy")
    assert _dynamic(bs, *ent) == {"retention.ms": "3600000"}
    # bad input changes nothing
    fails("configs", "--alter", "--bootstrap-server", bs, *ent, "--add-config", "no.such.config=1", rc=1,
          match="INVALID_CONFIG")
    fails("configs", "--alter", "--bootstrap-server", bs, *ent, "--add-config", "retention.ms=1,max.message.bytes=x",
          rc=1, match="INVALID_CONFIG")
    fails("configs", "--alter", "--bootstrap-server", bs, *ent, "--delete-config", "segment.bytes", rc=2,
          match="segment.bytes")
    fails("configs", "--alter", "--bootstrap-server", bs, *ent, "--add-config", "x", rc=2)
    fails("configs", "--alter", "--bootstrap-server", bs, *ent, rc=2, match="needs --add-config")
    assert _dynamic(bs, *ent) == {"retention.ms": "3600000"}
    fails("configs", "--describe", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name",
          "no-such-topic", rc=1, match="UNKNOWN_TOPIC_OR_PARTITION")
    fails("configs", "--alter", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name",
          "no-such-topic", "--add-config", "retention.ms=1", rc=1, match="UNKNOWN_TOPIC_OR_PARTITION")
    fails("configs", "--describe", "--bootstrap-server", bs, rc=2, match="--entity-type")
    fails("configs", "--describe", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-default", rc=2)


def test_configs_brokers_and_defaults(bs: str) -> None:
    b1 = ("--entity-type", "brokers", "--entity-name", "1")
    dflt = ("--entity-type", "brokers", "--entity-default")
    ok("configs", "--alter", "--bootstrap-server", bs, *b1, "--add-config", "log.cleaner.threads=2")
    assert _dynamic(bs, *b1) == {"log.cleaner.threads": "2"}
    ok("configs", "--alter", "--bootstrap-server", bs, *dflt, "--add-config", "log.retention.ms=7200000")
    assert _dynamic(bs, *dflt) == {"log.retention.ms": "7200000"}
    # the cluster-wide default is what every broker now reports for the config
    for b in ("0", "2"):
        def effective(b: str = b) -> bool:
            full = ok("configs", "--describe", "--bootstrap-server", bs, "--entity-type", "brokers", "--entity-name",
                      b, "--all", "--output", "json").json()[0]
            entry = next(c for c in full["configs"] if c["name"] == "log.retention.ms")
            return entry["value"] == "7200000" and entry["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"

        wait_until(effective, 30, f"broker {b} to apply the cluster-wide default")
    fails("configs", "--alter", "--bootstrap-server", bs, *b1, "--add-config", "no.such.config=1", rc=1,
          match="INVALID_CONFIG")
    fails("configs", "--alter", "--bootstrap-server", bs, *b1, "--add-config", "broker.id=9", rc=1,
          match="INVALID_CONFIG")
    fails("configs", "--alter", "--bootstrap-server", bs, *b1, "--add-config", "message.max.bytes=big", rc=1,
          match="INVALID_CONFIG")
    fails("configs", "--alter", "--bootstrap-server", bs, "--entity-type", "brokers", "--entity-name", "7",
          "--add-config", "log.cleaner.threads=2", rc=1, match="BROKER_NOT_AVAILABLE")
    fails("configs", "--describe", "--bootstrap-server", bs, "--entity-type", "brokers", "--entity-name", "x", rc=2)
    assert _dynamic(bs, *b1) == {"log.cleaner.threads": "2"}
    ok("configs", "--alter", "--bootstrap-server", bs, *b1, "--delete-config", "log.cleaner.threads")
    ok("configs", "--alter", "--bootstrap-server", bs, *dflt, "--delete-config", "log.retention.ms")
    assert _dynamic(bs, *b1) == {} and _dynamic(bs, *dflt) == {}


# ------------------------------------------------------------------------------------------------
# leader election and reassignment


def _replicas(bs: str, t: str) -> dict[int, tuple[int, list[int], list[int]]]:
    return {p["partition"]: (p["leader"], p["replicas"], p["isr"]) for p in topic_info(bs, t)["partitions"]}


def test_reassign_and_leader_election(bs: str, tmp_path: Path) -> None:
    t = unique("tmove")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--replica-assignment", "0:1,1:0")
    produce(bs, t, [f"r{i}" for i in range(20)])
    # --generate proposes a layout over the given brokers without changing anything
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": t}]}))
    gen = ok("reassign-partitions", "--generate", "--bootstrap-server", bs, "--topics-to-move-json-file", str(move),
             "--broker-list", "1,2").out
    proposed = json.loads(gen.split("Proposed partition reassignment configuration")[1].strip())
    assert all(set(p["replicas"]) <= {1, 2} and len(p["replicas"]) == 2 for p in proposed["partitions"])
    assert _replicas(bs, t)[0][1] == [0, 1]
    # --execute: partition 0 from [0,1] to [2,1] (with a throttle); partition 1 reordered to [2,0]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": 0, "replicas": [2, 1]}, {"topic": t, "partition": 1, "replicas": [2, 0]}]}))
    r = ok("reassign-partitions", "--execute", "--bootstrap-server", bs, "--reassignment-json-file", str(plan),
           "--throttle", "50000000")
    assert "Successfully started partition reassignments" in r.out

    def verified() -> bool:
        v = kafkette("reassign-partitions", "--verify", "--bootstrap-server", bs, "--reassignment-json-file",
                     str(plan))
        return v.rc == 0 and v.out.count("is completed") == 2

    wait_until(verified, 60, "reassignment to complete", interval=0.5)
    reps = _replicas(bs, t)
    assert reps[0][1] == [2, 1] and reps[1][1] == [2, 0]
    assert "leader.replication.throttled.replicas" not in _dynamic(bs, "--topic", t)  # --verify removed it
    # the data moved with the replicas
    assert len(consume(bs, t, "--from-beginning")) == 20
    # Partition 1's preferred leader is now 2; a preferred election moves leadership there.
    wait_until(lambda: sorted(_replicas(bs, t)[1][2]) == [0, 2], 30, "ISR of the reordered partition")
    if _replicas(bs, t)[1][0] != 2:
        r = ok("leader-election", "--bootstrap-server", bs, "--election-type", "preferred", "--topic", t,
               "--partition", "1")
        assert f"Successfully completed leader election (PREFERRED) for partitions {t}-1" in r.out
    assert _replicas(bs, t)[1][0] == 2
    again = ok("leader-election", "--bootstrap-server", bs, "--election-type", "PREFERRED", "--topic", t,
               "--partition", "1", "--output", "json").json()
    assert again["not_needed"] == [f"{t}-1"] and again["failed"] == {}
    unclean = ok("leader-election", "--bootstrap-server", bs, "--election-type", "unclean", "--all-topic-partitions",
                 "--output", "json").json()
    assert unclean["elected"] == [] and f"{t}-0" in unclean["not_needed"]
    jf = tmp_path / "elect.json"
    jf.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0}]}))
    ok("leader-election", "--bootstrap-server", bs, "--election-type", "preferred", "--path-to-json-file", str(jf))


def test_reassign_and_election_bad_input(bs: str, tmp_path: Path) -> None:
    t = unique("tmvbad")
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", t, "--replica-assignment", "0:1")
    plan = tmp_path / "bad.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "replicas": [0, 9]}]}))
    fails("reassign-partitions", "--execute", "--bootstrap-server", bs, "--reassignment-json-file", str(plan), rc=1,
          match="INVALID_REPLICA_ASSIGNMENT")
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 5, "replicas": [0, 1]}]}))
    fails("reassign-partitions", "--execute", "--bootstrap-server", bs, "--reassignment-json-file", str(plan), rc=1,
          match="UNKNOWN_TOPIC_OR_PARTITION")
    plan.write_text("{not json")
    fails("reassign-partitions", "--execute", "--bootstrap-server", bs, "--reassignment-json-file", str(plan), rc=2,
          match="not valid JSON")
    fails("reassign-partitions", "--generate", "--bootstrap-server", bs, rc=2, match="--topics-to-move-json-file")
    assert _replicas(bs, t)[0][1] == [0, 1]
    fails("leader-election", "--bootstrap-server", bs, "--election-type", "preferred", "--topic", t, "--partition",
          "3", rc=1, match="UNKNOWN_TOPIC_OR_PARTITION")
    fails("leader-election", "--bootstrap-server", bs, "--election-type", "preferred", rc=2, match="exactly one")
    fails("leader-election", "--bootstrap-server", bs, "--election-type", "fastest", "--all-topic-partitions", rc=2)


# ------------------------------------------------------------------------------------------------
# delete-records


def test_delete_records(bs: str, tmp_path: Path) -> None:
    t = unique("tdel")
    create(bs, t, partitions=1)
    produce(bs, t, [f"d{i}" for i in range(10)])
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "offset": 4}]}))
    r = ok("delete-records", "--bootstrap-server", bs, "--offset-json-file", str(spec))
    assert f"partition: {t}-0\tlow_watermark: 4" in r.out
    assert consume(bs, t, "--from-beginning") == [f"d{i}" for i in range(4, 10)]
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "offset": 99}]}))
    fails("delete-records", "--bootstrap-server", bs, "--offset-json-file", str(spec), rc=1,
          match="OFFSET_OUT_OF_RANGE")
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": "no-such-topic", "partition": 0,
                                                              "offset": 1}]}))
    fails("delete-records", "--bootstrap-server", bs, "--offset-json-file", str(spec), rc=1,
          match="UNKNOWN_TOPIC_OR_PARTITION")
    spec.write_text(json.dumps({"partitions": [{"topic": t}]}))
    fails("delete-records", "--bootstrap-server", bs, "--offset-json-file", str(spec), rc=2)
    assert len(consume(bs, t, "--from-beginning")) == 6
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "offset": -1}]}))
    r = ok("delete-records", "--bootstrap-server", bs, "--offset-json-file", str(spec), "--output", "json")
    assert r.json()[0]["low_watermark"] == 10


# ------------------------------------------------------------------------------------------------
# dump-log (offline, on a broker's files)


def test_dump_log(cluster: object, bs: str, tmp_path: Path) -> None:
    t = unique("tdump")
    create(bs, t, partitions=1)
    produce(bs, t, ["k1:hello", "k2:world"], "--property", "parse.key=true", "key.separator=:")
    produce(bs, t, ["plain"], "--compression-codec", "gzip")
    broker = cluster.brokers[0]  # type: ignore[attr-defined]
    pdir = Path(broker.props["log.dirs"]) / f"{t}-0"
    seg = pdir / "00000000000000000000.log"
    wait_until(lambda: seg.exists() and seg.stat().st_size > 0, 30, "the replica's segment")
    wait_until(lambda: "payload: plain" in kafkette("dump-log", "--files", str(seg), "--print-data-log").out, 30,
               "all batches on the replica")
    out = ok("dump-log", "--files", str(seg), "--print-data-log").out
    assert out.startswith(f"Dumping {seg}\nLog starting offset: 0\n")
    batches = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    assert len(batches) == 2 and all("isvalid: true" in b for b in batches)
    assert "compresscodec: gzip" in batches[1] and "count: 2" in batches[0]
    assert "| offset: 0 CreateTime:" in out and "key: k1 payload: hello" in out and "key: k2 payload: world" in out
    deep = ok("dump-log", "--files", str(seg), "--deep-iteration").out
    assert "| offset: 2" in deep and "payload:" not in deep
    idx = pdir / "00000000000000000000.index"
    tidx = pdir / "00000000000000000000.timeindex"
    r = ok("dump-log", "--files", f"{idx},{tidx}", "--index-sanity-check")
    assert r.out.count("passed sanity check.") == 2
    ok("dump-log", "--files", f"{idx},{tidx}")
    ok("dump-log", "--files", str(idx), "--verify-index-only")
    # A flipped byte inside a record: CRC verification catches it, exit status 1.
    bad = tmp_path / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[80] ^= 0xFF
    bad.write_bytes(bytes(data))
    r = kafkette("dump-log", "--files", str(bad), "--print-data-log")
    assert r.rc == 1 and "isvalid: false" in r.out and "CORRUPT_MESSAGE" in r.err
    broken = tmp_path / "00000000000000000000.index"
    broken.write_bytes(b"\x00" * 12)  # not a whole number of entries
    r = kafkette("dump-log", "--files", str(broken), "--index-sanity-check")
    assert r.rc == 1 and "failed sanity check" in r.out
    fails("dump-log", "--files", str(tmp_path / "missing.log"), rc=2, match="no such file")
    assert seg.read_bytes() != bytes(data)  # the live segment was only read


# ------------------------------------------------------------------------------------------------
# perf


def test_perf_produce_and_consume(bs: str) -> None:
    t = unique("tperf")
    create(bs, t, partitions=3)
    r = ok("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "3000", "--record-size", "100",
           "--throughput", "-1", "--producer-props", "acks=1", "batch.size=8192")
    final = r.out.strip().splitlines()[-1]
    assert final.startswith("3000 records sent,") and "records/sec" in final and "MB/sec" in final
    for p in ("50th", "95th", "99th", "99.9th"):
        assert p in final
    r = ok("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "200", "--record-size", "10",
           "--throughput", "1000", "--producer-props", "acks=all", "compression.type=zstd")
    assert r.out.strip().splitlines()[-1].startswith("200 records sent,")
    r = ok("perf", "consume", "--bootstrap-server", bs, "--topic", t, "--messages", "3200", "--group", unique("pg"))
    header, row = r.out.strip().splitlines()[-2:]
    assert header.startswith("start.time, end.time, data.consumed.in.MB")
    assert int(row.split(", ")[4]) == 3200
    fails("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "0", "--record-size", "1",
          "--throughput", "-1", rc=2)
    fails("perf", "produce", "--bootstrap-server", bs, "--topic", "no-such-topic", "--num-records", "10",
          "--record-size", "1", "--throughput", "-1", rc=1, match="UNKNOWN_TOPIC_OR_PARTITION")
    fails("perf", "produce", "--bootstrap-server", bs, "--topic", t, "--num-records", "10", "--record-size", "1",
          "--throughput", "-1", "--producer-props", "acks=7", rc=2, match="invalid acks")


def test_perf_progress_line() -> None:
    """Long runs print a progress line every interval (checked on the bookkeeping, without waiting)."""
    import io

    from clients import cmd_perf

    out = io.StringIO()
    stats = cmd_perf.Stats(10, out)
    stats.window_start -= cmd_perf.REPORT_INTERVAL_S
    stats.record(5, 500, 3.0)
    assert "5 records sent," in out.getvalue() and "ms avg latency" in out.getvalue()


def test_command_config_file(bs: str, tmp_path: Path) -> None:
    cfg = tmp_path / "client.properties"
    cfg.write_text("# client settings\nclient.id=ops-test\nrequest.timeout.ms=20000\n")
    ok("topics", "--list", "--bootstrap-server", bs, "--command-config", str(cfg))
    cfg.write_text("security.protocol=SASL_SSL\n")
    fails("topics", "--list", "--bootstrap-server", bs, "--command-config", str(cfg), rc=2, match="security.protocol")
    fails("topics", "--list", "--bootstrap-server", bs, "--command-config", str(tmp_path / "nope"), rc=2,
          match="cannot read")
