"""``kafkette dump-log``: print segment files offline (kafka-dump-log.sh's flags and output format).

Reads ``.log`` segments batch by batch (headers, CRC check, records with ``--print-data-log``) and the
``.index``/``.timeindex`` files entry by entry. Files are opened read-only; nothing is repaired.

Each file is read into a stream of items, each with its data and its line of kafka-dump-log.sh's
text: the text is printed as it comes (a large segment is never held in memory), ``--output json``
gathers the data into one document, a list with one object per file.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from clients.cmd_common import UsageError, add_output_arg
from protocol.exceptions import CorruptRecordError
from protocol.records import CompressionType, iter_batches

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_MAX_STR = 1 << 16


def register(sub: Any) -> None:
    p = sub.add_parser("dump-log", help="print log segments and indexes (offline)",
                       description="Print the batches and records of .log segments and the entries of "
                                   ".index/.timeindex files, offline (kafka-dump-log.sh's flags).")
    p.add_argument("--files", required=True, help="comma-separated segment, index or time index files")
    p.add_argument("--print-data-log", action="store_true", help="print records (keys and payloads)")
    p.add_argument("--deep-iteration", action="store_true", help="print records (without payloads)")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only check that index files are well formed")
    p.add_argument("--verify-index-only", action="store_true",
                   help="only check index entries against the segment, print mismatches")
    p.add_argument("--max-bytes", type=int, default=1 << 31, help="read at most this many bytes of a segment")
    add_output_arg(p)
    p.set_defaults(func=run)


def _base_offset(path: str) -> int:
    stem = os.path.basename(path).split(".", 1)[0]
    if not stem.isdigit():
        raise UsageError(f"{path}: not a segment file (expected a 20-digit base offset name)")
    return int(stem)


def _read(path: str, limit: int | None = None) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read() if limit is None else f.read(limit)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def _text(b: bytes | None) -> str:
    if b is None:
        return "null"
    return b[:_MAX_STR].decode("utf-8", errors="replace")


@dataclass
class Item:
    """One thing found in a file: its kind, its data (for JSON), its line of text (None: no line), and
    how many problems it counts (a corrupt batch, a mismatched index entry...)."""

    kind: str  # start, batch, record, entry, sanity, problem
    data: dict[str, Any]
    text: str | None
    problems: int = 0


def segment_items(path: str, args: argparse.Namespace) -> Iterator[Item]:
    """The batches (and with --deep-iteration/--print-data-log the records) of one .log file."""
    base = _base_offset(path)
    data = _read(path, args.max_bytes)
    yield Item("start", {"logStartOffset": base}, f"Log starting offset: {base}")
    pos = 0
    deep = args.print_data_log or args.deep_iteration
    try:
        for batch in iter_batches(data, allow_partial_tail=True):
            valid = batch.verify_crc()
            ts_kind = "LogAppendTime" if batch.timestamp_type == 1 else "CreateTime"
            horizon = batch.delete_horizon_ms
            codec = CompressionType(batch.compression).name.lower()
            b = {"baseOffset": batch.base_offset, "lastOffset": batch.last_offset, "count": batch.records_count,
                 "baseSequence": batch.base_sequence, "lastSequence": batch.last_sequence,
                 "producerId": batch.producer_id, "producerEpoch": batch.producer_epoch,
                 "partitionLeaderEpoch": batch.partition_leader_epoch, "isTransactional": batch.is_transactional,
                 "isControl": batch.is_control, "deleteHorizonMs": horizon, "position": pos,
                 "timestampType": ts_kind, "maxTimestamp": batch.max_timestamp, "size": batch.size,
                 "magic": batch.magic, "compresscodec": codec, "crc": batch.crc, "isvalid": valid}
            yield Item("batch", b, (
                f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count} "
                f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                f"isTransactional: {str(batch.is_transactional).lower()} "
                f"isControl: {str(batch.is_control).lower()} "
                f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'} "
                f"position: {pos} {ts_kind}: {batch.max_timestamp} size: {batch.size} magic: {batch.magic} "
                f"compresscodec: {codec} crc: {batch.crc} isvalid: {str(valid).lower()}"),
                problems=0 if valid else 1)
            if deep and valid:
                try:
                    for rec in batch.records():
                        yield _record_item(batch, rec, ts_kind, args.print_data_log)
                except CorruptRecordError as e:
                    msg = f"corrupt records in batch at position {pos}: {e}"
                    yield Item("problem", {"message": msg}, f"| {msg}", problems=1)
            pos += batch.size
    except CorruptRecordError as e:
        msg = f"Found a corrupt batch at position {pos}: {e}"
        yield Item("problem", {"message": msg}, msg, problems=1)
        return
    if pos < len(data) and len(data) < args.max_bytes:
        msg = f"Found {len(data) - pos} invalid bytes at the end of {os.path.basename(path)}"
        yield Item("problem", {"message": msg}, msg, problems=1)


def _record_item(batch: Any, rec: Any, ts_kind: str, with_data: bool) -> Item:
    seq = batch.base_sequence + (rec.offset - batch.base_offset) if batch.base_sequence >= 0 else -1
    r: dict[str, Any] = {"offset": rec.offset, "timestampType": ts_kind, "timestamp": rec.timestamp,
                         "keySize": -1 if rec.key is None else len(rec.key),
                         "valueSize": -1 if rec.value is None else len(rec.value), "sequence": seq,
                         "headerKeys": [k for k, _ in rec.headers]}
    line = (f"| offset: {rec.offset} {ts_kind}: {rec.timestamp} keySize: {r['keySize']} "
            f"valueSize: {r['valueSize']} sequence: {seq} headerKeys: [{','.join(r['headerKeys'])}]")
    if with_data:
        if batch.is_control:
            r["endTxnMarker"] = "COMMIT" if rec.key and rec.key[-1] == 1 else "ABORT"
            line += f" endTxnMarker: {r['endTxnMarker']}"
        else:
            if rec.key is not None:
                r["key"] = _text(rec.key)
                line += f" key: {r['key']}"
            r["payload"] = None if rec.value is None else _text(rec.value)
            line += f" payload: {_text(rec.value)}"
    return Item("record", r, line)


def _index_entries(path: str, entry: struct.Struct) -> tuple[list[tuple[int, int]], int]:
    data = _read(path)
    size = len(data)
    out = []
    for i in range(size // entry.size):
        a, b = entry.unpack_from(data, i * entry.size)
        if a == 0 and b == 0:
            # The preallocated, unused tail of an active segment's index (a real first entry is never
            # at position 0: entries are added after index.interval.bytes of data).
            break
        out.append((a, b))
    return out, size


def _sanity_item(path: str, problems: list[str]) -> Item:
    if problems:
        return Item("sanity", {"passed": False, "problem": problems[0]},
                    f"{path} failed sanity check: {problems[0]}", problems=1)
    return Item("sanity", {"passed": True, "problem": None}, f"{path} passed sanity check.")


def offset_index_items(path: str, args: argparse.Namespace) -> Iterator[Item]:
    base = _base_offset(path)
    entries, size = _index_entries(path, _OFFSET_ENTRY)
    problems = []
    if size % _OFFSET_ENTRY.size:
        problems.append(f"index file size {size} is not a multiple of {_OFFSET_ENTRY.size}")
    last = -1
    for rel, position in entries:
        if rel < last or position < 0:
            problems.append(f"entry (offset {base + rel}, position {position}) out of order")
            break
        last = rel
    if args.index_sanity_check:
        yield _sanity_item(path, problems)
        return
    log_path = path[: -len(".index")] + ".log"
    log_data = _read(log_path) if os.path.exists(log_path) else None
    for rel, position in entries:
        offset = base + rel
        if log_data is not None:
            try:
                batch = next(iter_batches(log_data, position, allow_partial_tail=True), None)
            except CorruptRecordError:
                batch = None
            if batch is None or batch.last_offset != offset:
                found = "nothing" if batch is None else str(batch.last_offset)
                msg = (f"Index mismatch: offset {offset} in the index, batch ending at {found} at position "
                       f"{position} in the log")
                yield Item("problem", {"message": msg}, msg, problems=1)
                continue
        yield Item("entry", {"offset": offset, "position": position},
                   None if args.verify_index_only else f"offset: {offset} position: {position}")
    for p in problems:
        yield Item("problem", {"message": p}, f"Index problem: {p}", problems=1)


def time_index_items(path: str, args: argparse.Namespace) -> Iterator[Item]:
    base = _base_offset(path)
    data = _read(path)
    size = len(data)
    entries = []
    for i in range(size // _TIME_ENTRY.size):
        ts, rel = _TIME_ENTRY.unpack_from(data, i * _TIME_ENTRY.size)
        if ts == 0 and rel == 0:
            break  # unused, preallocated
        entries.append((ts, rel))
    problems = []
    if size % _TIME_ENTRY.size:
        problems.append(f"time index file size {size} is not a multiple of {_TIME_ENTRY.size}")
    for (t0, r0), (t1, r1) in zip(entries, entries[1:], strict=False):
        if t1 < t0 or r1 < r0:
            problems.append(f"entry (timestamp {t1}, offset {base + r1}) out of order")
            break
    if args.index_sanity_check:
        yield _sanity_item(path, problems)
        return
    for ts, rel in entries:
        yield Item("entry", {"timestamp": ts, "offset": base + rel},
                   None if args.verify_index_only else f"timestamp: {ts} offset: {base + rel}")
    for p in problems:
        yield Item("problem", {"message": p}, f"Index problem: {p}", problems=1)


def file_items(path: str, args: argparse.Namespace) -> tuple[str, Iterator[Item]]:
    """(the file's type, its items) by the file name's extension."""
    if path.endswith(".log"):
        return "log", segment_items(path, args)
    if path.endswith(".index"):
        return "index", offset_index_items(path, args)
    if path.endswith(".timeindex"):
        return "timeindex", time_index_items(path, args)
    return "unknown", iter(())


@dataclass
class FileDoc:
    """One file's JSON document, filled item by item."""

    file: str
    type: str
    doc: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.doc = {"file": self.file, "type": self.type, "problems": []}
        if self.type == "log":
            self.doc["batches"] = []
        elif self.type in ("index", "timeindex"):
            self.doc["entries"] = []

    def add(self, item: Item) -> None:
        if item.kind == "start":
            self.doc.update(item.data)
        elif item.kind == "batch":
            self.doc["batches"].append(dict(item.data, records=[]))
        elif item.kind == "record":
            self.doc["batches"][-1]["records"].append(item.data)
        elif item.kind == "entry":
            self.doc["entries"].append(item.data)
        elif item.kind == "sanity":
            self.doc["sanityCheck"] = item.data
        else:
            self.doc["problems"].append(item.data["message"])


def run(args: argparse.Namespace) -> int:
    files = [f.strip() for f in args.files.split(",") if f.strip()]
    if not files:
        raise UsageError("--files is empty")
    for f in files:
        if not os.path.isfile(f):
            raise UsageError(f"{f}: no such file")
    as_json = args.output == "json"
    out = sys.stdout
    problems = 0
    docs = []
    for f in files:
        kind, items = file_items(f, args)
        doc = FileDoc(f, kind)
        if not as_json:
            print(f"Dumping {f}", file=out)
            if kind == "unknown":
                print(f"Ignoring unknown file {f}", file=out)
        for item in items:
            problems += item.problems
            if as_json:
                doc.add(item)
            elif item.text is not None:
                print(item.text, file=out)
        docs.append(doc.doc)
    if as_json:
        print(json.dumps(docs, indent=2), file=out)
    if problems:
        print(f"Error: CORRUPT_MESSAGE: {problems} problem(s) found (see above)", file=sys.stderr)
        return 1
    return 0
