"""Keyed state scoped to one window: what a trigger's ``get_partitioned_state`` and a process window function's
``context.window_state()`` hand out.

Each handle keeps one map state per key, ``{window: value}``, and reads and writes the entry of whichever
window its *scope* names at the time of the call (``scope.window``, set by the window operator before it
calls the trigger or the function), so one handle serves every window of the key. When session windows
merge, ``merge_into`` folds the merged windows' values into the result's. These handles know nothing of
the operator's panes, timers or contexts: they are the state API, the operator decides the window.

>>> from types import SimpleNamespace
>>> from operators.window.windows import TimeWindow
>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.descriptors import ReducingStateDescriptor
>>> from state_backends.heap import HeapKeyedStateBackend
>>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("ann")
>>> scope = SimpleNamespace(window=TimeWindow(0, 10))
>>> clicks = in_window_state(backend, "window/user/", ReducingStateDescriptor("clicks", lambda a, b: a + b), scope)
>>> clicks.add(2); clicks.add(3); clicks.get()
5
>>> scope.window = TimeWindow(5, 15); clicks.add(1); clicks.get()
1
>>> clicks.merge_into(TimeWindow(0, 15), [TimeWindow(0, 10), TimeWindow(5, 15)])
>>> scope.window = TimeWindow(0, 15); clicks.get()
6
"""

from __future__ import annotations

from runtime.errors import StateUsageError
from state_backends.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)

__all__ = ["InWindowState", "in_window_state", "WindowStateStore"]


class InWindowState:
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


class _ValueInWindow(InWindowState):
    def value(self):
        return self._get()

    def update(self, value) -> None:
        self._set(value)


class _ListInWindow(InWindowState):
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


class _ReducingInWindow(InWindowState):
    def get(self):
        return self._get()

    def add(self, value) -> None:
        current = self._get()
        self._set(value if current is None else self._descriptor.reduce_function(current, value))

    def _merge(self, a, b):
        return self._descriptor.reduce_function(a, b)


class _AggregatingInWindow(InWindowState):
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


def in_window_state(backend, prefix: str, descriptor, scope) -> InWindowState:
    """The handle of ``descriptor``'s kind, its map state named ``prefix + descriptor.name``."""
    state_class = _IN_WINDOW.get(type(descriptor))
    if state_class is None:
        raise StateUsageError(f"Per-window state '{descriptor.name}': {type(descriptor).__name__} is not supported "
                              "here; use value, list, reducing or aggregating state.")
    return state_class(backend, f"{prefix}{descriptor.name}", descriptor, scope)


class WindowStateStore:
    """``context.window_state()``: keyed state of the current key in the window ``scope.window``, each handle
    made on first use and kept in ``states`` (by state name) for the next."""

    def __init__(self, backend, states: dict[str, InWindowState], scope):
        self._backend = backend
        self._states = states
        self._scope = scope

    def get_state(self, state_descriptor):
        states = self._states
        state = states.get(state_descriptor.name)
        if state is None:
            state = states[state_descriptor.name] = in_window_state(self._backend, "window/user/",
                                                                    state_descriptor, self._scope)
        return state

    get_list_state = get_reducing_state = get_aggregating_state = get_state
