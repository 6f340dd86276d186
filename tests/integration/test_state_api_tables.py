"""State as data, the tables of their own: timers and window contents of a job stopped with a savepoint before any
of them fired, and state with a time-to-live of a job's final checkpoint (written by RocksDB), read back and
compared with the plain-Python reference. (The same readers over every window layout, merged sessions, count
windows, evictors and expired entries are tested without Spark: tests/unit/test_state_api_reader.py.)"""

import collections
import os
import time

import pytest

from operators import (
    DiscardingSink,
    KeyedProcessFunction,
    MapStateDescriptor,
    ProcessWindowFunction,
    SequenceSource,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
)
from runtime import StreamExecutionEnvironment, Time, WatermarkStrategy
from runtime.datastream.state import StateTtlConfig
from runtime.state_api import SavepointReader
from state_backends.rocksdb import EmbeddedRocksDBStateBackend
from tests.integration.paced import PacedSource
from tests.integration.waiting import wait_for

N, KEYS, SIZE = 3_000, 13, 1_000
FAR = 4_000_000_000_000  # processing time in 2096: these timers do not fire while the test runs


def event_time(n):
    return n * 7 % 20_000  # out of order; no watermark is emitted, so every window and event timer waits


def key_of(n):
    return n % KEYS


class Held(PacedSource):
    """The numbers, each subtask's reader holding its end (the job goes on running) and touching ``marks/s<i>``
    once every number it read is emitted: then a savepoint holds the state of every number."""

    def __init__(self, marks):
        super().__init__(SequenceSource(0, N - 1))
        self.marks = marks

    def create_reader(self, subtask_index, parallelism):
        reader = super().create_reader(subtask_index, parallelism)
        reader.end_when = Touch(os.path.join(self.marks, f"s{subtask_index}"))
        return reader


class Touch:
    def __init__(self, path):
        self.path = path

    def __call__(self):
        open(self.path, "a").close()
        return False


class Reminders(KeyedProcessFunction):
    """Per record an event-time timer a million ms after it, and one it deletes again; a processing-time timer at
    one of 11 times (the records of a key share them: registered many times, kept once)."""

    def process_element(self, n, ctx):
        timers = ctx.timer_service()
        timers.register_event_time_timer(ctx.timestamp() + 1_000_000)
        timers.register_event_time_timer(ctx.timestamp() + 2_000_000)
        timers.delete_event_time_timer(ctx.timestamp() + 2_000_000)
        timers.register_processing_time_timer(FAR + n % 11 * 1_000)
        return []

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), timestamp


class Listing(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield key, context.window().start, sorted(elements)


@pytest.fixture(scope="module")
def stopped(spark, tmp_path_factory):
    """A job with timers (uid ``remind``), a tumbling event-time reduce (``sums``, the aligned layout) and process
    window function (``lists``, the general one), stopped with a savepoint once it read every number."""
    tmp_path = tmp_path_factory.mktemp("stopped")
    os.makedirs(tmp_path / "marks")
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    env.set_parallelism(2).enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    strategy = WatermarkStrategy.no_watermarks().with_timestamp_assigner(lambda n, _: event_time(n))
    keyed = env.from_source(Held(str(tmp_path / "marks")), strategy, "numbers").uid("numbers").key_by(key_of)
    keyed.process(Reminders()).uid("remind").sink_to(DiscardingSink()).uid("fired")
    tumbling = TumblingEventTimeWindows.of(Time.milliseconds(SIZE))
    keyed.window(tumbling).reduce(lambda a, b: a + b).uid("sums").sink_to(DiscardingSink()).uid("summed")
    keyed.window(tumbling).process(Listing()).uid("lists").sink_to(DiscardingSink()).uid("listed")
    client = env.execute_async("state-tables")
    try:
        wait_for(lambda: len(os.listdir(tmp_path / "marks")) == 2, what="both readers to emit every number")
        savepoint = client.stop_with_savepoint(str(tmp_path / "savepoints"))
    finally:
        if not client.get_job_status().is_globally_terminal_state():
            client.cancel()
    return SavepointReader.read(savepoint)


def test_timers_of_a_savepoint_read_as_the_reference(stopped):
    by_uid = {op.uid: op for op in stopped.operators()}
    assert by_uid["remind"].has_timers and not by_uid["remind"].has_windows
    event = {(key_of(n), event_time(n) + 1_000_000, "event") for n in range(N)}
    processing = {(key_of(n), FAR + n % 11 * 1_000, "processing") for n in range(N)}
    table = stopped.timers("remind", key_groups=True)
    assert table.column_names == ["key_group", "key", "timestamp", "kind"]
    read = list(zip(table.column("key").to_pylist(), table.column("timestamp").to_pylist(),
                    table.column("kind").to_pylist()))
    assert sorted(read) == sorted(event | processing)
    order = list(zip(table.column("key_group").to_pylist(), table.column("timestamp").to_pylist()))
    assert order == sorted(order)


def test_window_contents_of_a_savepoint_read_as_the_reference_in_both_layouts(stopped):
    by_uid = {op.uid: op for op in stopped.operators()}
    assert by_uid["sums"].has_windows and by_uid["lists"].has_windows
    assert any(name.startswith("window/aligned/") for name in by_uid["sums"].keyed_states), "the aligned layout"
    assert "window/contents" in by_uid["lists"].keyed_states, "the general layout"
    panes = collections.defaultdict(list)
    for n in range(N):
        panes[(key_of(n), event_time(n) - event_time(n) % SIZE)].append(n)

    sums = stopped.window_contents("sums")
    assert sums.column_names == ["key", "window_start", "window_end", "value"]
    assert sorted(zip(*(sums.column(c).to_pylist() for c in sums.column_names))) == sorted(
        (key, start, start + SIZE, sum(ns)) for (key, start), ns in panes.items())
    lists = stopped.window_contents("lists")
    assert lists.column_names == ["key", "window_start", "window_end", "elements"]
    read = [(key, start, end, sorted(elements)) for key, start, end, elements in
            zip(*(lists.column(c).to_pylist() for c in lists.column_names))]  # arrival order: the sources race
    assert sorted(read) == sorted((key, start, start + SIZE, ns) for (key, start), ns in panes.items())


class Remembering(KeyedProcessFunction):
    """Each key's count (a value state) and its last number by parity (a map state), both with a time-to-live of
    an hour: nothing expires while the test runs."""

    def open(self, runtime_context):
        ttl = StateTtlConfig.new_builder(Time.hours(1)).build()
        count, by_parity = ValueStateDescriptor("count"), MapStateDescriptor("by_parity")
        count.enable_time_to_live(ttl)
        by_parity.enable_time_to_live(ttl)
        self.count = runtime_context.get_state(count)
        self.by_parity = runtime_context.get_map_state(by_parity)

    def process_element(self, n, ctx):
        self.count.update((self.count.value() or 0) + 1)
        parity = "odd" if n % 2 else "even"
        self.by_parity.put(parity, max(n, self.by_parity.get(parity) or 0))
        return []


def test_state_with_a_ttl_reads_unwrapped_with_last_access_times(env, tmp_path):
    env.set_parallelism(2).enable_checkpointing(100).set_state_backend(
        EmbeddedRocksDBStateBackend(True, db_storage_path=str(tmp_path / "rocksdb")))
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.from_sequence(0, N - 1).uid("numbers").key_by(key_of).process(Remembering()).uid("remember") \
        .sink_to(DiscardingSink()).uid("sink")
    before = time.time_ns() // 1_000_000
    env.execute("state-ttl-tables")
    after = time.time_ns() // 1_000_000
    reader = SavepointReader.read(str(tmp_path / "ck" / "state-ttl-tables"), "latest")

    count = reader.keyed_state("remember", "count")
    assert count.column_names == ["key", "value", "last_access_ms"]
    assert dict(zip(count.column("key").to_pylist(), count.column("value").to_pylist())) == dict(
        collections.Counter(key_of(n) for n in range(N)))
    assert all(before <= t <= after for t in count.column("last_access_ms").to_pylist()), "written by the job"
    by_parity = reader.keyed_state("remember", "by_parity").to_pylist()
    expected = collections.defaultdict(dict)
    for n in range(N):  # the numbers of a key arrive from both sources in any order: the largest is the same
        last = expected[key_of(n)]
        parity = "odd" if n % 2 else "even"
        last[parity] = max(n, last.get(parity, 0))
    assert {row["key"]: row["value"] for row in by_parity} == expected
    assert all(before <= t <= after for row in by_parity for t in row["last_access_ms"].values())
