"""Log dir failures in ZooKeeper mode (KIP-112), the broker's side.

The LogManager takes a directory offline on any I/O error from its files (a full disk included, as
Kafka's LogDirFailureChannel does) and calls ``on_dir_offline``, from whichever thread met the error.
This module then, on the event loop:

1. has the ReplicaManager stop the dir's partitions (fetchers, parked produces, coordinators);
2. writes ``/log_dir_event_notification/log_dir_event_N`` so that the controller sends LeaderAndIsr,
   learns from the KAFKA_STORAGE_ERROR answers which replicas are gone, and moves their leadership;
3. halts the broker when no log dir is left, as Kafka does ("Shutdown broker because all log dirs in
   ... have failed"): a broker without storage must not stay registered as if it could lead.

A failed dir comes back only with a restart (Kafka has no way to bring it online in a running broker).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

# Kafka halts with status 1 here.
HALT_STATUS = 1


class LogDirFailureHandler:
    def __init__(self, broker_id: int, log_dirs: list[str], online_dirs: Callable[[], list[str]],
                 zk_call: Callable[..., Awaitable[Any]], zk: Any,
                 stop_partitions: Callable[[str], Awaitable[Any]] | None = None,
                 halt: Callable[[int], None] | None = None) -> None:
        self.broker_id = broker_id
        self.log_dirs = log_dirs
        self.online_dirs = online_dirs
        self.zk_call = zk_call
        self.zk = zk
        self.stop_partitions = stop_partitions
        self.halt = halt or _halt
        self.loop: asyncio.AbstractEventLoop | None = None
        self.failed: list[str] = []  # in the order they failed

    def on_dir_offline(self, log_dir: str) -> None:
        """The LogManager's callback: may run on any thread, before or after the broker is serving."""
        self.failed.append(log_dir)
        log.error("Stopped serving replicas in dir %s", log_dir)
        loop = self.loop
        if loop is None or loop.is_closed():
            # Still loading the logs: the broker starts without this dir, and the controller's first
            # LeaderAndIsr finds the replicas it held missing.
            if not self.online_dirs():
                self._halt_all_failed()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.create_task(self.handle(log_dir))
        else:
            loop.call_soon_threadsafe(lambda: loop.create_task(self.handle(log_dir)))

    async def handle(self, log_dir: str) -> None:
        if not self.online_dirs():
            self._halt_all_failed()
            return
        if self.stop_partitions is not None:
            try:
                await self.stop_partitions(log_dir)
            except Exception:
                log.exception("stopping the partitions of failed log dir %s failed", log_dir)
        try:
            path = await self.zk_call(self.zk.propagate_log_dir_event, self.broker_id)
            log.info("Sent a log dir failure notification to the controller (%s) for %s", path, log_dir)
        except Exception:
            log.exception("could not notify the controller of the failure of log dir %s", log_dir)

    def _halt_all_failed(self) -> None:
        log.critical("Shutdown broker because all log dirs in %s have failed", ", ".join(self.log_dirs))
        for h in logging.getLogger().handlers:
            h.flush()
        self.halt(HALT_STATUS)


def _halt(status: int) -> None:
    sys.stderr.flush()
    os._exit(status)
