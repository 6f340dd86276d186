"""Full snapshots of RocksDB state in the portable format: what savepoints hold, and any backend restores.

The synchronous part opens a :class:`~state_backends.rocksdb.barrier.BarrierCut`; the asynchronous part has it
take the RocksDB checkpoint of the subtask's instance as it was at the barrier (its files hard links), opens that
checkpoint read-only and writes key group after key group as the heap backend does, one pickled
``{state: {key: value}}`` each (:mod:`state_backends.rocksdb.portable`), then deletes it. (``rocksdict``'s
iterators do not read at a RocksDB snapshot, so a checkpoint is what keeps the state as it was at the barrier.)

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

import shutil
import threading
from typing import Callable, Iterator

from runtime.protocol.checkpoints import NATIVE_STATE_GROUP
from state_backends.base import KeyedSnapshot
from state_backends.rocksdb.incremental import upload_checkpoint
from state_backends.rocksdb.portable import portable_rows

__all__ = ["RocksDBFullSnapshot",
           "portable_rows"]  # what serialized() writes (state_backends.rocksdb.portable), importable with the snapshot


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
