"""How keyed state lies in a subtask's RocksDB instance: the column families, state ids and layouts its files hold.

Every state's rows live in one column family, each state under a 4-byte state id: ``state id, key group, key``
(:mod:`state_backends.rocksdb.keys`), so a state's key-group range is a contiguous key range, and dropping a
state is one range tombstone. (Flink gives each state a column family of its own. Here a window's panes are a
state per window, and a job with hundreds of windows open made hundreds of column families: ~10 ms to create or
drop each, and a checkpoint flushing each into a file of its own, 355 files and 2 s per checkpoint in our windows
test, against one file here.) A small column family maps each state name to its id, its layout (``whole``: one
row per key; ``entries``: one row per map entry) and whether its rows carry TTL timestamps, so that the files of
a checkpoint describe themselves.

>>> import pickle
>>> state_id(3)
b'\\x00\\x00\\x00\\x03'
>>> read_meta({b"cart": pickle.dumps((3, ENTRIES, False))})
{'cart': (3, 'entries', False)}
"""

from __future__ import annotations

import pickle

__all__ = ["WHOLE", "ENTRIES", "META_COLUMN", "DATA_COLUMN", "STATE_ID_BYTES", "read_meta", "state_id"]

WHOLE = "whole"  # one row per key: the pickled value (list, accumulator, ...)
ENTRIES = "entries"  # one row per map entry
META_COLUMN = "chandy:meta"  # state name -> pickled (state id, layout, ttl)
DATA_COLUMN = "chandy:state"  # every state's rows, under their state ids
STATE_ID_BYTES = 4


def read_meta(meta) -> dict[str, tuple[int, str, bool]]:
    """``{state name: (state id, layout, ttl)}`` from an instance's meta column family."""
    return {raw.decode(): pickle.loads(value) for raw, value in meta.items()}


def state_id(number: int) -> bytes:
    return number.to_bytes(STATE_ID_BYTES, "big")
