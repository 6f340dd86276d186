"""Rows per second into a Delta Lake table and an Iceberg table with checkpoints every second, beside the limit (one
plain ``write_deltalake`` of the same rows from this process) and Spark Structured Streaming's JVM count measured in
the same run.

Three jobs, parallelism 2, each run checked against the plain-Python reference:

- **delta-records** and **iceberg-records**: the keyed reference job (``CountPerKey``) writes every running count
  ``(k, n)``: one Python record per row until the sink's writer turns them into Arrow batches;
- **delta-columnar**: a columnar sequence (10x the records) becomes ``(k, v)`` batches with ``pyarrow.compute`` and
  goes to the table with no per-record Python (the columnar path).

A run's rate is input records over the job's wall time, launch included.

    python -m benchmarks.table_sinks [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("delta-records", "iceberg-records", "delta-columnar")
COLUMNAR_FACTOR = 10  # the columnar path runs 10x the records, so that its launch does not make its rate


def write_limit(records: int, keys: int, directory: str) -> float:
    """Rows per second of one ``write_deltalake`` of the running counts (computed beforehand)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    counts: collections.Counter = collections.Counter()
    ks, ns = [], []
    for i in range(records):
        k = i % keys
        counts[k] += 1
        ks.append(k)
        ns.append(counts[k])
    table = pa.table({"k": pa.array(ks, pa.int64()), "n": pa.array(ns, pa.int64())})
    started = time.perf_counter()
    write_deltalake(os.path.join(directory, "limit"), table, mode="append")
    return records / (time.perf_counter() - started)


def run_job(spark, mode: str, records: int, keys: int, parallelism: int, directory: str) -> dict:
    import pyarrow as pa
    import pyarrow.compute as pc

    from runtime import StreamExecutionEnvironment
    from runtime.common import Row, Types
    from runtime.datastream.connectors.delta import DeltaSink
    from runtime.datastream.connectors.iceberg import IcebergSink
    from runtime.tools.demo import CountPerKey

    where = tempfile.mkdtemp(dir=directory, prefix=f"{mode}-")
    row_type = Types.ROW_NAMED(["k", "n"], [Types.LONG(), Types.LONG()])
    catalog = {"type": "sql", "uri": f"sqlite:///{where}/catalog.db", "warehouse": f"file://{where}/warehouse"}
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.join(where, "checkpoints"))
    if mode == "delta-columnar":
        schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
        records *= COLUMNAR_FACTOR
        stream = env.from_sequence(0, records - 1, columnar=True).map_batches(
            lambda b: {"k": pc.bit_wise_and(b["value"], keys - 1), "v": b["value"]}, schema=schema)
    else:
        stream = (env.from_sequence(0, records - 1).map(lambda i: i % keys, output_type=Types.LONG())
                  .key_by(lambda k: k).process(CountPerKey())
                  .map(lambda kv: Row(k=kv[0], n=kv[1]), output_type=row_type))
    sink = IcebergSink(catalog, "bench.counts") if mode.startswith("iceberg") else DeltaSink(f"{where}/table")
    stream.sink_to(sink)
    started = time.perf_counter()
    result = env.execute(f"bench-{mode}")
    elapsed = time.perf_counter() - started
    if mode.startswith("iceberg"):
        rows = sink.table().scan().to_arrow()
    else:
        from deltalake import DeltaTable
        rows = DeltaTable(f"{where}/table").to_pyarrow_table()
    if mode == "delta-columnar":
        exact = sorted(rows["v"].to_pylist()) == list(range(records))
    else:
        per_key = collections.Counter(i % keys for i in range(records))
        exact = collections.Counter(zip(rows["k"].to_pylist(), rows["n"].to_pylist())) == collections.Counter(
            (k, n) for k, c in per_key.items() for n in range(1, c + 1))
    return {"variant": f"chandy-{mode}", "records": records, "wall_s": round(elapsed, 3),
            "records_per_s": round(records / elapsed), "checkpoints": len(result.checkpoints),
            "restarts": result.restarts, "exact": exact, "measured": True}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.table_sinks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1024, help="a power of two (the columnar job masks with it)")
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="runs of each mode (alternated)")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.reporting import describe_run, ratio, report_header, write_report
    from benchmarks.session import spark_session
    from benchmarks.machine import cpu_steadiness
    from benchmarks.spark_baseline import run_jvm_groupby_count

    records = args.records or (20_000 if args.quick else 1_000_000)
    repeats = args.repeats or (1 if args.quick else 3)
    steadiness = [cpu_steadiness()]
    with spark_session(args.parallelism) as spark, \
            tempfile.TemporaryDirectory(prefix="chandy-bench-tables-") as directory:
        limit = round(write_limit(records, args.keys, directory))
        run_job(spark, "delta-records", min(records, 20_000), args.keys, args.parallelism, directory)  # warm-up
        runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
        for repeat in range(repeats):
            order = MODES[repeat % len(MODES):] + MODES[:repeat % len(MODES)]
            for mode in order:
                runs[mode].append(run_job(spark, mode, records, args.keys, args.parallelism, directory))
        jvm = run_jvm_groupby_count(spark, args.keys, rows_per_batch=20_000 if args.quick else 200_000,
                                    seconds=6 if args.quick else 20)
    steadiness.append(cpu_steadiness())
    medians = {mode: statistics.median(r["records_per_s"] for r in rows) for mode, rows in runs.items()}
    report = {
        **report_header("table_sinks", args.quick, steadiness),
        "records": records, "keys": args.keys, "parallelism": args.parallelism, "repeats": repeats,
        "write_deltalake_limit_rows_per_s": limit, "runs": runs, "median_records_per_s": medians,
        "over_write_limit": {m: ratio(medians[m], limit) for m in MODES},
        "spark_sss_jvm": jvm, "over_sss_jvm": {m: ratio(medians[m], jvm["records_per_s"]) for m in MODES},
        "exact": all(r["exact"] for rows in runs.values() for r in rows),
    }
    print(describe_run(report))
    print(f"write_deltalake limit {limit:,} rows/s; SSS JVM count {jvm['records_per_s'] or 0:,}/s")
    for mode in MODES:
        print(f"{mode:15}: runs {[r['records_per_s'] for r in runs[mode]]}/s, median {medians[mode]:,.0f}/s = "
              f"{report['over_write_limit'][mode]:.3f}x write_deltalake, {report['over_sss_jvm'][mode] or 0:.2f}x "
              f"SSS JVM, exact {all(r['exact'] for r in runs[mode])}")
    write_report(args.out, "table_sinks", args.quick, report)
    return 0 if report["exact"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
