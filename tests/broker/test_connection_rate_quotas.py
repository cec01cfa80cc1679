"""KIP-612 connection creation rates, with Kafka's Rate arithmetic (11 samples of 1 s: a burst is
measured over at least 10 s, so a limit of N a second lets 10 * N connections through at once)."""

from __future__ import annotations

from broker.connection_rate_quotas import IP_SENSOR_EXPIRY_MS, ConnectionRateQuotas
from config.registry import INT32_MAX


def quotas(broker_limit: int = INT32_MAX) -> tuple[ConnectionRateQuotas, list[float]]:
    now = [1_000_000.0]
    return ConnectionRateQuotas(broker_limit, samples=11, window_s=1, clock=lambda: now[0]), now


def test_broker_rate_delays_the_connection_past_the_limit_by_kafkas_throttle_time() -> None:
    q, _now = quotas(broker_limit=2)
    assert [q.record_connection("PLAINTEXT", protected=False) for _ in range(20)] == [0] * 20
    # The 21st: 2.1 a second over 10 s against 2: (2.1 - 2) / 2 * 10,000 ms = 500 ms.
    assert q.record_connection("PLAINTEXT", protected=False) == 500
    # Bounded by one quota window (ConnectionQuotas' maxThrottleTimeMs).
    assert q.record_connection("PLAINTEXT", protected=False) == 1000
    assert q.accept_throttled == {"PLAINTEXT": 2} and q.accept_throttle_ms == {"PLAINTEXT": 1500}
    # The protected inter-broker listener is neither counted nor held.
    assert q.record_connection("REPLICATION", protected=True) == 0


def test_broker_rate_limit_is_dynamic_and_zero_holds_every_connection_a_window() -> None:
    q, _now = quotas()
    assert all(q.record_connection("L", False) == 0 for _ in range(100))
    q.set_broker_limit(0)
    assert q.record_connection("L", False) == 1000


def test_ip_rate_throttles_only_that_address_and_takes_the_connection_back() -> None:
    q, now = quotas(broker_limit=3)
    q.apply_ip_config("127.0.0.2", {"connection_creation_rate": "1"})
    assert [q.record_ip_connection("L", False, "127.0.0.2") for _ in range(10)] == [0] * 10
    for _ in range(11):  # the broker counts each connection first, the 11th from 127.0.0.2 included
        assert q.record_connection("L", False) == 0
    # The 11th from the address: 1.1 against 1 over 10 s is 1,000 ms, the bound.
    assert q.record_ip_connection("L", False, "127.0.0.2") == 1000
    assert q.ip_throttled == {"L": 1}
    # Taken back out of the broker's rate too: 10 of its 30 are used, so 20 more fit and the next is held.
    assert [q.record_connection("L", False) for _ in range(20)] == [0] * 20
    assert q.record_connection("L", False) > 0
    # Another address has no limit of its own, and no default is set.
    assert q.record_ip_connection("L", False, "127.0.0.3") == 0
    # A default applies to addresses without an override; removing the override makes it theirs.
    q.apply_ip_config(None, {"connection_creation_rate": "2"})
    q.apply_ip_config("127.0.0.2", {})
    assert q.ip_limit("127.0.0.2") == 2 and q.ip_limit("10.0.0.1") == 2
    q.apply_ip_config(None, {})
    assert q.ip_limit("10.0.0.1") == INT32_MAX
    # Eleven seconds later the burst has left the window.
    now[0] += 11_000
    q.apply_ip_config("127.0.0.2", {"connection_creation_rate": "1.0"})  # stored as a double by some tools
    assert q.record_ip_connection("L", False, "127.0.0.2") == 0


def test_an_addresss_rate_is_forgotten_after_an_hour_without_connections() -> None:
    q, now = quotas()
    q.apply_ip_config(None, {"connection_creation_rate": "5"})
    for i in range(100):
        q.record_ip_connection("L", False, f"10.0.{i}.1")
    assert len(q._ip_sensors) == 100
    now[0] += IP_SENSOR_EXPIRY_MS + 60_000
    q.record_ip_connection("L", False, "10.1.0.1")
    assert set(q._ip_sensors) == {"10.1.0.1"}


def test_listener_rate_holds_its_own_connections_the_protected_listener_included() -> None:
    q, _now = quotas(broker_limit=100)
    q.set_listener_limit("CLIENTS", 1)
    q.set_listener_limit("INTERNAL", 2)
    # Ten a second's burst fits on CLIENTS, the eleventh waits for the listener's rate (1.1 against 1 over
    # 10 s: 1,000 ms) though the broker's is far from its limit.
    assert [q.record_connection("CLIENTS", False) for _ in range(10)] == [0] * 10
    assert q.record_connection("CLIENTS", False) == 1000
    # The protected inter-broker listener skips the broker-wide rate but not its own.
    assert [q.record_connection("INTERNAL", True) for _ in range(20)] == [0] * 20
    assert q.record_connection("INTERNAL", True) == 500
    # A connection throttled by its IP is taken out of its listener's rate too.
    q.apply_ip_config("10.0.0.9", {"connection_creation_rate": "0"})
    assert q.record_connection("OTHER", False) == 0
    assert q.record_ip_connection("OTHER", False, "10.0.0.9") == 1000
    assert q._listeners["OTHER"].total(_now[0]) == 0


def test_listener_max_connections_blocks_only_its_listener() -> None:
    import asyncio

    from broker.connection_quotas import ConnectionQuotas, Limits

    async def scenario() -> None:
        limits = Limits(max_connections=10, per_listener=(("CLIENTS", 2), ("INTERNAL", 10)))
        q = ConnectionQuotas(limits, "INTERNAL", ["CLIENTS", "INTERNAL"])
        q.inc("CLIENTS", "10.0.0.1")
        q.inc("CLIENTS", "10.0.0.2")
        assert not q.slot_available("CLIENTS")  # at its own limit, far from the broker's
        assert q.slot_available("INTERNAL")
        waiter = asyncio.ensure_future(q.wait_for_slot("CLIENTS"))
        await asyncio.sleep(0)
        assert not waiter.done()
        q.dec("CLIENTS", "10.0.0.1")
        await asyncio.wait_for(waiter, 5)
        # The protected listener may pass the broker's limit, never its own.
        for i in range(10):
            q.inc("INTERNAL", f"10.1.0.{i}")
        assert not q.slot_available("INTERNAL")

    asyncio.run(scenario())
