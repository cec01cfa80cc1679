"""The same round trip with each stock client, over whatever security one ``Security`` describes.

``Security`` is the one description of how a client connects (security protocol, SASL mechanism and
credentials, CA file, client certificate and key); each client's translation into its own config
names lives next to it (``kafka_python``, ``librdkafka`` for confluent-kafka and kcat, ``java``).

Every check does, against one topic (created beforehand):

1. produce N records ``k-i -> v-i`` (idempotent where the client offers it, acks=all);
2. consume them as a member of a consumer group (subscribe, commit), then show the commit took;
3. a transaction: commit N records ``t-i``, then abort N records ``a-i``;
4. a read_committed consumer reads every partition to its end: each ``v-i`` and ``t-i`` exactly
   once, no ``a-i``.

kcat has no call to abort a transaction: its transactional producer commits when its input ends and
aborts when a signal ends it first, so its aborted transaction is "records visible to a
read_uncommitted reader, then SIGINT" (see ``_kcat_abort``). Each check raises ``AssertionError``
saying what did not match.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JAVA_SOURCE = Path(__file__).parent / "java" / "SecureClientCheck.java"
STEP_TIMEOUT = 60.0
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class Security:
    """How a client connects: Kafka's ``security.protocol`` plus what that protocol needs."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None        # SASL_*: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None          # SSL, SASL_SSL: PEM file of the CA that signed the broker's certificate
    cert_file: str | None = None        # optional client certificate (PEM) ...
    key_file: str | None = None         # ... and its private key (PEM, PKCS#8)
    key_password: str | None = None     # when that key is encrypted

    def __post_init__(self) -> None:
        assert self.protocol in PROTOCOLS, self.protocol
        assert self.sasl == (self.mechanism in MECHANISMS), (self.protocol, self.mechanism)
        assert not self.ssl or self.ca_file, "SSL needs the CA file"
        assert (self.cert_file is None) == (self.key_file is None), "a client certificate needs its key"

    @property
    def ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def label(self) -> str:
        parts = [self.protocol]
        if self.mechanism:
            parts.append(self.mechanism)
        if self.cert_file:
            parts.append("client-cert")
        return "-".join(parts)

    def kafka_python(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security_protocol": self.protocol}
        if self.ssl:
            conf.update(ssl_cafile=self.ca_file, ssl_check_hostname=True)
            if self.cert_file:
                conf.update(ssl_certfile=self.cert_file, ssl_keyfile=self.key_file, ssl_password=self.key_password)
        if self.sasl:
            conf.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                        sasl_plain_password=self.password)
        return conf

    def librdkafka(self) -> dict[str, str]:
        """librdkafka's names: confluent-kafka's config dict, kcat's ``-X`` properties."""
        conf = {"security.protocol": self.protocol.lower()}
        if self.ssl:
            conf.update({"ssl.ca.location": str(self.ca_file), "ssl.endpoint.identification.algorithm": "https"})
            if self.cert_file:
                conf.update({"ssl.certificate.location": self.cert_file, "ssl.key.location": str(self.key_file)})
                if self.key_password:
                    conf["ssl.key.password"] = self.key_password
        if self.sasl:
            conf.update({"sasl.mechanism": str(self.mechanism), "sasl.username": str(self.username),
                         "sasl.password": str(self.password)})
        return conf

    def java(self, workdir: Path) -> dict[str, str]:
        """The Java client's names. Its PEM keystore is one file holding the key and its certificate."""
        conf = {"security.protocol": self.protocol}
        if self.ssl:
            conf.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_file),
                         "ssl.endpoint.identification.algorithm": "https"})
            if self.cert_file and self.key_file:
                keystore = workdir / "client-keystore.pem"
                keystore.write_text(Path(self.key_file).read_text() + Path(self.cert_file).read_text())
                conf.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)})
                if self.key_password:
                    conf["ssl.key.password"] = self.key_password
        if self.sasl:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if self.mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            conf.update({"sasl.mechanism": str(self.mechanism),
                         "sasl.jaas.config": f'{module} required username="{self.username}" '
                                             f'password="{self.password}";'})
        return conf


# --- what every client must have seen ------------------------------------------------------------------


def _values(prefix: str, n: int) -> set[str]:
    return {f"{prefix}-{i}" for i in range(n)}


def _check_group_read(client: str, got: list[tuple[str, str]], n: int) -> None:
    """The group consumer read each ``k-i -> v-i`` exactly once."""
    counts = Counter(got)
    expected = {(f"k-{i}", f"v-{i}") for i in range(n)}
    missing = expected - counts.keys()
    extra = {kv: c for kv, c in counts.items() if kv not in expected or c != 1}
    assert not missing and not extra, (f"{client} group consumer: {len(missing)} missing (e.g. {sorted(missing)[:3]}), "
                                       f"unexpected or repeated {dict(list(extra.items())[:5])}")


def _check_read_committed(client: str, values: list[str], n: int) -> None:
    """Each committed record (``v-i``, ``t-i``) once, no aborted one (``a-i``)."""
    counts = Counter(values)
    expected = _values("v", n) | _values("t", n)
    wrong = {v: c for v, c in counts.items() if v not in expected or c != 1}
    missing = expected - counts.keys()
    aborted = sorted(v for v in counts if v.startswith("a-"))
    assert not missing and not wrong, (f"{client} read_committed: {len(missing)} missing (e.g. {sorted(missing)[:3]}), "
                                       f"aborted seen {aborted[:3]}, unexpected or repeated "
                                       f"{dict(list(wrong.items())[:5])}")


def _text(b: str | bytes | None) -> str:
    return b.decode() if isinstance(b, bytes) else str(b)


def _deadline_check(deadline: float, what: Callable[[], str]) -> None:
    if time.monotonic() > deadline:
        raise AssertionError(f"timed out: {what()}")


# --- kafka-python -------------------------------------------------------------------------------------


def check_kafka_python(bootstrap: str, topic: str, security: Security, n: int) -> list[str]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    sec = security.kafka_python()
    log = []
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, **sec)
    try:
        futures = [producer.send(topic, key=f"k-{i}".encode(), value=f"v-{i}".encode()) for i in range(n)]
        producer.flush(STEP_TIMEOUT)
        for f in futures:
            f.get(timeout=STEP_TIMEOUT)  # raises the broker's error for a failed send
    finally:
        producer.close()
    log.append(f"produced {n}")

    group = f"{topic}-kafka-python"
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", **sec)
    got: list[tuple[str, str]] = []
    try:
        deadline = time.monotonic() + STEP_TIMEOUT
        while len(got) < n:
            _deadline_check(deadline, lambda: f"kafka-python group consumer read {len(got)} of {n}")
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((r.key.decode(), r.value.decode()) for r in records)
        consumer.commit()
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        ends = consumer.end_offsets(partitions)
        committed = {tp: consumer.committed(tp) for tp in partitions}
    finally:
        consumer.close()
    _check_group_read("kafka-python", got, n)
    assert all(committed[tp] == ends[tp] for tp in partitions if ends[tp] > 0), (committed, ends)
    log.append(f"consumed {len(got)} in group {group}, committed {sorted(committed.values())}")

    txn = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-kafka-python-txn", **sec)
    try:
        txn.init_transactions()
        txn.begin_transaction()
        for i in range(n):
            txn.send(topic, key=f"k-{i}".encode(), value=f"t-{i}".encode())
        txn.commit_transaction()
        txn.begin_transaction()
        for i in range(n):
            txn.send(topic, key=f"k-{i}".encode(), value=f"a-{i}".encode())
        txn.flush()
        txn.abort_transaction()
    finally:
        txn.close()
    log.append(f"transaction committed {n}, transaction aborted {n}")

    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                           isolation_level="read_committed", auto_offset_reset="earliest", **sec)
    values: list[str] = []
    try:
        reader.assign(partitions)
        reader.seek_to_beginning(*partitions)
        lso = reader.end_offsets(partitions)  # read_committed: the last stable offsets
        deadline = time.monotonic() + STEP_TIMEOUT
        while any(reader.position(tp) < lso[tp] for tp in partitions):
            _deadline_check(deadline, lambda: f"kafka-python read_committed at "
                                              f"{[reader.position(tp) for tp in partitions]} of {lso}")
            for records in reader.poll(timeout_ms=500).values():
                values.extend(r.value.decode() for r in records)
    finally:
        reader.close()
    _check_read_committed("kafka-python", values, n)
    log.append(f"read_committed saw {len(values)}")
    return log


# --- confluent-kafka (librdkafka) ---------------------------------------------------------------------


def check_confluent(bootstrap: str, topic: str, security: Security, n: int) -> list[str]:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    sec: dict[str, Any] = {"bootstrap.servers": bootstrap, **security.librdkafka()}
    log = []
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    producer = Producer({**sec, "acks": "all", "enable.idempotence": True})
    for i in range(n):
        producer.produce(topic, key=f"k-{i}", value=f"v-{i}", on_delivery=on_delivery)
    assert producer.flush(STEP_TIMEOUT) == 0, "confluent-kafka: records left undelivered"
    assert not failures, failures
    log.append(f"produced {n}")

    group = f"{topic}-confluent"
    consumer = Consumer({**sec, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    got: list[tuple[str, str]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + STEP_TIMEOUT
        while len(got) < n:
            _deadline_check(deadline, lambda: f"confluent-kafka group consumer read {len(got)} of {n}")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.append((_text(msg.key()), _text(msg.value())))
        consumer.commit(asynchronous=False)
        metadata = consumer.list_topics(topic, timeout=STEP_TIMEOUT)
        partitions = [TopicPartition(topic, p) for p in sorted(metadata.topics[topic].partitions)]
        committed = {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=STEP_TIMEOUT)}
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=STEP_TIMEOUT)[1] for tp in partitions}
    finally:
        consumer.close()
    _check_group_read("confluent-kafka", got, n)
    assert all(committed[p] == ends[p] for p in ends if ends[p] > 0), (committed, ends)
    log.append(f"consumed {len(got)} in group {group}, committed {committed}")

    txn = Producer({**sec, "transactional.id": f"{topic}-confluent-txn"})
    txn.init_transactions(STEP_TIMEOUT)
    txn.begin_transaction()
    for i in range(n):
        txn.produce(topic, key=f"k-{i}", value=f"t-{i}", on_delivery=on_delivery)
    txn.commit_transaction(STEP_TIMEOUT)
    txn.begin_transaction()
    for i in range(n):
        txn.produce(topic, key=f"k-{i}", value=f"a-{i}")
    assert txn.flush(STEP_TIMEOUT) == 0
    txn.abort_transaction(STEP_TIMEOUT)
    assert not failures, failures
    log.append(f"transaction committed {n}, transaction aborted {n}")

    # A partition's EOF event says the reader is at its end (markers included): that is the
    # read_committed consumer's "read everything there is".
    reader = Consumer({**sec, "group.id": f"{topic}-confluent-reader", "enable.auto.commit": False,
                       "isolation.level": "read_committed", "enable.partition.eof": True})
    values: list[str] = []
    try:
        reader.assign([TopicPartition(topic, tp.partition, 0) for tp in partitions])
        at_end: set[int] = set()
        deadline = time.monotonic() + STEP_TIMEOUT
        while len(at_end) < len(partitions):
            _deadline_check(deadline, lambda: f"confluent-kafka read_committed reached the end of {sorted(at_end)}")
            msg = reader.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(int(msg.partition() or 0))
                    continue
                raise KafkaException(err)
            at_end.discard(int(msg.partition() or 0))
            values.append(_text(msg.value()))
    finally:
        reader.close()
    _check_read_committed("confluent-kafka", values, n)
    log.append(f"read_committed saw {len(values)}")
    return log


# --- kcat (librdkafka's command line) -----------------------------------------------------------------


def _kcat(bootstrap: str, security: Security, *args: str, stdin: str | None = None,
          timeout: float = STEP_TIMEOUT) -> str:
    cmd = ["kcat", "-b", bootstrap, "-m", "30", *_kcat_props(security), *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"kcat {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return proc.stdout


def _kcat_props(security: Security) -> list[str]:
    out = []
    for k, v in security.librdkafka().items():
        out += ["-X", f"{k}={v}"]
    return out


def _kcat_read(bootstrap: str, security: Security, topic: str, isolation: str) -> list[str]:
    out = _kcat(bootstrap, security, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n",
                "-X", f"isolation.level={isolation}")
    return out.splitlines()


def check_kcat(bootstrap: str, topic: str, security: Security, n: int) -> list[str]:
    log = []
    lines = "".join(f"k-{i}:v-{i}\n" for i in range(n))
    _kcat(bootstrap, security, "-P", "-t", topic, "-K", ":", "-X", "acks=all", "-X", "enable.idempotence=true",
          stdin=lines)
    log.append(f"produced {n}")

    # A balanced consumer (-G) reads the N records and commits them when it closes (auto commit,
    # kcat's default); a second member of the same group then starts at the committed offsets and
    # finds nothing left to read.
    group = f"{topic}-kcat"
    group_args = ("-G", group, "-X", "auto.offset.reset=earliest", "-q", "-f", "%k:%s\n", topic)
    out = _kcat(bootstrap, security, "-c", str(n), *group_args)
    got = [tuple(line.split(":", 1)) for line in out.splitlines()]
    _check_group_read("kcat", got, n)  # type: ignore[arg-type]
    again = _kcat(bootstrap, security, "-e", *group_args)
    assert again == "", f"kcat group {group} re-read after its commit: {again[:300]!r}"
    log.append(f"consumed {len(got)} in group {group}; rejoining it read nothing")

    txn_props = ("-X", f"transactional.id={topic}-kcat-txn")
    _kcat(bootstrap, security, "-P", "-t", topic, "-K", ":", *txn_props,
          stdin="".join(f"k-{i}:t-{i}\n" for i in range(n)))
    _kcat_abort(bootstrap, security, topic, txn_props, n)
    log.append(f"transaction committed {n}, transaction aborted {n} (interrupted)")

    values = _kcat_read(bootstrap, security, topic, "read_committed")
    _check_read_committed("kcat", values, n)
    log.append(f"read_committed saw {len(values)}")
    return log


def _kcat_abort(bootstrap: str, security: Security, topic: str, txn_props: tuple[str, ...], n: int) -> None:
    """kcat aborts its transaction when a signal ends it before its input does. It reads all of stdin
    before producing, so the records come from files instead (one record per file), the last being a
    FIFO: kcat blocks opening it with the transaction open. Once a read_uncommitted reader sees the
    records, SIGINT, then let the FIFO open (empty) so kcat gets to its abort."""
    with tempfile.TemporaryDirectory(prefix="kcat-abort-") as tmp:
        files = []
        for i in range(n):
            path = Path(tmp) / f"a-{i}"
            path.write_text(f"a-{i}")
            files.append(str(path))
        hold = Path(tmp) / "hold"
        os.mkfifo(hold)
        cmd = ["kcat", "-b", bootstrap, "-m", "30", *_kcat_props(security), "-P", "-t", topic, "-k", "k-a",
               *txn_props, *files, str(hold)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + STEP_TIMEOUT
            while sum(v.startswith("a-") for v in _kcat_read(bootstrap, security, topic, "read_uncommitted")) < n:
                _deadline_check(deadline, lambda: "kcat's transactional records to show up uncommitted")
                time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            _release_fifo(hold, proc, deadline)
            _out, err = proc.communicate(timeout=STEP_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0 and "Aborting transaction" in err, f"kcat did not abort ({proc.returncode}): {err[-2000:]}"


def _release_fifo(hold: Path, proc: subprocess.Popen[str], deadline: float) -> None:
    """Open the FIFO for writing and close it: kcat's open for reading returns, with nothing to read.
    Non-blocking, so that a kcat that gave up on the FIFO (open interrupted) cannot hang us."""
    while proc.poll() is None:
        try:
            os.close(os.open(hold, os.O_WRONLY | os.O_NONBLOCK))
            return
        except OSError:  # ENXIO: no reader (yet)
            _deadline_check(deadline, lambda: "kcat to open its FIFO")
            time.sleep(0.05)


# --- the Java client 3.9.1 ----------------------------------------------------------------------------


def check_java(bootstrap: str, topic: str, security: Security, n: int) -> list[str]:
    from tests.kafka_dist import compile_java, run_java

    with tempfile.TemporaryDirectory(prefix="secure-client-") as tmp:
        props = Path(tmp) / "client.properties"
        # Properties.load reads backslashes as escapes: double them (JAAS values have none here,
        # but paths could).
        props.write_text("".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n"
                                 for k, v in security.java(Path(tmp)).items()))
        try:
            out = run_java("SecureClientCheck", str(props), bootstrap, topic, str(n),
                           extra_classpath=compile_java(JAVA_SOURCE), timeout=240)
        except RuntimeError as e:
            raise AssertionError(f"java client over {security.label}: {e}") from None
    lines = out.splitlines()
    assert lines and lines[-1] == "OK", out
    return lines[:-1]


CHECKS: dict[str, Callable[[str, str, Security, int], list[str]]] = {
    "kafka-python": check_kafka_python,
    "confluent-kafka": check_confluent,
    "kcat": check_kcat,
    "java": check_java,
}
