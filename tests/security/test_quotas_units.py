"""Client quota arithmetic and precedence, checked against the numbers in Kafka's own tests.

No broker here: the managers run on a manual clock. The cases mirror ClientQuotaManagerTest,
ClientRequestQuotaManagerTest and ControllerMutationQuotaManagerTest (same configs, same expected
throttle times), and the precedence table of DefaultQuotaCallback.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

import broker.quota.loop_time as loop_time
from broker.quota import QuotaManagers
from broker.quota.entities import DEFAULT
from broker.quota.managers import (
    ClientQuotaManager,
    ClientRequestQuotaManager,
    ControllerMutationQuotaManager,
)
from broker.quota.mutation import (
    PermissiveMutationQuota,
    StrictMutationQuota,
    ThrottlingQuotaExceeded,
    current_mutation_quota,
    record_controller_mutation,
)
from broker.quota.stats import SampledRate, TokenBucket, throttle_time_ms
from protocol.errors import ErrorCode


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms

    def sleep(self, ms: float) -> None:
        self.ms += ms


def produce_manager(clock: Clock) -> ClientQuotaManager:
    # Kafka's ClientQuotaManagerConfig defaults: 11 samples of 1 second.
    return ClientQuotaManager("Produce", 11, 1, clock)


def record(manager: ClientQuotaManager, user: str, client_id: str, value: float) -> int:
    return manager.record(manager.sensors_for(user, client_id), value)


def test_byte_rate_quota_violation_matches_kafka() -> None:
    """ClientQuotaManagerTest.testQuotaViolation: quota 500 B/s, 11 windows of 1 s."""
    clock = Clock()
    m = produce_manager(clock)
    m.update_quota(None, DEFAULT, 500.0)
    for _ in range(10):
        assert record(m, "ANONYMOUS", "unknown", 400) == 0
        clock.sleep(1000)
    # A spike: 400*10 + 2300 = 6300 bytes over 10.5 s = 600 B/s; (600 - 500) / 500 * 10.5 s = 2100 ms.
    clock.sleep(500)
    throttle = record(m, "ANONYMOUS", "unknown", 2300)
    assert throttle == 2100
    clock.sleep(throttle)
    # Still throttled until the bursty sample rolls out of the window...
    for _ in range(10):
        record(m, "ANONYMOUS", "unknown", 400)
        clock.sleep(1000)
    # ...then not.
    assert record(m, "ANONYMOUS", "unknown", 0) == 0


def test_throttle_time_formula() -> None:
    # X = (O - T) / T * W, rounded as Java rounds.
    assert throttle_time_ms(600.0, 500.0, 10_500) == 2100
    assert throttle_time_ms(150.0, 100.0, 1001) == 501  # 500.5 rounds up, not to even


def test_rate_counts_at_least_samples_minus_one_windows() -> None:
    rate = SampledRate(11, 1000)
    rate.record(1000, 0)
    # One burst right after start is spread over 10 full windows, not over a millisecond.
    assert rate.measure(1) == pytest.approx(1000 / 10.001)
    # After the whole span has passed without events, the samples are reset.
    assert rate.measure(11_001) == 0


def test_request_quota_violation_matches_kafka_and_is_bounded() -> None:
    """ClientRequestQuotaManagerTest: request_percentage 1% (10 ms a second), throttles capped at a window."""
    clock = Clock()
    m = ClientRequestQuotaManager(11, 1, clock)
    m.update_quota(None, DEFAULT, 1.0)

    def ms(millis: float) -> int:
        return m.record_time(m.sensors_for("ANONYMOUS", "test-client"), int(millis * 1_000_000))

    for _ in range(10):
        assert ms(4) == 0
        clock.sleep(1000)
    clock.sleep(500)
    # 4*10 + 67.1 = 107.1 ms over 10.5 s = 10.2 ms a second; (10.2 - 10) / 10 * 10.5 s = 210 ms.
    assert ms(67.1) == 210
    # However far over, a request throttle is at most one window.
    assert ms(50_000) == 1000


def test_precedence_of_quota_entities() -> None:
    """DefaultQuotaCallback's order, most specific first; removing an entity uncovers the next one."""
    m = produce_manager(Clock())
    levels: list[tuple[Any, Any]] = [
        ("alice", "app"), ("alice", DEFAULT), ("alice", None), (DEFAULT, "app"), (DEFAULT, DEFAULT),
        (DEFAULT, None), (None, "app"), (None, DEFAULT)]
    for i, (user, client) in enumerate(levels):
        m.update_quota(user, client, 1000.0 * (i + 1))
    for i, (user, client) in enumerate(levels):
        assert m.quota("alice", "app") == 1000.0 * (i + 1), (user, client)
        m.update_quota(user, client, None)
    assert m.quota("alice", "app") is None


def test_precedence_for_other_users_and_clients() -> None:
    m = produce_manager(Clock())
    m.update_quota("alice", None, 10.0)
    m.update_quota(DEFAULT, None, 20.0)
    m.update_quota(None, "app", 30.0)
    assert m.quota("alice", "app") == 10.0  # a user quota wins over a client-id quota
    assert m.quota("bob", "app") == 20.0  # the default user quota too
    m.update_quota(DEFAULT, None, None)
    assert m.quota("bob", "app") == 30.0
    assert m.quota("bob", "other") is None


def test_clients_sharing_a_quota_share_its_measure() -> None:
    """With only client-id quotas, every user of a client id counts against the same quota; with a
    default client-id quota each client id has its own."""
    m = produce_manager(Clock())
    m.update_quota(None, "app", 100.0)
    assert m.sensors_for("alice", "app") is m.sensors_for("bob", "app")
    m.update_quota(None, DEFAULT, 100.0)
    assert m.sensors_for("alice", "x") is not m.sensors_for("alice", "y")
    assert m.sensors_for("alice", "x").tags == ("", "x")


def test_user_quotas_measure_per_user() -> None:
    m = produce_manager(Clock())
    m.update_quota(DEFAULT, None, 100.0)
    assert m.sensors_for("alice", "a").tags == ("alice", "")
    assert m.sensors_for("alice", "a") is m.sensors_for("alice", "b")


def test_a_changed_quota_applies_to_existing_sensors() -> None:
    clock = Clock()
    m = produce_manager(clock)
    m.update_quota(None, "app", 100.0)
    sensors = m.sensors_for("u", "app")
    assert m.record(sensors, 5000) > 0
    m.update_quota(None, "app", 1e9)
    assert m.record(sensors, 1) == 0
    m.update_quota(None, "app", None)
    assert sensors.bound is None and m.record(sensors, 1e9) == 0
    assert m.enabled  # a level once used stays on until restart, as in Kafka


def test_fetch_cap_is_the_quota_over_the_window() -> None:
    m = ClientQuotaManager("Fetch", 11, 1, Clock())
    assert m.max_value_in_window("u", "c") == math.inf
    m.update_quota(None, "c", 1024.0)
    assert m.max_value_in_window("u", "c") == 1024.0 * 10
    assert m.max_value_in_window("u", "other") == math.inf


def test_unrecord_takes_bytes_back() -> None:
    clock = Clock()
    m = ClientQuotaManager("Fetch", 11, 1, clock)
    m.update_quota(None, "c", 100.0)
    sensors = m.sensors_for("u", "c")
    assert m.record(sensors, 5000) > 0
    m.unrecord(sensors, 5000)
    assert m.record(sensors, 0) == 0


def test_token_bucket() -> None:
    bucket = TokenBucket(10, 1000)
    assert bucket.measure(5.0, 0) == 50  # starts full: samples * window * quota
    bucket.record(70, 5.0, 0)
    assert bucket.measure(5.0, 0) == -20
    assert bucket.measure(5.0, 2000) == -10
    assert bucket.measure(5.0, 100_000) == 50  # never above the burst


def test_strict_and_permissive_mutation_quotas() -> None:
    """ControllerMutationQuotaManagerTest: a strict quota refuses once the bucket is empty, and the
    throttle time is the time to refill it to zero; a permissive one accepts and throttles."""
    clock = Clock()
    m = ControllerMutationQuotaManager(10, 1, clock)
    m.update_quota(None, "admin", 10.0)  # burst 100
    sensors = m.sensors_for("ANONYMOUS", "admin")
    strict = StrictMutationQuota(m, sensors)
    strict.record(30)
    strict.record(80)  # allowed: tokens were left, the bucket goes to -10
    assert strict.throttle_time() == 0
    with pytest.raises(ThrottlingQuotaExceeded) as refused:
        strict.record(1)
    assert refused.value.throttle_ms == 1000 and strict.throttle_time() == 1000
    clock.sleep(400)
    assert strict.throttle_time() == 600  # counted down while the request waited
    clock.sleep(600)
    strict.record(5)  # refilled to zero: accepted again

    permissive = PermissiveMutationQuota(m, sensors)
    permissive.record(20)
    assert permissive.throttle_time() == 2500  # -25 tokens at 10 a second


def test_record_controller_mutation_uses_the_request_quota() -> None:
    assert record_controller_mutation(1_000_000) is None  # no quota set: unbounded
    clock = Clock()
    m = ControllerMutationQuotaManager(10, 1, clock)
    m.update_quota(None, "admin", 1.0)
    token = current_mutation_quota.set(StrictMutationQuota(m, m.sensors_for("u", "admin")))
    try:
        assert record_controller_mutation(20) is None
        assert record_controller_mutation(1) == (ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                                 "The throttling quota has been exceeded.")
    finally:
        current_mutation_quota.reset(token)


def test_entity_configs_from_zookeeper_apply_whole() -> None:
    quotas = QuotaManagers(11, 1, 11, 1)
    assert not quotas.active
    quotas.apply_entity_config("alice", None, {"SCRAM-SHA-256": "salt=...", "iterations": "4096"})
    assert not quotas.active  # a credential is no quota
    quotas.apply_entity_config("alice", None, {"producer_byte_rate": "1024", "request_percentage": "12.5"})
    assert quotas.active
    assert quotas.produce.quota("alice", "x") == 1024.0 and quotas.request.quota("alice", "x") == 12.5
    assert quotas.fetch.quota("alice", "x") is None
    quotas.apply_entity_config("alice", None, {"request_percentage": "12.5"})  # producer_byte_rate removed
    assert quotas.produce.quota("alice", "x") is None
    assert quotas.user_of(type("P", (), {"name": "CN=a b,O=c*"})()) == "CN%3Da%20b%2CO%3Dc%2A"  # type: ignore[arg-type]


class FakeNanos:
    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns


def test_loop_time_counts_running_steps_not_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNanos()
    monkeypatch.setattr(loop_time, "_now_ns", fake)

    async def handler() -> str:
        fake.ns += 5
        await asyncio.sleep(0)
        fake.ns += 7
        return "done"

    async def main() -> tuple[str, int]:
        timed = loop_time.LoopTimed(handler())

        async def elsewhere() -> None:  # another task running meanwhile: not the handler's time
            fake.ns += 1000

        other = asyncio.ensure_future(elsewhere())
        result = await timed
        await other
        return result, timed.busy_ns

    assert asyncio.run(main()) == ("done", 12)


def test_loop_time_passes_errors_and_cancellation_through() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad request")

    async def waiting(ev: asyncio.Event) -> None:
        await ev.wait()

    async def main() -> None:
        with pytest.raises(ValueError, match="bad request"):
            await loop_time.LoopTimed(failing())
        ev = asyncio.Event()
        task = asyncio.ensure_future(_await(loop_time.LoopTimed(waiting(ev))))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


async def _await(awaitable: Any) -> Any:
    return await awaitable
