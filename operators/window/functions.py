"""The user functions of windows, as PyFlink names them: ``WindowFunction`` / ``AllWindowFunction``
(``apply``) and ``ProcessWindowFunction`` / ``ProcessAllWindowFunction`` (``process``, with a context).

Each is called when a pane fires, with the pane's elements, and returns (or yields) the records to emit;
the records it emits carry the window's ``max_timestamp()`` as their timestamp. Like PyFlink's, they are generic
(``ProcessWindowFunction[IN, OUT, KEY, W]``, ``ProcessWindowFunction.Context[W]``) for typed user code.

>>> from operators.window.windows import TimeWindow
>>> class Count(WindowFunction):
...     def apply(self, key, window, inputs):
...         return [(key, window.start, len(list(inputs)))]
>>> Count().apply("alice", TimeWindow(0, 10), ["a", "b"])
[('alice', 0, 2)]
"""

from __future__ import annotations

from typing import Any, Generic, Iterable, TypeVar

from operators.functions import Function

__all__ = ["WindowFunction", "AllWindowFunction", "ProcessWindowFunction", "ProcessAllWindowFunction"]

# PyFlink's type parameters, in its order: ``ProcessWindowFunction[IN, OUT, KEY, W]`` and
# ``ProcessWindowFunction.Context[W2]`` subscript as they do there.
IN = TypeVar("IN")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")
W = TypeVar("W")
W2 = TypeVar("W2")


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """A function over the elements of one key's pane when its window fires (``WindowedStream.apply``).

    >>> from operators.window.windows import TimeWindow
    >>> class Total(WindowFunction):
    ...     def apply(self, key, window, inputs):
    ...         yield key, window.max_timestamp(), sum(inputs)
    >>> list(Total().apply("k", TimeWindow(0, 60), [1, 2, 3]))
    [('k', 59, 6)]
    """

    def apply(self, key: Any, window, inputs: Iterable[Any]) -> Iterable[Any]:
        """Evaluates the window: ``key`` is the key of the pane, ``window`` the window being evaluated,
        ``inputs`` its elements. Returns (or yields) zero or more records."""
        raise NotImplementedError


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    """A function over the elements of a pane of a non-keyed window (``AllWindowedStream.apply``).

    >>> from operators.window.windows import GlobalWindow
    >>> class Largest(AllWindowFunction):
    ...     def apply(self, window, inputs):
    ...         return [max(inputs)]
    >>> Largest().apply(GlobalWindow.get(), [3, 9, 4])
    [9]
    """

    def apply(self, window, inputs: Iterable[Any]) -> Iterable[Any]:
        """Evaluates ``window`` over its elements ``inputs``; returns (or yields) zero or more records."""
        raise NotImplementedError


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """A function over the elements of one key's pane, with a context: the window, the clocks, per-window
    and per-key state, and side outputs (``WindowedStream.process``).

    >>> from operators.window.windows import TimeWindow
    >>> class Summary(ProcessWindowFunction):
    ...     def process(self, key, context, elements):
    ...         yield key, context.window().start, context.current_watermark(), len(list(elements))
    >>> class Ctx(ProcessWindowFunction.Context):
    ...     def window(self): return TimeWindow(0, 10)
    ...     def current_watermark(self): return 9
    >>> list(Summary().process("k", Ctx(), "abc"))
    [('k', 0, 9, 3)]
    """

    class Context(Generic[W2]):
        """The context of ``process`` and ``clear``.

        ``window_state()`` and ``global_state()`` are state stores with PyFlink's ``KeyedStateStore``
        methods (``get_state``, ``get_list_state``, ``get_map_state``, ``get_reducing_state``,
        ``get_aggregating_state``, each taking a state descriptor): scoped to the key and window, and to the
        key alone. ``output(output_tag, value)`` emits ``value`` to the side output of ``output_tag``.

        >>> class Ctx(ProcessWindowFunction.Context):
        ...     def current_processing_time(self): return 1700000000000
        >>> Ctx().current_processing_time()
        1700000000000
        """

        def window(self):
            """The window being evaluated."""
            raise NotImplementedError

        def current_processing_time(self) -> int:
            """The current processing time (epoch milliseconds)."""
            raise NotImplementedError

        def current_watermark(self) -> int:
            """The current event-time watermark."""
            raise NotImplementedError

        def window_state(self):
            """State of the current key and window. A function that uses it must clean it up in ``clear``."""
            raise NotImplementedError

        def global_state(self):
            """State of the current key, shared by all its windows."""
            raise NotImplementedError

        def output(self, output_tag, value: Any) -> None:
            """Emits ``value`` to the side output named by ``output_tag`` (an ``OutputTag``)."""
            raise NotImplementedError

    def process(self, key: Any, context: "ProcessWindowFunction.Context", elements: Iterable[Any]) -> Iterable[Any]:
        """Evaluates the window of ``context.window()`` for ``key`` over ``elements``; returns (or yields)
        zero or more records."""
        raise NotImplementedError

    def clear(self, context: "ProcessWindowFunction.Context") -> None:
        """Called when the window is dropped (for event time: once the watermark passes its
        ``max_timestamp()`` plus the allowed lateness): delete its per-window state here."""


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """A function over the elements of a pane of a non-keyed window, with a context
    (``AllWindowedStream.process``).

    >>> from operators.window.windows import TimeWindow
    >>> class Span(ProcessAllWindowFunction):
    ...     def process(self, context, elements):
    ...         return [(context.window().end - context.window().start, sorted(elements))]
    >>> class Ctx(ProcessAllWindowFunction.Context):
    ...     def window(self): return TimeWindow(10, 20)
    >>> Span().process(Ctx(), [3, 1])
    [(10, [1, 3])]
    """

    class Context(Generic[W2]):
        """The context of ``process`` and ``clear``: as :class:`ProcessWindowFunction.Context`, without a key
        (``global_state()`` is the state of the operator's single pseudo-key).

        >>> class Ctx(ProcessAllWindowFunction.Context):
        ...     def current_watermark(self): return -1
        >>> Ctx().current_watermark()
        -1
        """

        def window(self):
            """The window being evaluated."""
            raise NotImplementedError

        def current_processing_time(self) -> int:
            """The current processing time (epoch milliseconds)."""
            raise NotImplementedError

        def current_watermark(self) -> int:
            """The current event-time watermark."""
            raise NotImplementedError

        def window_state(self):
            """State of the current window. A function that uses it must clean it up in ``clear``."""
            raise NotImplementedError

        def global_state(self):
            """State shared by all windows."""
            raise NotImplementedError

        def output(self, output_tag, value: Any) -> None:
            """Emits ``value`` to the side output named by ``output_tag`` (an ``OutputTag``)."""
            raise NotImplementedError

    def process(self, context: "ProcessAllWindowFunction.Context", elements: Iterable[Any]) -> Iterable[Any]:
        """Evaluates the window of ``context.window()`` over ``elements``; returns (or yields) zero or more
        records."""
        raise NotImplementedError

    def clear(self, context: "ProcessAllWindowFunction.Context") -> None:
        """Called when the window is dropped: delete its per-window state here."""
