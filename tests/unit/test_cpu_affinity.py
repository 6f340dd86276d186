"""spark.chandy.cpuAffinity: which CPU a slot's worker is pinned to, the pinning of every thread of the worker while
the slot runs (threads started meanwhile included), and every thread put back on the worker's CPUs after it, also
after a failure (Spark reuses a Python worker for the next task)."""

import os
import threading

import pytest

from runtime import StreamExecutionEnvironment
from runtime.errors import SettingValueError
from runtime.executor.cpu_affinity import allowed_cpus, cpu_for_slot, pinned_to
from runtime.settings import resolve

KEY = "spark.chandy.cpuAffinity"
CPUS = sorted(allowed_cpus())
needs_two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="pinning shows only where the worker may use two CPUs")


@pytest.mark.parametrize("rank, colocated, allowed, cpu", [
    (0, 2, {0, 1}, 0), (1, 2, {0, 1}, 1),  # a slot per CPU: pinned, one each
    (1, 2, {4, 7}, 7),  # the executor's own CPUs (a cpuset), in order
    (0, 1, {0, 1}, None), (0, 4, {0, 1}, None), (2, 3, {0, 1, 2, 3}, None),  # fewer or more slots than CPUs
    (0, 1, set(), None),  # a platform that cannot pin
])
def test_auto_pins_a_slot_only_where_the_executor_runs_one_slot_per_cpu(rank, colocated, allowed, cpu):
    assert cpu_for_slot("auto", rank, colocated, allowed) == cpu


def test_on_pins_every_slot_round_robin_and_off_none():
    assert [cpu_for_slot("on", rank, 5, {0, 1}) for rank in range(5)] == [0, 1, 0, 1, 0]
    assert cpu_for_slot("on", 0, 1, {3, 5, 9}) == 3
    assert cpu_for_slot("off", 0, 2, {0, 1}) is None


@pytest.mark.parametrize("text, policy", [("auto", "auto"), ("ON", "on"), ("true", "on"), ("off", "off"),
                                          (" false ", "off")])
def test_the_policy_is_read_from_the_spark_conf(text, policy):
    assert resolve({}, {KEY: text}).cpu_affinity == policy


def test_a_policy_that_does_not_parse_is_named_with_what_to_write():
    with pytest.raises(SettingValueError) as error:
        resolve({}, {KEY: "always"})
    assert str(error.value).startswith(f"{KEY} = 'always' is not a CPU affinity policy: write 'auto' ")


def test_the_policy_reaches_the_graph_the_slots_read():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_sequence(0, 9).print()
    graph = env.get_job_graph("job")
    assert graph.cpu_affinity == "auto"
    env._tune(graph, resolve({}, {KEY: "off"}))
    assert graph.cpu_affinity == "off"


def _affinity(thread: threading.Thread) -> set[int]:
    return os.sched_getaffinity(thread.native_id)


class _Waiting:
    """A thread that waits until told to end, so its CPUs can be read meanwhile."""

    def __init__(self):
        self.end = threading.Event()
        self.thread = threading.Thread(target=self.end.wait)
        self.thread.start()

    def stop(self):
        self.end.set()
        self.thread.join()


@needs_two_cpus
def test_every_thread_runs_on_the_cpu_while_pinned_and_on_the_workers_cpus_after():
    before = os.sched_getaffinity(0)
    older = _Waiting()
    try:
        with pinned_to(CPUS[-1]):
            newer = _Waiting()  # started while pinned: inherits it
            assert os.sched_getaffinity(0) == _affinity(older.thread) == _affinity(newer.thread) == {CPUS[-1]}
        assert os.sched_getaffinity(0) == _affinity(older.thread) == _affinity(newer.thread) == before
        newer.stop()
    finally:
        older.stop()


@needs_two_cpus
def test_a_slot_that_fails_puts_every_thread_back():
    before = os.sched_getaffinity(0)
    with pytest.raises(RuntimeError):
        with pinned_to(CPUS[0]):
            started = _Waiting()
            raise RuntimeError("Chandy slot 0 failed")
    try:
        assert os.sched_getaffinity(0) == _affinity(started.thread) == before
    finally:
        started.stop()


def test_none_changes_nothing():
    before = os.sched_getaffinity(0)
    with pinned_to(None):
        assert os.sched_getaffinity(0) == before
