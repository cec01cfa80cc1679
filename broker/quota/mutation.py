"""Controller mutation quotas as a request sees them (Kafka's ControllerMutationQuota, KIP-599).

CreateTopics, CreatePartitions and DeleteTopics count the partitions they create or delete. Since the
versions that know THROTTLING_QUOTA_EXCEEDED (CreateTopics v6, CreatePartitions v3, DeleteTopics v5)
the quota is *strict*: once the client's token bucket is empty, further topics in the request fail
with that error until it refills; a request that finds tokens left may take the bucket below zero.
Older versions, and topics created automatically by Metadata or FindCoordinator, are *permissive*:
the mutation happens, and the response is throttled instead.

The handlers reach the request's quota through ``record_controller_mutation``; the dispatcher
(broker/kafka_apis.py) sets it for the request it runs. Without controller mutation quotas nothing
is set and recording costs one context-variable read.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Protocol

from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.quota.managers import ClientSensors, ControllerMutationQuotaManager

# The first version of each mutating API whose quota is strict (KafkaApis' strictSinceVersion).
STRICT_SINCE_VERSION = {19: 6, 20: 5, 37: 3}  # CreateTopics, DeleteTopics, CreatePartitions

THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


class ThrottlingQuotaExceeded(Exception):
    def __init__(self, throttle_ms: int) -> None:
        super().__init__(THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        self.throttle_ms = throttle_ms


class ControllerMutationQuota(Protocol):
    def record(self, permits: float) -> None: ...

    def throttle_time(self) -> int: ...


class _Unbounded:
    def record(self, permits: float) -> None:
        pass

    def throttle_time(self) -> int:
        return 0


UNBOUNDED: ControllerMutationQuota = _Unbounded()


class _ClientMutationQuota:
    """One request's view of its client's bucket; remembers the last throttle time it met."""

    def __init__(self, manager: ControllerMutationQuotaManager, sensors: ClientSensors) -> None:
        self.manager = manager
        self.sensors = sensors
        self.last_throttle_ms = 0
        self.last_recorded_ms = 0.0

    def throttle_time(self) -> int:
        # Counted down by the time since it was met: the request may have waited in between.
        elapsed = self.manager.clock() - self.last_recorded_ms
        return max(0, int(self.last_throttle_ms - elapsed))


class StrictMutationQuota(_ClientMutationQuota):
    def record(self, permits: float) -> None:
        now = self.manager.clock()
        throttle = self.manager.check(self.sensors, now)
        if throttle > 0:
            self.last_throttle_ms, self.last_recorded_ms = throttle, now
            raise ThrottlingQuotaExceeded(throttle)
        self.manager.record_mutations(self.sensors, permits, now)


class PermissiveMutationQuota(_ClientMutationQuota):
    def record(self, permits: float) -> None:
        now = self.manager.clock()
        self.manager.record_mutations(self.sensors, permits, now)
        throttle = self.manager.check(self.sensors, now)
        if throttle > 0:
            self.last_throttle_ms, self.last_recorded_ms = throttle, now


current_mutation_quota: contextvars.ContextVar[ControllerMutationQuota] = contextvars.ContextVar(
    "current_mutation_quota", default=UNBOUNDED)


def record_controller_mutation(partitions: int) -> tuple[ErrorCode, str] | None:
    """Count ``partitions`` created or deleted against the current request's quota.

    Returns the error for the topic when a strict quota refuses the mutation, else None (go ahead)."""
    try:
        current_mutation_quota.get().record(float(partitions))
    except ThrottlingQuotaExceeded as e:
        return ErrorCode.THROTTLING_QUOTA_EXCEEDED, str(e)
    return None
