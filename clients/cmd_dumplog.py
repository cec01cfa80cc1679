"""``kafkette dump-log``: print segment files offline (kafka-dump-log.sh's flags and output format).

Reads ``.log`` segments batch by batch (headers, CRC check, records with ``--print-data-log``) and the
``.index``/``.timeindex`` files entry by entry. Files are opened read-only; nothing is repaired.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from typing import Any

from clients.cmd_common import UsageError
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


def dump_segment(path: str, args: argparse.Namespace, out: Any) -> int:
    """Print one .log file; returns the number of corrupt batches."""
    base = _base_offset(path)
    data = _read(path, args.max_bytes)
    print(f"Log starting offset: {base}", file=out)
    bad = 0
    pos = 0
    deep = args.print_data_log or args.deep_iteration
    try:
        for batch in iter_batches(data, allow_partial_tail=True):
            valid = batch.verify_crc()
            if not valid:
                bad += 1
            ts_kind = "LogAppendTime" if batch.timestamp_type == 1 else "CreateTime"
            horizon = batch.delete_horizon_ms
            codec = CompressionType(batch.compression).name.lower()
            print(f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count} "
                  f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                  f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                  f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                  f"isTransactional: {str(batch.is_transactional).lower()} "
                  f"isControl: {str(batch.is_control).lower()} "
                  f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'} "
                  f"position: {pos} {ts_kind}: {batch.max_timestamp} size: {batch.size} magic: {batch.magic} "
                  f"compresscodec: {codec} crc: {batch.crc} isvalid: {str(valid).lower()}", file=out)
            if deep and valid:
                try:
                    for rec in batch.records():
                        seq = batch.base_sequence + (rec.offset - batch.base_offset) \
                            if batch.base_sequence >= 0 else -1
                        line = (f"| offset: {rec.offset} {ts_kind}: {rec.timestamp} "
                                f"keySize: {-1 if rec.key is None else len(rec.key)} "
                                f"valueSize: {-1 if rec.value is None else len(rec.value)} sequence: {seq} "
                                f"headerKeys: [{','.join(k for k, _ in rec.headers)}]")
                        if args.print_data_log:
                            if batch.is_control:
                                marker = "COMMIT" if rec.key and rec.key[-1] == 1 else "ABORT"
                                line += f" endTxnMarker: {marker}"
                            else:
                                if rec.key is not None:
                                    line += f" key: {_text(rec.key)}"
                                line += f" payload: {_text(rec.value)}"
                        print(line, file=out)
                except CorruptRecordError as e:
                    bad += 1
                    print(f"| corrupt records in batch at position {pos}: {e}", file=out)
            pos += batch.size
    except CorruptRecordError as e:
        bad += 1
        print(f"Found a corrupt batch at position {pos}: {e}", file=out)
        return bad
    if pos < len(data) and len(data) < args.max_bytes:
        print(f"Found {len(data) - pos} invalid bytes at the end of {os.path.basename(path)}", file=out)
        bad += 1
    return bad


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


def dump_offset_index(path: str, args: argparse.Namespace, out: Any) -> int:
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
        if problems:
            print(f"{path} failed sanity check: {problems[0]}", file=out)
            return 1
        print(f"{path} passed sanity check.", file=out)
        return 0
    log_path = path[: -len(".index")] + ".log"
    log_data = _read(log_path) if os.path.exists(log_path) else None
    mismatches = 0
    for rel, position in entries:
        offset = base + rel
        if log_data is not None:
            try:
                batch = next(iter_batches(log_data, position, allow_partial_tail=True), None)
            except CorruptRecordError:
                batch = None
            if batch is None or batch.last_offset != offset:
                found = "nothing" if batch is None else str(batch.last_offset)
                print(f"Index mismatch: offset {offset} in the index, batch ending at {found} at position "
                      f"{position} in the log", file=out)
                mismatches += 1
                continue
        if not args.verify_index_only:
            print(f"offset: {offset} position: {position}", file=out)
    for p in problems:
        print(f"Index problem: {p}", file=out)
    return mismatches + len(problems)


def dump_time_index(path: str, args: argparse.Namespace, out: Any) -> int:
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
        if problems:
            print(f"{path} failed sanity check: {problems[0]}", file=out)
            return 1
        print(f"{path} passed sanity check.", file=out)
        return 0
    if not args.verify_index_only:
        for ts, rel in entries:
            print(f"timestamp: {ts} offset: {base + rel}", file=out)
    for p in problems:
        print(f"Index problem: {p}", file=out)
    return len(problems)


def run(args: argparse.Namespace) -> int:
    files = [f.strip() for f in args.files.split(",") if f.strip()]
    if not files:
        raise UsageError("--files is empty")
    for f in files:
        if not os.path.isfile(f):
            raise UsageError(f"{f}: no such file")
    out = sys.stdout
    problems = 0
    for f in files:
        print(f"Dumping {f}", file=out)
        if f.endswith(".log"):
            problems += dump_segment(f, args, out)
        elif f.endswith(".index"):
            problems += dump_offset_index(f, args, out)
        elif f.endswith(".timeindex"):
            problems += dump_time_index(f, args, out)
        else:
            print(f"Ignoring unknown file {f}", file=out)
    if problems:
        print(f"Error: CORRUPT_MESSAGE: {problems} problem(s) found (see above)", file=sys.stderr)
        return 1
    return 0
