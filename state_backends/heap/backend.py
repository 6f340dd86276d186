"""Keyed state held in memory as ``{state name: {key group: {key: value}}}``.

Tables are split by key group so that a snapshot can be written, and a rescaled restore read, one key group
at a time. The key group of a key is computed once per distinct key and cached: keys repeat, and the
stable hash is the costliest step of a state access. Value states used only many keys at a time (the aligned
window's panes) keep the keys touched since the last barrier in one flat dict instead (:mod:`state_backends.heap.bulk`).

A descriptor with a time-to-live gets the handles of :mod:`state_backends.heap.ttl_states`, whose tables hold
each entry with its last-access time (``clock``, processing time in ms); every other state is untouched by TTL.
Such tables are written to snapshots without their expired entries, tagged so that a restore knows their format.
"""

from __future__ import annotations

import os
import pickle
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from runtime.errors import CorruptCheckpointError, ProtocolError, StateUsageError
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
    declared_or_class,
)
from state_backends.heap.bulk import BulkValueStates
from state_backends.heap.incremental import GroupFiles
from state_backends.heap.snapshot import TTL_FORMAT, HeapSnapshot, IncrementalHeapSnapshot
from state_backends.heap.states import (
    HeapAggregatingState,
    HeapListState,
    HeapMapState,
    HeapReducingState,
    HeapValueState,
)
from state_backends.heap.ttl_states import (
    TtlAggregatingState,
    TtlListState,
    TtlMapState,
    TtlReducingState,
    TtlValueState,
)
from state_backends.ttl import wall_clock_ms

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
_TTL_STATE_CLASSES = {
    ValueStateDescriptor: TtlValueState,
    ListStateDescriptor: TtlListState,
    MapStateDescriptor: TtlMapState,
    ReducingStateDescriptor: TtlReducingState,
    AggregatingStateDescriptor: TtlAggregatingState,
}


def _as_stored(table: dict) -> dict:
    return table


class HeapKeyedStateBackend(BulkValueStates, KeyedStateBackend):
    """Keyed state of one subtask that owns ``key_groups`` out of ``max_parallelism``.

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.descriptors import ValueStateDescriptor
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    >>> count = backend.get_state(ValueStateDescriptor("count"))
    >>> for key in ("x", "y", "x"):
    ...     backend.set_current_key(key); count.update((count.value() or 0) + 1)
    >>> sorted((key, value) for _, key, value in backend.entries("count"))
    [('x', 2), ('y', 1)]

    ``clock``: processing time in epoch ms, for state with a time-to-live (tests pass a fake one).
    """

    def __init__(self, max_parallelism: int, key_groups: KeyGroupRange, clock=None, incremental: bool = False,
                 operator_uid: str = ""):
        self.max_parallelism = max_parallelism
        self.key_groups = key_groups
        self.operator_uid = operator_uid
        self.incremental = incremental
        # Incremental checkpoints: the groups changed since the last barrier (None: not tracked), for each group
        # the number of the first barrier after its last change, and where completed checkpoints stored groups.
        self._changed: set[int] | None = set() if incremental else None
        self._last_change_barrier: dict[int, int] = {}
        self._migrated: set[int] = set()  # groups restored in another format than their rows file holds
        self._barriers = 0
        self.group_files = GroupFiles()
        self.instance = os.urandom(8).hex()  # names this backend's rows files in shared storage
        self.clock = wall_clock_ms if clock is None else clock
        self._ttl_states: dict[str, State] = {}  # declared with a TTL
        self._ttl_restored: set[str] = set()  # restored with a TTL, not declared yet
        self._ttl_names: set[str] = set()  # both: names whose tables hold (value, last access) entries
        self._tables: dict[str, dict[int, dict]] = {}
        self._bulk: dict[str, dict] = {}  # bulk states' keys touched since the last barrier (state_backends.heap.bulk)
        self._states: dict[str, State] = {}
        self._descriptors: dict[str, StateDescriptor] = {}
        self._group_of: dict[Any, int] = {}
        self.current_key: Any = None
        self._current_group_id = _NO_KEY
        self._snapshots: tuple[HeapSnapshot, ...] = ()
        # The subtask adds snapshots, the snapshotter's thread releases them: each change of the tuple and of
        # _watching happens under this lock, so that neither thread's write undoes the other's.
        self._snapshots_lock = threading.Lock()
        self._watch()

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
        if self._watching:
            self._touch(group)

    def _touch(self, group: int) -> None:
        """``group`` is about to change: snapshots still writing it capture it, incremental checkpoints note it."""
        if self._snapshots:
            self._capture(group)
        if self._changed is not None:
            self._changed.add(group)

    def _watch(self) -> None:
        # One test per key set instead of two: whether anything needs to know which groups change.
        self._watching = bool(self._snapshots) or self._changed is not None

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
        self._unbulk(descriptor.name)  # a handle reads key groups only
        state, state_class = declared_or_class(self._descriptors, self._states, descriptor, _STATE_CLASSES)
        if state is not None:
            return state
        name = descriptor.name
        if descriptor.has_ttl:
            state = _TTL_STATE_CLASSES[type(descriptor)](self, descriptor, descriptor.ttl_config)
        else:
            state = state_class(self, descriptor)
        self._convert_restored(name, type(descriptor), descriptor.has_ttl)
        self._tables.setdefault(name, {})
        self._descriptors[name] = descriptor
        self._states[name] = state
        if descriptor.has_ttl:
            self._ttl_states[name] = state
            self._ttl_names.add(name)
        return state

    def _convert_restored(self, name: str, descriptor_class: type, ttl: bool) -> None:
        """Restored entries of ``name`` in the format of its declaration: a state may gain or lose its TTL across a
        restore (as Flink's TTL state migration allows). Tables are replaced, not changed: a snapshot in progress
        keeps the ones it has."""
        groups = self._tables.get(name)
        stored_ttl = name in self._ttl_restored
        self._ttl_restored.discard(name)
        self._ttl_names.discard(name)
        if not groups or ttl == stored_ttl:
            return
        if self._changed is not None:  # rows files hold them in the restored format: write them anew
            self._changed.update(groups)
        ttl_class = _TTL_STATE_CLASSES[descriptor_class]
        if ttl:  # restored without a TTL: each entry's life starts now
            now, wrap = self.clock(), ttl_class._wrap
            for group, table in groups.items():
                groups[group] = {key: wrap(entry, now) for key, entry in table.items()}
        else:  # restored with a TTL (whose length a checkpoint does not record): keep every value
            unwrap = ttl_class._unwrap
            for group, table in groups.items():
                groups[group] = {key: unwrap(entry) for key, entry in table.items()}

    def _ttl_state(self, state_name: str, method: str):
        state = self._ttl_states.get(state_name)
        if state is None:
            raise StateUsageError(
                f"State '{state_name}' was restored with a time-to-live and is not declared yet: declare it with "
                f"runtime_context.get_state(descriptor), its descriptor with enable_time_to_live(...), before "
                f"{method}().")
        return state

    # -- what TTL state handles use (off the fast path) -------------------------------------------------

    def state_tables(self, state_name: str) -> dict[int, dict]:
        """``{key group: {key: entry}}`` of ``state_name``, live: change a group's table only if no snapshot
        still has to write it (:meth:`in_snapshot`)."""
        return self._tables.get(state_name, {})

    def mark_changed(self, group: int) -> None:
        """``group`` changed other than through a key's handles (TTL cleanup): the next incremental checkpoint
        writes it."""
        if self._changed is not None:
            self._changed.add(group)

    def in_snapshot(self, group: int) -> bool:
        """Whether a snapshot in progress still has to write ``group`` as it was at its barrier."""
        return any(group in snapshot.pending for snapshot in self._snapshots)

    def key_table(self, state_name: str, key: Any) -> dict:
        """The ``{key: entry}`` table of ``key``'s group in ``state_name``, created on first use, ready to change
        (a snapshot in progress captures the group first)."""
        group = self._group_of.get(key)
        if group is None:
            group = self.key_group_of(key)
        self._touch(group)
        groups = self._tables[state_name]
        table = groups.get(group)
        if table is None:
            table = groups[group] = {}
        return table

    # -- many keys at once (the columnar path) ---------------------------------------------------------

    def get_many(self, state_name: str, keys: list) -> list:
        """The values of ``keys`` (canonical: see :func:`~runtime.keys.canonical.canonical_key`) in value state
        ``state_name`` (None where absent), in one call. The values themselves, which the caller may change in
        place: a snapshot in progress captures their key groups first (copy-on-write, as for keyed access)."""
        if state_name in self._ttl_names:  # once per call: state without TTL pays nothing per key
            return self._ttl_state(state_name, "get_many").get_many(keys)
        flat = self._bulk.get(state_name)
        if flat is not None:
            return self._get_many_bulk(flat, state_name, keys)
        groups = self._tables[state_name]
        cached, group_of = self._group_of.get, self.key_group_of  # the cache first: a call less per key
        watching = self._watching
        values = []
        append = values.append
        for key in keys:
            group = cached(key)
            if group is None:
                group = group_of(key)
            if watching:  # the caller may change a value in place (an accumulator): capture its group first
                self._touch(group)
            table = groups.get(group)
            append(None if table is None else table.get(key))
        return values

    def put_many(self, state_name: str, keys: list, values: list) -> None:
        """Set value state ``state_name`` of every key in ``keys`` to the matching entry of ``values``."""
        if state_name in self._ttl_names:
            return self._ttl_state(state_name, "put_many").put_many(keys, values)
        flat = self._bulk.get(state_name)
        if flat is not None:
            return self._put_many_bulk(flat, state_name, keys, values)
        groups = self._tables[state_name]
        cached, group_of = self._group_of.get, self.key_group_of
        watching = self._watching
        for key, value in zip(keys, values):
            group = cached(key)
            if group is None:
                group = group_of(key)
            if watching:
                self._touch(group)
            table = groups.get(group)
            if table is None:
                table = groups[group] = {}
            table[key] = value

    def fold_many(self, state_name: str, keys: list, values: list, fold) -> None:
        """One lookup per record for the read and the write (``get_many`` and ``put_many`` cost one each)."""
        if state_name in self._ttl_names:
            return self._ttl_state(state_name, "fold_many").fold_many(keys, values, fold)
        self._fold(state_name, keys, values, fold, None)

    def aggregate_many(self, state_name: str, keys: list, values: list, add, create) -> None:
        """As fold_many, calling the aggregate function's ``add`` itself: no adapter's call per record."""
        if state_name in self._ttl_names:
            return super().aggregate_many(state_name, keys, values, add, create)
        self._fold(state_name, keys, values, add, create)

    def _fold(self, state_name: str, keys: list, values: list, function, create) -> None:
        """fold_many's loop (``create`` None: ``function(current or None, value)``) and aggregate_many's
        (``function(value, current or create())``): one branch per record costs less than an adapter's call."""
        flat = self._bulk.get(state_name)
        if flat is not None:
            return self._fold_bulk(flat, state_name, keys, values, function, create)
        groups = self._tables[state_name]
        cached, group_of = self._group_of.get, self.key_group_of
        watching = self._watching
        for key, value in zip(keys, values):
            group = cached(key)
            if group is None:
                group = group_of(key)
            if watching:
                self._touch(group)
            table = groups.get(group)
            if table is None:
                table = groups[group] = {}
            current = table.get(key)
            if create is None:
                table[key] = function(current, value)
            else:
                table[key] = function(value, create() if current is None else current)

    # -- snapshots ------------------------------------------------------------------------------------

    def snapshot(self, full: bool = False) -> HeapSnapshot | None:
        """The synchronous part of a snapshot: O(key groups), plus moving the keys bulk states touched since the
        last barrier back into their key groups (:mod:`state_backends.heap.bulk`). None when there is no state.
        Entries with a TTL are judged at the barrier: those expired by then are not written. Incremental (unless
        ``full``: savepoints and final states): only the groups changed since the newest completed checkpoint are
        written."""
        self._settle_bulk()
        ttl = None
        if self._ttl_names:
            now = self.clock()
            ttl = {name: _as_stored if (state := self._ttl_states.get(name)) is None else state.snapshot_filter(now)
                   for name in self._ttl_names}
        with gc_paused():
            if self._changed is None:
                snapshot = HeapSnapshot(self, self._tables, ttl)
            else:
                snapshot = self._incremental_snapshot(ttl, full)
        if not snapshot.pending and not getattr(snapshot, "references", None):
            return None
        with self._snapshots_lock:
            self._snapshots = self._snapshots + (snapshot,)
            self._watch()
        if self._current_group_id in snapshot.pending:  # handles still scoped to the key set before the barrier
            self._current_group_id = _STALE_GROUP
        return snapshot

    def _incremental_snapshot(self, ttl, full: bool) -> HeapSnapshot:
        self._barriers += 1
        barrier = self._barriers
        for group in self._changed:
            self._last_change_barrier[group] = barrier
        self._changed = set()
        if self._current_group_id >= 0:  # the handles' current group: marked again at its next access
            self._current_group_id = _STALE_GROUP
        if full:
            return HeapSnapshot(self, self._tables, ttl)
        base = self.group_files.base()
        references = {}
        if base is not None:
            base_barrier, files = base
            present = {group for groups in self._tables.values() for group, table in groups.items() if table}
            changed_before = self._last_change_barrier
            references = {group: stored for group, stored in files.items()
                          if group in present and changed_before.get(group, 0) <= base_barrier}
        return IncrementalHeapSnapshot(self, self._tables, ttl, references, barrier)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.group_files.completed(checkpoint_id)

    def adopt_group_files(self, files: dict) -> None:
        """A restore from an incremental heap checkpoint: its rows files hold the groups as restored, which the
        next checkpoint may reference."""
        if self._changed is not None:
            self._changed.difference_update(set(files) - self._migrated)
            self.group_files.seed(files)

    def release(self, snapshot: HeapSnapshot) -> None:
        with self._snapshots_lock:
            self._snapshots = tuple(s for s in self._snapshots if s is not snapshot)
            self._watch()

    def restore_key_group(self, group: int, payload: bytes) -> None:
        """Load one key group's tables, as :meth:`HeapSnapshot.serialized` wrote them. Entries with a TTL keep
        their last-access times: they expire when they would have without the restore."""
        if group not in self.key_groups:
            raise ProtocolError(f"key group {group} is not in this subtask's range {tuple(self.key_groups)}")
        if self._changed is not None:
            self._changed.add(group)  # unless adopt_group_files says where it is stored already
        for name, table in pickle.loads(payload).items():
            if type(table) is tuple:  # (format, table): a state with a TTL
                table = self._restored_with_ttl(group, name, *table)
            elif name in self._ttl_states:  # declared with a TTL already: the entries' lives start now
                wrap, now = self._ttl_states[name]._wrap, self.clock()
                table = {key: wrap(entry, now) for key, entry in table.items()}
                self._migrated.add(group)  # not as its rows file holds it
            self._tables.setdefault(name, {})[group] = table

    def _restored_with_ttl(self, group: int, name: str, stored_format: str, table: dict) -> dict:
        if stored_format != TTL_FORMAT:
            raise CorruptCheckpointError(
                f"Key group {group} holds state '{name}' in format {stored_format!r}, which this version does not "
                f"read (it reads {TTL_FORMAT!r}): restore with the version that took the checkpoint.")
        if name in self._ttl_states:
            return table
        declared = self._descriptors.get(name)
        if declared is not None:  # declared without a TTL already: the values only
            unwrap = _TTL_STATE_CLASSES[type(declared)]._unwrap
            return {key: unwrap(entry) for key, entry in table.items()}
        self._ttl_restored.add(name)  # its format is settled when it is declared (_convert_restored)
        self._ttl_names.add(name)
        return table

    def keys(self, state_name: str) -> Iterator[Any]:
        if state_name in self._ttl_names:  # the keys a read would find an entry for
            state = self._ttl_state(state_name, "keys")
            for _, key, _ in state.visible_entries(self._tables.get(state_name, {})):
                yield key
            return
        for table in self._tables.get(state_name, {}).values():
            yield from table.keys()
        yield from list(self._bulk.get(state_name, ()))

    def state_size(self) -> tuple[int, None]:
        """Entries (keys, per state) held; bytes are unknown without pickling them."""
        held = sum(len(table) for groups in list(self._tables.values()) for table in list(groups.values()))
        return held + sum(len(flat) for flat in list(self._bulk.values())), None

    def state_names(self) -> list[str]:
        return [name for name, groups in self._tables.items() if any(groups.values()) or self._bulk.get(name)]

    def declared_states(self) -> dict[str, StateDescriptor]:
        return dict(self._descriptors)

    def drop_state(self, state_name: str) -> None:
        # Snapshots hold the group tables themselves, not this mapping: dropping it changes none of them.
        dropped = self._tables.pop(state_name, None)
        # A key of the flat dict either left its group's table (noted as changed then) or is in no checkpoint.
        self._bulk.pop(state_name, None)
        if dropped and self._changed is not None:
            self._changed.update(dropped)
        state = self._states.pop(state_name, None)
        if isinstance(state, HeapValueState):
            state._groups = {}  # a handle kept past the drop takes the general path, which refuses it
        self._descriptors.pop(state_name, None)
        self._ttl_states.pop(state_name, None)
        self._ttl_restored.discard(state_name)
        self._ttl_names.discard(state_name)

    def put_entry(self, state_name: str, key: Any, entry: Any) -> None:
        """Set ``key``'s entry of ``state_name`` as it is held (a value state's value, a list state's list, a map
        state's dict), in the key group the runtime routes ``key`` to (the state API writes state this way)."""
        key = canonical_key(key)
        group = self.key_group_of(key)
        if group not in self.key_groups:
            raise ProtocolError(f"key {key!r} is in key group {group}, not in this backend's {tuple(self.key_groups)}")
        self._bulk.get(state_name, {}).pop(key, None)
        self._tables.setdefault(state_name, {}).setdefault(group, {})[key] = entry

    def raw_entries(self, state_name: str) -> Iterator[tuple[int, Any, Any]]:
        """Every ``(key group, key, entry)`` of ``state_name`` as it is held: with a TTL, each entry carries its
        last-access time (the state API reads restored state this way, without declaring it)."""
        for group, table in self._tables.get(state_name, {}).items():
            for key, entry in table.items():
                yield group, key, entry
        yield from self._bulk_entries(state_name)

    def restored_with_ttl(self, state_name: str) -> bool:
        """Whether ``state_name`` was restored with a time-to-live and not declared since: its entries, as
        :meth:`raw_entries` gives them, carry their last-access times (a value's ``(value, t)``, a list's
        ``[(element, t), ...]``, a map's ``{k: (v, t)}``: :mod:`state_backends.heap.ttl_states`). The state API
        reads restored state so, undeclared. A declared state answers False: its descriptor says whether it has one.

        >>> from runtime.keys.key_groups import key_group_range
        >>> from runtime.settings.durations import Time
        >>> from state_backends import StateTtlConfig, ValueStateDescriptor
        >>> last = ValueStateDescriptor("last")
        >>> last.enable_time_to_live(StateTtlConfig.new_builder(Time.minutes(5)).build())
        >>> job = HeapKeyedStateBackend(128, key_group_range(128, 1, 0), clock=lambda: 1_000)
        >>> state = job.get_state(last); job.set_current_key("ann"); state.update("hi")
        >>> restored = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
        >>> for group, payload in job.snapshot().serialized(): restored.restore_key_group(group, payload)
        >>> restored.restored_with_ttl("last"), [entry for _, _, entry in restored.raw_entries("last")]
        (True, [('hi', 1000)])
        >>> job.restored_with_ttl("last")   # declared
        False
        """
        return state_name in self._ttl_restored

    def entries(self, state_name: str) -> Iterator[tuple[int, Any, Any]]:
        """Every ``(key group, key, value)`` of ``state_name`` on this subtask (with a TTL: as a read would show
        them, without their timestamps)."""
        if state_name in self._ttl_names:
            yield from self._ttl_state(state_name, "entries").visible_entries(self._tables.get(state_name, {}))
            return
        for group, table in self._tables.get(state_name, {}).items():
            for key, value in table.items():
                yield group, key, value
        yield from self._bulk_entries(state_name)


@dataclass(frozen=True)
class HashMapStateBackend(StateBackend):
    """Keyed state on the heap, in Python dicts (PyFlink's ``HashMapStateBackend``): the fastest access, state
    bounded by the workers' memory. The default.

    ``enable_incremental_checkpointing``: checkpoints write only the key groups changed since the last completed
    one and reference the others (:mod:`state_backends.heap.incremental`); off, every checkpoint is a full copy.
    Savepoints are always full.

    >>> from runtime.keys.key_groups import key_group_range
    >>> backend = HashMapStateBackend().create_keyed_state_backend("count", 128, key_group_range(128, 1, 0))
    >>> type(backend).__name__
    'HeapKeyedStateBackend'
    >>> HashMapStateBackend(enable_incremental_checkpointing=True)
    HashMapStateBackend(enable_incremental_checkpointing=True)
    """

    enable_incremental_checkpointing: bool = False

    def is_incremental_checkpoints_enabled(self) -> bool:
        return self.enable_incremental_checkpointing

    def __repr__(self) -> str:
        return ("HashMapStateBackend(enable_incremental_checkpointing=True)" if self.enable_incremental_checkpointing
                else "HashMapStateBackend()")

    def create_keyed_state_backend(self, operator_uid: str, max_parallelism: int,
                                   key_groups: KeyGroupRange) -> HeapKeyedStateBackend:
        return HeapKeyedStateBackend(max_parallelism, key_groups, incremental=self.enable_incremental_checkpointing,
                                     operator_uid=operator_uid)

