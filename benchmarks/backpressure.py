"""Checkpoints under backpressure, and savepoints of large state.

Backpressure: a fast source feeds a keyed map and a sink that takes ``per_record_ms`` per record (2 ms,
at parallelism 2, about 1,000 records/s against a source that could send a million), with
exactly-once checkpoints every second for ``seconds``. Without buffer debloating every channel holds up to
12 full batches (4,096 records each) and a barrier waits behind them; with it, batches shrink so that what is
in flight drains in about a second. Reported per variant: checkpoints completed and triggered, their duration,
start delay (trigger to the slowest subtask's first barrier) and alignment, and for unaligned checkpoints the
size of the records in flight they stored (channel state, pickled). Variants: aligned and unaligned, each without
and with debloating, and aligned switching to unaligned after a timeout (Flink's aligned checkpoint timeout).

Savepoints: the job of :mod:`benchmarks.checkpoint_dip` fills ``keys`` x ``value_bytes`` of keyed state and
holds; then one savepoint is taken and timed (trigger to the savepoint's ``_metadata``), with its size.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

from operators import DiscardingSink, SequenceSource, Sink, SinkWriter, Source, SourceReader
from runtime import StreamExecutionEnvironment

__all__ = ["run_backpressure", "run_savepoint"]


class _SlowWriter(SinkWriter):
    def __init__(self, per_record_s: float):
        self.per_record_s = per_record_s
        self.count = 0

    def write_batch(self, records: list) -> None:
        time.sleep(self.per_record_s * len(records))
        self.count += len(records)

    def result(self):
        return self.count


class SlowSink(Sink):
    """Takes ``per_record_ms`` per record; its result is how many records it took."""

    name = "slow"

    def __init__(self, per_record_ms: float):
        self.per_record_s = per_record_ms / 1000.0

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _SlowWriter(self.per_record_s)

    def merge_results(self, results: list) -> int:
        return sum(results)


def _summary(values: list[float]) -> tuple[float | None, float | None]:
    return (round(statistics.median(values), 1), round(max(values), 1)) if values else (None, None)


CHECKPOINT_PATIENCE_S = 60.0


def run_backpressure(spark, per_record_ms: float, seconds: float, parallelism: int, debloat: bool,
                     unaligned: bool = False, aligned_timeout_ms: int = 0, interval_ms: int = 1000,
                     min_checkpoints: int = 0) -> dict:
    """One variant: ``unaligned`` checkpoints (from the start, or after ``aligned_timeout_ms``), ``debloat``,
    checkpoints every ``interval_ms``. The window lasts ``seconds``, and longer until ``min_checkpoints`` have
    completed (up to ``CHECKPOINT_PATIENCE_S`` more): a short window on a busy machine may end before the first."""
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.enable_checkpointing(interval_ms)
    env._debloat_target_ms = None if debloat else 0
    with tempfile.TemporaryDirectory(prefix="chandy-bench-backpressure-") as checkpoints:
        config = env.get_checkpoint_config().set_checkpoint_storage(checkpoints)
        config.set_checkpoint_timeout(10_000).set_tolerable_checkpoint_failure_number(1_000)
        if unaligned:
            config.enable_unaligned_checkpoints().set_aligned_checkpoint_timeout(aligned_timeout_ms)
        env.from_source(SequenceSource(0, 10**12), "numbers").uid("numbers").map(lambda n: n).uid("first") \
            .key_by(lambda n: n % 100).map(lambda n: n).uid("second").sink_to(SlowSink(per_record_ms)).uid("sink")
        client = env.execute_async(f"backpressure-{'unaligned' if unaligned else 'aligned'}-"
                                   f"{'debloat' if debloat else 'plain'}-{aligned_timeout_ms}")
        time.sleep(seconds)
        coordinator = client._run.coordinator
        patience = time.monotonic() + CHECKPOINT_PATIENCE_S
        while len(coordinator.checkpoint_stats()) < min_checkpoints and time.monotonic() < patience:
            time.sleep(0.05)
        stats = coordinator.checkpoint_stats()
        triggered = coordinator.next_id - coordinator.first_id - (1 if coordinator.pending else 0)
        client.cancel()
    durations, delays = _summary([s.duration_ms for s in stats]), _summary([s.start_delay_ms for s in stats])
    persisted = _summary([s.persisted_bytes for s in stats])
    mode = f"aligned, unaligned after {aligned_timeout_ms} ms" if unaligned and aligned_timeout_ms else \
        "unaligned" if unaligned else "aligned"
    return {"variant": f"{mode}, {'buffer debloating (1 s)' if debloat else 'no debloating'}",
            "unaligned_checkpoints": sum(1 for s in stats if s.unaligned),
            "per_record_ms": per_record_ms, "seconds": seconds, "parallelism": parallelism,
            "checkpoints": len(stats), "triggered": triggered, "timed_out_or_open": triggered - len(stats),
            "median_duration_ms": durations[0], "max_duration_ms": durations[1],
            "median_start_delay_ms": delays[0], "max_start_delay_ms": delays[1],
            "max_alignment_ms": _summary([s.alignment_ms for s in stats])[1],
            "median_persisted_bytes": persisted[0], "max_persisted_bytes": persisted[1]}


def run_savepoint(spark, keys: int, value_bytes: int, parallelism: int) -> dict:
    from benchmarks.checkpoint_dip import KeepPayload

    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.enable_checkpointing(3_600_000)  # no periodic checkpoint gets in the way
    with tempfile.TemporaryDirectory(prefix="chandy-bench-savepoint-") as directory:
        env.get_checkpoint_config().set_checkpoint_storage(os.path.join(directory, "ck"))
        held = os.path.join(directory, "end")
        env.from_source(_Holding(SequenceSource(0, keys - 1), held), "keys").uid("keys") \
            .key_by(lambda n: n).process(KeepPayload(value_bytes)).uid("payload").sink_to(DiscardingSink())
        client = env.execute_async("savepoint-bench")
        while not all(os.path.exists(f"{held}.{i}") for i in range(parallelism)):  # every key has its payload
            time.sleep(0.05)
        started = time.monotonic()
        url = client.trigger_savepoint(os.path.join(directory, "savepoints"))
        took_ms = (time.monotonic() - started) * 1000.0
        path = url[len("file://"):]
        size = sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)
        client.cancel()
    return {"keys": keys, "value_bytes": value_bytes, "state_bytes": keys * value_bytes, "savepoint_ms": round(took_ms),
            "savepoint_bytes": size}


class _Holding(Source):
    """``inner``, whose readers each mark ``<path>.<subtask>`` once exhausted and then hold (never finish)."""

    def __init__(self, inner: Source, path: str):
        self.inner, self.path = inner, path
        self.parallel, self.bounded, self.schema = inner.parallel, False, inner.schema

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        return _HoldingReader(self.inner.create_reader(subtask_index, parallelism), f"{self.path}.{subtask_index}")


class _HoldingReader(SourceReader):
    def __init__(self, inner: SourceReader, mark: str):
        self.inner, self.mark = inner, mark
        self.union_state = inner.union_state

    def open(self, runtime_context) -> None:
        self.inner.open(runtime_context)

    def poll(self, max_records: int):
        batch = self.inner.poll(max_records)
        if batch is None:
            if not os.path.exists(self.mark):
                open(self.mark, "w").close()
            time.sleep(0.01)
            return []
        return batch

    def snapshot_state(self) -> list:
        return self.inner.snapshot_state()

    def restore_state(self, splits: list) -> None:
        self.inner.restore_state(splits)

    def close(self) -> None:
        self.inner.close()
