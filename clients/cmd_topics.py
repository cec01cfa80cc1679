"""``kafkette topics``: kafka-topics.sh's actions and flags (--create, --list, --describe, --alter, --delete)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from clients.admin import RESOURCE_TOPIC, TopicInfo, WireClient
from clients.cmd_common import (
    UsageError,
    add_connection_args,
    add_output_arg,
    connect,
    emit,
    parse_kv,
    topic_matcher,
)
from clients.connection import KafkaWireError, WireError

ACTIONS = ("create", "list", "describe", "alter", "delete")


def register(sub: Any) -> None:
    p = sub.add_parser("topics", help="create, list, describe, alter and delete topics",
                       description="Create, list, describe, alter and delete topics (kafka-topics.sh's flags). "
                                   "The action may also be written as a word: 'kafkette topics create ...'.")
    acts = p.add_mutually_exclusive_group(required=True)
    for a in ACTIONS:
        acts.add_argument(f"--{a}", dest="action", action="store_const", const=a, help=f"{a} topics")
    add_connection_args(p)
    add_output_arg(p)
    p.add_argument("--topic", help="topic name (a regular expression for --list/--describe/--alter/--delete)")
    p.add_argument("--partitions", type=int, help="partition count (--create, or the new count for --alter)")
    p.add_argument("--replication-factor", type=int, help="replication factor for --create")
    p.add_argument("--replica-assignment", metavar="B1:B2,B3:B4",
                   help="manual assignment: partitions separated by ',', replicas by ':'")
    p.add_argument("--config", action="append", metavar="NAME=VALUE", help="topic config override for --create")
    p.add_argument("--if-exists", action="store_true", help="--alter/--delete: no error when the topic is missing")
    p.add_argument("--if-not-exists", action="store_true", help="--create: no error when the topic exists")
    p.add_argument("--exclude-internal", action="store_true", help="leave internal topics out of --list/--describe")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="--describe: only partitions whose ISR is smaller than their replica set")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="--describe: only partitions without a live leader")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="--describe: only partitions whose ISR is below min.insync.replicas")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="--describe: only partitions whose ISR equals min.insync.replicas")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="--describe: only topics with config overrides")
    p.set_defaults(func=run)


def parse_assignment(text: str) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            replicas = [int(x) for x in part.split(":") if x.strip()]
        except ValueError:
            raise UsageError(f"invalid --replica-assignment {text!r}: broker ids must be integers") from None
        if not replicas or len(set(replicas)) != len(replicas):
            raise UsageError(f"invalid --replica-assignment {text!r}: partition {i} has empty or duplicate replicas")
        out[i] = replicas
    sizes = {len(r) for r in out.values()}
    if len(sizes) != 1:
        raise UsageError("invalid --replica-assignment: every partition needs the same number of replicas")
    return out


def run(args: argparse.Namespace) -> int:
    action = args.action
    if action in ("create", "alter", "delete") and not args.topic:
        raise UsageError(f"--{action} needs --topic")
    if action == "create":
        if args.partitions is not None and args.partitions < 1:
            raise UsageError(f"invalid --partitions {args.partitions}: must be at least 1")
        if args.replication_factor is not None and args.replication_factor < 1:
            raise UsageError(f"invalid --replication-factor {args.replication_factor}: must be at least 1")
    if action == "alter" and args.partitions is None:
        raise UsageError("--alter needs --partitions (use 'kafkette configs' to change topic configs)")
    configs = parse_kv(args.config, "config")
    assignment = parse_assignment(args.replica_assignment) if args.replica_assignment else None
    with connect(args) as client:
        if action == "create":
            return create(client, args, configs, assignment)
        if action == "list":
            return list_topics(client, args)
        if action == "describe":
            return describe(client, args)
        if action == "alter":
            return alter(client, args, assignment)
        return delete(client, args)


def _wait_for_leaders(client: WireClient, name: str, partitions: int | None, timeout: float = 30.0) -> None:
    """Until every broker's metadata has the topic with a leader per partition, so that the next
    command, whichever broker it bootstraps from, finds it."""
    deadline = time.monotonic() + timeout
    nodes = sorted(client.refresh([]).brokers)
    while nodes and time.monotonic() < deadline:
        try:
            t = client.refresh([name], node=nodes[0]).topics.get(name)
        except WireError:
            t = None
        if t is not None and t.error_code == 0 and t.partitions and all(p.leader >= 0 for p in t.partitions.values()) \
                and (partitions is None or len(t.partitions) >= partitions):
            nodes.pop(0)
            continue
        time.sleep(0.1)


def create(client: WireClient, args: argparse.Namespace, configs: dict[str, str],
           assignment: dict[int, list[int]] | None) -> int:
    try:
        client.create_topic(args.topic, args.partitions if args.partitions is not None else -1,
                            args.replication_factor if args.replication_factor is not None else -1,
                            configs, assignment)
    except KafkaWireError as e:
        if e.code == 36 and args.if_not_exists:
            emit(args, {"created": None, "exists": args.topic})
            return 0
        raise
    _wait_for_leaders(client, args.topic, args.partitions)
    emit(args, {"created": args.topic})
    if args.output != "json":
        print(f"Created topic {args.topic}.")
    return 0


def _selected(client: WireClient, args: argparse.Namespace) -> dict[str, TopicInfo]:
    match = topic_matcher(args.topic)
    topics = client.topics()
    return {n: t for n, t in sorted(topics.items())
            if match(n) and not (args.exclude_internal and t.internal)}


def list_topics(client: WireClient, args: argparse.Namespace) -> int:
    names = list(_selected(client, args))
    if args.output == "json":
        emit(args, names)
    else:
        for n in names:
            print(n)
    return 0


def _topic_configs(client: WireClient, name: str) -> tuple[dict[str, str], int]:
    """(dynamic overrides, min.insync.replicas) of a topic."""
    overrides: dict[str, str] = {}
    min_isr = 1
    for c in client.describe_configs(RESOURCE_TOPIC, name):
        if c.config_source == 1 and c.value is not None:
            overrides[c.name] = c.value
        if c.name == "min.insync.replicas" and c.value is not None:
            min_isr = int(c.value)
    return overrides, min_isr


def describe(client: WireClient, args: argparse.Namespace) -> int:
    topics = _selected(client, args)
    if args.topic and not topics and not args.if_exists:
        raise KafkaWireError(3, f"Topic '{args.topic}' does not exist.")
    live = set(client.cluster.brokers) if client.cluster else set()
    filtered = (args.under_replicated_partitions or args.unavailable_partitions or args.under_min_isr_partitions
                or args.at_min_isr_partitions)
    data: list[dict[str, Any]] = []
    for name, t in topics.items():
        overrides, min_isr = _topic_configs(client, name)
        if args.topics_with_overrides and not overrides:
            continue
        parts = []
        for p in sorted(t.partitions.values(), key=lambda x: x.partition):
            unavailable = p.leader < 0 or p.leader not in live
            if args.under_replicated_partitions and not len(p.isr) < len(p.replicas):
                continue
            if args.unavailable_partitions and not unavailable:
                continue
            if args.under_min_isr_partitions and not len(p.isr) < min_isr:
                continue
            if args.at_min_isr_partitions and len(p.isr) != min_isr:
                continue
            parts.append({"partition": p.partition, "leader": p.leader if p.leader >= 0 else None,
                          "replicas": p.replicas, "isr": p.isr, "offline": p.offline})
        if filtered and not parts:
            continue
        rf = len(next(iter(t.partitions.values())).replicas) if t.partitions else 0
        data.append({"topic": name, "topic_id": t.topic_id, "internal": t.internal,
                     "partition_count": len(t.partitions), "replication_factor": rf,
                     "configs": overrides, "partitions": parts})
    if args.output == "json":
        emit(args, data)
        return 0
    from clients.cmd_common import print_table

    for i, d in enumerate(data):
        if i:
            print()
        cfg = ",".join(f"{k}={v}" for k, v in sorted(d["configs"].items()))
        if not filtered:
            print(f"Topic: {d['topic']}  TopicId: {d['topic_id'] or '-'}  PartitionCount: {d['partition_count']}  "
                  f"ReplicationFactor: {d['replication_factor']}  Configs: {cfg}")
        print_table([[d["topic"], p["partition"], p["leader"] if p["leader"] is not None else "none",
                      p["replicas"], p["isr"], p["offline"]] for p in d["partitions"]],
                    ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"])
    return 0


def alter(client: WireClient, args: argparse.Namespace, assignment: dict[int, list[int]] | None) -> int:
    match = topic_matcher(args.topic)
    names = [n for n in client.topics() if match(n)]
    if not names:
        if args.if_exists:
            emit(args, {"altered": [], "partitions": args.partitions})
            return 0
        raise KafkaWireError(3, f"Topic '{args.topic}' does not exist.")
    for name in names:
        current = len(client.topics([name])[name].partitions)
        extra = None
        if assignment is not None:
            extra = [assignment[i] for i in sorted(assignment) if i >= current] or list(assignment.values())
        client.create_partitions(name, args.partitions, extra)
        _wait_for_leaders(client, name, args.partitions)
        if args.output != "json":
            print(f"Topic {name} now has {args.partitions} partitions (was {current}).")
    emit(args, {"altered": names, "partitions": args.partitions})
    return 0


def delete(client: WireClient, args: argparse.Namespace) -> int:
    match = topic_matcher(args.topic)
    names = sorted(n for n, t in client.topics().items() if match(n))
    if not names:
        if args.if_exists:
            emit(args, {"deleted": []})
            return 0
        raise KafkaWireError(3, f"Topic '{args.topic}' does not exist.")
    results = client.delete_topics(names)
    failed = [(n, c, m) for n, (c, m) in results.items() if c]
    for n, c, m in failed:
        raise KafkaWireError(c, m, f"delete topic '{n}'")
    emit(args, {"deleted": names})
    if args.output != "json":
        for n in names:
            print(f"Deleted topic {n}.")
    return 0
