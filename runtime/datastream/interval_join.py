"""``KeyedStream.interval_join(other)``: PyFlink's ``IntervalJoin`` and ``IntervalJoined``.

>>> from runtime import StreamExecutionEnvironment
>>> from operators import ProcessJoinFunction
>>> class Pair(ProcessJoinFunction):
...     def process_element(self, left, right, ctx):
...         yield left, right
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> clicks, buys = env.from_collection([("ann", 1)]), env.from_collection([("ann", 2)])
>>> joined = clicks.key_by(lambda c: c[0]).interval_join(buys.key_by(lambda b: b[0])).between(-1000, 5000)
>>> joined.process(Pair()).get_name()
'Interval Join'
"""

from __future__ import annotations

from operators.functions import ProcessJoinFunction
from operators.interval_join import IntervalJoinOperator
from runtime.errors import ApiUsageError
from runtime.graph.transformation import Transformation
from runtime.settings.parsers import parse_duration_ms
from runtime.types import TypeInformation

__all__ = ["IntervalJoin", "IntervalJoined"]


class IntervalJoin:
    """Two keyed streams to join by time: give the bounds with :meth:`between`.

    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> a, b = env.from_collection([1]).key_by(lambda x: x), env.from_collection([1]).key_by(lambda x: x)
    >>> type(a.interval_join(b).between(0, 10)).__name__
    'IntervalJoined'
    """

    def __init__(self, left, right):
        self.left, self.right = left, right

    def between(self, lower_bound, upper_bound) -> "IntervalJoined":
        """Join a left record at ``t`` with the right records of its key in ``[t + lower, t + upper]``
        (``Time``, ``Duration`` or ms; negative bounds reach into the past)."""
        lower, upper = (parse_duration_ms(lower_bound, "between(lower_bound)", negative=True),
                        parse_duration_ms(upper_bound, "between(upper_bound)", negative=True))
        if lower > upper:
            raise ApiUsageError(f"interval_join(...).between({lower}, {upper}): the lower bound is above the upper "
                                "one, so nothing could ever join: swap them.")
        return IntervalJoined(self.left, self.right, lower, upper)


class IntervalJoined:
    """An interval join with its bounds; ``lower_bound_exclusive()`` / ``upper_bound_exclusive()``, then
    ``process(ProcessJoinFunction)``.

    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> a, b = env.from_collection([1]).key_by(lambda x: x), env.from_collection([1]).key_by(lambda x: x)
    >>> a.interval_join(b).between(0, 10).upper_bound_exclusive().upper_inclusive
    False
    """

    def __init__(self, left, right, lower: int, upper: int):
        self.left, self.right = left, right
        self.lower, self.upper = lower, upper
        self.lower_inclusive = self.upper_inclusive = True

    def lower_bound_exclusive(self) -> "IntervalJoined":
        self.lower_inclusive = False
        return self

    def upper_bound_exclusive(self) -> "IntervalJoined":
        self.upper_inclusive = False
        return self

    def process(self, process_join_function: ProcessJoinFunction, output_type: TypeInformation | None = None):
        """Run ``process_join_function`` on every joined pair; the result is a plain stream."""
        from runtime.datastream.data_stream import DataStream

        if not isinstance(process_join_function, ProcessJoinFunction):
            raise ApiUsageError(f"interval_join(...).process() expects a ProcessJoinFunction, got "
                                f"{type(process_join_function).__name__}")
        left, right = self.left, self.right
        key1, key2 = left._key_selector, right._key_selector
        lower, upper, lower_in, upper_in = self.lower, self.upper, self.lower_inclusive, self.upper_inclusive
        env = left.get_execution_environment()
        t = Transformation("operator", "Interval Join", [left._transformation, right._transformation],
                           lambda n: IntervalJoinOperator(n, process_join_function, key1, key2, lower, upper,
                                                          lower_in, upper_in),
                           output_type=output_type, environment=env, two_input=True)
        env._add(t)
        return DataStream(env, t)
