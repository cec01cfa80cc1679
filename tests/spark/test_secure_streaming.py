"""The streaming job against a secured cluster, set up as ``make run-secure`` sets one up: SASL_SSL with
SCRAM-SHA-512 on every listener, the ACL authorizer, a generated CA.

The job runs as ``pipeline``, a user that is not a super user, with a client properties file given as
``--command-config``; Spark's Kafka source and sink get its settings as ``kafka.``-prefixed options
(``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.type=PEM``, ``kafka.ssl.truststore.location``). The user holds the ACLs
docs/security.md lists for the pipeline: Read on the input topic, Write on the result topic, Read on
the groups of Spark's Kafka source. The generator and the result reader (kafka-python) use the admin's
client.properties through ``client_security.kafka_python_config``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.pipeline import client_security, generate_events, results, submit
from tests.spark import expected

STREAMING_JOB = submit.PIPELINE_DIR / "streaming_job.py"
REPO = Path(__file__).resolve().parents[2]
# This suite's fixed ports (24500-24999; tests/security/test_run_secure.py uses 24500-24520).
CLIENT_PORT = 24600
INTER_BROKER_PORT = 24610
ZK_PORT = 24620
PIPELINE_PASSWORD = "pipeline-secret"


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from clients.devcluster_secure import SecureDevCluster

    cluster = SecureDevCluster(3, base_port=CLIENT_PORT, state_dir=tmp_path_factory.mktemp("secure"),
                               zk_port=ZK_PORT, inter_broker_base_port=INTER_BROKER_PORT)
    cluster.cluster.overrides.update({"offsets.topic.num.partitions": "5",
                                      "transaction.state.log.num.partitions": "5"})
    with cluster:
        yield cluster


def kafkette(admin_config: Path, *args: str) -> None:
    cmd = [sys.executable, "-m", "clients.cli", args[0], "--command-config", str(admin_config),
           "--bootstrap-server", f"localhost:{CLIENT_PORT}", *args[1:]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_streaming_job_reads_and_writes_the_secured_cluster(spark_jars: Path, secure_cluster: Any,
                                                            tmp_path: Path) -> None:
    admin_config = secure_cluster.files.client_properties
    admin_kp = client_security.kafka_python_config(client_security.load(admin_config))
    assert admin_kp["security_protocol"] == "SASL_SSL" and admin_kp["sasl_mechanism"] == "SCRAM-SHA-512"
    bootstrap = secure_cluster.bootstrap
    input_topic, output_topic = "secure-page-views", "secure-page-views-per-minute"
    generate_events.create_topics(bootstrap, [input_topic], partitions=3, configs={"retention.ms": "-1"},
                                  client_config=admin_kp)
    generate_events.create_topics(bootstrap, [output_topic], partitions=3, client_config=admin_kp)
    start = generate_events.parse_time_ms(generate_events.DEFAULT_START)
    events = generate_events.produce(generate_events.generate(1000, seed=21, start_ms=start), bootstrap,
                                     input_topic, client_config=admin_kp)

    # The job's own user, with only the ACLs it needs.
    kafkette(admin_config, "scram", "--alter", "--entity-type", "users", "--entity-name", "pipeline",
             "--add-config", f"SCRAM-SHA-512=[password={PIPELINE_PASSWORD}]")
    kafkette(admin_config, "acls", "--add", "--allow-principal", "User:pipeline", "--operation", "Read",
             "--topic", input_topic)
    kafkette(admin_config, "acls", "--add", "--allow-principal", "User:pipeline", "--operation", "Write",
             "--topic", output_topic)
    kafkette(admin_config, "acls", "--add", "--allow-principal", "User:pipeline", "--operation", "Read",
             "--group", "spark-kafka-source", "--resource-pattern-type", "prefixed")
    pipeline_config = tmp_path / "pipeline.properties"
    pipeline_config.write_text(re.sub(r'username="admin" password="[^"]+"',
                                      f'username="pipeline" password="{PIPELINE_PASSWORD}"',
                                      admin_config.read_text()))

    log = tmp_path / "spark-submit.log"
    submit.run(STREAMING_JOB, [
        "--bootstrap-servers", bootstrap, "--topic", input_topic, "--output-topic", output_topic,
        "--parquet-dir", str(tmp_path / "parquet"), "--checkpoint-dir", str(tmp_path / "checkpoints"),
        "--command-config", str(pipeline_config),
    ], log, timeout=600)

    want = expected.emitted_windows(events)
    got, keys = expected.from_topic(results.read_topic(bootstrap, output_topic, client_config=admin_kp))
    assert all(n == 1 for n in keys.values()), "a window was written twice"
    assert got == want, f"result topic vs expected: {expected.diff(want, got)}"
    assert len(want) > 300
    pq_got, _ = expected.from_parquet(results.read_parquet(tmp_path / "parquet"))
    assert pq_got == want


def test_client_properties_become_spark_and_kafka_python_settings(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n'
        '    username="pipeline" password="p w";\n'
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=/etc/kafka/ca.pem\n"
        "client.id=not-a-security-setting\n")
    loaded = client_security.load(props)
    assert client_security.spark_options(loaded) == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="pipeline" password="p w";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/kafka/ca.pem",
    }
    assert client_security.kafka_python_config(loaded) == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "pipeline",
        "sasl_plain_password": "p w", "ssl_cafile": "/etc/kafka/ca.pem", "ssl_check_hostname": True,
    }
    assert client_security.kafka_python_config({}) == {}
    with pytest.raises(ValueError, match="PEM"):
        client_security.kafka_python_config({"security.protocol": "SSL", "ssl.truststore.location": "t.p12",
                                             "ssl.truststore.type": "PKCS12"})
