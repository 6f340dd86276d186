"""PyFlink's ``pyflink.datastream.functions``: the user-function base classes (defined in :mod:`operators.functions`).

>>> from runtime.datastream.functions import MapFunction
>>> class Double(MapFunction):
...     def map(self, value):
...         return 2 * value
>>> Double().map(21)
42
"""

from operators.async_functions import AsyncFunction, AsyncRetryPredicate, AsyncRetryStrategy
from operators.functions import (
    BaseBroadcastProcessFunction,
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoGroupFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    JoinFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessFunction,
    ProcessJoinFunction,
    ReduceFunction,
    RuntimeContext,
    TimeDomain,
    TimerService,
)
from operators.window.functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from state_backends.descriptors import AggregateFunction

__all__ = [
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
    "AsyncFunction",
    "AsyncRetryStrategy",
    "AsyncRetryPredicate",
    "Function",
    "RuntimeContext",
    "MapFunction",
    "FlatMapFunction",
    "FilterFunction",
    "ReduceFunction",
    "KeySelector",
    "Partitioner",
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
    "WindowFunction",
    "AllWindowFunction",
    "ProcessWindowFunction",
    "ProcessAllWindowFunction",
    "AggregateFunction",
]
