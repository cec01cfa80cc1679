"""The in-process append benchmark (tests/bench_append.py) appends what it says it appends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests import bench_append as ba


def test_requests_are_full_idempotent_batches_with_sequences_that_continue() -> None:
    bodies = ba.produce_requests(partitions=3, per_request=2, requests=3)
    data = [pd for body in bodies for t in body.topic_data for pd in t.partition_data]
    assert [pd.index for pd in data] == [0, 1, 2, 0, 1, 2]
    # base sequence (bytes 53..56 of a v2 batch) goes on by one batch's records per partition
    sequences = [int.from_bytes(pd.records[53:57], "big") for pd in data]
    assert sequences == [0, 0, 0, ba.RECORDS_PER_BATCH, ba.RECORDS_PER_BATCH, ba.RECORDS_PER_BATCH]
    assert 16_000 < len(data[0].records) <= 16_384


def test_the_leader_appends_every_batch(tmp_path: Path) -> None:
    cpu, size = ba.append_cpu(str(tmp_path), partitions=4, per_request=2, requests=6)
    assert cpu > 0 and size > 16_000
    # append_cpu raises on any refused partition; check the offsets too, on a leader of our own.
    leader = ba.Leader(str(tmp_path), 2)
    try:
        for body in ba.produce_requests(partitions=2, per_request=2, requests=3):
            resp = asyncio.run(leader.rm.append_records(body, 9))
            assert [p.error_code for p in resp.responses[0].partition_responses] == [0, 0]
        assert [leader.rm.partitions[("p", i)].log_end_offset for i in range(2)] == [3 * ba.RECORDS_PER_BATCH] * 2
    finally:
        leader.close()


def test_the_follower_appends_the_leaders_batches(tmp_path: Path) -> None:
    pieces = ba.fetched_pieces(str(tmp_path), batches=6, per_fetch=2)
    assert len(pieces) == 3 and all(32_000 < len(p) <= 2 * 16_384 for p in pieces)
    # Offsets as the leader assigned them: the pieces continue each other from 0.
    assert [int.from_bytes(p[:8], "big") for p in pieces] == [0, 2 * ba.RECORDS_PER_BATCH, 4 * ba.RECORDS_PER_BATCH]
    assert ba.follower_append_cpu(str(tmp_path), pieces) >= 0
