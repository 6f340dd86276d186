"""Throughput while large keyed state is checkpointed, measured inside a running job.

The job keeps a payload of ``value_bytes`` per key (``keys`` keys, so state of keys x value_bytes) and
updates its key's entry for every record; exactly-once checkpoints run every ``interval_s`` (longer than
a checkpoint takes, as a user would set it, else the job is checkpointing all the time). The sink counts records
per 100 ms; buckets overlapping a checkpoint (trigger to completion, from the job's checkpoint statistics)
are compared with the others. The dip is ``1 - rate during checkpoints / rate between them``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

from operators import KeyedProcessFunction, Sink, SinkWriter, ValueStateDescriptor
from runtime import StreamExecutionEnvironment

BUCKET_S = 0.1


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
                       parallelism: int, interval_s: float, state_backend=None, storage: str | None = None) -> dict:
    """One job of about ``seconds`` at ``rate_guess`` records/s; the first pass over the keys fills the state
    and is left out of the comparison. ``state_backend``: the job's (default: the heap); ``storage``: the checkpoint
    storage's URL (default: a temporary local directory)."""
    records = int(seconds * rate_guess)
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    if state_backend is not None:
        env.set_state_backend(state_backend)
    with tempfile.TemporaryDirectory(prefix="chandy-bench-dip-") as checkpoints:
        env.enable_checkpointing(interval_s * 1000)
        env.get_checkpoint_config().set_checkpoint_storage(storage or checkpoints)
        sink = RateSink()
        (env.from_sequence(0, records - 1)
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
    return {
        "state_backend": repr(state_backend or env.get_state_backend()),
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
    }


def _time_when_total_reached(buckets: dict[int, int], total: int) -> float:
    seen = 0
    for bucket in sorted(buckets):
        seen += buckets[bucket]
        if seen >= total:
            return (bucket + 1) * BUCKET_S
    return float("inf")
