"""The Java client (kafka-clients 3.9.1 from Maven Central) and the harness the exactly-once tests drive.

``classpath()`` copies kafka-clients and its runtime dependencies into ``.cache/java-clients/`` once
(``mvn dependency:copy`` per artifact; a lock file serializes concurrent test processes);
``run_harness(...)`` compiles ``tests/txn/java/TxnHarness.java`` against them (cached by content) and
runs it.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import subprocess
from pathlib import Path

from tests.kafka_dist import javac_once

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = REPO_ROOT / ".cache" / "java-clients"
HARNESS = Path(__file__).parent / "java" / "TxnHarness.java"
ARTIFACTS = [
    "org.apache.kafka:kafka-clients:3.9.1",
    "org.slf4j:slf4j-api:1.7.36",
    "org.slf4j:slf4j-nop:1.7.36",
    "org.lz4:lz4-java:1.8.0",
    "org.xerial.snappy:snappy-java:1.1.10.5",
    "com.github.luben:zstd-jni:1.5.6-4",
]


def classpath() -> str:
    jars = CACHE / "jars"
    stamp = jars / ".complete"
    if not stamp.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(CACHE / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not stamp.exists():
                jars.mkdir(parents=True, exist_ok=True)
                for artifact in ARTIFACTS:
                    proc = subprocess.run(
                        ["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={jars}"],
                        capture_output=True, text=True, timeout=900, cwd=CACHE)
                    if proc.returncode != 0:
                        raise RuntimeError(f"mvn dependency:copy {artifact} failed:\n{proc.stdout}\n{proc.stderr}")
                stamp.write_text("ok\n")
    return ":".join(sorted(glob.glob(str(jars / "*.jar"))))


def compiled() -> str:
    cp = classpath()
    digest = hashlib.sha256(HARNESS.read_bytes()).hexdigest()[:16]
    return javac_once(HARNESS, cp, CACHE / "classes" / digest)


def run_harness(*args: str, timeout: float = 300) -> str:
    cp = compiled() + ":" + classpath()
    proc = subprocess.run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, "TxnHarness", *args],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"TxnHarness {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-5000:]}")
    return proc.stdout
