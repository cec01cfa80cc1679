"""Connection limits per broker and per client address (Kafka's SocketServer ConnectionQuotas).

- ``max.connections.per.ip`` / ``max.connections.per.ip.overrides``: a connection beyond its address's
  limit is accepted and closed at once, before any byte is read (Kafka's TooManyConnectionsException).
- ``max.connections``: when the broker is full, the acceptor stops accepting on that listener until a
  connection goes away; further clients wait in the listen backlog, as in Kafka. The inter-broker
  listener is protected (when there are other listeners): it may exceed the limit, and then the
  least recently active connection of another listener is closed to make room.
- ``listener.name.<listener>.max.connections``: the same for the connections of one listener, the
  protected one included. A listener without one of its own takes ``max.connections`` (Kafka reads the
  listener's configs with the prefixed keys over the broker's).

All three are dynamic (cluster-wide or per broker): ``reconfigure`` takes a new config and applies
it to the next connections; connections already open stay open, as in Kafka.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from config.registry import INT32_MAX, ConfigError

PER_IP = "max.connections.per.ip"
PER_IP_OVERRIDES = "max.connections.per.ip.overrides"
MAX_CONNECTIONS = "max.connections"


class TooManyConnections(Exception):
    def __init__(self, ip: str, count: int) -> None:
        super().__init__(f"address {ip} already has the configured maximum of {count} connections")
        self.ip = ip
        self.count = count


@dataclass(frozen=True)
class Limits:
    max_connections: int = INT32_MAX
    per_ip: int = INT32_MAX
    per_ip_overrides: tuple[tuple[str, int], ...] = ()  # (normalised address, limit)
    per_listener: tuple[tuple[str, int], ...] = ()  # (listener, max.connections as that listener sees it)

    def for_listener(self, listener: str) -> int:
        for name, limit in self.per_listener:
            if name == listener:
                return limit
        return INT32_MAX

    def for_ip(self, ip: str) -> int:
        for addr, limit in self.per_ip_overrides:
            if addr == ip:
                return limit
        return self.per_ip


def parse_overrides(value: str, resolve: Callable[[str], str] | None = None) -> tuple[tuple[str, int], ...]:
    """``host:count,host:count`` with Kafka's checks; host names are resolved to addresses, as Kafka
    resolves them (InetAddress.getByName) when the config is applied."""
    out: list[tuple[str, int]] = []
    for item in (v.strip() for v in (value or "").split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ConfigError(PER_IP_OVERRIDES, value, f"'{item}' is not of the form host:count")
        try:
            limit = int(count)
        except ValueError:
            raise ConfigError(PER_IP_OVERRIDES, value, f"'{count}' in '{item}' is not a number") from None
        if limit < 0:
            raise ConfigError(PER_IP_OVERRIDES, value, f"negative limit in '{item}'")
        out.append((normalise_ip(host, resolve), limit))
    return tuple(out)


def normalise_ip(host: str, resolve: Callable[[str], str] | None = None) -> str:
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        if resolve is None:
            resolve = socket.gethostbyname
        try:
            return normalise_ip(resolve(host), lambda h: h)
        except (OSError, ValueError):
            raise ConfigError(PER_IP_OVERRIDES, host,
                              f"{PER_IP_OVERRIDES} contains invalid addresses : {host}") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return str(addr)


def limits_from(get: Callable[[str], object], resolve: Callable[[str], str] | None = None,
                listener_get: Callable[[str, str], object] | None = None, listeners: Sequence[str] = ()) -> Limits:
    """Kafka's checks (KafkaConfig): max.connections.per.ip may be 0 only with overrides. ``listener_get``
    (BrokerConfig.listener_get) gives each of ``listeners`` its max.connections."""
    overrides = parse_overrides(str(get(PER_IP_OVERRIDES) or ""), resolve)
    per_ip = int(get(PER_IP))  # type: ignore[call-overload]
    if per_ip == 0 and not overrides:
        raise ConfigError(PER_IP, per_ip, f"{PER_IP} can be set to zero only if {PER_IP_OVERRIDES} property is set.")
    per_listener = tuple((name, int(listener_get(name, MAX_CONNECTIONS)))  # type: ignore[call-overload]
                         for name in listeners) if listener_get is not None else ()
    return Limits(max_connections=int(get(MAX_CONNECTIONS)), per_ip=per_ip,  # type: ignore[call-overload]
                  per_ip_overrides=overrides, per_listener=per_listener)


class ConnectionQuotas:
    def __init__(self, limits: Limits, inter_broker_listener: str, listeners: list[str]) -> None:
        self.limits = limits
        self.inter_broker_listener = inter_broker_listener
        self.counts: dict[str, int] = {}  # client address -> open connections
        self.listener_counts: dict[str, int] = dict.fromkeys(listeners, 0)
        self.total = 0
        self._slot_freed = asyncio.Event()
        # Counters for broker/metrics.py, per listener.
        self.refused_per_ip: dict[str, int] = dict.fromkeys(listeners, 0)
        self.closed_for_max_connections: dict[str, int] = dict.fromkeys(listeners, 0)
        self.accept_blocked: dict[str, int] = dict.fromkeys(listeners, 0)

    def reconfigure(self, limits: Limits) -> None:
        self.limits = limits
        self._slot_freed.set()  # a raised max.connections frees slots for waiting acceptors

    # -- accepting --------------------------------------------------------------------------------

    def protected(self, listener: str) -> bool:
        return listener == self.inter_broker_listener and len(self.listener_counts) > 1

    def slot_available(self, listener: str) -> bool:
        """Kafka's connectionSlotAvailable: under the listener's own limit, and then under the broker's
        unless the listener is the protected one."""
        if self.listener_counts.get(listener, 0) >= self.limits.for_listener(listener):
            return False
        return self.protected(listener) or self.total < self.limits.max_connections

    async def wait_for_slot(self, listener: str) -> None:
        """Block the listener's acceptor while the broker is at max.connections."""
        if self.slot_available(listener):
            return
        self.accept_blocked[listener] = self.accept_blocked.get(listener, 0) + 1
        while not self.slot_available(listener):
            self._slot_freed.clear()
            await self._slot_freed.wait()

    def inc(self, listener: str, ip: str) -> None:
        """Count a new connection, or raise TooManyConnections (the caller then closes the socket)."""
        count = self.counts.get(ip, 0)
        limit = self.limits.for_ip(ip)
        if count >= limit:
            self.refused_per_ip[listener] = self.refused_per_ip.get(listener, 0) + 1
            raise TooManyConnections(ip, limit)
        self.counts[ip] = count + 1
        self.listener_counts[listener] = self.listener_counts.get(listener, 0) + 1
        self.total += 1

    def dec(self, listener: str, ip: str) -> None:
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.listener_counts[listener] = max(0, self.listener_counts.get(listener, 0) - 1)
        self.total = max(0, self.total - 1)
        self._slot_freed.set()

    def max_connections_exceeded(self) -> bool:
        """True when protected inter-broker connections pushed the total over max.connections."""
        return self.total > self.limits.max_connections
