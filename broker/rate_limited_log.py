"""Log lines that a client can trigger at will (refused connections, invalid requests), at most once
per interval per kind, with a count of what was left out. A flood of bad connections must not turn
into a flood of log lines: the disk and the event loop are shared with every other client."""

from __future__ import annotations

import logging
import time


class RateLimitedLog:
    """At most ``burst`` lines per ``interval_s`` for each kind of line; the first line after a quiet
    spell says how many were left out."""

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0, burst: int = 1) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.burst = burst
        self._window: dict[str, tuple[float, int]] = {}  # kind -> (window start, lines logged in it)
        self._suppressed: dict[str, int] = {}

    def log(self, level: int, kind: str, msg: str, *args: object) -> None:
        now = time.monotonic()
        start, logged = self._window.get(kind, (now, 0))
        if now - start >= self.interval_s:
            start, logged = now, 0
        if logged >= self.burst:
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return
        self._window[kind] = (start, logged + 1)
        skipped = self._suppressed.pop(kind, 0)
        if skipped:
            msg += f" ({skipped} more like this were not logged)"
        self.logger.log(level, msg, *args)
