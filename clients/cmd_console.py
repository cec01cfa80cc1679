"""``kafkette console-producer`` and ``kafkette console-consumer`` (Kafka's console tools' flags).

The producer is idempotent by default, as Kafka 3.x's console producer is (``enable.idempotence=true``
with ``acks=all``): every batch carries a producer id and sequence numbers, so a retried batch is
written once. ``--producer-property enable.idempotence=false``, or acks other than all
(``--request-required-acks 1``), turn it off.

``--output json`` prints JSON Lines on stdout: the producer one object per acknowledged record
(topic, partition, offset), the consumer one object per record (topic, partition, offset, timestamp,
key, value, headers). Diagnostics stay on stderr.

The consumer's ``--isolation-level`` is Kafka's ``isolation.level``: read_uncommitted (the default)
prints every data record; read_committed reads up to the last stable offset only and leaves out the
records of aborted transactions. Neither ever prints the transaction markers (control batches).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any, TextIO

from clients.admin import EARLIEST, ISOLATION_LEVELS, LATEST, READ_COMMITTED, WireClient
from clients.client_config import load_properties
from clients.cmd_common import (
    UsageError,
    add_connection_args,
    add_output_arg,
    connect,
    parse_kv,
    parse_props_args,
    truthy,
    unescape,
)
from clients.connection import KafkaWireError
from clients.consumer_records import aborted_of, next_offset_after, records_of
from clients.group_member import GroupMember
from clients.producer import COMPRESSION, Producer, parse_acks


def register(sub: Any) -> None:
    p = sub.add_parser("console-producer", help="send lines from stdin or a file as records",
                       description="Read lines from stdin (or --file) and send each as one record "
                                   "(kafka-console-producer.sh's flags).")
    add_connection_args(p, config_flag="--producer.config")
    add_output_arg(p, "one JSON object per line for each acknowledged record: topic, partition, offset")
    p.add_argument("--topic", required=True, help="the topic to send to")
    p.add_argument("--file", help="read records from this file instead of stdin")
    p.add_argument("--property", nargs="+", action="extend", metavar="NAME=VALUE",
                   help="line reader properties: parse.key, key.separator, parse.headers, headers.delimiter, "
                        "headers.separator, headers.key.separator, null.marker, ignore.error")
    p.add_argument("--producer-property", nargs="+", action="extend", metavar="NAME=VALUE",
                   help="producer properties (acks, compression.type, enable.idempotence, retries, "
                        "retry.backoff.ms, delivery.timeout.ms, request.timeout.ms)")
    p.add_argument("--request-required-acks", default=None,
                   help="acks: all, -1, 0 or 1 (default all; other than all turns idempotence off unless "
                        "enable.idempotence=true is given, which then is an error)")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default=None,
                   help="none, gzip, snappy, lz4 or zstd (gzip when given without a value)")
    p.add_argument("--batch-size", type=int, default=None, help="records per request (default 200)")
    p.add_argument("--sync", action="store_true", help="send every record on its own, synchronously")
    p.add_argument("--partition", type=int, help="send every record to this partition")
    p.set_defaults(func=run_producer)

    c = sub.add_parser("console-consumer", help="print records to stdout",
                       description="Print records to stdout (kafka-console-consumer.sh's flags).")
    add_connection_args(c, config_flag="--consumer.config")
    add_output_arg(c, "one JSON object per line for each record: topic, partition, offset, timestamp, "
                      "timestampType, key, value, headers (as UTF-8 text; --property print.* is ignored)")
    c.add_argument("--topic", required=True, help="the topic to read")
    c.add_argument("--group", help="consume as a member of this group (offsets are committed)")
    c.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when there is no committed offset")
    c.add_argument("--partition", type=int, help="consume only this partition")
    c.add_argument("--offset", default=None, help="with --partition: earliest, latest or an offset")
    c.add_argument("--max-messages", type=int, help="exit after this many records")
    c.add_argument("--timeout-ms", type=int, help="exit when no record arrives for this long")
    c.add_argument("--property", nargs="+", action="extend", metavar="NAME=VALUE",
                   help="formatter properties: print.key, print.value, print.timestamp, print.headers, "
                        "print.offset, print.partition, key.separator, line.separator, headers.separator, "
                        "null.literal")
    c.add_argument("--consumer-property", nargs="+", action="extend", metavar="NAME=VALUE",
                   help="consumer properties (client.id, auto.offset.reset, ...)")
    c.add_argument("--isolation-level", choices=tuple(ISOLATION_LEVELS), default=None,
                   help="read_uncommitted (the default) reads every record, those of open and aborted "
                        "transactions too; read_committed reads up to the last stable offset and leaves out the "
                        "records of aborted transactions (isolation.level in --consumer-property or "
                        "--consumer.config is used when this is not given)")
    c.set_defaults(func=run_consumer)


# ------------------------------------------------------------------------------------------------
# Producer


def _split_headers(text: str, props: dict[str, str]) -> list[tuple[str, bytes | None]]:
    sep = unescape(props.get("headers.separator", ","))
    ksep = unescape(props.get("headers.key.separator", ":"))
    null = props.get("null.marker")
    out: list[tuple[str, bytes | None]] = []
    for h in text.split(sep):
        if not h:
            continue
        if ksep not in h:
            raise UsageError(f"header {h!r} has no key separator {ksep!r}")
        k, v = h.split(ksep, 1)
        out.append((k, None if null is not None and v == null else v.encode()))
    return out


def parse_line(line: str, props: dict[str, str]) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    """One input line -> (key, value, headers), with the console producer's line reader rules."""
    headers: list[tuple[str, bytes | None]] = []
    null = props.get("null.marker")
    if truthy(props.get("parse.headers")):
        delim = unescape(props.get("headers.delimiter", "\t"))
        if delim not in line:
            raise UsageError(f"no headers delimiter {delim!r} in line {line!r}")
        htext, line = line.split(delim, 1)
        if htext != props.get("no.headers", "NO_HEADERS"):
            headers = _split_headers(htext, props)
    key: bytes | None = None
    if truthy(props.get("parse.key")):
        sep = unescape(props.get("key.separator", "\t"))
        if sep not in line:
            raise UsageError(f"no key separator {sep!r} in line {line!r}")
        k, line = line.split(sep, 1)
        key = None if null is not None and k == null else k.encode()
    value = None if null is not None and line == null else line.encode()
    return key, value, headers


def run_producer(args: argparse.Namespace) -> int:
    props = parse_props_args(args.property)
    pprops = load_properties(args.command_config)
    pprops.update(parse_kv(args.producer_property, "producer property"))
    acks = parse_acks(args.request_required_acks or pprops.get("acks", "all"))
    compression = args.compression_codec or pprops.get("compression.type", "none")
    if compression not in COMPRESSION:
        raise UsageError(f"unknown compression codec {compression!r} (none, gzip, snappy, lz4, zstd)")
    # A terminal sends each line as it is typed; piped input is sent in batches of --batch-size lines.
    interactive = not args.file and sys.stdin.isatty()
    batch = 1 if (args.sync or interactive) else (args.batch_size or 200)
    if batch < 1:
        raise UsageError("--batch-size must be at least 1")
    if args.file:
        try:
            source: TextIO = open(args.file, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as e:
            raise UsageError(f"cannot read {args.file}: {e.strerror}") from None
    else:
        source = sys.stdin
    ignore_errors = truthy(props.get("ignore.error"))
    with connect(args) as client:
        info = client.topic(args.topic)
        if args.partition is not None and args.partition not in info.partitions:
            raise KafkaWireError(3, f"Partition {args.topic}-{args.partition} does not exist.")
        # retries, retry.backoff.ms, delivery.timeout.ms, enable.idempotence as Kafka's producer reads them;
        # idempotent unless turned off or acks is not all, as Kafka 3.x's producer
        producer = Producer.from_properties(client, pprops, acks=acks, compression=compression, batch_size=1 << 30,
                                            linger_ms=1 << 30)
        as_json = args.output == "json"
        sent: list[tuple[str, int]] = []  # the partition of each record since the last flush, in order

        def flush() -> None:
            results = producer.flush()
            if as_json:
                _print_acks(sent, results)
            sent.clear()

        try:
            for raw in source:
                line = raw[:-1] if raw.endswith("\n") else raw
                if line.endswith("\r"):
                    line = line[:-1]
                try:
                    key, value, headers = parse_line(line, props)
                except UsageError:
                    if ignore_errors:
                        continue
                    raise
                # The partition is chosen here (as send would) so that each acknowledgement can be
                # matched with its record.
                partition = args.partition if args.partition is not None else producer.partition(args.topic, key)
                producer.send(args.topic, value, key=key, partition=partition, headers=headers)
                sent.append((args.topic, partition))
                if len(sent) >= batch:
                    flush()
            flush()
        finally:
            if source is not sys.stdin:
                source.close()
    return 0


def _print_acks(sent: list[tuple[str, int]], results: dict[tuple[str, int], tuple[int, int, str | None]]) -> None:
    """One JSON line per record: a partition's records got consecutive offsets from its batch's base offset
    (-1 when unknown, as with acks=0)."""
    index: dict[tuple[str, int], int] = {}
    for tp in sent:
        i = index.get(tp, 0)
        index[tp] = i + 1
        base = results[tp][1] if tp in results else -1
        print(json.dumps({"topic": tp[0], "partition": tp[1], "offset": base + i if base >= 0 else -1}))
    sys.stdout.flush()


# ------------------------------------------------------------------------------------------------
# Consumer


class Formatter:
    """Kafka's DefaultMessageFormatter: [timestamp] [partition] [offset] [headers] [key] value."""

    def __init__(self, props: dict[str, str]) -> None:
        self.print_key = truthy(props.get("print.key"))
        self.print_value = props.get("print.value", "true").lower() != "false"
        self.print_ts = truthy(props.get("print.timestamp"))
        self.print_headers = truthy(props.get("print.headers"))
        self.print_offset = truthy(props.get("print.offset"))
        self.print_partition = truthy(props.get("print.partition"))
        self.key_sep = unescape(props.get("key.separator", "\t"))
        self.line_sep = unescape(props.get("line.separator", "\n"))
        self.headers_sep = unescape(props.get("headers.separator", ","))
        self.null = props.get("null.literal", "null")

    def _text(self, b: bytes | None) -> str:
        return self.null if b is None else b.decode("utf-8", errors="replace")

    def format(self, partition: int, batch: Any, rec: Any) -> str:
        parts = []
        if self.print_ts:
            kind = "LogAppendTime" if batch.timestamp_type == 1 else "CreateTime"
            parts.append(f"{kind}:{rec.timestamp}")
        if self.print_partition:
            parts.append(f"Partition:{partition}")
        if self.print_offset:
            parts.append(f"Offset:{rec.offset}")
        if self.print_headers:
            parts.append(self.headers_sep.join(f"{k}:{self._text(v)}" for k, v in rec.headers)
                         if rec.headers else "NO_HEADERS")
        if self.print_key:
            parts.append(self._text(rec.key))
        if self.print_value:
            parts.append(self._text(rec.value))
        return self.key_sep.join(parts) + self.line_sep


class JsonFormatter:
    """One JSON object per record and line; keys, values and headers as UTF-8 text (null stays null)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    @staticmethod
    def _text(b: bytes | None) -> str | None:
        return None if b is None else b.decode("utf-8", errors="replace")

    def format(self, partition: int, batch: Any, rec: Any) -> str:
        return json.dumps({
            "topic": self.topic, "partition": partition, "offset": rec.offset, "timestamp": rec.timestamp,
            "timestampType": "LogAppendTime" if batch.timestamp_type == 1 else "CreateTime",
            "key": self._text(rec.key), "value": self._text(rec.value),
            "headers": [{"key": k, "value": self._text(v)} for k, v in rec.headers]}) + "\n"


def _start_offsets(client: WireClient, tps: list[tuple[str, int]], committed: dict[tuple[str, int], int],
                   reset: str, isolation: int) -> dict[tuple[str, int], int]:
    out = dict((tp, committed[tp]) for tp in tps if tp in committed)
    missing = [tp for tp in tps if tp not in out]
    if missing:
        out.update(_reset_offsets(client, missing, reset, isolation))
    return out


def _reset_offsets(client: WireClient, tps: list[tuple[str, int]], reset: str, isolation: int
                   ) -> dict[tuple[str, int], int]:
    """auto.offset.reset's position: latest is the last stable offset for read_committed, as in Kafka."""
    return client.list_offsets(tps, EARLIEST if reset == "earliest" else LATEST, isolation_level=isolation)


def run_consumer(args: argparse.Namespace) -> int:
    props = parse_props_args(args.property)
    cprops = load_properties(args.command_config)
    cprops.update(parse_kv(args.consumer_property, "consumer property"))
    if args.offset is not None and args.partition is None:
        raise UsageError("--offset needs --partition")
    if args.group and args.partition is not None:
        raise UsageError("--group cannot be combined with --partition")
    explicit: int | None = None
    if args.offset is not None:
        o = args.offset.strip().lower()
        if o in ("earliest", "latest"):
            explicit = EARLIEST if o == "earliest" else LATEST
        else:
            try:
                explicit = int(o)
            except ValueError:
                raise UsageError(f"invalid --offset {args.offset!r}: earliest, latest or a number") from None
            if explicit < 0:
                raise UsageError(f"invalid --offset {args.offset!r}: must not be negative")
    if args.max_messages is not None and args.max_messages < 0:
        raise UsageError("--max-messages must not be negative")
    isolation_name = args.isolation_level or cprops.get("isolation.level", "read_uncommitted").strip().lower()
    if isolation_name not in ISOLATION_LEVELS:
        raise UsageError(f"invalid isolation.level {isolation_name!r}: read_uncommitted or read_committed")
    isolation = ISOLATION_LEVELS[isolation_name]
    reset = "earliest" if args.from_beginning else cprops.get("auto.offset.reset", "latest")
    fmt: Formatter | JsonFormatter = JsonFormatter(args.topic) if args.output == "json" else Formatter(props)
    out = sys.stdout
    count = 0
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    old = signal.signal(signal.SIGTERM, on_term)
    with connect(args, client_id=cprops.get("client.id", "console-consumer")) as client:
        info = client.topic(args.topic)
        member: GroupMember | None = None
        if args.group:
            member = GroupMember(client, args.group, [args.topic],
                                 session_timeout_ms=int(cprops.get("session.timeout.ms", "10000")))
            assignment = member.join()
            tps = [(t, p) for t, ps in assignment.items() for p in ps]
            positions = _start_offsets(client, tps, client.committed_offsets(args.group, tps) if tps else {}, reset,
                                       isolation)
        elif args.partition is not None:
            if args.partition not in info.partitions:
                raise KafkaWireError(3, f"Partition {args.topic}-{args.partition} does not exist.")
            tp = (args.topic, args.partition)
            if explicit is None:
                positions = _start_offsets(client, [tp], {}, reset, isolation)
            elif explicit < 0:
                positions = client.list_offsets([tp], explicit, isolation_level=isolation)
            else:
                positions = {tp: explicit}
        else:
            tps = [(args.topic, p) for p in sorted(info.partitions)]
            positions = _start_offsets(client, tps, {}, reset, isolation)
        committed_at: dict[tuple[str, int], int] = {}
        last_commit = time.monotonic()
        last_record = time.monotonic()
        try:
            while not stop:
                if args.max_messages is not None and count >= args.max_messages:
                    break
                if args.timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= args.timeout_ms:
                    break
                if member is not None and not member.heartbeat():
                    _commit(member, positions, committed_at)
                    assignment = member.join()
                    tps = [(t, p) for t, ps in assignment.items() for p in ps]
                    positions = _start_offsets(client, tps, client.committed_offsets(args.group, tps) if tps else {},
                                               reset, isolation)
                if not positions:
                    time.sleep(0.2)
                    continue
                wait = 500
                if args.timeout_ms is not None:
                    wait = max(10, min(wait, args.timeout_ms - int((time.monotonic() - last_record) * 1000)))
                for tp, code, pd in client.fetch(positions, max_wait_ms=wait, isolation_level=isolation):
                    if code == 1:  # OFFSET_OUT_OF_RANGE: reset per auto.offset.reset
                        positions[tp] = _reset_offsets(client, [tp], reset, isolation)[tp]
                        continue
                    if code in (3, 5, 6):
                        continue
                    if code:
                        raise KafkaWireError(code, None, f"fetch {tp[0]}-{tp[1]}")
                    start = positions[tp]
                    aborted = aborted_of(pd) if isolation == READ_COMMITTED else None
                    for batch, rec in records_of(pd.records, start, aborted):
                        if args.max_messages is not None and count >= args.max_messages:
                            break
                        out.write(fmt.format(tp[1], batch, rec))
                        count += 1
                        positions[tp] = rec.offset + 1
                        last_record = time.monotonic()
                    else:
                        positions[tp] = max(positions[tp], next_offset_after(pd.records, start))
                out.flush()
                if member is not None and time.monotonic() - last_commit >= 5.0:
                    _commit(member, positions, committed_at)
                    last_commit = time.monotonic()
        finally:
            signal.signal(signal.SIGTERM, old)
            if member is not None:
                try:
                    _commit(member, positions, committed_at)
                finally:
                    member.leave()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _commit(member: GroupMember, positions: dict[tuple[str, int], int], done: dict[tuple[str, int], int]) -> None:
    todo = {tp: off for tp, off in positions.items() if done.get(tp) != off}
    if todo:
        try:
            member.commit(todo)
        except KafkaWireError as e:
            if e.code in (22, 25, 27):  # the group moved on; the next owner starts from the last commit
                return
            raise
        done.update(todo)
