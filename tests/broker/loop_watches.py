"""Counting how often a connection asks the event loop to watch its socket, and to stop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Literal


class CountingLoopWatches:
    """Counts the loop's add_reader / remove_reader (``kind="reader"``) or add_writer / remove_writer
    (``kind="writer"``) calls for one descriptor, passing every call on to the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, kind: Literal["reader", "writer"]) -> None:
        self.added = self.removed = 0
        real_add = getattr(loop, f"add_{kind}")
        real_remove = getattr(loop, f"remove_{kind}")

        def add(fd_: int, callback: Callable[..., object], *args: object) -> None:
            if fd_ == fd:
                self.added += 1
            real_add(fd_, callback, *args)

        def remove(fd_: int) -> bool:
            if fd_ == fd:
                self.removed += 1
            return bool(real_remove(fd_))

        setattr(loop, f"add_{kind}", add)
        setattr(loop, f"remove_{kind}", remove)
