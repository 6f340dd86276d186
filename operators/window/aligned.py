"""The window operator's batch paths for aligned windows: tumbling and sliding event-time windows whose panes
hold a ``reduce`` or ``aggregate`` accumulator, with the default trigger and no evictor.

Then only the watermark fires a window, and every key's windows start at the same times, so a batch need not
go through the trigger record by record:

* the batch path, when no record of a batch is behind the watermark: each pane the batch touches is read once,
  its records folded into it in their order, and written once, with the timers the trigger would register. It
  gives the same state as record by record (the same calls in the same order): nothing fires or is late while
  such a batch is added.
* the aligned layout, when there is no allowed lateness either: panes as one value state per window
  (``window/aligned/<start>/<end>``: :data:`ALIGNED_WINDOW_STATE_PREFIX` and the window) keyed by the record's
  key, and no timers. A batch reads each window's panes with one ``get_many`` and writes them with one
  ``put_many``; a watermark fires each window it passed, all keys at once, and drops the window's state whole.

They are apart from the general operator (:mod:`operators.window.operator`) because they are an optimisation
with a state layout of its own that must give Flink's results exactly, which reads and is checked best on its
own. :class:`AlignedWindowPaths` is a base class of ``WindowOperator``, which decides when to take them.

>>> from operators.context import SubtaskInfo
>>> from operators.window.assigners import SlidingEventTimeWindows
>>> from operators.window.operator import Reduce, WindowOperator
>>> from runtime.keys.key_groups import key_group_range
>>> from runtime.protocol.records import TimestampedBatch
>>> from state_backends.heap import HeapKeyedStateBackend
>>> op = WindowOperator("sum", lambda r: r[0], SlidingEventTimeWindows.of(10, 5),
...                     contents=Reduce(lambda a, b: (a[0], a[1] + b[1])))
>>> op.setup(SubtaskInfo("sum", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
>>> op.open(); op.process_batch(TimestampedBatch.of([("a", 1), ("b", 2), ("a", 3)], [1, 6, 7]))
[]
>>> op.aligned, sorted(name for name in op.backend.state_names() if name.startswith(ALIGNED_WINDOW_STATE_PREFIX))
(True, ['window/aligned/-5/5', 'window/aligned/0/10', 'window/aligned/5/15'])
>>> fired = op.process_watermark(9)   # [-5, 5) and [0, 10) fire, earliest first
>>> sorted(fired), fired.timestamps
([('a', 1), ('a', 4), ('b', 2)], [4, 9, 9])
"""

from __future__ import annotations

import heapq

from operators.window.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from operators.window.triggers import EventTimeTrigger
from operators.window.windows import TimeWindow
from runtime.keys.canonical import canonical_keys
from runtime.protocol.events import MAX_WATERMARK
from state_backends.descriptors import ValueStateDescriptor

__all__ = ["AlignedWindowPaths", "ALIGNED_WINDOW_STATE_PREFIX"]

#: The aligned layout's state names start with it: ``f"{ALIGNED_WINDOW_STATE_PREFIX}{start}/{end}"`` is the value
#: state holding each key's pane of window ``[start, end)``. Part of the savepoint format (docs/savepoint-format.md):
#: the state API reads and writes panes by it.
ALIGNED_WINDOW_STATE_PREFIX = "window/aligned/"
_MISSING = object()


class AlignedWindowPaths:
    """The batch paths, as methods of the ``WindowOperator`` that inherits them: they use its assigner, trigger,
    evictor, contents, key selector, backend, panes and timers, and its ``_late``, ``_register_cleanup`` and
    ``_clear_function_state``."""

    def _takes_batch_path(self) -> bool:
        assigner = self.assigner
        return (type(self.trigger) is EventTimeTrigger and self.evictor is None and self.contents.incremental
                and type(assigner) in (TumblingEventTimeWindows, SlidingEventTimeWindows))

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

    def _open_aligned_layout(self) -> None:
        """The windows restored in the aligned layout, reopened if this operator uses it (``self.aligned``)."""
        self.aligned_windows: dict[int, int] = {}  # start -> end of the windows with panes in the aligned layout
        self._aligned_ends: list = []  # heap of (end, start)
        for name in self.backend.state_names():
            if name.startswith(ALIGNED_WINDOW_STATE_PREFIX):
                start, end = (int(part) for part in name[len(ALIGNED_WINDOW_STATE_PREFIX):].split("/"))
                if self.aligned:
                    self._open_aligned(start, end)
                else:  # restored from a job that could use the aligned layout, and this one cannot
                    self._unalign(name, start, end)

    def _open_aligned(self, start: int, end: int) -> str:
        name = f"{ALIGNED_WINDOW_STATE_PREFIX}{start}/{end}"
        if start not in self.aligned_windows:
            self.backend.declare_bulk_state(ValueStateDescriptor(name))
            self.aligned_windows[start] = end
            heapq.heappush(self._aligned_ends, (end, start))
        return name

    def _aligned_batch(self, records, values, timestamps, emitted) -> None:
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
            put_many(f"{ALIGNED_WINDOW_STATE_PREFIX}{start}/{start + size}", list(panes), list(panes.values()))

    def _one_window(self, start: int, size: int, keys: list, values) -> None:
        """``_aligned_batch`` when every record of the batch falls in one window (and none is late): the
        backend folds the records into the panes in their order, one lookup each."""
        self.contents.fold_into(self.backend, self._open_aligned(start, start + size), keys, values)

    def _fire_aligned(self, watermark: int, emitted) -> None:
        """Every window whose end the watermark passed fires, all keys at once, earliest first, and is dropped
        (Flink fires the same timers, one per key, in time order)."""
        ends, backend = self._aligned_ends, self.backend
        result, call, context = self.contents.result, self.call, self.process_context
        plain = self.window_function is None
        set_key = backend.set_current_key
        while ends and ends[0][0] - 1 <= watermark:
            end, start = heapq.heappop(ends)
            del self.aligned_windows[start]
            name = f"{ALIGNED_WINDOW_STATE_PREFIX}{start}/{end}"
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
