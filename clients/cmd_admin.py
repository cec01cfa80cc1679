"""Cluster-level tools: ``cluster describe``, ``leader-election``, ``reassign-partitions``, ``delete-records``."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from clients.admin import ELECTION_PREFERRED, ELECTION_UNCLEAN, RESOURCE_BROKER, RESOURCE_TOPIC, WireClient
from clients.cmd_common import (
    UsageError,
    add_connection_args,
    add_output_arg,
    connect,
    emit,
    print_table,
    read_json_file,
    tp_str,
)
from clients.cmd_progress import Progress, chunks
from clients.connection import KafkaWireError, WireError

# A reassignment's progress is read this often while --wait waits for it.
REASSIGNMENT_POLL_S = 0.5
LOG_DIR_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
# Partitions per DeleteRecords round: the progress meter moves once per round.
DELETE_RECORDS_CHUNK = 100


def register_cluster(sub: Any) -> None:
    p = sub.add_parser("cluster", help="describe the cluster", description="Cluster-wide information.")
    csub = p.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    d = csub.add_parser("describe", help="cluster id, controller, brokers, racks and listeners",
                        description="Cluster id, the active controller and every broker with its rack and "
                                    "listeners.")
    add_connection_args(d)
    add_output_arg(d)
    d.set_defaults(func=run_cluster_describe)


def register(sub: Any) -> None:
    le = sub.add_parser("leader-election", help="elect preferred or unclean leaders",
                        description="Move leadership to the preferred replica, or elect a leader for "
                                    "leaderless partitions (kafka-leader-election.sh's flags).")
    add_connection_args(le, config_flag="--admin.config")
    add_output_arg(le)
    le.add_argument("--election-type", required=True, type=str.upper, choices=("PREFERRED", "UNCLEAN"),
                    help="PREFERRED: move leadership to the first replica; UNCLEAN: elect any live replica of a "
                         "partition without a leader, even one out of the ISR (case-insensitive)")
    le.add_argument("--topic", help="the topic of the partition to elect a leader for (with --partition)")
    le.add_argument("--partition", type=int, help="the partition to elect a leader for (with --topic)")
    le.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    le.add_argument("--path-to-json-file", help='{"partitions": [{"topic": "t", "partition": 0}]}')
    le.set_defaults(func=run_leader_election)

    rp = sub.add_parser("reassign-partitions", help="move partition replicas between brokers",
                        description="Generate, execute, verify or cancel partition reassignments "
                                    "(kafka-reassign-partitions.sh's flags).")
    acts = rp.add_mutually_exclusive_group(required=True)
    for a in ("generate", "execute", "verify", "cancel"):
        acts.add_argument(f"--{a}", dest="action", action="store_const", const=a, help=f"{a} a reassignment")
    add_connection_args(rp)
    add_output_arg(rp)
    rp.add_argument("--topics-to-move-json-file", help='--generate: {"topics": [{"topic": "t"}], "version": 1}')
    rp.add_argument("--broker-list", help="--generate: brokers to place replicas on, e.g. 0,1,2")
    rp.add_argument("--reassignment-json-file", help="--execute/--verify/--cancel: the plan")
    rp.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_SEC",
                    help="--execute: cap replication traffic of the moving replicas")
    rp.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="BYTES_PER_SEC",
                    help="--execute: cap the copying of replicas between log dirs on the same broker "
                         "(replica.alter.log.dirs.io.max.bytes.per.second on the brokers that move one)")
    rp.add_argument("--timeout", type=int, default=10_000, metavar="MS",
                    help="--execute: how long to keep asking brokers to start the log dir moves of the "
                         "plan's \"log_dirs\" (a replica new to a broker can move only once it exists there)")
    rp.add_argument("--preserve-throttles", action="store_true", help="--verify: keep the throttles")
    rp.add_argument("--disable-rack-aware", action="store_true", help="--generate: ignore racks")
    rp.add_argument("--wait", action="store_true",
                    help="--execute/--verify: wait until every partition of the plan has moved, with a progress "
                         "line on a terminal (--verify then removes the throttles)")
    rp.set_defaults(func=run_reassign)

    dr = sub.add_parser("delete-records", help="delete records below an offset",
                        description="Advance partitions' log start offsets (kafka-delete-records.sh's flags).")
    add_connection_args(dr)
    add_output_arg(dr)
    dr.add_argument("--offset-json-file", required=True,
                    help='{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}; '
                         "offset -1 means the high watermark")
    dr.set_defaults(func=run_delete_records)


# ------------------------------------------------------------------------------------------------


def run_cluster_describe(args: argparse.Namespace) -> int:
    with connect(args) as client:
        r = client.describe_cluster()
        brokers = []
        for b in sorted(r.brokers, key=lambda b: b.broker_id):
            listeners = advertised = None
            try:
                cfg = {c.name: c.value for c in client.describe_configs(
                    RESOURCE_BROKER, str(b.broker_id), ["listeners", "advertised.listeners"])}
                listeners, advertised = cfg.get("listeners"), cfg.get("advertised.listeners")
            except WireError:
                pass
            brokers.append({"id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
                            "controller": b.broker_id == r.controller_id,
                            "listeners": listeners, "advertised_listeners": advertised or listeners})
        data = {"cluster_id": r.cluster_id, "controller_id": r.controller_id, "brokers": brokers}
    if args.output == "json":
        emit(args, data)
        return 0
    print(f"Cluster ID: {data['cluster_id']}")
    print(f"Controller: {data['controller_id']}")
    print()
    print_table([[b["id"], f"{b['host']}:{b['port']}", b["rack"], "yes" if b["controller"] else "",
                  b["advertised_listeners"]] for b in brokers],
                ["ID", "ENDPOINT", "RACK", "CONTROLLER", "LISTENERS"])
    return 0


# ------------------------------------------------------------------------------------------------


def run_leader_election(args: argparse.Namespace) -> int:
    given = [bool(args.topic), bool(args.all_topic_partitions), bool(args.path_to_json_file)]
    if sum(given) != 1:
        raise UsageError("give exactly one of --topic (with --partition), --all-topic-partitions, "
                         "--path-to-json-file")
    if args.topic and args.partition is None:
        raise UsageError("--topic needs --partition")
    if args.partition is not None and not args.topic:
        raise UsageError("--partition needs --topic")
    partitions: list[tuple[str, int]] | None
    if args.path_to_json_file:
        plan = read_json_file(args.path_to_json_file, "partitions file")
        try:
            partitions = [(e["topic"], int(e["partition"])) for e in plan["partitions"]]
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"{args.path_to_json_file}: expected {{\"partitions\": [{{\"topic\": ..., "
                             f"\"partition\": ...}}]}}") from None
    elif args.topic:
        partitions = [(args.topic, args.partition)]
    else:
        partitions = None
    kind = args.election_type
    etype = ELECTION_PREFERRED if kind == "PREFERRED" else ELECTION_UNCLEAN
    with connect(args) as client:
        if partitions is not None:
            for t, p in partitions:
                info = client.topic(t)
                if p not in info.partitions:
                    raise KafkaWireError(3, f"Partition {t}-{p} does not exist.")
        results = client.elect_leaders(etype, partitions)
    done = sorted(tp for tp, (c, _) in results.items() if c == 0)
    not_needed = sorted(tp for tp, (c, _) in results.items() if c == 84)  # ELECTION_NOT_NEEDED
    failed = {tp: (c, m) for tp, (c, m) in sorted(results.items()) if c not in (0, 84)}
    if args.output == "json":
        emit(args, {"elected": [tp_str(tp) for tp in done], "not_needed": [tp_str(tp) for tp in not_needed],
                    "failed": {tp_str(tp): KafkaWireError(c, m).name for tp, (c, m) in failed.items()}})
    else:
        if done:
            print(f"Successfully completed leader election ({kind}) for partitions {', '.join(map(tp_str, done))}")
        if not_needed:
            print(f"Valid replica already elected for partitions {', '.join(map(tp_str, not_needed))}")
    if failed:
        tp, (c, m) = next(iter(failed.items()))
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise KafkaWireError(c, m, f"leader election ({kind}) failed for partition {tp_str(tp)}{more}")
    return 0


# ------------------------------------------------------------------------------------------------


def _plan(assignment: dict[tuple[str, int], list[int]]) -> dict[str, Any]:
    """A reassignment plan in kafka-reassign-partitions.sh's JSON format."""
    return {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}


def _plan_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    return json.dumps(_plan(assignment))


def _read_plan(path: str) -> dict[tuple[str, int], list[int]]:
    plan = read_json_file(path, "reassignment file")
    try:
        out = {(e["topic"], int(e["partition"])): [int(b) for b in e["replicas"]] for e in plan["partitions"]}
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{path}: expected {{\"partitions\": [{{\"topic\", \"partition\", \"replicas\"}}]}}") from None
    for tp, reps in out.items():
        if not reps or len(set(reps)) != len(reps):
            raise UsageError(f"{path}: partition {tp_str(tp)} has an empty or duplicated replica list")
    return out


Replica = tuple[str, int, int]  # topic, partition, broker: Kafka's TopicPartitionReplica
ANY_LOG_DIR = "any"


def _read_log_dirs(path: str) -> dict[Replica, str]:
    """The plan's "log_dirs": the dir each replica should live in ("any" leaves it to the broker)."""
    plan = read_json_file(path, "reassignment file")
    out: dict[Replica, str] = {}
    for e in plan["partitions"]:
        replicas = [int(b) for b in e["replicas"]]
        dirs = e.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(dirs, list) or len(dirs) != len(replicas):
            raise UsageError(f"Size of replicas list {replicas} is different from size of log dirs list {dirs} "
                             f"for partition {e['topic']}-{e['partition']}")
        for b, d in zip(replicas, dirs, strict=True):
            if d != ANY_LOG_DIR:
                out[(e["topic"], int(e["partition"]), b)] = str(d)
    return out


def _replica_str(r: Replica) -> str:
    return f"{r[0]}-{r[1]}-{r[2]}"


def _execute_moves(client: WireClient, moves: dict[Replica, str], timeout_ms: int, text: bool) -> None:
    """Kafka's executeMoves: ask each broker to move its replicas, again every 100 ms while a replica is
    not there yet (REPLICA_NOT_AVAILABLE: it arrives with the reassignment), until ``timeout_ms``."""
    pending = dict(moves)
    deadline = time.monotonic() + timeout_ms / 1000.0
    while True:
        by_broker: dict[int, dict[Replica, str]] = {}
        for r, d in pending.items():
            by_broker.setdefault(r[2], {})[r] = d
        for broker, wanted in sorted(by_broker.items()):
            results = client.alter_replica_log_dirs(broker, {(t, p): d for (t, p, _), d in wanted.items()})
            for (t, p, b), d in sorted(wanted.items()):
                code = results.get((t, p), 0)
                if code == 9:  # REPLICA_NOT_AVAILABLE: not on that broker yet
                    continue
                if code:
                    raise KafkaWireError(code, None, f"Failed to alter dir for {_replica_str((t, p, b))}")
                del pending[(t, p, b)]
                if text:
                    print(f"Successfully started moving log directory to {d} for replica {t}-{p} with broker {b} ")
        if not pending:
            return
        if time.monotonic() >= deadline:
            names = ",".join(_replica_str(r) for r in sorted(pending))
            raise WireError(f"Timed out before log directory move{'' if len(pending) == 1 else 's'} could be "
                            f"started for: {names}")
        time.sleep(0.1)


def _move_states(client: WireClient, moves: dict[Replica, str]) -> dict[Replica, tuple[str, str | None, str | None]]:
    """(state, current dir, future dir) of each wanted move, from DescribeLogDirs (Kafka's LogDirMoveState:
    missing_replica, missing_log_dir, completed, cancelled, active)."""
    where: dict[Replica, tuple[str | None, str | None]] = {}
    for broker in sorted({r[2] for r in moves}):
        try:
            r = client.describe_log_dirs(broker)
        except WireError:
            continue
        for result in r.results:
            if result.error_code:
                continue
            for t in result.topics:
                for part in t.partitions:
                    key = (t.name, part.partition_index, broker)
                    current, future = where.get(key, (None, None))
                    if part.is_future_key:
                        future = result.log_dir
                    else:
                        current = result.log_dir
                    where[key] = (current, future)
    out: dict[Replica, tuple[str, str | None, str | None]] = {}
    for replica, target in moves.items():
        if replica not in where:
            out[replica] = ("missing_replica", None, None)
            continue
        current, future = where[replica]
        if current is None:
            out[replica] = ("missing_log_dir", None, future)
        elif future is None:
            out[replica] = ("completed" if current == target else "cancelled", current, None)
        else:
            out[replica] = ("active", current, future)
    return out


def _move_lines(moves: dict[Replica, str], states: dict[Replica, tuple[str, str | None, str | None]]) -> list[str]:
    """kafka-reassign-partitions --verify's lines for the log dir moves."""
    lines = []
    for replica in sorted(states):
        state, current, future = states[replica]
        t, p, b = replica
        target = moves[replica]
        if state == "missing_log_dir":
            lines.append(f"Partition {t}-{p} is not found in any live log dir on broker {b}. There is likely an "
                         "offline log directory on the broker.")
        elif state == "missing_replica":
            lines.append(f"Partition {t}-{p} cannot be found in any live log directory on broker {b}.")
        elif state == "active" and future == target:
            lines.append(f"Reassignment of replica {_replica_str(replica)} is still in progress.")
        elif state == "active":
            lines.append(f"Partition {t}-{p} on broker {b} is being moved to log dir {future} instead of {target}.")
        elif state == "cancelled":
            lines.append(f"Partition {t}-{p} on broker {b} is not being moved from log dir {current} to {target}.")
        else:
            lines.append(f"Reassignment of replica {_replica_str(replica)} completed successfully.")
    return lines


def _current(client: WireClient, tps: list[tuple[str, int]]) -> dict[tuple[str, int], list[int]]:
    topics = client.topics(sorted({t for t, _ in tps}))
    out = {}
    for t, p in tps:
        info = topics.get(t)
        if info is None or info.error_code or p not in info.partitions:
            raise KafkaWireError(3, f"Partition {t}-{p} does not exist.")
        out[(t, p)] = list(info.partitions[p].replicas)
    return out


def generate_assignment(partitions: dict[tuple[str, int], int], brokers: list[int], start: int = 0
                        ) -> dict[tuple[str, int], list[int]]:
    """Round-robin replicas over ``brokers`` (Kafka's rack-unaware layout: shifted followers)."""
    n = len(brokers)
    out = {}
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (t, p), rf in sorted(partitions.items()):
        by_topic.setdefault(t, []).append((p, rf))
    for t, parts in by_topic.items():
        for p, rf in parts:
            if rf > n:
                raise WireError(f"INVALID_REPLICATION_FACTOR: topic {t} has replication factor {rf}, "
                                f"more than the {n} brokers in --broker-list")
            first = (start + p) % n
            shift = 1 + (p // n) % max(1, n - 1)
            reps = [brokers[first]]
            for j in range(rf - 1):
                reps.append(brokers[(first + shift * (j + 1)) % n] if n > 1 else brokers[first])
            seen: list[int] = []
            for r in reps:
                while r in seen:
                    r = brokers[(brokers.index(r) + 1) % n]
                seen.append(r)
            out[(t, p)] = seen
    return out


def run_reassign(args: argparse.Namespace) -> int:
    action = args.action
    if action == "generate":
        if not args.topics_to_move_json_file or not args.broker_list:
            raise UsageError("--generate needs --topics-to-move-json-file and --broker-list")
        spec = read_json_file(args.topics_to_move_json_file, "topics file")
        try:
            topics = [e["topic"] for e in spec["topics"]]
        except (KeyError, TypeError):
            raise UsageError(f"{args.topics_to_move_json_file}: expected {{\"topics\": [{{\"topic\": ...}}]}}") from None
        try:
            brokers = sorted({int(b) for b in args.broker_list.split(",") if b.strip()})
        except ValueError:
            raise UsageError(f"invalid --broker-list {args.broker_list!r}") from None
        with connect(args) as client:
            info = client.refresh()
            unknown = [b for b in brokers if b not in info.brokers]
            if unknown:
                raise KafkaWireError(8, f"Unknown broker(s) in --broker-list: {','.join(map(str, unknown))}")
            current: dict[tuple[str, int], list[int]] = {}
            for t in topics:
                ti = client.topic(t)
                for p, pi in ti.partitions.items():
                    current[(t, p)] = list(pi.replicas)
        proposed = generate_assignment({tp: len(r) for tp, r in current.items()}, brokers)
        if args.output == "json":
            emit(args, {"current": _plan(current), "proposed": _plan(proposed)})
            return 0
        print("Current partition replica assignment")
        print(_plan_json(current))
        print()
        print("Proposed partition reassignment configuration")
        print(_plan_json(proposed))
        return 0
    if not args.reassignment_json_file:
        raise UsageError(f"--{action} needs --reassignment-json-file")
    plan = _read_plan(args.reassignment_json_file)
    with connect(args) as client:
        current = _current(client, list(plan))
        if action == "execute":
            return _execute(client, args, plan, current)
        if action == "cancel":
            results = client.alter_reassignments({tp: None for tp in plan})
            bad = {tp: r for tp, r in results.items() if r[0] not in (0, 85)}  # 85: NO_REASSIGNMENT_IN_PROGRESS
            for tp, (c, m) in bad.items():
                raise KafkaWireError(c, m, f"cancel reassignment of {tp_str(tp)}")
            if args.output == "json":
                emit(args, {"cancelled": [tp_str(tp) for tp in sorted(plan)]})
            else:
                print(f"Successfully cancelled partition reassignments for: {', '.join(map(tp_str, sorted(plan)))}")
            return 0
        if args.wait:
            _wait_for_reassignment(client, args, plan)
            current = _current(client, list(plan))
        return _verify(client, args, plan, current)


def _execute(client: WireClient, args: argparse.Namespace, plan: dict[tuple[str, int], list[int]],
             current: dict[tuple[str, int], list[int]]) -> int:
    brokers = set(client.cluster.brokers) if client.cluster else set()
    unknown = sorted({b for reps in plan.values() for b in reps if b not in brokers})
    if unknown:
        raise KafkaWireError(39, f"Unknown broker(s) in the plan: {','.join(map(str, unknown))}")
    text = args.output != "json"
    if text:
        print("Current partition replica assignment")
        print()
        print(_plan_json(current))
        print()
        print("Save this to use as the --reassignment-json-file option during rollback")
    throttled = args.throttle is not None and args.throttle >= 0
    if throttled:
        _set_throttles(client, plan, current, args.throttle)
        if text:
            print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    moves = _read_log_dirs(args.reassignment_json_file)
    dir_throttle = args.replica_alter_log_dirs_throttle
    if moves and dir_throttle is not None and dir_throttle >= 0:
        for b in sorted({r[2] for r in moves}):
            client.incremental_alter_configs(RESOURCE_BROKER, str(b), {LOG_DIR_THROTTLE: str(dir_throttle)}, [])
        if text:
            print(f"The replica-alter-dir throttle limit was set to {dir_throttle} B/s")
    results = client.alter_reassignments(dict(plan))
    failed = {tp: r for tp, r in results.items() if r[0]}
    if failed:
        tp, (c, m) = next(iter(sorted(failed.items())))
        raise KafkaWireError(c, m, f"reassignment of {tp_str(tp)}")
    if text:
        print(f"Successfully started partition reassignments for {','.join(map(tp_str, sorted(plan)))}", flush=True)
    if moves:
        _execute_moves(client, moves, args.timeout, text)
    if args.wait:
        _wait_for_reassignment(client, args, plan)
        if text:
            print(f"Reassignment of {len(plan)} partition(s) is completed.")
    if not text:
        emit(args, {"current": _plan(current), "started": [tp_str(tp) for tp in sorted(plan)],
                    "log_dir_moves": {_replica_str(r): d for r, d in sorted(moves.items())},
                    "throttle": args.throttle if throttled else None, "completed": True if args.wait else None})
    return 0


def _reassigned(client: WireClient, plan: dict[tuple[str, int], list[int]]) -> set[tuple[str, int]]:
    """The partitions of the plan that have moved: no reassignment running, replicas as planned."""
    ongoing = client.list_reassignments()
    current = _current(client, list(plan))
    return {tp for tp, target in plan.items() if tp not in ongoing and current[tp] == target}


def _wait_for_reassignment(client: WireClient, args: argparse.Namespace,
                           plan: dict[tuple[str, int], list[int]]) -> None:
    with Progress.for_args(args, "reassigning", len(plan), "partitions") as progress:
        while True:
            done = _reassigned(client, plan)
            progress.update(len(done))
            if len(done) == len(plan):
                return
            time.sleep(REASSIGNMENT_POLL_S)


def _set_throttles(client: WireClient, plan: dict[tuple[str, int], list[int]],
                   current: dict[tuple[str, int], list[int]], rate: int) -> None:
    moving = {b for tp in plan for b in set(plan[tp]) | set(current[tp])}
    for b in sorted(moving):
        client.incremental_alter_configs(RESOURCE_BROKER, str(b), {
            "leader.replication.throttled.rate": str(rate), "follower.replication.throttled.rate": str(rate)}, [])
    by_topic: dict[str, tuple[list[str], list[str]]] = {}
    for (t, p), target in plan.items():
        leaders, followers = by_topic.setdefault(t, ([], []))
        leaders += [f"{p}:{b}" for b in current[(t, p)]]
        followers += [f"{p}:{b}" for b in target if b not in current[(t, p)]]
    for t, (leaders, followers) in by_topic.items():
        client.incremental_alter_configs(RESOURCE_TOPIC, t, {
            "leader.replication.throttled.replicas": ",".join(leaders),
            "follower.replication.throttled.replicas": ",".join(followers) or ",".join(leaders)}, [])


def _verify(client: WireClient, args: argparse.Namespace, plan: dict[tuple[str, int], list[int]],
            current: dict[tuple[str, int], list[int]]) -> int:
    ongoing = client.list_reassignments()
    statuses = []
    for tp, target in sorted(plan.items()):
        status = "in_progress" if tp in ongoing else "completed" if current[tp] == target else "mismatch"
        statuses.append({"topic": tp[0], "partition": tp[1], "status": status, "replicas": current[tp],
                         "target": target})
    moves = _read_log_dirs(args.reassignment_json_file)
    move_states = _move_states(client, moves)
    moves_done = all(state in ("completed", "cancelled") for state, _, _ in move_states.values())
    all_done = all(s["status"] == "completed" for s in statuses)
    removed = (all_done and moves_done and not args.preserve_throttles
               and _clear_throttles(client, plan, current, {r[2] for r in moves}))
    if args.output == "json":
        emit(args, {"partitions": statuses, "completed": all_done and moves_done, "throttle_removed": removed,
                    "log_dir_moves": [{"replica": _replica_str(r), "state": st, "current_dir": cur,
                                       "future_dir": fut, "target_dir": moves[r]}
                                      for r, (st, cur, fut) in sorted(move_states.items())]})
    else:
        print("Status of partition reassignment:")
        for st in statuses:
            name = f"{st['topic']}-{st['partition']}"
            if st["status"] == "in_progress":
                print(f"Reassignment of partition {name} is still in progress.")
            elif st["status"] == "completed":
                print(f"Reassignment of partition {name} is completed.")
            else:
                print(f"There is no active reassignment of partition {name}, but replica set is "
                      f"{st['replicas']} rather than {st['target']}.")
        if moves:
            print()
            print("Reassignment of replicas to log directories:")
            for line in _move_lines(moves, move_states):
                print(line)
        if removed:
            print("Throttle was removed.")
    return 0 if all_done and moves_done else 1


def _clear_throttles(client: WireClient, plan: dict[tuple[str, int], list[int]],
                     current: dict[tuple[str, int], list[int]], moving_dirs: set[int] | frozenset[int] = frozenset()
                     ) -> bool:
    """Remove the reassignment's throttles; True when there were any."""
    names = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
    cleared = False
    for t in sorted({t for t, _ in plan}):
        own = {c.name for c in client.describe_configs(RESOURCE_TOPIC, t) if c.config_source == 1}
        drop = [n for n in names if n in own]
        if drop:
            client.incremental_alter_configs(RESOURCE_TOPIC, t, {}, drop)
            cleared = True
    rates = ("leader.replication.throttled.rate", "follower.replication.throttled.rate", LOG_DIR_THROTTLE)
    for b in sorted({b for reps in list(plan.values()) + list(current.values()) for b in reps} | moving_dirs):
        own = {c.name for c in client.describe_configs(RESOURCE_BROKER, str(b)) if c.config_source == 2}
        drop = [n for n in rates if n in own]
        if drop:
            client.incremental_alter_configs(RESOURCE_BROKER, str(b), {}, drop)
            cleared = True
    return cleared


# ------------------------------------------------------------------------------------------------


def run_delete_records(args: argparse.Namespace) -> int:
    spec = read_json_file(args.offset_json_file, "offset file")
    try:
        offsets = {(e["topic"], int(e["partition"])): int(e["offset"]) for e in spec["partitions"]}
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{args.offset_json_file}: expected {{\"partitions\": [{{\"topic\", \"partition\", "
                         f"\"offset\"}}]}}") from None
    if not offsets:
        raise UsageError(f"{args.offset_json_file}: no partitions")
    bad = [tp for tp, o in offsets.items() if o < -1]
    if bad:
        raise UsageError(f"invalid offset for {tp_str(bad[0])}: must be -1 (high watermark) or at least 0")
    with connect(args) as client:
        _current(client, list(offsets))
        results: dict[tuple[str, int], tuple[int, int]] = {}
        with Progress.for_args(args, "deleting records", len(offsets), "partitions") as progress:
            for chunk in chunks(sorted(offsets), DELETE_RECORDS_CHUNK):
                results.update(client.delete_records({tp: offsets[tp] for tp in chunk}))
                progress.advance(len(chunk))
    failed = {tp: r for tp, r in results.items() if r[0]}
    if args.output == "json":
        emit(args, [{"topic": t, "partition": p, "low_watermark": lw, "error": KafkaWireError(c).name if c else None}
                    for (t, p), (c, lw) in sorted(results.items())])
    else:
        print("Records delete operation completed:")
        for tp, (c, lw) in sorted(results.items()):
            if c:
                print(f"partition: {tp_str(tp)}\terror: {KafkaWireError(c).name}")
            else:
                print(f"partition: {tp_str(tp)}\tlow_watermark: {lw}")
    if failed:
        tp, (c, _) = next(iter(sorted(failed.items())))
        raise KafkaWireError(c, None, f"delete records of {tp_str(tp)}")
    return 0
