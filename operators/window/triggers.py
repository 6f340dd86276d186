"""Triggers: when a window's pane is evaluated (fired) and when its contents are dropped (purged), with
Flink's semantics and PyFlink's names.

A trigger object is shared by every key and window of an operator, so it keeps no state of its own: what it
must remember (a count, the next fire time) lives in partitioned state obtained from its context, scoped to
the current key and window, and its timers are registered through the context too.

>>> from operators.window.testing import InMemoryTriggerContext
>>> from operators.window.windows import TimeWindow
>>> window = TimeWindow(0, 10)
>>> ctx = InMemoryTriggerContext(window, watermark=3)
>>> trigger = EventTimeTrigger.create()
>>> trigger.on_element("a", 5, window, ctx), sorted(ctx.event_timers)
(TriggerResult.CONTINUE, [(9, TimeWindow(start=0, end=10))])
>>> trigger.on_event_time(9, window, ctx).is_fire()
True
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Generic, TypeVar

from operators.window._arguments import NO_TIMESTAMP_MESSAGE, positive_count, positive_span
from operators.window.windows import GlobalWindow, TimeWindow, Window
from runtime.errors import ApiUsageError, InvalidRecordError
from state_backends.descriptors import ReducingStateDescriptor

__all__ = [
    "TriggerResult",
    "Trigger",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "PurgingTrigger",
    "NeverTrigger",
]

# PyFlink's type parameters: ``Trigger[T, W]`` for elements of type T in windows of type W; each built-in
# trigger keeps T free (``EventTimeTrigger[T]``) and names the windows it is written for. CountTrigger names any
# Window where PyFlink's names CountWindow: Chandy's count windows are the GlobalWindow.
T = TypeVar("T")
W = TypeVar("W")


class TriggerResult(Enum):
    """What a trigger decides for a pane: whether to evaluate the window function (fire) and whether to
    drop the window's contents (purge). A pane that fires with no contents emits nothing.

    >>> [(r.name, r.is_fire(), r.is_purge()) for r in TriggerResult]  # doctest: +NORMALIZE_WHITESPACE
    [('CONTINUE', False, False), ('FIRE_AND_PURGE', True, True), ('FIRE', True, False),
     ('PURGE', False, True)]
    """

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def __init__(self, fire: bool, purge: bool):
        self._fire = fire  # plain attributes: Enum's .value is a slow descriptor, and these run per element
        self._purge = purge

    def is_fire(self) -> bool:
        return self._fire

    def is_purge(self) -> bool:
        return self._purge

    def __repr__(self) -> str:
        return f"TriggerResult.{self.name}"


class Trigger(Generic[T, W]):
    """Decides when a pane (the elements of one key in one window) is evaluated and when it is purged.

    ``on_element`` runs for every element added to a pane; ``on_event_time`` / ``on_processing_time`` run
    when a timer the trigger registered through its context fires; ``clear`` runs when the window is
    dropped and must delete the trigger's timers and state. To be used with a merging (session) assigner a
    trigger returns True from ``can_merge`` and implements ``on_merge``.

    >>> class FireOnNegative(Trigger):
    ...     def on_element(self, element, timestamp, window, ctx):
    ...         return TriggerResult.FIRE_AND_PURGE if element < 0 else TriggerResult.CONTINUE
    ...     def on_processing_time(self, time, window, ctx): return TriggerResult.CONTINUE
    ...     def on_event_time(self, time, window, ctx): return TriggerResult.CONTINUE
    >>> [FireOnNegative().on_element(x, None, None, None).name for x in (3, -1)]
    ['CONTINUE', 'FIRE_AND_PURGE']
    """

    class TriggerContext:
        """What the window operator gives a trigger: the clocks, timers and state of the current key and
        window. Timers are per (key, window): one registered twice fires once, and when it fires the
        operator calls the trigger with that window.

        >>> from operators.window.testing import InMemoryTriggerContext
        >>> from operators.window.windows import TimeWindow
        >>> ctx = InMemoryTriggerContext(TimeWindow(0, 10), processing_time=42)
        >>> isinstance(ctx, Trigger.TriggerContext), ctx.get_current_processing_time()
        (True, 42)
        """

        def get_current_processing_time(self) -> int:
            """The current processing time (epoch milliseconds)."""
            raise NotImplementedError

        def get_current_watermark(self) -> int:
            """The operator's current event-time watermark (``MIN_WATERMARK`` before the first)."""
            raise NotImplementedError

        def register_processing_time_timer(self, time: int) -> None:
            """Calls ``on_processing_time(time, window, ctx)`` once the processing time reaches ``time``."""
            raise NotImplementedError

        def register_event_time_timer(self, time: int) -> None:
            """Calls ``on_event_time(time, window, ctx)`` once the watermark reaches ``time``."""
            raise NotImplementedError

        def delete_processing_time_timer(self, time: int) -> None:
            raise NotImplementedError

        def delete_event_time_timer(self, time: int) -> None:
            raise NotImplementedError

        def get_partitioned_state(self, state_descriptor) -> Any:
            """The state named by ``state_descriptor``, scoped to the current key and window: a value state
            (``value()``, ``update(v)``, ``clear()``) for a ``ValueStateDescriptor``, a reducing state
            (``get()``, ``add(v)``, ``clear()``) for a ``ReducingStateDescriptor``, and so on."""
            raise NotImplementedError

    class OnMergeContext(TriggerContext):
        """The context of ``on_merge``: also merges partitioned state of the merged windows into the
        resulting window.

        >>> from operators.window.testing import InMemoryTriggerContext
        >>> from operators.window.windows import TimeWindow
        >>> isinstance(InMemoryTriggerContext(TimeWindow(0, 10)), Trigger.OnMergeContext)
        True
        """

        def merge_partitioned_state(self, state_descriptor) -> None:
            """Folds the state named by ``state_descriptor`` of every merged window into the state of the
            window that results from the merge (reducing, list and aggregating state merge; value state
            cannot)."""
            raise NotImplementedError

    def on_element(self, element: Any, timestamp: int | None, window, ctx: "Trigger.TriggerContext") -> TriggerResult:
        """Called for every element added to a pane (``timestamp`` is None for a record without one)."""
        raise NotImplementedError

    def on_processing_time(self, time: int, window, ctx: "Trigger.TriggerContext") -> TriggerResult:
        """Called when a processing-time timer registered through ``ctx`` fires."""
        raise NotImplementedError

    def on_event_time(self, time: int, window, ctx: "Trigger.TriggerContext") -> TriggerResult:
        """Called when an event-time timer registered through ``ctx`` fires."""
        raise NotImplementedError

    def can_merge(self) -> bool:
        """Whether this trigger supports merging windows (then ``on_merge`` must be implemented)."""
        return False

    def on_merge(self, window, ctx: "Trigger.OnMergeContext") -> None:
        """Called when windows were merged into ``window``: re-register timers, merge state."""
        raise ApiUsageError(f"{type(self).__name__} does not support merging windows: a trigger used with "
                            "session windows must return True from can_merge() and implement on_merge().")

    def clear(self, window, ctx: "Trigger.TriggerContext") -> None:
        """Called when ``window`` is dropped: delete the timers and state this trigger holds for it."""


class EventTimeTrigger(Trigger[T, TimeWindow]):
    """Fires once the watermark passes the end of the window (at ``window.max_timestamp()``); fires at once
    for an element added to a window the watermark has already passed (allowed lateness). The default
    trigger of event-time assigners.

    >>> from operators.window.testing import InMemoryTriggerContext
    >>> from operators.window.windows import TimeWindow
    >>> late = InMemoryTriggerContext(TimeWindow(0, 10), watermark=9)
    >>> EventTimeTrigger.create().on_element("x", 4, TimeWindow(0, 10), late), late.event_timers
    (TriggerResult.FIRE, set())
    """

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        # a merged window whose end the watermark already passed gets no timer: the operator's own
        # cleanup timer (or the next element, which fires at once) takes care of it
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window, ctx) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    @staticmethod
    def create() -> "EventTimeTrigger":
        """A new EventTimeTrigger.

        >>> EventTimeTrigger.create()
        EventTimeTrigger()
        """
        return EventTimeTrigger()

    def __repr__(self) -> str:
        return "EventTimeTrigger()"


class ProcessingTimeTrigger(Trigger[T, TimeWindow]):
    """Fires once the processing time passes the end of the window. The default trigger of
    processing-time assigners.

    >>> from operators.window.testing import InMemoryTriggerContext
    >>> from operators.window.windows import TimeWindow
    >>> ctx = InMemoryTriggerContext(TimeWindow(0, 10), processing_time=2)
    >>> ProcessingTimeTrigger.create().on_element("x", None, TimeWindow(0, 10), ctx), sorted(ctx.processing_timers)
    (TriggerResult.CONTINUE, [(9, TimeWindow(start=0, end=10))])
    """

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.FIRE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window, ctx) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())

    @staticmethod
    def create() -> "ProcessingTimeTrigger":
        """A new ProcessingTimeTrigger.

        >>> ProcessingTimeTrigger.create()
        ProcessingTimeTrigger()
        """
        return ProcessingTimeTrigger()

    def __repr__(self) -> str:
        return "ProcessingTimeTrigger()"


def _sum(a: int, b: int) -> int:
    return a + b


class CountTrigger(Trigger[T, Window]):
    """Fires when the pane has received ``count`` elements since it last fired (it does not purge: wrap it
    in :class:`PurgingTrigger` for tumbling counts). Keeps its count in reducing state named ``"count"``.

    >>> from operators.window.testing import InMemoryTriggerContext
    >>> from operators.window.windows import GlobalWindow
    >>> ctx, trigger = InMemoryTriggerContext(GlobalWindow.get()), CountTrigger.of(2)
    >>> [trigger.on_element(x, None, GlobalWindow.get(), ctx).name for x in "abcde"]
    ['CONTINUE', 'FIRE', 'CONTINUE', 'FIRE', 'CONTINUE']
    """

    def __init__(self, count: int):
        self.count = positive_count(count, "CountTrigger.of", "count")
        self.state_descriptor = ReducingStateDescriptor("count", _sum)

    @staticmethod
    def of(count: int) -> "CountTrigger":
        """A trigger that fires every ``count`` elements.

        >>> CountTrigger.of(100)
        CountTrigger(100)
        """
        return CountTrigger(count)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        count = ctx.get_partitioned_state(self.state_descriptor)
        count.add(1)
        if count.get() >= self.count:
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        # the summed count may now exceed the limit: like Flink, it fires with the next element
        ctx.merge_partitioned_state(self.state_descriptor)

    def clear(self, window, ctx) -> None:
        ctx.get_partitioned_state(self.state_descriptor).clear()

    def __repr__(self) -> str:
        return f"CountTrigger({self.count})"


def _java_remainder(dividend: int, divisor: int) -> int:
    """Java's ``%``: the sign of the dividend (Python's has the divisor's)."""
    remainder = abs(dividend) % abs(divisor)
    return -remainder if dividend < 0 else remainder


class _Continuous(Trigger[T, TimeWindow]):
    """What the continuous triggers share: the next fire time in reducing state, a timer in their domain."""

    def __init__(self, interval, where: str):
        self.interval = positive_span(interval, where, "interval")
        self.state_descriptor = ReducingStateDescriptor("fire-time", min)

    def _register_timer(self, ctx, time: int) -> None:
        raise NotImplementedError

    def _delete_timer(self, ctx, time: int) -> None:
        raise NotImplementedError

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        ctx.merge_partitioned_state(self.state_descriptor)
        next_fire = ctx.get_partitioned_state(self.state_descriptor).get()
        if next_fire is not None:
            self._register_timer(ctx, next_fire)

    def clear(self, window, ctx) -> None:
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        next_fire = fire_time.get()
        if next_fire is not None:
            self._delete_timer(ctx, next_fire)
            fire_time.clear()

    def _register_next(self, time: int, window, ctx, fire_time) -> None:
        next_fire = min(time + self.interval, window.max_timestamp())
        fire_time.add(next_fire)
        self._register_timer(ctx, next_fire)


class ContinuousEventTimeTrigger(_Continuous[T]):
    """Fires every ``interval`` of event time (at multiples of the interval, as the watermark passes them)
    and at the end of the window. Keeps the next fire time in reducing state named ``"fire-time"``.

    >>> from operators.window.testing import InMemoryTriggerContext
    >>> from operators.window.windows import TimeWindow
    >>> window = TimeWindow(0, 100)
    >>> ctx, trigger = InMemoryTriggerContext(window, watermark=0), ContinuousEventTimeTrigger.of(30)
    >>> trigger.on_element("x", 42, window, ctx), sorted(time for time, _ in ctx.event_timers)
    (TriggerResult.CONTINUE, [60, 99])
    >>> [(time, result.name) for time, _, result in ctx.advance_watermark(trigger, 100)]
    [(60, 'FIRE'), (90, 'FIRE'), (99, 'FIRE')]
    """

    def __init__(self, interval):
        super().__init__(interval, "ContinuousEventTimeTrigger.of")

    def _register_timer(self, ctx, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete_timer(self, ctx, time: int) -> None:
        ctx.delete_event_time_timer(time)

    @staticmethod
    def of(interval) -> "ContinuousEventTimeTrigger":
        """A trigger firing every ``interval`` (a ``Time``, a ``Duration`` or milliseconds).

        >>> from runtime.settings.durations import Time
        >>> ContinuousEventTimeTrigger.of(Time.seconds(5))
        ContinuousEventTimeTrigger(5000)
        """
        return ContinuousEventTimeTrigger(interval)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        if fire_time.get() is None:
            if timestamp is None:
                raise InvalidRecordError(f"ContinuousEventTimeTrigger: {NO_TIMESTAMP_MESSAGE}.")
            # Java's remainder, as Flink: for a negative timestamp the first fire is the multiple of the
            # interval after the one towards zero
            self._register_next(timestamp - _java_remainder(timestamp, self.interval), window, ctx, fire_time)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        if fire_time.get() == time:
            fire_time.clear()
            self._register_next(time, window, ctx, fire_time)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def __repr__(self) -> str:
        return f"ContinuousEventTimeTrigger({self.interval})"


class ContinuousProcessingTimeTrigger(_Continuous[T]):
    """Fires every ``interval`` of processing time (at multiples of the interval) until the window ends.
    Keeps the next fire time in reducing state named ``"fire-time"``.

    >>> from operators.window.testing import InMemoryTriggerContext
    >>> from operators.window.windows import TimeWindow
    >>> window = TimeWindow(0, 100)
    >>> ctx, trigger = InMemoryTriggerContext(window, processing_time=42), ContinuousProcessingTimeTrigger.of(30)
    >>> trigger.on_element("x", None, window, ctx), sorted(time for time, _ in ctx.processing_timers)
    (TriggerResult.CONTINUE, [60])
    >>> [(time, result.name) for time, _, result in ctx.advance_processing_time(trigger, 95)]
    [(60, 'FIRE'), (90, 'FIRE')]
    """

    def __init__(self, interval):
        super().__init__(interval, "ContinuousProcessingTimeTrigger.of")

    def _register_timer(self, ctx, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete_timer(self, ctx, time: int) -> None:
        ctx.delete_processing_time_timer(time)

    @staticmethod
    def of(interval) -> "ContinuousProcessingTimeTrigger":
        """A trigger firing every ``interval`` (a ``Time``, a ``Duration`` or milliseconds).

        >>> ContinuousProcessingTimeTrigger.of(250)
        ContinuousProcessingTimeTrigger(250)
        """
        return ContinuousProcessingTimeTrigger(interval)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        if fire_time.get() is None:
            now = ctx.get_current_processing_time()
            self._register_next(now - _java_remainder(now, self.interval), window, ctx, fire_time)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        if fire_time.get() == time:
            fire_time.clear()
            self._register_next(time, window, ctx, fire_time)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def __repr__(self) -> str:
        return f"ContinuousProcessingTimeTrigger({self.interval})"


class PurgingTrigger(Trigger[T, Window]):
    """Turns another trigger into a purging one: whenever the nested trigger fires, the pane fires and is
    purged (``FIRE`` becomes ``FIRE_AND_PURGE``).

    >>> from operators.window.testing import InMemoryTriggerContext
    >>> from operators.window.windows import GlobalWindow
    >>> ctx, trigger = InMemoryTriggerContext(GlobalWindow.get()), PurgingTrigger.of(CountTrigger.of(2))
    >>> [trigger.on_element(x, None, GlobalWindow.get(), ctx).name for x in "abc"]
    ['CONTINUE', 'FIRE_AND_PURGE', 'CONTINUE']
    """

    def __init__(self, nested_trigger: Trigger):
        if not isinstance(nested_trigger, Trigger):
            raise ApiUsageError(f"PurgingTrigger.of(...) expects a Trigger (e.g. CountTrigger.of(10)), got "
                                f"{nested_trigger!r}.")
        self.nested_trigger = nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> "PurgingTrigger":
        """A purging version of ``nested_trigger``.

        >>> PurgingTrigger.of(EventTimeTrigger.create())
        PurgingTrigger(EventTimeTrigger())
        """
        return PurgingTrigger(nested_trigger)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        result = self.nested_trigger.on_element(element, timestamp, window, ctx)
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        result = self.nested_trigger.on_event_time(time, window, ctx)
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        result = self.nested_trigger.on_processing_time(time, window, ctx)
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def clear(self, window, ctx) -> None:
        self.nested_trigger.clear(window, ctx)

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window, ctx) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def __repr__(self) -> str:
        return f"PurgingTrigger({self.nested_trigger!r})"


class NeverTrigger(Trigger[T, GlobalWindow]):
    """Never fires: the default trigger of ``GlobalWindows``, whose one window has no end. Give such a
    window another trigger (``.trigger(CountTrigger.of(100))``) for it to emit anything.

    >>> NeverTrigger().on_element("x", 5, None, None), NeverTrigger().can_merge()
    (TriggerResult.CONTINUE, False)
    """

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_merge(self, window, ctx) -> None:
        pass

    def clear(self, window, ctx) -> None:
        pass

    def __repr__(self) -> str:
        return "NeverTrigger()"
