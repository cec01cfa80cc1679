"""One line per stage of a pipeline run, with the seconds since ``make pipeline`` started.

``run_pipeline.sh`` exports its start time as ``PIPELINE_T0`` (epoch seconds), so the lines of
``deploy/spark/install.sh`` and of ``run.py`` count from the same moment; without it they count from
this process's start.
"""

from __future__ import annotations

import os
import time

PREFIX = "pipeline"


def _t0() -> float:
    try:
        return float(os.environ["PIPELINE_T0"])
    except (KeyError, ValueError):
        return time.time()


_T0 = _t0()


def elapsed() -> float:
    return max(0.0, time.time() - _T0)


def stage(text: str) -> None:
    """``[pipeline   42s] text`` on stdout, flushed: the next stage may take minutes."""
    print(f"[{PREFIX} {elapsed():4.0f}s] {text}", flush=True)

