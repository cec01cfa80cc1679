"""``python -m broker --config server.properties [--override name=value ...]``: one broker process.

The same as ``kafkette broker start``, without loading the ops CLI: the process that serves data
depends on nothing but the broker itself.
"""

from __future__ import annotations

import argparse
import sys

from broker.main import run_broker


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m broker", description="Run one kafkette broker.")
    p.add_argument("--config", required=True, help="server.properties (Kafka's format and names)")
    p.add_argument("--override", action="append", metavar="NAME=VALUE", help="override one config value")
    args = p.parse_args(argv)
    return run_broker(args.config, args.override or [])


if __name__ == "__main__":
    sys.exit(main())
