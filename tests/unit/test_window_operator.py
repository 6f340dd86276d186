"""The window operator against plain-Python references, driven batch by batch with watermarks in between,
over random timestamps, window sizes, out-of-orderness and lateness (hypothesis)."""

import collections

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.windows import Count  # the aggregate the windowed benchmark counts with
from operators.context import SubtaskInfo
from operators.window import (
    CountTrigger,
    EventTimeSessionWindows,
    ProcessWindowFunction,
    PurgingTrigger,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
)
from operators.window.operator import Aggregate, Elements, Reduce, WindowOperator
from runtime.errors import FunctionContractError
from runtime.keys.key_groups import key_group_range
from runtime.protocol.events import MAX_WATERMARK
from runtime.protocol.records import TimestampedBatch
from runtime.side_outputs import OutputTag, SideOutputRecord
from state_backends.heap import HeapKeyedStateBackend

KEYS = 3


def run(op, events, batch, bound, final=True):
    """Feed ``events`` ((key, value, ts)) in batches; after each, the watermark = max ts seen - bound - 1."""
    op.setup(SubtaskInfo("w", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    op.open()
    out = []
    highest = None
    for i in range(0, len(events), batch):
        chunk = events[i:i + batch]
        out.extend(_records(op.process_batch(TimestampedBatch.of(chunk, [e[2] for e in chunk]))))
        highest = max([highest or chunk[0][2]] + [e[2] for e in chunk])
        watermark = highest - bound - 1
        if watermark > op.watermark:
            out.extend(_records(op.process_watermark(watermark)))
    if final:
        out.extend(_records(op.process_watermark(MAX_WATERMARK)))
    return out


def _records(batch):
    if not batch:
        return []
    return list(zip(batch, batch.timestamps))


def key_of(event):
    return event[0]


def events_strategy(max_disorder):
    return st.lists(st.tuples(st.integers(0, KEYS - 1), st.integers(1, 9), st.integers(0, 2_000)), min_size=1,
                    max_size=80).map(lambda events: _bounded_disorder(events, max_disorder))


def _bounded_disorder(events, max_disorder):
    """Sort by time, then move records back by at most ``max_disorder`` ms of event time."""
    events = sorted(events, key=lambda e: e[2])
    result = []
    for key, value, ts in events:
        result.append((key, value, ts))
    # swap neighbours whose timestamps are within the bound: out of order, but never by more than the bound
    for i in range(0, len(result) - 1, 2):
        if result[i + 1][2] - result[i][2] <= max_disorder:
            result[i], result[i + 1] = result[i + 1], result[i]
    return result


def reference_windows(events, windows_of):
    panes = collections.defaultdict(list)
    for key, value, ts in events:
        for start, end in windows_of(ts):
            panes[(key, start, end)].append(value)
    return panes


@settings(max_examples=60, deadline=None)
@given(data=st.data(), size=st.integers(1, 500), offset_share=st.floats(0, 0.99), bound=st.integers(0, 300),
       batch=st.integers(1, 20))
def test_tumbling_and_sliding_reduce_and_aggregate_match_the_reference_without_late_data(data, size, offset_share,
                                                                                         bound, batch):
    events = data.draw(events_strategy(bound))
    slide = data.draw(st.integers(1, size))
    offset = int(offset_share * slide)
    tumbling = TumblingEventTimeWindows.of(size, offset)
    sliding = SlidingEventTimeWindows.of(size, slide, offset)
    for assigner, windows_of in (
            (tumbling, lambda ts: [(ts - (ts - offset) % size, ts - (ts - offset) % size + size)]),
            (sliding, lambda ts: [(s, s + size) for s in range(ts - (ts - offset) % slide, ts - size, -slide)])):
        panes = reference_windows(events, windows_of)
        op = WindowOperator("w", key_of, assigner, contents=Reduce(lambda a, b: (a[0], a[1] + b[1], a[2])))
        got = run(op, events, batch, bound)
        assert sorted((r[0], r[1], ts) for r, ts in got) == sorted((k, sum(v), e - 1) for (k, s, e), v in panes.items())
        assert op.batch_path, "the batch path ran"

        op = WindowOperator("w", key_of, assigner, contents=Aggregate(Count()))
        assert sorted(run(op, events, batch, bound)) == sorted((len(v), e - 1) for (k, s, e), v in panes.items())


class Sessions(ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield key, window.start, window.end, sorted(e[1] for e in elements)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), gap=st.integers(1, 300), bound=st.integers(0, 300), batch=st.integers(1, 20))
def test_session_windows_merge_exactly_like_the_reference(data, gap, bound, batch):
    events = data.draw(events_strategy(bound))
    expected = []
    for key in range(KEYS):
        times = sorted((ts, value) for k, value, ts in events if k == key)
        session: list = []
        for ts, value in times:
            if session and ts > session[-1][0] + gap:  # windows that touch merge (Flink: end >= start)
                expected.append((key, session[0][0], session[-1][0] + gap, sorted(v for _, v in session)))
                session = []
            session.append((ts, value))
        if session:
            expected.append((key, session[0][0], session[-1][0] + gap, sorted(v for _, v in session)))
    op = WindowOperator("s", key_of, EventTimeSessionWindows.with_gap(gap), contents=Elements(),
                        window_function=Sessions())
    got = run(op, events, batch, bound)
    assert sorted(r for r, _ in got) == sorted(expected)
    assert all(ts == end - 1 for (_, _, end, _), ts in got)
    # every window's state is gone at the end: nothing left behind by merging
    assert not list(op.backend.entries("window/contents")) and not list(op.backend.entries("window/merging-windows"))


@settings(max_examples=200, deadline=None)
@given(data=st.data(), size=st.sampled_from([5, 10, 20, 50]), lateness=st.sampled_from([0, 5, 10, 25]),
       bound=st.sampled_from([0, 3, 10]), batch=st.integers(1, 6))
def test_lateness_late_firings_and_late_side_output_follow_flink(data, size, lateness, bound, batch):
    """Any disorder: a reference that runs Flink's rules record by record, with the same watermarks."""
    # timestamps in a small range, so that records land on the boundaries (exactly at the watermark, etc.)
    events = data.draw(st.lists(st.tuples(st.integers(0, KEYS - 1), st.integers(1, 9), st.integers(0, 200)),
                                min_size=1, max_size=60))
    tag = OutputTag("late")
    op = WindowOperator("w", key_of, TumblingEventTimeWindows.of(size), allowed_lateness=lateness, late_tag=tag,
                        contents=Reduce(lambda a, b: (a[0], a[1] + b[1], a[2])))
    op.side_tags = frozenset({tag.tag_id})
    got = run(op, events, batch, bound)
    assert sorted(_normalised(got), key=repr) == _flink_reference(events, batch, bound, size, lateness)


def _normalised(out):
    result = []
    for record, ts in out:
        if type(record) is SideOutputRecord:
            result.append((("late", record.value), ts))
        else:
            result.append(((record[0], record[1]), ts))
    return result


def _flink_reference(events, batch, bound, size, lateness):
    """Flink's WindowOperator for tumbling windows + reduce + EventTimeTrigger, step by step."""
    out = []
    panes: dict = {}  # (key, start) -> sum
    highest = None

    def advance(new):
        for (key, start) in sorted(list(panes), key=lambda p: (p[1], p[0])):
            end = start + size - 1
            if watermark_box[0] < end <= new:  # its timer was registered when the pane got a record on time
                out.append(((key, panes[(key, start)]), end))
            if end + lateness <= new:
                del panes[(key, start)]

    watermark_box = [-(1 << 63)]
    for i in range(0, len(events), batch):
        chunk = events[i:i + batch]
        for key, value, ts in chunk:
            start = ts - ts % size
            end = start + size - 1
            wm = watermark_box[0]
            if end + lateness <= wm:
                if ts + lateness <= wm:
                    out.append((("late", (key, value, ts)), ts))
                continue
            panes[(key, start)] = panes.get((key, start), 0) + value
            if end <= wm:  # a late firing, record by record
                out.append(((key, panes[(key, start)]), end))
        highest = max([highest if highest is not None else chunk[0][2]] + [e[2] for e in chunk])
        new = highest - bound - 1
        if new > watermark_box[0]:
            advance(new)
            watermark_box[0] = new
    advance(MAX_WATERMARK)
    return sorted(out, key=repr)


def test_a_count_trigger_fires_every_n_records_and_purging_empties_the_pane():
    events = [("k", i, 100 + i) for i in range(7)]
    op = WindowOperator("c", key_of, TumblingEventTimeWindows.of(1_000), trigger=PurgingTrigger.of(CountTrigger.of(3)),
                        contents=Reduce(lambda a, b: (a[0], a[1] + b[1], a[2])))
    got = run(op, events, 2, 0)
    assert [r[1] for r, _ in got] == [0 + 1 + 2, 3 + 4 + 5]  # the 7th record's pane never reached 3


def test_an_event_time_window_refuses_records_without_timestamps_naming_the_fix():
    op = WindowOperator("w", key_of, TumblingEventTimeWindows.of(10))
    op.setup(SubtaskInfo("w", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    op.open()
    with pytest.raises(FunctionContractError, match="assign_timestamps_and_watermarks"):
        op.process_batch([("k", 1, 0)])


def test_window_state_is_one_accumulator_per_key_and_window_and_is_gone_after_cleanup():
    events = [(k, 1, ts) for ts in range(0, 1_000, 7) for k in range(KEYS)]
    for lateness in (0, 10):  # the aligned layout (a value state per window) and the general one (a map per key)
        op = WindowOperator("w", key_of, TumblingEventTimeWindows.of(100), allowed_lateness=lateness,
                            contents=Aggregate(Count()))
        run(op, events[:len(events) // 2], 50, 0, final=False)
        assert op.aligned == (lateness == 0)
        panes = [(key, window) for _, key, windows in op.backend.entries("window/contents") for window in windows]
        panes += [(key, name) for name in op.backend.state_names() if name.startswith("window/aligned/")
                  for _, key, _ in op.backend.entries(name)]
        assert all(isinstance(n, (str, TimeWindow)) for _, n in panes) and len(panes) == len(set(panes))
        assert 0 < len(panes) <= 2 * KEYS, "only the windows the watermark has not passed keep state"
        op.process_watermark(MAX_WATERMARK)
        assert not [name for name in op.backend.state_names() if name.startswith("window/")], "state left behind"


def test_a_restore_into_a_window_with_lateness_moves_aligned_panes_to_the_general_layout():
    events = [(k, 1, ts) for ts in range(0, 500, 7) for k in range(KEYS)]
    first = WindowOperator("w", key_of, TumblingEventTimeWindows.of(100), contents=Aggregate(Count()))
    run(first, events, 50, 0, final=False)
    snapshot = first.backend.snapshot()
    later = WindowOperator("w", key_of, TumblingEventTimeWindows.of(100), allowed_lateness=50,
                           contents=Aggregate(Count()))
    backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    for group, payload in snapshot.serialized():
        backend.restore_key_group(group, payload)
    later.setup(SubtaskInfo("w", 0, 1, 128, 0), backend)
    later.open()
    fired = [r for r in _records(later.process_watermark(MAX_WATERMARK))]
    expected = collections.Counter((k, ts // 100 * 100 + 99) for k, _, ts in events
                                   if ts // 100 * 100 + 99 > max(t for _, _, t in events) - 1)
    assert sorted((count, ts) for count, ts in fired) == sorted((c, end) for (_, end), c in expected.items())


def test_session_windows_with_a_trigger_that_cannot_merge_are_refused_at_declaration():
    from operators.window import Trigger, TriggerResult
    from runtime import StreamExecutionEnvironment
    from runtime.errors import ApiUsageError

    class FireOnEverything(Trigger):
        def on_element(self, element, timestamp, window, ctx):
            return TriggerResult.FIRE

    env = StreamExecutionEnvironment.get_execution_environment()
    sessions = env.from_collection([1]).key_by(lambda x: x).window(EventTimeSessionWindows.with_gap(10))
    with pytest.raises(ApiUsageError, match="cannot merge"):
        sessions.trigger(FireOnEverything()).reduce(lambda a, b: a)
