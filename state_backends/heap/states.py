"""State handles over :class:`HeapKeyedStateBackend` tables, scoped to the backend's current key.

>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.descriptors import ListStateDescriptor
>>> from state_backends.heap import HeapKeyedStateBackend
>>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
>>> seen = backend.get_state(ListStateDescriptor("seen"))
>>> backend.set_current_key("a"); seen.add(1); seen.add_all([2, 3])
>>> backend.set_current_key("b"); seen.add(9)
>>> type(seen).__name__, list(seen.get()), sorted(backend.keys("seen"))
('HeapListState', [9], ['a', 'b'])
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from state_backends.base import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    ValueState,
)

__all__ = ["HeapValueState", "HeapListState", "HeapMapState", "HeapReducingState", "HeapAggregatingState"]


class _HeapState:
    def __init__(self, backend, descriptor):
        self._backend = backend
        self._name = descriptor.name
        self._descriptor = descriptor

    def _get(self):
        return self._backend.table(self._name).get(self._backend.current_key)

    def _set(self, value) -> None:
        self._backend.table(self._name)[self._backend.current_key] = value

    def clear(self) -> None:
        self._backend.table(self._name).pop(self._backend.current_key, None)


class HeapValueState(_HeapState, ValueState):
    """The keyed access every record of a keyed job makes: one dict lookup for the current key group's table,
    one for the key. Anything else (no table yet, a key group a snapshot must copy first, no current key) takes
    the backend's general path."""

    def __init__(self, backend, descriptor):
        super().__init__(backend, descriptor)
        self._groups = backend._tables.setdefault(descriptor.name, {})  # key group -> {key: value}

    def value(self) -> Any:
        backend = self._backend
        try:  # a subscript costs less than a call to get(); a group without a table is rare (its first key)
            table = self._groups[backend._current_group_id]
        except KeyError:
            return self._get()
        return table.get(backend.current_key)  # get(): a missing key is common (every key's first record)

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
            return
        backend = self._backend
        try:
            self._groups[backend._current_group_id][backend.current_key] = value
        except KeyError:  # no table for the key group yet, or no current key
            self._set(value)


class HeapListState(_HeapState, ListState):
    def get(self) -> Iterable[Any]:
        return list(self._get() or ())

    def add(self, value: Any) -> None:
        table = self._backend.table(self._name)
        table.setdefault(self._backend.current_key, []).append(value)

    def add_all(self, values: Iterable[Any]) -> None:
        table = self._backend.table(self._name)
        table.setdefault(self._backend.current_key, []).extend(values)

    def update(self, values: Iterable[Any]) -> None:
        values = list(values)
        if values:
            self._set(values)
        else:
            self.clear()


class HeapMapState(_HeapState, MapState):
    def _map(self, create: bool = False) -> dict:
        table = self._backend.table(self._name)
        mapping = table.get(self._backend.current_key)
        if mapping is None:
            mapping = {}
            if create:
                table[self._backend.current_key] = mapping
        return mapping

    def get(self, key: Any) -> Any:
        return self._map().get(key)

    def put(self, key: Any, value: Any) -> None:
        self._map(create=True)[key] = value

    def put_all(self, entries: dict) -> None:
        self._map(create=True).update(entries)

    def remove(self, key: Any) -> None:
        mapping = self._map()
        mapping.pop(key, None)
        if not mapping:
            self.clear()

    def contains(self, key: Any) -> bool:
        return key in self._map()

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._map().items()))

    def keys(self) -> Iterator[Any]:
        return iter(list(self._map().keys()))

    def values(self) -> Iterator[Any]:
        return iter(list(self._map().values()))

    def is_empty(self) -> bool:
        return not self._map()


class HeapReducingState(_HeapState, ReducingState):
    def get(self) -> Any:
        return self._get()

    def add(self, value: Any) -> None:
        current = self._get()
        self._set(value if current is None else self._descriptor.reduce_function(current, value))


class HeapAggregatingState(_HeapState, AggregatingState):
    def get(self) -> Any:
        accumulator = self._get()
        return None if accumulator is None else self._descriptor.agg_function.get_result(accumulator)

    def add(self, value: Any) -> None:
        function = self._descriptor.agg_function
        accumulator = self._get()
        if accumulator is None:
            accumulator = function.create_accumulator()
        self._set(function.add(value, accumulator))
