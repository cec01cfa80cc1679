"""A real Burrow process (Debian's burrow, linked into .cache/interop/bin by deploy/interop/install.sh)
configured from deploy/interop/burrow/burrow.toml, the file docs/interop.md shows for `make run`, with
the addresses replaced by a test cluster's."""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.integration.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]
CONFIG_TEMPLATE = REPO / "deploy" / "interop" / "burrow" / "burrow.toml"
CLUSTER = "kafkette"  # the cluster's name in that file: /v3/kafka/kafkette/...

# What the file says for `make run`, each replaced by a test's own value (all must be in the file).
MAKE_RUN_BROKERS = '["127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"]'
MAKE_RUN_ZOOKEEPER = '["127.0.0.1:2181"]'
MAKE_RUN_HTTP = '"127.0.0.1:8000"'
MAKE_RUN_PIDFILE = '".cache/interop/burrow.pid"'
DOC_KAFKA_VERSION = 'kafka-version="2.1.0"'


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def render_config(*, brokers: list[str], zookeeper: str, http_port: int, pidfile: Path,
                  kafka_version: str | None = None) -> str:
    """The documented configuration with a test cluster's brokers and ZooKeeper (``host:port``), an HTTP
    port and a pid file of the test's own; ``kafka_version`` replaces the protocol version Burrow speaks."""
    text = CONFIG_TEMPLATE.read_text()
    replacements = {
        MAKE_RUN_BROKERS: toml_list(brokers),
        MAKE_RUN_ZOOKEEPER: toml_list([zookeeper]),
        MAKE_RUN_HTTP: f'"127.0.0.1:{http_port}"',
        MAKE_RUN_PIDFILE: f'"{pidfile}"',
    }
    if kafka_version is not None:
        replacements[DOC_KAFKA_VERSION] = f'kafka-version="{kafka_version}"'
    for old, new in replacements.items():
        assert old in text, f"{CONFIG_TEMPLATE} no longer contains {old}"
        text = text.replace(old, new)
    return text


class Burrow:
    """Burrow with ``config`` as its burrow.toml in ``work_dir``, its log in ``work_dir/burrow.log``."""

    def __init__(self, exe: Path, config: str, work_dir: Path, http_port: int) -> None:
        work_dir.mkdir(parents=True, exist_ok=True)
        (work_dir / "burrow.toml").write_text(config)
        self.log_path = work_dir / "burrow.log"
        self.base_url = f"http://127.0.0.1:{http_port}"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([str(exe), "-config-dir", str(work_dir)], cwd=work_dir,
                                         stdout=log, stderr=subprocess.STDOUT)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str) -> dict[str, Any] | None:
        """Burrow's JSON answer for ``path``, or None while it does not answer (or answers 404)."""
        assert self.proc.poll() is None, f"Burrow exited ({self.proc.returncode}):\n{self.log_text()[-5000:]}"
        try:
            with urllib.request.urlopen(self.base_url + path, timeout=5) as resp:
                return json.loads(resp.read())  # type: ignore[no-any-return]
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise
        except (urllib.error.URLError, ConnectionError):
            return None

    def wait_ready(self, timeout: float = 30) -> None:
        def listed() -> bool:
            answer = self.get("/v3/kafka")
            return answer is not None and CLUSTER in answer.get("clusters", [])

        wait_until(listed, timeout, lambda: f"Burrow to list cluster {CLUSTER}:\n{self.log_text()[-3000:]}",
                   interval=0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Burrow:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()
