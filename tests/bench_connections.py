"""Broker memory per idle connection: RSS idle, with 1,000 and with 10,000 idle client connections.

Each connection is opened and answers one ApiVersions request (so the broker has accepted and set it
up), then stays idle. RSS is read from /proc once the broker's connection-count gauge shows them all.
The bench raises its own RLIMIT_NOFILE (the broker process inherits it) and spreads the clients over
several loopback source addresses so no ephemeral port range runs out.

    python -m tests.bench connections          # or: make bench
    KAFKETTE_BENCH_CONNECTIONS=1000,2000 python -m tests.bench connections
"""

from __future__ import annotations

import os
import resource
import socket
import struct
import sys
import time
import urllib.request

from clients.devcluster import LocalCluster
from protocol.api_versions import ApiKey
from protocol.messages import encode_request, new_request

STEPS = tuple(int(n) for n in os.environ.get("KAFKETTE_BENCH_CONNECTIONS", "1000,10000").split(","))
TARGET_10K_MIB = 300  # the budget for 10,000 idle connections (broker RSS, total)


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _connections(url: str) -> int:
    with urllib.request.urlopen(url, timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"} '):
                return int(float(line.rsplit(" ", 1)[1]))
    return 0


def _raise_nofile(want: int) -> tuple[int, int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for limit in (max(want, hard), hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, max(limit, hard)))
            break
        except (ValueError, OSError):
            continue
    return soft, hard


_API_VERSIONS = encode_request(ApiKey.API_VERSIONS, 3, 1, "bench-conn",
                               new_request(ApiKey.API_VERSIONS, client_software_name="bench",
                                           client_software_version="1"))


def _open(host: str, port: int, n: int, first: int) -> list[socket.socket]:
    out = []
    for i in range(n):
        source = f"127.0.{(first + i) // 5000 + 1}.1"
        s = socket.create_connection((host, port), timeout=30, source_address=(source, 0))
        s.sendall(_API_VERSIONS)
        (size,) = struct.unpack(">i", _recv(s, 4))
        _recv(s, size)
        out.append(s)
    return out


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def main() -> int:
    soft, hard = _raise_nofile(max(STEPS) * 2 + 2048)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit < max(STEPS) + 1024:
        print(f"RLIMIT_NOFILE is {limit}: cannot open {max(STEPS)} connections", file=sys.stderr)
        return 1
    socks: list[socket.socket] = []
    rows = []
    try:
        with LocalCluster(1) as cluster:
            b = cluster.brokers[0]
            assert b.process is not None and b.metrics_url is not None
            pid = b.process.pid
            base_conns = _connections(b.metrics_url)
            idle = _rss_mib(pid)
            rows.append((0, idle))
            for n in STEPS:
                started = time.perf_counter()
                socks += _open(b.host, b.port, n - len(socks), len(socks))
                deadline = time.monotonic() + 120
                # Every one of ours was answered, so the broker has it; the gauge also counts the
                # broker's own connections, which may come and go by one or two.
                while _connections(b.metrics_url) < base_conns + n - 2 and time.monotonic() < deadline:
                    time.sleep(0.2)
                rows.append((n, _rss_mib(pid)))
                print(f"  opened {n:,} connections in {time.perf_counter() - started:.1f}s; the broker counts "
                      f"{_connections(b.metrics_url):,} open", flush=True)
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    print(f"broker RSS with idle connections (RLIMIT_NOFILE {limit}):")
    print(f"  {'connections':>12} {'RSS MiB':>9} {'KiB per connection':>20}")
    for n, rss in rows:
        per = f"{(rss - idle) * 1024 / n:,.1f}" if n else "-"
        print(f"  {n:>12,} {rss:>9.1f} {per:>20}")
    at_10k = dict(rows).get(10_000)
    if at_10k is not None:
        verdict = "within" if at_10k < TARGET_10K_MIB else "OVER"
        print(f"  10,000 idle connections: {at_10k:.0f} MiB, {verdict} the {TARGET_10K_MIB} MiB budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
