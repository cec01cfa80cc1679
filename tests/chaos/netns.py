"""The chaos suite's network: one Linux network namespace per node, joined by veth pairs to a bridge.

    host (test process, clients)  10.203.0.1   on bridge kftbr0
    ZooKeeper                     10.203.0.10  in namespace kft-zk
    broker i                      10.203.0.2i  in namespace kft-b<i>

Every name this module creates starts with ``kft`` (namespaces, interfaces, the nftables table), so
``cleanup()`` removes exactly what a run, or a run that crashed, left behind and nothing else.

Faults are nftables rules in one table of the bridge family (``bridge kft``): a frame is dropped in the
switch, the way a broken link or a firewall drops it, so the sender sees silence, not an error. Chain
``prerouting`` sees every frame a namespace sends (to another namespace or to the host), chain
``output`` every frame the host sends into a namespace. Rules match IPv4 addresses of our subnet only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass

PREFIX = "kft"
BRIDGE = "kftbr0"
SUBNET = "10.203.0"
HOST_IP = f"{SUBNET}.1"
ZK_IP = f"{SUBNET}.10"
TABLE = "kft"  # nftables table of the bridge family on the host


def broker_ip(broker_id: int) -> str:
    return f"{SUBNET}.{20 + broker_id}"


def run(*cmd: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), input=input, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


@dataclass(frozen=True)
class Node:
    """A namespace with one address: ``name`` is how faults and reports call it (zk, b0, b1, ...)."""

    name: str
    ip: str

    @property
    def netns(self) -> str:
        return f"{PREFIX}-{self.name}"

    @property
    def veth(self) -> str:
        return f"{PREFIX}v-{self.name}"  # the host's end; inside the namespace it is eth0

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns]


HOST = Node("host", HOST_IP)


def zk_node() -> Node:
    return Node("zk", ZK_IP)


def broker_node(broker_id: int) -> Node:
    return Node(f"b{broker_id}", broker_ip(broker_id))


class Network:
    """Creates the bridge and the namespaces, applies and heals faults, and tears everything down."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = list(nodes)
        self.by_name = {n.name: n for n in self.nodes}
        self.faults: list[str] = []  # human-readable, for the report

    # -- lifecycle ------------------------------------------------------------------------------

    def up(self) -> Network:
        cleanup()
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        for n in self.nodes:
            run("ip", "netns", "add", n.netns)
            run("ip", "link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.netns)
            run("ip", "link", "set", n.veth, "master", BRIDGE)
            run("ip", "link", "set", n.veth, "up")
            run(*n.exec_prefix(), "ip", "addr", "add", f"{n.ip}/24", "dev", "eth0")
            run(*n.exec_prefix(), "ip", "link", "set", "eth0", "up")
            run(*n.exec_prefix(), "ip", "link", "set", "lo", "up")
        run("nft", "-f", "-", input=(
            f"table bridge {TABLE} {{\n"
            "  chain prerouting { type filter hook prerouting priority 0; policy accept; }\n"
            "  chain output { type filter hook output priority 0; policy accept; }\n"
            "}\n"))
        return self

    def down(self) -> None:
        cleanup()

    def __enter__(self) -> Network:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def node(self, name: str) -> Node:
        return HOST if name == "host" else self.by_name[name]

    # -- faults ---------------------------------------------------------------------------------

    def _add(self, match: str, verdict: str = "drop") -> None:
        # Frames from a namespace enter the bridge at its veth (prerouting); the host's own frames only
        # pass output. Both chains get the rule, so it holds whichever side the sender is on.
        script = "".join(f"add rule bridge {TABLE} {chain} ether type ip {match} {verdict}\n"
                         for chain in ("prerouting", "output"))
        run("nft", "-f", "-", input=script)

    def block(self, src: str, dst: str) -> None:
        """Drop every packet from ``src`` to ``dst`` (one direction only)."""
        self._add(f"ip saddr {self.node(src).ip} ip daddr {self.node(dst).ip}")
        self.faults.append(f"{src}->{dst} dropped")

    def partition(self, a: str, b: str) -> None:
        """Cut ``a`` and ``b`` apart in both directions."""
        self.block(a, b)
        self.block(b, a)

    def isolate(self, name: str, from_: list[str] | None = None) -> None:
        """Cut ``name`` off from ``from_`` (default: every other node and the host's clients)."""
        others = from_ if from_ is not None else [n.name for n in self.nodes if n.name != name] + ["host"]
        for o in others:
            self.partition(name, o)

    def loss(self, percent: int) -> None:
        """Drop ``percent``% of the packets on every link, at random (nftables ``numgen random``)."""
        self._add(f"ip saddr {SUBNET}.0/24 ip daddr {SUBNET}.0/24 numgen random mod 100 < {percent}")
        self.faults.append(f"{percent}% loss everywhere")

    def heal(self) -> None:
        """Remove every fault rule."""
        run("nft", "flush", "table", "bridge", TABLE)
        self.faults.clear()

    def rules(self) -> str:
        return run("nft", "list", "table", "bridge", TABLE, check=False).stdout


def cleanup() -> None:
    """Remove every kft namespace (killing what still runs inside), kft interface and the kft table.

    Idempotent, and safe after a crash: it looks only at names that start with ``kft``."""
    out = run("ip", "netns", "list", check=False).stdout
    for line in out.splitlines():
        ns = line.split()[0] if line.split() else ""
        if not ns.startswith(PREFIX + "-"):
            continue
        pids = run("ip", "netns", "pids", ns, check=False).stdout.split()
        for pid in pids:  # processes the chaos harness started in its own namespace
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        run("ip", "netns", "del", ns, check=False)
    links = run("ip", "-o", "link", "show", check=False).stdout
    for line in links.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith(PREFIX):
                run("ip", "link", "del", name, check=False)
    run("nft", "delete", "table", "bridge", TABLE, check=False)
