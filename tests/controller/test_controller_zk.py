"""The controller against a real ZooKeeper, with fake brokers answering its requests."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import pytest

from controller import zk_data as zd
from controller.assignment import assign_replicas
from controller.controller import ELECTION_PREFERRED, ELECTION_UNCLEAN, KafkaController
from controller.zk_client import KafkaZkClient
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import new_request, request_type
from tests.controller.fakes import FakeBroker, in_thread, wait_for

pytestmark = pytest.mark.timeout(60)


class Cluster:
    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.brokers: dict[int, FakeBroker] = {}
        self.controllers: dict[int, KafkaController] = {}
        self.admin = KafkaZkClient(connect, 4000)

    async def start(self, ids: list[int], controllers: list[int], *, config: dict | None = None,
                    racks: dict[int, str] | None = None) -> None:
        await in_thread(self.admin.start)
        for i in ids:
            self.brokers[i] = await FakeBroker(i, self.connect, rack=(racks or {}).get(i)).start()
        cfg = {"auto.leader.rebalance.enable": False, **(config or {})}
        for i in controllers:
            c = KafkaController(self.brokers[i].zk, i, config_getter=cfg.get)  # type: ignore[arg-type]
            c.channel.backoff = 0.01
            self.controllers[i] = c
            await c.start()

    async def active(self, timeout: float = 10.0) -> KafkaController:
        return await wait_for(lambda: next((c for c in self.controllers.values() if c.is_active), None),
                              timeout, what="an active controller")

    async def close(self) -> None:
        for c in self.controllers.values():
            with contextlib.suppress(Exception):
                await c.shutdown()
        for b in self.brokers.values():
            await b.kill()
        await in_thread(self.admin.close)

    async def create_topic(self, name: str, partitions: int, rf: int, configs: dict | None = None,
                           assignment: dict[int, list[int]] | None = None) -> None:
        if assignment is None:
            brokers = [(b, None) for b in sorted(self.brokers)]
            assignment = assign_replicas(brokers, partitions, rf, 0)
        await in_thread(self.admin.create_topic, name, assignment, configs or {})

    async def state(self, topic: str, p: int) -> zd.LeaderIsrAndControllerEpoch | None:
        return await in_thread(self.admin.get_partition_state, topic, p)


@contextlib.asynccontextmanager
async def cluster(connect: str, ids: list[int], controllers: list[int] | None = None, **kw) -> AsyncIterator[Cluster]:
    c = Cluster(connect)
    try:
        await c.start(ids, controllers if controllers is not None else ids[:1], **kw)
        yield c
    finally:
        await c.close()


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 50))


def alter_partition(topic_id, partition: int, broker_id: int, broker_epoch: int, leader_epoch: int,
                    isr: list[int], partition_epoch: int, recovery: int = 0):
    rt = request_type(ApiKey.ALTER_PARTITION)
    return rt(broker_id=broker_id, broker_epoch=broker_epoch, topics=[rt.TopicData(topic_id=topic_id, partitions=[
        rt.PartitionData(partition_index=partition, leader_epoch=leader_epoch,
                         new_isr_with_epochs=[rt.BrokerState(broker_id=b, broker_epoch=-1) for b in isr],
                         leader_recovery_state=recovery, partition_epoch=partition_epoch)])])


def test_new_topic_gets_leaders_and_brokers_are_told(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3]) as c:
            ctl = await c.active()
            assert ctl.broker_id == 1 and ctl.epoch == 1
            await c.create_topic("orders", 3, 2)
            for p in range(3):
                st = await wait_for(lambda p=p: c.state("orders", p), what="partition state")
                assignment = assign_replicas([1, 2, 3], 3, 2, 0)[p]
                assert st.leader == assignment[0]
                assert list(st.isr) == assignment
                assert st.leader_epoch == 0 and st.controller_epoch == 1 and st.zk_version == 0
            # LeaderAndIsr went to each replica, stamped with the controller epoch and the broker epoch.
            for p, reps in assign_replicas([1, 2, 3], 3, 2, 0).items():
                for r in reps:
                    b = c.brokers[r]
                    got = await wait_for(lambda b=b, p=p: b.last_leader_and_isr("orders", p), what="LeaderAndIsr")
                    body, ps = got
                    assert body.controller_epoch == 1 and body.controller_id == 1
                    assert body.broker_epoch == b.epoch
                    assert ps.is_new and ps.leader == reps[0] and list(ps.replicas) == reps
                    assert any(ll.broker_id == reps[0] and ll.port == c.brokers[reps[0]].port
                               for ll in body.live_leaders)
            # Every broker got UpdateMetadata with the partitions and the live brokers.
            for b in c.brokers.values():
                def seen(b=b):
                    parts = {(t.topic_name, p.partition_index) for um in b.received(ApiKey.UPDATE_METADATA)
                             for t in um.topic_states for p in t.partition_states}
                    return {("orders", 0), ("orders", 1), ("orders", 2)} <= parts
                await wait_for(seen, what="UpdateMetadata")
                um = b.received(ApiKey.UPDATE_METADATA)[-1]
                assert sorted(x.id for x in um.live_brokers) == [1, 2, 3]
                assert um.broker_epoch == b.epoch
            ta = await in_thread(c.admin.get_topic_assignment, "orders")
            assert ta.topic_id == ctl.context.topic_ids["orders"]
    run(main())


def test_broker_failure_moves_leadership_and_shrinks_isr(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3]) as c:
            await c.active()
            await c.create_topic("t", 3, 3)
            for p in range(3):
                await wait_for(lambda p=p: c.state("t", p), what="state")
            led_by_2 = [p for p in range(3) if (await c.state("t", p)).leader == 2]
            assert led_by_2
            await c.brokers[2].kill()

            async def moved() -> bool:
                for p in range(3):
                    st = await c.state("t", p)
                    if 2 in st.isr or st.leader == 2:
                        return False
                return True
            await wait_for(moved, what="ISR without broker 2")
            for p in range(3):
                st = await c.state("t", p)
                assert st.leader in (1, 3)
                assert st.leader_epoch == 1  # one controller change per partition
                assert sorted(st.isr) == [1, 3]
            # The new leader heard about it.
            p = led_by_2[0]
            st = await c.state("t", p)
            _, ps = await wait_for(lambda: (x := c.brokers[st.leader].last_leader_and_isr("t", p)) and
                                   x[1].leader_epoch == 1 and x, what="LeaderAndIsr to the new leader")
            assert ps.leader == st.leader and ps.partition_epoch == st.zk_version
    run(main())


def test_alter_partition_fencing(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3]) as c:
            ctl = await c.active()
            await c.create_topic("t", 1, 3, assignment={0: [1, 2, 3]})
            st = await wait_for(lambda: c.state("t", 0), what="state")
            tid = ctl.context.topic_ids["t"]
            e1 = c.brokers[1].epoch
            # Shrink to [1, 2]: accepted, partition epoch moves on, leader epoch stays.
            resp = await ctl.handle_alter_partition(alter_partition(tid, 0, 1, e1, st.leader_epoch, [1, 2], st.zk_version))
            p = resp.topics[0].partitions[0]
            assert resp.error_code == 0 and p.error_code == ErrorCode.NONE
            assert list(p.isr) == [1, 2] and p.partition_epoch == st.zk_version + 1 and p.leader_epoch == st.leader_epoch
            zk_st = await c.state("t", 0)
            assert list(zk_st.isr) == [1, 2] and zk_st.zk_version == p.partition_epoch
            # The same request again is answered with the current state (idempotent).
            again = await ctl.handle_alter_partition(alter_partition(tid, 0, 1, e1, st.leader_epoch, [1, 2], st.zk_version))
            assert again.topics[0].partitions[0].error_code == ErrorCode.NONE
            # A stale partition epoch is fenced.
            stale = await ctl.handle_alter_partition(alter_partition(tid, 0, 1, e1, st.leader_epoch, [1], st.zk_version))
            assert stale.topics[0].partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION
            # A stale leader epoch is fenced.
            old = await ctl.handle_alter_partition(alter_partition(tid, 0, 1, e1, st.leader_epoch - 1, [1], p.partition_epoch))
            assert old.topics[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
            # A stale broker epoch is refused as a whole.
            bad = await ctl.handle_alter_partition(alter_partition(tid, 0, 1, e1 - 1, st.leader_epoch, [1], p.partition_epoch))
            assert bad.error_code == ErrorCode.STALE_BROKER_EPOCH
            unknown = await ctl.handle_alter_partition(alter_partition(tid, 0, 1, -1, st.leader_epoch, [1],
                                                                       p.partition_epoch))
            assert unknown.error_code == ErrorCode.STALE_BROKER_EPOCH
            # Unknown topic id.
            import uuid
            unk = await ctl.handle_alter_partition(alter_partition(uuid.uuid4(), 0, 1, e1, 0, [1], 0))
            assert unk.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
            # A dead broker may not join the ISR.
            await c.brokers[3].kill()
            await wait_for(lambda: 3 not in ctl.context.live_brokers, what="broker 3 gone")
            cur = await c.state("t", 0)
            dead = await ctl.handle_alter_partition(alter_partition(tid, 0, 1, e1, cur.leader_epoch, [1, 2, 3], cur.zk_version))
            assert dead.topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
            # Someone else (a stale writer) changes the znode behind the controller's back: the
            # conditional write fails and the leader gets INVALID_UPDATE_VERSION.
            await in_thread(c.admin.set_partition_state, "t", 0, cur)
            racing = await ctl.handle_alter_partition(alter_partition(tid, 0, 1, e1, cur.leader_epoch, [1], cur.zk_version))
            assert racing.topics[0].partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION
    run(main())


def test_controlled_shutdown_moves_leaders_away(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3]) as c:
            ctl = await c.active()
            await c.create_topic("t", 3, 2, assignment={0: [2, 1], 1: [2, 3], 2: [1, 3]})
            for p in range(3):
                await wait_for(lambda p=p: c.state("t", p), what="state")
            resp = await ctl.handle_controlled_shutdown(2, c.brokers[2].epoch)
            assert resp.error_code == 0 and list(resp.remaining_partitions) == []
            s0, s1 = await c.state("t", 0), await c.state("t", 1)
            assert (s0.leader, list(s0.isr)) == (1, [1])
            assert (s1.leader, list(s1.isr)) == (3, [3])
            assert s0.leader_epoch == 1
            # Broker 2 was told to stop its replicas (without deleting them).
            stops = c.brokers[2].received(ApiKey.STOP_REPLICA)
            await wait_for(lambda: c.brokers[2].received(ApiKey.STOP_REPLICA) or True)
            del stops
            stale = await ctl.handle_controlled_shutdown(2, c.brokers[2].epoch - 1)
            assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
            unknown = await ctl.handle_controlled_shutdown(9, -1)
            assert unknown.error_code == ErrorCode.BROKER_NOT_AVAILABLE
            # While 2 is shutting down it may not rejoin an ISR.
            tid = ctl.context.topic_ids["t"]
            s0 = await c.state("t", 0)
            r = await ctl.handle_alter_partition(alter_partition(tid, 0, 1, c.brokers[1].epoch, s0.leader_epoch,
                                                                 [1, 2], s0.zk_version))
            assert r.topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
    run(main())


def test_unclean_election_off_then_on(zk_connect: str, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3]) as c:
            ctl = await c.active()
            await c.create_topic("u", 1, 2, assignment={0: [2, 3]})
            st = await wait_for(lambda: c.state("u", 0), what="state")
            tid = ctl.context.topic_ids["u"]
            # Leader 2 drops follower 3 from the ISR, then dies.
            r = await ctl.handle_alter_partition(alter_partition(tid, 0, 2, c.brokers[2].epoch, st.leader_epoch, [2],
                                                                 st.zk_version))
            assert r.topics[0].partitions[0].error_code == 0
            await c.brokers[2].kill()
            off = await wait_for(lambda: (s := ctl.context.leadership.get(("u", 0))) and s.leader == -1 and s,
                                 what="offline partition")
            assert list(off.isr) == [2]  # the last ISR member stays
            assert ctl.unclean_leader_elections == 0
            # Enable unclean election for the topic: the controller notices the config change.
            await in_thread(c.admin.set_or_create_entity_config, "topics", "u",
                            {"unclean.leader.election.enable": "true"})
            with caplog.at_level(logging.WARNING, logger="controller.controller"):
                new = await wait_for(lambda: (s := ctl.context.leadership.get(("u", 0))) and s.leader == 3 and s,
                                     what="unclean leader")
            assert list(new.isr) == [3]
            assert new.leader_recovery_state == zd.LEADER_RECOVERY_RECOVERING
            assert ctl.unclean_leader_elections == 1
            assert any("UNCLEAN" in rec.message for rec in caplog.records)
            zk_state = await c.state("u", 0)
            assert zk_state.leader == 3 and zk_state.leader_recovery_state == 1
    run(main())


def test_preferred_election(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3], controllers=[3]) as c:
            ctl = await c.active()
            await c.create_topic("p", 2, 2, assignment={0: [1, 2], 1: [2, 3]})
            for p in range(2):
                await wait_for(lambda p=p: c.state("p", p), what="state")
            await ctl.handle_controlled_shutdown(1, c.brokers[1].epoch)
            s0 = await c.state("p", 0)
            assert s0.leader == 2
            # Broker 1 comes back (bounce: same id, new session) and catches up into the ISR.
            await c.brokers[1].kill()
            await wait_for(lambda: 1 not in ctl.context.live_brokers, what="1 gone")
            c.brokers[1] = await FakeBroker(1, c.connect).start()
            await wait_for(lambda: 1 in ctl.context.live_brokers, what="1 back")
            s0 = await c.state("p", 0)
            tid = ctl.context.topic_ids["p"]
            r = await ctl.handle_alter_partition(alter_partition(tid, 0, 2, c.brokers[2].epoch, s0.leader_epoch, [2, 1],
                                                                 s0.zk_version))
            assert r.topics[0].partitions[0].error_code == 0
            res = await ctl.elect_leaders(ELECTION_PREFERRED, [("p", 0), ("p", 1), ("nope", 0)])
            assert res[("p", 0)][0] == ErrorCode.NONE
            assert res[("p", 1)][0] == ErrorCode.ELECTION_NOT_NEEDED
            assert res[("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            s0 = await c.state("p", 0)
            assert s0.leader == 1 and s0.leader_epoch == 2
            unclean = await ctl.elect_leaders(ELECTION_UNCLEAN, [("p", 0)])
            assert unclean[("p", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED
            # Request/response form.
            rt = request_type(ApiKey.ELECT_LEADERS)
            body = rt(election_type=0, topic_partitions=[rt.TopicPartitions(topic="p", partitions=[0])])
            resp = await ctl.handle_elect_leaders(body)
            assert resp.replica_election_results[0].partition_result[0].error_code == ErrorCode.ELECTION_NOT_NEEDED
    run(main())


def test_auto_leader_rebalance(zk_connect: str) -> None:
    async def main() -> None:
        cfg = {"auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 1}
        async with cluster(zk_connect, [1, 2], controllers=[2], config=cfg) as c:
            ctl = await c.active()
            await c.create_topic("r", 1, 2, assignment={0: [1, 2]})
            await wait_for(lambda: c.state("r", 0), what="state")
            await ctl.handle_controlled_shutdown(1, c.brokers[1].epoch)
            assert (await c.state("r", 0)).leader == 2
            await c.brokers[1].kill()
            await wait_for(lambda: 1 not in ctl.context.live_brokers, what="1 gone")
            c.brokers[1] = await FakeBroker(1, c.connect).start()
            await wait_for(lambda: 1 in ctl.context.live_brokers, what="1 back")
            s = await c.state("r", 0)
            tid = ctl.context.topic_ids["r"]
            await ctl.handle_alter_partition(alter_partition(tid, 0, 2, c.brokers[2].epoch, s.leader_epoch, [2, 1],
                                                             s.zk_version))
            await wait_for(lambda: c.state("r", 0), what="state")
            st = await wait_for(lambda: (s := ctl.context.leadership.get(("r", 0))) and s.leader == 1 and s,
                                what="preferred leader back")
            assert ctl.stats.preferred_elections >= 1 and st.leader_epoch >= 2
    run(main())


def test_topic_deletion(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2]) as c:
            ctl = await c.active()
            await c.create_topic("gone", 2, 2)
            await c.create_topic("kept", 1, 1)
            for p in range(2):
                await wait_for(lambda p=p: c.state("gone", p), what="state")
            await in_thread(c.admin.mark_topic_for_deletion, "gone")
            await wait_for(lambda: in_thread(lambda: not c.admin.is_topic_marked_for_deletion("gone")),
                           what="deletion marker removed (the last step)")
            assert not await in_thread(c.admin.topic_exists, "gone")
            assert await in_thread(c.admin.get_topic_config, "gone") == {}
            # The controller forgets the topic once its znodes are deleted (Kafka's order in
            # completeDeleteTopic), a moment after the marker is seen gone from ZooKeeper.
            await wait_for(lambda: "gone" not in ctl.context.all_topics, what="the controller forgot the topic")
            assert "kept" in ctl.context.all_topics
            for b in c.brokers.values():
                stops = [(t.topic_name, p.partition_index, p.delete_partition, p.leader_epoch)
                         for body in b.received(ApiKey.STOP_REPLICA) for t in body.topic_states
                         for p in t.partition_states]
                assert ("gone", 0, True, -2) in stops and ("gone", 1, True, -2) in stops
                leaders = [p.leader for um in b.received(ApiKey.UPDATE_METADATA) for t in um.topic_states
                           if t.topic_name == "gone" for p in t.partition_states]
                assert zd.LEADER_DURING_DELETE in leaders
            # Deleting a topic that does not exist just clears the marker.
            await in_thread(c.admin.mark_topic_for_deletion, "never")
            await wait_for(lambda: in_thread(lambda: not c.admin.is_topic_marked_for_deletion("never")),
                           what="marker removed")
    run(main())


def test_partitions_added_to_topic(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2]) as c:
            ctl = await c.active()
            await c.create_topic("grow", 1, 2)
            await wait_for(lambda: c.state("grow", 0), what="state")
            await in_thread(c.admin.add_partitions, "grow", {1: [2, 1], 2: [1, 2]})
            s2 = await wait_for(lambda: c.state("grow", 2), what="new partition state")
            assert s2.leader == 1 and list(s2.isr) == [1, 2]
            await ctl.wait_idle()
            assert ("grow", 1) in ctl.context.leadership
    run(main())


def test_controller_failover_fences_the_old_controller(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3], controllers=[1, 2]) as c:
            first = await c.active()
            assert first.epoch == 1
            other = c.controllers[2 if first.broker_id == 1 else 1]
            await c.create_topic("f", 2, 3)
            for p in range(2):
                await wait_for(lambda p=p: c.state("f", p), what="state")
            old_version = first.context.epoch_zk_version
            # The active controller's broker dies: its session ends, /controller goes away.
            await c.brokers[first.broker_id].kill()
            await wait_for(lambda: other.is_active, what="the other controller")
            await other.wait_idle()
            assert other.epoch == 2
            epoch, _ = await in_thread(c.admin.get_controller_epoch)
            assert epoch == 2
            assert not first.is_active  # its session is gone: it resigned
            # The new controller loaded the cluster, and moved leadership off the dead broker (the
            # ISR of partitions it did not lead shrinks later, by their leaders' AlterPartition).
            assert set(other.context.all_topics) == {"f"}
            led = next(p for p, reps in assign_replicas([1, 2, 3], 2, 3, 0).items() if reps[0] == first.broker_id)
            st = await wait_for(lambda: (s := other.context.leadership.get(("f", led))) and
                                s.leader != first.broker_id and s, what="new leader")
            assert first.broker_id not in st.isr and st.controller_epoch == 2 and st.leader_epoch == 1
            # A write fenced with the old controller's epoch version fails.
            from controller.zk_client import ControllerMovedError
            cur = await c.state("f", led)
            with pytest.raises(ControllerMovedError):
                await in_thread(c.admin.set_partition_state, "f", led, cur.new_epoch(), old_version)
            assert (await c.state("f", led)) == cur
            await other.wait_idle()
    run(main())


def test_not_controller_answers(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2], controllers=[1, 2]) as c:
            active = await c.active()
            passive = c.controllers[2 if active.broker_id == 1 else 1]
            await wait_for(lambda: passive.elector.active_controller_id == active.broker_id, what="passive sees active")
            r = await passive.handle_alter_partition(new_request(ApiKey.ALTER_PARTITION, broker_id=1, broker_epoch=-1))
            assert r.error_code == ErrorCode.NOT_CONTROLLER
            s = await passive.handle_controlled_shutdown(1, -1)
            assert s.error_code == ErrorCode.NOT_CONTROLLER
    run(main())
