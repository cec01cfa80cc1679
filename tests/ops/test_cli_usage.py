"""The ``kafkette`` command line itself, run as a process: ``--version``, each subcommand's own usage on a
bad flag, and help text on every option of every subcommand."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO, stdin=subprocess.DEVNULL)


def console_script() -> list[str]:
    exe = shutil.which("kafkette", path=str(Path(sys.executable).parent))
    assert exe, "the kafkette console script is not installed next to this Python (pyproject's [project.scripts])"
    return [exe]


def test_version() -> None:
    expected = f"kafkette {metadata.version('kafkette')} (Apache Kafka 3.9.1)"
    for cmd in (console_script(), [sys.executable, "-m", "clients.cli"]):
        r = run([*cmd, "--version"])
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == expected
    # Each of Kafka's tools takes --version; so does each subcommand, whatever else it requires.
    for sub in (["topics"], ["perf", "produce"], ["dump-log"]):
        r = run([*console_script(), *sub, "--version"])
        assert (r.returncode, r.stdout.strip()) == (0, expected), r.stderr


def test_bad_flag_shows_the_subcommands_usage() -> None:
    cli = console_script()
    cases = {
        ("topics", "--list", "--bogus"): "kafkette topics",
        ("topics", "create", "--topic", "t", "--bogus=1"): "kafkette topics",  # the action-word form
        ("consumer-groups", "--describe", "--group", "g", "--members", "--no-such-flag"): "kafkette consumer-groups",
        ("perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1",
         "--bogus"): "kafkette perf produce",
        ("dump-log", "--files", "x.log", "--bogus"): "kafkette dump-log",
        ("cluster", "describe", "--bogus"): "kafkette cluster describe",
    }
    for argv, prog in cases.items():
        r = run([*cli, *argv])
        assert r.returncode == 2, (argv, r.stderr)
        assert r.stdout == "", argv
        assert r.stderr.startswith(f"usage: {prog} "), (argv, r.stderr)
        bad = next(a for a in argv if a.startswith(("--bogus", "--no-such-flag")))
        assert f"{prog}: error: unrecognized arguments: {bad}" in r.stderr, (argv, r.stderr)
        assert "usage: kafkette [-h]" not in r.stderr, argv
    # A bad subcommand name is the top-level parser's to report.
    r = run([*cli, "no-such-command"])
    assert r.returncode == 2 and r.stderr.startswith("usage: kafkette [-h]") and "invalid choice" in r.stderr


def _options(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
             ) -> list[tuple[tuple[str, ...], argparse.Action]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                assert helps.get(name), f"subcommand {' '.join((*prefix, name))} has no help"
                out += _options(sub, (*prefix, name))
        elif action.option_strings:
            out.append((prefix, action))
    return out


def test_every_option_has_help() -> None:
    from clients.cli import build_parser

    options = _options(build_parser())
    assert len(options) > 200  # the walk reached every subcommand
    missing = [f"kafkette {' '.join(cmd)} {'/'.join(a.option_strings)}" for cmd, a in options
               if not a.help or a.help == argparse.SUPPRESS or not a.help.strip()]
    assert not missing, "options without help:\n" + "\n".join(missing)
    # and the help is what --help prints
    r = run([*console_script(), "console-consumer", "--help"])
    assert r.returncode == 0 and "--isolation-level" in r.stdout and "read_uncommitted" in r.stdout
