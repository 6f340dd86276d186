"""``KeyedStream.window(...)`` and ``DataStream.window_all(...)``: PyFlink's ``WindowedStream`` and
``AllWindowedStream``.

Configure the window (``trigger``, ``evictor``, ``allowed_lateness``, ``side_output_late_data``), then end it
with a window function: ``reduce`` or ``aggregate`` keep one accumulator per key and window, ``process`` and
``apply`` keep the elements (``reduce``/``aggregate`` with a ``window_function`` give it the one result).

>>> from runtime import StreamExecutionEnvironment
>>> from runtime.datastream.window import TumblingEventTimeWindows
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> counts = (env.from_collection([("a", 1), ("b", 2)]).key_by(lambda r: r[0])
...           .window(TumblingEventTimeWindows.of(1000)).reduce(lambda x, y: (x[0], x[1] + y[1])))
>>> counts.get_name()
'Window(TumblingEventTimeWindows(1000, 0), EventTimeTrigger, reduce)'
"""

from __future__ import annotations

from typing import Any, Callable

from operators.functions import ReduceFunction, as_callable
from operators.window import Evictor, MergingWindowAssigner, Trigger, WindowAssigner
from operators.window.assigners import CountSlidingWindowAssigner, CountTumblingWindowAssigner
from operators.window.functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from operators.window.operator import Aggregate, Elements, Reduce, WindowOperator
from runtime.settings.parsers import parse_duration_ms
from runtime.errors import ApiUsageError
from runtime.side_outputs import OutputTag
from runtime.types import TypeInformation

__all__ = ["WindowedStream", "AllWindowedStream"]


class WindowedStream:
    """A keyed stream cut into windows (``KeyedStream.window(assigner)``); end it with a window function.

    >>> from runtime import StreamExecutionEnvironment
    >>> from runtime.datastream.window import EventTimeSessionWindows
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> sessions = env.from_collection(["a"]).key_by(lambda r: r).window(EventTimeSessionWindows.with_gap(500))
    >>> sessions.allowed_lateness(100).reduce(lambda a, b: a).get_name()
    'Window(EventTimeSessionWindows(500), EventTimeTrigger, reduce)'
    """

    _all = False

    def __init__(self, keyed_stream, window_assigner: WindowAssigner):
        if not isinstance(window_assigner, WindowAssigner):
            raise ApiUsageError(f"window() expects a WindowAssigner (e.g. TumblingEventTimeWindows.of(...)), got "
                                f"{type(window_assigner).__name__}")
        keyed_stream._require_records("window")
        self._stream = keyed_stream
        self._assigner = window_assigner
        self._trigger: Trigger | None = None
        self._evictor: Evictor | None = None
        self._lateness = 0
        self._late_tag: OutputTag | None = None

    def get_execution_environment(self):
        return self._stream.get_execution_environment()

    def get_input_type(self) -> TypeInformation | None:
        return self._stream.get_type()

    def trigger(self, trigger: Trigger) -> "WindowedStream":
        """Fire (and purge) panes with ``trigger`` instead of the assigner's default one."""
        if not isinstance(trigger, Trigger):
            raise ApiUsageError(f"trigger() expects a Trigger, got {type(trigger).__name__}")
        self._trigger = trigger
        return self

    def evictor(self, evictor: Evictor) -> "WindowedStream":
        """Remove elements from a pane before and/or after the function sees it (keeps all elements)."""
        if not isinstance(evictor, Evictor):
            raise ApiUsageError(f"evictor() expects an Evictor, got {type(evictor).__name__}")
        self._evictor = evictor
        return self

    def allowed_lateness(self, time_ms) -> "WindowedStream":
        """Keep a window's state this long (ms, ``Time`` or ``Duration``) after the watermark passed its end: a
        late record within it fires the window again with the record added."""
        lateness = parse_duration_ms(time_ms, "allowed_lateness")
        if lateness < 0:
            raise ApiUsageError(f"allowed_lateness({lateness}): the lateness cannot be negative.")
        self._lateness = lateness
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> "WindowedStream":
        """Records too late for every window they belong to go to ``output_tag``
        (``result.get_side_output(output_tag)``) instead of being dropped."""
        if not isinstance(output_tag, OutputTag):
            raise ApiUsageError(f"side_output_late_data() expects an OutputTag, got {type(output_tag).__name__}")
        self._late_tag = output_tag
        return self

    # -- window functions

    def reduce(self, reduce_function: ReduceFunction | Callable, window_function=None,
               output_type: TypeInformation | None = None):
        """One reduced value per key and window (``window_function``, if given, gets it as its only input)."""
        call = as_callable(reduce_function, ReduceFunction, "reduce")
        return self._build("reduce", Reduce(call), window_function,
                           output_type if output_type is not None or window_function is not None
                           else self._stream.get_type())

    def aggregate(self, aggregate_function, window_function=None, accumulator_type: TypeInformation | None = None,
                  output_type: TypeInformation | None = None):
        """An ``AggregateFunction``'s result per key and window, its accumulator updated record by record."""
        for method in ("create_accumulator", "add", "get_result"):
            if not callable(getattr(aggregate_function, method, None)):
                raise ApiUsageError(f"aggregate() expects an AggregateFunction (create_accumulator, add, get_result, "
                                    f"merge), got {type(aggregate_function).__name__} without {method}()")
        return self._build("aggregate", Aggregate(aggregate_function), window_function, output_type)

    def apply(self, window_function, output_type: TypeInformation | None = None):
        """A ``WindowFunction`` (``AllWindowFunction`` on ``window_all``) over each fired pane's elements."""
        expected = AllWindowFunction if self._all else WindowFunction
        if not isinstance(window_function, expected) and not callable(window_function):
            raise ApiUsageError(f"apply() expects a {expected.__name__}, got {type(window_function).__name__}")
        return self._build("apply", Elements(), window_function, output_type)

    def process(self, process_window_function, output_type: TypeInformation | None = None):
        """A ``ProcessWindowFunction`` (``ProcessAllWindowFunction`` on ``window_all``) over each fired pane."""
        expected = ProcessAllWindowFunction if self._all else ProcessWindowFunction
        if not isinstance(process_window_function, expected):
            raise ApiUsageError(f"process() expects a {expected.__name__}, got "
                                f"{type(process_window_function).__name__}")
        return self._build("process", Elements(), process_window_function, output_type)

    def _check_window_function(self, window_function) -> None:
        if window_function is None:
            return
        allowed = (AllWindowFunction, ProcessAllWindowFunction) if self._all else (WindowFunction,
                                                                                  ProcessWindowFunction)
        if not isinstance(window_function, allowed) and not callable(window_function):
            raise ApiUsageError(f"window_function must be one of {[c.__name__ for c in allowed]}, got "
                                f"{type(window_function).__name__}")

    def _build(self, kind: str, contents, window_function: Any, output_type):
        from runtime.datastream.data_stream import DataStream

        self._check_window_function(window_function)
        assigner, evictor, lateness, late_tag = self._assigner, self._evictor, self._lateness, self._late_tag
        trigger = self._trigger if self._trigger is not None else assigner.get_default_trigger()
        if isinstance(assigner, MergingWindowAssigner) and not trigger.can_merge():
            raise ApiUsageError(f"{assigner!r} merges windows, but trigger {trigger!r} cannot merge their state "
                                "(its can_merge() is false): use a trigger that can, e.g. EventTimeTrigger or "
                                "CountTrigger, or implement can_merge() and on_merge() in yours.")
        key_selector = self._stream._key_selector
        name = f"Window({assigner!r}, {type(trigger).__name__}, {kind})"
        if self._all:
            name = name.replace("Window(", "WindowAll(", 1)
        stream = self._stream
        t = stream._then("operator", name,
                         lambda n: WindowOperator(n, key_selector, assigner, trigger, evictor, lateness, late_tag,
                                                  contents, window_function),
                         output_type)
        if self._all:
            t.parallelism = 1  # one subtask sees every record, as in Flink
        return DataStream(stream._env, t)


class AllWindowedStream(WindowedStream):
    """All records of a stream cut into windows by one subtask (``DataStream.window_all(assigner)``).

    >>> from runtime import StreamExecutionEnvironment
    >>> from runtime.datastream.window import TumblingEventTimeWindows
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> env.from_collection([1, 2]).window_all(TumblingEventTimeWindows.of(10)).reduce(max).get_name()
    'WindowAll(TumblingEventTimeWindows(10, 0), EventTimeTrigger, reduce)'
    """

    _all = True


def count_assigner(size: int, slide: int = 0) -> WindowAssigner:
    """``count_window(size[, slide])``'s assigner: panes of ``size`` records per key, every ``slide`` records
    once ``size`` have arrived (PyFlink's semantics).

    >>> count_assigner(3, 1)
    CountSlidingWindowAssigner(3, 1)
    """
    return CountSlidingWindowAssigner.of(size, slide) if slide else CountTumblingWindowAssigner.of(size)
