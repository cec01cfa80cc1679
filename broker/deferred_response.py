"""A response that is not ready yet, while the connection may go on to its client's next request.

A produce with acks=all has done its work once its batches are appended: what is left is waiting
for the followers to move the HW. Kafka's network layer mutes the channel until the response is
sent, so a producer with five requests in flight has one appended per replication round trip, and
each follower fetch carries one batch. Handing back the wait instead lets the connection append the
next request while the first one waits: followers then fetch every batch appended since their last
fetch in one round trip, and the client sees nothing different (its responses still come in request
order, and each one only once its batches are committed or have failed).

Only a handler whose remaining work cannot change what later requests see may defer: the appends,
their validation and their errors all happen before the deferral, in request order.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any


class DeferredResponse:
    """The rest of a request's handling: a coroutine whose result is the response body (or parts)."""

    __slots__ = ("coro",)

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro

    async def result(self) -> Any:
        """Finish here, in the caller's task (where the connection cannot go on meanwhile)."""
        return await self.coro
