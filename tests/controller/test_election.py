"""Controller election with a real ZooKeeper: races, epochs, session expiry, resignation."""

from __future__ import annotations

import asyncio

import pytest

from controller.election import Elector
from controller.zk_client import KafkaZkClient
from tests.controller.fakes import in_thread, wait_for
from tests.controller.test_zk_client import expire_session

pytestmark = pytest.mark.timeout(60)


class Node:
    def __init__(self, broker_id: int, connect: str) -> None:
        self.broker_id = broker_id
        self.zk = KafkaZkClient(connect, 4000)
        self.became: list[int] = []
        self.resigned = 0
        self.elector: Elector | None = None

    async def start(self) -> Node:
        await in_thread(self.zk.start)

        async def become(epoch: int, version: int) -> None:
            self.became.append(epoch)

        async def resign() -> None:
            self.resigned += 1
        self.elector = Elector(self.zk, self.broker_id, on_become_controller=become, on_resign=resign)
        await self.elector.start()
        return self

    async def close(self) -> None:
        if self.elector is not None:
            await self.elector.stop()
        await in_thread(self.zk.close)


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 50))


def test_race_has_exactly_one_winner(zk_connect: str) -> None:
    async def main() -> None:
        nodes = [Node(i, zk_connect) for i in range(1, 6)]
        await asyncio.gather(*(n.start() for n in nodes))
        try:
            await wait_for(lambda: all(n.elector.active_controller_id > 0 for n in nodes), what="everyone sees a controller")
            for n in nodes:
                await n.elector.wait_for_event_queue_empty()
            winners = [n for n in nodes if n.elector.is_active]
            assert len(winners) == 1
            w = winners[0]
            assert w.became == [1] and w.elector.epoch == 1
            assert all(n.elector.active_controller_id == w.broker_id for n in nodes)
            assert all(not n.became for n in nodes if n is not w)
            assert await in_thread(w.zk.get_controller_epoch) == (1, 1)
        finally:
            for n in nodes:
                await n.close()
    run(main())


def test_epoch_goes_up_by_one_per_election(zk_connect: str) -> None:
    async def main() -> None:
        a, b = await Node(1, zk_connect).start(), await Node(2, zk_connect).start()
        try:
            first = await wait_for(lambda: next((n for n in (a, b) if n.elector.is_active), None), what="winner")
            second = b if first is a else a
            epochs = [first.elector.epoch]
            for _ in range(3):
                await first.elector.stop()  # resigns and deletes /controller
                assert first.resigned == 1 and not first.elector.is_active
                await wait_for(lambda s=second: s.elector.is_active, what="takeover")
                epochs.append(second.elector.epoch)
                # the stopped one joins again as a fresh elector
                first.elector = Elector(first.zk, first.broker_id)
                first.resigned = 0

                async def resign(f=first) -> None:
                    f.resigned += 1
                first.elector.on_resign = resign
                await first.elector.start()
                await wait_for(lambda f=first, s=second: f.elector.active_controller_id == s.broker_id,
                               what="sees the controller")
                first, second = second, first
            assert epochs == [1, 2, 3, 4]
        finally:
            await a.close()
            await b.close()
    run(main())


def test_session_expiry_hands_over_and_fences(zk_connect: str, zookeeper_server) -> None:
    async def main() -> None:
        a, b = await Node(1, zk_connect).start(), await Node(2, zk_connect).start()
        try:
            winner = await wait_for(lambda: next((n for n in (a, b) if n.elector.is_active), None), what="winner")
            loser = b if winner is a else a
            old_version = winner.elector.epoch_zk_version
            await in_thread(expire_session, winner.zk, zookeeper_server.connect_string)
            await wait_for(lambda: loser.elector.is_active, what="the other broker takes over")
            assert loser.became == [2] and loser.elector.epoch == 2
            await wait_for(lambda: winner.resigned == 1, what="the expired controller resigns")
            assert not winner.elector.is_active
            # After its new session the old winner watches again and sees the new controller.
            await wait_for(lambda: winner.elector.active_controller_id == loser.broker_id, what="re-registered watch")
            # Its stale epoch can no longer write.
            from controller.zk_client import ControllerMovedError
            with pytest.raises(ControllerMovedError):
                await in_thread(winner.zk.delete_controller, old_version)
            assert await in_thread(loser.zk.get_controller_id) == loser.broker_id
            # And if the new controller goes away, the old one is elected again with epoch 3.
            await loser.elector.stop()
            # is_active flips a moment before the "became controller" callback runs on the loop: wait
            # for the callback, which carries the new epoch.
            await wait_for(lambda: winner.elector.is_active and winner.became[-1] != 1, what="re-election")
            assert winner.became[-1] == 3
        finally:
            await a.close()
            await b.close()
    run(main())


def test_closing_the_session_resigns(zk_connect: str) -> None:
    async def main() -> None:
        a, b = await Node(1, zk_connect).start(), await Node(2, zk_connect).start()
        try:
            winner = await wait_for(lambda: next((n for n in (a, b) if n.elector.is_active), None), what="winner")
            loser = b if winner is a else a
            await in_thread(winner.zk.close)
            await wait_for(lambda: loser.elector.is_active and winner.resigned == 1, what="handover")
            assert loser.elector.epoch == 2 and not winner.elector.is_active
        finally:
            await a.close()
            await b.close()
    run(main())


def test_require_registration_waits_for_the_broker_znode(zk_connect: str) -> None:
    async def main() -> None:
        from controller import zk_data as zd
        zk = KafkaZkClient(zk_connect, 4000)
        await in_thread(zk.start)
        won: list[int] = []

        async def become(epoch: int, version: int) -> None:
            won.append(epoch)
        e = Elector(zk, 7, on_become_controller=become, require_registration=True)
        try:
            await e.start()
            await asyncio.sleep(0.5)
            assert not won
            await in_thread(zk.create_top_level_paths)
            await in_thread(zk.register_broker, zd.BrokerRegistration(7, (zd.EndPoint("h", 1),)))
            await wait_for(lambda: won == [1], what="election after registration")
        finally:
            await e.stop()
            await in_thread(zk.close)
    run(main())
