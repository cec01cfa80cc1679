"""``kafkette acls``: kafka-acls.sh's --add, --remove and --list, through the ACL APIs.

Same flags, same ACLs and the same output as Kafka's tool (kafka.admin.AclCommand): ``--producer``
grants WRITE, DESCRIBE and CREATE on the topics (WRITE, DESCRIBE on transactional ids, and
IDEMPOTENT_WRITE on the cluster with ``--idempotent``); ``--consumer`` grants READ, DESCRIBE on the
topics and READ on the groups. ``--remove`` asks before deleting unless ``--force``. ``--output json``
prints the listed ACLs as JSON instead.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from clients.admin import WireClient
from clients.cmd_common import UsageError, add_connection_args, add_output_arg, connect, emit
from clients.connection import check
from protocol.api_versions import ApiKey

# Kafka's wire codes (org.apache.kafka.common.acl / resource enums); this client speaks only the protocol.
RESOURCE_TYPES = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5, "DELEGATION_TOKEN": 6,
                  "USER": 7}
PATTERN_TYPES = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {"ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
              "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12,
              "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
PERMISSIONS = {"ANY": 1, "DENY": 2, "ALLOW": 3}
_NAMES = {table_id: {v: k for k, v in table.items()}
          for table_id, table in (("rt", RESOURCE_TYPES), ("pt", PATTERN_TYPES), ("op", OPERATIONS),
                                  ("perm", PERMISSIONS))}
SUPPORTED_OPERATIONS = {
    "TOPIC": ("READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    "GROUP": ("READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    "CLUSTER": ("CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE"),
    "TRANSACTIONAL_ID": ("DESCRIBE", "WRITE"),
    "DELEGATION_TOKEN": ("DESCRIBE",),
    "USER": ("CREATE_TOKENS", "DESCRIBE_TOKENS"),
}
CLUSTER_NAME = "kafka-cluster"


def pascal(name: str) -> str:
    return "".join(p[:1].upper() + p[1:].lower() for p in name.split("_"))


@dataclass(frozen=True)
class PatternFilter:
    """A resource pattern (``pattern_type`` LITERAL/PREFIXED) or pattern filter (ANY/MATCH too)."""

    resource_type: str
    name: str | None
    pattern_type: str

    def __str__(self) -> str:  # Kafka's ResourcePattern(Filter).toString
        return (f"ResourcePattern(resourceType={self.resource_type}, name={'<any>' if self.name is None else self.name}"
                f", patternType={self.pattern_type})")


@dataclass(frozen=True)
class Entry:
    principal: str
    host: str
    operation: str
    permission: str

    def __str__(self) -> str:  # Kafka's AccessControlEntry.toString
        return f"(principal={self.principal}, host={self.host}, operation={self.operation}, " \
               f"permissionType={self.permission})"


def register(sub: Any) -> None:
    p = sub.add_parser("acls", help="add, remove and list ACLs",
                       description="Add, remove and list ACLs (kafka-acls.sh's flags), through the brokers' ACL APIs.")
    acts = p.add_mutually_exclusive_group(required=True)
    acts.add_argument("--add", dest="action", action="store_const", const="add",
                      help="Indicates you are trying to add ACLs.")
    acts.add_argument("--remove", dest="action", action="store_const", const="remove",
                      help="Indicates you are trying to remove ACLs.")
    acts.add_argument("--list", dest="action", action="store_const", const="list",
                      help="List ACLs for the specified resource, use --topic <topic> or --group <group> or --cluster "
                           "to specify a resource.")
    add_connection_args(p)
    add_output_arg(p)
    p.add_argument("--topic", action="append", help="Topic to which ACLs should be added or removed. A value of '*' "
                   "indicates ACL should apply to all topics.")
    p.add_argument("--group", action="append", help="Consumer group to which the ACLs should be added or removed. "
                   "A value of '*' indicates the ACLs should apply to all groups.")
    p.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    p.add_argument("--transactional-id", action="append", help="The transactionalId to which ACLs should be added or "
                   "removed. A value of '*' indicates the ACLs should apply to all transactionalIds.")
    p.add_argument("--delegation-token", action="append", help="Delegation token to which ACLs should be added or "
                   "removed. A value of '*' indicates ACL should apply to all tokens.")
    p.add_argument("--user-principal", action="append", help="A user principal as a resource (CreateTokens, "
                   "DescribeTokens).")
    p.add_argument("--resource-pattern-type", default="literal", metavar="ANY|MATCH|LITERAL|PREFIXED",
                   help="The type of the resource pattern or pattern filter: 'literal' or 'prefixed' when adding; "
                        "listing and removing also take 'any' (any pattern type, exact name) and 'match' (every "
                        "pattern that applies to the named resource). Default: literal.")
    p.add_argument("--operation", action="append", help="Operation that is being allowed or denied (default All): "
                   + ", ".join(pascal(o) for o in OPERATIONS if o != "ANY") + ".")
    p.add_argument("--allow-principal", action="append", help="principal in principalType:name format, e.g. "
                   "User:alice; User:'*' is the wildcard for all users.")
    p.add_argument("--deny-principal", action="append", help="principal in principalType:name format to deny. "
                   "DENY RULES TAKE PRECEDENCE OVER ALLOW RULES.")
    p.add_argument("--principal", action="append", help="--list: only the ACLs of this principal (repeatable).")
    p.add_argument("--allow-host", action="append", help="Host from which --allow-principal principals have access "
                   "(default '*', every host).")
    p.add_argument("--deny-host", action="append", help="Host from which --deny-principal principals are denied "
                   "(default '*', every host).")
    p.add_argument("--producer", action="store_true", help="Convenience option for the producer role: WRITE, "
                   "DESCRIBE and CREATE on the topics.")
    p.add_argument("--consumer", action="store_true", help="Convenience option for the consumer role: READ, "
                   "DESCRIBE on the topics and READ on the groups.")
    p.add_argument("--idempotent", action="store_true", help="With --producer: IDEMPOTENT_WRITE on the cluster.")
    p.add_argument("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    p.set_defaults(func=run)


# -- turning flags into ACLs (AclCommand's rules) ------------------------------------------------------------


def check_args(args: argparse.Namespace) -> None:
    if args.action == "list":
        for flag in ("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal"):
            if getattr(args, flag):
                raise UsageError(f"Option \"[list]\" can't be used with option \"[{flag.replace('_', '-')}]\"")
    for role in ("producer", "consumer"):
        if getattr(args, role):
            for flag in ("operation", "deny_principal", "deny_host"):
                if getattr(args, flag):
                    raise UsageError(f"Option \"[{role}]\" can't be used with option \"[{flag.replace('_', '-')}]\"")
    if args.principal and args.action != "list":
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group
                          or (not args.producer and (args.cluster or args.transactional_id))):
        raise UsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                         "--transactional-id option should be specified.")


def _pattern_type(args: argparse.Namespace) -> str:
    value = str(args.resource_pattern_type).upper()
    if value not in PATTERN_TYPES:
        raise UsageError(f"Unknown resource-pattern-type: {args.resource_pattern_type}")
    return value


def _principal(text: str) -> str:
    text = text.strip()
    if ":" not in text:
        raise UsageError(f"expected a string in format principalType:principalName but got {text}")
    return text


def resource_filters(args: argparse.Namespace, *, required: bool = True) -> list[PatternFilter]:
    pt = _pattern_type(args)
    out: list[PatternFilter] = []
    out += [PatternFilter("TOPIC", t.strip(), pt) for t in args.topic or []]
    if pt == "LITERAL" and (args.cluster or args.idempotent):
        out.append(PatternFilter("CLUSTER", CLUSTER_NAME, "LITERAL"))
    out += [PatternFilter("GROUP", g.strip(), pt) for g in args.group or []]
    out += [PatternFilter("TRANSACTIONAL_ID", t, pt) for t in args.transactional_id or []]
    out += [PatternFilter("DELEGATION_TOKEN", t.strip(), pt) for t in args.delegation_token or []]
    out += [PatternFilter("USER", u.strip(), pt) for u in args.user_principal or []]
    if not out and required:
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                         "or --delegation-token <Delegation Token ID>")
    return list(dict.fromkeys(out))


def _entries(args: argparse.Namespace, operations: list[str]) -> list[Entry]:
    allowed = [_principal(p) for p in args.allow_principal or []]
    denied = [_principal(p) for p in args.deny_principal or []]
    allow_hosts = [h.strip() for h in args.allow_host or []] or (["*"] if allowed else [])
    deny_hosts = [h.strip() for h in args.deny_host or []] or (["*"] if denied else [])
    out = [Entry(p, h, op, "ALLOW") for p in allowed for op in operations for h in allow_hosts]
    out += [Entry(p, h, op, "DENY") for p in denied for op in operations for h in deny_hosts]
    return list(dict.fromkeys(out))


def _operation(text: str) -> str:
    name = text.strip().upper().replace("_", "")
    for op in OPERATIONS:
        if op.replace("_", "") == name and op != "ANY":
            return op
    raise UsageError(f"Unknown operation {text.strip()!r}: valid operations are "
                     + ", ".join(pascal(o) for o in OPERATIONS if o != "ANY"))


def filters_to_entries(args: argparse.Namespace) -> dict[PatternFilter, list[Entry]]:
    """Each resource (filter) with the entries the flags give it (Kafka's getResourceFilterToAcls)."""
    out: dict[PatternFilter, list[Entry]] = {}
    if not args.producer and not args.consumer:
        ops = [_operation(o) for o in args.operation or ["All"]]
        entries = _entries(args, list(dict.fromkeys(ops)))
        for f in resource_filters(args):
            out[f] = entries
    if args.producer:
        for f in resource_filters(args):
            if f.resource_type == "TOPIC":
                out[f] = _entries(args, ["WRITE", "DESCRIBE", "CREATE"])
            elif f.resource_type == "TRANSACTIONAL_ID":
                out[f] = _entries(args, ["WRITE", "DESCRIBE"])
        if args.idempotent:
            out[PatternFilter("CLUSTER", CLUSTER_NAME, "LITERAL")] = _entries(args, ["IDEMPOTENT_WRITE"])
    if args.consumer:
        for f in resource_filters(args):
            if f.resource_type == "TOPIC":
                out[f] = list(dict.fromkeys(_entries(args, ["READ", "DESCRIBE"]) + out.get(f, [])))
            elif f.resource_type == "GROUP":
                out[f] = list(dict.fromkeys(_entries(args, ["READ"]) + out.get(f, [])))
    for f, entries in out.items():
        valid = set(SUPPORTED_OPERATIONS[f.resource_type]) | {"ALL"}
        if any(e.operation not in valid for e in entries):
            raise UsageError(f"ResourceType {f.resource_type} only supports operations "
                             + ", ".join(pascal(o) for o in sorted(valid)))
    return out


# -- talking to the cluster -------------------------------------------------------------------------------


def describe(client: WireClient, f: PatternFilter | None) -> dict[PatternFilter, list[Entry]]:
    resp = client.call(
        ApiKey.DESCRIBE_ACLS, resource_type_filter=RESOURCE_TYPES[f.resource_type] if f else 1,
        resource_name_filter=f.name if f else None, pattern_type_filter=PATTERN_TYPES[f.pattern_type] if f else 1,
        principal_filter=None, host_filter=None, operation=OPERATIONS["ANY"], permission_type=PERMISSIONS["ANY"])
    check(resp.error_code, resp.error_message, "DescribeAcls")
    out: dict[PatternFilter, list[Entry]] = {}
    for r in resp.resources:
        pattern = PatternFilter(_NAMES["rt"].get(r.resource_type, "UNKNOWN"), r.resource_name,
                                _NAMES["pt"].get(r.pattern_type, "UNKNOWN"))
        out.setdefault(pattern, []).extend(
            Entry(a.principal, a.host, _NAMES["op"].get(a.operation, "UNKNOWN"),
                  _NAMES["perm"].get(a.permission_type, "UNKNOWN")) for a in r.acls)
    return out


def _entry_block(header: str, entries: list[Entry]) -> str:
    # Kafka's layout, spaces and blank line included: "<header>: \n \t<e1>\n\t<e2> \n"
    return f"{header}: \n " + "\n".join(f"\t{e}" for e in entries) + " \n"


def _sorted(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.principal, e.host, OPERATIONS[e.operation] if e.operation in OPERATIONS
                                          else 0, e.permission))


def plan_add(args: argparse.Namespace) -> dict[PatternFilter, list[Entry]]:
    pt = _pattern_type(args)
    if pt not in ("LITERAL", "PREFIXED"):
        raise UsageError(f"A '--resource-pattern-type' value of '{pt}' is not valid when adding acls.")
    todo = filters_to_entries(args)
    if any(not entries for entries in todo.values()):
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    return todo


def _json_acls(pattern: PatternFilter, entries: list[Entry]) -> dict[str, Any]:
    return {"resourceType": pattern.resource_type, "name": pattern.name, "patternType": pattern.pattern_type,
            "acls": [{"principal": e.principal, "host": e.host, "operation": e.operation,
                      "permissionType": e.permission} for e in entries]}


def add_acls(client: WireClient, args: argparse.Namespace, todo: dict[PatternFilter, list[Entry]]) -> None:
    mt_creation = _request_type(ApiKey.CREATE_ACLS).AclCreation
    as_json = getattr(args, "output", "table") == "json"
    for pattern, entries in todo.items():
        if not as_json:
            print(_entry_block(f"Adding ACLs for resource `{pattern}`", entries))
        resp = client.call(ApiKey.CREATE_ACLS, creations=[mt_creation(
            resource_type=RESOURCE_TYPES[pattern.resource_type], resource_name=pattern.name,
            resource_pattern_type=PATTERN_TYPES[pattern.pattern_type], principal=e.principal, host=e.host,
            operation=OPERATIONS[e.operation], permission_type=PERMISSIONS[e.permission]) for e in entries])
        for r in resp.results:
            check(r.error_code, r.error_message, "CreateAcls")
    if as_json:
        emit(args, {"added": [_json_acls(p, entries) for p, entries in todo.items()]})


def remove_acls(client: WireClient, args: argparse.Namespace, todo: dict[PatternFilter, list[Entry]]) -> None:
    mt_filter = _request_type(ApiKey.DELETE_ACLS).DeleteAclsFilter
    as_json = getattr(args, "output", "table") == "json"
    removed: list[dict[str, Any]] = []
    for pattern, entries in todo.items():
        if entries:
            question = ("Are you sure you want to remove ACLs: \n " + "\n".join(f"\t{e}" for e in entries)
                        + f" \n from resource filter `{pattern}`? (y/n)")
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{pattern}`? (y/n)"
        if not args.force:
            # With --output json the question goes to stderr: stdout holds only JSON.
            print(question, file=sys.stderr if as_json else sys.stdout, flush=True)
            if sys.stdin.readline().strip().lower() != "y":
                continue
        base = dict(resource_type_filter=RESOURCE_TYPES[pattern.resource_type], resource_name_filter=pattern.name,
                    pattern_type_filter=PATTERN_TYPES[pattern.pattern_type])
        if entries:
            filters = [mt_filter(**base, principal_filter=e.principal, host_filter=e.host,
                                 operation=OPERATIONS[e.operation], permission_type=PERMISSIONS[e.permission])
                       for e in entries]
        else:
            filters = [mt_filter(**base, principal_filter=None, host_filter=None, operation=OPERATIONS["ANY"],
                                 permission_type=PERMISSIONS["ANY"])]
        resp = client.call(ApiKey.DELETE_ACLS, filters=filters)
        for r in resp.filter_results:
            check(r.error_code, r.error_message, "DeleteAcls")
            for m in r.matching_acls:
                check(m.error_code, m.error_message, "DeleteAcls")
                removed.append({"resourceType": _NAMES["rt"].get(m.resource_type, "UNKNOWN"),
                                "name": m.resource_name,
                                "patternType": _NAMES["pt"].get(m.pattern_type, "UNKNOWN"),
                                "principal": m.principal, "host": m.host,
                                "operation": _NAMES["op"].get(m.operation, "UNKNOWN"),
                                "permissionType": _NAMES["perm"].get(m.permission_type, "UNKNOWN")})
    if as_json:
        emit(args, {"removed": removed})


def list_acls(client: WireClient, args: argparse.Namespace) -> None:
    filters: list[PatternFilter | None] = list(resource_filters(args, required=False)) or [None]  # None: all
    found: dict[PatternFilter, list[Entry]] = {}
    for f in filters:
        for pattern, entries in describe(client, f).items():
            found[pattern] = list(dict.fromkeys(found.get(pattern, []) + entries))
    ordered = sorted(found.items(), key=lambda kv: (kv[0].resource_type, kv[0].name or "", kv[0].pattern_type))
    principals = [_principal(p) for p in args.principal or []]
    if getattr(args, "output", "table") == "json":
        emit(args, [{"resourceType": p.resource_type, "name": p.name, "patternType": p.pattern_type,
                     "acls": [{"principal": e.principal, "host": e.host, "operation": e.operation,
                               "permissionType": e.permission} for e in _sorted(entries)
                              if not principals or e.principal in principals]}
                    for p, entries in ordered])
        return
    if not principals:
        for pattern, entries in ordered:
            print(_entry_block(f"Current ACLs for resource `{pattern}`", _sorted(entries)))
        return
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        for pattern, entries in ordered:
            mine = [e for e in _sorted(entries) if e.principal == principal]
            if mine:
                print(_entry_block(f"Current ACLs for resource `{pattern}`", mine))


def _request_type(api: ApiKey) -> Any:
    from protocol.messages import request_type

    return request_type(api)


def run(args: argparse.Namespace) -> int:
    # Every usage error is found before anything is sent.
    check_args(args)
    _pattern_type(args)
    todo = plan_add(args) if args.action == "add" else filters_to_entries(args) if args.action == "remove" else {}
    with connect(args) as client:
        if args.action == "add":
            add_acls(client, args, todo)
        elif args.action == "remove":
            remove_acls(client, args, todo)
        else:
            list_acls(client, args)
    return 0
