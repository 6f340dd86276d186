"""``DataStream`` and ``KeyedStream``: PyFlink's DataStream API, declaring transformations lazily.

Nothing runs until ``env.execute()``.

>>> from runtime import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> words = env.from_collection(["a", "b", "a"]).map(lambda w: (w, 1))
>>> counts = words.key_by(lambda p: p[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
>>> counts.get_name()
'Keyed Reduce'

A stream is either of records (Python values) or columnar (Arrow record batches of a known schema, see
:mod:`operators.columnar`): ``map_batches`` and ``key_by(column)`` with ``count``/``sum`` work on batches,
``to_rows`` / ``to_columnar`` cross between the two.

>>> import pyarrow.compute as pc
>>> totals = (env.from_sequence(0, 99, columnar=True)
...     .map_batches(lambda b: {"key": pc.bit_wise_and(b["value"], 7)})
...     .key_by("key").count())
>>> totals.get_schema().names
['key', 'count']
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa

from operators.builtins import (
    FilterOperator,
    FlatMapOperator,
    KeyedFilterOperator,
    KeyedFlatMapOperator,
    KeyedMapOperator,
    KeyedProcessOperator,
    KeyedReduceOperator,
    MapOperator,
    ProcessOperator,
    may_use_keyed_state,
)
from operators.columnar import (
    BatchesToRowsOperator,
    KeyedRunningAggregateOperator,
    MapBatchesOperator,
    RowsToBatchesOperator,
    infer_output_schema,
    running_aggregate_schema,
)
from operators.event_time import ColumnarTimestampsAndWatermarksOperator, TimestampsAndWatermarksOperator
from operators.functions import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessFunction,
    ReduceFunction,
    as_callable,
)
from operators.committing.sink import CommittableWriterOperator, GlobalCommitSink
from operators.sinks import CollectSink, PrintSink, Sink, SinkWriterOperator
from operators.watermark_strategy import WatermarkStrategy
from runtime.datastream.windowed_stream import AllWindowedStream, WindowedStream, count_assigner
from runtime.errors import ApiUsageError, ConfigurationError
from runtime.graph.job_graph import BROADCAST, FORWARD, REBALANCE, RESCALE, SHUFFLE
from runtime.graph.job_graph import Partitioner as EdgePartitioner
from runtime.graph.transformation import Transformation
from runtime.keys.key_groups import UPPER_BOUND_MAX_PARALLELISM
from runtime.side_outputs import OutputTag
from runtime.types import TypeInformation

__all__ = ["DataStream", "KeyedStream", "DataStreamSink", "CloseableIterator"]


def _everything_one_key(record) -> int:
    """``window_all``'s key: every record in one key group, so one subtask sees them all."""
    return 0


def _first_subtask(key, num_partitions: int) -> int:
    return 0


def positive_int(value: int, setting: str) -> int:
    """``value`` if it is a positive int; else a ConfigurationError naming ``setting`` (e.g. "parallelism")."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"{setting} must be a positive int, got {value!r}")
    return value


class _Named:
    """``name`` / ``uid`` / ``set_parallelism`` shared by streams and sinks: they edit the transformation."""

    _transformation: Transformation

    def name(self, name: str):
        """Set the operator's name, shown in errors, logs and the job graph.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_collection([1, 2]).map(str).name("to text").get_name()
        'to text'
        """
        self._transformation.name = name
        return self

    def get_name(self) -> str:
        return self._transformation.name

    def uid(self, uid: str):
        """Set the operator's stable id: its state in checkpoints is addressed by it.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_collection([1, 2]).map(str).uid("to-text").print()
        >>> [node.uid for node in env.get_job_graph("job").operators if node.name == "Map"]
        ['to-text']
        """
        if not isinstance(uid, str) or not uid:
            raise ConfigurationError(f"uid() expects a non-empty string, got {uid!r}")
        self._transformation.uid = uid
        return self

    def set_parallelism(self, parallelism: int):
        """Run this operator with ``parallelism`` subtasks instead of the environment's default.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_sequence(1, 10).map(str).set_parallelism(3).print()
        >>> {node.name: node.parallelism for node in env.get_job_graph("job").operators}
        {'Sequence Source': 1, 'Map': 3, 'Print to Std. Out': 1}
        """
        if self._transformation.non_parallel and parallelism != 1:
            raise ConfigurationError(f"'{self._transformation.name}' is a non-parallel source: its parallelism is 1")
        self._transformation.parallelism = positive_int(parallelism, "parallelism")
        return self

    def set_max_parallelism(self, max_parallelism: int):
        """The operator's max parallelism: the number of key groups its keyed state is split into, the most
        subtasks it can ever be rescaled to. Chandy keeps one number of key groups per job, so operators that
        set one must agree, and it becomes the job's (as ``env.set_max_parallelism``).

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_sequence(1, 10).key_by(lambda x: x % 2).reduce(max).set_max_parallelism(64).print()
        >>> env.get_job_graph("job").max_parallelism
        64
        """
        value = positive_int(max_parallelism, "max parallelism")
        if value > UPPER_BOUND_MAX_PARALLELISM:
            raise ConfigurationError(f"max parallelism must be at most {UPPER_BOUND_MAX_PARALLELISM}, got {value}")
        self._transformation.max_parallelism = value
        return self

    def set_uid_hash(self, uid_hash: str):
        """PyFlink's way to pin a JVM operator's state by hash; in Chandy the uid is the state's address, so the
        hash serves as the uid.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_sequence(1, 10).map(str).set_uid_hash("2e588ce1c86a9d46e2e85186773ce4fd").print()
        >>> [node.uid for node in env.get_job_graph("job").operators if node.name == "Map"]
        ['2e588ce1c86a9d46e2e85186773ce4fd']
        """
        return self.uid(uid_hash)


    def disable_chaining(self):
        """Run this operator on a thread of its own: nothing is chained to it, nor it to anything.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_sequence(1, 10).map(str).disable_chaining().map(len).print()
        >>> [[op.name for op in chain.operators] for chain in env.get_job_graph("job").chains]
        [['Sequence Source'], ['Map'], ['Map', 'Print to Std. Out']]
        """
        self._transformation.chaining = "never"
        return self

    def start_new_chain(self):
        """Start a new chain at this operator: it is not chained to its input (later ones may chain to it).

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_sequence(1, 10).map(str).start_new_chain().map(len).print()
        >>> [[op.name for op in chain.operators] for chain in env.get_job_graph("job").chains]
        [['Sequence Source'], ['Map', 'Map', 'Print to Std. Out']]
        """
        self._transformation.chaining = "head"
        return self

    def set_description(self, description: str):
        """A longer description of the operator than its name, for people reading the job graph.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_sequence(1, 10).map(str).set_description("numbers as text").get_description()
        'numbers as text'
        """
        self._transformation.description = str(description)
        return self

    def get_description(self) -> str | None:
        return self._transformation.description

    def slot_sharing_group(self, slot_sharing_group: str):
        """Accepted for PyFlink programs, recorded, and without effect: Chandy runs subtask ``i`` of every
        operator in Spark task slot ``i`` (one slot sharing group, Flink's default), so a job needs as many
        slots as its highest parallelism whatever the groups.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_sequence(1, 10).map(str).slot_sharing_group("heavy").get_name()
        'Map'
        """
        self._transformation.slot_sharing_group = str(slot_sharing_group)
        return self


class DataStream(_Named):
    """A stream of records; every method declares a new operator and returns the stream it produces.

    >>> from runtime import StreamExecutionEnvironment, Types
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> lengths = env.from_collection(["a", "bb"]).map(len, output_type=Types.INT())
    >>> isinstance(lengths, DataStream), lengths.get_name(), lengths.get_type(), lengths.get_schema()
    (True, 'Map', INT, None)
    """

    def __init__(self, environment, transformation: Transformation):
        self._env = environment
        self._transformation = transformation

    def get_execution_environment(self):
        return self._env

    def get_type(self) -> TypeInformation | None:
        return self._transformation.output_type

    def get_schema(self) -> pa.Schema | None:
        """The Arrow schema of a columnar stream's batches; None for a stream of records."""
        return self._transformation.schema

    def _then(self, kind: str, name: str, make_operator: Callable, output_type=None,
              inputs: list[Transformation] | None = None, schema: pa.Schema | None = None) -> Transformation:
        t = Transformation(kind, name, inputs or [self._transformation], make_operator,
                           output_type=output_type, environment=self._env, schema=schema)
        self._env._add(t)
        return t

    def _require_records(self, api_name: str) -> None:
        schema = self.get_schema()
        if schema is not None:
            raise ApiUsageError(
                f"{api_name}() works on records, but this stream is columnar (Arrow batches of "
                f"[{', '.join(f'{f.name}: {f.type}' for f in schema)}]). Use map_batches() / key_by(column) "
                f"on the batches, or to_rows() first to get one record per row."
            )

    def _require_columnar(self, api_name: str) -> pa.Schema:
        schema = self.get_schema()
        if schema is None:
            raise ApiUsageError(f"{api_name}() works on columnar streams (Arrow batches); this stream is of records. "
                            "Call to_columnar(schema) first, or start from a columnar source.")
        return schema

    # -- the columnar path ----------------------------------------------------------------------------

    def map_batches(self, func: Callable, schema: pa.Schema | None = None) -> "DataStream":
        """Apply ``func`` to each Arrow record batch; it returns a RecordBatch, a Table or a dict of columns.

        The output schema is ``schema``, or else found by calling ``func`` once on the driver with an
        empty batch. Batches hold up to tens of thousands of rows: use ``pyarrow.compute`` on whole columns.

        >>> import pyarrow.compute as pc
        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> keys = env.from_sequence(0, 9, columnar=True).map_batches(
        ...     lambda b: {"key": pc.bit_wise_and(b["value"], 3), "value": b["value"]})
        >>> keys.get_schema().names
        ['key', 'value']
        """
        input_schema = self._require_columnar("map_batches")
        if not callable(func):
            raise ApiUsageError(f"map_batches() expects a callable, got {func!r}")
        name = "MapBatches"
        output = schema if schema is not None else infer_output_schema(func, input_schema, name)
        return DataStream(self._env, self._then("operator", name, lambda n: MapBatchesOperator(n, func, output),
                                                schema=output))

    def to_rows(self, output_type: TypeInformation | None = None) -> "DataStream":
        """Leave the columnar path: one record per row, a tuple in column order (one column: its value). After
        ``assign_timestamps_and_watermarks`` on the columnar stream, records carry the timestamp column's time."""
        schema = self._require_columnar("to_rows")
        column = self._event_time_column()
        column = column if column in schema.names else None
        return DataStream(self._env, self._then("operator", "ToRows", lambda n: BatchesToRowsOperator(n, column),
                                                output_type))

    def _event_time_column(self) -> str | None:
        """The column named by the nearest assign_timestamps_and_watermarks upstream on a columnar stream."""
        t = self._transformation
        while t is not None:
            if t.timestamp_column is not None:
                return t.timestamp_column
            t = t.inputs[0] if len(t.inputs) == 1 and t.schema is not None else None
        return None

    def to_columnar(self, schema: pa.Schema) -> "DataStream":
        """Enter the columnar path: records (dicts, tuples in column order, or one column's plain values)
        become Arrow record batches of ``schema``."""
        self._require_records("to_columnar")
        if not isinstance(schema, pa.Schema):
            raise ApiUsageError(f"to_columnar() expects a pyarrow.Schema, got {type(schema).__name__}")
        return DataStream(self._env, self._then("operator", "ToColumnar",
                                                lambda n: RowsToBatchesOperator(n, schema), schema=schema))

    def map(self, func: MapFunction | Callable, output_type: TypeInformation | None = None) -> "DataStream":
        """One output record per input record.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> squares = env.from_sequence(1, 3).map(lambda x: x * x)
        >>> squares.get_name(), squares.get_type()  # no output_type given: records travel pickled
        ('Map', None)
        """
        self._require_records("map")
        call = as_callable(func, MapFunction, "map")
        return DataStream(self._env, self._then("operator", "Map",
                                                lambda n: MapOperator(n, func, call), output_type))

    def flat_map(self, func: FlatMapFunction | Callable,
                 output_type: TypeInformation | None = None) -> "DataStream":
        """Zero or more output records per input record: the function returns an iterable or yields.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> words = env.from_collection(["to be", "or not"]).flat_map(str.split)
        >>> words.get_name()
        'FlatMap'
        """
        self._require_records("flat_map")
        call = as_callable(func, FlatMapFunction, "flat_map")
        return DataStream(self._env, self._then("operator", "FlatMap",
                                                lambda n: FlatMapOperator(n, func, call), output_type))

    def filter(self, func: FilterFunction | Callable) -> "DataStream":
        """Keep the records for which the function returns true.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> evens = env.from_sequence(1, 10).filter(lambda x: x % 2 == 0)
        >>> evens.get_name(), evens.get_type()  # the input's type is kept
        ('Filter', LONG)
        """
        self._require_records("filter")
        call = as_callable(func, FilterFunction, "filter")
        return DataStream(self._env, self._then("operator", "Filter", lambda n: FilterOperator(n, func, call),
                                                self.get_type()))

    def process(self, func: ProcessFunction, output_type: TypeInformation | None = None) -> "DataStream":
        """Apply a :class:`ProcessFunction` to every record."""
        if isinstance(func, KeyedProcessFunction):
            raise ApiUsageError("A KeyedProcessFunction needs a KeyedStream: call key_by(...) before process().")
        if not isinstance(func, ProcessFunction):
            raise ApiUsageError(f"process() expects a ProcessFunction, got {type(func).__name__}")
        if callable(getattr(func, "on_timer", None)):
            raise ApiUsageError(
                f"{type(func).__name__} defines on_timer(), but timers need a keyed stream (a timer belongs to "
                "a key and is checkpointed with its state): call key_by(...) and make it a KeyedProcessFunction.")
        self._require_records("process")
        return DataStream(self._env, self._then("operator", "Process",
                                                lambda n: ProcessOperator(n, func), output_type))

    def assign_timestamps_and_watermarks(self, watermark_strategy: WatermarkStrategy) -> "DataStream":
        """Give the records event time: a timestamp each, from the strategy's assigner, and watermarks from its
        generator, every auto-watermark interval (``env.get_config().set_auto_watermark_interval``). Upstream
        watermarks stop here (the strategy makes this stream's).

        >>> from runtime import StreamExecutionEnvironment, Duration, WatermarkStrategy
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> events = env.from_collection([("click", 1_000), ("view", 900)])
        >>> strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(200))
        ...             .with_timestamp_assigner(lambda event, _: event[1]))
        >>> events.assign_timestamps_and_watermarks(strategy).get_name()
        'Timestamps/Watermarks'
        """
        return self._assign_watermarks(watermark_strategy, "Timestamps/Watermarks")

    def _assign_watermarks(self, strategy: WatermarkStrategy, name: str) -> "DataStream":
        if not isinstance(strategy, WatermarkStrategy):
            raise ApiUsageError(f"assign_timestamps_and_watermarks() expects a WatermarkStrategy, got "
                                f"{type(strategy).__name__}: e.g. WatermarkStrategy.for_monotonous_timestamps()"
                                ".with_timestamp_assigner(...)")
        schema = self.get_schema()
        if schema is not None:  # columnar: the event time is a column, which the batches keep
            column = getattr(strategy.timestamp_assigner, "column", None)
            if column not in schema.names:
                raise ApiUsageError(
                    f"On a columnar stream the event time is a column: with_timestamp_assigner('<column>'), one of "
                    f"{schema.names} (epoch milliseconds or an Arrow timestamp); got {strategy.timestamp_assigner!r}.")
            kind = schema.field(column).type
            if not (pa.types.is_integer(kind) or pa.types.is_timestamp(kind)):
                raise ApiUsageError(f"Timestamp column '{column}' holds {kind}: event time needs integer epoch "
                                    "milliseconds or an Arrow timestamp column.")
            t = self._then("operator", name, lambda n: ColumnarTimestampsAndWatermarksOperator(n, strategy, column),
                           schema=schema)
            t.timestamp_column = column
            return DataStream(self._env, t)
        self._require_records("assign_timestamps_and_watermarks")
        return DataStream(self._env, self._then("operator", name,
                                                lambda n: TimestampsAndWatermarksOperator(n, strategy),
                                                self.get_type()))

    def key_by(self, key_selector: KeySelector | Callable, key_type: TypeInformation | None = None) -> "KeyedStream":
        """Partition the stream by key: every record with the same key goes to the same subtask.

        On a columnar stream the key is a column, named here: ``key_by("user_id")``.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> keyed = env.from_collection([("a", 1), ("b", 2)]).key_by(lambda pair: pair[0])
        >>> type(keyed).__name__, keyed.get_name()
        ('KeyedStream', 'KeyBy')
        >>> env.from_sequence(0, 9, columnar=True).key_by("value").get_schema().names
        ['value']
        """
        schema = self.get_schema()
        if schema is not None:
            if not isinstance(key_selector, str) or key_selector not in schema.names:
                raise ApiUsageError(f"key_by() on a columnar stream takes the name of a key column, one of "
                                f"{schema.names}; got {key_selector!r}")
            t = Transformation("partition", "KeyBy", [self._transformation],
                               partitioner=EdgePartitioner("hash", key_column=key_selector),
                               environment=self._env, schema=schema)
            return KeyedStream(self._env, t, None, key_type, key_column=key_selector)
        call = as_callable(key_selector, KeySelector, "key_by")
        t = Transformation("partition", "KeyBy", [self._transformation], partitioner=EdgePartitioner("hash", call),
                           output_type=self.get_type(), environment=self._env)
        return KeyedStream(self._env, t, call, key_type)

    def _repartition(self, partitioner: EdgePartitioner, name: str) -> "DataStream":
        if self.get_schema() is not None and partitioner.kind not in ("forward", "rebalance", "broadcast"):
            raise ApiUsageError(f"{name.lower()} is not available on a columnar stream (Arrow batches): use "
                                "rebalance(), or key_by(column) to route rows by a column's value.")
        t = Transformation("partition", name, [self._transformation], partitioner=partitioner,
                           output_type=self.get_type(), environment=self._env, schema=self.get_schema())
        return DataStream(self._env, t)

    def rebalance(self) -> "DataStream":
        """Distribute records round-robin over the next operator's subtasks.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> spread = env.from_sequence(1, 10).rebalance()  # then e.g. .map(...).set_parallelism(4)
        >>> spread.get_name(), spread.get_type()
        ('Rebalance', LONG)
        """
        return self._repartition(REBALANCE, "Rebalance")

    def rescale(self) -> "DataStream":
        """Distribute records round-robin over a subset of the next operator's subtasks: at parallelism 2
        into 4, producer 0 feeds consumers 0 and 1, producer 1 feeds 2 and 3 (Flink's rescale).

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_sequence(1, 10).rescale().get_name()
        'Rescale'
        """
        return self._repartition(RESCALE, "Rescale")

    def shuffle(self) -> "DataStream":
        """Send each record to a subtask of the next operator chosen at random.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_sequence(1, 10).shuffle().get_name()
        'Shuffle'
        """
        return self._repartition(SHUFFLE, "Shuffle")

    def partition_custom(self, partitioner: Partitioner | Callable,
                         key_selector: KeySelector | Callable) -> "DataStream":
        """Send each record to the subtask ``partitioner`` chooses for its key: ``partition(key, n)`` returns a
        number in ``[0, n)``, ``n`` being the next operator's parallelism.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> by_parity = env.from_sequence(1, 10).partition_custom(lambda key, n: key % 2 % n, lambda x: x)
        >>> by_parity.get_name()
        'Custom Partition'
        """
        self._require_records("partition_custom")
        partition = as_callable(partitioner, Partitioner, "partition_custom")
        key_of = as_callable(key_selector, KeySelector, "partition_custom")
        return self._repartition(EdgePartitioner("custom", key_of, partition=partition), "Custom Partition")

    def forward(self) -> "DataStream":
        """Send each subtask's records to the same-index subtask of the next operator.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_sequence(1, 10).forward().get_name()
        'Forward'
        """
        return self._repartition(FORWARD, "Forward")

    def broadcast(self, *broadcast_state_descriptors):
        """Send every record to every subtask of the next operator. Given MapStateDescriptors, return a
        :class:`~runtime.datastream.broadcast_stream.BroadcastStream` to ``connect`` another stream with: the
        operator then keeps those broadcast states (see ``BroadcastProcessFunction``).

        >>> from runtime import StreamExecutionEnvironment
        >>> from state_backends import MapStateDescriptor, ValueStateDescriptor
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_collection(["config"]).broadcast().get_name()
        'Broadcast'
        >>> try:
        ...     env.from_collection(["config"]).broadcast(ValueStateDescriptor("config"))
        ... except Exception as e:
        ...     print(e)
        broadcast() takes MapStateDescriptors (broadcast state is a map), got ValueStateDescriptor: use MapStateDescriptor(name, key_type, value_type).
        """
        if not broadcast_state_descriptors:
            return self._repartition(BROADCAST, "Broadcast")
        from runtime.datastream.broadcast_stream import BroadcastStream, checked_descriptors

        self._require_records("broadcast state")
        descriptors = checked_descriptors(broadcast_state_descriptors)
        return BroadcastStream(self._repartition(BROADCAST, "Broadcast"), descriptors)

    def global_(self) -> "DataStream":
        """Send every record to the first subtask of the next operator (Flink's ``global``; ``global`` is a
        Python keyword).

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_sequence(1, 10).global_().get_name()
        'Global'
        """
        self._require_records("global_")
        return self._repartition(EdgePartitioner("custom", _everything_one_key, partition=_first_subtask), "Global")

    def force_non_parallel(self) -> "DataStream":
        """Run this operator with one subtask, for good: parallelism and max parallelism 1.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_sequence(1, 10).map(str).force_non_parallel().print()
        >>> [node.parallelism for node in env.get_job_graph("job").operators if node.name == "Map"]
        [1]
        """
        self._transformation.parallelism = 1
        self._transformation.non_parallel = True
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> "DataStream":
        """Refused for one operator: Chandy flushes every output on one job-wide timeout; set it with
        ``env.set_buffer_timeout(ms)``.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> try:
        ...     env.from_sequence(1, 10).map(str).set_buffer_timeout(5)
        ... except Exception as e:
        ...     print(e)
        set_buffer_timeout() on one operator: Chandy has one buffer timeout per job. Use env.set_buffer_timeout(5).
        """
        raise ConfigurationError(f"set_buffer_timeout() on one operator: Chandy has one buffer timeout per job. "
                                 f"Use env.set_buffer_timeout({timeout_millis}).")

    def project(self, *field_indexes: int) -> "DataStream":
        """Keep the given positions of each tuple (or Row) record, in that order, as a tuple.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_collection([("a", 1, True)]).project(2, 0).get_name()
        'Projection'
        """
        if not field_indexes or not all(isinstance(i, int) for i in field_indexes):
            raise ApiUsageError(f"project() takes field positions (ints), got {field_indexes!r}")
        indexes = tuple(field_indexes)
        return self._then_map("Projection", lambda record: tuple(record[i] for i in indexes))

    def _then_map(self, name: str, call: Callable) -> "DataStream":
        self._require_records(name.lower())
        return DataStream(self._env, self._then("operator", name, lambda n: MapOperator(n, None, call)))

    def cache(self):
        """Refused: Flink's ``cache()`` keeps a batch job's intermediate result for later jobs of the same
        session. Chandy runs each job on its own Spark barrier stage and keeps nothing between jobs: write the
        stream with a FileSink and read it back with a FileSource in the next job.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> try:
        ...     env.from_sequence(1, 10).cache()
        ... except Exception as e:
        ...     print(type(e).__name__)
        ApiUsageError
        """
        raise ApiUsageError("cache() is not available: Chandy keeps nothing between jobs (each runs on its own Spark "
                            "barrier stage). Write the stream with a FileSink and read it back with a FileSource "
                            "in the next job.")

    def get_side_output(self, output_tag: OutputTag) -> "DataStream":
        """The records this operator emitted under ``output_tag`` (``yield output_tag, value`` in a process
        function; ``FileSource(on_malformed=tag)`` for malformed lines)."""
        if not isinstance(output_tag, OutputTag):
            raise ApiUsageError(f"get_side_output() expects an OutputTag, got {type(output_tag).__name__}")
        t = Transformation("side", f"SideOutput: {output_tag.tag_id}", [self._transformation],
                           output_type=output_tag.type_info, environment=self._env, side_tag=output_tag.tag_id)
        return DataStream(self._env, t)

    def side_output_failed_records(self, output_tag: OutputTag) -> "DataStream":
        """Chandy's own: a record whose function raises in this operator goes to the side output ``output_tag`` as a
        :class:`~runtime.side_outputs.FailedRecord` (the record, the error, its traceback), and the job goes on,
        instead of failing (Spark's bad-records path, Kafka Streams' exception handlers). Read them with
        ``get_side_output(output_tag)``. The operator then calls its function one record at a time (about a
        microsecond more per record); state the function changed before it raised stays changed. In BATCH mode a
        keyed operator sets the records aside the same way when it runs each key's records, at the end.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> failed = OutputTag("unparsable")
        >>> numbers = env.from_collection(["1", "x"]).map(int).side_output_failed_records(failed)
        >>> numbers.get_side_output(failed).get_name()
        'SideOutput: unparsable'
        """
        if not isinstance(output_tag, OutputTag):
            raise ApiUsageError(f"side_output_failed_records() expects an OutputTag, got {type(output_tag).__name__}")
        if self._transformation.kind != "operator" or self._transformation.schema is not None:
            raise ApiUsageError(
                f"side_output_failed_records() applies to an operator that calls a function per record (map, "
                f"flat_map, filter, process ...); '{self._transformation.name}' is a {self._transformation.kind}"
                + (" of Arrow batches" if self._transformation.schema is not None else "") + ".")
        self._transformation.failed_records_tag = output_tag.tag_id
        return self

    def connect(self, other: "DataStream"):
        """Connect with another stream (of any record type) into one two-input operator: see
        :class:`~runtime.datastream.connected_streams.ConnectedStreams`.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_collection([1]).connect(env.from_collection(["a"])).map(str, str.upper).get_name()
        'Co-Map'
        """
        from runtime.datastream.broadcast_stream import BroadcastConnectedStream, BroadcastStream
        from runtime.datastream.connected_streams import ConnectedStreams

        if isinstance(other, BroadcastStream):
            return BroadcastConnectedStream(self, other)
        if not isinstance(other, DataStream):
            raise ApiUsageError(f"connect() expects a DataStream or a BroadcastStream (stream.broadcast("
                                f"MapStateDescriptor(...))), got {type(other).__name__}")
        return ConnectedStreams(self, other)

    def join(self, other: "DataStream"):
        """A window join: ``join(other).where(k1).equal_to(k2).window(assigner).apply(JoinFunction)`` (see
        :mod:`runtime.datastream.joined_streams`).

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> type(env.from_collection([1]).join(env.from_collection([1]))).__name__
        'JoinedStreams'
        """
        from runtime.datastream.joined_streams import JoinedStreams

        return JoinedStreams(self, other)

    def co_group(self, other: "DataStream"):
        """A window co-group: ``co_group(other).where(k1).equal_to(k2).window(assigner).apply(CoGroupFunction)``.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> type(env.from_collection([1]).co_group(env.from_collection([1]))).__name__
        'CoGroupedStreams'
        """
        from runtime.datastream.joined_streams import CoGroupedStreams

        return CoGroupedStreams(self, other)

    def window_all(self, window_assigner) -> "AllWindowedStream":
        """All records in windows, evaluated by one subtask (Flink's ``windowAll``): see :class:`AllWindowedStream`.

        >>> from runtime import StreamExecutionEnvironment
        >>> from runtime.datastream.window import TumblingEventTimeWindows
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> type(env.from_collection([1]).window_all(TumblingEventTimeWindows.of(1000))).__name__
        'AllWindowedStream'
        """
        return AllWindowedStream(self.key_by(_everything_one_key), window_assigner)

    def count_window_all(self, size: int, slide: int = 0) -> "AllWindowedStream":
        """Windows of ``size`` records of the whole stream, every ``slide`` records (0: tumbling).

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_collection([1, 2, 3]).count_window_all(2).reduce(lambda a, b: a + b).get_name()
        'WindowAll(CountTumblingWindowAssigner(2), PurgingTrigger, reduce)'
        """
        return AllWindowedStream(self.key_by(_everything_one_key), count_assigner(size, slide))

    def union(self, *streams: "DataStream") -> "DataStream":
        """Merge this stream with others of the same kind of record into one stream.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> clicks, views = env.from_collection(["click"]), env.from_collection(["view"])
        >>> clicks.union(views).get_name()
        'Union'
        """
        for s in streams:
            if not isinstance(s, DataStream):
                raise ApiUsageError(f"union() takes DataStreams, got {type(s).__name__}")
            if s._env is not self._env:
                raise ApiUsageError("union() of streams from different environments: build every stream of a job from "
                                    "one StreamExecutionEnvironment")
            if (s.get_schema() is None) != (self.get_schema() is None) or (
                    s.get_schema() is not None and not s.get_schema().equals(self.get_schema())):
                raise ApiUsageError("union() needs streams of the same kind: all of records, or all columnar with "
                                f"one schema; got {self.get_schema()} and {s.get_schema()}")
        t = Transformation("union", "Union", [self._transformation, *(s._transformation for s in streams)],
                           output_type=self.get_type(), environment=self._env, schema=self.get_schema())
        return DataStream(self._env, t)

    def sink_to(self, sink: Sink) -> "DataStreamSink":
        """Write the stream to ``sink``.

        >>> from operators.sinks import CollectSink
        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_collection([1, 2]).sink_to(CollectSink("numbers")).get_name()
        'Sink: numbers'
        """
        if not isinstance(sink, Sink):
            raise ApiUsageError(f"sink_to() expects a Sink, got {type(sink).__name__}")
        if isinstance(sink, GlobalCommitSink):
            return self._sink_with_committer(sink)
        if self.get_schema() is not None and not sink.accepts_batches:
            return self.to_rows().sink_to(sink)
        name = getattr(sink, "name", None) or type(sink).__name__
        t = self._then("sink", f"Sink: {name}", lambda n: SinkWriterOperator(n, sink))
        return DataStreamSink(t)

    add_sink = sink_to

    def _sink_with_committer(self, sink: GlobalCommitSink) -> "DataStreamSink":
        """A writer at this stream's parallelism, then one committer (see :mod:`operators.committing`). The writer
        takes Arrow batches: a stream of records becomes columnar first, with the schema the sink derives from
        the records' declared type."""
        sink.declare_in(id(self._env))
        stream = self
        if self.get_schema() is None:
            schema = sink.record_schema(self.get_type())
            rows = self.get_type() is not None and bool(self.get_type().field_names)
            stream = DataStream(self._env, self._then("operator", "ToColumnar",
                                                      lambda n: RowsToBatchesOperator(n, schema, rows), schema=schema))
        sink.expect_schema(stream.get_schema())
        name = getattr(sink, "name", None) or type(sink).__name__
        writer = stream._then("operator", f"Sink: {name}", lambda n: CommittableWriterOperator(n, sink))
        committer = DataStream(self._env, writer).global_()._then(
            "sink", f"Sink: {name} Committer", lambda n: SinkWriterOperator(n, sink))
        committer.parallelism = 1
        committer.non_parallel = True
        return DataStreamSink(writer, committer)

    def print(self, sink_identifier: str | None = None) -> "DataStreamSink":
        """Print every record on the executors' stdout (at-least-once).

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_collection([1, 2]).print("numbers").get_name()
        'Print to Std. Out'
        """
        return self.sink_to(PrintSink(sink_identifier)).name("Print to Std. Out")

    def execute_and_collect(self, job_execution_name: str | None = None,
                            limit: int | None = None) -> "CloseableIterator":
        """Run the bounded job and iterate over this stream's records (collected by a CollectSink).

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> with env.from_collection([1, 2, 3]).map(lambda x: x + 1).execute_and_collect() as results:
        ...     sorted(results)  # doctest: +SKIP
        [2, 3, 4]
        """
        sink = CollectSink("execute_and_collect")
        self.sink_to(sink)  # a columnar stream is collected as rows (see to_rows())
        result = self._env.execute(job_execution_name or "collect")
        records = result.collected(sink)
        return CloseableIterator(records if limit is None else records[:limit])


class KeyedStream(DataStream):
    """A stream partitioned by key; ``reduce`` and ``process`` keep state per key (``count`` and ``sum`` on
    a columnar stream), and so may the functions given to ``map``, ``flat_map`` and ``filter``.

    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> keyed = env.from_collection([("a", 1), ("b", 2), ("a", 3)]).key_by(lambda pair: pair[0])
    >>> isinstance(keyed, KeyedStream), keyed.reduce(lambda x, y: (x[0], x[1] + y[1])).get_name()
    (True, 'Keyed Reduce')
    """

    def __init__(self, environment, transformation: Transformation, key_selector: Callable | None,
                 key_type: TypeInformation | None, key_column: str | None = None):
        super().__init__(environment, transformation)
        self._key_selector = key_selector
        self._key_type = key_type
        self._key_column = key_column

    def _running_aggregate(self, name: str, value_column: str | None) -> DataStream:
        schema = self._require_columnar(name)
        if value_column is not None:
            if value_column not in schema.names:
                raise ApiUsageError(f"sum() takes the name of a column, one of {schema.names}; got {value_column!r}")
            if not pa.types.is_integer(schema.field(value_column).type):
                raise ApiUsageError(f"sum('{value_column}') needs an integer column, not "
                                f"{schema.field(value_column).type}: running sums are kept exact, and floating-"
                                "point sums are not (use to_rows() and reduce() for them)")
        key = self._key_column
        operator_name = "Keyed Count" if value_column is None else f"Keyed Sum({value_column})"
        t = self._then("operator", operator_name,
                       lambda n: KeyedRunningAggregateOperator(n, key, value_column, schema),
                       schema=running_aggregate_schema(schema, key, value_column))
        return DataStream(self._env, t)

    def count(self) -> DataStream:
        """Columnar: for every row, its key and the number of rows with that key so far (a running count).

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> counts = env.from_sequence(0, 9, columnar=True).key_by("value").count()
        >>> counts.get_schema().names
        ['value', 'count']
        """
        return self._running_aggregate("count", None)

    def sum(self, column: str) -> DataStream:
        """Columnar: for every row, its key and the running sum of integer ``column`` over that key's rows.

        Unlike Flink's ``sum(position)``, the output has only the key column and the sum.
        """
        return self._running_aggregate("sum", column)

    def _scoped_if_stateful(self, func, call: Callable, keyed_operator: type, operator: type) -> Callable:
        key = self._key_selector
        if may_use_keyed_state(func):
            return lambda name: keyed_operator(name, func, call, key)
        return lambda name: operator(name, func, call)

    def map(self, func: MapFunction | Callable, output_type: TypeInformation | None = None) -> DataStream:
        """One output record per input record; the function may use keyed state (``runtime_context.get_state``
        in its ``open``), scoped to each record's key. The output is a plain DataStream, as in PyFlink.

        Setting the current key for every record more than doubles the cost of a cheap map, so only a function
        whose class defines ``open`` (the one place state handles can be made) runs keyed; any other (a lambda,
        a MapFunction without ``open``) runs as ``DataStream.map`` does.

        >>> from operators.functions import MapFunction
        >>> from runtime import StreamExecutionEnvironment
        >>> from state_backends.descriptors import ValueStateDescriptor
        >>> class CountingMap(MapFunction):   # (word, times seen so far)
        ...     def open(self, runtime_context):
        ...         self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))
        ...     def map(self, word):
        ...         self.seen.update((self.seen.value() or 0) + 1)
        ...         return word, self.seen.value()
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> counts = env.from_collection(["a", "b", "a"]).key_by(lambda w: w).map(CountingMap())
        >>> type(counts).__name__, counts.get_name()
        ('DataStream', 'Map')
        """
        self._require_records("map")
        call = as_callable(func, MapFunction, "map")
        make = self._scoped_if_stateful(func, call, KeyedMapOperator, MapOperator)
        return DataStream(self._env, self._then("operator", "Map", make, output_type))

    def flat_map(self, func: FlatMapFunction | Callable,
                 output_type: TypeInformation | None = None) -> DataStream:
        """Zero or more output records per input record; the function may use keyed state, scoped to each
        record's key, when its class defines ``open`` (see :meth:`map`).

        >>> from operators.functions import FlatMapFunction
        >>> from runtime import StreamExecutionEnvironment
        >>> from state_backends.descriptors import ValueStateDescriptor
        >>> class FirstOnly(FlatMapFunction):   # each key's first record, once
        ...     def open(self, runtime_context):
        ...         self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))
        ...     def flat_map(self, record):
        ...         if not self.seen.value():
        ...             self.seen.update(True)
        ...             yield record
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> firsts = env.from_collection(["a", "b", "a"]).key_by(lambda w: w).flat_map(FirstOnly())
        >>> type(firsts).__name__, firsts.get_name()
        ('DataStream', 'FlatMap')
        """
        self._require_records("flat_map")
        call = as_callable(func, FlatMapFunction, "flat_map")
        make = self._scoped_if_stateful(func, call, KeyedFlatMapOperator, FlatMapOperator)
        return DataStream(self._env, self._then("operator", "FlatMap", make, output_type))

    def filter(self, func: FilterFunction | Callable) -> DataStream:
        """Keep the records for which the function returns true; it may use keyed state, scoped to each
        record's key, when its class defines ``open`` (see :meth:`map`).

        >>> from operators.functions import FilterFunction
        >>> from runtime import StreamExecutionEnvironment
        >>> from state_backends.descriptors import ValueStateDescriptor
        >>> class Changed(FilterFunction):   # a reading only when its sensor's value changed
        ...     def open(self, runtime_context):
        ...         self.last = runtime_context.get_state(ValueStateDescriptor("last"))
        ...     def filter(self, reading):
        ...         changed = self.last.value() != reading[1]
        ...         self.last.update(reading[1])
        ...         return changed
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> readings = env.from_collection([("s1", 20), ("s1", 20), ("s2", 20)])
        >>> changes = readings.key_by(lambda r: r[0]).filter(Changed())
        >>> type(changes).__name__, changes.get_name()
        ('DataStream', 'Filter')
        """
        self._require_records("filter")
        call = as_callable(func, FilterFunction, "filter")
        make = self._scoped_if_stateful(func, call, KeyedFilterOperator, FilterOperator)
        return DataStream(self._env, self._then("operator", "Filter", make, self.get_type()))

    def reduce(self, func: ReduceFunction | Callable) -> DataStream:
        """Rolling reduce: for each record, emit the reduction of all records so far with its key. A
        ReduceFunction whose class defines ``open`` may use keyed state, scoped to the key being folded.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> totals = env.from_sequence(1, 10).key_by(lambda x: x % 2).reduce(lambda a, b: a + b)
        >>> totals.get_name(), totals.get_type()
        ('Keyed Reduce', LONG)
        """
        self._require_records("reduce")
        call = as_callable(func, ReduceFunction, "reduce")
        key = self._key_selector
        t = self._then("operator", "Keyed Reduce", lambda n: KeyedReduceOperator(n, func, call, key),
                       self.get_type())
        return DataStream(self._env, t)

    def interval_join(self, other: "KeyedStream"):
        """Join with another keyed stream by time: each record with the other's records of its key within
        bounds of its timestamp (``.between(lower, upper).process(ProcessJoinFunction)``). State is kept only
        while the watermark says a record may still join.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> a, b = env.from_collection([1]).key_by(lambda x: x), env.from_collection([1]).key_by(lambda x: x)
        >>> type(a.interval_join(b)).__name__
        'IntervalJoin'
        """
        from runtime.datastream.interval_join import IntervalJoin

        if not isinstance(other, KeyedStream) or other._key_selector is None:
            raise ApiUsageError("interval_join() joins two keyed streams of records: "
                                "a.key_by(k1).interval_join(b.key_by(k2))")
        self._require_records("interval_join")
        return IntervalJoin(self, other)

    def window(self, window_assigner) -> "WindowedStream":
        """Cut each key's records into windows: see :class:`WindowedStream`.

        >>> from runtime import StreamExecutionEnvironment, Time
        >>> from runtime.datastream.window import SlidingEventTimeWindows
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> keyed = env.from_collection([("a", 1)]).key_by(lambda r: r[0])
        >>> type(keyed.window(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)))).__name__
        'WindowedStream'
        """
        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> "WindowedStream":
        """Windows of ``size`` records per key, every ``slide`` records once ``size`` arrived (0: tumbling).

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_collection([1, 2]).key_by(lambda x: x % 2).count_window(2).reduce(max).get_name()
        'Window(CountTumblingWindowAssigner(2), PurgingTrigger, reduce)'
        """
        return WindowedStream(self, count_assigner(size, slide))

    def process(self, func: KeyedProcessFunction, output_type: TypeInformation | None = None) -> DataStream:
        """Apply a :class:`KeyedProcessFunction`, with state scoped to each record's key."""
        if not isinstance(func, KeyedProcessFunction):
            raise ApiUsageError(f"KeyedStream.process() expects a KeyedProcessFunction, got {type(func).__name__}")
        self._require_records("process")
        key = self._key_selector
        t = self._then("operator", "KeyedProcess", lambda n: KeyedProcessOperator(n, func, key), output_type)
        return DataStream(self._env, t)


class DataStreamSink(_Named):
    """The end of a stream; lets the sink be named, given a uid and a parallelism.

    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> sink = env.from_collection([1, 2]).print().name("stdout").uid("stdout").set_parallelism(1)
    >>> isinstance(sink, DataStreamSink), sink.get_name()
    (True, 'stdout')
    """

    def __init__(self, transformation: Transformation, committer: Transformation | None = None):
        self._transformation = transformation
        self._committer = committer  # a sink with one committer: name, uid and parallelism are its writer's

    def uid(self, uid: str):
        """Set the sink's stable id; a sink with a committer gives its committer ``<uid>-committer``.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_collection([1, 2]).print().uid("stdout")._transformation.uid
        'stdout'
        """
        super().uid(uid)
        if self._committer is not None:
            self._committer.uid = f"{uid}-committer"
        return self

    def name(self, name: str):
        super().name(name)
        if self._committer is not None:
            self._committer.name = f"{name} Committer"
        return self


class CloseableIterator:
    """The iterator ``execute_and_collect`` returns; usable in a ``with`` block, as in PyFlink.

    >>> with CloseableIterator([1, 2, 3]) as records:
    ...     next(records), list(records)
    (1, [2, 3])
    """

    def __init__(self, records: list):
        self._records = records
        self._iterator = iter(records)

    def __iter__(self):
        return self._iterator

    def __next__(self):
        return next(self._iterator)

    def close(self) -> None:
        self._iterator = iter(())

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_OTHER_STREAMS = {"ConnectedStreams": "connected_streams", "BroadcastStream": "broadcast_stream",
                  "BroadcastConnectedStream": "broadcast_stream"}


def __getattr__(name: str):
    """PyFlink keeps every stream class in ``data_stream``; Chandy's others have modules of their own, which import
    this one, so they are looked up when asked for."""
    module = _OTHER_STREAMS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"runtime.datastream.{module}"), name)
