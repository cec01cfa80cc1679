"""Where a request's time goes, in Kafka's RequestMetrics phases, measured on the request path.

Kafka splits a request's total time (``TotalTimeMs``) into the time it waited for a handler thread
(``RequestQueueTimeMs``), the handler's own work (``LocalTimeMs``), the wait in a purgatory for other
brokers or for data (``RemoteTimeMs``), the wait for a network thread to take the response
(``ResponseQueueTimeMs``) and the send (``ResponseSendTimeMs``). A kafkette broker is one event loop, so
the phases are read off four clock readings per request:

* ``started``: the request's bytes are all read (the connection, before it calls the handler);
* ``dequeued``: the request is decoded and its handler starts (KafkaApis);
* ``api_done``: the handler returned its response (KafkaApis), minus the time parked in a purgatory
  (``remote_s``, added up by the purgatories while the request's task waits there);
* ``responded``/``end``: the response is encoded, and its last byte is written (the connection).

Each connection owns one ``RequestClock`` (it handles one request at a time, as Kafka's muted channel
does) and publishes it in a context variable for the purgatories. A produce that goes on waiting for
acks=all after its connection moved to the next request (broker/deferred_response.py) keeps that clock,
in its own task's copy of the context, and the connection takes a new one. Nothing else here allocates
per request; ``targets`` is set only when a metrics endpoint is on, so a broker without one pays an
attribute check.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol


class LatencyTarget(Protocol):
    """What a request's phases go to (one per request name: broker/metrics_requests.py)."""

    def observe(self, end: float, version: int, queue_ms: float, local_ms: float, remote_ms: float,
                response_queue_ms: float, send_ms: float, total_ms: float) -> None: ...


class RequestClock:
    __slots__ = ("remote_s", "dequeued", "api_done", "version", "targets")

    def __init__(self) -> None:
        self.remote_s = 0.0  # parked in purgatories during the current request
        self.dequeued = 0.0
        self.api_done = 0.0
        self.version = 0
        # Set by the metrics when a response is ready: the RequestMetrics the request counts under
        # (two for Fetch: FetchConsumer or FetchFollower, and Fetch). None: nothing to record.
        self.targets: tuple[LatencyTarget, ...] | None = None

    def finish(self, started: float, responded: float, end: float) -> None:
        """The response is written (or there is none): record the request's phases, in ms."""
        targets, self.targets = self.targets, None
        if targets is None:
            return
        dequeued, done, remote = self.dequeued, self.api_done, self.remote_s
        queue = max(0.0, dequeued - started) * 1000.0
        local = max(0.0, done - dequeued - remote) * 1000.0
        response_queue = max(0.0, responded - done) * 1000.0
        send = max(0.0, end - responded) * 1000.0
        total = max(0.0, end - started) * 1000.0
        remote *= 1000.0
        version = self.version
        for target in targets:
            target.observe(end, version, queue, local, remote, response_queue, send, total)


# The clock of the request the running task is handling (set once per connection task).
CURRENT_CLOCK: ContextVar[RequestClock | None] = ContextVar("request_clock", default=None)
