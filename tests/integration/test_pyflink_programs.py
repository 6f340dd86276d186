"""PyFlink programs as its documentation writes them, with ``pyflink`` replaced by ``runtime`` in the imports and
nothing else (the porting promise), each checking its output. They follow the Python examples of PyFlink's
DataStream pages: operators, state, process function, windows, joins, side outputs, checkpointing, execution
mode, connectors and configuration.

Each program gets the test session's SparkSession through ``get_execution_environment()`` (the active one)."""

import collections
import os

from runtime.common import Configuration, Duration, Row, Types, WatermarkStrategy
from runtime.common.serialization import Encoder
from runtime.common.time import Time
from runtime.common.watermark_strategy import TimestampAssigner
from runtime.datastream import (
    CheckpointingMode,
    ExternalizedCheckpointCleanup,
    OutputTag,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
)
from runtime.datastream.connectors.file_system import (
    FileSink,
    FileSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)
from runtime.datastream.connectors.number_seq import NumberSequenceSource
from runtime.datastream.functions import (
    AggregateFunction,
    BroadcastProcessFunction,
    CoMapFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
    ProcessJoinFunction,
    ProcessWindowFunction,
    RuntimeContext,
    WindowFunction,
)
from runtime.datastream.state import MapStateDescriptor, StateTtlConfig, ValueStateDescriptor
from runtime.datastream.window import (
    CountTumblingWindowAssigner,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)


def collect(ds) -> list:
    with ds.execute_and_collect() as results:
        return list(results)


class FirstElementTimestamp(TimestampAssigner):
    """The docs' assigner: a record's timestamp is its first field."""

    def extract_timestamp(self, value, record_timestamp) -> int:
        return value[0]


def event_time(ds, out_of_orderness_ms=0):
    # Watermarks only at the end of the (bounded) input: with none in between, no record is late however the
    # machine schedules the job, so each program has one right output.
    ds.get_execution_environment().get_config().set_auto_watermark_interval(0)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(out_of_orderness_ms)) \
        .with_timestamp_assigner(FirstElementTimestamp())
    return ds.assign_timestamps_and_watermarks(strategy)


# -- operators ----------------------------------------------------------------------------------------------

def test_operators_map(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    data_stream = env.from_collection(collection=[1, 2, 3, 4, 5])
    assert sorted(collect(data_stream.map(lambda x: 2 * x, output_type=Types.INT()))) == [2, 4, 6, 8, 10]


def test_operators_flat_map_and_filter(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    data_stream = env.from_collection(collection=['hello apache flink', 'streaming compute'])
    words = data_stream.flat_map(lambda x: x.split(' '), output_type=Types.STRING())
    assert sorted(collect(words.filter(lambda w: w != 'compute'))) == ['apache', 'flink', 'hello', 'streaming']


def test_operators_key_by_and_reduce(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    data_stream = env.from_collection(collection=[(1, 'a'), (2, 'a'), (3, 'a'), (4, 'b')],
                                      type_info=Types.TUPLE([Types.INT(), Types.STRING()]))
    totals = data_stream.key_by(lambda x: x[1], key_type=Types.STRING()) \
        .reduce(lambda a, b: (a[0] + b[0], b[1]))
    assert sorted(collect(totals)) == [(1, 'a'), (3, 'a'), (4, 'b'), (6, 'a')]


def test_operators_union_and_connect(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    stream_1 = env.from_collection([1, 2])
    stream_2 = env.from_collection([3])
    assert sorted(collect(stream_1.union(stream_2))) == [1, 2, 3]

    class MyCoMapFunction(CoMapFunction):
        def map1(self, value):
            return value[0] + 1, value[1]

        def map2(self, value):
            return value[0], value[1] + 'flink'

    env = StreamExecutionEnvironment.get_execution_environment()
    stream_1 = env.from_collection([(1, 'a')])
    stream_2 = env.from_collection([(2, 'b')])
    connected = stream_1.connect(stream_2)
    assert sorted(collect(connected.map(MyCoMapFunction()))) == [(2, 'a'), (2, 'bflink')]


def test_operators_physical_partitioning(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    data_stream = env.from_collection([(2, 'a'), (2, 'a'), (3, 'b')])
    out = data_stream.shuffle().rebalance().rescale() \
        .partition_custom(lambda key, num_partitions: key % num_partitions, lambda x: x[0]) \
        .map(lambda x: x).broadcast().map(lambda x: x)
    assert sorted(collect(out)) == sorted([(2, 'a'), (2, 'a'), (3, 'b')] * 2)  # broadcast: to both subtasks


def test_operators_chaining_and_resource_groups(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([1, 2, 3])
    out = ds.map(lambda x: x + 1).start_new_chain().map(lambda x: x * 2).disable_chaining() \
        .map(lambda x: x - 1).slot_sharing_group("slot_group_1").name("minus one").set_description("the last map")
    assert sorted(collect(out)) == [3, 5, 7]


# -- state --------------------------------------------------------------------------------------------------

class CountWindowAverage(FlatMapFunction):
    """The docs' ValueState example: every 2 records of a key, their average."""

    def __init__(self):
        self.sum = None

    def open(self, runtime_context: RuntimeContext):
        descriptor = ValueStateDescriptor(
            "average",  # the state name
            Types.PICKLED_BYTE_ARRAY()  # type information
        )
        self.sum = runtime_context.get_state(descriptor)

    def flat_map(self, value):
        # access the state value
        current_sum = self.sum.value()
        if current_sum is None:
            current_sum = (0, 0)
        # update the count
        current_sum = (current_sum[0] + 1, current_sum[1] + value[1])
        # if the count reaches 2, emit the average and clear the state
        if current_sum[0] >= 2:
            self.sum.clear()
            yield value[0], int(current_sum[1] / current_sum[0])
        else:
            # update the state
            self.sum.update(current_sum)


def test_state_value_state_count_window_average(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([(1, 3), (1, 5), (1, 7), (1, 4), (1, 2)]) \
        .key_by(lambda row: row[0]) \
        .flat_map(CountWindowAverage())
    assert collect(ds) == [(1, 4), (1, 5)]


def test_state_time_to_live_configuration(spark):
    ttl_config = StateTtlConfig \
        .new_builder(Time.seconds(1)) \
        .set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite) \
        .set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired) \
        .cleanup_full_snapshot() \
        .build()
    state_descriptor = ValueStateDescriptor("text state", Types.STRING())
    state_descriptor.enable_time_to_live(ttl_config)

    class Latest(MapFunction):
        def open(self, runtime_context):
            self.state = runtime_context.get_state(state_descriptor)

        def map(self, value):
            before = self.state.value()
            self.state.update(value[1])
            return value[0], before

    env = StreamExecutionEnvironment.get_execution_environment()
    out = env.from_collection([("k", "a"), ("k", "b")]).key_by(lambda x: x[0]).map(Latest())
    assert collect(out) == [("k", None), ("k", "a")]  # well within its second of life


def test_state_broadcast_state_pattern(spark):
    rule_state_descriptor = MapStateDescriptor("RulesBroadcastState", Types.STRING(), Types.INT())

    class ApplyRules(BroadcastProcessFunction):
        def process_element(self, value, ctx):
            limit = ctx.get_broadcast_state(rule_state_descriptor).get("limit")
            yield value, limit is not None and value > limit

        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(rule_state_descriptor).put(value[0], value[1])

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)  # the broadcast side first: the rule is known to all
    rule_broadcast_stream = env.from_collection([("limit", 3)]).broadcast(rule_state_descriptor)
    output = env.from_collection([1, 5]).connect(rule_broadcast_stream).process(ApplyRules())
    assert sorted(collect(output)) == [(1, False), (5, True)]


# -- process function ---------------------------------------------------------------------------------------

class CountWithTimeoutFunction(KeyedProcessFunction):
    """The docs' example: a key's count, emitted when the key saw no update for 60 s of event time."""

    def __init__(self):
        self.state = None

    def open(self, runtime_context: RuntimeContext):
        self.state = runtime_context.get_state(ValueStateDescriptor(
            "my_state", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx: 'KeyedProcessFunction.Context'):
        # retrieve the current count
        current = self.state.value()
        if current is None:
            current = Row(value[1], 0, 0)
        # update the state's count
        current[1] += 1
        # set the state's timestamp to the record's assigned event time timestamp
        current[2] = ctx.timestamp()
        # write the state back
        self.state.update(current)
        # schedule the next timer 60 seconds from the current event time
        ctx.timer_service().register_event_time_timer(current[2] + 60000)

    def on_timer(self, timestamp: int, ctx: 'KeyedProcessFunction.OnTimerContext'):
        # get the state for the key that scheduled the timer
        result = self.state.value()
        # check if this is an outdated timer or the latest timer
        if timestamp == result[2] + 60000:
            # emit the state on timeout
            yield result[0], result[1]


def test_process_function_count_with_timeout(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    data = [(1000, "a"), (2000, "b"), (30000, "a"), (100000, "a"), (200000, "b")]
    result = event_time(env.from_collection(data)).key_by(lambda value: value[1]) \
        .process(CountWithTimeoutFunction())
    # the watermark passes each key's last update + 60 s only at the end: one count per key
    assert sorted(collect(result)) == [("a", 3), ("b", 2)]


# -- windows ------------------------------------------------------------------------------------------------

class SumWindowFunction(WindowFunction):
    def apply(self, key, window, inputs):
        return [(key, window.start, sum(x[2] for x in inputs))]


def test_windows_tumbling_event_time_window_function(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    data = [(1, 'a', 1), (2, 'a', 2), (6, 'a', 3), (3, 'b', 4), (11, 'b', 5)]
    ds = event_time(env.from_collection(data, type_info=Types.TUPLE([Types.LONG(), Types.STRING(), Types.INT()])))
    windowed = ds.key_by(lambda x: x[1], key_type=Types.STRING()) \
        .window(TumblingEventTimeWindows.of(Time.milliseconds(5))) \
        .apply(SumWindowFunction(), Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()]))
    assert sorted(collect(windowed)) == [('a', 0, 3), ('a', 5, 3), ('b', 0, 4), ('b', 10, 5)]


class CountWindowProcessFunction(ProcessWindowFunction):
    def process(self, key, context: 'ProcessWindowFunction.Context', elements):
        return [(key, context.window().start, context.window().end, len([e for e in elements]))]


def test_windows_sliding_windows_with_a_process_window_function(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = event_time(env.from_collection([(1, 'a'), (3, 'a'), (7, 'a')]))
    counts = ds.key_by(lambda x: x[1]).window(SlidingEventTimeWindows.of(Time.milliseconds(4),
                                                                          Time.milliseconds(2))) \
        .process(CountWindowProcessFunction())
    assert sorted(collect(counts)) == [('a', -2, 2, 1), ('a', 0, 4, 2), ('a', 2, 6, 1), ('a', 4, 8, 1),
                                       ('a', 6, 10, 1)]


class AverageAggregate(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, accumulator):
        return accumulator[0] + value[1], accumulator[1] + 1

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


def test_windows_session_windows_with_an_aggregate_function(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = event_time(env.from_collection([(1, 10), (2, 20), (50, 30), (52, 50)]))
    averages = ds.key_by(lambda x: "all").window(EventTimeSessionWindows.with_gap(Time.milliseconds(10))) \
        .aggregate(AverageAggregate())
    assert sorted(collect(averages)) == [15.0, 40.0]


def test_windows_count_window_with_reduce(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([('a', 1), ('a', 2), ('a', 3), ('b', 4), ('a', 5)])
    sums = ds.key_by(lambda x: x[0]).window(CountTumblingWindowAssigner.of(2)) \
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    assert sorted(collect(sums)) == [('a', 3), ('a', 8)]


# -- joins --------------------------------------------------------------------------------------------------

def test_joins_tumbling_window_join(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    orange = event_time(env.from_collection([(0, 'o0'), (1, 'o1'), (6, 'o6')]))
    green = event_time(env.from_collection([(0, 'g0'), (4, 'g4'), (7, 'g7')]))
    joined = orange.join(green).where(lambda x: 1).equal_to(lambda x: 1) \
        .window(TumblingEventTimeWindows.of(Time.milliseconds(5))) \
        .apply(lambda first, second: first[1] + "," + second[1])
    assert sorted(collect(joined)) == ['o0,g0', 'o0,g4', 'o1,g0', 'o1,g4', 'o6,g7']


class PairUp(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield left[1] + "," + right[1]


def test_joins_interval_join(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    orange = event_time(env.from_collection([(0, 'o0'), (2, 'o2'), (3, 'o3'), (4, 'o4'), (5, 'o5'), (7, 'o7')]))
    green = event_time(env.from_collection([(0, 'g0'), (1, 'g1'), (6, 'g6'), (8, 'g8')]))
    joined = orange.key_by(lambda x: 1).interval_join(green.key_by(lambda x: 1)) \
        .between(Time.milliseconds(-2), Time.milliseconds(1)).process(PairUp())
    expected = [f"{o},{g}" for ot, o in [(0, 'o0'), (2, 'o2'), (3, 'o3'), (4, 'o4'), (5, 'o5'), (7, 'o7')]
                for gt, g in [(0, 'g0'), (1, 'g1'), (6, 'g6'), (8, 'g8')] if ot - 2 <= gt <= ot + 1]
    assert sorted(collect(joined)) == sorted(expected)


# -- side outputs -------------------------------------------------------------------------------------------

def test_side_outputs(spark):
    output_tag = OutputTag("side-output", Types.STRING())

    class MyProcessFunction(ProcessFunction):
        def process_element(self, value: int, ctx: ProcessFunction.Context):
            # emit data to regular output
            yield value
            # emit data to side output
            yield output_tag, "sideout-" + str(value)

    env = StreamExecutionEnvironment.get_execution_environment()
    main_data_stream = env.from_collection([1, 2]).process(MyProcessFunction(), Types.INT())
    side_output_stream = main_data_stream.get_side_output(output_tag)
    out = collect(main_data_stream.map(lambda x: ("main", x)).union(side_output_stream.map(lambda x: ("side", x))))
    assert sorted(out) == [("main", 1), ("main", 2), ("side", "sideout-1"), ("side", "sideout-2")]


# -- checkpointing, execution mode, configuration -----------------------------------------------------------

def test_checkpointing_configuration(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    # start a checkpoint every 1000 ms
    env.enable_checkpointing(1000)
    # advanced options:
    # set mode to exactly-once (this is the default)
    env.get_checkpoint_config().set_checkpointing_mode(CheckpointingMode.EXACTLY_ONCE)
    # make sure 500 ms of progress happen between checkpoints
    env.get_checkpoint_config().set_min_pause_between_checkpoints(500)
    # checkpoints have to complete within one minute, or are discarded
    env.get_checkpoint_config().set_checkpoint_timeout(60000)
    # only two consecutive checkpoint failures are tolerated
    env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(2)
    # allow only one checkpoint to be in progress at the same time
    env.get_checkpoint_config().set_max_concurrent_checkpoints(1)
    # enable externalized checkpoints which are retained after job cancellation
    env.get_checkpoint_config().enable_externalized_checkpoints(
        ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION)
    # enables the unaligned checkpoints (accepted: Chandy's stay aligned)
    env.get_checkpoint_config().enable_unaligned_checkpoints()
    env.get_checkpoint_config().set_checkpoint_storage_dir("file://" + str(tmp_path / "checkpoints"))
    ds = env.from_source(NumberSequenceSource(1, 1000), WatermarkStrategy.no_watermarks(), "numbers")
    assert sum(collect(ds.map(lambda x: x * 2))) == 1000 * 1001


def test_execution_mode_batch_word_count(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    text = env.from_collection(["to be or not to be", "that is the question"])
    counts = text.flat_map(lambda line: [(word, 1) for word in line.split()]) \
        .key_by(lambda pair: pair[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
    expected = collections.Counter("to be or not to be that is the question".split())
    assert sorted(collect(counts)) == sorted(expected.items())  # one final count per word


def test_configuration_sets_the_environment(spark):
    config = Configuration()
    config.set_integer("parallelism.default", 2)
    config.set_string("execution.runtime-mode", "STREAMING")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    assert env.get_parallelism() == 2
    assert sorted(collect(env.from_collection([3, 1, 2]).map(lambda x: x * 10))) == [10, 20, 30]


# -- connectors ---------------------------------------------------------------------------------------------

def test_file_source_and_file_sink_builders(spark, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "words.txt").write_text("hello\nworld\n\nflink\n")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "checkpoints"))
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in")) \
        .process_static_file_set().build()
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "file-source")
    sink = FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()) \
        .with_output_file_config(OutputFileConfig.builder().with_part_prefix("prefix")
                                 .with_part_suffix(".txt").build()) \
        .with_rolling_policy(RollingPolicy.default_rolling_policy()).build()
    ds.map(lambda line: line.upper(), output_type=Types.STRING()).sink_to(sink)
    env.execute("file-builders")
    lines = []
    for root, _, files in os.walk(tmp_path / "out"):
        for name in files:
            if not name.startswith((".", "_")) and name.startswith("prefix") and name.endswith(".txt"):
                lines += open(os.path.join(root, name)).read().splitlines()
    assert sorted(lines) == ["", "FLINK", "HELLO", "WORLD"]

