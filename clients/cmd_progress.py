"""A one-line progress meter for the CLI's long operations (perf, reassignment, record deletion, offset resets).

It draws on stderr, and only when stderr is a terminal and the output is not JSON: piped output,
logs and ``--output json`` stay exactly as they were. The line is redrawn in place (carriage return,
erase to end of line) at most ten times a second, and erased when the operation ends, so the
command's own output on stdout is never mixed with it.
"""

from __future__ import annotations

import argparse
import sys
import time
from types import TracebackType
from typing import Any, TextIO

_REDRAW_S = 0.1


def wants_progress(args: argparse.Namespace, stream: TextIO | None = None) -> bool:
    """True when a meter would be seen: stderr is a terminal and the output is not JSON."""
    stream = stream or sys.stderr
    if getattr(args, "output", "table") == "json":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class Progress:
    """``label: done/total unit (pct%) elapsed`` on one line of stderr, when ``enabled``."""

    def __init__(self, label: str, total: int, unit: str, *, enabled: bool, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = max(0, total)
        self.unit = unit
        self.enabled = enabled
        self.stream: TextIO = stream or sys.stderr
        self.done = 0
        self.note = ""
        self._start = time.monotonic()
        self._drawn_at: float | None = None
        self._visible = False

    @classmethod
    def for_args(cls, args: argparse.Namespace, label: str, total: int, unit: str) -> Progress:
        return cls(label, total, unit, enabled=wants_progress(args))

    def __enter__(self) -> Progress:
        self.draw(force=True)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.clear()

    def advance(self, n: int = 1, note: str | None = None) -> None:
        self.update(self.done + n, note)

    def update(self, done: int, note: str | None = None) -> None:
        self.done = done
        if note is not None:
            self.note = note
        self.draw(force=done >= self.total)

    def text(self) -> str:
        pct = f" ({100 * self.done // self.total}%)" if self.total else ""
        note = f", {self.note}" if self.note else ""
        return (f"{self.label}: {self.done}/{self.total} {self.unit}{pct}, "
                f"{time.monotonic() - self._start:.0f}s{note}")

    def draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and self._drawn_at is not None and now - self._drawn_at < _REDRAW_S:
            return
        self._drawn_at = now
        self._write(f"\r{self.text()}\x1b[K")
        self._visible = True

    def clear(self) -> None:
        """Erase the meter (before printing a line of output, and at the end)."""
        if self.enabled and self._visible:
            self._write("\r\x1b[K")
            self._visible = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: the operation goes on without a meter
            self.enabled = False


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]
