"""PostgreSQL out, exactly once, through real failures: the keyed reference job writes every running count of a
key through ``JdbcSink.exactly_once_sink`` (each row must appear once) and the latest count of each key through
``JdbcSink.upsert_sink``, while a map raises once, a worker is SIGKILLed mid-stream, and a worker is SIGKILLed
between PREPARE TRANSACTION and COMMIT PREPARED. The tables are compared with the same counts computed in plain
Python; no prepared transaction is left on the server."""

import collections
import random

from operators import KeyedProcessFunction, SequenceSource, ValueStateDescriptor
from runtime import RestartStrategies
from runtime.common import Row, Types
from runtime.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from tests.integration import chaos, paced

N, KEYS = 12_000, 41
COUNT = Types.ROW_NAMED(["k", "n"], [Types.LONG(), Types.LONG()])


class RunningCount(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield Row(k=value, n=n)


def connection_options(postgres):
    return (JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(postgres.jdbc_url)
            .with_driver_name("org.postgresql.Driver").with_user_name(postgres.user)
            .with_password(postgres.password).build())


def test_exactly_once_and_upsert_tables_equal_the_reference_after_an_exception_and_kills(env, tmp_path, postgres):
    running = postgres.table("running_counts", "k bigint NOT NULL, n bigint NOT NULL")
    latest = postgres.table("latest_counts", "k bigint PRIMARY KEY, n bigint NOT NULL")
    faults = ("raise-in-map", "kill-in-map", "kill-before-commit")
    chaos_dir = chaos.plan(str(tmp_path / "chaos"), *faults)
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(len(faults) + 2, 0))
    rng = random.Random()
    numbers = paced.PacedSource(SequenceSource(0, N - 1), per_checkpoint=600, end_when=paced.DirectoryEmpty(chaos_dir),
                                together=str(tmp_path / "paced"))
    counts = (env.from_source(numbers, "numbers").uid("numbers")
              .map(chaos.ChaosMap(chaos_dir, "raise-in-map", "raise", rng.randrange(500, 2500))).uid("chaos-raise")
              .map(lambda x: x % KEYS).uid("key")
              .key_by(lambda k: k).process(RunningCount(), output_type=COUNT).uid("count")
              .map(chaos.ChaosMap(chaos_dir, "kill-in-map", "kill", rng.randrange(500, 2500)), output_type=COUNT)
              .uid("chaos-kill"))
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
