"""Copy-on-write snapshots of heap state, without copying: serialize-on-touch.

At the barrier (the synchronous part) a snapshot only records which tables each key group has: O(key
groups), independent of the number of keys. A background thread then pickles key group after key group.
If the task touches a key group the background thread has not reached yet, the task pickles that group
first, then proceeds. So no table is ever changed before it is serialised, values mutated in place
included, and no copy of the state is ever made.
"""

from __future__ import annotations

import pickle
import threading

__all__ = ["HeapSnapshot"]


class HeapSnapshot:
    def __init__(self, backend, tables: dict[str, dict[int, dict]]):
        self._backend = backend
        self._lock = threading.Lock()
        frozen: dict[int, dict[str, dict]] = {}
        for name, groups in tables.items():
            for group, table in groups.items():
                if table:
                    frozen.setdefault(group, {})[name] = table
        self._frozen = frozen
        self.pending = set(frozen)
        self._serialized: dict[int, bytes] = {}

    def _serialize(self, group: int) -> None:
        self._serialized[group] = pickle.dumps(self._frozen.pop(group), protocol=pickle.HIGHEST_PROTOCOL)
        self.pending.discard(group)

    def touch(self, group: int) -> None:
        """Called by the task before it accesses ``group`` while this snapshot is pending."""
        with self._lock:
            if group in self.pending:
                self._serialize(group)

    def serialize_all(self) -> list[tuple[int, bytes]]:
        """The asynchronous part: every key group's pickled tables, in key-group order."""
        while True:
            with self._lock:  # held while pickling one group, so the task cannot change it meanwhile
                if not self.pending:
                    break
                self._serialize(next(iter(self.pending)))
        self._backend.release(self)
        return sorted(self._serialized.items())
