"""An in-memory trigger and evictor context, for unit-testing triggers and evictors without a job (as
Flink's trigger test harness), and as an executable statement of the contract the window operator fulfils.

>>> from operators.window.triggers import CountTrigger
>>> from operators.window.windows import GlobalWindow
>>> ctx = InMemoryTriggerContext(GlobalWindow.get())
>>> trigger = CountTrigger.of(3)
>>> [trigger.on_element(x, None, ctx.window, ctx).name for x in "ab"], ctx.state
(['CONTINUE', 'CONTINUE'], {('count', GlobalWindow): 2})
"""

from __future__ import annotations

from typing import Any

from operators.window.evictors import Evictor
from operators.window.triggers import Trigger
from runtime.errors import StateUsageError
from runtime.protocol.events import MIN_WATERMARK
from state_backends.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)

__all__ = ["InMemoryTriggerContext"]


class InMemoryTriggerContext(Trigger.OnMergeContext, Evictor.EvictorContext):
    """A trigger context (and on-merge and evictor context) over plain dicts and sets, for one key.

    ``window`` is the current window: partitioned state and timers are scoped to it, as the window operator
    scopes them to the current key and window. ``state`` maps ``(descriptor name, window)`` to the stored
    value; ``event_timers`` / ``processing_timers`` hold ``(time, window)`` pairs; ``merged_windows`` are
    the windows ``merge_partitioned_state`` folds into ``window``. ``advance_watermark`` and
    ``advance_processing_time`` fire due timers in time order, as the operator's timer service does.

    >>> from operators.window.triggers import EventTimeTrigger
    >>> from operators.window.windows import TimeWindow
    >>> ctx = InMemoryTriggerContext(TimeWindow(0, 10))
    >>> trigger = EventTimeTrigger.create()
    >>> trigger.on_element("a", 3, ctx.window, ctx)
    TriggerResult.CONTINUE
    >>> ctx.advance_watermark(trigger, 8), ctx.advance_watermark(trigger, 20)
    ([], [(9, TimeWindow(start=0, end=10), TriggerResult.FIRE)])
    """

    def __init__(self, window=None, watermark: int = MIN_WATERMARK, processing_time: int = 0):
        self.window = window
        self.watermark = watermark
        self.processing_time = processing_time
        self.event_timers: set[tuple[int, Any]] = set()
        self.processing_timers: set[tuple[int, Any]] = set()
        self.state: dict[tuple[str, Any], Any] = {}
        self.merged_windows: list = []

    def get_current_processing_time(self) -> int:
        return self.processing_time

    def get_current_watermark(self) -> int:
        return self.watermark

    def register_processing_time_timer(self, time: int) -> None:
        self.processing_timers.add((time, self.window))

    def register_event_time_timer(self, time: int) -> None:
        self.event_timers.add((time, self.window))

    def delete_processing_time_timer(self, time: int) -> None:
        self.processing_timers.discard((time, self.window))

    def delete_event_time_timer(self, time: int) -> None:
        self.event_timers.discard((time, self.window))

    def get_partitioned_state(self, state_descriptor):
        for kind, handle in _HANDLES:
            if isinstance(state_descriptor, kind):
                return handle(self.state, (state_descriptor.name, self.window), state_descriptor)
        raise StateUsageError(f"InMemoryTriggerContext has no state for a {type(state_descriptor).__name__}")

    def merge_partitioned_state(self, state_descriptor) -> None:
        if isinstance(state_descriptor, ValueStateDescriptor):
            raise StateUsageError(f"state '{state_descriptor.name}' is value state, which cannot be merged: "
                                  "use reducing, list or aggregating state in a trigger that merges.")
        name = state_descriptor.name
        merged = None
        for window in self.merged_windows:
            value = self.state.pop((name, window), None)
            if value is not None:
                merged = value if merged is None else _combine(state_descriptor, merged, value)
        if merged is not None:
            target = self.state.get((name, self.window))
            self.state[(name, self.window)] = merged if target is None else _combine(state_descriptor, target,
                                                                                     merged)

    def advance_watermark(self, trigger: Trigger, watermark: int) -> list:
        """Sets the watermark, then fires every event-time timer at or before it in time order (timers the
        trigger registers meanwhile included), calling ``trigger.on_event_time`` with the timer's window.
        Returns ``[(time, window, result), ...]``."""
        self.watermark = watermark
        return self._fire(trigger, self.event_timers, watermark, trigger.on_event_time)

    def advance_processing_time(self, trigger: Trigger, time: int) -> list:
        """As :meth:`advance_watermark`, for the processing-time clock and timers."""
        self.processing_time = time
        return self._fire(trigger, self.processing_timers, time, trigger.on_processing_time)

    def _fire(self, trigger, timers: set, up_to: int, callback) -> list:
        fired = []
        while True:
            due = [timer for timer in timers if timer[0] <= up_to]
            if not due:
                return fired
            timer = min(due, key=lambda t: t[0])
            timers.discard(timer)
            time, self.window = timer
            fired.append((time, self.window, callback(time, self.window, self)))


def _combine(descriptor, first, second):
    if isinstance(descriptor, ReducingStateDescriptor):
        return descriptor.reduce_function(first, second)
    if isinstance(descriptor, AggregatingStateDescriptor):
        return descriptor.agg_function.merge(first, second)
    return first + second  # list state: the target's elements first, as Flink's mergeNamespaces


class _Handle:
    __slots__ = ("_table", "_key", "_descriptor")

    def __init__(self, table: dict, key: tuple, descriptor):
        self._table = table
        self._key = key
        self._descriptor = descriptor

    def clear(self) -> None:
        self._table.pop(self._key, None)


class _Value(_Handle):
    __slots__ = ()

    def value(self):
        return self._table.get(self._key)

    def update(self, value) -> None:
        if value is None:
            self.clear()
        else:
            self._table[self._key] = value


class _Reducing(_Handle):
    __slots__ = ()

    def get(self):
        return self._table.get(self._key)

    def add(self, value) -> None:
        current = self._table.get(self._key)
        self._table[self._key] = value if current is None else self._descriptor.reduce_function(current, value)


class _List(_Handle):
    __slots__ = ()

    def get(self):
        return list(self._table.get(self._key, ()))

    def add(self, value) -> None:
        self._table.setdefault(self._key, []).append(value)

    def add_all(self, values) -> None:
        self._table.setdefault(self._key, []).extend(values)

    def update(self, values) -> None:
        self._table[self._key] = list(values)


class _Aggregating(_Handle):
    __slots__ = ()

    def get(self):
        accumulator = self._table.get(self._key)
        return None if accumulator is None else self._descriptor.agg_function.get_result(accumulator)

    def add(self, value) -> None:
        function = self._descriptor.agg_function
        accumulator = self._table.get(self._key)
        if accumulator is None:
            accumulator = function.create_accumulator()
        self._table[self._key] = function.add(value, accumulator)


_HANDLES = [(ValueStateDescriptor, _Value), (ReducingStateDescriptor, _Reducing), (ListStateDescriptor, _List),
            (AggregatingStateDescriptor, _Aggregating)]
