"""Bulk value states on the heap: the keys accessed since the last barrier in one flat ``{key: value}`` dict.

The heap backend holds a state as ``{key group: {key: value}}`` so that snapshots can be taken, written and
restored one key group at a time. A state that is read and written only many keys at a time (``get_many``,
``put_many``, ``fold_many``, ``aggregate_many``: the aligned window's panes, declared with
:meth:`~state_backends.base.KeyedStateBackend.declare_bulk_state`) pays for that on every record: its key's group
from the cache, the group's table, then the value. A bulk state keeps the keys the subtask has touched since the
last barrier in one flat dict instead, so that a record costs one lookup:

* each key lives in exactly one place, the flat dict or its group's table. A key the flat dict lacks is moved out of
  its group's table on first access; the heap backend's copy-on-write has the snapshots still writing
  the group capture it first, so a value in the flat dict is the live side's alone and may be changed in place.
* at the barrier, before a snapshot is taken, ``_settle_bulk`` moves the flat dict's entries back into their groups'
  tables. Snapshots, incremental checkpoints, restores and the savepoint format see only the key-group layout.

The move at the barrier costs about 0.12 us per key touched since the last barrier, in the snapshot's synchronous
part (before the barrier goes on downstream; 8 ms for 65,536 keys, measured with the machine busy); a key's first
access after it costs one move back. So that the move stays under about 8 ms, a bulk state that has touched more
than :data:`BULK_KEYS_LIMIT` keys since the last barrier goes back to the key-group layout, and the backend lays out
no further state flat. Measured in the windowed reference job (10,000 keys, a checkpoint every second, five
alternated rounds), the flat dict took the job's CPU per record from 911 to 791 core-ns at the median, the moves
included.

>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.descriptors import ValueStateDescriptor
>>> from state_backends.heap import HeapKeyedStateBackend
>>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
>>> backend.declare_bulk_state(ValueStateDescriptor("panes"))
>>> backend.aggregate_many("panes", ["a", "b", "a"], [1, 1, 1], lambda value, total: total + value, int)
>>> snapshot = backend.snapshot()        # the barrier: the flat dict's entries go back to their key groups
>>> backend.aggregate_many("panes", ["a"], [1], lambda value, total: total + value, int)
>>> restored = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
>>> for group, payload in snapshot.serialized(): restored.restore_key_group(group, payload)
>>> sorted((key, n) for _, key, n in restored.entries("panes")), sorted((k, n) for _, k, n in backend.entries("panes"))
([('a', 2), ('b', 1)], [('a', 3), ('b', 1)])
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from state_backends.descriptors import StateDescriptor, ValueStateDescriptor

__all__ = ["BulkValueStates", "BULK_KEYS_LIMIT"]

BULK_KEYS_LIMIT = 1 << 16


class BulkValueStates:
    """The bulk states of a :class:`~state_backends.heap.HeapKeyedStateBackend`, as methods it inherits: they use
    its ``_tables``, ``_group_of``, ``key_group_of``, ``_watching``, ``_touch`` and ``get_state``. ``_bulk``:
    bulk state name -> its flat dict."""

    _bulk: dict[str, dict]
    _bulk_outgrown = False  # a bulk state touched more than BULK_KEYS_LIMIT keys between two barriers

    def declare_bulk_state(self, descriptor: StateDescriptor) -> None:
        """Declare a value state used only many keys at a time (not through a handle). A state with a
        time-to-live, or of another kind, is declared as usual."""
        if descriptor.name in self._bulk:
            return
        self.get_state(descriptor)
        if type(descriptor) is ValueStateDescriptor and not descriptor.has_ttl and not self._bulk_outgrown:
            self._bulk[descriptor.name] = {}

    def _unbulk(self, state_name: str) -> None:
        """``state_name`` held in key groups only from now on: a handle reads it there."""
        flat = self._bulk.pop(state_name, None)
        if flat:
            self._settle(state_name, flat)

    def _take(self, state_name: str, key: Any) -> Any:
        """``key``'s value moved out of its group's table into the caller's hands (None if it has none there).
        A snapshot still writing the group captures it first."""
        group = self._group_of.get(key)
        if group is None:
            group = self.key_group_of(key)
        table = self._tables[state_name].get(group)
        if not table or key not in table:
            return None
        if self._watching:
            self._touch(group)
        return table.pop(key)

    def _fold_bulk(self, flat: dict, state_name: str, keys: list, values: list, function: Callable,
                   create: Callable | None) -> None:
        """``_fold`` (``create`` None: ``function(current or None, value)``, else ``function(value, current or
        create())``) on a bulk state."""
        get, take = flat.get, self._take
        for key, value in zip(keys, values):
            current = get(key)
            if current is None:
                current = take(state_name, key)
            if create is None:
                flat[key] = function(current, value)
            else:
                flat[key] = function(value, create() if current is None else current)
        if len(flat) > BULK_KEYS_LIMIT:
            self._outgrown(state_name)

    def _outgrown(self, state_name: str) -> None:
        self._bulk_outgrown = True
        self._unbulk(state_name)

    def _get_many_bulk(self, flat: dict, state_name: str, keys: list) -> list:
        """The values of ``keys``, each moved into the flat dict: the caller may change them in place."""
        get, take = flat.get, self._take
        values = []
        append = values.append
        for key in keys:
            value = get(key)
            if value is None:
                value = take(state_name, key)
                if value is not None:
                    flat[key] = value
            append(value)
        if len(flat) > BULK_KEYS_LIMIT:
            self._outgrown(state_name)
        return values

    def _put_many_bulk(self, flat: dict, state_name: str, keys: list, values: list) -> None:
        take = self._take
        for key, value in zip(keys, values):
            if key not in flat:
                take(state_name, key)  # the key's older value leaves its group's table
            flat[key] = value
        if len(flat) > BULK_KEYS_LIMIT:
            self._outgrown(state_name)

    def _settle_bulk(self) -> None:
        """Every bulk state's flat dict into key groups: called at the barrier, before the snapshot."""
        for state_name, flat in self._bulk.items():
            if flat:
                self._settle(state_name, flat)

    def _settle(self, state_name: str, flat: dict) -> None:
        """The flat dict's entries into their groups' tables (each group captured first by the snapshots still
        writing it, and noted as changed), leaving the flat dict empty."""
        groups = self._tables[state_name]
        cached, group_of = self._group_of.get, self.key_group_of
        watching = self._watching
        touched: set[int] = set()
        for key, value in flat.items():
            group = cached(key)
            if group is None:
                group = group_of(key)
            if watching and group not in touched:
                touched.add(group)
                self._touch(group)
            table = groups.get(group)
            if table is None:
                table = groups[group] = {}
            table[key] = value
        flat.clear()

    def _bulk_entries(self, state_name: str) -> Iterator[tuple[int, Any, Any]]:
        """``(key group, key, value)`` of ``state_name``'s flat dict."""
        key_group_of = self.key_group_of
        for key, value in list(self._bulk.get(state_name, {}).items()):
            yield key_group_of(key), key, value
