"""The quick chaos matrix (``CHAOS_QUICK=1 make chaos``) as one slow test, for ``make test-slow``.

It runs the runner as its own process (as root: namespaces, veth pairs, nftables), so a crash in a
client library or a stuck thread cannot take pytest with it, and fails with the runner's table and the
seed to replay. CHAOS_SEED chooses the seed here too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.chaos
@pytest.mark.timeout(1800)
def test_quick_chaos_matrix_keeps_every_promise() -> None:
    assert os.geteuid() == 0, "the chaos suite needs root (network namespaces and nftables)"
    env = dict(os.environ, CHAOS_QUICK="1")
    env.pop("CHAOS_SCENARIOS", None)  # the whole matrix
    proc = subprocess.run([sys.executable, "-m", "tests.chaos.runner"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=1700)
    out = proc.stdout
    table_at = out.find("\nchaos: seed")
    summary = out[table_at:] if table_at >= 0 else out[-6000:]
    assert proc.returncode == 0, f"chaos matrix failed (exit {proc.returncode}):\n{summary}\n{proc.stderr[-3000:]}"
    assert "every promise kept" in out
    # Every scenario ran and reported its four workloads.
    for key in ("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14"):
        assert f"| {key} " in summary, f"scenario {key} missing from the table:\n{summary}"
