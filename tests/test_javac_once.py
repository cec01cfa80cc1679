"""tests/kafka_dist.javac_once: Java probes compiled once, even when parallel test workers ask at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.kafka_dist import javac_once

SOURCE = """public class Probe {
    public static void main(String[] args) { System.out.println("probe"); }
}
"""


def test_concurrent_requests_compile_once_and_all_get_complete_classes(tmp_path: Path) -> None:
    source = tmp_path / "Probe.java"
    source.write_text(SOURCE)
    out = tmp_path / "classes" / "probe"
    # Separate lock-file descriptions, as separate worker processes have: one compiles, the others wait.
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: javac_once(source, "", out), range(3)))
    assert results == [str(out)] * 3
    assert (out / ".complete").exists() and (out / "Probe.class").stat().st_size > 0
    stamp = (out / "Probe.class").stat().st_mtime_ns
    assert javac_once(source, "", out) == str(out)
    assert (out / "Probe.class").stat().st_mtime_ns == stamp  # not compiled again
