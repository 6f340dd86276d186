"""A write-back cache of one RocksDB instance's value-like state: the hot keys' values as Python objects.

Reading a value from RocksDB costs a lookup and an unpickle, writing one a pickle and a write (~10 µs a record
together, against ~1 µs on the heap); a key updated a hundred times between two checkpoints is written once here.
Only immutable values are cached (numbers, strings, bytes, None and tuples of these): a value the user may change in
place is written through at once, as RocksDB has to see exactly what ``update`` was given. The backend flushes
the changed entries before anything reads RocksDB directly (a snapshot at the barrier, iteration, bulk access,
dropping a state), so the cache is exact across snapshots; at most ``limit`` entries are held, and no more than
that many are written at a barrier (16,384: ~15 ms).

>>> cache = WriteCache(limit=4)
>>> cache.put(b"k1", 7); cache.get(b"k1"), cache.get(b"k2") is MISS
(7, True)
>>> written = []
>>> cache.flush(lambda puts, deletes: written.append((puts, deletes))); written
[({b'k1': 7}, [])]
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["WriteCache", "MISS", "DELETED", "cacheable"]

MISS = object()
DELETED = object()  # in ``changed``: the row is to be deleted
_SCALARS = frozenset({int, float, str, bytes, bool, type(None)})


def cacheable(value: Any) -> bool:
    """Whether ``value`` cannot change in place: a scalar, or a tuple of scalars.

    >>> cacheable(3), cacheable(("a", 1)), cacheable([1]), cacheable(("a", [1]))
    (True, True, False, False)
    """
    kind = type(value)
    if kind in _SCALARS:
        return True
    return kind is tuple and all(type(item) in _SCALARS for item in value)


class WriteCache:
    def __init__(self, limit: int = 1 << 14):
        self.limit = limit
        self.values: dict[bytes, Any] = {}  # row -> value (None: no value), clean or changed
        self.changed: dict[bytes, Any] = {}  # row -> value, or DELETED: not written to RocksDB yet
        self.write: Callable | None = None  # set by the backend: writes (puts, deletes) to RocksDB

    def get(self, row: bytes) -> Any:
        return self.values.get(row, MISS)

    def remember(self, row: bytes, value: Any) -> None:
        """A value just read from RocksDB (None: absent)."""
        if len(self.values) >= self.limit:
            self._make_room()
        self.values[row] = value

    def put(self, row: bytes, value: Any) -> None:
        if len(self.values) >= self.limit:
            self._make_room()
        self.values[row] = value
        self.changed[row] = value

    def delete(self, row: bytes) -> None:
        if len(self.values) >= self.limit:
            self._make_room()
        self.values[row] = None
        self.changed[row] = DELETED

    def forget(self, row: bytes) -> None:
        """``row`` is about to be written directly: nothing cached of it may be written after."""
        self.values.pop(row, None)
        self.changed.pop(row, None)

    def flush(self, write: Callable | None = None) -> None:
        """Write the changed entries: ``write(puts, deletes)``."""
        if self.changed:
            puts = {row: value for row, value in self.changed.items() if value is not DELETED}
            deletes = [row for row, value in self.changed.items() if value is DELETED]
            self.changed = {}
            (write or self.write)(puts, deletes)

    def clear(self) -> None:
        """Flush, then forget every value (rows about to change behind the cache's back)."""
        self.flush()
        self.values.clear()

    def _make_room(self) -> None:
        self.clear()
