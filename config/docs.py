"""``docs/configs.md``, generated from the registry: ``python -m config.docs [--check]``.

The page is derived data. ``--check`` exits 1 when the checked-in page differs from what the
registry generates, and a test runs the same comparison, so the docs cannot drift from the code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from config.registry import REGISTRY, ConfigDef, broker_configs, format_value, topic_configs

DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "configs.md"

_HEADER = """\
# Configuration reference

Generated from the config registry (`config/registry.py`) by `python -m config.docs`; do not edit by
hand (a test fails when this page is stale). Names, types, defaults and dynamic-update modes are
Apache Kafka 3.9's; configs marked *kafkette* are ours.

Broker configs go in `server.properties` (or `--override name=value`); the dynamic ones can also be
changed at run time with `kafkette configs --alter --entity-type brokers ...` (per broker, or
cluster-wide with `--entity-default`). Topic configs are set per topic with `kafkette configs --alter
--entity-type topics ...` or at creation; their defaults come from the broker synonyms listed.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(defn: ConfigDef) -> str:
    if defn.sensitive:
        return "(sensitive)" if defn.default is not None else "null"
    text = format_value(defn.name, defn.default)
    if text is None:
        return "null"
    return f"`{text}`" if text else '""'


def _notes(defn: ConfigDef) -> str:
    notes = []
    if defn.kafkette:
        notes.append("*kafkette*")
    if defn.dynamic_only:
        notes.append("dynamic only")
    if defn.removed_in:
        notes.append(f"removed in Kafka {defn.removed_in}")
    return ", ".join(notes)


def render() -> str:
    lines = [_HEADER, "## Broker configs", "",
             "| Name | Type | Default | Valid values | Update mode | Importance | Description |",
             "|---|---|---|---|---|---|---|"]
    for name, defn in sorted(broker_configs().items()):
        mode = defn.update_mode.value if defn.update_mode is not None else ""
        doc = defn.doc + (f" ({_notes(defn)})" if _notes(defn) else "")
        lines.append(f"| `{name}` | {defn.type.name.lower()} | {_cell(_default(defn))} | "
                     f"{_cell(defn.valid_values)} | {mode} | {defn.importance.value} | {_cell(doc)} |")
    lines += ["", "## Topic configs", "",
              "| Name | Type | Default | Valid values | Broker synonyms | Description |",
              "|---|---|---|---|---|---|"]
    for name, defn in sorted(topic_configs().items()):
        synonyms = ", ".join(f"`{s.name}`" for s in defn.synonyms)
        doc = defn.doc + (f" ({_notes(defn)})" if _notes(defn) else "")
        lines.append(f"| `{name}` | {defn.type.name.lower()} | {_cell(_default(defn))} | "
                     f"{_cell(defn.valid_values)} | {synonyms} | {_cell(doc)} |")
    lines.append("")
    lines.append(f"{len(REGISTRY)} configs in all.")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m config.docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/configs.md is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = DOC_PATH.read_text() if DOC_PATH.exists() else ""
        if current != text:
            print(f"{DOC_PATH} is stale: run python -m config.docs", file=sys.stderr)
            return 1
        return 0
    DOC_PATH.write_text(text)
    print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
