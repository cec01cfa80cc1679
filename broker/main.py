"""Process entry for one broker: read the config, run the event loop, exit with a clear status."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from config.properties import read_properties
from config.registry import BrokerConfig, ConfigError

log = logging.getLogger("kafkette")


def load_config(path: str, overrides: list[str]) -> BrokerConfig:
    try:
        raw = read_properties(path)
    except OSError as e:
        raise ConfigError("--config", path, f"cannot read it: {e.strerror or e}") from None
    over: dict[str, str] = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError("--override", item, "expected NAME=VALUE")
        k, v = item.split("=", 1)
        over[k.strip()] = v.strip()
    return BrokerConfig(raw, over)


def run_broker(config_path: str, overrides: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(config_path, overrides)
    except ConfigError as e:
        print(f"kafkette: invalid configuration: {e}", file=sys.stderr)
        return 2
    for name in sorted(config.unknown):
        if BrokerConfig.listener_override_of(name) is not None:
            continue  # listener.name.<l>.ssl.* and the like: read per listener, not unknown
        log.warning("The configuration '%s' was supplied but isn't a known config.", name)
    from broker.broker_id import with_broker_id

    try:
        # broker.id=-1: the id of an earlier run (meta.properties), or a new one from ZooKeeper.
        config = with_broker_id(config)
    except ConfigError as e:
        print(f"kafkette: invalid configuration: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # ZooKeeper unreachable while generating an id
        print(f"kafkette: could not get a broker id from ZooKeeper: {e}", file=sys.stderr)
        return 1
    # Before any log is opened: the highest open files limit we may have, and a segment file cache
    # sized to it (one warning now when it is too small, rather than EMFILE somewhere later).
    from storage import fd_budget

    fd_budget.apply(list(config.log_dir_list), config.get("max.connections"),
                    config.get("log.segment.open.files.max"))
    from broker.broker import Broker

    runner: Callable[[Coroutine[Any, Any, int]], int]
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
        runner = asyncio.run
    profile_path = os.environ.get("KAFKETTE_PROFILE")
    if profile_path:
        # Profiling for benchmarks: the whole broker run under cProfile, stats written at exit.
        import cProfile

        # KAFKETTE_PROFILE_CLOCK=cpu times functions by the thread's CPU time: on shared cores the wall
        # clock charges a call with the time the broker waited for the CPU (a loopback send() that
        # wakes the client is often preempted by it), which is not the broker's cost.
        cpu_clock = os.environ.get("KAFKETTE_PROFILE_CLOCK") == "cpu"
        prof = cProfile.Profile(time.thread_time) if cpu_clock else cProfile.Profile()
        prof.enable()
        try:
            return runner(Broker(config).run())
        finally:
            prof.disable()
            # "{pid}" in the path: one file per broker when a cluster of them is profiled.
            prof.dump_stats(profile_path.replace("{pid}", str(os.getpid())))
    try:
        return runner(Broker(config).run())
    except ConfigError as e:
        print(f"kafkette: invalid configuration: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
