"""The pieces behind the percentile series and request counts, with known inputs.

Percentiles follow Yammer's UniformSnapshot (Kafka's histograms report them); the reservoir keeps the
last 1028 observations and uses those of the last five minutes; request phases add up to the total;
error codes are counted as Kafka's errorCounts counts them, and produce failures as its ReplicaManager
marks them.
"""

from __future__ import annotations

from collections import deque

import pytest

from broker.metrics_quantiles import (
    QUANTILES,
    RESERVOIR_SIZE,
    WINDOW_S,
    SummaryFamily,
    new_reservoir,
    percentile,
    percentiles,
    recent,
)
from broker.metrics_requests import RequestMetricsRegistry
from broker.metrics_timing import RequestClock
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import Request, request_type, response_type
from protocol.schema import Struct


def test_percentile_interpolates_between_ranks_as_yammer() -> None:
    ordered = [1.0, 2.0, 3.0, 4.0, 5.0]
    # pos = q * (n + 1): 0.5 -> 3rd value; 0.75 -> 4.5 (between 4th and 5th); beyond n -> the last.
    assert percentile(ordered, 0.5) == 3.0
    assert percentile(ordered, 0.75) == 4.5
    assert percentile(ordered, 0.99) == 5.0
    assert percentile(ordered, 0.1) == 1.0  # pos 0.6 < 1: the first
    assert percentile([], 0.99) == 0.0  # an empty Yammer snapshot reports 0
    values = [float(v) for v in range(1, 1001)]
    got = dict(percentiles(reversed(values)))
    assert list(got) == [label for label, _ in QUANTILES]
    assert got["0.50"] == pytest.approx(500.5)
    assert got["0.99"] == pytest.approx(990.99)
    assert got["0.999"] == pytest.approx(999.999)


def test_reservoir_keeps_the_last_observations_of_the_window() -> None:
    rows = new_reservoir()
    for i in range(RESERVOIR_SIZE + 500):
        rows.append((float(i), float(i)))
    assert len(rows) == RESERVOIR_SIZE and rows[0][1] == 500.0  # the oldest went
    now = float(RESERVOIR_SIZE + 500)
    in_window = recent(rows, now)
    assert [r[1] for r in in_window] == [float(i) for i in range(int(now - WINDOW_S), int(now))]
    # Nothing in the window: the last observations stand, as a Yammer reservoir keeps them.
    assert recent(rows, now + 10 * WINDOW_S) == list(rows)
    assert recent(deque(), now) == []


def test_summary_family_has_quantiles_count_and_sum() -> None:
    family = SummaryFamily("kafka_x_timems", "doc")
    family.add({"request": "Produce"}, [3.0, 1.0, 2.0], 7, 12.5)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.metric.samples}
    assert samples[("kafka_x_timems", (("quantile", "0.50"), ("request", "Produce")))] == 2.0
    assert samples[("kafka_x_timems", (("quantile", "0.999"), ("request", "Produce")))] == 3.0
    assert samples[("kafka_x_timems_count", (("request", "Produce"),))] == 7
    assert samples[("kafka_x_timems_sum", (("request", "Produce"),))] == 12.5
    assert family.metric.type == "summary"


class _Header:
    def __init__(self, api_key: int, api_version: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = 1
        self.client_id = "test"


def _request(api_key: int, version: int, body: Struct) -> Request:
    return Request(_Header(api_key, version), body, 100)  # type: ignore[arg-type]


def _produce_response(codes: list[int]) -> Struct:
    rs = response_type(ApiKey.PRODUCE)
    return rs(responses=[rs.TopicProduceResponse(name="t", partition_responses=[
        rs.PartitionProduceResponse(index=i, error_code=code, base_offset=-1) for i, code in enumerate(codes)])])


def test_request_phases_add_up_and_go_to_each_name() -> None:
    registry = RequestMetricsRegistry(dict)
    clock = RequestClock()
    fetch = request_type(ApiKey.FETCH)(replica_id=-1)
    body = response_type(ApiKey.FETCH)(responses=[])
    # read at 10.000, handler from 10.001 to 10.511 of which 0.5 s parked, encoded at 10.512, written at 10.515
    clock.remote_s = 0.5
    registry.on_response(clock, _request(ApiKey.FETCH, 12, fetch), body, 10.001, 10.511)
    clock.finish(10.000, 10.512, 10.515)
    for name in ("FetchConsumer", "Fetch"):
        m = registry.by_name[name]
        (end, queue, local, remote, response_queue, send, total), = m.rows
        assert end == 10.515 and m.count == 1 and m.versions == {12: 1}
        assert queue == pytest.approx(1.0) and local == pytest.approx(10.0) and remote == pytest.approx(500.0)
        assert response_queue == pytest.approx(1.0) and send == pytest.approx(3.0)
        assert total == pytest.approx(queue + local + remote + response_queue + send) == pytest.approx(515.0)
    assert "FetchFollower" in registry.by_name and registry.by_name["FetchFollower"].count == 0
    assert registry.by_name["Fetch"].errors == {ErrorCode.NONE: 1}  # the top-level error code
    assert clock.targets is None  # recorded once


def test_produce_failures_count_as_kafka_replica_manager_marks_them() -> None:
    registry = RequestMetricsRegistry(dict)
    clock = RequestClock()
    produce = request_type(ApiKey.PRODUCE)(acks=-1, topic_data=[])
    codes = [ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_LEADER_OR_FOLLOWER,
             ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.INVALID_RECORD]
    registry.on_response(clock, _request(ApiKey.PRODUCE, 9, produce), _produce_response(codes), 1.0, 1.0)
    # All five are error counts (Kafka's errorCounts); the refused one never reached the log; NOT_LEADER
    # is expected; NOT_ENOUGH_REPLICAS and INVALID_RECORD are failures.
    assert registry.by_name["Produce"].errors == {int(c): 1 for c in codes}
    total, failed, fetched, fetch_failed = registry.topic_requests["t"]
    assert (total, failed, fetched, fetch_failed) == (4, 2, 0, 0)
    assert registry.all_topic_requests == [4, 2, 0, 0]
    registry.forget_topics({"other"})
    assert registry.topic_requests == {}


def test_errors_of_any_response_are_counted_at_every_level() -> None:
    registry = RequestMetricsRegistry(dict)
    clock = RequestClock()
    mt = response_type(ApiKey.METADATA)
    body = mt(topics=[
        mt.MetadataResponseTopic(name="a", error_code=ErrorCode.NONE, partitions=[
            mt.MetadataResponsePartition(partition_index=0, error_code=ErrorCode.LEADER_NOT_AVAILABLE),
            mt.MetadataResponsePartition(partition_index=1, error_code=ErrorCode.NONE)]),
        mt.MetadataResponseTopic(name="b", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partitions=[])])
    request = _request(ApiKey.METADATA, 12, request_type(ApiKey.METADATA)(topics=None))
    registry.on_response(clock, request, body, 1.0, 1.0)
    registry.on_response(clock, request, body, 1.0, 1.0)
    assert registry.by_name["Metadata"].errors == {
        ErrorCode.NONE: 4, ErrorCode.LEADER_NOT_AVAILABLE: 2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 2}
