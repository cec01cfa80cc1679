"""The workloads a scenario runs while its faults happen, each a real client in a thread of its own.

- ``VerifyingProducer``: confluent-kafka (librdkafka), values ``<session>:<seq>`` sent round-robin over
  the partitions; remembers every acknowledgment (partition, offset, when) and every failure. The main
  one is idempotent with acks=all; a second one with acks=1 and no idempotence shows what Kafka's weaker
  setting may lose.
- ``CopyJob``: a transactional copy (KIP-98/447): read_committed in, each batch written to the output
  topic and its input offsets committed in one transaction. Output values carry the transaction's tag
  and size, so a checker can tell a torn transaction from a whole one.
- ``GroupConsumer``: a consumer group member committing offsets synchronously after each batch.
- ``OffsetMonitor``: polls the groups' committed offsets from the brokers (OffsetFetch) and remembers
  every value it saw, so a committed offset going backwards shows.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# librdkafka logs connection failures at level 3 through this logger; the faults make many of them.
CLIENT_LOG = logging.getLogger("chaos.rdkafka")
CLIENT_LOG.setLevel(logging.CRITICAL)


_FATAL = -150  # librdkafka's RD_KAFKA_RESP_ERR__FATAL: what messages fail with once the producer is dead
_UNKNOWN_TOPIC = -188  # RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC: produce() for a topic the last metadata lacked


def _file_logger(name: str, path: Path) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # not into the run's output: the file is for a failed scenario's post-mortem
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    return logger


def _client_base(bootstrap: str, client_id: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "client.id": client_id, "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": 5000, "socket.connection.setup.timeout.ms": 5000}


@dataclass
class Ack:
    seq: int
    partition: int
    offset: int
    at: float


@dataclass
class ProducerLog:
    session: str
    topic: str
    acks: str
    idempotent: bool
    sent: dict[int, int] = field(default_factory=dict)  # seq -> partition
    acked: list[Ack] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)  # seq -> error
    # librdkafka's text for each fatal error, with when it came: it names the partition, the sequence and
    # the partition's last error before it, which is what tells a broker's fault from a client's.
    fatal_errors: list[tuple[float, str]] = field(default_factory=list)
    # Reentrant: a client's delivery callbacks can run inside any of its calls on the thread that holds it.
    lock: threading.RLock = field(default_factory=threading.RLock)

    def ack_times(self, partition: int | None = None) -> list[float]:
        with self.lock:
            return sorted(a.at for a in self.acked if partition is None or a.partition == partition)

    def ack_count(self) -> int:
        with self.lock:
            return len(self.acked)


class VerifyingProducer:
    def __init__(self, bootstrap: str, topic: str, partitions: int, *, acks: str = "all", idempotent: bool = True,
                 rate: float = 50.0, name: str = "p", debug_log: Path | None = None) -> None:
        self.bootstrap = bootstrap
        # Where librdkafka's eos and msg debug goes (an idempotent producer's sequence bookkeeping), so a
        # failed scenario keeps what the client saw next to the brokers' logs.
        self.debug_log = debug_log
        self.partitions = partitions
        self.interval = 1.0 / rate
        self.log = ProducerLog(f"{name}-{uuid.uuid4().hex[:6]}", topic, acks, idempotent)
        self._stop = threading.Event()
        self._burst = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.log.session}", daemon=True)
        self.error: BaseException | None = None
        self.undelivered = 0
        self._fatal = threading.Event()
        self.replaced_after_fatal = 0
        self.unknown_topic_refusals = 0

    def start(self) -> VerifyingProducer:
        from confluent_kafka import Producer

        conf = _client_base(self.bootstrap, self.log.session)
        conf.update({"acks": self.log.acks, "enable.idempotence": self.log.idempotent, "linger.ms": 5,
                     "message.timeout.ms": 120000, "request.timeout.ms": 10000, "retry.backoff.ms": 100})
        if not self.log.idempotent:
            conf["max.in.flight.requests.per.connection"] = 5
        # A closure over the event and the log's list only: a bound method would make the client and this
        # object a cycle, and a client freed by the garbage collector serves its last callbacks wherever that
        # runs.
        fatal, fatal_errors = self._fatal, self.log.fatal_errors

        def on_error(err: Any) -> None:
            if err.fatal():
                fatal_errors.append((time.monotonic(), err.str()))
                fatal.set()
        conf["error_cb"] = on_error
        self._logger = CLIENT_LOG
        if self.debug_log is not None:
            conf["debug"] = "eos,msg"
            self._logger = _file_logger(f"chaos.rdkafka.{self.log.session}", self.debug_log)
        self._conf = conf
        self.producer = Producer(conf, logger=self._logger)
        self._thread.start()
        return self

    @staticmethod
    def _drop_dead(producer: Any) -> None:
        """Purge a producer that died of a fatal error. Its flush raises the fatal error, and may raise it
        from inside a delivery callback (confluent-kafka then reports a SystemError): the records it
        still held are neither acknowledged nor failed for the checker, which counts acknowledgments."""
        with contextlib.suppress(Exception):
            producer.purge()
        with contextlib.suppress(Exception):
            producer.flush(5)

    def _replace_after_fatal(self) -> None:
        """An idempotent producer's fatal error (e.g. its sequence desynchronized after an unclean leader
        election lost acknowledged writes) ends that producer: do what an application does, start a new
        one (a new producer id) and go on. What the old one had in flight is reported failed."""
        from confluent_kafka import Producer

        old = self.producer
        self._drop_dead(old)
        self._fatal.clear()  # after the old producer's last reports (failed with _FATAL)
        self.producer = Producer(self._conf, logger=self._logger)
        self.replaced_after_fatal += 1
        self._logger.critical("chaos harness: a new producer replaces the one that died of a fatal error")

    def burst(self, on: bool) -> None:
        """While on, send up to 2,000 records a second (a produce burst)."""
        (self._burst.set if on else self._burst.clear)()

    def _report(self, seq: int) -> Any:
        # No lock here: when the client dies of a fatal error, confluent-kafka may call this with the
        # error already raised underneath, and a lock's __enter__ then takes the lock and fails before
        # the with-block is entered, leaving the lock held for good. Appending to a list and setting a
        # dict item are atomic; readers take copies under the lock.
        def report(err: Any, msg: Any) -> None:
            if err is not None:
                if err.fatal() or err.code() == _FATAL:
                    self._fatal.set()
                self.log.failed[seq] = str(err)
            else:
                # librdkafka reports no offset (None) for a batch acknowledged as a duplicate of one
                # already written: the checker then looks for the record anywhere in its partition.
                offset = msg.offset()
                self.log.acked.append(Ack(seq, msg.partition(), -1 if offset is None else offset,
                                          time.monotonic()))
        return report

    def _run(self) -> None:
        from confluent_kafka import KafkaException

        seq = 0
        try:
            while not self._stop.is_set():
                if self._fatal.is_set():
                    self._replace_after_fatal()
                partition = seq % self.partitions
                value = f"{self.log.session}:{seq}".encode()
                while True:
                    try:
                        self.producer.produce(self.log.topic, value=value, partition=partition,
                                              on_delivery=self._report(seq))
                        break
                    except BufferError:
                        self.producer.poll(0.1)
                    except KafkaException as e:
                        if e.args and e.args[0].code() == _UNKNOWN_TOPIC:
                            # A metadata answer without the topic (a broker answering from an empty
                            # cache) makes librdkafka refuse records for it until the next refresh. An
                            # application retries; the count shows up in the scenario's notes.
                            self.unknown_topic_refusals += 1
                            if self._stop.is_set():
                                return  # this record was never handed over
                            self.producer.poll(0.1)
                            continue
                        if not e.args or not (e.args[0].fatal() or e.args[0].code() == _FATAL):
                            raise
                        self._replace_after_fatal()  # a dead producer refuses new records
                with self.log.lock:
                    self.log.sent[seq] = partition
                seq += 1
                try:
                    self.producer.poll(0)
                except Exception as e:  # a fatal error surfaces here too, maybe from inside a callback
                    if not (self._fatal.is_set() or isinstance(e, SystemError) or (
                            isinstance(e, KafkaException) and e.args and e.args[0].code() == _FATAL)):
                        raise
                    self._replace_after_fatal()
                if not self._burst.is_set():
                    self._stop.wait(self.interval)
                elif seq % 20 == 0:  # a burst: up to 2,000 records a second, 50 times the usual rate
                    self._stop.wait(0.01)
        except BaseException as e:  # reported by the checker
            self.error = e

    def stop(self, timeout: float = 60) -> ProducerLog:
        self._stop.set()
        self._thread.join(30)
        try:
            if self._fatal.is_set():
                raise RuntimeError("the producer died of a fatal error")
            self.undelivered = self.producer.flush(timeout)
        except Exception:  # a fatal error now, or before: flush raises it (see _drop_dead)
            self._fatal.set()
            self._drop_dead(self.producer)
            self.undelivered = 0
        if self.undelivered:
            self.producer.purge()
            self.producer.flush(5)
        # Destroy the client now: a live one keeps refreshing metadata, and the next scenario's brokers
        # have the same addresses.
        del self.producer
        if self._logger is not CLIENT_LOG:
            for handler in list(self._logger.handlers):
                self._logger.removeHandler(handler)
                handler.close()
        return self.log


# ------------------------------------------------------------------------------------------------
# The transactional copy job


@dataclass
class CopyStats:
    committed: int = 0  # transactions committed
    aborted: int = 0
    restarts: int = 0  # new incarnations after a fatal error or a hung call (the old one fenced)
    abandoned: int = 0  # incarnations replaced because a client call hung
    errors: list[str] = field(default_factory=list)
    commit_times: list[float] = field(default_factory=list)


class CopyJob:
    """Copies ``source`` to ``sink`` partition by partition with exactly-once semantics.

    One *incarnation* (a consumer and a transactional producer, in a thread of their own) copies at a
    time. A fatal error (fenced, or an unknown producer state) ends it, and the next one, with the same
    transactional.id, fences whatever the last left open. A supervisor also replaces an incarnation
    whose transactional call outlives its timeout by far: librdkafka's send_offsets_to_transaction can
    ignore its timeout (librdkafka#5456) and wait for good on a group coordinator that left the
    metadata (librdkafka#5511). An application would restart such a process; fencing keeps the
    abandoned instance from writing anything after the new one starts.
    """

    TRANSACTIONAL_ID = "chaos-copy"
    GROUP = "chaos-copy"
    CALL_TIMEOUT = 30.0  # seconds for each transactional call; librdkafka retries inside it
    HANG_LIMIT = CALL_TIMEOUT + 15.0

    def __init__(self, bootstrap: str, source: str, sink: str, partitions: int) -> None:
        self.bootstrap = bootstrap
        self.source = source
        self.sink = sink
        self.partitions = partitions
        self.stats = CopyStats()
        self.in_commit = threading.Event()  # set while commit_transaction runs
        # Called (once, then cleared) right before a commit_transaction: a fault aimed at a commit.
        self.before_commit: Callable[[], None] | None = None
        self._stop = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, name="copy-job", daemon=True)
        self.error: BaseException | None = None
        self.incarnation = 0
        self._busy: dict[int, float] = {}  # incarnation -> when its call in progress started
        self._local = threading.local()  # which incarnation the calling thread runs

    def start(self) -> CopyJob:
        self._supervisor.start()
        return self

    def _supervise(self) -> None:
        while not self._stop.is_set():
            self.incarnation += 1
            me = self.incarnation
            worker = threading.Thread(target=self._run, args=(me,), name=f"copy-job-{me}", daemon=True)
            worker.start()
            while worker.is_alive() and not self._stop.is_set():
                busy = self.busy_since
                if busy is not None and time.monotonic() - busy > self.HANG_LIMIT:
                    self.stats.abandoned += 1
                    self.stats.errors.append(f"{time.monotonic():.1f} incarnation {me}: a transactional call "
                                             f"hung for {time.monotonic() - busy:.0f}s; replaced")
                    break
                worker.join(0.5)
            if self.error is not None:
                return
            if not self._stop.is_set():
                self.stats.restarts += 1
                self._stop.wait(1.0)
        worker.join(self.HANG_LIMIT)
        self.stuck_at_stop = worker.is_alive()

    def _current(self, me: int) -> bool:
        return me == self.incarnation and not self._stop.is_set()

    def _open(self, me: int) -> tuple[Any, Any]:
        from confluent_kafka import Consumer, Producer, TopicPartition

        cid = f"copy-{me}"
        consumer = Consumer({**_client_base(self.bootstrap, cid), "group.id": self.GROUP,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 10000},
                            logger=CLIENT_LOG)
        producer = Producer({**_client_base(self.bootstrap, cid), "transactional.id": self.TRANSACTIONAL_ID,
                             "transaction.timeout.ms": 20000, "message.timeout.ms": 20000,
                             "request.timeout.ms": 10000}, logger=CLIENT_LOG)
        # Fence the previous incarnation first, then read the offsets it committed.
        self._call(producer.init_transactions, self.CALL_TIMEOUT)
        tps = [TopicPartition(self.source, p) for p in range(self.partitions)]
        committed = self._call(consumer.committed, tps, 10)
        consumer.assign([TopicPartition(self.source, tp.partition, tp.offset if tp.offset >= 0 else -2)
                         for tp in committed])
        return consumer, producer

    @property
    def busy_since(self) -> float | None:
        """When the current incarnation's transactional call in progress started (None: no call)."""
        return self._busy.get(self.incarnation)

    def _call(self, fn: Any, *args: Any) -> Any:
        me = self._local.me
        self._busy[me] = time.monotonic()
        try:
            return fn(*args)
        finally:
            self._busy.pop(me, None)

    def _rewind(self, consumer: Any) -> None:
        """After an abort: go back to the last committed input offsets."""
        from confluent_kafka import TopicPartition

        tps = [TopicPartition(self.source, p) for p in range(self.partitions)]
        for tp in self._call(consumer.committed, tps, 10):
            consumer.seek(TopicPartition(self.source, tp.partition, tp.offset if tp.offset >= 0 else -2))

    def _run(self, me: int) -> None:
        from confluent_kafka import KafkaException

        consumer = producer = None
        txn = 0
        self._local.me = me
        try:
            consumer, producer = self._open(me)
            while self._current(me):
                msgs = [m for m in consumer.consume(num_messages=1000, timeout=0.5) if m.error() is None]
                if not msgs or not self._current(me):
                    continue
                txn += 1
                tag = f"{me}.{txn}/{len(msgs)}"
                producer.begin_transaction()
                for m in msgs:
                    while True:
                        try:
                            producer.produce(self.sink, value=m.value() + b"|" + tag.encode(),
                                             partition=m.partition())
                            break
                        except BufferError:
                            producer.poll(0.1)
                positions = consumer.position(consumer.assignment())
                try:
                    self._call(producer.send_offsets_to_transaction, positions, consumer.consumer_group_metadata(),
                               self.CALL_TIMEOUT)
                    if self._current(me):
                        self._commit(producer)
                except KafkaException as e:
                    err = e.args[0]
                    self.stats.errors.append(f"{time.monotonic():.1f} {err}")
                    if not err.txn_requires_abort():
                        return  # fatal: the supervisor starts the next incarnation
                    with contextlib.suppress(KafkaException):
                        self._call(producer.abort_transaction, self.CALL_TIMEOUT)
                        self.stats.aborted += 1
                    self._rewind(consumer)
        except KafkaException as e:
            self.stats.errors.append(f"{time.monotonic():.1f} {e.args[0]}")
        except BaseException as e:
            self.error = e
        finally:
            self._close(consumer, producer)

    def _commit(self, producer: Any) -> None:
        from confluent_kafka import KafkaException

        self.in_commit.set()
        hook, self.before_commit = self.before_commit, None
        if hook is not None:
            hook()
        try:
            while True:
                try:
                    self._call(producer.commit_transaction, self.CALL_TIMEOUT)
                    self.stats.committed += 1
                    self.stats.commit_times.append(time.monotonic())
                    return
                except KafkaException as e:
                    if e.args[0].retriable() and not self._stop.is_set():
                        self.stats.errors.append(f"{time.monotonic():.1f} commit retried: {e.args[0]}")
                        continue
                    raise
        finally:
            self.in_commit.clear()

    @staticmethod
    def _close(consumer: Any, producer: Any) -> None:
        if producer is not None:
            with contextlib.suppress(Exception):
                producer.flush(5)
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close()

    def stop(self, timeout: float = 60) -> bool:
        """True if the job ended cleanly (False: its last incarnation is stuck in a client call)."""
        self._stop.set()
        self._supervisor.join(timeout + self.HANG_LIMIT)
        return not self._supervisor.is_alive() and not getattr(self, "stuck_at_stop", False)


# ------------------------------------------------------------------------------------------------
# A consumer group committing offsets


class GroupConsumer:
    GROUP = "chaos-group"

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.values: dict[bytes, int] = {}  # value -> times consumed
        self.commits: list[tuple[float, dict[int, int]]] = []
        self.commit_errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="group-consumer", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> GroupConsumer:
        from confluent_kafka import Consumer

        self.consumer = Consumer({**_client_base(self.bootstrap, "chaos-group-member"), "group.id": self.GROUP,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 10000}, logger=CLIENT_LOG)
        self.consumer.subscribe([self.topic])
        self._thread.start()
        return self

    def _run(self) -> None:
        from confluent_kafka import KafkaException

        try:
            while not self._stop.is_set():
                msgs = [m for m in self.consumer.consume(num_messages=500, timeout=0.5) if m.error() is None]
                if not msgs:
                    continue
                for m in msgs:
                    self.values[m.value()] = self.values.get(m.value(), 0) + 1
                try:
                    done = self.consumer.commit(asynchronous=False)
                    self.commits.append((time.monotonic(), {tp.partition: tp.offset for tp in done or []}))
                except KafkaException:
                    self.commit_errors += 1  # uncommitted records are read again: at least once
        except BaseException as e:
            self.error = e

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        with contextlib.suppress(Exception):
            self.consumer.close()


class OffsetMonitor:
    """Every ``interval`` seconds: each group's committed offsets as the brokers answer OffsetFetch."""

    def __init__(self, bootstrap: str, groups: list[str], interval: float = 0.5) -> None:
        from clients.admin import WireClient

        self.client = WireClient(bootstrap, client_id="chaos-offset-monitor", timeout=5.0)
        self.groups = groups
        self.interval = interval
        self.seen: dict[str, list[tuple[float, dict[tuple[str, int], int]]]] = {g: [] for g in groups}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="offset-monitor", daemon=True)

    def start(self) -> OffsetMonitor:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for g in self.groups:
                try:
                    self.seen[g].append((time.monotonic(), self.client.committed_offsets(g)))
                except Exception as e:  # the coordinator is moving or cut off: ask again later
                    log.debug("OffsetFetch %s: %r", g, e)
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.client.close()


# ------------------------------------------------------------------------------------------------
# Reading a topic back


def read_topic(bootstrap: str, topic: str, partitions: int, *, read_committed: bool = False,
               timeout: float = 60) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of each partition up to its end (high watermark; last stable offset with
    read_committed), as (offset, value)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    # Partition EOF events tell where fetching reached the end; a consumer's position cannot, as it
    # stops before trailing control records (transaction markers).
    consumer = Consumer({**_client_base(bootstrap, "chaos-reader"), "group.id": f"chaos-reader-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed" if read_committed else "read_uncommitted"},
                        logger=CLIENT_LOG)
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < partitions and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                p = m.partition()
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and m.offset() >= ends[p]:
                        done.add(p)
                    continue
                if m.offset() < ends[p]:
                    out[p].append((m.offset(), m.value()))
        if len(done) < partitions:
            raise TimeoutError(f"could not read {topic} to its end {ends} in {timeout}s "
                               f"(partitions {sorted(set(range(partitions)) - done)} behind)")
        return out
    finally:
        consumer.close()
