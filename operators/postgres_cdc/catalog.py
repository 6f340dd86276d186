"""What the change-data-capture source asks PostgreSQL's catalog before it reads: the server allows logical
decoding, the listed tables exist and have primary keys, a publication covers them, and who holds the slot.

Each refusal names the setting or the statement that fixes it.

>>> TableName("public", "orders").qualified
'"public"."orders"'
>>> matches(["public.ord.*"], [], TableName("public", "orders")), matches([], ["sales"], TableName("public", "orders"))
(True, False)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.errors import ConfigurationError

__all__ = ["TableName", "Table", "KeyColumn", "quoted", "matches", "check_server", "find_tables", "ensure_publication",
           "SlotStatus", "slot_status", "ORDERED_KEY_TYPES"]

# Key types whose order in Python is PostgreSQL's (text compared with COLLATE "C", which is code point order):
# the snapshot pages through a table in key order, and a restored snapshot tells its rows apart by key ranges.
ORDERED_KEY_TYPES = {"smallint", "integer", "bigint", "numeric", "text", "character varying", "uuid", "date",
                     "timestamp without time zone", "timestamp with time zone", "boolean", "real",
                     "double precision", "oid"}
_TEXT_TYPES = {"text", "character varying"}


@dataclass(frozen=True, order=True)
class TableName:
    schema: str
    table: str

    @property
    def qualified(self) -> str:
        return f"{quoted(self.schema)}.{quoted(self.table)}"

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True)
class KeyColumn:
    name: str
    type_name: str

    @property
    def ordered(self) -> str:
        """The column in ORDER BY and comparisons: code point order for text, as Python compares strings."""
        return f'{quoted(self.name)} COLLATE "C"' if self.type_name in _TEXT_TYPES else quoted(self.name)


@dataclass(frozen=True)
class Table:
    name: TableName
    oid: int
    columns: tuple[str, ...]
    key: tuple[KeyColumn, ...]
    replica_identity: str  # 'd' default, 'f' full, 'i' index, 'n' nothing


def quoted(identifier: str) -> str:
    """``identifier`` as an SQL identifier, quoted (a double quote in it doubled).

    >>> print(quoted('my "x" slot'))
    "my ""x"" slot"
    """
    return '"' + identifier.replace('"', '""') + '"'


def matches(table_list: list[str], schema_list: list[str], name: TableName) -> bool:
    """Whether ``name`` is captured: Flink CDC's rule, where ``table_list`` entries are regular expressions over
    ``schema.table`` and ``schema_list`` entries over the schema; an empty list matches everything."""
    if schema_list and not any(re.fullmatch(pattern, name.schema) for pattern in schema_list):
        return False
    return not table_list or any(re.fullmatch(pattern, str(name)) for pattern in table_list)


def check_server(connection, subject: str, where: str) -> None:
    """The server decodes logically, and the user may replicate."""
    (level,) = connection.execute("SHOW wal_level").fetchone()
    if level != "logical":
        raise ConfigurationError(
            f"{subject}: PostgreSQL at {where} has wal_level = {level}, and change data capture reads the write-ahead "
            "log by logical decoding, which needs wal_level = logical. Set it (ALTER SYSTEM SET wal_level = logical, "
            "or in postgresql.conf) and restart the server; max_replication_slots and max_wal_senders must be at "
            "least 1 too.")
    (allowed,) = connection.execute(
        "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    if not allowed:
        (user,) = connection.execute("SELECT current_user").fetchone()
        raise ConfigurationError(f"{subject}: the user {user!r} may not replicate from PostgreSQL at {where}: "
                                 f"ALTER ROLE {quoted(user)} WITH REPLICATION (and let it SELECT the tables).")


def find_tables(connection, schema_list: list[str], table_list: list[str], subject: str) -> list[Table]:
    """The captured tables in name order, each with its columns and primary key; an error naming what is missing."""
    rows = connection.execute(
        "SELECT n.nspname, c.relname, c.oid, c.relreplident FROM pg_class c JOIN pg_namespace n ON n.oid = "
        "c.relnamespace WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg_toast%%' ORDER BY 1, 2").fetchall()
    every = {TableName(schema, table): (oid, identity) for schema, table, oid, identity in rows}
    for pattern in table_list:
        if not any(re.fullmatch(pattern, str(name)) for name in every):
            known = ", ".join(sorted(map(str, every))[:20]) or "none"
            raise ConfigurationError(f"{subject}: table_list({pattern!r}) matches no table (schema.table names, "
                                     f"regular expressions allowed). Tables there: {known}.")
    chosen = sorted(name for name in every if matches(table_list, schema_list, name))
    if not chosen:
        raise ConfigurationError(f"{subject}: schema_list({schema_list}) with table_list({table_list}) captures no "
                                 "table.")
    tables = []
    for name in chosen:
        oid, identity = every[name]
        columns = connection.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (oid,)).fetchall()
        key = connection.execute(
            "SELECT a.attname, format_type(a.atttypid, NULL) FROM pg_index i JOIN LATERAL unnest(i.indkey) "
            "WITH ORDINALITY AS k(attnum, position) ON true JOIN pg_attribute a ON a.attrelid = i.indrelid AND "
            "a.attnum = k.attnum WHERE i.indrelid = %s AND i.indisprimary ORDER BY k.position", (oid,)).fetchall()
        if not key:
            raise ConfigurationError(
                f"{subject}: table {name} has no primary key. The source reads its snapshot in key order and keys "
                f"the changes by it: ALTER TABLE {name.qualified} ADD PRIMARY KEY (...), or leave the table out of "
                "table_list(...).")
        unordered = [(column, kind) for column, kind in key if kind not in ORDERED_KEY_TYPES]
        if unordered:
            raise ConfigurationError(
                f"{subject}: table {name} has a primary key column of a type the snapshot cannot page through in "
                f"order ({', '.join(f'{c} {k}' for c, k in unordered)}). Supported key types: "
                f"{', '.join(sorted(ORDERED_KEY_TYPES))}.")
        tables.append(Table(name, oid, tuple(c for (c,) in columns), tuple(KeyColumn(c, k) for c, k in key),
                            identity))
    return tables


def ensure_publication(connection, publication: str, tables: list[Table], subject: str) -> None:
    """``publication`` exists and covers ``tables`` (made or extended when it does not: Flink CDC's "filtered"
    publication mode)."""
    import psycopg

    exists = connection.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (publication,)).fetchone()
    covered = {TableName(s, t) for s, t in connection.execute(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (publication,)).fetchall()}
    missing = [t for t in tables if t.name not in covered]
    if exists and not missing:
        return
    names = ", ".join(t.name.qualified for t in missing)
    statement = (f"ALTER PUBLICATION {quoted(publication)} ADD TABLE {names}" if exists
                 else f"CREATE PUBLICATION {quoted(publication)} FOR TABLE {names}")
    try:
        connection.execute(statement)
    except psycopg.Error as exc:
        raise ConfigurationError(
            f"{subject}: the publication {publication!r} does not cover {', '.join(str(t.name) for t in missing)}, "
            f"and adding them failed ({str(exc).strip().splitlines()[0]}). Have the tables' owner run: {statement}"
        ) from None


@dataclass(frozen=True)
class SlotStatus:
    active_pid: int | None
    plugin: str
    database: str
    confirmed_lsn: str | None


def slot_status(connection, slot: str) -> SlotStatus | None:
    row = connection.execute("SELECT active_pid, plugin, database, confirmed_flush_lsn::text FROM "
                             "pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
    return None if row is None else SlotStatus(*row)
