"""A broker's channel to the active controller (Kafka's ``BrokerToControllerChannelManager``).

Partition leaders send AlterPartition (ISR changes) and a stopping broker sends ControlledShutdown to
whichever broker is controller right now. The controller is found from ``/controller`` (kept current
with a watch) and its registration under ``/brokers/ids``; when it moves, or the connection fails,
the request goes again to the new controller until its deadline passes.

The connection is a ``controller.network_client.NodeClient`` (the one outgoing client), at the
pinned inter-broker versions, secured as the listener requires (``security``, computed by the broker
in ``broker/security/inter_broker.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from controller.channel import INTER_BROKER_VERSIONS, inter_broker_endpoint
from controller.network_client import ConnectionSettings, KafkaConnectionError, NodeClient
from controller.zk_client import KafkaZkClient
from controller.zk_data import EndPoint
from protocol.api_versions import ApiKey
from protocol.client_connection import PLAINTEXT, ConnectionSecurity
from protocol.errors import ErrorCode
from protocol.messages import new_request
from protocol.schema import Struct

log = logging.getLogger(__name__)

__all__ = ["ControllerNotAvailableError", "InterBrokerClient"]


class ControllerNotAvailableError(Exception):
    """No controller could be reached before the deadline."""


class InterBrokerClient:
    """Sends requests to the active controller, following it when it moves."""

    def __init__(self, zk: KafkaZkClient, broker_id: int, loop: asyncio.AbstractEventLoop | None = None, *,
                 listener_name: str | None = "PLAINTEXT", request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, security: ConnectionSecurity = PLAINTEXT) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.loop = loop
        self.listener_name = listener_name
        self.request_timeout = request_timeout_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self._controller: tuple[int, EndPoint] | None = None
        self._node: NodeClient | None = None
        self._conn_to: tuple[int, EndPoint] | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        # Requests go one at a time (the lock) and the deadline of each is the caller's, so the
        # connection's own request timeout only needs to be long enough not to cut one short.
        self._settings = ConnectionSettings(client_id=f"broker-{broker_id}-to-controller",
                                            request_timeout_s=self.request_timeout, max_in_flight=1,
                                            negotiate_versions=False, reconnect_backoff_s=self.retry_backoff,
                                            reconnect_backoff_max_s=max(self.retry_backoff, 1.0),
                                            security=security)

    async def start(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            await self._refresh_controller()

    async def close(self) -> None:
        self._closed = True
        self._disconnect()

    # ------------------------------------------------------------------------------------------

    def _watch(self, event: Any) -> None:
        loop = self.loop
        if loop is None or loop.is_closed() or self._closed:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._invalidate)

    def _invalidate(self) -> None:
        # The controller moved (or its session ended): drop the connection too, so a request waiting on
        # a controller that will never answer (frozen, partitioned) is sent again to the new one now
        # rather than after its full timeout.
        self._controller = None
        self._disconnect()

    async def _refresh_controller(self) -> tuple[int, EndPoint] | None:
        assert self.loop is not None

        def lookup() -> tuple[int, EndPoint] | None:
            reg = self.zk.get_controller(watch=self._watch)
            if reg is None:
                return None
            broker = self.zk.get_broker(reg.broker_id)
            if broker is None:
                return None
            return reg.broker_id, inter_broker_endpoint(broker, self.listener_name)
        self._controller = await self.loop.run_in_executor(None, lookup)
        return self._controller

    async def controller_id(self) -> int | None:
        c = self._controller or await self._refresh_controller()
        return c[0] if c else None

    def controller_moved(self) -> None:
        """An answer said NOT_CONTROLLER: look the controller up again before the next request."""
        self._invalidate()

    def _disconnect(self) -> None:
        if self._node is not None:
            self._node.close()
        self._node = None
        self._conn_to = None

    # ------------------------------------------------------------------------------------------

    async def send(self, api_key: int, body: Struct, timeout: float | None = None) -> Struct:
        """Send ``body`` to the controller and return the response body.

        Connection failures and controller moves are retried until ``timeout`` (default: the
        request timeout); then ``ControllerNotAvailableError``. Responses are returned as they are:
        the caller handles error codes such as NOT_CONTROLLER.
        """
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        deadline = self.loop.time() + (timeout if timeout is not None else self.request_timeout)
        version = INTER_BROKER_VERSIONS[api_key]
        last_err: BaseException | None = None
        async with self._lock:
            while not self._closed:
                remaining = deadline - self.loop.time()
                if remaining <= 0:
                    break
                target = None
                try:
                    target = self._controller or await self._refresh_controller()
                    if target is None:
                        raise ConnectionError("no active controller")
                    if self._node is None or self._conn_to != target:
                        self._disconnect()
                        self._node = NodeClient(target[1].host, target[1].port, self._settings)
                        self._conn_to = target
                    async with asyncio.timeout(remaining):
                        return await self._node.request(api_key, body, version=version, timeout=remaining)
                except (TimeoutError, OSError, ConnectionError, KafkaConnectionError) as e:
                    # Said once per kind of failure: a controller that cannot be reached (its name does
                    # not resolve, the connection setup times out) otherwise shows only as a request that
                    # took its whole deadline.
                    if repr(e) != repr(last_err):
                        log.info("%s to the controller (%s) failed: %s; retrying", ApiKey(api_key).name,
                                 f"broker {target[0]}" if target else "none known", str(e) or type(e).__name__)
                    last_err = e
                    self._disconnect()
                    self._controller = None
                    await asyncio.sleep(min(self.retry_backoff, max(0.0, deadline - self.loop.time())))
        raise ControllerNotAvailableError(f"no response from the controller: {last_err!r}")

    async def alter_partition(self, body: Struct, timeout: float | None = None) -> Struct:
        """AlterPartition v3 (``body`` built with ``new_request(ApiKey.ALTER_PARTITION, ...)``)."""
        return await self.send(ApiKey.ALTER_PARTITION, body, timeout)

    async def controlled_shutdown(self, broker_epoch: int, timeout: float | None = None) -> Struct:
        body = new_request(ApiKey.CONTROLLED_SHUTDOWN, broker_id=self.broker_id, broker_epoch=broker_epoch)
        return await self.send(ApiKey.CONTROLLED_SHUTDOWN, body, timeout)

    async def controlled_shutdown_until_done(self, broker_epoch: int, *, max_retries: int = 3,
                                             retry_backoff_ms: int = 5000, timeout: float | None = None) -> bool:
        """Kafka's broker-side loop: ask until no partitions remain (``controlled.shutdown.max.retries``,
        ``controlled.shutdown.retry.backoff.ms``). True when the controller moved everything away."""
        for attempt in range(max_retries):
            try:
                resp = await self.controlled_shutdown(broker_epoch, timeout)
            except ControllerNotAvailableError:
                log.warning("controlled shutdown: no controller reachable (attempt %d)", attempt + 1)
            else:
                if resp.error_code == ErrorCode.NONE and not resp.remaining_partitions:
                    return True
                log.info("controlled shutdown attempt %d: error %d, %d partitions remaining", attempt + 1,
                         resp.error_code, len(resp.remaining_partitions))
            if attempt + 1 < max_retries:
                await asyncio.sleep(retry_backoff_ms / 1000.0)
        return False
