"""Windows end to end against plain-Python references: every window kind at parallelism 4; exactly once after an
exception and a SIGKILL and after a restore at another parallelism; event time from a file source's field and
from a columnar stream; a window's output checked against its declared type.

The job and the references are in tests/integration/window_jobs.py; the same window operators, driven by test
harnesses without Spark, are checked against the same references in tests/unit/test_window_semantics.py (every
kind at parallelism 1 and 2, and late data).
"""

import collections
import random

import pytest

from operators import (
    CollectSink,
    EventTimeSessionWindows,
    FileSource,
    ProcessFunction,
    SequenceSource,
    TumblingEventTimeWindows,
)
from runtime import Duration, JobFailedError, RestartStrategies, StreamExecutionEnvironment, Types, WatermarkStrategy
from state_backends.storage import CheckpointStorage
from tests.integration.chaos import ChaosMap, plan, remaining
from tests.integration.paced import PacedSource
from tests.integration.waiting import wait_for
from tests.integration.window_jobs import (
    GAP,
    KEYS,
    SIZE,
    SessionSize,
    WithWindowStart,
    check_windows,
    session_reference,
    strategy,
    tumbling_reference,
    windows_job,
)


def test_every_window_kind_matches_the_reference_at_parallelism_4(env):
    # Each keyed window fed by four channels and its watermark the least of theirs, window_all by four: the job's
    # wiring of every kind. What each window emits is also tested without Spark, at parallelism 1 and 2
    # (tests/unit/test_window_semantics.py).
    n = 6_000
    env.set_parallelism(4)
    env.get_config().set_auto_watermark_interval(10)
    sinks = windows_job(env, SequenceSource(0, n - 1))
    result = env.execute("windows-p4")
    check_windows({name: result.collected(sink) for name, sink in sinks.items()}, n)


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
