"""Log lines that a client can trigger at will (refused connections, invalid requests), at most once
per interval per kind, with a count of what was left out. A flood of bad connections must not turn
into a flood of log lines: the disk and the event loop are shared with every other client."""

from __future__ import annotations

import logging
import time


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval_s: float = 10.0) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._last: dict[str, float] = {}  # kind -> monotonic time of its last line
        self._suppressed: dict[str, int] = {}

    def log(self, level: int, kind: str, msg: str, *args: object) -> None:
        now = time.monotonic()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval_s:
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return
        self._last[kind] = now
        skipped = self._suppressed.pop(kind, 0)
        if skipped:
            msg += f" ({skipped} more like this in the last {now - last:.0f} s)"  # type: ignore[operator]
        self.logger.log(level, msg, *args)
