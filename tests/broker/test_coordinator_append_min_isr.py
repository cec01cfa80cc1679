"""The coordinators' writes (group metadata, offset commits, transaction state and markers) with acks=all
are refused before they are appended while the ISR is below min.insync.replicas, as Kafka's
appendRecordsToLeader refuses them (NOT_ENOUGH_REPLICAS), and as a client's acks=all produce is.

Appending them anyway, only to answer NOT_ENOUGH_REPLICAS_AFTER_APPEND, grew ``__consumer_offsets`` by
a record per attempt: a group whose member rejoined at once after each failed SyncGroup made a thousand
such appends a second while its offsets partition had one replica in sync.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.metadata_cache import MetadataCache
from broker.partition import PartitionError
from broker.replica_manager import ReplicaManager
from config.registry import BrokerConfig, LogConfig
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from storage.log_manager import LogManager

TP = ("__consumer_offsets", 0)


@pytest.fixture
def leader(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Broker 0 leading TP with replicas [0, 1, 2], min.insync.replicas=2, and only itself in the ISR."""
    config = BrokerConfig({"min.insync.replicas": "2"})
    lm = LogManager([str(tmp_path)], broker_id=0, cluster_id="c", default_config=LogConfig.from_broker(config, {}))
    lm.startup()
    rm = ReplicaManager(0, config, lm, MetadataCache(0), lambda _topic: LogConfig.from_broker(config, {}))
    p = rm.get_or_create_partition(TP[0], TP[1], uuid.uuid4())
    assert p.make_leader(0, [0], [0, 1, 2], 0, 0)
    yield rm, p
    lm.shutdown()


def batch() -> memoryview:
    return memoryview(bytearray(build_batch([NewRecord(b"key", b"value", 1_700_000_000_000)])))


def test_an_acks_all_coordinator_write_below_min_isr_is_refused_unwritten(leader) -> None:  # type: ignore[no-untyped-def]
    rm, p = leader
    for _ in range(3):
        with pytest.raises(PartitionError) as refused:
            rm.append_internal(TP, batch())
        assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log.log_end_offset == 0


def test_other_acks_and_a_full_isr_are_written(leader) -> None:  # type: ignore[no-untyped-def]
    rm, p = leader
    # offsets.commit.required.acks=1: no ISR rule, as in Kafka.
    assert rm.append_internal(TP, batch(), required_acks=1).first_offset == 0
    assert p.make_leader(0, [0, 1], [0, 1, 2], 1, 0)
    assert rm.append_internal(TP, batch()).first_offset == 1
    assert p.log.log_end_offset == 2
