"""spark.chandy.gilSwitchInterval: parsed as a duration above zero, carried to the graph, applied while a slot runs
and put back after it (Spark reuses a Python worker for the next task). And the slot's long-lived objects, frozen
out of the cyclic collector's full collections while it runs, and the young generation's thresholds it gives its
subtasks, put back after it."""

import gc
import sys
from types import SimpleNamespace

import pytest

from runtime import StreamExecutionEnvironment
from runtime.errors import SettingValueError
from runtime.executor.slot import SlotRunner
from runtime.settings import resolve
from runtime.settings.options import option_named

KEY = "spark.chandy.gilSwitchInterval"


@pytest.mark.parametrize("text, millis", [("500 us", 0.5), ("0.5 ms", 0.5), ("1 ms", 1), ("2", 2), ("250µs", 0.25)])
def test_the_switch_interval_takes_durations_with_parts_of_a_millisecond(text, millis):
    assert resolve({}, {KEY: text}).switch_interval_ms == millis


def test_the_switch_interval_is_pythons_own_unless_set():
    assert resolve({}, {}).switch_interval_ms is None
    assert option_named("switch_interval_ms").default is None


@pytest.mark.parametrize("text, why", [("0", "is no switch interval: write a duration above 0"),
                                       ("0 ms", "is no switch interval: write a duration above 0"),
                                       ("-1 ms", "is negative"), ("fast", "is not a duration")])
def test_a_switch_interval_that_python_would_refuse_is_named_with_what_to_write(text, why):
    with pytest.raises(SettingValueError) as error:
        resolve({}, {KEY: text})
    assert str(error.value).startswith(f"{KEY} = {text!r} ") and why in str(error.value)


def test_the_setting_reaches_the_graph_the_slots_read():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_sequence(0, 9).print()
    graph = env.get_job_graph("job")
    assert graph.switch_interval_ms is None
    env._tune(graph, resolve({}, {KEY: "500 us"}))
    assert graph.switch_interval_ms == 0.5


def _slot(switch_interval_ms):
    slot = SlotRunner.__new__(SlotRunner)  # only run()'s wrapping is under test: no sockets, no subtasks
    slot.graph = SimpleNamespace(switch_interval_ms=switch_interval_ms)
    return slot


def test_a_slot_runs_with_the_jobs_switch_interval_and_puts_the_workers_back(monkeypatch):
    seen = []
    monkeypatch.setattr(SlotRunner, "_run", lambda self, heap: seen.append(sys.getswitchinterval()) or {"sink": 1})
    before = sys.getswitchinterval()
    assert _slot(0.5).run() == {"sink": 1}
    assert seen == [0.0005]
    assert sys.getswitchinterval() == before
    _slot(None).run()
    assert seen[-1] == before


def test_a_slot_that_fails_puts_the_workers_switch_interval_back(monkeypatch):
    def fail(self, heap):
        raise RuntimeError("Chandy slot 0 failed")

    monkeypatch.setattr(SlotRunner, "_run", fail)
    before = sys.getswitchinterval()
    with pytest.raises(RuntimeError):
        _slot(1).run()
    assert sys.getswitchinterval() == before


class _Started(Exception):
    pass


def test_a_slot_freezes_what_it_built_and_restored_before_any_record_and_thaws_it_after(monkeypatch):
    import runtime.executor.slot as slot_module

    frozen_at = {}

    def build(self):
        frozen_at["building"] = gc.get_freeze_count()
        self.restored = [{"key": (1, 2)} for _ in range(1000)]  # state a restore made

    def data_server(*args, **kwargs):
        frozen_at["serving"] = gc.get_freeze_count()
        raise _Started()

    monkeypatch.setattr(SlotRunner, "_build_runners", build)
    monkeypatch.setattr(slot_module, "DataServer", data_server)
    slot = _slot(None)
    slot.host = slot.attempt = slot.security = slot.slot = slot.fail = None
    with pytest.raises(_Started):
        slot.run()
    assert frozen_at["building"] == 0  # frozen once built, not before
    assert frozen_at["serving"] >= 3000  # modules, operators, restored state: out of every full collection
    assert gc.get_freeze_count() == 0  # the slot ended: collectable again in a worker Spark reuses


def test_a_slot_gives_its_subtasks_a_raised_young_threshold_for_batches_and_puts_the_workers_back(monkeypatch):
    def run_one_batch_and_fail(self, heap):
        gc.set_threshold(self.young_thresholds.within)  # a subtask's batch, and the slot fails in it
        raise RuntimeError("Chandy slot 0 failed")

    monkeypatch.setattr(SlotRunner, "_run", run_one_batch_and_fail)
    before = gc.get_threshold()
    slot = _slot(None)
    with pytest.raises(RuntimeError):
        slot.run()
    assert slot.young_thresholds.between == before[0] and slot.young_thresholds.within == 100 * before[0]
    assert gc.get_threshold() == before


def test_a_worker_whose_automatic_collections_are_off_keeps_them_off(monkeypatch):
    monkeypatch.setattr(SlotRunner, "_run", lambda self, heap: self.young_thresholds)
    before = gc.get_threshold()
    gc.set_threshold(0)
    try:
        young = _slot(None).run()
        assert (young.within, young.between) == (0, 0)
    finally:
        gc.set_threshold(*before)
