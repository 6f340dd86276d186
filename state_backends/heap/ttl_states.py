"""State handles for descriptors with a time-to-live: entries stored with their last-access time.

Separate classes, chosen by :meth:`HeapKeyedStateBackend.get_state` when the descriptor has a TTL, so that state
without one pays nothing for it. Each stored entry carries the processing time (ms) of its last access:

- value, reducing and aggregating state: ``{key: (value, last_access)}``;
- list state, per element (as in Flink): ``{key: [(element, last_access), ...]}``;
- map state, per map entry: ``{key: {map_key: (value, last_access)}}``.

An entry has expired once ``last_access + ttl <= now``. The read that finds it expired removes it, and returns
it only under ``ReturnExpiredIfNotCleanedUp``. Incremental cleanup (Flink's default for heap state: 5 entries
per access) walks the state's other keys a few at a time; snapshots leave expired entries out.

>>> from runtime.common.time import Time
>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.descriptors import ListStateDescriptor
>>> from state_backends.heap import HeapKeyedStateBackend
>>> from state_backends.ttl import StateTtlConfig
>>> now = [0]
>>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0), clock=lambda: now[0])
>>> descriptor = ListStateDescriptor("seen")
>>> descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(10)).build())
>>> seen = backend.get_state(descriptor); backend.set_current_key("a")
>>> seen.add("early"); now[0] = 6_000; seen.add("late"); type(seen).__name__, seen.get()
('TtlListState', ['early', 'late'])
>>> now[0] = 12_000; seen.get()       # each element expires on its own
['late']
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from runtime.settings.parsers import parse_duration_ms
from runtime.errors import StateUsageError
from state_backends.base import (
    AggregatingState,
    ListState,
    MapState,
    MapViewsOfEntries,
    ReducingState,
    ValueState,
)
from state_backends.heap.states import _HeapState
from state_backends.ttl import StateTtlConfig

__all__ = ["TtlValueState", "TtlListState", "TtlMapState", "TtlReducingState", "TtlAggregatingState"]


class _IncrementalCleanup:
    """Flink's incremental cleanup on the heap: each access to a state checks the next ``size`` entries of a lazy
    walk over every key group of the state, and removes what expired. Keys read again are cleaned by the read; this
    frees the state of keys that never come back.

    The walk copies one key group's keys at a time, so it survives tables changing under it. It skips key groups
    that a snapshot still has to write as they were (they are cleaned on a later pass)."""

    def __init__(self, state: "_TtlState", size: int):
        self._state = state
        self._size = size
        self._groups: list = []  # key groups left in this pass
        self._group = None
        self._keys: list = []  # keys of ``_group`` left to check

    def run(self, deadline: int) -> None:
        state = self._state
        backend = state._backend
        groups = backend.state_tables(state._name)
        if not groups:
            return
        budget, refilled = self._size, False
        while budget > 0:
            if not self._keys:
                if not self._groups:
                    if refilled:  # a whole pass over empty tables: nothing to check
                        return
                    self._groups, refilled = list(groups), True
                self._group = self._groups.pop()
                table = groups.get(self._group)
                self._keys = list(table) if table else []
                continue
            key = self._keys.pop()
            budget -= 1
            table = groups.get(self._group)
            entry = None if table is None else table.get(key)
            if entry is None:
                continue
            live = state._live(entry, deadline)
            if live is entry or backend.in_snapshot(self._group):
                continue
            if live is None:
                del table[key]
            else:
                table[key] = live
            backend.mark_changed(self._group)


class _TtlState(_HeapState):
    """What every state with a TTL shares: its settings, the clock, the cleanup step after an access, and the
    per-kind entry functions (``_live``, ``_unwrap``, ``_wrap``) that snapshots, iteration and migration use."""

    kind = "keyed"  # for messages

    def __init__(self, backend, descriptor, config: StateTtlConfig):
        super().__init__(backend, descriptor)
        self.config = config
        self._ttl_ms = parse_duration_ms(config.get_ttl(), "StateTtlConfig ttl")
        self._refresh_on_read = config.get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite
        self._return_expired = (config.get_state_visibility()
                                is StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
        self._clock = backend.clock
        incremental = config.get_cleanup_strategies().get_incremental_cleanup_strategy()
        size = 0 if incremental is None else incremental.get_cleanup_size()
        self._cleanup = _IncrementalCleanup(self, size) if size > 0 else None

    def _accessed(self, now: int) -> None:
        if self._cleanup is not None:
            self._cleanup.run(now - self._ttl_ms)

    # -- one stored entry (a key's value, list or map), per kind ------------------------------------------------

    @staticmethod
    def _live(entry, deadline: int):
        """``entry`` without what expired (last access <= ``deadline``): the same object when nothing did, None
        when nothing is left."""
        raise NotImplementedError

    @staticmethod
    def _unwrap(entry):
        """The user's view of a stored entry: its timestamps dropped."""
        raise NotImplementedError

    @staticmethod
    def _wrap(value, now: int):
        """A stored entry of state that had no TTL, last accessed ``now``."""
        raise NotImplementedError

    # -- what the backend asks of the whole state --------------------------------------------------------------

    def snapshot_filter(self, now: int):
        """A function of one key group's table to the table a snapshot at ``now`` writes: live entries only."""
        deadline, live = now - self._ttl_ms, self._live

        def live_entries(table: dict) -> dict:
            kept = {}
            for key, entry in table.items():
                entry = live(entry, deadline)
                if entry is not None:
                    kept[key] = entry
            return kept

        return live_entries

    def visible_entries(self, groups: dict) -> Iterator[tuple[int, Any, Any]]:
        """``(key group, key, value)`` of every key as a read would show it now (without changing the state)."""
        deadline = self._clock() - self._ttl_ms
        live, unwrap, return_expired = self._live, self._unwrap, self._return_expired
        for group, table in groups.items():
            for key, entry in list(table.items()):
                if not return_expired:
                    entry = live(entry, deadline)
                    if entry is None:
                        continue
                yield group, key, unwrap(entry)

    def _bulk_unsupported(self, method: str):
        raise StateUsageError(
            f"{method}() reads and writes value state, but state '{self._name}' is {self.kind} state with a "
            "time-to-live: use its state handle "
            "(runtime_context.get_state(descriptor)) instead.")

    def get_many(self, keys: list) -> list:
        self._bulk_unsupported("get_many")

    def put_many(self, keys: list, values: list) -> None:
        self._bulk_unsupported("put_many")

    def fold_many(self, keys: list, values: list, fold) -> None:
        self._bulk_unsupported("fold_many")


class _TtlSingleValue(_TtlState):
    """Value, reducing and aggregating state: one ``(value, last_access)`` per key."""

    @staticmethod
    def _live(entry, deadline: int):
        return entry if entry[1] > deadline else None

    @staticmethod
    def _unwrap(entry):
        return entry[0]

    @staticmethod
    def _wrap(value, now: int):
        return value, now

    def _read(self) -> Any:
        backend = self._backend
        table = backend.table(self._name)
        key = backend.current_key
        entry = table.get(key)
        now = self._clock()
        value = None
        if entry is not None:
            if entry[1] + self._ttl_ms <= now:
                del table[key]
                if self._return_expired:
                    value = entry[0]
            else:
                value = entry[0]
                if self._refresh_on_read:
                    table[key] = (value, now)
        self._accessed(now)
        return value

    def _write(self, value) -> None:
        now = self._clock()
        self._backend.table(self._name)[self._backend.current_key] = (value, now)
        self._accessed(now)

    def _live_value(self, table: dict, key, now: int) -> Any:
        """The key's value if it has not expired, else None: what reduce and aggregate fold into (Flink never
        folds into an expired value, whatever the visibility)."""
        entry = table.get(key)
        return None if entry is None or entry[1] + self._ttl_ms <= now else entry[0]

    # -- many keys at once: the backend's get_many / put_many / fold_many ----------------------------------

    def get_many(self, keys: list) -> list:
        backend, name, now = self._backend, self._name, self._clock()
        deadline, return_expired, refresh = now - self._ttl_ms, self._return_expired, self._refresh_on_read
        values = []
        for key in keys:
            table = backend.key_table(name, key)
            entry = table.get(key)
            if entry is None:
                values.append(None)
            elif entry[1] <= deadline:
                del table[key]
                values.append(entry[0] if return_expired else None)
            else:
                values.append(entry[0])
                if refresh:
                    table[key] = (entry[0], now)
        return values

    def put_many(self, keys: list, values: list) -> None:
        backend, name, now = self._backend, self._name, self._clock()
        for key, value in zip(keys, values):
            backend.key_table(name, key)[key] = (value, now)

    def fold_many(self, keys: list, values: list, fold) -> None:
        backend, name, now = self._backend, self._name, self._clock()
        for key, value in zip(keys, values):
            table = backend.key_table(name, key)
            table[key] = (fold(self._live_value(table, key, now), value), now)


class TtlValueState(_TtlSingleValue, ValueState):
    kind = "value"

    def value(self) -> Any:
        return self._read()

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._write(value)


class TtlReducingState(_TtlSingleValue, ReducingState):
    kind = "reducing"

    def get(self) -> Any:
        return self._read()

    def add(self, value: Any) -> None:
        backend = self._backend
        table, key, now = backend.table(self._name), backend.current_key, self._clock()
        current = self._live_value(table, key, now)
        table[key] = (value if current is None else self._descriptor.reduce_function(current, value), now)
        self._accessed(now)


class TtlAggregatingState(_TtlSingleValue, AggregatingState):
    kind = "aggregating"

    def get(self) -> Any:
        accumulator = self._read()
        return None if accumulator is None else self._descriptor.agg_function.get_result(accumulator)

    def add(self, value: Any) -> None:
        function, backend = self._descriptor.agg_function, self._backend
        table, key, now = backend.table(self._name), backend.current_key, self._clock()
        accumulator = self._live_value(table, key, now)
        if accumulator is None:
            accumulator = function.create_accumulator()
        table[key] = (function.add(value, accumulator), now)
        self._accessed(now)


class TtlListState(_TtlState, ListState):
    """Each element has its own last-access time (as in Flink), so elements expire one by one."""

    kind = "list"

    @staticmethod
    def _live(entry, deadline: int):
        live = [element for element in entry if element[1] > deadline]
        if len(live) == len(entry):
            return entry
        return live or None

    @staticmethod
    def _unwrap(entry):
        return [element for element, _ in entry]

    @staticmethod
    def _wrap(value, now: int):
        return [(element, now) for element in value]

    def get(self) -> Iterable[Any]:
        backend = self._backend
        table, key, now = backend.table(self._name), backend.current_key, self._clock()
        entry = table.get(key)
        if not entry:
            self._accessed(now)
            return []
        deadline = now - self._ttl_ms
        live = [element for element in entry if element[1] > deadline]
        values = [element for element, _ in (entry if self._return_expired else live)]
        if self._refresh_on_read:
            live = [(element, now) for element, _ in live]
        if not live:
            del table[key]
        elif self._refresh_on_read or len(live) != len(entry):
            table[key] = live
        self._accessed(now)
        return values

    def add(self, value: Any) -> None:
        now = self._clock()
        self._backend.table(self._name).setdefault(self._backend.current_key, []).append((value, now))
        self._accessed(now)

    def add_all(self, values: Iterable[Any]) -> None:
        now = self._clock()
        stamped = [(value, now) for value in values]
        self._backend.table(self._name).setdefault(self._backend.current_key, []).extend(stamped)
        self._accessed(now)

    def update(self, values: Iterable[Any]) -> None:
        now = self._clock()
        stamped = [(value, now) for value in values]
        if stamped:
            self._backend.table(self._name)[self._backend.current_key] = stamped
        else:
            self.clear()
        self._accessed(now)


class TtlMapState(_TtlState, MapViewsOfEntries, MapState):
    """Each map entry has its own last-access time (as in Flink), so entries expire one by one."""

    kind = "map"

    @staticmethod
    def _live(entry, deadline: int):
        live = {key: item for key, item in entry.items() if item[1] > deadline}
        if len(live) == len(entry):
            return entry
        return live or None

    @staticmethod
    def _unwrap(entry):
        return {key: value for key, (value, _) in entry.items()}

    @staticmethod
    def _wrap(value, now: int):
        return {key: (item, now) for key, item in value.items()}

    def _lookup(self, map_key) -> tuple[bool, Any]:
        """Whether ``map_key`` is visible, and its value; removes it if it expired."""
        backend = self._backend
        table, key, now = backend.table(self._name), backend.current_key, self._clock()
        mapping = table.get(key)
        item = None if mapping is None else mapping.get(map_key)
        found, value = False, None
        if item is not None:
            if item[1] + self._ttl_ms <= now:
                del mapping[map_key]
                if not mapping:
                    del table[key]
                if self._return_expired:
                    found, value = True, item[0]
            else:
                found, value = True, item[0]
                if self._refresh_on_read:
                    mapping[map_key] = (value, now)
        self._accessed(now)
        return found, value

    def _visible(self, reading: bool) -> list[tuple[Any, Any]]:
        """The current key's visible ``(map key, value)`` pairs; expired entries are removed, and with
        ``OnReadAndWrite`` the others refreshed when ``reading`` their values."""
        backend = self._backend
        table, key, now = backend.table(self._name), backend.current_key, self._clock()
        mapping = table.get(key)
        if not mapping:
            self._accessed(now)
            return []
        deadline = now - self._ttl_ms
        live = {map_key: item for map_key, item in mapping.items() if item[1] > deadline}
        pairs = [(map_key, value) for map_key, (value, _) in (mapping if self._return_expired else live).items()]
        refresh = reading and self._refresh_on_read
        if refresh:
            live = {map_key: (value, now) for map_key, (value, _) in live.items()}
        if not live:
            del table[key]
        elif refresh or len(live) != len(mapping):
            table[key] = live
        self._accessed(now)
        return pairs

    def get(self, key: Any) -> Any:
        return self._lookup(key)[1]

    def contains(self, key: Any) -> bool:
        return self._lookup(key)[0]

    def put(self, key: Any, value: Any) -> None:
        now = self._clock()
        self._backend.table(self._name).setdefault(self._backend.current_key, {})[key] = (value, now)
        self._accessed(now)

    def put_all(self, entries: dict) -> None:
        now = self._clock()
        stamped = {key: (value, now) for key, value in entries.items()}
        self._backend.table(self._name).setdefault(self._backend.current_key, {}).update(stamped)
        self._accessed(now)

    def remove(self, key: Any) -> None:
        table = self._backend.table(self._name)
        mapping = table.get(self._backend.current_key)
        if mapping is not None:
            mapping.pop(key, None)
            if not mapping:
                del table[self._backend.current_key]


