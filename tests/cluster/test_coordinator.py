"""Group coordinator failover: the broker leading the group's ``__consumer_offsets`` partition is
SIGKILLed while a consumer group consumes and commits; the partition's new leader loads the group's
offsets and becomes coordinator, the consumer finds it and carries on, and no committed progress is
lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from protocol.api_versions import ApiKey
from tests.cluster.helpers import (
    Admin,
    KafkaPythonProducer,
    RawClient,
    longest_gap,
    read_all,
    report,
    start_broker,
    unique,
    verify,
    wait_until,
)

PARTITIONS = 3


def _coordinator(cluster: Any, group: str) -> int:
    for b in cluster.brokers:
        if not b.running:
            continue
        try:
            with RawClient(b.bootstrap, timeout=5) as raw:
                r = raw.request(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)
            if r.error_code == 0:
                return r.node_id
        except (OSError, ConnectionError):
            continue
    return -1


class GroupConsumer:
    """A kafka-python group member that commits synchronously after every non-empty poll."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                      auto_offset_reset="earliest", session_timeout_ms=10000,
                                      heartbeat_interval_ms=1000, request_timeout_ms=15000,
                                      metadata_max_age_ms=5000, reconnect_backoff_max_ms=1000,
                                      client_id=unique("group-member"))
        self.seen: list[tuple[int, int, bytes, float]] = []
        self.commits: list[float] = []
        self.commit_errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def start(self) -> GroupConsumer:
        self._thread.start()
        return self

    def _run(self) -> None:
        from kafka.errors import KafkaError

        try:
            while not self._stop.is_set():
                batch = self.consumer.poll(timeout_ms=200)
                now = time.monotonic()
                for tp, msgs in batch.items():
                    self.seen.extend((tp.partition, m.offset, m.value, now) for m in msgs)
                if batch:
                    try:
                        self.consumer.commit()
                        self.commits.append(time.monotonic())
                    except KafkaError as e:  # retried with the next poll
                        self.commit_errors.append(repr(e))
        except BaseException as e:
            self.error = e

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.consumer.close()
        if self.error is not None:
            raise AssertionError(f"group consumer crashed: {self.error!r}")


@pytest.mark.slow
def test_group_survives_coordinator_death(cluster3: Callable[..., Any]) -> None:
    from kafka import KafkaConsumer, TopicPartition

    cluster = cluster3()
    topic, group = unique("coord"), unique("group")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    producer = KafkaPythonProducer(cluster.bootstrap, topic, PARTITIONS).start()
    member = GroupConsumer(cluster.bootstrap, topic, group).start()
    try:
        wait_until(lambda: len(member.commits) >= 5, 90, "the group consuming and committing")
        coordinator = wait_until(lambda: (lambda c: (c,) if c >= 0 else None)(_coordinator(cluster, group)), 30,
                                 "the group coordinator")[0]
        t0 = time.monotonic()
        seen_before = len(member.seen)
        cluster.brokers[coordinator].kill()
        new = wait_until(lambda: (lambda c: (c,) if c not in (-1, coordinator) else None)(
            _coordinator(cluster, group)), 60, "a new coordinator")[0]
        wait_until(lambda: any(t > t0 for t in member.commits) and len(member.seen) > seen_before + 50, 90,
                   "commits through the new coordinator")
        t1 = time.monotonic()
        report("coordinator SIGKILL", new_coordinator=new,
               consume=longest_gap(sorted(s[3] for s in member.seen), t0, t1),
               commit=longest_gap(member.commits, t0, t1))
        start_broker(cluster.brokers[coordinator])
        plog = producer.stop()
        acked = len(plog.acked)
        wait_until(lambda: len({(p, o) for p, o, _, _ in member.seen}) >= acked, 90, "the group reading every record")
        member.stop()
        records = read_all(cluster.bootstrap, topic, PARTITIONS)
        verify([plog], records)
        # Everything acknowledged was seen by the group (re-deliveries after a rebalance are allowed).
        seen = {(p, o): v for p, o, v, _ in member.seen}
        for p, recs in records.items():
            for o, v in recs:
                assert seen.get((p, o)) == v, f"the group never read {p}/{o}"
        # The committed offsets (read back from the new coordinator) are at the end of each partition.
        check = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False)
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            ends = check.end_offsets(tps)
            wait_until(lambda: all(check.committed(tp) == ends[tp] for tp in tps), 60, "committed offsets at the end")
        finally:
            check.close()
    finally:
        producer.abort()
        member._stop.set()
