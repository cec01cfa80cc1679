"""A local cluster of real processes: one private ZooKeeper and N brokers.

``make run`` uses it to bring up a cluster on localhost; the integration tests use the same classes,
so what the tests exercise is what a user starts. Each broker is ``kafkette broker start`` with a
server.properties written here (Kafka's names), in its own directory.

    python -m clients.devcluster --brokers 3 --port 9092      # 9092, 9093, 9094
    python -m clients.devcluster restart 1                    # to the running one: status, kill, stop, restart

Running in the foreground (checks, a broker death reported, control requests, a bounded stop) is
clients/devcluster_supervisor.py; the checks before anything starts are clients/devcluster_guard.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from clients.zookeeper_server import ZooKeeperServer, free_port
from protocol.client_connection import PLAINTEXT, ConnectionSecurity

REPO = Path(__file__).resolve().parent.parent

# Broker configs every LocalCluster broker gets before its own overrides. Empty for `make run`. The test
# suite puts controlled.shutdown.retry.backoff.ms here (tests/conftest.py): a test cluster's last broker,
# or one whose peers were killed, has nobody to hand its leaderships to, and with Kafka's 5 s backoff
# its controlled shutdown waits out all three attempts, 10 s per teardown.
BASE_OVERRIDES: dict[str, str] = {}


def wait_for_port(host: str, port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with status {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s")


def wait_for_cluster_metadata(host: str, port: int, brokers: int, timeout: float,
                              proc: subprocess.Popen[bytes] | None = None, broker_id: int | None = None,
                              security: ConnectionSecurity = PLAINTEXT) -> None:
    """Wait until the broker at host:port answers Metadata with ``brokers`` live brokers and a
    controller: from then on clients get a usable cluster view (a broker listens a moment before the
    controller has told it who is alive). ``security``: how to connect to a TLS or SASL listener."""
    from clients.connection import BrokerConnection, WireError
    from protocol.api_versions import ApiKey

    deadline = time.monotonic() + timeout
    seen = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with status {proc.returncode} before it knew the cluster")
        conn = None
        try:
            conn = BrokerConnection(host, port, client_id="devcluster", timeout=2.0, connect_timeout=2.0,
                                    security=security)
            md = conn.call(ApiKey.METADATA, topics=[], allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)
            seen = f"{len(md.brokers)} brokers, controller {md.controller_id}"
            if (len(md.brokers) >= brokers and md.controller_id >= 0
                    and (broker_id is None or any(b.node_id == broker_id for b in md.brokers))):
                return
        except (OSError, WireError):
            pass
        finally:
            if conn is not None:
                conn.close()
        time.sleep(0.05)
    raise TimeoutError(f"broker {host}:{port} does not know the cluster after {timeout}s ({seen})")


class BrokerProcess:
    """One broker as a subprocess, with its own directory, config file and log file."""

    def __init__(self, broker_id: int, port: int, zk_connect: str, base_dir: Path, *,
                 overrides: Mapping[str, str] | None = None, metrics_port: int = -1, host: str = "127.0.0.1",
                 security: ConnectionSecurity = PLAINTEXT) -> None:
        self.broker_id = broker_id
        self.port = port
        self.host = host
        # How the readiness checks reach ``port`` (the client listener, when the overrides secure it).
        self.security = security
        self.dir = base_dir / f"broker-{broker_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.dir / "server.properties"
        self.log_path = self.dir / "broker.log"
        props = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://{host}:{port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{port}",
            "log.dirs": str(self.dir / "data"),
            "zookeeper.connect": zk_connect,
            "metrics.port": str(metrics_port),
        }
        props.update(overrides or {})
        self.props = props
        self.metrics_port = int(props["metrics.port"])
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None
        # The dev cluster runs brokers in process groups of their own: a Ctrl-C in its terminal reaches
        # only the dev cluster, which then stops them all at once within a bounded time.
        self.own_process_group = False

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        return f"http://{self.host}:{self.metrics_port}/metrics" if self.metrics_port > 0 else None

    def start(self, wait: bool = True, timeout: float = 30.0) -> BrokerProcess:
        self._close_log()  # the log of a process that died on its own (a restart)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "broker", "--config", str(self.config_path)],
            cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT, env=env,
            process_group=0 if self.own_process_group else None)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until this broker listens, has registered and was told by a controller (other brokers may
        be down: restarts)."""
        assert self.process is not None
        wait_for_port(self.host, self.port, timeout, self.process)
        wait_for_cluster_metadata(self.host, self.port, 1, timeout, self.process, broker_id=self.broker_id,
                                  security=self.security)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (graceful shutdown), then SIGKILL if it does not exit in time."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        rc = self.process.returncode
        self._close_log()
        return rc

    def terminate(self) -> None:
        """SIGTERM without waiting: a graceful shutdown begins."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: a crash, for failure tests."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close_log()

    def pause(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)

    @property
    def paused(self) -> bool:
        """Whether the process is stopped now (state T). Something else can resume it: when the shell
        job that started the process group ends, the kernel sends SIGHUP and SIGCONT to every process
        of the group if one of them is stopped."""
        if self.process is None or self.process.poll() is not None:
            return False
        try:
            with open(f"/proc/{self.process.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "T"
        except OSError:
            return False

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


BrokerOverrides = Callable[[int, int], Mapping[str, str]]


class LocalCluster:
    """ZooKeeper plus ``n`` brokers on consecutive ports (or free ports when ``base_port`` is 0).

    A secured cluster (``clients/devcluster_secure.py``) passes ``broker_overrides`` (broker id and
    client port -> that broker's listener settings), ``security`` (how the readiness checks connect)
    and ``before_brokers`` (called with the ZooKeeper connect string once ZooKeeper serves and before
    any broker starts: where SCRAM credentials are written, as ``kafka-configs --zookeeper`` does).
    """

    def __init__(self, n: int = 1, *, base_port: int = 0, base_dir: str | os.PathLike[str] | None = None,
                 zk_port: int | None = None, overrides: dict[str, str] | None = None,
                 chroot: str = "/kafkette", metrics_base_port: int | None = 0,
                 broker_overrides: BrokerOverrides | None = None, security: ConnectionSecurity = PLAINTEXT,
                 before_brokers: Callable[[str], None] | None = None) -> None:
        self.n = n
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir is not None else Path(tempfile.mkdtemp(prefix="kafkette-"))
        self.zk = ZooKeeperServer(port=zk_port, data_dir=self.base_dir / "zookeeper")
        defaults = {
            # A small cluster: internal topics replicated as widely as it allows.
            "offsets.topic.replication.factor": str(min(n, 3)),
            "transaction.state.log.replication.factor": str(min(n, 3)),
            "transaction.state.log.min.isr": str(min(n, 2)),
            "group.initial.rebalance.delay.ms": "0",
        }
        defaults.update(overrides or {})
        self.overrides = defaults
        self.chroot = chroot
        self.base_port = base_port
        # Prometheus endpoints: broker i on metrics_base_port + i, free ports when 0, none when None.
        self.metrics_base_port = metrics_base_port
        self.broker_overrides = broker_overrides
        self.security = security
        self.before_brokers = before_brokers
        self.brokers: list[BrokerProcess] = []
        # None: stop() stops the brokers one after another (each may hand its leaderships to the next).
        # A number: stop() signals them all at once and kills those still running after that many
        # seconds (the dev cluster: Ctrl-C stops everything within a few seconds).
        self.stop_within: float | None = None
        self.own_process_groups = False
        self.on_stop: Callable[[], None] | None = None  # called as stop() begins

    def planned_ports(self) -> list[tuple[int, str]]:
        """The fixed ports ``start()`` will listen on, each with what listens there."""
        ports = [(self.zk.port, "ZooKeeper")]
        if self.base_port:
            ports += [(self.base_port + i, f"broker {i}") for i in range(self.n)]
        if self.metrics_base_port:
            ports += [(self.metrics_base_port + i, f"metrics of broker {i}") for i in range(self.n)]
        return ports

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def zk_connect(self) -> str:
        return self.zk.connect_string + self.chroot

    def start(self) -> LocalCluster:
        self.zk.start()
        connect = self.zk_connect
        for i in range(self.n):
            port = self.base_port + i if self.base_port else free_port()
            if self.metrics_base_port is None:
                metrics_port = -1
            else:
                metrics_port = self.metrics_base_port + i if self.metrics_base_port else free_port()
            overrides = {**BASE_OVERRIDES, **self.overrides}
            if self.broker_overrides is not None:
                overrides.update(self.broker_overrides(i, port))
            b = BrokerProcess(i, port, connect, self.base_dir, overrides=overrides, metrics_port=metrics_port,
                              security=self.security)
            b.own_process_group = self.own_process_groups
            self.brokers.append(b)
        try:
            if self.before_brokers is not None:
                self.before_brokers(connect)
            for b in self.brokers:
                b.start(wait=False)
            for b in self.brokers:
                assert b.process is not None
                try:
                    wait_for_port(b.host, b.port, 60.0, b.process)
                    wait_for_cluster_metadata(b.host, b.port, self.n, 60.0, b.process, security=self.security)
                except (RuntimeError, TimeoutError) as e:
                    raise RuntimeError(f"broker {b.broker_id}: {e}; the end of {b.log_path}:\n"
                                       f"{b.log_text()[-3000:]}") from None
        except BaseException:
            # A failed start must not leave ZooKeeper or the brokers that did start running.
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.on_stop is not None:
            self.on_stop()
        if self.stop_within is not None:
            self.stop_all_at_once(self.stop_within)
            return
        for b in self.brokers:
            with contextlib.suppress(Exception):
                b.stop()
        self.zk.stop()

    def stop_all_at_once(self, seconds: float, zk_seconds: float = 1.0) -> list[int]:
        """SIGTERM to every broker at once, SIGKILL to those still running ``seconds`` later, then
        ZooKeeper (the brokers need it for their controlled shutdown). Returns the ids killed.

        One after another, each broker's controlled shutdown hands its leaderships to the next; the
        last has nobody left and retries controlled.shutdown.max.retries times, backing off
        controlled.shutdown.retry.backoff.ms (5 s in Kafka) in between: that is where a sequential
        stop spends its time."""
        for b in self.brokers:
            b.terminate()
        deadline = time.monotonic() + seconds
        while any(b.running for b in self.brokers) and time.monotonic() < deadline:
            time.sleep(0.05)
        killed = [b.broker_id for b in self.brokers if b.running]
        for b in self.brokers:
            with contextlib.suppress(Exception):
                b.kill()  # reaps it (and closes its log) when it has already exited
        self.zk.stop(timeout=zk_seconds)
        return killed

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._own_dir:
            import shutil

            shutil.rmtree(self.base_dir, ignore_errors=True)


def run_in_foreground(cluster: LocalCluster, describe: Callable[[LocalCluster], None], *,
                      control_command: Callable[[str], str] | None = None, shape_hint: str | None = None,
                      extra_ports: Sequence[tuple[int, str]] = (), legacy_parent: Path | None = None) -> int:
    """Check, start and print what ``describe`` says about ``cluster``; keep it up until SIGINT, SIGTERM
    or SIGHUP, reporting brokers that die and serving control requests; then stop it (data stays in its
    directory). clients/devcluster_supervisor.py has the details."""
    from clients.devcluster_supervisor import DevClusterRun

    if control_command is None:
        control_command = control_command_for(f"--dir {cluster.base_dir}")
    run = DevClusterRun(cluster, describe, control_command=control_command,
                        shape_hint=shape_hint or "give this one another directory (--dir)",
                        extra_ports=extra_ports, legacy_parent=legacy_parent)
    return run.run()


def control_command_for(options: str = "") -> Callable[[str], str]:
    """``"restart 1"`` -> the command line that does it, as the user can paste it."""
    python = sys.executable
    with contextlib.suppress(ValueError):
        python = str(Path(sys.executable).relative_to(Path.cwd()))
    suffix = f" {options}" if options else ""
    return lambda command: f"{python} -m clients.devcluster {command}{suffix}"


def describe_brokers(cluster: LocalCluster) -> None:
    print(f"ZooKeeper: {cluster.zk_connect}")
    for b in cluster.brokers:
        metrics = f", metrics: {b.metrics_url}" if b.metrics_url else ""
        print(f"broker {b.broker_id}: {b.bootstrap}  (log: {b.log_path}{metrics})")


DEFAULT_PARENT = REPO / ".cache" / "devcluster"


def _control_candidates(args: argparse.Namespace) -> list[Path]:
    from clients.devcluster_guard import shape_dir

    secure = REPO / ".cache" / "devcluster-secure" / "cluster"
    if args.secure:
        return [secure]
    if args.brokers is not None:
        return [shape_dir(DEFAULT_PARENT, args.brokers)]
    shapes = sorted(DEFAULT_PARENT.glob("brokers-*")) if DEFAULT_PARENT.is_dir() else []
    return [*shapes, secure]


def main(argv: list[str] | None = None) -> int:
    from clients.devcluster_control import COMMANDS, control_main
    from clients.devcluster_guard import shape_dir
    from clients.devcluster_overrides import ENV_VAR, OverrideError, parse_overrides, split_env

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:  # status | kill <id> | stop <id> | restart <id>: to a running cluster
        return control_main(argv, _control_candidates, "python -m clients.devcluster",
                            ".cache/devcluster/brokers-<n> or .cache/devcluster-secure")
    if "--secure" in argv:  # `make run-secure`: SASL_SSL listeners, SCRAM users, an authorizer
        from clients import devcluster_secure

        return devcluster_secure.main([a for a in argv if a != "--secure"])
    ap = argparse.ArgumentParser(
        prog="python -m clients.devcluster",
        description="Run a local kafkette cluster (ZooKeeper + brokers) in the foreground. With a command "
                    "(status, kill <id>, stop <id>, restart <id>), control the one running: "
                    "python -m clients.devcluster status --help.")
    ap.add_argument("--secure", action="store_true",
                    help="SASL_SSL listeners, SCRAM users and an authorizer (clients/devcluster_secure.py)")
    ap.add_argument("--brokers", type=int, default=int(os.environ.get("KAFKETTE_BROKERS", "3")),
                    help="number of brokers (default: $KAFKETTE_BROKERS, else 3)")
    ap.add_argument("--port", type=int, default=9092, help="port of broker 0; broker i listens on port+i")
    ap.add_argument("--zk-port", type=int, default=2181, help="ZooKeeper's client port")
    ap.add_argument("--metrics-port", type=int, default=9404,
                    help="Prometheus port of broker 0; broker i serves metrics on port+i (-1: off)")
    ap.add_argument("--dir", default=None,
                    help="data directory, kept between runs (default: .cache/devcluster/brokers-<n>, one per "
                         "broker count); a directory holds one cluster shape: another broker count is refused")
    ap.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                    help=f"a broker config for every broker (repeatable; also ${ENV_VAR}=\"NAME=VALUE ...\"), "
                         "checked against the broker's configs before anything starts")
    args = ap.parse_args(argv)
    if args.brokers < 1:
        ap.error("--brokers must be at least 1")
    try:
        overrides = parse_overrides([*split_env(os.environ.get(ENV_VAR)), *args.override])
    except (OverrideError, ValueError) as e:  # ValueError: shlex on unbalanced quotes
        print(f"devcluster: {e}", file=sys.stderr)
        return 2
    explicit = args.dir is not None
    cluster_dir = Path(args.dir).resolve() if explicit else shape_dir(DEFAULT_PARENT, args.brokers)
    cluster = LocalCluster(args.brokers, base_port=args.port, base_dir=cluster_dir, zk_port=args.zk_port,
                           metrics_base_port=None if args.metrics_port < 0 else args.metrics_port,
                           overrides=overrides)

    def describe(c: LocalCluster) -> None:
        describe_brokers(c)
        if overrides:
            print("broker configs given: " + " ".join(f"{k}={v}" for k, v in overrides.items()))
        print(f"data: {c.base_dir}")
        print(f"bootstrap servers: {c.bootstrap}   -- Ctrl-C stops the cluster")

    return run_in_foreground(
        cluster, describe, control_command=control_command_for(f"--dir {cluster_dir}" if explicit else ""),
        shape_hint="give this one another directory (--dir)",
        legacy_parent=None if explicit else DEFAULT_PARENT)


if __name__ == "__main__":
    sys.exit(main())
