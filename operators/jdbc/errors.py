"""What went wrong between a JDBC sink and PostgreSQL, told as Chandy's errors: each names the sink, the server or the
statement, what the server said, and the fix.

Which errors pass: a lost connection, a server shutting down or starting, a serialization failure, a deadlock, a
lock or a resource that was not available (:func:`is_transient`). Those a batch retries; the others fail the job,
and whether a restart may help is the class's: a record that does not fit its column fails the same way again
(``RecordEncodingError``), as do a missing table and a wrong password (``ConfigurationError``); a server that does
not answer may answer later (``ServerUnreachableError``).

>>> import psycopg
>>> is_transient(psycopg.OperationalError("server closed the connection unexpectedly"))
True
>>> is_transient(psycopg.errors.lookup("22001")("value too long for type character varying(3)"))
False
"""

from __future__ import annotations

import uuid

from runtime.errors import ChandyError, ConfigurationError, InvalidRecordError, RecordEncodingError, \
    ServerUnreachableError

__all__ = ["connection_error", "is_transient", "statement_error", "execution_error", "rejects_records",
           "rejected_record_error", "prepared_transactions_disabled", "first_line"]

_SHOWN_CHARS = 200
_PROBE_LOCK_TIMEOUT = "5s"
# SQLSTATEs (or their two-character classes) of failures that may pass on another attempt.
_TRANSIENT = ("08", "40001", "40P01", "53000", "53100", "53200", "53300", "55P03", "57P01", "57P02", "57P03", "58000",
              "58030")
_LOGIN_REFUSED = ("password authentication failed", "no password supplied", "authentication failed",
                  "no pg_hba.conf entry", "role \"", "pg_hba.conf rejects")


def first_line(exc: BaseException) -> str:
    """The server's message with its detail and hint, on one line (without libpq's context, nor the statement's
    text that the server quotes back)."""
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None)
    if primary:
        parts = [primary] + [f"{label}: {text}" for label, text in (("DETAIL", diag.message_detail),
                                                                    ("HINT", diag.message_hint)) if text]
        return " ".join(parts).rstrip(".?")
    lines = [line.strip() for line in str(exc).splitlines()
             if line.strip() and not line.startswith(("CONTEXT", "LINE ")) and line.strip() != "^"]
    return " ".join(lines).rstrip(".?") or type(exc).__name__


def _sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None)


def is_transient(exc: BaseException) -> bool:
    """Whether another attempt (on a new connection) may succeed where ``exc`` was raised."""
    import psycopg

    state = _sqlstate(exc)
    if state is None:
        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
    return state.startswith(_TRANSIENT) or state in _TRANSIENT


def connection_error(settings, exc: BaseException, subject: str) -> ChandyError:
    """Why connecting failed: a login the server refused, a database it lacks, or a server that does not answer.

    >>> from operators.jdbc.connection import PostgresConnectionSettings
    >>> settings = PostgresConnectionSettings.from_url("jdbc:postgresql://db:5432/shop", user="etl")
    >>> print(connection_error(settings, OSError('FATAL:  password authentication failed for user "etl"'), "JdbcSink"))
    JdbcSink: PostgreSQL at postgresql://db:5432/shop refused the login of user 'etl': FATAL: password authentication
    failed for user "etl". Check with_user_name(...) and with_password(...) (and that the server's pg_hba.conf lets
    this user in from the driver and the executors).
    """
    reason = first_line(exc)
    where = settings.describe()
    if any(marker in reason for marker in _LOGIN_REFUSED):
        return ConfigurationError(
            f"{subject}: PostgreSQL at {where} refused the login of user {settings.user!r}: {reason}. Check "
            "with_user_name(...) and with_password(...) (and that the server's pg_hba.conf lets this user in from the "
            "driver and the executors).")
    if "database" in reason and "does not exist" in reason:
        return ConfigurationError(f"{subject}: PostgreSQL at {where}: {reason}. Create the database "
                                  f"(CREATE DATABASE {settings.database}), or name an existing one in the URL.")
    hosts = " or ".join(f"{h}:{p}" for h, p in zip(settings.hosts.split(","), settings.ports.split(",")))
    return ServerUnreachableError(
        f"{subject}: cannot connect to PostgreSQL at {hosts} ({where}): {reason}. Is the server running, and "
        "reachable from the driver and every executor (host name, port, firewall, the server's listen_addresses)? "
        f"Connecting waits up to {settings.connect_timeout_s} s (connectTimeout in the URL, or "
        "with_connection_check_timeout_seconds(...)).")


def prepared_transactions_disabled(settings, subject: str) -> ConfigurationError:
    """The exactly-once sink on a server whose ``max_prepared_transactions`` is 0."""
    return ConfigurationError(
        f"{subject}: exactly-once writes need prepared transactions (PREPARE TRANSACTION), and PostgreSQL at "
        f"{settings.describe()} has max_prepared_transactions = 0, which disables them (it is PostgreSQL's default). "
        "Set it to at least twice the sink's parallelism (each subtask holds one prepared transaction while its "
        "checkpoint completes, and one at the end of its input; more with concurrent checkpoints): "
        "max_prepared_transactions = 20 in postgresql.conf, or ALTER SYSTEM SET max_prepared_transactions = 20; "
        "then restart the server (the setting takes effect only at a restart). Or write at least once, which needs no "
        "prepared transactions: JdbcSink.sink(...), or JdbcSink.upsert_sink(...) for a keyed table.")


def statement_error(exc: BaseException, statement, subject: str) -> ChandyError:
    """A statement the server refuses whatever the records: a missing table or column, a syntax error, a type it
    cannot take, a privilege the user lacks.

    >>> from operators.jdbc.statements import Statement
    >>> import psycopg
    >>> error = psycopg.errors.lookup("42P01")('relation "bookz" does not exist')
    >>> print(statement_error(error, Statement.from_jdbc("insert into bookz values (?)"), "JdbcSink"))
    JdbcSink: PostgreSQL refuses the statement: relation "bookz" does not exist (SQLSTATE 42P01). Statement: insert
    into bookz values (?). Create the table or column it names, grant the user what it lacks, or correct the
    statement.
    """
    state = _sqlstate(exc)
    return ConfigurationError(
        f"{subject}: PostgreSQL refuses the statement: {first_line(exc)} (SQLSTATE {state}). Statement: "
        f"{statement.jdbc}. Create the table or column it names, grant the user what it lacks, or correct the "
        "statement.")


def execution_error(exc: BaseException, statement, subject: str, what: str) -> ChandyError:
    """An error of running ``statement`` that no record explains (see :func:`rejected_record_error` for those)."""
    state = _sqlstate(exc)
    if state is not None and state.startswith("42"):
        return statement_error(exc, statement, subject)
    return ServerUnreachableError(f"{subject}: {what} failed: {first_line(exc)} (SQLSTATE {state}). Statement: "
                                  f"{statement.jdbc}.")


def rejects_records(exc: BaseException) -> bool:
    """Whether ``exc`` says a record's values do not fit (a data or integrity error, or a value psycopg cannot
    send), so that the record at fault can be looked for."""
    import psycopg

    state = _sqlstate(exc)
    if state is None:
        return isinstance(exc, psycopg.ProgrammingError) and not isinstance(exc, psycopg.errors.UndefinedTable)
    return state.startswith(("22", "23"))


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def rejected_record_error(exc: BaseException, statement, rows: list, connect, subject: str) -> ChandyError:
    """The error of a batch that the server refused because of a record: which record, which field and column, its
    value and the types, found by running the batch's records again one by one on a connection of ``connect()``,
    in a transaction that is rolled back."""
    import psycopg

    found = None
    try:
        with connect() as probe:
            found = _first_rejected(probe, statement, rows)
            if found is not None:
                index, error = found
                detail = _culprit(probe, statement, rows[index], error)
    except (psycopg.Error, ChandyError):  # the probe is a courtesy: without it, the batch's own error is told
        found = None
    if found is None:
        index, error, detail = None, exc, ""
    state = _sqlstate(error)
    record = f"The record: ({', '.join(_shown(v) for v in rows[index])}). " if index is not None else ""
    code = f" (SQLSTATE {state})" if state else ""
    message = (f"{subject}: a record does not fit the table: {first_line(error)}{code}. {detail}{record}"
               f"Statement: {statement.jdbc}.")
    if state is not None and state.startswith("23"):
        hint = (" A unique key the record repeats: records are written at least once, so a restart writes those since "
                "the last checkpoint again; write a keyed table with JdbcSink.upsert_sink(...) (or an INSERT ... ON "
                "CONFLICT statement), or exactly once with JdbcSink.exactly_once_sink(...)." if state == "23505"
                else " Correct the record before the sink, or the table's constraint.")
        return InvalidRecordError(message + hint)
    return RecordEncodingError(message + " Correct the value before the sink (or the column's type).")


def _first_rejected(probe, statement, rows: list):
    """``(index, error)`` of the first of ``rows`` that ``statement`` fails on, each after the ones before it."""
    import psycopg

    probe.execute("SELECT set_config('lock_timeout', %s, false)", (_PROBE_LOCK_TIMEOUT,))  # a courtesy never hangs
    with probe.transaction(force_rollback=True):
        for index, row in enumerate(rows):
            try:
                with probe.transaction():  # a savepoint: a failure leaves the rows before it in place
                    probe.execute(statement.text, row)
            except psycopg.Error as error:
                return index, error
    return None


def _culprit(probe, statement, row: tuple, error) -> str:
    """``Field 'x' (parameter 2, column 'x'): 'abc' (str) for integer. `` as far as it can be told, else ''."""
    import psycopg
    from psycopg import sql

    column = getattr(getattr(error, "diag", None), "column_name", None)
    if column is not None and column in statement.columns:
        index = statement.columns.index(column)
        return f"{_capital(statement.describe_parameter(index))}: {_typed(row[index])}. "
    if _sqlstate(error) is None:  # psycopg could not send a value: find which
        for index, value in enumerate(row):
            try:
                probe.execute("SELECT %s", (value,))
            except psycopg.Error as cause:
                return f"{_capital(statement.describe_parameter(index))}: {_typed(value)}, which psycopg cannot " \
                       f"send ({first_line(cause)}). "
        return ""
    name = f"chandy_probe_{uuid.uuid4().hex[:8]}"
    with probe.transaction(force_rollback=True):
        probe.execute(sql.SQL("PREPARE {} AS ").format(sql.Identifier(name)) + sql.SQL(statement.numbered))
        (types,) = probe.execute("SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = %s",
                                 (name,)).fetchone()
        probe.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(name)))
        for index, (value, type_name) in enumerate(zip(row, types)):
            if value is None:
                continue
            try:
                with probe.transaction():
                    probe.execute(sql.SQL("SELECT %s::{}").format(sql.SQL(type_name)), (value,))
            except psycopg.Error as cause:
                return f"{_capital(statement.describe_parameter(index))}: {_typed(value)} is not a valid " \
                       f"{type_name} ({first_line(cause)}). "
    # Nothing failed alone (a length or a range of the column's own): the parameters of the type the server names.
    message = first_line(error)
    named = [i for i, type_name in enumerate(types) if type_name in message and row[i] is not None]
    if named:
        return "".join(f"{_capital(statement.describe_parameter(i))}: {_typed(row[i])} for {types[i]}. "
                       for i in named)
    return ""


def _typed(value) -> str:
    return f"{_shown(value)} ({type(value).__name__})"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
