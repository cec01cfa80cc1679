"""``kafkette client-quotas``: client quotas, as ``kafka-configs.sh --entity-type users/clients/ips`` sets them.

    kafkette client-quotas --alter --entity-type users --entity-name alice --add-config producer_byte_rate=1048576
    kafkette client-quotas --alter --entity-type users --entity-name alice --entity-type clients --entity-default \\
        --add-config 'consumer_byte_rate=2097152,request_percentage=50'
    kafkette client-quotas --alter --entity-type clients --entity-name app --delete-config producer_byte_rate
    kafkette client-quotas --describe --entity-type users --entity-name alice
    kafkette client-quotas --describe                          # every entity with a quota

Through AlterClientQuotas / DescribeClientQuotas (KIP-546). As in kafka-configs, ``--entity-type`` and
``--entity-name``/``--entity-default`` pair up in the order given (``--user``, ``--client``, ``--ip``,
``--user-defaults``, ``--client-defaults`` are the shortcuts), a user and a client id together name the
<user, client-id> entity, and ``--describe`` with a type but no name lists every entity of that type.
"""

from __future__ import annotations

import argparse
from decimal import Decimal
from typing import Any

from clients.admin import WireClient
from clients.cmd_common import (
    UsageError,
    add_connection_args,
    add_output_arg,
    connect,
    emit,
    parse_kv,
    split_config_list,
)
from clients.connection import KafkaWireError, check
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type

__all__ = ["IP_QUOTA_CONFIGS", "QUOTA_CONFIGS", "java_double", "register"]

ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}  # kafka-configs name -> quota entity type
DESCRIBED_AS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
QUOTA_CONFIGS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
IP_QUOTA_CONFIGS = ("connection_creation_rate",)
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class _Ordered(argparse.Action):
    """Keeps --entity-type/--entity-name/--entity-default (and shortcuts) in command-line order."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        items = list(getattr(namespace, "entities", None) or [])
        items.append((self.const, values))
        namespace.entities = items


def register(sub: Any) -> None:
    p = sub.add_parser("client-quotas", help="set and describe client quotas (users, client ids, IPs)",
                       description="Set, delete and describe client quotas: producer_byte_rate, consumer_byte_rate, "
                                   "request_percentage, controller_mutation_rate for users and client ids, "
                                   "connection_creation_rate for IPs (kafka-configs.sh's flags).")
    acts = p.add_mutually_exclusive_group(required=True)
    acts.add_argument("--describe", dest="action", action="store_const", const="describe", help="show quotas")
    acts.add_argument("--alter", dest="action", action="store_const", const="alter", help="set or delete quotas")
    add_connection_args(p)
    add_output_arg(p)
    p.set_defaults(entities=[], func=run)
    p.add_argument("--entity-type", action=_Ordered, const="type", choices=sorted(ENTITY_TYPES),
                   help="users, clients or ips (repeat with --entity-name/--entity-default for <user, client-id>)")
    p.add_argument("--entity-name", action=_Ordered, const="name", help="name of the entity of the --entity-type")
    p.add_argument("--entity-default", action=_Ordered, const="default", nargs=0,
                   help="the default entity of the --entity-type")
    p.add_argument("--user", action=_Ordered, const="user", help="shortcut for --entity-type users --entity-name USER")
    p.add_argument("--client", action=_Ordered, const="client",
                   help="shortcut for --entity-type clients --entity-name CLIENT")
    p.add_argument("--ip", action=_Ordered, const="ip", help="shortcut for --entity-type ips --entity-name IP")
    p.add_argument("--user-defaults", action=_Ordered, const="user-defaults", nargs=0,
                   help="shortcut for --entity-type users --entity-default")
    p.add_argument("--client-defaults", action=_Ordered, const="client-defaults", nargs=0,
                   help="shortcut for --entity-type clients --entity-default")
    p.add_argument("--add-config", action="append", metavar="K=V[,K2=V2]", help="quotas to set")
    p.add_argument("--delete-config", action="append", metavar="K[,K2]", help="quotas to remove")


def entity_pairs(items: list[tuple[str, Any]]) -> list[tuple[str, str | None | bool]]:
    """Pair types with names in command-line order: [(quota entity type, name | None (default) | True (any))]."""
    types: list[str] = []
    names: list[str | None] = []
    shortcut_types: list[str] = []
    shortcut_names: list[str | None] = []
    for kind, value in items:
        if kind == "type":
            types.append(value)
        elif kind == "name":
            names.append(value)
        elif kind == "default":
            names.append(None)
        else:  # kafka-configs appends the shortcuts after the explicit entities
            etype = {"user": "users", "client": "clients", "ip": "ips", "user-defaults": "users",
                     "client-defaults": "clients"}[kind]
            shortcut_types.append(etype)
            shortcut_names.append(None if kind.endswith("defaults") else value)
    types += shortcut_types
    names += shortcut_names
    if len(names) > len(types):
        raise UsageError("More entity names specified than entity types")
    if len(set(types)) != len(types):
        raise UsageError("--entity-type given twice for the same type")
    kinds = set(types)
    if "ips" in kinds and len(kinds) > 1:
        raise UsageError("ips cannot be combined with users or clients")
    return [(ENTITY_TYPES[t], names[i] if i < len(names) else True) for i, t in enumerate(types)]


def java_double(v: float) -> str:
    """A double as Java's Double.toString prints it (kafka-configs prints quota values that way):
    plain between 10^-3 and 10^7, else ``d.dddE<exp>``; always the shortest digits that round-trip."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return repr(float(v))  # Python's shortest repr is plain notation in this range
    sign, digits, exponent = Decimal(repr(float(v))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    exp10 = len(digits) - 1 + int(exponent)
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{exp10}"


def run(args: argparse.Namespace) -> int:
    pairs = entity_pairs(args.entities)
    if args.action == "alter":
        return _alter(args, pairs)
    if args.add_config or args.delete_config:
        raise UsageError("--add-config and --delete-config go with --alter")
    with connect(args) as client:
        entries = describe_quotas(client, pairs)
    if args.output == "json":
        emit(args, [{"entity": {t: n for t, n in ent}, "quotas": vals} for ent, vals in entries])
        return 0
    for ent, vals in entries:
        print(f"Quota configs for {entity_text(ent)} are {', '.join(f'{k}={java_double(v)}' for k, v in vals.items())}")
    return 0


def entity_text(entity: list[tuple[str, str | None]]) -> str:
    parts = dict(entity)
    out = []
    for etype in ("user", "client-id", "ip"):
        if etype in parts:
            name = parts[etype]
            out.append(f"{DESCRIBED_AS[etype]} '{name}'" if name is not None else f"the default {DESCRIBED_AS[etype]}")
    return ", ".join(out)


def describe_quotas(client: WireClient, pairs: list[tuple[str, str | None | bool]], *, strict: bool = True
                    ) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
    t = request_type(ApiKey.DESCRIBE_CLIENT_QUOTAS)
    components = []
    for etype, name in pairs:
        if name is True:
            components.append(t.ComponentData(entity_type=etype, match_type=MATCH_SPECIFIED, match=None))
        elif name is None:
            components.append(t.ComponentData(entity_type=etype, match_type=MATCH_DEFAULT, match=None))
        else:
            components.append(t.ComponentData(entity_type=etype, match_type=MATCH_EXACT, match=name))
    # kafka-configs asks for exactly the entity named (containsOnly); with no entity at all, every one.
    r = client.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, components=components, strict=strict and bool(components))
    check(r.error_code, r.error_message, "DescribeClientQuotas")
    out = []
    for e in r.entries or []:
        entity = [(d.entity_type, d.entity_name) for d in e.entity]
        out.append((entity, {v.key: float(v.value) for v in e.values}))
    return out


def _alter(args: argparse.Namespace, pairs: list[tuple[str, str | None | bool]]) -> int:
    if not pairs or any(name is True for _t, name in pairs):
        raise UsageError("--entity-name or --entity-default must be specified with each --entity-type for --alter")
    add = parse_kv(args.add_config, "config")
    delete = [k for item in args.delete_config or [] for k in split_config_list(item)]
    if not add and not delete:
        raise UsageError("--alter needs --add-config or --delete-config")
    is_ip = pairs[0][0] == "ip"
    allowed = IP_QUOTA_CONFIGS if is_ip else QUOTA_CONFIGS
    what = "ips" if is_ip else ("clients" if any(t == "client-id" for t, _n in pairs) else "users")
    for verb, names in (("added", list(add)), ("deleted", delete)):
        unknown = [k for k in names if k not in allowed]
        if unknown:
            kind = "connection quota" if is_ip else "quota"
            raise UsageError(f"Only {kind} configs can be {verb} for '{what}' using --bootstrap-server. "
                             f"Unexpected config names: {', '.join(unknown)}")
    values: dict[str, float] = {}
    for k, v in add.items():
        try:
            values[k] = float(v)
        except ValueError:
            raise UsageError(f"Cannot parse quota configuration value for {k}: {v}") from None
    both = sorted(set(add) & set(delete))
    if both:
        raise UsageError(f"config(s) {', '.join(both)} both added and deleted")
    with connect(args) as client:
        if delete:  # kafka-configs refuses to delete what is not set
            current = describe_quotas(client, pairs)
            existing = set(current[0][1]) if current else set()
            missing = [k for k in delete if k not in existing]
            if missing:
                raise KafkaWireError(ErrorCode.INVALID_CONFIG, f"Invalid config(s): {','.join(missing)}")
        alter_quotas(client, [(t, n) for t, n in pairs if n is not True], values, delete)  # type: ignore[misc]
    first_type, first_name = pairs[0]
    kind = {"user": "user", "client-id": "client", "ip": "ip"}[first_type]
    if args.output == "json":
        emit(args, {"entity": dict(pairs), "set": values, "deleted": delete})
    elif first_name is not None:
        print(f"Completed updating config for {kind} {first_name}.")
    else:
        print(f"Completed updating default config for {kind}s in the cluster.")
    return 0


def alter_quotas(client: WireClient, entity: list[tuple[str, str | None]], values: dict[str, float],
                 delete: list[str]) -> None:
    t = request_type(ApiKey.ALTER_CLIENT_QUOTAS)
    ops = [t.OpData(key=k, value=v, remove=False) for k, v in values.items()]
    ops += [t.OpData(key=k, value=0.0, remove=True) for k in delete]
    r = client.call(ApiKey.ALTER_CLIENT_QUOTAS, validate_only=False, entries=[t.EntryData(
        entity=[t.EntityData(entity_type=etype, entity_name=name) for etype, name in entity], ops=ops)])
    for e in r.entries:
        check(e.error_code, e.error_message, "AlterClientQuotas")
