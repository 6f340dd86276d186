"""Broadcast state end to end: every subtask sees every broadcast record, the keyed side reads the rules and
``apply_to_keyed_state`` reaches every key, and the broadcast state survives an exception, a SIGKILL and a
restore at another parallelism (checkpointed once, restored to every subtask). (The function's semantics, and
broadcast state being read-only in process_element, are also tested without Spark, by test harnesses:
tests/unit/test_broadcast_semantics.py.)"""

import collections
import os
import random

import pytest

from operators import BroadcastProcessFunction, CollectSink, SequenceSource
from runtime import RestartStrategies
from tests.integration.broadcast_jobs import N, RULES, SENSORS, Alerts, expected, reading_of, rule_of
from tests.integration.chaos import ChaosMap, plan, remaining
from tests.integration.checkpoints import SignalAfterCheckpoints
from tests.integration.paced import PacedSource
from tests.integration.waiting import wait_for


def alerts_job(env, tmp_path, parallelism, chaos=None, marker=None):
    env.set_parallelism(parallelism).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints")) \
        .set_max_retained_checkpoints(1000)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    numbers = env.from_source(PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // parallelism // 12,
                                          together=str(tmp_path / "paced")), "numbers").uid("numbers")
    if marker is not None:
        numbers = numbers.map(SignalAfterCheckpoints(marker, 3)).uid("signal")
    else:
        numbers = numbers.map(lambda n: n).uid("signal")
    rules = numbers.filter(lambda n: rule_of(n) is not None).uid("rule-points").map(rule_of).uid("rules")
    readings = numbers.map(reading_of).uid("readings")
    if chaos is not None:
        readings = readings.map(chaos).uid("chaos")
    sink = CollectSink("alerts")
    (readings.key_by(lambda r: r[0]).connect(rules.broadcast(RULES)).process(Alerts()).uid("alerts")
     .sink_to(sink).uid("sink"))
    return sink


def test_the_keyed_side_reads_broadcast_rules_and_apply_to_keyed_state_reaches_every_key(env, tmp_path):
    # At parallelism 2: the rules broadcast to both subtasks, the readings shuffled by sensor.
    sink = alerts_job(env, tmp_path, 2)
    out = env.execute("alerts-p2").collected(sink)
    assert sorted(out) == expected(), collections.Counter(out).most_common(3)


@pytest.mark.parametrize("how", ["exception", "kill"])
def test_broadcast_state_is_exactly_once_after_a_failure(env, tmp_path, how):
    faults = plan(str(tmp_path / "faults"), "fail")
    # fail after some rules arrived: a reading after the restore finds its rule only in the restored state
    sink = alerts_job(env, tmp_path, 2, ChaosMap(faults, "fail", how, random.Random().randrange(4_000, 8_000)))
    result = env.execute(f"alerts-{how}")
    assert remaining(faults) == [] and result.restarts == 1 and result.restored_from[1] is not None
    out = result.collected(sink)
    assert sorted(out) == expected(), collections.Counter(out).most_common(3)


@pytest.mark.parametrize("new_parallelism", [3, 1])
def test_broadcast_state_is_restored_to_every_subtask_at_another_parallelism(spark, tmp_path, new_parallelism):
    from runtime import StreamExecutionEnvironment
    from state_backends.storage import CheckpointStorage

    env = StreamExecutionEnvironment.get_execution_environment(spark)
    marker = str(tmp_path / "checkpointed")
    alerts_job(env, tmp_path, 2, marker=marker)
    client = env.execute_async("alerts-rescale")
    wait_for(lambda: os.path.exists(marker), what="three completed checkpoints")
    client.cancel()
    storage = CheckpointStorage("file://" + str(tmp_path / "checkpoints"), "alerts-rescale")
    last = storage.usable_ids()[-1]
    rules_in_checkpoint = restored_rules(storage, last)
    assert rules_in_checkpoint, "the checkpoint holds broadcast rules, which no input after it repeats"

    env = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = alerts_job(env, tmp_path, new_parallelism)
    result = env.execute("alerts-rescale", restore_from=last)
    assert result.restored_from == [last]
    # the output after the restore: every reading from the checkpoint's position on, judged by its rule
    out = result.collected(sink)
    assert set(out) <= set(expected()) and len(out) == len(set(out))
    judged = {(s, n) for s, n, _ in out}
    assert all((n % SENSORS, n) in judged for n in range(N - 1_000, N)), "readings after the restore are judged"


def restored_rules(storage, checkpoint_id):
    from tests.integration.checkpoints import restored_state

    checkpoint = storage.read_checkpoint(checkpoint_id)
    _, lists = restored_state(storage, checkpoint, "alerts")
    return dict(lists.get("union:broadcast:thresholds", []))


class SeenEverywhere(BroadcastProcessFunction):
    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_element(self, value, ctx):
        yield "record", value

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value, self.subtask)
        yield "broadcast", value, self.subtask


def test_every_subtask_sees_every_broadcast_record(env):
    env.set_parallelism(2)
    sink = CollectSink("seen")
    broadcast = env.from_collection(["a", "b", "c"]).broadcast(RULES)
    env.from_sequence(0, 999).connect(broadcast).process(SeenEverywhere()).sink_to(sink)
    out = env.execute("seen-everywhere").collected(sink)
    assert sorted(r for r in out if r[0] == "record") == [("record", n) for n in range(1_000)]
    assert sorted(r for r in out if r[0] == "broadcast") == sorted(
        ("broadcast", v, s) for v in "abc" for s in range(2))
