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
restored and moved with their key groups like any other state.

Tumbling and sliding event-time windows with ``reduce`` or ``aggregate`` and the default trigger take a
batch path when no record of a batch is behind the watermark: each pane the batch touches is read once, its
records folded into it in their order, and written once. It gives the same state as record by record (the
same calls in the same order): nothing fires or is late while such a batch is added.

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

import heapq
import logging
from typing import Any, Callable

from operators.functions import Function
from operators.operator import OneInputOperator
from operators.timers import EVENT_TIMERS, PROCESSING_TIMERS, TimerQueue
from operators.window.assigners import MergingWindowAssigner, SlidingEventTimeWindows, TumblingEventTimeWindows
from operators.window.evictors import Evictor, TimestampedValue
from operators.window.functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from operators.window.merging import MergingWindowSet
from operators.window.triggers import EventTimeTrigger, Trigger
from operators.window.windows import TimeWindow
from runtime.errors import FunctionContractError, StateUsageError
from runtime.keys.canonical import canonical_keys
from runtime.protocol.events import MAX_WATERMARK
from runtime.protocol.records import TimestampedBatch
from runtime.side_outputs import OutputTag, SideOutputRecord
from state_backends.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)

__all__ = ["WindowOperator", "Reduce", "Aggregate", "Elements"]

log = logging.getLogger(__name__)

_CONTENTS = "window/contents"
_ALIGNED = "window/aligned/"  # + "<start>/<end>": one value state per window (see _aligned_batch)
_MISSING = object()
_MERGING = "window/merging-windows"


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


# -- state scoped to the current key and a window --------------------------------------------------------

class _InWindow:
    """A state handle scoped to the backend's current key and the window ``scope.window`` (a namespace)."""

    def __init__(self, backend, name: str, descriptor, scope):
        windows = MapStateDescriptor(name)
        if descriptor.has_ttl:  # each (key, window) entry expires whole
            windows.enable_time_to_live(descriptor.ttl_config)
        self._map = backend.get_state(windows)
        self._descriptor = descriptor
        self._scope = scope

    def _get(self):
        return self._map.get(self._scope.window)

    def _set(self, value) -> None:
        if value is None:
            self._map.remove(self._scope.window)
        else:
            self._map.put(self._scope.window, value)

    def clear(self) -> None:
        self._map.remove(self._scope.window)

    def merge_into(self, target, sources) -> None:
        """Fold the values of windows ``sources`` into window ``target`` (session windows merged)."""
        merged = self._map.get(target)
        for window in sources:
            value = self._map.get(window)
            if value is None or window == target:
                continue
            self._map.remove(window)
            merged = value if merged is None else self._merge(merged, value)
        if merged is not None:
            self._map.put(target, merged)

    def _merge(self, a, b):
        raise StateUsageError(f"State '{self._descriptor.name}' is value state, which cannot be merged when session "
                              "windows merge: use reducing, aggregating or list state in a merging trigger.")


class _ValueInWindow(_InWindow):
    def value(self):
        return self._get()

    def update(self, value) -> None:
        self._set(value)


class _ListInWindow(_InWindow):
    def get(self):
        return list(self._get() or ())

    def add(self, value) -> None:
        self._set((self._get() or []) + [value])

    def add_all(self, values) -> None:
        self._set((self._get() or []) + list(values))

    def update(self, values) -> None:
        self._set(list(values) or None)

    def _merge(self, a, b):
        return a + b


class _ReducingInWindow(_InWindow):
    def get(self):
        return self._get()

    def add(self, value) -> None:
        current = self._get()
        self._set(value if current is None else self._descriptor.reduce_function(current, value))

    def _merge(self, a, b):
        return self._descriptor.reduce_function(a, b)


class _AggregatingInWindow(_InWindow):
    def get(self):
        accumulator = self._get()
        return None if accumulator is None else self._descriptor.agg_function.get_result(accumulator)

    def add(self, value) -> None:
        function = self._descriptor.agg_function
        accumulator = self._get()
        self._set(function.add(value, function.create_accumulator() if accumulator is None else accumulator))

    def _merge(self, a, b):
        return self._descriptor.agg_function.merge(a, b)


_IN_WINDOW = {ValueStateDescriptor: _ValueInWindow, ListStateDescriptor: _ListInWindow,
              ReducingStateDescriptor: _ReducingInWindow, AggregatingStateDescriptor: _AggregatingInWindow}


def _in_window(backend, prefix: str, descriptor, scope) -> _InWindow:
    state_class = _IN_WINDOW.get(type(descriptor))
    if state_class is None:
        raise StateUsageError(f"Per-window state '{descriptor.name}': {type(descriptor).__name__} is not supported "
                              "here; use value, list, reducing or aggregating state.")
    return state_class(backend, f"{prefix}{descriptor.name}", descriptor, scope)


# -- the contexts handed to triggers and window functions ----------------------------------------------------

class _TriggerContext(Trigger.OnMergeContext):
    """What a trigger sees, scoped to the current key and ``window`` (set by the operator before each call)."""

    def __init__(self, operator: "WindowOperator"):
        self.op = operator
        self.window = None
        self.merged_windows: list = []
        self._states: dict[str, _InWindow] = {}

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
            state = self._states[state_descriptor.name] = _in_window(self.op.backend, "window/trigger/",
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
        self._window_states: dict[str, _InWindow] = {}

    def window(self):
        return self.window_

    def current_processing_time(self) -> int:
        return self.op.info.clock()

    def current_watermark(self) -> int:
        return self.op.watermark

    def window_state(self):
        return _WindowStateStore(self)

    def global_state(self):
        return self.op.runtime_context

    def output(self, output_tag: OutputTag, value) -> None:
        self.emitted.records.append(SideOutputRecord(output_tag.tag_id, value))
        self.emitted.timestamps.append(self.window_.max_timestamp())


class _WindowStateStore:
    """``context.window_state()``: keyed state of the current key in the current window."""

    def __init__(self, context: _ProcessContext):
        self._context = context

    def get_state(self, state_descriptor):
        states = self._context._window_states
        state = states.get(state_descriptor.name)
        if state is None:
            state = states[state_descriptor.name] = _in_window(self._context.op.backend, "window/user/",
                                                               state_descriptor, _Scope(self._context))
        return state

    get_list_state = get_reducing_state = get_aggregating_state = get_state


class _Scope:
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

class WindowOperator(OneInputOperator):
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
        self.panes = backend.get_state(MapStateDescriptor(_CONTENTS))
        self.merging = isinstance(self.assigner, MergingWindowAssigner)
        if self.merging:
            self.merging_state = backend.get_state(ValueStateDescriptor(_MERGING))
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
        # The batch path: Flink's results, fewer state accesses (see the module docstring).
        assigner = self.assigner
        self.batch_path = (type(self.trigger) is EventTimeTrigger and self.evictor is None and self.contents.incremental
                           and type(assigner) in (TumblingEventTimeWindows, SlidingEventTimeWindows))
        self.aligned = self.batch_path and self.allowed_lateness == 0 and not _has_entries(backend, _CONTENTS)
        self.aligned_windows: dict[int, int] = {}  # start -> end of the windows with panes in the aligned layout
        self._aligned_ends: list = []  # heap of (end, start)
        for name in backend.state_names():
            if name.startswith(_ALIGNED):
                start, end = (int(part) for part in name[len(_ALIGNED):].split("/"))
                if self.aligned:
                    self._open_aligned(start, end)
                else:  # restored from a job that could use the aligned layout, and this one cannot
                    self._unalign(name, start, end)
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

    def _batch_path(self, records, values, timestamps) -> None:
        """Each pane read once, folded over its records in their order, written once (as record by record)."""
        assigner = self.assigner
        size, offset = assigner.size, assigner.offset
        slide = getattr(assigner, "slide", size)
        key_of, add = self.key_selector, self.contents.add
        set_key, panes = self.backend.set_current_key, self.panes
        missing = _MISSING
        folded: dict = {}
        for record, value, timestamp in zip(records, values, timestamps):
            key = key_of(record)
            last_start = timestamp - (timestamp - offset) % slide
            for start in range(last_start, timestamp - size, -slide):
                pane = (key, start)
                accumulator = folded.get(pane, missing)
                if accumulator is missing:
                    set_key(key)
                    accumulator = panes.get(TimeWindow(start, start + size))
                folded[pane] = add(accumulator, value)
        register, lateness = self.event_timers.register, self.allowed_lateness
        for (key, start), accumulator in folded.items():
            set_key(key)
            window = TimeWindow(start, start + size)
            panes.put(window, accumulator)
            end = start + size - 1
            register(key, end, window)  # EventTimeTrigger's timer
            if lateness and end + lateness < MAX_WATERMARK:
                register(key, end + lateness, window)  # the cleanup timer, unless it is the trigger's

    # -- the aligned layout: tumbling/sliding event-time windows, default trigger, no lateness

    def _open_aligned(self, start: int, end: int) -> str:
        name = f"{_ALIGNED}{start}/{end}"
        if start not in self.aligned_windows:
            self.backend.get_state(ValueStateDescriptor(name))
            self.aligned_windows[start] = end
            heapq.heappush(self._aligned_ends, (end, start))
        return name

    def _aligned_batch(self, records, values, timestamps, emitted: _Emitted) -> None:
        """Panes as one value state per window, keyed by the record's key: each window's panes of a batch are
        read with one ``get_many`` and written with one ``put_many``, folded over the records in their order in
        between (as record by record). A window whose end the watermark passed is gone: its records are late."""
        assigner = self.assigner
        size, offset = assigner.size, assigner.offset
        slide = getattr(assigner, "slide", size)
        late_start = self.watermark - size + 1  # a window starting at or before this has ended
        key_of = self.key_selector
        keys = canonical_keys([key_of(r) for r in records])  # floats or tuples: every NaN is one key
        if slide == size:
            first = timestamps[0] - (timestamps[0] - offset) % size
            if first > late_start and min(timestamps) >= first and max(timestamps) < first + size:
                self._one_window(first, size, keys, values)  # the usual batch: a few ms of event time
                return
            starts = [t - (t - offset) % size for t in timestamps]
            pane_of = list(zip(starts, keys))
            per_record = None
        else:
            pane_of = []
            per_record = []
            for key, t in zip(keys, timestamps):
                mine = [(start, key) for start in range(t - (t - offset) % slide, t - size, -slide)
                        if start > late_start]
                per_record.append(mine)
                pane_of.extend(mine)
        by_start: dict = {}
        for start, key in set(pane_of):
            if start > late_start:
                by_start.setdefault(start, []).append(key)
        accumulators: dict = {}
        get_many = self.backend.get_many
        for start, window_keys in by_start.items():
            name = self._open_aligned(start, start + size)
            accumulators[start] = dict(zip(window_keys, get_many(name, window_keys)))
        add = self.contents.add
        if per_record is None:
            for start, key, value, record, timestamp in zip(starts, keys, values, records, timestamps):
                panes = accumulators.get(start)
                if panes is None:
                    self._late(record, value, timestamp, emitted)
                else:
                    panes[key] = add(panes[key], value)
        else:
            for mine, value, record, timestamp in zip(per_record, values, records, timestamps):
                if not mine and timestamp <= self.watermark:
                    self._late(record, value, timestamp, emitted)
                for start, key in mine:
                    panes = accumulators[start]
                    panes[key] = add(panes[key], value)
        put_many = self.backend.put_many
        for start, panes in accumulators.items():
            put_many(f"{_ALIGNED}{start}/{start + size}", list(panes), list(panes.values()))

    def _one_window(self, start: int, size: int, keys: list, values) -> None:
        """``_aligned_batch`` when every record of the batch falls in one window (and none is late): the
        backend folds the records into the panes in their order, one lookup each."""
        self.backend.fold_many(self._open_aligned(start, start + size), keys, values, self.contents.add)

    def _late(self, record, value, timestamp, emitted: _Emitted) -> None:
        if self.late_tag is not None and self.late_tag.tag_id in self.side_tags:
            emitted.records.append(SideOutputRecord(self.late_tag.tag_id, value))
            emitted.timestamps.append(timestamp)
        else:
            self.late_records_dropped += 1

    def _fire_aligned(self, watermark: int, emitted: _Emitted) -> None:
        """Every window whose end the watermark passed fires, all keys at once, earliest first, and is dropped
        (Flink fires the same timers, one per key, in time order)."""
        ends, backend = self._aligned_ends, self.backend
        result, call, context = self.contents.result, self.call, self.process_context
        plain = self.window_function is None
        set_key = backend.set_current_key
        while ends and ends[0][0] - 1 <= watermark:
            end, start = heapq.heappop(ends)
            del self.aligned_windows[start]
            name = f"{_ALIGNED}{start}/{end}"
            window = TimeWindow(start, end)
            context.window_ = window
            context.emitted = emitted
            records, timestamp = emitted.records, end - 1
            if plain:
                before = len(records)
                for _, _, accumulator in backend.entries(name):
                    records.extend(result(accumulator))
                emitted.timestamps.extend([timestamp] * (len(records) - before))
            else:
                for _, key, accumulator in backend.entries(name):
                    set_key(key)
                    self.key = key
                    emitted.add(call(key, window, result(accumulator), context), timestamp, self.name)
                    self._clear_function_state(window)
            backend.drop_state(name)

    def _unalign(self, name: str, start: int, end: int) -> None:
        """Panes of the aligned layout into the general one, with their timers (a restore into a job whose
        window now needs the general path: allowed lateness added, say)."""
        window = TimeWindow(start, end)
        for _, key, accumulator in list(self.backend.entries(name)):
            self.backend.set_current_key(key)
            self.key = key
            self.panes.put(window, accumulator)
            self.event_timers.register(key, end - 1, window)
            self._register_cleanup(window)
        self.backend.drop_state(name)

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
