"""The exactly-once sink's bookkeeping table: how committing a transaction twice is known to be harmless.

``COMMIT PREPARED`` of a transaction that is no longer prepared fails the same way whether it was committed already
(a commit repeated after a failure, a restore of a checkpoint whose transactions were committed) or never committed
(rolled back by someone, lost). To tell the two apart, every transaction writes one row here, its id, inside
itself just before ``PREPARE TRANSACTION``: the row exists exactly when the transaction committed.

The table keeps about one row per subtask and run: after ``COMMIT PREPARED`` succeeds, the rows of the same subtask's
earlier transactions are deleted (in their own statement: deleting them inside the next transaction would lock
rows that a later prepared transaction deletes too). A subtask commits its transactions in order, so a transaction
whose row is gone but whose subtask has a row of a later one committed as well.

>>> table = CommitTable(("chandy_jdbc_commits",))
>>> print(table.insert.as_string(None))
INSERT INTO "chandy_jdbc_commits" (gid, prefix, run, subtask, sequence) VALUES (%s, %s, %s, %s, %s)
"""

from __future__ import annotations

from operators.jdbc.transaction_ids import TransactionId
from runtime.errors import ConfigurationError

__all__ = ["CommitTable"]


class CommitTable:
    """The statements on the bookkeeping table named by ``parts`` (``("schema", "table")`` or ``("table",)``)."""

    def __init__(self, parts: tuple[str, ...]):
        from psycopg import sql

        self.parts = parts
        table = sql.Identifier(*parts)
        self.name = ".".join(parts)
        self.qualified = table.as_string(None)  # quoted, as to_regclass() reads it
        self.create = sql.SQL("CREATE TABLE IF NOT EXISTS {} (gid text PRIMARY KEY, prefix text NOT NULL, run text NOT "
                              "NULL, subtask integer NOT NULL, sequence bigint NOT NULL)").format(table)
        self.create_index = sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (prefix, run, subtask, sequence)").format(
            sql.Identifier(f"{parts[-1]}_by_subtask"), table)
        self.insert = sql.SQL("INSERT INTO {} (gid, prefix, run, subtask, sequence) VALUES (%s, %s, %s, %s, %s)"
                              ).format(table)
        self.committed_query = sql.SQL(
            "SELECT EXISTS (SELECT 1 FROM {0} WHERE gid = %s) OR EXISTS (SELECT 1 FROM {0} WHERE prefix = %s AND "
            "run = %s AND subtask = %s AND sequence > %s)").format(table)
        self.prune_query = sql.SQL("DELETE FROM {} WHERE prefix = %s AND run = %s AND subtask = %s AND sequence < %s"
                                   ).format(table)

    def ensure(self, connection, subject: str) -> None:
        """Create the table if it is missing (the driver does, before the job starts). An existing table is only
        looked up: ``CREATE INDEX IF NOT EXISTS`` would wait for every prepared transaction that wrote to it."""
        import psycopg

        (found,) = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (self.qualified,)).fetchone()
        if found:
            return
        try:
            with connection.transaction():
                connection.execute(self.create)
                connection.execute(self.create_index)
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable, psycopg.errors.DuplicateObject):
            pass  # another job created it at the same moment
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ConfigurationError(
                f"{subject}: the exactly-once sink keeps one row per committed transaction in the table {self.name}, "
                f"and the user may not create it: {exc}. Create it once as a user who may (or grant CREATE on the "
                f"schema): {self.create.as_string(connection)}; grant the sink's user SELECT, INSERT and DELETE on it; "
                "or name another table with with_commit_table(...).") from None

    def record(self, connection, tid: TransactionId) -> None:
        """Inside transaction ``tid``, before it is prepared: the row that says it committed, once it does."""
        connection.execute(self.insert, (tid.gid, tid.prefix, tid.run_id, tid.subtask, tid.sequence))

    def committed(self, connection, tid: TransactionId) -> bool:
        """Whether ``tid``, no longer prepared, committed (else it was rolled back, or never prepared)."""
        (answer,) = connection.execute(self.committed_query, (tid.gid, tid.prefix, tid.run_id, tid.subtask,
                                                              tid.sequence)).fetchone()
        return bool(answer)

    def prune(self, connection, tid: TransactionId) -> None:
        """After ``tid`` committed: the rows of its subtask's earlier transactions are not needed any more."""
        connection.execute(self.prune_query, (tid.prefix, tid.run_id, tid.subtask, tid.sequence))
