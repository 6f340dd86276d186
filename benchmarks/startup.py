"""Start-up: from ``execute_async()`` to the first record at the sink with a warm SparkSession, and its parts.

Target (issue 36): at most 2 s. One SparkSession (``benchmarks.session.start_spark``), warmed by a throwaway job,
runs the reference job of ``benchmarks.throughput`` (record API, exactly-once checkpoints every second) several
times. A run's total goes from the call to ``execute_async()`` to the time the benchmark sink noted for its first
record; its parts come from the runtime's start-up marks (:mod:`runtime.protocol.startup`, taken by the driver and
sent by the slots in their metrics reports): graph compile (with the checks and the Spark conf read), pickling,
launch (the job master's thread and control server), stage submission (Spark schedules the barrier tasks onto
Python workers), worker start (a forked worker's start and imports: none when Spark reuses one), unpickling the job
in the task, slot setup, rendezvous (registering, every slot's address, channels connected), the first record at a
source and at the sink. For a ratio, Spark Structured Streaming on the same session: the time from a query's
``start()`` to its first micro-batch's output at a ``foreachBatch`` sink, the reference job's groupBy count.

    python -m benchmarks.startup [--quick] [--runs 7]

Each part's median and spread over the runs (a part a run did not reach is left out of it):

>>> runs = [{"compile": 10.0, "total": 900.0}, {"compile": 30.0, "total": 700.0}, {"compile": 20.0, "total": None}]
>>> summarise(runs)["compile"], summarise(runs)["total"]
({'median_ms': 20.0, 'min_ms': 10.0, 'max_ms': 30.0, 'runs': 3}, {'median_ms': 800.0, 'min_ms': 700.0, 'max_ms': 900.0, 'runs': 2})
>>> print(format_table(summarise(runs)))
part                           median ms    min ms    max ms
compile                             20.0      10.0      30.0
total                              800.0     700.0     900.0
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_MS = 2000.0  # the target: execute() to the first record at the sink, warm SparkSession
SSS_TIMEOUT_S = 120.0


def summarise(runs: list[dict]) -> dict[str, dict]:
    """Per part (in the runs' order of parts): median, min and max milliseconds over the runs that reached it."""
    summary: dict[str, dict] = {}
    for part in dict.fromkeys(name for run in runs for name in run):
        values = [run[part] for run in runs if run.get(part) is not None]
        if values:
            summary[part] = {"median_ms": round(statistics.median(values), 1), "min_ms": round(min(values), 1),
                             "max_ms": round(max(values), 1), "runs": len(values)}
    return summary


def format_table(summary: dict[str, dict]) -> str:
    lines = [f"{'part':28} {'median ms':>11} {'min ms':>9} {'max ms':>9}"]
    lines += [f"{part:28} {row['median_ms']:>11.1f} {row['min_ms']:>9.1f} {row['max_ms']:>9.1f}"
              for part, row in summary.items()]
    return "\n".join(lines)


def run_chandy_startup(spark, records: int, keys: int, parallelism: int) -> dict:
    """One run of the checkpointed reference job: its result row with ``startup_ms``, the parts of its start-up
    (the last, ``total``, from the call to ``execute_async()`` to the sink's first record)."""
    from benchmarks.throughput import run_chandy_reference_job

    clients: list = []
    with tempfile.TemporaryDirectory(prefix="chandy-bench-startup-ck-") as checkpoints:
        row = run_chandy_reference_job(spark, records, keys, parallelism, checkpoints, while_running=clients.append)
    # the slots' marks came with their final metrics reports, read before the job ended
    row["startup_ms"] = clients[0]._run.startup_phases(first_sink_record=row["first_record_at"])
    return row


def run_sss_first_output(spark, keys: int, rows_per_batch: int = 10_000) -> dict:
    """Spark Structured Streaming's start-up on the same session: from ``start()`` of the reference job's groupBy
    count (``rate-micro-batch`` source, update mode, a checkpoint location) to the end of its first micro-batch
    with output, whose rows a ``foreachBatch`` sink collected to the driver."""
    from pyspark.sql import functions as F

    from benchmarks.spark_baseline import query_checkpoint_dir

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    first = threading.Event()
    noted: dict = {}

    def gather(batch, batch_id):
        rows = batch.collect()
        if rows and not first.is_set():
            noted.update(at=time.time(), batch=batch_id, records=sum(row["count"] for row in rows))
            first.set()

    with query_checkpoint_dir("chandy-sss-startup-") as checkpoint:
        stream = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
                  .option("numPartitions", 2).load())
        writer = (stream.select((F.col("value") % keys).alias("k")).groupBy("k").count()
                  .writeStream.outputMode("update").foreachBatch(gather).option("checkpointLocation", checkpoint))
        started = time.time()
        query = writer.start()
        try:
            measured = first.wait(SSS_TIMEOUT_S)
        finally:
            query.stop()
    return {"variant": "spark-sss-jvm-groupby-count", "measured": measured,
            "exact": measured and noted["records"] == rows_per_batch and noted["batch"] == 0,
            "first_output_ms": round((noted["at"] - started) * 1000, 1) if measured else None}


def run_startup(spark, runs: int, records: int, keys: int, parallelism: int, sss_runs: int | None = None,
                sss_warm_up: bool = True) -> dict:
    """``runs`` Chandy start-ups and ``sss_runs`` (default: as many) of Structured Streaming's, alternated, on a
    session the caller warmed with a Chandy job; a throwaway SSS query goes first (its Python callback server), unless
    ``sss_warm_up`` is False (a quick run: then the first SSS run's time includes what the throwaway takes)."""
    sss_runs = runs if sss_runs is None else sss_runs
    if sss_warm_up:
        run_sss_first_output(spark, keys)
    chandy, sss = [], []
    for i in range(max(runs, sss_runs)):
        if i < runs:
            chandy.append(run_chandy_startup(spark, records, keys, parallelism))
        if i < sss_runs:
            sss.append(run_sss_first_output(spark, keys))
    summary = summarise([row["startup_ms"] for row in chandy])
    sss_summary = summarise([{"first output": row["first_output_ms"]} for row in sss])
    total = summary.get("total", {}).get("median_ms")
    sss_median = sss_summary.get("first output", {}).get("median_ms")
    return {"records": records, "keys": keys, "parallelism": parallelism, "target_ms": TARGET_MS,
            "parts": summary, "within_target": total is not None and total <= TARGET_MS,
            "exact": all(row["exact"] for row in chandy), "runs": chandy,
            "sss": {"first_output": sss_summary.get("first output"), "runs": sss,
                    "exact": all(row["exact"] for row in sss)},
            "chandy_over_sss": round(total / sss_median, 3) if total is not None and sss_median else None}


def print_startup(result: dict) -> None:
    print(f"start-up of the reference job ({result['records']:,} records, parallelism {result['parallelism']}, "
          f"checkpoints every 1 s), warm SparkSession, {len(result['runs'])} runs:")
    print(format_table(result["parts"]))
    total = result["parts"].get("total", {}).get("median_ms")
    sss = result["sss"]["first_output"] or {}
    print(f"execute() to the first record at the sink: median {total} ms (target {TARGET_MS:.0f} ms: "
          f"{'met' if result['within_target'] else 'NOT met'}); Spark Structured Streaming, start() to its first "
          f"batch's output: median {sss.get('median_ms')} ms ({sss.get('min_ms')}..{sss.get('max_ms')}), "
          f"ratio Chandy/SSS {result['chandy_over_sss']}; exact {result['exact']} / {result['sss']['exact']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 2 runs: proves it runs")
    parser.add_argument("--runs", type=int, default=None, help="start-ups measured (default 9; quick: 2)")
    parser.add_argument("--records", type=int, default=None, help="records per run (default 200,000)")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.reporting import describe_run, report_header, write_report
    from benchmarks.session import spark_session
    from benchmarks.machine import cpu_steadiness
    from benchmarks.throughput import run_chandy_reference_job

    runs = args.runs or (2 if args.quick else 9)
    records = args.records or (20_000 if args.quick else 200_000)
    steadiness = [cpu_steadiness()]
    with spark_session(args.parallelism) as spark:
        run_chandy_reference_job(spark, 10_000, args.keys, args.parallelism)  # throwaway: workers, imports
        result = run_startup(spark, runs, records, args.keys, args.parallelism)
    steadiness.append(cpu_steadiness())
    report = {**report_header("startup", args.quick, steadiness), **result}
    print(describe_run(report))
    print_startup(result)
    write_report(args.out, "startup", args.quick, report)
    return 0 if result["exact"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
