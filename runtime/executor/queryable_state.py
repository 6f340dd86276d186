"""Queryable state on the executors: which states a slot's functions declared queryable, and how a subtask answers
a lookup of one key.

A function declares a state queryable with ``descriptor.set_queryable(name)``; when it first takes the state
(``get_state`` in ``open()`` or later), the slot records the descriptor and tells the driver once, which routes
lookups of the name to the slot whose subtask owns the key's key group. The subtask answers on its own thread,
between two batches, so the answer is what the operator itself would read for that key at that moment. The value
goes back as JSON text, made on the executor: the driver and the client never unpickle anything from a worker.

>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.descriptors import MapStateDescriptor, ValueStateDescriptor
>>> from state_backends.heap import HeapKeyedStateBackend
>>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
>>> counts, visits = ValueStateDescriptor("count"), MapStateDescriptor("visits")
>>> backend.set_current_key("alice"); backend.get_state(counts).update(3)
>>> backend.get_state(visits).put(("home", 1), 2)
>>> read_as_json(backend, counts, "alice"), read_as_json(backend, counts, "bob")
('3', 'null')
>>> read_as_json(backend, visits, "alice")    # a map whose keys JSON cannot name: its entries as pairs
'[[["home", 1], 2]]'
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from runtime.keys.canonical import canonical_key
from runtime.keys.key_groups import assign_to_key_group
from runtime.protocol.json_values import to_json
from runtime.protocol.messages import QueryableStateRegistered
from state_backends.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
)

__all__ = ["SlotQueryableStates", "read_as_json", "state_kind"]


def state_kind(descriptor: StateDescriptor) -> str:
    """``value``, ``list``, ``map``, ``reducing`` or ``aggregating``."""
    for kind, cls in (("list", ListStateDescriptor), ("map", MapStateDescriptor),
                      ("reducing", ReducingStateDescriptor), ("aggregating", AggregatingStateDescriptor)):
        if isinstance(descriptor, cls):
            return kind
    return "value"


class SlotQueryableStates:
    """The queryable states declared in one slot, by queryable name: ``(operator uid, descriptor)``. Written on
    the subtask threads as functions declare them, read on the control thread to route a lookup."""

    def __init__(self, attempt: int, slot: int, send: Callable[[Any], None]):
        self.attempt, self.slot, self._send = attempt, slot, send
        self._declared: dict[str, tuple[str, StateDescriptor]] = {}
        self._lock = threading.Lock()

    def declarer(self, uid: str) -> Callable[[StateDescriptor], None]:
        """What operator ``uid``'s runtime context calls with each queryable descriptor it hands out."""
        def declared(descriptor: StateDescriptor) -> None:
            name = descriptor.queryable_name
            known = self._declared.get(name)
            if known is not None and known[0] == uid:
                return  # get_state runs per record in some functions: the first declaration is the one
            with self._lock:
                self._declared.setdefault(name, (uid, descriptor))
            self._send(QueryableStateRegistered(self.attempt, self.slot, uid, descriptor.name, name,
                                                state_kind(descriptor)))
        return declared

    def find(self, name: str) -> tuple[str, StateDescriptor] | None:
        return self._declared.get(name)


def read_as_json(backend, descriptor: StateDescriptor, key: Any) -> str:
    """The value of ``descriptor``'s state for ``key`` in ``backend``, as JSON text (``null``: no value). Raises
    LookupError when the key's key group is not this backend's."""
    key = canonical_key(key)
    if assign_to_key_group(key, backend.max_parallelism) not in backend.key_groups:
        raise LookupError(f"key {key!r} belongs to another subtask")
    previous = backend.get_current_key()
    backend.set_current_key(key)
    try:
        state = backend.get_state(descriptor)
        kind = state_kind(descriptor)
        if kind == "value":
            value = state.value()
        elif kind == "map":
            value = None if state.is_empty() else dict(state.items())
        else:
            value = state.get()
            if kind == "list":
                value = list(value) if value is not None else None
                value = value or None
    finally:
        if previous is not None:
            backend.set_current_key(previous)
    return to_json(value)
