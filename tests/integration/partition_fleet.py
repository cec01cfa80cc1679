"""A topic with thousands of partitions on real brokers: create it, put records in a sample of its
partitions (some with several segments), restart brokers (clean, SIGKILL, under a low open files
limit), and check that every partition is led again and the sample reads back.

Shared by tests/integration/test_many_partitions.py and tests/bench_partitions.py.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from clients.devcluster import REPO, BrokerProcess, wait_for_port
from protocol.api_versions import ApiKey
from protocol.messages import request_type
from protocol.records import build_batch, iter_batches
from tests.integration.helpers import RawClient, controller_bootstrap, wait_until

# Small segments so that partitions with a few records span several of them.
SEGMENT_BYTES = 4096
EMFILE_MARKERS = ("Too many open files", "EMFILE", "out of file descriptors", "is offline")


@dataclass
class Fleet:
    topic: str
    partitions: int
    replication: int
    # partition -> values written (in order)
    written: dict[int, list[bytes]] = field(default_factory=dict)


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int, timeout: float = 300) -> None:
    mt = request_type(ApiKey.CREATE_TOPICS)
    with RawClient(controller_bootstrap(bootstrap), timeout=timeout) as raw:
        r = raw.request(ApiKey.CREATE_TOPICS, 5, topics=[mt.CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=replication, assignments=[],
            configs=[mt.CreatableTopicConfig(name="segment.bytes", value=str(SEGMENT_BYTES))])],
            timeout_ms=int(timeout * 1000), validate_only=False)
        assert r.topics[0].error_code == 0, r.topics[0]


def metadata(bootstrap: str, topic: str) -> tuple[dict[int, str], dict[int, int]]:
    """(broker id -> host:port, partition -> leader id) for the partitions that have a leader."""
    with RawClient(bootstrap, timeout=60) as raw:
        mt = request_type(ApiKey.METADATA)
        md = raw.request(ApiKey.METADATA, 12, topics=[mt.MetadataRequestTopic(name=topic, topic_id=None)],
                         allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
    leaders: dict[int, int] = {}
    for t in md.topics:
        if t.name == topic and t.error_code == 0:
            leaders = {p.partition_index: p.leader_id for p in t.partitions
                       if p.error_code == 0 and p.leader_id >= 0 and p.leader_id in brokers}
    return brokers, leaders


def wait_all_led(bootstrap: str, fleet: Fleet, timeout: float) -> float:
    """Seconds until Metadata shows a live leader for every partition."""
    start = time.monotonic()
    wait_until(lambda: len(metadata(bootstrap, fleet.topic)[1]) == fleet.partitions, timeout,
               f"a leader for each of the {fleet.partitions} partitions of {fleet.topic}", interval=0.25)
    return time.monotonic() - start


def _produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    batch = build_batch([(None, v, int(time.time() * 1000)) for v in values])
    with RawClient(bootstrap) as raw:
        r = raw.produce(topic, partition, bytes(batch), acks=-1)
        assert r.error_code == 0, r


def write_sample(bootstrap: str, fleet: Fleet, sample: int = 40, multi_segment: int = 5) -> None:
    """One record to each of ``sample`` partitions spread over the topic; ``multi_segment`` of them get
    enough batches of about 1 KiB to fill several segments."""
    brokers, leaders = metadata(bootstrap, fleet.topic)
    step = max(fleet.partitions // sample, 1)
    chosen = list(range(0, fleet.partitions, step))[:sample]
    for i, p in enumerate(chosen):
        batches = 12 if i < multi_segment else 1
        for b in range(batches):
            values = [b"%s-%d-%d-%s" % (fleet.topic.encode(), p, b, b"x" * (1000 if batches > 1 else 10))]
            _produce(brokers[leaders[p]], fleet.topic, p, values)
            fleet.written.setdefault(p, []).extend(values)


def read_sample(bootstrap: str, fleet: Fleet) -> dict[int, list[bytes]]:
    """Every record of the sampled partitions, read from their current leaders."""
    brokers, leaders = metadata(bootstrap, fleet.topic)
    out: dict[int, list[bytes]] = {}
    for p in fleet.written:
        got: list[bytes] = []
        with RawClient(brokers[leaders[p]]) as raw:
            offset = 0
            while True:
                pd = raw.fetch(fleet.topic, p, offset, max_bytes=1 << 20, max_wait_ms=0)
                assert pd.error_code == 0, (p, pd.error_code)
                batches = list(iter_batches(memoryview(bytes(pd.records or b""))))
                if not batches:
                    break
                for batch in batches:
                    got.extend(bytes(r.value) for r in batch.records())
                    offset = batch.base_offset + batch.last_offset_delta + 1
        out[p] = got
    return out


def segments_of(broker: BrokerProcess, topic: str, partition: int) -> int:
    d = os.path.join(broker.props["log.dirs"], f"{topic}-{partition}")
    return sum(1 for n in os.listdir(d) if n.endswith(".log")) if os.path.isdir(d) else 0


def start_with_open_files_limit(broker: BrokerProcess, limit: int, timeout: float = 120) -> None:
    """Start ``broker`` with soft and hard RLIMIT_NOFILE at ``limit`` (so it cannot raise its own)."""

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    broker._log = open(broker.log_path, "ab")  # noqa: SIM115 - closed by broker.stop()
    broker.process = subprocess.Popen(
        [sys.executable, "-m", "broker", "--config", str(broker.config_path)], cwd=REPO,
        stdout=broker._log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
        preexec_fn=lower)
    wait_for_port(broker.host, broker.port, timeout, broker.process)


def open_fds(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return len(os.listdir(f"/proc/{broker.process.pid}/fd"))


def log_since(broker: BrokerProcess, offset: int) -> str:
    return broker.log_text()[offset:]


def fd_trouble(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(m in line for m in EMFILE_MARKERS)]


def restart(broker: BrokerProcess, how: str, limit: int | None = None, timeout: float = 120) -> None:
    """``how``: "clean" (SIGTERM, exit status 0), "kill" (SIGKILL). Then start, with ``limit`` if given."""
    if how == "clean":
        rc = broker.stop(timeout=timeout)
        assert rc == 0, f"clean stop exited with {rc}"
    else:
        broker.kill()
    if limit is None:
        broker.start(wait=False)
        assert broker.process is not None
        wait_for_port(broker.host, broker.port, timeout, broker.process)
    else:
        start_with_open_files_limit(broker, limit, timeout)


def check_after_restart(bootstrap: str, fleet: Fleet, timeout: float) -> dict[str, Any]:
    led_in = wait_all_led(bootstrap, fleet, timeout)
    got = wait_until(lambda: _complete(bootstrap, fleet), 60, "the sampled records read back")
    return {"led_in_s": led_in, "read": got}


def _complete(bootstrap: str, fleet: Fleet) -> dict[int, list[bytes]] | None:
    try:
        got = read_sample(bootstrap, fleet)
    except (AssertionError, OSError, KeyError):
        return None  # a leader still loading, or metadata moving: try again
    return got if got == fleet.written else None
