"""Following a ZooKeeper notification path from the broker's event loop (the skeleton of Kafka's
ZkNodeChangeNotificationListener), shared by dynamic configs, ACLs and delegation tokens.

Watches fire on kazoo's thread; they only wake a task on the loop. The task does one pass of the
subclass's ``_process`` (which re-lists the children, re-arming the watch, with blocking calls run in
the executor); a pass that fails is logged and tried again a second later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

log = logging.getLogger(__name__)

RETRY_AFTER_S = 1.0


class ZkChangeFollower:
    what = "change notifications"  # for the log line of a failed pass

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _watch(self, _event: Any = None) -> None:
        """A ZooKeeper watch: runs on kazoo's thread."""
        if not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is shutting down
                self.loop.call_soon_threadsafe(self._wake.set)

    def wake(self) -> None:
        """Do a pass soon (on the loop)."""
        self._wake.set()

    def _follow(self) -> asyncio.Task[None]:
        self._task = asyncio.ensure_future(self._run())
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._process()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("processing %s from ZooKeeper failed; retrying", self.what)
                await asyncio.sleep(RETRY_AFTER_S)
                self._wake.set()

    async def _process(self) -> None:
        raise NotImplementedError
