"""Client-side configuration inputs: bootstrap server lists and Java-style .properties files."""

from __future__ import annotations

from clients.connection import UsageError

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
    """A Java-style .properties file (key=value or key: value, # and ! comments)."""
    if not path:
        return {}
    props: dict[str, str] = {}
    try:
        text = open(path, encoding="utf-8").read()  # noqa: SIM115
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1:].strip()
                break
        else:
            props[line] = ""
    return props
