"""ControllerChannelManager and InterBrokerClient over real sockets."""

from __future__ import annotations

import asyncio

import pytest

from controller.channel import ControllerChannelManager
from controller.client import ControllerNotAvailableError, InterBrokerClient
from controller.zk_data import BrokerRegistration, EndPoint
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import new_request
from tests.controller.fakes import FakeBroker, wait_for
from tests.controller.test_controller_zk import alter_partition, cluster, run

pytestmark = pytest.mark.timeout(60)


def um(epoch: int):
    return new_request(ApiKey.UPDATE_METADATA, controller_id=1, controller_epoch=epoch, broker_epoch=7)


def test_requests_are_sent_in_order_and_answered(zk_connect: str) -> None:
    async def main() -> None:
        b = await FakeBroker(2, zk_connect).start()
        ch = ControllerChannelManager(1)
        try:
            await ch.start()
            ch.add_broker(b.registration())
            got: list[tuple[int, int]] = []
            for i in range(50):
                ch.send(2, ApiKey.UPDATE_METADATA, um(i), lambda bid, key, resp, err: got.append((bid, resp.error_code)))
            await wait_for(lambda: len(got) == 50, what="50 responses")
            assert [x.controller_epoch for x in b.received(ApiKey.UPDATE_METADATA)] == list(range(50))
            assert set(got) == {(2, 0)}
            resp = await ch.request(2, ApiKey.UPDATE_METADATA, um(99), timeout=5)
            assert resp.error_code == 0
            assert not ch.send(9, ApiKey.UPDATE_METADATA, um(1))  # unknown broker
        finally:
            await ch.shutdown()
            await b.kill()
    run(main())


def test_reconnects_and_resends_after_the_broker_comes_back() -> None:
    async def main() -> None:
        received: list[int] = []
        from tests.controller.fakes import FakeBroker as FB
        helper = FB(3, "unused")

        async def serve(reader, writer):
            helper.requests = []
            await helper._serve(reader, writer)
            received.extend(x.controller_epoch for _, x in helper.requests)
        # Reserve a port, then start nothing there yet.
        probe = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = probe.sockets[0].getsockname()[1]
        probe.close()
        await probe.wait_closed()
        ch = ControllerChannelManager(1, reconnect_backoff_ms=20, reconnect_backoff_max_ms=100)
        await ch.start()
        ch.add_broker(BrokerRegistration(3, (EndPoint("127.0.0.1", port),)))
        done: list[int] = []
        for i in range(3):
            ch.send(3, ApiKey.UPDATE_METADATA, um(i), lambda *a: done.append(1))
        await asyncio.sleep(0.3)
        assert not done  # nobody listening yet: retrying
        server = await asyncio.start_server(serve, "127.0.0.1", port)
        try:
            await wait_for(lambda: len(done) == 3, what="delivery after reconnect")
        finally:
            await ch.shutdown()
            server.close()
            await server.wait_closed()
        await wait_for(lambda: received == [0, 1, 2], what="in order")
    run(main())


def test_removing_a_broker_fails_its_queue() -> None:
    async def main() -> None:
        ch = ControllerChannelManager(1, reconnect_backoff_ms=20)
        await ch.start()
        ch.add_broker(BrokerRegistration(4, (EndPoint("127.0.0.1", 1),)))  # nothing listens on port 1
        errors: list[BaseException | None] = []
        ch.send(4, ApiKey.UPDATE_METADATA, um(0), lambda bid, key, resp, err: errors.append(err))
        ch.send(4, ApiKey.UPDATE_METADATA, um(1), lambda bid, key, resp, err: errors.append(err))
        await asyncio.sleep(0.1)
        ch.remove_broker(4)
        await wait_for(lambda: len(errors) == 2, what="callbacks with errors")
        assert all(isinstance(e, ConnectionError) for e in errors)
        await ch.shutdown()
    run(main())


def test_inter_broker_client_follows_the_controller(zk_connect: str) -> None:
    async def main() -> None:
        async with cluster(zk_connect, [1, 2, 3], controllers=[1, 2]) as c:
            first = await c.active()
            for bid, ctl in c.controllers.items():
                c.brokers[bid].controller = ctl
            await c.create_topic("t", 1, 3, assignment={0: [3, 1, 2]})
            st = await wait_for(lambda: c.state("t", 0), what="state")
            tid = first.context.topic_ids["t"]
            client = InterBrokerClient(c.brokers[3].zk, 3, request_timeout_ms=10000)
            await client.start()
            try:
                assert await client.controller_id() == first.broker_id
                resp = await client.alter_partition(alter_partition(tid, 0, 3, c.brokers[3].epoch, st.leader_epoch,
                                                                    [3, 1], st.zk_version))
                p = resp.topics[0].partitions[0]
                assert p.error_code == ErrorCode.NONE and list(p.isr) == [3, 1]
                # The controller moves: the client finds the new one.
                other = c.controllers[2 if first.broker_id == 1 else 1]
                await first.shutdown()
                await wait_for(lambda: other.is_active, what="new controller")
                await other.wait_idle()
                resp = await client.alter_partition(alter_partition(tid, 0, 3, c.brokers[3].epoch, p.leader_epoch,
                                                                    [3], p.partition_epoch))
                assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == ErrorCode.NONE
                assert await client.controller_id() == other.broker_id
                cs = await client.controlled_shutdown(c.brokers[3].epoch)
                assert cs.error_code == 0
                assert [(r.topic_name, r.partition_index) for r in cs.remaining_partitions] == [("t", 0)]  # ISR is [3]
                assert not await client.controlled_shutdown_until_done(c.brokers[3].epoch, max_retries=2,
                                                                       retry_backoff_ms=10)
            finally:
                await client.close()
    run(main())


def test_inter_broker_client_times_out_without_controller(zk_connect: str) -> None:
    async def main() -> None:
        b = await FakeBroker(1, zk_connect).start()
        client = InterBrokerClient(b.zk, 1, request_timeout_ms=300)
        try:
            await client.start()
            with pytest.raises(ControllerNotAvailableError):
                await client.controlled_shutdown(b.epoch)
        finally:
            await client.close()
            await b.kill()
    run(main())
