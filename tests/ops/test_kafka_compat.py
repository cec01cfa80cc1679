"""The same ``kafkette`` commands against Apache Kafka 3.9 (ZooKeeper mode) and against kafkette give the
same answers: topics, partitioning of keyed records, offsets, lag, resets, configs, record deletion,
leader election, and the errors for bad input. ``dump-log`` reads Kafka's own segment files the way
Kafka's DumpLogSegments does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ops.helpers import kafkette, ok, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kafkette_cluster() -> Iterator[Any]:
    from clients.devcluster import LocalCluster

    c = LocalCluster(1, metrics_base_port=None, overrides={"offsets.topic.num.partitions": "5"})
    c.start()
    try:
        yield c
    finally:
        c.__exit__(None, None, None)


def error_name(r: Any) -> tuple[int, str | None]:
    m = re.search(r"\b([A-Z][A-Z_]{4,})\b", r.err)
    return (r.rc, m.group(1) if m else None)


def scenario(bs: str, tmp: Path) -> dict[str, Any]:
    """Run one fixed sequence of commands; return what they answered, normalized."""
    out: dict[str, Any] = {}
    B = ("--bootstrap-server", bs)
    J = ("--output", "json")
    cl = ok("cluster", "describe", *B, *J).json()
    out["brokers"] = len(cl["brokers"])
    out["controller_is_a_broker"] = cl["controller_id"] in [b["id"] for b in cl["brokers"]]

    ok("topics", "--create", *B, "--topic", "orders", "--partitions", "3", "--replication-factor", "1",
       "--config", "retention.ms=100000")
    d = ok("topics", "--describe", *B, "--topic", "orders", *J).json()[0]
    out["describe"] = {k: d[k] for k in ("partition_count", "replication_factor", "configs", "internal")}
    out["partitions_led"] = all(p["leader"] is not None and p["isr"] == p["replicas"] for p in d["partitions"])
    out["create_again"] = error_name(kafkette("topics", "--create", *B, "--topic", "orders"))
    out["create_bad_config"] = error_name(kafkette("topics", "--create", *B, "--topic", "x1", "--config",
                                                   "no.such.config=1"))
    out["describe_unknown"] = error_name(kafkette("topics", "--describe", *B, "--topic", "no-such-topic"))
    out["alter_down"] = error_name(kafkette("topics", "--alter", *B, "--topic", "orders", "--partitions", "2"))
    ok("topics", "--alter", *B, "--topic", "orders", "--partitions", "4")
    out["after_alter"] = ok("topics", "--describe", *B, "--topic", "orders", *J).json()[0]["partition_count"]
    out["listed"] = [t for t in ok("topics", "--list", *B, "--exclude-internal", *J).json()]

    # keyed records land on the same partitions and offsets
    lines = "".join(f"key{i}:value{i}\n" for i in range(30))
    ok("console-producer", *B, "--topic", "orders", "--property", "parse.key=true", "key.separator=:", stdin=lines)
    got = ok("console-consumer", *B, "--topic", "orders", "--from-beginning", "--timeout-ms", "5000",
             "--property", "print.key=true", "print.partition=true", "print.offset=true").out.splitlines()
    out["records"] = sorted(got)

    # a group, its offsets and lag
    ok("console-consumer", *B, "--topic", "orders", "--group", "billing", "--from-beginning", "--timeout-ms", "4000")
    ok("console-producer", *B, "--topic", "orders", "--property", "parse.key=true", "key.separator=:",
       stdin="key1:late\nkey2:late\nkey3:late\n")

    def offsets() -> list[tuple[int, int | None, int | None, int | None]]:
        g = ok("consumer-groups", "--describe", *B, "--group", "billing", *J).json()[0]
        return sorted((o["partition"], o["current_offset"], o["log_end_offset"], o["lag"]) for o in g["offsets"])

    out["group_offsets"] = offsets()
    out["group_state"] = ok("consumer-groups", "--describe", *B, "--group", "billing", *J).json()[0]["state"]
    out["groups"] = ok("consumer-groups", "--list", *B, *J).json()
    out["reset_dry_run"] = ok("consumer-groups", "--reset-offsets", *B, "--group", "billing", "--topic", "orders",
                              "--to-earliest", *J).json()
    ok("consumer-groups", "--reset-offsets", *B, "--group", "billing", "--topic", "orders:0", "--shift-by", "-1",
       "--execute")
    out["after_shift"] = offsets()
    out["describe_unknown_group"] = error_name(kafkette("consumer-groups", "--describe", *B, "--group", "nobody"))

    # configs
    ent = ("--entity-type", "topics", "--entity-name", "orders")
    ok("configs", "--alter", *B, *ent, "--add-config", "max.message.bytes=20000,cleanup.policy=[compact,delete]")

    def dynamic(*e: str) -> dict[str, str]:
        return {c["name"]: c["value"] for c in ok("configs", "--describe", *B, *e, *J).json()[0]["configs"]}

    out["topic_configs"] = wait_until(lambda: dynamic(*ent) if len(dynamic(*ent)) == 3 else None, 30, "configs")
    ok("configs", "--alter", *B, *ent, "--delete-config", "cleanup.policy")
    out["topic_configs_after_delete"] = dynamic(*ent)
    out["bad_config_value"] = error_name(kafkette("configs", "--alter", *B, *ent, "--add-config",
                                                  "max.message.bytes=big"))
    out["unknown_config"] = error_name(kafkette("configs", "--alter", *B, *ent, "--add-config", "no.such=1"))
    dflt = ("--entity-type", "brokers", "--entity-default")
    ok("configs", "--alter", *B, *dflt, "--add-config", "log.retention.ms=7200000")
    # Broker configs reach the brokers through ZooKeeper change notifications: wait for them.
    out["broker_default"] = wait_until(lambda: dynamic(*dflt), 30, "the default to apply")
    ok("configs", "--alter", *B, *dflt, "--delete-config", "log.retention.ms")
    out["broker_default_after"] = wait_until(lambda: dynamic(*dflt) == {}, 30, "the default to go")

    # deleting records
    spec = tmp / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "offset": 2}]}))
    out["delete_records"] = ok("delete-records", *B, "--offset-json-file", str(spec), *J).json()
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "offset": 999}]}))
    out["delete_records_too_far"] = error_name(kafkette("delete-records", *B, "--offset-json-file", str(spec)))

    # leader election on a partition whose preferred leader already leads
    le = ok("leader-election", *B, "--election-type", "preferred", "--topic", "orders", "--partition", "0", *J).json()
    out["election"] = le
    out["election_unknown"] = error_name(kafkette("leader-election", *B, "--election-type", "preferred", "--topic",
                                                  "orders", "--partition", "9"))

    # offsets and groups go away
    ok("consumer-groups", "--delete-offsets", *B, "--group", "billing", "--topic", "orders:1")
    out["after_delete_offsets"] = [p for p, *_ in offsets()]
    ok("consumer-groups", "--delete", *B, "--group", "billing")
    out["groups_after_delete"] = ok("consumer-groups", "--list", *B, *J).json()
    ok("topics", "--delete", *B, "--topic", "orders")
    out["listed_after_delete"] = wait_until(
        lambda: ok("topics", "--list", *B, "--exclude-internal", *J).json() == [], 30, "topic deletion")
    return out


def test_same_answers_as_apache_kafka(apache_kafka: Any, kafkette_cluster: Any, tmp_path: Path) -> None:
    (tmp_path / "k").mkdir()
    (tmp_path / "f").mkdir()
    theirs = scenario(apache_kafka.bootstrap, tmp_path / "k")
    ours = scenario(kafkette_cluster.bootstrap, tmp_path / "f")
    diffs = {k: (theirs[k], ours[k]) for k in theirs if theirs[k] != ours[k]}
    assert not diffs, "answers differ (Apache Kafka, kafkette):\n" + "\n".join(
        f"  {k}: {a!r}\n  {' ' * len(k)}  {b!r}" for k, (a, b) in diffs.items())


def test_dump_log_reads_kafka_segments_like_kafka(apache_kafka: Any, tmp_path: Path) -> None:
    """Our dump-log on a segment Apache Kafka wrote prints what Kafka's DumpLogSegments prints."""
    from tests.kafka_dist import dump_log_segments

    bs = apache_kafka.bootstrap
    ok("topics", "--create", "--bootstrap-server", bs, "--topic", "dumped", "--partitions", "1")
    ok("console-producer", "--bootstrap-server", bs, "--topic", "dumped", "--property", "parse.key=true",
       "key.separator=:", stdin="a:first\nb:second\n")
    ok("console-producer", "--bootstrap-server", bs, "--topic", "dumped", "--compression-codec", "gzip",
       "--property", "parse.headers=true", stdin="h:v\tthird\n")
    seg = apache_kafka.log_dir / "dumped-0" / "00000000000000000000.log"
    copy = tmp_path / seg.name
    copy.write_bytes(seg.read_bytes())
    theirs = dump_log_segments("--files", str(copy), "--print-data-log")
    ours = ok("dump-log", "--files", str(copy), "--print-data-log").out

    def lines(text: str) -> list[str]:
        return [x.strip() for x in text.splitlines() if x.startswith(("baseOffset:", "| offset:"))]

    assert lines(ours) == lines(theirs)
    assert len(lines(ours)) == 5
