"""Window joins and co-groups: PyFlink's ``JoinedStreams`` and ``CoGroupedStreams``
(``a.join(b).where(k1).equal_to(k2).window(assigner).apply(JoinFunction)``).

As in Flink, both streams are tagged with their side, unioned, keyed by their own key selector and windowed;
when a window fires, its elements are split by side and the function sees every pair (join) or both lists
(co-group). The window's state, triggers and lateness are those of any window (see
:mod:`operators.window.operator`).

>>> from runtime import StreamExecutionEnvironment
>>> from runtime.datastream.window import TumblingEventTimeWindows
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> clicks, buys = env.from_collection([("ann", "/a")]), env.from_collection([("ann", 12)])
>>> joined = (clicks.join(buys).where(lambda c: c[0]).equal_to(lambda b: b[0])
...           .window(TumblingEventTimeWindows.of(1000)).apply(lambda click, buy: (click[1], buy[1])))
>>> joined.get_name()
'Window(TumblingEventTimeWindows(1000, 0), EventTimeTrigger, apply)'
"""

from __future__ import annotations

from typing import Callable

from operators.functions import CoGroupFunction, Function, JoinFunction, KeySelector, as_callable
from operators.window.functions import WindowFunction
from runtime.errors import ApiUsageError
from runtime.types import TypeInformation

__all__ = ["JoinedStreams", "CoGroupedStreams"]


class _SideKey:
    """The key of a tagged record: its own side's key selector."""

    def __init__(self, first: Callable, second: Callable):
        self.first, self.second = first, second

    def __call__(self, tagged):
        return self.first(tagged[1]) if tagged[0] == 0 else self.second(tagged[1])


class _Joining(WindowFunction):
    """A fired window's tagged elements, split by side, handed to the join or co-group function."""

    def __init__(self, function, join: bool):
        self.function = function
        self.join = join

    def open(self, runtime_context):
        opener = getattr(self.function, "open", None)
        if callable(opener):
            opener(runtime_context)

    def close(self):
        closer = getattr(self.function, "close", None)
        if callable(closer):
            closer()

    def apply(self, key, window, inputs):
        first = [record for side, record in inputs if side == 0]
        second = [record for side, record in inputs if side == 1]
        if not self.join:
            co_group = self.function.co_group if isinstance(self.function, CoGroupFunction) else self.function
            result = co_group(first, second)
            return [] if result is None else list(result)
        join = self.function.join if isinstance(self.function, JoinFunction) else self.function
        return [join(a, b) for a in first for b in second]


class _Windowed:
    def __init__(self, first, second, key1, key2, assigner, join: bool):
        self.first, self.second, self.key1, self.key2 = first, second, key1, key2
        self.assigner, self.join = assigner, join
        self._trigger = self._evictor = None
        self._lateness = 0

    def trigger(self, trigger) -> "_Windowed":
        self._trigger = trigger
        return self

    def evictor(self, evictor) -> "_Windowed":
        self._evictor = evictor
        return self

    def allowed_lateness(self, time_ms) -> "_Windowed":
        self._lateness = time_ms
        return self

    def apply(self, function, output_type: TypeInformation | None = None):
        """Run ``function`` (a JoinFunction / CoGroupFunction or a plain function) on each fired window."""
        base = JoinFunction if self.join else CoGroupFunction
        if isinstance(function, Function) and not isinstance(function, base):
            raise ApiUsageError(f"apply() expects a {base.__name__} or a function, got {type(function).__name__}")
        if not callable(function) and not isinstance(function, base):
            raise ApiUsageError(f"apply() expects a {base.__name__} or a function, got {function!r}")
        tagged = (self.first.map(lambda record: (0, record))
                  .union(self.second.map(lambda record: (1, record))))
        windowed = tagged.key_by(_SideKey(self.key1, self.key2)).window(self.assigner)
        if self._trigger is not None:
            windowed = windowed.trigger(self._trigger)
        if self._evictor is not None:
            windowed = windowed.evictor(self._evictor)
        if self._lateness:
            windowed = windowed.allowed_lateness(self._lateness)
        return windowed.apply(_Joining(function, self.join), output_type)


class _Where:
    def __init__(self, first, second, key1, join: bool):
        self.first, self.second, self.key1, self.join = first, second, key1, join

    def equal_to(self, key_selector: KeySelector | Callable) -> "_EqualTo":
        return _EqualTo(self.first, self.second, self.key1, as_callable(key_selector, KeySelector, "equal_to"),
                        self.join)


class _EqualTo:
    def __init__(self, first, second, key1, key2, join: bool):
        self.first, self.second, self.key1, self.key2, self.join = first, second, key1, key2, join

    def window(self, window_assigner) -> _Windowed:
        return _Windowed(self.first, self.second, self.key1, self.key2, window_assigner, self.join)


class JoinedStreams:
    """``a.join(b)``: ``.where(key1).equal_to(key2).window(assigner).apply(JoinFunction)``.

    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> type(env.from_collection([1]).join(env.from_collection([2]))).__name__
    'JoinedStreams'
    """

    _join = True

    def __init__(self, first, second):
        for stream in (first, second):
            stream._require_records("join" if self._join else "co_group")
        self.first, self.second = first, second

    def where(self, key_selector: KeySelector | Callable) -> _Where:
        return _Where(self.first, self.second, as_callable(key_selector, KeySelector, "where"), self._join)


class CoGroupedStreams(JoinedStreams):
    """``a.co_group(b)``: ``.where(key1).equal_to(key2).window(assigner).apply(CoGroupFunction)``.

    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> type(env.from_collection([1]).co_group(env.from_collection([2]))).__name__
    'CoGroupedStreams'
    """

    _join = False
