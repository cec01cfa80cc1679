"""Apache Kafka 3.9 jars for format cross-checks, resolved once from Maven Central into .cache/kafka-jars.

``classpath()`` runs ``mvn dependency:copy-dependencies`` on a generated pom the first time (a lock file
keeps concurrent test processes from racing) and returns the jar classpath. ``dump_log_segments`` runs
``kafka.tools.DumpLogSegments``; ``compile_java``/``run_java`` build and run small probe programs
against the same jars.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import subprocess
from pathlib import Path

KAFKA_VERSION = "3.9.1"
SCALA_VERSION = "2.13"
REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = REPO_ROOT / ".cache" / "kafka-jars"
CLASSES_DIR = CACHE_DIR / "classes"

_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafkette.test</groupId>
  <artifactId>kafka-dist</artifactId>
  <version>0</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_{SCALA_VERSION}</artifactId>
      <version>{KAFKA_VERSION}</version>
      <exclusions>
        <exclusion><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId></exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-storage</artifactId>
      <version>{KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <!-- org.apache.kafka.tools.ProducerPerformance, which the validation benchmark drives -->
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>{KAFKA_VERSION}</version>
      <exclusions>
        <exclusion><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId></exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-nop</artifactId>
      <version>1.7.36</version>
    </dependency>
  </dependencies>
</project>
"""

# One directory per pom content: adding an artifact above resolves into a fresh directory instead of
# reusing a cache that lacks it.
JAR_DIR = CACHE_DIR / f"{KAFKA_VERSION}-{hashlib.sha256(_POM.encode()).hexdigest()[:10]}"


def classpath() -> str:
    """The Kafka jars' classpath, downloading them on first use."""
    stamp = JAR_DIR / ".complete"
    if not stamp.exists():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        with open(CACHE_DIR / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not stamp.exists():
                JAR_DIR.mkdir(parents=True, exist_ok=True)
                pom = JAR_DIR / "pom.xml"
                pom.write_text(_POM)
                proc = subprocess.run(
                    ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                     f"-DoutputDirectory={JAR_DIR}"],
                    capture_output=True, text=True, timeout=900,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"mvn failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
                if not glob.glob(str(JAR_DIR / f"kafka_{SCALA_VERSION}-{KAFKA_VERSION}.jar")):
                    raise RuntimeError("mvn did not produce the kafka jar")
                stamp.write_text("ok\n")
    return ":".join(sorted(glob.glob(str(JAR_DIR / "*.jar"))))


def run_java(main_class: str, *args: str, extra_classpath: str | None = None, timeout: float = 300) -> str:
    cp = classpath()
    if extra_classpath:
        cp = extra_classpath + ":" + cp
    proc = subprocess.run(
        ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, main_class, *args],
        capture_output=True, text=True, timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{main_class} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def dump_log_segments(*args: str) -> str:
    """Output of ``kafka.tools.DumpLogSegments`` with ``args`` (e.g. ``--files x.log --print-data-log``)."""
    return run_java("kafka.tools.DumpLogSegments", *args)


def compile_java(source: Path) -> str:
    """Compile one Java file against the Kafka jars (cached by content); returns its classes directory."""
    digest = hashlib.sha256(source.read_bytes() + KAFKA_VERSION.encode()).hexdigest()[:16]
    return javac_once(source, classpath(), CLASSES_DIR / digest)


def javac_once(source: Path, cp: str, out: Path) -> str:
    """Compile ``source`` into ``out`` unless that was done; returns ``out``.

    `make test`'s parallel workers may need the same classes at the same moment: a lock file makes one
    compile while the other waits, so that nobody runs class files that javac is still writing."""
    if (out / ".complete").exists():
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / ".complete").exists():
            out.mkdir(exist_ok=True)
            proc = subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", cp, str(source)],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"javac failed:\n{proc.stdout}\n{proc.stderr}")
            (out / ".complete").write_text("ok\n")
    return str(out)


if __name__ == "__main__":
    print(classpath().count(":") + 1, "jars in", JAR_DIR)
    print(os.path.basename(__file__), "ok")
