"""Windows end to end against plain-Python references: every window kind at parallelism 1, 2 and 4; exactly
once after an exception and a SIGKILL and after a restore at another parallelism; late data.

Event time is ``event_time(n)`` of the sequence number ``n``: out of order, but within the watermark's bound,
so no record is late and every window's result is fixed however the records interleave.
"""

import collections
import os
import random

import pytest

from operators import (
    AggregateFunction,
    CollectSink,
    EventTimeSessionWindows,
    FileSource,
    ProcessAllWindowFunction,
    ProcessFunction,
    ProcessWindowFunction,
    SequenceSource,
    SlidingEventTimeWindows,
    Source,
    SourceReader,
    TimeEvictor,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowFunction,
)
from runtime import (
    Duration,
    JobFailedError,
    OutputTag,
    RestartStrategies,
    StreamExecutionEnvironment,
    Time,
    Types,
    WatermarkStrategy,
)
from state_backends.storage import CheckpointStorage
from tests.integration.chaos import ChaosMap, plan, remaining
from tests.integration.paced import PacedSource
from tests.integration.waiting import wait_for

KEYS = 7
SIZE, SLIDE, GAP = 1_000, 250, 40


def event_time(n: int) -> int:
    """Gaps of 0-90 ms between neighbours (sessions form and merge), out of order by up to 160 ms."""
    return n * 30 + (n % 4) * 15 - (n % 5) * 40 + (n // 50) * 200


def strategy():
    return (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(200))
            .with_timestamp_assigner(lambda n, _: event_time(n)))


def tumbling_reference(n):
    return collections.Counter((x % KEYS, event_time(x) // SIZE * SIZE) for x in range(n))


def sliding_reference(n):
    sums = collections.Counter()
    for x in range(n):
        ts = event_time(x)
        for start in range(ts - ts % SLIDE, ts - SIZE, -SLIDE):
            sums[(x % KEYS, start)] += x
    return sums


def session_reference(n):
    sessions = []
    for key in range(KEYS):
        times = sorted((event_time(x), x) for x in range(n) if x % KEYS == key)
        current = []
        for ts, x in times:
            if current and ts > current[-1][0] + GAP:
                sessions.append((key, current[0][0], current[-1][0] + GAP, len(current)))
                current = []
            current.append((ts, x))
        if current:
            sessions.append((key, current[0][0], current[-1][0] + GAP, len(current)))
    return sorted(sessions)


class Sum(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class WithWindowStart(WindowFunction):
    """The one pre-aggregated input (a sum, or a (key, count) pair) with its key and window start."""

    def apply(self, key, window, inputs):
        for total in inputs:
            yield key, window.start, total[1] if isinstance(total, tuple) else total


class SessionSize(ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield key, window.start, window.end, len(list(elements))


class CountAll(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield context.window().start, len(list(elements))


def windows_job(env, source):
    numbers = env.from_source(source, strategy(), "numbers").uid("numbers")
    keyed = numbers.key_by(lambda x: x % KEYS)
    sinks = {name: CollectSink(name) for name in ("tumbling", "sliding", "sessions", "all", "count", "processing",
                                                  "evicted")}
    (keyed.map(lambda x: (x % KEYS, 1)).key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(Time.seconds(1)))
     .reduce(lambda a, b: (a[0], a[1] + b[1]), window_function=WithWindowStart()).uid("tumbling")
     .sink_to(sinks["tumbling"]).uid("tumbling-sink"))
    (keyed.window(SlidingEventTimeWindows.of(Duration.of_millis(SIZE), Duration.of_millis(SLIDE)))
     .aggregate(Sum(), window_function=WithWindowStart()).uid("sliding").sink_to(sinks["sliding"]).uid("sliding-sink"))
    (keyed.window(EventTimeSessionWindows.with_gap(Duration.of_millis(GAP))).process(SessionSize()).uid("sessions")
     .sink_to(sinks["sessions"]).uid("sessions-sink"))
    (numbers.window_all(TumblingEventTimeWindows.of(SIZE)).process(CountAll()).uid("all")
     .sink_to(sinks["all"]).uid("all-sink"))
    keyed.count_window(5).reduce(lambda a, b: a + b).uid("count").sink_to(sinks["count"]).uid("count-sink")
    # an evictor keeps the pane's last 300 ms of event time; reduce then runs over what is left
    (keyed.window(TumblingEventTimeWindows.of(SIZE)).evictor(TimeEvictor.of(300))
     .reduce(lambda a, b: a + b, window_function=WithWindowStart()).uid("evicted")
     .sink_to(sinks["evicted"]).uid("evicted-sink"))
    (keyed.map(lambda x: (x % KEYS, 1)).key_by(lambda r: r[0]).window(TumblingProcessingTimeWindows.of(100))
     .reduce(lambda a, b: (a[0], a[1] + b[1])).uid("processing").sink_to(sinks["processing"]).uid("processing-sink"))
    return sinks


def check_windows(result, sinks, n):
    got = {name: result.collected(sink) for name, sink in sinks.items()}
    assert collections.Counter({(k, s): c for k, s, c in got["tumbling"]}) == tumbling_reference(n)
    assert len(got["tumbling"]) == len(tumbling_reference(n)), "a window fired twice"
    assert collections.Counter({(k, s): c for k, s, c in got["sliding"]}) == sliding_reference(n)
    assert sorted(got["sessions"]) == session_reference(n)
    assert sorted(got["all"]) == sorted(collections.Counter(event_time(x) // SIZE * SIZE for x in range(n)).items())
    panes = collections.defaultdict(list)
    for x in range(n):
        panes[(x % KEYS, event_time(x) // SIZE * SIZE)].append((event_time(x), x))
    kept = {pane: sum(x for ts, x in items if ts > max(items)[0] - 300) for pane, items in panes.items()}
    assert {(k, s): total for k, s, total in got["evicted"]} == kept
    per_key = collections.Counter(x % KEYS for x in range(n))
    # Count windows follow arrival order, which parallel sources do not fix: their number and totals are fixed.
    assert len(got["count"]) == sum(c // 5 for c in per_key.values())
    assert sum(got["count"]) <= sum(range(n))
    processed = collections.Counter()
    for key, count in got["processing"]:  # processing-time windows: any grouping, every record once
        processed[key] += count
    assert processed == per_key


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_every_window_kind_matches_the_reference(env, parallelism):
    n = 6_000
    env.set_parallelism(parallelism)
    env.get_config().set_auto_watermark_interval(10)
    sinks = windows_job(env, SequenceSource(0, n - 1))
    check_windows(env.execute(f"windows-p{parallelism}"), sinks, n)


def checkpointed_windows_job(env, tmp_path, parallelism, n, chaos=None, url=None, paced=True):
    """``paced``: the source emits a tenth of its input per checkpoint (a job that must still run after some
    checkpoints); a job restored to check its final output runs at full speed."""
    env.set_parallelism(parallelism).enable_checkpointing(100)
    env.get_config().set_auto_watermark_interval(10)
    env.get_checkpoint_config().set_checkpoint_storage(url or str(tmp_path / "checkpoints"))
    env.get_checkpoint_config().set_max_retained_checkpoints(1000)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    source = PacedSource(SequenceSource(0, n - 1), per_checkpoint=n // parallelism // 10,
                         together=str(tmp_path / "paced")) if paced else SequenceSource(0, n - 1)
    numbers = env.from_source(source, strategy(), "numbers").uid("numbers")
    if chaos is not None:
        numbers = numbers.map(chaos).uid("chaos")
    keyed = numbers.key_by(lambda x: x % KEYS)
    tumbling, sessions = CollectSink("tumbling"), CollectSink("sessions")
    (keyed.map(lambda x: (x % KEYS, 1)).key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(SIZE))
     .reduce(lambda a, b: (a[0], a[1] + b[1]), window_function=WithWindowStart()).uid("tumbling")
     .sink_to(tumbling).uid("tumbling-sink"))
    (keyed.window(EventTimeSessionWindows.with_gap(GAP)).process(SessionSize()).uid("sessions")
     .sink_to(sessions).uid("sessions-sink"))
    return tumbling, sessions


def check_exact(result, tumbling, sessions, n):
    assert sorted(result.collected(tumbling)) == sorted((k, s, c) for (k, s), c in tumbling_reference(n).items())
    assert sorted(result.collected(sessions)) == session_reference(n)


@pytest.mark.parametrize("how", ["exception", "kill"])
def test_windows_are_exactly_once_after_a_failure(env, tmp_path, how):
    n = 20_000
    faults = plan(str(tmp_path / "faults"), "fail")
    after = random.Random().randrange(n // 10, n // 3)
    tumbling, sessions = checkpointed_windows_job(env, tmp_path, 2, n, ChaosMap(faults, "fail", how, after))
    result = env.execute(f"windows-{how}")
    assert remaining(faults) == [] and result.restarts == 1 and result.restored_from[1] is not None
    check_exact(result, tumbling, sessions, n)


def test_window_state_moves_with_its_key_groups_when_restored_at_another_parallelism(spark, tmp_path):
    n = 20_000
    url = str(tmp_path / "ck")
    first = StreamExecutionEnvironment.get_execution_environment(spark)
    checkpointed_windows_job(first, tmp_path, 2, n, url=url)
    client = first.execute_async("windows-rescale")
    storage = CheckpointStorage("file://" + url, "windows-rescale")
    wait_for(lambda: len(storage.usable_ids()) >= 2, what="two completed checkpoints")
    client.cancel()
    checkpoint = storage.usable_ids()[-1]
    for parallelism in (3, 1):
        env = StreamExecutionEnvironment.get_execution_environment(spark)
        tumbling, sessions = checkpointed_windows_job(env, tmp_path / f"p{parallelism}", parallelism, n, url=url,
                                                      paced=False)
        result = env.execute("windows-rescale", restore_from=checkpoint)
        assert result.restored_from[0] is not None
        check_exact(result, tumbling, sessions, n)


class OnTimeThenLate(Source):
    """One subtask: ``first`` records, then holds until ``release`` exists, then ``then`` records."""

    parallel = False

    def __init__(self, first, then, release):
        self.first, self.then, self.release = first, then, release

    def create_reader(self, subtask_index, parallelism):
        return _TwoPhaseReader(self.first, self.then, self.release)


class _TwoPhaseReader(SourceReader):
    def __init__(self, first, then, release):
        self.first, self.then, self.release = first, then, release
        self.phase = 0

    def poll(self, max_records):
        import time

        if self.phase == 0:
            self.phase = 1
            return list(self.first)
        if self.phase == 1:
            if not os.path.exists(self.release):
                time.sleep(0.002)
                return []
            self.phase = 2
            return list(self.then)
        return None


class ReleaseOnFirstResult(WindowFunction):
    def __init__(self, release):
        self.release = release

    def apply(self, key, window, inputs):
        open(self.release, "a").close()
        yield key, window.start, sum(record[1] for record in inputs)


def test_late_records_fire_the_window_again_within_the_lateness_and_go_to_the_side_output_after_it(env, tmp_path):
    release = str(tmp_path / "release")
    # (key, value, event time): the first phase takes the watermark to 5000 - 1 (monotonous timestamps)
    first = [("a", 1, 100), ("a", 2, 900), ("b", 5, 1_500), ("a", 0, 5_000)]
    then = [("a", 10, 500),   # window [0, 1000): past the watermark, gone (cleanup at 999 + 3000 < 4999): late
            ("b", 20, 1_200),  # window [1000, 2000): cleanup at 1999 + 3000 = 4999 <= 4999: late too
            ("a", 30, 2_500)]  # window [2000, 3000): within the lateness: fires again at once
    late = OutputTag("late")
    env.set_parallelism(1)
    env.get_config().set_auto_watermark_interval(10)
    watermarks = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r[2])
    windows = (env.from_source(OnTimeThenLate(first, then, release), watermarks, "events")
               .key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(1_000)).allowed_lateness(3_000)
               .side_output_late_data(late)
               .apply(ReleaseOnFirstResult(release)))
    results, late_records = CollectSink("results"), CollectSink("late")
    windows.sink_to(results)
    windows.get_side_output(late).sink_to(late_records)
    result = env.execute("lateness")
    assert sorted(result.collected(results)) == [("a", 0, 3), ("a", 2_000, 30), ("a", 5_000, 0), ("b", 1_000, 5)]
    assert sorted(result.collected(late_records)) == [("a", 10, 500), ("b", 20, 1_200)]


def test_a_file_source_with_a_timestamp_field_feeds_event_time_windows(env, tmp_path):
    import json

    rows = [{"user": f"u{i % 3}", "ts": 1_700_000_000_000 + i * 137 % 5_000} for i in range(300)]
    folder = tmp_path / "events"
    folder.mkdir()
    for part in range(3):
        with open(folder / f"part-{part}.jsonl", "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows[part::3])
    env.set_parallelism(2)
    sink = CollectSink("per-user")
    # The files are read one after another: out of order by up to their whole span (5 s).
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))
    (env.from_source(FileSource(str(folder), timestamp_field="ts"), watermarks, "events")
     .map(lambda row: (row["user"], 1)).key_by(lambda pair: pair[0])
     .window(TumblingEventTimeWindows.of(1_000)).reduce(lambda a, b: (a[0], a[1] + b[1]),
                                                         window_function=WithWindowStart())
     .sink_to(sink))
    result = env.execute("file-event-time")
    expected = collections.Counter((row["user"], row["ts"] // 1_000 * 1_000) for row in rows)
    assert collections.Counter({(user, start): n for user, start, n in result.collected(sink)}) == expected


def test_a_window_function_emitting_records_unlike_its_output_type_fails_naming_the_window(env):
    env.set_parallelism(2).set_restart_strategy(RestartStrategies.no_restart())
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda n, _: n)
    (env.from_source(SequenceSource(0, 9_999), strategy, "numbers").key_by(lambda n: n % 10)
     .window(TumblingEventTimeWindows.of(100)).reduce(lambda a, b: a + b, window_function=WithWindowStart(),
                                                      output_type=Types.LONG())
     .rebalance().print())
    with pytest.raises(JobFailedError, match=r"Window\(TumblingEventTimeWindows.*declared output_type=LONG"):
        env.execute("wrong-output-type")


def test_a_columnar_stream_carries_event_time_and_watermarks_to_windows_after_to_rows(env):
    import pyarrow.compute as pc

    n = 50_000
    env.set_parallelism(2)
    env.get_config().set_auto_watermark_interval(10)
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(200)).with_timestamp_assigner("ts")
    sink = CollectSink("columnar-windows")
    (env.from_sequence(0, n - 1, columnar=True)
     .map_batches(lambda b: {"ts": pc.multiply(b["value"], 3), "key": pc.bit_wise_and(b["value"], 7)})
     .assign_timestamps_and_watermarks(watermarks)
     .map_batches(lambda b: {"key": b["key"], "ts": b["ts"]})   # the column survives the batch function
     .to_rows()
     .map(lambda row: (row[0], 1)).key_by(lambda pair: pair[0])
     .window(TumblingEventTimeWindows.of(1_000)).reduce(lambda a, b: (a[0], a[1] + b[1]),
                                                         window_function=WithWindowStart())
     .process(Watermarked()).sink_to(sink))
    out = env.execute("columnar-event-time").collected(sink)
    expected = collections.Counter((x & 7, x * 3 // 1_000 * 1_000) for x in range(n))
    assert collections.Counter({(k, s): c for (k, s, c), _ in out}) == expected
    assert any(watermark < (1 << 63) - 1 for _, watermark in out), "watermarks flowed before the end of input"


class Watermarked(ProcessFunction):
    """Each record with the watermark of the operator that sees it."""

    def process_element(self, value, ctx):
        yield value, ctx.timer_service().current_watermark()
