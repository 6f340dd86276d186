"""Opening RocksDB instances (through ``rocksdict``) the way keyed state needs them, and naming what fails.

Every instance of a worker process shares one block cache and one write-buffer budget
(:class:`MemorySettings`), as Flink's managed memory does for the RocksDB instances of a task manager: a
worker running four keyed operators does not use four times the memory. Writes skip RocksDB's write-ahead log:
a subtask's local database is thrown away on a failure and rebuilt from a checkpoint, which is durable.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "db")
>>> db = open_db(path, MemorySettings())
>>> column = column_family(db, "count")
>>> column.put(b"k", b"v"); column.get(b"k")
b'v'
>>> close_db(db)
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
from dataclasses import dataclass

import rocksdict

from runtime.errors import ChandyError

__all__ = ["MemorySettings", "open_db", "open_read_only", "column_family", "close_db", "RocksDBStateError",
           "describe_failure", "flush_would_stall"]

_DEFAULT_CF = "default"


class RocksDBStateError(ChandyError):
    """The local RocksDB directory cannot be used (a full or read-only disk, a missing directory): retried
    once by a restart (the next executor may have room), since a full disk is often passing."""


@dataclass(frozen=True)
class MemorySettings:
    """What a worker process's RocksDB instances may use together: the block cache (reads), and the memtables
    (``write_buffer_bytes`` across every instance; each column family flushes at ``column_write_buffer_bytes``)."""

    block_cache_bytes: int = 64 << 20
    write_buffer_bytes: int = 64 << 20
    column_write_buffer_bytes: int = 16 << 20


MAX_WRITE_BUFFERS = 3  # per column family: the active memtable and two being flushed
L0_SLOWDOWN_FILES = 20  # RocksDB's default, set so that flush_would_stall knows it

_shared: dict[MemorySettings, tuple] = {}
_shared_lock = threading.Lock()


def _shared_memory(settings: MemorySettings) -> tuple:
    with _shared_lock:
        found = _shared.get(settings)
        if found is None:
            # Memtables are charged to the cache: one limit holds both (Flink's managed memory for RocksDB).
            cache = rocksdict.Cache(settings.block_cache_bytes + settings.write_buffer_bytes)
            manager = rocksdict.WriteBufferManager.new_write_buffer_manager_with_cache(
                settings.write_buffer_bytes, False, cache)
            found = _shared[settings] = (cache, manager)
        return found


def options(settings: MemorySettings) -> rocksdict.Options:
    """Options for an instance and each of its column families."""
    cache, manager = _shared_memory(settings)
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    opts.set_write_buffer_size(settings.column_write_buffer_bytes)
    opts.set_max_write_buffer_number(MAX_WRITE_BUFFERS)
    opts.set_level_zero_slowdown_writes_trigger(L0_SLOWDOWN_FILES)
    opts.set_write_buffer_manager(manager)
    opts.set_max_background_jobs(2)
    opts.set_compression_type(rocksdict.DBCompressionType.lz4())
    opts.set_keep_log_file_num(2)
    opts.set_max_log_file_size(4 << 20)
    table = rocksdict.BlockBasedOptions()
    table.set_block_cache(cache)
    opts.set_block_based_table_factory(table)
    return opts


def flush_would_stall(family) -> bool:
    """Whether switching ``family``'s memtable now would make RocksDB stall writes: a flush then first waits for
    the flushes and compactions before it, holding the GIL (``rocksdict`` does not release it), so the task
    would stop for as long."""
    immutable = family.property_int_value("rocksdb.num-immutable-mem-table") or 0
    level0 = family.property_int_value("rocksdb.num-files-at-level0") or 0
    return immutable + 1 >= MAX_WRITE_BUFFERS or level0 + 1 >= L0_SLOWDOWN_FILES


def describe_failure(path: str, exc: BaseException) -> str:
    """What went wrong with the RocksDB directory ``path``, and what to do about it."""
    text = str(exc)
    lowered = text.lower()
    if "no space" in lowered or getattr(exc, "errno", None) == errno.ENOSPC:
        fix = "free space on that disk, or point the state backend at a bigger one"
    elif "read-only" in lowered or "permission" in lowered or getattr(exc, "errno", None) in (errno.EROFS,
                                                                                              errno.EACCES):
        fix = "make that directory writable, or point the state backend at a writable one"
    else:
        fix = "check the disk, or point the state backend at another directory"
    return (f"RocksDB state directory {path} cannot be used ({type(exc).__name__}: {text}): {fix} "
            "(EmbeddedRocksDBStateBackend(db_storage_path=...) or the Spark conf spark.chandy.rocksdb.localDir).")


def open_db(path: str, settings: MemorySettings, column_families: list[str] = ()) -> rocksdict.Rdict:
    """A read-write instance at ``path`` (created if absent), with ``column_families`` opened."""
    try:
        os.makedirs(path, exist_ok=True)
        opts = options(settings)
        families = {name: options(settings) for name in column_families if name != _DEFAULT_CF}
        db = rocksdict.Rdict(path, opts, column_families=families or None)
        writes = rocksdict.WriteOptions()
        writes.disable_wal = True
        db.set_write_options(writes)
        return db
    except Exception as exc:
        raise RocksDBStateError(describe_failure(path, exc)) from exc


def open_read_only(path: str) -> rocksdict.Rdict:
    """A checkpoint's files opened to read (every column family, as written)."""
    families = rocksdict.Rdict.list_cf(path, rocksdict.Options(raw_mode=True))
    plain = rocksdict.Options(raw_mode=True)
    return rocksdict.Rdict(path, plain, column_families={n: rocksdict.Options(raw_mode=True)
                                                         for n in families if n != _DEFAULT_CF} or None,
                           access_type=rocksdict.AccessType.read_only())


def list_column_families(path: str) -> list[str]:
    return [n for n in rocksdict.Rdict.list_cf(path, rocksdict.Options(raw_mode=True)) if n != _DEFAULT_CF]


def column_family(db: rocksdict.Rdict, name: str, settings: MemorySettings | None = None) -> rocksdict.Rdict:
    """The column family ``name`` of ``db``, created if absent."""
    try:
        return db.get_column_family(name)
    except Exception:  # absent: rocksdict says so with a plain exception
        return db.create_column_family(name, options(settings or MemorySettings()))


def close_db(db: rocksdict.Rdict, path: str | None = None) -> None:
    """Close ``db``; with ``path``, delete its directory too."""
    try:
        db.close()
    finally:
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)
