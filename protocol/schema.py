"""Compile Apache Kafka's message JSON schemas into specialised encoders and decoders.

Kafka describes every request and response in a JSON schema (fields, types, the versions each field
exists in, nullability, tagged fields, flexible versions). The client library kafka-python ships
Kafka 4's schemas as package data. ``protocol/schemas/``, read first, holds the rest: the
inter-broker schemas kafka-python lacks (LeaderAndIsr, UpdateMetadata, StopReplica, AlterPartition,
Envelope, ...), the KIP-848 group APIs, the internal topics' key/value schemas (``__consumer_offsets``,
``__transaction_state``), and Kafka 3.9's schemas of the APIs whose old versions Kafka 4 dropped
(Produce v0-2, Fetch v0-3, ListOffsets v0, OffsetCommit/OffsetFetch v0, ...), which take the place of
kafka-python's. Rather than interpret a schema field by field for every message, we generate one
small Python function per (struct, version) the first time it is needed and ``exec`` it: the
generated code is straight ``struct.unpack_from`` / ``pack`` calls with no per-field dispatch, one
call per run of fixed-size fields (BENCHMARKS.md measures it against kafka-python's codec).

Decoded messages are instances of generated ``Struct`` subclasses with ``__slots__`` named after the
fields in snake_case (``TopicData`` -> ``topic_data``). Fields a version does not carry keep their
schema default, so handler code can read every field of every version. ``records`` fields decode to
a ``memoryview`` into the request buffer (zero copy) and encode from bytes, a memoryview, or a
``FileRegions`` list that the server hands to ``sendfile``; file regions and large in-memory records
are spliced into the ``Output`` as separate parts rather than copied.

Malformed input raises ``ProtocolError`` from ``MessageType.decode`` and nothing else.
"""

from __future__ import annotations

import importlib.resources
import json
import re
import struct
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.exceptions import ProtocolError
from protocol.varint import decode_unsigned_varint, encode_unsigned_varint

# ---------------------------------------------------------------------------------------------
# Schema loading


_COMMENT = re.compile(r"(?m)^\s*//.*$")
_OUR_SCHEMAS = Path(__file__).with_name("schemas")
_VERSIONS_RE = re.compile(r"^(\d+)(?:(\+)|-(\d+))?$")


def _load_json_text(text: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_COMMENT.sub("", text))
    return doc


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The JSON schema of message ``name`` (e.g. ``"ProduceRequest"``), ours first, then Kafka's."""
    ours = _OUR_SCHEMAS / f"{name}.json"
    if ours.exists():
        return _load_json_text(ours.read_text())
    try:
        text = importlib.resources.files("kafka.protocol.schemas.resources").joinpath(f"{name}.json").read_text()
    except FileNotFoundError:
        raise KeyError(f"no schema for message {name!r}") from None
    return _load_json_text(text)


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """'3+' -> (3, 32767); '1-4' -> (1, 4); '2' -> (2, 2); 'none'/None -> None."""
    if spec is None or spec == "none":
        return None
    m = _VERSIONS_RE.match(spec.strip())
    if not m:
        raise ValueError(f"bad version range {spec!r}")
    lo = int(m.group(1))
    if m.group(2):
        return lo, 0x7FFF
    if m.group(3):
        return lo, int(m.group(3))
    return lo, lo


def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


in_versions = _in  # for the compiled codec's glue (protocol/compiled_wire.py)


_SNAKE1 = re.compile(r"(.)([A-Z][a-z]+)")
_SNAKE2 = re.compile(r"([a-z0-9])([A-Z])")


def snake(name: str) -> str:
    """Kafka's CamelCase field names in Python style: ``IsrNodes`` -> ``isr_nodes``."""
    return _SNAKE2.sub(r"\1_\2", _SNAKE1.sub(r"\1_\2", name)).lower()


# ---------------------------------------------------------------------------------------------
# The field model


_SCALARS = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
}
ZERO_UUID = uuid.UUID(int=0)


@dataclass
class FieldSpec:
    name: str  # python attribute name
    json_name: str
    type: str  # scalar name, 'string', 'bytes', 'records', 'uuid', 'bool', 'struct' or 'array'
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None
    tagged: tuple[int, int] | None
    tag: int | None
    default_spec: Any
    item: FieldSpec | None = None  # for arrays: element type
    struct: StructSpec | None = None  # for structs and arrays of structs
    zero_copy: bool = False


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec] = field(default_factory=list)
    cls: type[Struct] | None = None


class Struct:
    """Base of every generated message class: slots, equality, repr and dict conversion."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    if TYPE_CHECKING:
        # The fields are generated from Kafka's JSON schemas at import time; to a type checker every
        # field is Any, and an unknown name fails in tests instead.
        def __getattr__(self, name: str) -> Any: ...

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            if isinstance(v, memoryview):
                return bytes(v)
            return v

        return {f: conv(getattr(self, f)) for f in self._fields}


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


_MISSING = _Missing()
MISSING = _MISSING  # "no default given": the field's default is a fresh instance of its struct


def _parse_default(ftype: str, spec: Any, nullable_somewhere: bool) -> Any:
    """A field's default value, as Kafka's generator derives it."""
    if spec == "null":
        return None
    if ftype.startswith("[]"):
        return []  # arrays default to empty (a fresh list per instance, see _make_struct_class)
    if ftype in _SCALARS:
        return float(spec) if ftype == "float64" and spec is not None else (int(str(spec), 0) if spec is not None else 0)
    if ftype == "bool":
        return str(spec).lower() == "true" if spec is not None else False
    if ftype == "string":
        return spec if spec is not None else ""
    if ftype == "bytes":
        return b""
    if ftype == "records":
        return None
    if ftype == "uuid":
        return ZERO_UUID
    return _MISSING  # struct: a default-constructed instance


def _build_struct(name: str, fields_json: list[dict[str, Any]], common: dict[str, list[dict[str, Any]]],
                  namespace: str, registry: dict[str, StructSpec]) -> StructSpec:
    spec = StructSpec(name=name)
    registry[name] = spec
    for fj in fields_json:
        ftype = fj["type"]
        nullable = parse_versions(fj.get("nullableVersions"))
        fs = FieldSpec(
            name=snake(fj["name"]),
            json_name=fj["name"],
            type="",
            versions=parse_versions(fj.get("versions")),
            nullable=nullable,
            tagged=parse_versions(fj.get("taggedVersions")),
            tag=fj.get("tag"),
            default_spec=_parse_default(ftype, fj.get("default"), nullable is not None),
            zero_copy=bool(fj.get("zeroCopy")),
        )
        if ftype.startswith("[]"):
            fs.type = "array"
            inner = ftype[2:]
            if inner[:1].isupper():
                sub = fj.get("fields", common.get(inner))
                if sub is None:
                    raise KeyError(f"{namespace}: unknown struct type {inner}")
                st = registry.get(inner) or _build_struct(inner, sub, common, namespace, registry)
                fs.item = FieldSpec(inner, inner, "struct", fs.versions, None, None, None, _MISSING, struct=st)
            else:
                fs.item = FieldSpec(inner, inner, inner, fs.versions, None, None, None, None)
        elif ftype[:1].isupper():
            fs.type = "struct"
            sub = fj.get("fields", common.get(ftype))
            if sub is None:
                raise KeyError(f"{namespace}: unknown struct type {ftype}")
            fs.struct = registry.get(ftype) or _build_struct(ftype, sub, common, namespace, registry)
        else:
            fs.type = ftype
        spec.fields.append(fs)
    return spec


def _make_struct_class(spec: StructSpec, qualname: str) -> type[Struct]:
    names = tuple(f.name for f in spec.fields)
    args: list[str] = []
    body: list[str] = []
    env: dict[str, object] = {"_MISSING": _MISSING}
    for i, f in enumerate(spec.fields):
        d = f.default_spec
        if f.type == "array" and d == []:
            args.append(f"{f.name}=_MISSING")
            body.append(f"    self.{f.name} = [] if {f.name} is _MISSING else {f.name}")
        elif f.type == "struct" and d is _MISSING:
            env[f"_S{i}"] = f.struct
            args.append(f"{f.name}=_MISSING")
            body.append(f"    self.{f.name} = _S{i}.cls() if {f.name} is _MISSING else {f.name}")
        else:
            env[f"_D{i}"] = d
            args.append(f"{f.name}=_D{i}")
            body.append(f"    self.{f.name} = {f.name}")
    src = f"def __init__(self, {', '.join(args)}):\n" + ("\n".join(body) or "    pass") + "\n"
    if not names:
        src = "def __init__(self):\n    pass\n"
    exec(src, env)  # noqa: S102 - generated from the schema, not from input
    cls = type(spec.name, (Struct,), {"__slots__": names, "_fields": names, "__init__": env["__init__"],
                                      "__qualname__": qualname})
    return cls


# ---------------------------------------------------------------------------------------------
# Runtime helpers the generated code calls


_u = struct.unpack_from
_S_I32 = struct.Struct(">i")


# Compact lengths and tagged fields use unsigned varints; protocol/varint.py has the one decoder and
# encoder (Java's semantics: at most 5 bytes, high bits of the 5th dropped as ByteUtils does).
read_uvarint = decode_unsigned_varint
uvarint_bytes = encode_unsigned_varint


def write_uvarint(out: bytearray, value: int) -> None:
    out += encode_unsigned_varint(value)


class FileRegion:
    """``length`` bytes of the open file ``fd`` starting at ``position``: sent with ``sendfile``.

    ``pin`` (any object with ``release()``) keeps ``fd`` open until the region is written: storage
    closes a segment's descriptor only once every region read from it has been released, so a
    response waiting in a socket buffer never sends from a closed or reused descriptor. The writer
    calls :meth:`release` after the bytes are sent or when the connection dies; releasing twice is
    harmless. Unpacks like the tuple ``(fd, position, length)``.
    """

    __slots__ = ("fd", "position", "length", "pin")

    def __init__(self, fd: int, position: int, length: int, pin: Any = None) -> None:
        self.fd = fd
        self.position = position
        self.length = length
        self.pin = pin

    def release(self) -> None:
        pin, self.pin = self.pin, None
        if pin is not None:
            pin.release()

    def __iter__(self) -> Iterator[int]:
        return iter((self.fd, self.position, self.length))

    def __getitem__(self, i: int) -> int:
        return (self.fd, self.position, self.length)[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FileRegion):
            return (self.fd, self.position, self.length) == (other.fd, other.position, other.length)
        if isinstance(other, tuple):
            return (self.fd, self.position, self.length) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.fd, self.position, self.length))

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, position={self.position}, length={self.length})"


class FileRegions(list):  # type: ignore[type-arg]
    """A records value made of file regions (and possibly in-memory chunks) rather than bytes."""

    @property
    def size(self) -> int:
        n = 0
        for r in self:
            n += r.length if type(r) is FileRegion else len(r)
        return n


class Output(bytearray):
    """Encoder output: bytes, plus chunks spliced in at recorded positions rather than copied.

    Spliced chunks are ``FileRegions`` (sent with ``sendfile``) and large in-memory record sets
    (sent straight from the caller's buffer); the caller must leave them unchanged until written.
    """

    def __init__(self) -> None:
        super().__init__()
        self.splices: list[tuple[int, Sequence[bytes | memoryview | FileRegion]]] = []
        self.spliced_size = 0

    def splice(self, chunks: Sequence[bytes | memoryview | FileRegion], size: int) -> None:
        self.splices.append((len(self), chunks))
        self.spliced_size += size

    def parts(self) -> list[bytes | memoryview | FileRegion]:
        """The message as a list of byte chunks and ``FileRegion``s, in wire order."""
        if not self.splices:
            return [bytes(self)]
        view = memoryview(self)
        out: list[bytes | memoryview | FileRegion] = []
        last = 0
        for at, chunks in self.splices:
            if at > last:
                out.append(view[last:at])
            out.extend(chunks)
            last = at
        if last < len(self):
            out.append(view[last:])
        return out

    @property
    def total_size(self) -> int:
        return len(self) + self.spliced_size

    def to_bytes(self) -> bytes:
        """The whole message as bytes; ValueError if it holds file regions."""
        if not self.splices:
            return bytes(self)
        parts = self.parts()
        if any(isinstance(p, FileRegion) for p in parts):
            raise ValueError("message holds file regions; use encode_into and Output.parts()")
        return b"".join(parts)  # type: ignore[arg-type]


# In-memory records at least this large are spliced into the output, not copied into it.
SPLICE_MIN = 4096


def _put_records(out: Output, value: Any, compact: bool, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise ValueError("records field is not nullable in this version")
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
        return
    if isinstance(value, FileRegions):
        n = value.size
        chunks: Sequence[Any] | None = value
    else:
        n = value.nbytes if type(value) is memoryview else len(value)
        chunks = (value,) if n >= SPLICE_MIN else None
    if compact:
        write_uvarint(out, n + 1)
    else:
        out += _S_I32.pack(n)
    if chunks is None:
        out += value
    else:
        out.splices.append((len(out), chunks))
        out.spliced_size += n


def skip_tagged_fields(buf: Any, pos: int) -> int:
    """Skip a tagged-field section (count, then tag/size/bytes per field); the new position."""
    n, pos = read_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise ProtocolError("tagged field runs past the end of the message")
    return pos


_HELPERS: dict[str, Any] = {
    "_u": _u, "read_uvarint": read_uvarint, "write_uvarint": write_uvarint, "_skip_tags": skip_tagged_fields,
    "_put_records": _put_records, "ProtocolError": ProtocolError, "UUID": uuid.UUID, "ZERO_UUID": ZERO_UUID,
    "_Z16": bytes(16), "Output": Output, "struct_pack": struct.pack, "_new": object.__new__,
}

# Fixed-size types and their struct codes. Runs of consecutive fixed-size fields decode with one
# unpack_from and encode with one pack ('?' reads any non-zero byte as True, as Kafka does).
_FIXED = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q", "float64": "d",
          "bool": "?"}


_SMALL = 64


@cache
def _array_structs(code: str) -> list[struct.Struct]:
    # Formatting '>%di' % n and looking it up in struct's cache costs more than the unpack itself.
    return [struct.Struct(f">{n}{code}") for n in range(_SMALL)]


# ---------------------------------------------------------------------------------------------
# Code generation


class _Gen:
    """Generates decode/encode functions for the structs of one message at one version.

    Decoders index the buffer directly and let ``struct.error``/``IndexError`` signal a short
    buffer; ``MessageType.decode`` turns those into ``ProtocolError``. Lengths are checked before
    slicing, so a lying length never reads past the buffer silently.
    """

    def __init__(self, message: str, version: int, flexible: bool) -> None:
        self.message = message
        self.version = version
        self.flexible = flexible
        self.env: dict[str, Any] = dict(_HELPERS)
        self.sources: list[str] = []
        self.done: set[str] = set()
        self.n = 0

    def tmp(self) -> str:
        self.n += 1
        return f"_t{self.n}"

    def packer(self, codes: str) -> str:
        """Name of a module-level ``struct.Struct`` for big-endian ``codes``."""
        name = "_P_" + codes.replace("?", "o")
        if name not in self.env:
            self.env[name] = struct.Struct(">" + codes)
        return name

    def array_unpacker(self, code: str) -> str:
        """Name of a list of ``struct.Struct`` for arrays of 0.._SMALL-1 elements of ``code``."""
        name = "_A_" + code.replace("?", "o")
        if name not in self.env:
            self.env[name] = _array_structs(code)
        return name

    # -- decoding -------------------------------------------------------------------------------

    def read_uvarint(self, p: str, var: str, lines: list[str]) -> None:
        """Inline the one-byte case of an unsigned varint; longer ones go through read_uvarint."""
        lines.append(f"{p}{var} = buf[pos]")
        lines.append(f"{p}if {var} < 128:")
        lines.append(f"{p}    pos += 1")
        lines.append(f"{p}else:")
        lines.append(f"{p}    {var}, pos = read_uvarint(buf, pos)")

    def read_length(self, p: str, kind: str, lines: list[str]) -> None:
        """Set ``n`` to a string/bytes/array length, negative for null."""
        if self.flexible:
            self.read_uvarint(p, "n", lines)
            lines.append(f"{p}n -= 1")
        elif kind == "string":
            lines.append(f"{p}n, = {self.packer('h')}.unpack_from(buf, pos); pos += 2")
        else:
            lines.append(f"{p}n, = {self.packer('i')}.unpack_from(buf, pos); pos += 4")

    def dec_fn(self, spec: StructSpec) -> str:
        fname = f"dec_{spec.name}"
        if fname in self.done:
            return fname
        self.done.add(fname)
        v = self.version
        # Decode straight into the slots of a bare instance: cheaper than calling __init__.
        self.env[f"_C_{spec.name}"] = spec.cls
        lines = [f"def {fname}(buf, pos):", f"    o = _new(_C_{spec.name})"]
        present = [f for f in spec.fields if _in(f.versions, v) and not _in(f.tagged, v)]
        tagged = [f for f in spec.fields if _in(f.versions, v) and _in(f.tagged, v)]
        run: list[FieldSpec] = []

        def flush() -> None:
            if run:
                codes = "".join(_FIXED[f.type] for f in run)
                names = ", ".join(f"o.{f.name}" for f in run)
                size = struct.calcsize(">" + codes)
                lines.append(f"    {names}, = {self.packer(codes)}.unpack_from(buf, pos); pos += {size}")
                run.clear()

        for f in present:
            if f.type in _FIXED:
                run.append(f)
                continue
            flush()
            self.dec_value(f, f"o.{f.name}", lines, 1, nullable=_in(f.nullable, v))
        flush()
        # Fields this version does not carry (and tagged ones until seen) get their defaults.
        wired = {f.name for f in present}
        for f in spec.fields:
            if f.name in wired:
                continue
            sub = f.struct
            if f.type == "struct" and f.default_spec is _MISSING and sub is not None and all(
                    g.type not in ("struct", "array") for g in sub.fields):
                # a default instance of a flat struct, built in line
                self.env[f"_C_{sub.name}"] = sub.cls
                sets = "".join(f" _d.{g.name} = {self.default_expr(sub, g)};" for g in sub.fields)
                lines.append(f"    _d = _new(_C_{sub.name});{sets} o.{f.name} = _d")
            else:
                lines.append(f"    o.{f.name} = {self.default_expr(spec, f)}")
        if self.flexible:
            lines.append("    if buf[pos] == 0:")
            lines.append("        pos += 1")
            lines.append("    else:")
            if not tagged:
                lines.append("        pos = _skip_tags(buf, pos)")
            else:
                lines.append("        ntag, pos = read_uvarint(buf, pos)")
                lines.append("        for _ in range(ntag):")
                lines.append("            tag, pos = read_uvarint(buf, pos)")
                lines.append("            size, pos = read_uvarint(buf, pos)")
                lines.append("            tend = pos + size")
                lines.append("            if tend > len(buf):")
                lines.append("                raise ProtocolError('tagged field runs past the end of the message')")
                for i, f in enumerate(tagged):
                    lines.append(f"            {'if' if i == 0 else 'elif'} tag == {f.tag}:")
                    self.dec_value(f, f"o.{f.name}", lines, 4, nullable=_in(f.nullable, v))
                    lines.append("                if pos != tend:")
                    lines.append("                    raise ProtocolError('tagged field size does not match its content')")
                lines.append("            else:")
                lines.append("                pos = tend")
        lines.append("    return o, pos")
        self.sources.append("\n".join(lines))
        return fname

    def default_expr(self, spec: StructSpec, f: FieldSpec) -> str:
        """Source of a field's default value; mutable defaults are made fresh for each message."""
        if f.type == "struct" and f.default_spec is _MISSING:
            self.env[f"_SC_{f.struct.name}"] = f.struct.cls  # type: ignore[union-attr]
            return f"_SC_{f.struct.name}()"  # type: ignore[union-attr]
        if f.type == "array" and f.default_spec == []:
            return "[]"
        name = f"_FD_{spec.name}_{f.name}"
        self.env[name] = f.default_spec
        return name

    def dec_value(self, f: FieldSpec, var: str, lines: list[str], ind: int, nullable: bool) -> None:
        p = "    " * ind
        t = f.type
        if t in _FIXED:
            code = _FIXED[t]
            lines.append(f"{p}{var}, = {self.packer(code)}.unpack_from(buf, pos); pos += {struct.calcsize(code)}")
        elif t == "uuid":
            lines.append(f"{p}{var} = bytes(buf[pos:pos + 16]); pos += 16")
            lines.append(f"{p}if len({var}) != 16: raise ProtocolError('uuid runs past the end of the message')")
            lines.append(f"{p}{var} = ZERO_UUID if {var} == _Z16 else UUID(bytes={var})")
        elif t in ("string", "bytes", "records"):
            self.read_length(p, t, lines)
            lines.append(f"{p}if n < 0:")
            if nullable:
                lines.append(f"{p}    {var} = None")
            else:
                lines.append(f"{p}    raise ProtocolError('non-nullable field {f.json_name} is null')")
            lines.append(f"{p}else:")
            lines.append(f"{p}    end = pos + n")
            lines.append(f"{p}    if end > len(buf):")
            lines.append(f"{p}        raise ProtocolError('{f.json_name} runs past the end of the message')")
            if t == "string":
                lines.append(f"{p}    {var} = str(buf[pos:end], 'utf-8'); pos = end")
            elif t == "bytes" and not f.zero_copy:
                lines.append(f"{p}    {var} = bytes(buf[pos:end]); pos = end")
            else:  # records (and zero-copy bytes) stay a view into the buffer
                lines.append(f"{p}    {var} = buf[pos:end]; pos = end")
        elif t == "struct":
            fn = self.dec_fn(f.struct)  # type: ignore[arg-type]
            if nullable:
                lines.append(f"{p}if buf[pos] > 127:")  # int8 -1: null
                lines.append(f"{p}    {var} = None; pos += 1")
                lines.append(f"{p}else:")
                lines.append(f"{p}    {var}, pos = {fn}(buf, pos + 1)")
            else:
                lines.append(f"{p}{var}, pos = {fn}(buf, pos)")
        elif t == "array":
            self.read_length(p, t, lines)
            lines.append(f"{p}if n < 0:")
            if nullable:
                lines.append(f"{p}    {var} = None")
            else:
                lines.append(f"{p}    raise ProtocolError('non-nullable array {f.json_name} is null')")
            lines.append(f"{p}else:")
            # Every element takes at least one byte on the wire; refusing counts above the remaining
            # size stops a tiny frame from claiming billions of elements.
            lines.append(f"{p}    if n > len(buf) - pos:")
            lines.append(f"{p}        raise ProtocolError('array {f.json_name} claims more elements than bytes left')")
            item = f.item
            assert item is not None
            if item.type in _FIXED:
                code = _FIXED[item.type]
                unpack = self.array_unpacker(code)
                lines.append(f"{p}    {var} = list({unpack}[n].unpack_from(buf, pos)) if n < {_SMALL} else "
                             f"list(_u('>%d{code}' % n, buf, pos)); pos += n * {struct.calcsize(code)}")
            elif item.type == "struct":
                fn = self.dec_fn(item.struct)  # type: ignore[arg-type]
                lines.append(f"{p}    {var} = []")
                lines.append(f"{p}    _app = {var}.append")
                lines.append(f"{p}    for _ in range(n):")
                lines.append(f"{p}        _e, pos = {fn}(buf, pos)")
                lines.append(f"{p}        _app(_e)")
            else:
                lines.append(f"{p}    {var} = []")
                lines.append(f"{p}    _app = {var}.append")
                lines.append(f"{p}    for _ in range(n):")
                self.dec_value(item, "_e", lines, ind + 2, nullable=False)
                lines.append(f"{p}        _app(_e)")
        else:
            raise ValueError(f"unsupported type {t}")

    # -- encoding -------------------------------------------------------------------------------

    def enc_fn(self, spec: StructSpec) -> str:
        fname = f"enc_{spec.name}"
        if fname in self.done:
            return fname
        self.done.add(fname)
        v = self.version
        lines = [f"def {fname}(o, out):"]
        run: list[FieldSpec] = []

        def flush() -> None:
            if run:
                codes = "".join(_FIXED[f.type] for f in run)
                lines.append(f"    out += {self.packer(codes)}.pack({', '.join(f'o.{f.name}' for f in run)})")
                run.clear()

        for f in spec.fields:
            if _in(f.versions, v) and not _in(f.tagged, v):
                if f.type in _FIXED:
                    run.append(f)
                    continue
                flush()
                self.enc_value(f, f"o.{f.name}", lines, 1, nullable=_in(f.nullable, v))
        flush()
        if self.flexible:
            tagged = sorted((f for f in spec.fields if _in(f.versions, v) and _in(f.tagged, v)),
                            key=lambda f: f.tag or 0)
            if not tagged:
                lines.append("    out.append(0)")
            else:
                lines.append("    tags = []")
                for f in tagged:
                    if f.type == "records":  # spliced chunks cannot live inside a tagged field
                        raise ValueError(f"{self.message}: tagged records field {f.json_name} is not supported")
                    lines.append(f"    if {self.nondefault_cond(spec, f, f'o.{f.name}')}:")
                    lines.append("        sub = Output()")
                    self.enc_value(f, f"o.{f.name}", lines, 2, nullable=_in(f.nullable, v), out="sub")
                    lines.append(f"        tags.append(({f.tag}, sub))")
                lines.append("    if tags:")
                lines.append("        write_uvarint(out, len(tags))")
                lines.append("        for tag, sub in tags:")
                lines.append("            write_uvarint(out, tag); write_uvarint(out, len(sub)); out += sub")
                lines.append("    else:")
                lines.append("        out.append(0)")
        if len(lines) == 1:
            lines.append("    pass")
        self.sources.append("\n".join(lines))
        return fname

    def nondefault_cond(self, spec: StructSpec, f: FieldSpec, expr: str) -> str:
        """Source of a test that ``expr`` (field ``f`` of ``spec``) differs from the field's default.

        Tagged fields at their default are left off the wire, as Kafka does; structs compare field by
        field with a generated function rather than by building a default instance each time.
        """
        if f.type == "struct":
            if f.default_spec is None:  # a struct defaulting to null
                return f"{expr} is not None"
            sub = f.struct
            assert sub is not None
            if all(g.type not in ("struct", "array") for g in sub.fields):  # flat: test inline
                conds = " or ".join(self.nondefault_cond(sub, g, f"_v.{g.name}") for g in sub.fields) or "False"
                return f"((_v := {expr}) is not None and ({conds}))"
            return f"({expr} is not None and {self.nondefault_fn(sub)}({expr}))"
        if f.type == "array":
            return expr if f.default_spec == [] else f"{expr} is not None"
        name = f"_FD_{spec.name}_{f.name}"
        self.env[name] = f.default_spec
        if f.type == "uuid":  # None encodes as the zero uuid
            return f"({expr} or ZERO_UUID) != {name}"
        return f"{expr} != {name}"

    def nondefault_fn(self, spec: StructSpec) -> str:
        fname = f"nondefault_{spec.name}"
        if fname not in self.done:
            self.done.add(fname)
            conds = [self.nondefault_cond(spec, f, f"o.{f.name}") for f in spec.fields]
            self.sources.append(f"def {fname}(o):\n    return {' or '.join(conds) or 'False'}")
        return fname

    def write_length(self, p: str, n: str, kind: str, lines: list[str], out: str) -> None:
        """Write the length expression ``n`` (not null) as a compact or classic length."""
        if self.flexible:
            lines.append(f"{p}_n = {n} + 1")
            lines.append(f"{p}{out}.append(_n) if _n < 128 else write_uvarint({out}, _n)")
        elif kind == "string":
            lines.append(f"{p}{out} += {self.packer('h')}.pack({n})")
        else:
            lines.append(f"{p}{out} += {self.packer('i')}.pack({n})")

    def enc_value(self, f: FieldSpec, expr: str, lines: list[str], ind: int, nullable: bool,
                  out: str = "out") -> None:
        p = "    " * ind
        t = f.type
        flex = self.flexible
        if t in _FIXED:
            lines.append(f"{p}{out} += {self.packer(_FIXED[t])}.pack({expr})")
        elif t == "uuid":
            lines.append(f"{p}{out} += ({expr} or ZERO_UUID).bytes")
        elif t in ("string", "bytes"):
            tv = self.tmp()
            lines.append(f"{p}{tv} = {expr}")
            lines.append(f"{p}if {tv} is None:")
            if nullable:
                lines.append(f"{p}    {out} += {_null16(flex) if t == 'string' else _null32(flex)}")
            else:
                lines.append(f"{p}    raise ValueError('{f.json_name} is not nullable')")
            lines.append(f"{p}else:")
            if t == "string":
                lines.append(f"{p}    {tv} = {tv}.encode('utf-8')")
            self.write_length(p + "    ", f"len({tv})", t, lines, out)
            lines.append(f"{p}    {out} += {tv}")
        elif t == "records":
            lines.append(f"{p}_put_records({out}, {expr}, {flex}, {nullable})")
        elif t == "struct":
            fn = self.enc_fn(f.struct)  # type: ignore[arg-type]
            if nullable:
                tv = self.tmp()
                lines.append(f"{p}{tv} = {expr}")
                lines.append(f"{p}if {tv} is None:")
                lines.append(f"{p}    {out}.append(255)")
                lines.append(f"{p}else:")
                lines.append(f"{p}    {out}.append(1)")
                lines.append(f"{p}    {fn}({tv}, {out})")
            else:
                lines.append(f"{p}{fn}({expr}, {out})")
        elif t == "array":
            tv = self.tmp()
            lines.append(f"{p}{tv} = {expr}")
            lines.append(f"{p}if {tv} is None:")
            if nullable:
                lines.append(f"{p}    {out} += {_null32(flex)}")
            else:
                lines.append(f"{p}    raise ValueError('{f.json_name} is not nullable')")
            lines.append(f"{p}else:")
            self.write_length(p + "    ", f"len({tv})", t, lines, out)
            item = f.item
            assert item is not None
            if item.type in _FIXED:
                code = _FIXED[item.type]
                packs = self.array_unpacker(code)
                lines.append(f"{p}    {out} += {packs}[len({tv})].pack(*{tv}) if len({tv}) < {_SMALL} else "
                             f"struct_pack('>%d{code}' % len({tv}), *{tv})")
            elif item.type == "struct":
                fn = self.enc_fn(item.struct)  # type: ignore[arg-type]
                ev = self.tmp()
                lines.append(f"{p}    for {ev} in {tv}:")
                lines.append(f"{p}        {fn}({ev}, {out})")
            else:
                ev = self.tmp()
                lines.append(f"{p}    for {ev} in {tv}:")
                self.enc_value(item, ev, lines, ind + 2, nullable=False, out=out)
        else:
            raise ValueError(f"unsupported type {t}")


def _null16(flex: bool) -> str:
    """Source text of a null string: compact length 0, or classic int16 -1."""
    return "b'\\x00'" if flex else "b'\\xff\\xff'"


def _null32(flex: bool) -> str:
    """Source text of a null bytes/array: compact length 0, or classic int32 -1."""
    return "b'\\x00'" if flex else "b'\\xff\\xff\\xff\\xff'"


# ---------------------------------------------------------------------------------------------
# Public message types


class MessageType:
    """One request or response schema, with lazily compiled codecs per version."""

    def __init__(self, name: str) -> None:
        data = load_schema(name)
        self.name = name
        self.api_key: int | None = data.get("apiKey")
        self.kind: str = data["type"]  # 'request', 'response', 'header' or 'data'
        valid = parse_versions(data.get("validVersions"))
        assert valid is not None
        self.valid_versions = valid
        self.flexible_versions = parse_versions(data.get("flexibleVersions"))
        common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
        registry: dict[str, StructSpec] = {}
        self.root = _build_struct(name, data.get("fields", []), common, name, registry)
        self.structs = registry
        for sname, spec in registry.items():
            spec.cls = _make_struct_class(spec, f"{name}.{sname}" if sname != name else name)
            if sname != name:
                setattr(self, sname, spec.cls)
        self.cls: type[Struct] = self.root.cls  # type: ignore[assignment]
        self._decoders: dict[int, Callable[[Any, int], tuple[Struct, int]]] = {}
        self._encoders: dict[int, Callable[[Struct, Output], None]] = {}
        self._sources: dict[int, str] = {}

    def __call__(self, **kwargs: Any) -> Struct:
        return self.cls(**kwargs)

    if TYPE_CHECKING:
        # Nested struct classes (``MetadataResponse.MetadataResponseTopic``) are set per schema.
        def __getattr__(self, name: str) -> Any: ...

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible_versions, version)

    def _compile(self, version: int) -> None:
        if not self.valid_versions[0] <= version <= self.valid_versions[1]:
            raise ValueError(f"{self.name} has no version {version}")
        gen = _Gen(self.name, version, self.is_flexible(version))
        dec = gen.dec_fn(self.root)
        enc = gen.enc_fn(self.root)
        src = "\n\n".join(gen.sources) + "\n"
        code = compile(src, f"<kafkette {self.name} v{version}>", "exec")
        exec(code, gen.env)  # noqa: S102 - generated from the schema, not from input
        self._decoders[version] = gen.env[dec]
        self._encoders[version] = gen.env[enc]
        self._sources[version] = src

    def decoder(self, version: int) -> Callable[[Any, int], tuple[Struct, int]]:
        fn = self._decoders.get(version)
        if fn is None:
            self._compile(version)
            fn = self._decoders[version]
        return fn

    def encoder(self, version: int) -> Callable[[Struct, Output], None]:
        fn = self._encoders.get(version)
        if fn is None:
            self._compile(version)
            fn = self._encoders[version]
        return fn

    def source(self, version: int) -> str:
        """The generated Python source for ``version`` (for debugging and docs)."""
        self.decoder(version)
        return self._sources[version]

    def decode(self, buf: Any, version: int, pos: int = 0, *, exact: bool = True) -> tuple[Struct, int]:
        """Decode a message body at ``pos``. With ``exact``, trailing bytes are a ProtocolError."""
        fn = self.decoder(version)
        try:
            msg, end = fn(buf, pos)
        except ProtocolError:
            raise
        except (struct.error, IndexError, ValueError, UnicodeDecodeError, OverflowError, TypeError) as e:
            raise ProtocolError(f"malformed {self.name} v{version}: {e}") from None
        if exact and end != len(buf):
            raise ProtocolError(f"{len(buf) - end} trailing bytes after {self.name} v{version}")
        return msg, end

    def encode_into(self, msg: Struct, version: int, out: Output) -> None:
        self.encoder(version)(msg, out)

    def encode(self, msg: Struct, version: int) -> bytes:
        """Encode to bytes (file-region records are not allowed here; use encode_into)."""
        out = Output()
        self.encoder(version)(msg, out)
        return out.to_bytes()

    def __repr__(self) -> str:
        return f"<MessageType {self.name} v{self.valid_versions[0]}-{self.valid_versions[1]}>"


@cache
def message_type(name: str) -> MessageType:
    return MessageType(name)


def iter_struct_specs(spec: StructSpec) -> Iterator[StructSpec]:
    yield spec
    for f in spec.fields:
        sub = f.struct or (f.item.struct if f.item else None)
        if sub is not None and sub is not spec:
            yield from iter_struct_specs(sub)


# ---------------------------------------------------------------------------------------------
# Version-prefixed records (the keys and values of __consumer_offsets and __transaction_state)


def encode_versioned(mt: MessageType, msg: Struct, version: int) -> bytes:
    """An int16 version followed by ``msg`` encoded at that version."""
    return struct.pack(">h", version) + mt.encode(msg, version)


def record_version(buf: Any) -> int:
    if len(buf) < 2:
        raise ProtocolError("record shorter than its version prefix")
    version: int = struct.unpack_from(">h", buf, 0)[0]
    return version


def decode_versioned(mt: MessageType, buf: Any, version: int | None = None) -> tuple[int, Struct]:
    """(version, message) of a version-prefixed record. Bytes after the last field are ignored, as
    Kafka's readers ignore them (newer writers may append fields)."""
    if version is None:
        version = record_version(buf)
    lo, hi = mt.valid_versions
    if not lo <= version <= hi:
        raise ProtocolError(f"unknown {mt.name} version {version}")
    msg, _ = mt.decode(memoryview(buf), version, 2, exact=False)
    return version, msg
