"""Event time and timers end to end: timestamps across channels, watermarks, event-time and processing-time
timers, exactly once after an exception and a SIGKILL, restored at another parallelism, and idleness.

The reference job (tests/integration/time_jobs.py) counts records per key and 100 ms bucket of event time with an
event-time timer per bucket. Its operator's semantics (each timer once, with its time as timestamp, on the
watermarks before the end) are also tested without Spark, by test harnesses: tests/unit/test_time_semantics.py.
"""

import collections
import os
import random

import pytest

from operators import (
    CollectSink,
    KeyedProcessFunction,
    ProcessFunction,
    SequenceSource,
    Source,
    SourceReader,
    ValueStateDescriptor,
)
from runtime import Duration, RestartStrategies, StreamExecutionEnvironment
from state_backends.storage import CheckpointStorage
from tests.integration.chaos import ChaosMap, plan, remaining
from tests.integration.paced import PacedSource
from tests.integration.time_jobs import MAX_WATERMARK, BucketCount, reference, strategy
from tests.integration.waiting import wait_for


class WithTimestampAndWatermark(ProcessFunction):
    """Downstream of the timers: the record's timestamp (the timer's time) and this operator's watermark."""

    def process_element(self, value, ctx):
        yield value, ctx.timestamp(), ctx.timer_service().current_watermark()


def bucket_job(env, n, keys, source=None):
    sink = CollectSink("buckets")
    source = source or SequenceSource(0, n - 1)
    (env.from_source(source, strategy(), "numbers").uid("numbers")
     .key_by(lambda x: x % keys).process(BucketCount()).uid("buckets")
     .process(WithTimestampAndWatermark()).uid("stamps")
     .sink_to(sink).uid("sink"))
    return sink


def test_event_time_timers_fire_once_each_with_their_time_as_timestamp_and_watermarks_flow_before_the_end(env):
    # At parallelism 4: timestamps and watermarks across four channels into each subtask of the timers, and on to
    # the next operator.
    n, keys = 60_000, 13
    env.set_parallelism(4)
    env.get_config().set_auto_watermark_interval(10)
    sink = bucket_job(env, n, keys)
    out = env.execute("buckets-p4").collected(sink)
    assert {(key, end): count for (key, end, count), _, _ in out} == reference(n, keys)
    assert len(out) == len(reference(n, keys)), "a timer fired twice"
    assert all(timestamp == end for (_, end, _), timestamp, _ in out), "timer output carries the timer's time"
    # Watermarks went downstream while the job ran, not only the final one at the end of the input.
    assert any(watermark < MAX_WATERMARK for _, _, watermark in out)


def checkpointed_bucket_job(env, tmp_path, parallelism, n, keys, chaos=None, url=None):
    env.set_parallelism(parallelism).enable_checkpointing(100)
    env.get_config().set_auto_watermark_interval(10)
    env.get_checkpoint_config().set_checkpoint_storage(url or str(tmp_path / "checkpoints"))
    env.get_checkpoint_config().set_max_retained_checkpoints(1000)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    numbers = PacedSource(SequenceSource(0, n - 1), per_checkpoint=n // parallelism // 10,
                          together=str(tmp_path / "paced"))
    stream = env.from_source(numbers, strategy(), "numbers").uid("numbers")
    if chaos is not None:
        stream = stream.map(chaos).uid("chaos")
    sink = CollectSink("buckets")
    stream.key_by(lambda x: x % keys).process(BucketCount()).uid("buckets").sink_to(sink).uid("sink")
    return sink


@pytest.mark.parametrize("how", ["exception", "kill"])
def test_timers_and_their_state_are_exactly_once_after_a_failure(env, tmp_path, how):
    n, keys = 40_000, 11
    faults = plan(str(tmp_path / "faults"), "fail")
    after = random.Random().randrange(n // 10, n // 3)
    sink = checkpointed_bucket_job(env, tmp_path, 2, n, keys, ChaosMap(faults, "fail", how, after))
    result = env.execute(f"timers-{how}")
    assert remaining(faults) == [] and result.restarts == 1
    assert result.restored_from[1] is not None, "the restart restored a checkpoint"
    out = result.collected(sink)
    assert sorted(out) == sorted((key, end, count) for (key, end), count in reference(n, keys).items())


def test_timers_move_with_their_key_groups_when_restored_at_another_parallelism(spark, tmp_path):
    n, keys = 40_000, 23
    url = str(tmp_path / "ck")
    first = StreamExecutionEnvironment.get_execution_environment(spark)
    checkpointed_bucket_job(first, tmp_path, 2, n, keys, url=url)
    client = first.execute_async("timers-rescale")
    storage = CheckpointStorage("file://" + url, "timers-rescale")
    wait_for(lambda: len(storage.usable_ids()) >= 2, what="two completed checkpoints")
    client.cancel()
    checkpoint = storage.usable_ids()[-1]
    for parallelism in (3, 1):
        env = StreamExecutionEnvironment.get_execution_environment(spark)
        sink = checkpointed_bucket_job(env, tmp_path / f"p{parallelism}", parallelism, n, keys, url=url)
        result = env.execute("timers-rescale", restore_from=checkpoint)
        assert result.restored_from[0] is not None
        assert sorted(result.collected(sink)) == sorted(
            (key, end, count) for (key, end), count in reference(n, keys).items()), f"parallelism {parallelism}"


class RemindOnce(KeyedProcessFunction):
    """Per key: a processing-time timer 300 ms after its first record; firing writes a file per key."""

    def __init__(self, fired):
        self.fired = fired

    def open(self, runtime_context):
        self.armed = runtime_context.get_state(ValueStateDescriptor("armed"))

    def process_element(self, value, ctx):
        if self.armed.value() is None:
            self.armed.update(True)
            ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 300)

    def on_timer(self, timestamp, ctx):
        open(os.path.join(self.fired, str(ctx.get_current_key())), "a").close()
        yield ctx.get_current_key(), ctx.time_domain().name, ctx.timestamp()


class FilesAtLeast:
    """``end_when``: the directory holds at least ``count`` files."""

    def __init__(self, directory, count):
        self.directory, self.count = directory, count

    def __call__(self):
        return len(os.listdir(self.directory)) >= self.count


@pytest.mark.parametrize("how", ["exception", "kill"])
def test_processing_time_timers_fire_once_and_survive_a_restart(env, tmp_path, how):
    keys = 7
    fired = tmp_path / "fired"
    fired.mkdir()
    faults = plan(str(tmp_path / "faults"), "fail")
    env.set_parallelism(2).enable_checkpointing(50)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    # The source holds its end until every key's timer fired: processing-time timers do not fire after the end of
    # the input (as in Flink).
    numbers = PacedSource(SequenceSource(0, 999), end_when=FilesAtLeast(str(fired), keys),
                          together=str(tmp_path / "paced"))
    sink = CollectSink("reminders")
    # The failure comes right after the first checkpoint, within the timers' 300 ms: they fire after the restart.
    (env.from_source(numbers, "numbers").uid("numbers").map(ChaosMap(faults, "fail", how, 1)).uid("chaos")
     .key_by(lambda x: x % keys).process(RemindOnce(str(fired))).uid("remind").sink_to(sink).uid("sink"))
    result = env.execute(f"processing-timers-{how}")
    assert result.restarts == 1
    assert sorted(result.collected(sink)) == [(k, "PROCESSING_TIME", None) for k in range(keys)]


class SilentPartition(Source):
    """Subtask 0 reads ``records``; subtask 1 has nothing to say until ``wake`` exists, then reads ``late``.
    Both hold their end until ``wake`` exists."""

    def __init__(self, records, late, wake):
        self.records, self.late, self.wake = records, late, wake

    def create_reader(self, subtask_index, parallelism):
        return _SilentReader(self.records if subtask_index == 0 else None, self.late, self.wake)


class _SilentReader(SourceReader):
    def __init__(self, records, late, wake):
        self.records, self.late, self.wake = records, late, wake
        self.position = 0
        self.woke = False

    def poll(self, max_records):
        import time

        if self.records is not None and self.position < len(self.records):
            batch = self.records[self.position:self.position + max_records]
            self.position += len(batch)
            return batch
        if not os.path.exists(self.wake):
            time.sleep(0.002)
            return []
        if self.records is None and not self.woke:
            self.woke = True
            return list(self.late)
        return None

    def snapshot_state(self):
        return [self.position]

    def restore_state(self, splits):
        self.position = splits[0] if splits else 0


class FireMarks(BucketCount):
    def __init__(self, marker):
        self.marker = marker

    def on_timer(self, timestamp, ctx):
        if ctx.timer_service().current_watermark() < MAX_WATERMARK:
            open(self.marker, "a").close()
        yield from super().on_timer(timestamp, ctx)


def test_an_idle_partition_does_not_hold_timers_back_and_its_records_count_when_it_wakes(env, tmp_path):
    keys = 5
    wake = str(tmp_path / "wake")
    records = list(range(3_000))
    late = list(range(3_000, 3_100))  # timestamps ahead of what the busy partition reached: not late
    env.set_parallelism(2)
    env.get_config().set_auto_watermark_interval(10)
    idle_aware = strategy().with_idleness(Duration.of_millis(100))
    sink = CollectSink("buckets")
    (env.from_source(SilentPartition(records, late, wake), idle_aware, "numbers")
     .key_by(lambda x: x % keys).process(FireMarks(wake)).sink_to(sink))
    client = env.execute_async("idleness")
    # Timers fire while the second partition says nothing: without idleness this never happens.
    wait_for(lambda: os.path.exists(wake), what="a timer firing while one source partition is idle")
    out = client.get_job_execution_result().collected(sink)
    got = collections.Counter()
    for key, end, count in out:
        got[(key, end)] += count
    assert dict(got) == reference(3_100, keys)
