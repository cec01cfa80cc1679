"""Kafka Connect in distributed mode on kafkette: two workers, FileStreamSource and FileStreamSink, with
exactly-once source support, through a worker SIGKILL and a broker bounce, then a restart of everything.

The workers create their config, offset and status topics themselves (compacted, RF=3). Lines are
appended to the source file while the source connector tails it; the line topic, read with
read_committed, must hold every line once and in order (exactly-once source: a killed task's open
transaction is aborted and its successor starts from the offsets committed with the last transaction).
The sink file must hold every line. The sink is at-least-once by design (FileStreamSink commits its
consumer offsets after flushing the file), so it can only repeat lines when the worker running the sink
task is the one killed; the test kills the worker running the source task and checks which worker ran
the sink task.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.helpers import cluster_options, start_broker, unique
from tests.integration.helpers import wait_until
from tests.platform import kafka_ops
from tests.platform.connect import (
    ConnectWorker,
    SessionKeyRaceHealer,
    put_connector,
    request,
    wait_running,
    worker_properties,
)
from tests.platform.java import JavaProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

LINES = 100_000
PORTS = (26101, 26102)  # the Connect workers' REST listeners


def line(i: int) -> str:
    return f"line {i:06d} of the source file"


def sink_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def test_file_source_to_sink_exactly_once_through_worker_kill_and_broker_bounce(
        cluster_factory: Callable[..., Any], java: Callable[..., JavaProcess], tmp_path: Path) -> None:
    cluster = cluster_factory(3, **cluster_options(**{"min.insync.replicas": "2"}))
    bootstrap = cluster.bootstrap
    group = unique("connect")
    topic = unique("lines")
    kafka_ops.create_topics(bootstrap, {topic: 1})
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    source.write_text("")

    extra = {
        "exactly.once.source.support": "enabled",
        # Sink tasks read what source tasks committed only: an aborted transaction's lines never reach the file.
        "consumer.isolation.level": "read_committed",
        # A worker gone without a goodbye gets its work back when it returns, or elsewhere after this delay.
        "scheduled.rebalance.max.delay.ms": "15000",
    }
    workers = [ConnectWorker(java, tmp_path, f"worker-{i}", worker_properties(bootstrap, group, port, **extra))
               for i, port in enumerate(PORTS)]
    for w in workers:
        w.start()
    for w in workers:
        w.wait_ready()

    # The internal topics, made by the workers: compacted and replicated three times.
    internal = [f"{group}-configs", f"{group}-offsets", f"{group}-status"]
    for t in internal:
        assert kafka_ops.topic_config(bootstrap, t)["cleanup.policy"] == "compact", t
        assert all(len(r) == 3 for r, _ in kafka_ops.replication(bootstrap, t).values()), t

    url = workers[0].url
    put_connector(url, "lines-source", {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1", "file": str(source), "topic": topic, "batch.size": "2000",
        "exactly.once.support": "required",
    })
    put_connector(url, "lines-sink", {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1", "file": str(sink), "topics": topic,
    })
    source_status = wait_running(url, "lines-source")
    sink_status = wait_running(url, "lines-sink")

    # The lines, appended while things break.
    written = 0
    done = threading.Event()

    def append() -> None:
        nonlocal written
        with source.open("a") as f:
            for start in range(0, LINES, 1000):
                f.write("".join(line(i) + "\n" for i in range(start, start + 1000)))
                f.flush()
                written = start + 1000
                time.sleep(0.25)
        done.set()

    writer = threading.Thread(target=append, name="source-writer", daemon=True)
    writer.start()

    def in_sink() -> int:
        return len(sink_lines(sink))

    wait_until(lambda: in_sink() >= LINES // 5, 240, lambda: f"{LINES // 5} lines in the sink file (have {in_sink()})")
    source_worker_id = source_status["tasks"][0]["worker_id"]
    victim = next(w for w in workers if w.worker_id == source_worker_id)
    sink_on_victim = sink_status["tasks"][0]["worker_id"] == source_worker_id
    victim.process.kill()  # SIGKILL the worker running the source task
    wait_until(lambda: written >= LINES * 2 // 5, 120, "two fifths of the lines written")
    victim.start()
    victim.wait_ready()
    bounced = cluster.brokers[2]
    wait_until(lambda: in_sink() >= LINES // 2, 300, lambda: f"{LINES // 2} lines in the sink file (have {in_sink()})")
    bounced.stop()  # SIGTERM: a controlled shutdown
    start_broker(bounced)
    assert done.wait(300)

    everything = [line(i) for i in range(LINES)]
    wait_until(lambda: set(everything) <= set(sink_lines(sink)), 600,
               lambda: f"all {LINES} lines in the sink file (have {in_sink()})", interval=2)

    # Exactly once in the topic, in order.
    values = [r.value.decode() for r in kafka_ops.read_all(bootstrap, topic, 1) if r.value is not None]
    dups = [v for v, n in collections.Counter(values).items() if n > 1]
    assert not dups, f"{len(dups)} lines twice in {topic}: {dups[:5]}"
    assert values == everything
    got = sink_lines(sink)
    sink_dups = len(got) - len(set(got))
    print(f"[connect] {LINES} lines exactly once in the topic; sink file {len(got)} lines, {sink_dups} repeated; "
          f"sink task on the killed worker: {sink_on_victim}")
    if not sink_on_victim:
        assert sink_dups == 0
        assert got == everything

    # Connector configs and offsets survive a restart of every worker and every broker.
    for w in workers:
        w.process.stop()
    for b in cluster.brokers:
        b.stop()
    for b in cluster.brokers:
        start_broker(b)
    for w in workers:
        w.start()
    for w in workers:
        w.wait_ready()
    for name, klass in (("lines-source", "FileStreamSourceConnector"), ("lines-sink", "FileStreamSinkConnector")):
        code, config = request("GET", f"{url}/connectors/{name}/config")
        assert code == 200 and config["connector.class"].endswith(klass), (code, config)
        wait_running(url, name)
    code, offsets = request("GET", f"{url}/connectors/lines-source/offsets")
    assert code == 200, offsets
    assert [o["offset"]["position"] for o in offsets["offsets"]] == [source.stat().st_size], offsets

    more = [f"after the restart {i}" for i in range(1000)]
    before = len(sink_lines(sink))
    with source.open("a") as f:
        f.write("".join(x + "\n" for x in more))
    # A task seen RUNNING above can still fail of the session-key race: it asks for its fencing after it
    # has started. Healed here as in wait_running.
    healers = [SessionKeyRaceHealer(url, name) for name in ("lines-source", "lines-sink")]

    def all_more_in_sink() -> bool:
        for h in healers:
            h.check()
        return len(sink_lines(sink)) >= before + len(more)

    wait_until(all_more_in_sink, 180,
               lambda: f"{len(more)} more lines in the sink (have {len(sink_lines(sink)) - before})", interval=0.5)
    # Neither connector started over: the source read on from its offset, the sink from its group's.
    assert sink_lines(sink)[before:] == more
    values = [r.value.decode() for r in kafka_ops.read_all(bootstrap, topic, 1) if r.value is not None]
    assert values == everything + more
