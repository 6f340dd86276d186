"""A logical replication connection to PostgreSQL: create a slot (exporting its snapshot), stream its changes, and
confirm positions back to the server.

psycopg has no replication API, but its libpq layer (``psycopg.pq``) speaks everything the replication protocol
needs: replication commands go as simple queries on a ``replication=database`` connection, and the stream is a
COPY BOTH exchange of ``XLogData`` (``w``) and keepalive (``k``) messages, answered by standby status updates
(``r``) that carry the position the server may forget up to. That position only ever moves to what a completed
checkpoint holds: the slot keeps every later change for a restart.

>>> format_lsn(parse_lsn("16/B374D848")), parse_lsn("0/0")
('16/B374D848', 0)
"""

from __future__ import annotations

import select
import struct
import time
from dataclasses import dataclass

from operators.postgres_cdc.catalog import quoted
from operators.postgres_cdc.pgoutput import PG_EPOCH_OFFSET_US
from runtime.errors import ProtocolError, ServerUnreachableError

__all__ = ["ReplicationConnection", "CreatedSlot", "parse_lsn", "format_lsn", "MAX_MESSAGE_BYTES"]

MAX_MESSAGE_BYTES = 1 << 30  # PostgreSQL's own limit on one message (MaxAllocSize)
STATUS_INTERVAL_S = 10.0  # a standby status update at least this often (wal_sender_timeout is 60 s by default)
_XLOG_HEAD = struct.Struct(">QQq")
_KEEPALIVE = struct.Struct(">Qq?")
_STATUS = struct.Struct(">cQQQq?")


def parse_lsn(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class CreatedSlot:
    """A new slot: changes committed from ``consistent_lsn`` on are streamed, and ``snapshot`` (valid while the
    connection that made it stays idle) sees exactly the transactions committed before."""

    name: str
    consistent_lsn: int
    snapshot: str


class ReplicationConnection:
    """One replication connection (``replication=database``) to the server ``connect_arguments`` describes."""

    def __init__(self, connect_arguments: dict, describe: str):
        from psycopg import conninfo, pq

        self.describe = describe
        arguments = {**connect_arguments, "replication": "database"}
        self.pgconn = pq.PGconn.connect(conninfo.make_conninfo(**{k: str(v) for k, v in arguments.items()}).encode())
        if self.pgconn.status != pq.ConnStatus.OK:
            message = self.pgconn.error_message.decode(errors="replace").strip()
            self.pgconn.finish()
            raise _ServerError(message, "08006")
        self.streaming = False
        self.confirmed = 0  # the position last confirmed to the server
        self.received = 0  # the end of the newest message received
        self.next_status = 0.0

    def _command(self, text: str) -> list[tuple]:
        from psycopg import pq

        result = self.pgconn.exec_(text.encode())
        if result.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
            message = result.error_message.decode(errors="replace").strip()
            raise _ServerError(message, (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode())
        return [tuple(None if result.get_value(r, c) is None else result.get_value(r, c).decode()
                      for c in range(result.nfields)) for r in range(result.ntuples)]

    def create_slot(self, name: str, temporary: bool = False) -> CreatedSlot:
        """A ``pgoutput`` slot named ``name`` and its exported snapshot (dropped with the connection when
        ``temporary``)."""
        kind = " TEMPORARY" if temporary else ""
        (row,) = self._command(f"CREATE_REPLICATION_SLOT {quoted(name)}{kind} LOGICAL pgoutput "
                               "(SNAPSHOT 'export')")
        return CreatedSlot(row[0], parse_lsn(row[1]), row[2])

    def start(self, slot: str, from_lsn: int, publication: str) -> None:
        """Stream ``slot``'s changes of the tables in ``publication`` that commit at ``from_lsn`` or later (or
        after the slot's confirmed position, whichever is later)."""
        from psycopg import pq

        command = (f"START_REPLICATION SLOT {quoted(slot)} LOGICAL {format_lsn(from_lsn)} "
                   f"(proto_version '1', publication_names {_literal(quoted(publication))})")
        result = self.pgconn.exec_(command.encode())
        if result.status != pq.ExecStatus.COPY_BOTH:
            message = result.error_message.decode(errors="replace").strip()
            raise _ServerError(message, (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode())
        self.pgconn.nonblocking = 1
        self.streaming = True
        self.confirmed = from_lsn
        self.received = from_lsn

    def read(self, max_messages: int, wait_s: float) -> list[tuple[int, bytes | None]]:
        """Up to ``max_messages`` messages in the server's order, waiting up to ``wait_s`` for the first:
        ``(wal_start, payload)`` of each XLogData, and ``(wal_end, None)`` of each keepalive (every transaction
        that commits before ``wal_end`` was sent before it)."""
        messages: list[tuple[int, bytes | None]] = []
        deadline = time.monotonic() + wait_s
        while len(messages) < max_messages:
            size, data = self.pgconn.get_copy_data(1)
            if size == 0:  # nothing complete buffered: wait for the socket, once
                self._status_if_due()
                remaining = deadline - time.monotonic()
                if messages or remaining <= 0:
                    break
                select.select([self.pgconn.socket], [], [], remaining)
                self.pgconn.consume_input()
                continue
            if size < 0:
                raise self._ended()
            if size > MAX_MESSAGE_BYTES:
                raise ProtocolError(f"PostgreSQL replication: a message of {size} bytes is larger than any the "
                                    f"server sends ({MAX_MESSAGE_BYTES})")
            data = bytes(data)
            kind = data[:1]
            if kind == b"w":
                if len(data) < 1 + _XLOG_HEAD.size:
                    raise ProtocolError("PostgreSQL replication: an XLogData message shorter than its header")
                start, end, _sent = _XLOG_HEAD.unpack_from(data, 1)
                self.received = max(self.received, end, start)
                messages.append((start, data[1 + _XLOG_HEAD.size:]))
            elif kind == b"k":
                if len(data) < 1 + _KEEPALIVE.size:
                    raise ProtocolError("PostgreSQL replication: a keepalive shorter than its fields")
                end, _sent, reply = _KEEPALIVE.unpack_from(data, 1)
                self.received = max(self.received, end)
                messages.append((end, None))
                if reply:
                    self.send_status()
            else:
                raise ProtocolError(f"PostgreSQL replication: a message of unknown kind {kind!r}")
        return messages

    def confirm(self, lsn: int) -> None:
        """The server may forget the changes before ``lsn`` (a completed checkpoint holds everything up to it)."""
        if lsn > self.confirmed:
            self.confirmed = lsn
            if self.streaming:
                self.send_status()

    def send_status(self) -> None:
        now_us = int(time.time() * 1_000_000) - PG_EPOCH_OFFSET_US
        # written and flushed are both what is confirmed: the server must keep everything after it
        message = _STATUS.pack(b"r", self.confirmed, self.confirmed, self.confirmed, now_us, False)
        if self.pgconn.put_copy_data(message) != 1 or self.pgconn.flush() < 0:
            raise self._ended()
        self.next_status = time.monotonic() + STATUS_INTERVAL_S

    def _status_if_due(self) -> None:
        if self.streaming and time.monotonic() >= self.next_status:
            self.send_status()

    def _ended(self) -> ServerUnreachableError:
        message = ""
        result = self.pgconn.get_result()  # the COPY's end: the server's reason, if it gave one
        if result is not None:
            message = result.error_message.decode(errors="replace").strip()
        message = message or self.pgconn.error_message.decode(errors="replace").strip() or "the server ended it"
        return ServerUnreachableError(f"PostgreSQL CDC source: the replication stream from {self.describe} broke: "
                                      f"{message}. The job restarts from its last checkpoint, and the slot still "
                                      "holds every change after it.")

    def close(self) -> None:
        if self.pgconn is not None:
            self.pgconn.finish()
            self.pgconn = None


class _ServerError(Exception):
    """A replication command the server refused; ``sqlstate`` says why."""

    def __init__(self, message: str, sqlstate: str):
        super().__init__(message)
        self.sqlstate = sqlstate
