"""runtime.testing: the operator test harnesses drive the job's own operators, in-process, without Spark: of one
input and of two (connect, broadcast)."""

import os
import pickle
import subprocess
import sys

import pytest

from operators.functions import (
    CoMapFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
)
from runtime.datastream.window import TumblingEventTimeWindows, TumblingProcessingTimeWindows
from runtime.errors import ApiUsageError, IncompatibleCheckpointError, StateUsageError
from runtime.keys.key_groups import subtask_for_key
from runtime.protocol.events import MAX_WATERMARK
from runtime.settings.durations import Time
from runtime.side_outputs import OutputTag
from runtime.testing import HarnessError, KeyedOperatorHarness, OperatorHarness
from state_backends.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from state_backends.ttl import StateTtlConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LATE = OutputTag("late")
KEYS = [f"user-{n}" for n in range(40)]


class CountWithTimer(KeyedProcessFunction):
    """Counts each key's records; an event-time timer 10 ms after a key's first record emits the count, and a
    processing-time timer 1 s after it (by the timer service's clock) emits it again."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        count = (self.count.value() or 0) + 1
        if count == 1:
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
            ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 1000)
        self.count.update(count)
        yield ctx.get_current_key(), count

    def on_timer(self, timestamp, ctx):
        yield ctx.time_domain().name, ctx.get_current_key(), self.count.value(), timestamp


def counting_harness(**placement) -> KeyedOperatorHarness:
    return KeyedOperatorHarness.for_process_function(CountWithTimer(), key_selector=lambda r: r[0], **placement)


def summing_window(**placement) -> KeyedOperatorHarness:
    return KeyedOperatorHarness.for_stream(
        lambda ds: ds.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(10)).side_output_late_data(LATE)
        .reduce(lambda a, b: (a[0], a[1] + b[1])), **placement)


# -- keyed state and timers ------------------------------------------------------------------------------------


def test_keyed_state_is_scoped_to_each_records_key():
    harness = counting_harness()
    harness.open()
    harness.process_elements([("a", 1), ("b", 1), ("a", 1), ("a", 1), ("b", 1)], timestamps=[1, 2, 3, 4, 5])
    assert harness.output() == [("a", 1), ("b", 1), ("a", 2), ("a", 3), ("b", 2)]
    assert harness.keyed_state("count") == {"a": 3, "b": 2}
    assert harness.output_with_timestamps()[2] == (("a", 2), 3)


def test_event_time_timers_fire_when_the_watermark_reaches_them_and_not_before():
    harness = counting_harness()
    harness.open()
    harness.process_element(("a", 1), timestamp=100)
    harness.process_element(("b", 1), timestamp=105)
    harness.clear_output()
    harness.process_watermark(109)
    assert harness.output() == []
    harness.process_watermark(112)
    assert harness.output_with_timestamps() == [(("EVENT_TIME", "a", 1, 110), 110)]
    harness.process_watermark(120)
    assert harness.output()[1:] == [("EVENT_TIME", "b", 1, 115)]
    assert harness.watermarks() == [109, 112, 120]


def test_a_watermark_that_does_not_advance_is_not_handed_on():
    harness = counting_harness()
    harness.open()
    harness.process_watermark(50)
    harness.process_watermark(40)
    harness.process_watermark(50)
    assert harness.watermarks() == [50]


def test_processing_time_timers_fire_on_the_harness_clock():
    harness = counting_harness()
    harness.set_processing_time(5_000)  # before open: the function reads it when it registers its timer
    harness.open()
    harness.process_element(("a", 1), timestamp=1)
    harness.clear_output()
    harness.set_processing_time(5_999)
    assert harness.output() == []
    harness.set_processing_time(6_000)
    assert harness.output_with_timestamps() == [(("PROCESSING_TIME", "a", 1, 6_000), None)]
    with pytest.raises(HarnessError, match=r"processing time is 6000 and moves forward only"):
        harness.set_processing_time(10)


def test_state_time_to_live_counts_the_harness_processing_time():
    class Remember(MapFunction):
        def open(self, runtime_context):
            descriptor = ValueStateDescriptor("last")
            descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1)).build())
            self.last = runtime_context.get_state(descriptor)

        def map(self, record):
            before = self.last.value()
            self.last.update(record)
            return before

    harness = KeyedOperatorHarness.for_map(Remember(), key_selector=lambda r: r[0])
    harness.open()
    harness.process_elements([("a", 1), ("a", 2)])
    harness.set_processing_time(999)
    harness.process_element(("a", 3))
    harness.set_processing_time(999 + 1_000)
    harness.process_element(("a", 4))
    assert harness.output() == [None, ("a", 1), ("a", 2), None]


# -- side outputs ----------------------------------------------------------------------------------------------


def test_a_process_functions_side_output_is_collected_apart_from_the_main_output():
    odd = OutputTag("odd")

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            yield (odd, value) if value % 2 else value

    harness = OperatorHarness.for_process_function(Split())
    harness.open()
    harness.process_elements([1, 2, 3, 4], timestamps=[10, 20, 30, 40])
    assert harness.output_with_timestamps() == [(2, 20), (4, 40)]
    assert harness.side_output(odd) == [1, 3]
    assert harness.side_output(OutputTag("other")) == []


def test_late_records_of_a_window_go_to_its_late_data_side_output():
    harness = summing_window()
    harness.open()
    harness.process_element(("a", 1), timestamp=3)
    harness.process_watermark(15)
    harness.process_element(("a", 7), timestamp=4)  # its window [0, 10) ended at watermark 9
    assert harness.output() == [("a", 1)]
    assert harness.side_output(LATE) == [("a", 7)]


# -- windows ---------------------------------------------------------------------------------------------------


def test_a_tumbling_event_time_window_fires_each_keys_pane_at_its_end():
    harness = summing_window()
    harness.open()
    harness.process_elements([("a", 1), ("b", 10), ("a", 2), ("a", 5)], timestamps=[1, 2, 9, 10])
    harness.process_watermark(8)
    assert harness.output() == []
    harness.process_watermark(9)
    assert sorted(harness.output_with_timestamps()) == [(("a", 3), 9), (("b", 10), 9)]
    harness.end_input()  # the final watermark fires [10, 20)
    assert harness.output_with_timestamps()[2:] == [(("a", 5), 19)]
    assert harness.watermarks() == [8, 9, MAX_WATERMARK]


def test_a_processing_time_window_assigns_and_fires_by_the_harness_clock():
    harness = KeyedOperatorHarness.for_stream(
        lambda ds: ds.key_by(lambda r: r[0]).window(TumblingProcessingTimeWindows.of(Time.milliseconds(100)))
        .reduce(lambda a, b: (a[0], a[1] + b[1])))
    harness.set_processing_time(1_050)
    harness.open()
    harness.process_elements([("a", 1), ("a", 2)])  # into [1000, 1100), by the harness's clock
    harness.set_processing_time(1_098)
    harness.process_element(("a", 4))
    assert harness.output() == []
    harness.set_processing_time(1_099)  # the window's last millisecond: it fires
    assert harness.output_with_timestamps() == [(("a", 7), 1_099)]
    harness.process_element(("a", 8))  # at 1099 still in [1000, 1100): its timer is due, at the clock's next move
    harness.set_processing_time(1_250)
    assert harness.output()[1:] == [("a", 8)]


def test_a_windows_pane_survives_a_snapshot_and_restore():
    harness = summing_window()
    harness.open()
    harness.process_elements([("a", 1), ("a", 2)], timestamps=[1, 2])
    snapshot = harness.snapshot(checkpoint_id=4)
    restored = summing_window()
    restored.restore(pickle.loads(pickle.dumps(snapshot)))
    restored.open()
    restored.process_element(("a", 4), timestamp=3)
    restored.process_watermark(9)
    assert restored.output() == [("a", 7)]


# -- snapshots and restores ------------------------------------------------------------------------------------


def test_a_restored_harness_continues_the_state_and_timers_of_the_snapshot():
    harness = counting_harness()
    harness.open()
    harness.process_elements([("a", 1), ("a", 1), ("b", 1)], timestamps=[1, 2, 3])
    snapshot = harness.snapshot(checkpoint_id=1)
    harness.process_element(("a", 1), timestamp=4)  # after the snapshot: not in it
    harness.close()

    restored = counting_harness()
    restored.restore(pickle.loads(pickle.dumps(snapshot)))
    restored.open()
    restored.process_element(("a", 1), timestamp=5)
    restored.process_watermark(20)
    assert restored.output() == [("a", 3), ("EVENT_TIME", "a", 3, 11), ("EVENT_TIME", "b", 1, 13)]


def test_restoring_at_another_parallelism_keeps_every_keys_state_exactly_once():
    old = [counting_harness(parallelism=2, subtask_index=s) for s in range(2)]
    for harness in old:
        harness.open()
    for n, key in enumerate(KEYS):
        owner = old[subtask_for_key(key, 128, 2)]
        owner.process_elements([(key, 1)] * (n % 3 + 1), timestamps=[n] * (n % 3 + 1))
    snapshots = [harness.snapshot(checkpoint_id=2) for harness in old]
    assert all(snapshot.rows for snapshot in snapshots)  # both old subtasks held some keys

    for parallelism in (3, 1):
        new = [counting_harness(parallelism=parallelism, subtask_index=s) for s in range(parallelism)]
        restored = {}
        for harness in new:
            harness.restore(*snapshots)
            harness.open()
            for key, count in harness.keyed_state("count").items():
                assert key not in restored and harness.owns_key(key)
                restored[key] = count
        assert restored == {key: n % 3 + 1 for n, key in enumerate(KEYS)}
        fired = [record for harness in new for record in (harness.process_watermark(100), harness.output())[1]]
        assert sorted(key for _, key, _, _ in fired) == sorted(KEYS)  # every timer moved with its key, once


def test_operator_list_state_is_dealt_round_robin_on_a_rescaled_restore():
    class Buffer(MapFunction):
        def open(self, runtime_context):
            self.buffer = runtime_context.get_operator_list_state(ListStateDescriptor("buffer"))

        def map(self, value):
            self.buffer.add(value)
            return sorted(self.buffer.get())

    old = [OperatorHarness.for_map(Buffer(), parallelism=2, subtask_index=s) for s in range(2)]
    for harness, values in zip(old, ([1, 2, 3], [4, 5])):
        harness.open()
        harness.process_elements(values)
    snapshots = [harness.snapshot(checkpoint_id=1) for harness in old]
    new = [OperatorHarness.for_map(Buffer(), parallelism=3, subtask_index=s) for s in range(3)]
    for harness in new:
        harness.restore(*snapshots)
        harness.open()
        harness.process_element(0)
    assert [harness.output() for harness in new] == [[[0, 1, 4]], [[0, 2, 5]], [[0, 3]]]


def test_notifications_reach_the_users_function():
    committed = []

    class Committing(MapFunction):
        def map(self, value):
            return value

        def notify_checkpoint_complete(self, checkpoint_id):
            committed.append(checkpoint_id)

    harness = OperatorHarness.for_map(Committing())
    harness.open()
    harness.snapshot(checkpoint_id=5)
    harness.notify_checkpoint_complete(5)
    assert committed == [5]


# -- two inputs ------------------------------------------------------------------------------------------------

RULES = MapStateDescriptor("limits")


class Tag(CoMapFunction):
    def map1(self, value):
        return "number", value

    def map2(self, value):
        return "word", value


class OrderPaid(KeyedCoProcessFunction):
    """An order (input 1) waits 10 ms of event time for its payment (input 2), in state of its key."""

    def open(self, runtime_context):
        self.order = runtime_context.get_state(ValueStateDescriptor("order"))

    def process_element1(self, order, ctx):
        self.order.update(order)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)

    def process_element2(self, payment, ctx):
        if self.order.value() is not None:
            yield "paid", self.order.value()
            self.order.clear()

    def on_timer(self, timestamp, ctx):
        if self.order.value() is not None:
            yield "unpaid", self.order.value()


class OverLimit(KeyedBroadcastProcessFunction):
    """A reading (key, value) is judged against its key's limit, a broadcast rule; one that comes first waits."""

    def open(self, runtime_context):
        self.waiting = runtime_context.get_list_state(ListStateDescriptor("waiting"))

    def process_element(self, reading, ctx):
        limit = ctx.get_broadcast_state(RULES).get(reading[0])
        if limit is None:
            self.waiting.add(reading)
        else:
            yield reading, reading[1] > limit

    def process_broadcast_element(self, rule, ctx):
        ctx.get_broadcast_state(RULES).put(*rule)
        judged = []

        def judge(key, waiting):
            if key == rule[0]:
                judged.extend((reading, reading[1] > rule[1]) for reading in waiting.get())
                waiting.clear()
        ctx.apply_to_keyed_state(ListStateDescriptor("waiting"), judge)
        yield from judged


def over_limit(**placement) -> KeyedOperatorHarness:
    return KeyedOperatorHarness.for_two_inputs(
        lambda readings, rules: readings.key_by(lambda r: r[0]).connect(rules.broadcast(RULES)).process(OverLimit()),
        **placement)


def test_each_input_of_a_connected_operator_reaches_its_own_method():
    harness = OperatorHarness.for_two_inputs(lambda numbers, words: numbers.connect(words).map(Tag()))
    harness.open()
    harness.process_elements([1, 2], timestamps=[5, 6])
    harness.process_element2("to", timestamp=7)
    assert harness.output_with_timestamps() == [(("number", 1), 5), (("number", 2), 6), (("word", "to"), 7)]


def test_the_watermark_of_two_inputs_is_the_least_of_theirs_and_both_end_at_the_end():
    harness = KeyedOperatorHarness.for_two_inputs(
        lambda orders, payments: orders.connect(payments).key_by(lambda o: o, lambda p: p).process(OrderPaid()))
    harness.open()
    harness.process_elements([1, 2], timestamps=[100, 100])
    harness.process_element2(1, timestamp=105)  # the same key's state: order 1 is paid
    harness.process_watermark(200)
    assert harness.output() == [("paid", 1)] and harness.watermarks() == []  # the payments' input holds it back
    harness.process_watermark2(109)
    assert harness.output()[1:] == [] and harness.watermarks() == [109]
    harness.process_watermark2(110)  # order 2's timer, shared by both inputs of its key
    assert harness.output()[1:] == [("unpaid", 2)] and harness.watermarks() == [109, 110]
    harness.end_input()
    assert harness.watermarks()[-1] == MAX_WATERMARK


def test_broadcast_rules_reach_every_key_of_a_keyed_operator_and_its_keyed_state():
    harness = over_limit()
    harness.open()
    harness.process_elements([("a", 5), ("b", 9)])  # before their rules: they wait in keyed state
    harness.process_element2(("a", 4))
    assert harness.output() == [(("a", 5), True)] and harness.keyed_state("waiting") == {"b": [("b", 9)]}
    harness.process_elements2([("b", 10)])
    harness.process_element(("a", 3))
    assert harness.output()[1:] == [(("b", 9), False), (("a", 3), False)]


def test_broadcast_state_is_read_only_where_records_of_the_keyed_input_are_processed():
    class WritesRules(KeyedBroadcastProcessFunction):
        def process_element(self, value, ctx):
            ctx.get_broadcast_state(RULES).put("oops", value)

        def process_broadcast_element(self, value, ctx):
            yield value

    harness = KeyedOperatorHarness.for_two_inputs(
        lambda records, rules: records.key_by(len).connect(rules.broadcast(RULES)).process(WritesRules()))
    harness.open()
    with pytest.raises(StateUsageError, match="read-only in process_element"):
        harness.process_element("x")


def test_broadcast_state_is_restored_whole_to_every_subtask_at_another_parallelism():
    old = [over_limit(parallelism=2, subtask_index=s) for s in range(2)]
    for harness in old:
        harness.open()
        harness.process_elements2([(key, 10) for key in KEYS])  # every subtask gets every rule
    snapshots = [harness.snapshot(checkpoint_id=1) for harness in old]
    for subtask in range(3):
        new = over_limit(parallelism=3, subtask_index=subtask)
        new.restore(*snapshots)
        new.open()
        owned = [key for key in KEYS if new.owns_key(key)]
        new.process_elements([(key, 11) for key in owned])
        assert owned and new.output() == [((key, 11), True) for key in owned], f"subtask {subtask} has the rules"


def test_a_record_of_a_keyed_second_input_that_another_subtask_owns_is_refused():
    harness = KeyedOperatorHarness.for_two_inputs(
        lambda orders, payments: orders.connect(payments).key_by(lambda o: o, lambda p: p).process(OrderPaid()),
        parallelism=2, subtask_index=0)
    harness.open()
    foreign = next(key for key in KEYS if subtask_for_key(key, 128, 2) == 1)
    with pytest.raises(HarnessError, match=rf"key '{foreign}' .*which subtask 1 of 2 owns"):
        harness.process_element2(foreign)


def test_a_harness_of_one_input_or_two_refuses_an_operator_of_the_other_count():
    with pytest.raises(HarnessError, match=r"'Co-Map' has 2 input\(s\), and a harness of 1 was asked for: "
                                           r"for_two_inputs\(\) drives"):
        OperatorHarness.for_stream(lambda ds: ds.connect(ds).map(Tag()))
    with pytest.raises(HarnessError, match=r"'Map' has 1 input\(s\), and a harness of 2 was asked for"):
        OperatorHarness.for_two_inputs(lambda first, second: first.map(str))
    with pytest.raises(HarnessError, match=r"process_watermark2\(\): operator 'Map' has one input"):
        OperatorHarness.for_map(str).process_watermark2(1)


# -- errors ----------------------------------------------------------------------------------------------------


def test_feeding_before_open_or_after_the_end_says_what_to_call():
    harness = counting_harness()
    with pytest.raises(HarnessError, match=r"process_element\(\) before open\(\): call open\(\) first"):
        harness.process_element(("a", 1))
    with pytest.raises(HarnessError, match=r"snapshot\(\) before open\(\)"):
        harness.snapshot()
    harness.open()
    harness.end_input()
    with pytest.raises(HarnessError, match=r"process_watermark\(\) after end_input\(\).*restore a snapshot into "
                                           r"a new harness"):
        harness.process_watermark(1)
    harness.close()
    with pytest.raises(HarnessError, match=r"process_elements\(\) after close\(\)"):
        harness.process_elements([("a", 1)])


def test_restoring_after_open_or_twice_is_refused():
    harness = counting_harness()
    harness.open()
    snapshot = harness.snapshot()
    with pytest.raises(HarnessError, match=r"restore\(\) after open\(\): call restore\(...\) before open\(\)"):
        harness.restore(snapshot)
    fresh = counting_harness()
    fresh.restore(snapshot)
    with pytest.raises(HarnessError, match=r"restore\(\) twice: pass every snapshot to one call"):
        fresh.restore(snapshot)


def test_a_snapshot_of_another_kind_of_operator_is_refused_naming_both():
    harness = KeyedOperatorHarness.for_reduce(lambda a, b: a + b, key_selector=lambda r: r)
    harness.open()
    harness.process_element(1)
    snapshot = harness.snapshot(checkpoint_id=8)
    other = counting_harness()
    with pytest.raises(IncompatibleCheckpointError,
                       match=r"Checkpoint 8 is a snapshot of KeyedReduceOperator 'Keyed Reduce' .*but this harness "
                             r"runs KeyedProcessOperator 'KeyedProcess' .*restore it into a harness built the same "
                             r"way"):
        other.restore(snapshot)


def test_a_snapshot_taken_with_another_max_parallelism_is_refused_with_the_value_to_use():
    harness = counting_harness(max_parallelism=256)
    harness.open()
    snapshot = harness.snapshot(checkpoint_id=2)
    with pytest.raises(IncompatibleCheckpointError, match=r"max parallelism 256, but this harness has 128.*"
                                                          r"max_parallelism=256"):
        counting_harness().restore(snapshot)


def test_a_rescaled_restore_without_every_snapshot_it_needs_names_the_missing_subtasks():
    old = [counting_harness(parallelism=2, subtask_index=s) for s in range(2)]
    for harness in old:
        harness.open()
    new = counting_harness(parallelism=3, subtask_index=1)  # key groups 43..85: old subtasks 0 and 1 held them
    with pytest.raises(HarnessError, match=r"also reads what its subtasks \[1\] held: pass their snapshots"):
        new.restore(old[0].snapshot())


def test_a_record_another_subtask_owns_is_refused_naming_its_owner():
    harness = counting_harness(parallelism=2, subtask_index=0)
    harness.open()
    foreign = next(key for key in KEYS if subtask_for_key(key, 128, 2) == 1)
    with pytest.raises(HarnessError, match=rf"key '{foreign}' .*which subtask 1 of 2 owns.*feed it to the harness "
                                           r"of subtask 1"):
        harness.process_element((foreign, 1))


def test_a_function_the_operator_does_not_take_is_refused_by_the_api():
    with pytest.raises(ApiUsageError, match=r"KeyedStream.process\(\) expects a KeyedProcessFunction, got "
                                            r"MapFunction"):
        KeyedOperatorHarness.for_process_function(MapFunction(), key_selector=len)
    with pytest.raises(HarnessError, match=r"is a KeyedProcessFunction.*KeyedOperatorHarness.for_process_function"):
        OperatorHarness.for_process_function(CountWithTimer())
    with pytest.raises(HarnessError, match=r"is a ProcessFunction.*OperatorHarness.for_process_function"):
        KeyedOperatorHarness.for_process_function(ProcessFunction(), key_selector=len)


def test_the_harness_class_must_match_the_operators_kind():
    with pytest.raises(HarnessError, match=r"'KeyedProcess' \(KeyedProcessOperator\) is keyed: harness it with "
                                           r"KeyedOperatorHarness"):
        OperatorHarness.for_stream(lambda ds: ds.key_by(len).process(CountWithTimer()))
    with pytest.raises(HarnessError, match=r"'Map' \(MapOperator\) is not keyed: harness it with OperatorHarness"):
        KeyedOperatorHarness.for_map(str.upper, key_selector=len)


def test_a_stream_of_several_operators_is_refused_naming_them():
    with pytest.raises(HarnessError, match=r"declares 2 operators \('Map', 'Keyed Reduce'\), and a harness drives "
                                           r"one"):
        KeyedOperatorHarness.for_stream(lambda ds: ds.map(int).key_by(lambda x: x % 2).reduce(max))


def test_a_subtask_index_outside_the_parallelism_is_refused():
    with pytest.raises(HarnessError, match=r"subtask_index=2: operator 'Map' has parallelism 2, so its subtasks "
                                           r"are 0..1"):
        OperatorHarness.for_map(str, parallelism=2, subtask_index=2)


# -- no Spark --------------------------------------------------------------------------------------------------


def test_driving_a_harness_starts_no_spark_and_no_jvm():
    script = (
        "import sys\n"
        "from runtime.testing import KeyedOperatorHarness\n"
        "harness = KeyedOperatorHarness.for_reduce(max, key_selector=len)\n"
        "harness.open(); harness.process_element('a'); harness.snapshot(); harness.end_input(); harness.close()\n"
        "spark = sys.modules.get('pyspark')\n"
        "print(spark is None or (spark.SparkContext._gateway is None and spark.SparkContext._active_spark_context "
        "is None))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True,
                         timeout=120)
    assert out.stdout.split() == ["True"]


@pytest.mark.parametrize("timestamps", [False, True])
def test_a_process_function_may_yield_return_a_list_or_none_but_a_tuple_is_refused_by_name(timestamps):
    """What a process function gives back: a generator and a list are flattened (the fast path), None emits
    nothing, any other iterable is flattened too, and a tuple (a record, not records) fails naming the fix."""
    from runtime.errors import FunctionContractError

    class Answers(ProcessFunction):
        def process_element(self, value, ctx):
            if value == "gen":
                return (x for x in "ab")
            if value == "list":
                return ["c"]
            if value == "set":
                return {"d"}
            if value == "tuple":
                return ("e", 1)
            return None

    harness = OperatorHarness.for_process_function(Answers())
    harness.open()
    given = ["gen", "list", "none", "set"]
    harness.process_elements(given, timestamps=[10, 20, 30, 40] if timestamps else None)
    if timestamps:
        assert harness.output_with_timestamps() == [("a", 10), ("b", 10), ("c", 20), ("d", 40)]
    else:
        assert harness.output() == ["a", "b", "c", "d"]
    with pytest.raises(FunctionContractError, match="returned a tuple where an iterable of records was expected"):
        harness.process_elements(["tuple"], timestamps=[50] if timestamps else None)
