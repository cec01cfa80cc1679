"""Client-side configuration inputs: bootstrap server lists and Java-style .properties files."""

from __future__ import annotations

from clients.connection import UsageError
from config.properties import read_properties

__all__ = ["load_properties", "parse_bootstrap"]


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise UsageError(f"invalid bootstrap server {item!r}: expected host:port")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise UsageError("no bootstrap servers given")
    return out


def load_properties(path: str | None) -> dict[str, str]:
    """A client .properties file (``--command-config``, ``--producer.config``), read by Java's rules;
    values are trimmed, as Kafka's client config parsing trims them."""
    if not path:
        return {}
    try:
        props = read_properties(path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    return {k: v.strip() for k, v in props.items()}
