"""Batch execution mode against streaming mode on the same bounded job.

The job: the integers ``0..records-1``, key ``x % keys``, a keyed ``reduce`` summing ``(key, 1)`` pairs, into a
sink that keeps each key's latest value. Streaming mode emits every running value (one per record) and takes
checkpoints every second; batch mode emits each key's final value once and takes none. Both results are checked
against a plain-Python reference: the final value of every key.

>>> expected_counts(10, 3)
{0: 4, 1: 3, 2: 3}
"""

from __future__ import annotations

import collections
import tempfile
import time

from operators import Sink, SinkWriter
from operators.sources import SequenceSource
from runtime import StreamExecutionEnvironment
from runtime.datastream import RuntimeExecutionMode


def expected_counts(records: int, keys: int) -> dict:
    return dict(collections.Counter(n % keys for n in range(records)))


class _LatestWriter(SinkWriter):
    def __init__(self):
        self.latest: dict = {}
        self.received = 0

    def write_batch(self, records: list) -> None:
        self.received += len(records)
        latest = self.latest
        for key, count in records:
            latest[key] = count

    def result(self):
        return self.latest, self.received


class LatestPerKey(Sink):
    """Each key's latest value (a key lives in one subtask, whose records of it arrive in order)."""

    name = "latest"

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _LatestWriter()

    def merge_results(self, results: list):
        latest: dict = {}
        received = 0
        for part, count in results:
            latest.update(part)
            received += count
        return latest, received


def run_bounded_reduce(spark, records: int, keys: int, parallelism: int, mode: RuntimeExecutionMode,
                       expected: dict) -> dict:
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.set_runtime_mode(mode)
    with tempfile.TemporaryDirectory(prefix="chandy-bench-batch-") as checkpoints:
        env.enable_checkpointing(1000)  # streaming mode takes them; batch mode takes none
        env.get_checkpoint_config().set_checkpoint_storage(checkpoints)
        (env.from_source(SequenceSource(0, records - 1), "numbers")
            .map(lambda n: (n % keys, 1)).key_by(lambda pair: pair[0])
            .reduce(lambda a, b: (a[0], a[1] + b[1])).sink_to(LatestPerKey()))
        started = time.perf_counter()
        result = env.execute(f"benchmark-{mode.value.lower()}")
        elapsed = time.perf_counter() - started
    (latest, received), = result.sink_results.values()
    return {"variant": f"chandy-bounded-reduce-{mode.value.lower()}", "measured": elapsed > 0 and bool(latest),
            "exact": latest == expected, "records": records, "records_emitted": received,
            "wall_s": round(elapsed, 3), "records_per_s": round(records / elapsed),
            "checkpoints": len(result.checkpoints)}
