"""Chandy running the reference job (DESIGN §7): record API or columnar path, with or without checkpoints.

Reports two rates: end to end (records over the job's wall time, launch of the barrier stage included) and
steady state (records over the span from the first to the last record reaching the sinks). The answer is
checked against the plain-Python reference every time: a fast wrong answer is not a result.
"""

from __future__ import annotations

import statistics
import tempfile
import time

import pyarrow.compute as pc

from benchmarks.machine import job_cpu_seconds
from runtime.tools.count_sink import FinalCountSink
from runtime import StreamExecutionEnvironment, Types
from runtime.tools.demo import CountPerKey


def _declare_record_job(env, records: int, keys: int, sink) -> None:
    (env.from_sequence(0, records - 1)
        .map(lambda x: x % keys, output_type=Types.LONG())
        .key_by(lambda x: x)
        .process(CountPerKey())
        .sink_to(sink))


def _declare_columnar_job(env, records: int, keys: int, sink) -> None:
    (env.from_sequence(0, records - 1, columnar=True)
        .map_batches(lambda b: {"key": pc.subtract(b["value"], pc.multiply(pc.divide(b["value"], keys), keys))})
        .key_by("key")
        .count()
        .sink_to(sink))


def run_chandy_reference_job(spark, records: int, keys: int, parallelism: int,
                             checkpoint_dir: str | None = None, columnar: bool = False,
                             unaligned: bool = False, state_backend=None, while_running=None) -> dict:
    """The reference job; with ``checkpoint_dir``, exactly-once checkpoints every second go there (``unaligned``
    ones if asked). ``columnar``: the same job on the columnar path (Arrow batches, ``key_by(column).count()``).
    ``state_backend``: where keyed state lives (default: the heap). ``while_running(client)`` is called once the
    job is launched, on the caller's thread (its time counts)."""
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    if state_backend is not None:
        env.set_state_backend(state_backend)
    if checkpoint_dir is not None:
        env.enable_checkpointing(1000)
        env.get_checkpoint_config().set_checkpoint_storage(checkpoint_dir)
        if unaligned:
            env.get_checkpoint_config().enable_unaligned_checkpoints()
    sink = FinalCountSink(columnar=columnar)
    (_declare_columnar_job if columnar else _declare_record_job)(env, records, keys, sink)
    started = time.perf_counter()
    client = env.execute_async("benchmark-reference-job")
    if while_running is not None:
        while_running(client)
    result = client.get_job_execution_result()
    elapsed = time.perf_counter() - started
    (seen, latest, first, last), = result.sink_results.values()
    expected_total = records
    measured = seen > 0 and elapsed > 0  # a job that delivered nothing measured nothing
    exact = measured and seen == records and sum(latest.values()) == expected_total \
        and len(latest) == min(keys, records)
    stats = result.checkpoints
    return {
        "variant": f"chandy-{'columnar' if columnar else 'record-api'}-"
                   + ("checkpoints-1s" if checkpoint_dir else "no-checkpoints") + ("-unaligned" if unaligned else ""),
        "checkpoints": len(stats),
        "restarts": result.restarts,
        "max_checkpoint_sync_ms": max((s.sync_ms for s in stats), default=None),
        "median_alignment_ms": round(statistics.median(s.alignment_ms for s in stats), 1) if stats else None,
        "measured": measured,
        "records": records,
        "parallelism": parallelism,
        "exact": exact,
        "wall_s": round(elapsed, 3),
        "records_per_s": round(records / elapsed) if measured else None,
        "steady_records_per_s": round(records / (last - first)) if last and last > first else None,
        "first_record_at": first,  # time.time() when the first record reached a sink subtask (None: none did)
    }


def alternated_reference_runs(spark, variants: tuple[str, ...], repeats: int, records: int, keys: int,
                              parallelism: int, prepare) -> dict[str, list[dict]]:
    """``repeats`` runs of the reference job with checkpoints every second for each of ``variants``, alternated so
    that a drift of the machine's speed hits every variant alike (the order reverses every other round), each run
    with the CPU time the job's processes spent per record (``cpu_us_per_record``). ``prepare(variant)`` sets a
    variant up before its run and returns its ``while_running`` hook, or None."""
    runs: dict[str, list[dict]] = {variant: [] for variant in variants}
    for repeat in range(repeats):
        for variant in variants if repeat % 2 == 0 else tuple(reversed(variants)):
            hook = prepare(variant)
            cpu_before = job_cpu_seconds()
            with tempfile.TemporaryDirectory(prefix="chandy-bench-ck-") as checkpoints:
                row = run_chandy_reference_job(spark, records, keys, parallelism, checkpoints, while_running=hook)
            row["cpu_us_per_record"] = round((job_cpu_seconds() - cpu_before) / records * 1e6, 4)
            runs[variant].append(row)
    return runs
