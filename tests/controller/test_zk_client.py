"""KafkaZkClient against a real ZooKeeper (each test in its own chroot)."""

from __future__ import annotations

import threading
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError

from controller import zk_data as zd
from controller.zk_client import (
    BrokerIdInUseError,
    ControllerMovedError,
    InvalidTopicError,
    KafkaZkClient,
    TopicExistsError,
)

pytestmark = pytest.mark.timeout(60)


def expire_session(client: KafkaZkClient, hosts: str) -> None:
    """Expire ``client``'s session the classic way: a second connection with the same session id
    and password, closed."""
    sid, pwd = client.kazoo.client_id
    other = KazooClient(hosts=hosts, client_id=(sid, pwd))
    other.start()
    other.stop()
    other.close()


def test_chroot_created_and_top_level_paths(zk: KafkaZkClient, zookeeper_server, zk_chroot: str) -> None:
    raw = KazooClient(hosts=zookeeper_server.connect_string)
    raw.start()
    try:
        assert raw.exists(zk_chroot + "/brokers/ids") is not None
        assert raw.exists(zk_chroot + "/config/topics") is not None
        assert raw.exists("/brokers") is None  # nothing outside the chroot
    finally:
        raw.stop()
        raw.close()


def test_cluster_id_is_created_once(zk: KafkaZkClient, zk_connect: str) -> None:
    cid = zk.get_or_create_cluster_id()
    other = KafkaZkClient(zk_connect).start()
    try:
        assert other.get_or_create_cluster_id("something-else") == cid
    finally:
        other.close()
    assert zd.decode_cluster_id(zk.get_data("/cluster/id")[0]) == cid


def test_broker_registration_and_epoch(zk: KafkaZkClient, zk_connect: str) -> None:
    reg = zd.BrokerRegistration(1, (zd.EndPoint("localhost", 9092),), rack="r1")
    epoch = zk.register_broker(reg)
    stat = zk.exists("/brokers/ids/1")
    assert epoch == stat.czxid and stat.ephemeralOwner == zk.session_id
    assert zk.register_broker(reg) == epoch  # our own node: fine
    other = KafkaZkClient(zk_connect).start()
    try:
        with pytest.raises(BrokerIdInUseError):
            other.register_broker(reg)
        brokers = other.get_all_brokers()
        assert list(brokers) == [1] and brokers[1].broker_epoch == epoch and brokers[1].rack == "r1"
        reg2 = zd.BrokerRegistration(2, (zd.EndPoint("localhost", 9093),))
        e2 = other.register_broker(reg2)
        assert e2 > epoch
        assert zk.get_sorted_broker_ids() == [1, 2]
    finally:
        other.close()
    # Its session is gone, so is its registration.
    assert zk.get_sorted_broker_ids() == [1]
    assert zk.generate_broker_sequence_id() + 1 == zk.generate_broker_sequence_id()


def test_registration_restored_after_session_expiry(zk: KafkaZkClient, zookeeper_server, zk_connect: str) -> None:
    reg = zd.BrokerRegistration(5, (zd.EndPoint("localhost", 9092),))
    epoch = zk.register_broker(reg)
    states: list[str] = []
    new_epochs: list[int] = []
    done = threading.Event()
    zk.add_state_listener(states.append)
    zk.on_broker_reregistered(lambda e: (new_epochs.append(e), done.set()))
    old_session = zk.session_id
    expire_session(zk, zookeeper_server.connect_string)
    assert done.wait(15), states
    assert "expired" in states and "new_session" in states
    assert zk.session_id != old_session
    assert new_epochs[0] > epoch
    assert zk.get_broker(5).broker_epoch == new_epochs[0]


def test_controller_registration_increments_epoch(zk: KafkaZkClient, zk_connect: str) -> None:
    assert zk.get_controller() is None and zk.get_controller_epoch() is None
    epoch, version = zk.register_controller_and_increment_epoch(1)
    assert (epoch, version) == (1, 1)
    assert zk.get_controller_epoch() == (1, 1) and zk.get_controller_id() == 1
    other = KafkaZkClient(zk_connect).start()
    try:
        with pytest.raises(ControllerMovedError):
            other.register_controller_and_increment_epoch(2)
        assert zk.get_controller_epoch() == (1, 1)
        zk.delete_controller(version)
        assert other.register_controller_and_increment_epoch(2) == (2, 2)
        # The old controller's fenced writes fail now.
        zk.create_topic("t", {0: [1]})
        zk.create_partition_states({("t", 0): zd.LeaderIsrAndControllerEpoch(1, 0, (1,), 0, 2)}, 2)
        st = zk.get_partition_state("t", 0)
        with pytest.raises(ControllerMovedError):
            zk.update_partition_states({("t", 0): st.new_epoch()}, version)
        with pytest.raises(ControllerMovedError):
            zk.delete_topic_znodes("t", version)
        assert zk.get_partition_state("t", 0) == st
        res = other.update_partition_states({("t", 0): st.new_epoch()}, 2)
        assert res.finished[("t", 0)].zk_version == 1
    finally:
        other.close()


def test_topic_crud(zk: KafkaZkClient) -> None:
    tid = zk.create_topic("orders", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    assert zk.topic_exists("orders") and zk.get_all_topics() == ["orders"]
    assert zk.get_partitions_for_topic("orders") == [0, 1]
    ta = zk.get_topic_assignment("orders")
    assert ta.topic_id == tid and ta.replicas() == {0: [1, 2], 1: [2, 1]}
    assert zk.get_topic_config("orders") == {"retention.ms": "1000"}
    with pytest.raises(TopicExistsError):
        zk.create_topic("orders", {0: [1]})
    zk.create_topic("my_topic", {0: [1]})
    with pytest.raises(InvalidTopicError):
        zk.create_topic("my.topic", {0: [1]})
    grown = zk.add_partitions("orders", {2: [1, 2]})
    assert sorted(grown.partitions) == [0, 1, 2]
    with pytest.raises(ValueError):
        zk.add_partitions("orders", {1: [1]})
    v = zk.get_topic_assignment("orders").zk_version
    with pytest.raises(BadVersionError):
        zk.set_topic_assignment("orders", tid, {0: [1]}, expected_version=v + 5)
    zk.mark_topic_for_deletion("orders")
    assert zk.is_topic_marked_for_deletion("orders") and zk.get_topic_deletions() == ["orders"]
    with pytest.raises(TopicExistsError):
        zk.create_topic("orders", {0: [1]})
    zk.delete_topic_znodes("orders")
    assert not zk.topic_exists("orders") and zk.get_topic_deletions() == []
    assert zk.get_topic_config("orders") == {}


def test_partition_state_conditional_update(zk: KafkaZkClient) -> None:
    zk.create_topic("t", {0: [1, 2], 1: [2, 1]})
    st = {("t", 0): zd.LeaderIsrAndControllerEpoch(1, 0, (1, 2), 0, 1),
          ("t", 1): zd.LeaderIsrAndControllerEpoch(2, 0, (2, 1), 0, 1)}
    created = zk.create_partition_states(st)
    assert all(not isinstance(v, Exception) for v in created.values())
    again = zk.create_partition_states(st)
    assert all(isinstance(v, Exception) for v in again.values())  # NodeExists
    cur = zk.get_partition_states([("t", 0), ("t", 1), ("t", 9)])
    assert set(cur) == {("t", 0), ("t", 1)}
    stale = cur[("t", 0)]
    fresh = zk.set_partition_state("t", 0, stale.new_leader_and_isr(1, [1]))
    assert fresh.zk_version == 1
    with pytest.raises(BadVersionError):
        zk.set_partition_state("t", 0, stale.new_leader_and_isr(1, [1, 2]))  # fenced: stale version
    res = zk.update_partition_states({("t", 0): stale.new_epoch(), ("t", 1): cur[("t", 1)].new_epoch()})
    assert res.to_retry == [("t", 0)] and res.finished[("t", 1)].zk_version == 1


def test_configs_and_change_notifications(zk: KafkaZkClient) -> None:
    zk.set_or_create_entity_config("topics", "t", {"cleanup.policy": "compact"})
    zk.set_or_create_entity_config("brokers", "<default>", {"log.retention.ms": "5"})
    assert zk.get_entity_config("topics", "t") == {"cleanup.policy": "compact"}
    assert zk.get_topic_configs(["t", "none"]) == {"t": {"cleanup.policy": "compact"}, "none": {}}
    names = zk.get_config_change_notifications()
    assert len(names) == 2 and all(n.startswith("config_change_") for n in names)
    assert zk.read_config_change_notification(names[0])[0] == ("topics", "t")
    assert zk.read_config_change_notification(names[1])[0] == ("brokers", "<default>")
    assert zk.get_all_entities_with_config("brokers") == ["<default>"]
    zk.delete_config_change_notifications(names)
    assert zk.get_config_change_notifications() == []


def test_producer_id_blocks_never_overlap(zk: KafkaZkClient, zk_connect: str) -> None:
    first = zk.allocate_producer_id_block(1)
    assert (first.first_producer_id, first.last_producer_id) == (0, 999)
    clients = [KafkaZkClient(zk_connect).start() for _ in range(4)]
    blocks: list[zd.ProducerIdBlock] = []
    lock = threading.Lock()

    def grab(c: KafkaZkClient, b: int) -> None:
        for _ in range(5):
            blk = c.allocate_producer_id_block(b)
            with lock:
                blocks.append(blk)
    threads = [threading.Thread(target=grab, args=(c, i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    starts = sorted(b.first_producer_id for b in blocks)
    assert starts == [1000 * i for i in range(1, 21)]
    data = zk.get_data("/latest_producer_id_block")[0]
    assert zd.decode_producer_id_block(data).last_producer_id == 20999


def test_isr_change_and_admin_znodes(zk: KafkaZkClient) -> None:
    zk.propagate_isr_changes([("t", 0), ("t", 1)])
    names = zk.get_isr_change_notifications()
    assert len(names) == 1 and zk.get_partitions_from_isr_changes(names) == {("t", 0), ("t", 1)}
    zk.delete_isr_change_notifications(names, zd.MATCH_ANY_VERSION)
    assert zk.get_isr_change_notifications() == []
    zk.create_partition_reassignment({("t", 0): [2, 3]})
    assert zk.get_partition_reassignment() == {("t", 0): [2, 3]}
    zk.create_preferred_replica_election([("t", 0)])
    assert zk.get_preferred_replica_election() == {("t", 0)}


def test_requests_survive_a_stalled_server(zk: KafkaZkClient, zookeeper_server) -> None:
    zk.create_topic("t", {0: [1]})
    zookeeper_server.pause()
    result: list[object] = []

    def read() -> None:
        result.append(zk.get_topic_assignment("t"))
    th = threading.Thread(target=read)
    th.start()
    time.sleep(1.5)
    zookeeper_server.resume()
    th.join(20)
    assert result and result[0].replicas() == {0: [1]}


def test_fenced_partition_writes_in_multis_answer_each_partition(zk: KafkaZkClient) -> None:
    """More partitions than one multi holds, one of them stale: every other partition is written and
    comes back with its new version, the stale one alone is to be retried, and a fenced controller
    writes nothing."""
    from controller.zk_client import _OPS_PER_MULTI

    n = 2 * _OPS_PER_MULTI + 7
    _, epoch_version = zk.register_controller_and_increment_epoch(1)
    zk.create_topic("many", {p: [1] for p in range(n)})
    created = zk.create_partition_states(
        {("many", p): zd.LeaderIsrAndControllerEpoch(1, 0, (1,), controller_epoch=1) for p in range(n)}, epoch_version)
    assert all(not isinstance(v, Exception) and v.zk_version == 0 for v in created.values())
    cur = zk.get_partition_states([("many", p) for p in range(n)])
    stale_tp = ("many", _OPS_PER_MULTI + 3)  # in the second multi
    zk.set_partition_state(*stale_tp, cur[stale_tp].new_leader_and_isr(1, [1]))
    res = zk.update_partition_states({tp: st.new_epoch() for tp, st in cur.items()}, epoch_version)
    assert res.to_retry == [stale_tp] and not res.failed
    assert len(res.finished) == n - 1 and all(st.zk_version == 1 for st in res.finished.values())
    after = zk.get_partition_states(list(cur))
    assert all(after[tp].leader_epoch == cur[tp].leader_epoch + 1 for tp in cur if tp != stale_tp)
    with pytest.raises(ControllerMovedError):
        zk.update_partition_states({tp: st.new_epoch() for tp, st in after.items()}, epoch_version + 1)
    assert zk.get_partition_states(list(cur)) == after
