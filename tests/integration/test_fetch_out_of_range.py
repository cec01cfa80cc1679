"""A consumer's fetch outside the log is answered OFFSET_OUT_OF_RANGE with -1 for the high watermark, the
last stable offset and the log start offset, as Kafka 3.9 answers it (the consumer resets by its own
auto.offset.reset rule and asks ListOffsets for the offsets)."""

from __future__ import annotations

from typing import Any

from clients.admin import WireClient
from protocol.errors import ErrorCode as E
from protocol.records import NewRecord, build_batch
from tests.integration.helpers import RawClient, unique, wait_until


def test_out_of_range_answers_minus_one(kafka_cluster: Any) -> None:
    topic = unique("out-of-range")
    WireClient(kafka_cluster.bootstrap, timeout=10.0).create_topic(topic, 1, 1)
    with RawClient(kafka_cluster.bootstrap) as raw:
        wait_until(lambda: raw.leaders(topic) == 1, 30, f"a leader for {topic}")
        assert raw.produce(topic, 0, build_batch([NewRecord(None, b"a"), NewRecord(None, b"b")])).error_code == 0
        inside = raw.fetch(topic, 0, 0, max_wait_ms=0)
        assert (inside.error_code, inside.high_watermark, inside.log_start_offset) == (E.NONE, 2, 0)
        beyond = raw.fetch(topic, 0, 100, max_wait_ms=0)
        assert beyond.error_code == E.OFFSET_OUT_OF_RANGE
        assert (beyond.high_watermark, beyond.last_stable_offset, beyond.log_start_offset) == (-1, -1, -1)
