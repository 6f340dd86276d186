"""Keyed state in an embedded RocksDB instance per operator subtask: state larger than memory.

Every state's rows live in one column family, each state under a state id of its own, and a small column family
describes them (:mod:`state_backends.rocksdb.layout`).

State restored from a snapshot in the portable format (one pickled ``{state: {key: value}}`` per key group, as
the heap backend writes; what savepoints hold) is loaded one row per key, and takes the layout and TTL format
of its declaration when the operator declares it: heap and RocksDB read each other's snapshots.

>>> import tempfile
>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.descriptors import ValueStateDescriptor
>>> backend = RocksDBKeyedStateBackend(128, key_group_range(128, 1, 0), tempfile.mkdtemp())
>>> count = backend.get_state(ValueStateDescriptor("count"))
>>> for key in ("x", "y", "x"):
...     backend.set_current_key(key); count.update((count.value() or 0) + 1)
>>> sorted((key, value) for _, key, value in backend.entries("count"))
[('x', 2), ('y', 1)]
>>> backend.close()
"""

from __future__ import annotations

import functools
import itertools
import os
import pickle
import shutil
from dataclasses import dataclass
from typing import Any, Iterator

import rocksdict

from runtime.errors import CorruptCheckpointError, ProtocolError, StateUsageError
from runtime.keys.canonical import canonical_key
from runtime.keys.key_groups import KeyGroupRange, assign_to_key_group
from state_backends.base import KeyedStateBackend, State
from state_backends.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
    declared_or_class,
)
from state_backends.heap.snapshot import TTL_FORMAT
from state_backends.heap.ttl_states import TtlListState, TtlMapState, TtlValueState
from state_backends.rocksdb.barrier import BarrierCut
from state_backends.rocksdb.cache import DELETED, WriteCache
from state_backends.rocksdb.db import (
    MemorySettings,
    RocksDBStateError,
    close_db,
    column_family,
    describe_failure,
    list_column_families,
    open_db,
)
from state_backends.rocksdb.incremental import NativeManifest, UploadTracker, fetch_files, recovery_directory
from state_backends.rocksdb.keys import decode_key, encode_key, group_bound, row_prefix, split_row
from state_backends.rocksdb.layout import (
    DATA_COLUMN,
    ENTRIES,
    META_COLUMN,
    STATE_ID_BYTES,
    WHOLE,
    read_meta,
    state_id,
)
from state_backends.rocksdb.snapshot import RocksDBFullSnapshot
from state_backends.rocksdb.states import (
    RocksDBAggregatingState,
    RocksDBListState,
    RocksDBMapState,
    RocksDBReducingState,
    RocksDBValueState,
    prefix_end,
    unpicklable,
)
from state_backends.ttl import wall_clock_ms

__all__ = ["RocksDBKeyedStateBackend", "Column",
           # the layout of the backend's files (state_backends.rocksdb.layout), importable with the backend
           "WHOLE", "ENTRIES", "META_COLUMN", "DATA_COLUMN", "read_meta", "state_id", "STATE_ID_BYTES"]

_PREFIX_CACHE_LIMIT = 1 << 20
_PROTOCOL = 5

_STATE_CLASSES = {
    ValueStateDescriptor: RocksDBValueState,
    ListStateDescriptor: RocksDBListState,
    MapStateDescriptor: RocksDBMapState,
    ReducingStateDescriptor: RocksDBReducingState,
    AggregatingStateDescriptor: RocksDBAggregatingState,
}
# What a whole row of a state with a TTL holds, per kind: the heap's TTL entry functions.
_TTL_ENTRY = {ValueStateDescriptor: TtlValueState, ReducingStateDescriptor: TtlValueState,
              AggregatingStateDescriptor: TtlValueState, ListStateDescriptor: TtlListState,
              MapStateDescriptor: TtlMapState}


@dataclass
class Column:
    """One state: where its rows are (the data column family, under ``sid``), its layout and whether its rows
    carry TTL timestamps."""

    family: Any  # an Rdict bound to the data column family
    number: int
    layout: str
    ttl: bool

    def __post_init__(self):
        self.sid = state_id(self.number)
        self.end = state_id(self.number + 1)


class RocksDBKeyedStateBackend(KeyedStateBackend):
    """Keyed state of one subtask in a RocksDB instance at ``directory`` (created; deleted by ``close``).

    ``clock``: processing time in epoch ms, for state with a time-to-live (tests pass a fake one).
    """

    def __init__(self, max_parallelism: int, key_groups: KeyGroupRange, directory: str,
                 settings: MemorySettings | None = None, clock=None, operator_uid: str = "",
                 incremental: bool = False, local_root: str | None = None, local_recovery: bool = True):
        self.max_parallelism = max_parallelism
        self.incremental = incremental
        self.local_root = local_root or os.path.dirname(os.path.abspath(directory))
        self.local_recovery = local_recovery  # keep the last checkpoint's files here for a restart on this worker
        self.uploads = UploadTracker()
        self.instance = os.urandom(8).hex()  # names this instance's files in shared storage
        self.key_groups = key_groups
        self.directory = directory
        self.settings = settings or MemorySettings()
        self.operator_uid = operator_uid
        self.clock = wall_clock_ms if clock is None else clock
        self.db = open_db(directory, self.settings)
        self._families: dict[str, Any] = {}  # every column family handle handed out: closed before the instance
        self._meta = self._family(META_COLUMN)
        self._data = self._family(DATA_COLUMN)
        self._free: list[int] = []  # ids of dropped states (emptied), for new ones
        self._next_id = 1 + max((number for number, _, _ in read_meta(self._meta).values()), default=0)
        self.cache = WriteCache()  # value-like state without a TTL: hot keys' values, written back in batches
        self.cache.write = self._write_back
        self._columns: dict[str, Column] = {}
        self._states: dict[str, State] = {}
        self._descriptors: dict[str, StateDescriptor] = {}
        self._prefixes: dict[Any, bytes] = {}
        self.current_key: Any = None
        self._prefix: bytes | None = None
        self._snapshots = itertools.count(1)
        self._cut: BarrierCut | None = None  # the last barrier's checkpoint, until it is taken
        self.last_restore: dict = {}  # files of the last restore: from local recovery, downloaded (and bytes)

    # -- the current key ---------------------------------------------------------------------------------

    def set_current_key(self, key: Any) -> None:
        prefix = self._prefixes.get(key)
        if prefix is None:
            key = canonical_key(key)
            prefix = self.prefix_of(key)
        self.current_key = key
        self._prefix = prefix

    def prefix_of(self, key: Any) -> bytes:
        """The row prefix of ``key`` (canonical), cached: the stable hash is the costliest step of an access."""
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = row_prefix(assign_to_key_group(key, self.max_parallelism), key)
            if len(self._prefixes) >= _PREFIX_CACHE_LIMIT:
                self._prefixes.clear()
            self._prefixes[key] = prefix
        return prefix

    def get_current_key(self) -> Any:
        return self.current_key

    def current_prefix(self) -> bytes:
        prefix = self._prefix
        if prefix is None:
            raise StateUsageError(
                "Keyed state was used with no current key: keyed state belongs to the key of the record being "
                "processed, so use it in process_element / on_timer, not in open().")
        return prefix

    # -- declaring states --------------------------------------------------------------------------------

    def get_state(self, descriptor: StateDescriptor) -> State:
        state, state_class = declared_or_class(self._descriptors, self._states, descriptor, _STATE_CLASSES)
        if state is not None:
            return state
        name = descriptor.name
        layout = ENTRIES if type(descriptor) is MapStateDescriptor else WHOLE
        column = self._column(name, create=True, layout=layout, ttl=descriptor.has_ttl)
        if column.layout != layout or column.ttl != descriptor.has_ttl:
            self._convert(name, column, layout, descriptor)
        state = state_class(self, descriptor, column)
        self._descriptors[name] = descriptor
        self._states[name] = state
        return state

    def _column(self, name: str, create: bool = False, layout: str = WHOLE, ttl: bool = False) -> Column | None:
        column = self._columns.get(name)
        if column is not None:
            return column
        stored = self._meta.get(name.encode())
        if stored is None:
            if not create:
                return None
            if self._free:
                number = self._free.pop()
            else:
                number, self._next_id = self._next_id, self._next_id + 1
        else:
            number, layout, ttl = pickle.loads(stored)
        column = self._columns[name] = Column(self._data, number, layout, ttl)
        if stored is None:
            self._set_meta(name, column)
        return column

    def _family(self, name: str):
        family = self._families.get(name)
        if family is None:
            try:
                family = self._families[name] = column_family(self.db, name, self.settings)
            except Exception as exc:
                raise RocksDBStateError(describe_failure(self.directory, exc)) from exc
        return family

    def _write_back(self, puts: dict, deletes: list) -> None:
        batch = rocksdict.WriteBatch(raw_mode=True)
        batch.set_default_column_family(self.db.get_column_family_handle(DATA_COLUMN))
        dumps = pickle.dumps
        for row, value in puts.items():
            batch.put(row, dumps(value, _PROTOCOL))  # cached values are scalars: they always pickle
        for row in deletes:
            batch.delete(row)
        cut = self._cut
        if cut is not None:
            cut.record(DATA_COLUMN, puts)
            cut.record(DATA_COLUMN, deletes)
        self.db.write(batch)

    def _set_meta(self, name: str, column: Column) -> None:
        self._meta.put(name.encode(), pickle.dumps((column.number, column.layout, column.ttl), _PROTOCOL))

    def _convert(self, name: str, column: Column, layout: str, descriptor: StateDescriptor) -> None:
        """Rows of a restored state into the layout and TTL format of its declaration (a state may gain or lose
        its TTL across a restore, as Flink's TTL migration allows)."""
        self.cache.clear()
        entry = _TTL_ENTRY[type(descriptor)]
        ttl, now = descriptor.has_ttl, self.clock()
        family = column.family
        batch = _Batch(self, column, name, self.operator_uid)
        for prefix, value in list(self._whole_rows(column)):
            if ttl and not column.ttl:
                value = entry._wrap(value, now)
            elif column.ttl and not ttl:
                value = entry._unwrap(value)
            if column.layout == ENTRIES:
                family.delete_range(prefix, prefix_end(prefix))
            if layout == ENTRIES:
                family.delete(prefix)
                for map_key, item in value.items():
                    batch.put(prefix + encode_key(map_key), item)
            else:
                batch.put(prefix, value)
        batch.write()
        column.layout, column.ttl = layout, ttl
        self._set_meta(name, column)

    def _rows(self, column: Column) -> Iterator[tuple[bytes, bytes]]:
        sid = column.sid
        for row, raw in column.family.items(from_key=sid):
            if not row.startswith(sid):
                return
            yield row, raw

    def _whole_rows(self, column: Column) -> Iterator[tuple[bytes, Any]]:
        """``(row prefix, value)`` per key (the prefix with the state id), whatever the layout: a map state's
        entries gathered in a dict."""
        if column.layout == WHOLE:
            for row, raw in self._rows(column):
                yield row, pickle.loads(raw)
            return
        current, mapping = None, {}
        for row, raw in self._rows(column):
            group, key, rest = split_row(row[STATE_ID_BYTES:])
            prefix = row[:len(row) - len(rest)]
            if prefix != current:
                if current is not None:
                    yield current, mapping
                current, mapping = prefix, {}
            mapping[decode_key(rest)] = pickle.loads(raw)
        if current is not None:
            yield current, mapping

    # -- many keys at once (the columnar path, window panes) -------------------------------------------------

    def _ttl_state(self, state_name: str, method: str):
        state = self._states.get(state_name)
        if state is None:
            raise StateUsageError(
                f"State '{state_name}' was restored with a time-to-live and is not declared yet: declare it with "
                f"runtime_context.get_state(descriptor), its descriptor with enable_time_to_live(...), before "
                f"{method}().")
        return state

    def _value_column(self, state_name: str, method: str) -> Column:
        column = self._column(state_name)
        if column is None:
            raise KeyError(state_name)
        if column.ttl:
            state = self._ttl_state(state_name, method)
            if state.kind in ("list", "map"):
                raise StateUsageError(
                    f"{method}() reads and writes value state, but state '{state_name}' is {state.kind} state with a "
                    "time-to-live: use its state handle (runtime_context.get_state(descriptor)) instead.")
        elif column.layout == ENTRIES:
            raise StateUsageError(
                f"{method}() reads and writes value state, but state '{state_name}' is map state: use its state "
                "handle (runtime_context.get_state(descriptor)) instead.")
        return column

    def get_many(self, state_name: str, keys: list) -> list:
        self.cache.clear()  # rows read and written directly: nothing cached may be stale or written later
        column = self._value_column(state_name, "get_many")
        prefix_of, sid = self.prefix_of, column.sid
        raws = column.family.get([sid + prefix_of(key) for key in keys]) if keys else []
        loads = pickle.loads
        if not column.ttl:
            return [None if raw is None else loads(raw) for raw in raws]
        state = self._states[state_name]
        now = self.clock()
        values = []
        for key, raw in zip(keys, raws):
            if raw is None:
                values.append(None)
                continue
            value, accessed = loads(raw)
            prefix = sid + prefix_of(key)
            if accessed + state._ttl_ms <= now:
                column.family.delete(prefix)
                values.append(value if state._return_expired else None)
            else:
                values.append(value)
                if state._refresh_on_read:
                    column.family.put(prefix, pickle.dumps((value, now), _PROTOCOL))
        return values

    def put_many(self, state_name: str, keys: list, values: list) -> None:
        self.cache.clear()
        column = self._value_column(state_name, "put_many")
        batch = _Batch(self, column, state_name, self.operator_uid)
        prefix_of = self.prefix_of
        if column.ttl:
            now = self.clock()
            values = [(value, now) for value in values]
        sid = column.sid
        for key, value in zip(keys, values):
            batch.put(sid + prefix_of(key), value)
        batch.write()

    def fold_many(self, state_name: str, keys: list, values: list, fold) -> None:
        self.cache.clear()
        column = self._value_column(state_name, "fold_many")
        if not column.ttl:
            return super().fold_many(state_name, keys, values, fold)
        state = self._states[state_name]
        now = self.clock()
        distinct = list(dict.fromkeys(keys))
        current = {key: state._live(column.sid + self.prefix_of(key), now) for key in distinct}
        for key, value in zip(keys, values):
            current[key] = fold(current[key], value)
        self.put_many(state_name, distinct, [current[key] for key in distinct])

    # -- iteration ------------------------------------------------------------------------------------------

    def keys(self, state_name: str) -> Iterator[Any]:
        for _, key, _ in self.entries(state_name):
            yield key

    def entries(self, state_name: str) -> Iterator[tuple[int, Any, Any]]:
        """Every ``(key group, key, value)`` of ``state_name`` (with a TTL: as a read would show them)."""
        self.cache.flush()
        column = self._column(state_name)
        if column is None:
            return
        visible = None
        if column.ttl:
            state = self._ttl_state(state_name, "entries")
            entry = _TTL_ENTRY[type(self._descriptors[state_name])]
            deadline = self.clock() - state._ttl_ms
            return_expired = state._return_expired

            def visible(value):
                if not return_expired:
                    value = entry._live(value, deadline)
                    if value is None:
                        return None
                return entry._unwrap(value)
        for prefix, value in list(self._whole_rows(column)):
            if visible is not None:
                value = visible(value)
                if value is None:
                    continue
            group, key, _ = split_row(prefix[STATE_ID_BYTES:])
            yield group, decode_key(key), value

    def declared_states(self) -> dict[str, StateDescriptor]:
        return dict(self._descriptors)

    def state_names(self) -> list[str]:
        self.cache.flush()
        names = []
        for raw_name, _ in self._meta.items():
            name = raw_name.decode()
            column = self._column(name)
            if column is not None and _has_rows(column):
                names.append(name)
        return names

    def drop_state(self, state_name: str) -> None:
        self.cache.clear()
        column = self._column(state_name)
        if column is not None:
            self._columns.pop(state_name, None)
            self._meta.delete(state_name.encode())
            column.family.delete_range(column.sid, column.end)  # one range tombstone, however many rows
            self._free.append(column.number)
        self._states.pop(state_name, None)
        self._descriptors.pop(state_name, None)

    # -- snapshots ----------------------------------------------------------------------------------------------

    def snapshot(self, full: bool = False):
        """The synchronous part of a checkpoint: constant time, whatever the state's size. The RocksDB checkpoint
        is taken by the asynchronous part (:class:`~state_backends.rocksdb.barrier.BarrierCut`). (``full``: the
        snapshotter writes savepoints and final states whole from the same RocksDB checkpoint.)"""
        self._end_cut()
        if self._holds_nothing():
            return None
        path = f"{self.directory}-snapshot-{next(self._snapshots)}"
        # The write-back cache is not flushed here (up to 16,384 rows to pickle and write): what it holds that
        # RocksDB does not goes into the checkpoint when the cut is taken.
        changes = functools.partial(_encoded_changes, dict(self.cache.changed))
        try:
            cut = BarrierCut(self.db, {DATA_COLUMN: self._data, META_COLUMN: self._meta}, changes, path)
        except Exception as exc:
            raise RocksDBStateError(describe_failure(self.directory, exc)) from exc
        self._cut = cut
        self._route_writes(cut.recorder(DATA_COLUMN), cut.recorder(META_COLUMN))
        return RocksDBFullSnapshot(self, cut, self._ttl_filters())

    def _holds_nothing(self) -> bool:
        # Once incremental files were stored, every checkpoint lists this instance's files, even with no rows:
        # retention deletes a file only when no retained checkpoint references it, and a checkpoint skipped
        # here would let it go while the instance still holds (and would later reuse) it.
        if self.incremental and self.uploads.used:
            return False
        changed = self.cache.changed
        if any(_has_rows(self._column(name), changed) for name in self._known_names()):
            return False
        if not changed:
            return True
        self.cache.flush()  # rows only in the cache: write them (no state to speak of, so little to write)
        return not any(_has_rows(self._column(name)) for name in self._known_names())

    def _route_writes(self, data, meta) -> None:
        """Every write of the states to ``data`` and ``meta``: the column families, or while a cut is open
        its recorders."""
        self._data, self._meta = data, meta
        for column in self._columns.values():
            column.family = data
        for state in self._states.values():
            state._column = data

    def _end_cut(self) -> None:
        """Writes go to the column families themselves again, the last barrier's checkpoint taken (now, if its
        asynchronous part has not yet: a barrier came before it ran, or the instance closes)."""
        cut, self._cut = self._cut, None
        if cut is None:
            return
        try:
            cut.complete()
        except RocksDBStateError:
            pass  # that checkpoint's asynchronous part fails with it
        self._route_writes(self._families[DATA_COLUMN], self._families[META_COLUMN])

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """The files of ``checkpoint_id`` count as stored; the local copies of older checkpoints go."""
        self.uploads.completed(checkpoint_id)  # older local copies go at the next upload, off this thread
        if self._cut is not None and self._cut.done:
            self._end_cut()

    def state_size(self) -> tuple[int, int]:
        """RocksDB's own estimates: keys (rows: one per key, or per map entry), and live bytes on disk plus the
        memtables."""
        data = self._families[DATA_COLUMN]
        value = data.property_int_value
        return (int(value("rocksdb.estimate-num-keys") or 0),
                int(value("rocksdb.estimate-live-data-size") or 0) + int(value("rocksdb.cur-size-all-mem-tables") or 0))

    def background_work(self) -> dict[str, int]:
        """What RocksDB's own threads have to do for this instance: memtables being flushed, compactions running
        and whether more are pending (for metrics, and for benchmarks that measure state at rest)."""
        data = self._families[DATA_COLUMN]
        return {name: int(data.property_int_value(f"rocksdb.{name}") or 0)
                for name in ("num-immutable-mem-table", "num-running-flushes", "num-running-compactions",
                             "compaction-pending")}

    def recovery_directory(self, job_dir: str) -> str:
        return recovery_directory(self.local_root, job_dir, self.operator_uid,
                                  (self.key_groups.start, self.key_groups.end))

    def is_empty(self) -> bool:
        return not self._known_names()

    def adopt_native(self, storage, checkpoint_id: int, manifest: NativeManifest) -> dict:
        """Become the RocksDB instance of ``manifest`` (an incremental checkpoint's files, from the local recovery
        copy where it has them, else downloaded), dropping the key groups this subtask does not own. Returns how
        many files came from where."""
        self._end_cut()
        self.cache.clear()
        families, self._families = self._families, {}
        for family in families.values():
            family.close()
        db, self.db = self.db, None
        close_db(db, self.directory)
        local = os.path.join(self.recovery_directory(storage.job_dir), f"chk-{checkpoint_id}")
        if not (self.local_recovery and os.path.isdir(local)):
            local = None
        try:
            counts = fetch_files(manifest, storage, checkpoint_id, self.directory, local)
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.db = open_db(self.directory, self.settings)  # empty again: closable, and no half-restored state
            self._meta, self._data = self._family(META_COLUMN), self._family(DATA_COLUMN)
            raise
        try:
            self.db = open_db(self.directory, self.settings, list_column_families(self.directory))
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.db = open_db(self.directory, self.settings)
            self._meta, self._data = self._family(META_COLUMN), self._family(DATA_COLUMN)
            raise
        self._meta = self._family(META_COLUMN)
        self._data = self._family(DATA_COLUMN)
        self._columns.clear()
        stored = read_meta(self._meta)
        self._free = []
        self._next_id = 1 + max((number for number, _, _ in stored.values()), default=0)
        first, last = manifest.key_groups
        if (first, last) != (self.key_groups.start, self.key_groups.end):  # taken at fewer subtasks: drop the rest
            for number, _, _ in stored.values():
                sid = state_id(number)
                if first < self.key_groups.start:
                    self._data.delete_range(sid + group_bound(first), sid + group_bound(self.key_groups.start))
                if self.key_groups.end < last:
                    self._data.delete_range(sid + group_bound(self.key_groups.end + 1), sid + group_bound(last + 1))
        self.uploads.seed(dict(manifest.shared), manifest.job_dir)
        self.last_restore = counts
        return counts

    def _known_names(self) -> list[str]:
        return [raw.decode() for raw, _ in self._meta.items()]

    def _ttl_filters(self) -> dict:
        """For each declared state with a TTL: the function of a stored value to what a snapshot now writes."""
        now = self.clock()
        filters = {}
        for name, state in self._states.items():
            if getattr(state, "_ttl_ms", None) is not None:
                entry = _TTL_ENTRY[type(self._descriptors[name])]
                filters[name] = (lambda value, live=entry._live, deadline=now - state._ttl_ms: live(value, deadline))
        return filters

    def release(self, snapshot) -> None:
        pass

    def restore_key_group(self, group: int, payload: bytes) -> None:
        """Load one key group as a portable snapshot wrote it (the heap backend's format)."""
        if group not in self.key_groups:
            raise ProtocolError(f"key group {group} is not in this subtask's range {tuple(self.key_groups)}")
        self.cache.clear()
        for name, table in pickle.loads(payload).items():
            ttl = type(table) is tuple
            if ttl:
                stored_format, table = table
                if stored_format != TTL_FORMAT:
                    raise CorruptCheckpointError(
                        f"Key group {group} holds state '{name}' in format {stored_format!r}, which this version "
                        f"does not read (it reads {TTL_FORMAT!r}): restore with the version that took the "
                        "checkpoint.")
            descriptor = self._descriptors.get(name)
            if descriptor is not None:  # declared already: the rows take its format now
                self._restore_declared(group, name, descriptor, ttl, table)
                continue
            column = self._column(name, create=True, layout=WHOLE, ttl=ttl)
            if column.ttl != ttl or column.layout != WHOLE:
                raise CorruptCheckpointError(f"Key group {group} holds state '{name}' in another format than the "
                                             "key groups restored before it.")
            batch = _Batch(self, column, name, self.operator_uid)
            sid = column.sid
            for key, value in table.items():
                batch.put(sid + row_prefix(group, key), value)
            batch.write()

    def _restore_declared(self, group: int, name: str, descriptor: StateDescriptor, ttl: bool, table: dict) -> None:
        column = self._columns[name]
        entry, now = _TTL_ENTRY[type(descriptor)], self.clock()
        batch = _Batch(self, column, name, self.operator_uid)
        for key, value in table.items():
            if column.ttl and not ttl:
                value = entry._wrap(value, now)
            elif ttl and not column.ttl:
                value = entry._unwrap(value)
            prefix = column.sid + row_prefix(group, key)
            if column.layout == ENTRIES:
                for map_key, item in value.items():
                    batch.put(prefix + encode_key(map_key), item)
            else:
                batch.put(prefix, value)
        batch.write()

    def close(self) -> None:
        # RocksDB stays open while any handle on it lives (a column family, an iterator): every one is closed
        # before the directory goes, or dropping it later would retry writing there for a second.
        if self.db is None:
            return
        self._end_cut()  # a checkpoint still to be uploaded is taken first
        db, self.db = self.db, None
        families, self._families = self._families, {}
        for family in families.values():
            try:
                family.close()
            except Exception:  # already closed (a dropped state's)
                pass
        self._columns.clear()
        close_db(db, self.directory)


class _Batch:
    """Rows of the data column family written together (one call into RocksDB instead of one per row)."""

    def __init__(self, backend, column: Column, state_name: str, operator_uid: str = ""):
        self._backend = backend
        self._db = backend.db
        self._name = state_name
        self._uid = operator_uid
        self._handle = self._db.get_column_family_handle(DATA_COLUMN)
        self._batch = self._new()
        self._rows: list[bytes] = []

    def _new(self):
        batch = rocksdict.WriteBatch(raw_mode=True)
        batch.set_default_column_family(self._handle)
        return batch

    def put(self, row: bytes, value: Any) -> None:
        try:
            data = pickle.dumps(value, _PROTOCOL)
        except Exception as exc:
            raise unpicklable(exc, self._name, self._uid, decode_key(split_row(row[STATE_ID_BYTES:])[1])) from exc
        self._batch.put(row, data)
        self._rows.append(row)
        if len(self._rows) >= 4096:
            self.write()

    def write(self) -> None:
        if self._rows:
            cut = self._backend._cut
            if cut is not None:
                cut.record(DATA_COLUMN, self._rows)
            self._db.write(self._batch)
            self._batch = self._new()
            self._rows = []


def _encoded_changes(changes: dict) -> dict:
    """The write-back cache's changes at a barrier as rows of the data column family (called when the cut is
    taken, off the task thread: cached values are immutable)."""
    dumps = pickle.dumps
    return {DATA_COLUMN: {row: None if value is DELETED else dumps(value, _PROTOCOL)
                          for row, value in changes.items()}}


def _has_rows(column: Column, changed: dict | None = None) -> bool:
    """Whether ``column`` has a row, not counting rows ``changed`` (the write-back cache's) deletes."""
    rows = column.family.iter()
    sid = column.sid
    try:
        rows.seek(sid)
        while rows.valid():
            row = rows.key()
            if not row.startswith(sid):
                return False
            if not changed or changed.get(row) is not DELETED:
                return True
            rows.next()  # at most as many as the cache holds
        return False
    finally:
        del rows  # an iterator keeps RocksDB open: let it go now


def default_directory(root: str, operator_uid: str, key_groups: KeyGroupRange) -> str:
    """A directory of its own for one subtask's instance under ``root``."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in operator_uid)[:60] or "operator"
    return os.path.join(root, f"{safe}-{key_groups.start}-{os.getpid()}-{os.urandom(4).hex()}")
