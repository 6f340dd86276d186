"""State larger than the memory RocksDB may use: a 1 MB block cache and 1 MB of memtables under 30 MB of state,
and every value reads back exactly, and after a checkpoint restored. (More keys than the backend's write-back
cache holds, so reads of value state go to RocksDB too.)"""

from __future__ import annotations

import pathlib
import random

from runtime.keys.key_groups import key_group_range
from state_backends import MapStateDescriptor, ValueStateDescriptor
from state_backends.heap import HeapKeyedStateBackend
from state_backends.rocksdb import EmbeddedRocksDBStateBackend

MAX_P = 128
KEYS = 40_000
VALUE_BYTES = 500
CAP = 1 << 20


def payload(key: int, round_: int) -> bytes:
    return random.Random(key * 7 + round_).randbytes(VALUE_BYTES)  # does not compress: stored bytes are state


def test_more_state_than_the_block_cache_reads_back_exactly(tmp_path):
    state_backend = EmbeddedRocksDBStateBackend(db_storage_path=str(tmp_path), block_cache_bytes=CAP,
                                                write_buffer_bytes=CAP)
    backend = state_backend.create_keyed_state_backend("big", MAX_P, key_group_range(MAX_P, 1, 0))
    try:
        value = backend.get_state(ValueStateDescriptor("value"))
        pieces = backend.get_state(MapStateDescriptor("pieces"))
        for key in range(KEYS):
            backend.set_current_key(key)
            value.update(payload(key, 0))
            pieces.put(key % 3, payload(key, 1))
        for key in range(0, KEYS, 2):  # rewrite half: older versions wait for compaction on disk
            backend.set_current_key(key)
            value.update(payload(key, 2))
        stored = sum(path.stat().st_size for path in pathlib.Path(backend.directory).glob("*.sst"))
        capacity = backend.db.property_int_value("rocksdb.block-cache-capacity")
        assert capacity == 2 * CAP, "one cache for blocks and memtables, of the configured size"
        assert stored > 10 * capacity, f"the state ({stored:,} bytes on disk) is far larger than the cache"

        def expected(key):
            return payload(key, 2 if key % 2 == 0 else 0)

        order = list(range(KEYS))
        random.Random(1).shuffle(order)  # random reads: most miss the cache and go to disk
        for key in order:
            backend.set_current_key(key)
            assert value.value() == expected(key)
            assert dict(pieces.items()) == {key % 3: payload(key, 1)}

        snapshot = backend.snapshot()
        restored = HeapKeyedStateBackend(MAX_P, key_group_range(MAX_P, 1, 0))
        for group, rows in snapshot.serialized():
            restored.restore_key_group(group, rows)
        assert {key: got for _, key, got in restored.entries("value")} == {key: expected(key) for key in range(KEYS)}
    finally:
        backend.close()
