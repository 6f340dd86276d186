"""The SQL a JDBC sink runs: JDBC's ``?`` placeholders read into psycopg's form, and the upsert and delete statements
of a keyed table, built from the row type's field names.

A ``?`` is a placeholder only where SQL would read it as one: not inside a string literal (``'?'``, ``E'\\'?'``), a
quoted identifier (``"why?"``), a comment, or a dollar-quoted body (``$$ ... ? ... $$``); ``??`` is a literal ``?``
(PgJDBC's escape, for jsonb's ``?`` operator). Every ``%`` is doubled, because psycopg reads ``%`` as the start of
a placeholder of its own.

>>> statement = Statement.from_jdbc("insert into notes (id, body) values (?, 'why?' || ?)")
>>> statement.text, statement.parameter_count
("insert into notes (id, body) values (%s, 'why?' || %s)", 2)
>>> statement.numbered  # the same with PostgreSQL's own placeholders, for PREPARE
"insert into notes (id, body) values ($1, 'why?' || $2)"
>>> upsert, delete = upsert_statements("shop.books", ["id", "title", "year"], ["id"])
>>> print(upsert.text)
INSERT INTO "shop"."books" ("id", "title", "year") VALUES (%s, %s, %s) ON CONFLICT ("id") DO UPDATE SET "title" =
EXCLUDED."title", "year" = EXCLUDED."year"
>>> print(delete.text)
DELETE FROM "shop"."books" WHERE "id" = %s
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from runtime.errors import ConfigurationError

__all__ = ["Statement", "upsert_statements", "table_name_parts", "insert_target", "write_rows"]

_IDENTIFIER_START = re.compile(r"[A-Za-z_\u0080-\uffff]")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$")
_INSERT = re.compile(r"\s*insert\s+into\s+(?P<table>(?:\"(?:[^\"]|\"\")*\"|[^\s(\"])+)\s*"
                     r"(?:\((?P<columns>[^)]*)\))?\s*values\s*\((?P<values>[^)]*)\)", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Statement:
    """A statement as the user wrote it (``jdbc``), as psycopg runs it (``text``: ``%s`` placeholders) and as
    ``PREPARE`` takes it (``numbered``: ``$1``, ``$2`` ...). ``parameters`` names the field of the row type that
    each placeholder takes (in order), ``columns`` the column each one fills when the statement is a plain
    ``INSERT INTO t (columns) VALUES (?, ...)`` (for messages; else empty)."""

    jdbc: str
    text: str
    numbered: str
    parameter_count: int
    parameters: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    copy: str | None = None  # ``COPY t (columns) FROM STDIN`` when the statement is a plain insert of every value
    staged: "StagedUpsert | None" = None  # how an upsert of many rows goes through a staging table instead

    @classmethod
    def from_jdbc(cls, sql: str, parameters: tuple[str, ...] = (), subject: str = "JdbcSink") -> Statement:
        """The statement of JDBC text ``sql``, whose ``?`` take ``parameters`` (field names) in order.

        >>> Statement.from_jdbc("select ?? from t where a like '5%' and b = ?").text  # ?? is the operator ?
        "select ? from t where a like '5%%' and b = %s"
        >>> Statement.from_jdbc("select $body$ ? $body$, ? -- is this ?\\n").parameter_count
        1
        >>> Statement.from_jdbc("insert into t values ('it''s ?")
        Traceback (most recent call last):
        ...
        runtime.errors.ConfigurationError: JdbcSink: the statement has a string literal that never ends (it starts at
        character 23): insert into t values ('it''s ?
        """
        if not isinstance(sql, str) or not sql.strip():
            raise ConfigurationError(f"{subject}: the statement is empty: give the SQL to run for each record, with "
                                     "a ? for each field of the row type.")
        text, numbered, count = _translate(sql, subject)
        if parameters and len(parameters) != count:
            raise ConfigurationError(
                f"{subject}: the statement has {count} placeholder{'s' if count != 1 else ''} (?), but the row type "
                f"has {len(parameters)} field{'s' if len(parameters) != 1 else ''} ({', '.join(parameters)}): give "
                f"one ? for each field, in the row type's order. Statement: {sql.strip()}")
        columns = _insert_columns(sql, count)
        return cls(sql.strip(), text, numbered, count, tuple(parameters), columns,
                   _copy_form(sql) if columns else None)

    def describe_parameter(self, index: int) -> str:
        """``field 'title' (parameter 2, column 'title')``, as much of it as is known.

        >>> Statement.from_jdbc("insert into t (a, b) values (?, ?)", ("x", "y")).describe_parameter(1)
        "field 'y' (parameter 2, column 'b')"
        """
        where = [f"parameter {index + 1}"] + ([f"column '{self.columns[index]}'"] if index < len(self.columns) else [])
        if index < len(self.parameters):
            return f"field '{self.parameters[index]}' ({', '.join(where)})"
        return ", ".join(where)


def _translate(sql: str, subject: str) -> tuple[str, str, int]:
    """``(psycopg's text, PREPARE's text, the number of placeholders)`` of JDBC text ``sql``."""
    text, numbered = [], []
    count = 0
    i, n = 0, len(sql)

    def copy(upto: int) -> None:
        part = sql[i:upto]
        text.append(part.replace("%", "%%"))
        numbered.append(part)

    while i < n:
        c = sql[i]
        if c == "?":
            if sql.startswith("??", i):
                text.append("?")
                numbered.append("?")
                i += 2
                continue
            count += 1
            text.append("%s")
            numbered.append(f"${count}")
            i += 1
        elif c == "'":
            escapes = i > 0 and sql[i - 1] in "eE" and (i == 1 or not (sql[i - 2].isalnum() or sql[i - 2] == "_"))
            end = _end_of_quoted(sql, i, "'", escapes)
            if end < 0:
                raise _unterminated("a string literal", i, sql, subject)
            copy(end)
            i = end
        elif c == '"':
            end = _end_of_quoted(sql, i, '"', False)
            if end < 0:
                raise _unterminated("a quoted identifier", i, sql, subject)
            copy(end)
            i = end
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end + 1
            copy(end)
            i = end
        elif sql.startswith("/*", i):
            end = _end_of_block_comment(sql, i)
            if end < 0:
                raise _unterminated("a comment", i, sql, subject)
            copy(end)
            i = end
        elif c == "$" and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")) \
                and (tag := _DOLLAR_TAG.match(sql, i)):
            close = sql.find(tag.group(0), tag.end())
            if close < 0:
                raise _unterminated("a dollar-quoted string", i, sql, subject)
            end = close + len(tag.group(0))
            copy(end)
            i = end
        else:
            start = i
            while i < n and sql[i] not in "?'\"-/$":
                i += 1
            if i == start:  # a lone -, / or $ that starts nothing
                i += 1
            part = sql[start:i]
            text.append(part.replace("%", "%%"))
            numbered.append(part)
    return "".join(text), "".join(numbered), count


def _end_of_quoted(sql: str, start: int, quote: str, backslash_escapes: bool) -> int:
    """The index after the quote that closes the quoted text opened at ``start``, or -1."""
    i = start + 1
    while i < len(sql):
        c = sql[i]
        if backslash_escapes and c == "\\":
            i += 2
            continue
        if c == quote:
            if sql.startswith(quote * 2, i):  # a doubled quote stands for one
                i += 2
                continue
            return i + 1
        i += 1
    return -1


def _end_of_block_comment(sql: str, start: int) -> int:
    depth, i = 0, start
    while i < len(sql):
        if sql.startswith("/*", i):
            depth += 1
            i += 2
        elif sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return -1


def _unterminated(what: str, position: int, sql: str, subject: str) -> ConfigurationError:
    return ConfigurationError(f"{subject}: the statement has {what} that never ends (it starts at character "
                              f"{position + 1}): "
                              f"{sql.strip()}")


def _insert_columns(sql: str, count: int) -> tuple[str, ...]:
    """The column each placeholder fills, when ``sql`` is ``INSERT INTO t (c1, c2) VALUES (?, ?)``, else ()."""
    match = _INSERT.match(sql)
    if not match or not match.group("columns"):
        return ()
    columns = [_unquote(column.strip()) for column in match.group("columns").split(",")]
    values = [value.strip() for value in match.group("values").split(",")]
    if len(columns) != len(values) or values != ["?"] * count:
        return ()
    return tuple(columns)


def _copy_form(sql: str) -> str | None:
    """``COPY t (c1, c2) FROM STDIN`` when ``sql`` is ``INSERT INTO t (c1, c2) VALUES (?, ?)`` and nothing more (no
    ``ON CONFLICT``, no ``RETURNING``): the same rows, written by PostgreSQL's bulk path, tens of times faster.

    >>> _copy_form('insert into shop."Books" (id, "Title") values (?, ?);')
    'COPY shop."Books" (id, "Title") FROM STDIN'
    >>> _copy_form("insert into t (a) values (?) on conflict do nothing") is None
    True
    """
    match = _INSERT.match(sql)
    if not match or sql[match.end():].strip().rstrip(";").strip():
        return None
    return f"COPY {match.group('table')} ({match.group('columns').strip()}) FROM STDIN"


@dataclass(frozen=True)
class StagedUpsert:
    """An upsert of a batch in four statements instead of one per row: the batch is copied into a temporary staging
    table (``create`` makes it once per connection: the target's columns and types, and each row's position), then
    ``merge`` upserts each key's last row of the batch into the target (a key twice in one ``INSERT ... ON
    CONFLICT`` would be an error, and the last row is what row-by-row upserts leave), and ``clear`` empties it."""

    create: str
    copy: str
    merge: str
    clear: str


_STAGED_MIN_ROWS = 32  # fewer rows go one by one: four statements cost more than they save


def write_rows(cursor, statement: Statement, rows: list[tuple]) -> None:
    """Run ``statement`` for each of ``rows`` on ``cursor``: by ``COPY`` when it is a plain insert, through a
    staging table when it is a generated upsert of many rows, else as one ``executemany``."""
    staged = statement.staged
    if staged is not None and len(rows) >= _STAGED_MIN_ROWS:
        cursor.execute(staged.create)
        with cursor.copy(staged.copy) as copy:
            write_row = copy.write_row
            for position, row in enumerate(rows):
                write_row((*row, position))
        cursor.execute(staged.merge)
        cursor.execute(staged.clear)
        return
    if statement.copy is None:
        cursor.executemany(statement.text, rows)
        return
    with cursor.copy(statement.copy) as copy:
        write_row = copy.write_row
        for row in rows:
            write_row(row)


def _unquote(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name.lower()


def insert_target(sql: str) -> str | None:
    """The table an ``INSERT INTO table ...`` statement writes, as written there, or None.

    >>> insert_target('INSERT INTO shop."Books" (id) VALUES (?) ON CONFLICT (id) DO NOTHING')
    'shop."Books"'
    """
    match = _INSERT.match(sql)
    return match.group("table") if match else None


def table_name_parts(name: str, subject: str = "JdbcSink") -> tuple[str, ...]:
    """The parts of a table name written as in SQL: unquoted parts fold to lower case, as PostgreSQL folds them;
    quoted ones keep theirs.

    >>> table_name_parts('Shop."Books"')
    ('shop', 'Books')
    """
    parts, i, n = [], 0, len(name)
    while i < n:
        if name[i] == '"':
            end = _end_of_quoted(name, i, '"', False)
            if end < 0:
                break
            parts.append(name[i + 1:end - 1].replace('""', '"'))
            i = end
        else:
            end = name.find(".", i)
            end = n if end < 0 else end
            part = name[i:end].strip()
            if not part or not _IDENTIFIER_START.match(part) or not re.fullmatch(r"[\w$\u0080-\uffff]+", part):
                break
            parts.append(part.lower())
            i = end
        if i < n:
            if name[i] != ".":
                break
            i += 1
            if i == n:
                break
    else:
        if 1 <= len(parts) <= 3:
            return tuple(parts)
    raise ConfigurationError(f"{subject}: {name!r} is not a table name: write it as in SQL, table or schema.table "
                             '(unquoted names fold to lower case; "Quoted" ones keep theirs).')


def upsert_statements(table: str, fields, key_fields, subject: str = "JdbcSink") -> tuple[Statement, Statement]:
    """``(upsert, delete)`` of a table whose columns are named as ``fields`` and whose key is ``key_fields``:
    ``INSERT ... ON CONFLICT (key) DO UPDATE SET`` every other column (``DO NOTHING`` when every column is in the
    key), and ``DELETE ... WHERE`` the key matches. Identifiers are quoted by psycopg; values are never in the text.

    >>> upsert, _ = upsert_statements("visits", ["page", "day"], ["page", "day"])
    >>> upsert.text
    'INSERT INTO "visits" ("page", "day") VALUES (%s, %s) ON CONFLICT ("page", "day") DO NOTHING'
    >>> upsert_statements("visits", ["page", "day"], ["user"])
    Traceback (most recent call last):
    ...
    runtime.errors.ConfigurationError: JdbcSink: the key field 'user' is not a field of the row type (page, day): ...
    """
    from psycopg import sql

    fields, key_fields = tuple(fields), tuple(key_fields or ())
    if not key_fields:
        raise ConfigurationError(f"{subject}: an upsert needs the key: key_fields=['id', ...], the fields of the row "
                                 "type that the table's primary key (or a unique constraint) is made of.")
    for key in key_fields:
        if key not in fields:
            raise ConfigurationError(f"{subject}: the key field {key!r} is not a field of the row type "
                                     f"({', '.join(fields)}): name the key by the row type's field names.")
    if len(set(key_fields)) != len(key_fields):
        raise ConfigurationError(f"{subject}: key_fields names a field twice: {list(key_fields)}.")
    target = sql.Identifier(*table_name_parts(table, subject))
    columns = sql.SQL(", ").join(map(sql.Identifier, fields))
    keys = sql.SQL(", ").join(map(sql.Identifier, key_fields))
    values = sql.SQL(", ").join(sql.SQL("?") for _ in fields)
    others = [field for field in fields if field not in key_fields]
    if others:
        action = sql.SQL("DO UPDATE SET {}").format(sql.SQL(", ").join(
            sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(f), sql.Identifier(f)) for f in others))
    else:
        action = sql.SQL("DO NOTHING")
    upsert = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) {}").format(target, columns, values, keys,
                                                                                  action)
    delete = sql.SQL("DELETE FROM {} WHERE {}").format(target, sql.SQL(" AND ").join(
        sql.SQL("{} = ?").format(sql.Identifier(key)) for key in key_fields))
    # Rendered, then read like a user's statement: a % or ? in a quoted name is then handled like any other.
    upsert_statement = Statement.from_jdbc(upsert.as_string(None), fields, subject)
    delete_statement = Statement.from_jdbc(delete.as_string(None), key_fields, subject)
    stage = sql.Identifier("chandy_stage_" + hashlib.sha256(target.as_string(None).encode()).hexdigest()[:12])
    position = sql.Identifier("chandy_position")
    staged = StagedUpsert(
        sql.SQL("CREATE TEMP TABLE IF NOT EXISTS {} ON COMMIT DELETE ROWS AS SELECT {}, 0::bigint AS {} FROM {} "
                "WITH NO DATA").format(stage, columns, position, target).as_string(None),
        sql.SQL("COPY {} ({}, {}) FROM STDIN").format(stage, columns, position).as_string(None),
        sql.SQL("INSERT INTO {} ({}) SELECT DISTINCT ON ({}) {} FROM {} ORDER BY {}, {} DESC ON CONFLICT ({}) {}")
        .format(target, columns, keys, columns, stage, keys, position, keys, action).as_string(None),
        sql.SQL("TRUNCATE {}").format(stage).as_string(None))
    return (Statement(upsert_statement.jdbc, upsert_statement.text, upsert_statement.numbered,
                      upsert_statement.parameter_count, fields, fields, staged=staged),
            Statement(delete_statement.jdbc, delete_statement.text, delete_statement.numbered,
                      delete_statement.parameter_count, key_fields, key_fields))
