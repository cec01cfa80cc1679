"""The dev cluster in the foreground (``make run``, ``make run-secure``).

- Before anything starts: the data directory's lock, its shape and the ports (clients/devcluster_guard.py).
  A refusal exits with status 1 before the banner, and writes nothing into the running cluster's files.
- A broker that dies is reported (which one, its exit status, its log) and the others keep running;
  ``python -m clients.devcluster status | kill <id> | stop <id> | restart <id>`` (clients/devcluster_control.py)
  lets failover be watched by hand.
- SIGINT, SIGTERM and SIGHUP stop everything within a few seconds: the brokers all at once, SIGKILL for
  any still running after BROKER_STOP_SECONDS, then ZooKeeper; a line says so when stopping and when stopped.
- The exit status is 0 after a stop by signal, 1 when the cluster could not start or ZooKeeper died.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from clients.devcluster_control import ControlServer, Say
from clients.devcluster_guard import (
    DataDirLock,
    RefusedToStart,
    adopt_legacy_layout,
    check_shape,
    refuse_busy_ports,
    write_shape,
)

if TYPE_CHECKING:  # clients.devcluster imports this module when it runs a dev cluster
    from clients.devcluster import BrokerProcess, LocalCluster

# A dev cluster's brokers all stop together, so controlled shutdown cannot hand the last broker's
# leaderships to anyone: with Kafka's 5 s backoff it retries for 10 s. 500 ms keeps a whole-cluster
# stop near one second; a single broker's controlled shutdown (stop <id>) succeeds at the first attempt
# anyway. --override controlled.shutdown.retry.backoff.ms=5000 restores Kafka's default.
DEV_DEFAULTS = {"controlled.shutdown.retry.backoff.ms": "500"}
BROKER_STOP_SECONDS = 3.5
ZK_STOP_SECONDS = 1.0
RESTART_READY_SECONDS = 60.0


class State(Enum):
    RUNNING = "running"
    STARTING = "starting"
    STOPPING = "stopping"
    STOPPED = "stopped on request"
    KILLED = "killed on request"
    EXITED = "exited"


def exit_status(rc: int | None) -> str:
    if rc is None:
        return "status unknown"
    if rc < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-rc).name}"
    return f"status {rc}"


class DevClusterRun:
    """One run of the dev cluster, from the checks to the last process stopped."""

    def __init__(self, cluster: LocalCluster, describe: Callable[[LocalCluster], None], *,
                 control_command: Callable[[str], str], shape_hint: str, extra_ports: Sequence[tuple[int, str]] = (),
                 legacy_parent: Path | None = None) -> None:
        self.cluster = cluster
        self.describe = describe
        self.control_command = control_command  # "restart 1" -> the command line that does it
        self.shape_hint = shape_hint  # how to choose another directory, for the shape refusal
        self.extra_ports = list(extra_ports)
        self.legacy_parent = legacy_parent
        self.lock = DataDirLock(cluster.base_dir)
        self.state: dict[int, State] = {}
        self._mutex = threading.RLock()  # broker processes and states: the main loop and control requests
        self._print_lock = threading.Lock()
        self._phase = "checking"  # checking, starting, running, stopping
        self._stop_reason: str | None = None
        self._stop_announced = False
        self._stop_began = 0.0

    # -- output -----------------------------------------------------------------------------------

    def say(self, line: str, *, err: bool = False) -> None:
        with self._print_lock:
            print(line, file=sys.stderr if err else sys.stdout, flush=True)

    # -- the run ----------------------------------------------------------------------------------

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        try:
            self._checks()
        except RefusedToStart as e:
            self.say(f"devcluster: refusing to start: {e}", err=True)
            self.lock.release()
            return 1
        try:
            return self._run_checked()
        finally:
            self.lock.release()

    def _checks(self) -> None:
        c = self.cluster
        self.lock.acquire()
        refuse_busy_ports([*c.planned_ports(), *self.extra_ports], c.base_dir)
        if self.legacy_parent is not None:
            moved = adopt_legacy_layout(self.legacy_parent)
            if moved is not None:
                self.say(f"moved the data an earlier version kept in {self.legacy_parent} to {moved}")
        check_shape(c.base_dir, c.n, how_to_choose=self.shape_hint)
        write_shape(c.base_dir, c.n)

    def _run_checked(self) -> int:
        c = self.cluster
        for name, value in DEV_DEFAULTS.items():
            c.overrides.setdefault(name, value)
        c.own_process_groups = True
        c.stop_within = BROKER_STOP_SECONDS
        c.on_stop = self._announce_stop  # also when a failed or interrupted start() cleans up
        if self._stop_reason is not None:  # a signal during the checks
            self.say(f"devcluster: {self._stop_reason} before anything started")
            return 1
        self._phase = "starting"
        try:
            c.start()
        except KeyboardInterrupt:  # a signal while starting; LocalCluster.start stopped what it had started
            self._stop_everything()
            return 1
        except Exception as e:
            self.say(f"devcluster: failed to start: {e}", err=True)
            for b in c.brokers:
                self.say(f"--- {b.log_path}\n{b.log_text()[-3000:]}", err=True)
            self._stop_everything()
            return 1
        with self._mutex:
            self.state = {b.broker_id: State.RUNNING for b in c.brokers}
        control: ControlServer | None = None
        rc = 0
        try:
            control = ControlServer(c.base_dir, self._control).start()
            self._phase = "running"
            if self._stop_reason is None:  # else a signal came as start() ended: straight to stopping
                self.describe(c)
                self.say(f"control it from another terminal: {self.control_command('COMMAND')}\n"
                         "    COMMAND: status, kill <id> (SIGKILL, a crash), stop <id> (SIGTERM, a controlled "
                         "shutdown), restart <id>\n"
                         "    a broker that dies is reported here and the others keep running")
            while self._stop_reason is None:
                time.sleep(0.2)
                if not self._watch():
                    rc = 1
                    break
        finally:
            with self._mutex:
                self._phase = "stopping"
            if control is not None:
                control.close()
            self._stop_everything()
        return rc

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._stop_reason is None:
            self._stop_reason = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if self._phase == "starting":
            raise KeyboardInterrupt  # out of the waits in LocalCluster.start; it stops what it started

    def _announce_stop(self) -> None:
        if self._stop_announced:
            return
        self._stop_announced = True
        self._phase = "stopping"
        why = self._stop_reason or "the cluster failed"
        self._stop_began = time.monotonic()
        n = len(self.cluster.brokers)
        what = {0: "ZooKeeper", 1: "the broker, then ZooKeeper"}.get(n, f"{n} brokers at once, then ZooKeeper")
        self.say(f"stopping the dev cluster ({why}): {what} ...")

    def _stop_everything(self) -> None:
        self._announce_stop()
        with self._mutex:
            killed = self.cluster.stop_all_at_once(BROKER_STOP_SECONDS, ZK_STOP_SECONDS)
        if killed:
            self.say(f"brokers {', '.join(map(str, killed))} did not stop within {BROKER_STOP_SECONDS:g} s: killed "
                     "(their logs are recovered at the next start)")
        self.say(f"stopped: every broker and ZooKeeper, in {time.monotonic() - self._stop_began:.1f} s; "
                 f"data kept in {self.cluster.base_dir}")

    def _watch(self) -> bool:
        """Report processes that died; False when the cluster cannot go on (ZooKeeper died)."""
        c = self.cluster
        with self._mutex:
            if not c.zk.running:
                proc = c.zk.process
                self._stop_reason = "ZooKeeper exited"
                self.say(f"ZooKeeper exited ({exit_status(proc.returncode if proc else None)}); its log: "
                         f"{c.zk.log_path}. The brokers cannot go on without it.", err=True)
                return False
            for b in c.brokers:
                if self.state.get(b.broker_id) is State.RUNNING and not b.running:
                    self.state[b.broker_id] = State.EXITED
                    self._report_death(b)
        return True

    def _report_death(self, b: BrokerProcess) -> None:
        rc = b.process.returncode if b.process else None
        tail = [line for line in b.log_text().splitlines() if line.strip()][-3:]
        self.say(f"broker {b.broker_id} exited ({exit_status(rc)}); its log: {b.log_path}"
                 + "".join(f"\n    {line}" for line in tail), err=True)
        self.say(f"the other brokers keep running; restart it with: {self.control_command(f'restart {b.broker_id}')}",
                 err=True)

    # -- control requests (threads of the control server) -----------------------------------------

    def _control(self, command: str, broker: int | None, reply: Say) -> bool:
        if command == "status":
            self._status(reply)
            return True
        with self._mutex:
            if self._phase != "running":
                reply("the dev cluster is stopping")
                return False
            b = next((x for x in self.cluster.brokers if x.broker_id == broker), None)
            if b is None:
                reply(f"no broker {broker}: the brokers are 0-{len(self.cluster.brokers) - 1}")
                return False
            state = self.state[b.broker_id]
            if state in (State.STARTING, State.STOPPING):
                reply(f"broker {b.broker_id} is {state.value}; try again once it is done")
                return False
            if command in ("kill", "stop") and not b.running:
                reply(f"broker {b.broker_id} is not running ({state.value}); "
                      f"start it with: {self.control_command(f'restart {b.broker_id}')}")
                return False
            was_running = b.running
            if was_running:
                self.state[b.broker_id] = State.STOPPING

        def both(line: str) -> None:
            self.say(line)
            reply(line)

        if command == "kill":
            b.kill()
            with self._mutex:
                self.state[b.broker_id] = State.KILLED
            timeout_ms = self._config("zookeeper.session.timeout.ms")
            both(f"broker {b.broker_id} killed (SIGKILL) on request: the controller moves its leaderships when its "
                 f"ZooKeeper session expires (zookeeper.session.timeout.ms={timeout_ms}); "
                 f"restart it with: {self.control_command(f'restart {b.broker_id}')}")
            return True
        if was_running:
            both(f"broker {b.broker_id}: controlled shutdown (SIGTERM) on request ...")
            rc = b.stop(timeout=30.0)
            with self._mutex:
                self.state[b.broker_id] = State.STOPPED
            both(f"broker {b.broker_id} stopped ({exit_status(rc)})")
        if command == "stop":
            both(f"restart it with: {self.control_command(f'restart {b.broker_id}')}")
            return True
        return self._restart(b, both)

    def _restart(self, b: BrokerProcess, both: Say) -> bool:
        with self._mutex:
            if self._phase != "running":
                both(f"broker {b.broker_id} not restarted: the dev cluster is stopping")
                return False
            b.start(wait=False)
            self.state[b.broker_id] = State.STARTING
            pid = b.process.pid if b.process else "?"
        both(f"broker {b.broker_id} starting (pid {pid}); waiting until it has registered (after a crash, once "
             f"its old ZooKeeper session has expired: zookeeper.session.timeout.ms="
             f"{self._config('zookeeper.session.timeout.ms')}) ...")
        try:
            b.wait_ready(RESTART_READY_SECONDS)
        except (RuntimeError, TimeoutError) as e:
            with self._mutex:
                self.state[b.broker_id] = State.EXITED if not b.running else State.RUNNING
            both(f"broker {b.broker_id} did not come back: {e}; its log: {b.log_path}")
            return False
        with self._mutex:
            self.state[b.broker_id] = State.RUNNING
        both(f"broker {b.broker_id} is back on {b.bootstrap} (pid {pid})")
        return True

    def _config(self, name: str) -> str:
        from config.registry import REGISTRY, format_value

        if name in self.cluster.overrides:
            return self.cluster.overrides[name]
        return format_value(name, REGISTRY[name].default) or ""

    def _status(self, reply: Say) -> None:
        c = self.cluster
        reply(f"dev cluster on {c.base_dir} (pid {os.getpid()})")
        zk = c.zk
        reply(f"ZooKeeper {zk.connect_string}: " + (f"running (pid {zk.process.pid})" if zk.running and zk.process
                                                     else "not running"))
        with self._mutex:
            rows = []
            for b in c.brokers:
                state = self.state.get(b.broker_id, State.STOPPED)
                if state is State.EXITED and b.process is not None:
                    detail = f"exited ({exit_status(b.process.returncode)})"
                elif b.running and b.process is not None:
                    detail = f"{state.value} (pid {b.process.pid})"
                else:
                    detail = state.value
                rows.append(f"broker {b.broker_id} {b.bootstrap}: {detail}; log: {b.log_path}")
            live = [b for b in c.brokers if self.state.get(b.broker_id) is State.RUNNING and b.running]
        for row in rows:
            reply(row)
        for line in leadership_summary(live):
            reply(line)


def leadership_summary(live: Sequence[BrokerProcess]) -> list[str]:
    """The controller and who leads how many partitions, as one of the live brokers sees it."""
    from clients.connection import BrokerConnection, WireError
    from protocol.api_versions import ApiKey

    for b in live:
        conn = None
        try:
            conn = BrokerConnection(b.host, b.port, client_id="devcluster-status", timeout=3.0, connect_timeout=2.0,
                                    security=b.security)
            md = conn.call(ApiKey.METADATA, topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)
        except (OSError, WireError):
            continue
        finally:
            if conn is not None:
                conn.close()
        led: dict[int, int] = {}
        leaderless = under_replicated = 0
        for t in md.topics:
            for p in t.partitions:
                if p.leader_id < 0:
                    leaderless += 1
                else:
                    led[p.leader_id] = led.get(p.leader_id, 0) + 1
                if len(p.isr_nodes) < len(p.replica_nodes):
                    under_replicated += 1
        alive = sorted(x.node_id for x in md.brokers)
        leaders = ", ".join(f"broker {k}: {v}" for k, v in sorted(led.items())) or "none"
        return [f"seen by broker {b.broker_id}: controller {md.controller_id}, live brokers {alive}",
                f"partition leaders: {leaders}; without a leader: {leaderless}; under-replicated: {under_replicated}"]
    return []
