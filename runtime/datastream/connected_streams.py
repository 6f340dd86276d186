"""``DataStream.connect(other)``: PyFlink's ``ConnectedStreams``, two streams into one two-input operator.

The two inputs may carry different types. ``key_by(key1, key2)`` partitions both by key, so that the records of
one key from either input meet in one subtask with one keyed state and timers.

>>> from runtime import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> orders, payments = env.from_collection([("o1", "book")]), env.from_collection([("o1", 12.5)])
>>> connected = orders.connect(payments).key_by(lambda o: o[0], lambda p: p[0])
>>> type(connected).__name__, connected.map(lambda o: o[1], lambda p: p[1]).get_name()
('ConnectedStreams', 'Co-Map')
"""

from __future__ import annotations

from typing import Callable

from operators.co_operators import CoFlatMapOperator, CoMapOperator, CoProcessOperator, KeyedCoProcessOperator
from operators.functions import (
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedCoProcessFunction,
    KeySelector,
    as_callable,
)
from runtime.errors import ApiUsageError
from runtime.graph.transformation import Transformation
from runtime.types import TypeInformation

__all__ = ["ConnectedStreams"]


def _pair(function, base: type, first: str, second: str, api_name: str) -> tuple[Callable, Callable]:
    """The two callables of a Co*Function, or of a pair of plain callables given as ``(f1, f2)``."""
    if isinstance(function, base):
        return getattr(function, first), getattr(function, second)
    raise ApiUsageError(f"{api_name}() expects a {base.__name__} (with {first} and {second}), or two functions: "
                        f"{api_name}(f1, f2); got {type(function).__name__}")


class ConnectedStreams:
    """Two streams whose records go to one two-input operator: ``map``, ``flat_map``, ``process``, and
    ``key_by(key1, key2)`` for keyed state and timers shared by both inputs.

    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> words, numbers = env.from_collection(["a"]), env.from_sequence(1, 3)
    >>> words.connect(numbers).flat_map(lambda w: [w], lambda n: [str(n)]).get_name()
    'Co-Flat Map'
    """

    def __init__(self, first, second, key1: Callable | None = None, key2: Callable | None = None):
        if first.get_schema() is not None or second.get_schema() is not None:
            raise ApiUsageError("connect() works on streams of records; call to_rows() on a columnar stream first.")
        if first.get_execution_environment() is not second.get_execution_environment():
            raise ApiUsageError("connect() needs two streams of the same StreamExecutionEnvironment.")
        self.first, self.second = first, second
        self.key1, self.key2 = key1, key2

    def key_by(self, key_selector1: KeySelector | Callable, key_selector2: KeySelector | Callable,
               key_type: TypeInformation | None = None) -> "ConnectedStreams":
        """Partition both inputs by key (each with its own selector): a key's records from either input meet
        in one subtask.

        >>> from runtime import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> a, b = env.from_collection([("k", 1)]), env.from_collection([("k", "x")])
        >>> a.connect(b).key_by(lambda r: r[0], lambda r: r[0]).key1(("k", 1))
        'k'
        """
        key1 = as_callable(key_selector1, KeySelector, "key_by")
        key2 = as_callable(key_selector2, KeySelector, "key_by")
        return ConnectedStreams(self.first.key_by(key1, key_type), self.second.key_by(key2, key_type), key1, key2)

    def _declare(self, name: str, make_operator: Callable, output_type):
        from runtime.datastream.data_stream import DataStream

        env = self.first.get_execution_environment()
        t = Transformation("operator", name, [self.first._transformation, self.second._transformation],
                           make_operator, output_type=output_type, environment=env, two_input=True)
        env._add(t)
        return DataStream(env, t)

    def map(self, func, func2: Callable | None = None, output_type: TypeInformation | None = None):
        """One output record per record of either input: a :class:`CoMapFunction` (``map1``/``map2``), or two
        plain functions ``map(f1, f2)``."""
        if func2 is not None and not isinstance(func2, TypeInformation):
            map1, map2, function = func, func2, None
        else:
            output_type = func2 if isinstance(func2, TypeInformation) else output_type
            map1, map2 = _pair(func, CoMapFunction, "map1", "map2", "map")
            function = func
        return self._declare("Co-Map", lambda n: CoMapOperator(n, function, map1, map2), output_type)

    def flat_map(self, func, func2: Callable | None = None, output_type: TypeInformation | None = None):
        """Zero or more output records per record of either input: a :class:`CoFlatMapFunction`, or two plain
        functions returning iterables."""
        if func2 is not None and not isinstance(func2, TypeInformation):
            flat1, flat2, function = func, func2, None
        else:
            output_type = func2 if isinstance(func2, TypeInformation) else output_type
            flat1, flat2 = _pair(func, CoFlatMapFunction, "flat_map1", "flat_map2", "flat_map")
            function = func
        return self._declare("Co-Flat Map", lambda n: CoFlatMapOperator(n, function, flat1, flat2), output_type)

    def process(self, func, output_type: TypeInformation | None = None):
        """A :class:`CoProcessFunction`, or on keyed connected streams a :class:`KeyedCoProcessFunction`
        (keyed state and timers shared by both inputs).

        >>> from operators.functions import KeyedCoProcessFunction
        >>> from runtime import StreamExecutionEnvironment
        >>> class Match(KeyedCoProcessFunction):
        ...     def process_element1(self, value, ctx): yield value
        ...     def process_element2(self, value, ctx): yield value
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> a, b = env.from_collection([1]), env.from_collection([2])
        >>> a.connect(b).key_by(lambda x: x, lambda x: x).process(Match()).get_name()
        'Co-Process'
        """
        if isinstance(func, KeyedCoProcessFunction):
            if self.key1 is None:
                raise ApiUsageError("A KeyedCoProcessFunction needs keyed connected streams: "
                                    "connect(other).key_by(key_selector1, key_selector2).process(...)")
            key1, key2 = self.key1, self.key2
            return self._declare("Co-Process", lambda n: KeyedCoProcessOperator(n, func, key1, key2), output_type)
        if isinstance(func, CoProcessFunction):
            if callable(getattr(func, "on_timer", None)):
                raise ApiUsageError(f"{type(func).__name__} defines on_timer(), but timers need keyed streams: "
                                    "connect(other).key_by(k1, k2) and a KeyedCoProcessFunction.")
            return self._declare("Co-Process", lambda n: CoProcessOperator(n, func), output_type)
        raise ApiUsageError(f"process() on connected streams expects a CoProcessFunction or a "
                            f"KeyedCoProcessFunction, got {type(func).__name__}")
