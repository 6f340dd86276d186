"""The columnar path on Spark: exact results, exactly-once after an exception and after SIGKILL, and a
rescaled restore whose state lands where the key-group formula says."""

import collections
import os
import random
import signal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators import CollectSink, SequenceSource
from runtime import RestartStrategies
from runtime.keys.key_groups import subtask_for_key
from tests.integration.paced import PacedSource
from tests.integration.test_exactly_once import expected_running_counts

N = 120_000
KEYS = 113
COUNTS = pa.schema([("key", pa.int64()), ("count", pa.int64())])
TAGGED = pa.schema([*COUNTS, ("subtask", pa.int64()), ("parallelism", pa.int64())])


def modulo(keys):
    return lambda b: {"key": pc.subtract(b["value"], pc.multiply(pc.divide(b["value"], keys), keys)),
                      "value": b["value"]}


def test_running_count_and_sum_are_exact_through_a_union_at_parallelism_3(env):
    env.set_parallelism(3)
    low = env.from_sequence(0, 49_999, columnar=True)
    high = env.from_sequence(50_000, 99_999, columnar=True)
    keyed = low.union(high).map_batches(modulo(KEYS)).key_by("key")
    counts, sums = CollectSink("counts"), CollectSink("sums")
    keyed.count().sink_to(counts)
    keyed.sum("value").sink_to(sums)
    result = env.execute("columnar-union")
    assert sorted(result.collected(counts)) == expected_running_counts(100_000, KEYS)
    per_key = collections.defaultdict(list)
    for x in range(100_000):
        per_key[x % KEYS].append(x)
    by_key = collections.defaultdict(list)
    for key, total in result.collected(sums):
        by_key[key].append(total)
    # per key: running sums over some interleaving of the two sources, so the steps are exactly its values
    assert set(by_key) == set(per_key)
    for key, totals in by_key.items():
        steps = [b - a for a, b in zip([0] + totals, totals)]
        assert sorted(steps) == per_key[key], f"key {key}"


class FailOnceAfterCheckpoint:
    """A batch function that passes batches through, and in the first attempt fails (raise or SIGKILL) once
    subtask 0 has seen ``threshold`` rows and a checkpoint has completed."""

    def __init__(self, threshold: int, how: str):
        self.threshold, self.how = threshold, how

    def open(self, runtime_context):
        self.first_attempt = runtime_context.get_attempt_number() == 0
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.completed = self.seen = 0

    def notify_checkpoint_complete(self, checkpoint_id):
        self.completed += 1

    def __call__(self, batch):
        self.seen += batch.num_rows
        if self.first_attempt and self.subtask == 0 and self.completed and self.seen >= self.threshold:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected failure after {self.seen} rows")
        return batch


@pytest.mark.parametrize("how", ["exception", "kill"])
def test_columnar_job_is_exactly_once_after_a_failure(env, tmp_path, how):
    seed = random.randrange(1 << 30)
    threshold = int(random.Random(seed).uniform(0.2, 0.8) * N / 2)
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    sink = CollectSink("counts")
    numbers = PacedSource(SequenceSource(0, N - 1, columnar=True), per_checkpoint=N // 2 // 10,
                          together=str(tmp_path / "paced"))
    (env.from_source(numbers, "numbers")
        .uid("numbers")
        .map_batches(modulo(KEYS)).uid("modulo")
        .key_by("key").count().uid("count")
        .map_batches(FailOnceAfterCheckpoint(threshold, how), schema=COUNTS).uid("fail-once")
        .sink_to(sink).uid("sink"))
    result = env.execute(f"columnar-exactly-once-{how}")
    assert result.restarts == 1, f"seed {seed}: the injected failure must have happened once"
    assert result.restored_from[1] is not None, f"seed {seed}"
    assert sorted(result.collected(sink)) == expected_running_counts(N, KEYS), f"seed {seed}"


class TagWithSubtask:
    """Adds which subtask, of how many, computed each row."""

    def open(self, runtime_context):
        self.where = (runtime_context.get_index_of_this_subtask(), runtime_context.get_number_of_parallel_subtasks())

    def __call__(self, batch):
        n = batch.num_rows
        return (batch.append_column("subtask", pa.array([self.where[0]] * n, pa.int64()))
                .append_column("parallelism", pa.array([self.where[1]] * n, pa.int64())))


def columnar_job(env, url, parallelism, per_checkpoint):
    env.set_parallelism(parallelism).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(url).set_max_retained_checkpoints(100)
    sink = CollectSink("counts")
    numbers = PacedSource(SequenceSource(0, N - 1, columnar=True), per_checkpoint=per_checkpoint,
                          together=url + "-paced")
    (env.from_source(numbers, "numbers").uid("numbers")
        .map_batches(modulo(KEYS)).uid("modulo")
        .key_by("key").count().uid("count")
        .map_batches(TagWithSubtask(), schema=TAGGED).uid("tag")
        .sink_to(sink).uid("sink"))
    return sink


def test_columnar_state_restores_at_another_parallelism_where_the_key_group_formula_says(spark, tmp_path):
    from runtime import StreamExecutionEnvironment

    url = str(tmp_path / "ck")
    first = StreamExecutionEnvironment.get_execution_environment(spark)
    columnar_job(first, url, 2, per_checkpoint=N // 2 // 10)
    checkpointed = first.execute("columnar-rescale")
    middle = checkpointed.checkpoints[len(checkpointed.checkpoints) // 2].checkpoint_id  # ten, by the pacing
    second = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = columnar_job(second, url, 3, per_checkpoint=None)
    result = second.execute("columnar-rescale", restore_from=middle)
    rows = result.collected(sink)
    assert sorted((key, n) for key, n, _, _ in rows) == expected_running_counts(N, KEYS)
    assert {p for *_, p in rows} == {2, 3}, "rows from before the checkpoint (p=2) and after the restore (p=3)"
    misplaced = [row for row in rows if row[2] != subtask_for_key(row[0], 128, row[3])]
    assert not misplaced, "every key was counted by its key group's owner"
