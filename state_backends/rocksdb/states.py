"""State handles over RocksDB column families, scoped to the backend's current key.

Every read unpickles a fresh copy and every change is written at once (as in Flink's RocksDB backend: a value
changed in place is not stored until ``update``). Value, reducing, aggregating and list state keep one row per
key; map state one row per map entry, so that a key's map can outgrow memory and one entry's change writes one
row. With a time-to-live, rows hold what the heap backend's tables hold (:mod:`state_backends.heap.ttl_states`):
``(value, last access)``, and per element or map entry for list and map state; a read drops what expired.

>>> import os, tempfile
>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.descriptors import MapStateDescriptor
>>> from state_backends.rocksdb import RocksDBKeyedStateBackend
>>> backend = RocksDBKeyedStateBackend(128, key_group_range(128, 1, 0), tempfile.mkdtemp())
>>> cart = backend.get_state(MapStateDescriptor("cart"))
>>> backend.set_current_key("ann"); cart.put("book", 2); cart.put("pen", 1); cart.remove("pen")
>>> type(cart).__name__, dict(cart.items()), cart.contains("pen")
('RocksDBMapState', {'book': 2}, False)
>>> backend.close()
"""

from __future__ import annotations

import pickle
from typing import Any, Iterable

from runtime.settings.parsers import parse_duration_ms
from runtime.errors import UnpicklableStateError
from state_backends.base import (
    AggregatingState,
    ListState,
    MapState,
    MapViewsOfEntries,
    ReducingState,
    ValueState,
)
from state_backends.rocksdb.cache import MISS, cacheable
from state_backends.rocksdb.keys import decode_key, encode_key
from state_backends.ttl import StateTtlConfig

__all__ = ["RocksDBValueState", "RocksDBListState", "RocksDBMapState", "RocksDBReducingState",
           "RocksDBAggregatingState", "prefix_end", "unpicklable"]

_dumps, _loads = pickle.dumps, pickle.loads
_PROTOCOL = 5


def prefix_end(prefix: bytes) -> bytes:
    """The first byte string after every string that starts with ``prefix``.

    >>> prefix_end(b"ab"), prefix_end(b"a\\xff")
    (b'ac', b'b')
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\xff" * (len(prefix) + 1)
    return stripped[:-1] + bytes([stripped[-1] + 1])


def unpicklable(exc: Exception, state_name: str, operator_uid: str, key) -> UnpicklableStateError:
    """The error for a value of ``state_name`` that cannot be stored: RocksDB stores a value when it is written,
    so the write fails (on the heap, the checkpoint would)."""
    return UnpicklableStateError(
        f"keyed state '{state_name}' of operator uid '{operator_uid}' cannot store the value given for key {key!r}: "
        f"it cannot be pickled ({type(exc).__name__}: {exc}). Keep only picklable values in state (no locks, "
        "sockets, clients or open files).")


class _RocksDBState:
    kind = "keyed"

    def __init__(self, backend, descriptor, column):
        self._backend = backend
        self._name = descriptor.name
        self._descriptor = descriptor
        self._column = column.family  # the column family of every state's rows (an Rdict bound to it)
        self._sid = column.sid  # this state's rows start with it
        config = descriptor.ttl_config if descriptor.has_ttl else None
        self.config = config
        self._ttl_ms = None if config is None else parse_duration_ms(config.get_ttl(), "StateTtlConfig ttl")
        self._refresh_on_read = (config is not None
                                 and config.get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite)
        self._return_expired = (config is not None and config.get_state_visibility()
                                is StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
        self._clock = backend.clock

    def _prefix(self) -> bytes:
        prefix = self._backend._prefix
        if prefix is None:
            prefix = self._backend.current_prefix()  # raises: no current key
        return self._sid + prefix

    def _pickled(self, value) -> bytes:
        try:
            return _dumps(value, _PROTOCOL)
        except Exception as exc:
            raise unpicklable(exc, self._name, self._backend.operator_uid, self._backend.current_key) from exc

    def clear(self) -> None:
        self._column.delete(self._prefix())


class _SingleValue(_RocksDBState):
    """One row per key: the value, or ``(value, last access)`` with a TTL."""

    def __init__(self, backend, descriptor, column):
        super().__init__(backend, descriptor, column)
        self._cache = backend.cache if self._ttl_ms is None else None  # TTL state reads and writes RocksDB

    def _read(self) -> Any:
        prefix = self._prefix()
        cache = self._cache
        if cache is not None:
            value = cache.values.get(prefix, MISS)
            if value is not MISS:
                return value
        raw = self._column.get(prefix)
        entry = None if raw is None else _loads(raw)
        if cache is not None:
            if cacheable(entry):
                cache.remember(prefix, entry)
            return entry
        if entry is None:
            return None
        now = self._clock()
        if entry[1] + self._ttl_ms <= now:
            self._column.delete(prefix)
            return entry[0] if self._return_expired else None
        if self._refresh_on_read:
            self._column.put(prefix, _dumps((entry[0], now), _PROTOCOL))
        return entry[0]

    def _live(self, prefix: bytes, now: int) -> Any:
        """The value to fold into: None when absent or expired (Flink never folds into an expired value)."""
        if self._cache is not None:
            value = self._cache.values.get(prefix, MISS)
            if value is not MISS:
                return value
        raw = self._column.get(prefix)
        if raw is None:
            return None
        entry = _loads(raw)
        if self._ttl_ms is None:
            return entry
        return None if entry[1] + self._ttl_ms <= now else entry[0]

    def _write(self, prefix: bytes, value: Any, now: int) -> None:
        cache = self._cache
        if cache is not None:
            if cacheable(value):
                cache.put(prefix, value)
                return
            cache.forget(prefix)  # a value that may change in place: RocksDB gets it now, as it is
            self._column.put(prefix, self._pickled(value))
            return
        self._column.put(prefix, self._pickled((value, now)))

    def clear(self) -> None:
        if self._cache is not None:
            self._cache.delete(self._prefix())
        else:
            self._column.delete(self._prefix())


class RocksDBValueState(_SingleValue, ValueState):
    kind = "value"

    def value(self) -> Any:
        return self._read()

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._write(self._prefix(), value, self._clock() if self._ttl_ms is not None else 0)


class RocksDBReducingState(_SingleValue, ReducingState):
    kind = "reducing"

    def get(self) -> Any:
        return self._read()

    def add(self, value: Any) -> None:
        prefix = self._prefix()
        now = self._clock() if self._ttl_ms is not None else 0
        current = self._live(prefix, now)
        self._write(prefix, value if current is None else self._descriptor.reduce_function(current, value), now)


class RocksDBAggregatingState(_SingleValue, AggregatingState):
    kind = "aggregating"

    def get(self) -> Any:
        accumulator = self._read()
        return None if accumulator is None else self._descriptor.agg_function.get_result(accumulator)

    def add(self, value: Any) -> None:
        function = self._descriptor.agg_function
        prefix = self._prefix()
        now = self._clock() if self._ttl_ms is not None else 0
        accumulator = self._live(prefix, now)
        if accumulator is None:
            accumulator = function.create_accumulator()
        self._write(prefix, function.add(value, accumulator), now)


class RocksDBListState(_RocksDBState, ListState):
    """One row per key holding the whole list; with a TTL each element carries its own last access."""

    kind = "list"

    def _stored(self, prefix: bytes) -> list:
        raw = self._column.get(prefix)
        return [] if raw is None else _loads(raw)

    def get(self) -> Iterable[Any]:
        prefix = self._prefix()
        stored = self._stored(prefix)
        if self._ttl_ms is None or not stored:
            return stored
        now = self._clock()
        deadline = now - self._ttl_ms
        live = [element for element in stored if element[1] > deadline]
        values = [element for element, _ in (stored if self._return_expired else live)]
        if self._refresh_on_read:
            live = [(element, now) for element, _ in live]
        if not live:
            self._column.delete(prefix)
        elif self._refresh_on_read or len(live) != len(stored):
            self._column.put(prefix, _dumps(live, _PROTOCOL))
        return values

    def add(self, value: Any) -> None:
        self.add_all((value,))

    def add_all(self, values: Iterable[Any]) -> None:
        values = list(values)
        if self._ttl_ms is not None:
            now = self._clock()
            values = [(value, now) for value in values]
        if not values:
            return
        prefix = self._prefix()
        self._column.put(prefix, self._pickled(self._stored(prefix) + values))

    def update(self, values: Iterable[Any]) -> None:
        values = list(values)
        if not values:
            self.clear()
            return
        if self._ttl_ms is not None:
            now = self._clock()
            values = [(value, now) for value in values]
        self._column.put(self._prefix(), self._pickled(values))


class RocksDBMapState(_RocksDBState, MapViewsOfEntries, MapState):
    """One row per map entry: the key's prefix followed by the encoded map key."""

    kind = "map"

    def _rows(self, prefix: bytes) -> list[tuple[bytes, Any]]:
        """``(row key, stored value)`` of the current key's entries."""
        rows = []
        for row, raw in self._column.items(from_key=prefix):
            if not row.startswith(prefix):
                break
            rows.append((row, _loads(raw)))
        return rows

    def _lookup(self, map_key) -> tuple[bool, Any]:
        row = self._prefix() + encode_key(map_key)
        raw = self._column.get(row)
        if raw is None:
            return False, None
        stored = _loads(raw)
        if self._ttl_ms is None:
            return True, stored
        now = self._clock()
        if stored[1] + self._ttl_ms <= now:
            self._column.delete(row)
            return (True, stored[0]) if self._return_expired else (False, None)
        if self._refresh_on_read:
            self._column.put(row, _dumps((stored[0], now), _PROTOCOL))
        return True, stored[0]

    def _visible(self, reading: bool) -> list[tuple[Any, Any]]:
        prefix = self._prefix()
        rows = self._rows(prefix)
        start = len(prefix)
        if self._ttl_ms is None:
            return [(decode_key(row[start:]), value) for row, value in rows]
        now = self._clock()
        deadline = now - self._ttl_ms
        pairs = []
        column = self._column
        for row, (value, accessed) in rows:
            live = accessed > deadline
            if live or self._return_expired:
                pairs.append((decode_key(row[start:]), value))
            if not live:
                column.delete(row)
            elif reading and self._refresh_on_read:
                column.put(row, _dumps((value, now), _PROTOCOL))
        return pairs

    def get(self, key: Any) -> Any:
        return self._lookup(key)[1]

    def contains(self, key: Any) -> bool:
        return self._lookup(key)[0]

    def put(self, key: Any, value: Any) -> None:
        stored = value if self._ttl_ms is None else (value, self._clock())
        self._column.put(self._prefix() + encode_key(key), self._pickled(stored))

    def put_all(self, entries: dict) -> None:
        for key, value in dict(entries).items():
            self.put(key, value)

    def remove(self, key: Any) -> None:
        self._column.delete(self._prefix() + encode_key(key))

    def clear(self) -> None:
        prefix = self._prefix()
        self._column.delete_range(prefix, prefix_end(prefix))

