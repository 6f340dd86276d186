"""What a JDBC sink asks the server before the job starts, so that a wrong setting fails there and then: the login,
the statements (prepared in a transaction that is rolled back: the tables, columns and types they name exist, and
nothing is written), and for exactly-once whether the server has prepared transactions at all.

Every function here talks to a server: ``tests/unit/test_jdbc_sink.py`` runs them against one.
"""

from __future__ import annotations

import uuid

from operators.jdbc.errors import statement_error

__all__ = ["check_statements", "max_prepared_transactions", "prepared_gids"]


def check_statements(connection, statements, subject: str) -> None:
    """``PREPARE`` each statement (PostgreSQL parses it and looks up what it names, running nothing), in a
    transaction that is rolled back; a statement the server refuses raises the error that says why."""
    import psycopg
    from psycopg import sql

    for statement in statements:
        name = sql.Identifier(f"chandy_check_{uuid.uuid4().hex[:8]}")
        try:
            with connection.transaction(force_rollback=True):
                connection.execute(sql.SQL("PREPARE {} AS ").format(name) + sql.SQL(statement.numbered))
                connection.execute(sql.SQL("DEALLOCATE {}").format(name))
        except psycopg.Error as exc:
            raise statement_error(exc, statement, subject) from None


def max_prepared_transactions(connection) -> int:
    """The server's ``max_prepared_transactions`` (0: prepared transactions are disabled)."""
    (value,) = connection.execute("SHOW max_prepared_transactions").fetchone()
    return int(value)


def prepared_gids(connection, prefix: str) -> list[str]:
    """The ids of the transactions prepared in this database whose id starts with ``prefix``."""
    rows = connection.execute("SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND "
                              "starts_with(gid, %s) ORDER BY prepared", (prefix,)).fetchall()
    return [gid for (gid,) in rows]
