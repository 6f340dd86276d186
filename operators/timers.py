"""Timers of keyed operators: kept as keyed state, fired in time order.

A timer is ``(timestamp, namespace)`` registered for a key (the namespace is the window of a window
operator's timer, None for a ``KeyedProcessFunction``'s). The timers of a key live in a map state of the
operator's keyed backend, so they are checkpointed, restored and moved with their key group when a job is
rescaled, like any other keyed state, on any backend. Beside the state, an in-memory heap orders the timers
of the whole subtask by time; it is rebuilt from the state on restore, and a deleted timer is dropped from the
heap lazily, when it reaches the top and is no longer in the state. Registering a timer twice for the same
key, namespace and time keeps one (Flink's deduplication).

>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.heap import HeapKeyedStateBackend
>>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
>>> timers = TimerQueue(backend, "event")
>>> for key, time in (("a", 30), ("b", 10), ("a", 30), ("a", 20)):
...     backend.set_current_key(key); timers.register(key, time)
>>> backend.set_current_key("a"); timers.delete(20)
>>> [(time, key) for time, key, _ in timers.pop_due(25)], timers.next_time()
([(10, 'b')], 30)
"""

from __future__ import annotations

import heapq
import itertools
import time
from typing import Any, Iterator

from runtime.errors import StateUsageError
from state_backends.descriptors import MapStateDescriptor

__all__ = ["TimerQueue", "KeyedTimerService", "NonKeyedTimerService", "processing_time_ms",
           "EVENT_TIMERS", "PROCESSING_TIMERS"]

EVENT_TIMERS = "__timers__/event"
PROCESSING_TIMERS = "__timers__/processing"


def processing_time_ms() -> int:
    """The wall-clock time in epoch milliseconds (processing time)."""
    return time.time_ns() // 1_000_000


class TimerQueue:
    """The timers of one keyed operator subtask in one time domain (``state_name`` holds them in state)."""

    def __init__(self, backend, state_name: str):
        self.backend = backend
        self.state = backend.get_state(MapStateDescriptor(state_name))
        self.state_name = state_name
        self._heap: list = []
        self._sequence = itertools.count()  # ties on time are broken by registration order, never by key
        self._live = 0
        for _, key, timers in backend.entries(state_name):  # restored state: rebuild the order
            for timestamp, namespace in timers:
                heapq.heappush(self._heap, (timestamp, next(self._sequence), key, namespace))
                self._live += 1

    def register(self, key: Any, timestamp: int, namespace: Any = None) -> None:
        """A timer for ``key``, which must be the backend's current key."""
        entry = (timestamp, namespace)
        state = self.state
        if state.contains(entry):
            return
        state.put(entry, None)
        self._live += 1
        heap = self._heap
        heapq.heappush(heap, (timestamp, next(self._sequence), key, namespace))
        if len(heap) > 2 * self._live + 4096:  # mostly deleted timers: rebuild rather than keep them
            self._compact()

    def delete(self, timestamp: int, namespace: Any = None) -> None:
        """Delete the current key's timer (no error if there is none)."""
        entry = (timestamp, namespace)
        if self.state.contains(entry):
            self.state.remove(entry)
            self._live -= 1

    def next_time(self) -> int | None:
        """The time of the earliest timer (perhaps deleted since: then popping it fires nothing)."""
        return self._heap[0][0] if self._heap else None

    def pop_due(self, until: int) -> Iterator[tuple[int, Any, Any]]:
        """``(timestamp, key, namespace)`` of every timer at or before ``until``, earliest first, each removed
        as it is handed out with the backend's current key set to its key. Timers registered meanwhile (by
        ``on_timer``) fire in the same pass if they are due."""
        heap, state, set_key = self._heap, self.state, self.backend.set_current_key
        while heap and heap[0][0] <= until:
            timestamp, _, key, namespace = heapq.heappop(heap)
            set_key(key)
            entry = (timestamp, namespace)
            if not state.contains(entry):
                continue  # deleted after it was registered
            state.remove(entry)
            self._live -= 1
            yield timestamp, key, namespace

    def _compact(self) -> None:
        heap = []
        for _, key, timers in self.backend.entries(self.state_name):
            for timestamp, namespace in timers:
                heap.append((timestamp, next(self._sequence), key, namespace))
        heapq.heapify(heap)
        self._heap = heap


class KeyedTimerService:
    """``ctx.timer_service()`` of a keyed function: timers for the current key (Flink's ``TimerService``).

    ``current_watermark()`` is the operator's input watermark; ``current_processing_time()`` its subtask's clock
    (the wall clock in epoch milliseconds, in a job).
    """

    __slots__ = ("_operator",)

    def __init__(self, operator):
        self._operator = operator

    def current_processing_time(self) -> int:
        return self._operator.info.clock()

    def current_watermark(self) -> int:
        return self._operator.watermark

    def register_event_time_timer(self, timestamp: int) -> None:
        """Call ``on_timer`` for the current key once the input watermark reaches ``timestamp``."""
        op = self._operator
        op.event_timers.register(op.backend.get_current_key(), _checked(timestamp, "register_event_time_timer"))

    def register_processing_time_timer(self, timestamp: int) -> None:
        """Call ``on_timer`` for the current key once the wall clock reaches ``timestamp`` (ms)."""
        op = self._operator
        op.processing_timers.register(op.backend.get_current_key(),
                                      _checked(timestamp, "register_processing_time_timer"))

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._operator.event_timers.delete(timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._operator.processing_timers.delete(timestamp)


class NonKeyedTimerService:
    """``ctx.timer_service()`` of a function on a stream that is not keyed: time, but no timers (as in Flink).

    >>> NonKeyedTimerService(lambda: 5).current_watermark()
    5
    """

    __slots__ = ("_watermark", "_why", "_clock")

    NOT_KEYED = ("Timers need a keyed stream: timers belong to a key and are checkpointed with its state. Call "
                 "key_by(...) and use a KeyedProcessFunction.")

    def __init__(self, watermark, why: str = NOT_KEYED, clock=processing_time_ms):
        self._watermark = watermark
        self._why = why  # what the refusal of a timer says
        self._clock = clock

    def current_processing_time(self) -> int:
        return self._clock()

    def current_watermark(self) -> int:
        return self._watermark()

    def _refuse(self, *_) -> None:
        raise StateUsageError(self._why)

    register_event_time_timer = register_processing_time_timer = _refuse
    delete_event_time_timer = delete_processing_time_timer = _refuse


def _checked(timestamp, where: str) -> int:
    if type(timestamp) is int:
        return timestamp
    if isinstance(timestamp, float) and timestamp == timestamp and abs(timestamp) != float("inf"):
        return int(timestamp)
    raise StateUsageError(f"{where}({timestamp!r}): a timer's time is a number of milliseconds (an int).")
