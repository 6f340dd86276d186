"""Window assigners: which windows an element belongs to, with Flink's semantics and PyFlink's names.

Sizes, slides, offsets and gaps are a ``Time``, a ``Duration`` or a whole number of milliseconds, checked
where the job is declared. Event-time assigners window by the record's timestamp, processing-time ones by
the clock of the operator (``context.get_current_processing_time()``).

>>> from runtime.settings.durations import Time
>>> TumblingEventTimeWindows.of(Time.seconds(10)).assign_windows("x", 12_345, None)
[TimeWindow(start=10000, end=20000)]
>>> SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)).assign_windows("x", 12_345, None)
[TimeWindow(start=10000, end=20000), TimeWindow(start=5000, end=15000)]
>>> EventTimeSessionWindows.with_gap(Time.minutes(1)).assign_windows("x", 0, None)
[TimeWindow(start=0, end=60000)]
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Generic, Iterable, TypeVar

from operators.window._arguments import NO_TIMESTAMP_MESSAGE, positive_count, positive_span, span_millis
from operators.window.evictors import CountEvictor, Evictor
from operators.window.triggers import (
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerResult,
)
from operators.window.windows import GlobalWindow, TimeWindow
from runtime.errors import ApiUsageError, FunctionContractError, InvalidRecordError
from state_backends.descriptors import ReducingStateDescriptor

__all__ = [
    "WindowAssigner",
    "MergingWindowAssigner",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "SessionWindowTimeGapExtractor",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "GlobalWindows",
    "CountTumblingWindowAssigner",
    "CountSlidingWindowAssigner",
    "count_window_parts",
]

# PyFlink's type parameters: ``WindowAssigner[T, W]`` assigns elements of type T to windows of type W; each built-in
# assigner keeps T free (``TumblingEventTimeWindows[T]``) and names the windows it assigns.
T = TypeVar("T")
W = TypeVar("W")
W2 = TypeVar("W2")


class WindowAssigner(Generic[T, W]):
    """Assigns each element zero or more windows. Elements of one key and one window form a pane, which
    the assigner's trigger (``get_default_trigger`` unless the job sets one) fires.

    >>> class EvenOdd(WindowAssigner):
    ...     def assign_windows(self, element, timestamp, context):
    ...         return [TimeWindow(element % 2, element % 2 + 1)]
    ...     def get_default_trigger(self, env=None): return NeverTrigger()
    ...     def is_event_time(self): return False
    >>> EvenOdd().assign_windows(7, None, None), EvenOdd().get_default_evictor()
    ([TimeWindow(start=1, end=2)], None)
    """

    class WindowAssignerContext:
        """What the window operator tells an assigner: the current processing time.

        >>> class At(WindowAssigner.WindowAssignerContext):
        ...     def get_current_processing_time(self): return 1234
        >>> TumblingProcessingTimeWindows.of(1000).assign_windows("x", None, At())
        [TimeWindow(start=1000, end=2000)]
        """

        def get_current_processing_time(self) -> int:
            raise NotImplementedError

    def assign_windows(self, element: Any, timestamp: int | None,
                       context: "WindowAssigner.WindowAssignerContext") -> Collection:
        """The windows of ``element`` (``timestamp`` is None for a record without one)."""
        raise NotImplementedError

    def get_default_trigger(self, env=None) -> Trigger:
        """The trigger of windows of this assigner when the job sets none."""
        raise NotImplementedError

    def is_event_time(self) -> bool:
        """Whether windows end by the watermark (True) or by the processing-time clock (False)."""
        raise NotImplementedError

    def get_default_evictor(self) -> Evictor | None:
        """The evictor windows of this assigner need when the job sets none (Chandy's addition, for count
        windows); None for every time-based assigner."""
        return None


class MergingWindowAssigner(WindowAssigner[T, W]):
    """An assigner whose windows may merge (sessions): the window operator keeps the windows in flight per
    key and asks ``merge_windows`` which of them merge after each new one.

    >>> class Print(MergingWindowAssigner.MergeCallback):
    ...     def merge(self, to_be_merged, merge_result): print(len(to_be_merged), "->", merge_result)
    >>> EventTimeSessionWindows.with_gap(5).merge_windows([TimeWindow(0, 5), TimeWindow(3, 8)], Print())
    2 -> TimeWindow(start=0, end=8)
    """

    class MergeCallback(Generic[W2]):
        """Told by ``merge_windows`` which windows merge into which.

        >>> class Collect(MergingWindowAssigner.MergeCallback):
        ...     def __init__(self): self.merges = []
        ...     def merge(self, to_be_merged, merge_result): self.merges.append((list(to_be_merged), merge_result))
        >>> collect = Collect(); TimeWindow.merge_windows([TimeWindow(0, 2), TimeWindow(2, 4)], collect)
        >>> collect.merges
        [([TimeWindow(start=0, end=2), TimeWindow(start=2, end=4)], TimeWindow(start=0, end=4))]
        """

        def merge(self, to_be_merged: Iterable, merge_result) -> None:
            raise NotImplementedError

    def merge_windows(self, windows: Iterable, callback: "MergingWindowAssigner.MergeCallback") -> None:
        """Calls ``callback.merge(to_be_merged, merge_result)`` for each group of ``windows`` that merge."""
        raise NotImplementedError


def _no_timestamp(assigner: WindowAssigner) -> InvalidRecordError:
    return InvalidRecordError(f"{assigner!r}: {NO_TIMESTAMP_MESSAGE}.")


def _offset(offset, size: int, where: str, against: str) -> int:
    millis = 0 if offset is None else span_millis(offset, where, "offset")
    if abs(millis) >= size:
        raise ApiUsageError(f"{where}(...): the offset ({millis} ms) must be smaller in magnitude than the {against} "
                            f"({size} ms), as Flink requires abs(offset) < {against}. Use an offset between "
                            f"-{size - 1} and {size - 1} ms: windows repeat every {against}, so a larger offset "
                            f"is the same as its remainder.")
    return millis


class _EventTime:
    """An event-time assigner: windows by the record's timestamp, fired by the watermark."""

    def assign_windows(self, element, timestamp, context) -> list:
        if timestamp is None:
            raise _no_timestamp(self)
        return self._windows(element, timestamp)

    def get_default_trigger(self, env=None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class _ProcessingTime:
    """A processing-time assigner: windows by the operator's clock when the record arrives."""

    def assign_windows(self, element, timestamp, context) -> list:
        return self._windows(element, context.get_current_processing_time())

    def get_default_trigger(self, env=None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


class _Tumbling(WindowAssigner[T, TimeWindow]):
    _name = ""

    def __init__(self, size, offset=None):
        self.size = positive_span(size, f"{self._name}.of", "size")
        self.slide = self.size
        self.offset = _offset(offset, self.size, f"{self._name}.of", "size")

    def _windows(self, element, timestamp: int) -> list:
        start = TimeWindow.get_window_start_with_offset(timestamp, self.offset, self.size)
        return [TimeWindow(start, start + self.size)]

    def __repr__(self) -> str:
        return f"{self._name}({self.size}, {self.offset})"


class TumblingEventTimeWindows(_EventTime, _Tumbling[T]):
    """Windows of a fixed ``size`` by event time that do not overlap: ``[k * size + offset, (k + 1) * size +
    offset)``. ``offset`` shifts the window starts, e.g. ``of(Time.days(1), Time.hours(-8))`` for the days of
    UTC+08:00. Requires ``abs(offset) < size``.

    >>> from runtime.settings.durations import Time
    >>> hourly = TumblingEventTimeWindows.of(Time.hours(1), Time.minutes(15))
    >>> hourly.size, hourly.slide, hourly.offset, hourly.is_event_time(), hourly.get_default_trigger()
    (3600000, 3600000, 900000, True, EventTimeTrigger())
    >>> hourly.assign_windows("x", 0, None)
    [TimeWindow(start=-2700000, end=900000)]
    """

    _name = "TumblingEventTimeWindows"

    @staticmethod
    def of(size, offset=None) -> "TumblingEventTimeWindows":
        """Tumbling event-time windows of ``size``, shifted by ``offset``.

        >>> TumblingEventTimeWindows.of(10).assign_windows("x", -1, None)
        [TimeWindow(start=-10, end=0)]
        """
        return TumblingEventTimeWindows(size, offset)


class TumblingProcessingTimeWindows(_ProcessingTime, _Tumbling[T]):
    """Tumbling windows of a fixed ``size`` by the operator's processing-time clock (the element's own
    timestamp is ignored). Requires ``abs(offset) < size``.

    >>> class At(WindowAssigner.WindowAssignerContext):
    ...     def get_current_processing_time(self): return 61_000
    >>> from runtime.settings.durations import Time
    >>> TumblingProcessingTimeWindows.of(Time.minutes(1)).assign_windows("x", 5, At())
    [TimeWindow(start=60000, end=120000)]
    """

    _name = "TumblingProcessingTimeWindows"

    @staticmethod
    def of(size, offset=None) -> "TumblingProcessingTimeWindows":
        """Tumbling processing-time windows of ``size``, shifted by ``offset``.

        >>> TumblingProcessingTimeWindows.of(1000).get_default_trigger()
        ProcessingTimeTrigger()
        """
        return TumblingProcessingTimeWindows(size, offset)


class _Sliding(WindowAssigner[T, TimeWindow]):
    _name = ""

    def __init__(self, size, slide, offset=None):
        where = f"{self._name}.of"
        self.size = positive_span(size, where, "size")
        self.slide = positive_span(slide, where, "slide")
        self.offset = _offset(offset, self.slide, where, "slide")

    def _windows(self, element, timestamp: int) -> list:
        size, slide = self.size, self.slide
        start = TimeWindow.get_window_start_with_offset(timestamp, self.offset, slide)
        windows = []
        while start > timestamp - size:
            windows.append(TimeWindow(start, start + size))
            start -= slide
        return windows

    def __repr__(self) -> str:
        return f"{self._name}({self.size}, {self.slide}, {self.offset})"


class SlidingEventTimeWindows(_EventTime, _Sliding[T]):
    """Windows of ``size`` by event time, one starting every ``slide`` (plus ``offset``), so an element is
    in about ``size / slide`` of them, latest start first. As in Flink, a slide larger than the size is
    allowed (elements between windows belong to none); ``abs(offset) < slide`` is required.

    >>> from runtime.settings.durations import Time
    >>> windows = SlidingEventTimeWindows.of(Time.seconds(3), Time.seconds(1))
    >>> windows.size, windows.slide, windows.offset, windows.assign_windows("x", 2500, None)
    (3000, 1000, 0, [TimeWindow(start=2000, end=5000), TimeWindow(start=1000, end=4000), TimeWindow(start=0, end=3000)])
    """

    _name = "SlidingEventTimeWindows"

    @staticmethod
    def of(size, slide, offset=None) -> "SlidingEventTimeWindows":
        """Sliding event-time windows of ``size`` every ``slide``, shifted by ``offset``.

        >>> SlidingEventTimeWindows.of(10, 20).assign_windows("x", 15, None)
        []
        """
        return SlidingEventTimeWindows(size, slide, offset)


class SlidingProcessingTimeWindows(_ProcessingTime, _Sliding[T]):
    """Sliding windows of ``size`` every ``slide`` by the operator's processing-time clock.

    >>> class At(WindowAssigner.WindowAssignerContext):
    ...     def get_current_processing_time(self): return 25
    >>> SlidingProcessingTimeWindows.of(20, 10).assign_windows("x", None, At())
    [TimeWindow(start=20, end=40), TimeWindow(start=10, end=30)]
    """

    _name = "SlidingProcessingTimeWindows"

    @staticmethod
    def of(size, slide, offset=None) -> "SlidingProcessingTimeWindows":
        """Sliding processing-time windows of ``size`` every ``slide``, shifted by ``offset``.

        >>> SlidingProcessingTimeWindows.of(20, 10, 5).offset
        5
        """
        return SlidingProcessingTimeWindows(size, slide, offset)


class SessionWindowTimeGapExtractor:
    """Gives the session gap of an element, in milliseconds, for sessions with dynamic gaps. A plain
    callable ``element -> int`` works as well.

    >>> class ByPriority(SessionWindowTimeGapExtractor):
    ...     def extract(self, element): return 1000 if element["urgent"] else 60_000
    >>> ByPriority().extract({"urgent": True})
    1000
    """

    def extract(self, element: Any) -> int:
        raise NotImplementedError


def _extractor(extractor, where: str) -> Callable[[Any], Any]:
    if isinstance(extractor, SessionWindowTimeGapExtractor):
        return extractor.extract
    if callable(extractor):
        return extractor
    raise ApiUsageError(f"{where}(...) expects a SessionWindowTimeGapExtractor or a callable element -> gap in "
                        f"milliseconds, got {extractor!r}.")


class _Sessions(MergingWindowAssigner[T, TimeWindow]):
    _name = ""
    # merge_windows merges exactly the windows that intersect (a subclass that merges otherwise sets this False)
    merges_intersecting_time_windows = True

    def __init__(self, gap):
        self.gap = positive_span(gap, f"{self._name}.with_gap", "session gap")

    def _windows(self, element, timestamp: int) -> list:
        return [TimeWindow(timestamp, timestamp + self.gap)]

    def merge_windows(self, windows, callback) -> None:
        TimeWindow.merge_windows(windows, callback)

    def __repr__(self) -> str:
        return f"{self._name}({self.gap})"


class _DynamicSessions(MergingWindowAssigner[T, TimeWindow]):
    _name = ""
    # merge_windows merges exactly the windows that intersect (a subclass that merges otherwise sets this False)
    merges_intersecting_time_windows = True

    def __init__(self, extractor):
        self.extractor = extractor
        self._extract = _extractor(extractor, f"{self._name}.with_dynamic_gap")

    def _gap(self, element) -> int:
        gap = self._extract(element)
        if isinstance(gap, bool) or not isinstance(gap, int) or gap <= 0:
            raise FunctionContractError(
                f"{self._name}: the session gap extractor returned {gap!r} for element {element!r}; it must "
                f"return a whole number of milliseconds greater than 0 (Flink: 0 < gap).")
        return gap

    def _windows(self, element, timestamp: int) -> list:
        return [TimeWindow(timestamp, timestamp + self._gap(element))]

    def merge_windows(self, windows, callback) -> None:
        TimeWindow.merge_windows(windows, callback)

    def __repr__(self) -> str:
        return f"{self._name}({self.extractor!r})"


class DynamicEventTimeSessionWindows(_EventTime, _DynamicSessions[T]):
    """Event-time sessions whose gap each element sets: an element at ``t`` with gap ``g`` opens
    ``[t, t + g)``, and overlapping or touching windows of a key merge.

    >>> sessions = DynamicEventTimeSessionWindows.with_dynamic_gap(lambda e: e[1])
    >>> sessions.assign_windows(("a", 30), 100, None), sessions.is_event_time()
    ([TimeWindow(start=100, end=130)], True)
    """

    _name = "DynamicEventTimeSessionWindows"

    @staticmethod
    def with_dynamic_gap(extractor) -> "DynamicEventTimeSessionWindows":
        """Event-time sessions with the gap ``extractor`` gives each element.

        >>> DynamicEventTimeSessionWindows.with_dynamic_gap(lambda e: 0).assign_windows("x", 0, None)
        Traceback (most recent call last):
        ...
        runtime.errors.FunctionContractError: DynamicEventTimeSessionWindows: the session gap extractor returned 0 ...
        """
        return DynamicEventTimeSessionWindows(extractor)


class DynamicProcessingTimeSessionWindows(_ProcessingTime, _DynamicSessions[T]):
    """Processing-time sessions whose gap each element sets.

    >>> class At(WindowAssigner.WindowAssignerContext):
    ...     def get_current_processing_time(self): return 500
    >>> DynamicProcessingTimeSessionWindows.with_dynamic_gap(len).assign_windows("abc", None, At())
    [TimeWindow(start=500, end=503)]
    """

    _name = "DynamicProcessingTimeSessionWindows"

    @staticmethod
    def with_dynamic_gap(extractor) -> "DynamicProcessingTimeSessionWindows":
        """Processing-time sessions with the gap ``extractor`` gives each element.

        >>> DynamicProcessingTimeSessionWindows.with_dynamic_gap(len).get_default_trigger()
        ProcessingTimeTrigger()
        """
        return DynamicProcessingTimeSessionWindows(extractor)


class EventTimeSessionWindows(_EventTime, _Sessions[T]):
    """Event-time sessions: an element at ``t`` opens ``[t, t + gap)``, and windows of a key that overlap
    or touch merge, so a session ends after ``gap`` without elements.

    >>> from runtime.settings.durations import Time
    >>> sessions = EventTimeSessionWindows.with_gap(Time.seconds(30))
    >>> sessions.gap, sessions.assign_windows("x", 1000, None), sessions.get_default_trigger()
    (30000, [TimeWindow(start=1000, end=31000)], EventTimeTrigger())
    """

    _name = "EventTimeSessionWindows"

    @staticmethod
    def with_gap(gap) -> "EventTimeSessionWindows":
        """Event-time sessions with a fixed ``gap``.

        >>> EventTimeSessionWindows.with_gap(0)
        Traceback (most recent call last):
        ...
        runtime.errors.ApiUsageError: EventTimeSessionWindows.with_gap(...): the session gap must be positive, ...
        """
        return EventTimeSessionWindows(gap)

    @staticmethod
    def with_dynamic_gap(extractor) -> DynamicEventTimeSessionWindows:
        """Event-time sessions with the gap ``extractor`` gives each element.

        >>> EventTimeSessionWindows.with_dynamic_gap(lambda e: 10).assign_windows("x", 5, None)
        [TimeWindow(start=5, end=15)]
        """
        return DynamicEventTimeSessionWindows(extractor)


class ProcessingTimeSessionWindows(_ProcessingTime, _Sessions[T]):
    """Processing-time sessions: an element arriving at processing time ``t`` opens ``[t, t + gap)``.

    >>> class At(WindowAssigner.WindowAssignerContext):
    ...     def get_current_processing_time(self): return 7
    >>> ProcessingTimeSessionWindows.with_gap(10).assign_windows("x", None, At())
    [TimeWindow(start=7, end=17)]
    """

    _name = "ProcessingTimeSessionWindows"

    @staticmethod
    def with_gap(gap) -> "ProcessingTimeSessionWindows":
        """Processing-time sessions with a fixed ``gap``.

        >>> ProcessingTimeSessionWindows.with_gap(10).is_event_time()
        False
        """
        return ProcessingTimeSessionWindows(gap)

    @staticmethod
    def with_dynamic_gap(extractor) -> DynamicProcessingTimeSessionWindows:
        """Processing-time sessions with the gap ``extractor`` gives each element.

        >>> ProcessingTimeSessionWindows.with_dynamic_gap(len)
        DynamicProcessingTimeSessionWindows(<built-in function len>)
        """
        return DynamicProcessingTimeSessionWindows(extractor)


_GLOBAL = [GlobalWindow.get()]


class GlobalWindows(WindowAssigner[T, GlobalWindow]):
    """Puts every element of a key into the one :class:`GlobalWindow`. Its default trigger never fires, so
    give the window a trigger (and maybe an evictor) of its own.

    >>> GlobalWindows.create().assign_windows("x", 5, None), GlobalWindows.create().get_default_trigger()
    ([GlobalWindow], NeverTrigger())
    """

    @staticmethod
    def create() -> "GlobalWindows":
        """The global-window assigner.

        >>> GlobalWindows.create().is_event_time()
        False
        """
        return GlobalWindows()

    def assign_windows(self, element, timestamp, context) -> list:
        return _GLOBAL

    def get_default_trigger(self, env=None) -> Trigger:
        return NeverTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindows()"


class CountTumblingWindowAssigner(GlobalWindows[T]):
    """Tumbling count windows (PyFlink's ``count_window(size)``): each key's elements in groups of ``size``.

    Built as Flink's ``countWindow(size)``: the :class:`GlobalWindow` with the default trigger
    ``PurgingTrigger.of(CountTrigger.of(size))``. Windows are therefore ``GlobalWindow`` (PyFlink's are
    ``CountWindow(id)``); the groups emitted are the same.

    >>> from operators.window.testing import InMemoryTriggerContext
    >>> assigner = CountTumblingWindowAssigner.of(2)
    >>> ctx, trigger = InMemoryTriggerContext(GlobalWindow.get()), assigner.get_default_trigger()
    >>> trigger, [trigger.on_element(x, None, GlobalWindow.get(), ctx).name for x in "abc"]
    (PurgingTrigger(CountTrigger(2)), ['CONTINUE', 'FIRE_AND_PURGE', 'CONTINUE'])
    """

    def __init__(self, size: int):
        self.size = positive_count(size, "CountTumblingWindowAssigner.of", "window size")

    @staticmethod
    def of(size: int) -> "CountTumblingWindowAssigner":
        """Count windows of ``size`` elements.

        >>> CountTumblingWindowAssigner.of(100).size
        100
        """
        return CountTumblingWindowAssigner(size)

    def get_default_trigger(self, env=None) -> Trigger:
        return PurgingTrigger.of(CountTrigger.of(self.size))

    def __repr__(self) -> str:
        return f"CountTumblingWindowAssigner({self.size})"


def _add(a: int, b: int) -> int:
    return a + b


class _FullSlideCountTrigger(Trigger):
    """Fires when ``size`` elements have arrived, then after every ``slide`` more: PyFlink's sliding count
    windows, which fire only full windows. Its count restarts at ``size - slide`` after a fire, so it stays
    bounded (and runs from below zero past the elements a slide larger than the size skips).

    >>> from operators.window.testing import InMemoryTriggerContext
    >>> ctx, trigger = InMemoryTriggerContext(GlobalWindow.get()), _FullSlideCountTrigger(3, 2)
    >>> [trigger.on_element(x, None, GlobalWindow.get(), ctx).name[0] for x in range(9)]
    ['C', 'C', 'F', 'C', 'F', 'C', 'F', 'C', 'F']
    """

    def __init__(self, size: int, slide: int):
        self.size = size
        self.slide = slide
        self.state_descriptor = ReducingStateDescriptor("count", _add)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        count = ctx.get_partitioned_state(self.state_descriptor)
        count.add(1)
        if count.get() >= self.size:
            count.clear()
            if self.size != self.slide:
                count.add(self.size - self.slide)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window, ctx) -> None:
        ctx.get_partitioned_state(self.state_descriptor).clear()

    def __repr__(self) -> str:
        return f"_FullSlideCountTrigger({self.size}, {self.slide})"


class CountSlidingWindowAssigner(GlobalWindows[T]):
    """Sliding count windows (PyFlink's ``count_window(size, slide)``): after the first ``size`` elements of
    a key, and then after every ``slide`` more, the last ``size`` elements. Only full windows fire, as in
    PyFlink (Flink's Java ``countWindow(size, slide)`` also fires the partial windows at the start: see
    :func:`count_window_parts`).

    Built on the :class:`GlobalWindow`: the window operator must apply ``get_default_evictor()``
    (``CountEvictor.of(size)``) when the job sets no evictor, with the default trigger.

    >>> assigner = CountSlidingWindowAssigner.of(3, 1)
    >>> assigner.get_default_trigger(), assigner.get_default_evictor()
    (_FullSlideCountTrigger(3, 1), CountEvictor(3, do_evict_after=False))
    """

    def __init__(self, size: int, slide: int):
        self.size = positive_count(size, "CountSlidingWindowAssigner.of", "window size")
        self.slide = positive_count(slide, "CountSlidingWindowAssigner.of", "window slide")

    @staticmethod
    def of(size: int, slide: int) -> "CountSlidingWindowAssigner":
        """Count windows of ``size`` elements every ``slide`` elements.

        >>> CountSlidingWindowAssigner.of(10, 5).slide
        5
        """
        return CountSlidingWindowAssigner(size, slide)

    def get_default_trigger(self, env=None) -> Trigger:
        return _FullSlideCountTrigger(self.size, self.slide)

    def get_default_evictor(self) -> Evictor:
        return CountEvictor.of(self.size)

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self.size}, {self.slide})"


def count_window_parts(size: int, slide: int | None = None) -> tuple[WindowAssigner, Trigger, Evictor | None]:
    """``(assigner, trigger, evictor or None)`` of Flink's Java ``KeyedStream.countWindow``: tumbling is the
    global window with ``PurgingTrigger.of(CountTrigger.of(size))``; sliding is the global window with
    ``CountTrigger.of(slide)`` and ``CountEvictor.of(size)``, which fires every ``slide`` elements with the
    last (up to) ``size`` of them, the partial windows at the start included.

    >>> count_window_parts(5)
    (GlobalWindows(), PurgingTrigger(CountTrigger(5)), None)
    >>> count_window_parts(5, 2)
    (GlobalWindows(), CountTrigger(2), CountEvictor(5, do_evict_after=False))
    """
    size = positive_count(size, "count_window", "window size")
    if slide is None:
        return GlobalWindows.create(), PurgingTrigger.of(CountTrigger.of(size)), None
    slide = positive_count(slide, "count_window", "window slide")
    return GlobalWindows.create(), CountTrigger.of(slide), CountEvictor.of(size)
