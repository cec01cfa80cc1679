"""``kafkette consumer-groups``: kafka-consumer-groups.sh's actions and flags."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from clients.admin import EARLIEST, LATEST, WireClient
from clients.cmd_common import UsageError, add_connection_args, add_output_arg, connect, emit, print_table
from clients.cmd_progress import Progress, chunks
from clients.connection import KafkaWireError, WireError
from clients.group_member import decode_assignment

ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
INACTIVE = ("Empty", "Dead")


def register(sub: Any) -> None:
    p = sub.add_parser("consumer-groups", help="list, describe, reset and delete consumer groups",
                       description="Consumer groups: state, members, committed offsets and lag; offset resets "
                                   "(dry run unless --execute); deletion. Flags are kafka-consumer-groups.sh's.")
    acts = p.add_mutually_exclusive_group(required=True)
    for a in ACTIONS:
        acts.add_argument(f"--{a}", dest="action", action="store_const", const=a, help=f"{a.replace('-', ' ')}")
    add_connection_args(p)
    add_output_arg(p)
    p.add_argument("--group", action="append", help="group id (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--topic", action="append", metavar="TOPIC[:P1,P2]",
                   help="topic (optionally with partitions) for --reset-offsets/--delete-offsets/--describe")
    p.add_argument("--all-topics", action="store_true", help="--reset-offsets: every topic the group committed")
    p.add_argument("--members", action="store_true", help="--describe: members and their assignments")
    p.add_argument("--offsets", action="store_true", help="--describe: offsets and lag (the default)")
    p.add_argument("--state", nargs="?", const="", default=None,
                   help="--describe: group state; --list: only groups in these states (comma-separated)")
    p.add_argument("--verbose", action="store_true", help="--describe --members: show assignments")
    reset = p.add_argument_group("offset reset (one of)")
    spec = reset.add_mutually_exclusive_group()
    spec.add_argument("--to-earliest", action="store_true", help="the log start offset")
    spec.add_argument("--to-latest", action="store_true", help="the log end offset")
    spec.add_argument("--to-current", action="store_true", help="the committed offset (no change)")
    spec.add_argument("--to-offset", type=int, metavar="N", help="an absolute offset (clamped to the log)")
    spec.add_argument("--shift-by", type=int, metavar="N", help="committed offset plus N (may be negative)")
    spec.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                      help="the first offset at or after this time (UTC unless an offset is given)")
    spec.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first offset at or after now minus this")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="apply the reset (default: dry run)")
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    p.set_defaults(func=run)


def parse_topic_args(items: list[str] | None) -> dict[str, list[int] | None]:
    out: dict[str, list[int] | None] = {}
    for item in items or []:
        name, sep, parts = item.partition(":")
        if not name:
            raise UsageError(f"invalid --topic {item!r}")
        if sep:
            try:
                out[name] = sorted({int(x) for x in parts.split(",") if x.strip()})
            except ValueError:
                raise UsageError(f"invalid partitions in --topic {item!r}") from None
        else:
            out[name] = None
    return out


def parse_datetime(text: str) -> int:
    """Kafka's formats: yyyy-MM-dd'T'HH:mm:SS.sss, optionally with a zone (Z, +hh:mm)."""
    s = text.strip().replace("Z", "+00:00")
    try:
        d = dt.datetime.fromisoformat(s)
    except ValueError:
        raise UsageError(f"invalid --to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.UTC)
    return int(d.timestamp() * 1000)


def parse_duration(text: str) -> int:
    import re

    m = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text.strip().upper())
    if not m or text.strip().upper() in ("P", "PT"):
        raise UsageError(f"invalid --by-duration {text!r}: expected an ISO-8601 duration like PT1H30M")
    d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return int(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)


def run(args: argparse.Namespace) -> int:
    action = args.action
    if action != "list" and not (args.group or args.all_groups):
        raise UsageError(f"--{action} needs --group or --all-groups")
    if action == "reset-offsets":
        if not (args.to_earliest or args.to_latest or args.to_current or args.to_offset is not None
                or args.shift_by is not None or args.to_datetime or args.by_duration):
            raise UsageError("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, --to-offset, "
                             "--shift-by, --to-datetime, --by-duration")
        if not (args.topic or args.all_topics):
            raise UsageError("--reset-offsets needs --topic or --all-topics")
    if action == "delete-offsets" and not args.topic:
        raise UsageError("--delete-offsets needs --topic")
    topics = parse_topic_args(args.topic)
    when = None
    if args.to_datetime:
        when = parse_datetime(args.to_datetime)
    elif args.by_duration:
        import time

        when = int(time.time() * 1000) - parse_duration(args.by_duration)
    with connect(args) as client:
        if action == "list":
            return list_groups(client, args)
        groups = [g for g, _, _ in client.list_groups()] if args.all_groups else list(args.group)
        if action == "describe":
            return describe(client, args, groups, topics)
        if action == "delete":
            return delete(client, args, groups)
        if action == "delete-offsets":
            return delete_offsets(client, args, groups, topics)
        return reset_offsets(client, args, groups, topics, when)


def list_groups(client: WireClient, args: argparse.Namespace) -> int:
    groups = client.list_groups()
    states = None
    if args.state:
        states = {s.strip().lower() for s in args.state.split(",") if s.strip()}
    rows = []
    for gid, ptype, state in groups:
        if not state and (states is not None or args.state is not None):
            state = client.describe_group(gid).group_state
        if states is not None and state.lower() not in states:
            continue
        rows.append([gid, state, ptype])
    if args.output == "json":
        emit(args, [{"group": g, "state": s, "protocol_type": t} for g, s, t in rows])
    elif args.state is not None:
        print_table(rows, ["GROUP", "STATE", "PROTOCOL-TYPE"])
    else:
        for r in rows:
            print(r[0])
    return 0


def _coordinator(client: WireClient, group: str) -> dict[str, Any]:
    """The group's coordinator as id, host and port (the host and port its metadata advertises)."""
    node = client.coordinator(group)
    broker = client.cluster.brokers.get(node) if client.cluster else None
    return {"id": node, "host": broker.host if broker else None, "port": broker.port if broker else None}


def _log_end_offsets(client: WireClient, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    if not tps:
        return {}
    return client.list_offsets(tps, LATEST)


def describe(client: WireClient, args: argparse.Namespace, groups: list[str],
             topics: dict[str, list[int] | None]) -> int:
    data = []
    for gid in groups:
        g = client.describe_group(gid)
        if g.group_state == "Dead":
            raise KafkaWireError(69, f"Consumer group '{gid}' does not exist.")
        members = []
        owner: dict[tuple[str, int], dict[str, str]] = {}
        for m in g.members:
            assignment = decode_assignment(bytes(m.member_assignment)) if g.protocol_type == "consumer" else {}
            tps = sorted((t, p) for t, ps in assignment.items() for p in ps)
            info = {"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                    "group_instance_id": getattr(m, "group_instance_id", None),
                    "assignment": [f"{t}-{p}" for t, p in tps]}
            members.append(info)
            for tp in tps:
                owner[tp] = info
        committed = client.committed_offsets(gid)
        tps = sorted(set(committed) | set(owner))
        if topics:
            tps = [tp for tp in tps
                   if tp[0] in topics and ((wanted := topics[tp[0]]) is None or tp[1] in wanted)]
        live_topics = client.topics(sorted({t for t, _ in tps})) if tps else {}
        tps = [tp for tp in tps if tp[0] in live_topics and live_topics[tp[0]].error_code == 0
               and tp[1] in live_topics[tp[0]].partitions]
        ends = _log_end_offsets(client, tps)
        offsets = []
        for tp in tps:
            cur = committed.get(tp)
            end = ends.get(tp)
            lag = (end - cur) if (cur is not None and end is not None) else None
            m = owner.get(tp)
            offsets.append({"topic": tp[0], "partition": tp[1], "current_offset": cur, "log_end_offset": end,
                            "lag": lag, "consumer_id": m["member_id"] if m else None,
                            "host": m["host"] if m else None, "client_id": m["client_id"] if m else None})
        data.append({"group": gid, "state": g.group_state, "protocol_type": g.protocol_type,
                     "assignment_strategy": g.protocol_data, "coordinator": _coordinator(client, gid),
                     "members": members, "offsets": offsets})
    if args.output == "json":
        emit(args, data)
        return 0
    for i, d in enumerate(data):
        if i:
            print()
        if args.state is not None:
            c = d["coordinator"]
            # kafka-consumer-groups.sh: "host:port  (id)", two spaces before the id
            print_table([[d["group"], f"{c['host']}:{c['port']}  ({c['id']})", d["assignment_strategy"] or "-",
                          d["state"], len(d["members"])]],
                        ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"])
        elif args.members:
            headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            rows: list[list[Any]] = [[d["group"], m["member_id"], m["host"], m["client_id"], len(m["assignment"])]
                                     for m in d["members"]]
            if args.verbose:
                headers.append("ASSIGNMENT")
                for r, m in zip(rows, d["members"], strict=True):
                    r.append(m["assignment"])
            if not rows:
                print(f"Consumer group '{d['group']}' has no active members.")
            else:
                print_table(rows, headers)
        else:
            if d["state"] in INACTIVE and not d["members"]:
                print(f"Consumer group '{d['group']}' has no active members.\n")
            print_table([[d["group"], o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"],
                          o["consumer_id"], o["host"], o["client_id"]] for o in d["offsets"]],
                        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                         "HOST", "CLIENT-ID"])
    return 0


def delete(client: WireClient, args: argparse.Namespace, groups: list[str]) -> int:
    results = client.delete_groups(groups)
    failed = {g: c for g, c in results.items() if c}
    if args.output == "json":
        emit(args, {"deleted": [g for g in groups if g not in failed],
                    "errors": {g: KafkaWireError(c).name for g, c in failed.items()}})
    else:
        for g in groups:
            if g not in failed:
                print(f"Deletion of requested consumer group '{g}' was successful.")
    for g, c in failed.items():
        msg = {69: f"Consumer group '{g}' does not exist.",
               68: f"Consumer group '{g}' is not empty: stop its members first."}.get(c)
        raise KafkaWireError(c, msg, f"delete group '{g}'")
    return 0


def _partitions_for(client: WireClient, topics: dict[str, list[int] | None]) -> list[tuple[str, int]]:
    info = client.topics(sorted(topics))
    out = []
    for name, parts in topics.items():
        t = info.get(name)
        if t is None or t.error_code:
            raise KafkaWireError(3, f"Topic '{name}' does not exist.")
        for p in parts if parts is not None else sorted(t.partitions):
            if p not in t.partitions:
                raise KafkaWireError(3, f"Partition {name}-{p} does not exist.")
            out.append((name, p))
    return out


def delete_offsets(client: WireClient, args: argparse.Namespace, groups: list[str],
                   topics: dict[str, list[int] | None]) -> int:
    tps = _partitions_for(client, topics)
    rows = []
    for gid in groups:
        results = client.delete_offsets(gid, tps)
        for (t, p), code in sorted(results.items()):
            if code:
                raise KafkaWireError(code, None, f"delete offsets of group '{gid}' for {t}-{p}")
            rows.append([gid, t, p, "Successful"])
    if args.output == "json":
        emit(args, [{"group": g, "topic": t, "partition": p, "status": s} for g, t, p, s in rows])
    else:
        print_table(rows, ["GROUP", "TOPIC", "PARTITION", "STATUS"])
    return 0


# Partitions whose offsets are looked up per round of ListOffsets requests during a reset: the
# progress meter moves once per round.
RESET_CHUNK = 100


def reset_offsets(client: WireClient, args: argparse.Namespace, groups: list[str],
                  topics: dict[str, list[int] | None], when: int | None) -> int:
    todo: list[tuple[str, list[tuple[str, int]], dict[tuple[str, int], int]]] = []
    for gid in groups:
        g = client.describe_group(gid)
        if args.execute and g.group_state not in INACTIVE:
            raise WireError(f"Assignments can only be reset if the group '{gid}' is inactive, but the "
                            f"current state is {g.group_state}.")
        committed = client.committed_offsets(gid)
        tps = sorted(committed) if args.all_topics else _partitions_for(client, topics)
        if tps:
            todo.append((gid, tps, committed))
    rows = []
    plans: dict[str, dict[tuple[str, int], int]] = {}
    total = sum(len(tps) for _, tps, _ in todo)
    with Progress.for_args(args, "resetting offsets", total, "partitions") as progress:
        for gid, tps, committed in todo:
            plan = {}
            for chunk in chunks(tps, RESET_CHUNK):
                plan.update(_new_offsets(client, args, chunk, committed, when))
                progress.advance(len(chunk), note=f"group {gid}")
            rows += [[gid, t, p, off] for (t, p), off in plan.items()]
            plans[gid] = plan
    if args.execute:  # only once every group's plan is known: a failed lookup changes nothing
        for gid, plan in plans.items():
            client.commit_offsets(gid, plan)
    if args.output == "json":
        emit(args, [{"group": g, "topic": t, "partition": p, "new_offset": o} for g, t, p, o in rows])
    else:
        print_table(rows, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])
        if not args.execute:
            print("\n(dry run: nothing changed; add --execute to apply)")
    return 0


def _new_offsets(client: WireClient, args: argparse.Namespace, tps: list[tuple[str, int]],
                 committed: dict[tuple[str, int], int], when: int | None) -> dict[tuple[str, int], int]:
    """The reset's target offset of each partition, clamped to the log's start and end."""
    earliest = client.list_offsets(tps, EARLIEST)
    latest = client.list_offsets(tps, LATEST)
    at_time = client.list_offsets(tps, when) if when is not None else {}
    plan = {}
    for tp in tps:
        lo, hi = earliest[tp], latest[tp]
        cur = committed.get(tp)
        if args.to_earliest:
            new = lo
        elif args.to_latest:
            new = hi
        elif args.to_current:
            new = cur if cur is not None else hi
        elif args.to_offset is not None:
            new = args.to_offset
        elif args.shift_by is not None:
            new = (cur if cur is not None else hi) + args.shift_by
        else:
            found = at_time.get(tp, -1)
            new = found if found is not None and found >= 0 else hi
        plan[tp] = min(max(new, lo), hi)
    return plan
