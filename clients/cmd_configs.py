"""``kafkette configs``: kafka-configs.sh's --describe and --alter for topics, brokers and broker defaults."""

from __future__ import annotations

import argparse
from typing import Any

from clients.admin import CONFIG_SOURCES, RESOURCE_BROKER, RESOURCE_TOPIC, WireClient
from clients.cmd_common import (
    UsageError,
    add_connection_args,
    add_output_arg,
    connect,
    emit,
    parse_kv,
    print_table,
    split_config_list,
)
from clients.connection import KafkaWireError

ENTITY_TYPES = {"topics": RESOURCE_TOPIC, "brokers": RESOURCE_BROKER}
# Sources that are overrides of the entity itself (what --describe shows without --all).
_DYNAMIC_OF = {RESOURCE_TOPIC: {1}, RESOURCE_BROKER: {2}}


def register(sub: Any) -> None:
    p = sub.add_parser("configs", help="describe and alter topic and broker configs",
                       description="Describe and alter dynamic configs of topics, brokers and the cluster-wide "
                                   "broker defaults (kafka-configs.sh's flags).")
    acts = p.add_mutually_exclusive_group(required=True)
    acts.add_argument("--describe", dest="action", action="store_const", const="describe", help="show configs")
    acts.add_argument("--alter", dest="action", action="store_const", const="alter", help="change configs")
    add_connection_args(p)
    add_output_arg(p)
    p.add_argument("--entity-type", choices=sorted(ENTITY_TYPES), help="topics or brokers")
    p.add_argument("--entity-name", help="topic name or broker id")
    p.add_argument("--entity-default", action="store_true", help="brokers: the cluster-wide default")
    p.add_argument("--topic", help="shortcut for --entity-type topics --entity-name TOPIC")
    p.add_argument("--broker", help="shortcut for --entity-type brokers --entity-name ID")
    p.add_argument("--broker-defaults", action="store_true",
                   help="shortcut for --entity-type brokers --entity-default")
    p.add_argument("--add-config", action="append", metavar="K=V[,K2=V2]",
                   help="configs to set; a list value goes in brackets: k=[a,b]")
    p.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
    p.add_argument("--delete-config", action="append", metavar="K[,K2]", help="configs to remove")
    p.add_argument("--all", action="store_true", help="--describe: every config, not only the overrides")
    p.set_defaults(func=run)


def _entity(args: argparse.Namespace) -> tuple[int, str | None, bool]:
    """(resource type, name or None for all, is default)."""
    etype, name, default = args.entity_type, args.entity_name, args.entity_default
    if args.topic:
        etype, name = "topics", args.topic
    if args.broker:
        etype, name = "brokers", args.broker
    if args.broker_defaults:
        etype, default = "brokers", True
    if etype is None:
        raise UsageError("--entity-type is required (topics or brokers)")
    rtype = ENTITY_TYPES[etype]
    if default:
        if rtype != RESOURCE_BROKER:
            raise UsageError("--entity-default is only supported for --entity-type brokers")
        if name:
            raise UsageError("give --entity-name or --entity-default, not both")
        return rtype, "", True
    if rtype == RESOURCE_BROKER and name is not None and not name.isdigit():
        raise UsageError(f"invalid broker id {name!r}: expected an integer")
    return rtype, name, False


def run(args: argparse.Namespace) -> int:
    rtype, name, default = _entity(args)
    if args.action == "alter":
        if name is None and not default:
            raise UsageError("--alter needs --entity-name or --entity-default")
        to_set = parse_kv(args.add_config, "config")
        if args.add_config_file:
            from clients.client_config import load_properties

            to_set.update(load_properties(args.add_config_file))
        to_delete = [k for item in args.delete_config or [] for k in split_config_list(item)]
        if not to_set and not to_delete:
            raise UsageError("--alter needs --add-config, --add-config-file or --delete-config")
        both = set(to_set) & set(to_delete)
        if both:
            raise UsageError(f"config(s) {', '.join(sorted(both))} both added and deleted")
    with connect(args) as client:
        if args.action == "describe":
            return describe(client, args, rtype, name, default)
        return alter(client, args, rtype, name or "", to_set, to_delete)


def _names(client: WireClient, rtype: int, name: str | None, default: bool) -> list[str]:
    if default:
        return [""]
    if name is not None:
        if rtype == RESOURCE_TOPIC:
            client.topic(name)  # UNKNOWN_TOPIC_OR_PARTITION before anything else
        return [name]
    info = client.refresh()
    if rtype == RESOURCE_TOPIC:
        return sorted(info.topics)
    return [str(b) for b in sorted(info.brokers)]


def describe(client: WireClient, args: argparse.Namespace, rtype: int, name: str | None, default: bool) -> int:
    out: list[dict[str, Any]] = []
    for n in _names(client, rtype, name, default):
        node = None
        if default:
            node = client.refresh([]).controller_id
        configs = client.describe_configs(rtype, n, node=node)
        rows = []
        for c in sorted(configs, key=lambda c: c.name):
            source = CONFIG_SOURCES.get(c.config_source, str(c.config_source))
            if default:
                if c.config_source != 3 and not args.all:
                    continue
            elif not args.all and c.config_source not in _DYNAMIC_OF[rtype]:
                continue
            value = None if c.is_sensitive else c.value
            rows.append({"name": c.name, "value": value, "source": source, "sensitive": bool(c.is_sensitive),
                         "read_only": bool(c.read_only),
                         "synonyms": [f"{CONFIG_SOURCES.get(s.source, s.source)}:{s.name}={s.value}"
                                      for s in (c.synonyms or [])]})
        kind = "topic" if rtype == RESOURCE_TOPIC else "broker"
        label = "default broker" if default else f"{kind} {n}"
        out.append({"entity_type": "topics" if rtype == RESOURCE_TOPIC else "brokers",
                    "entity_name": None if default else n, "configs": rows, "label": label})
    if args.output == "json":
        emit(args, [{k: v for k, v in e.items() if k != "label"} for e in out])
        return 0
    for i, e in enumerate(out):
        if i:
            print()
        what = "All" if args.all else "Dynamic"
        print(f"{what} configs for {e['label']} are:")
        if e["configs"]:
            print_table([[c["name"], "(sensitive)" if c["sensitive"] else c["value"], c["source"]]
                         for c in e["configs"]], ["NAME", "VALUE", "SOURCE"])
    return 0


def alter(client: WireClient, args: argparse.Namespace, rtype: int, name: str, to_set: dict[str, str],
          to_delete: list[str]) -> int:
    if rtype == RESOURCE_TOPIC:
        client.topic(name)
    elif name:
        client.refresh([])
        if client.cluster is not None and int(name) not in client.cluster.brokers:
            raise KafkaWireError(8, f"Broker {name} is not in the cluster.")
    if rtype == RESOURCE_BROKER and to_set:
        # The broker's own list of configs says which names exist and which can change at runtime.
        node: int | None = int(name) if name else client.refresh([]).controller_id
        known = {c.name: c for c in client.describe_configs(RESOURCE_BROKER, str(node), node=node)}
        unknown = sorted(k for k in to_set if k not in known)
        if unknown:
            raise KafkaWireError(40, f"Unknown broker config name(s): {', '.join(unknown)}")
        fixed = sorted(k for k in to_set if known[k].read_only)
        if fixed:
            raise KafkaWireError(40, f"Cannot update these configs dynamically: {', '.join(fixed)}")
    if to_delete:
        node = int(name) if rtype == RESOURCE_BROKER and name else None
        own = 1 if rtype == RESOURCE_TOPIC else 2 if name else 3
        current = {c.name for c in client.describe_configs(rtype, name, node=node)
                   if c.config_source == own or any(s.source == own for s in (c.synonyms or []))}
        missing = [k for k in to_delete if k not in current]
        if missing:
            raise UsageError(f"Invalid config(s): {','.join(missing)} (not set on this entity, nothing to delete)")
    # Validate first (validate_only), then apply: a bad value changes nothing.
    client.incremental_alter_configs(rtype, name, to_set, to_delete, validate_only=True)
    client.incremental_alter_configs(rtype, name, to_set, to_delete)
    label = ("default broker" if rtype == RESOURCE_BROKER and not name
             else f"{'topic' if rtype == RESOURCE_TOPIC else 'broker'} {name}")
    emit(args, {"entity": label, "set": to_set, "deleted": to_delete})
    if args.output != "json":
        print(f"Completed updating config for {label}.")
    return 0
