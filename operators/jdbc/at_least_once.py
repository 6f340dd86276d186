"""Writing a stream to PostgreSQL at least once, as Flink's ``JdbcSink.sink``: rows in batches, each batch in one
transaction, every batch written before a checkpoint barrier passes the sink.

A batch is written when it holds ``batch_size`` rows, when ``batch_interval_ms`` passed since the last write (a
thread of the writer's watches the time), at every checkpoint barrier, and at the end of the input. So a completed
checkpoint has every row before its barrier in the table, and a restart from it writes at most the rows after it
again: with an upsert statement (``JdbcSink.upsert_sink``, or an ``INSERT ... ON CONFLICT`` of your own) writing
them again changes nothing, which makes a keyed table exact.

A batch that fails for a reason that may pass (the connection was lost, a serialization failure, a deadlock) is
written again, up to ``max_retries`` times, on a new connection when the old one broke; a record that does not fit
its column, a missing table, a wrong password fail the job at once, naming what to fix.

>>> from operators.jdbc.connection import PostgresConnectionSettings
>>> from operators.jdbc.binding import RowLayout, StatementBinding
>>> from operators.jdbc.statements import Statement
>>> from runtime.types import Types
>>> layout = RowLayout.of(Types.ROW_NAMED(["id", "title"], [Types.INT(), Types.STRING()]))
>>> sink = PostgresSink(PostgresConnectionSettings.from_url("jdbc:postgresql://db:5432/shop"),
...                     StatementBinding(Statement.from_jdbc("insert into books values (?, ?)", layout.field_names),
...                                      layout))
>>> sink.subject
'JdbcSink (at least once, postgresql://db:5432/shop)'
>>> sink.validate()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
import time

from operators.jdbc.connection import PostgresConnectionSettings, connect
from operators.jdbc.errors import execution_error, first_line, is_transient, rejected_record_error, rejects_records
from operators.jdbc.options import RETRY_BACKOFF_S, BatchSettings
from operators.jdbc.server_checks import check_statements
from operators.jdbc.statements import write_rows
from operators.sinks import Sink, SinkWriter
from runtime.errors import ChandyError, ServerUnreachableError

__all__ = ["PostgresSink"]

log = logging.getLogger(__name__)


class PostgresSink(Sink):
    """Runs ``binding``'s statements for the records, at least once, in batches (see the module's docstring).
    Built by ``JdbcSink.sink`` and ``JdbcSink.upsert_sink`` (:mod:`runtime.datastream.connectors.jdbc`)."""

    def __init__(self, connection: PostgresConnectionSettings, binding, batch: BatchSettings = BatchSettings(),
                 name: str = "JdbcSink"):
        self.connection_settings = connection
        self.binding = binding
        self.batch = batch
        self.name = name

    @property
    def subject(self) -> str:
        """The sink as messages name it."""
        return f"{self.name} (at least once, {self.connection_settings.describe()})"

    def validate(self) -> None:
        """Driver, before launch: log in, and have the server check every statement (nothing is written)."""
        with connect(self.connection_settings, self.subject, autocommit=True) as connection:
            check_statements(connection, self.binding.statements, self.subject)

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _BatchingWriter(self)

    def merge_results(self, results: list) -> int:
        """Driver, end of a bounded job: how many rows the subtasks wrote (a row written again after a restart
        counts again)."""
        return sum(result or 0 for result in results)


class _BatchingWriter(SinkWriter):
    """One subtask's batches. The lock keeps the interval thread and the subtask's thread from writing at once; a
    failure of the interval thread is raised on the subtask's thread, at its next call."""

    def __init__(self, sink: PostgresSink):
        self.sink = sink
        self.buffer: list = []
        self.connection = None
        self.lock = threading.Lock()
        self.last_write = time.monotonic()
        self.failure: ChandyError | None = None
        self.stop = threading.Event()
        self.timer: threading.Thread | None = None
        self.written = 0
        self.retries = 0

    def open(self, runtime_context) -> None:
        interval_ms = self.sink.batch.batch_interval_ms
        if interval_ms > 0:
            self.timer = threading.Thread(target=self._write_on_time, args=(interval_ms / 1000,), daemon=True,
                                          name="chandy-jdbc-batch-interval")
            self.timer.start()

    def write_batch(self, records: list) -> None:
        self._raise_failure()
        size = self.sink.batch.batch_size
        with self.lock:
            self.buffer.extend(records)
            while len(self.buffer) >= size:
                self._write(size)

    def snapshot_state(self, checkpoint_id: int):
        self._flush()
        return []

    def finish(self) -> None:
        self._flush()

    def result(self) -> int:
        return self.written

    def metrics(self) -> dict:
        return {"records-written": self.written, "batches-retried": self.retries}

    def close(self) -> None:
        self.stop.set()
        if self.timer is not None:
            self.timer.join(5)
        if self.connection is not None:
            try:
                self.connection.close()
            except Exception:  # closing is best effort: the server ends the session with the socket
                pass
            self.connection = None

    # -- writing --------------------------------------------------------------------------------------------

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure

    def _flush(self) -> None:
        self._raise_failure()
        with self.lock:
            while self.buffer:
                self._write(self.sink.batch.batch_size)

    def _write_on_time(self, interval_s: float) -> None:
        while not self.stop.wait(min(interval_s, 0.1)):
            if time.monotonic() - self.last_write < interval_s:
                continue
            with self.lock:
                if not self.buffer or self.failure is not None:
                    self.last_write = time.monotonic()
                    continue
                try:
                    while self.buffer:
                        self._write(self.sink.batch.batch_size)
                except ChandyError as error:
                    self.failure = error
                    return

    def _write(self, size: int) -> None:
        """Write the first ``size`` buffered records in one transaction, retrying what may pass (lock held)."""
        import psycopg

        records = self.buffer[:size]
        sink = self.sink
        plan = sink.binding.bind(records, sink.subject)
        attempt = 0
        while plan:
            statement, rows = plan[0]
            try:
                connection = self._connection()
                with connection.cursor() as cursor:
                    for statement, rows in plan:
                        write_rows(cursor, statement, rows)
                connection.commit()
                break
            except ServerUnreachableError as error:  # connecting failed
                cause = error
            except psycopg.Error as exc:
                self._after_failure()
                if not is_transient(exc):
                    if rejects_records(exc):
                        raise rejected_record_error(exc, statement, rows, self._probe, sink.subject) from None
                    raise execution_error(exc, statement, sink.subject, "writing a batch") from None
                cause = exc
            attempt += 1
            if attempt > sink.batch.max_retries:
                raise ServerUnreachableError(
                    f"{sink.subject}: writing a batch of {len(records)} rows failed {attempt} times, the last time "
                    f"with: {first_line(cause)}. A restart from the last checkpoint writes them again "
                    f"(with_max_retries(...) sets how often a batch is tried).") from None
            self.retries += 1
            log.warning("%s: writing a batch of %d rows failed (%s); trying again (%d of %d)", sink.subject,
                        len(records), first_line(cause), attempt, sink.batch.max_retries)
            time.sleep(RETRY_BACKOFF_S * attempt)
        del self.buffer[:size]
        self.written += sum(len(rows) for _, rows in plan)
        self.last_write = time.monotonic()

    def _connection(self):
        if self.connection is None or self.connection.closed:
            self.connection = connect(self.sink.connection_settings, self.sink.subject)
        return self.connection

    def _probe(self):
        return connect(self.sink.connection_settings, self.sink.subject)

    def _after_failure(self) -> None:
        """Roll back what the failed batch did, or drop a connection that broke."""
        connection = self.connection
        if connection is None:
            return
        if connection.broken or connection.closed:
            self.connection = None
            return
        try:
            connection.rollback()
        except Exception:  # it broke while rolling back: the next attempt connects anew
            self.connection = None
