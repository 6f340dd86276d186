"""Window semantics, without Spark: the window operators a job declares (tests/integration/window_jobs.py), driven
by test harnesses as their subtasks run them, against the plain-Python references the job on Spark is checked
against: every window kind at parallelism 1 and 2 (each subtask a harness fed the keys it owns); late data within
and past the allowed lateness. (tests/integration/test_windows.py runs the whole job on Spark at parallelism 4.)"""

import collections
import dataclasses
import doctest

import pytest

from operators import TumblingEventTimeWindows, WindowFunction
from runtime import OutputTag, StreamExecutionEnvironment, WatermarkStrategy
from runtime.testing import KeyedOperatorHarness
from tests.integration import window_jobs
from tests.integration.window_jobs import KEYS, WINDOWS, WindowKind, check_windows, session_reference, strategy
from tests.unit import keyed_subtasks
from tests.unit.keyed_subtasks import KeyedSubtasks, stamped_batches

N = 6_000
BATCH = 97  # records between two watermarks
TICK_MS = 37  # processing time between two batches: processing-time windows fire while records come


def run_window(name: str, parallelism: int, n: int = N, kind: WindowKind | None = None) -> list:
    """What window kind ``name`` emits for the numbers ``0..n-1`` in order, stamped by the job's strategy: each
    batch, then the watermark after it, then processing time moves on; at the end the input ends."""
    kind = kind or WINDOWS[name]
    subtasks = KeyedSubtasks(kind.on, kind.key or (lambda record: 0), parallelism)
    subtasks.open()
    for tick, (numbers, timestamps, watermark) in enumerate(stamped_batches(list(range(n)), strategy(), BATCH)):
        subtasks.process_elements(numbers if kind.prepare is None else [kind.prepare(x) for x in numbers],
                                  timestamps)
        subtasks.process_watermark(watermark)
        subtasks.set_processing_time((tick + 1) * TICK_MS)
    subtasks.end_input()
    return subtasks.output()


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_every_window_kind_matches_the_reference(name, parallelism):
    got = run_window(name, parallelism)
    window_jobs.CHECKS[name](got, N)


def test_the_checks_take_every_kind_at_once_as_the_job_on_spark_gives_them():
    check_windows({name: run_window(name, 1, n=500) for name in WINDOWS}, 500)


def test_sessions_merge_out_of_order_where_one_keys_records_come_closer_than_the_gap():
    # Keyed by x % 7, as in the job, each session holds one record; keyed by one key, the records come 0-90 ms
    # apart and out of order, so sessions grow, and a record can bridge two of them.
    kind = dataclasses.replace(WINDOWS["sessions"], key=lambda x: 0)
    expected = session_reference(N, keys=1)
    assert len(expected) < N // 3
    assert sorted(run_window("sessions", 1, kind=kind)) == expected


def test_count_windows_sum_each_keys_records_five_at_a_time_in_arrival_order():
    # In one ordered input the arrival order is fixed, so each count window's total is too.
    per_key = collections.defaultdict(list)
    for x in range(N):
        per_key[x % KEYS].append(x)
    expected = [sum(xs[i:i + 5]) for xs in per_key.values() for i in range(0, len(xs) - 4, 5)]
    assert sorted(run_window("count", 1)) == sorted(expected)


def test_processing_time_windows_fire_while_records_come_not_only_at_the_end():
    kind = WINDOWS["processing"]
    harness = KeyedOperatorHarness.for_stream(kind.on)
    harness.open()
    harness.set_processing_time(1_000)
    harness.process_elements([kind.prepare(x) for x in range(20)])
    harness.set_processing_time(1_098)
    assert harness.output() == []
    harness.set_processing_time(1_099)  # the last millisecond of the pane [1000, 1100)
    assert sorted(harness.output()) == sorted(collections.Counter(x % KEYS for x in range(20)).items())


class SumOfValues(WindowFunction):
    def apply(self, key, window, inputs):
        yield key, window.start, sum(record[1] for record in inputs)


def lateness_job(stream, late):
    return (stream.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(1_000)).allowed_lateness(3_000)
            .side_output_late_data(late).apply(SumOfValues()))


def test_late_records_fire_the_window_again_within_the_lateness_and_go_to_the_side_output_after_it():
    late = OutputTag("late")
    # (key, value, event time), stamped as a job's monotonous strategy stamps them
    first = [("a", 1, 100), ("a", 2, 900), ("b", 5, 1_500), ("a", 0, 5_000)]
    then = [("a", 10, 500),   # window [0, 1000): past the watermark, gone (cleanup at 999 + 3000 < 4999): late
            ("b", 20, 1_200),  # window [1000, 2000): cleanup at 1999 + 3000 = 4999 <= 4999: late too
            ("a", 30, 2_500)]  # window [2000, 3000): within the lateness: fires again at once
    watermarks = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r[2])
    harness = KeyedOperatorHarness.for_stream(lambda ds: lateness_job(ds, late))
    harness.open()
    (records, timestamps, watermark), = stamped_batches(first, watermarks, batch_size=len(first))
    harness.process_elements(records, timestamps)
    harness.process_watermark(watermark)  # the first phase takes the watermark to 5000 - 1
    assert watermark == 4_999
    assert sorted(harness.output()) == [("a", 0, 3), ("b", 1_000, 5)]
    harness.process_elements(then, [r[2] for r in then])
    assert harness.output()[-1] == ("a", 2_000, 30), "a late record within the lateness fires at once"
    harness.end_input()
    assert sorted(harness.output()) == [("a", 0, 3), ("a", 2_000, 30), ("a", 5_000, 0), ("b", 1_000, 5)]
    assert sorted(harness.side_output(late)) == [("a", 10, 500), ("b", 20, 1_200)]


def test_a_job_hands_the_late_data_tag_to_its_window_operator():
    # A harness collects every side output; in a job the window emits late records only under a tag the job
    # reads (get_side_output), which the job graph tells the operator.
    late = OutputTag("late")
    env = StreamExecutionEnvironment.get_execution_environment()
    windows = lateness_job(env.from_collection([("a", 1, 100)]), late)
    windows.print()
    windows.get_side_output(late).print()
    window = next(node for node in env.get_job_graph("lateness").operators if node.name.startswith("Window"))
    assert window.operator.late_tag == late and late.tag_id in window.operator.side_tags


def test_the_subtask_helpers_examples_hold():
    assert doctest.testmod(keyed_subtasks).failed == 0
