"""Kafka's listener syntax: ``listeners=PLAINTEXT://:9092,INTERNAL://127.0.0.1:19092``."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from storage.config import ConfigError

_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9a-fA-F:]+\]|[^:\[\]]*):(\d+)$")

# Security protocol ids as on the wire (UpdateMetadata endpoints); we serve PLAINTEXT only.
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str  # "" = all interfaces
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def advertised_host(self) -> str:
        # Kafka advertises the canonical host name for a wildcard listener.
        return self.host or socket.getfqdn()

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(key: str, value: str, protocol_map: dict[str, str] | None = None) -> list[Endpoint]:
    """Parse a listeners / advertised.listeners value; errors name the key."""
    out: list[Endpoint] = []
    seen: set[str] = set()
    for raw in (v.strip() for v in value.split(",")):
        if not raw:
            continue
        m = _LISTENER.match(raw)
        if not m:
            raise ConfigError(key, value, f"'{raw}' is not of the form NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(key, value, f"port {port} out of range")
        if name in seen:
            raise ConfigError(key, value, f"listener name {name} appears twice")
        seen.add(name)
        proto = (protocol_map or {}).get(name, name if name in SECURITY_PROTOCOLS else "")
        if proto != "PLAINTEXT":
            raise ConfigError(key, value, f"listener {name} uses security protocol {proto or 'unknown'}; "
                              "only PLAINTEXT is supported (map it in listener.security.protocol.map)")
        out.append(Endpoint(name, host, port, proto))
    if not out:
        raise ConfigError(key, value, "no listener given")
    return out


def parse_protocol_map(value: str) -> dict[str, str]:
    out = {}
    for item in (v.strip() for v in value.split(",") if v.strip()):
        if ":" not in item:
            raise ConfigError("listener.security.protocol.map", value, f"'{item}' is not NAME:PROTOCOL")
        k, v = item.split(":", 1)
        out[k.strip().upper()] = v.strip().upper()
    return out
