"""Connection creation rate quotas (KIP-612), applied as Kafka's SocketServer ConnectionQuotas applies them.

- ``max.connection.creation.rate`` (broker-wide, dynamic): every new connection on a listener other than
  the protected inter-broker one is counted. Past the limit, the listener's acceptor holds the connection
  it just accepted for the delay that brings the measured rate back to the limit (at most
  ``quota.window.size.seconds``) before serving it, and accepts nothing else meanwhile: clients behind it
  wait in the listen backlog. Nothing is refused.
- ``listener.name.<listener>.max.connection.creation.rate``: the same over one listener's connections,
  the protected one included; a listener without one of its own takes the broker-wide value (Kafka reads
  the listener's configs with the prefixed keys over the broker's). The longer of the two delays holds.
- ``connection_creation_rate`` for an IP (``/config/ips/<ip>``, ``<default>`` for every address without one
  of its own; set with AlterClientQuotas): a connection that takes its address past the limit is not
  served. It stays open, unread, for the throttle time, then is closed, so that a client reconnecting in a
  loop is slowed down rather than refused at once; it counts towards neither its address's rate nor the
  broker's.

Rates are Kafka's ``Rate`` over ``quota.window.num`` samples of ``quota.window.size.seconds``
(broker/quota/stats.py), and a connection is over the limit when the rate measured with it exceeds the
limit (Kafka's ``Quota.upperBound``). An address's rate is forgotten after an hour without a connection,
as Kafka expires its sensor.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from broker.connection_quotas import normalise_ip
from broker.quota.stats import SampledRate, throttle_time_ms
from config.registry import INT32_MAX, ConfigError

if TYPE_CHECKING:
    from broker.config_changes import ConfigChangeListener
    from broker.wiring import ZkCall
    from controller.zk_client import KafkaZkClient

log = logging.getLogger(__name__)

BROKER_RATE = "max.connection.creation.rate"
IP_RATE = "connection_creation_rate"
IPS = "ips"  # the /config/ips entity type
_DEFAULT = "<default>"
IP_SENSOR_EXPIRY_MS = 3_600_000  # Kafka's ConnectionQuotaEntity.ipQuotaEntity: one hour
_PURGE_EVERY_MS = 60_000


def _monotonic_ms() -> float:
    return time.monotonic() * 1000.0


class _RateSensor:
    __slots__ = ("last_record_ms", "rate")

    def __init__(self, samples: int, window_ms: float, now_ms: float) -> None:
        self.rate = SampledRate(samples, window_ms)
        self.last_record_ms = now_ms


class ConnectionRateQuotas:
    def __init__(self, broker_limit: int, samples: int, window_s: int,
                 clock: Callable[[], float] = _monotonic_ms) -> None:
        self.broker_limit = broker_limit
        self.samples = samples
        self.window_ms = window_s * 1000.0
        self.clock = clock
        # QuotaUtils.boundedThrottleTime with ConnectionQuotas' maxThrottleTimeMs: one quota window.
        self.max_throttle_ms = int(window_s * 1000)
        self._broker = SampledRate(samples, self.window_ms)
        self.listener_limits: dict[str, int] = {}
        self._listeners: dict[str, SampledRate] = {}
        self.default_ip_limit = INT32_MAX
        self.ip_limits: dict[str, int] = {}
        self._ip_sensors: dict[str, _RateSensor] = {}
        self._next_purge_ms = clock() + _PURGE_EVERY_MS
        # For broker/metrics.py, per listener: connections held back by each limit, and for how long.
        self.accept_throttled: dict[str, int] = {}
        self.accept_throttle_ms: dict[str, int] = {}
        self.ip_throttled: dict[str, int] = {}
        self.ip_throttle_ms: dict[str, int] = {}

    # -- configuration ----------------------------------------------------------------------------

    def set_broker_limit(self, limit: int) -> None:
        """A connection already waiting keeps its delay, as in Kafka (it is one per listener)."""
        if limit != self.broker_limit:
            log.info("max connection creation rate now %d a second", limit)
            self.broker_limit = limit

    def set_listener_limit(self, listener: str, limit: int) -> None:
        previous = self.listener_limits.get(listener)
        if previous != limit:
            if previous is not None or limit != INT32_MAX:  # the start-up's defaults go unsaid
                log.info("max connection creation rate of listener %s now %d a second", listener, limit)
            self.listener_limits[listener] = limit

    def set_ip_limit(self, ip: str | None, limit: int | None) -> None:
        """``ip`` None: the default for addresses without a limit of their own; ``limit`` None: removed."""
        if ip is None:
            self.default_ip_limit = INT32_MAX if limit is None else limit
            log.info("default max IP connection rate now %d a second", self.default_ip_limit)
        elif limit is None:
            if self.ip_limits.pop(ip, None) is not None:
                log.info("max connection rate override for %s removed", ip)
        else:
            self.ip_limits[ip] = limit
            log.info("max connection rate override for %s now %d a second", ip, limit)

    def apply_ip_config(self, ip: str | None, config: Mapping[str, str]) -> None:
        """An ``/config/ips`` entity's config, applied whole (a missing key removes the limit)."""
        raw = config.get(IP_RATE)
        limit = None
        if raw is not None:
            try:
                limit = int(float(raw))
            except ValueError:
                log.warning("ignoring %s=%r for %s: not a number", IP_RATE, raw, ip or "<default>")
        self.set_ip_limit(ip, limit)

    def ip_limit(self, ip: str) -> int:
        return self.ip_limits.get(ip, self.default_ip_limit)

    # -- accepting ----------------------------------------------------------------------------------

    def _throttle_ms(self, rate: SampledRate, limit: int, now: float) -> int:
        observed = rate.measure(now)
        if observed <= limit:
            return 0
        if limit <= 0:
            return self.max_throttle_ms
        return max(0, min(throttle_time_ms(observed, limit, rate.window_size_ms(now)), self.max_throttle_ms))

    def _listener_rate(self, listener: str) -> SampledRate:
        rate = self._listeners.get(listener)
        if rate is None:
            rate = self._listeners[listener] = SampledRate(self.samples, self.window_ms)
        return rate

    def record_connection(self, listener: str, protected: bool) -> int:
        """Count a connection just accepted against its listener's rate and, unless the listener is the
        protected inter-broker one, the broker-wide rate; the ms its acceptor waits before serving it
        (the longer of the two delays; 0: within both limits)."""
        now = self.clock()
        throttle = 0
        if not protected:
            self._broker.record(1.0, now)
            throttle = self._throttle_ms(self._broker, self.broker_limit, now)
        rate = self._listener_rate(listener)
        rate.record(1.0, now)
        throttle = max(throttle, self._throttle_ms(rate, self.listener_limits.get(listener, INT32_MAX), now))
        if throttle:
            self.accept_throttled[listener] = self.accept_throttled.get(listener, 0) + 1
            self.accept_throttle_ms[listener] = self.accept_throttle_ms.get(listener, 0) + throttle
        return throttle

    def record_ip_connection(self, listener: str, protected: bool, ip: str) -> int:
        """Count the connection against its address's rate; the ms it is held unread before it is closed
        (0: within the limit, serve it). A throttled connection is taken back out of every rate."""
        limit = self.ip_limit(ip)
        now = self.clock()
        self._maybe_purge(now)
        if limit == INT32_MAX:
            return 0  # no quota for this address (QuotaConfigs.IP_CONNECTION_RATE_DEFAULT)
        sensor = self._ip_sensors.get(ip)
        if sensor is None:
            sensor = self._ip_sensors[ip] = _RateSensor(self.samples, self.window_ms, now)
        sensor.rate.record(1.0, now)
        sensor.last_record_ms = now
        throttle = self._throttle_ms(sensor.rate, limit, now)
        if not throttle:
            return 0
        sensor.rate.record(-1.0, now)
        if not protected:
            self._broker.record(-1.0, now)
        self._listener_rate(listener).record(-1.0, now)
        self.ip_throttled[listener] = self.ip_throttled.get(listener, 0) + 1
        self.ip_throttle_ms[listener] = self.ip_throttle_ms.get(listener, 0) + throttle
        return throttle

    def _maybe_purge(self, now: float) -> None:
        if now < self._next_purge_ms:
            return
        self._next_purge_ms = now + _PURGE_EVERY_MS
        for ip in [ip for ip, s in self._ip_sensors.items() if now - s.last_record_ms >= IP_SENSOR_EXPIRY_MS]:
            del self._ip_sensors[ip]


class IpQuotaConfigCache:
    """``/config/ips`` entities from ZooKeeper, kept current (Kafka's IpConfigHandler): all of them at
    start-up, then each one a change notification names. One lock orders the load and the changes, and
    each reads ZooKeeper afresh, so an older value never lands after a newer one."""

    def __init__(self, quotas: ConnectionRateQuotas, zk: KafkaZkClient, zk_call: ZkCall) -> None:
        self.quotas = quotas
        self.zk = zk
        self.zk_call = zk_call
        self._lock = asyncio.Lock()

    async def start(self, changes: ConfigChangeListener) -> None:
        changes.subscribe(IPS, self.on_change)
        async with self._lock:
            names = await self.zk_call(self.zk.get_all_entities_with_config, IPS)
            for raw, cfg in (await self.zk_call(self.zk.get_entity_configs, IPS, names)).items():
                self._apply(raw, cfg)

    async def on_change(self, name: str) -> None:
        async with self._lock:
            self._apply(name, await self.zk_call(self.zk.get_entity_config, IPS, name))

    def _apply(self, raw: str, config: Mapping[str, str]) -> None:
        if raw == _DEFAULT:
            self.quotas.apply_ip_config(None, config)
            return
        try:
            ip = normalise_ip(raw, lambda h: h)  # AlterClientQuotas only stores addresses
        except ConfigError:
            log.warning("ignoring the quotas of IP entity %r: not an address", raw)
            return
        self.quotas.apply_ip_config(ip, config)
