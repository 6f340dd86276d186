"""Evictors: remove elements from a window's pane before and/or after the window function runs, with
Flink's semantics (``CountEvictor``, ``TimeEvictor``).

The window operator hands an evictor the pane as a list of :class:`TimestampedValue`, in arrival order;
the evictor removes elements from that list in place, and what remains is what the window keeps.

>>> pane = [TimestampedValue(x, t) for x, t in [("a", 1), ("b", 5), ("c", 9)]]
>>> CountEvictor.of(2).evict_before(pane, len(pane), None, None)
>>> [e.get_value() for e in pane]
['b', 'c']
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from operators.window._arguments import NO_TIMESTAMP_MESSAGE, span_millis
from runtime.errors import ApiUsageError, InvalidRecordError

__all__ = ["TimestampedValue", "Evictor", "CountEvictor", "TimeEvictor"]

# PyFlink has no evictors; Flink's are ``Evictor<T, W extends Window>``, so ``Evictor[T, W]`` subscripts like
# ``Trigger[T, W]`` beside it.
T = TypeVar("T")
W = TypeVar("W")


class TimestampedValue:
    """An element of a pane with its timestamp (None when the record has none).

    >>> element = TimestampedValue("click", 1700)
    >>> element.get_value(), element.get_timestamp(), element.has_timestamp(), TimestampedValue("x").has_timestamp()
    ('click', 1700, True, False)
    """

    __slots__ = ("value", "timestamp")

    def __init__(self, value: Any, timestamp: int | None = None):
        self.value = value
        self.timestamp = timestamp

    def get_value(self) -> Any:
        return self.value

    def get_timestamp(self) -> int:
        """The timestamp; raises for an element without one, as Flink does."""
        if self.timestamp is None:
            raise InvalidRecordError(f"TimestampedValue({self.value!r}): {NO_TIMESTAMP_MESSAGE}.")
        return self.timestamp

    def has_timestamp(self) -> bool:
        return self.timestamp is not None

    def __eq__(self, other: Any) -> bool:
        return (type(other) is TimestampedValue and self.value == other.value
                and self.timestamp == other.timestamp)

    __hash__ = None  # mutable

    def __reduce__(self):
        return (TimestampedValue, (self.value, self.timestamp))

    def __repr__(self) -> str:
        return f"TimestampedValue({self.value!r}, {self.timestamp!r})"


class Evictor(Generic[T, W]):
    """Removes elements of a pane when its window fires: ``evict_before`` runs before the window
    function, ``evict_after`` after it. ``elements`` is the pane's list of :class:`TimestampedValue`
    (arrival order) to remove from in place; ``size`` is its length when the call began.

    >>> class DropNegatives(Evictor):
    ...     def evict_before(self, elements, size, window, evictor_context):
    ...         elements[:] = [e for e in elements if e.get_value() >= 0]
    ...     def evict_after(self, elements, size, window, evictor_context): pass
    >>> pane = [TimestampedValue(v) for v in (3, -1, 4)]
    >>> DropNegatives().evict_before(pane, 3, None, None); [e.get_value() for e in pane]
    [3, 4]
    """

    class EvictorContext:
        """What the window operator tells an evictor: its clocks.

        >>> from operators.window.testing import InMemoryTriggerContext
        >>> ctx = InMemoryTriggerContext(watermark=100)
        >>> isinstance(ctx, Evictor.EvictorContext), ctx.get_current_watermark()
        (True, 100)
        """

        def get_current_processing_time(self) -> int:
            raise NotImplementedError

        def get_current_watermark(self) -> int:
            raise NotImplementedError

    def evict_before(self, elements: list, size: int, window, evictor_context: "Evictor.EvictorContext") -> None:
        """Removes elements from ``elements`` (in place) before the window function runs."""
        raise NotImplementedError

    def evict_after(self, elements: list, size: int, window, evictor_context: "Evictor.EvictorContext") -> None:
        """Removes elements from ``elements`` (in place) after the window function ran."""
        raise NotImplementedError


class CountEvictor(Evictor):
    """Keeps at most ``max_count`` elements: evicts the earliest-arrived beyond that, before the window
    function (or after it, with ``do_evict_after=True``).

    >>> pane = [TimestampedValue(v) for v in range(5)]
    >>> CountEvictor.of(3, do_evict_after=True).evict_before(pane, 5, None, None); len(pane)
    5
    >>> CountEvictor.of(3, do_evict_after=True).evict_after(pane, 5, None, None); [e.value for e in pane]
    [2, 3, 4]
    """

    def __init__(self, max_count: int, do_evict_after: bool = False):
        if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 0:
            raise ApiUsageError(f"CountEvictor.of({max_count!r}): the count to keep must be a whole number of "
                                "at least 0.")
        self.max_count = max_count
        self.do_evict_after = bool(do_evict_after)

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> "CountEvictor":
        """An evictor keeping the last ``max_count`` elements.

        >>> CountEvictor.of(10)
        CountEvictor(10, do_evict_after=False)
        """
        return CountEvictor(max_count, do_evict_after)

    def evict_before(self, elements, size, window, evictor_context) -> None:
        if not self.do_evict_after:
            self._evict(elements, size)

    def evict_after(self, elements, size, window, evictor_context) -> None:
        if self.do_evict_after:
            self._evict(elements, size)

    def _evict(self, elements: list, size: int) -> None:
        if size > self.max_count:
            del elements[:size - self.max_count]

    def __repr__(self) -> str:
        return f"CountEvictor({self.max_count}, do_evict_after={self.do_evict_after})"


class TimeEvictor(Evictor):
    """Keeps the elements of the last ``window_time``: evicts every element whose timestamp is at or before
    the pane's largest timestamp minus ``window_time``. Does nothing to a pane whose first element has no
    timestamp (elements without one are kept).

    >>> pane = [TimestampedValue(x, t) for x, t in [("a", 1), ("b", 5), ("c", 9)]]
    >>> TimeEvictor.of(4).evict_before(pane, 3, None, None); [e.value for e in pane]
    ['c']
    """

    def __init__(self, window_time, do_evict_after: bool = False):
        self.window_size = span_millis(window_time, "TimeEvictor.of", "window time")
        if self.window_size < 0:
            raise ApiUsageError(f"TimeEvictor.of(...): the window time must not be negative, got "
                                f"{self.window_size} ms.")
        self.do_evict_after = bool(do_evict_after)

    @staticmethod
    def of(window_time, do_evict_after: bool = False) -> "TimeEvictor":
        """An evictor keeping the elements of the last ``window_time`` (``Time``, ``Duration`` or ms).

        >>> from runtime.settings.durations import Time
        >>> TimeEvictor.of(Time.seconds(1))
        TimeEvictor(1000, do_evict_after=False)
        """
        return TimeEvictor(window_time, do_evict_after)

    def evict_before(self, elements, size, window, evictor_context) -> None:
        if not self.do_evict_after:
            self._evict(elements)

    def evict_after(self, elements, size, window, evictor_context) -> None:
        if self.do_evict_after:
            self._evict(elements)

    def _evict(self, elements: list) -> None:
        if not elements or elements[0].timestamp is None:
            return
        latest = max(e.timestamp for e in elements if e.timestamp is not None)
        cutoff = latest - self.window_size
        elements[:] = [e for e in elements if e.timestamp is None or e.timestamp > cutoff]

    def __repr__(self) -> str:
        return f"TimeEvictor({self.window_size}, do_evict_after={self.do_evict_after})"
