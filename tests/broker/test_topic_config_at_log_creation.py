"""A log created by a LeaderAndIsr carries its topic's overrides, however late this broker learns them.

A broker learns a topic's overrides three ways: from the CreateTopics it handled itself (once ZooKeeper
answered the create), from its config change listener (a pass after ``/config/topics`` changed), and,
as Kafka's log creation does, by reading ZooKeeper when it creates the log. The controller's LeaderAndIsr
can arrive before either of the first two. Before, a partition registered with the defaults it had read
before its files were written, and an override applied meanwhile found no partition to update: a topic
created with ``segment.bytes`` or ``cleanup.policy=compact`` kept the broker defaults until its next
config change.

Real ZooKeeper, a real LogManager and ReplicaManager, in-process (no controller): the LeaderAndIsr's
partition states are what ``prepare_become_leader_or_follower`` reads from one.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker.config_changes import load_topic_overrides
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from config.registry import BrokerConfig, LogConfig
from controller.zk_client import KafkaZkClient
from storage.log_manager import LogManager

pytestmark = pytest.mark.timeout(60)

OVERRIDES = {"segment.bytes": "1048576", "cleanup.policy": "compact", "max.message.bytes": "200000"}


def topic_states(topic: str, topic_id: uuid.UUID, partitions: int) -> list[Any]:
    return [SimpleNamespace(topic_name=topic, topic_id=topic_id, partition_states=[
        SimpleNamespace(partition_index=i, is_new=True) for i in range(partitions)])]


class BrokerSide:
    """What a broker keeps: its in-memory overrides, and the ReplicaManager that reads them."""

    def __init__(self, data_dir: Path, zk: KafkaZkClient | None, *more_dirs: Path) -> None:
        self.config = BrokerConfig()
        self.overrides: dict[str, dict[str, str]] = {}
        self.log_manager = LogManager([str(d) for d in (data_dir, *more_dirs)], broker_id=0, cluster_id="c",
                                      default_config=LogConfig.from_broker(self.config, {}))
        self.log_manager.startup()
        self.zk = zk
        self.rm = ReplicaManager(0, self.config, self.log_manager, MetadataCache(0), self.topic_config,
                                 load_topic_configs=self.load if zk is not None else None)

    def topic_config(self, topic: str) -> LogConfig:
        return LogConfig.from_broker(self.config, self.overrides.get(topic, {}), strict=False)

    async def load(self, topics: list[str]) -> None:
        assert self.zk is not None
        loop = asyncio.get_running_loop()
        await load_topic_overrides(self.zk, lambda fn, *a: loop.run_in_executor(None, fn, *a), topics,
                                   self.overrides)

    def set_topic_overrides(self, topic: str, overrides: dict[str, str]) -> None:
        """As Broker.set_topic_overrides: the CreateTopics handler or the change listener."""
        self.overrides[topic] = dict(overrides)
        self.rm.on_topic_config_change(topic)

    def close(self) -> None:
        self.log_manager.shutdown()


def assert_has_overrides(side: BrokerSide, topic: str, partitions: int) -> None:
    for i in range(partitions):
        p = side.rm.partitions[(topic, i)]
        for where in (p.config, p.log.config):
            assert where.segment_bytes == 1048576, (i, where.segment_bytes)
            assert tuple(where.cleanup_policy) == ("compact",), where.cleanup_policy
            assert where.max_message_bytes == 200000


def test_overrides_are_read_from_zookeeper_when_the_log_is_created(tmp_path: Path, zk: KafkaZkClient) -> None:
    # The topic was created through another broker: ZooKeeper has its overrides, this broker has not
    # heard of them yet (its change listener has not run).
    topic = "created-elsewhere"
    topic_id = zk.create_topic(topic, {0: [0], 1: [0]}, OVERRIDES)
    side = BrokerSide(tmp_path / "data", zk)
    try:
        asyncio.run(side.rm.prepare_become_leader_or_follower(topic_states(topic, topic_id, 2)))
        assert_has_overrides(side, topic, 2)
        assert side.overrides[topic] == OVERRIDES
    finally:
        side.close()


def test_an_override_applied_while_the_log_files_are_written_is_kept(tmp_path: Path) -> None:
    # No ZooKeeper read: the overrides arrive through set_topic_overrides (the CreateTopics handler
    # resuming, or the listener's pass) exactly while LogManager.create_logs runs off the loop.
    topic = "created-here"
    side = BrokerSide(tmp_path / "data", None)
    create_logs = side.log_manager.create_logs
    applied = threading.Event()

    async def scenario() -> None:
        loop = asyncio.get_running_loop()

        def slow_create_logs(specs: Any) -> Any:
            # Runs in the executor: the loop applies the override meanwhile, then the files are written.
            loop.call_soon_threadsafe(lambda: (side.set_topic_overrides(topic, OVERRIDES), applied.set()))
            assert applied.wait(10), "the loop did not apply the override"
            return create_logs(specs)

        side.log_manager.create_logs = slow_create_logs  # type: ignore[method-assign]
        await side.rm.prepare_become_leader_or_follower(topic_states(topic, uuid.uuid4(), 3))

    try:
        asyncio.run(scenario())
        assert applied.is_set()
        assert_has_overrides(side, topic, 3)
    finally:
        side.close()


def test_a_broker_whose_zookeeper_read_fails_keeps_what_it_knows(tmp_path: Path, zk: KafkaZkClient) -> None:
    topic = "read-fails"
    topic_id = zk.create_topic(topic, {0: [0]}, {"segment.bytes": "2097152"})
    side = BrokerSide(tmp_path / "data", zk)
    side.overrides[topic] = dict(OVERRIDES)  # what the CreateTopics handler already set
    zk.close()  # every read now fails
    try:
        asyncio.run(side.rm.prepare_become_leader_or_follower(topic_states(topic, topic_id, 1)))
        assert_has_overrides(side, topic, 1)
    finally:
        side.close()


def test_a_config_change_reaches_the_partitions_of_its_topic_only(tmp_path: Path) -> None:
    side = BrokerSide(tmp_path / "data", None)

    async def scenario() -> None:
        await side.rm.prepare_become_leader_or_follower(topic_states("changed", uuid.uuid4(), 3))
        await side.rm.prepare_become_leader_or_follower(topic_states("unchanged", uuid.uuid4(), 2))
        await side.rm.stop_replica(("changed", 2), delete=False)  # no longer hosted here
        side.set_topic_overrides("changed", OVERRIDES)
        side.set_topic_overrides("never-hosted", OVERRIDES)

    try:
        asyncio.run(scenario())
        assert_has_overrides(side, "changed", 2)
        assert ("changed", 2) not in side.rm.partitions
        for i in range(2):
            p = side.rm.partitions[("unchanged", i)]
            assert p.config.segment_bytes == p.log.config.segment_bytes == 1073741824
    finally:
        side.close()


def test_a_config_change_during_a_move_between_log_dirs_reaches_the_moved_log(tmp_path: Path) -> None:
    side = BrokerSide(tmp_path / "d1", None, tmp_path / "d2")
    topic, tp = "moving", ("moving", 0)

    async def scenario() -> None:
        await side.rm.prepare_become_leader_or_follower(topic_states(topic, uuid.uuid4(), 1))
        p = side.rm.partitions[tp]
        source = side.log_manager.log_dir_of(*tp)
        target = next(str(d) for d in (tmp_path / "d1", tmp_path / "d2") if str(d) != source)
        p.future_log = side.log_manager.create_future_log(topic, 0, target, topic_id=p.topic_id, config=p.config)
        side.set_topic_overrides(topic, OVERRIDES)  # while the copy runs
        assert p.future_log.config.segment_bytes == 1048576
        p.replace_log_with_future(side.log_manager.replace_current_with_future(*tp))
        assert side.log_manager.log_dir_of(*tp) == target

    try:
        asyncio.run(scenario())
        assert_has_overrides(side, topic, 1)
    finally:
        side.close()
