"""Run every benchmark: each ``tests/bench_*.py`` module's ``main()`` in turn (``make bench``).

A benchmark that raises, or whose ``main()`` returns a non-zero status, is reported and the others
still run; the exit status is non-zero if any failed. ``python -m tests.bench protocol storage``
runs only the named ones; a name that is not a benchmark stops it before anything runs.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path


def discover() -> list[str]:
    here = Path(__file__).parent
    return sorted(p.stem.removeprefix("bench_") for p in here.glob("bench_*.py"))


def run(name: str) -> bool:
    print(f"=== bench {name} ===", flush=True)
    started = time.perf_counter()
    try:
        module = importlib.import_module(f"tests.bench_{name}")
        status = module.main()
    except SystemExit as e:  # a main() that exits instead of returning
        status = e.code
    except Exception:  # noqa: BLE001 - report and carry on with the next benchmark
        traceback.print_exc()
        status = 1
    ok = status in (None, 0)
    print(f"=== bench {name}: {'ok' if ok else f'FAILED ({status})'} in {time.perf_counter() - started:.1f}s ===\n",
          flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    known = discover()
    names = (argv if argv is not None else sys.argv[1:]) or known
    unknown = [name for name in names if name not in known]
    if unknown:
        # Checked before anything runs: a benchmark's own options (``--phases``) would otherwise be
        # taken for names and fail only after the benchmarks before them had run for minutes.
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(known)}. A benchmark's own "
              "options go to it directly: python -m tests.bench_<name> [options]", file=sys.stderr)
        return 2
    failed = [name for name in names if not run(name)]
    if failed:
        print(f"benchmarks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
