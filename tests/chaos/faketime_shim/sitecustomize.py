"""Loaded (through PYTHONPATH) only by brokers the chaos suite runs under libfaketime.

libfaketime 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1 hands the kernel a negative time for
clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ...) (libfaketime#426), and Python 3.11's time.sleep
waits exactly that way, so every sleep fails with EINVAL. select() takes a relative timeout, which
libfaketime leaves alone.
"""

import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)


time.sleep = _sleep
