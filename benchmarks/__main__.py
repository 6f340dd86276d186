"""Benchmarks: ``python -m benchmarks [--quick]``.

Runs, in one process and one sitting, Chandy's reference job and the Spark Structured Streaming baseline
(throughput, latency, start-up from execute() to the first record at the sink, recovery ...), prints a table
with ratios, and writes JSON to ``benchmarks/results/``. ``--quick`` only proves that it runs (seconds); the
default is for reporting.
"""

from __future__ import annotations

import argparse
import os
import sys

from benchmarks.reporting import (
    format_rate,
    format_ratio,
    median_run,
    paired_overhead,
    ratio,
    report_header,
    results_ok,
    write_report,
)
from benchmarks.session import ROOT, spark_session


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs per Chandy variant, alternated, median reported (default 3; quick: 1)")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    parser.add_argument("--memory", action="store_true",
                        help="also python -m benchmarks.memory: resident memory with 1M keys over 10 minutes per state "
                             "backend (about 25 minutes; with --quick, about 2)")
    args = parser.parse_args(argv)

    import tempfile

    from benchmarks.backpressure import run_backpressure, run_savepoint
    from benchmarks.batch import expected_counts, run_bounded_reduce
    from benchmarks.checkpoint_dip import describe as describe_dip, run_checkpoint_dip
    from benchmarks.latency import run_chandy_latency, run_latency_job_peak, run_sss_latency
    from benchmarks.machine import cpu_steadiness
    from benchmarks.recovery import run_recovery
    from benchmarks.snapshot import measure_snapshot
    from benchmarks.spark_baseline import MIN_MEASURED_BATCHES, run_jvm_groupby_count, run_python_state_count
    from benchmarks.startup import print_startup, run_startup
    from benchmarks.throughput import run_chandy_reference_job
    from benchmarks.windows import (
        reference,
        run_chandy_window_latency,
        run_chandy_windowed,
        run_sss_window_latency,
        run_sss_windowed,
    )
    from runtime.datastream import RuntimeExecutionMode
    from state_backends.rocksdb import EmbeddedRocksDBStateBackend

    # quick: the fewest samples and micro-batches that still exercise every step and check every result
    steadiness_samples = 2 if args.quick else 8
    sss_batches = 1 if args.quick else MIN_MEASURED_BATCHES  # Spark's micro-batches measured after the warm-up one
    steadiness = [cpu_steadiness(steadiness_samples)]
    # Snapshot costs first, on a quiet machine (after Spark, its JVM's teardown descheduled the measurement).
    snapshots = [measure_snapshot(keys) for keys in ((10_000, 100_000) if args.quick else (100_000, 1_000_000))]
    # state of 10 MB .. 1 GB: 1 KiB values
    sizes = (1_000, 10_000) if args.quick else (10_000, 100_000, 1_000_000)
    snapshots += [measure_snapshot(keys, value_bytes=1024) for keys in sizes]

    records = 50_000 if args.quick else 10_000_000  # ~9 s a run: fixed start/stop costs stay under 2%
    columnar_records = 500_000 if args.quick else 100_000_000  # ~10 s at the columnar path's rate
    with spark_session(args.parallelism) as spark:
        repeats = args.repeats or (1 if args.quick else 3)
        run_chandy_reference_job(spark, 10_000, args.keys, args.parallelism)  # warm-up: Python workers, JIT
        run_chandy_reference_job(spark, 10_000, args.keys, args.parallelism, columnar=True)
        # execute() to the first record at the sink on this warm session, and its parts; SSS's start() to its
        # first output
        startup = run_startup(spark, 2 if args.quick else 7, 20_000 if args.quick else 200_000, args.keys,
                              args.parallelism, sss_runs=1 if args.quick else None, sss_warm_up=not args.quick)
        # (columnar, checkpoints): checkpoints are None, "aligned" or "unaligned" (the record API only)
        runs: dict[tuple[bool, str | None], list] = {(c, k): [] for c in (False, True) for k in (None, "aligned")}
        runs[False, "unaligned"] = []
        for repeat in range(repeats):  # alternated, so that drifts of the machine hit every variant alike:
            for columnar in (False, True):  # the variants of one path back to back, taking turns to go first
                kinds = [k for c, k in runs if c == columnar]
                for checkpoints_kind in kinds[repeat % len(kinds):] + kinds[:repeat % len(kinds)]:
                    n = columnar_records if columnar else records
                    with tempfile.TemporaryDirectory(prefix="chandy-bench-ck-") as checkpoints:
                        runs[columnar, checkpoints_kind].append(run_chandy_reference_job(
                            spark, n, args.keys, args.parallelism, checkpoints if checkpoints_kind else None, columnar,
                            unaligned=checkpoints_kind == "unaligned"))
        chandy, checkpointed = median_run(runs[False, None]), median_run(runs[False, "aligned"])
        unaligned_checkpointed = median_run(runs[False, "unaligned"])
        columnar, columnar_checkpointed = median_run(runs[True, None]), median_run(runs[True, "aligned"])
        baseline = run_jvm_groupby_count(spark, args.keys, rows_per_batch=20_000 if args.quick else 200_000,
                                         seconds=1 if args.quick else 30, min_batches=sss_batches)
        # (quick: 100 rows a batch, a second each where 1,000 took 3.5 s: each key's state goes through the state
        # server)
        python_state = run_python_state_count(spark, args.keys, rows_per_batch=100 if args.quick else 20_000,
                                              seconds=1 if args.quick else 40, min_batches=sss_batches)
        # latency at half of each system's measured peak (DESIGN §7); Chandy's at a quarter too, which tells
        # the engine's own latency from queueing when the machine's speed varies during the run
        # (quick: 1 s runs; the checkpoint a bounded job takes at its end has an alignment too)
        latencies = [
            run_chandy_latency(spark, chandy["records_per_s"] / 2, 1 if args.quick else 10, args.keys,
                               args.parallelism, "half of the reference job's peak"),
            run_chandy_latency(spark, chandy["records_per_s"] / 4, 1 if args.quick else 10, args.keys,
                               args.parallelism, "a quarter of the reference job's peak"),
            run_sss_latency(spark, (baseline["records_per_s"] or 2) / 2, 1 if args.quick else 20, args.keys,
                            sss_batches),
        ]
        # and at half of the latency job's own peak (its tuples cost more per record than the reference job's ints)
        latency_peak = run_latency_job_peak(spark, 100_000 if args.quick else int(chandy["records_per_s"] * 5),
                                            args.keys, args.parallelism)
        latencies.append(run_chandy_latency(spark, latency_peak / 2, 1 if args.quick else 10, args.keys,
                                            args.parallelism, f"half of its own peak ({latency_peak:,.0f}/s)"))
        recovery = run_recovery(spark, 400_000 if args.quick else 8_000_000, args.keys, args.parallelism,
                                full_rate=chandy["records_per_s"], interval_ms=200 if args.quick else 1000)
        # throughput while 1 KiB-per-key state is checkpointed: 10 MB (quick), 100 MB and 1 GB
        # (quick: paced at 500k/s for 3 s, so that its checkpoints fall within the run however fast the machine is)
        largest = 10_000 if args.quick else 1_000_000  # keys of 1 KiB: 10 MB, 1 GB
        dips = [run_checkpoint_dip(spark, keys, 1024, 3 if args.quick else 24,
                                   500_000 if args.quick else checkpointed["records_per_s"], args.parallelism,
                                   interval_s=1 if args.quick else 5, paced=args.quick)
                for keys in ((largest,) if args.quick else (100_000, largest))]
        # RocksDB with incremental checkpoints, 1 GB (quick: 10 MB, paced at 20k/s, a rate it keeps): 6 passes over
        # the keys, the first filling the state (~2 min at its ~60k records/s on this machine)
        dips.append(run_checkpoint_dip(spark, largest, 1024, 3 if args.quick else 6,
                                       20_000 if args.quick else largest, args.parallelism,
                                       interval_s=1 if args.quick else 5, paced=args.quick,
                                       state_backend=EmbeddedRocksDBStateBackend(True)))
        # the windowed reference job (10 s tumbling event-time count per key) beside SSS's windowed count
        window_records = 200_000 if args.quick else 10_000_000  # ~10 s a run, as the reference job
        expected_windows = reference(window_records)
        window_runs = []
        for repeat in range(repeats):
            with tempfile.TemporaryDirectory(prefix="chandy-bench-window-ck-") as checkpoints:
                window_runs.append(run_chandy_windowed(spark, window_records, args.parallelism, checkpoints,
                                                       expected_windows))
        windowed = median_run(window_runs)
        sss_windowed = run_sss_windowed(spark, rows_per_batch=20_000 if args.quick else 500_000,
                                        seconds=1 if args.quick else 30, min_batches=sss_batches)
        window_latencies = [
            run_chandy_window_latency(spark, (windowed["records_per_s"] or 100_000) / 2, 1.5 if args.quick else 10,
                                      args.parallelism),
            run_sss_window_latency(spark, (sss_windowed["records_per_s"] or 100_000) / 2, 2 if args.quick else 20,
                                   sss_batches),
        ]
        # the same bounded job in batch and in streaming mode, alternated: batch mode is there to be faster
        bounded_records = 200_000 if args.quick else 10_000_000
        expected_bounded = expected_counts(bounded_records, args.keys)
        bounded_runs: dict = {RuntimeExecutionMode.BATCH: [], RuntimeExecutionMode.STREAMING: []}
        for repeat in range(repeats):
            modes = [RuntimeExecutionMode.BATCH, RuntimeExecutionMode.STREAMING]
            for mode in modes if repeat % 2 == 0 else modes[::-1]:
                bounded_runs[mode].append(run_bounded_reduce(spark, bounded_records, args.keys, args.parallelism, mode,
                                                             expected_bounded))
        batch, streaming = (median_run(bounded_runs[m]) for m in (RuntimeExecutionMode.BATCH,
                                                                  RuntimeExecutionMode.STREAMING))
        # checkpoints behind a sink taking 2 ms per record: aligned and unaligned, without and with debloating
        # (quick: 0.2 ms, so that a cancelled job's sink, asleep for a batch of 4,096 records, holds its Spark task
        # 0.8 s, not 8: Spark then kills its Python worker, and the next job waited for new ones past its 1 s
        # window)
        per_record_ms = 0.2 if args.quick else 2.0
        # quick: checkpoints every 200 ms, and each variant's window lasts until one has completed, so that what the
        # report says of checkpoints under backpressure is about some
        backpressure = [run_backpressure(spark, per_record_ms, 1.0 if args.quick else 30, args.parallelism, debloat,
                                         unaligned, timeout, interval_ms=200 if args.quick else 1000,
                                         min_checkpoints=1 if args.quick else 0)
                        for unaligned, debloat, timeout in ((False, False, 0), (False, True, 0), (True, False, 0),
                                                            (True, True, 0), (True, True, 300))]
        savepoints = [run_savepoint(spark, keys, 1024, args.parallelism)
                      for keys in ((10_000,) if args.quick else (100_000, 1_000_000))]
    steadiness.append(cpu_steadiness(steadiness_samples))

    report = {**report_header("throughput", args.quick, steadiness),
              "results": [chandy, checkpointed, columnar, columnar_checkpointed, baseline, python_state,
                          unaligned_checkpointed],
              "snapshots": snapshots, "latency": latencies, "recovery": recovery, "checkpoint_dip": dips}
    jvm, python = baseline["records_per_s"], python_state["records_per_s"]
    print(f"machine: {report['machine']}")
    before, after = ("{loop_ms_min}-{loop_ms_max} ms".format(**s) for s in steadiness)
    print(f"steadiness: one fixed Python loop took {before} before the run, {after} after: "
          f"{report['cpu_steadiness']['verdict']}")
    print(f"{'variant':42} {'records/s':>16} {'steady/s':>12} {'vs SSS JVM':>11} {'vs SSS Py':>10} exact")
    for row in report["results"]:
        versus = [format_ratio(ratio(row["records_per_s"] if row["measured"] else None, b)) for b in (jvm, python)]
        print(f"{row['variant']:42} {format_rate(row):>16} {row.get('steady_records_per_s') or 0:>12,} "
              f"{versus[0]:>11} {versus[1]:>10} {row['exact']}")
    for row in latencies:
        alignment = f", checkpoint alignment up to {row['max_alignment_ms']} ms" if "max_alignment_ms" in row else ""
        measured = (f"p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, max {row['max_ms']} ms{alignment}"
                    if row["measured"] else "measured nothing")
        basis = f" ({row['basis']})" if row.get("basis") else ""
        print(f"latency {row['variant']:34} at {row['rate']:>9,}/s{basis}: {measured}")
    overhead = paired_overhead(runs[False, None], runs[False, "aligned"])
    unaligned_overhead = paired_overhead(runs[False, "aligned"], runs[False, "unaligned"])
    columnar_overhead = paired_overhead(runs[True, None], runs[True, "aligned"])
    percent = lambda x: "n/a" if x is None else f"{x:.1%}"
    print(f"checkpointing overhead (median of back-to-back pairs): record API {percent(overhead)} "
          f"({checkpointed['checkpoints']} checkpoints, max sync part {checkpointed['max_checkpoint_sync_ms']} ms, "
          f"median alignment {checkpointed['median_alignment_ms']} ms); "
          f"columnar {percent(columnar_overhead)} ({columnar_checkpointed['checkpoints']} checkpoints); unaligned "
          f"checkpoints vs aligned {percent(unaligned_overhead)}")
    for row in dips:
        print(describe_dip(row))
    for row in snapshots:
        print(f"heap snapshot of {row['keys']:>9,} keys x {row['value_bytes'] or 8:>4} B: sync {row['sync_ms']:>7.3f} ms "
              f"(median {row['sync_median_ms']:.3f}), "
              f"async {row['async_ms']:>8.1f} ms, {row['bytes']:>13,} bytes")
    print(f"recovery after SIGKILL: first record after {recovery['first_record_after_kill_s']} s, full rate "
          f"after {recovery['full_rate_after_kill_s']} s")
    window_ratio = format_ratio(ratio(windowed["records_per_s"] if windowed["measured"] else None,
                                      sss_windowed["records_per_s"]))
    for row in (windowed, sss_windowed):
        print(f"{row['variant']:42} {format_rate(row):>16} {'':>12} "
              f"{window_ratio if row is windowed else '1.00x':>11} {'':>10} {row['exact']}")
    for row in window_latencies:
        measured = (f"p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, max {row['max_ms']} ms"
                    if row["measured"] else "measured nothing")
        print(f"window result after its end {row['variant']:32} at {row['rate']:>9,}/s: {measured}")
    report["windows"] = {"results": [windowed, sss_windowed], "latency": window_latencies}
    batch_ratio = format_ratio(ratio(batch["records_per_s"] if batch["measured"] else None,
                                     streaming["records_per_s"]))
    for row in (batch, streaming):
        versus = format_ratio(ratio(row["records_per_s"] if row["measured"] else None, jvm))
        print(f"{row['variant']:42} {format_rate(row):>16} {row['records_emitted']:>12,} {versus:>11} "
              f"{'':>10} {row['exact']}" + (f"  ({batch_ratio} streaming mode)" if row is batch else ""))
    report["batch"] = {"results": [batch, streaming], "batch_vs_streaming": ratio(
        batch["records_per_s"] if batch["measured"] else None, streaming["records_per_s"])}
    for row in backpressure:
        print(f"under backpressure ({row['per_record_ms']} ms per record at the sink, {row['seconds']} s), "
              f"{row['variant']}: {row['checkpoints']} of {row['triggered']} checkpoints completed, duration median "
              f"{row['median_duration_ms']} ms, max {row['max_duration_ms']} ms; start delay median "
              f"{row['median_start_delay_ms']} ms, max {row['max_start_delay_ms']} ms; {row['unaligned_checkpoints']} "
              f"unaligned; alignment max "
              f"{row['max_alignment_ms']} ms; in flight stored median {row['median_persisted_bytes']} B, max "
              f"{row['max_persisted_bytes']} B")
    for row in savepoints:
        print(f"savepoint of {row['state_bytes']:>13,} bytes of keyed state: {row['savepoint_ms']:,} ms, "
              f"{row['savepoint_bytes']:,} bytes")
    print_startup(startup)
    report["startup"] = startup
    report["backpressure"] = backpressure
    report["savepoints"] = savepoints
    report["checkpoint_overhead"] = overhead
    report["unaligned_overhead"] = unaligned_overhead
    report["columnar_checkpoint_overhead"] = columnar_overhead
    write_report(args.out, "throughput", args.quick, report)
    ok = all(results_ok(rows) for rows in (report["results"], report["windows"]["results"], report["batch"]["results"]))
    ok = ok and startup["exact"]
    if args.memory:  # in a process of its own: its Spark session does not reuse Python workers
        from benchmarks.memory import run_in_own_process

        ok = run_in_own_process(args.quick, args.out) == 0 and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
