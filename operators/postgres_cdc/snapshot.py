"""Reading the captured tables as they were at a replication slot's consistent point: one REPEATABLE READ
transaction on the snapshot the slot exported, paging through each table in primary-key order.

Pages are keyset pages (``WHERE key > last key ORDER BY key LIMIT n``), so a checkpoint between two pages knows
the last key read, and a restored job reads on from there.
"""

from __future__ import annotations

from operators.postgres_cdc.catalog import Table, quoted

__all__ = ["SnapshotReader", "page_query"]


def page_query(table: Table, after_key: tuple | None) -> str:
    """The statement of the next page of ``table`` after ``after_key`` (``%s`` placeholders: the key, the limit).

    >>> from operators.postgres_cdc.catalog import KeyColumn, TableName
    >>> t = Table(TableName("public", "stock"), 1, ("item", "n"), (KeyColumn("item", "text"),), "d")
    >>> page_query(t, ("a",))
    'SELECT "item", "n" FROM "public"."stock" WHERE ("item" COLLATE "C") > (%s) ORDER BY "item" COLLATE "C" LIMIT %s'
    """
    columns = ", ".join(quoted(c) for c in table.columns)
    ordered = ", ".join(k.ordered for k in table.key)
    where = ""
    if after_key is not None:
        where = f" WHERE ({ordered}) > ({', '.join(['%s'] * len(table.key))})"
    return f"SELECT {columns} FROM {table.name.qualified}{where} ORDER BY {ordered} LIMIT %s"


class SnapshotReader:
    """The tables as the exported snapshot ``snapshot`` sees them, on a connection made by ``connect()``."""

    def __init__(self, connect, snapshot: str):
        self.connection = connect()
        self.connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        self.connection.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")

    def page(self, table: Table, after_key: tuple | None, limit: int) -> list[tuple]:
        parameters = (*(after_key or ()), limit)
        return self.connection.execute(page_query(table, after_key), parameters).fetchall()

    def close(self) -> None:
        try:
            self.connection.close()
        except Exception:  # the server went away: the transaction was read-only, nothing to undo
            pass
