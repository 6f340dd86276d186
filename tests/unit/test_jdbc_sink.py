"""The JDBC sink to PostgreSQL: statements, batches, upserts, exactly-once transactions and the errors a user meets.

No Spark: the sinks' writers are driven directly (open, write_batch, snapshot_state, notify_checkpoint_complete,
finish, close) as a subtask drives them, against the session's PostgreSQL server (the ``postgres`` fixture; its
tests carry the ``postgres`` marker). The two-phase-commit contract itself is also held by
tests/conformance/test_sinks.py, for this sink as for every other.
"""

from __future__ import annotations

import pickle
import time
import uuid

import pytest

from operators.jdbc import PostgresConnectionSettings, Statement
from operators.two_phase_commit import TransactionContext
from runtime.common import Types
from runtime.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from runtime.errors import (
    ApiUsageError,
    ConfigurationError,
    InvalidRecordError,
    OutputCommitError,
    RecordEncodingError,
    ServerUnreachableError,
)
from runtime.types import Row, RowKind

BOOKS = Types.ROW_NAMED(["id", "title", "authors", "year"], [Types.INT(), Types.STRING(), Types.STRING(), Types.INT()])
INSERT_BOOK = "insert into {} (id, title, authors, year) values (?, ?, ?, ?)"


def options(server, password: str | None = None, url: str | None = None) -> JdbcConnectionOptions:
    return (JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(url or server.jdbc_url)
            .with_driver_name("org.postgresql.Driver").with_user_name(server.user)
            .with_password(server.password if password is None else password).build())


def execution(batch_size: int = 5000, interval_ms: int = 0, retries: int = 3) -> JdbcExecutionOptions:
    return (JdbcExecutionOptions.builder().with_batch_size(batch_size).with_batch_interval_ms(interval_ms)
            .with_max_retries(retries).build())


def books_table(server) -> str:
    return server.table("books", "id int PRIMARY KEY, title varchar(20), authors text, year int")


def book(i: int, title: str | None = None) -> Row:
    return Row(id=i, title=title or f"title {i}", authors=f"author {i}", year=2000 + i)


def rows_of(server, table: str) -> list[tuple]:
    return server.query(f"SELECT id, title FROM {table} ORDER BY id")


def exactly_once(server, table: str, prefix: str, **settings):
    builder = JdbcExactlyOnceOptions.builder().with_transaction_id_prefix(prefix)
    if settings.get("recovered_and_rollback"):
        builder = builder.with_recovered_and_rollback(True)
    sink = JdbcSink.exactly_once_sink(INSERT_BOOK.format(table), BOOKS, options(server), execution(),
                                      builder.build())
    sink.validate()
    return sink


def restarted(sink):
    return pickle.loads(pickle.dumps(sink))


# -- statements and URLs (no server) ---------------------------------------------------------------------------


@pytest.mark.parametrize("jdbc, text, count", [
    ("insert into t values (?, '?', ?)", "insert into t values (%s, '?', %s)", 2),
    ("insert into t values (?, 'it''s ?', ?)", "insert into t values (%s, 'it''s ?', %s)", 2),
    ("insert into t values (E'\\'?', ?)", "insert into t values (E'\\'?', %s)", 1),
    ('insert into "why?" ("a?b") values (?)', 'insert into "why?" ("a?b") values (%s)', 1),
    ("select ? -- not ?\n, ? /* nor ? /* nested ? */ */", "select %s -- not ?\n, %s /* nor ? /* nested ? */ */", 2),
    ("select $$ ? $$, $tag$ ? $tag$, ?", "select $$ ? $$, $tag$ ? $tag$, %s", 1),
    ("select doc ?? 'key', ? from t", "select doc ? 'key', %s from t", 1),
    ("select ? where x like '10%' or y = 5 % 2", "select %s where x like '10%%' or y = 5 %% 2", 1),
])
def test_jdbc_placeholders_become_psycopgs_only_where_sql_reads_them(jdbc, text, count):
    statement = Statement.from_jdbc(jdbc)
    assert (statement.text, statement.parameter_count) == (text, count)
    assert "$" + str(count) in statement.numbered and "%s" not in statement.numbered


def test_a_statement_needs_one_placeholder_per_field():
    with pytest.raises(ConfigurationError, match=r"3 placeholders \(\?\), but the row type has 4 fields \(id, title, "
                                                 r"authors, year\)"):
        JdbcSink.sink("insert into books values (?, ?, ?)", BOOKS,
                      JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url("jdbc:postgresql://db/x").build())
    with pytest.raises(ConfigurationError, match="type_info must be a row type"):
        JdbcSink.sink("insert into t values (?)", Types.STRING(),
                      JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url("jdbc:postgresql://db/x").build())


@pytest.mark.parametrize("url, database", [("jdbc:mysql://localhost:3306/shop", "MySQL"),
                                           ("jdbc:sqlserver://db:1433;databaseName=shop", "SQL Server"),
                                           ("jdbc:oracle:thin:@//db:1521/orcl", "Oracle")])
def test_a_url_of_another_database_is_refused_naming_what_is_supported(url, database):
    builder = JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(url).with_user_name("u")
    with pytest.raises(ConfigurationError) as raised:
        builder.build()
    message = str(raised.value)
    assert f"is a{'n' if database[0] in 'AEIOU' else ''} {database} URL" in message
    assert "PostgreSQL only (jdbc:postgresql://host:port/database" in message and "sink_to(sink)" in message


def test_urls_and_driver_names_read_as_pgjdbc_reads_them():
    settings = PostgresConnectionSettings.from_url(
        "jdbc:postgresql://db1:5433,[::1]/shop?user=u&password=hunter2&reWriteBatchedInserts=true&ssl=true&"
        "connectTimeout=7&targetServerType=primary")
    arguments = settings.connect_arguments()
    assert (arguments["host"], arguments["port"], arguments["dbname"]) == ("db1,::1", "5433,5432", "shop")
    assert (arguments["user"], arguments["password"], arguments["connect_timeout"]) == ("u", "hunter2", 7)
    assert (arguments["sslmode"], arguments["target_session_attrs"]) == ("verify-full", "read-write")
    assert "hunter2" not in repr(settings)
    assert PostgresConnectionSettings.from_url("postgresql://me:pw@h/d").connect_arguments()["user"] == "me"
    with pytest.raises(ConfigurationError, match=r"parameters that neither libpq nor PgJDBC knows: \['colour'\]"):
        PostgresConnectionSettings.from_url("jdbc:postgresql://h/d?colour=blue")
    with pytest.raises(ConfigurationError, match="names another database's JDBC driver"):
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url("jdbc:postgresql://h/d") \
            .with_driver_name("com.mysql.cj.jdbc.Driver").build()
    with pytest.raises(ConfigurationError, match="password=\\*\\*\\*"):  # a refused URL never shows the password
        PostgresConnectionSettings.from_url("jdbc:mysql://h/d?password=hunter2")


def test_options_are_pyflinks_and_check_their_values():
    defaults = JdbcExecutionOptions.defaults()
    assert (defaults.get_batch_size(), defaults.get_batch_interval_ms(), defaults.get_max_retries()) == (5000, 0, 3)
    with pytest.raises(ConfigurationError, match=r"with_max_retries\(-1\)"):
        JdbcExecutionOptions.builder().with_max_retries(-1).build()
    with pytest.raises(ConfigurationError, match="with_transaction_id_prefix"):
        JdbcExactlyOnceOptions.builder().with_transaction_id_prefix("a b").build()
    with pytest.raises(ApiUsageError, match="JdbcConnectionOptions"):
        JdbcSink.sink("insert into t values (?)", Types.ROW([Types.INT()]), "jdbc:postgresql://h/d")


def test_a_pyflink_program_declares_its_job_after_the_import_change():
    from tests.pyflink_jdbc_program import declare_books_job

    env = declare_books_job("jdbc:postgresql://dbhost:5432/postgresdb", "someUser", "somePassword")
    graph = env.get_job_graph("books")
    sink = graph.operators[-1].operator.sink
    assert graph.operators[-1].name == "Sink: JdbcSink" and isinstance(sink, JdbcSink)
    assert (sink.batch.batch_size, sink.batch.batch_interval_ms, sink.batch.max_retries) == (200, 1000, 5)
    assert sink.connection_settings.describe() == "postgresql://dbhost:5432/postgresdb"
    assert pickle.loads(pickle.dumps(sink)).binding.statement.text.endswith("values (%s, %s, %s, %s)")


# -- at least once -----------------------------------------------------------------------------------------------


def test_rows_go_in_batches_and_every_barrier_writes_the_rest(postgres):
    table = books_table(postgres)
    sink = JdbcSink.sink(INSERT_BOOK.format(table), BOOKS, options(postgres), execution(batch_size=3))
    sink.validate()
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([book(1), book(2)])
    assert rows_of(postgres, table) == []  # a batch holds 3
    writer.write_batch([book(3), (4, "title 4", "author 4", 2004)])
    assert [i for i, _ in rows_of(postgres, table)] == [1, 2, 3]
    assert writer.snapshot_state(1) == []  # the barrier: everything before it is in the table
    assert [i for i, _ in rows_of(postgres, table)] == [1, 2, 3, 4]
    writer.write_batch([book(5)])
    writer.finish()
    assert [i for i, _ in rows_of(postgres, table)] == [1, 2, 3, 4, 5]
    assert writer.result() == 5 and sink.merge_results([writer.result(), 2]) == 7
    writer.close()


def test_a_batch_is_written_when_its_interval_has_passed(postgres):
    table = books_table(postgres)
    sink = JdbcSink.sink(INSERT_BOOK.format(table), BOOKS, options(postgres), execution(interval_ms=100))
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([book(1)])
    deadline = time.monotonic() + 10
    while not rows_of(postgres, table):
        assert time.monotonic() < deadline, "the batch interval wrote nothing"
        time.sleep(0.05)
    writer.close()


def test_a_lost_connection_is_reconnected_and_the_batch_written_again(postgres):
    table = books_table(postgres)
    sink = JdbcSink.sink(INSERT_BOOK.format(table), BOOKS, options(postgres), execution(batch_size=1))
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([book(1)])
    (pid,) = postgres.query("SELECT pid FROM pg_stat_activity WHERE application_name = 'chandy' AND pid <> "
                            "pg_backend_pid()")[0]
    postgres.query("SELECT pg_terminate_backend(%s)", (pid,))
    writer.write_batch([book(2)])
    assert [i for i, _ in rows_of(postgres, table)] == [1, 2]
    assert writer.metrics() == {"records-written": 2, "batches-retried": 1}
    writer.close()


def test_retries_end_with_an_error_naming_the_server(postgres):
    table = books_table(postgres)
    sink = JdbcSink.sink(INSERT_BOOK.format(table), BOOKS, options(postgres), execution(batch_size=1, retries=0))
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([book(1)])
    postgres.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'chandy'")
    with pytest.raises(ServerUnreachableError, match=r"writing a batch of 1 rows failed 1 times, the last time with: "
                                                     r".*with_max_retries"):
        writer.write_batch([book(2)])
    writer.close()


# -- upserts -------------------------------------------------------------------------------------------------------


def test_writing_the_same_rows_again_gives_the_same_table(postgres):
    table = books_table(postgres)
    sink = JdbcSink.upsert_sink(table, BOOKS, ["id"], options(postgres))
    sink.validate()
    for _ in range(2):  # the second time is a replay after a restore
        writer = sink.create_writer(0, 1)
        writer.open(None)
        writer.write_batch([book(1), book(2, "first")])
        writer.write_batch([book(2, "second"), book(3)])
        writer.finish()
        writer.close()
    assert rows_of(postgres, table) == [(1, "title 1"), (2, "second"), (3, "title 3")]


def test_deletes_by_row_kind_and_updates_before_are_skipped(postgres):
    table = books_table(postgres)
    sink = JdbcSink.upsert_sink(table, BOOKS, "id", options(postgres))
    writer = sink.create_writer(0, 1)
    writer.open(None)
    before, after, gone = book(1, "old"), book(1, "new"), book(2)
    before.set_row_kind(RowKind.UPDATE_BEFORE)
    after.set_row_kind(RowKind.UPDATE_AFTER)
    gone.set_row_kind(RowKind.DELETE)
    writer.write_batch([book(1, "old"), book(2), book(3), before, after, gone, book(4)])
    back = book(2, "back")  # deleted, then inserted again in the same batch: order is kept
    writer.write_batch([back])
    writer.finish()
    assert rows_of(postgres, table) == [(1, "new"), (2, "back"), (3, "title 3"), (4, "title 4")]
    assert writer.result() == 7  # the skipped UPDATE_BEFORE is not written
    writer.close()


def test_an_upsert_statement_of_your_own_and_quoted_names(postgres):
    table = f'Odd "Books" %?_{uuid.uuid4().hex[:6]}'
    postgres.query(f'CREATE TABLE "{table.replace(chr(34), chr(34) * 2)}" ("Id" int PRIMARY KEY, "title?" text)')
    row_type = Types.ROW_NAMED(["Id", "title?"], [Types.INT(), Types.STRING()])
    quoted = '"' + table.replace('"', '""') + '"'
    sink = JdbcSink.upsert_sink(quoted, row_type, ["Id"], options(postgres))
    sink.validate()
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([(1, "a"), (2, "b"), (1, "c")])
    writer.finish()
    mine = JdbcSink.upsert_sink(f'INSERT INTO {quoted} ("Id", "title?") VALUES (?, ?) ON CONFLICT ("Id") DO UPDATE '
                                'SET "title?" = EXCLUDED."title?" || \'!\'', row_type, ["Id"], options(postgres))
    mine.validate()
    deleted = Row(**{"Id": 2, "title?": "b"})
    deleted.set_row_kind(RowKind.DELETE)
    writer = mine.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([(1, "d"), deleted])
    writer.finish()
    assert postgres.query(f'SELECT "Id", "title?" FROM {quoted} ORDER BY 1') == [(1, "d!")]


def test_a_large_upsert_batch_goes_through_a_staging_table_and_ends_as_row_by_row_upserts_would(postgres):
    """Batches of many rows are upserted through a staging table (COPY, then one INSERT ... ON CONFLICT of each
    key's last row): keys repeated in a batch, deletes between upserts and columns the sink does not write end as
    the same rows upserted one by one would leave them."""
    table = postgres.table("staged", "id int PRIMARY KEY, title varchar(20), authors text, year int, "
                                     "added timestamptz NOT NULL DEFAULT now()")
    sink = JdbcSink.upsert_sink(table, BOOKS, ["id"], options(postgres), execution(batch_size=1000))
    sink.validate()
    writer = sink.create_writer(0, 1)
    writer.open(None)
    model = {}
    records = []
    for n in range(600):  # runs of 280 upserts, 20 deletes, 300 upserts: keys repeat within each run
        i = n % 150
        if 280 <= n < 300:
            record = Row(**book(i).as_dict())
            record.set_row_kind(RowKind.DELETE)
            model.pop(i, None)
        else:
            record = book(i, f"v{n}")
            model[i] = f"v{n}"
        records.append(record)
    writer.write_batch(records)
    writer.finish()
    staging = postgres.query("SELECT count(*) FROM pg_class WHERE relname LIKE 'chandy_stage_%%' AND "
                             "relpersistence = 't'")
    writer.close()
    assert staging[0][0] >= 1, "the writer's session made its staging table"
    assert rows_of(postgres, table) == sorted(model.items())


def test_a_value_that_does_not_fit_in_a_staged_upsert_names_its_record(postgres):
    table = books_table(postgres)
    sink = JdbcSink.upsert_sink(table, BOOKS, ["id"], options(postgres), execution(batch_size=1000))
    writer = sink.create_writer(0, 1)
    writer.open(None)
    batch = [book(i) for i in range(100)] + [book(7, "a title longer than twenty characters")]
    with pytest.raises(RecordEncodingError, match=r"value too long for type character varying\(20\).*Field 'title'.*"
                                                  r"The record: \(7, 'a title longer"):
        writer.write_batch(batch)
        writer.finish()
    writer.close()
    assert rows_of(postgres, table) == []


# -- exactly once --------------------------------------------------------------------------------------------------


def test_prepared_transactions_stay_invisible_until_their_checkpoint_completes(postgres):
    table, prefix = books_table(postgres), f"t-{uuid.uuid4().hex[:8]}"
    sink = exactly_once(postgres, table, prefix)
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([book(1), book(2)])
    writer.snapshot_state(1)
    writer.write_batch([book(3)])
    assert rows_of(postgres, table) == []
    [gid] = postgres.prepared_transactions(f"chandy:{prefix}:")
    assert gid.startswith(f"chandy:{prefix}:{sink.run_id}:0:0:")
    writer.notify_checkpoint_complete(1)
    assert [i for i, _ in rows_of(postgres, table)] == [1, 2]
    assert postgres.prepared_transactions(f"chandy:{prefix}:") == []
    writer.finish()  # the last transaction waits for the checkpoint after the end
    assert [i for i, _ in rows_of(postgres, table)] == [1, 2]
    writer.snapshot_state(2)
    writer.notify_checkpoint_complete(2)
    writer.close()
    assert [i for i, _ in rows_of(postgres, table)] == [1, 2, 3]
    assert postgres.prepared_transactions(f"chandy:{prefix}:") == []  # nothing left behind
    assert writer.metrics() == {"transactions-committed": 2, "transactions-aborted": 0}


def test_a_restore_commits_its_checkpoint_and_rolls_back_what_came_after_but_not_another_sinks(postgres):
    table, prefix, neighbour = books_table(postgres), f"t-{uuid.uuid4().hex[:8]}", f"n-{uuid.uuid4().hex[:8]}"
    other_table = books_table(postgres)
    sink = exactly_once(postgres, table, prefix)
    others = exactly_once(postgres, other_table, neighbour)  # another sink on the same server
    theirs = others.create_writer(0, 1)
    theirs.open(None)
    theirs.write_batch([book(9)])
    theirs.snapshot_state(1)
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([book(1)])
    checkpoint = pickle.loads(pickle.dumps(writer.snapshot_state(1)))
    writer.write_batch([book(2)])
    writer.snapshot_state(2)  # prepared, but checkpoint 2 never completes: the process dies
    assert len(postgres.prepared_transactions(f"chandy:{prefix}:")) == 2
    restored = restarted(sink).create_writer(0, 1)
    restored.restore_state(checkpoint)
    assert [i for i, _ in rows_of(postgres, table)] == [1]  # checkpoint 1's transaction, committed
    assert postgres.prepared_transactions(f"chandy:{prefix}:") == []  # checkpoint 2's, rolled back
    assert len(postgres.prepared_transactions(f"chandy:{neighbour}:")) == 1  # the other sink's, untouched
    restored.open(None)
    restored.write_batch([book(2), book(3)])  # the replay
    restored.snapshot_state(2)
    restored.notify_checkpoint_complete(2)
    restored.close()
    assert [i for i, _ in rows_of(postgres, table)] == [1, 2, 3]
    theirs.notify_checkpoint_complete(1)
    theirs.close()
    assert rows_of(postgres, other_table) == [(9, "title 9")]


def test_another_runs_transactions_are_rolled_back_only_when_asked(postgres):
    table, prefix = books_table(postgres), f"t-{uuid.uuid4().hex[:8]}"
    earlier = exactly_once(postgres, table, prefix)  # a run that died without a checkpoint
    writer = earlier.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([book(1)])
    writer.snapshot_state(1)
    [lingering] = postgres.prepared_transactions(f"chandy:{prefix}:")
    for rollback in (False, True):
        sink = exactly_once(postgres, table, prefix, recovered_and_rollback=rollback)
        fresh = sink.create_writer(0, 1)
        fresh.open(None)  # a fresh start of subtask 0
        assert (lingering in postgres.prepared_transactions(f"chandy:{prefix}:")) is not rollback
        fresh.close()
    assert rows_of(postgres, table) == []
    with pytest.raises(OutputCommitError, match=r"is not prepared on the server any more, and it did not commit"):
        restarted(earlier).commit(writer.pending[0].transaction)


def test_committing_twice_is_harmless_and_leaves_one_bookkeeping_row_per_subtask(postgres):
    table, prefix = books_table(postgres), f"t-{uuid.uuid4().hex[:8]}"
    sink = exactly_once(postgres, table, prefix)
    writer = sink.create_writer(0, 1)
    writer.open(None)
    for checkpoint in (1, 2, 3):
        writer.write_batch([book(checkpoint)])
        writer.snapshot_state(checkpoint)
        transaction = writer.pending[-1].transaction
        writer.notify_checkpoint_complete(checkpoint)
        sink.commit(transaction)
        restarted(sink).commit(transaction)
    writer.close()
    assert [i for i, _ in rows_of(postgres, table)] == [1, 2, 3]
    assert postgres.query("SELECT sequence FROM chandy_jdbc_commits WHERE prefix = %s", (prefix,)) == [(2,)]
    assert postgres.prepared_transactions(f"chandy:{prefix}:") == []


def test_without_prepared_transactions_the_sink_says_how_to_enable_them(postgres):
    import os

    from tests.postgres_server import EXTERNAL_ENV, start_server

    try:
        disabled = start_server({"max_prepared_transactions": "0"}, external=False)
    except RuntimeError as error:
        if not os.environ.get(EXTERNAL_ENV):  # without an external server, the binaries are there: a real failure
            raise
        pytest.skip(f"with {EXTERNAL_ENV}, a second server (max_prepared_transactions = 0) needs local PostgreSQL "
                    f"binaries: {error}")
    try:
        table = books_table(disabled)
        sink = JdbcSink.exactly_once_sink(INSERT_BOOK.format(table), BOOKS, options(disabled))
        for attempt in (sink.validate, lambda: restarted(sink).create_writer(0, 1).open(None)):  # driver, executor
            with pytest.raises(ConfigurationError) as raised:
                attempt()
            message = str(raised.value)
            assert "max_prepared_transactions = 0" in message and "ALTER SYSTEM SET max_prepared_transactions" in \
                message and "restart the server" in message
        JdbcSink.sink(INSERT_BOOK.format(table), BOOKS, options(disabled)).validate()  # at least once needs none
    finally:
        disabled.stop()


# -- errors ---------------------------------------------------------------------------------------------------------


def test_an_unreachable_server_is_named_with_the_drivers_reason(postgres):
    from tests.postgres_server import _free_port

    port = _free_port()
    sink = JdbcSink.sink(INSERT_BOOK.format("books"), BOOKS,
                         options(postgres, url=f"jdbc:postgresql://127.0.0.1:{port}/shop"))
    with pytest.raises(ServerUnreachableError) as raised:
        sink.validate()
    message = str(raised.value)
    assert f"cannot connect to PostgreSQL at 127.0.0.1:{port}" in message and "Connection refused" in message
    assert "Is the server running" in message and raised.value.retryable


def test_a_wrong_password_and_a_missing_database_are_configuration_errors(postgres):
    with pytest.raises(ConfigurationError, match=rf"refused the login of user '{postgres.user}': .*password "
                                                 r"authentication failed.*with_password"):
        JdbcSink.sink(INSERT_BOOK.format("books"), BOOKS, options(postgres, password="wrong")).validate()
    url = postgres.jdbc_url.rsplit("/", 1)[0] + "/no_such_db"
    with pytest.raises(ConfigurationError, match=r'database "no_such_db" does not exist\. Create the database'):
        JdbcSink.sink(INSERT_BOOK.format("books"), BOOKS, options(postgres, url=url)).validate()


def test_a_missing_table_or_column_fails_before_the_job_naming_the_statement(postgres):
    with pytest.raises(ConfigurationError, match=r'relation "no_such_table" does not exist \(SQLSTATE 42P01\)\. '
                                                 r"Statement: insert into no_such_table"):
        JdbcSink.sink(INSERT_BOOK.format("no_such_table"), BOOKS, options(postgres)).validate()
    table = postgres.table("thin", "id int")
    with pytest.raises(ConfigurationError, match=r'column "title" of relation "thin_\w+" does not exist'):
        JdbcSink.exactly_once_sink(INSERT_BOOK.format(table), BOOKS, options(postgres)).validate()
    with pytest.raises(ConfigurationError, match=r'column "title" of relation "thin_\w+" does not exist'):
        JdbcSink.upsert_sink(table, BOOKS, ["id"], options(postgres)).validate()
    assert postgres.query(f"SELECT count(*) FROM {table}") == [(0,)]  # checking wrote nothing


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_value_that_does_not_fit_names_the_record_the_field_and_the_types(postgres, guarantee):
    table = books_table(postgres)
    if guarantee == "at-least-once":
        sink = JdbcSink.sink(INSERT_BOOK.format(table), BOOKS, options(postgres), execution(batch_size=10))
    else:
        sink = exactly_once(postgres, table, f"t-{uuid.uuid4().hex[:8]}")
    cases = [(book(3, "a title longer than twenty characters"), RecordEncodingError,
              r"value too long for type character varying\(20\) \(SQLSTATE 22001\)\. Field 'title' \(parameter 2, "
              r"column 'title'\): 'a title longer than twenty characters' \(str\) for character varying\. The record: "
              r"\(3, 'a title longer"),
             ((4, "t", "a", "MMXX"), RecordEncodingError,
              r"invalid input syntax for type integer: \"MMXX\".* Field 'year' \(parameter 4, column 'year'\): 'MMXX' "
              r"\(str\) is not a valid integer"),
             ((5, "t", "a", 2 ** 40), RecordEncodingError, r"integer out of range.* Field 'year' .*1099511627776 "
                                                          r"\(int\) is not a valid integer"),
             ((None, "t", "a", 2000), InvalidRecordError,
              r'null value in column "id".* Field \'id\' \(parameter 1, column \'id\'\): None \(NoneType\)\.'),
             ((6, "t", {"not": "adaptable"}, 2000), RecordEncodingError,
              r"Field 'authors' \(parameter 3, column 'authors'\): \{'not': 'adaptable'\} \(dict\), which psycopg "
              r"cannot send")]
    for record, error, message in cases:
        writer = sink.create_writer(0, 1)
        writer.open(None)
        with pytest.raises(error, match=message):
            writer.write_batch([book(1), book(2), record])
            writer.snapshot_state(1)
        writer.close()
    assert rows_of(postgres, table) == []  # nothing of a failed batch is in the table


def test_a_repeated_key_of_a_plain_insert_says_to_upsert(postgres):
    table = books_table(postgres)
    sink = JdbcSink.sink(INSERT_BOOK.format(table), BOOKS, options(postgres))
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([book(1), book(2), book(1)])
    with pytest.raises(InvalidRecordError, match=r"duplicate key value violates unique constraint.*The record: \(1, "
                                                 r"'title 1'.*JdbcSink.upsert_sink"):
        writer.finish()
    writer.close()


def test_the_writer_refuses_a_record_of_the_wrong_shape():
    sink = JdbcSink.sink("insert into books values (?, ?, ?, ?)", BOOKS,
                         JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url("jdbc:postgresql://h/d").build())
    with pytest.raises(InvalidRecordError, match=r"the record \(1, 'x'\) has 2 fields; the sink writes Rows \(or "
                                                 r"tuples\) of 4 fields in the row type's order \(id, title, authors, "
                                                 r"year\)"):
        sink.binding.bind([(1, "x")])


def test_transaction_ids_name_their_sink_run_subtask_and_sequence(postgres):
    table, prefix = books_table(postgres), f"t-{uuid.uuid4().hex[:8]}"
    sink = exactly_once(postgres, table, prefix)
    first = sink.begin_transaction(TransactionContext(sink.run_id, 3, 4, 17))
    second = sink.begin_transaction(TransactionContext(sink.run_id, 3, 4, 17))  # another attempt's, the same place
    assert first.gid.rsplit(":", 1)[0] == second.gid.rsplit(":", 1)[0] == f"chandy:{prefix}:{sink.run_id}:3:17"
    assert first.gid != second.gid  # never the same id twice
    sink.abort(first)
    sink.abort(second)
    sink.release(3)
