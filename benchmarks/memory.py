"""Resident memory per worker with many keys of small state, and its growth at half load.

``python -m benchmarks.memory [--quick] [--seconds S] [--backends heap,rocksdb]`` runs, per state backend, a
keyed job (parallelism 2, checkpoints every second, exactly-once, to a temporary directory) whose keyed function
keeps a running count per key (an int, from 1,000: see :data:`FIRST_COUNT`) for the keys 0..N-1 (N = 1M), in phases
driven by its source:

1. **baseline**: the job runs with no keys yet (a few seconds, checkpoints included);
2. **fill**: one record per key, as fast as the job goes;
3. **settle**: a pause of a few seconds, for the resident memory after the fill;
4. **steady**: records over the same keys at half of the peak rate (``--seconds``, 10 minutes by default), paced
   by :class:`~operators.sources.SequenceSource` as :mod:`benchmarks.latency` paces its source. The peak is
   measured first by a short job of the same shape running its steady phase unpaced.

Each worker (subtask i of every operator shares slot i, a Python worker of its own) samples its own
``/proc/self/status`` (VmRSS, VmHWM) every second in the sink's writer, which brings the samples to the driver
in its result, with its records per second. Spark's Python workers are not reused here, so every job starts in
fresh processes. Reported per worker: resident memory before the fill and after it, bytes per key
((after - before) / the keys the worker holds) against the keys' and values' own size (8-byte integers, the Python
objects, their pickles, the checkpoint's bytes per key), and growth = median of the steady phase's last minute /
median of its first minute - 1 (target: within 5%), and the same over the steady phase's second half (a cache
that fills for minutes, as RocksDB's block cache and memtables do at this rate, shows in the first only).
Before Spark starts, :func:`heap_breakdown` says where the heap backend's bytes per key go, in this process.

The analysis is pure; a worker's result is summarised so:

>>> part = {"subtask": 0, "pid": 7, "keys": 4, "samples": [[t, rss, rss] for t, rss in [
...     (100.2, 1000), (101.2, 1000), (102.2, 1400), (103.2, 1400), (104.2, 1500), (105.2, 1500)]],
...     "buckets": {"102": [4, 4], "104": [3, 0], "105": [3, 0]}}
>>> row = summarize_worker(part, window_s=1)
>>> row["baseline_rss_bytes"], row["after_fill_rss_bytes"], row["bytes_per_key"], row["growth"]
(1000, 1400, 100.0, 0.0)
>>> row["steady_first_rss_bytes"], row["second_half_growth"]
(1500, 0.0)
"""

from __future__ import annotations

import argparse
import datetime
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from operators import KeyedProcessFunction, Sink, SinkWriter, ValueStateDescriptor
from operators.sources import SequenceSource, Source, SourceReader
from runtime import StreamExecutionEnvironment, Types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_EVERY_S = 1.0
GROWTH_TARGET = 0.05  # the target: flat within 5% over the run
# A key's first count. Python shares the ints below 257: counts from 1 cost nothing per key until they pass 256,
# then 32 bytes per key more, minutes into the steady phase (6 at 357k records/s a worker over 500k keys): the
# state's values growing, not the engine. From 1,000 on, every count is an int of its own from the fill.
FIRST_COUNT = 1_000


class CountFromFirst(KeyedProcessFunction):
    """A running count per key, from :data:`FIRST_COUNT`; emits ``(key, count)``."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or FIRST_COUNT - 1) + 1  # computed, so the first count is an int of its own too
        self.count.update(n)
        yield ctx.get_current_key(), n


def parse_status(text: str) -> dict[str, int]:
    """The byte counts of ``/proc/<pid>/status``'s ``Vm*`` lines.

    >>> parse_status("Name:\\tpython\\nVmHWM:\\t  2048 kB\\nVmRSS:\\t  1024 kB\\n")
    {'VmHWM': 2097152, 'VmRSS': 1048576}
    """
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        fields = rest.split()
        if name.startswith("Vm") and len(fields) == 2 and fields[1] == "kB":
            values[name] = int(fields[0]) * 1024
    return values


def own_memory() -> tuple[int, int] | None:
    """This process's resident memory and its peak (VmRSS, VmHWM) in bytes; None where ``/proc`` does not say."""
    try:
        with open("/proc/self/status") as status:
            values = parse_status(status.read())
        return values["VmRSS"], values["VmHWM"]
    except (OSError, KeyError):
        return None


class _Sampler(threading.Thread):
    """Samples :func:`own_memory` every ``SAMPLE_EVERY_S`` of wall time until stopped."""

    def __init__(self):
        super().__init__(name="memory-sampler", daemon=True)
        self.samples: list[list] = []  # [time.time(), rss, hwm]
        self.stopping = threading.Event()

    def run(self) -> None:
        while True:
            memory = own_memory()
            if memory is not None:
                self.samples.append([time.time(), *memory])
            if self.stopping.wait(SAMPLE_EVERY_S):
                return


class _MemoryWriter(SinkWriter):
    """Counts records (and the first of each key: a running count of FIRST_COUNT) per second, and samples its
    process."""

    def __init__(self, subtask_index: int):
        self.subtask_index = subtask_index
        self.buckets: dict[int, list[int]] = {}  # int(time.time()) -> [records, new keys]
        self.sampler = _Sampler()

    def open(self, runtime_context) -> None:
        self.sampler.start()

    def write_batch(self, records: list) -> None:
        bucket = self.buckets.setdefault(int(time.time()), [0, 0])
        bucket[0] += len(records)
        bucket[1] += sum(1 for _, n in records if n == FIRST_COUNT)

    def close(self) -> None:
        self.sampler.stopping.set()

    def result(self):
        self.sampler.stopping.set()
        return {"subtask": self.subtask_index, "pid": os.getpid(), "samples": list(self.sampler.samples),
                "keys": sum(new for _, new in self.buckets.values()),
                "buckets": {str(second): counts for second, counts in self.buckets.items()}}


class MemorySink(Sink):
    """Takes ``(key, running count)``; merged result: each worker's samples and counts, by subtask."""

    name = "memory"

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _MemoryWriter(subtask_index)

    def merge_results(self, results: list) -> list[dict]:
        return sorted((part for part in results if part), key=lambda part: part["subtask"])


class _PhasedReader(SourceReader):
    """Stages one after another, each ``(reader or None, seconds or None)``: a reader until it ends or its seconds
    pass; None idles for its seconds."""

    def __init__(self, stages: list[tuple[SourceReader | None, float | None]]):
        self.stages = list(stages)
        self.stage_started: float | None = None

    def poll(self, max_records: int) -> list | None:
        while self.stages:
            reader, seconds = self.stages[0]
            now = time.monotonic()
            if self.stage_started is None:
                self.stage_started = now
            if seconds is not None and now - self.stage_started >= seconds:
                self._next_stage()
                continue
            if reader is None:
                time.sleep(min(0.01, seconds - (now - self.stage_started)))
                return []
            records = reader.poll(max_records)
            if records is not None:
                return records
            self._next_stage()
        return None

    def _next_stage(self) -> None:
        self.stages.pop(0)
        self.stage_started = None

    def snapshot_state(self) -> list:
        return []  # the benchmark's jobs do not restart; a restore is refused below

    def restore_state(self, splits: list) -> None:
        raise RuntimeError("benchmarks.memory: the job restarted, so its memory samples describe two processes; "
                           "run the benchmark again")


class PhasedSource(Source):
    """Idle ``baseline_s``; the numbers 0..keys-1 once, unpaced; idle ``settle_s``; then numbers from ``keys`` on
    at ``records_per_second`` (None: unpaced) for ``steady_s`` (the job maps them to keys modulo ``keys``)."""

    def __init__(self, keys: int, baseline_s: float, settle_s: float, steady_s: float,
                 records_per_second: float | None):
        self.keys, self.baseline_s, self.settle_s, self.steady_s = keys, baseline_s, settle_s, steady_s
        self.records_per_second = records_per_second

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        fill = SequenceSource(0, self.keys - 1).create_reader(subtask_index, parallelism)
        steady = SequenceSource(self.keys, None, self.records_per_second).create_reader(subtask_index, parallelism)
        return _PhasedReader([(None, self.baseline_s), (fill, None), (None, self.settle_s), (steady, self.steady_s)])


def _median_rss(samples: list, start: float, end: float) -> int | None:
    inside = [rss for t, rss, _ in samples if start <= t < end]
    return round(statistics.median(inside)) if inside else None


def summarize_worker(part: dict, window_s: float = 60.0) -> dict:
    """One worker's phases, from its sink's counts per second: the fill from its first record to its last new
    key; the steady phase from its first record of a key seen before to its last record. Resident memory
    (medians of the samples): before the fill, between the fill and the steady phase, the steady phase's first
    and last ``window_s``; growth = last / first - 1, and ``second_half_growth`` = last / the ``window_s`` from
    the steady phase's middle - 1 (caches that fill slowly, as RocksDB's do, grow the first, not the second)."""
    buckets = {int(second): counts for second, counts in part["buckets"].items()}
    busy = sorted(second for second, (records, _) in buckets.items() if records)
    new = [second for second, (_, fresh) in buckets.items() if fresh]
    old = sorted(second for second, (records, fresh) in buckets.items() if records > fresh)
    samples = part["samples"]
    fill_start = busy[0] if busy else None
    fill_end = max(new) + 1 if new else None
    steady_start = old[0] if old else None
    steady_end = busy[-1] + 1 if busy else None
    baseline = _median_rss(samples, 0, fill_start) if fill_start is not None else None
    after_fill = _median_rss(samples, fill_end, steady_start or float("inf")) if fill_end is not None else None
    first = middle = last = None
    steady_records = 0
    if steady_start is not None:
        first = _median_rss(samples, steady_start, steady_start + window_s)
        halfway = (steady_start + steady_end) / 2
        middle = _median_rss(samples, halfway, halfway + window_s)
        last = _median_rss(samples, steady_end - window_s, steady_end)
        steady_records = sum(records - fresh for second, (records, fresh) in buckets.items() if second >= steady_start)
    keys = part["keys"]
    per_key = lambda rss: round((rss - baseline) / keys, 1) if rss is not None and baseline is not None and keys \
        else None
    return {
        "subtask": part["subtask"], "pid": part["pid"], "keys": keys, "samples": len(samples),
        "fill_s": fill_end - fill_start if new else None,
        "steady_s": steady_end - steady_start if steady_start is not None else None,
        "steady_records_per_s": round(steady_records / (steady_end - steady_start)) if steady_start is not None
        else None,
        "baseline_rss_bytes": baseline, "after_fill_rss_bytes": after_fill,
        "bytes_per_key": per_key(after_fill), "bytes_per_key_steady": per_key(first),
        "steady_first_rss_bytes": first, "steady_last_rss_bytes": last,
        "growth": round(last / first - 1, 4) if first and last else None,
        "second_half_growth": round(last / middle - 1, 4) if middle and last else None,
        "peak_rss_bytes": max((hwm for _, _, hwm in samples), default=None),
    }


def raw_sizes(keys: int, count: int = FIRST_COUNT) -> dict:
    """What a key and its value (a running count of ``count``) take by themselves, averaged over the keys
    0..keys-1: as two 8-byte integers; as Python objects (``sys.getsizeof``, though ints below 257 are shared);
    pickled one by one (each with pickle's header); and pickled as a list of ``(key, value)`` pairs.

    >>> raw_sizes(1000)
    {'int64_bytes': 16, 'python_object_bytes': 56.0, 'pickled_each_bytes': 27.4, 'pickled_in_bulk_bytes': 7.8}
    """
    step = max(1, keys // 10_000)
    sample = range(0, keys, step)
    objects = statistics.mean(sys.getsizeof(key) + sys.getsizeof(count) for key in sample)
    each = statistics.mean(len(pickle.dumps(key)) + len(pickle.dumps(count)) for key in sample)
    bulk = len(pickle.dumps([(key, count) for key in sample])) / len(sample)
    return {"int64_bytes": 16, "python_object_bytes": round(float(objects), 1),
            "pickled_each_bytes": round(float(each), 1), "pickled_in_bulk_bytes": round(bulk, 1)}


def heap_breakdown(keys: int, parallelism: int = 2, max_parallelism: int = 128, top: int = 6) -> dict:
    """Where a worker's bytes per key go on the heap backend, without Spark: subtask 0 of ``parallelism`` counts
    each of its share of the keys 0..keys-1 once, as the job's fill does, beside a dict of each routed key to its
    target as the record writer's route cache keeps (``runtime.network.record_writer``: the keys this worker's
    source subtask emits, its contiguous share). Reported per key held: the resident memory it added; the sizes
    ``sys.getsizeof`` gives the state's tables, the backend's key-group cache, the route cache and the key
    objects; and, from a second pass under ``tracemalloc``, the bytes allocated by the ``top`` source lines."""
    import gc
    import tracemalloc

    from runtime.keys.key_groups import assign_to_key_group, key_group_range
    from state_backends.descriptors import ValueStateDescriptor
    from state_backends.heap import HeapKeyedStateBackend

    groups = key_group_range(max_parallelism, parallelism, 0)
    owned = bytearray(assign_to_key_group(key, max_parallelism) in groups for key in range(keys))
    routed = range(keys // parallelism)  # subtask 0 of a bounded SequenceSource: the first share
    target = lambda key: assign_to_key_group(key, max_parallelism) * parallelism // max_parallelism

    def fill():
        backend = HeapKeyedStateBackend(max_parallelism, groups)
        count = backend.get_state(ValueStateDescriptor("count"))
        route = {}
        for number in range(keys):
            key = number % keys  # a fresh int, as the job's map makes (ints below 257 are shared)
            if number in routed:
                route[key] = target(key)
            if owned[key]:
                backend.set_current_key(key)
                count.update((count.value() or FIRST_COUNT - 1) + 1)  # as the job counts
        return backend, route

    gc.collect()
    before = own_memory()
    backend, route = fill()
    gc.collect()
    after = own_memory()
    held = sum(owned)
    tables = backend._tables["count"].values()
    state_keys = {id(key) for table in tables for key in table}
    shared = sum(1 for key in route if id(key) in state_keys)
    sizes = {
        "state_tables": sum(sys.getsizeof(table) for table in tables) + sys.getsizeof(backend._tables["count"]),
        "key_group_cache": sys.getsizeof(backend._group_of),
        "route_cache": sys.getsizeof(route),
        "key_objects": sys.getsizeof(keys - 1) * (held + len(route) - shared),
    }
    del backend, route
    gc.collect()
    tracemalloc.start()
    kept = fill()
    lines = tracemalloc.take_snapshot().statistics("lineno")[:top]
    tracemalloc.stop()
    del kept
    return {"keys": keys, "keys_held": held, "keys_routed": len(routed),
            "rss_bytes_per_key": round((after[0] - before[0]) / held, 1) if before and after else None,
            "sizeof_bytes_per_key": {name: round(size / held, 1) for name, size in sizes.items()},
            "traced_bytes_per_key": [(_where(line.traceback[0]), round(line.size / held, 1)) for line in lines]}


def _where(frame) -> str:
    """``path:line (its code)`` of a tracemalloc frame."""
    import linecache

    code = linecache.getline(frame.filename, frame.lineno).strip()
    return f"{os.path.relpath(frame.filename, ROOT)}:{frame.lineno} ({code})"


def make_backend(name: str):
    from state_backends import HashMapStateBackend
    from state_backends.rocksdb import EmbeddedRocksDBStateBackend

    return {"heap": HashMapStateBackend, "rocksdb": EmbeddedRocksDBStateBackend}[name]()


def run_memory_job(spark, backend: str, keys: int, parallelism: int, baseline_s: float, settle_s: float,
                   steady_s: float, records_per_second: float | None) -> dict:
    """One job through the phases of :class:`PhasedSource`; its workers' samples and counts, and its checkpoints."""
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.set_state_backend(make_backend(backend))
    env.enable_checkpointing(1000)
    with tempfile.TemporaryDirectory(prefix="chandy-bench-memory-ck-") as checkpoints:
        env.get_checkpoint_config().set_checkpoint_storage(checkpoints)
        (env.from_source(PhasedSource(keys, baseline_s, settle_s, steady_s, records_per_second), "phased")
            .map(lambda x: x % keys, output_type=Types.LONG())
            .key_by(lambda k: k)
            .process(CountFromFirst())
            .sink_to(MemorySink()))
        result = env.execute(f"benchmark-memory-{backend}")
    (parts,) = result.sink_results.values()
    stats = result.checkpoints
    return {"parts": parts, "restarts": result.restarts, "checkpoints": len(stats),
            "checkpoint_bytes": stats[-1].bytes if stats else None,
            "max_checkpoint_ms": max((s.duration_ms for s in stats), default=None)}


def peak_rate(parts: list[dict]) -> float | None:
    """The job's records per second over its steady phase's full seconds (every worker's records added up).

    >>> peak_rate([{"buckets": {"1": [5, 5], "2": [7, 3], "3": [9, 0], "4": [9, 0], "5": [2, 0]}},
    ...            {"buckets": {"2": [1, 0], "3": [1, 0], "4": [1, 0]}}])
    10.0
    """
    totals: dict[int, int] = {}
    for part in parts:
        for second, (records, fresh) in part["buckets"].items():
            totals[int(second)] = totals.get(int(second), 0) + records
    seconds = sorted(totals)
    start = min(int(s) for part in parts for s, (records, fresh) in part["buckets"].items() if records > fresh)
    full = [s for s in seconds if s > start and s < seconds[-1]]  # the first and last seconds are partial
    return float(statistics.mean(totals[s] for s in full)) if full else None


def measure_backend(spark, backend: str, keys: int, parallelism: int, steady_s: float, quick: bool) -> dict:
    """The peak (a job whose steady phase runs unpaced), then the job at half of it; per worker summaries."""
    pause = 3 if quick else 10
    window = min(60.0, steady_s / 3)
    calibration = run_memory_job(spark, backend, keys, parallelism, 0, 0, 3 if quick else 15, None)
    peak = peak_rate(calibration["parts"])
    run = run_memory_job(spark, backend, keys, parallelism, pause, pause, steady_s, peak / 2 if peak else None)
    workers = [summarize_worker(part, window) for part in run["parts"]]
    total_keys = sum(w["keys"] for w in workers)
    return {"backend": backend, "keys": keys, "parallelism": parallelism, "peak_records_per_s": round(peak or 0),
            "rate": round(peak / 2) if peak else None, "steady_s": steady_s, "window_s": window,
            "restarts": run["restarts"], "checkpoints": run["checkpoints"],
            "max_checkpoint_ms": run["max_checkpoint_ms"], "checkpoint_bytes": run["checkpoint_bytes"],
            "checkpoint_bytes_per_key": round(run["checkpoint_bytes"] / total_keys, 1)
            if run["checkpoint_bytes"] and total_keys else None,
            "exact": total_keys == keys, "calibration_workers": [summarize_worker(p, 1) for p in calibration["parts"]],
            "workers": workers, "raw": raw_sizes(keys), "samples": {w["subtask"]: p["samples"]
                                                                    for w, p in zip(workers, run["parts"])}}


def spark_session(slots: int):
    """A session, for the block, whose Python workers are not reused: each job's memory is its own, from a fresh
    process."""
    from benchmarks.session import spark_session as session

    return session(slots, {"spark.python.worker.reuse": "false"})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=None, help="default 1,000,000 (quick: 20,000)")
    parser.add_argument("--seconds", type=float, default=None, help="the steady phase (default 600; quick: 9)")
    parser.add_argument("--backends", default="heap,rocksdb", help="comma-separated: heap, rocksdb")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.reporting import steadiness_verdict, write_report
    from benchmarks.machine import cpu_steadiness, describe_machine

    keys = args.keys or (20_000 if args.quick else 1_000_000)
    seconds = args.seconds or (9 if args.quick else 600)
    steadiness = [cpu_steadiness()]
    breakdown = heap_breakdown(keys, args.parallelism) if "heap" in args.backends.split(",") else None
    with spark_session(args.parallelism) as spark:
        rows = [measure_backend(spark, backend, keys, args.parallelism, seconds, args.quick)
                for backend in args.backends.split(",")]
    steadiness.append(cpu_steadiness())
    report = {"benchmark": "memory", "quick": args.quick, "machine": describe_machine(),
              "cpu_steadiness": {"before": steadiness[0], "after": steadiness[1],
                                 "verdict": steadiness_verdict(steadiness)},
              "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "growth_target": GROWTH_TARGET, "results": rows, "heap_breakdown": breakdown}
    mib = lambda b: "n/a" if b is None else f"{b / 2**20:,.1f} MiB"
    percent = lambda x: "n/a" if x is None else f"{x:+.2%}"
    print(f"machine: {report['machine']}; steadiness: {report['cpu_steadiness']['verdict']}")
    for row in rows:
        raw = row["raw"]
        print(f"{row['backend']}: {row['keys']:,} keys, peak {row['peak_records_per_s']:,}/s, steady at "
              f"{row['rate'] or 0:,}/s for {row['steady_s']:,.0f} s; {row['checkpoints']} checkpoints (last "
              f"{row['checkpoint_bytes'] or 0:,} B, {row['checkpoint_bytes_per_key']} B per key), restarts "
              f"{row['restarts']}; a key and its value: {raw['int64_bytes']} B as int64s, "
              f"{raw['python_object_bytes']} B as Python objects, {raw['pickled_each_bytes']} B pickled "
              f"each, {raw['pickled_in_bulk_bytes']} B pickled in bulk")
        for w in row["workers"]:
            growth = percent(w["growth"])
            print(f"  worker {w['subtask']} (pid {w['pid']}): {w['keys']:,} keys; RSS {mib(w['baseline_rss_bytes'])} "
                  f"before the fill, {mib(w['after_fill_rss_bytes'])} after ({w['bytes_per_key']} B per key; "
                  f"{w['bytes_per_key_steady']} B in the steady phase's first {row['window_s']:.0f} s); steady "
                  f"{w['steady_records_per_s'] or 0:,}/s: first {mib(w['steady_first_rss_bytes'])}, last "
                  f"{mib(w['steady_last_rss_bytes'])}, growth {growth} (target within {GROWTH_TARGET:.0%}; over the "
                  f"second half {percent(w['second_half_growth'])}); peak {mib(w['peak_rss_bytes'])}")
    if breakdown:
        print(f"heap backend without Spark, {breakdown['keys_held']:,} keys held and {breakdown['keys_routed']:,} "
              f"routed: {breakdown['rss_bytes_per_key']} B of resident memory per key held; by sys.getsizeof: "
              + ", ".join(f"{name} {size} B" for name, size in breakdown["sizeof_bytes_per_key"].items())
              + "; by tracemalloc: "
              + ", ".join(f"{line} {size} B" for line, size in breakdown["traced_bytes_per_key"]))
    write_report(args.out, "memory", args.quick, report)
    return 0 if all(row["exact"] and not row["restarts"] for row in rows) else 1


def run_in_own_process(quick: bool, out: str) -> int:
    """``python -m benchmarks.memory`` in a process of its own (its Spark session does not reuse Python workers)."""
    command = [sys.executable, "-m", "benchmarks.memory", "--out", out] + (["--quick"] if quick else [])
    return subprocess.run(command, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
