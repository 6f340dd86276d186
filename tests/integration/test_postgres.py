"""PostgreSQL out and in, exactly once, through real failures: the keyed reference job writes every running count of a
key through ``JdbcSink.exactly_once_sink`` (each row must appear once) and the latest count of each key through
``JdbcSink.upsert_sink``, while a map raises once, a worker is SIGKILLed mid-stream, and a worker is SIGKILLed
between PREPARE TRANSACTION and COMMIT PREPARED. The tables are compared with the same counts computed in plain
Python; no prepared transaction is left on the server. And change data capture in: a snapshot and the changes
committed while the job runs arrive once each through an exception, a SIGKILLed worker and a server restart."""

import collections
import os
import random
import signal

from operators import CollectSink
from runtime import RestartStrategies
from runtime.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from runtime.datastream.connectors.postgres import PostgresSource
from tests.integration import chaos, paced
from tests.integration.jobs import RUNNING_COUNT as COUNT
from tests.integration.jobs import faulty_running_counts
from tests.integration.waiting import wait_for

N, KEYS = 12_000, 41


def connection_options(postgres):
    return (JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(postgres.jdbc_url)
            .with_driver_name("org.postgresql.Driver").with_user_name(postgres.user)
            .with_password(postgres.password).build())


def test_exactly_once_and_upsert_tables_equal_the_reference_after_an_exception_and_kills(env, tmp_path, postgres):
    running = postgres.table("running_counts", "k bigint NOT NULL, n bigint NOT NULL")
    latest = postgres.table("latest_counts", "k bigint PRIMARY KEY, n bigint NOT NULL")
    faults = ("raise-in-map", "kill-in-map", "kill-before-commit")
    counts, chaos_dir, rng = faulty_running_counts(env, tmp_path, faults, N, KEYS, per_checkpoint=600,
                                                   spare_restarts=2)
    options = connection_options(postgres)
    execution = JdbcExecutionOptions.builder().with_batch_size(200).with_batch_interval_ms(0).with_max_retries(0) \
        .build()
    prefix = f"chandy-test-{running}"
    exactly_once = JdbcSink.exactly_once_sink(
        f"INSERT INTO {running} (k, n) VALUES (?, ?)", COUNT, options, execution,
        JdbcExactlyOnceOptions.builder().with_transaction_id_prefix(prefix).build())
    counts.add_sink(chaos.dying_before_commit(exactly_once, chaos_dir)).uid("exactly-once")
    counts.add_sink(JdbcSink.upsert_sink(latest, COUNT, ["k"], options, execution)).uid("upsert")
    result = env.execute("postgres-out")

    assert chaos.remaining(chaos_dir) == [] and result.restarts >= 2, (chaos.remaining(chaos_dir), result.restarts)
    per_key = collections.Counter(x % KEYS for x in range(N))
    assert sorted(postgres.query(f"SELECT k, n FROM {running}")) == \
        sorted((k, n) for k, c in per_key.items() for n in range(1, c + 1)), "every running count exactly once"
    assert sorted(postgres.query(f"SELECT k, n FROM {latest}")) == sorted(per_key.items())
    assert postgres.prepared_transactions() == [], "no prepared transaction outlives the job"


def test_change_data_capture_emits_every_committed_change_once_through_an_exception_a_kill_and_a_server_restart(
        env, tmp_path, postgres):
    """A snapshot of 1,500 rows, then 90 transactions of inserts, updates and deletes committed while the job runs:
    a map raises during the snapshot, a worker is SIGKILLed and the server restarted while changes stream. Every
    snapshot row and every committed change must arrive exactly once (each change writes a version of its own)."""
    table = postgres.table("accounts", "id int PRIMARY KEY, version bigint NOT NULL, balance bigint NOT NULL")
    postgres.query(f"ALTER TABLE {table} REPLICA IDENTITY FULL")  # updates and deletes carry the old row
    postgres.query(f"INSERT INTO {table} SELECT g, g, 100 FROM generate_series(1, 1500) g")
    expected = collections.Counter(("+I", i, i, 100) for i in range(1, 1501))
    slot = f"accounts_{table.rsplit('_', 1)[1]}"
    source = (PostgresSource.builder().hostname(postgres.host).port(postgres.port).database(postgres.database)
              .username(postgres.user).password(postgres.password).table_list(f"public.{table}").slot_name(slot)
              .split_size(50).build())
    chaos_dir = chaos.plan(str(tmp_path / "chaos"), "raise-in-snapshot")
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(4, 0))
    sink = CollectSink("changes")
    (env.from_source(paced.PacedSource(source, per_checkpoint=200), "accounts").uid("cdc")
     .map(chaos.ChaosMap(chaos_dir, "raise-in-snapshot", "raise", 300)).uid("chaos")
     .map(lambda row: (str(row.get_row_kind()), row["id"], row["version"], row["balance"])).uid("plain")
     .sink_to(sink).uid("sink"))
    client = env.execute_async("postgres-cdc")
    try:
        # The slot is also active for the moment its creating command runs, before the first attempt's snapshot:
        # changes committed from then on would be read by the second attempt's snapshot as rows, not as changes.
        # The first attempt fails in the snapshot; a later one holds the slot only while it streams.
        streaming = "SELECT active FROM pg_replication_slots WHERE slot_name = %s"
        wait_for(lambda: "raise-in-snapshot" not in chaos.remaining(chaos_dir)
                 and postgres.query(streaming, (slot,)) == [(True,)], what="the stream after the snapshot")
        writer = ChangeWriter(postgres, table, first_id=1501, first_version=10_000, existing=range(1, 1501))
        for step in ("kill", "restart-server", None):
            expected.update(writer.transactions(30))
            wait_for(lambda: writer.confirmed(slot), what="a checkpoint covering the changes so far")
            if step == "kill":
                os.kill(random.choice([r.pid for r in client._run.control.registrations.values()]), signal.SIGKILL)
            elif step == "restart-server":
                postgres.restart()
        savepoint = client.stop_with_savepoint(str(tmp_path / "savepoints"))
        result = client.get_job_execution_result()
    finally:
        postgres.query("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s "
                       "AND NOT active", (slot,))
    assert savepoint and chaos.remaining(chaos_dir) == [] and result.restarts >= 3, result.restarts
    assert collections.Counter(result.collected(sink)) == expected


class ChangeWriter:
    """Commits transactions of several inserts, updates and deletes, and says which change events they make."""

    def __init__(self, postgres, table, first_id, first_version, existing):
        self.postgres, self.table = postgres, table
        self.next_id, self.next_version = first_id, first_version
        self.rows = {i: (i, 100) for i in existing}  # id -> (version, balance)
        self.rng = random.Random()
        self.last_commit = None

    def transactions(self, count):
        events = []
        for _ in range(count):
            with self.postgres.connect(autocommit=False) as connection:
                # the test server commits asynchronously: the commit record may wait in memory after the commit
                # returns, past the write position read below, and the stream cannot carry it before it is flushed
                connection.execute("SET LOCAL synchronous_commit = on")
                for _ in range(self.rng.randint(2, 5)):
                    events.extend(self._statement(connection))
        # after the commit: read inside the transaction, the position was before its commit record, and a slot
        # confirmed up to a keepalive's position past it said nothing of the last transaction
        ((self.last_commit,),) = self.postgres.query("SELECT pg_current_wal_lsn()::text")
        return events

    def _statement(self, connection):
        table, version = self.table, self.next_version
        self.next_version += 1
        choice = self.rng.random()
        if choice < 0.4 or len(self.rows) < 10:
            row_id, self.next_id = self.next_id, self.next_id + 1
            balance = self.rng.randrange(1000)
            connection.execute(f"INSERT INTO {table} VALUES (%s, %s, %s)", (row_id, version, balance))
            self.rows[row_id] = (version, balance)
            return [("+I", row_id, version, balance)]
        row_id = self.rng.choice(sorted(self.rows))
        old_version, old_balance = self.rows[row_id]
        if choice < 0.8:
            balance = old_balance + self.rng.randrange(-50, 50)
            connection.execute(f"UPDATE {table} SET version = %s, balance = %s WHERE id = %s", (version, balance, row_id))
            self.rows[row_id] = (version, balance)
            return [("-U", row_id, old_version, old_balance), ("+U", row_id, version, balance)]
        connection.execute(f"DELETE FROM {table} WHERE id = %s", (row_id,))
        del self.rows[row_id]
        return [("-D", row_id, old_version, old_balance)]

    def confirmed(self, slot):
        """Whether the slot's confirmed position (moved only by completed checkpoints) is past the last commit's
        record."""
        rows = self.postgres.query("SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE "
                                   "slot_name = %s", (self.last_commit, slot))
        return rows == [(True,)]
