"""What one record of the reference job must cost on this machine, measured part by part in isolation, and how far
the engine is above it.

The reference job (record API) is ``numbers -> map(x % keys) -> key_by -> CountPerKey -> sink``: per record the
interpreter has to call the user's map, the key selector and the process function, find the key's key group
(the stable hash), read and write one keyed value, and, for records that cross to the other slot, encode and
decode them as Arrow. Each part is timed here alone, in a tight loop over a batch the size the engine uses,
with the cheapest Python that does it (the floor); then the same parts through the engine's own objects (the
heap backend's keyed access, the edge codec) for comparison. The engine's per-record cost is the reference job's
steady rate turned into core-nanoseconds per record (parallelism 2 on 2 cores: 2 cores / rate).

The windowed reference job (``benchmarks.windows``: event timestamps, ``key_by(n % 10,000)``, a 10 s tumbling
window counting with an ``AggregateFunction``) has a floor of its own: per record the user's timestamp assigner,
the key selector (once: the engine calls it twice, to route and to key the window), the key group, one read and
write of the key's accumulator with the function's ``add`` between, and half a codec trip of a LONG with its
timestamp.

    python -m benchmarks.floor [--quick] [--with-job]

``--with-job`` also runs the reference job (Spark, checkpoints every second) to put the engine's cost beside
the floor; without it, only the isolated parts run (no Spark).
"""

from __future__ import annotations

import argparse
import os
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = 4096
KEYS = 1000


def per_record_ns(run, records: int, repeats: int) -> float:
    """The fastest of ``repeats`` runs of ``run()`` (which handles ``records`` records), per record, in ns."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter_ns()
        run()
        best = min(best, time.perf_counter_ns() - started)
    return best / records


def codec_trip_ns(codec, records: list, repeats: int) -> tuple[float, float]:
    """Per record, the fastest encode of ``records`` by the edge codec ``codec``, and the fastest decode."""
    encoded = codec.encode(records)
    return (per_record_ns(lambda: codec.encode(records), len(records), repeats),
            per_record_ns(lambda: codec.decode(encoded), len(records), repeats))


def measure_parts(repeats: int) -> dict:
    from runtime.keys.key_groups import assign_to_key_group, key_group_range
    from runtime.network.codec import RecordCodec
    from runtime.tools.demo import CountPerKey
    from runtime.types import Types
    from state_backends.heap import HeapKeyedStateBackend

    numbers = list(range(BATCH))
    keys = [x % KEYS for x in numbers]
    user_map = lambda x: x % KEYS  # noqa: E731  (the reference job's function, as users write it)
    key_selector = lambda k: k  # noqa: E731
    counts: dict = {}
    groups = {k: assign_to_key_group(k, 128) for k in range(KEYS)}

    def map_calls():
        [user_map(x) for x in numbers]

    def key_calls():
        [key_selector(k) for k in keys]

    def stable_hash():
        for k in keys:
            assign_to_key_group(k, 128)

    def cached_group():
        get = groups.get
        for k in keys:
            get(k)

    def dict_state():
        get = counts.get
        for k in keys:
            counts[k] = get(k, 0) + 1

    class Ctx:
        current = None

        def get_current_key(self):
            return self.current

    process = CountPerKey()
    backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    process.open(SimpleContext(backend))
    ctx = Ctx()

    def engine_state():  # the engine's keyed access: set the key, read, write (what CountPerKey does)
        count = process.count
        for k in keys:
            backend.set_current_key(k)
            count.update((count.value() or 0) + 1)

    def process_calls():  # the user's process function, a generator per record, with the engine's state
        out = []
        extend = out.extend
        for k in keys:
            backend.set_current_key(k)
            ctx.current = k
            extend(process.process_element(k, ctx))

    encode_ns, decode_ns = codec_trip_ns(RecordCodec(Types.TUPLE([Types.LONG(), Types.LONG()])),
                                         [(k, i) for i, k in enumerate(keys)], repeats)
    parts = {
        "map call": per_record_ns(map_calls, BATCH, repeats),
        "key selector call": per_record_ns(key_calls, BATCH, repeats),
        "stable hash -> key group": per_record_ns(stable_hash, BATCH, repeats),
        "key group, cached per key": per_record_ns(cached_group, BATCH, repeats),
        "state read+write (a dict)": per_record_ns(dict_state, BATCH, repeats),
        "Arrow encode (tuple of 2 longs)": encode_ns,
        "Arrow decode": decode_ns,
    }
    engine = {
        "state read+write (heap backend, set_current_key)": per_record_ns(engine_state, BATCH, repeats),
        "process_element (generator) with engine state": per_record_ns(process_calls, BATCH, repeats),
    }
    # Half the records cross to the other slot at parallelism 2 (encode there, decode here).
    floor = (parts["map call"] + parts["key selector call"] + parts["key group, cached per key"]
             + parts["state read+write (a dict)"] + 0.5 * (parts["Arrow encode (tuple of 2 longs)"]
                                                          + parts["Arrow decode"]))
    return {"parts_ns": {k: round(v, 1) for k, v in parts.items()},
            "engine_parts_ns": {k: round(v, 1) for k, v in engine.items()}, "floor_ns": round(floor, 1)}


def measure_window_parts(repeats: int) -> dict:
    """The windowed reference job's floor, part by part (see the module's docstring); beside it, what the engine's
    own heap backend costs for the fold (``fold_many``, the aligned window's path), with the state in key groups
    and as a bulk state (:mod:`state_backends.heap.bulk`: how the aligned window holds its panes), between
    barriers."""
    from benchmarks.windows import KEYS as WINDOW_KEYS, Count, event_time
    from operators.window.operator import Aggregate
    from runtime.keys.key_groups import assign_to_key_group, key_group_range
    from runtime.network.codec import RecordCodec
    from runtime.protocol.records import TimestampedBatch
    from runtime.types import Types
    from state_backends.descriptors import ValueStateDescriptor
    from state_backends.heap import HeapKeyedStateBackend

    numbers = list(range(BATCH))
    assigner = lambda n, _: event_time(n)  # noqa: E731  (the job's functions, as the benchmark writes them)
    key_selector = lambda n: n % WINDOW_KEYS  # noqa: E731
    keys = [key_selector(n) for n in numbers]
    groups = {k: assign_to_key_group(k, 128) for k in range(WINDOW_KEYS)}
    count = Count()
    accumulators: dict = {}
    ones = [1] * BATCH

    def assigner_calls():
        [assigner(n, None) for n in numbers]

    def key_calls():
        [key_selector(n) for n in numbers]

    def cached_group():
        get = groups.get
        for k in keys:
            get(k)

    def fold_calls():
        get, add = accumulators.get, count.add
        for k in keys:
            accumulator = get(k)
            accumulators[k] = add(1, count.create_accumulator() if accumulator is None else accumulator)

    backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    backend.get_state(ValueStateDescriptor("window"))
    fold = Aggregate(count).add

    def engine_fold():
        backend.fold_many("window", keys, ones, fold)

    bulk_backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    bulk_backend.declare_bulk_state(ValueStateDescriptor("window"))

    def engine_bulk_fold():
        bulk_backend.fold_many("window", keys, ones, fold)

    encode_ns, decode_ns = codec_trip_ns(RecordCodec(Types.LONG()),
                                         TimestampedBatch.of(numbers, [event_time(n) for n in numbers]), repeats)
    parts = {
        "timestamp assigner call": per_record_ns(assigner_calls, BATCH, repeats),
        "key selector call (n % 10,000)": per_record_ns(key_calls, BATCH, repeats),
        "key group, cached per key": per_record_ns(cached_group, BATCH, repeats),
        "accumulator read + add + write (a dict)": per_record_ns(fold_calls, BATCH, repeats),
        "Arrow encode (a long, its timestamp)": encode_ns,
        "Arrow decode (a long, its timestamp)": decode_ns,
    }
    engine = {"accumulator fold (heap backend, fold_many)": per_record_ns(engine_fold, BATCH, repeats),
              "the same on a bulk state (the aligned window's)": per_record_ns(engine_bulk_fold, BATCH, repeats)}
    floor = (parts["timestamp assigner call"] + parts["key selector call (n % 10,000)"]
             + parts["key group, cached per key"] + parts["accumulator read + add + write (a dict)"]
             + 0.5 * (parts["Arrow encode (a long, its timestamp)"] + parts["Arrow decode (a long, its timestamp)"]))
    return {"parts_ns": {k: round(v, 1) for k, v in parts.items()},
            "engine_parts_ns": {k: round(v, 1) for k, v in engine.items()}, "floor_ns": round(floor, 1)}


class SimpleContext:
    """The runtime context CountPerKey.open needs: keyed state of one backend."""

    def __init__(self, backend):
        self.backend = backend

    def get_state(self, descriptor):
        return self.backend.get_state(descriptor)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.floor", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--with-job", action="store_true", help="also run the reference job on Spark")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.reporting import describe_run, report_header, write_report
    from benchmarks.session import spark_session
    from benchmarks.machine import cpu_steadiness

    steadiness = [cpu_steadiness()]
    measured = measure_parts(3 if args.quick else 30)
    windowed = measure_window_parts(3 if args.quick else 30)
    report = {"parts": measured, "window_parts": windowed}
    if args.with_job:
        import tempfile

        from benchmarks.throughput import run_chandy_reference_job

        with spark_session(args.parallelism) as spark:
            with tempfile.TemporaryDirectory(prefix="chandy-bench-floor-") as checkpoints:
                job = run_chandy_reference_job(spark, 100_000 if args.quick else 4_000_000, KEYS, args.parallelism,
                                               checkpoint_dir=checkpoints)
        rate = job["steady_records_per_s"] or job["records_per_s"]
        engine_ns = min(args.parallelism, os.cpu_count() or 1) * 1e9 / rate
        report["job"] = job
        report["engine_ns_per_record"] = round(engine_ns, 1)
        report["engine_over_floor"] = round(engine_ns / measured["floor_ns"], 2)
    steadiness.append(cpu_steadiness())
    report = {**report_header("floor", args.quick, steadiness), **report}
    print(describe_run(report))
    for name, ns in {**measured["parts_ns"], **measured["engine_parts_ns"]}.items():
        print(f"{name:50} {ns:8.1f} ns/record")
    print(f"{'floor (map, key, cached group, dict state, half a codec trip)':50} {measured['floor_ns']:8.1f} ns/record")
    print("windowed reference job:")
    for name, ns in {**windowed["parts_ns"], **windowed["engine_parts_ns"]}.items():
        print(f"{name:50} {ns:8.1f} ns/record")
    print(f"{'floor (assigner, key, group, fold, half a codec trip)':50} {windowed['floor_ns']:8.1f} ns/record")
    if args.with_job:
        print(f"reference job: {report['job']['steady_records_per_s'] or report['job']['records_per_s']:,}/s steady at "
              f"p={args.parallelism} = {report['engine_ns_per_record']:.0f} core-ns/record = "
              f"{report['engine_over_floor']:.2f}x the floor; exact {report['job']['exact']}")
    write_report(args.out, "floor", args.quick, report)
    return 0 if not args.with_job or report["job"]["exact"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
