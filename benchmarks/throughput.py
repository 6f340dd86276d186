"""Chandy running the reference job (DESIGN §7), without checkpoints.

Reports two rates: end to end (records over the job's wall time, launch of the barrier stage included) and
steady state (records over the span from the first to the last record reaching the sinks). The answer is
checked against the plain-Python reference every time: a fast wrong answer is not a result.
"""

from __future__ import annotations

import time

from benchmarks.sinks import FinalCountSink
from runtime import StreamExecutionEnvironment, Types
from runtime.demo import CountPerKey


def run_chandy_reference_job(spark, records: int, keys: int, parallelism: int) -> dict:
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    sink = FinalCountSink()
    (env.from_sequence(0, records - 1)
        .map(lambda x: x % keys, output_type=Types.LONG())
        .key_by(lambda x: x)
        .process(CountPerKey())
        .sink_to(sink))
    started = time.perf_counter()
    result = env.execute("benchmark-reference-job")
    elapsed = time.perf_counter() - started
    (seen, latest, first, last), = result.sink_results.values()
    expected_total = records
    exact = seen == records and sum(latest.values()) == expected_total and len(latest) == min(keys, records)
    return {
        "variant": "chandy-record-api-no-checkpoints",
        "records": records,
        "parallelism": parallelism,
        "exact": exact,
        "wall_s": round(elapsed, 3),
        "records_per_s": round(records / elapsed),
        "steady_records_per_s": round(records / (last - first)) if last and last > first else None,
    }
