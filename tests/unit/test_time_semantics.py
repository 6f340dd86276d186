"""Event time and timers without Spark: the timer job's operator (tests/integration/time_jobs.py) driven by test
harnesses, at parallelism 1 and 2, against the reference the job on Spark is checked against; a timestamp
assigner's contract; and the declarations refused for timers on streams that are not keyed.
(tests/integration/test_time.py runs the timer job on Spark at parallelism 4, through failures and restores.)"""

import pytest

from operators import CoProcessFunction, ProcessFunction
from runtime import StreamExecutionEnvironment, WatermarkStrategy
from runtime.errors import ApiUsageError, FunctionContractError
from runtime.testing import OperatorHarness
from tests.integration.time_jobs import MAX_WATERMARK, BucketCount, reference, strategy
from tests.unit.keyed_subtasks import KeyedSubtasks, stamped_batches

BATCH = 512  # records between two watermarks


@pytest.mark.parametrize("parallelism", [1, 2])
def test_event_time_timers_fire_once_each_with_their_time_as_timestamp_and_on_the_watermarks_before_the_end(
        parallelism):
    n, keys = 60_000, 13
    subtasks = KeyedSubtasks(lambda ds: ds.key_by(lambda x: x % keys).process(BucketCount()), lambda x: x % keys,
                             parallelism)
    subtasks.open()
    watermark = None
    for numbers, timestamps, watermark in stamped_batches(list(range(n)), strategy(), BATCH):
        subtasks.process_elements(numbers, timestamps)
        subtasks.process_watermark(watermark)
    before_the_end = subtasks.output_with_timestamps()
    subtasks.end_input()
    out = subtasks.output_with_timestamps()
    assert {(key, end): count for (key, end, count), _ in out} == reference(n, keys)
    assert len(out) == len(reference(n, keys)), "a timer fired twice"
    assert all(timestamp == end for (_, end, _), timestamp in out), "timer output carries the timer's time"
    # Timers fired on the watermarks while the input came, not only on the final one at its end, and none early.
    assert before_the_end and all(end <= watermark for (_, end, _), _ in before_the_end)
    assert all(harness.watermarks()[-1] == MAX_WATERMARK for harness in subtasks.harnesses)


def test_a_timestamp_assigner_returning_none_fails_naming_the_operator_and_the_record():
    bad = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda n, _: None if n == 5 else n)
    harness = OperatorHarness.for_stream(lambda ds: ds.assign_timestamps_and_watermarks(bad))
    harness.open()
    with pytest.raises(FunctionContractError, match=r"Timestamps/Watermarks.*returned None for record 5"):
        harness.process_elements(list(range(10)))


def test_on_timer_in_a_function_that_is_not_keyed_is_refused_at_declaration():
    class Timed(ProcessFunction):
        def process_element(self, value, ctx):
            yield value

        def on_timer(self, timestamp, ctx):
            yield timestamp

    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ApiUsageError, match="timers need a keyed stream"):
        env.from_collection([1]).process(Timed())


def test_timers_in_a_function_on_connected_streams_that_are_not_keyed_are_refused():
    class Timed(CoProcessFunction):
        def process_element1(self, value, ctx):
            yield value

        def process_element2(self, value, ctx):
            yield value

        def on_timer(self, timestamp, ctx):
            yield timestamp

    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ApiUsageError, match="keyed streams"):
        env.from_collection([1]).connect(env.from_collection([2])).process(Timed())
