"""Broker configs for the dev cluster from its command line: ``--override name=value`` (repeatable)
and ``KAFKETTE_OVERRIDES`` (``make run``), checked against the config registry before anything
starts, so a typo is refused with a suggestion instead of being logged as unknown by every broker."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Iterable

from config.registry import REGISTRY, BrokerConfig, ConfigError, parse_value

ENV_VAR = "KAFKETTE_OVERRIDES"

# Set by the dev cluster for each broker; an override would break how it starts and finds them.
_OWN = {
    "broker.id": "broker ids are 0..n-1 (--brokers)",
    "listeners": "broker i listens on --port + i",
    "advertised.listeners": "broker i listens on --port + i",
    "log.dirs": "each broker keeps its data in its directory under --dir",
    "log.dir": "each broker keeps its data in its directory under --dir",
    "zookeeper.connect": "the dev cluster runs its own ZooKeeper (--zk-port)",
    "metrics.port": "broker i serves metrics on --metrics-port + i",
}


class OverrideError(ValueError):
    pass


def split_env(value: str | None) -> list[str]:
    """``KAFKETTE_OVERRIDES="a=b c=d"``: shell words, so a value with spaces can be quoted."""
    return shlex.split(value) if value else []


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """``name=value`` items -> broker configs, each name known to the registry and each value valid."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise OverrideError(f"--override {item!r}: expected NAME=VALUE, e.g. --override log.retention.ms=60000")
        if name in _OWN:
            raise OverrideError(f"--override {name}: set by the dev cluster itself ({_OWN[name]})")
        # listener.name.<listener>.[<mechanism>.]<config>: checked as the config it overrides.
        target = BrokerConfig.listener_override_of(name) or name
        defn = REGISTRY.get(target)
        if defn is None or not defn.broker:
            raise OverrideError(f"--override {name}: not a broker config{_suggestion(name)}")
        if defn.dynamic_only:
            raise OverrideError(f"--override {name}: only a dynamic config (set it with kafkette configs --alter "
                                "--entity-type brokers once the cluster runs)")
        try:
            parse_value(target, value)
        except ConfigError as e:
            raise OverrideError(f"--override {name}={value}: {e}") from None
        out[name] = value
    return out


def _suggestion(name: str) -> str:
    known = [n for n, d in REGISTRY.items() if d.broker and not d.dynamic_only]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.75)
    return f" (did you mean {' or '.join(close)}?)" if close else " (see docs/configs.md for the broker configs)"
