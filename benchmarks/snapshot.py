"""The cost of a heap-state snapshot: the synchronous part (at the barrier, on the task thread) and the
asynchronous part (serialise + write the state file), for growing numbers of keys.

The synchronous part should not grow with the number of keys: it only records which key groups exist.
It is reported as the worst and the median of several snapshots of the same state (the worst includes
whatever else the machine did meanwhile: the process being descheduled, say).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time

from runtime.keys.key_groups import key_group_range
from state_backends import HeapKeyedStateBackend, ValueStateDescriptor
from state_backends.storage import CheckpointStorage

SYNC_SAMPLES = 5


def measure_snapshot(keys: int, value_bytes: int = 0, max_parallelism: int = 128) -> dict:
    """Snapshot ``keys`` keys, each holding an int (``value_bytes`` 0) or that many bytes."""
    backend = HeapKeyedStateBackend(max_parallelism, key_group_range(max_parallelism, 1, 0))
    count = backend.get_state(ValueStateDescriptor("count"))
    for key in range(keys):
        backend.set_current_key(key)
        count.update(key.to_bytes(8, "little") * (value_bytes // 8) if value_bytes else key)
    directory = tempfile.mkdtemp(prefix="chandy-snapshot-")
    try:
        storage = CheckpointStorage(f"file://{directory}", "bench")
        sync_times = []
        for _ in range(SYNC_SAMPLES):  # the worst of several: a barrier may meet any of them
            started = time.perf_counter()
            snapshot = backend.snapshot()
            sync_times.append((time.perf_counter() - started) * 1000)
            if len(sync_times) < SYNC_SAMPLES:
                backend.release(snapshot)
        sync_ms, median_ms = max(sync_times), statistics.median(sync_times)
        started = time.perf_counter()
        info = storage.write_state_file(1, "count", 0, snapshot.serialized())
        async_ms = (time.perf_counter() - started) * 1000
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return {"keys": keys, "value_bytes": value_bytes, "sync_ms": round(sync_ms, 3),
            "sync_median_ms": round(median_ms, 3), "async_ms": round(async_ms, 1), "bytes": info.size}
