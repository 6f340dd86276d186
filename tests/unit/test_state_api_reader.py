"""SavepointReader's tables of timers, window contents and state with a time-to-live, without Spark: the operators a
job runs, driven by test harnesses at parallelism 2, their snapshots written as a savepoint, read back and compared
with the plain-Python reference."""

import collections
import pickle

import pytest

from operators import (
    AggregateFunction,
    CountEvictor,
    EventTimeSessionWindows,
    KeyedProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    ProcessWindowFunction,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    ValueStateDescriptor,
)
from operators.window.aligned import ALIGNED_WINDOW_STATE_PREFIX
from operators.window.operator import MERGING_WINDOWS_STATE, WINDOW_CONTENTS_STATE
from runtime import Time
from runtime.datastream.state import StateTtlConfig
from runtime.keys.key_groups import assign_to_key_group
from runtime.protocol.checkpoints import CompletedCheckpoint, OperatorState
from runtime.state_api import SavepointReader
from runtime.state_api.reader import _pickled_schema, _read_one_file
from state_backends.storage import SavepointStorage
from tests.unit.keyed_subtasks import KeyedSubtasks

MAX_PARALLELISM = 128


def read_back(tmp_path, subtasks: KeyedSubtasks) -> SavepointReader:
    """Each subtask's snapshot written as a state file of a savepoint (as a stop-with-savepoint writes them), then
    opened by the reader."""
    snapshots = [harness.snapshot(checkpoint_id=1) for harness in subtasks.harnesses]
    storage = SavepointStorage(str(tmp_path / "savepoint"))
    first = snapshots[0]
    handles = tuple(storage.write_state_file(first.checkpoint_id, s.uid, s.subtask_index, s.rows)
                    for s in snapshots if s.rows)
    storage.write_metadata(CompletedCheckpoint(first.checkpoint_id, "harness", 0, 0, first.parallelism,
                                               first.max_parallelism, (OperatorState(first.uid, first.operator_name,
                                                                                     first.parallelism, handles),),
                                               savepoint=True))
    return SavepointReader.read(storage.url)


def rows(table, *columns):
    return sorted(zip(*(table.column(name).to_pylist() for name in columns)))


def assert_ordered(table, *within):
    """Rows ordered by key group (each key's own), then by the columns ``within``."""
    groups = table.column("key_group").to_pylist()
    assert groups == [assign_to_key_group(key, MAX_PARALLELISM) for key in table.column("key").to_pylist()]
    order = list(zip(groups, *(table.column(name).to_pylist() for name in within)))
    assert order == sorted(order)


# -- timers ------------------------------------------------------------------------------------------------

N, KEYS = 400, 5


def stamped(n):
    return n * 10


class Reminders(KeyedProcessFunction):
    """An event-time timer per record at the next full 100 ms plus a second (records of a key 50 ms apart share
    it: registered twice, kept once), deleted again by every third record; a processing-time timer at one of seven
    times."""

    def process_element(self, n, ctx):
        timers = ctx.timer_service()
        at = event_timer(n)
        timers.register_event_time_timer(at)
        if n % 3 == 0:
            timers.delete_event_time_timer(at)
        timers.register_processing_time_timer(processing_timer(n))
        return []

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), timestamp


def event_timer(n):
    return stamped(n) - stamped(n) % 100 + 1000


def processing_timer(n):
    return 10_000 + (n % 7) * 100


WATERMARK, NOW = 2_500, 10_250


def timers_reference():
    event, processing = collections.defaultdict(set), collections.defaultdict(set)
    for n in range(N):
        key = f"k{n % KEYS}"
        event[key].add(event_timer(n))
        if n % 3 == 0:
            event[key].discard(event_timer(n))
        processing[key].add(processing_timer(n))
    pending = [(key, t, "event") for key, times in event.items() for t in times if t > WATERMARK]
    pending += [(key, t, "processing") for key, times in processing.items() for t in times if t > NOW]
    return sorted(pending)


def test_timers_not_fired_yet_read_as_a_table_ordered_by_key_group_then_time(tmp_path):
    subtasks = KeyedSubtasks(lambda ds: ds.key_by(lambda n: f"k{n % KEYS}").process(Reminders()).uid("remind"),
                             lambda n: f"k{n % KEYS}", parallelism=2)
    subtasks.open()
    subtasks.process_elements(list(range(N)), [stamped(n) for n in range(N)])
    subtasks.process_watermark(WATERMARK)  # fires the event timers up to it, and
    subtasks.set_processing_time(NOW)  # the processing-time ones up to now
    assert subtasks.output(), "some timers fired before the snapshot"
    reader = read_back(tmp_path, subtasks)
    (info,) = reader.operators()
    assert (info.has_timers, info.has_windows) == (True, False)
    assert info.keyed_states == ("__timers__/event", "__timers__/processing"), "still listed as the states they are"
    table = reader.timers("remind", key_groups=True)
    assert table.column_names == ["key_group", "key", "timestamp", "kind"]
    assert rows(table, "key", "timestamp", "kind") == timers_reference()
    assert_ordered(table, "timestamp")
    assert reader.timers("remind").column_names == ["key", "timestamp", "kind"]


class Counter(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, n, ctx):
        self.count.update((self.count.value() or 0) + 1)
        return []


def test_an_operator_without_timers_or_windows_reads_empty_tables(tmp_path):
    subtasks = KeyedSubtasks(lambda ds: ds.key_by(lambda n: n % KEYS).process(Counter()).uid("count"),
                             lambda n: n % KEYS, parallelism=2)
    subtasks.open()
    subtasks.process_elements(list(range(50)))
    reader = read_back(tmp_path, subtasks)
    (info,) = reader.operators()
    assert (info.has_timers, info.has_windows) == (False, False)
    assert reader.timers("count").num_rows == 0 and reader.timers("count").column_names == ["key", "timestamp",
                                                                                              "kind"]
    assert reader.window_contents("count").num_rows == 0
    assert rows(reader.keyed_state("count", "count"), "key", "value") == [(k, 10) for k in range(KEYS)]


# -- window contents -----------------------------------------------------------------------------------------

WN, WKEYS, SIZE = 300, 3, 100
FIRED_UP_TO = 499  # the watermark: windows ending at or before 500 fired; [500, 600) ... [900, 1000) hold contents


def event_time(n):
    return n * 37 % 1000  # out of order; a record is never behind the watermark when it is fed


def window_key(n):
    return n % WKEYS


def windowed(build):
    """The window operator ``build`` declares on ``key_by(n % 3)``, fed every number, its early windows fired."""
    subtasks = KeyedSubtasks(lambda ds: build(ds.key_by(window_key)), window_key, parallelism=2)
    subtasks.open()
    subtasks.process_elements(list(range(WN)), [event_time(n) for n in range(WN)])
    subtasks.process_watermark(FIRED_UP_TO)
    assert subtasks.output(), "the early windows fired"
    return subtasks


def panes_reference(lateness=0):
    """``{(key, window start): the pane's numbers, in their order}`` of the windows not cleared yet: those that have
    not fired, and with allowed lateness those that fired less than ``lateness`` ago (they are kept for late
    records)."""
    panes = collections.defaultdict(list)
    for n in range(WN):
        start = event_time(n) - event_time(n) % SIZE
        if start + SIZE - 1 + lateness > FIRED_UP_TO:
            panes[(window_key(n), start)].append(n)
    return panes


class Listing(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield key, context.window().start, list(elements)


class SumAndCount(AggregateFunction):
    def create_accumulator(self):
        return {"sum": 0, "count": 0}

    def add(self, value, accumulator):
        return {"sum": accumulator["sum"] + value, "count": accumulator["count"] + 1}

    def get_result(self, accumulator):
        return accumulator["sum"] / accumulator["count"]

    def merge(self, a, b):
        return {"sum": a["sum"] + b["sum"], "count": a["count"] + b["count"]}


def tumbling(stream):
    return stream.window(TumblingEventTimeWindows.of(Time.milliseconds(SIZE)))


@pytest.mark.parametrize("layout", ["aligned", "general"])
def test_a_reduce_windows_panes_read_as_values_in_either_layout(tmp_path, layout):
    lateness = 50 if layout == "general" else 0  # allowed lateness: the operator keeps panes in the general layout

    def build(keyed):
        return tumbling(keyed).allowed_lateness(lateness).reduce(lambda a, b: a + b).uid("sums")

    reader = read_back(tmp_path, windowed(build))
    (info,) = reader.operators()
    assert info.has_windows and info.has_timers == (layout == "general"), "aligned windows need no timers"
    assert any(name.startswith("window/aligned/") for name in info.keyed_states) == (layout == "aligned")
    table = reader.window_contents("sums", key_groups=True)
    assert table.column_names == ["key_group", "key", "window_start", "window_end", "value"]
    expected = sorted((key, start, start + SIZE, sum(ns)) for (key, start), ns in panes_reference(lateness).items())
    assert rows(table, "key", "window_start", "window_end", "value") == expected
    assert_ordered(table, "window_start", "window_end")
    if layout == "general":  # each window's timers: the trigger's at its end, the cleanup after the lateness
        timers = reader.timers("sums")
        assert timers.column_names == ["key", "timestamp", "kind", "window_start", "window_end"]
        assert rows(timers, "key", "window_start", "timestamp", "kind") == sorted(
            (key, start, start + SIZE - 1 + after, "event") for key, start, *_ in expected for after in (0, lateness)
            if start + SIZE - 1 + after > FIRED_UP_TO)
        assert any(start + SIZE - 1 <= FIRED_UP_TO for _, start, *_ in expected), "a fired window kept for lateness"


def test_a_process_window_functions_panes_read_as_their_elements_in_order(tmp_path):
    reader = read_back(tmp_path, windowed(lambda keyed: tumbling(keyed).process(Listing()).uid("lists")))
    table = reader.window_contents("lists")
    assert table.column_names == ["key", "window_start", "window_end", "elements"]
    expected = sorted((key, start, start + SIZE, ns) for (key, start), ns in panes_reference().items())
    assert rows(table, "key", "window_start", "window_end", "elements") == expected


def test_an_aggregate_windows_panes_read_as_its_accumulators(tmp_path):
    reader = read_back(tmp_path, windowed(lambda keyed: tumbling(keyed).aggregate(SumAndCount()).uid("means")))
    table = reader.window_contents("means")
    expected = sorted((key, start, {"sum": sum(ns), "count": len(ns)}) for (key, start), ns in
                      panes_reference().items())
    assert sorted(zip(table.column("key").to_pylist(), table.column("window_start").to_pylist(),
                      table.column("value").to_pylist()), key=lambda row: row[:2]) == expected


def test_an_evictors_panes_read_as_elements_with_their_timestamps(tmp_path):
    reader = read_back(tmp_path, windowed(lambda keyed: tumbling(keyed).evictor(CountEvictor.of(2))
                                          .process(Listing()).uid("evicting")))
    table = reader.window_contents("evicting")
    assert table.column_names == ["key", "window_start", "window_end", "elements", "element_timestamps"]
    expected = sorted((key, start, ns, [event_time(n) for n in ns]) for (key, start), ns in
                      panes_reference().items())
    assert rows(table, "key", "window_start", "elements", "element_timestamps") == expected


def test_session_windows_read_as_the_merged_windows(tmp_path):
    """Sessions of gap 20 of numbers keyed by their thousands: key 1's records at 25, 0 and 10 (in that order) merge
    into one session [0, 45), whose pane is stored under a window it merged from; key 2's at 100 and 200 are two
    sessions."""
    records, timestamps = [1001, 2002, 1003, 2004, 1005], [25, 100, 0, 200, 10]
    subtasks = KeyedSubtasks(lambda ds: ds.key_by(lambda n: n // 1000).window(EventTimeSessionWindows.with_gap(
        Time.milliseconds(20))).reduce(lambda a, b: a + b).uid("sessions"), lambda n: n // 1000, parallelism=2)
    subtasks.open()
    subtasks.process_elements(records, timestamps)
    reader = read_back(tmp_path, subtasks)
    assert "window/merging-windows" in reader.operators()[0].keyed_states
    table = reader.window_contents("sessions")
    assert rows(table, "key", "window_start", "window_end", "value") == [(1, 0, 45, 3009), (2, 100, 120, 2002),
                                                                         (2, 200, 220, 2004)]


def test_processing_time_windows_read_with_their_processing_time_timers(tmp_path):
    subtasks = KeyedSubtasks(lambda ds: ds.key_by(window_key).window(TumblingProcessingTimeWindows.of(
        Time.milliseconds(SIZE))).reduce(lambda a, b: a + b).uid("by-clock"), window_key, parallelism=2)
    subtasks.open()
    for now in (30, 130, 250):  # [0, 100) fires at 99; [100, 200) at 199; [200, 300) holds 250's
        subtasks.set_processing_time(now)
        subtasks.process_elements([now + k for k in range(WKEYS)])
    assert sorted(subtasks.output()) == [30, 31, 32, 130, 131, 132]
    reader = read_back(tmp_path, subtasks)
    (info,) = reader.operators()
    assert (info.has_timers, info.has_windows) == (True, True)
    assert rows(reader.window_contents("by-clock"), "key", "window_start", "window_end", "value") == sorted(
        (window_key(n), 200, 300, n) for n in range(250, 250 + WKEYS))
    assert rows(reader.timers("by-clock"), "key", "timestamp", "kind", "window_start") == [
        (k, 299, "processing", 200) for k in range(WKEYS)]


def test_count_windows_read_as_the_global_window_of_each_key(tmp_path):
    subtasks = KeyedSubtasks(lambda ds: ds.key_by(lambda n: n % 2).count_window(3).reduce(lambda a, b: a + b)
                             .uid("threes"), lambda n: n % 2, parallelism=2)
    subtasks.open()
    subtasks.process_elements(list(range(10)))  # 0 2 4 and 1 3 5 fired; 6 8 and 7 9 are counted so far
    assert sorted(subtasks.output()) == [6, 9]
    table = read_back(tmp_path, subtasks).window_contents("threes")
    assert table.column_names == ["key", "window", "value"]
    assert rows(table, "key", "window", "value") == [(0, "global", 14), (1, "global", 16)]


# -- state with a time-to-live -------------------------------------------------------------------------------

TTL_MS = 1_000


class Remembering(KeyedProcessFunction):
    """The last value (value state), the values seen (list state) and the last value by parity (map state), each
    with a time-to-live of a second, and a count without one."""

    def open(self, runtime_context):
        ttl = StateTtlConfig.new_builder(Time.milliseconds(TTL_MS)).build()
        last, seen, by_parity = (ValueStateDescriptor("last"), ListStateDescriptor("seen"),
                                 MapStateDescriptor("by_parity"))
        for descriptor in (last, seen, by_parity):
            descriptor.enable_time_to_live(ttl)
        self.last = runtime_context.get_state(last)
        self.seen = runtime_context.get_list_state(seen)
        self.by_parity = runtime_context.get_map_state(by_parity)
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, record, ctx):
        _, value = record
        self.last.update(value)
        self.seen.add(value)
        self.by_parity.put("odd" if value % 2 else "even", value)
        self.count.update((self.count.value() or 0) + 1)
        return []


# (processing time, records): the snapshot is taken at 1_700, so what was last written at or before 700 expired
TTL_FEED = [(100, [("a", 1), ("b", 2)]), (600, [("a", 4)]), (800, [("a", 5), ("c", 7)]), (1_700, [("c", 8)])]
SNAPSHOT_AT = 1_700


def ttl_reference():
    """``{state: {key: (value, last access)}}`` of the entries live at the snapshot, as a job would keep them."""
    last, seen, by_parity, count = {}, collections.defaultdict(list), collections.defaultdict(dict), collections.Counter()
    for now, records in TTL_FEED:
        for key, value in records:
            last[key] = (value, now)
            seen[key].append((value, now))
            by_parity[key]["odd" if value % 2 else "even"] = (value, now)
            count[key] += 1

    def live(at):
        return at + TTL_MS > SNAPSHOT_AT

    expected = {"last": {k: v for k, v in last.items() if live(v[1])}, "count": dict(count)}
    lists = {k: [e for e in v if live(e[1])] for k, v in seen.items()}
    expected["seen"] = {k: ([e for e, _ in v], [t for _, t in v]) for k, v in lists.items() if v}
    maps = {k: {p: e for p, e in v.items() if live(e[1])} for k, v in by_parity.items()}
    expected["by_parity"] = {k: ({p: e for p, (e, _) in v.items()}, {p: t for p, (_, t) in v.items()})
                             for k, v in maps.items() if v}
    return expected


def remembered(tmp_path) -> SavepointReader:
    """``Remembering`` at parallelism 2 after ``TTL_FEED``, its snapshot read back."""
    subtasks = KeyedSubtasks(lambda ds: ds.key_by(lambda r: r[0]).process(Remembering()).uid("remember"),
                             lambda r: r[0], parallelism=2)
    subtasks.open()
    for now, records in TTL_FEED:
        subtasks.set_processing_time(now)
        subtasks.process_elements(records)
    return read_back(tmp_path, subtasks)


def test_state_with_a_ttl_reads_unwrapped_with_each_entrys_last_access_time(tmp_path):
    reader = remembered(tmp_path)
    expected = ttl_reference()
    assert expected["last"] == {"a": (5, 800), "c": (8, 1_700)}, "b's expired before the snapshot"

    last = reader.keyed_state("remember", "last", key_groups=True)
    assert last.column_names == ["key_group", "key", "value", "last_access_ms"]
    assert {k: (v, t) for k, v, t in rows(last, "key", "value", "last_access_ms")} == expected["last"]
    seen = reader.keyed_state("remember", "seen")
    assert {k: (v, t) for k, v, t in rows(seen, "key", "value", "last_access_ms")} == expected["seen"]
    by_parity = reader.keyed_state("remember", "by_parity")
    read = {row["key"]: row for row in by_parity.to_pylist()}
    assert {k: ({p: v for p, v in row["value"].items() if v is not None},
                {p: t for p, t in row["last_access_ms"].items() if t is not None})
            for k, row in read.items()} == expected["by_parity"]
    count = reader.keyed_state("remember", "count")
    assert count.column_names == ["key", "value"], "a state without a TTL reads as before"
    assert dict(rows(count, "key", "value")) == expected["count"]


def frame_rows(reader: SavepointReader, name: str, pickled: bool = False) -> list[tuple]:
    """``keyed_state_frame``'s rows of ``name``, read file by file as its executors read them, without Spark."""
    return [row for task in reader._frame_tasks("remember", name, pickled) for row in _read_one_file(task)]


def test_the_frames_rows_of_a_state_with_a_ttl_are_keyed_states_rows_pickled_or_not(tmp_path):
    """keyed_state_frame (its executors' part) gives keyed_state's columns: a value without its times and its
    last_access_ms; pickled, the key and the value as bytes, and a map state's times too (keyed by its keys)."""
    reader = remembered(tmp_path)
    expected = ttl_reference()
    assert len(reader._frame_tasks("remember", "last", False)) == 2, "a file per subtask"
    times_type = {"last": "bigint", "seen": "array<bigint>", "by_parity": "binary"}
    for name in ("last", "seen", "by_parity"):
        assert {k: (v, t) for k, v, t in frame_rows(reader, name)} == expected[name], name
        pickled = frame_rows(reader, name, pickled=True)
        unpickle_times = pickle.loads if name == "by_parity" else (lambda t: t)
        assert {pickle.loads(k): (pickle.loads(v), unpickle_times(t)) for k, v, t in pickled} == expected[name], name
        schema = _pickled_schema(pickled[0])
        assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == [
            ("key", "binary"), ("value", "binary"), ("last_access_ms", times_type[name])]
    assert dict(frame_rows(reader, "count")) == expected["count"], "a state without a TTL reads as before"
    pickled = frame_rows(reader, "count", pickled=True)
    assert {pickle.loads(k): pickle.loads(v) for k, v in pickled} == expected["count"]
    assert _pickled_schema(pickled[0]).fieldNames() == ["key", "value"]


def test_the_window_operators_state_names_are_the_savepoint_formats():
    """The names a savepoint holds panes under (docs/savepoint-format.md): renaming one would leave the panes of
    every savepoint taken before unread."""
    assert (WINDOW_CONTENTS_STATE, MERGING_WINDOWS_STATE, ALIGNED_WINDOW_STATE_PREFIX) == (
        "window/contents", "window/merging-windows", "window/aligned/")
