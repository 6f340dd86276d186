"""A RocksDB instance's files read out in the portable format: one pickled ``{state: {key: value}}`` per state and
key group, as the heap backend writes. Full snapshots write these rows (what savepoints hold), and a restore that
cannot adopt an incremental checkpoint's files whole (a rescale, or the heap backend) loads them.

>>> import os, pickle, shutil, tempfile
>>> from state_backends.rocksdb.db import MemorySettings, close_db, column_family, open_db
>>> from state_backends.rocksdb.keys import row_prefix
>>> from state_backends.rocksdb.layout import DATA_COLUMN, META_COLUMN, WHOLE, state_id
>>> path = os.path.join(tempfile.mkdtemp(), "db")
>>> db = open_db(path, MemorySettings())
>>> meta, data = column_family(db, META_COLUMN), column_family(db, DATA_COLUMN)
>>> meta.put(b"count", pickle.dumps((1, WHOLE, False)))
>>> for group, key, count in ((5, "x", 2), (9, "y", 1)):
...     data.put(state_id(1) + row_prefix(group, key), pickle.dumps(count))
>>> meta.close(); data.close(); close_db(db)
>>> [(group, pickle.loads(payload)) for group, payload in portable_rows(path, 0, 7)]   # key groups 0..7
[(5, {'count': {'x': 2}})]
>>> shutil.rmtree(os.path.dirname(path))
"""

from __future__ import annotations

import pickle
from typing import Callable, Iterator

from state_backends.heap.snapshot import TTL_FORMAT
from state_backends.pickling import pickle_state
from state_backends.rocksdb.db import open_read_only
from state_backends.rocksdb.keys import decode_key, group_bound, split_row
from state_backends.rocksdb.layout import DATA_COLUMN, ENTRIES, META_COLUMN, STATE_ID_BYTES, read_meta, state_id

__all__ = ["portable_rows"]


def portable_rows(path: str, first: int, last: int, ttl: dict[str, Callable] | None = None
                  ) -> Iterator[tuple[int, bytes]]:
    """The portable rows of the RocksDB files at ``path`` for key groups ``first``..``last``: one row per state and
    key group, ``(group, pickled {state: {key: value}})`` (a restore merges a group's rows), state after state.
    One pass over each state's rows: a seek per state, not per state and key group (hundreds of window states
    times 128 key groups took a second per checkpoint)."""
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
