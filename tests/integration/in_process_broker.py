"""A broker in the test's own process: its event loop in a thread, so a test can read the broker's
objects (connection stats, conversion metrics) while real clients talk to it over sockets."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from protocol.api_versions import ApiKey
from tests.integration.helpers import RawClient, wait_until


@contextmanager
def in_process_broker(zk_connect: str, data_dir: Path, **configs: str) -> Iterator[tuple[Any, str]]:
    """(the Broker, its bootstrap address) of a one-broker cluster on ``zk_connect``; the broker must
    stop cleanly (exit status 0) when the block ends."""
    from broker.broker import Broker
    from clients.zookeeper_server import free_port
    from config.registry import BrokerConfig

    port = free_port()
    broker = Broker(BrokerConfig({"broker.id": "0", "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                                  "log.dirs": str(data_dir), "zookeeper.connect": zk_connect,
                                  "offsets.topic.replication.factor": "1", **configs}))
    result: list[Any] = []
    loop = asyncio.new_event_loop()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            result.append(loop.run_until_complete(broker.run()))
        except BaseException as e:  # reported by the test's thread
            result.append(e)
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="in-process-broker", daemon=True)
    thread.start()
    bootstrap = f"127.0.0.1:{port}"

    def ready() -> bool:
        if result:
            raise AssertionError(f"the broker stopped: {result}")
        try:
            with RawClient(bootstrap, timeout=2) as raw:
                md = raw.request(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False)
            return broker.replica_manager is not None and len(md.brokers) == 1 and md.controller_id == 0
        except OSError:
            return False

    try:
        wait_until(ready, 30, "the in-process broker to start")
        yield broker, bootstrap
    finally:
        loop.call_soon_threadsafe(broker.request_stop)
        thread.join(30)
    assert result == [0], result
