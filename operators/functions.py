"""Base classes for user functions, named as in PyFlink's ``pyflink.datastream.functions``.

Every operator also accepts a plain callable (``lambda x: x * 2``); subclass these when a function needs
``open`` / ``close`` or keyed state. ``process_element`` and ``flat_map`` may ``return`` a list (or None)
or ``yield`` records.

>>> class Doubler(MapFunction):
...     def map(self, value):
...         return value * 2
>>> Doubler().map(21)
42
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Generic, Iterable, TypeVar

from runtime.errors import ApiUsageError

__all__ = [
    "Function",
    "BaseBroadcastProcessFunction",
    "RuntimeContext",
    "MapFunction",
    "FlatMapFunction",
    "FilterFunction",
    "ReduceFunction",
    "KeySelector",
    "ProcessFunction",
    "KeyedProcessFunction",
    "TimerService",
    "TimeDomain",
    "CoMapFunction",
    "CoFlatMapFunction",
    "CoProcessFunction",
    "KeyedCoProcessFunction",
    "ProcessJoinFunction",
    "JoinFunction",
    "CoGroupFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
    "as_callable",
    "Partitioner",
]

# PyFlink's type parameters of its generic functions, so that ``BroadcastProcessFunction[str, dict, str]`` and the
# like subscript as they do there.
IN1 = TypeVar("IN1")
IN2 = TypeVar("IN2")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")


class RuntimeContext:
    """What a function learns about where it runs, and its door to keyed state.

    Passed to ``open(runtime_context)``. Keyed state calls are valid only in functions applied to a
    ``KeyedStream``.

    >>> from operators.context import StreamingRuntimeContext, SubtaskInfo
    >>> ctx = StreamingRuntimeContext(SubtaskInfo("Map", subtask_index=1, parallelism=2, max_parallelism=128,
    ...                                           attempt=0))
    >>> ctx.get_task_name(), ctx.get_index_of_this_subtask(), ctx.get_number_of_parallel_subtasks()
    ('Map', 1, 2)
    """

    def get_task_name(self) -> str:
        raise NotImplementedError

    def get_index_of_this_subtask(self) -> int:
        raise NotImplementedError

    def get_number_of_parallel_subtasks(self) -> int:
        raise NotImplementedError

    def get_max_number_of_parallel_subtasks(self) -> int:
        raise NotImplementedError

    def get_attempt_number(self) -> int:
        raise NotImplementedError

    def get_job_parameter(self, key: str, default_value: str | None = None) -> str | None:
        """A global job parameter (``env.get_config().set_global_job_parameters(configuration)``)."""
        raise NotImplementedError

    def get_state(self, state_descriptor):
        raise NotImplementedError

    def get_list_state(self, state_descriptor):
        raise NotImplementedError

    def get_map_state(self, state_descriptor):
        raise NotImplementedError

    def get_reducing_state(self, state_descriptor):
        raise NotImplementedError

    def get_aggregating_state(self, state_descriptor):
        raise NotImplementedError

    def get_operator_list_state(self, state_descriptor):
        """Non-keyed list state (any operator): checkpointed, dealt round-robin on a rescaled restore."""
        raise NotImplementedError


class Function:
    """Lifecycle hooks shared by every user function.

    >>> class Tagger(Function):
    ...     def open(self, runtime_context):
    ...         self.tag = f"subtask {runtime_context.get_index_of_this_subtask()}"
    >>> from operators.context import StreamingRuntimeContext, SubtaskInfo
    >>> tagger = Tagger(); tagger.open(StreamingRuntimeContext(SubtaskInfo("Map", 0, 1, 128, 0))); tagger.tag
    'subtask 0'
    """

    def open(self, runtime_context: RuntimeContext) -> None:
        """Called once per subtask before the first record: create clients and state handles here."""

    def close(self) -> None:
        """Called once per subtask after the last record, or when the job is cancelled."""


class MapFunction(Function):
    """One output record per input record (``DataStream.map``).

    >>> class Length(MapFunction):
    ...     def map(self, value):
    ...         return len(value)
    >>> Length().map("spark")
    5
    """

    def map(self, value: Any) -> Any:
        raise NotImplementedError


class FlatMapFunction(Function):
    """Zero or more output records per input record (``DataStream.flat_map``): return a list, or yield.

    >>> class Split(FlatMapFunction):
    ...     def flat_map(self, value):
    ...         yield from value.split()
    >>> list(Split().flat_map("to be or"))
    ['to', 'be', 'or']
    """

    def flat_map(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError


class FilterFunction(Function):
    """Keeps the records for which ``filter`` returns true (``DataStream.filter``).

    >>> class Even(FilterFunction):
    ...     def filter(self, value):
    ...         return value % 2 == 0
    >>> [x for x in range(6) if Even().filter(x)]
    [0, 2, 4]
    """

    def filter(self, value: Any) -> bool:
        raise NotImplementedError


class ReduceFunction(Function):
    """Folds two records of one key into one (``KeyedStream.reduce``).

    >>> from functools import reduce
    >>> class Sum(ReduceFunction):
    ...     def reduce(self, value1, value2):
    ...         return value1 + value2
    >>> reduce(Sum().reduce, [1, 2, 3, 4])
    10
    """

    def reduce(self, value1: Any, value2: Any) -> Any:
        raise NotImplementedError


class KeySelector(Function):
    """The key of a record (``DataStream.key_by``); keys must be hashable (see :mod:`runtime.keys.stable_hash`).

    >>> class Word(KeySelector):
    ...     def get_key(self, value):
    ...         return value[0]
    >>> Word().get_key(("spark", 1))
    'spark'
    """

    def get_key(self, value: Any) -> Any:
        raise NotImplementedError


class TimeDomain(Enum):
    """Which clock a timer follows (``ctx.time_domain()`` in ``on_timer``).

    >>> TimeDomain.EVENT_TIME.name
    'EVENT_TIME'
    """

    EVENT_TIME = 0
    PROCESSING_TIME = 1


class TimerService:
    """Time and timers, from ``ctx.timer_service()`` (PyFlink's ``TimerService``).

    Timers belong to the current key and are checkpointed with its state; registering the same time twice
    for a key keeps one timer. Only keyed functions may register timers.

    >>> from operators.timers import NonKeyedTimerService
    >>> service = NonKeyedTimerService(lambda: 1_000)
    >>> isinstance(service.current_processing_time(), int), service.current_watermark()
    (True, 1000)
    """

    def current_processing_time(self) -> int:
        """The wall clock, epoch milliseconds."""
        raise NotImplementedError

    def current_watermark(self) -> int:
        """The operator's input watermark (``-2**63`` before the first one)."""
        raise NotImplementedError

    def register_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError

    def delete_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError

    def delete_processing_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError


class ProcessFunction(Function):
    """A function over every record of a (non-keyed) stream.

    ``ctx.timestamp()`` is the record's event timestamp (None without event time); ``ctx.timer_service()``
    tells the time (timers need a keyed stream and a :class:`KeyedProcessFunction`).

    >>> class Positive(ProcessFunction):
    ...     def process_element(self, value, ctx):
    ...         if value > 0:
    ...             yield value
    >>> [list(Positive().process_element(v, ProcessFunction.Context())) for v in (3, -1)]
    [[3], []]
    """

    class Context:
        def timestamp(self) -> int | None:
            """The event timestamp of the record being processed (ms), or None if it has none."""
            return None

        def timer_service(self) -> TimerService:
            raise NotImplementedError

    def process_element(self, value: Any, ctx: "ProcessFunction.Context") -> Iterable[Any] | None:
        raise NotImplementedError


class KeyedProcessFunction(Function):
    """A function over every record of a ``KeyedStream``, with state and timers scoped to the record's key.

    ``on_timer(timestamp, ctx)`` is called when a timer registered through ``ctx.timer_service()`` fires:
    event-time timers once the input watermark reaches their time (in time order, at most once each, and a
    timer may register new ones), processing-time timers once the wall clock does, also after a restart if
    they fell due meanwhile. Records emitted by an event-time timer carry its time as their timestamp.

    >>> from state_backends import ValueStateDescriptor
    >>> class CountPerKey(KeyedProcessFunction):
    ...     def open(self, runtime_context):
    ...         self.count = runtime_context.get_state(ValueStateDescriptor("count"))
    ...     def process_element(self, value, ctx):
    ...         n = (self.count.value() or 0) + 1
    ...         self.count.update(n)
    ...         yield ctx.get_current_key(), n
    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> env.from_collection(["a", "b", "a"]).key_by(lambda w: w).process(CountPerKey()).get_name()
    'KeyedProcess'
    """

    class Context(ProcessFunction.Context):
        def get_current_key(self) -> Any:
            raise NotImplementedError

    class OnTimerContext(Context):
        def time_domain(self) -> TimeDomain:
            """Whether the firing timer is an event-time or a processing-time timer."""
            raise NotImplementedError

    def process_element(self, value: Any, ctx: "KeyedProcessFunction.Context") -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: "KeyedProcessFunction.OnTimerContext") -> Iterable[Any] | None:
        """A timer of the current key fired at ``timestamp``: return or yield records to emit."""


class CoMapFunction(Function):
    """One output record per record of either input of ``connect``-ed streams: ``map1`` for the first input's
    records, ``map2`` for the second's.

    >>> class Tag(CoMapFunction):
    ...     def map1(self, value):
    ...         return "order", value
    ...     def map2(self, value):
    ...         return "payment", value
    >>> Tag().map1(7), Tag().map2(9)
    (('order', 7), ('payment', 9))
    """

    def map1(self, value: Any) -> Any:
        raise NotImplementedError

    def map2(self, value: Any) -> Any:
        raise NotImplementedError


class CoFlatMapFunction(Function):
    """Zero or more output records per record of either input of ``connect``-ed streams.

    >>> class Words(CoFlatMapFunction):
    ...     def flat_map1(self, value):
    ...         yield from value.split()
    ...     def flat_map2(self, value):
    ...         yield value.upper()
    >>> list(Words().flat_map1("to be")), list(Words().flat_map2("or"))
    (['to', 'be'], ['OR'])
    """

    def flat_map1(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError

    def flat_map2(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError


class CoProcessFunction(Function):
    """A function over the records of two ``connect``-ed streams: ``process_element1`` for the first input's,
    ``process_element2`` for the second's, each with a context (``timestamp()``, ``timer_service()``).

    >>> class Both(CoProcessFunction):
    ...     def process_element1(self, value, ctx):
    ...         yield "left", value
    ...     def process_element2(self, value, ctx):
    ...         yield "right", value
    >>> list(Both().process_element1(1, None)), list(Both().process_element2(2, None))
    ([('left', 1)], [('right', 2)])
    """

    Context = ProcessFunction.Context

    def process_element1(self, value: Any, ctx) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_element2(self, value: Any, ctx) -> Iterable[Any] | None:
        raise NotImplementedError


class KeyedCoProcessFunction(Function):
    """A function over two ``connect``-ed streams keyed alike (``connect(...).key_by(key1, key2)``): both
    inputs' records of a key see the same keyed state and timers, as in Flink. ``on_timer`` works as in
    :class:`KeyedProcessFunction`.

    >>> class Matched(KeyedCoProcessFunction):
    ...     def process_element1(self, value, ctx):
    ...         yield "order", value
    ...     def process_element2(self, value, ctx):
    ...         yield "payment", value
    >>> list(Matched().process_element2(5, None))
    [('payment', 5)]
    """

    Context = KeyedProcessFunction.Context
    OnTimerContext = KeyedProcessFunction.OnTimerContext

    def process_element1(self, value: Any, ctx) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_element2(self, value: Any, ctx) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx) -> Iterable[Any] | None:
        """A timer of the current key fired at ``timestamp``: return or yield records to emit."""


class ProcessJoinFunction(Function):
    """Called for every joined pair of an interval join (``KeyedStream.interval_join(other).between(lower,
    upper).process(...)``); ``ctx.get_left_timestamp()``, ``get_right_timestamp()`` and ``get_timestamp()`` (the
    later one, the pair's timestamp) tell the times.

    >>> class Pair(ProcessJoinFunction):
    ...     def process_element(self, left, right, ctx):
    ...         yield left["user"], left["page"], right["amount"]
    >>> list(Pair().process_element({"user": "ann", "page": "/buy"}, {"amount": 12}, None))
    [('ann', '/buy', 12)]
    """

    def process_element(self, left: Any, right: Any, ctx) -> Iterable[Any] | None:
        raise NotImplementedError


class JoinFunction(Function):
    """Joins one element of each side that share a key and a window (``JoinedStreams...apply``).

    >>> class Pair(JoinFunction):
    ...     def join(self, first, second):
    ...         return first, second
    >>> Pair().join("a", 1)
    ('a', 1)
    """

    def join(self, first: Any, second: Any) -> Any:
        raise NotImplementedError


class CoGroupFunction(Function):
    """Sees both sides' elements of a key and window at once (``CoGroupedStreams...apply``), also when one side
    has none: return or yield records.

    >>> class Sizes(CoGroupFunction):
    ...     def co_group(self, first, second):
    ...         yield len(list(first)), len(list(second))
    >>> list(Sizes().co_group(["a"], []))
    [(1, 0)]
    """

    def co_group(self, first: Iterable[Any], second: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError


class BaseBroadcastProcessFunction(Function):
    """What :class:`BroadcastProcessFunction` and :class:`KeyedBroadcastProcessFunction` have in common (PyFlink's
    base of both): ``isinstance(f, BaseBroadcastProcessFunction)`` holds for either."""


class BroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[IN1, IN2, OUT]):
    """Processes a stream connected with a broadcast stream (``stream.connect(rules.broadcast(descriptor))``):
    ``process_broadcast_element`` sees every broadcast record on every subtask and may change the broadcast
    state (``ctx.get_broadcast_state(descriptor)``); ``process_element`` sees this subtask's share of the other
    stream and may only read it. Every subtask must change its broadcast state alike for a broadcast record,
    whatever the order in which broadcast records arrive: that is what keeps the copies equal.

    >>> from state_backends import MapStateDescriptor
    >>> RATES = MapStateDescriptor("rates")
    >>> class Convert(BroadcastProcessFunction):
    ...     def process_broadcast_element(self, rate, ctx):
    ...         ctx.get_broadcast_state(RATES).put(rate[0], rate[1])
    ...     def process_element(self, price, ctx):
    ...         rate = ctx.get_broadcast_state(RATES).get(price[0])
    ...         if rate is not None:
    ...             yield price[1] * rate
    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> rates = env.from_collection([("EUR", 1.1)]).broadcast(RATES)
    >>> env.from_collection([("EUR", 10.0)]).connect(rates).process(Convert()).get_name()
    'Broadcast-Process'
    """

    class ReadOnlyContext(ProcessFunction.Context):
        """The ``ctx`` of ``process_element``: the broadcast state, read-only."""

        def get_broadcast_state(self, state_descriptor):
            raise NotImplementedError

        def current_processing_time(self) -> int:
            raise NotImplementedError

        def current_watermark(self) -> int:
            raise NotImplementedError

    class Context(ReadOnlyContext):
        """The ``ctx`` of ``process_broadcast_element``: the broadcast state, writable."""

    def process_element(self, value: Any, ctx: "BroadcastProcessFunction.ReadOnlyContext") -> Iterable[Any] | None:
        raise NotImplementedError

    def process_broadcast_element(self, value: Any, ctx: "BroadcastProcessFunction.Context") -> Iterable[Any] | None:
        raise NotImplementedError


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[KEY, IN1, IN2, OUT]):
    """:class:`BroadcastProcessFunction` on a keyed stream (``keyed.connect(broadcast_stream)``): ``process_element``
    also has keyed state, ``ctx.get_current_key()`` and timers (``on_timer`` as in :class:`KeyedProcessFunction`);
    ``process_broadcast_element`` may visit the keyed state of every key of this subtask with
    ``ctx.apply_to_keyed_state(descriptor, function(key, state))``.

    >>> from state_backends import MapStateDescriptor
    >>> LIMITS = MapStateDescriptor("limits")
    >>> class OverLimit(KeyedBroadcastProcessFunction):
    ...     def process_broadcast_element(self, limit, ctx):
    ...         ctx.get_broadcast_state(LIMITS).put("max", limit)
    ...     def process_element(self, reading, ctx):
    ...         limit = ctx.get_broadcast_state(LIMITS).get("max")
    ...         if limit is not None and reading[1] > limit:
    ...             yield ctx.get_current_key(), reading[1]
    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> limits = env.from_collection([50]).broadcast(LIMITS)
    >>> readings = env.from_collection([("s1", 70)]).key_by(lambda r: r[0])
    >>> readings.connect(limits).process(OverLimit()).get_name()
    'Keyed-Broadcast-Process'
    """

    class ReadOnlyContext(BroadcastProcessFunction.ReadOnlyContext):
        def get_current_key(self) -> Any:
            raise NotImplementedError

    class Context(BroadcastProcessFunction.Context):
        def apply_to_keyed_state(self, state_descriptor, function) -> None:
            """Call ``function(key, state)`` for every key of this subtask that has ``state_descriptor``'s state."""
            raise NotImplementedError

    class OnTimerContext(ReadOnlyContext):
        def time_domain(self) -> TimeDomain:
            raise NotImplementedError

    def process_element(self, value: Any, ctx: "KeyedBroadcastProcessFunction.ReadOnlyContext"
                        ) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_broadcast_element(self, value: Any, ctx: "KeyedBroadcastProcessFunction.Context"
                                  ) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: "KeyedBroadcastProcessFunction.OnTimerContext") -> Iterable[Any] | None:
        """A timer of the current key fired at ``timestamp``: return or yield records to emit."""


class Partitioner(Function):
    """Chooses the consumer subtask of a key (``DataStream.partition_custom``): a number in
    ``[0, num_partitions)``.

    >>> class ByFirstLetter(Partitioner):
    ...     def partition(self, key, num_partitions):
    ...         return ord(key[0]) % num_partitions
    >>> ByFirstLetter().partition("spark", 4)
    3
    """

    def partition(self, key: Any, num_partitions: int) -> int:
        raise NotImplementedError


_METHOD_OF = {
    MapFunction: "map",
    FlatMapFunction: "flat_map",
    FilterFunction: "filter",
    ReduceFunction: "reduce",
    KeySelector: "get_key",
    Partitioner: "partition",
}


def as_callable(function: Any, base: type, api_name: str):
    """The plain callable behind ``function``: a ``base`` subclass's method, or the callable itself."""
    if isinstance(function, base):
        return getattr(function, _METHOD_OF[base])
    if isinstance(function, Function):
        raise ApiUsageError(
            f"{api_name}() expects a {base.__name__} or a callable, got a {type(function).__name__}"
        )
    if not callable(function):
        raise ApiUsageError(f"{api_name}() expects a {base.__name__} or a callable, got {function!r}")
    return function
