"""Throughput while large keyed state is checkpointed, measured inside a running job.

The job keeps a payload of ``value_bytes`` per key (``keys`` keys, so state of keys x value_bytes) and
updates its key's entry for every record; exactly-once checkpoints run every ``interval_s`` (longer than
a checkpoint takes, as a user would set it, else the job is checkpointing all the time). The sink counts records
per 100 ms; buckets overlapping a checkpoint (trigger to completion, from the job's checkpoint statistics)
are compared with the others. The dip is ``1 - rate during checkpoints / rate between them``.

A dip depends on how long a checkpoint lasts as much as on what it costs (the same work spread over twice the time
halves it), so the row also gives the share of the job's capacity that checkpoints took over the run
(``lost_share``), and for the heap beside what they would take if they cost the job only what one costs alone
(:func:`measure_checkpoint_cost`: pickling and writing a subtask's state in this process, nothing competing).

    python -m benchmarks.checkpoint_dip [--keys 1000000] [--seconds 24] [--interval 5] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time

from operators import KeyedProcessFunction, Sink, SinkWriter, ValueStateDescriptor
from operators.sources import SequenceSource
from runtime import StreamExecutionEnvironment
from state_backends import HashMapStateBackend

BUCKET_S = 0.1
_COST_FIELDS = ("subtask_keys", "subtask_state_bytes", "pickle_core_s", "write_core_s", "copy_core_s", "dip_floor",
                "dip_floor_of_one_copy")


class KeepPayload(KeyedProcessFunction):
    """Per key: (records seen, a payload of ``value_bytes``); emits the key's count."""

    def __init__(self, value_bytes: int):
        self.value_bytes = value_bytes

    def open(self, runtime_context):
        self.state = runtime_context.get_state(ValueStateDescriptor("payload"))

    def process_element(self, value, ctx):
        entry = self.state.value()
        n = 1 if entry is None else entry[0] + 1
        # random bytes: RocksDB compresses its files, and a repeated byte would make 1 GB of state a few MB there
        self.state.update((n, os.urandom(self.value_bytes) if entry is None else entry[1]))
        yield n


class _RateWriter(SinkWriter):
    def __init__(self):
        self.buckets: dict[int, int] = {}

    def write_batch(self, records: list) -> None:
        bucket = int(time.time() / BUCKET_S)
        self.buckets[bucket] = self.buckets.get(bucket, 0) + len(records)

    def result(self):
        return self.buckets


class RateSink(Sink):
    """Merged result: records per 100 ms bucket (bucket = epoch seconds / 0.1)."""

    name = "rate"

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _RateWriter()

    def merge_results(self, results: list) -> dict[int, int]:
        merged: dict[int, int] = {}
        for part in results:
            for bucket, n in part.items():
                merged[bucket] = merged.get(bucket, 0) + n
        return merged


def split_by_checkpoints(buckets: dict[int, int], windows: list[tuple[float, float]]) -> tuple[list, list]:
    """Rates (records/s) of full buckets overlapping a checkpoint window, and of the others.

    >>> split_by_checkpoints({10: 5, 11: 1, 12: 5, 13: 5, 14: 2}, [(1.15, 1.18)])
    ([10.0], [50.0, 50.0])
    """
    full = sorted(buckets)[1:-1]  # the first and last buckets are partial
    during, between = [], []
    for bucket in full:
        start, end = bucket * BUCKET_S, (bucket + 1) * BUCKET_S
        overlaps = any(a < end and b > start for a, b in windows)
        (during if overlaps else between).append(round(buckets[bucket] / BUCKET_S, 1))
    return during, between


def run_checkpoint_dip(spark, keys: int, value_bytes: int, seconds: float, rate_guess: float,
                       parallelism: int, interval_s: float, state_backend=None, storage: str | None = None,
                       paced: bool = False) -> dict:
    """One job of about ``seconds`` at ``rate_guess`` records/s; the first pass over the keys fills the state
    and is left out of the comparison. ``state_backend``: the job's (default: the heap); ``storage``: the checkpoint
    storage's URL (default: a temporary local directory). ``paced``: the source releases ``rate_guess`` records a
    second, so that the job lasts ``seconds`` however fast the machine is and its checkpoints fall within it (what
    quick runs need; a paced job measures no dip, as it is not at its peak)."""
    records = int(seconds * rate_guess)
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    if state_backend is not None:
        env.set_state_backend(state_backend)
    with tempfile.TemporaryDirectory(prefix="chandy-bench-dip-") as checkpoints:
        env.enable_checkpointing(interval_s * 1000)
        env.get_checkpoint_config().set_checkpoint_storage(storage or checkpoints)
        sink = RateSink()
        source = SequenceSource(0, records - 1, records_per_second=rate_guess if paced else None)
        (env.from_source(source, source_name="sequence")
            .map(lambda x: x % keys)
            .key_by(lambda k: k)
            .process(KeepPayload(value_bytes))
            .sink_to(sink))
        result = env.execute("benchmark-checkpoint-dip")
    (buckets,) = result.sink_results.values()
    stats = result.checkpoints
    windows = [(s.completed_at - s.duration_ms / 1000.0, s.completed_at) for s in stats]
    filled_at = _time_when_total_reached(buckets, keys)
    steady = {b: n for b, n in buckets.items() if b * BUCKET_S >= filled_at}
    during, between = split_by_checkpoints(steady, windows)
    rate_between = statistics.median(between) if between else None
    rate_during = statistics.mean(during) if during else None
    backend = state_backend or env.get_state_backend()
    # the floor is the heap's: what pickling and writing its state costs; RocksDB's checkpoint copies files
    cost = (measure_checkpoint_cost(keys, value_bytes, parallelism, interval_s)
            if isinstance(backend, HashMapStateBackend) else dict.fromkeys(_COST_FIELDS))
    return {
        "state_backend": repr(backend),
        "keys": keys,
        "value_bytes": value_bytes,
        "records": records,
        "interval_s": interval_s,
        "checkpoints": len(stats),
        "state_bytes": max((s.bytes for s in stats), default=0),
        "max_sync_ms": max((s.sync_ms for s in stats), default=None),
        "max_async_ms": max((s.async_ms for s in stats), default=None),
        "max_duration_ms": max((s.duration_ms for s in stats), default=None),
        "rate_between_checkpoints": rate_between,
        "rate_during_checkpoints": rate_during,
        "worst_bucket_during": min(during, default=None),
        "worst_bucket_between": min(between, default=None),
        "dip": round(1 - rate_during / rate_between, 4) if rate_during and rate_between else None,
        "buckets_during": len(during),
        "buckets_between": len(between),
        # what checkpoints cost the job, to compare with what they cost alone (dip_floor)
        "lost_share": lost_share(during, between, rate_between),
        **cost,
    }


def lost_share(during: list[float], between: list[float], rate_between: float | None) -> float | None:
    """The share of the job's capacity that checkpoints took over the steady part of the run: the records not
    processed in the buckets during checkpoints (below the rate between them), against what the whole part would
    have processed at the rate between. A checkpoint that costs the job only its own CPU, spread over the whole
    interval, takes ``dip_floor`` of :func:`measure_checkpoint_cost`.

    >>> lost_share([50.0, 100.0], [100.0, 100.0], 100.0)   # half a bucket lost out of four
    0.125
    """
    if not during or not rate_between:
        return None
    missing = sum(rate_between - rate for rate in during)
    return round(missing / (rate_between * (len(during) + len(between))), 4)


def measure_checkpoint_cost(keys: int, value_bytes: int, parallelism: int, interval_s: float,
                            cores: int | None = None) -> dict:
    """What checkpointing one subtask's share of the dip job's state costs in CPU, measured alone in this process
    (no Spark, nothing competing), and the dip that cost sets at the least.

    A heap backend holds subtask 0's keys of ``0..keys-1`` with the job's entries, updated in a random order as
    the job updates them (so that the entries lie in memory as they do in the job); the engine's own code pickles
    them and writes its state file to a local directory. The second of two checkpoints is timed, the first deleted
    before it as retention does (a fresh file's first pages cost more). Beside it: one copy of the same number of
    bytes (a bound of the machine: a checkpoint reads its state and writes it at least once). The floors are the
    dips if every subtask's checkpoint cost only that and were spread over the whole interval, on a job that keeps
    all ``cores`` busy: ``parallelism x cost / (cores x interval)``. Keep ``keys`` small in a doctest:

    >>> row = measure_checkpoint_cost(2_000, 64, parallelism=2, interval_s=5, cores=2)
    >>> row["subtask_keys"] > 500, row["pickle_core_s"] > 0, 0 < row["dip_floor"] < 1
    (True, True, True)
    """
    from runtime.keys.key_groups import assign_to_key_group, default_max_parallelism, key_group_range
    from state_backends.descriptors import ValueStateDescriptor
    from state_backends.heap import HeapKeyedStateBackend
    from state_backends.storage import CheckpointStorage

    max_parallelism = default_max_parallelism(parallelism)  # the job's, which sets none
    owned = key_group_range(max_parallelism, parallelism, 0)
    backend = HeapKeyedStateBackend(max_parallelism, owned)
    state = backend.get_state(ValueStateDescriptor("payload"))
    mine = [key for key in range(keys) if assign_to_key_group(key, max_parallelism) in owned]
    for key in mine:
        backend.set_current_key(key)
        state.update((1, os.urandom(value_bytes)))
    shuffled = random.Random(7)
    for _ in range(len(mine) * 3 // 2):
        backend.set_current_key(shuffled.choice(mine))
        count, payload = state.value()
        state.update((count + 1, payload))
    with tempfile.TemporaryDirectory(prefix="chandy-bench-checkpoint-cost-") as directory:
        storage = CheckpointStorage(directory, "cost")
        for checkpoint_id in (1, 2):
            if checkpoint_id == 2:
                storage.delete_checkpoint(1)
            started = time.process_time()
            pickled = list(backend.snapshot().serialized())
            pickling = time.process_time() - started
            handle = storage.write_state_file(checkpoint_id, "payload", 0, pickled)
            total = time.process_time() - started
    del pickled
    source, target = bytearray(b"x" * handle.size), bytearray(handle.size)
    for _ in range(2):  # the second copy, into pages the first one has already faulted in
        started = time.process_time()
        target[:] = source
        copying = time.process_time() - started
    del source, target
    cores = cores or os.cpu_count() or 1
    return {
        "subtask_keys": len(mine),
        "subtask_state_bytes": handle.size,
        "pickle_core_s": round(pickling, 6),
        "write_core_s": round(total - pickling, 6),
        "copy_core_s": round(copying, 6),
        "dip_floor": round(parallelism * total / (cores * interval_s), 4),
        "dip_floor_of_one_copy": round(parallelism * copying / (cores * interval_s), 4),
    }


def _time_when_total_reached(buckets: dict[int, int], total: int) -> float:
    seen = 0
    for bucket in sorted(buckets):
        seen += buckets[bucket]
        if seen >= total:
            return (bucket + 1) * BUCKET_S
    return float("inf")


def describe(row: dict) -> str:
    """One line for a dip row of :func:`run_checkpoint_dip` (the floor is measured for the heap only).

    >>> row = {"state_backend": "EmbeddedRocksDBStateBackend()", "state_bytes": 10_240_000, "interval_s": 5,
    ...        "rate_between_checkpoints": 60_000.0, "rate_during_checkpoints": 57_000.0, "dip": 0.05,
    ...        "worst_bucket_during": 1_000.0, "max_duration_ms": 3_000.0, "lost_share": 0.02,
    ...        **dict.fromkeys(_COST_FIELDS)}
    >>> print(describe(row))  # doctest: +NORMALIZE_WHITESPACE
    EmbeddedRocksDBStateBackend(): throughput with 10,240,000 bytes of state checkpointed every 5 s: 60,000/s
    between, 57,000/s during (dip 5.0%, worst 100 ms 1,000/s; longest checkpoint 3,000 ms); checkpoints took 2.0% of
    the job's capacity
    """
    line = (f"{row['state_backend']}: throughput with {row['state_bytes']:,} bytes of state checkpointed every "
            f"{row['interval_s']} s: {row['rate_between_checkpoints'] or 0:,.0f}/s between, "
            f"{row['rate_during_checkpoints'] or 0:,.0f}/s during (dip {row['dip'] or 0:.1%}, worst 100 ms "
            f"{row['worst_bucket_during'] or 0:,.0f}/s; longest checkpoint {row['max_duration_ms'] or 0:,.0f} ms); "
            f"checkpoints took {row['lost_share'] or 0:.1%} of the job's capacity")
    if row["dip_floor"] is None:
        return line
    return (f"{line}, and would take {row['dip_floor']:.1%} if they cost the job only what one costs alone "
            f"({row['pickle_core_s'] + row['write_core_s']:.2f} core-s a subtask: pickling {row['pickle_core_s']:.2f}, "
            f"writing {row['write_core_s']:.2f})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checkpoint_dip", description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=24)
    parser.add_argument("--rate-guess", type=float, default=500_000, help="records/s, to size the job")
    parser.add_argument("--interval", type=float, default=5, help="seconds between checkpoints")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args(argv)

    from benchmarks.session import spark_session
    from benchmarks.machine import steadied

    with spark_session(args.parallelism) as spark:
        for _ in range(args.repeats):
            row = steadied(lambda: run_checkpoint_dip(spark, args.keys, args.value_bytes, args.seconds,
                                                      args.rate_guess, args.parallelism, args.interval))
            print(describe(row), flush=True)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
