"""Keyed state in embedded RocksDB (PyFlink's ``EmbeddedRocksDBStateBackend``): state larger than memory.

>>> from state_backends.rocksdb import EmbeddedRocksDBStateBackend
>>> backend = EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)
>>> backend.is_incremental_checkpoints_enabled()
True
"""

from __future__ import annotations

import os
import tempfile

from runtime.errors import ApiUsageError
from runtime.keys.key_groups import KeyGroupRange
from state_backends.base import StateBackend
from state_backends.rocksdb.backend import RocksDBKeyedStateBackend, default_directory
from state_backends.rocksdb.db import MemorySettings, RocksDBStateError

__all__ = ["EmbeddedRocksDBStateBackend", "RocksDBKeyedStateBackend", "MemorySettings", "RocksDBStateError",
           "local_root"]



def local_root(paths: tuple[str, ...] = ()) -> str:
    """Where a worker keeps its RocksDB instances: the first of ``paths``, else the worker's Spark local
    directory (``SPARK_LOCAL_DIRS``, the disks Spark spills to), else the system's temporary directory."""
    if paths:
        return paths[0]
    spark_dirs = os.environ.get("SPARK_LOCAL_DIRS")
    if spark_dirs:
        return os.path.join(spark_dirs.split(",")[0], "chandy-rocksdb")
    return os.path.join(tempfile.gettempdir(), "chandy-rocksdb")


class EmbeddedRocksDBStateBackend(StateBackend):
    """Keyed state in a RocksDB instance on each worker's local disk, one per keyed operator subtask: every access
    (de)serialises, and state is bounded by the disk, not by memory. The backend to use for large state.

    ``enable_incremental_checkpointing``: checkpoints upload only the RocksDB files that no earlier checkpoint
    uploaded (savepoints are always full and portable). ``db_storage_path``: the local directory (default: the
    worker's Spark local directory). ``block_cache_bytes`` and ``write_buffer_bytes`` cap what the instances of
    one worker process use together. ``local_recovery``: keep the last checkpoint's files on the worker's disk, so
    that a restart there restores from them instead of the checkpoint store (Flink's local recovery; on by
    default here, as it costs hard links only).

    >>> from runtime.keys.key_groups import key_group_range
    >>> backend = EmbeddedRocksDBStateBackend().create_keyed_state_backend("count", 128, key_group_range(128, 1, 0))
    >>> type(backend).__name__
    'RocksDBKeyedStateBackend'
    >>> backend.close()
    """

    def __init__(self, enable_incremental_checkpointing: bool | None = None, db_storage_path: str | None = None,
                 block_cache_bytes: int = MemorySettings.block_cache_bytes,
                 write_buffer_bytes: int = MemorySettings.write_buffer_bytes, local_recovery: bool = True):
        self.incremental = bool(enable_incremental_checkpointing)
        self.local_recovery = bool(local_recovery)
        self.db_storage_paths: tuple[str, ...] = (db_storage_path,) if db_storage_path else ()
        if block_cache_bytes <= 0 or write_buffer_bytes <= 0:
            raise ApiUsageError("EmbeddedRocksDBStateBackend: block_cache_bytes and write_buffer_bytes must be "
                                "positive byte counts.")
        column = min(MemorySettings.column_write_buffer_bytes, max(1 << 20, write_buffer_bytes // 4))
        self.memory = MemorySettings(block_cache_bytes, write_buffer_bytes, column)
        self.transfer_threads = 4

    # -- PyFlink's accessors ---------------------------------------------------------------------------------

    def is_incremental_checkpoints_enabled(self) -> bool:
        return self.incremental

    def set_db_storage_paths(self, *paths: str) -> None:
        """Local directories for the RocksDB files (PyFlink's name; the first is used)."""
        self.db_storage_paths = tuple(str(p) for p in paths if p)

    def get_db_storage_paths(self) -> list[str]:
        return list(self.db_storage_paths)

    def set_number_of_transfer_threads(self, number_of_transfering_threads: int) -> None:
        self.transfer_threads = max(1, int(number_of_transfering_threads))

    def get_number_of_transfer_threads(self) -> int:
        return self.transfer_threads

    def __repr__(self) -> str:
        return (f"EmbeddedRocksDBStateBackend(enable_incremental_checkpointing={self.incremental}"
                + (f", db_storage_path={self.db_storage_paths[0]!r}" if self.db_storage_paths else "")
                + ("" if self.local_recovery else ", local_recovery=False") + ")")

    def __eq__(self, other) -> bool:
        return (type(other) is type(self)
                and (self.incremental, self.db_storage_paths, self.memory, self.local_recovery)
                == (other.incremental, other.db_storage_paths, other.memory, other.local_recovery))

    __hash__ = None

    def create_keyed_state_backend(self, operator_uid: str, max_parallelism: int,
                                   key_groups: KeyGroupRange) -> RocksDBKeyedStateBackend:
        root = local_root(self.db_storage_paths)
        directory = default_directory(root, operator_uid, key_groups)
        return RocksDBKeyedStateBackend(max_parallelism, key_groups, directory, self.memory,
                                        operator_uid=operator_uid, incremental=self.incremental, local_root=root,
                                        local_recovery=self.local_recovery)
