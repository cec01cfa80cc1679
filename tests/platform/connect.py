"""A Kafka Connect distributed worker (``connect-distributed`` from the platform jars) and its REST API."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.integration.helpers import wait_until
from tests.platform.java import CONNECT_DISTRIBUTED, JavaProcess, write_properties


def worker_properties(bootstrap: str, group: str, port: int, **extra: str) -> dict[str, str]:
    """A distributed worker's settings, as in Kafka's config/connect-distributed.properties, with the
    three internal topics named after the group and replicated three times."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": "3",
        "offset.storage.replication.factor": "3",
        "status.storage.replication.factor": "3",
        "offset.flush.interval.ms": "1000",
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
        **extra,
    }


class ConnectWorker:
    def __init__(self, java: Callable[..., JavaProcess], directory: Path, name: str, props: dict[str, str]) -> None:
        self.port = int(props["rest.advertised.port"])
        self.url = f"http://127.0.0.1:{self.port}"
        self.worker_id = f"127.0.0.1:{self.port}"
        config = write_properties(directory / f"{name}.properties", props)
        self.process = java(name, CONNECT_DISTRIBUTED, str(config), heap="512m")

    def start(self) -> ConnectWorker:
        self.process.start()
        return self

    def wait_ready(self, timeout: float = 180) -> None:
        """The REST API answers and the worker has joined its group (it logs that it started its work)."""
        wait_until(lambda: self._answers() or not self.process.running, timeout, f"{self.url} to answer", interval=0.5)
        self.process.wait_for(r"Finished starting connectors and tasks", timeout)

    def _answers(self) -> bool:
        try:
            return request("GET", f"{self.url}/connectors")[0] == 200
        except OSError:
            return False


def request(method: str, url: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json",
                                                                           "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read().decode()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text


def put_connector(url: str, name: str, config: dict[str, str], timeout: float = 120) -> None:
    """PUT /connectors/<name>/config, again while the workers rebalance (409) or the leader is unknown."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, body = request("PUT", f"{url}/connectors/{name}/config", config, timeout=60)
        except OSError as e:
            status, body = -1, str(e)
        if status in (200, 201):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"PUT {name}: {status} {body}")
        time.sleep(1)


def status(url: str, name: str) -> dict[str, Any]:
    code, body = request("GET", f"{url}/connectors/{name}/status")
    return body if code == 200 else {}


# Connect's own race at worker start (KAFKA-17252): a worker starting an exactly-once source task asks
# the group's leader to fence the task's zombies, and a leader that has not yet taken the session key
# from the config topic it has just read answers 503 with this message. The task then fails for good
# "until manually restarted", whatever the brokers do; an operator restarts it through the REST API.
SESSION_KEY_RACE = "has not been able to read a session key from the config topic yet"
MAX_SESSION_KEY_RESTARTS = 3


class SessionKeyRaceHealer:
    """Restarts, as an operator would, a task of one connector failed by the session-key race above, and
    only by that: at most three times, each restart printed."""

    def __init__(self, url: str, name: str) -> None:
        self.url, self.name = url, name
        self.restarts = 0

    def heal(self, s: dict[str, Any]) -> None:
        """``s``: the connector's status, as ``status`` returns it."""
        for t in s.get("tasks", []):
            if (t["state"] == "FAILED" and SESSION_KEY_RACE in t.get("trace", "")
                    and self.restarts < MAX_SESSION_KEY_RESTARTS):
                self.restarts += 1
                code, body = request("POST", f"{self.url}/connectors/{self.name}/tasks/{t['id']}/restart")
                print(f"[connect] {self.name} task {t['id']} failed on the leader's session key at worker start; "
                      f"restarted through the REST API ({code} {body})")

    def check(self) -> None:
        """Heal from the connector's current status (a task can fail after it was seen RUNNING: the
        fencing request that fails it is sent once the task has started)."""
        try:
            self.heal(status(self.url, self.name))
        except OSError:
            pass


def wait_running(url: str, name: str, tasks: int = 1, timeout: float = 180) -> dict[str, Any]:
    """Wait for the connector and its tasks to run, healing the session-key race (SessionKeyRaceHealer)."""
    healer = SessionKeyRaceHealer(url, name)

    def running() -> dict[str, Any] | None:
        try:
            s = status(url, name)
        except OSError:
            return None
        healer.heal(s)
        ok = (s.get("connector", {}).get("state") == "RUNNING" and len(s.get("tasks", [])) == tasks
              and all(t["state"] == "RUNNING" for t in s["tasks"]))
        return s if ok else None

    return wait_until(running, timeout, lambda: f"{name} and {tasks} task(s) RUNNING (status {status(url, name)})",
                      interval=0.5)
