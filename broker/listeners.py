"""Kafka's listener syntax: ``listeners=PLAINTEXT://:9092,INTERNAL://127.0.0.1:19092``."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from config.registry import BrokerConfig, ConfigError

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


def inter_broker_and_control_plane(config: BrokerConfig, listeners: list[Endpoint], advertised: list[Endpoint],
                                   protocol_map: dict[str, str]) -> tuple[str, str | None]:
    """The inter-broker listener name and the control-plane listener name (or None), checked at startup
    with Kafka's rules (KafkaConfig.validateValues)."""
    ib_name = config.get("inter.broker.listener.name")
    if ib_name is not None:
        if "security.inter.broker.protocol" in config.originals:
            raise ConfigError("inter.broker.listener.name", ib_name,
                              "Only one of inter.broker.listener.name and security.inter.broker.protocol "
                              "should be set.")
        inter_broker = ib_name.strip().upper()
        if inter_broker not in protocol_map:
            raise ConfigError("inter.broker.listener.name", ib_name,
                              f"Listener with name {inter_broker} defined in inter.broker.listener.name not found "
                              "in listener.security.protocol.map.")
    else:
        # Kafka names the listener after the security protocol when only the protocol is given.
        inter_broker = config.get("security.inter.broker.protocol").upper()
    advertised_names = [e.name for e in advertised]
    valid = ",".join(advertised_names)
    if inter_broker not in advertised_names:
        raise ConfigError("inter.broker.listener.name", inter_broker,
                          "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
                          f"The valid options based on currently configured listeners are {valid}")
    listener_names = {e.name for e in listeners}
    if not set(advertised_names) <= listener_names:
        raise ConfigError("advertised.listeners", ",".join(map(str, advertised)),
                          "advertised.listeners listener names must be equal to or a subset of the ones defined in "
                          f"listeners. Found {valid}. The valid options based on the current configuration are "
                          f"{','.join(sorted(listener_names))}")
    cp_name = config.get("control.plane.listener.name")
    if cp_name is None:
        return inter_broker, None
    control_plane = cp_name.strip().upper()
    if control_plane not in protocol_map:
        raise ConfigError("control.plane.listener.name", cp_name,
                          f"Listener with {control_plane} defined in control.plane.listener.name not found in "
                          "listener.security.protocol.map.")
    if control_plane not in advertised_names:
        raise ConfigError("control.plane.listener.name", cp_name,
                          "control.plane.listener.name must be a listener name defined in advertised.listeners. "
                          f"The valid options based on currently configured listeners are {valid}")
    if control_plane == inter_broker:
        raise ConfigError("control.plane.listener.name", cp_name,
                          "control.plane.listener.name, when defined, should have a different value from the inter "
                          f"broker listener name. Currently they both have the value {control_plane}")
    return inter_broker, control_plane
