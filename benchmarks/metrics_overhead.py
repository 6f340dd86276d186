"""What metrics cost: the reference job (record API, checkpoints every second) with metrics on and off, in
alternation, and Spark Structured Streaming's JVM count measured in the same run for scale.

"Off" is ``spark.chandy.metricsInterval=0``: no reports, and no counting per batch in the operator chains (the
channels' per-batch counters stay: they are one integer addition per batch sent or taken). "On" is the
default: counting, a report per slot every second, the driver's aggregation, and the dashboard's web server
up (nobody polls it here; a poll is answered on the driver's worker threads, not by the job).

    python -m benchmarks.metrics_overhead [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

__all__ = ["main"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metrics_overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="runs of each variant (alternated)")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.__main__ import ratio, start_spark, steadiness_verdict, write_report
    from benchmarks.machine import cpu_steadiness, describe_machine
    from benchmarks.spark_baseline import run_jvm_groupby_count
    from benchmarks.throughput import run_chandy_reference_job
    from runtime.driver.metrics import METRICS_INTERVAL_CONF

    records = args.records or (50_000 if args.quick else 4_000_000)
    repeats = args.repeats or (1 if args.quick else 6)
    steadiness = [cpu_steadiness()]
    spark = start_spark(args.parallelism)
    run_chandy_reference_job(spark, 10_000, args.keys, args.parallelism)  # warm-up
    runs: dict[str, list] = {"on": [], "off": []}
    for repeat in range(repeats):
        for variant in (("on", "off") if repeat % 2 == 0 else ("off", "on")):
            spark.conf.set(METRICS_INTERVAL_CONF, "1 s" if variant == "on" else "0")
            with tempfile.TemporaryDirectory(prefix="chandy-bench-ck-") as checkpoints:
                row = run_chandy_reference_job(spark, records, args.keys, args.parallelism, checkpoints)
            runs[variant].append(row)
    spark.conf.unset(METRICS_INTERVAL_CONF)
    jvm = run_jvm_groupby_count(spark, args.keys, rows_per_batch=20_000 if args.quick else 200_000,
                                seconds=6 if args.quick else 20)
    spark.stop()
    steadiness.append(cpu_steadiness())

    rates = {variant: [row["records_per_s"] for row in rows if row["records_per_s"]] for variant, rows in runs.items()}
    medians = {variant: statistics.median(values) if values else None for variant, values in rates.items()}
    # Each "on" run against the "off" run next to it: the machine's drift cancels out of each pair.
    pairs = [on["records_per_s"] / off["records_per_s"] for on, off in zip(runs["on"], runs["off"])
             if on["records_per_s"] and off["records_per_s"]]
    report = {
        "benchmark": "metrics-overhead", "quick": args.quick, "machine": describe_machine(),
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_steadiness": {"before": steadiness[0], "after": steadiness[1],
                           "verdict": steadiness_verdict(steadiness)},
        "records": records, "parallelism": args.parallelism, "repeats": repeats,
        "runs": runs, "median_records_per_s": medians,
        "on_over_off_median": ratio(medians["on"], medians["off"]),
        "on_over_off_pairs": [round(p, 4) for p in pairs],
        "on_over_off_pairs_median": round(statistics.median(pairs), 4) if pairs else None,
        "spark_sss_jvm": jvm,
        "exact": all(row["exact"] for rows in runs.values() for row in rows),
    }
    print(f"machine: {report['machine']}; steadiness: {report['cpu_steadiness']['verdict']}")
    for variant in ("on", "off"):
        print(f"metrics {variant:3}: runs {rates[variant]} records/s, median {medians[variant]:,.0f}/s = "
              f"{ratio(medians[variant], jvm['records_per_s']) or 0:.2f}x SSS JVM ({jvm['records_per_s'] or 0:,}/s)")
    print(f"on/off: medians {report['on_over_off_median']}, per pair {report['on_over_off_pairs']} (median "
          f"{report['on_over_off_pairs_median']}); exact: {report['exact']}")
    write_report(args.out, "metrics-overhead", args.quick, report)
    return 0 if report["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
