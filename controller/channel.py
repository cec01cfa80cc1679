"""The controller's connections to brokers (Kafka's ``ControllerChannelManager``).

One connection and one queue per live broker, the controller's own broker included. Each broker's
requests go out strictly in order, one at a time: the next request is sent only after the previous
response arrived (LeaderAndIsr / UpdateMetadata / StopReplica must be applied in order). A failed
connection is re-established with exponential backoff and the request in flight is sent again;
requests for a broker that is removed are dropped.

Each broker's connection is a ``controller.network_client.NodeClient`` (the one client every outgoing
connection uses: correlation ids, timeouts and reconnect backoff live there). Versions are pinned:
each inter-broker API exists at exactly one version, spoken only between kafkette brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.network_client import ConnectionSettings, KafkaConnectionError, NodeClient
from controller.zk_data import BrokerRegistration, EndPoint
from protocol.client_connection import PLAINTEXT, ConnectionSecurity
from protocol.schema import Struct

log = logging.getLogger(__name__)

__all__ = ["ControllerChannelManager", "RequestCallback", "inter_broker_endpoint"]

RequestCallback = Callable[[int, int, "Struct | None", "BaseException | None"], None]
"""callback(broker_id, api_key, response body or None, error or None)"""

# Each inter-broker API is implemented at exactly one version (see protocol/api_versions.py).
INTER_BROKER_VERSIONS = {4: 7, 5: 4, 6: 8, 7: 3, 56: 3}


def inter_broker_endpoint(reg: BrokerRegistration, listener_name: str | None) -> EndPoint:
    """The endpoint to reach ``reg`` on: the named listener, else the first PLAINTEXT one, else the first."""
    if listener_name:
        ep = reg.endpoint(listener_name)
        if ep is not None:
            return ep
    for ep in reg.endpoints:
        if ep.security_protocol == "PLAINTEXT":
            return ep
    if not reg.endpoints:
        raise ValueError(f"broker {reg.broker_id} registered no endpoints")
    return reg.endpoints[0]


@dataclass
class _QueueItem:
    api_key: int
    body: Struct
    callback: RequestCallback | None
    future: asyncio.Future[Struct] | None = None
    enqueued: float = 0.0


@dataclass
class _BrokerChannel:
    broker_id: int
    endpoint: EndPoint
    node: NodeClient
    queue: asyncio.Queue[_QueueItem] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    sent: int = 0

    @property
    def connected(self) -> bool:
        return self.node.connected


class ControllerChannelManager:
    """Queues and sends controller requests to brokers.

    ``send(broker_id, api_key, body, callback)`` enqueues; ``callback(broker_id, api_key, response,
    error)`` runs on the loop when the response arrives (error is set only when the request was
    dropped: broker removed or manager shut down). ``request(...)`` is the awaitable form.
    """

    def __init__(self, controller_id: int, loop: asyncio.AbstractEventLoop | None = None, *,
                 listener_name: str | None = "PLAINTEXT", request_timeout_ms: int = 30000,
                 reconnect_backoff_ms: int = 50, reconnect_backoff_max_ms: int = 1000,
                 connect_timeout_ms: int = 10000, security: ConnectionSecurity = PLAINTEXT) -> None:
        self.controller_id = controller_id
        # TLS / SASL of the listener the channels connect to (broker/security/inter_broker.py).
        self.security = security
        self.loop = loop
        self.listener_name = listener_name
        self.request_timeout = request_timeout_ms / 1000.0
        self.backoff = reconnect_backoff_ms / 1000.0
        self.backoff_max = reconnect_backoff_max_ms / 1000.0
        self.connect_timeout = connect_timeout_ms / 1000.0
        self._channels: dict[int, _BrokerChannel] = {}
        self._running = False

    def _settings(self, broker_id: int) -> ConnectionSettings:
        # One request at a time per broker: LeaderAndIsr / UpdateMetadata / StopReplica apply in order.
        return ConnectionSettings(client_id=f"controller-{self.controller_id}-to-broker-{broker_id}",
                                  connect_timeout_s=self.connect_timeout, request_timeout_s=self.request_timeout,
                                  max_in_flight=1, negotiate_versions=False, reconnect_backoff_s=self.backoff,
                                  reconnect_backoff_max_s=self.backoff_max, security=self.security)

    # ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        self._running = True
        for ch in self._channels.values():
            self._start_channel(ch)

    async def shutdown(self) -> None:
        self._running = False
        for bid in list(self._channels):
            await self._remove(bid)

    def broker_ids(self) -> set[int]:
        return set(self._channels)

    def has_broker(self, broker_id: int) -> bool:
        return broker_id in self._channels

    def queue_size(self, broker_id: int) -> int:
        ch = self._channels.get(broker_id)
        return ch.queue.qsize() if ch else 0

    def add_broker(self, reg: BrokerRegistration) -> None:
        """Start talking to ``reg`` (no-op if already known at the same address)."""
        ep = inter_broker_endpoint(reg, self.listener_name)
        ch = self._channels.get(reg.broker_id)
        if ch is not None:
            if ch.endpoint == ep:
                return
            self._drop_channel(ch)
        ch = _BrokerChannel(reg.broker_id, ep, NodeClient(ep.host, ep.port, self._settings(reg.broker_id)))
        self._channels[reg.broker_id] = ch
        if self._running:
            self._start_channel(ch)

    def update_broker(self, reg: BrokerRegistration) -> None:
        self.add_broker(reg)

    def remove_broker(self, broker_id: int) -> None:
        ch = self._channels.pop(broker_id, None)
        if ch is not None:
            self._drop_channel(ch)

    async def _remove(self, broker_id: int) -> None:
        ch = self._channels.pop(broker_id, None)
        if ch is not None:
            task = ch.task
            self._drop_channel(ch)
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def _drop_channel(self, ch: _BrokerChannel) -> None:
        if ch.task is not None:
            ch.task.cancel()
        self._close_conn(ch)
        err = ConnectionError(f"broker {ch.broker_id} removed from the controller channel")
        while not ch.queue.empty():
            item = ch.queue.get_nowait()
            self._complete(ch.broker_id, item, None, err)

    def _start_channel(self, ch: _BrokerChannel) -> None:
        assert self.loop is not None
        if ch.task is None or ch.task.done():
            ch.task = self.loop.create_task(self._send_loop(ch),
                                            name=f"controller-{self.controller_id}-to-broker-{ch.broker_id}")

    # ------------------------------------------------------------------------------------------

    def send(self, broker_id: int, api_key: int, body: Struct, callback: RequestCallback | None = None) -> bool:
        """Queue a request for ``broker_id``; False when the broker is not known (callback not called)."""
        ch = self._channels.get(broker_id)
        if ch is None:
            log.debug("controller %d: no channel to broker %d, dropping api %d", self.controller_id, broker_id,
                      api_key)
            return False
        ch.queue.put_nowait(_QueueItem(api_key, body, callback))
        return True

    async def request(self, broker_id: int, api_key: int, body: Struct, timeout: float | None = None) -> Struct:
        """Send and wait for the response body."""
        assert self.loop is not None or self._running is False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Struct] = loop.create_future()
        ch = self._channels.get(broker_id)
        if ch is None:
            raise ConnectionError(f"no channel to broker {broker_id}")
        ch.queue.put_nowait(_QueueItem(api_key, body, None, fut))
        return await asyncio.wait_for(fut, timeout) if timeout else await fut

    def _complete(self, broker_id: int, item: _QueueItem, resp: Struct | None, err: BaseException | None) -> None:
        if item.future is not None and not item.future.done():
            if err is not None:
                item.future.set_exception(err)
            else:
                item.future.set_result(resp)  # type: ignore[arg-type]
        if item.callback is not None:
            try:
                item.callback(broker_id, item.api_key, resp, err)
            except Exception:
                log.exception("controller request callback failed (api %d, broker %d)", item.api_key, broker_id)

    # ------------------------------------------------------------------------------------------

    def _close_conn(self, ch: _BrokerChannel) -> None:
        ch.node.close()

    async def _send_loop(self, ch: _BrokerChannel) -> None:
        while True:
            item = await ch.queue.get()
            version = INTER_BROKER_VERSIONS[item.api_key]
            while True:
                try:
                    # NodeClient waits out the reconnect backoff before it connects again.
                    resp = await ch.node.request(item.api_key, item.body, version=version)
                except asyncio.CancelledError:
                    self._complete(ch.broker_id, item, None, ConnectionError("controller channel closed"))
                    raise
                except KafkaConnectionError as e:  # includes timeouts and undecodable responses
                    log.info("controller %d: request (api %d) to broker %d failed: %s; resending after reconnect",
                             self.controller_id, item.api_key, ch.broker_id, e)
                    continue
                except Exception as e:  # the request itself cannot be sent (encoding): give up on it
                    log.exception("controller %d: cannot send api %d to broker %d", self.controller_id,
                                  item.api_key, ch.broker_id)
                    self._complete(ch.broker_id, item, None, e)
                    break
                ch.sent += 1
                self._complete(ch.broker_id, item, resp, None)
                break

    def describe(self) -> dict[int, dict[str, Any]]:
        return {bid: {"host": ch.endpoint.host, "port": ch.endpoint.port, "connected": ch.connected,
                      "queued": ch.queue.qsize(), "sent": ch.sent} for bid, ch in self._channels.items()}
