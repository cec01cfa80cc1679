"""Client quota managers: Kafka's ClientQuotaManager, ClientRequestQuotaManager and
ControllerMutationQuotaManager.

Each manager measures clients grouped by metric tags (see ``entities``) and says how long a client
must wait after a request that took it over its quota:

- Produce (``producer_byte_rate``): request bytes, recorded after the append.
- Fetch (``consumer_byte_rate``): response bytes. A throttled fetch is answered without data, so its
  bytes are taken back out ("unrecorded").
- Request (``request_percentage``): the time a request kept the broker busy, as a percentage of one
  thread over the window. Kafka counts request-handler and network thread time and gives each thread
  100%; a kafkette broker is one event loop, so 100% is the whole loop, and the time counted is what the
  request's decoding and handler ran on the loop, not the time it waited (in a purgatory, for
  ZooKeeper). Throttle times are bounded by one window (``quota.window.size.seconds``), as in Kafka.
- ControllerMutation (``controller_mutation_rate``): partitions created or deleted, in a token bucket
  (KIP-599); see ``mutation``.

The throttle-time metric is Kafka's Avg over the broker's default metric samples (2 of 30 s).
Sensors of clients that have been quiet for an hour are dropped, as Kafka expires them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from broker.quota.entities import ClientKey, MetricTags, QuotaOverrides, UserKey
from broker.quota.stats import SampledAvg, SampledRate, TokenBucket, java_round, throttle_time_ms

# Kafka's metrics.num.samples / metrics.sample.window.ms defaults, which the throttle-time Avg uses.
METRIC_SAMPLES = 2
METRIC_WINDOW_MS = 30_000.0
# ClientQuotaManager.InactiveSensorExpirationTimeSeconds
INACTIVE_SENSOR_EXPIRATION_MS = 3600_000.0
_PURGE_INTERVAL_MS = 60_000.0


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0


class ClientSensors:
    """What is measured for one set of metric tags (Kafka's ClientSensors)."""

    __slots__ = ("bound", "bucket", "last_record_ms", "rate", "tags", "throttle_time")

    def __init__(self, tags: MetricTags, bound: float | None, samples: int, window_ms: float,
                 with_bucket: bool) -> None:
        self.tags = tags
        self.bound = bound  # the quota; None: none applies (Kafka: Long.MAX_VALUE)
        self.rate = SampledRate(samples, window_ms)
        self.throttle_time = SampledAvg(METRIC_SAMPLES, METRIC_WINDOW_MS)
        self.bucket = TokenBucket(samples, window_ms) if with_bucket else None
        self.last_record_ms = -math.inf


class ClientQuotaManager:
    """Produce and Fetch byte-rate quotas (and the base of the other two)."""

    # Names of Kafka's quota metrics for this manager (the MBean type and the quota attribute).
    quota_metric = "byte-rate"

    def __init__(self, quota_type: str, samples: int, window_s: int,
                 clock: Callable[[], float] = monotonic_ms) -> None:
        self.quota_type = quota_type  # Kafka's QuotaType name: Produce, Fetch, Request, ControllerMutation
        self.samples = samples
        self.window_ms = window_s * 1000.0
        self.clock = clock
        self.overrides = QuotaOverrides()
        self.sensors: dict[MetricTags, ClientSensors] = {}
        self._last_purge_ms = clock()

    @property
    def enabled(self) -> bool:
        """Any quota of this type was ever configured (Kafka's quotasEnabled)."""
        return self.overrides.levels != 0

    def update_quota(self, user: UserKey, client: ClientKey, value: float | None) -> None:
        self.overrides.update(user, client, value)
        # Defaults may apply to many sensors: every existing sensor takes its limit afresh (Kafka
        # walks all quota metrics the same way when a default or a second level changes).
        limit = self.overrides.limit
        for sensors in self.sensors.values():
            sensors.bound = limit(sensors.tags)

    def quota(self, user: str, client_id: str) -> float | None:
        """The quota that applies to this user (sanitized name) and client id; None: unlimited."""
        return self.overrides.limit(self.overrides.metric_tags(user, client_id))

    def sensors_for(self, user: str, client_id: str) -> ClientSensors:
        tags = self.overrides.metric_tags(user, client_id)
        sensors = self.sensors.get(tags)
        if sensors is None:
            self._maybe_purge()
            sensors = ClientSensors(tags, self.overrides.limit(tags), self.samples, self.window_ms,
                                    with_bucket=False)
            self.sensors[tags] = sensors
        return sensors

    def record(self, sensors: ClientSensors, value: float, now_ms: float | None = None) -> int:
        """Record ``value`` and return the throttle time it causes in ms (0: within the quota)."""
        now = self.clock() if now_ms is None else now_ms
        rate = sensors.rate
        rate.record(value, now)
        sensors.last_record_ms = now
        bound = sensors.bound
        if bound is None:
            return 0
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        return self.throttle_time(observed, bound, rate.window_size_ms(now))

    def throttle_time(self, observed: float, bound: float, window_ms: float) -> int:
        return throttle_time_ms(observed, bound, window_ms)

    def unrecord(self, sensors: ClientSensors, value: float, now_ms: float | None = None) -> None:
        """Take back a recorded value (a throttled fetch sends no data)."""
        sensors.rate.record(-value, self.clock() if now_ms is None else now_ms)

    def record_throttle(self, sensors: ClientSensors, throttle_ms: int, now_ms: float | None = None) -> None:
        """The client was made to wait this long (the throttle-time metric)."""
        sensors.throttle_time.record(throttle_ms, self.clock() if now_ms is None else now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """The most that can be recorded at once without certainly being throttled (caps fetch sizes)."""
        if not self.enabled:
            return math.inf
        limit = self.quota(user, client_id)
        if limit is None:
            return math.inf
        return limit * (self.samples - 1) * (self.window_ms / 1000.0)

    def _maybe_purge(self) -> None:
        now = self.clock()
        if now - self._last_purge_ms < _PURGE_INTERVAL_MS:
            return
        self._last_purge_ms = now
        for tags in [t for t, s in self.sensors.items() if now - s.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS]:
            del self.sensors[tags]


class ClientRequestQuotaManager(ClientQuotaManager):
    """request_percentage: handler time in percent of one thread; throttles bounded by one window."""

    quota_metric = "request-time"

    def __init__(self, samples: int, window_s: int, clock: Callable[[], float] = monotonic_ms) -> None:
        super().__init__("Request", samples, window_s, clock)

    def throttle_time(self, observed: float, bound: float, window_ms: float) -> int:
        return min(throttle_time_ms(observed, bound, window_ms), int(self.window_ms))

    def record_time(self, sensors: ClientSensors, busy_ns: int, now_ms: float | None = None) -> int:
        # Kafka's nanosToPercentage: one second of thread time in a one-second window is 100%.
        return self.record(sensors, busy_ns * 1e-7, now_ms)


class ControllerMutationQuotaManager(ClientQuotaManager):
    """controller_mutation_rate: a token bucket per client; strict or permissive per request."""

    quota_metric = "tokens"

    def __init__(self, samples: int, window_s: int, clock: Callable[[], float] = monotonic_ms) -> None:
        super().__init__("ControllerMutation", samples, window_s, clock)

    def sensors_for(self, user: str, client_id: str) -> ClientSensors:
        tags = self.overrides.metric_tags(user, client_id)
        sensors = self.sensors.get(tags)
        if sensors is None:
            self._maybe_purge()
            sensors = ClientSensors(tags, self.overrides.limit(tags), self.samples, self.window_ms,
                                    with_bucket=True)
            self.sensors[tags] = sensors
        return sensors

    def check(self, sensors: ClientSensors, now_ms: float) -> int:
        """Throttle time while the bucket is below zero (Sensor.checkQuotas for a TokenBucket), else 0."""
        bound, bucket = sensors.bound, sensors.bucket
        if bound is None or bucket is None:
            return 0
        tokens = bucket.measure(bound, now_ms)
        if tokens >= 0:
            return 0
        # ControllerMutationQuotaManager.throttleTimeMs: the time to refill to zero.
        return java_round(-tokens / bound * 1000.0)

    def record_mutations(self, sensors: ClientSensors, permits: float, now_ms: float) -> None:
        sensors.rate.record(permits, now_ms)  # mutation-rate
        sensors.last_record_ms = now_ms
        if sensors.bound is not None and sensors.bucket is not None:
            sensors.bucket.record(permits, sensors.bound, now_ms)

    def record(self, sensors: ClientSensors, value: float, now_ms: float | None = None) -> int:
        """Strict recording (Kafka's recordAndGetThrottleTimeMs here): nothing is taken while the
        bucket is empty."""
        now = self.clock() if now_ms is None else now_ms
        throttle = self.check(sensors, now)
        if throttle == 0:
            self.record_mutations(sensors, value, now)
        return throttle

    def max_value_in_window(self, user: str, client_id: str) -> float:
        return math.inf
