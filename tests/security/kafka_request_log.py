"""Kafka's request log for an Apache Kafka broker started by a test (``tests/ops/kafka_broker.py``).

With ``kafka.request.logger`` at DEBUG, Kafka writes one line per request: the header, the request and
the response as JSON, and the principal and listener. When a side-by-side test disagrees with Kafka,
those lines say what Kafka parsed and answered; an error while parsing a request (after which Kafka
closes the connection) is logged by ``kafka.network.Processor``.

The Kafka jars resolved by tests/kafka_dist.py bind SLF4J to slf4j-nop, which drops every log line.
``request_logging_jvm_options`` puts a reload4j binding, with slf4j-api and reload4j themselves, on the
JVM's boot class path: classes there are found before the application class path, so SLF4J binds to
reload4j and the nop binding on the class path is ignored.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.kafka_dist import JAR_DIR, classpath

SLF4J_VERSION = "1.7.36"  # the slf4j-api Kafka 3.9.1 depends on
_M2 = Path.home() / ".m2" / "repository"

_LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=DEBUG, out
log4j.additivity.kafka.request.logger=false
log4j.logger.kafka.network.Processor=DEBUG
"""


def _slf4j_reload4j_jar() -> Path:
    """The SLF4J binding for reload4j, fetched from Maven Central into ~/.m2 the first time."""
    jar = _M2 / "org" / "slf4j" / "slf4j-reload4j" / SLF4J_VERSION / f"slf4j-reload4j-{SLF4J_VERSION}.jar"
    if not jar.exists():
        subprocess.run(["mvn", "-q", "-B", "dependency:get", f"-Dartifact=org.slf4j:slf4j-reload4j:{SLF4J_VERSION}",
                        "-Dtransitive=false"], check=True, capture_output=True, timeout=600)
    return jar


def request_logging_jvm_options(directory: Path) -> tuple[str, ...]:
    """JVM options for ``KafkaZkBroker(jvm_options=...)`` that turn on Kafka's request log (in the
    broker's log file, ``KafkaZkBroker.log_path``); ``directory`` receives the log4j configuration."""
    classpath()  # the Kafka jars (with slf4j-api and reload4j) are resolved
    jars = [_slf4j_reload4j_jar(), JAR_DIR / f"slf4j-api-{SLF4J_VERSION}.jar"]
    jars += sorted(JAR_DIR.glob("reload4j-*.jar"))
    missing = [str(j) for j in jars if not j.exists()]
    assert not missing, f"jars for Kafka's request log not found: {missing}"
    config = directory / "log4j.properties"
    config.write_text(_LOG4J_PROPERTIES)
    return ("-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xbootclasspath/a:" + ":".join(str(j) for j in jars),
            f"-Dlog4j.configuration={config.as_uri()}")
