"""Partition reassignment through the controller (API and the legacy /admin/reassign_partitions znode)."""

from __future__ import annotations

import pytest

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type
from tests.controller.fakes import in_thread, wait_for
from tests.controller.test_controller_zk import alter_partition, cluster, run

pytestmark = pytest.mark.timeout(60)


def test_reassign_moves_replicas_and_leadership(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3, 4]) as c:
            ctl = await c.active()
            await c.create_topic("r", 1, 2, assignment={0: [1, 2]})
            st = await wait_for(lambda: c.state("r", 0), what="state")
            res = await ctl.alter_partition_reassignments({("r", 0): [3, 4], ("nope", 0): [1]})
            assert res[("r", 0)] == (ErrorCode.NONE, None)
            assert res[("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ta = await in_thread(c.admin.get_topic_assignment, "r")
            a = ta.partitions[0]
            assert (a.replicas, a.adding_replicas, a.removing_replicas) == ((3, 4, 1, 2), (3, 4), (1, 2))
            ongoing = await ctl.list_partition_reassignments()
            assert list(ongoing) == [("r", 0)]
            mid = await c.state("r", 0)
            assert mid.leader == 1 and mid.leader_epoch == st.leader_epoch + 1
            _, ps = await wait_for(lambda: c.brokers[3].last_leader_and_isr("r", 0), what="new replica told")
            assert list(ps.adding_replicas) == [3, 4] and list(ps.replicas) == [3, 4, 1, 2]
            # The new replicas catch up: the leader adds them to the ISR; the reassignment completes.
            tid = ctl.context.topic_ids["r"]
            r = await ctl.handle_alter_partition(alter_partition(tid, 0, 1, c.brokers[1].epoch, mid.leader_epoch,
                                                                 [1, 2, 3, 4], mid.zk_version))
            assert r.topics[0].partitions[0].error_code == ErrorCode.NONE
            end = await c.state("r", 0)
            assert end.leader == 3 and sorted(end.isr) == [3, 4]
            ta = await in_thread(c.admin.get_topic_assignment, "r")
            a = ta.partitions[0]
            assert (a.replicas, a.adding_replicas, a.removing_replicas) == ((3, 4), (), ())
            assert await ctl.list_partition_reassignments() == {}
            for b in (1, 2):
                await wait_for(lambda b=b: any(p.delete_partition for body in c.brokers[b].received(ApiKey.STOP_REPLICA)
                                               for t in body.topic_states for p in t.partition_states),
                               what=f"broker {b} deletes its replica")
    run(main())


def test_cancel_reverts_to_the_original_replicas(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3]) as c:
            ctl = await c.active()
            await c.create_topic("r", 1, 2, assignment={0: [1, 2]})
            await wait_for(lambda: c.state("r", 0), what="state")
            rt = request_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
            start = rt(topics=[rt.ReassignableTopic(name="r", partitions=[rt.ReassignablePartition(
                partition_index=0, replicas=[1, 3])])])
            resp = await ctl.handle_alter_partition_reassignments(start)
            assert resp.responses[0].partitions[0].error_code == 0
            lt = request_type(ApiKey.LIST_PARTITION_REASSIGNMENTS)
            listed = await ctl.handle_list_partition_reassignments(lt(topics=None))
            assert listed.topics[0].partitions[0].adding_replicas == [3]
            cancel = rt(topics=[rt.ReassignableTopic(name="r", partitions=[rt.ReassignablePartition(
                partition_index=0, replicas=None)])])
            resp = await ctl.handle_alter_partition_reassignments(cancel)
            assert resp.responses[0].partitions[0].error_code == 0
            ta = await in_thread(c.admin.get_topic_assignment, "r")
            assert ta.partitions[0].replicas == (1, 2) and not ta.partitions[0].is_being_reassigned
            again = await ctl.alter_partition_reassignments({("r", 0): None})
            assert again[("r", 0)][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            bad = await ctl.alter_partition_reassignments({("r", 0): [1, 9]})
            assert bad[("r", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    run(main())


def test_legacy_reassign_znode(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3]) as c:
            ctl = await c.active()
            await c.create_topic("z", 1, 2, assignment={0: [1, 2]})
            await wait_for(lambda: c.state("z", 0), what="state")
            await in_thread(c.admin.create_partition_reassignment, {("z", 0): [1, 3]})
            await wait_for(lambda: ("z", 0) in ctl.context.partitions_being_reassigned, what="reassignment started")
            await ctl.wait_idle()
            st = await c.state("z", 0)
            tid = ctl.context.topic_ids["z"]
            await ctl.handle_alter_partition(alter_partition(tid, 0, 1, c.brokers[1].epoch, st.leader_epoch, [1, 2, 3],
                                                             st.zk_version))
            await wait_for(lambda: in_thread(lambda: c.admin.get_partition_reassignment() == {}), what="znode removed")
            ta = await in_thread(c.admin.get_topic_assignment, "z")
            assert ta.partitions[0].replicas == (1, 3)
            end = await c.state("z", 0)
            assert end.leader == 1 and sorted(end.isr) == [1, 3]
    run(main())
