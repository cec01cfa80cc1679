"""A stale LeaderAndIsr must not bring a dead replica back into the leader's ISR (and freeze the LSO).

Seen when the transaction coordinator is SIGKILLed while the controller changes (the killed broker was the
controller, or the controller was frozen): the new controller's failover sends every broker a LeaderAndIsr
built from ZooKeeper as it read it, and the broker applies it after an await. A leader that shrank its ISR
meanwhile (AlterPartition accepted: a newer partition epoch, same leader epoch) then applied that
older state: the dead broker was back in its ISR, every later AlterPartition carried the old partition
epoch and was refused with INVALID_UPDATE_VERSION, the high watermark stopped, and the commit marker
written there was never acknowledged: LSO = HW short of the marker, read_committed consumers stalled.
Kafka 3.9's Partition.makeLeader/makeFollower skip a state whose partition epoch is older than the one
the replica has ("the leader is already at a newer partition epoch").

The test sends that stale LeaderAndIsr itself (the real controller's id and epoch) once the controller
has taken a killed follower out of the ISR, then commits a transaction on the partition: the marker must
be acknowledged (LSO = HW past it).
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode as E
from protocol.messages import decode_response, encode_request, new_request, request_type
from tests.cluster.helpers import ZkView
from tests.integration.helpers import RawClient, all_served, unique, wait_until
from tests.txn.test_failover import FAILOVER_OVERRIDES, coordinator_of, initialized_txn
from tests.txn.test_marker_retries import lso_and_hw

_LAI = request_type(ApiKey.LEADER_AND_ISR)


def stale_leader_and_isr(zk: ZkView, topic: str, leader: int, leader_epoch: int, isr: list[int],
                         partition_epoch: int, replicas: list[int], host: str, port: int) -> Any:
    controller_epoch = zk.controller_epoch()
    assignment = zk.zk.get_topic_assignment(topic)
    assert assignment is not None
    return new_request(
        ApiKey.LEADER_AND_ISR, controller_id=zk.controller(), is_k_raft_controller=False,
        controller_epoch=controller_epoch, broker_epoch=-1, type=1, topic_states=[
            _LAI.LeaderAndIsrTopicState(topic_name=topic, topic_id=assignment.topic_id, partition_states=[
                _LAI.LeaderAndIsrPartitionState(
                    partition_index=0, controller_epoch=controller_epoch, leader=leader, leader_epoch=leader_epoch,
                    isr=isr, partition_epoch=partition_epoch, replicas=replicas, adding_replicas=[],
                    removing_replicas=[], is_new=False, leader_recovery_state=0)])],
        live_leaders=[_LAI.LeaderAndIsrLiveLeader(broker_id=leader, host_name=host, port=port)])


def settled(bootstrap: str, topic: str, dead: int) -> bool:
    from tests.integration.helpers import _metadata_topic

    with RawClient(bootstrap) as raw:
        md = raw.request(ApiKey.METADATA, 12, topics=[_metadata_topic(topic)], allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
    isr = [list(p.isr_nodes) for t in md.topics for p in t.partitions]
    return dead not in {b.node_id for b in md.brokers} and bool(isr) and dead not in isr[0]


@pytest.mark.slow
def test_stale_leader_and_isr_does_not_freeze_the_commit_marker(cluster_factory: Any) -> None:
    # Followers are not dropped for lagging during the test: only the controller takes the dead broker out
    # of the ISR (when its ZooKeeper session expires), keeping the ISR's order, leader first.
    cluster = cluster_factory(3, overrides=dict(FAILOVER_OVERRIDES, **{"replica.lag.time.max.ms": "60000"}))
    bs = cluster.bootstrap
    topic = unique("mk-stale")
    with RawClient(bs) as raw:
        controller = raw.request(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False).controller_id
    # The dead broker is not the controller; the leader's id is above the survivor's, so that the ISR the
    # controller leaves in ZooKeeper ([leader, survivor]) is not the one a reverted leader would propose
    # when it shrinks ([survivor, leader], sorted): the controller accepts an AlterPartition that only
    # restates its ISR whatever its partition epoch, which would repair the stale state by chance.
    dead = next(b for b in (0, 1, 2) if b != controller)
    survivor, leader = sorted({0, 1, 2} - {dead})
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic(topic, -1, -1, replica_assignments={0: [leader, survivor, dead]})])
    finally:
        admin.close()
    wait_until(lambda: all_served(bs, topic, 1), 30, f"a leader serving {topic}")
    txn_id = next(i for i in (unique("mk-stale-txn") for _ in range(100)) if coordinator_of(bs, i) != dead)
    t = initialized_txn(bs, txn_id)
    at = {i: b.bootstrap for i, b in enumerate(cluster.brokers)}
    with ZkView(cluster) as zk:
        before = zk.state(topic, 0)
        assert before is not None and before.leader == leader
        live = ",".join(a for i, a in at.items() if i != dead)
        try:
            assert t.add(topic, [0]) == 0
            assert t.produce(topic, 0, [b"a", b"b"]).error_code == 0
            cluster.brokers[dead].kill()
            # The controller has dealt with the dead broker (its LeaderAndIsr, then its UpdateMetadata)...
            wait_until(lambda: settled(at[leader], topic, dead), 60, "the leader's metadata without the dead broker")
            # ...and the leader has applied the shrink once an acks=all produce goes through.
            with RawClient(at[leader]) as raw:
                from protocol.records import NewRecord, build_batch

                assert raw.produce(topic, 0, build_batch([NewRecord(None, b"probe")])).error_code == E.NONE
            after = zk.state(topic, 0)
            assert after is not None and dead not in after.isr
            # The state the new controller read before the shrink: same leader epoch, older partition epoch.
            host, port = at[leader].rsplit(":", 1)
            body = stale_leader_and_isr(zk, topic, leader, after.leader_epoch, list(before.isr),
                                        after.partition_epoch - 1, zk.assignment(topic)[0], host, int(port))
            with RawClient(at[leader], client_id="controller") as raw:
                raw.send_frame(encode_request(ApiKey.LEADER_AND_ISR, 7, 1, "controller", body))
                decode_response(ApiKey.LEADER_AND_ISR, 7, raw.recv_frame())
            assert t.end(commit=True) == E.NONE
        finally:
            t.close()
    seen: list[tuple[int, int] | None] = [None]

    def committed() -> bool:
        got = seen[0] = lso_and_hw(live, topic, 0)
        return got == (4, 4)  # two records, the probe, the commit marker

    wait_until(committed, 30, lambda: f"the commit marker on {topic}-0 acknowledged (LSO, HW: {seen[0]})")
