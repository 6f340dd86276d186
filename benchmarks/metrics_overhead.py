"""What metrics cost: the reference job (record API, checkpoints every second) with metrics on and off, in
alternation, and Spark Structured Streaming's JVM count measured in the same run for scale.

"Off" is ``spark.chandy.metricsInterval=0``: no reports, and no counting per batch in the operator chains (the
channels' per-batch counters stay: they are one integer addition per batch sent or taken). "On" is the
default: counting, a report per slot every second, the driver's aggregation, and the dashboard's web server
up (nobody polls it here; a poll is answered on the driver's worker threads, not by the job).

Wall-clock rates on a shared 2-core machine vary by more than metrics can cost (another tenant takes the cores
now and then), so the run also measures what the machine's load moves much less: the CPU time the job's
processes spend per record (the executors' Python workers, read from /proc, plus the driver process, which
aggregates the reports and runs the web server), on and off, and the counting itself: the time of one
``count_records`` call on a batch of the default size, times the counts a record's batch meets on the reference
job's way, per record.

    python -m benchmarks.metrics_overhead [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

__all__ = ["main"]


# Counts a batch meets in the reference job (source -> map | key_by -> process -> sink, two chains): into map,
# out of chain 0, channel send, channel take, into process, into the sink, out of chain 1.
COUNTS_PER_BATCH = 7


def measure_counting(batch: int) -> dict:
    """What counting costs per record: one ``count_records`` call on a batch of ``batch`` Python records, the
    fastest of several timings (the machine's noise only ever adds)."""
    import timeit

    from runtime.protocol.records import count_records

    records = list(range(batch))
    calls = 200_000
    ns = min(timeit.repeat(lambda: count_records(records), number=calls, repeat=5)) / calls * 1e9
    return {"batch": batch, "ns_per_call": round(ns, 1), "counts_per_batch": COUNTS_PER_BATCH,
            "ns_per_record": round(ns * COUNTS_PER_BATCH / batch, 3)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metrics_overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="runs of each variant (alternated)")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.reporting import ratio, steadiness_verdict, write_report
    from benchmarks.session import spark_session
    from benchmarks.machine import cpu_steadiness, describe_machine
    from benchmarks.spark_baseline import run_jvm_groupby_count
    from benchmarks.throughput import alternated_reference_runs, run_chandy_reference_job
    from runtime.datastream.stream_execution_environment import DEFAULT_BATCH_SIZE
    from runtime.driver.metrics import METRICS_INTERVAL_CONF

    records = args.records or (50_000 if args.quick else 4_000_000)
    repeats = args.repeats or (1 if args.quick else 6)
    steadiness = [cpu_steadiness()]
    with spark_session(args.parallelism) as spark:
        run_chandy_reference_job(spark, 10_000, args.keys, args.parallelism)  # warm-up
        def prepare(variant: str) -> None:
            spark.conf.set(METRICS_INTERVAL_CONF, "1 s" if variant == "on" else "0")

        runs = alternated_reference_runs(spark, ("on", "off"), repeats, records, args.keys, args.parallelism, prepare)
        spark.conf.unset(METRICS_INTERVAL_CONF)
        counting = measure_counting(DEFAULT_BATCH_SIZE)
        jvm = run_jvm_groupby_count(spark, args.keys, rows_per_batch=20_000 if args.quick else 200_000,
                                    seconds=6 if args.quick else 20)
    steadiness.append(cpu_steadiness())

    rates = {variant: [row["records_per_s"] for row in rows if row["records_per_s"]] for variant, rows in runs.items()}
    medians = {variant: statistics.median(values) if values else None for variant, values in rates.items()}
    # Each "on" run against the "off" run next to it: the machine's drift cancels out of each pair.
    pairs = [on["records_per_s"] / off["records_per_s"] for on, off in zip(runs["on"], runs["off"])
             if on["records_per_s"] and off["records_per_s"]]
    cpu = {variant: statistics.median(row["cpu_us_per_record"] for row in rows) for variant, rows in runs.items()}
    cpu_pairs = [on["cpu_us_per_record"] / off["cpu_us_per_record"] for on, off in zip(runs["on"], runs["off"])]
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
        "cpu_us_per_record": cpu,
        "cpu_on_over_off_pairs": [round(p, 4) for p in cpu_pairs],
        "cpu_on_over_off_pairs_median": round(statistics.median(cpu_pairs), 4),
        "counting": counting,
        "counting_share_at_median_rate": round(counting["ns_per_record"] * 1e-9 * medians["on"] / args.parallelism, 6)
        if medians["on"] else None,
        "exact": all(row["exact"] for rows in runs.values() for row in rows),
    }
    print(f"machine: {report['machine']}; steadiness: {report['cpu_steadiness']['verdict']}")
    for variant in ("on", "off"):
        print(f"metrics {variant:3}: runs {rates[variant]} records/s, median {medians[variant]:,.0f}/s = "
              f"{ratio(medians[variant], jvm['records_per_s']) or 0:.2f}x SSS JVM ({jvm['records_per_s'] or 0:,}/s)")
    print(f"counting: {counting['ns_per_call']:.0f} ns per count of a {counting['batch']}-record batch, "
          f"{counting['counts_per_batch']} counts per batch on the way: {counting['ns_per_record']:.2f} ns per record, "
          f"{report['counting_share_at_median_rate'] or 0:.3%} of a record's time at the median rate")
    print(f"CPU per record: on {cpu['on']:.3f} us, off {cpu['off']:.3f} us; on/off per pair "
          f"{report['cpu_on_over_off_pairs']} (median {report['cpu_on_over_off_pairs_median']})")
    print(f"on/off: medians {report['on_over_off_median']}, per pair {report['on_over_off_pairs']} (median "
          f"{report['on_over_off_pairs_median']}); exact: {report['exact']}")
    write_report(args.out, "metrics-overhead", args.quick, report)
    return 0 if report["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
