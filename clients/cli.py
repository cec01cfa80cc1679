"""The ``kafkette`` command: one entry point, subcommands for each job.

Every subcommand speaks only Kafka's wire protocol (``clients/admin.py``, ``producer.py``, ``group_member.py``
on the one client in ``clients/connection.py``), so the
same command works against Apache Kafka. Flag names are those of Kafka's own tools (kafka-topics.sh, kafka-configs.sh,
kafka-consumer-groups.sh, ...); the tools whose action is a flag (``--create``, ``--describe``) also
take it as a word: ``kafkette topics create --topic t`` is ``kafkette topics --create --topic t``.

Exit status: 0 on success, 1 when the cluster refused or could not be reached (one line on stderr
naming Kafka's error), 2 for bad command-line input (nothing is sent).
"""

from __future__ import annotations

import argparse
import sys

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

    p = argparse.ArgumentParser(prog="kafkette", description="A Kafka-compatible broker cluster, and tools that "
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
