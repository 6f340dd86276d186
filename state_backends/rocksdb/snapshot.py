"""Full snapshots of RocksDB state in the portable format: what savepoints hold, and any backend restores.

The synchronous part opens a :class:`~state_backends.rocksdb.barrier.BarrierCut`; the asynchronous part has it
take the RocksDB checkpoint of the subtask's instance as it was at the barrier (its files hard links), opens that
checkpoint read-only and writes key group after key group as the heap backend does, one pickled
``{state: {key: value}}`` each, then deletes it. (``rocksdict``'s iterators do not read at a RocksDB snapshot, so a
checkpoint is what keeps the state as it was at the barrier.)

>>> import tempfile
>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.descriptors import MapStateDescriptor
>>> from state_backends.heap import HeapKeyedStateBackend
>>> from state_backends.rocksdb import RocksDBKeyedStateBackend
>>> backend = RocksDBKeyedStateBackend(128, key_group_range(128, 1, 0), tempfile.mkdtemp())
>>> cart = backend.get_state(MapStateDescriptor("cart"))
>>> backend.set_current_key("ann"); cart.put("book", 2)
>>> snapshot = backend.snapshot()
>>> cart.put("pen", 1)                       # after the barrier: not in the snapshot
>>> heap = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
>>> for group, payload in snapshot.serialized():
...     heap.restore_key_group(group, payload)
>>> [(key, value) for _, key, value in heap.entries("cart")]
[('ann', {'book': 2})]
>>> backend.close()
"""

from __future__ import annotations

import pickle
import shutil
import threading
from typing import Callable, Iterator

from runtime.protocol.checkpoints import NATIVE_STATE_GROUP
from state_backends.base import KeyedSnapshot
from state_backends.heap.snapshot import TTL_FORMAT
from state_backends.pickling import pickle_state
from state_backends.rocksdb.db import open_read_only
from state_backends.rocksdb.keys import decode_key, group_bound, split_row

__all__ = ["RocksDBFullSnapshot", "portable_rows"]


class RocksDBFullSnapshot(KeyedSnapshot):
    """``cut``: the RocksDB checkpoint of the barrier, taken by the first of :meth:`serialized` and :meth:`upload`;
    ``ttl``: per state with a time-to-live, the function of a stored value to what is written (None: expired at
    the barrier)."""

    manifest_group = NATIVE_STATE_GROUP  # the state file's row holding upload()'s manifest

    def __init__(self, backend, cut, ttl: dict[str, Callable]):
        self._backend = backend
        self.incremental = backend.incremental  # the snapshotter may upload() it, except for savepoints
        self.key_range = (backend.key_groups.start, backend.key_groups.end)
        self._key_groups = backend.key_groups
        self._cut = cut
        self.path = cut.path
        self._ttl = ttl
        self._lock = threading.Lock()
        self._released = False

    def serialized(self) -> Iterator[tuple[int, bytes]]:
        try:
            self._cut.complete()
            yield from portable_rows(self.path, self._key_groups.start, self._key_groups.end, self._ttl)
        finally:
            self.discard()

    def upload(self, storage, checkpoint_id: int, subtask: int, guard=None):
        """The asynchronous part of an incremental checkpoint (:func:`~state_backends.rocksdb.incremental.
        upload_checkpoint`): ``(manifest, shared files)``."""
        from state_backends.rocksdb.incremental import upload_checkpoint

        with self._lock:
            if self._released:
                raise RuntimeError("the snapshot was discarded")
            self._released = True  # its directory becomes the local recovery copy, or is deleted
        try:
            self._cut.complete()
            return upload_checkpoint(self.path, self._backend, storage, checkpoint_id, subtask, self._cut.own_files)
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    def discard(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._cut.discard()
        shutil.rmtree(self.path, ignore_errors=True)


def portable_rows(path: str, first: int, last: int, ttl: dict[str, Callable] | None = None
                  ) -> Iterator[tuple[int, bytes]]:
    """The portable rows of the RocksDB files at ``path`` for key groups ``first``..``last``: one row per state and
    key group, ``(group, pickled {state: {key: value}})`` (a restore merges a group's rows), state after state.
    One pass over each state's rows: a seek per state, not per state and key group (hundreds of window states
    times 128 key groups took a second per checkpoint)."""
    from state_backends.rocksdb.backend import (
        DATA_COLUMN,
        ENTRIES,
        META_COLUMN,
        STATE_ID_BYTES,
        read_meta,
        state_id,
    )

    ttl = ttl or {}
    db = open_read_only(path)
    families = []  # closed before the instance: any handle left open keeps RocksDB open
    try:
        meta = db.get_column_family(META_COLUMN)
        families.append(meta)
        data = db.get_column_family(DATA_COLUMN)
        families.append(data)
        loads = pickle.loads
        for name, (number, layout, timed) in sorted(read_meta(meta).items()):
            sid = state_id(number)
            entries, live = layout == ENTRIES, ttl.get(name)
            end = sid + group_bound(last + 1)
            group, table = None, {}
            for row, raw in data.items(from_key=sid + group_bound(first)):
                if row >= end:
                    break
                row_group, key, rest = split_row(row[STATE_ID_BYTES:])
                if row_group != group:
                    if table and (payload := _pickled(name, table, live, timed)) is not None:
                        yield group, payload
                    group, table = row_group, {}
                if entries:
                    table.setdefault(decode_key(key), {})[decode_key(rest)] = loads(raw)
                else:
                    table[decode_key(key)] = loads(raw)
            if table and (payload := _pickled(name, table, live, timed)) is not None:
                yield group, payload
    finally:
        for family in families:
            family.close()
        db.close()


def _pickled(name: str, table: dict, live: Callable | None, timed: bool) -> bytes | None:
    if live is not None:  # entries with a TTL: those live at the barrier
        table = {key: kept for key, value in table.items() if (kept := live(value)) is not None}
        if not table:
            return None
    return pickle_state({name: (TTL_FORMAT, table) if timed else table}, "keyed state")
