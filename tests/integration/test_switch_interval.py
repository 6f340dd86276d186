"""On the executors: spark.chandy.gilSwitchInterval is the switch interval of the Python worker while its slot runs,
and Python's own again for the next task; and a running slot keeps its long-lived objects frozen out of full
collections, and its batches run with the young generation's threshold raised (their collections come after them).
Read by the job's own functions on the workers; nothing is timed."""

import gc

from operators import CollectSink, CoMapFunction
from runtime import Types

KEY = "spark.chandy.gilSwitchInterval"


def _seen_on_the_workers():
    import gc
    import sys

    return lambda x: (x, sys.getswitchinterval(), gc.get_freeze_count() > 0)


def _run(env, name):
    env.set_parallelism(2)
    sink = CollectSink()
    env.from_sequence(0, 999).map(_seen_on_the_workers()).key_by(lambda r: r[0] % 7, key_type=Types.LONG()) \
        .map(lambda r: r).sink_to(sink)
    return env.execute(name).collected(sink)


def test_the_workers_run_a_slot_with_the_switch_interval_set_and_python_s_own_after_it(spark, env):
    spark.conf.set(KEY, "500 us")
    try:
        records = _run(env, "switch-interval-set")
    finally:
        spark.conf.unset(KEY)
    assert sorted(r[0] for r in records) == list(range(1000))
    assert {r[1] for r in records} == {0.0005}
    assert {r[2] for r in records} == {True}  # the slot's modules and operators, frozen while it runs
    again = _run(env, "switch-interval-unset")
    assert {r[1] for r in again} == {0.005}  # the reused workers were put back


def test_a_subtask_processes_its_batches_with_the_young_threshold_raised(env):
    env.set_parallelism(2)
    sink = CollectSink()
    env.from_sequence(0, 999).map(lambda x: gc.get_threshold()[0]).sink_to(sink)  # one chain a slot
    assert env.execute("young-threshold").collected(sink) == [100 * gc.get_threshold()[0]] * 1000


class _Thresholds(CoMapFunction):
    def map1(self, value):
        return "first", gc.get_threshold()[0]

    def map2(self, value):
        return "second", gc.get_threshold()[0]


def test_a_two_input_operator_processes_both_inputs_with_the_young_threshold_raised(env):
    env.set_parallelism(1)
    sink = CollectSink()
    env.from_sequence(0, 99).connect(env.from_sequence(0, 99)).map(_Thresholds()).sink_to(sink)
    raised = 100 * gc.get_threshold()[0]
    assert sorted(env.execute("young-threshold-two-inputs").collected(sink)) == \
        [("first", raised)] * 100 + [("second", raised)] * 100
