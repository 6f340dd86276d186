"""The logical replication stream read into changes, with the stream's position: which changes are emitted.

The position is the end of the last whole transaction emitted (``lsn``) and, when a checkpoint falls inside a
transaction, how many of its changes were (``partial_count`` of the one that commits at ``partial_commit``). The
server resends from the slot's confirmed position, which may be older: what the position covers is skipped, so each
change is emitted once. Changes that a restored snapshot already holds are left out too (see
:class:`~operators.postgres_cdc.key_ranges.KeyRanges`).

>>> from operators.postgres_cdc.changes import RowDeserializer
>>> decoder = ChangeDecoder({}, None, KeyRanges(), lsn=100, deserialize=RowDeserializer().deserialize)
>>> decoder.on_keepalive(250); decoder.position()
(250, None, 0)
"""

from __future__ import annotations

import logging

from operators.postgres_cdc import catalog, pgoutput
from operators.postgres_cdc.changes import Change
from operators.postgres_cdc.key_ranges import KeyRanges

__all__ = ["ChangeDecoder"]

log = logging.getLogger(__name__)

SUBJECT = "PostgresSource"


class ChangeDecoder:
    """Decodes the messages of one stream for the tables ``by_name`` (``schema.table`` -> :class:`catalog.Table`),
    turning column text into values with psycopg's ``loaders`` (a ``Transformer``) and changes into records with
    ``deserialize``."""

    def __init__(self, by_name: dict, loaders, ranges: KeyRanges, lsn: int, deserialize,
                 partial_commit: int | None = None, partial_count: int = 0):
        self.by_name = by_name
        self.loaders = loaders
        self.ranges = ranges
        self.deserialize = deserialize
        self.lsn = lsn
        self.partial_commit = partial_commit
        self.partial_count = partial_count
        # relation id -> (the captured table or None, the column names, each column's text loader)
        self.relations: dict[int, tuple[catalog.Table | None, list, list]] = {}
        self.transaction: pgoutput.Begin | None = None
        self.in_transaction = 0  # changes of the open transaction read so far
        self.truncated_warned: set[str] = set()

    def position(self) -> tuple[int, int | None, int]:
        """``(lsn, partial_commit, partial_count)``: what a checkpoint taken now covers."""
        if self.transaction is not None and self.in_transaction:
            return self.lsn, self.transaction.final_lsn, self.in_transaction
        return self.lsn, self.partial_commit if self.partial_count else None, self.partial_count

    def on_keepalive(self, wal_end: int) -> None:
        """Every transaction that commits before ``wal_end`` was sent: between transactions, the position moves
        there (so an idle table's slot need not keep the log that other tables write)."""
        if self.transaction is None and wal_end > self.lsn:
            self.lsn = wal_end
            self.partial_commit, self.partial_count = None, 0

    def on_message(self, message, records: list, timestamps: list) -> None:
        """Add the records of ``message`` (and their event times) to ``records`` and ``timestamps``."""
        kind = type(message)
        operation = _OPERATIONS.get(kind)
        if operation is None:
            self._on_control(message, kind)
            return
        begin = self.transaction
        self.in_transaction += 1
        if begin.final_lsn < self.lsn:
            return  # a transaction the checkpoint covers, sent again since the slot's position is older
        if begin.final_lsn == self.partial_commit and self.in_transaction <= self.partial_count:
            return
        table, names, loaders = self.relations[message.relation_id]
        if table is None:
            return  # a table of the publication that this source does not capture
        change = self._change(operation, message, table, names, loaders, begin)
        if change is None:
            return
        produced = self.deserialize(change)
        records.extend(produced)
        timestamps.extend([change.commit_time_ms] * len(produced))

    def _on_control(self, message, kind) -> None:
        """A message that is no row change: a transaction's bounds, a table's layout, a truncation."""
        if kind is pgoutput.Begin:
            self.transaction = message
            self.in_transaction = 0
        elif kind is pgoutput.Commit:
            self.transaction = None
            self.lsn = max(self.lsn, message.end_lsn)
            self.partial_commit, self.partial_count = None, 0
        elif kind is pgoutput.Relation:
            from psycopg.pq import Format

            loaders = [self.loaders.get_loader(c.type_oid, Format.TEXT).load for c in message.columns]
            table = self.by_name.get(f"{message.schema}.{message.table}")
            self.relations[message.relation_id] = (table, [c.name for c in message.columns], loaders)
        elif kind is pgoutput.Truncate:
            self._warn_truncate(message)

    def _change(self, operation: str, message, table: catalog.Table, names: list, loaders: list,
                begin: pgoutput.Begin):
        before = after = None
        if operation != "d":
            after = _values(names, loaders, message.new)
        old = message.old if operation != "c" else None
        if old is not None:
            before = _values(names, loaders, old)
        unchanged = pgoutput.UNCHANGED
        if after is not None and unchanged in message.new:  # TOASTed values the update left alone
            for name in names:
                if after[name] is unchanged:
                    after[name] = before[name] if before is not None and before[name] is not unchanged else None
        if old is not None and unchanged in old:
            for name in names:
                if before[name] is unchanged:
                    before[name] = None
        commit_lsn = begin.final_lsn
        if commit_lsn < self.ranges.newest:
            operation, before, after = self._unseen_part(operation, table, before, after, commit_lsn)
            if operation is None:
                return None
        return Change(operation, table.name.schema, table.name.table, before, after, commit_lsn,
                      (begin.commit_time_us + pgoutput.PG_EPOCH_OFFSET_US) // 1000, begin.xid)

    def _unseen_part(self, op: str, table: catalog.Table, before, after, commit_lsn: int):
        """Of a change committed before a restored snapshot was taken, the part that snapshot did not read."""
        name = str(table.name)
        old_row = before if before is not None else after
        old_key = tuple(old_row[k.name] for k in table.key)
        new_key = tuple(after[k.name] for k in table.key) if after is not None else None
        old_seen = self.ranges.seen(name, old_key, commit_lsn)
        new_seen = new_key is not None and self.ranges.seen(name, new_key, commit_lsn)
        if op == "c":
            return (None, None, None) if new_seen else (op, before, after)
        if op == "d":
            return (None, None, None) if old_seen else (op, before, after)
        if old_seen and new_seen:
            return None, None, None
        if old_seen:  # the old row was gone when its range was read: only the new row is news
            return "c", None, after
        if new_seen:  # the new row was read already: only the old row's end is news
            return "d", (before if before is not None else {k.name: after[k.name] for k in table.key}), None
        return op, before, after

    def _warn_truncate(self, message: pgoutput.Truncate) -> None:
        for relation_id in message.relation_ids:
            table, _, _ = self.relations.get(relation_id, (None, None, None))
            name = str(table.name) if table is not None else str(relation_id)
            if table is not None and name not in self.truncated_warned:
                self.truncated_warned.add(name)
                log.warning("%s: table %s was truncated; TRUNCATE is no row change, and the stream carries no "
                            "deletes for the rows it removed", SUBJECT, name)


_OPERATIONS = {pgoutput.Insert: "c", pgoutput.Update: "u", pgoutput.Delete: "d"}


def _values(names: list[str], loaders: list, values: tuple) -> dict:
    return {name: value if value is None or value is pgoutput.UNCHANGED else load(value)
            for name, load, value in zip(names, loaders, values)}
