"""The window operator: Flink's ``WindowOperator`` over keyed state and the operator's timers.

For each record: the assigner gives its windows; a window already past ``max_timestamp + allowed
lateness`` (event time) is skipped; otherwise the record is added to the window's pane (one accumulator per
key and window for ``reduce``/``aggregate``, the elements for ``process``/``apply`` and evictors) and the
trigger decides whether to fire and/or purge; a cleanup timer at ``max_timestamp + allowed lateness`` clears
the window's state when it falls due. A record skipped by all its windows and later than
``watermark - allowed lateness`` goes to the late-data side output if there is one, or is dropped and counted.
Session windows merge panes (state windows, see :mod:`operators.window.merging`). Records emitted for a
window carry its ``max_timestamp()`` as their timestamp.

Panes, trigger state and timers are keyed state (namespaced by window), so windows are checkpointed,
restored and moved with their key groups like any other state: panes in :data:`WINDOW_CONTENTS_STATE` (the aligned
layout's under :data:`operators.window.aligned.ALIGNED_WINDOW_STATE_PREFIX`), the state windows of sessions in
:data:`MERGING_WINDOWS_STATE`.

Tumbling and sliding event-time windows with ``reduce`` or ``aggregate`` and the default trigger take
batch paths with fewer state accesses and the same results (:mod:`operators.window.aligned`). State that a
trigger or a process window function keeps per window is :mod:`operators.window.window_state`.

>>> from operators.context import SubtaskInfo
>>> from operators.window.assigners import TumblingEventTimeWindows
>>> from runtime.keys.key_groups import key_group_range
>>> from runtime.protocol.records import TimestampedBatch
>>> from state_backends.heap import HeapKeyedStateBackend
>>> op = WindowOperator("count", lambda word: word, TumblingEventTimeWindows.of(10), contents=Reduce(
...     lambda a, b: (a[0], a[1] + b[1])), pre=lambda word: (word, 1))
>>> op.setup(SubtaskInfo("count", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
>>> op.open(); op.process_batch(TimestampedBatch.of(["a", "b", "a", "a"], [1, 2, 12, 3]))
[]
>>> fired = op.process_watermark(9)   # [0, 10) fires: its records carry timestamp 9
>>> sorted(fired), fired.timestamps
([('a', 2), ('b', 1)], [9, 9])
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from operators.functions import Function
from operators.operator import OneInputOperator
from operators.timers import EVENT_TIMERS, PROCESSING_TIMERS, TimerQueue
from operators.window.aligned import AlignedWindowPaths
from operators.window.assigners import MergingWindowAssigner
from operators.window.evictors import Evictor, TimestampedValue
from operators.window.functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from operators.window.merging import MergingWindowSet
from operators.window.triggers import Trigger
from operators.window.window_state import InWindowState, WindowStateStore, in_window_state
from runtime.errors import FunctionContractError, StateUsageError
from runtime.protocol.events import MAX_WATERMARK
from runtime.protocol.records import TimestampedBatch
from runtime.side_outputs import OutputTag, SideOutputRecord
from state_backends.descriptors import MapStateDescriptor, ValueStateDescriptor

__all__ = ["WindowOperator", "Reduce", "Aggregate", "Elements", "WINDOW_CONTENTS_STATE", "MERGING_WINDOWS_STATE"]

log = logging.getLogger(__name__)

#: The map state of the general layout's panes: each key's ``{window: pane}`` (a session's pane under its state
#: window). Part of the savepoint format (docs/savepoint-format.md): the state API reads panes by it.
WINDOW_CONTENTS_STATE = "window/contents"
#: The value state of session windows: each key's ``{window: state window}`` (:mod:`operators.window.merging`).
MERGING_WINDOWS_STATE = "window/merging-windows"


def _has_entries(backend, state_name: str) -> bool:
    return state_name in backend.state_names()


# -- what a pane holds -------------------------------------------------------------------------------------

class Reduce:
    """A pane holds the reduction of its records (``WindowedStream.reduce``)."""

    incremental = True

    def __init__(self, reduce: Callable):
        self.reduce = reduce

    def add(self, accumulator, value):
        return value if accumulator is None else self.reduce(accumulator, value)

    def merge(self, a, b):
        return self.reduce(a, b)

    def fold_into(self, backend, state_name: str, keys: list, values: list) -> None:
        """Fold ``values`` into the panes of ``keys`` in value state ``state_name``, in order."""
        backend.fold_many(state_name, keys, values, self.add)

    def result(self, accumulator) -> list:
        return [accumulator]


class Aggregate:
    """A pane holds an accumulator of an ``AggregateFunction`` (``WindowedStream.aggregate``)."""

    incremental = True

    def __init__(self, function):
        self.function = function

    def add(self, accumulator, value):
        if accumulator is None:
            accumulator = self.function.create_accumulator()
        return self.function.add(value, accumulator)

    def merge(self, a, b):
        return self.function.merge(a, b)

    def fold_into(self, backend, state_name: str, keys: list, values: list) -> None:
        function = self.function
        backend.aggregate_many(state_name, keys, values, function.add, function.create_accumulator)

    def result(self, accumulator) -> list:
        return [self.function.get_result(accumulator)]


class Elements:
    """A pane holds its records (``process`` / ``apply`` without pre-aggregation, and evictors)."""

    incremental = False

    def add(self, elements, value):
        if elements is None:
            return [value]
        elements.append(value)
        return elements

    def merge(self, a, b):
        return a + b

    def fold_into(self, backend, state_name: str, keys: list, values: list) -> None:
        backend.fold_many(state_name, keys, values, self.add)

    def result(self, elements) -> list:
        return elements


# -- the window function: how a fired pane becomes records ---------------------------------------------------

def _window_call(function) -> Callable[[Any, Any, list, "_ProcessContext"], Any]:
    """``call(key, window, contents, context)`` for the user's window function (None: emit the contents)."""
    if function is None:
        return lambda key, window, contents, context: contents
    if isinstance(function, ProcessWindowFunction):
        return lambda key, window, contents, context: function.process(key, context, contents)
    if isinstance(function, ProcessAllWindowFunction):
        return lambda key, window, contents, context: function.process(context, contents)
    if isinstance(function, WindowFunction):
        return lambda key, window, contents, context: function.apply(key, window, contents)
    if isinstance(function, AllWindowFunction):
        return lambda key, window, contents, context: function.apply(window, contents)
    return lambda key, window, contents, context: function(key, window, contents)


class _Emitted:
    """Records of one call, with timestamps; side outputs as :class:`SideOutputRecord`."""

    __slots__ = ("records", "timestamps")

    def __init__(self):
        self.records: list = []
        self.timestamps: list = []

    def add(self, records, timestamp, operator_name: str) -> None:
        if records is None:
            return
        if isinstance(records, (str, bytes, dict, tuple)):
            raise FunctionContractError(
                f"The window function of '{operator_name}' returned a {type(records).__name__} where an iterable "
                "of records was expected: yield each record, or return a list of records.")
        before = len(self.records)
        for record in records:
            if type(record) is tuple and len(record) == 2 and type(record[0]) is OutputTag:
                record = SideOutputRecord(record[0].tag_id, record[1])
            self.records.append(record)
        self.timestamps.extend([timestamp] * (len(self.records) - before))

    def batch(self) -> list:
        return TimestampedBatch.of(self.records, self.timestamps) if self.records else []


# -- the contexts handed to triggers and window functions ----------------------------------------------------

class _TriggerContext(Trigger.OnMergeContext):
    """What a trigger sees, scoped to the current key and ``window`` (set by the operator before each call)."""

    def __init__(self, operator: "WindowOperator"):
        self.op = operator
        self.window = None
        self.merged_windows: list = []
        self._states: dict[str, InWindowState] = {}

    def get_current_processing_time(self) -> int:
        return self.op.info.clock()

    def get_current_watermark(self) -> int:
        return self.op.watermark

    def register_processing_time_timer(self, time: int) -> None:
        self.op.processing_timers.register(self.op.key, time, self.window)

    def register_event_time_timer(self, time: int) -> None:
        self.op.event_timers.register(self.op.key, time, self.window)

    def delete_processing_time_timer(self, time: int) -> None:
        self.op.processing_timers.delete(time, self.window)

    def delete_event_time_timer(self, time: int) -> None:
        self.op.event_timers.delete(time, self.window)

    def get_partitioned_state(self, state_descriptor):
        state = self._states.get(state_descriptor.name)
        if state is None:
            state = self._states[state_descriptor.name] = in_window_state(self.op.backend, "window/trigger/",
                                                                          state_descriptor, self)
        return state

    def merge_partitioned_state(self, state_descriptor) -> None:
        self.get_partitioned_state(state_descriptor).merge_into(self.window, self.merged_windows)


class _ProcessContext(ProcessWindowFunction.Context, ProcessAllWindowFunction.Context):
    """The ``context`` of a process window function: the window, clocks, state and side outputs."""

    def __init__(self, operator: "WindowOperator"):
        self.op = operator
        self.window_ = None
        self.emitted: _Emitted | None = None
        self._window_states: dict[str, InWindowState] = {}

    def window(self):
        return self.window_

    def current_processing_time(self) -> int:
        return self.op.info.clock()

    def current_watermark(self) -> int:
        return self.op.watermark

    def window_state(self):
        return WindowStateStore(self.op.backend, self._window_states, _Scope(self))

    def global_state(self):
        return self.op.runtime_context

    def output(self, output_tag: OutputTag, value) -> None:
        self.emitted.records.append(SideOutputRecord(output_tag.tag_id, value))
        self.emitted.timestamps.append(self.window_.max_timestamp())


class _Scope:
    """The window of a process context as the ``scope.window`` of its per-window state."""

    def __init__(self, context: _ProcessContext):
        self._context = context

    @property
    def window(self):
        return self._context.window_


class _AssignerContext:
    def __init__(self, operator: "WindowOperator"):
        self.op = operator

    def get_current_processing_time(self) -> int:
        return self.op.info.clock()

    def get_runtime_context(self):
        return self.op.runtime_context


class _EvictorContext(Evictor.EvictorContext):
    def __init__(self, operator: "WindowOperator"):
        self.op = operator

    def get_current_processing_time(self) -> int:
        return self.op.info.clock()

    def get_current_watermark(self) -> int:
        return self.op.watermark


# -- the operator ------------------------------------------------------------------------------------------

class WindowOperator(AlignedWindowPaths, OneInputOperator):
    """Windows of a keyed stream: ``contents`` says what a pane holds (:class:`Reduce`, :class:`Aggregate`,
    :class:`Elements`), ``window_function`` how a fired pane becomes records; ``pre`` maps each record
    before it enters a pane (None: as is)."""

    keyed = True
    has_processing_timers = True

    def __init__(self, name: str, key_selector: Callable, assigner, trigger: Trigger | None = None,
                 evictor: Evictor | None = None, allowed_lateness: int = 0, late_tag: OutputTag | None = None,
                 contents=None, window_function: Any = None, pre: Callable | None = None):
        super().__init__(name, window_function)
        self.key_selector = key_selector
        self.assigner = assigner
        self.trigger = trigger if trigger is not None else assigner.get_default_trigger()
        self.evictor = evictor if evictor is not None else getattr(assigner, "get_default_evictor", lambda: None)()
        self.allowed_lateness = allowed_lateness
        self.late_tag = late_tag
        contents = contents if contents is not None else Elements()
        # An evictor needs the elements: a reduce or aggregate then runs over what it keeps when the window fires.
        self.fold_on_fire = contents if self.evictor is not None and contents.incremental else None
        self.contents = Elements() if self.fold_on_fire is not None else contents
        self.window_function = window_function
        self.pre = pre
        self.late_records_dropped = 0

    # -- lifecycle

    def open(self) -> None:
        backend = self.backend = self.runtime_context.keyed_backend
        self.event_timers = TimerQueue(backend, EVENT_TIMERS)
        self.processing_timers = TimerQueue(backend, PROCESSING_TIMERS)
        self.panes = backend.get_state(MapStateDescriptor(WINDOW_CONTENTS_STATE))
        self.merging = isinstance(self.assigner, MergingWindowAssigner)
        if self.merging:
            self.merging_state = backend.get_state(ValueStateDescriptor(MERGING_WINDOWS_STATE))
            if not self.trigger.can_merge():
                raise StateUsageError(f"Window '{self.name}': trigger {self.trigger!r} cannot merge, but session "
                                      "windows merge: use a trigger whose can_merge() is true.")
        self.event_time = self.assigner.is_event_time()
        self.key = None
        self.trigger_context = _TriggerContext(self)
        self.process_context = _ProcessContext(self)
        self.assigner_context = _AssignerContext(self)
        self.evictor_context = _EvictorContext(self)
        self.call = _window_call(self.window_function)
        # The batch paths: Flink's results, fewer state accesses (see operators.window.aligned). The aligned
        # layout only while no pane is in the general one: a window's pane must be in one place.
        self.batch_path = self._takes_batch_path()
        self.aligned = (self.batch_path and self.allowed_lateness == 0
                        and not _has_entries(backend, WINDOW_CONTENTS_STATE))
        self._open_aligned_layout()
        if self.window_function is not None:
            opener = getattr(self.window_function, "open", None)
            if isinstance(self.window_function, Function) and callable(opener):
                opener(self.runtime_context)

    def close(self) -> None:
        if self.window_function is not None and isinstance(self.window_function, Function):
            self.window_function.close()
        if self.late_records_dropped:
            log.info("Window '%s' dropped %d late records (later than the watermark minus the allowed lateness "
                     "of %d ms)", self.name, self.late_records_dropped, self.allowed_lateness)

    # -- time helpers

    def _cleanup_time(self, window) -> int:
        if not self.event_time:
            return window.max_timestamp()
        cleanup = window.max_timestamp() + self.allowed_lateness
        return cleanup if cleanup >= window.max_timestamp() and cleanup < MAX_WATERMARK else MAX_WATERMARK

    def _window_late(self, window) -> bool:
        return self.event_time and self._cleanup_time(window) <= self.watermark

    def _register_cleanup(self, window) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup == MAX_WATERMARK:
            return  # a global window is never cleaned up
        if self.event_time:
            self.event_timers.register(self.key, cleanup, window)
        else:
            self.processing_timers.register(self.key, cleanup, window)

    # -- records

    def process_batch(self, records: list) -> list:
        timestamps = records.timestamps if type(records) is TimestampedBatch else [None] * len(records)
        pre = self.pre
        values = records if pre is None else [pre(r) for r in records]
        emitted = _Emitted()
        if self.aligned:
            if None in timestamps:
                raise self._no_timestamp()
            self._aligned_batch(records, values, timestamps, emitted)
            return emitted.batch()
        # The batch path only when no record of the batch is behind the watermark: then every window of every
        # record ends after it, and nothing fires or is late while the batch is added.
        if self.batch_path and None not in timestamps and min(timestamps) > self.watermark:
            self._batch_path(records, values, timestamps)
        else:
            key_of, set_key = self.key_selector, self.backend.set_current_key
            for record, value, timestamp in zip(records, values, timestamps):
                key = key_of(record)
                set_key(key)
                self.key = key
                self._element(value, timestamp, emitted)
        return emitted.batch()

    def _late(self, record, value, timestamp, emitted: _Emitted) -> None:
        if self.late_tag is not None and self.late_tag.tag_id in self.side_tags:
            emitted.records.append(SideOutputRecord(self.late_tag.tag_id, value))
            emitted.timestamps.append(timestamp)
        else:
            self.late_records_dropped += 1

    def _clear_function_state(self, window) -> None:
        clear = getattr(self.window_function, "clear", None)
        if isinstance(self.window_function, (ProcessWindowFunction, ProcessAllWindowFunction)) and callable(clear):
            self.process_context.window_ = window
            clear(self.process_context)

    def _no_timestamp(self) -> Exception:
        return FunctionContractError(
            f"Window '{self.name}' got a record without a timestamp, but its windows are event-time windows: call "
            "assign_timestamps_and_watermarks(...) or from_source(source, watermark_strategy, name) upstream, or "
            "use processing-time windows.")

    def _element(self, value, timestamp, emitted: _Emitted) -> None:
        """One record of the current key (Flink's ``WindowOperator.processElement``)."""
        if timestamp is None and self.event_time:
            raise self._no_timestamp()
        windows = self.assigner.assign_windows(value, timestamp, self.assigner_context)
        skipped = True
        trigger, ctx = self.trigger, self.trigger_context
        if self.merging:
            mapping = MergingWindowSet(self.assigner, self.merging_state.value() or {})
            for window in windows:
                actual = mapping.add_window(window, self._merge_function)
                if self._window_late(actual):
                    mapping.retire_window(actual)
                    continue
                skipped = False
                state_window = mapping.get_state_window(actual)
                self._add_to_pane(state_window, value, timestamp)
                ctx.window = actual
                result = trigger.on_element(value, timestamp, actual, ctx)
                if result.is_fire():
                    self._emit(actual, state_window, emitted)
                if result.is_purge():
                    self.panes.remove(state_window)
                self._register_cleanup(actual)
            self.merging_state.update(mapping.persist() or None)
        else:
            for window in windows:
                if self._window_late(window):
                    continue
                skipped = False
                self._add_to_pane(window, value, timestamp)
                ctx.window = window
                result = trigger.on_element(value, timestamp, window, ctx)
                if result.is_fire():
                    self._emit(window, window, emitted)
                if result.is_purge():
                    self.panes.remove(window)
                self._register_cleanup(window)
        if skipped and self.event_time and timestamp + self.allowed_lateness <= self.watermark:
            if self.late_tag is not None and self.late_tag.tag_id in self.side_tags:
                emitted.records.append(SideOutputRecord(self.late_tag.tag_id, value))
                emitted.timestamps.append(timestamp)
            else:
                self.late_records_dropped += 1

    def _add_to_pane(self, window, value, timestamp) -> None:
        if self.evictor is not None:
            value = TimestampedValue(value, timestamp)
        panes = self.panes
        panes.put(window, self.contents.add(panes.get(window), value))

    def _merge_function(self, merge_result, merged_windows, state_window_result, merged_state_windows) -> None:
        """Session windows merged (Flink's ``MergeFunction``): timers, trigger state and panes follow."""
        if self.event_time and merge_result.max_timestamp() + self.allowed_lateness <= self.watermark:
            raise StateUsageError(f"Window '{self.name}': the merged window {merge_result} is late; a merging "
                                  "assigner must not merge into a window that is already past the watermark.")
        ctx = self.trigger_context
        ctx.window = merge_result
        ctx.merged_windows = list(merged_windows)
        self.trigger.on_merge(merge_result, ctx)
        for window in merged_windows:
            ctx.window = window
            self.trigger.clear(window, ctx)
            cleanup = self._cleanup_time(window)
            if cleanup != MAX_WATERMARK:
                (self.event_timers if self.event_time else self.processing_timers).delete(cleanup, window)
        panes, merge = self.panes, self.contents.merge
        target = panes.get(state_window_result)
        for state_window in merged_state_windows:
            contents = panes.get(state_window)
            if contents is not None:
                panes.remove(state_window)
                target = contents if target is None else merge(target, contents)
        if target is not None:
            panes.put(state_window_result, target)

    def _emit(self, window, state_window, emitted: _Emitted) -> None:
        contents = self.panes.get(state_window)
        if contents is None:
            return
        if self.evictor is not None:
            contents = self._evicted(window, state_window, contents)
        else:
            contents = self.contents.result(contents)
        context = self.process_context
        context.window_ = window
        context.emitted = emitted
        emitted.add(self.call(self.key, window, contents, context), window.max_timestamp(), self.name)

    def _evicted(self, window, state_window, elements: list) -> list:
        """Evictor before, the function's view, evictor after (Flink's ``EvictingWindowOperator``); a reduce or
        aggregate folds the view."""
        elements = list(elements)
        evictor, ctx = self.evictor, self.evictor_context
        evictor.evict_before(elements, len(elements), window, ctx)
        values = [e.get_value() for e in elements]
        evictor.evict_after(elements, len(elements), window, ctx)
        self.panes.put(state_window, elements) if elements else self.panes.remove(state_window)
        fold = self.fold_on_fire
        if fold is None:
            return values
        accumulator = None
        for value in values:
            accumulator = fold.add(accumulator, value)
        return [] if accumulator is None else fold.result(accumulator)

    # -- timers

    def process_watermark(self, watermark: int) -> list:
        self.watermark = watermark
        emitted = _Emitted()
        if self.aligned_windows:
            self._fire_aligned(watermark, emitted)
        if self.event_timers.next_time() is None or self.event_timers.next_time() > watermark:
            return emitted.batch()
        for timestamp, key, window in self.event_timers.pop_due(watermark):
            self.key = key
            self._on_timer(timestamp, window, emitted, event_time=True)
        return emitted.batch()

    def next_processing_time(self) -> int | None:
        return self.processing_timers.next_time()

    def finish(self) -> list:
        """End of input: processing-time windows fire now rather than never (their clock would not reach them
        before the job ends; Flink drops them), as event-time windows do at the final watermark."""
        if self.event_time or self.processing_timers.next_time() is None:
            return []
        return self.on_processing_time(MAX_WATERMARK)

    def on_processing_time(self, now_ms: int) -> list:
        emitted = _Emitted()
        for timestamp, key, window in self.processing_timers.pop_due(now_ms):
            self.key = key
            self._on_timer(timestamp, window, emitted, event_time=False)
        return emitted.batch()

    def _on_timer(self, timestamp: int, window, emitted: _Emitted, event_time: bool) -> None:
        mapping = None
        state_window = window
        if self.merging:
            mapping = MergingWindowSet(self.assigner, self.merging_state.value() or {})
            state_window = mapping.get_state_window(window)
            if state_window is None:
                return  # a timer of a window that was merged into another since
        ctx = self.trigger_context
        ctx.window = window
        # The trigger sees every timer, even of an empty (purged) pane: it may register its next one.
        if event_time:
            result = self.trigger.on_event_time(timestamp, window, ctx)
        else:
            result = self.trigger.on_processing_time(timestamp, window, ctx)
        if result.is_fire():
            self._emit(window, state_window, emitted)
        if result.is_purge():
            self.panes.remove(state_window)
        if event_time == self.event_time and timestamp == self._cleanup_time(window):
            self.panes.remove(state_window)
            ctx.window = window
            self.trigger.clear(window, ctx)
            self._clear_function_state(window)
            if mapping is not None:
                mapping.retire_window(window)
        if mapping is not None:
            self.merging_state.update(mapping.persist() or None)
