"""Keyed state held in memory as ``{state name: {key group: {key: value}}}``.

Tables are split by key group so that a snapshot can be written, and a rescaled restore read, one key group
at a time. The key group of a key is computed once per distinct key and cached: keys repeat, and the
stable hash is the costliest step of a state access.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any, Iterator

from runtime.errors import ProtocolError, StateUsageError
from runtime.gc_pause import gc_paused
from runtime.keys.canonical import canonical_key
from runtime.keys.key_groups import KeyGroupRange, assign_to_key_group
from state_backends.base import KeyedStateBackend, State, StateBackend
from state_backends.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from state_backends.heap.snapshot import HeapSnapshot
from state_backends.heap.states import (
    HeapAggregatingState,
    HeapListState,
    HeapMapState,
    HeapReducingState,
    HeapValueState,
)

__all__ = ["HeapKeyedStateBackend", "HashMapStateBackend"]

_KEY_GROUP_CACHE_LIMIT = 1 << 20
_NO_KEY = -3  # no key set yet: state outside record processing (open()) has no key to be scoped to
_STALE_GROUP = -2  # the current key's group became pending in a snapshot since the key was set: touch it first

_STATE_CLASSES = {
    ValueStateDescriptor: HeapValueState,
    ListStateDescriptor: HeapListState,
    MapStateDescriptor: HeapMapState,
    ReducingStateDescriptor: HeapReducingState,
    AggregatingStateDescriptor: HeapAggregatingState,
}


class HeapKeyedStateBackend(KeyedStateBackend):
    """Keyed state of one subtask that owns ``key_groups`` out of ``max_parallelism``.

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.descriptors import ValueStateDescriptor
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    >>> count = backend.get_state(ValueStateDescriptor("count"))
    >>> for key in ("x", "y", "x"):
    ...     backend.set_current_key(key); count.update((count.value() or 0) + 1)
    >>> sorted((key, value) for _, key, value in backend.entries("count"))
    [('x', 2), ('y', 1)]
    """

    def __init__(self, max_parallelism: int, key_groups: KeyGroupRange):
        self.max_parallelism = max_parallelism
        self.key_groups = key_groups
        self._tables: dict[str, dict[int, dict]] = {}
        self._states: dict[str, State] = {}
        self._descriptors: dict[str, StateDescriptor] = {}
        self._group_of: dict[Any, int] = {}
        self.current_key: Any = None
        self._current_group_id = _NO_KEY
        self._snapshots: tuple[HeapSnapshot, ...] = ()

    def key_group_of(self, key: Any) -> int:
        group = self._group_of.get(key)
        if group is None:
            group = assign_to_key_group(key, self.max_parallelism)
            if len(self._group_of) >= _KEY_GROUP_CACHE_LIMIT:
                self._group_of.clear()
            self._group_of[key] = group
        return group

    def set_current_key(self, key: Any) -> None:
        group = self._group_of.get(key)
        if group is None:  # a new key, or a NaN (never equal to the cached one): compare canonical keys
            key = canonical_key(key)
            group = self.key_group_of(key)
        self.current_key = key
        self._current_group_id = group
        if self._snapshots:
            self._capture(group)

    def _capture(self, group: int) -> None:
        """Copy-on-write: a snapshot still writing ``group`` captures it before it is changed (or handed out)."""
        for snapshot in self._snapshots:
            if group in snapshot.pending:
                snapshot.touch(group)

    def get_current_key(self) -> Any:
        return self.current_key

    def table(self, state_name: str) -> dict:
        """The current key group's ``{key: value}`` table of ``state_name``, created on first use."""
        groups = self._tables[state_name]
        table = groups.get(self._current_group_id)
        if table is None:
            if self._current_group_id == _STALE_GROUP:  # off the fast path: no table is ever stored there
                self.set_current_key(self.current_key)
                return self.table(state_name)
            if self._current_group_id == _NO_KEY:
                raise StateUsageError(
                    f"Keyed state '{state_name}' was used with no current key: keyed state belongs to the key of "
                    "the record being processed, so use it in process_element / on_timer, not in open().")
            table = groups[self._current_group_id] = {}
        return table

    def get_state(self, descriptor: StateDescriptor) -> State:
        existing = self._descriptors.get(descriptor.name)
        if existing is not None:
            if type(existing) is not type(descriptor):
                raise StateUsageError(
                    f"State '{descriptor.name}' was declared as {type(existing).__name__} and again as "
                    f"{type(descriptor).__name__}: give each state of an operator its own name."
                )
            return self._states[descriptor.name]
        state_class = _STATE_CLASSES.get(type(descriptor))
        if state_class is None:
            raise StateUsageError(f"Unsupported state descriptor {type(descriptor).__name__}: use one of "
                                  f"{sorted(c.__name__ for c in _STATE_CLASSES)}")
        self._tables.setdefault(descriptor.name, {})
        self._descriptors[descriptor.name] = descriptor
        state = self._states[descriptor.name] = state_class(self, descriptor)
        return state

    # -- many keys at once (the columnar path) ---------------------------------------------------------

    def get_many(self, state_name: str, keys: list) -> list:
        """The values of ``keys`` (canonical: see :func:`~runtime.keys.canonical.canonical_key`) in value state
        ``state_name`` (None where absent), in one call. The values themselves, which the caller may change in
        place: a snapshot in progress captures their key groups first (copy-on-write, as for keyed access)."""
        groups = self._tables[state_name]
        cached, group_of = self._group_of.get, self.key_group_of  # the cache first: a call less per key
        snapshots = self._snapshots
        values = []
        append = values.append
        for key in keys:
            group = cached(key)
            if group is None:
                group = group_of(key)
            if snapshots:  # the caller may change a value in place (an accumulator): capture its group first
                self._capture(group)
            table = groups.get(group)
            append(None if table is None else table.get(key))
        return values

    def put_many(self, state_name: str, keys: list, values: list) -> None:
        """Set value state ``state_name`` of every key in ``keys`` to the matching entry of ``values``."""
        groups = self._tables[state_name]
        cached, group_of = self._group_of.get, self.key_group_of
        snapshots = self._snapshots
        for key, value in zip(keys, values):
            group = cached(key)
            if group is None:
                group = group_of(key)
            if snapshots:
                self._capture(group)
            table = groups.get(group)
            if table is None:
                table = groups[group] = {}
            table[key] = value

    def fold_many(self, state_name: str, keys: list, values: list, fold) -> None:
        """One lookup per record for the read and the write (``get_many`` and ``put_many`` cost one each)."""
        groups = self._tables[state_name]
        cached, group_of = self._group_of.get, self.key_group_of
        snapshots = self._snapshots
        for key, value in zip(keys, values):
            group = cached(key)
            if group is None:
                group = group_of(key)
            if snapshots:
                self._capture(group)
            table = groups.get(group)
            if table is None:
                table = groups[group] = {}
            table[key] = fold(table.get(key), value)

    # -- snapshots ------------------------------------------------------------------------------------

    def snapshot(self) -> HeapSnapshot | None:
        """The synchronous part of a snapshot: O(key groups). None when there is no state."""
        with gc_paused():
            snapshot = HeapSnapshot(self, self._tables)
        if not snapshot.pending:
            return None
        self._snapshots = self._snapshots + (snapshot,)
        if self._current_group_id in snapshot.pending:  # handles still scoped to the key set before the barrier
            self._current_group_id = _STALE_GROUP
        return snapshot

    def release(self, snapshot: HeapSnapshot) -> None:
        self._snapshots = tuple(s for s in self._snapshots if s is not snapshot)

    def restore_key_group(self, group: int, payload: bytes) -> None:
        """Load one key group's tables, as :meth:`HeapSnapshot.serialized` wrote them."""
        if group not in self.key_groups:
            raise ProtocolError(f"key group {group} is not in this subtask's range {tuple(self.key_groups)}")
        for name, table in pickle.loads(payload).items():
            self._tables.setdefault(name, {})[group] = table

    def keys(self, state_name: str) -> Iterator[Any]:
        for table in self._tables.get(state_name, {}).values():
            yield from table.keys()

    def state_names(self) -> list[str]:
        return [name for name, groups in self._tables.items() if any(groups.values())]

    def drop_state(self, state_name: str) -> None:
        # Snapshots hold the group tables themselves, not this mapping: dropping it changes none of them.
        self._tables.pop(state_name, None)
        self._states.pop(state_name, None)
        self._descriptors.pop(state_name, None)

    def entries(self, state_name: str) -> Iterator[tuple[int, Any, Any]]:
        """Every ``(key group, key, value)`` of ``state_name`` on this subtask."""
        for group, table in self._tables.get(state_name, {}).items():
            for key, value in table.items():
                yield group, key, value


@dataclass(frozen=True)
class HashMapStateBackend(StateBackend):
    """Keyed state on the heap, in Python dicts (PyFlink's ``HashMapStateBackend``): the fastest access, state
    bounded by the workers' memory, and every checkpoint a full copy. The default.

    >>> from runtime.keys.key_groups import key_group_range
    >>> backend = HashMapStateBackend().create_keyed_state_backend("count", 128, key_group_range(128, 1, 0))
    >>> type(backend).__name__
    'HeapKeyedStateBackend'
    """

    def create_keyed_state_backend(self, operator_uid: str, max_parallelism: int,
                                   key_groups: KeyGroupRange) -> HeapKeyedStateBackend:
        return HeapKeyedStateBackend(max_parallelism, key_groups)

