"""The window building blocks (operators/window) against plain-Python references of Flink's semantics."""

import doctest
import inspect
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import operators.window as window_package
from operators.window import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    CountWindow,
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    EventTimeTrigger,
    Evictor,
    GlobalWindow,
    GlobalWindows,
    InMemoryTriggerContext,
    MergingWindowAssigner,
    MergingWindowSet,
    NeverTrigger,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeEvictor,
    TimestampedValue,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
    count_window_parts,
)
from runtime.settings.durations import Duration, Time
from runtime.errors import ApiUsageError, FunctionContractError, InvalidRecordError
from runtime.protocol.events import MAX_WATERMARK, MIN_WATERMARK
from state_backends.descriptors import ReducingStateDescriptor, ValueStateDescriptor

CONTINUE, FIRE, PURGE, FIRE_AND_PURGE = (TriggerResult.CONTINUE, TriggerResult.FIRE, TriggerResult.PURGE,
                                         TriggerResult.FIRE_AND_PURGE)


# -- references ------------------------------------------------------------------------------------------


def java_remainder(a, b):
    """Java's ``%``: truncating division, the sign of the dividend."""
    quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
    return a - b * quotient


def flink_window_start(timestamp, offset, size):
    """Flink's TimeWindow.getWindowStartWithOffset, with Java arithmetic."""
    remainder = java_remainder(timestamp - offset, size)
    return timestamp - (remainder + size) if remainder < 0 else timestamp - remainder


def brute_force_starts(timestamp, size, period, offset):
    """Every window start ``s`` (``s`` congruent to ``offset`` modulo ``period``) with ``s <= timestamp < s + size``,
    latest first, by trying every candidate."""
    return [s for s in range(timestamp, timestamp - size, -1) if (s - offset) % period == 0]


def merged_intervals(intervals):
    """Merges sorted intervals that overlap or touch (``[0, 5)`` and ``[5, 9)`` merge, as Flink's sessions)."""
    result = []
    for start, end in sorted(intervals):
        if result and start <= result[-1][1]:
            result[-1][1] = max(result[-1][1], end)
        else:
            result.append([start, end])
    return [tuple(interval) for interval in result]


class FakeTriggerContext(Trigger.OnMergeContext):
    """Records timer calls and holds partitioned state in a dict keyed by (descriptor name, window)."""

    def __init__(self, window, watermark=MIN_WATERMARK, processing_time=0):
        self.window = window
        self.watermark = watermark
        self.processing_time = processing_time
        self.calls = []
        self.state = {}
        self.merged_windows = []

    def get_current_processing_time(self):
        return self.processing_time

    def get_current_watermark(self):
        return self.watermark

    def register_processing_time_timer(self, time):
        self.calls.append(("register processing", time, self.window))

    def register_event_time_timer(self, time):
        self.calls.append(("register event", time, self.window))

    def delete_processing_time_timer(self, time):
        self.calls.append(("delete processing", time, self.window))

    def delete_event_time_timer(self, time):
        self.calls.append(("delete event", time, self.window))

    def get_partitioned_state(self, state_descriptor):
        return FakeState(self.state, (state_descriptor.name, self.window), state_descriptor)

    def merge_partitioned_state(self, state_descriptor):
        values = [self.state.pop((state_descriptor.name, w)) for w in self.merged_windows
                  if (state_descriptor.name, w) in self.state]
        target = (state_descriptor.name, self.window)
        if target in self.state:
            values.insert(0, self.state[target])
        if values:
            merged = values[0]
            for value in values[1:]:
                merged = state_descriptor.reduce_function(merged, value)
            self.state[target] = merged


class FakeState:
    def __init__(self, table, key, descriptor):
        self.table, self.key, self.descriptor = table, key, descriptor

    def get(self):
        return self.table.get(self.key)

    def add(self, value):
        current = self.table.get(self.key)
        self.table[self.key] = value if current is None else self.descriptor.reduce_function(current, value)

    def value(self):
        return self.table.get(self.key)

    def update(self, value):
        self.table[self.key] = value

    def clear(self):
        self.table.pop(self.key, None)


class Clock(WindowAssigner.WindowAssignerContext):
    def __init__(self, now):
        self.now = now

    def get_current_processing_time(self):
        return self.now


# -- windows ---------------------------------------------------------------------------------------------


def test_window_start_matches_flink_for_fixed_cases_including_negative_timestamps():
    cases = [((0, 0, 10), 0), ((9, 0, 10), 0), ((10, 0, 10), 10), ((-1, 0, 10), -10), ((-10, 0, 10), -10),
             ((-11, 0, 10), -20), ((7, 3, 5), 3), ((2, 3, 5), -2), ((2, -2, 5), -2), ((-7, -2, 5), -7),
             ((-8, 4, 5), -11), ((1_700_000_000_123, 0, 60_000), 1_699_999_980_000)]
    for (timestamp, offset, size), start in cases:
        assert TimeWindow.get_window_start_with_offset(timestamp, offset, size) == start, (timestamp, offset, size)


@settings(max_examples=400, deadline=None)
@given(timestamp=st.integers(-10_000, 10_000), size=st.integers(1, 300), data=st.data())
def test_window_start_is_flinks_java_result_and_the_brute_force_one(timestamp, size, data):
    offset = data.draw(st.integers(-size + 1, size - 1))
    start = TimeWindow.get_window_start_with_offset(timestamp, offset, size)
    assert start == flink_window_start(timestamp, offset, size)
    assert [start] == brute_force_starts(timestamp, size, size, offset)


def test_time_window_is_an_immutable_ordered_hashable_key_that_pickles_small():
    window = TimeWindow(-5, 10)
    assert (window.start, window.end, window.max_timestamp()) == (-5, 10, 9)
    assert (window.get_start(), window.get_end()) == (-5, 10)
    assert window == TimeWindow(-5, 10) and hash(window) == hash(TimeWindow(-5, 10))
    assert window != (-5, 10) and window != TimeWindow(-5, 11) and window != CountWindow(-5)
    assert sorted([TimeWindow(3, 4), TimeWindow(-5, 11), window]) == [window, TimeWindow(-5, 11), TimeWindow(3, 4)]
    assert TimeWindow(0, 5) <= TimeWindow(0, 5) < TimeWindow(0, 6) and TimeWindow(1, 2) > TimeWindow(0, 9)
    with pytest.raises(AttributeError):
        window.start = 0
    with pytest.raises(AttributeError):
        window.other = 0
    copy = pickle.loads(pickle.dumps(window))
    assert copy == window and type(copy) is TimeWindow
    assert len(pickle.dumps(window, protocol=5)) < 80
    assert repr(window) == "TimeWindow(start=-5, end=10)"


def test_intersects_and_cover_follow_flink_touching_windows_intersect():
    assert TimeWindow(0, 5).intersects(TimeWindow(5, 9)) and TimeWindow(5, 9).intersects(TimeWindow(0, 5))
    assert not TimeWindow(0, 5).intersects(TimeWindow(6, 9))
    assert TimeWindow(0, 10).intersects(TimeWindow(2, 3))
    assert TimeWindow(0, 5).cover(TimeWindow(8, 9)) == TimeWindow(0, 9)
    assert TimeWindow(2, 3).cover(TimeWindow(0, 10)) == TimeWindow(0, 10)


def test_count_and_global_windows():
    assert CountWindow(3) == CountWindow(3) and CountWindow(3) != CountWindow(4) and CountWindow(1) < CountWindow(2)
    assert CountWindow(3).max_timestamp() == MAX_WATERMARK == (1 << 63) - 1
    assert pickle.loads(pickle.dumps(CountWindow(7))) == CountWindow(7)
    with pytest.raises(AttributeError):
        CountWindow(3).id = 4
    assert GlobalWindow.get() is GlobalWindow() is pickle.loads(pickle.dumps(GlobalWindow.get()))
    assert GlobalWindow.get().max_timestamp() == MAX_WATERMARK and hash(GlobalWindow.get()) == 0
    assert {GlobalWindow.get(): 1}[GlobalWindow()] == 1 and repr(GlobalWindow.get()) == "GlobalWindow"


class Recorder(MergingWindowAssigner.MergeCallback):
    def __init__(self):
        self.merges = []

    def merge(self, to_be_merged, merge_result):
        self.merges.append((list(to_be_merged), merge_result))


def test_merge_windows_calls_back_only_for_groups_of_more_than_one_window():
    recorder = Recorder()
    windows = [TimeWindow(10, 15), TimeWindow(0, 5), TimeWindow(5, 8), TimeWindow(20, 30), TimeWindow(40, 45),
               TimeWindow(42, 43), TimeWindow(40, 45)]
    TimeWindow.merge_windows(windows, recorder)
    assert recorder.merges == [
        ([TimeWindow(0, 5), TimeWindow(5, 8)], TimeWindow(0, 8)),
        ([TimeWindow(40, 45), TimeWindow(42, 43)], TimeWindow(40, 45)),
    ]
    recorder = Recorder()
    TimeWindow.merge_windows([TimeWindow(1, 4), TimeWindow(1, 4)], recorder)  # one distinct window: no merge
    TimeWindow.merge_windows([], recorder)
    assert recorder.merges == []


@settings(max_examples=300, deadline=None)
@given(intervals=st.lists(st.tuples(st.integers(-50, 50), st.integers(1, 20)), max_size=12))
def test_merge_windows_against_merging_sorted_intervals(intervals):
    windows = [TimeWindow(start, start + length) for start, length in intervals]
    recorder = Recorder()
    TimeWindow.merge_windows(windows, recorder)
    expected = merged_intervals([(w.start, w.end) for w in windows])
    for to_be_merged, result in recorder.merges:
        assert (result.start, result.end) in expected
        assert len(to_be_merged) == len(set(to_be_merged)) > 1
        assert set(to_be_merged) == {w for w in windows if result.start <= w.start and w.end <= result.end}
    merged_results = {(result.start, result.end) for _, result in recorder.merges}
    singles = {(w.start, w.end) for w in windows if not any(w in group for group, _ in recorder.merges)}
    assert merged_results | singles == set(expected) and not merged_results & singles


# -- assigners -------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(timestamp=st.integers(-5_000, 5_000), size=st.integers(1, 200), data=st.data())
def test_tumbling_event_time_windows_against_brute_force(timestamp, size, data):
    offset = data.draw(st.integers(-size + 1, size - 1))
    assigner = TumblingEventTimeWindows.of(size, offset)
    expected = [TimeWindow(s, s + size) for s in brute_force_starts(timestamp, size, size, offset)]
    assert assigner.assign_windows(object(), timestamp, None) == expected
    assert len(expected) == 1 and (assigner.size, assigner.slide, assigner.offset) == (size, size, offset)
    processing = TumblingProcessingTimeWindows.of(size, offset)
    assert processing.assign_windows(object(), 123_456, Clock(timestamp)) == expected


@settings(max_examples=300, deadline=None)
@given(timestamp=st.integers(-5_000, 5_000), size=st.integers(1, 120), slide=st.integers(1, 60), data=st.data())
def test_sliding_event_time_windows_against_brute_force(timestamp, size, slide, data):
    offset = data.draw(st.integers(-slide + 1, slide - 1))
    assigner = SlidingEventTimeWindows.of(size, slide, offset)
    expected = [TimeWindow(s, s + size) for s in brute_force_starts(timestamp, size, slide, offset)]
    assert assigner.assign_windows(object(), timestamp, None) == expected  # latest start first, as Flink
    assert (assigner.size, assigner.slide, assigner.offset) == (size, slide, offset)
    processing = SlidingProcessingTimeWindows.of(size, slide, offset)
    assert processing.assign_windows(object(), None, Clock(timestamp)) == expected


def test_sliding_windows_fixed_cases():
    assigner = SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5))
    assert assigner.assign_windows("x", -1, None) == [TimeWindow(-5000, 5000), TimeWindow(-10000, 0)]
    assert assigner.assign_windows("x", 5000, None) == [TimeWindow(5000, 15000), TimeWindow(0, 10000)]
    gaps = SlidingEventTimeWindows.of(10, 30)  # slide > size: Flink allows it; some timestamps get no window
    assert gaps.assign_windows("x", 15, None) == [] and gaps.assign_windows("x", 31, None) == [TimeWindow(30, 40)]
    shifted = SlidingEventTimeWindows.of(Duration.of_millis(6), Duration.of_millis(4), -1)
    assert shifted.assign_windows("x", 0, None) == [TimeWindow(-1, 5), TimeWindow(-5, 1)]
    assert shifted.assign_windows("x", 3, None) == [TimeWindow(3, 9), TimeWindow(-1, 5)]


def test_tumbling_windows_fixed_cases_with_time_and_duration_and_offsets():
    daily = TumblingEventTimeWindows.of(Time.days(1), Time.hours(-8))
    assert daily.assign_windows("x", 0, None) == [TimeWindow(-8 * 3_600_000, 16 * 3_600_000)]
    assert TumblingEventTimeWindows.of(Duration.of_seconds(1)).assign_windows("x", -1, None) == [TimeWindow(-1000, 0)]
    assert TumblingEventTimeWindows.of(10, 3).assign_windows("x", 2, None) == [TimeWindow(-7, 3)]


def test_default_triggers_and_time_characteristic_of_each_assigner():
    cases = [
        (TumblingEventTimeWindows.of(10), EventTimeTrigger, True),
        (SlidingEventTimeWindows.of(10, 5), EventTimeTrigger, True),
        (EventTimeSessionWindows.with_gap(10), EventTimeTrigger, True),
        (EventTimeSessionWindows.with_dynamic_gap(lambda e: 10), EventTimeTrigger, True),
        (TumblingProcessingTimeWindows.of(10), ProcessingTimeTrigger, False),
        (SlidingProcessingTimeWindows.of(10, 5), ProcessingTimeTrigger, False),
        (ProcessingTimeSessionWindows.with_gap(10), ProcessingTimeTrigger, False),
        (ProcessingTimeSessionWindows.with_dynamic_gap(lambda e: 10), ProcessingTimeTrigger, False),
        (GlobalWindows.create(), NeverTrigger, False),
    ]
    for assigner, trigger_class, event_time in cases:
        assert type(assigner.get_default_trigger()) is trigger_class, assigner
        assert type(assigner.get_default_trigger(env=object())) is trigger_class, assigner
        assert assigner.is_event_time() is event_time, assigner
        assert assigner.get_default_evictor() is None
    merging = [a for a, _, _ in cases if isinstance(a, MergingWindowAssigner)]
    assert len(merging) == 4


def test_session_assigners_open_a_gap_long_window_at_the_timestamp_or_the_clock():
    assert EventTimeSessionWindows.with_gap(Time.seconds(3)).assign_windows("x", -7, None) == [TimeWindow(-7, 2993)]
    assert EventTimeSessionWindows.with_gap(5).gap == 5
    assert ProcessingTimeSessionWindows.with_gap(5).assign_windows("x", 1, Clock(100)) == [TimeWindow(100, 105)]

    class ByLength(SessionWindowTimeGapExtractor):
        def extract(self, element):
            return len(element)

    dynamic = EventTimeSessionWindows.with_dynamic_gap(ByLength())
    assert type(dynamic) is DynamicEventTimeSessionWindows
    assert dynamic.assign_windows("abcd", 10, None) == [TimeWindow(10, 14)]
    processing = ProcessingTimeSessionWindows.with_dynamic_gap(len)
    assert type(processing) is DynamicProcessingTimeSessionWindows
    assert processing.assign_windows("ab", 10, Clock(50)) == [TimeWindow(50, 52)]
    assert DynamicEventTimeSessionWindows.with_dynamic_gap(len).assign_windows("a", 0, None) == [TimeWindow(0, 1)]


def test_global_windows_assign_the_one_global_window():
    assert GlobalWindows.create().assign_windows("x", None, None) == [GlobalWindow.get()]
    assert GlobalWindows.create().assign_windows("y", 5, None)[0] is GlobalWindow.get()


# -- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("declare, message", [
    (lambda: TumblingEventTimeWindows.of(0), "size must be positive"),
    (lambda: TumblingEventTimeWindows.of(-5), "size must be positive"),
    (lambda: TumblingProcessingTimeWindows.of(Time.milliseconds(0)), "size must be positive"),
    (lambda: TumblingEventTimeWindows.of(10, 10), "abs(offset) < size"),
    (lambda: TumblingEventTimeWindows.of(10, -10), "abs(offset) < size"),
    (lambda: TumblingEventTimeWindows.of("10 parsecs"), "TumblingEventTimeWindows.of(size) = '10 parsecs' is not a "
                                                         "duration: write a number and a unit"),
    (lambda: TumblingEventTimeWindows.of(1.5), "= 1.5 is not a whole number of milliseconds"),
    (lambda: TumblingEventTimeWindows.of(True), "= True is not a duration"),
    (lambda: TumblingEventTimeWindows.of("0 s"), "size must be positive"),
    (lambda: SlidingEventTimeWindows.of(0, 5), "size must be positive"),
    (lambda: SlidingEventTimeWindows.of(10, 0), "slide must be positive"),
    (lambda: SlidingProcessingTimeWindows.of(10, -1), "slide must be positive"),
    (lambda: SlidingEventTimeWindows.of(10, 5, 5), "abs(offset) < slide"),
    (lambda: SlidingEventTimeWindows.of(10, 5, -6), "abs(offset) < slide"),
    (lambda: EventTimeSessionWindows.with_gap(0), "session gap must be positive"),
    (lambda: ProcessingTimeSessionWindows.with_gap(-1), "session gap must be positive"),
    (lambda: EventTimeSessionWindows.with_dynamic_gap(42), "expects a SessionWindowTimeGapExtractor or a callable"),
    (lambda: CountTrigger.of(0), "at least 1"),
    (lambda: CountTrigger.of(2.0), "at least 1"),
    (lambda: ContinuousEventTimeTrigger.of(0), "interval must be positive"),
    (lambda: ContinuousProcessingTimeTrigger.of("soon"), "is not a duration"),
    (lambda: PurgingTrigger.of(CountTrigger), "expects a Trigger"),
    (lambda: CountEvictor.of(-1), "at least 0"),
    (lambda: TimeEvictor.of(-1), "must not be negative"),
    (lambda: CountTumblingWindowAssigner.of(0), "at least 1"),
    (lambda: CountSlidingWindowAssigner.of(3, 0), "at least 1"),
    (lambda: count_window_parts(0), "at least 1"),
    (lambda: count_window_parts(3, -1), "at least 1"),
])
def test_bad_declarations_raise_api_usage_errors_naming_the_problem(declare, message):
    with pytest.raises(ApiUsageError) as error:
        declare()
    assert message in str(error.value)


def test_offset_error_names_the_allowed_range():
    with pytest.raises(ApiUsageError, match=r"between -9 and 9 ms"):
        TumblingEventTimeWindows.of(10, 12)


@pytest.mark.parametrize("gap", [0, -3, 1.5, "10", None, True])
def test_a_dynamic_gap_that_is_not_a_positive_whole_number_fails_at_assignment(gap):
    for assigner, context in [(EventTimeSessionWindows.with_dynamic_gap(lambda e: gap), None),
                              (ProcessingTimeSessionWindows.with_dynamic_gap(lambda e: gap), Clock(0))]:
        with pytest.raises(FunctionContractError, match="greater than 0"):
            assigner.assign_windows("x", 5, context)


@pytest.mark.parametrize("assigner", [TumblingEventTimeWindows.of(10), SlidingEventTimeWindows.of(10, 5),
                                      EventTimeSessionWindows.with_gap(10),
                                      EventTimeSessionWindows.with_dynamic_gap(lambda e: 3)])
def test_event_time_assigners_refuse_a_record_without_timestamp(assigner):
    with pytest.raises(InvalidRecordError) as error:
        assigner.assign_windows("x", None, None)
    assert ("record has no timestamp: call assign_timestamps_and_watermarks(...) or use from_source(source, "
            "watermark_strategy, name) before an event-time window, or use a processing-time window"
            ) in str(error.value)


def test_processing_time_assigners_ignore_a_missing_timestamp():
    assert TumblingProcessingTimeWindows.of(10).assign_windows("x", None, Clock(15)) == [TimeWindow(10, 20)]
    assert ProcessingTimeSessionWindows.with_gap(10).assign_windows("x", None, Clock(15)) == [TimeWindow(15, 25)]


# -- merging window set ----------------------------------------------------------------------------------


class MergeLog:
    def __init__(self):
        self.calls = []

    def __call__(self, merge_result, merged_windows, state_window_result, merged_state_windows):
        self.calls.append((merge_result, list(merged_windows), state_window_result, list(merged_state_windows)))


def sessions(mapping=None, gap=10):
    return MergingWindowSet(EventTimeSessionWindows.with_gap(gap), mapping or {})


def test_a_new_window_that_bridges_two_sessions_merges_them_into_the_earliest_state_window():
    stored = {TimeWindow(0, 10): TimeWindow(0, 10), TimeWindow(20, 30): TimeWindow(20, 30)}
    merging, log = sessions(stored), MergeLog()
    assert merging.add_window(TimeWindow(10, 20), log) == TimeWindow(0, 30)
    assert log.calls == [(TimeWindow(0, 30), [TimeWindow(0, 10), TimeWindow(20, 30)], TimeWindow(0, 10),
                          [TimeWindow(20, 30)])]
    assert merging.persist() == {TimeWindow(0, 30): TimeWindow(0, 10)} and merging.changed
    assert stored == {TimeWindow(0, 10): TimeWindow(0, 10), TimeWindow(20, 30): TimeWindow(20, 30)}  # untouched


def test_a_new_window_inside_a_session_is_merged_into_it_and_the_state_window_is_kept():
    merging, log = sessions({TimeWindow(0, 25): TimeWindow(5, 15)}), MergeLog()
    assert merging.add_window(TimeWindow(3, 13), log) == TimeWindow(0, 25)
    assert log.calls == [] and not merging.changed
    assert merging.persist() == {TimeWindow(0, 25): TimeWindow(5, 15)}


def test_a_new_window_that_extends_a_session_keeps_its_state_window():
    merging, log = sessions({TimeWindow(0, 25): TimeWindow(5, 15)}), MergeLog()
    assert merging.add_window(TimeWindow(20, 30), log) == TimeWindow(0, 30)
    assert log.calls == [(TimeWindow(0, 30), [TimeWindow(0, 25)], TimeWindow(5, 15), [])]
    assert merging.get_state_window(TimeWindow(0, 30)) == TimeWindow(5, 15)
    assert merging.get_state_window(TimeWindow(0, 25)) is None and TimeWindow(0, 25) not in merging


def test_a_new_window_covering_a_session_takes_over_its_state_window():
    merging, log = MergingWindowSet(EventTimeSessionWindows.with_dynamic_gap(lambda e: e),
                                    {TimeWindow(5, 8): TimeWindow(5, 8)}), MergeLog()
    assert merging.add_window(TimeWindow(0, 20), log) == TimeWindow(0, 20)
    assert log.calls == [(TimeWindow(0, 20), [TimeWindow(5, 8)], TimeWindow(5, 8), [])]
    assert merging.persist() == {TimeWindow(0, 20): TimeWindow(5, 8)}


def test_a_separate_new_window_is_its_own_state_window():
    merging, log = sessions({TimeWindow(0, 10): TimeWindow(0, 10)}), MergeLog()
    assert merging.add_window(TimeWindow(11, 21), log) == TimeWindow(11, 21)
    assert log.calls == [] and merging.changed
    assert merging.persist() == {TimeWindow(0, 10): TimeWindow(0, 10), TimeWindow(11, 21): TimeWindow(11, 21)}
    assert len(merging) == 2 and sorted(merging.windows()) == [TimeWindow(0, 10), TimeWindow(11, 21)]


def test_a_new_window_equal_to_a_merged_session_keeps_that_sessions_state_window():
    merging, log = MergingWindowSet(EventTimeSessionWindows.with_dynamic_gap(lambda e: e), {}), MergeLog()
    merging.add_window(TimeWindow(1, 4), log)
    assert merging.add_window(TimeWindow(3, 10), log) == TimeWindow(1, 10)
    assert merging.add_window(TimeWindow(1, 10), log) == TimeWindow(1, 10)
    assert merging.persist() == {TimeWindow(1, 10): TimeWindow(1, 4)}  # Flink's put would orphan [1, 4)'s state


def test_retire_window_and_persist():
    merging = sessions({TimeWindow(0, 10): TimeWindow(0, 10), TimeWindow(20, 30): TimeWindow(22, 30)})
    merging.retire_window(TimeWindow(20, 30))
    assert merging.persist() == {TimeWindow(0, 10): TimeWindow(0, 10)} and merging.changed
    with pytest.raises(LookupError, match="not in the in-flight window set"):
        merging.retire_window(TimeWindow(20, 30))
    snapshot = merging.persist()
    merging.retire_window(TimeWindow(0, 10))
    assert snapshot == {TimeWindow(0, 10): TimeWindow(0, 10)} and merging.persist() == {}


def test_merge_function_may_be_a_flink_style_object_with_a_merge_method():
    class MergeFunction:
        def __init__(self):
            self.calls = 0

        def merge(self, merge_result, merged_windows, state_window_result, merged_state_windows):
            self.calls += 1

    function = MergeFunction()
    sessions({TimeWindow(0, 10): TimeWindow(0, 10)}).add_window(TimeWindow(5, 15), function)
    assert function.calls == 1


@settings(max_examples=300, deadline=None)
@given(elements=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 30)), min_size=1, max_size=25),
       persist_every=st.integers(1, 5))
def test_session_merging_against_a_reference_that_merges_sorted_intervals(elements, persist_every):
    """Runs the operator's bookkeeping: contents live in state windows and move on merge. After every element
    the sessions in flight are the merged intervals of all windows so far, each holding exactly its elements."""
    assigner = EventTimeSessionWindows.with_dynamic_gap(lambda element: element[1])
    stored, contents = {}, {}  # stored: the mapping as kept in keyed state; contents: state window -> elements
    merging = MergingWindowSet(assigner, stored)
    for index, (timestamp, gap) in enumerate(elements):
        element = (index, gap)
        [new_window] = assigner.assign_windows(element, timestamp, None)

        def merge(merge_result, merged_windows, state_window_result, merged_state_windows):
            assert new_window not in merged_windows and state_window_result not in merged_state_windows
            assert merging.get_state_window(merge_result) == state_window_result
            for state_window in merged_state_windows:
                contents.setdefault(state_window_result, []).extend(contents.pop(state_window, []))

        actual = merging.add_window(new_window, merge)
        assert actual.start <= new_window.start and new_window.end <= actual.end
        contents.setdefault(merging.get_state_window(actual), []).append((index, timestamp, gap))
        if index % persist_every == 0:  # the operator reloads the set from keyed state for the next record
            stored = merging.persist()
            merging = MergingWindowSet(assigner, stored)

        seen = elements[:index + 1]
        expected = merged_intervals([(t, t + g) for t, g in seen])
        mapping = merging.persist()
        assert sorted((w.start, w.end) for w in mapping) == expected
        assert len(set(mapping.values())) == len(mapping)  # each session has its own state window
        for window, state_window in mapping.items():
            inside = sorted((i, t, g) for i, (t, g) in enumerate(seen) if window.start <= t and t + g <= window.end)
            assert sorted(contents.get(state_window, [])) == inside
        assert set(contents) - set(mapping.values()) <= {sw for sw in contents if not contents[sw]}


# -- triggers --------------------------------------------------------------------------------------------


def test_trigger_results():
    assert [(r.is_fire(), r.is_purge()) for r in (CONTINUE, FIRE, PURGE, FIRE_AND_PURGE)] == [
        (False, False), (True, False), (False, True), (True, True)]


def test_event_time_trigger():
    window = TimeWindow(0, 10)
    trigger = EventTimeTrigger.create()
    ctx = FakeTriggerContext(window, watermark=5)
    assert trigger.on_element("a", 3, window, ctx) is CONTINUE
    assert ctx.calls == [("register event", 9, window)]
    assert [trigger.on_event_time(t, window, ctx) for t in (8, 9, 10)] == [CONTINUE, FIRE, CONTINUE]
    assert trigger.on_processing_time(9, window, ctx) is CONTINUE
    late = FakeTriggerContext(window, watermark=9)
    assert trigger.on_element("a", 3, window, late) is FIRE and late.calls == []  # watermark at max_timestamp
    trigger.clear(window, ctx)
    assert ctx.calls[-1] == ("delete event", 9, window)
    assert trigger.can_merge()
    merged = TimeWindow(0, 20)
    ctx = FakeTriggerContext(merged, watermark=18)
    trigger.on_merge(merged, ctx)
    assert ctx.calls == [("register event", 19, merged)]
    ctx = FakeTriggerContext(merged, watermark=19)
    trigger.on_merge(merged, ctx)
    assert ctx.calls == []


def test_processing_time_trigger():
    window = TimeWindow(0, 10)
    trigger = ProcessingTimeTrigger.create()
    ctx = FakeTriggerContext(window, processing_time=50)  # registers even when the time has passed, as Flink
    assert trigger.on_element("a", None, window, ctx) is CONTINUE
    assert ctx.calls == [("register processing", 9, window)]
    assert trigger.on_processing_time(9, window, ctx) is FIRE and trigger.on_event_time(9, window, ctx) is CONTINUE
    trigger.clear(window, ctx)
    assert ctx.calls[-1] == ("delete processing", 9, window)
    ctx = FakeTriggerContext(window, processing_time=8)
    trigger.on_merge(window, ctx)
    assert ctx.calls == [("register processing", 9, window)]
    ctx = FakeTriggerContext(window, processing_time=9)
    trigger.on_merge(window, ctx)
    assert ctx.calls == [] and trigger.can_merge()


def test_count_trigger_fires_every_count_elements_and_merges_counts():
    window = GlobalWindow.get()
    trigger = CountTrigger.of(3)
    ctx = FakeTriggerContext(window)
    results = [trigger.on_element(x, None, window, ctx) for x in range(7)]
    assert results == [CONTINUE, CONTINUE, FIRE, CONTINUE, CONTINUE, FIRE, CONTINUE]
    assert ctx.state == {("count", window): 1} and ctx.calls == []
    assert trigger.on_event_time(0, window, ctx) is CONTINUE and trigger.on_processing_time(0, window, ctx) is CONTINUE
    trigger.clear(window, ctx)
    assert ctx.state == {}

    a, b, merged = TimeWindow(0, 10), TimeWindow(5, 15), TimeWindow(0, 15)
    ctx = FakeTriggerContext(a)
    trigger = CountTrigger.of(4)
    trigger.on_element("x", 1, a, ctx)
    trigger.on_element("y", 2, a, ctx)
    ctx.window = b
    trigger.on_element("z", 6, b, ctx)
    ctx.window, ctx.merged_windows = merged, [a, b]
    trigger.on_merge(merged, ctx)
    assert ctx.state == {("count", merged): 3}
    assert trigger.on_element("w", 7, merged, ctx) is FIRE and ctx.state == {}
    assert trigger.can_merge()


def test_continuous_event_time_trigger_fires_every_interval_and_at_the_window_end():
    window = TimeWindow(0, 100)
    trigger = ContinuousEventTimeTrigger.of(Time.milliseconds(30))
    ctx = FakeTriggerContext(window, watermark=0)
    assert trigger.on_element("a", 42, window, ctx) is CONTINUE
    assert ctx.calls == [("register event", 99, window), ("register event", 60, window)]
    assert ctx.state == {("fire-time", window): 60}
    assert trigger.on_element("b", 70, window, ctx) is CONTINUE  # a fire time is pending: none added
    assert ctx.calls[2:] == [("register event", 99, window)]
    assert trigger.on_event_time(59, window, ctx) is CONTINUE
    assert trigger.on_event_time(60, window, ctx) is FIRE and ctx.state == {("fire-time", window): 90}
    assert trigger.on_event_time(90, window, ctx) is FIRE and ctx.state == {("fire-time", window): 99}
    assert ctx.calls[-2:] == [("register event", 90, window), ("register event", 99, window)]
    assert trigger.on_event_time(99, window, ctx) is FIRE
    assert trigger.on_processing_time(60, window, ctx) is CONTINUE
    trigger.clear(window, ctx)
    assert ctx.calls[-1] == ("delete event", 99, window) and ctx.state == {}
    trigger.clear(window, ctx)  # nothing pending: nothing deleted
    assert ctx.calls[-1] == ("delete event", 99, window) and len([c for c in ctx.calls if c[0] == "delete event"]) == 1


def test_continuous_event_time_trigger_uses_javas_remainder_for_negative_timestamps():
    window = TimeWindow(-100, 100)
    ctx = FakeTriggerContext(window, watermark=MIN_WATERMARK)
    ContinuousEventTimeTrigger.of(10).on_element("a", -5, window, ctx)
    assert ctx.state == {("fire-time", window): 10}  # Java: -5 - (-5 % 10) = 0, then + 10 (Python's % gives 0)
    ctx = FakeTriggerContext(window, watermark=MIN_WATERMARK)
    ContinuousEventTimeTrigger.of(10).on_element("a", -20, window, ctx)
    assert ctx.state == {("fire-time", window): -10}


def test_continuous_event_time_trigger_late_element_merge_and_missing_timestamp():
    window = TimeWindow(0, 10)
    trigger = ContinuousEventTimeTrigger.of(3)
    late = FakeTriggerContext(window, watermark=9)
    assert trigger.on_element("a", 5, window, late) is FIRE and late.calls == [] and late.state == {}
    a, b, merged = TimeWindow(0, 10), TimeWindow(5, 20), TimeWindow(0, 20)
    ctx = FakeTriggerContext(merged, watermark=0)
    ctx.state = {("fire-time", a): 6, ("fire-time", b): 9}
    ctx.merged_windows = [a, b]
    trigger.on_merge(merged, ctx)
    assert ctx.state == {("fire-time", merged): 6} and ctx.calls == [("register event", 6, merged)]
    with pytest.raises(InvalidRecordError, match="record has no timestamp"):
        trigger.on_element("a", None, TimeWindow(0, 10), FakeTriggerContext(TimeWindow(0, 10), watermark=0))


def test_continuous_processing_time_trigger():
    window = TimeWindow(0, 100)
    trigger = ContinuousProcessingTimeTrigger.of(Duration.of_millis(30))
    ctx = FakeTriggerContext(window, processing_time=42)
    assert trigger.on_element("a", 7, window, ctx) is CONTINUE  # the element's timestamp plays no part
    assert ctx.calls == [("register processing", 60, window)] and ctx.state == {("fire-time", window): 60}
    assert trigger.on_element("b", 7, window, ctx) is CONTINUE and len(ctx.calls) == 1
    assert trigger.on_processing_time(59, window, ctx) is CONTINUE
    assert trigger.on_processing_time(60, window, ctx) is FIRE and ctx.state == {("fire-time", window): 90}
    assert trigger.on_processing_time(90, window, ctx) is FIRE and ctx.state == {("fire-time", window): 99}
    assert trigger.on_event_time(99, window, ctx) is CONTINUE
    trigger.clear(window, ctx)
    assert ctx.calls[-1] == ("delete processing", 99, window) and ctx.state == {}
    assert trigger.on_processing_time(99, window, ctx) is CONTINUE  # no pending fire time
    merged = TimeWindow(0, 200)
    ctx = FakeTriggerContext(merged)
    ctx.state, ctx.merged_windows = {("fire-time", window): 90, ("fire-time", TimeWindow(50, 200)): 120}, [
        window, TimeWindow(50, 200)]
    trigger.on_merge(merged, ctx)
    assert ctx.state == {("fire-time", merged): 90} and ctx.calls == [("register processing", 90, merged)]


def test_purging_trigger_turns_fires_into_fire_and_purge_and_delegates_the_rest():
    class Scripted(Trigger):
        def __init__(self):
            self.cleared, self.merged = [], []

        def on_element(self, element, timestamp, window, ctx):
            return element

        def on_event_time(self, time, window, ctx):
            return FIRE if time else PURGE

        def on_processing_time(self, time, window, ctx):
            return CONTINUE if time else FIRE_AND_PURGE

        def can_merge(self):
            return True

        def on_merge(self, window, ctx):
            self.merged.append(window)

        def clear(self, window, ctx):
            self.cleared.append(window)

    nested = Scripted()
    trigger = PurgingTrigger.of(nested)
    assert [trigger.on_element(r, 0, None, None) for r in (CONTINUE, FIRE, PURGE, FIRE_AND_PURGE)] == [
        CONTINUE, FIRE_AND_PURGE, PURGE, FIRE_AND_PURGE]
    assert [trigger.on_event_time(t, None, None) for t in (1, 0)] == [FIRE_AND_PURGE, PURGE]
    assert [trigger.on_processing_time(t, None, None) for t in (1, 0)] == [CONTINUE, FIRE_AND_PURGE]
    trigger.clear("w", None)
    trigger.on_merge("m", None)
    assert nested.cleared == ["w"] and nested.merged == ["m"] and trigger.can_merge()
    assert not PurgingTrigger.of(NeverTrigger()).can_merge()


def test_never_trigger_and_the_trigger_base():
    trigger = NeverTrigger()
    window = GlobalWindow.get()
    ctx = FakeTriggerContext(window)
    assert [trigger.on_element("x", 1, window, ctx), trigger.on_event_time(MAX_WATERMARK, window, ctx),
            trigger.on_processing_time(5, window, ctx)] == [CONTINUE] * 3
    trigger.clear(window, ctx)
    trigger.on_merge(window, ctx)
    assert ctx.calls == [] and ctx.state == {} and not trigger.can_merge()
    assert not Trigger().can_merge()
    with pytest.raises(ApiUsageError, match="does not support merging"):
        Trigger().on_merge(window, ctx)
    with pytest.raises(NotImplementedError):
        Trigger().on_element("x", 1, window, ctx)


def test_triggers_pickle_with_their_state_descriptors():
    for trigger in (CountTrigger.of(3), ContinuousEventTimeTrigger.of(5), PurgingTrigger.of(CountTrigger.of(2))):
        copy = pickle.loads(pickle.dumps(trigger))
        assert repr(copy) == repr(trigger)
    descriptor = pickle.loads(pickle.dumps(CountTrigger.of(3))).state_descriptor
    assert isinstance(descriptor, ReducingStateDescriptor) and descriptor.name == "count"
    assert descriptor.reduce_function(2, 5) == 7
    assert ContinuousEventTimeTrigger.of(5).state_descriptor.reduce_function(2, 5) == 2


def test_in_memory_context_fires_due_timers_in_order_including_ones_registered_while_firing():
    window = TimeWindow(0, 100)
    ctx = InMemoryTriggerContext(window, watermark=0)
    trigger = ContinuousEventTimeTrigger.of(25)
    trigger.on_element("x", 10, window, ctx)
    fired = ctx.advance_watermark(trigger, 80)
    assert [(t, r) for t, _, r in fired] == [(25, FIRE), (50, FIRE), (75, FIRE)]
    assert ctx.watermark == 80 and ctx.event_timers == {(99, window)} and ctx.state == {("fire-time", window): 99}
    assert [(t, r) for t, _, r in ctx.advance_watermark(trigger, MAX_WATERMARK)] == [(99, FIRE)]
    with pytest.raises(Exception, match="cannot be merged"):
        ctx.merge_partitioned_state(ValueStateDescriptor("v"))


# -- evictors --------------------------------------------------------------------------------------------


def pane(*pairs):
    return [TimestampedValue(value, timestamp) for value, timestamp in pairs]


def test_timestamped_value():
    value = TimestampedValue("a", 5)
    assert (value.get_value(), value.get_timestamp(), value.has_timestamp()) == ("a", 5, True)
    assert value == TimestampedValue("a", 5) and value != TimestampedValue("a", 6)
    assert pickle.loads(pickle.dumps(value)) == value
    assert not TimestampedValue("a").has_timestamp()
    with pytest.raises(InvalidRecordError, match="record has no timestamp"):
        TimestampedValue("a").get_timestamp()


def test_count_evictor_removes_the_earliest_beyond_the_count_before_or_after():
    elements = pane(*[(v, None) for v in "abcde"])
    CountEvictor.of(3).evict_after(elements, 5, None, None)
    assert len(elements) == 5
    CountEvictor.of(3).evict_before(elements, 5, None, None)
    assert [e.value for e in elements] == ["c", "d", "e"]
    CountEvictor.of(5).evict_before(elements, 3, None, None)
    assert len(elements) == 3
    after = CountEvictor.of(1, do_evict_after=True)
    after.evict_before(elements, 3, None, None)
    assert len(elements) == 3
    after.evict_after(elements, 3, None, None)
    assert [e.value for e in elements] == ["e"]
    CountEvictor.of(0).evict_before(elements, 1, None, None)
    assert elements == []


def test_time_evictor_keeps_the_elements_of_the_last_window_time():
    elements = pane(("a", 1), ("b", 9), ("c", 5), ("d", 6), ("e", 10))
    TimeEvictor.of(Time.milliseconds(4)).evict_before(elements, 5, None, None)
    assert [e.value for e in elements] == ["b", "e"]  # cutoff 10 - 4 = 6: timestamps <= 6 go
    elements = pane(("a", 1), ("b", 9))
    TimeEvictor.of(4, do_evict_after=True).evict_before(elements, 2, None, None)
    assert len(elements) == 2
    TimeEvictor.of(4, do_evict_after=True).evict_after(elements, 2, None, None)
    assert [e.value for e in elements] == ["b"]
    untimed = pane(("a", None), ("b", 9))
    TimeEvictor.of(0).evict_before(untimed, 2, None, None)  # the first element has no timestamp: no-op, as Flink
    assert len(untimed) == 2
    empty = []
    TimeEvictor.of(0).evict_before(empty, 0, None, None)
    assert empty == []


@settings(max_examples=200, deadline=None)
@given(timestamps=st.lists(st.integers(-100, 100), max_size=20), window_time=st.integers(0, 50),
       max_count=st.integers(0, 25))
def test_evictors_against_references(timestamps, window_time, max_count):
    elements = pane(*[(i, t) for i, t in enumerate(timestamps)])
    TimeEvictor.of(window_time).evict_before(elements, len(elements), None, None)
    cutoff = max(timestamps, default=0) - window_time
    assert [e.value for e in elements] == [i for i, t in enumerate(timestamps) if t > cutoff]
    elements = pane(*[(i, t) for i, t in enumerate(timestamps)])
    CountEvictor.of(max_count).evict_before(elements, len(elements), None, None)
    assert [e.value for e in elements] == list(range(len(timestamps)))[max(0, len(timestamps) - max_count):]


def test_evictor_base_is_abstract():
    with pytest.raises(NotImplementedError):
        Evictor().evict_before([], 0, None, None)


# -- count windows ---------------------------------------------------------------------------------------


def run_count_window(assigner, trigger, evictor, elements):
    """The window operator's path for an element in a global window: add, ask the trigger, on fire evict and
    emit, on purge clear."""
    ctx = FakeTriggerContext(GlobalWindow.get())
    contents, emitted = [], []
    for element in elements:
        [window] = assigner.assign_windows(element, None, None)
        contents.append(TimestampedValue(element))
        result = trigger.on_element(element, None, window, ctx)
        if result.is_fire():
            if evictor is not None:
                evictor.evict_before(contents, len(contents), window, ctx)
            emitted.append([e.value for e in contents])
            if evictor is not None:
                evictor.evict_after(contents, len(contents), window, ctx)
        if result.is_purge():
            contents.clear()
    return emitted, contents


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 40), size=st.integers(1, 8), slide=st.integers(1, 10))
def test_count_windows_against_references(n, size, slide):
    elements = list(range(n))
    # Flink's Java countWindow: tumbling groups; sliding fires every `slide` with the last (up to) `size`
    emitted, left = run_count_window(*count_window_parts(size), elements)
    assert emitted == [elements[i:i + size] for i in range(0, n - size + 1, size)] and len(left) == n % size
    emitted, left = run_count_window(*count_window_parts(size, slide), elements)
    assert emitted == [elements[max(0, k - size):k] for k in range(slide, n + 1, slide)]
    # PyFlink's count_window: the same tumbling groups; sliding fires only full windows
    assigner = CountTumblingWindowAssigner.of(size)
    emitted, _ = run_count_window(assigner, assigner.get_default_trigger(), assigner.get_default_evictor(), elements)
    assert emitted == [elements[i:i + size] for i in range(0, n - size + 1, size)]
    assigner = CountSlidingWindowAssigner.of(size, slide)
    emitted, left = run_count_window(assigner, assigner.get_default_trigger(), assigner.get_default_evictor(),
                                     elements)
    assert emitted == [elements[k - size:k] for k in range(size, n + 1, slide)]
    assert len(left) <= size + slide  # the pane stays bounded


def test_count_window_assigners_are_global_windows_and_not_event_time():
    for assigner in (CountTumblingWindowAssigner.of(3), CountSlidingWindowAssigner.of(3, 1)):
        assert assigner.assign_windows("x", None, None) == [GlobalWindow.get()] and not assigner.is_event_time()
    assert CountTumblingWindowAssigner.of(3).get_default_evictor() is None
    assert repr(CountSlidingWindowAssigner.of(3, 1).get_default_evictor()) == "CountEvictor(3, do_evict_after=False)"


# -- documentation ---------------------------------------------------------------------------------------


def public_objects():
    """Every public class and function of operators.window, and the public classes nested in them."""
    found = {}
    for name in window_package.__all__:
        obj = getattr(window_package, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            found[f"{obj.__module__}.{obj.__qualname__}"] = obj
            if inspect.isclass(obj):
                for member_name, member in vars(obj).items():
                    if inspect.isclass(member) and not member_name.startswith("_"):
                        found[f"{member.__module__}.{member.__qualname__}"] = member
    return found


@pytest.mark.parametrize("qualified_name", sorted(public_objects()))
def test_every_public_name_has_an_example_that_checks_an_output(qualified_name):
    obj = public_objects()[qualified_name]
    docstring = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    examples = doctest.DocTestParser().get_examples(docstring or "")
    assert any(example.want.strip() or example.exc_msg for example in examples), qualified_name


def test_the_package_exports_everything_public_once():
    assert len(window_package.__all__) == len(set(window_package.__all__))
    for module in ("windows", "assigners", "triggers", "evictors", "merging", "functions", "testing"):
        exported = getattr(__import__(f"operators.window.{module}", fromlist=["__all__"]), "__all__")
        assert set(exported) <= set(window_package.__all__), module


@pytest.mark.parametrize("seed", range(5))
def test_sessions_merge_the_same_when_only_the_windows_meeting_the_new_one_are_given_to_the_assigner(seed):
    """The merging set gives a session assigner only the windows in flight that intersect the new one; an
    assigner that merges otherwise gets them all (as in Flink). Both must reach the same windows, state windows
    and merge calls, over random sessions with random gaps."""
    import random

    class EveryWindow(EventTimeSessionWindows):
        merges_intersecting_time_windows = False

    rng = random.Random(seed)
    fast, full = MergingWindowSet(EventTimeSessionWindows.with_gap(10), {}), MergingWindowSet(EveryWindow(10), {})
    fast_calls, full_calls = [], []
    for _ in range(400):
        start = rng.randrange(0, 2_000)
        window = TimeWindow(start, start + rng.randrange(1, 40))
        assert fast.add_window(window, lambda *a: fast_calls.append(a)) == \
            full.add_window(window, lambda *a: full_calls.append(a))
        if rng.random() < 0.1 and len(fast):
            retired = rng.choice(fast.windows())
            fast.retire_window(retired), full.retire_window(retired)
    assert fast.persist() == full.persist() and fast_calls == full_calls
    assert len(fast_calls) > 50, "the sequence merged windows"
