"""PyFlink's ``pyflink.datastream.connectors.jdbc``: ``JdbcSink`` with PyFlink's options, writing to PostgreSQL on
psycopg (no JVM, no JDBC driver): a PyFlink program that writes to PostgreSQL ports by replacing ``pyflink`` with
``runtime`` in its imports.

- ``JdbcSink.sink(sql, type_info, connection_options, execution_options)``: PyFlink's, at least once. ``sql`` has a
  ``?`` for each field of the row type ``type_info``; each record (a Row or tuple in that order) runs it. Rows go in
  batches (a plain ``INSERT INTO t (columns) VALUES (?, ...)`` as one ``COPY``), written when full, after the batch
  interval, at every checkpoint barrier and at the end.
- ``JdbcSink.upsert_sink(table, type_info, key_fields, connection_options, execution_options)``: Chandy's own. Writes
  ``INSERT ... ON CONFLICT (key) DO UPDATE`` built from the row type's field names (the columns' names), so writing
  a row again changes nothing and a keyed table is exact under at-least-once delivery; a Row whose row kind is
  ``DELETE`` deletes its key's row, ``UPDATE_BEFORE`` is skipped. ``table`` may also be an ``INSERT ... ON CONFLICT``
  statement of your own (with ``?``), whose target table the deletes go to.
- ``JdbcSink.exactly_once_sink(sql, type_info, connection_options, execution_options, exactly_once_options)``:
  Flink's ``JdbcSink.exactlyOnceSink`` in Python's words: one PostgreSQL transaction per subtask and checkpoint,
  ``PREPARE TRANSACTION`` at the barrier and ``COMMIT PREPARED`` when the checkpoint completes (see
  :mod:`operators.jdbc.exactly_once`). The server needs ``max_prepared_transactions > 0``.

Only PostgreSQL URLs are accepted (``jdbc:postgresql://host:port/database``); another database's URL is refused
when the options are built, naming what is supported.

>>> from runtime.common import Types
>>> options = (JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
...            .with_url("jdbc:postgresql://localhost:5432/shop").with_driver_name("org.postgresql.Driver")
...            .with_user_name("writer").with_password("secret").build())
>>> sink = JdbcSink.sink("insert into books (id, title) values (?, ?)",
...                      Types.ROW_NAMED(["id", "title"], [Types.INT(), Types.STRING()]), options,
...                      JdbcExecutionOptions.builder().with_batch_size(1000).with_batch_interval_ms(200).build())
>>> sink.batch
BatchSettings(batch_size=1000, batch_interval_ms=200, max_retries=3)
>>> sink.validate()  # logs in, and has the server check the statement  # doctest: +SKIP
"""

from __future__ import annotations

from operators.jdbc.at_least_once import PostgresSink
from operators.jdbc.binding import RowLayout, StatementBinding, UpsertBinding
from operators.jdbc.connection import DEFAULT_CONNECT_TIMEOUT_S, PostgresConnectionSettings
from operators.jdbc.exactly_once import PostgresExactlyOnceSink
from operators.jdbc.options import DEFAULT_COMMIT_TABLE, BatchSettings, ExactlyOnceSettings
from operators.jdbc.statements import Statement, insert_target, upsert_statements
from runtime.errors import ApiUsageError, ConfigurationError

__all__ = ["JdbcSink", "JdbcConnectionOptions", "JdbcExecutionOptions", "JdbcExactlyOnceOptions"]

_NAME = "JdbcSink"


class JdbcConnectionOptions:
    """Where the sink connects and who logs in (PyFlink's ``JdbcConnectionOptions``). Build one with
    ``JdbcConnectionOptions.JdbcConnectionOptionsBuilder()``; the URL is checked then.

    >>> options = JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url("jdbc:postgresql://db/shop").build()
    >>> options.get_db_url(), options.get_user_name(), options.get_connection_check_timeout_seconds()
    ('jdbc:postgresql://db/shop', None, 60)
    """

    def __init__(self, url: str, driver_name: str | None = None, user_name: str | None = None,
                 password: str | None = None, connection_check_timeout_seconds: int = DEFAULT_CONNECT_TIMEOUT_S):
        self._url = url
        self._driver_name = driver_name
        self._user_name = user_name
        self._password = password
        self._timeout = connection_check_timeout_seconds
        self.settings = PostgresConnectionSettings.from_url(url, user_name, password, driver_name,
                                                            connection_check_timeout_seconds, _NAME)

    def get_db_url(self) -> str:
        return self._url

    def get_driver_name(self) -> str | None:
        return self._driver_name

    def get_user_name(self) -> str | None:
        return self._user_name

    def get_password(self) -> str | None:
        return self._password

    def get_connection_check_timeout_seconds(self) -> int:
        return self._timeout

    def __repr__(self) -> str:
        return f"JdbcConnectionOptions({self.settings.describe()}, user={self._user_name!r})"

    class JdbcConnectionOptionsBuilder:
        """PyFlink's builder of :class:`JdbcConnectionOptions`.

        >>> JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url("jdbc:oracle:thin:@db:1521:orcl").build()
        Traceback (most recent call last):
        ...
        runtime.errors.ConfigurationError: JdbcSink: jdbc:oracle:thin:@db:1521:orcl is an Oracle URL, and Chandy's JDBC
        connector writes to PostgreSQL only ...
        """

        def __init__(self):
            self._url = None
            self._driver_name = None
            self._user_name = None
            self._password = None
            self._timeout = DEFAULT_CONNECT_TIMEOUT_S

        def with_url(self, url: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._url = url
            return self

        def with_driver_name(self, driver_name: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            """Accepted for PyFlink's sake: ``org.postgresql.Driver`` (no driver is loaded; another database's
            driver is refused)."""
            self._driver_name = driver_name
            return self

        def with_user_name(self, user_name: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._user_name = user_name
            return self

        def with_password(self, password: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._password = password
            return self

        def with_connection_check_timeout_seconds(self, seconds: int) \
                -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            """How long connecting may take (Flink's Java builder has it; 60 s)."""
            self._timeout = seconds
            return self

        def build(self) -> JdbcConnectionOptions:
            return JdbcConnectionOptions(self._url, self._driver_name, self._user_name, self._password, self._timeout)


class JdbcExecutionOptions:
    """How the sink writes: batch size, batch interval and retries (PyFlink's ``JdbcExecutionOptions``; Flink's
    defaults: 5,000 rows, no interval, 3 retries).

    >>> JdbcExecutionOptions.defaults().get_batch_size(), JdbcExecutionOptions.defaults().get_max_retries()
    (5000, 3)
    """

    def __init__(self, batch_interval_ms: int = 0, batch_size: int = 5000, max_retries: int = 3):
        self.settings = BatchSettings(batch_size, batch_interval_ms, max_retries)

    def get_batch_interval_ms(self) -> int:
        return self.settings.batch_interval_ms

    def get_batch_size(self) -> int:
        return self.settings.batch_size

    def get_max_retries(self) -> int:
        return self.settings.max_retries

    @staticmethod
    def defaults() -> JdbcExecutionOptions:
        return JdbcExecutionOptions()

    @staticmethod
    def builder() -> JdbcExecutionOptions.Builder:
        return JdbcExecutionOptions.Builder()

    class Builder:
        """PyFlink's builder of :class:`JdbcExecutionOptions`.

        >>> JdbcExecutionOptions.builder().with_batch_size(-1).build()
        Traceback (most recent call last):
        ...
        runtime.errors.ConfigurationError: JdbcSink: with_batch_size(-1): a batch holds at least 1 row.
        """

        def __init__(self):
            self._interval_ms = 0
            self._size = 5000
            self._max_retries = 3

        def with_batch_size(self, size: int) -> JdbcExecutionOptions.Builder:
            self._size = size
            return self

        def with_batch_interval_ms(self, interval_ms: int) -> JdbcExecutionOptions.Builder:
            self._interval_ms = interval_ms
            return self

        def with_max_retries(self, max_retries: int) -> JdbcExecutionOptions.Builder:
            self._max_retries = max_retries
            return self

        def build(self) -> JdbcExecutionOptions:
            return JdbcExecutionOptions(self._interval_ms, self._size, self._max_retries)


class JdbcExactlyOnceOptions:
    """How the exactly-once sink names and commits its transactions (Flink's ``JdbcExactlyOnceOptions``, with the
    settings that mean something on PostgreSQL, and two of Chandy's).

    >>> options = JdbcExactlyOnceOptions.builder().with_transaction_id_prefix("orders").build()
    >>> options.get_transaction_id_prefix(), options.get_max_commit_attempts(), options.is_recovered_and_rollback()
    ('orders', 3, False)
    """

    def __init__(self, max_commit_attempts: int = 3, recovered_and_rollback: bool = False,
                 transaction_id_prefix: str | None = None, commit_table: str = DEFAULT_COMMIT_TABLE):
        self.settings = ExactlyOnceSettings(max_commit_attempts, recovered_and_rollback, transaction_id_prefix,
                                            commit_table)

    def get_max_commit_attempts(self) -> int:
        return self.settings.max_commit_attempts

    def is_recovered_and_rollback(self) -> bool:
        return self.settings.recovered_and_rollback

    def get_transaction_id_prefix(self) -> str | None:
        return self.settings.transaction_id_prefix

    def get_commit_table(self) -> str:
        return self.settings.commit_table

    @staticmethod
    def defaults() -> JdbcExactlyOnceOptions:
        return JdbcExactlyOnceOptions()

    @staticmethod
    def builder() -> JdbcExactlyOnceOptions.Builder:
        return JdbcExactlyOnceOptions.Builder()

    class Builder:
        """Builder of :class:`JdbcExactlyOnceOptions`.

        >>> JdbcExactlyOnceOptions.builder().with_max_commit_attempts(0).build()
        Traceback (most recent call last):
        ...
        runtime.errors.ConfigurationError: JdbcSink: with_max_commit_attempts(0): a commit is attempted at least once.
        """

        def __init__(self):
            self._max_commit_attempts = 3
            self._recovered_and_rollback = False
            self._prefix = None
            self._commit_table = DEFAULT_COMMIT_TABLE

        def with_max_commit_attempts(self, max_commit_attempts: int) -> JdbcExactlyOnceOptions.Builder:
            """How often ``COMMIT PREPARED`` is tried when the connection fails (Flink's; 3)."""
            self._max_commit_attempts = max_commit_attempts
            return self

        def with_recovered_and_rollback(self, recovered_and_rollback: bool) -> JdbcExactlyOnceOptions.Builder:
            """Whether starting or restoring the job also rolls back the prepared transactions of this sink's other
            runs (Flink's; off). A savepoint of such a run can then not commit them: set it only when no earlier
            run of the job will be restored, and when no other job uses the same transaction id prefix."""
            self._recovered_and_rollback = bool(recovered_and_rollback)
            return self

        def with_transaction_id_prefix(self, prefix: str) -> JdbcExactlyOnceOptions.Builder:
            """Chandy's own: the sink's part of its transaction ids (default: derived from the database and the
            statement, the same for every run)."""
            self._prefix = prefix
            return self

        def with_commit_table(self, table: str) -> JdbcExactlyOnceOptions.Builder:
            """Chandy's own: the table where each committed transaction leaves its id (``chandy_jdbc_commits``,
            created on the driver if missing)."""
            self._commit_table = table
            return self

        def build(self) -> JdbcExactlyOnceOptions:
            return JdbcExactlyOnceOptions(self._max_commit_attempts, self._recovered_and_rollback, self._prefix,
                                          self._commit_table)


def _checked(jdbc_connection_options, jdbc_execution_options, method: str):
    if not isinstance(jdbc_connection_options, JdbcConnectionOptions):
        raise ApiUsageError(f"JdbcSink.{method}() expects jdbc_connection_options to be a JdbcConnectionOptions "
                            "(JdbcConnectionOptions.JdbcConnectionOptionsBuilder()...build()), got "
                            f"{type(jdbc_connection_options).__name__}.")
    if jdbc_execution_options is None:
        jdbc_execution_options = JdbcExecutionOptions.defaults()
    if not isinstance(jdbc_execution_options, JdbcExecutionOptions):
        raise ApiUsageError(f"JdbcSink.{method}() expects jdbc_execution_options to be a JdbcExecutionOptions "
                            "(JdbcExecutionOptions.builder()...build()), got "
                            f"{type(jdbc_execution_options).__name__}.")
    return jdbc_connection_options.settings, jdbc_execution_options.settings


class JdbcSink(PostgresSink):
    """PyFlink's ``JdbcSink``: build one with ``JdbcSink.sink``, ``JdbcSink.upsert_sink`` or
    ``JdbcSink.exactly_once_sink`` and pass it to ``stream.add_sink(...)`` (or ``sink_to``).

    >>> from runtime.common import Types
    >>> options = JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url("jdbc:postgresql://db/shop").build()
    >>> counts = Types.ROW_NAMED(["page", "visits"], [Types.STRING(), Types.LONG()])
    >>> print(JdbcSink.upsert_sink("page_visits", counts, ["page"], options).binding.upsert.text)
    INSERT INTO "page_visits" ("page", "visits") VALUES (%s, %s) ON CONFLICT ("page") DO UPDATE SET "visits" =
    EXCLUDED."visits"
    """

    @staticmethod
    def sink(sql: str, type_info, jdbc_connection_options: JdbcConnectionOptions,
             jdbc_execution_options: JdbcExecutionOptions | None = None) -> JdbcSink:
        """At least once: each record runs ``sql`` (any DML: insert, update, upsert, with a ``?`` for each field of
        ``type_info``, in order)."""
        connection, batch = _checked(jdbc_connection_options, jdbc_execution_options, "sink")
        layout = RowLayout.of(type_info, _NAME)
        statement = Statement.from_jdbc(sql, layout.field_names, _NAME)
        return JdbcSink(connection, StatementBinding(statement, layout), batch, _NAME)

    @staticmethod
    def upsert_sink(table: str, type_info, key_fields, jdbc_connection_options: JdbcConnectionOptions,
                    jdbc_execution_options: JdbcExecutionOptions | None = None) -> JdbcSink:
        """At least once, and exact for a keyed table: each record upserts its row of ``table`` (whose columns are
        named as ``type_info``'s fields, and whose primary key or a unique constraint is ``key_fields``), or deletes
        it when its row kind is ``DELETE``. ``table`` is written as in SQL (``schema.table``; unquoted names fold to
        lower case), or is an ``INSERT ... ON CONFLICT`` statement of your own with a ``?`` for each field."""
        connection, batch = _checked(jdbc_connection_options, jdbc_execution_options, "upsert_sink")
        layout = RowLayout.of(type_info, _NAME)
        if isinstance(key_fields, str):
            key_fields = [key_fields]
        if not isinstance(table, str) or not table.strip():
            raise ConfigurationError("JdbcSink.upsert_sink() needs the table to write (or an INSERT ... ON CONFLICT "
                                     "statement).")
        target = insert_target(table) if table.lstrip()[:6].lower() == "insert" else None
        upsert, delete = upsert_statements(target or table, layout.field_names, key_fields, _NAME)
        if target is not None:
            upsert = Statement.from_jdbc(table, layout.field_names, _NAME)
        return JdbcSink(connection, UpsertBinding(upsert, delete, layout), batch, _NAME)

    @staticmethod
    def exactly_once_sink(sql: str, type_info, jdbc_connection_options: JdbcConnectionOptions,
                          jdbc_execution_options: JdbcExecutionOptions | None = None,
                          exactly_once_options: JdbcExactlyOnceOptions | None = None) -> PostgresExactlyOnceSink:
        """Exactly once: each record runs ``sql`` inside its subtask's transaction of the current checkpoint, which
        commits when the checkpoint completes. ``max_retries`` of the execution options is not used here: a write
        that fails loses its transaction, and the job restarts from its last checkpoint (Flink requires it to be 0
        for this sink for the same reason)."""
        connection, batch = _checked(jdbc_connection_options, jdbc_execution_options, "exactly_once_sink")
        if exactly_once_options is None:
            exactly_once_options = JdbcExactlyOnceOptions.defaults()
        if not isinstance(exactly_once_options, JdbcExactlyOnceOptions):
            raise ApiUsageError("JdbcSink.exactly_once_sink() expects exactly_once_options to be a "
                                "JdbcExactlyOnceOptions (JdbcExactlyOnceOptions.builder()...build()), got "
                                f"{type(exactly_once_options).__name__}.")
        layout = RowLayout.of(type_info, _NAME)
        statement = Statement.from_jdbc(sql, layout.field_names, _NAME)
        return PostgresExactlyOnceSink(connection, StatementBinding(statement, layout), batch,
                                       exactly_once_options.settings, _NAME)
