"""ZooKeeper's multiRead (opcode 22, ZooKeeper 3.6+): many getData reads in one request.

kazoo writes one request and reads one response per turn of its connection loop, so 10,000 pipelined
``get_async`` calls still cost 10,000 turns of Python (seconds on a busy interpreter). A multiRead
carries a chunk of getData operations in one request and one response; unlike a write multi it is not
atomic: every operation answers on its own, a missing znode with its error.

kazoo has no multiRead, so this module supplies the request object its connection handler sends
(``type``, ``serialize``, ``deserialize`` are all the handler needs). The caller submits it through
``KazooClient._call`` as kazoo's own ``*_async`` methods do.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from kazoo.exceptions import EXCEPTIONS
from kazoo.protocol.states import ZnodeStat

MULTI_READ_OPCODE = 22
GET_DATA_OPCODE = 4
ERROR_OPCODE = -1

_INT = struct.Struct("!i")
_MULTI_HEADER = struct.Struct("!iBi")  # type, done, err
_STAT = struct.Struct("!qqqqiiiqiiq")

# A request stays far below ZooKeeper's jute.maxbuffer (1 MiB by default), which the server enforces
# on what it reads; the responses of partition-state znodes are a few hundred bytes each.
MAX_REQUEST_BYTES = 256 * 1024

GetDataResult = tuple[bytes, ZnodeStat] | Exception


class _MultiReadFields(NamedTuple):
    paths: tuple[str, ...]


class MultiRead(_MultiReadFields):
    """getData of every path (already chrooted), no watches."""

    __slots__ = ()
    # The opcode kazoo's handler writes in the request header: a class attribute, as on kazoo's own
    # request tuples (a NamedTuple body may only declare fields, hence the base class above).
    type = MULTI_READ_OPCODE

    def serialize(self) -> bytearray:
        b = bytearray()
        op_header = _MULTI_HEADER.pack(GET_DATA_OPCODE, 0, -1)
        for path in self.paths:
            raw = path.encode("utf-8")
            b += op_header
            b += _INT.pack(len(raw))
            b += raw
            b.append(0)  # watch: false
        b += _MULTI_HEADER.pack(-1, 1, -1)
        return b

    @classmethod
    def deserialize(cls, buf: bytes | memoryview, offset: int) -> list[GetDataResult]:
        results: list[GetDataResult] = []
        while True:
            op_type, done, err = _MULTI_HEADER.unpack_from(buf, offset)
            offset += _MULTI_HEADER.size
            if done:
                return results
            if op_type == GET_DATA_OPCODE:
                (length,) = _INT.unpack_from(buf, offset)
                offset += _INT.size
                data = b"" if length < 0 else bytes(buf[offset:offset + length])
                offset += max(length, 0)
                stat = ZnodeStat._make(_STAT.unpack_from(buf, offset))
                offset += _STAT.size
                results.append((data, stat))
            elif op_type == ERROR_OPCODE:
                (code,) = _INT.unpack_from(buf, offset)
                offset += _INT.size
                results.append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"unexpected operation type {op_type} in a multiRead response")


def chunks(paths: Sequence[str], max_bytes: int = MAX_REQUEST_BYTES) -> list[tuple[str, ...]]:
    """Split ``paths`` into requests of at most ``max_bytes`` each (a single long path still goes)."""
    out: list[tuple[str, ...]] = []
    cur: list[str] = []
    size = 0
    for p in paths:
        n = _MULTI_HEADER.size + _INT.size + len(p.encode("utf-8")) + 1
        if cur and size + n > max_bytes:
            out.append(tuple(cur))
            cur, size = [], 0
        cur.append(p)
        size += n
    if cur:
        out.append(tuple(cur))
    return out


def submit(kazoo: Any, paths: tuple[str, ...]) -> Any:
    """Queue one multiRead on kazoo's connection; returns kazoo's async result (a list of results)."""
    async_result = kazoo.handler.async_result()
    kazoo._call(MultiRead(paths), async_result)
    return async_result
