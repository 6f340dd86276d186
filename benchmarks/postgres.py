"""The keyed reference job into PostgreSQL: rows per second through the at-least-once, upsert and exactly-once
sinks, beside the limit (a plain ``COPY`` of the same rows from one psycopg connection) and Spark Structured
Streaming's JVM count measured in the same run.

The job counts per key with ``CountPerKey`` (checkpoints every second, parallelism 2) and writes one row
``(key, count)`` per input record: ``JdbcSink.sink`` and ``JdbcSink.exactly_once_sink`` insert every running
count, ``JdbcSink.upsert_sink`` keeps each key's latest count in a table keyed by ``k``. A run's rate is input
records over the job's wall time, launch included. Every run's table is checked against the plain-Python
reference (every running count once; the upsert table: each key's final count).

The server is the tests' (``tests/postgres_server.py``: a private cluster from Debian's binaries, on a free
port), or the one ``CHANDY_TEST_POSTGRES`` names.

    python -m benchmarks.postgres [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import collections
import io
import os
import statistics
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("at_least_once", "upsert", "exactly_once")


def _reference(records: int, keys: int) -> tuple[collections.Counter, collections.Counter]:
    """Each key's final count, and every running count ``(key, n)`` the job writes.

    >>> final, running = _reference(5, 2)
    >>> sorted(final.items()), sorted(running)
    ([(0, 3), (1, 2)], [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2)])
    """
    per_key = collections.Counter(i % keys for i in range(records))
    running = collections.Counter((k, n) for k, c in per_key.items() for n in range(1, c + 1))
    return per_key, running


def copy_limit(server, records: int, keys: int) -> float:
    """Rows per second of one ``COPY`` of the job's rows (the reference computed beforehand): the server's limit
    for these rows over one connection."""
    table = server.table("bench_copy", "k bigint NOT NULL, n bigint NOT NULL")
    counts: collections.Counter = collections.Counter()
    buffer = io.StringIO()
    for i in range(records):
        k = i % keys
        counts[k] += 1
        buffer.write(f"{k}\t{counts[k]}\n")
    data = buffer.getvalue()
    with server.connect() as connection:
        started = time.perf_counter()
        with connection.cursor().copy(f"COPY {table} (k, n) FROM STDIN") as copy:
            copy.write(data)
        elapsed = time.perf_counter() - started
    return records / elapsed


def run_job(spark, server, mode: str, records: int, keys: int, parallelism: int) -> dict:
    from runtime import StreamExecutionEnvironment
    from runtime.common import Row, Types
    from runtime.datastream.connectors.jdbc import (
        JdbcConnectionOptions,
        JdbcExactlyOnceOptions,
        JdbcExecutionOptions,
        JdbcSink,
    )
    from runtime.tools.demo import CountPerKey

    row_type = Types.ROW_NAMED(["k", "n"], [Types.LONG(), Types.LONG()])
    primary_key = " PRIMARY KEY" if mode == "upsert" else " NOT NULL"
    table = server.table(f"bench_{mode}", f"k bigint{primary_key}, n bigint NOT NULL")
    options = (JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(server.jdbc_url)
               .with_user_name(server.user).with_password(server.password).build())
    execution = JdbcExecutionOptions.builder().with_batch_size(5000).with_batch_interval_ms(200).build()
    if mode == "at_least_once":
        sink = JdbcSink.sink(f"INSERT INTO {table} (k, n) VALUES (?, ?)", row_type, options, execution)
    elif mode == "upsert":
        sink = JdbcSink.upsert_sink(table, row_type, ["k"], options, execution)
    else:
        sink = JdbcSink.exactly_once_sink(
            f"INSERT INTO {table} (k, n) VALUES (?, ?)", row_type, options, execution,
            JdbcExactlyOnceOptions.builder().with_transaction_id_prefix(f"bench-{table}").build())
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.enable_checkpointing(1000)
    with tempfile.TemporaryDirectory(prefix="chandy-bench-postgres-") as checkpoints:
        env.get_checkpoint_config().set_checkpoint_storage(checkpoints)
        (env.from_sequence(0, records - 1).map(lambda i: i % keys, output_type=Types.LONG())
            .key_by(lambda k: k).process(CountPerKey())
            .map(lambda kv: Row(k=kv[0], n=kv[1]), output_type=row_type)
            .add_sink(sink))
        started = time.perf_counter()
        result = env.execute(f"bench-postgres-{mode}")
        elapsed = time.perf_counter() - started
    per_key, running = _reference(records, keys)
    rows = server.query(f"SELECT k, n FROM {table}")
    exact = sorted(rows) == sorted(per_key.items()) if mode == "upsert" else collections.Counter(rows) == running
    server.query(f"DROP TABLE {table}")
    return {"variant": f"chandy-postgres-{mode}", "records": records, "wall_s": round(elapsed, 3),
            "records_per_s": round(records / elapsed), "checkpoints": len(result.checkpoints),
            "restarts": result.restarts, "exact": exact, "measured": True}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.postgres", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="runs of each mode (alternated)")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.reporting import describe_run, ratio, report_header, write_report
    from benchmarks.session import spark_session
    from benchmarks.machine import cpu_steadiness
    from benchmarks.spark_baseline import run_jvm_groupby_count
    from tests.postgres_server import start_server

    records = args.records or (20_000 if args.quick else 500_000)
    repeats = args.repeats or (1 if args.quick else 3)
    steadiness = [cpu_steadiness()]
    server = start_server()
    with spark_session(args.parallelism) as spark:
        try:
            limit = round(copy_limit(server, records, args.keys))
            run_job(spark, server, "at_least_once", min(records, 20_000), args.keys, args.parallelism)  # warm-up
            runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
            for repeat in range(repeats):
                order = MODES[repeat % len(MODES):] + MODES[:repeat % len(MODES)]  # each mode takes its turn first
                for mode in order:
                    runs[mode].append(run_job(spark, server, mode, records, args.keys, args.parallelism))
            jvm = run_jvm_groupby_count(spark, args.keys, rows_per_batch=20_000 if args.quick else 200_000,
                                        seconds=6 if args.quick else 20)
        finally:
            server.stop()
    steadiness.append(cpu_steadiness())
    medians = {mode: statistics.median(r["records_per_s"] for r in rows) for mode, rows in runs.items()}
    report = {
        **report_header("postgres", args.quick, steadiness),
        "records": records, "keys": args.keys, "parallelism": args.parallelism, "repeats": repeats,
        "server": "CHANDY_TEST_POSTGRES" if os.environ.get("CHANDY_TEST_POSTGRES") else "private PostgreSQL cluster",
        "copy_limit_rows_per_s": limit, "runs": runs, "median_records_per_s": medians,
        "over_copy_limit": {m: ratio(medians[m], limit) for m in MODES},
        "spark_sss_jvm": jvm, "over_sss_jvm": {m: ratio(medians[m], jvm["records_per_s"]) for m in MODES},
        "exact": all(r["exact"] for rows in runs.values() for r in rows),
    }
    print(describe_run(report))
    print(f"COPY limit {limit:,} rows/s; SSS JVM count {jvm['records_per_s'] or 0:,}/s")
    for mode in MODES:
        print(f"{mode:14}: runs {[r['records_per_s'] for r in runs[mode]]}/s, median {medians[mode]:,.0f}/s = "
              f"{report['over_copy_limit'][mode]:.2f}x COPY, {report['over_sss_jvm'][mode] or 0:.2f}x SSS JVM, "
              f"exact {all(r['exact'] for r in runs[mode])}")
    write_report(args.out, "postgres", args.quick, report)
    return 0 if report["exact"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
