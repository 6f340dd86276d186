"""``DataStream`` and ``KeyedStream``: PyFlink's DataStream API, declaring transformations lazily.

Nothing runs until ``env.execute()``.

>>> from runtime import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> words = env.from_collection(["a", "b", "a"]).map(lambda w: (w, 1))
>>> counts = words.key_by(lambda p: p[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
>>> counts.get_name()
'Keyed Reduce'
"""

from __future__ import annotations

from typing import Callable

from operators.builtins import (
    FilterOperator,
    FlatMapOperator,
    KeyedProcessOperator,
    KeyedReduceOperator,
    MapOperator,
    ProcessOperator,
)
from operators.functions import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    as_callable,
)
from operators.sinks import CollectSink, PrintSink, Sink, SinkWriterOperator
from runtime.graph import BROADCAST, FORWARD, REBALANCE, Partitioner, Transformation
from runtime.side_outputs import OutputTag
from runtime.types import TypeInformation

__all__ = ["DataStream", "KeyedStream", "DataStreamSink", "CloseableIterator"]


def _check_parallelism(parallelism: int) -> int:
    if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
        raise ValueError(f"parallelism must be a positive int, got {parallelism!r}")
    return parallelism


class _Named:
    """``name`` / ``uid`` / ``set_parallelism`` shared by streams and sinks: they edit the transformation."""

    _transformation: Transformation

    def name(self, name: str):
        """Set the operator's name, shown in errors, logs and the job graph."""
        self._transformation.name = name
        return self

    def get_name(self) -> str:
        return self._transformation.name

    def uid(self, uid: str):
        """Set the operator's stable id: its state in checkpoints is addressed by it."""
        if not isinstance(uid, str) or not uid:
            raise ValueError(f"uid must be a non-empty string, got {uid!r}")
        self._transformation.uid = uid
        return self

    def set_parallelism(self, parallelism: int):
        """Run this operator with ``parallelism`` subtasks instead of the environment's default."""
        if self._transformation.non_parallel and parallelism != 1:
            raise ValueError(f"'{self._transformation.name}' is a non-parallel source: its parallelism is 1")
        self._transformation.parallelism = _check_parallelism(parallelism)
        return self


class DataStream(_Named):
    """A stream of records; every method declares a new operator and returns the stream it produces."""

    def __init__(self, environment, transformation: Transformation):
        self._env = environment
        self._transformation = transformation

    def get_execution_environment(self):
        return self._env

    def get_type(self) -> TypeInformation | None:
        return self._transformation.output_type

    def _then(self, kind: str, name: str, make_operator: Callable, output_type=None,
              inputs: list[Transformation] | None = None) -> Transformation:
        t = Transformation(kind, name, inputs or [self._transformation], make_operator,
                           output_type=output_type, environment=self._env)
        self._env._add(t)
        return t

    def map(self, func: MapFunction | Callable, output_type: TypeInformation | None = None) -> "DataStream":
        """One output record per input record.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> squares = env.from_sequence(1, 3).map(lambda x: x * x)
        """
        call = as_callable(func, MapFunction, "map")
        return DataStream(self._env, self._then("operator", "Map",
                                                lambda n: MapOperator(n, func, call), output_type))

    def flat_map(self, func: FlatMapFunction | Callable,
                 output_type: TypeInformation | None = None) -> "DataStream":
        """Zero or more output records per input record: the function returns an iterable or yields."""
        call = as_callable(func, FlatMapFunction, "flat_map")
        return DataStream(self._env, self._then("operator", "FlatMap",
                                                lambda n: FlatMapOperator(n, func, call), output_type))

    def filter(self, func: FilterFunction | Callable) -> "DataStream":
        """Keep the records for which the function returns true."""
        call = as_callable(func, FilterFunction, "filter")
        return DataStream(self._env, self._then("operator", "Filter", lambda n: FilterOperator(n, func, call),
                                                self.get_type()))

    def process(self, func: ProcessFunction, output_type: TypeInformation | None = None) -> "DataStream":
        """Apply a :class:`ProcessFunction` to every record."""
        if isinstance(func, KeyedProcessFunction):
            raise TypeError("A KeyedProcessFunction needs a KeyedStream: call key_by(...) before process().")
        if not isinstance(func, ProcessFunction):
            raise TypeError(f"process() expects a ProcessFunction, got {type(func).__name__}")
        return DataStream(self._env, self._then("operator", "Process",
                                                lambda n: ProcessOperator(n, func), output_type))

    def key_by(self, key_selector: KeySelector | Callable, key_type: TypeInformation | None = None) -> "KeyedStream":
        """Partition the stream by key: every record with the same key goes to the same subtask."""
        call = as_callable(key_selector, KeySelector, "key_by")
        t = Transformation("partition", "KeyBy", [self._transformation], partitioner=Partitioner("hash", call),
                           output_type=self.get_type(), environment=self._env)
        return KeyedStream(self._env, t, call, key_type)

    def _repartition(self, partitioner: Partitioner, name: str) -> "DataStream":
        t = Transformation("partition", name, [self._transformation], partitioner=partitioner,
                           output_type=self.get_type(), environment=self._env)
        return DataStream(self._env, t)

    def rebalance(self) -> "DataStream":
        """Distribute records round-robin over the next operator's subtasks."""
        return self._repartition(REBALANCE, "Rebalance")

    def forward(self) -> "DataStream":
        """Send each subtask's records to the same-index subtask of the next operator."""
        return self._repartition(FORWARD, "Forward")

    def broadcast(self) -> "DataStream":
        """Send every record to every subtask of the next operator."""
        return self._repartition(BROADCAST, "Broadcast")

    def get_side_output(self, output_tag: OutputTag) -> "DataStream":
        """The records this operator emitted under ``output_tag`` (``yield output_tag, value`` in a process
        function; ``FileSource(on_malformed=tag)`` for malformed lines)."""
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"get_side_output() expects an OutputTag, got {type(output_tag).__name__}")
        t = Transformation("side", f"SideOutput: {output_tag.tag_id}", [self._transformation],
                           output_type=output_tag.type_info, environment=self._env, side_tag=output_tag.tag_id)
        return DataStream(self._env, t)

    def union(self, *streams: "DataStream") -> "DataStream":
        """Merge this stream with others of the same kind of record into one stream."""
        for s in streams:
            if not isinstance(s, DataStream):
                raise TypeError(f"union() takes DataStreams, got {type(s).__name__}")
            if s._env is not self._env:
                raise ValueError("union() of streams from different environments")
        t = Transformation("union", "Union", [self._transformation, *(s._transformation for s in streams)],
                           output_type=self.get_type(), environment=self._env)
        return DataStream(self._env, t)

    def sink_to(self, sink: Sink) -> "DataStreamSink":
        """Write the stream to ``sink``."""
        if not isinstance(sink, Sink):
            raise TypeError(f"sink_to() expects a Sink, got {type(sink).__name__}")
        name = getattr(sink, "name", None) or type(sink).__name__
        t = self._then("sink", f"Sink: {name}", lambda n: SinkWriterOperator(n, sink))
        return DataStreamSink(t)

    add_sink = sink_to

    def print(self, sink_identifier: str | None = None) -> "DataStreamSink":
        """Print every record on the executors' stdout (at-least-once)."""
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
        self.sink_to(sink)
        result = self._env.execute(job_execution_name or "collect")
        records = result.collected(sink)
        return CloseableIterator(records if limit is None else records[:limit])


class KeyedStream(DataStream):
    """A stream partitioned by key; ``reduce`` and ``process`` keep state per key."""

    def __init__(self, environment, transformation: Transformation, key_selector: Callable,
                 key_type: TypeInformation | None):
        super().__init__(environment, transformation)
        self._key_selector = key_selector
        self._key_type = key_type

    def reduce(self, func: ReduceFunction | Callable) -> DataStream:
        """Rolling reduce: for each record, emit the reduction of all records so far with its key."""
        call = as_callable(func, ReduceFunction, "reduce")
        key = self._key_selector
        t = self._then("operator", "Keyed Reduce", lambda n: KeyedReduceOperator(n, func, call, key),
                       self.get_type())
        return DataStream(self._env, t)

    def process(self, func: KeyedProcessFunction, output_type: TypeInformation | None = None) -> DataStream:
        """Apply a :class:`KeyedProcessFunction`, with state scoped to each record's key."""
        if not isinstance(func, KeyedProcessFunction):
            raise TypeError(f"KeyedStream.process() expects a KeyedProcessFunction, got {type(func).__name__}")
        key = self._key_selector
        t = self._then("operator", "KeyedProcess", lambda n: KeyedProcessOperator(n, func, key), output_type)
        return DataStream(self._env, t)


class DataStreamSink(_Named):
    """The end of a stream; lets the sink be named, given a uid and a parallelism."""

    def __init__(self, transformation: Transformation):
        self._transformation = transformation


class CloseableIterator:
    """The iterator ``execute_and_collect`` returns; usable in a ``with`` block, as in PyFlink."""

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
