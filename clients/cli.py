"""The ``kafkette`` command: one entry point, subcommands for each job."""

from __future__ import annotations

import argparse
import sys


def _broker_start(args: argparse.Namespace) -> int:
    from broker.main import run_broker

    return run_broker(args.config, args.override or [])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafkette", description="A Kafka-compatible broker cluster.")
    sub = p.add_subparsers(dest="command", required=True)
    broker = sub.add_parser("broker", help="run a broker")
    bsub = broker.add_subparsers(dest="broker_command", required=True)
    start = bsub.add_parser("start", help="start a broker in the foreground")
    start.add_argument("--config", required=True, help="server.properties (Kafka's format and names)")
    start.add_argument("--override", action="append", metavar="NAME=VALUE",
                       help="override one config value (repeatable)")
    start.set_defaults(func=_broker_start)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
