"""One captured change (a snapshot row, an insert, an update or a delete of a table) and the two ways it becomes
records: :class:`RowDeserializer` (PyFlink ``Row`` s with their ``RowKind``, the default) and
:class:`JsonDebeziumDeserializationSchema` (Debezium's JSON change events, Flink CDC's usual choice).

>>> change = Change("u", "public", "stock", before={"item": "a", "n": 1}, after={"item": "a", "n": 2},
...                 lsn=0x16B3748, commit_time_ms=1700000000000, xid=731)
>>> [(str(row.get_row_kind()), row) for row in RowDeserializer().deserialize(change)]
[('-U', Row(item='a', n=1)), ('+U', Row(item='a', n=2))]
>>> import json
>>> event = json.loads(JsonDebeziumDeserializationSchema().deserialize(change)[0])
>>> event["op"], event["after"], event["source"]["table"], event["source"]["lsn"]
('u', {'item': 'a', 'n': 2}, 'stock', 23803720)
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid
from typing import NamedTuple

from runtime.types import Row, RowKind

__all__ = ["Change", "RowDeserializer", "JsonDebeziumDeserializationSchema", "ChangeDeserializer"]


class Change(NamedTuple):
    """``op``: Debezium's letter: ``r`` a snapshot row, ``c`` an insert, ``u`` an update, ``d`` a delete.
    ``before``/``after``: the rows by column name (``before`` is None for ``r`` and ``c``, and for ``u`` when the
    table's replica identity gives no old row; it holds only the key columns of a ``d`` or of a ``u`` that
    changed the key, unless the identity is FULL). ``lsn``, ``commit_time_ms`` and ``xid``: the transaction's
    (None for snapshot rows)."""

    op: str
    schema: str
    table: str
    before: dict | None
    after: dict | None
    lsn: int | None = None
    commit_time_ms: int | None = None
    xid: int | None = None


class ChangeDeserializer:
    """Turns a :class:`Change` into the records the source emits (a list, maybe empty)."""

    def deserialize(self, change: Change) -> list:
        raise NotImplementedError


class RowDeserializer(ChangeDeserializer):
    """Rows of the table's columns with PyFlink's row kinds: ``+I`` for a snapshot row and an insert, ``-U`` (the
    old row, when the table's replica identity gives it) and ``+U`` for an update, ``-D`` for a delete. Without the
    old row (replica identity DEFAULT), an update is a lone ``+U``: the stream is then an upsert changelog keyed by
    the primary key, which an upsert sink or a keyed fold applies exactly.

    >>> delete = Change("d", "public", "stock", before={"item": "a", "n": None}, after=None)
    >>> [str(row.get_row_kind()) for row in RowDeserializer().deserialize(delete)]
    ['-D']
    """

    def deserialize(self, change: Change) -> list:
        op = change.op
        if op in ("r", "c"):
            return [Row.of(list(change.after), change.after.values(), RowKind.INSERT)]
        if op == "u":
            after = Row.of(list(change.after), change.after.values(), RowKind.UPDATE_AFTER)
            if change.before is None:
                return [after]
            return [Row.of(list(change.before), change.before.values(), RowKind.UPDATE_BEFORE), after]
        return [Row.of(list(change.before), change.before.values(), RowKind.DELETE)]


class JsonDebeziumDeserializationSchema(ChangeDeserializer):
    """Debezium's JSON change event, as a ``str``: ``{"before", "after", "source": {"connector", "db", "schema",
    "table", "snapshot", "lsn", "txId", "ts_ms"}, "op", "ts_ms"}``, the form Flink CDC's
    ``JsonDebeziumDeserializationSchema`` gives. Values that JSON lacks are written as text: decimals and UUIDs as
    their digits, dates and times in ISO 8601, bytes in base64."""

    def __init__(self, database: str = ""):
        self.database = database

    def deserialize(self, change: Change) -> list:
        event = {"before": change.before, "after": change.after,
                 "source": {"connector": "postgresql", "db": self.database, "schema": change.schema,
                            "table": change.table, "snapshot": "true" if change.op == "r" else "false",
                            "lsn": change.lsn, "txId": change.xid, "ts_ms": change.commit_time_ms or 0},
                 "op": change.op, "ts_ms": change.commit_time_ms or 0}
        return [json.dumps(event, default=_plain, ensure_ascii=False, separators=(",", ":"))]


def _plain(value):
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, Row):
        return value.as_dict(recursive=True)
    return str(value)
