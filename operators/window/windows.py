"""The windows of a keyed stream, as PyFlink names them: :class:`TimeWindow`, :class:`CountWindow`,
:class:`GlobalWindow`.

A window is the namespace of a pane's state: millions of them become dict keys, so each is a small
immutable object with ``__slots__`` that hashes, compares and pickles cheaply.

>>> window = TimeWindow(0, 10)
>>> window.max_timestamp(), window.intersects(TimeWindow(10, 20)), window.cover(TimeWindow(5, 15))
(9, True, TimeWindow(start=0, end=15))
>>> TimeWindow.get_window_start_with_offset(-3, 0, 10)
-10
>>> GlobalWindow.get() is GlobalWindow.get(), CountWindow(4).max_timestamp() == MAX_WATERMARK
(True, True)
"""

from __future__ import annotations

from typing import Any, Iterable

from runtime.protocol.events import MAX_WATERMARK

__all__ = ["Window", "TimeWindow", "CountWindow", "GlobalWindow"]

def _read_only(self, name, value):
    raise AttributeError(f"{type(self).__name__} is immutable: it is a key of window state; create a new one")


class Window:
    """A bucket of elements with a largest timestamp: once the watermark passes ``max_timestamp()``, every
    element of the window has arrived.

    >>> class Day(Window):
    ...     __slots__ = ("day",)
    ...     def __init__(self, day): self.day = day
    ...     def max_timestamp(self): return (self.day + 1) * 86_400_000 - 1
    >>> Day(0).max_timestamp()
    86399999
    """

    __slots__ = ()

    def max_timestamp(self) -> int:
        """The largest timestamp that still belongs to this window."""
        raise NotImplementedError


class TimeWindow(Window):
    """The time interval ``[start, end)`` in milliseconds: ``start`` inclusive, ``end`` exclusive.

    Immutable and hashable, ordered by ``(start, end)``.

    >>> w = TimeWindow(1000, 2000)
    >>> w.start, w.end, w.max_timestamp(), w == TimeWindow(1000, 2000), w < TimeWindow(1000, 2500)
    (1000, 2000, 1999, True, True)
    >>> sorted({TimeWindow(5, 9), TimeWindow(0, 9), TimeWindow(0, 4)})
    [TimeWindow(start=0, end=4), TimeWindow(start=0, end=9), TimeWindow(start=5, end=9)]
    """

    __slots__ = ("start", "end")

    def __init__(self, start: int, end: int):
        _set_start(self, start)  # the slots' own setters: __setattr__ refuses, and these are cheaper than
        _set_end(self, end)  # object.__setattr__ for the millions of windows a job creates

    __setattr__ = _read_only
    __delattr__ = _read_only

    def max_timestamp(self) -> int:
        return self.end - 1

    def get_start(self) -> int:
        return self.start

    def get_end(self) -> int:
        return self.end

    def intersects(self, other: "TimeWindow") -> bool:
        """Whether the windows overlap or touch (``[0, 5)`` and ``[5, 9)`` do: sessions that meet merge).

        >>> TimeWindow(0, 5).intersects(TimeWindow(5, 9)), TimeWindow(0, 5).intersects(TimeWindow(6, 9))
        (True, False)
        """
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: "TimeWindow") -> "TimeWindow":
        """The smallest window that covers both.

        >>> TimeWindow(0, 5).cover(TimeWindow(8, 9))
        TimeWindow(start=0, end=9)
        """
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """The start of the window of ``window_size`` that holds ``timestamp``, window starts being
        ``offset`` modulo ``window_size``: the largest ``start <= timestamp`` with that remainder.

        Flink computes Java's ``remainder = (timestamp - offset) % window_size`` (the sign of the dividend)
        and adds ``window_size`` when the remainder is negative; Python's ``%`` (the sign of the divisor)
        gives that adjusted remainder directly, so the results agree for negative timestamps too.

        >>> [TimeWindow.get_window_start_with_offset(t, 0, 10) for t in (0, 9, 10, -1, -10, -11)]
        [0, 0, 10, -10, -10, -20]
        >>> TimeWindow.get_window_start_with_offset(7, 3, 5), TimeWindow.get_window_start_with_offset(2, -2, 5)
        (3, -2)
        """
        return timestamp - (timestamp - offset) % window_size

    @staticmethod
    def merge_windows(windows: Iterable["TimeWindow"], callback) -> None:
        """Merges overlapping (or touching) windows, as Flink's ``TimeWindow.mergeWindows``: sorts them by
        start, gathers each run of windows that intersect the cover so far, and calls
        ``callback.merge(to_be_merged, merge_result)`` for each run of more than one distinct window.
        ``to_be_merged`` is a list of distinct windows in start order (Flink passes a set).

        >>> class Print:
        ...     def merge(self, to_be_merged, merge_result): print(to_be_merged, "->", merge_result)
        >>> TimeWindow.merge_windows([TimeWindow(4, 8), TimeWindow(0, 5), TimeWindow(20, 25)], Print())
        [TimeWindow(start=0, end=5), TimeWindow(start=4, end=8)] -> TimeWindow(start=0, end=8)
        """
        ordered = sorted(windows, key=_start)  # stable, as Java's Collections.sort
        if not ordered:
            return
        runs = []
        cover = ordered[0]
        run = [cover]
        for candidate in ordered[1:]:
            if cover.intersects(candidate):
                cover = cover.cover(candidate)
                if candidate not in run:
                    run.append(candidate)
            else:
                runs.append((cover, run))
                cover, run = candidate, [candidate]
        runs.append((cover, run))
        for merge_result, to_be_merged in runs:
            if len(to_be_merged) > 1:
                callback.merge(to_be_merged, merge_result)

    def __eq__(self, other: Any) -> bool:
        return type(other) is TimeWindow and self.start == other.start and self.end == other.end

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __lt__(self, other: "TimeWindow") -> bool:
        return (self.start, self.end) < (other.start, other.end)

    def __le__(self, other: "TimeWindow") -> bool:
        return (self.start, self.end) <= (other.start, other.end)

    def __gt__(self, other: "TimeWindow") -> bool:
        return (self.start, self.end) > (other.start, other.end)

    def __ge__(self, other: "TimeWindow") -> bool:
        return (self.start, self.end) >= (other.start, other.end)

    def __reduce__(self):
        return (TimeWindow, (self.start, self.end))

    def __repr__(self) -> str:
        return f"TimeWindow(start={self.start}, end={self.end})"


_set_start = TimeWindow.start.__set__
_set_end = TimeWindow.end.__set__


def _start(window: TimeWindow) -> int:
    return window.start


class CountWindow(Window):
    """The window numbered ``id`` of a count-window assigner; it ends only with the input
    (``max_timestamp()`` is ``MAX_WATERMARK``).

    >>> CountWindow(3), CountWindow(3) == CountWindow(3), CountWindow(3).max_timestamp() == MAX_WATERMARK
    (CountWindow(id=3), True, True)
    """

    __slots__ = ("id",)

    def __init__(self, id: int):
        _set_id(self, id)

    __setattr__ = _read_only
    __delattr__ = _read_only

    def max_timestamp(self) -> int:
        return MAX_WATERMARK

    def __eq__(self, other: Any) -> bool:
        return type(other) is CountWindow and self.id == other.id

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.id)

    def __lt__(self, other: "CountWindow") -> bool:
        return self.id < other.id

    def __le__(self, other: "CountWindow") -> bool:
        return self.id <= other.id

    def __gt__(self, other: "CountWindow") -> bool:
        return self.id > other.id

    def __ge__(self, other: "CountWindow") -> bool:
        return self.id >= other.id

    def __reduce__(self):
        return (CountWindow, (self.id,))

    def __repr__(self) -> str:
        return f"CountWindow(id={self.id})"


_set_id = CountWindow.id.__set__


class GlobalWindow(Window):
    """The one window of :class:`~operators.window.assigners.GlobalWindows`: every element of a key goes
    into it, and it never ends by time (``max_timestamp()`` is ``MAX_WATERMARK``). A singleton, also after
    unpickling.

    >>> import pickle
    >>> pickle.loads(pickle.dumps(GlobalWindow.get())) is GlobalWindow.get(), GlobalWindow.get()
    (True, GlobalWindow)
    """

    __slots__ = ()
    _instance: "GlobalWindow | None" = None

    def __new__(cls):
        if GlobalWindow._instance is None:
            GlobalWindow._instance = super().__new__(cls)
        return GlobalWindow._instance

    @staticmethod
    def get() -> "GlobalWindow":
        """The singleton.

        >>> GlobalWindow.get() == GlobalWindow()
        True
        """
        return GlobalWindow()

    def max_timestamp(self) -> int:
        return MAX_WATERMARK

    def __eq__(self, other: Any) -> bool:
        return type(other) is GlobalWindow

    def __ne__(self, other: Any) -> bool:
        return type(other) is not GlobalWindow

    def __hash__(self) -> int:
        return 0

    def __lt__(self, other: "GlobalWindow") -> bool:
        return False

    def __le__(self, other: "GlobalWindow") -> bool:
        return True

    def __reduce__(self):
        return (GlobalWindow, ())

    def __repr__(self) -> str:
        return "GlobalWindow"
