"""Fixtures shared by the ops tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def apache_kafka() -> Iterator[Any]:
    """A real Apache Kafka 3.9.1 broker (ZooKeeper mode) from the Maven Central jars, per module."""
    from tests.ops.kafka_broker import KafkaZkBroker

    broker = KafkaZkBroker()
    try:
        broker.start()
    except Exception as e:  # pragma: no cover - no Java or no jars
        broker.stop()
        pytest.fail(f"cannot start Apache Kafka: {e}")
    try:
        yield broker
    finally:
        broker.stop()
