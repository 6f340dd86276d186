"""Batch execution mode: the same final result as streaming on bounded input, reached Flink's batch way: each
key's records together, event-time timers and windows at the end, only final values from a reduce, no
checkpoints, and a failure runs the job again from the start. (That the same reduce in STREAMING mode emits every
running value is tested without Spark, by test harnesses: tests/unit/test_keyed_running_results.py.)"""

import collections
import random

import pytest

from operators import (
    CollectSink,
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
    MapStateDescriptor,
    SequenceSource,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
)
from runtime import Duration, RestartStrategies, WatermarkStrategy
from runtime.datastream import RuntimeExecutionMode
from tests.integration.chaos import ChaosMap, plan, remaining

N, KEYS = 20_000, 37


def word_counts(env, tmp_path, mode, parallelism, chaos=None):
    env.set_runtime_mode(mode).set_parallelism(parallelism).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    numbers = env.from_source(SequenceSource(0, N - 1), "numbers")
    if chaos is not None:
        numbers = numbers.map(chaos)
    sink = CollectSink("counts")
    numbers.map(lambda n: (n % KEYS, 1)).key_by(lambda p: p[0]).reduce(lambda a, b: (a[0], a[1] + b[1])) \
        .sink_to(sink)
    return sink


def final_counts():
    return sorted(collections.Counter(n % KEYS for n in range(N)).items())


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_batch_reduce_emits_each_keys_final_value_only_and_takes_no_checkpoints(env, tmp_path, parallelism):
    sink = word_counts(env, tmp_path, RuntimeExecutionMode.BATCH, parallelism)
    result = env.execute(f"batch-reduce-p{parallelism}")
    assert sorted(result.collected(sink)) == final_counts()
    assert result.checkpoints == []


def test_automatic_mode_with_bounded_sources_runs_as_batch(env, tmp_path):
    sink = word_counts(env, tmp_path, RuntimeExecutionMode.AUTOMATIC, 2)
    assert sorted(env.execute("automatic").collected(sink)) == final_counts()


@pytest.mark.parametrize("how", ["exception", "kill"])
def test_a_failure_in_batch_mode_runs_the_job_again_from_the_start(env, tmp_path, how):
    faults = plan(str(tmp_path / "faults"), "fail")
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    sink = word_counts(env, tmp_path, RuntimeExecutionMode.BATCH, 2,
                       ChaosMap(faults, "fail", how, random.Random().randrange(100, 5_000), needs_checkpoint=False))
    result = env.execute(f"batch-{how}")
    assert remaining(faults) == [] and result.restarts == 1 and result.restored_from == [None, None]
    assert sorted(result.collected(sink)) == final_counts()


class KeyRuns(KeyedProcessFunction):
    """Each record's key and this subtask's running count of key changes: a key whose records come together
    changes only once."""

    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.previous, self.changes = None, 0

    def process_element(self, value, ctx):
        key = ctx.get_current_key()
        if key != self.previous:
            self.changes += 1
            self.previous = key
        yield self.subtask, key, self.changes


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_keyed_operator_sees_each_keys_records_together(env, parallelism):
    env.set_runtime_mode(RuntimeExecutionMode.BATCH).set_parallelism(parallelism)
    sink = CollectSink("runs")
    env.from_source(SequenceSource(0, N - 1), "numbers").key_by(lambda n: n % KEYS).process(KeyRuns()) \
        .sink_to(sink)
    out = env.execute(f"key-runs-p{parallelism}").collected(sink)
    assert len(out) == N
    runs = {(subtask, key, change) for subtask, key, change in out}
    assert len(runs) == KEYS, "every key forms one run of records"


class Timeout(KeyedProcessFunction):
    """Counts a key's records and reports the count from an event-time timer 1 s after the key's first record."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        if self.count.value() is None:
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1_000)
        self.count.update((self.count.value() or 0) + 1)

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), self.count.value(), timestamp


def event_time_job(env, mode):
    env.set_runtime_mode(mode).set_parallelism(2)
    env.get_config().set_auto_watermark_interval(10)
    stamped = env.from_source(
        SequenceSource(0, N - 1),
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(50))
        .with_timestamp_assigner(lambda n, _: n), "numbers")
    windows, timers = CollectSink("windows"), CollectSink("timers")
    stamped.map(lambda n: (n % 5, n)).key_by(lambda p: p[0]).window(TumblingEventTimeWindows.of(1_000)) \
        .reduce(lambda a, b: (a[0], a[1] + b[1])).sink_to(windows)
    stamped.key_by(lambda n: n % KEYS).process(Timeout()).sink_to(timers)
    return windows, timers


def test_windows_and_event_time_timers_give_the_streaming_result(env):
    windows, timers = event_time_job(env, RuntimeExecutionMode.STREAMING)
    streaming = env.execute("event-time-streaming")
    windows, timers = event_time_job(env, RuntimeExecutionMode.BATCH)
    batch = env.execute("event-time-batch")
    expected = collections.Counter()
    for n in range(N):
        expected[(n % 5, n // 1_000)] += n
    assert sorted(batch.collected(windows)) == sorted(streaming.collected(windows)) == sorted(
        (k, total) for (k, _), total in expected.items())
    # in batch mode the timers fire once the input is complete: each sees its key's full count
    assert sorted(batch.collected(timers)) == sorted(
        (k, sum(1 for n in range(N) if n % KEYS == k), k + 1_000) for k in range(KEYS))
    assert len(streaming.collected(timers)) == KEYS


LIMIT = MapStateDescriptor("limit")


class OverLimit(KeyedBroadcastProcessFunction):
    def process_element(self, value, ctx):
        limit = ctx.get_broadcast_state(LIMIT).get("max")
        yield value, limit is not None and value > limit

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(LIMIT).put("max", value)


def test_the_broadcast_side_is_complete_before_any_keyed_record_in_batch_mode(env):
    env.set_runtime_mode(RuntimeExecutionMode.BATCH).set_parallelism(2)
    sink = CollectSink("judged")
    limits = env.from_collection([N // 2]).broadcast(LIMIT)
    env.from_source(SequenceSource(0, N - 1), "numbers").key_by(lambda n: n % KEYS).connect(limits) \
        .process(OverLimit()).sink_to(sink)
    assert sorted(env.execute("batch-broadcast").collected(sink)) == [(n, n > N // 2) for n in range(N)]


def add_amounts_refusing_500_mod_1000(a, b):
    if b[1] % 1000 == 500:
        raise ValueError(f"refused amount {b[1]}")
    return a[0], a[1] + b[1]


def test_a_batch_reduce_sets_aside_the_records_whose_function_raises_and_sums_the_rest(env):
    from runtime import OutputTag

    env.set_runtime_mode(RuntimeExecutionMode.BATCH).set_parallelism(2)
    failed = OutputTag("refused")
    # A key's first record starts its fold without a call; whichever subtask's comes first, it is below 37 or in
    # 10000..10036, and none of those is refused.
    totals = env.from_source(SequenceSource(0, N - 1), "numbers").map(lambda n: (n % KEYS, n)) \
        .key_by(lambda p: p[0]).reduce(add_amounts_refusing_500_mod_1000).name("total") \
        .side_output_failed_records(failed)
    main, side = CollectSink("totals"), CollectSink("refused")
    totals.sink_to(main)
    totals.get_side_output(failed).sink_to(side)
    result = env.execute("batch-failed-records")
    refused = [(n % KEYS, n) for n in range(N) if n % 1000 == 500]
    expected = collections.Counter()
    for n in range(N):
        if (n % KEYS, n) not in refused:
            expected[n % KEYS] += n
    assert sorted(result.collected(main)) == sorted(expected.items())
    assert sorted(f.record for f in result.collected(side)) == sorted(refused)
    assert {f.operator for f in result.collected(side)} == {"total"} and result.restarts == 0
