"""Kafka's listener syntax: ``listeners=PLAINTEXT://:9092,INTERNAL://127.0.0.1:19092``."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from config.registry import LISTENER_PREFIX, REGISTRY, BrokerConfig, ConfigError

_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9a-fA-F:]+\]|[^:\[\]]*):(\d+)$")

# Security protocol ids as on the wire (UpdateMetadata endpoints, Kafka's SecurityProtocol.id).
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


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

    @property
    def security_protocol_id(self) -> int:
        return SECURITY_PROTOCOLS[self.security_protocol]

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in SASL_PROTOCOLS

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(key: str, value: str, protocol_map: dict[str, str] | None = None) -> list[Endpoint]:
    """Parse a listeners / advertised.listeners value; errors name the key and use Kafka's wording
    (CoreUtils.listenerListToEndPoints). Without ``protocol_map``, Kafka's default map applies."""
    pmap = protocol_map if protocol_map is not None else {p: p for p in SECURITY_PROTOCOLS}
    out: list[Endpoint] = []

    def error(reason: str) -> ConfigError:
        return ConfigError(key, value, f"Error creating broker listeners from '{value}': {reason}")

    for raw in (v.strip() for v in value.split(",")):
        if not raw:
            continue
        m = _LISTENER.match(raw)
        if not m:
            raise error(f"Unable to parse {raw} to a broker endpoint")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if not 0 <= port <= 65535:
            raise error(f"port {port} out of range")
        proto = pmap.get(name)
        if proto is None:
            raise error(f"No security protocol defined for listener {name}")
        out.append(Endpoint(name, host, port, proto))
    if not out:
        raise ConfigError(key, value, "no listener given")
    if len({e.name for e in out}) != len(out):
        raise error(f"Each listener must have a different name, listeners: {value}")
    if key == "listeners":
        # Port 0 (an ephemeral port each) may repeat; otherwise two listeners on one port must be one
        # IPv4 and one IPv6 address (Kafka's rule).
        ports = [e.port for e in out if e.port != 0]
        for port in {p for p in ports if ports.count(p) > 1}:
            hosts = [e.host for e in out if e.port == port]
            families = {":" in h for h in hosts}
            if len(hosts) != 2 or "" in hosts or len(families) != 2:
                raise error("Each listener must have a different port unless exactly one listener has an IPv4 "
                            f"address and the other IPv6 address, listeners: {value}, port: {port}")
    return out


def parse_protocol_map(value: str) -> dict[str, str]:
    out = {}
    for item in (v.strip() for v in value.split(",") if v.strip()):
        if ":" not in item:
            raise ConfigError("listener.security.protocol.map", value, f"'{item}' is not NAME:PROTOCOL")
        k, v = item.split(":", 1)
        protocol = v.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map", value,
                              f"Invalid security protocol `{v.strip()}` defined in listener.security.protocol.map")
        out[k.strip().upper()] = protocol
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
    ib_protocol = protocol_map.get(inter_broker, inter_broker)
    if ib_protocol in SASL_PROTOCOLS:
        mechanism = config.get("sasl.mechanism.inter.broker.protocol")
        if mechanism not in config.listener_get(inter_broker, "sasl.enabled.mechanisms"):
            raise ConfigError("sasl.mechanism.inter.broker.protocol", mechanism,
                              "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
                              "when SASL is used for inter-broker communication")
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


def listener_config_name(key: str) -> str | None:
    """The config a ``listener.name.<listener>.[<mechanism>.]<config>`` key overrides, if it is one
    (e.g. ``listener.name.ssl.ssl.keystore.location`` -> ``ssl.keystore.location``), else None."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    _listener, _, rest = key[len(LISTENER_PREFIX):].partition(".")
    if not rest:
        return None
    defn = REGISTRY.get(rest)
    if defn is not None and defn.broker:
        return rest
    _mechanism, _, name = rest.partition(".")
    defn = REGISTRY.get(name)
    return name if defn is not None and defn.broker else None
