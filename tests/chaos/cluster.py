"""A cluster for one chaos scenario: the namespaces, ZooKeeper, N brokers, and views of its state.

The views read ZooKeeper directly from the host (the controller znode, partition state znodes, broker
registrations): the harness needs the truth while brokers' metadata caches may be stale, which is the
point of the faults.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

from clients.admin import WireClient
from tests.chaos.disks import FaultyDir, SmallDisk
from tests.chaos.netns import Network, Node, broker_node, zk_node
from tests.chaos.nodes import (
    BROKER_PORT,
    PROXIED_PORT,
    ZK_PORT,
    ZK_PROXIED_PORT,
    FakeClock,
    NsBroker,
    NsZooKeeper,
    Proxied,
    wait,
)

CHROOT = "/kafkette"

# Failures show within seconds: a broker cut off from ZooKeeper loses its session after 6 s, a silent
# follower leaves the ISR after 5 s. Kafka's guarantees under test: RF=3, min.insync.replicas=2,
# no unclean leader election.
BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "5000",
    "replica.socket.timeout.ms": "8000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "auto.leader.rebalance.enable": "false",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "default.replication.factor": "3",
    # Topics exist only when the harness creates them (with the placement it chose).
    "auto.create.topics.enable": "false",
}


class ChaosCluster:
    def __init__(self, brokers: int, base_dir: Path, *, proxied: bool = False, clocks: set[int] | None = None,
                 overrides: dict[str, str] | None = None, seed: int = 0, disks: str | None = None) -> None:
        self.n = brokers
        self.base_dir = base_dir
        base_dir.mkdir(parents=True, exist_ok=True)
        self.proxied = proxied
        self.zk_node = zk_node()
        self.broker_nodes = [broker_node(i) for i in range(brokers)]
        self.net = Network([self.zk_node, *self.broker_nodes])
        zk_port = ZK_PROXIED_PORT if proxied else ZK_PORT
        self.zk = NsZooKeeper(self.zk_node, base_dir / "zookeeper", port=zk_port)
        self.proxies: dict[str, Proxied] = {}
        if proxied:
            self.proxies["zk"] = Proxied(self.zk_node, ZK_PORT, ZK_PROXIED_PORT, base_dir, seed)
            for i, node in enumerate(self.broker_nodes):
                self.proxies[node.name] = Proxied(node, BROKER_PORT, PROXIED_PORT, base_dir, seed + 1 + i)
        self.clocks = {i: FakeClock(base_dir / f"clock-b{i}") for i in sorted(clocks or ())}
        settings = dict(BROKER_SETTINGS)
        settings.update(overrides or {})
        zk_connect = f"{self.zk_node.ip}:{ZK_PORT}{CHROOT}"
        # The disk scenarios: every broker gets a second log dir ("fuse": a faulty FUSE filesystem,
        # "small": a small loop-mounted ext4), so a fault on one broker's leaves it another to serve from.
        self.disks: dict[int, FaultyDir | SmallDisk] = {}
        if disks is not None:
            for i in range(brokers):
                d = base_dir / f"broker-{i}"
                d.mkdir(parents=True, exist_ok=True)
                self.disks[i] = FaultyDir(d) if disks == "fuse" else SmallDisk(d)
        self.brokers = [NsBroker(i, node, zk_connect, base_dir, overrides=settings, proxied=proxied,
                                 clock=self.clocks.get(i),
                                 extra_log_dir=self.disks[i].mount if i in self.disks else None)
                        for i, node in enumerate(self.broker_nodes)]
        self._zk_view: Any = None
        self._admin: WireClient | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def node_of(self, broker_id: int) -> Node:
        return self.broker_nodes[broker_id]

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> ChaosCluster:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.net.up()
        try:
            self.zk.start()
            for p in self.proxies.values():
                p.start()
            for disk in self.disks.values():
                disk.start()
            for b in self.brokers:
                b.start()
            for b in self.brokers:
                b.wait_ready(self.n)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self._zk_view is not None:
            with contextlib.suppress(Exception):
                self._zk_view.close()
            self._zk_view = None
        with contextlib.suppress(Exception):
            self.net.heal()
        for b in self.brokers:
            with contextlib.suppress(Exception):
                b.stop(timeout=15)
        for p in self.proxies.values():
            p.stop()
        for disk in self.disks.values():
            with contextlib.suppress(Exception):
                disk.stop()
        with contextlib.suppress(Exception):
            self.zk.stop()
        self.net.down()

    def remove_data(self) -> None:
        shutil.rmtree(self.base_dir, ignore_errors=True)

    # -- views ----------------------------------------------------------------------------------

    @property
    def zkv(self) -> Any:
        """A ZooKeeper client of the harness's own, connected to ZooKeeper's real port (no proxy)."""
        if self._zk_view is None:
            from controller.zk_client import KafkaZkClient

            self._zk_view = KafkaZkClient(f"{self.zk.connect_string}{CHROOT}", 30000, 15000, name="chaos-view")
            self._zk_view.start()
        return self._zk_view

    def admin(self) -> WireClient:
        if self._admin is None:
            self._admin = WireClient(self.bootstrap, client_id="chaos-admin", timeout=10.0)
        return self._admin

    def controller(self) -> int:
        cid = self.zkv.get_controller_id()
        return -1 if cid is None else int(cid)

    def partition_state(self, topic: str, partition: int) -> Any:
        return self.zkv.get_partition_state(topic, partition)

    def leader(self, topic: str, partition: int) -> int:
        state = self.partition_state(topic, partition)
        return -1 if state is None else int(state.leader)

    def isr(self, topic: str, partition: int) -> list[int]:
        state = self.partition_state(topic, partition)
        return [] if state is None else sorted(state.isr)

    def registered(self) -> set[int]:
        return set(self.zkv.get_sorted_broker_ids())

    def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None
                     ) -> None:
        self.admin().create_topic(name, assignment=assignment, configs=configs)
        want = {p: len(r) for p, r in assignment.items()}
        ok = wait(lambda: all(len(self.isr(name, p)) == n and self.leader(name, p) >= 0 for p, n in want.items())
                  and self._all_brokers_know(name, len(assignment)), 60)
        if not ok:
            raise RuntimeError(f"topic {name} never got a leader and a full ISR on every partition")

    def _all_brokers_know(self, topic: str, partitions: int) -> bool:
        for b in self.brokers:
            if not b.running:
                continue
            info = self.admin().refresh([topic], node=b.broker_id).topics.get(topic)
            if info is None or len(info.partitions) != partitions or any(
                    p.leader < 0 for p in info.partitions.values()):
                return False
        return True

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The broker leading the __transaction_state partition that owns ``transactional_id``."""
        from protocol.api_versions import ApiKey

        r = self.admin().call(ApiKey.FIND_COORDINATOR, key=transactional_id, key_type=1)
        return int(r.node_id) if r.error_code == 0 else -1

    def group_coordinator(self, group: str) -> int:
        return self.admin().coordinator(group)

    def wait_registered(self, ids: set[int], timeout: float = 60) -> bool:
        return wait(lambda: ids <= self.registered(), timeout)
