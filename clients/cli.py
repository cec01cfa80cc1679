"""The ``kafkette`` command: one entry point, subcommands for each job.

Every subcommand speaks only Kafka's wire protocol (``clients/admin.py``, ``producer.py``, ``group_member.py``
on the one client in ``clients/connection.py``), so the
same command works against Apache Kafka. Flag names are those of Kafka's own tools (kafka-topics.sh, kafka-configs.sh,
kafka-consumer-groups.sh, ...); the tools whose action is a flag (``--create``, ``--describe``) also
take it as a word: ``kafkette topics create --topic t`` is ``kafkette topics --create --topic t``.

Exit status: 0 on success, 1 when the cluster refused or could not be reached (one line on stderr
naming Kafka's error), 2 for bad command-line input (nothing is sent). A bad flag is reported by the
subcommand it was given to, with that subcommand's usage, as each of Kafka's tools reports its own.

``--version`` (on ``kafkette`` and on every subcommand, as on each of Kafka's tools) prints the
installed package's version and the Apache Kafka release whose protocol, formats and tools it follows.
"""

from __future__ import annotations

import argparse
import sys
from functools import cache
from typing import Any

# The Apache Kafka release whose wire protocol, on-disk formats, configs and tools kafkette follows.
KAFKA_VERSION = "3.9.1"

# Subcommands whose action is a flag in Kafka's tool: words accepted in its place.
_ACTION_WORDS = {
    "topics": {"create", "list", "describe", "alter", "delete"},
    "consumer-groups": {"list", "describe", "delete", "reset-offsets", "delete-offsets"},
    "configs": {"describe", "alter"},
    "reassign-partitions": {"generate", "execute", "verify", "cancel"},
    "acls": {"add", "remove", "list"},
    "scram": {"describe", "alter"},
    "client-quotas": {"describe", "alter"},
}


@cache
def package_version() -> str:
    """The installed distribution's version; the source tree's pyproject.toml when not installed."""
    from importlib import metadata

    try:
        return metadata.version("kafkette")
    except metadata.PackageNotFoundError:
        import tomllib
        from pathlib import Path

        try:
            with open(Path(__file__).resolve().parents[1] / "pyproject.toml", "rb") as f:
                return str(tomllib.load(f)["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def version_text() -> str:
    return f"kafkette {package_version()} (Apache Kafka {KAFKA_VERSION})"


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose subcommands report their own bad flags.

    argparse hands a subcommand's unrecognized arguments back to the top-level parser, which then
    prints the top-level usage. Here each parser rejects what it does not know itself, so
    ``kafkette topics --list --bogus`` shows ``usage: kafkette topics ...`` (exit status 2).
    Subparsers are made with this class too (``add_subparsers`` uses the parent's class), and each
    gets ``--version``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action="version", version=version_text(),
                          help="print the kafkette version and the Apache Kafka version it follows, then exit")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[Any, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _broker_start(args: argparse.Namespace) -> int:
    from broker.main import run_broker

    return run_broker(args.config, args.override or [])


def build_parser() -> argparse.ArgumentParser:
    from clients import (
        cmd_acls,
        cmd_admin,
        cmd_configs,
        cmd_console,
        cmd_dumplog,
        cmd_groups,
        cmd_perf,
        cmd_quotas,
        cmd_scram,
        cmd_topics,
    )

    p = CommandParser(prog="kafkette", description="A Kafka-compatible broker cluster, and tools that "
                                "speak Kafka's wire protocol to it (or to any Kafka cluster).")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    broker = sub.add_parser("broker", help="run a broker", description="Run a kafkette broker.")
    bsub = broker.add_subparsers(dest="broker_command", required=True, metavar="ACTION")
    start = bsub.add_parser("start", help="start a broker in the foreground",
                            description="Start a broker in the foreground; SIGTERM shuts it down cleanly.")
    start.add_argument("--config", required=True, help="server.properties (Kafka's format and names)")
    start.add_argument("--override", action="append", metavar="NAME=VALUE",
                       help="override one config value (repeatable)")
    start.set_defaults(func=_broker_start)

    cmd_admin.register_cluster(sub)
    cmd_topics.register(sub)
    cmd_groups.register(sub)
    cmd_configs.register(sub)
    cmd_acls.register(sub)
    cmd_console.register(sub)
    cmd_dumplog.register(sub)
    cmd_admin.register(sub)
    cmd_perf.register(sub)
    cmd_scram.register(sub)
    cmd_quotas.register(sub)
    return p


def rewrite_action_words(argv: list[str]) -> list[str]:
    """``topics create ...`` -> ``topics --create ...`` (only right after the subcommand)."""
    if len(argv) >= 2 and argv[0] in _ACTION_WORDS and argv[1] in _ACTION_WORDS[argv[0]]:
        return [argv[0], "--" + argv[1], *argv[2:]]
    return argv


def main(argv: list[str] | None = None) -> int:
    from clients.cmd_common import UsageError
    from clients.connection import WireError

    argv = rewrite_action_words(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2
    except WireError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
