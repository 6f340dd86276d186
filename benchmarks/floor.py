"""What one record of the reference job must cost on this machine, measured part by part in isolation, and how far
the engine is above it.

The reference job (record API) is ``numbers -> map(x % keys) -> key_by -> CountPerKey -> sink``: per record the
interpreter has to call the user's map, the key selector and the process function, find the key's key group
(the stable hash), read and write one keyed value, and, for records that cross to the other slot, encode and
decode them as Arrow. Each part is timed here alone, in a tight loop over a batch the size the engine uses,
with the cheapest Python that does it (the floor); then the same parts through the engine's own objects (the
heap backend's keyed access, the edge codec) for comparison. The engine's per-record cost is the reference job's
steady rate turned into core-nanoseconds per record (parallelism 2 on 2 cores: 2 cores / rate).

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

    codec = RecordCodec(Types.TUPLE([Types.LONG(), Types.LONG()]))
    pairs = [(k, i) for i, k in enumerate(keys)]
    encoded = codec.encode(pairs)

    def encode():
        codec.encode(pairs)

    def decode():
        codec.decode(encoded)

    parts = {
        "map call": per_record_ns(map_calls, BATCH, repeats),
        "key selector call": per_record_ns(key_calls, BATCH, repeats),
        "stable hash -> key group": per_record_ns(stable_hash, BATCH, repeats),
        "key group, cached per key": per_record_ns(cached_group, BATCH, repeats),
        "state read+write (a dict)": per_record_ns(dict_state, BATCH, repeats),
        "Arrow encode (tuple of 2 longs)": per_record_ns(encode, BATCH, repeats),
        "Arrow decode": per_record_ns(decode, BATCH, repeats),
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

    from benchmarks.__main__ import describe_run, report_header, start_spark, write_report
    from benchmarks.machine import cpu_steadiness

    steadiness = [cpu_steadiness()]
    measured = measure_parts(3 if args.quick else 30)
    report = {"parts": measured}
    if args.with_job:
        import tempfile

        from benchmarks.throughput import run_chandy_reference_job

        spark = start_spark(args.parallelism)
        try:
            with tempfile.TemporaryDirectory(prefix="chandy-bench-floor-") as checkpoints:
                job = run_chandy_reference_job(spark, 100_000 if args.quick else 4_000_000, KEYS, args.parallelism,
                                               checkpoint_dir=checkpoints)
        finally:
            spark.stop()
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
    if args.with_job:
        print(f"reference job: {report['job']['steady_records_per_s'] or report['job']['records_per_s']:,}/s steady at "
              f"p={args.parallelism} = {report['engine_ns_per_record']:.0f} core-ns/record = "
              f"{report['engine_over_floor']:.2f}x the floor; exact {report['job']['exact']}")
    write_report(args.out, "floor", args.quick, report)
    return 0 if not args.with_job or report["job"]["exact"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
