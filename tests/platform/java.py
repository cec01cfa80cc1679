"""The Java programs of the platform tests as real processes: a Streams app, a Connect worker, MirrorMaker 2.

``platform_jars()`` runs deploy/platform/install.sh (Maven Central, once, then cached by content) and
returns the classpath of Kafka 3.9.1's Streams, Connect and MirrorMaker 2 jars plus the Streams app.
``JavaProcess`` starts one ``main`` class with a log file of its own, polls that log for lines (the
programs print what they do), and ends the process gracefully or with SIGKILL.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

REPO = Path(__file__).resolve().parent.parent.parent
INSTALL = REPO / "deploy" / "platform" / "install.sh"
LOG4J = REPO / "deploy" / "platform" / "log4j.properties"

CONNECT_DISTRIBUTED = "org.apache.kafka.connect.cli.ConnectDistributed"
MIRROR_MAKER = "org.apache.kafka.connect.mirror.MirrorMaker"
WORD_COUNT_DEMO = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"
CLICKS_PER_REGION = "kafkette.platform.ClicksPerRegion"


@dataclass(frozen=True)
class PlatformJars:
    jar_dir: Path
    app_jar: Path

    @property
    def classpath(self) -> str:
        jars = sorted(str(p) for p in self.jar_dir.glob("*.jar"))
        return ":".join([str(self.app_jar), *jars])


@functools.cache
def platform_jars() -> PlatformJars:
    proc = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{INSTALL} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    jar_dir, app_jar = proc.stdout.strip().splitlines()[-2:]
    return PlatformJars(Path(jar_dir), Path(app_jar))


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class JavaProcess:
    """One JVM running ``main_class args`` with the platform classpath; stdout and stderr go to ``log_path``."""

    def __init__(self, name: str, main_class: str, *args: str, log_dir: Path, heap: str = "384m",
                 extra_jvm: tuple[str, ...] = ()) -> None:
        self.name = name
        self.main_class = main_class
        self.args = args
        self.heap = heap
        self.extra_jvm = extra_jvm
        self.log_path = log_dir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None
        self.starts = 0

    def start(self) -> JavaProcess:
        jars = platform_jars()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _close_log
        self._log.write(f"===== start {self.starts} =====\n".encode())
        self._log.flush()
        self.starts += 1
        # Quick start-up on a small machine shared by many processes: C1 only, a small heap.
        cmd = ["java", f"-Xmx{self.heap}", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
               f"-Dlog4j.configuration=file:{LOG4J}", *self.extra_jvm,
               "-cp", jars.classpath, self.main_class, *self.args]
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO,
                                        env=dict(os.environ, LC_ALL="C.UTF-8"))
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to commit, flush or leave its group."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self._close_log()

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM (the programs' shutdown hooks close them cleanly), SIGKILL when that takes too long."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def current_run(self) -> str:
        """The log of the latest start only."""
        text = self.log_text()
        marker = f"===== start {self.starts - 1} =====\n"
        return text[text.rfind(marker) + len(marker):] if marker in text else text

    def wait_for(self, pattern: str, timeout: float, *, count: int = 1) -> list[re.Match[str]]:
        """Wait until the current run's log has ``count`` lines matching ``pattern``; fail early if the
        process exits."""
        rx = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            found = list(rx.finditer(self.current_run()))
            if len(found) >= count:
                return found
            if not self.running:
                raise AssertionError(f"{self.name} exited ({self.process and self.process.returncode}) before "
                                     f"{pattern!r}; end of its log:\n{self.current_run()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {count} x {pattern!r} after {timeout}s; end of its log:\n"
                                     f"{self.current_run()[-4000:]}")
            time.sleep(0.2)


def stop_all(processes: list[JavaProcess]) -> None:
    for p in processes:
        with contextlib.suppress(Exception):
            p.stop(timeout=30)
