"""PostgreSQL's logical replication messages (the ``pgoutput`` plugin, protocol version 1) as typed values.

Each message the server streams in a replication ``XLogData`` is one of these; :func:`decode` reads one. Column
values come as PostgreSQL's text form (``bytes``), ``None`` for SQL NULL, or :data:`UNCHANGED` for a TOASTed value
the update did not touch (the server does not send it). The layout is PostgreSQL's "Logical Replication Message
Formats" chapter; a message that does not fit it is a :class:`~runtime.errors.ProtocolError`.

>>> import struct
>>> begin = decode(b"B" + struct.pack(">QqI", 0x16B3748, 0, 731))
>>> begin
Begin(final_lsn=23803720, commit_time_us=0, xid=731)
>>> insert = decode(b"I" + struct.pack(">I", 16385) + b"N" + struct.pack(">H", 2) + b"t" + struct.pack(">I", 2) + b"42"
...                 + b"n")
>>> insert.relation_id, insert.new
(16385, (b'42', None))
>>> decode(b"I\\x00")
Traceback (most recent call last):
...
runtime.errors.ProtocolError: pgoutput: a message of type 'I' ends after 2 bytes, inside its fields: the server and \
this reader disagree about the protocol (version 1 is read)
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from runtime.errors import ProtocolError

__all__ = ["Begin", "Commit", "Relation", "Column", "Insert", "Update", "Delete", "Truncate", "Other", "decode",
           "UNCHANGED", "PG_EPOCH_OFFSET_US"]

PG_EPOCH_OFFSET_US = 946_684_800_000_000  # PostgreSQL counts time from 2000-01-01; Unix from 1970-01-01


class _Unchanged:
    """A TOASTed column an update left as it was: PostgreSQL does not send its value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED"

    def __reduce__(self):
        return "UNCHANGED"


UNCHANGED = _Unchanged()


class Begin(NamedTuple):
    """A transaction starts; its changes follow, then its :class:`Commit`. ``final_lsn``: where it commits."""

    final_lsn: int
    commit_time_us: int  # microseconds since 2000-01-01 UTC
    xid: int


class Commit(NamedTuple):
    """The transaction's end: ``end_lsn`` is past its commit record, the position to confirm once it is safe."""

    commit_lsn: int
    end_lsn: int
    commit_time_us: int


class Column(NamedTuple):
    name: str
    type_oid: int
    part_of_key: bool


class Relation(NamedTuple):
    """A table's layout, sent before its first change in a session and again when it changes."""

    relation_id: int
    schema: str
    table: str
    replica_identity: str  # 'd' default (primary key), 'f' full, 'i' an index, 'n' nothing
    columns: tuple[Column, ...]


class Insert(NamedTuple):
    relation_id: int
    new: tuple


class Update(NamedTuple):
    """``old``: the old row (replica identity FULL, marker ``O``) or its key (``K``, when the key changed); None
    when the server sent neither (the key did not change and the identity is the default)."""

    relation_id: int
    old: tuple | None
    old_is_key_only: bool
    new: tuple


class Delete(NamedTuple):
    relation_id: int
    old: tuple
    old_is_key_only: bool


class Truncate(NamedTuple):
    relation_ids: tuple[int, ...]


class Other(NamedTuple):
    """A message this reader has no use for (origin, type, logical decoding message)."""

    kind: str


class _Reader:
    __slots__ = ("data", "at")

    def __init__(self, data: bytes):
        self.data = data
        self.at = 1

    def take(self, fmt: struct.Struct) -> tuple:
        end = self.at + fmt.size
        if end > len(self.data):
            self._short()
        values = fmt.unpack_from(self.data, self.at)
        self.at = end
        return values

    def byte(self) -> str:
        if self.at >= len(self.data):
            self._short()
        self.at += 1
        return chr(self.data[self.at - 1])

    def string(self) -> str:
        end = self.data.find(b"\0", self.at)
        if end < 0:
            self._short()
        text = self.data[self.at:end].decode("utf-8")
        self.at = end + 1
        return text

    def raw(self, length: int) -> bytes:
        end = self.at + length
        if end > len(self.data):
            self._short()
        value = self.data[self.at:end]
        self.at = end
        return value

    def _short(self):
        raise ProtocolError(f"pgoutput: a message of type {chr(self.data[0])!r} ends after {len(self.data)} bytes, "
                            "inside its fields: the server and this reader disagree about the protocol (version 1 "
                            "is read)")


_BEGIN = struct.Struct(">QqI")
_COMMIT = struct.Struct(">BQQq")
_RELATION_HEAD = struct.Struct(">I")
_COLUMN_TAIL = struct.Struct(">Ii")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_I8 = struct.Struct(">b")


def _tuple(reader: _Reader) -> tuple:
    # the one loop that runs per column of every change: plain offsets, no method calls
    data, at = reader.data, reader.at
    size = len(data)
    if at + 2 > size:
        reader._short()
    (count,) = _U16.unpack_from(data, at)
    at += 2
    values = []
    append = values.append
    for _ in range(count):
        if at >= size:
            reader._short()
        kind = data[at]
        at += 1
        if kind == 116 or kind == 98:  # t(ext), b(inary)
            if at + 4 > size:
                reader._short()
            end = at + 4 + _U32.unpack_from(data, at)[0]
            if end > size:
                reader._short()
            append(data[at + 4:end])
            at = end
        elif kind == 110:  # n(ull)
            append(None)
        elif kind == 117:  # u(nchanged TOAST)
            append(UNCHANGED)
        else:
            raise ProtocolError(f"pgoutput: a column of kind {chr(kind)!r} (expected n, u, t or b)")
    reader.at = at
    return tuple(values)


def _marked_tuple(reader: _Reader, expected: str) -> tuple:
    marker = reader.byte()
    if marker != expected:
        raise ProtocolError(f"pgoutput: expected the marker {expected!r}, got {marker!r}")
    return _tuple(reader)


def decode(data: bytes) -> Begin | Commit | Relation | Insert | Update | Delete | Truncate | Other:
    """The message in ``data`` (one XLogData payload)."""
    if not data:
        raise ProtocolError("pgoutput: an empty message")
    reader = _Reader(data)
    kind = chr(data[0])
    if kind == "B":
        return Begin(*reader.take(_BEGIN))
    if kind == "C":
        _flags, commit_lsn, end_lsn, time_us = reader.take(_COMMIT)
        return Commit(commit_lsn, end_lsn, time_us)
    if kind in ("I", "U", "D"):
        (relation_id,) = reader.take(_U32)
        if kind == "I":
            return Insert(relation_id, _marked_tuple(reader, "N"))
        marker = reader.byte()
        if kind == "D":
            if marker not in ("K", "O"):
                raise ProtocolError(f"pgoutput: a delete's old row has the marker {marker!r} (expected K or O)")
            return Delete(relation_id, _tuple(reader), marker == "K")
        old = None
        if marker in ("K", "O"):
            old = _tuple(reader)
            return Update(relation_id, old, marker == "K", _marked_tuple(reader, "N"))
        if marker != "N":
            raise ProtocolError(f"pgoutput: an update's row has the marker {marker!r} (expected K, O or N)")
        return Update(relation_id, None, False, _tuple(reader))
    if kind == "R":
        (relation_id,) = reader.take(_RELATION_HEAD)
        schema, table = reader.string(), reader.string()
        identity = reader.byte()
        (count,) = reader.take(_U16)
        columns = []
        for _ in range(count):
            (flags,) = reader.take(_I8)
            name = reader.string()
            type_oid, _modifier = reader.take(_COLUMN_TAIL)
            columns.append(Column(name, type_oid, bool(flags & 1)))
        return Relation(relation_id, schema, table, identity, tuple(columns))
    if kind == "T":
        (count,) = reader.take(_U32)
        reader.take(_I8)  # options: CASCADE, RESTART IDENTITY
        return Truncate(tuple(reader.take(_U32)[0] for _ in range(count)))
    return Other(kind)
