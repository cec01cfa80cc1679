"""Peer brokers' host names resolved for outgoing connections, with the last good answer kept.

A broker reaches its peers (and the controller) by the host names they registered: ``broker-1`` on a
compose network. The resolver behind those names can stop answering for a while: on a podman network,
aardvark-dns has been seen silent for 20 to 50 s around containers stopping, and glibc then waits its
timeout on every name server before it gives up with a temporary failure (EAI_AGAIN). A connection to
a peer whose address has not changed waits all that time, and a controlled shutdown, which opens a new
connection to the controller, can outlast the container's stop timeout and be killed.

Kafka runs on the JVM, which keeps successful lookups for 30 s (``networkaddress.cache.ttl``). Here the
last good answer per host and port is kept, but used only when a fresh lookup fails temporarily or has
not answered within ``stale_after_s``: a resolver that answers still decides every connection (an
address that changed is used at once), and a name the resolver says does not exist (EAI_NONAME, a
peer removed for good) is not replaced by its old address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Sequence
from functools import partial
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["HostResolver", "RESOLVER"]

# (family, host) pairs to connect to, in the resolver's order.
Addresses = list[tuple[int, str]]


def _addresses(infos: Sequence[tuple[int, int, int, str, tuple[Any, ...]]]) -> Addresses:
    out: Addresses = []
    for family, _type, _proto, _name, sockaddr in infos:
        pair = (family, str(sockaddr[0]))
        if pair not in out:
            out.append(pair)
    return out


def _literal(host: str) -> Addresses | None:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    return [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, host)]


class HostResolver:
    def __init__(self, stale_after_s: float = 1.0) -> None:
        self.stale_after_s = stale_after_s
        self._last_good: dict[tuple[str, int], Addresses] = {}

    def forget(self) -> None:
        self._last_good.clear()

    def _remember(self, key: tuple[str, int], lookup: asyncio.Future[Any]) -> None:
        # Runs for every lookup, also one nobody waits for any more: its answer (or its error, which
        # this retrieves) still counts.
        if lookup.cancelled() or lookup.exception() is not None:
            return
        found = _addresses(lookup.result())
        if found:
            self._last_good[key] = found

    async def resolve(self, host: str, port: int) -> Addresses:
        """The addresses to connect to for ``host``; the caller's timeout bounds a first lookup."""
        literal = _literal(host)
        if literal is not None:
            return literal
        key = (host, port)
        loop = asyncio.get_running_loop()
        lookup = asyncio.ensure_future(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        lookup.add_done_callback(partial(self._remember, key))
        known = self._last_good.get(key)
        if known is None:
            return _addresses(await lookup)
        await asyncio.wait({lookup}, timeout=self.stale_after_s)
        if lookup.done():
            err = lookup.exception()
            if err is None:
                return _addresses(lookup.result())
            if not (isinstance(err, socket.gaierror) and err.errno == socket.EAI_AGAIN):
                raise err  # the name is gone (or the lookup failed for good): not the old address
            why = f"failed ({err})"
        else:
            why = f"has not answered within {self.stale_after_s:.1f} s"
        log.warning("resolving %s %s; connecting to its last known address %s", host, why,
                    ", ".join(a for _, a in known))
        return known


# One per process: every outgoing connection of the broker shares what was learnt.
RESOLVER = HostResolver()
