"""Lookups of queryable state while the reference job runs at half of its measured peak: their latency, next to
how long Spark Structured Streaming takes to make an event visible in its state (its event-to-state latency at
half of its own peak, measured in the same run: SSS has no lookup of live state, so the nearest thing a user of
it can read is the state a micro-batch has committed).

1. Peak: the reference job (record API, exactly-once checkpoints every second, parallelism 2), unthrottled.
2. At half that rate, the same job with its running count queryable; a client on the driver's machine looks up
   a random key over the REST API (``QueryableStateClient.get``) every 10 ms for the whole run, timing each
   lookup from the call to its answer (HTTP, the driver's routing, the subtask's answer between two batches).
   The final counts are checked against the plain-Python reference. Each lookup's parts come from the server's
   ``Server-Timing`` (``QueryableStateClient.last_timings``): the client (HTTP both ways, in this process),
   the driver (from reading the request to sending the query), the connection to the slot and its control thread
   (both ways), the wait in the slot until the subtask took it up, and the read; the report has each part's
   percentiles and its mean share of the slowest 1% of lookups.
3. SSS: the JVM groupBy count's peak, then its event-to-state latency at half of it (``benchmarks.latency``).

    python -m benchmarks.queryable_state [--quick]

Target (the issue): lookup p99 <= 20 ms while the job runs at half load.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOKUP_EVERY_S = 0.01


def run_queryable_job(spark, rate: float, seconds: float, keys: int, parallelism: int) -> dict:
    from benchmarks.latency import percentiles
    from runtime.tools.count_sink import FinalCountSink
    from operators import KeyedProcessFunction, ValueStateDescriptor
    from operators.sources import SequenceSource
    from runtime import StreamExecutionEnvironment, Types
    from runtime.errors import QueryableStateError
    from runtime.tools.queryable_state import QueryableStateClient

    class QueryableCount(KeyedProcessFunction):
        def open(self, runtime_context):
            descriptor = ValueStateDescriptor("count", Types.LONG())
            descriptor.set_queryable("counts")
            self.count = runtime_context.get_state(descriptor)

        def process_element(self, value, ctx):
            n = (self.count.value() or 0) + 1
            self.count.update(n)
            yield value, n

    records = int(rate * seconds)
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.enable_checkpointing(1000)
    sink = FinalCountSink()
    lookups_ms: list[float] = []
    parts: list[dict[str, float]] = []
    answered = missing = 0
    with tempfile.TemporaryDirectory(prefix="chandy-bench-queryable-") as checkpoints:
        env.get_checkpoint_config().set_checkpoint_storage(checkpoints)
        (env.from_source(SequenceSource(0, records - 1, records_per_second=rate), None, "rate-limited")
            .map(lambda x: x % keys, output_type=Types.LONG())
            .key_by(lambda k: k).process(QueryableCount()).uid("count")
            .sink_to(sink))
        job = env.execute_async("benchmark-queryable-state")
        # No retries: a lookup refused while the job starts is not timed, rather than timed with its waits.
        client = QueryableStateClient(job.get_dashboard_url(with_token=True), retry_for_s=0)
        done = threading.Event()
        threading.Thread(target=lambda: (job.get_job_execution_result(), done.set()), daemon=True).start()
        rng = random.Random(0)
        while not done.is_set():
            key = rng.randrange(keys)
            started = time.perf_counter()
            try:
                value = client.get("counts", key)
            except QueryableStateError:  # starting (states not declared yet) or just ended
                done.wait(LOOKUP_EVERY_S)
                continue
            lookups_ms.append((time.perf_counter() - started) * 1000.0)
            parts.append(lookup_parts(lookups_ms[-1], client.last_timings))
            answered += value is not None
            missing += value is None
            done.wait(LOOKUP_EVERY_S)
        result = job.get_job_execution_result()
    (seen, latest, _, _), = result.sink_results.values()
    exact = seen == records and latest == {k: records // keys + (k < records % keys) for k in range(keys)}
    return {"variant": "chandy-queryable-state-lookup", "rate": round(rate), "lookups": len(lookups_ms),
            "answered_with_a_value": answered, "answered_none": missing, "measured": bool(lookups_ms),
            "exact": exact, **percentiles(sorted(lookups_ms)), "parts": describe_parts(lookups_ms, parts)}


PARTS = ("client", "driver", "to-slot-and-back", "subtask-wait", "state-read")


def lookup_parts(total_ms: float, timings: dict[str, float]) -> dict[str, float]:
    """A lookup's time in parts that add up to ``total_ms``, from the server's timings.

    >>> lookup_parts(10.0, {"driver": 8.0, "slot": 6.0, "subtask-wait": 3.0, "state-read": 0.5})
    {'client': 2.0, 'driver': 2.0, 'to-slot-and-back': 2.5, 'subtask-wait': 3.0, 'state-read': 0.5}
    """
    driver, slot = timings.get("driver", 0.0), timings.get("slot", 0.0)
    wait, read = timings.get("subtask-wait", 0.0), timings.get("state-read", 0.0)
    return {"client": total_ms - driver, "driver": driver - slot, "to-slot-and-back": slot - wait - read,
            "subtask-wait": wait, "state-read": read}


def describe_parts(totals_ms: list[float], parts: list[dict[str, float]]) -> dict:
    """Each part's p50 and p99 over all lookups, and its mean share of the slowest 1% (at least one lookup)."""
    from benchmarks.latency import percentiles
    if not parts:
        return {}
    slowest = sorted(range(len(totals_ms)), key=totals_ms.__getitem__)[-max(1, len(totals_ms) // 100):]
    slow_total = sum(totals_ms[i] for i in slowest) or 1.0
    return {name: {**{k: v for k, v in percentiles(sorted(p[name] for p in parts)).items() if k != "max_ms"},
                   "share_of_slowest_1pct": round(sum(parts[i][name] for i in slowest) / slow_total, 3)}
            for name in PARTS}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.queryable_state", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.reporting import describe_run, ratio, report_header, write_report
    from benchmarks.session import spark_session
    from benchmarks.latency import run_sss_latency
    from benchmarks.machine import cpu_steadiness
    from benchmarks.spark_baseline import run_jvm_groupby_count
    from benchmarks.throughput import run_chandy_reference_job

    seconds = 4 if args.quick else 20
    steadiness = [cpu_steadiness()]
    with spark_session(args.parallelism) as spark:
        with tempfile.TemporaryDirectory(prefix="chandy-bench-queryable-peak-") as checkpoints:
            peak = run_chandy_reference_job(spark, 50_000 if args.quick else 2_000_000, args.keys, args.parallelism,
                                            checkpoint_dir=checkpoints)
        peak_rate = peak["steady_records_per_s"] or peak["records_per_s"]
        lookups = run_queryable_job(spark, peak_rate / 2, seconds, args.keys, args.parallelism)
        jvm = run_jvm_groupby_count(spark, args.keys, rows_per_batch=20_000 if args.quick else 200_000,
                                    seconds=6 if args.quick else 20)
        sss = run_sss_latency(spark, (jvm["records_per_s"] or 2) / 2, 3 if args.quick else 20, args.keys)
    steadiness.append(cpu_steadiness())
    report = {**report_header("queryable_state", args.quick, steadiness), "keys": args.keys,
              "parallelism": args.parallelism, "peak": peak, "lookups": lookups, "spark_sss_jvm": jvm,
              "sss_event_to_state_latency": sss,
              "lookup_p99_over_sss_state_latency_p99": ratio(lookups["p99_ms"], sss["p99_ms"]),
              "peak_over_sss_jvm": ratio(peak_rate, jvm["records_per_s"])}
    print(describe_run(report))
    print(f"peak (steady) {peak_rate:,}/s = {report['peak_over_sss_jvm'] or 0:.2f}x the SSS JVM count "
          f"({jvm['records_per_s'] or 0:,}/s); exact {peak['exact']}")
    print(f"lookups at {lookups['rate']:,}/s: {lookups['lookups']} answered, p50 {lookups['p50_ms']} ms, p99 "
          f"{lookups['p99_ms']} ms, max {lookups['max_ms']} ms; final counts exact {lookups['exact']}")
    print("lookup parts (p50 / p99 ms, share of the slowest 1%): " + "; ".join(
        f"{name} {part['p50_ms']} / {part['p99_ms']}, {part['share_of_slowest_1pct']:.0%}"
        for name, part in lookups["parts"].items()))
    print(f"SSS event-to-state latency at {sss['rate']:,}/s: p50 {sss['p50_ms']} ms, p99 {sss['p99_ms']} ms; "
          f"lookup p99 / SSS p99 = {report['lookup_p99_over_sss_state_latency_p99'] or 0:.3f}")
    write_report(args.out, "queryable_state", args.quick, report)
    return 0 if lookups["exact"] and peak["exact"] and lookups["measured"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
