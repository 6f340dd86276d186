"""Broadcast state without Spark: the broadcast job's function (tests/integration/broadcast_jobs.py) driven by
two-input test harnesses at parallelism 1 and 2 (each subtask gets every rule and the readings of the sensors it
owns), against the reference the job on Spark is checked against; and broadcast state read-only where records of
the other input are processed. (tests/integration/test_broadcast.py runs the job on Spark at parallelism 2,
through failures and a rescaled restore, and checks that every subtask sees every broadcast record.)"""

import collections

import pytest

from operators import BroadcastProcessFunction
from runtime.errors import StateUsageError
from runtime.testing import OperatorHarness
from tests.integration.broadcast_jobs import N, RULES, Alerts, expected, reading_of, rule_of
from tests.unit.keyed_subtasks import KeyedSubtasks

BATCH = 1_000  # numbers per batch of the source


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("rules_first", [False, True], ids=["readings-first", "rules-first"])
def test_the_keyed_side_reads_broadcast_rules_and_apply_to_keyed_state_reaches_every_key(parallelism, rules_first):
    subtasks = KeyedSubtasks(lambda readings, rules: readings.key_by(lambda r: r[0]).connect(rules.broadcast(RULES))
                             .process(Alerts()), lambda r: r[0], parallelism, two_inputs=True)
    subtasks.open()
    for start in range(0, N, BATCH):  # each batch of numbers: its readings and the rules it brings, in either order
        numbers = range(start, min(start + BATCH, N))
        feeds = [lambda: subtasks.process_elements([reading_of(n) for n in numbers]),
                 lambda: subtasks.process_elements2([rule for rule in map(rule_of, numbers) if rule is not None])]
        for feed in reversed(feeds) if rules_first else feeds:
            feed()
    subtasks.end_input()
    out = subtasks.output()
    assert sorted(out) == expected(), collections.Counter(out).most_common(3)
    assert all(not pending for harness in subtasks.harnesses for pending in harness.keyed_state("pending").values())


class WritesInProcessElement(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("oops", value)

    def process_broadcast_element(self, value, ctx):
        yield ("seen", ctx.get_broadcast_state(RULES).is_empty())


def test_writing_broadcast_state_outside_process_broadcast_element_fails_saying_where_to():
    harness = OperatorHarness.for_two_inputs(
        lambda numbers, rules: numbers.connect(rules.broadcast(RULES)).process(WritesInProcessElement()))
    harness.open()
    harness.process_element2("x")
    assert harness.output() == [("seen", True)]
    with pytest.raises(StateUsageError, match="read-only in process_element"):
        harness.process_element(0)
