"""Which statement each record runs, with which parameters: a JDBC sink's records are Rows (or tuples) in the order of
its row type's fields.

``StatementBinding`` runs one statement for every record, as Flink's ``JdbcSink.sink`` does (row kinds are not
looked at). ``UpsertBinding`` reads a changelog: inserts and updates (``+I``, ``+U``) become upserts, deletes
(``-D``) become deletes by key, and ``-U`` (the row before an update, which the ``+U`` after it replaces) is
skipped. Records keep their order: a batch is cut where the statement changes.

>>> from runtime.types import Row, RowKind, Types
>>> from operators.jdbc.statements import upsert_statements
>>> layout = RowLayout.of(Types.ROW_NAMED(["id", "title"], [Types.INT(), Types.STRING()]))
>>> upsert, delete = upsert_statements("books", layout.field_names, ["id"])
>>> gone = Row(id=2, title="Dune"); gone.set_row_kind(RowKind.DELETE)
>>> for statement, rows in UpsertBinding(upsert, delete, layout).bind([Row(id=1, title="Emma"), (3, "Ulysses"), gone]):
...     print(statement.text.split(" (")[0], rows)
INSERT INTO "books" [(1, 'Emma'), (3, 'Ulysses')]
DELETE FROM "books" WHERE "id" = %s [(2,)]
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from operators.jdbc.statements import Statement
from runtime.errors import ConfigurationError, InvalidRecordError
from runtime.types import RowKind

__all__ = ["RowLayout", "StatementBinding", "UpsertBinding", "ChangeKind", "change_kind"]

_SHOWN_CHARS = 200


class ChangeKind(enum.Enum):
    """What a changelog record does to a keyed table."""

    WRITE = "write"  # +I, +U: the row as it is now
    DELETE = "delete"  # -D: the row is gone
    SKIP = "skip"  # -U: the row as it was, replaced by the +U that follows


_KINDS = {RowKind.INSERT: ChangeKind.WRITE, RowKind.UPDATE_AFTER: ChangeKind.WRITE,
          RowKind.DELETE: ChangeKind.DELETE, RowKind.UPDATE_BEFORE: ChangeKind.SKIP}


def change_kind(record) -> ChangeKind:
    """The change a record stands for: its row kind's, for a Row; a write for anything else.

    >>> from runtime.types import Row, RowKind
    >>> row = Row(id=1); row.set_row_kind(RowKind.UPDATE_BEFORE)
    >>> change_kind(row), change_kind((1,))
    (<ChangeKind.SKIP: 'skip'>, <ChangeKind.WRITE: 'write'>)
    """
    row_kind = getattr(record, "get_row_kind", None)
    return ChangeKind.WRITE if row_kind is None else _KINDS[row_kind()]


@dataclass(frozen=True)
class RowLayout:
    """The fields of a sink's records, in order: those of its row type (``Types.ROW_NAMED``, ``Types.ROW``,
    ``Types.TUPLE``)."""

    field_names: tuple[str, ...]

    @classmethod
    def of(cls, type_info, subject: str = "JdbcSink") -> RowLayout:
        names = tuple(getattr(type_info, "field_names", ()) or ())
        if not names and callable(getattr(type_info, "get_field_names", None)):
            names = tuple(type_info.get_field_names())
        if not names:
            raise ConfigurationError(
                f"{subject}: type_info must be a row type, whose fields the statement's ? take in order: "
                f"Types.ROW_NAMED(['id', 'title'], [Types.INT(), Types.STRING()]) (or Types.ROW([...])); got "
                f"{type_info!r}.")
        return cls(names)

    def values(self, record, subject: str = "JdbcSink") -> tuple:
        """The record's field values, in order, or an error naming the record and the fields expected.

        >>> RowLayout(("id", "title")).values([1, "Emma"])
        (1, 'Emma')
        >>> RowLayout(("id", "title")).values({"id": 1})
        Traceback (most recent call last):
        ...
        runtime.errors.InvalidRecordError: JdbcSink: the record {'id': 1} is a dict; ...
        """
        if isinstance(record, (tuple, list)) or callable(getattr(record, "get_row_kind", None)):
            values = tuple(record)
            if len(values) == len(self.field_names):
                return values
            problem = f"has {len(values)} field{'s' if len(values) != 1 else ''}"
        else:
            problem = f"is a{'n' if type(record).__name__[0] in 'aeiouAEIOU' else ''} {type(record).__name__}"
        shown = repr(record)
        shown = shown if len(shown) <= _SHOWN_CHARS else shown[:_SHOWN_CHARS] + "..."
        raise InvalidRecordError(
            f"{subject}: the record {shown} {problem}; the sink writes Rows (or tuples) of {len(self.field_names)} "
            f"field{'s' if len(self.field_names) != 1 else ''} in the row type's order ({', '.join(self.field_names)}"
            "). Map the stream to such Rows before the sink.")


class StatementBinding:
    """Every record runs ``statement`` with its fields."""

    def __init__(self, statement: Statement, layout: RowLayout):
        self.statement = statement
        self.layout = layout

    @property
    def statements(self) -> tuple[Statement, ...]:
        return (self.statement,)

    def bind(self, records: list, subject: str = "JdbcSink") -> list[tuple[Statement, list[tuple]]]:
        values = self.layout.values
        return [(self.statement, [values(record, subject) for record in records])] if records else []


class UpsertBinding:
    """Writes run ``upsert`` with every field; deletes run ``delete`` with the key's fields; ``-U`` is skipped."""

    def __init__(self, upsert: Statement, delete: Statement, layout: RowLayout):
        self.upsert = upsert
        self.delete = delete
        self.layout = layout
        self.key_positions = tuple(layout.field_names.index(name) for name in delete.parameters)

    @property
    def statements(self) -> tuple[Statement, ...]:
        return self.upsert, self.delete

    def bind(self, records: list, subject: str = "JdbcSink") -> list[tuple[Statement, list[tuple]]]:
        runs: list[tuple[Statement, list[tuple]]] = []
        for record in records:
            kind = change_kind(record)
            if kind is ChangeKind.SKIP:
                continue
            values = self.layout.values(record, subject)
            if kind is ChangeKind.DELETE:
                statement, parameters = self.delete, tuple(values[i] for i in self.key_positions)
            else:
                statement, parameters = self.upsert, values
            if runs and runs[-1][0] is statement:
                runs[-1][1].append(parameters)
            else:
                runs.append((statement, [parameters]))
        return runs
