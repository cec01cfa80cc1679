"""Talking to a running dev cluster: ``python -m clients.devcluster status | kill <id> | stop <id> |
restart <id>``.

The dev cluster listens on a Unix socket in Linux's abstract namespace, named after its data directory
(so it needs no file, leaves nothing behind when the process dies, and has no path length limit);
only processes of the same user are answered. One request per connection: a JSON line
``{"command": ..., "broker": ...}``; the answer is JSON lines ``{"line": ...}`` ending with
``{"done": true, "ok": ...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import socket
import socketserver
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

COMMANDS = ("status", "kill", "stop", "restart")
# kill: SIGKILL, a crash (its leaderships move once its ZooKeeper session expires,
# zookeeper.session.timeout.ms later); stop: SIGTERM, a controlled shutdown (they move at once).
NEEDS_BROKER = ("kill", "stop", "restart")

Say = Callable[[str], None]
# (command, broker id or None, say) -> ok
Handler = Callable[[str, int | None, Say], bool]


def control_address(cluster_dir: Path) -> str:
    digest = hashlib.sha256(str(cluster_dir.resolve()).encode()).hexdigest()[:32]
    return f"\0kafkette-devcluster-{digest}"


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class ControlServer:
    """Serves control requests in threads of its own until ``close()``."""

    def __init__(self, cluster_dir: Path, handler: Handler) -> None:
        self.address = control_address(cluster_dir)
        outer = self

        class _Request(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                outer._serve(self.connection, self.rfile, self.wfile)

        class _Server(socketserver.ThreadingUnixStreamServer):
            daemon_threads = True

        self._handler = handler
        self._server = _Server(self.address, _Request)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="devcluster-control", daemon=True)

    def start(self) -> ControlServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _serve(self, conn: socket.socket, rfile: object, wfile: object) -> None:
        import io

        assert isinstance(rfile, io.BufferedIOBase) and isinstance(wfile, io.BufferedIOBase)

        def send(obj: dict[str, object]) -> None:
            with contextlib.suppress(OSError):
                wfile.write((json.dumps(obj) + "\n").encode())
                wfile.flush()

        if _peer_uid(conn) != os.getuid():
            send({"line": "refused: the dev cluster answers only its own user", "done": True, "ok": False})
            return
        try:
            request = json.loads(rfile.readline() or b"{}")
            command, broker = str(request.get("command")), request.get("broker")
        except (ValueError, AttributeError):
            send({"line": "bad request", "done": True, "ok": False})
            return
        if command not in COMMANDS or (broker is not None and not isinstance(broker, int)):
            send({"line": f"unknown command {command!r}", "done": True, "ok": False})
            return
        try:
            ok = self._handler(command, broker, lambda line: send({"line": line}))
        except Exception as e:  # the answer says what went wrong; the cluster keeps running
            send({"line": f"{command} failed: {e}"})
            ok = False
        send({"done": True, "ok": ok})


def request(cluster_dir: Path, command: str, broker: int | None = None, timeout: float = 120.0) -> Iterator[str]:
    """Send one request; yields the answer's lines. Raises ConnectionRefusedError when no dev cluster
    runs on ``cluster_dir`` and RuntimeError when the command failed."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(control_address(cluster_dir))
        except (ConnectionRefusedError, FileNotFoundError):  # nobody listens on that abstract name
            raise ConnectionRefusedError(f"no dev cluster runs on {cluster_dir}") from None
        s.sendall((json.dumps({"command": command, "broker": broker}) + "\n").encode())
        with s.makefile("rb") as f:
            for raw in f:
                msg = json.loads(raw)
                if "line" in msg:
                    yield str(msg["line"])
                if msg.get("done"):
                    if not msg.get("ok"):
                        raise RuntimeError(f"{command} failed")
                    return
    raise RuntimeError(f"{command}: the dev cluster closed the connection without an answer")


def is_running(cluster_dir: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(control_address(cluster_dir))
        except OSError:
            return False
        return True


def find_cluster_dir(explicit: str | None, candidates: list[Path], where: str) -> Path:
    """The directory of the dev cluster to talk to: ``--dir`` when given, else the one running among
    ``candidates`` (the default directories of each shape and of ``make run-secure``, ``where`` in words)."""
    if explicit:
        return Path(explicit).resolve()
    running = [d for d in candidates if is_running(d)]
    if len(running) == 1:
        return running[0]
    if not running:
        raise SystemExit(f"devcluster: no dev cluster is running from {where}; for one started with --dir DIR, "
                         "add --dir DIR")
    raise SystemExit("devcluster: several dev clusters are running (" + ", ".join(map(str, running))
                     + "): choose one with --dir")


def control_main(argv: list[str], candidates: Callable[[argparse.Namespace], list[Path]], prog: str,
                 where: str) -> int:
    ap = argparse.ArgumentParser(
        prog=prog, description="Control a running dev cluster: see its processes, kill, stop or restart a broker.")
    ap.add_argument("command", choices=COMMANDS,
                    help="status: the processes, the controller and the partition leaders; kill <id>: SIGKILL a broker (a crash: its leaderships move when "
                         "its ZooKeeper session expires); stop <id>: SIGTERM (a controlled shutdown: they move "
                         "at once); restart <id>: start it again (stopping it first when it runs)")
    ap.add_argument("broker", nargs="?", type=int, help="broker id (kill, stop, restart)")
    ap.add_argument("--dir", help="data directory of the dev cluster (default: the one running from .cache)")
    ap.add_argument("--brokers", type=int, help="which default directory: the one of the N-broker cluster")
    ap.add_argument("--secure", action="store_true", help="the cluster of make run-secure")
    args = ap.parse_args(argv)
    if args.command in NEEDS_BROKER and args.broker is None:
        ap.error(f"{args.command} needs a broker id, e.g. {prog} {args.command} 1")
    cluster_dir = find_cluster_dir(args.dir, candidates(args), where)
    try:
        for line in request(cluster_dir, args.command, args.broker):
            print(line, flush=True)
    except ConnectionRefusedError:
        print(f"devcluster: no dev cluster runs on {cluster_dir}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        print(f"devcluster: {e}", file=sys.stderr)
        return 1
    return 0
