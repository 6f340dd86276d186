"""Change data capture from PostgreSQL: changes per second through ``PostgresSource`` under update load, and the lag
from a change's commit to its record leaving the source (p50, p99, max), beside the server's own decoding rate of
the same changes (the limit) and Spark Structured Streaming's JVM count measured in the same run.

The job streams one table (``StartupOptions.latest()``, checkpoints every second) into a probe chained right after
the source, which compares each record's commit time (its event time) with the clock. Two loads, one after the
other:

- **burst**: transactions of 1,000 updates each, committed as fast as one connection can; the rate is the changes
  the probe saw over the time between the first and the last (the source is the bottleneck);
- **paced**: transactions of 10 updates at a fixed rate well below that; the lag of each change is measured there.

The limit is ``pg_logical_slot_peek_binary_changes`` over the burst on a second slot: the server decoding the same
changes with ``pgoutput``, counted in SQL, with no client in the way. Every run checks that the job saw each change
once (the probe's count equals the changes committed).

    python -m benchmarks.postgres_cdc [--quick]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time

from operators import ProcessFunction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BURST_TRANSACTION = 1000
PACED_TRANSACTION = 10


class LagProbe(ProcessFunction):
    """Emits ``(load, records of the load so far, wall time in ms, lag in ms)`` for every ``sample``-th record of the
    burst and every record of the paced load (the burst table's rows have a column ``v``, the paced table's ``w``)."""

    def __init__(self, sample: int):
        self.sample = sample
        self.seen = {"burst": 0, "paced": 0}

    def process_element(self, row, ctx):
        load = "burst" if "v" in row else "paced"
        self.seen[load] += 1
        if load == "paced" or self.seen[load] % self.sample == 1 or self.sample == 1:
            now = time.time() * 1000
            yield load, self.seen[load], now, now - ctx.timestamp()


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) by the nearest rank.

    >>> percentile([5, 1, 3, 2, 4], 0.5), percentile(list(range(1, 101)), 0.99)
    (3, 99)
    """
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


def decoding_limit(server, slot: str, publication: str) -> tuple[int, float]:
    """Changes the server decodes per second from ``slot`` (row changes counted in SQL)."""
    started = time.perf_counter()
    (changes,) = server.query(
        "SELECT count(*) FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, 'proto_version', '1', "
        "'publication_names', %s) WHERE get_byte(data, 0) IN (73, 85, 68)", (slot, publication))[0]
    return changes, changes / (time.perf_counter() - started)


def _confirmed(server, slot: str, lsn: str) -> bool:
    return server.query("SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = %s",
                        (lsn, slot)) == [(True,)]


def _wait(predicate, what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"benchmark: timed out waiting for {what}")
        time.sleep(0.05)


def run(spark, server, burst: int, paced_rate: int, paced_s: float) -> dict:
    from operators import CollectSink
    from runtime import StreamExecutionEnvironment
    from runtime.datastream.connectors.postgres import PostgresSource, StartupOptions

    burst_table = server.table("bench_cdc_burst", "id int PRIMARY KEY, v bigint NOT NULL")
    paced_table = server.table("bench_cdc_paced", "id int PRIMARY KEY, w bigint NOT NULL")
    server.query(f"INSERT INTO {burst_table} SELECT g, 0 FROM generate_series(1, {BURST_TRANSACTION}) g")
    server.query(f"INSERT INTO {paced_table} SELECT g, 0 FROM generate_series(1, {PACED_TRANSACTION}) g")
    slot = f"bench_{burst_table.rsplit('_', 1)[1]}"
    source = (PostgresSource.builder().hostname(server.host).port(server.port).database(server.database)
              .username(server.user).password(server.password)
              .table_list(f"public.{burst_table}", f"public.{paced_table}").slot_name(slot)
              .startup_options(StartupOptions.latest()).build())
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(1)
    env.enable_checkpointing(1000)
    sink = CollectSink("lags")
    sample = max(1, burst // 2000)
    with tempfile.TemporaryDirectory(prefix="chandy-bench-cdc-") as checkpoints:
        env.get_checkpoint_config().set_checkpoint_storage(checkpoints)
        env.from_source(source, "cdc").process(LagProbe(sample)).sink_to(sink)
        client = env.execute_async("bench-postgres-cdc")
        limit_slot = f"{slot}_limit"
        try:
            _wait(lambda: server.query("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
                  == [(True,)], "the stream")
            server.query("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (limit_slot,))
            last = None
            with server.connect() as connection:
                # the server sends only what is flushed: each commit flushes, not the WAL writer's next round
                connection.execute("SET synchronous_commit = on")
                for _ in range(burst // BURST_TRANSACTION):
                    connection.execute(f"UPDATE {burst_table} SET v = v + 1")
                (last,) = connection.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            decoded, limit = decoding_limit(server, limit_slot, source.publication)
            _wait(lambda: _confirmed(server, slot, last), "the burst read")
            interval, sent = 1.0 / (paced_rate / PACED_TRANSACTION), 0
            with server.connect() as connection:
                connection.execute("SET synchronous_commit = on")
                started = time.perf_counter()
                while time.perf_counter() - started < paced_s:
                    connection.execute(f"UPDATE {paced_table} SET w = w + 1")
                    sent += 1
                    time.sleep(max(0.0, started + sent * interval - time.perf_counter()))
                (last,) = connection.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            _wait(lambda: _confirmed(server, slot, last), "the paced load read")
            client.stop_with_savepoint(os.path.join(checkpoints, "savepoint"))
            result = client.get_job_execution_result()
        finally:
            server.query("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN "
                         "(%s, %s) AND NOT active", (slot, limit_slot))
    samples = result.collected(sink)
    burst_samples = sorted((s for s in samples if s[0] == "burst"), key=lambda s: s[1])
    lags = [s[3] for s in samples if s[0] == "paced"]
    seen = burst_samples[-1][1] if burst_samples else 0
    span_s = (burst_samples[-1][2] - burst_samples[0][2]) / 1000 if len(burst_samples) > 1 else 0
    rate = (burst_samples[-1][1] - burst_samples[0][1]) / span_s if span_s > 0 else None
    paced_changes = sent * PACED_TRANSACTION
    return {"burst_changes": burst, "decoded_by_server": decoded, "server_decoding_per_s": round(limit),
            "changes_per_s": round(rate) if rate else None,
            "exact": seen >= burst - sample and len(lags) == paced_changes and decoded == burst,
            "paced_changes_per_s": paced_rate, "paced_changes": paced_changes,
            "lag_ms": {"p50": round(percentile(lags, 0.5), 1), "p99": round(percentile(lags, 0.99), 1),
                       "max": round(max(lags), 1)} if lags else None,
            "restarts": result.restarts}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.postgres_cdc", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--burst", type=int, default=None, help="changes in the burst (a multiple of 1,000)")
    parser.add_argument("--paced-rate", type=int, default=2000, help="changes per second of the paced load")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.reporting import describe_run, ratio, report_header, write_report
    from benchmarks.session import spark_session
    from benchmarks.machine import cpu_steadiness
    from benchmarks.spark_baseline import run_jvm_groupby_count
    from tests.postgres_server import start_server

    burst = args.burst or (20_000 if args.quick else 300_000)
    steadiness = [cpu_steadiness()]
    server = start_server()
    with spark_session(2) as spark:
        try:
            run(spark, server, 10_000, args.paced_rate, 1.0)  # warm-up
            runs = [run(spark, server, burst, args.paced_rate, 3.0 if args.quick else 10.0)
                    for _ in range(1 if args.quick else 3)]
            jvm = run_jvm_groupby_count(spark, 1000, rows_per_batch=20_000 if args.quick else 200_000,
                                        seconds=6 if args.quick else 20)
        finally:
            server.stop()
    steadiness.append(cpu_steadiness())
    rate = statistics.median(r["changes_per_s"] or 0 for r in runs)
    limit = statistics.median(r["server_decoding_per_s"] for r in runs)
    report = {
        **report_header("postgres_cdc", args.quick, steadiness),
        "runs": runs, "median_changes_per_s": rate, "median_server_decoding_per_s": limit,
        "over_server_decoding": ratio(rate, limit), "spark_sss_jvm": jvm,
        "over_sss_jvm": ratio(rate, jvm["records_per_s"]), "exact": all(r["exact"] for r in runs),
    }
    print(describe_run(report))
    print(f"server decoding {limit:,.0f} changes/s; SSS JVM count {jvm['records_per_s'] or 0:,}/s")
    print(f"CDC: runs {[r['changes_per_s'] for r in runs]} changes/s, median {rate:,.0f}/s = "
          f"{report['over_server_decoding'] or 0:.2f}x the server's decoding, {report['over_sss_jvm'] or 0:.2f}x SSS "
          f"JVM; lag at {args.paced_rate}/s {[r['lag_ms'] for r in runs]}; exact {report['exact']}")
    write_report(args.out, "postgres_cdc", args.quick, report)
    return 0 if report["exact"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
