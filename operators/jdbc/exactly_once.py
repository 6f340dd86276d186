"""Writing a stream to PostgreSQL exactly once: one PostgreSQL transaction per subtask and checkpoint, prepared at the
barrier and committed when the checkpoint completes (Flink's ``JdbcSink.exactlyOnceSink``, on PostgreSQL's own
two-phase commit instead of XA).

A subtask's records go into an open transaction as they come. At the checkpoint barrier the transaction writes its
row into the bookkeeping table (:mod:`operators.jdbc.commit_table`) and is prepared: ``PREPARE TRANSACTION
'<id>'`` makes it durable, survives a crash of the process and of the server, and shows nothing to readers. Its id
(:mod:`operators.jdbc.transaction_ids`) goes into the checkpoint. When the checkpoint completes, ``COMMIT PREPARED
'<id>'`` makes it visible. Committing again is harmless: a transaction that is no longer prepared committed if its
row is in the bookkeeping table, and was rolled back (or never prepared) if not, which is an error, since its rows
are lost.

On a restore (on subtask 0, before any subtask writes), the restored checkpoint's prepared transactions are
committed, and every other prepared transaction of the same sink and run is rolled back: those the failed attempt
prepared after the checkpoint, and any it left behind. Other runs' transactions are left alone (a savepoint of
theirs may still commit them) unless ``recovered_and_rollback`` is set.

The server must allow prepared transactions: ``max_prepared_transactions`` is 0 by default, which the sink checks
on the driver before the job starts and in every process before its first transaction.

>>> from operators.jdbc.connection import PostgresConnectionSettings
>>> from operators.jdbc.binding import RowLayout, StatementBinding
>>> from operators.jdbc.options import ExactlyOnceSettings
>>> from operators.jdbc.statements import Statement
>>> from runtime.types import Types
>>> layout = RowLayout.of(Types.ROW_NAMED(["id", "title"], [Types.INT(), Types.STRING()]))
>>> sink = PostgresExactlyOnceSink(PostgresConnectionSettings.from_url("jdbc:postgresql://db:5432/shop"),
...                                StatementBinding(Statement.from_jdbc("insert into books values (?, ?)",
...                                                                     layout.field_names), layout),
...                                exactly_once=ExactlyOnceSettings(transaction_id_prefix="books"))
>>> sink.subject, sink.prefix
('JdbcSink (exactly once, postgresql://db:5432/shop)', 'books')
>>> sink.validate()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from operators.jdbc.commit_table import CommitTable
from operators.jdbc.connection import PostgresConnectionSettings, connect
from operators.jdbc.errors import (
    execution_error,
    first_line,
    is_transient,
    prepared_transactions_disabled,
    rejected_record_error,
    rejects_records,
)
from operators.jdbc.options import RETRY_BACKOFF_S, BatchSettings, ExactlyOnceSettings
from operators.jdbc.server_checks import check_statements, max_prepared_transactions, prepared_gids
from operators.jdbc.statements import table_name_parts, write_rows
from operators.jdbc.transaction_ids import GID_PREFIX, TransactionId, derived_prefix, transactions_to_roll_back
from operators.two_phase_commit import RecoveredState, TransactionContext, TwoPhaseCommitSink
from runtime.errors import ConfigurationError, OutputCommitError, ServerUnreachableError, TransactionStateError

__all__ = ["PostgresExactlyOnceSink", "PostgresTransaction"]

log = logging.getLogger(__name__)

_PREPARED_LIMIT = "53400"  # configuration_limit_exceeded: max_prepared_transactions are all taken
_DISABLED = "55000"  # object_not_in_prerequisite_state: "prepared transactions are disabled"


@dataclass(frozen=True)
class PostgresTransaction:
    """What the checkpoint keeps of a transaction: its id. Its rows are on the server."""

    id: TransactionId

    @property
    def gid(self) -> str:
        return self.id.gid

    def __repr__(self) -> str:
        return f"PostgresTransaction({self.gid})"


class _ProcessConnections:
    """The connections of one process for a sink: each open transaction's, idle ones per subtask (a prepared
    transaction leaves its connection free), and one in autocommit for ``COMMIT PREPARED`` and ``ROLLBACK
    PREPARED`` (which cannot run inside a transaction)."""

    def __init__(self, settings: PostgresConnectionSettings, subject: str):
        self.settings = settings
        self.subject = subject
        self.open: dict = {}  # gid -> (subtask, connection)
        self.idle: dict = {}  # subtask -> [connection]
        self._control = None

    def take(self, subtask: int):
        idle = self.idle.get(subtask)
        return idle.pop() if idle else connect(self.settings, self.subject)

    def give_back(self, subtask: int, connection) -> None:
        if connection.broken or connection.closed:
            return
        self.idle.setdefault(subtask, []).append(connection)

    def control(self):
        if self._control is None or self._control.closed or self._control.broken:
            self._control = connect(self.settings, self.subject, autocommit=True)
        return self._control

    def drop_control(self) -> None:
        _close(self._control)
        self._control = None

    def close(self) -> None:
        for subtask in {owner for owner, _ in self.open.values()} | set(self.idle):
            self.release(subtask)
        self.drop_control()

    def release(self, subtask: int) -> None:
        for connection in self.idle.pop(subtask, []):
            _close(connection)
        for gid, (owner, connection) in list(self.open.items()):
            if owner == subtask:
                del self.open[gid]
                _close(connection)  # closing rolls back what it had open
        if not self.open and not self.idle:
            self.drop_control()


def _roll_back(connection) -> None:
    try:
        connection.rollback()
    except Exception:  # a broken connection: the server ended the transaction with it
        pass


def _close(connection) -> None:
    if connection is not None:
        try:
            connection.close()
        except Exception:  # closing is best effort: the server ends the session with the socket
            pass


class PostgresExactlyOnceSink(TwoPhaseCommitSink):
    """Runs ``binding``'s statements for the records, exactly once (see the module's docstring). Built by
    ``JdbcSink.exactly_once_sink`` (:mod:`runtime.datastream.connectors.jdbc`)."""

    def __init__(self, connection: PostgresConnectionSettings, binding, batch: BatchSettings = BatchSettings(),
                 exactly_once: ExactlyOnceSettings = ExactlyOnceSettings(), name: str = "JdbcSink"):
        self.connection_settings = connection
        self.binding = binding
        self.batch = batch
        self.exactly_once = exactly_once
        self.name = name
        self.prefix = exactly_once.transaction_id_prefix or derived_prefix(
            connection.describe(), "\n".join(statement.jdbc for statement in binding.statements))
        self.commit_table = CommitTable(table_name_parts(exactly_once.commit_table, f"{name} (exactly once)"))
        self.committed = 0  # this process's transactions committed (a repeated commit is not counted)
        self.aborted = 0
        self._connections: _ProcessConnections | None = None
        self._server_checked = False  # max_prepared_transactions looked at in this process
        self._other_runs_settled = False  # recovered_and_rollback carried out in this process

    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_connections=None, _server_checked=False, _other_runs_settled=False)
        return state

    @property
    def subject(self) -> str:
        """The sink as messages name it."""
        return f"{self.name} (exactly once, {self.connection_settings.describe()})"

    @property
    def gid_prefix(self) -> str:
        """What every transaction id of this sink starts with."""
        return f"{GID_PREFIX}:{self.prefix}:"

    # -- the driver ---------------------------------------------------------------------------------------

    def validate(self) -> None:
        """Driver, before launch: log in, check that the server allows prepared transactions, have it check every
        statement (nothing is written), and create the bookkeeping table if it is missing."""
        with connect(self.connection_settings, self.subject, autocommit=True) as connection:
            if max_prepared_transactions(connection) == 0:
                raise prepared_transactions_disabled(self.connection_settings, self.subject)
            check_statements(connection, self.binding.statements, self.subject)
            self.commit_table.ensure(connection, self.subject)
            lingering = prepared_gids(connection, self.gid_prefix)
        super().validate()
        if lingering:
            log.warning("%s: %d prepared transactions of earlier runs of this sink are on the server (%s%s). A "
                        "restore of their checkpoint commits them; if none will be restored, roll them back (ROLLBACK "
                        "PREPARED '<gid>'), or set with_recovered_and_rollback(True). Until then they hold their "
                        "locks.", self.subject, len(lingering), ", ".join(lingering[:5]),
                        ", ..." if len(lingering) > 5 else "")

    # -- transactions -------------------------------------------------------------------------------------

    def _process(self) -> _ProcessConnections:
        if self._connections is None:
            self._connections = _ProcessConnections(self.connection_settings, self.subject)
        return self._connections

    def begin_transaction(self, context: TransactionContext) -> PostgresTransaction:
        connections = self._process()
        if not self._server_checked:
            if max_prepared_transactions(connections.control()) == 0:
                raise prepared_transactions_disabled(self.connection_settings, self.subject)
            self._server_checked = True
        if context.subtask == 0 and self.exactly_once.recovered_and_rollback and not self._other_runs_settled:
            self._roll_back_stale(context.run_id, keep=(), own_run=False)  # a fresh start: recover() did not run
        tid = TransactionId.new(self.prefix, context.run_id, context.subtask, context.sequence)
        connections.open[tid.gid] = (context.subtask, connections.take(context.subtask))
        return PostgresTransaction(tid)

    def _open_connection(self, transaction: PostgresTransaction, action: str):
        entry = self._process().open.get(transaction.gid)
        if entry is None:
            raise TransactionStateError(
                f"{self.subject}: cannot {action} transaction {transaction.gid}: it is not open in this process (it "
                "was prepared or aborted already, or another process began it). This is a bug in the code that "
                "drives the sink.")
        return entry[1]

    def write(self, transaction: PostgresTransaction, records: list) -> None:
        import psycopg

        connection = self._open_connection(transaction, "write to")
        size = self.batch.batch_size
        for statement, rows in self.binding.bind(records, self.subject):
            for start in range(0, len(rows), size):
                chunk = rows[start:start + size]
                try:
                    with connection.cursor() as cursor:
                        write_rows(cursor, statement, chunk)
                except psycopg.Error as exc:
                    # The transaction is lost with the job's attempt; ending it now frees the rows it locked, which
                    # the search for the record at fault writes again.
                    _roll_back(connection)
                    if rejects_records(exc):
                        raise rejected_record_error(exc, statement, chunk, self._probe, self.subject) from None
                    if is_transient(exc):
                        raise ServerUnreachableError(
                            f"{self.subject}: writing into transaction {transaction.gid} failed: {first_line(exc)}. "
                            "Its rows are lost with it; the restart from the last checkpoint writes them again.") \
                            from None
                    raise execution_error(exc, statement, self.subject, "writing a batch") from None

    def _probe(self):
        return connect(self.connection_settings, self.subject)

    def pre_commit(self, transaction: PostgresTransaction) -> None:
        """Record the transaction in the bookkeeping table, then ``PREPARE TRANSACTION``: durable, invisible."""
        import psycopg
        from psycopg import sql

        connection = self._open_connection(transaction, "pre-commit")
        subtask, _ = self._process().open.pop(transaction.gid)
        try:
            self.commit_table.record(connection, transaction.id)
            connection.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(transaction.gid)))
        except psycopg.Error as exc:
            _close(connection)
            raise self._prepare_error(exc, transaction) from None
        self._process().give_back(subtask, connection)

    def _prepare_error(self, exc, transaction: PostgresTransaction):
        state = getattr(exc, "sqlstate", None)
        if state == _DISABLED and "prepared transactions are disabled" in str(exc):
            return prepared_transactions_disabled(self.connection_settings, self.subject)
        if state == _PREPARED_LIMIT:
            return ConfigurationError(
                f"{self.subject}: the server's prepared transactions are all taken ({first_line(exc)}), so "
                f"transaction {transaction.gid} could not be prepared. Raise max_prepared_transactions (to at least "
                "twice the parallelism of every exactly-once sink writing there, then restart the server), or "
                "commit or roll back the ones left in pg_prepared_xacts that no job will commit.")
        if state == "42P01" and self.commit_table.name in str(exc):
            return ConfigurationError(
                f"{self.subject}: the bookkeeping table {self.commit_table.name} is missing (the driver creates it "
                "before the job starts: was it dropped while the job ran?). Restart the job, which creates it again.")
        if is_transient(exc):
            return ServerUnreachableError(f"{self.subject}: preparing transaction {transaction.gid} failed: "
                                          f"{first_line(exc)}. The restart from the last checkpoint writes its rows "
                                          "again.")
        return OutputCommitError(f"{self.subject}: preparing transaction {transaction.gid} failed: {first_line(exc)} "
                                 f"(SQLSTATE {state}).")

    def commit(self, transaction: PostgresTransaction) -> None:
        """``COMMIT PREPARED``; a transaction that is no longer prepared must have committed already."""
        import psycopg
        from psycopg import sql

        tid = transaction.id
        connections = self._process()
        attempts = self.exactly_once.max_commit_attempts
        for attempt in range(1, attempts + 1):
            try:
                control = connections.control()
                try:
                    control.execute(sql.SQL("COMMIT PREPARED {}").format(sql.Literal(tid.gid)))
                except psycopg.errors.UndefinedObject:
                    if self.commit_table.committed(control, tid):
                        return
                    raise self._lost(tid) from None
                self.committed += 1
                break
            except (psycopg.Error, ServerUnreachableError) as exc:
                connections.drop_control()
                if attempt == attempts or not (isinstance(exc, ServerUnreachableError) or is_transient(exc)):
                    raise ServerUnreachableError(
                        f"{self.subject}: committing transaction {tid.gid} failed (attempt {attempt} of {attempts}): "
                        f"{first_line(exc)}. It stays prepared: the restart from the checkpoint commits it.") from None
                log.warning("%s: committing transaction %s failed (%s); trying again", self.subject, tid.gid,
                            first_line(exc))
                time.sleep(RETRY_BACKOFF_S * attempt)
        try:
            self.commit_table.prune(connections.control(), tid)
        except (psycopg.Error, ServerUnreachableError):  # the next commit of this subtask prunes them
            connections.drop_control()

    def _lost(self, tid: TransactionId) -> OutputCommitError:
        return OutputCommitError(
            f"{self.subject}: transaction {tid.gid} cannot be committed: it is not prepared on the server any more, "
            f"and it did not commit (the bookkeeping table {self.commit_table.name} has no row of it). Someone rolled it "
            "back (ROLLBACK PREPARED, or another job restored with with_recovered_and_rollback(True) and the same "
            "transaction id prefix), or the server lost it. The rows it held, written by subtask "
            f"{tid.subtask} before a checkpoint, are not in the table.")

    def abort(self, transaction: PostgresTransaction) -> None:
        """Roll back an open transaction (on its connection) or a prepared one (``ROLLBACK PREPARED``); a
        transaction that is neither any more is left as it is."""
        entry = self._process().open.pop(transaction.gid, None)
        if entry is not None:
            subtask, connection = entry
            try:
                connection.rollback()
                self._process().give_back(subtask, connection)
            except Exception:  # the connection broke: closing it ends the transaction on the server too
                _close(connection)
            self.aborted += 1
            return
        if self._roll_back_prepared(transaction.gid):
            self.aborted += 1

    def _roll_back_prepared(self, gid: str) -> bool:
        """``ROLLBACK PREPARED``: whether it was prepared (and now is not)."""
        import psycopg
        from psycopg import sql

        connections = self._process()
        try:
            connections.control().execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
            return True
        except psycopg.errors.UndefinedObject:
            return False
        except psycopg.Error as exc:
            connections.drop_control()
            raise ServerUnreachableError(f"{self.subject}: rolling back transaction {gid} failed: {first_line(exc)}. "
                                         "The next restore rolls it back.") from None

    def recover(self, state: RecoveredState) -> None:
        """Commit the restored checkpoint's prepared transactions, then roll back every other one of this sink and
        run (and of its other runs too, with ``recovered_and_rollback``)."""
        for transaction in state.pending:
            self.commit(transaction)
        self._roll_back_stale(state.run_id, keep={t.gid for t in state.pending},
                              own_run=True)

    def _roll_back_stale(self, run_id: str, keep, own_run: bool) -> None:
        other_runs = self.exactly_once.recovered_and_rollback
        self._other_runs_settled = self._other_runs_settled or other_runs
        prepared = prepared_gids(self._process().control(), self.gid_prefix)
        for tid in transactions_to_roll_back(prepared, self.prefix, run_id, keep, own_run, other_runs):
            if self._roll_back_prepared(tid.gid):
                log.info("%s: rolled back transaction %s, which no checkpoint being restored holds", self.subject,
                         tid.gid)

    def release(self, subtask: int) -> None:
        if self._connections is not None:
            self._connections.release(subtask)

    def commit_remaining(self, results: list) -> int:
        """Driver, end of a bounded job without checkpoints: commit the last transactions, then let go of the
        connection that did."""
        try:
            return super().commit_remaining(results)
        finally:
            if self._connections is not None:
                self._connections.close()

    def metrics(self) -> dict:
        return {"transactions-committed": self.committed, "transactions-aborted": self.aborted}
