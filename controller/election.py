"""Controller election, as Kafka does it in ZooKeeper mode.

Every broker watches ``/controller``. To elect itself a broker reads ``/controller_epoch`` (creating it
with 0 if absent) and then, in one ZooKeeper multi-op, creates the ephemeral ``/controller`` and sets
``/controller_epoch`` to epoch + 1 conditional on the version it read. Exactly one broker can win a
round; the winner's controller epoch is the new value, and the zk version of ``/controller_epoch``
fences every later controller write (see ``KafkaZkClient``). Losers see NodeExists / BadVersion and go
back to watching.

When ``/controller`` disappears (the controller's session ended or it resigned) every broker tries
again. When this broker's own session expires it resigns at once (it can no longer write, and its
ephemeral ``/controller`` is gone); once connected with a new session it re-registers and re-elects.

All of this runs as one asyncio task per broker that handles events in order; ZooKeeper calls go to a
thread executor; kazoo's watch and session callbacks are bridged in with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError

from controller.zk_client import ControllerMovedError, KafkaZkClient

log = logging.getLogger(__name__)

__all__ = ["Elector"]


class Elector:
    """Runs controller election for one broker.

    ``on_become_controller(epoch, epoch_zk_version)`` is awaited when this broker wins;
    ``on_resign()`` when it stops being controller (another broker took over, the session expired,
    or ``stop()``). Both run inside the elector's task, so they never overlap.
    """

    def __init__(self, zk: KafkaZkClient, broker_id: int, loop: asyncio.AbstractEventLoop | None = None, *,
                 on_become_controller: Callable[[int, int], Awaitable[None]] | None = None,
                 on_resign: Callable[[], Awaitable[None]] | None = None,
                 require_registration: bool = False) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.loop = loop
        self.on_become_controller = on_become_controller
        self.on_resign = on_resign
        self.require_registration = require_registration
        self.active_controller_id = -1
        self.epoch = -1
        self.epoch_zk_version = -1
        self.elections_won = 0
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._state_listener = self._on_zk_state

    # ------------------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id and self.epoch >= 0

    async def start(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        self.zk.add_state_listener(self._state_listener)
        self._task = self.loop.create_task(self._run(), name=f"controller-elector-{self.broker_id}")
        self._queue.put_nowait("startup")

    async def stop(self, *, delete_controller_znode: bool = True) -> None:
        """Stop electing; if active, resign and (by default) delete ``/controller`` so another broker
        takes over without waiting for our session to end."""
        self._stopped = True
        self.zk.remove_state_listener(self._state_listener)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self.is_active:
            version = self.epoch_zk_version
            await self._resign()
            if delete_controller_znode:
                with contextlib.suppress(Exception):
                    await self._zk_call(self.zk.delete_controller, version)

    async def wait_for_event_queue_empty(self, timeout: float = 10.0) -> None:
        """For tests: wait until queued events have been handled."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not self._queue.empty() or self._busy:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("elector events still pending")
            await asyncio.sleep(0.01)

    _busy = False

    # ------------------------------------------------------------------------------------------
    # kazoo threads -> loop

    def _post(self, event: str) -> None:
        loop = self.loop
        if loop is None or loop.is_closed() or self._stopped:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._queue.put_nowait, event)

    def _controller_watch(self, event: Any) -> None:
        # One-shot kazoo watch; NONE-type events (connection loss) also arrive here: we re-check.
        self._post("controller_changed")

    def _on_zk_state(self, state: str) -> None:
        if state in ("expired", "closed"):
            self._post("session_expired")
        elif state == "new_session":
            self._post("new_session")
        elif state == "connected":
            self._post("controller_changed")

    # ------------------------------------------------------------------------------------------

    async def _zk_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        assert self.loop is not None
        return await self.loop.run_in_executor(None, fn, *args)

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            self._busy = True
            try:
                await self._handle(event)
            except asyncio.CancelledError:
                raise
            except (SessionExpiredError, ConnectionLoss, ConnectionClosedError) as e:
                # Expected while our session is gone (e.g. this broker was frozen past the session
                # timeout): the new session's events will follow; one line, no traceback.
                log.warning("controller elector: ZooKeeper unavailable while handling %s (%s); retrying",
                            event, type(e).__name__)
                if self.loop is not None and not self._stopped:
                    self.loop.call_later(1.0, self._post, "controller_changed")
            except Exception:
                log.exception("controller elector: handling %s failed", event)
                # Try again a little later rather than giving up on the controller role.
                if self.loop is not None and not self._stopped:
                    self.loop.call_later(1.0, self._post, "controller_changed")
            finally:
                self._busy = self._queue.qsize() > 0

    async def _handle(self, event: str) -> None:
        if event == "session_expired":
            if self.is_active:
                log.warning("broker %d: ZooKeeper session expired, resigning as controller (epoch %d)",
                            self.broker_id, self.epoch)
                await self._resign()
            self.active_controller_id = -1
            return
        # startup, controller_changed, new_session: look at /controller (re-arming the watch), elect if empty
        reg = await self._zk_call(lambda: self.zk.get_controller(watch=self._controller_watch))
        current = reg.broker_id if reg is not None else -1
        was_active = self.is_active
        if was_active and current != self.broker_id:
            log.info("broker %d: controller moved to %d, resigning", self.broker_id, current)
            await self._resign()
        self.active_controller_id = current
        if current == -1:
            await self._elect()

    async def _elect(self) -> None:
        if self.require_registration and not await self._registered():
            assert self.loop is not None
            self.loop.call_later(0.2, self._post, "controller_changed")
            return
        try:
            epoch, version = await self._zk_call(self.zk.register_controller_and_increment_epoch, self.broker_id)
        except ControllerMovedError:
            reg = await self._zk_call(lambda: self.zk.get_controller(watch=self._controller_watch))
            self.active_controller_id = reg.broker_id if reg is not None else -1
            log.debug("broker %d lost the controller election to %d", self.broker_id, self.active_controller_id)
            if self.active_controller_id == -1:
                self._post("controller_changed")
            return
        self.active_controller_id = self.broker_id
        self.epoch = epoch
        self.epoch_zk_version = version
        self.elections_won += 1
        log.info("broker %d is the controller now, epoch %d", self.broker_id, epoch)
        # Make sure our watch stays armed (the create above fired nothing for us).
        await self._zk_call(lambda: self.zk.get_controller(watch=self._controller_watch))
        if self.on_become_controller is not None:
            try:
                await self.on_become_controller(epoch, version)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("broker %d: controller failover failed; resigning", self.broker_id)
                await self._resign()
                with contextlib.suppress(Exception):
                    await self._zk_call(self.zk.delete_controller, version)

    async def _registered(self) -> bool:
        def check() -> bool:
            got = self.zk.get_data(f"/brokers/ids/{self.broker_id}")
            return got is not None and got[1].ephemeralOwner == self.zk.session_id
        return bool(await self._zk_call(check))

    async def _resign(self) -> None:
        self.epoch = -1
        self.epoch_zk_version = -1
        if self.active_controller_id == self.broker_id:
            self.active_controller_id = -1
        if self.on_resign is not None:
            try:
                await self.on_resign()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("broker %d: controller resignation failed", self.broker_id)
