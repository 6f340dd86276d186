"""Benchmarks: ``python -m benchmarks [--quick]``.

Runs, in one process and one sitting, Chandy's reference job and the Spark Structured Streaming baseline,
prints a table with ratios, and writes JSON to ``benchmarks/results/``. ``--quick`` only proves that it
runs (seconds); the default is for reporting.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_spark(slots: int):
    # Executors' Python workers must import this package (the benchmark sink lives here).
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(f"local[{slots}]").appName("chandy-benchmarks")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.machine import describe_machine
    from benchmarks.spark_baseline import run_jvm_groupby_count
    from benchmarks.throughput import run_chandy_reference_job

    records = 50_000 if args.quick else 5_000_000
    spark = start_spark(args.parallelism)
    run_chandy_reference_job(spark, 10_000, args.keys, args.parallelism)  # warm-up: Python workers, JIT
    chandy = run_chandy_reference_job(spark, records, args.keys, args.parallelism)
    baseline = run_jvm_groupby_count(spark, args.keys, rows_per_batch=20_000 if args.quick else 200_000,
                                     seconds=6 if args.quick else 30)
    spark.stop()

    report = {"benchmark": "throughput", "quick": args.quick, "machine": describe_machine(),
              "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "results": [chandy, baseline]}
    base = baseline["records_per_s"] or 0
    print(f"machine: {report['machine']}")
    print(f"{'variant':42} {'records/s':>12} {'steady/s':>12} {'vs SSS JVM':>11} exact")
    for row in report["results"]:
        rate = row["records_per_s"] or 0
        ratio = f"{rate / base:.2f}x" if base else "n/a"
        print(f"{row['variant']:42} {rate:>12,} {row.get('steady_records_per_s') or 0:>12,} {ratio:>11} "
              f"{row.get('exact', '')}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"throughput-{'quick-' if args.quick else ''}"
                                  f"{datetime.datetime.now().strftime('%Y%m%dT%H%M%S')}.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
    print(f"written: {path}")
    return 0 if chandy["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
