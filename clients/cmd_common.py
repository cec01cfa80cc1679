"""Shared pieces of the ``kafkette`` subcommands: connection options, output formats, small parsers."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from clients.admin import WireClient
from clients.client_config import load_properties
from clients.connection import UsageError

__all__ = ["UsageError"]


def add_connection_args(p: argparse.ArgumentParser, *, config_flag: str = "--command-config") -> None:
    """--bootstrap-server and the client properties file: ``config_flag`` is the name Kafka's tool uses
    (``--producer.config``, ``--admin.config``, ...); ``--command-config`` is accepted by every command."""
    g = p.add_argument_group("connection")
    g.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", default=None,
                   help="brokers to bootstrap from (default: $KAFKETTE_BOOTSTRAP_SERVER or localhost:9092)")
    flags = [config_flag] if config_flag == "--command-config" else [config_flag, "--command-config"]
    g.add_argument(*flags, dest="command_config", metavar="FILE",
                   help="client properties file, Kafka's names: client.id, request.timeout.ms, security.protocol "
                        "(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ssl.truststore.*, ssl.keystore.*, "
                        "ssl.endpoint.identification.algorithm, sasl.mechanism (PLAIN, SCRAM-SHA-256, "
                        "SCRAM-SHA-512), sasl.jaas.config")


def add_output_arg(p: argparse.ArgumentParser, json_help: str | None = None) -> None:
    """``--output table|json`` (the same choices on every command that prints data). JSON mode prints
    only JSON on stdout; progress and diagnostics go to stderr, or nowhere."""
    p.add_argument("--output", choices=("table", "json"), default="table",
                   help=f"output format: table (the tool's own text, the default) or json"
                        f"{': ' + json_help if json_help else ''}")


def connect(args: argparse.Namespace, **kwargs: Any) -> WireClient:
    import os

    bootstrap = args.bootstrap_server or os.environ.get("KAFKETTE_BOOTSTRAP_SERVER") or "localhost:9092"
    config = load_properties(getattr(args, "command_config", None))
    for extra in getattr(args, "extra_properties", None) or []:
        config.update(extra)
    client = WireClient(bootstrap, config=config, **kwargs)
    client.any_connection()  # fail fast, with a clear message, when nothing is reachable
    return client


def parse_kv(items: Iterable[str] | None, what: str = "property") -> dict[str, str]:
    """``k=v`` items (each may itself be ``k1=v1,k2=v2``; values in [brackets] may hold commas)."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in split_config_list(item):
            if "=" not in part:
                raise UsageError(f"invalid {what} {part!r}: expected name=value")
            k, v = part.split("=", 1)
            k = k.strip()
            if not k:
                raise UsageError(f"invalid {what} {part!r}: empty name")
            v = v.strip()
            if v.startswith("[") and v.endswith("]"):
                v = v[1:-1]
            out[k] = v
    return out


def split_config_list(text: str) -> list[str]:
    """Split on commas outside square brackets (kafka-configs' ``k=[a,b],k2=c``)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_props_args(items: Sequence[str] | None) -> dict[str, str]:
    """``--property k=v`` (repeatable; also ``--property k1=v1 k2=v2``)."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"invalid property {item!r}: expected name=value")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")


def unescape(s: str) -> str:
    return s.encode("utf-8").decode("unicode_escape") if "\\" in s else s


def topic_matcher(pattern: str | None) -> Any:
    """Kafka's --topic accepts a name or a regular expression for list/describe/delete/alter."""
    if pattern is None:
        return lambda name: True
    if re.fullmatch(r"[A-Za-z0-9._-]+", pattern):
        return lambda name: name == pattern
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise UsageError(f"invalid topic pattern {pattern!r}: {e}") from None
    return lambda name: rx.fullmatch(name) is not None


def print_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], file: Any = None) -> None:
    file = file or sys.stdout
    cells = [[_cell(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    print(line, file=file)
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), file=file)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, list | tuple):
        return ",".join(str(x) for x in v) if v else "-"
    return str(v)


def emit(args: argparse.Namespace, data: Any, rows: Sequence[Sequence[Any]] | None = None,
         headers: Sequence[str] | None = None, empty: str | None = None) -> None:
    """JSON when --output json, else a table (or ``empty`` when there are no rows)."""
    if getattr(args, "output", "table") == "json":
        print(json.dumps(data, indent=2, sort_keys=False, default=str))
        return
    if rows is None or headers is None:
        return
    if not rows and empty is not None:
        print(empty)
        return
    print_table(rows, headers)


def read_json_file(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{what} {path} is not valid JSON: {e}") from None


def tp_str(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"
