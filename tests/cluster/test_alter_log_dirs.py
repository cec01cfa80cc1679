"""Moving replicas between a broker's log dirs (AlterReplicaLogDirs, KIP-113) while clients keep working.

Two brokers with two log dirs each (broker 1 has a third, unusable one: a file where the dir should be,
offline from the start), real ZooKeeper, kafka-python's admin client, producer and consumer. A move copies
the replica into a ``<topic>-<partition>.<uuid>-future`` directory, then swaps it in: afterwards every
acknowledged record is read back, the files are in the new dir and nothing of the partition is left in
the old one. The copy rate is capped with ``replica.alter.log.dirs.io.max.bytes.per.second`` (a dynamic
broker config, set as ``kafka-reassign-partitions --replica-alter-log-dirs-throttle`` sets it) so that a
move in progress can be watched through DescribeLogDirs, cancelled, and interrupted by a broker restart.
Kafka 3.9's own kafka-reassign-partitions and kafka-log-dirs drive and show the same moves.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.alter_log_dirs import RATE_CONFIG
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from tests.cluster.helpers import (
    Admin,
    KafkaPythonProducer,
    LiveConsumer,
    RawClient,
    overrides,
    read_all,
    start_broker,
    unique,
    verify,
    verify_live,
    wait_until,
)
from tests.conftest import attach_cluster
from tests.ops.helpers import scrape

ALD_CLIENT = frozenset({("clientId", "ReplicaAlterLogDirs")})
# Small copy rounds, so that a throttled move advances in many visible steps.
FETCH_BYTES = 64 * 1024


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[str]]:
    base = tmp_path_factory.mktemp("log-dirs")
    unusable = base / "not-a-dir"
    unusable.write_text("a file where a log dir should be\n")
    return {0: [str(base / "b0-first"), str(base / "b0-second")],
            1: [str(base / "b1-first"), str(base / "b1-second"), str(unusable)]}


@pytest.fixture(scope="module")
def module_cluster(dirs: dict[int, list[str]], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from clients.devcluster import LocalCluster

    cluster = LocalCluster(2, base_dir=tmp_path_factory.mktemp("cluster"), metrics_base_port=0,
                           broker_overrides=lambda broker_id, _port: {"log.dirs": ",".join(dirs[broker_id])},
                           overrides=overrides(**{"log.segment.delete.delay.ms": "0",
                                                  "replica.fetch.max.bytes": str(FETCH_BYTES),
                                                  "log.segment.bytes": str(256 * 1024)}))
    with cluster:
        yield cluster


@pytest.fixture
def cluster(module_cluster: Any, request: pytest.FixtureRequest) -> Any:
    return attach_cluster(request, module_cluster)


# ------------------------------------------------------------------------------------------------
# Helpers


def describe(bootstrap: str, version: int = 4) -> dict[str, Any]:
    """DescribeLogDirs of one broker: log dir -> result."""
    with RawClient(bootstrap) as raw:
        r = raw.request(ApiKey.DESCRIBE_LOG_DIRS, version, topics=None)
    assert r.error_code == 0
    return {res.log_dir: res for res in r.results}


def replicas_of(bootstrap: str, topic: str, partition: int) -> list[tuple[str, Any]]:
    """(log dir, DescribeLogDirsPartition) of each log of the partition on that broker."""
    out = []
    for d, res in describe(bootstrap).items():
        for t in res.topics:
            if t.name == topic:
                out.extend((d, p) for p in t.partitions if p.partition_index == partition)
    return out


def current_dir(bootstrap: str, topic: str, partition: int) -> str | None:
    found = [d for d, p in replicas_of(bootstrap, topic, partition) if not p.is_future_key]
    return found[0] if found else None


def moved(bootstrap: str, topic: str, partition: int, target: str) -> bool:
    """The partition's only log on that broker is its current log in ``target``."""
    logs = replicas_of(bootstrap, topic, partition)
    return [(d, p.is_future_key) for d, p in logs] == [(target, False)]


def alter(admin: Admin, moves: dict[tuple[str, int, int], str]) -> dict[tuple[str, int, int], str]:
    """kafka-python's alter_replica_log_dirs: (topic, partition, broker) -> dir; the error names back."""
    result = admin.client.alter_replica_log_dirs(moves)
    return {(r.topic, r.partition, r.broker_id): err.__name__ for r, err in result.items()}


def throttle(admin: Admin, broker_id: int, rate: int | None) -> None:
    """Set (or remove) the broker's dynamic replica.alter.log.dirs.io.max.bytes.per.second."""
    from kafka.admin import ConfigResource, ConfigResourceType

    value = ("DELETE", None) if rate is None else ("SET", str(rate))
    result = admin.client.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(broker_id),
                                                        {RATE_CONFIG: value})], raise_on_unknown=False)
    assert result == {"broker": {str(broker_id): "OK"}}, result


def entries(log_dir: str, topic: str, partition: int) -> list[str]:
    """What the log dir holds of the partition: its directory, a future or a to-be-deleted one."""
    name = f"{topic}-{partition}"
    return sorted(e for e in os.listdir(log_dir) if e == name or e.startswith(name + "."))


def assert_files_moved(source: str, target: str, topic: str, partition: int) -> None:
    assert entries(target, topic, partition) == [f"{topic}-{partition}"]
    files = os.listdir(Path(target) / f"{topic}-{partition}")
    assert "00000000000000000000.log" in files and "leader-epoch-checkpoint" in files, files
    # The old directory was renamed <topic>-<partition>.<uuid>-delete, removed after file.delete.delay.ms (0).
    wait_until(lambda: not entries(source, topic, partition), 30,
               lambda: f"nothing of {topic}-{partition} left in {source}: {entries(source, topic, partition)}")


def produce(bootstrap: str, topic: str, count: int, size: int = 1000) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=32 * 1024)
    try:
        for i in range(count):
            producer.send(topic, key=str(i).encode(), value=f"{i}:".encode().ljust(size, b"x"), partition=0)
        producer.flush(60)
    finally:
        producer.close(10)


def read_values(bootstrap: str, topic: str) -> list[bytes]:
    return [v for _o, v in read_all(bootstrap, topic, 1)[0]]


# ------------------------------------------------------------------------------------------------
# Tests


def test_leader_and_follower_replicas_move_while_clients_keep_working(cluster: Any, dirs: dict[int, list[str]]
                                                                      ) -> None:
    topic = unique("move")
    brokers = cluster.brokers
    with Admin(cluster.bootstrap) as admin:
        # Broker 0 leads partition 0 and follows partition 1; broker 1 the other way round.
        admin.create_topic(topic, assignment={0: [0, 1], 1: [1, 0]}, configs={"min.insync.replicas": "2"})
        producer = KafkaPythonProducer(cluster.bootstrap, topic, 2).start()
        consumer = LiveConsumer(cluster.bootstrap, topic, 2).start()
        try:
            producer.wait_acks(100)
            plan: dict[tuple[str, int, int], str] = {}
            sources = {}
            for b in (0, 1):
                for p in (0, 1):
                    src = current_dir(brokers[b].bootstrap, topic, p)
                    assert src is not None and src in dirs[b][:2]
                    sources[(topic, p, b)] = src
                    plan[(topic, p, b)] = next(d for d in dirs[b][:2] if d != src)
            assert alter(admin, plan) == {k: "NoError" for k in plan}
            for (t, p, b), target in plan.items():
                wait_until(lambda t=t, p=p, b=b, target=target: moved(brokers[b].bootstrap, t, p, target), 60,
                           f"{t}-{p} on broker {b} moved to {target}")
            seen = consumer.count()
            producer.wait_acks(100)  # producing goes on, to the moved leaders and followers
            wait_until(lambda: consumer.count() >= seen + 50, 30, "the consumer reading on")
        finally:
            plog = producer.stop()
            consumed = consumer.stop()
        assert plog.ack_count() >= 200 and not plog.failed, (plog.ack_count(), plog.failed[:3])
        records = read_all(cluster.bootstrap, topic, 2)
        verify([plog], records)
        verify_live(consumed, records)
        for key, target in plan.items():
            assert_files_moved(sources[key], target, key[0], key[1])
        # Both replicas of each partition are still in sync.
        for p in (0, 1):
            admin.wait_isr(topic, p, [0, 1], 30)


def test_errors_and_no_ops_as_kafka(cluster: Any, dirs: dict[int, list[str]]) -> None:
    topic = unique("errors")
    b0, b1 = cluster.brokers
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, assignment={0: [1, 0]})
        here = current_dir(b0.bootstrap, topic, 0)
        assert here is not None
        assert alter(admin, {
            (topic, 0, 0): "/no/such/log/dir",                 # not one of log.dirs
            (topic, 0, 1): dirs[1][2],                          # broker 1's offline dir
            ("no-such-topic", 0, 0): dirs[0][0],
        }) == {(topic, 0, 0): "LogDirNotFoundError", (topic, 0, 1): "KafkaStorageError",
               ("no-such-topic", 0, 0): "UnknownTopicOrPartitionError"}
        assert describe(b1.bootstrap)[dirs[1][2]].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        # The dir the replica is in already: nothing to do, no future log.
        assert alter(admin, {(topic, 0, 0): here}) == {(topic, 0, 0): "NoError"}
        assert [(d, p.is_future_key) for d, p in replicas_of(b0.bootstrap, topic, 0)] == [(here, False)]
        assert entries(here, topic, 0) == [f"{topic}-0"]

        # A replica broker 0 does not host yet: REPLICA_NOT_AVAILABLE, and the dir is remembered for it. The
        # dir chosen is the one broker 0 would not pick by itself (it picks the one with fewer partitions).
        other = unique("later")
        admin.create_topic(other, assignment={0: [1]})
        counts = {d: sum(len(t.partitions) for t in res.topics) for d, res in describe(b0.bootstrap).items()}
        wish = max(dirs[0], key=lambda d: (counts[d], dirs[0].index(d)))
        assert alter(admin, {(other, 0, 0): wish}) == {(other, 0, 0): "ReplicaNotAvailableError"}
        from kafka import TopicPartition

        admin.client.alter_partition_reassignments({TopicPartition(other, 0): [1, 0]})
        wait_until(lambda: current_dir(b0.bootstrap, other, 0) is not None, 60, f"broker 0 hosting {other}-0")
        assert current_dir(b0.bootstrap, other, 0) == wish
        assert entries(wish, other, 0) == [f"{other}-0"]


def test_describe_log_dirs_shows_the_future_replica_while_it_copies(cluster: Any, dirs: dict[int, list[str]]
                                                                      ) -> None:
    topic = unique("watch")
    b0 = cluster.brokers[0]
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, assignment={0: [0]})
        produce(cluster.bootstrap, topic, 3000)  # about 3 MB
        source = current_dir(b0.bootstrap, topic, 0)
        assert source is not None
        target = next(d for d in dirs[0] if d != source)
        throttle(admin, 0, 200_000)
        try:
            assert alter(admin, {(topic, 0, 0): target}) == {(topic, 0, 0): "NoError"}

            def future() -> Any:
                logs = dict((d, p) for d, p in replicas_of(b0.bootstrap, topic, 0) if p.is_future_key)
                return logs.get(target)

            first = wait_until(lambda: (lambda f: f if f is not None and f.partition_size > 0 else None)(future()),
                               30, "the future replica with data")
            cur = dict(replicas_of(b0.bootstrap, topic, 0))[source]
            assert not cur.is_future_key and cur.offset_lag == 0
            assert 0 < first.offset_lag < 3000 and first.partition_size < cur.partition_size
            assert [e for e in entries(target, topic, 0) if e.endswith("-future")], entries(target, topic, 0)
            # It advances while throttled: the lag shrinks.
            wait_until(lambda: (lambda f: f is not None and f.offset_lag < first.offset_lag)(future()), 30,
                       "the future replica catching up")
            # The log cleaner leaves the partition alone while it moves (Kafka's abortAndPauseCleaning).
            assert f"The cleaning for partition {topic}-0 is aborted and paused" in b0.log_text()
            # Kafka's ReplicaAlterLogDirsManager gauges show the move.
            mover = scrape(b0.metrics_url)
            assert 0 < mover[("kafka_server_replicaalterlogdirsmanager_maxlag", ALD_CLIENT)] <= 3000
            assert mover[("kafka_server_replicaalterlogdirsmanager_failedpartitionscount", ALD_CLIENT)] == 0
            assert mover[("kafka_server_replicaalterlogdirsmanager_deadthreadcount", ALD_CLIENT)] == 0
            # Every DescribeLogDirs version shows it (is_future_key and offset_lag are in v0).
            for v in range(5):
                futures = [(d, p.is_future_key) for d, res in describe(b0.bootstrap, v).items() for t in res.topics
                           if t.name == topic for p in t.partitions if p.is_future_key]
                assert futures == [(target, True)], (v, futures)

            # Moving it back to where it is cancels the move: the future replica goes.
            assert alter(admin, {(topic, 0, 0): source}) == {(topic, 0, 0): "NoError"}
            wait_until(lambda: moved(b0.bootstrap, topic, 0, source), 30, "the move cancelled")
            wait_until(lambda: not entries(target, topic, 0), 30, f"the future directory gone from {target}")

            # Again, then without the throttle it finishes.
            assert alter(admin, {(topic, 0, 0): target}) == {(topic, 0, 0): "NoError"}
            wait_until(lambda: future() is not None, 30, "the future replica again")
        finally:
            throttle(admin, 0, None)
        wait_until(lambda: moved(b0.bootstrap, topic, 0, target), 60, f"{topic}-0 moved to {target}")
        values = read_values(cluster.bootstrap, topic)
        assert [v.split(b":")[0] for v in values] == [str(i).encode() for i in range(3000)]
        assert_files_moved(source, target, topic, 0)
        assert scrape(b0.metrics_url)[("kafka_server_replicaalterlogdirsmanager_maxlag", ALD_CLIENT)] == 0
        wait_until(lambda: f"Cleaning for partition {topic}-0 is resumed" in b0.log_text(), 30, "cleaning resumed")


@pytest.mark.slow  # about 11 s: make test keeps the other moves
def test_a_move_survives_a_broker_restart(cluster: Any, dirs: dict[int, list[str]]) -> None:
    topic = unique("resume")
    b0 = cluster.brokers[0]
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, assignment={0: [0]})
        produce(cluster.bootstrap, topic, 1500)
        source = current_dir(b0.bootstrap, topic, 0)
        assert source is not None
        target = next(d for d in dirs[0] if d != source)
        throttle(admin, 0, 1)  # one round of the copy, then (almost) nothing
        try:
            assert alter(admin, {(topic, 0, 0): target}) == {(topic, 0, 0): "NoError"}
            before = wait_until(lambda: [(d, p) for d, p in replicas_of(b0.bootstrap, topic, 0)
                                         if p.is_future_key and p.partition_size > 0], 30, "a partial copy")
            future_dirs = [e for e in entries(target, topic, 0) if e.endswith("-future")]
            assert len(future_dirs) == 1

            b0.stop()
            start_broker(b0)
            # The same future directory is loaded again and the move goes on from where it was.
            after = wait_until(lambda: [(d, p) for d, p in replicas_of(b0.bootstrap, topic, 0) if p.is_future_key],
                               60, "the future replica after the restart")
            assert after[0][0] == target and after[0][1].partition_size >= before[0][1].partition_size
            assert [e for e in entries(target, topic, 0) if e.endswith("-future")] == future_dirs
            wait_until(lambda: "resuming the move of" in b0.log_text(), 30, "the move resumed")
        finally:
            # Lifted whatever happened: a throttle of 1 B/s left behind would stall the next test's moves.
            admin.wait_for_broker(0)  # its metadata may date from while broker 0 was down
            throttle(admin, 0, None)
        wait_until(lambda: moved(b0.bootstrap, topic, 0, target), 60, f"{topic}-0 moved to {target}")
        values = read_values(cluster.bootstrap, topic)
        assert [v.split(b":")[0] for v in values] == [str(i).encode() for i in range(1500)]
        assert_files_moved(source, target, topic, 0)


def test_kafka_reassign_partitions_with_log_dirs(cluster: Any, dirs: dict[int, list[str]], tmp_path: Path) -> None:
    """Kafka 3.9's own kafka-reassign-partitions moves replicas named with "log_dirs" (it sends
    AlterReplicaLogDirs, then --verify follows the moves through DescribeLogDirs and clears the throttles);
    kafka-log-dirs --describe lists where each replica is."""
    import json

    from tests.kafka_dist import run_java

    topic = unique("tool")
    brokers = cluster.brokers
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, assignment={0: [0, 1]})
    produce(cluster.bootstrap, topic, 500)
    sources = {b: current_dir(brokers[b].bootstrap, topic, 0) for b in (0, 1)}
    targets = {b: next(d for d in dirs[b][:2] if d != sources[b]) for b in (0, 1)}
    plan = tmp_path / "reassignment.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [0, 1], "log_dirs": [targets[0], targets[1]]}]}))
    tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    out = run_java(tool, "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan), "--execute")
    assert out.count("Successfully started moving log directory to") == 2, out

    def verified() -> str | None:
        text = run_java(tool, "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan),
                        "--verify")
        done = f"Reassignment of partition {topic}-0 is completed." in text
        return text if done and text.count("completed successfully") == 2 else None  # and both replicas

    out = wait_until(verified, 120, "kafka-reassign-partitions --verify to report the moves done", interval=1)
    assert "Clearing broker-level throttles" in out, out
    for b in (0, 1):
        assert moved(brokers[b].bootstrap, topic, 0, targets[b])
        assert_files_moved(sources[b], targets[b], topic, 0)
    described = json.loads(run_java("org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", cluster.bootstrap,
                                    "--describe", "--topic-list", topic).strip().splitlines()[-1])
    where = {(b["broker"], d["logDir"]): [(p["partition"], p["isFuture"]) for p in d["partitions"]]
             for b in described["brokers"] for d in b["logDirs"]}
    for b in (0, 1):
        assert where[(b, targets[b])] == [(f"{topic}-0", False)], described
        assert where[(b, sources[b])] == [], described
    assert [v.split(b":")[0] for v in read_values(cluster.bootstrap, topic)] == [str(i).encode() for i in range(500)]


def test_kafkette_reassign_partitions_with_log_dirs(cluster: Any, dirs: dict[int, list[str]], tmp_path: Path) -> None:
    """`kafkette reassign-partitions` follows the plan's "log_dirs" as Kafka's tool does: --execute sets the
    replica-alter-dir throttle and starts each move, --verify reports the moves until they are done,
    then removes the throttle."""
    import json

    from clients.admin import RESOURCE_BROKER, WireClient
    from tests.ops.helpers import kafkette

    topic = unique("cli")
    brokers = cluster.brokers
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, assignment={0: [0, 1]})
    produce(cluster.bootstrap, topic, 300)
    sources = {b: current_dir(brokers[b].bootstrap, topic, 0) for b in (0, 1)}
    targets = {b: next(d for d in dirs[b][:2] if d != sources[b]) for b in (0, 1)}
    plan = tmp_path / "reassignment.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [0, 1], "log_dirs": [targets[0], targets[1]]}]}))
    r = kafkette("reassign-partitions", "--execute", "--bootstrap-server", cluster.bootstrap,
                 "--reassignment-json-file", str(plan), "--replica-alter-log-dirs-throttle", "10000000")
    assert r.rc == 0, r.err
    assert "The replica-alter-dir throttle limit was set to 10000000 B/s" in r.out
    for b in (0, 1):
        assert (f"Successfully started moving log directory to {targets[b]} for replica {topic}-0 with broker {b}"
                in r.out), r.out

    def verified() -> str | None:
        v = kafkette("reassign-partitions", "--verify", "--bootstrap-server", cluster.bootstrap,
                     "--reassignment-json-file", str(plan))
        return v.out if v.rc == 0 else None

    out = wait_until(verified, 120, "kafkette reassign-partitions --verify to report the moves done", interval=1)
    for b in (0, 1):
        assert f"Reassignment of replica {topic}-0-{b} completed successfully." in out, out
        assert moved(brokers[b].bootstrap, topic, 0, targets[b])
        assert_files_moved(sources[b], targets[b], topic, 0)
    assert "Throttle was removed." in out, out
    with WireClient(cluster.bootstrap) as client:
        for b in (0, 1):
            dynamic = {c.name for c in client.describe_configs(RESOURCE_BROKER, str(b)) if c.config_source == 2}
            assert "replica.alter.log.dirs.io.max.bytes.per.second" not in dynamic, (b, dynamic)
    # A replica whose plan names a dir the broker does not have: Kafka's tool fails on the first refusal.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [0, 1], "log_dirs": ["/no/such/dir", "any"]}]}))
    r = kafkette("reassign-partitions", "--execute", "--bootstrap-server", cluster.bootstrap,
                 "--reassignment-json-file", str(bad))
    assert r.rc != 0 and f"Failed to alter dir for {topic}-0-0" in r.err, (r.out, r.err)
    assert [v.split(b":")[0] for v in read_values(cluster.bootstrap, topic)] == [str(i).encode() for i in range(300)]
