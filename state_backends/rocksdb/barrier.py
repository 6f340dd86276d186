"""Cutting a RocksDB checkpoint off the task thread: the synchronous part of a checkpoint in constant time.

A RocksDB checkpoint flushes the memtables first (tens to hundreds of milliseconds, and ``rocksdict`` holds the GIL
all along, so the task stops). At the barrier this module only switches the memtables (``flush(wait=False)``:
RocksDB writes them out on its own threads, without the GIL), takes a RocksDB snapshot, and from then on records
which rows the task writes. The asynchronous part waits for the flush, takes the RocksDB checkpoint (little left
to flush), and then puts back, in the checkpoint's copy, every row written after the barrier: its value at the
barrier (read at the snapshot) or its absence. The checkpoint then holds exactly the state at the barrier, and
what reads it (uploads, restores, local recovery, portable rows) never knows.

Rows are recorded on the write path of the task thread only while a cut is open: the backend routes every write
through a :class:`RecordingFamily` until the cut is taken, then back to the column families themselves.
Recording a row always happens before writing it, and the set is read only after the checkpoint exists: a row
the checkpoint holds a later value of is always in the set (a row recorded but written after the checkpoint
gets its barrier value back, which is the value it had in the checkpoint anyway).

>>> import os, tempfile
>>> from state_backends.rocksdb.db import MemorySettings, close_db, column_family, open_db, open_read_only
>>> path = tempfile.mkdtemp()
>>> db = open_db(os.path.join(path, "db"), MemorySettings()); rows = column_family(db, "rows")
>>> rows.put(b"a", b"1"); rows.put(b"b", b"1")
>>> cut = BarrierCut(db, {"rows": rows}, None, os.path.join(path, "checkpoint"))
>>> writes = cut.recorder("rows")
>>> writes.put(b"a", b"2"); writes.delete(b"b"); writes.put(b"c", b"2")   # after the barrier
>>> cut.complete()
>>> checkpoint = open_read_only(cut.path); taken = checkpoint.get_column_family("rows")
>>> sorted(taken.items())
[(b'a', b'1'), (b'b', b'1')]
>>> taken.close(); checkpoint.close(); rows.close(); close_db(db, os.path.join(path, "db"))
"""

from __future__ import annotations

import enum
import os
import shutil
import threading
import time
from typing import Any, Callable, Iterable

import rocksdict

from state_backends.rocksdb.db import RocksDBStateError, describe_failure, flush_would_stall, list_column_families

__all__ = ["BarrierCut", "RecordingFamily", "CutState"]

# A cut flushes again while the memtable written since the barrier is bigger than this: what is left when the
# checkpoint is taken is flushed holding the GIL.
_SMALL_MEMTABLE_BYTES = 2 << 20
_FLUSH_ROUNDS = 3
_FLUSH_WAIT_S = 120.0  # past it the checkpoint flushes what is left itself: slower, still exact


class CutState(enum.Enum):
    OPEN = "open"  # recording the rows written since the barrier
    CUT = "cut"  # the checkpoint directory holds the state at the barrier
    FAILED = "failed"  # taking the checkpoint failed: the checkpoint is declined
    DISCARDED = "discarded"  # the checkpoint was abandoned before it was taken


class RecordingFamily:
    """A column family that records the rows written to it while its cut is open (``rows`` is then a set; None
    once the cut is taken). Reads go straight to the column family."""

    def __init__(self, family, rows: set):
        self.family = family
        self.rows: set | None = rows
        self.get = family.get
        self.items = family.items
        self.keys = family.keys
        self.values = family.values
        self.iter = family.iter

    def put(self, row: bytes, value: bytes) -> None:
        rows = self.rows
        if rows is not None:
            rows.add(row)
        self.family.put(row, value)

    def delete(self, row: bytes) -> None:
        rows = self.rows
        if rows is not None:
            rows.add(row)
        self.family.delete(row)

    def delete_range(self, start: bytes, end: bytes) -> None:
        rows = self.rows
        if rows is not None:
            for row in self.family.keys(from_key=start):
                if row >= end:
                    break
                rows.add(row)
        self.family.delete_range(start, end)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.family, name)


class BarrierCut:
    """The checkpoint of one RocksDB instance at a barrier, taken later by :meth:`complete`.

    ``families``: name -> column family, every column family the state writes; ``path``: where the checkpoint
    goes; ``pending``: called when the cut is taken, the rows newer at the barrier than RocksDB (the backend's
    write-back cache), as family -> row -> value (None: deleted)."""

    def __init__(self, db, families: dict[str, Any], pending: Callable[[], dict] | None, path: str):
        self.path = path
        self.state = CutState.OPEN
        # SST files the cut wrote into the checkpoint itself (the barrier values): numbered as the instance will
        # number files of its own later, so they are stored with this checkpoint only, never shared by name.
        self.own_files: frozenset[str] = frozenset()
        self._db = db
        self._families = families
        self._pending = pending
        self._lock = threading.Lock()
        self._failure: BaseException | None = None  # why the checkpoint could not be taken
        self._snapshots = {name: family.snapshot() for name, family in families.items()}
        self._recorders = {name: RecordingFamily(family, set()) for name, family in families.items()}
        for family in families.values():
            if not flush_would_stall(family):  # else RocksDB is busy writing out earlier ones: the cut flushes
                family.flush(wait=False)  # switches the memtable; RocksDB writes it out without the GIL

    def recorder(self, name: str) -> RecordingFamily:
        return self._recorders[name]

    def record(self, name: str, rows: Iterable[bytes]) -> None:
        """Rows about to be written to ``name`` by a write batch."""
        recorded = self._recorders[name].rows
        if recorded is not None:
            recorded.update(rows)

    @property
    def done(self) -> bool:
        return self.state is not CutState.OPEN

    def complete(self) -> None:
        """Take the checkpoint (idempotent; any thread). Raises :class:`RocksDBStateError` if it cannot be."""
        with self._lock:
            if self.state is CutState.CUT:
                return
            if self.state is CutState.FAILED:
                raise RocksDBStateError(f"the RocksDB checkpoint at {self.path} could not be taken: "
                                        f"{self._failure}") from self._failure
            if self.state is not CutState.OPEN:
                raise RocksDBStateError(f"the RocksDB checkpoint at {self.path} was {self.state.value}")
            try:
                self._wait_for_flushes()
                rocksdict.Checkpoint(self._db).create_checkpoint(self.path)
                changed = self._stop_recording()
                values = {name: {row: _read_at(self._snapshots[name], row) for row in rows}
                          for name, rows in changed.items()}
                for name, rows in (self._pending() if self._pending else {}).items():
                    values.setdefault(name, {}).update(rows)
                if any(values.values()):
                    self.own_files = _write_rows(self.path, values)
            except Exception as exc:
                self.state = CutState.FAILED
                self._failure = exc if isinstance(exc, RocksDBStateError) else RocksDBStateError(
                    describe_failure(self.path, exc))
                shutil.rmtree(self.path, ignore_errors=True)  # a half-taken checkpoint
                if self._failure is exc:
                    raise
                raise self._failure from exc
            finally:
                self._stop_recording()
                self._snapshots.clear()  # a RocksDB snapshot keeps the instance open: let them go now
            self.state = CutState.CUT

    def discard(self) -> None:
        """Abandon the checkpoint if it was not taken yet (any thread)."""
        with self._lock:
            if self.state is CutState.OPEN:
                self._stop_recording()
                self._snapshots.clear()
                self.state = CutState.DISCARDED

    def _wait_for_flushes(self) -> None:
        """Leave the checkpoint little to flush: wait while RocksDB writes out the memtables switched at the
        barrier, then switch what was written since while it is big, up to a few rounds."""
        families = list(self._families.values())
        deadline = time.monotonic() + _FLUSH_WAIT_S
        for round_ in range(_FLUSH_ROUNDS):
            # RocksDB offers Python no callback: poll, sleeping without the GIL while its threads write.
            while any(f.property_int_value("rocksdb.num-immutable-mem-table") for f in families):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.002)
            big = [f for f in families
                   if (f.property_int_value("rocksdb.cur-size-active-mem-table") or 0) >= _SMALL_MEMTABLE_BYTES]
            if not big or round_ == _FLUSH_ROUNDS - 1:
                return
            for family in big:
                while flush_would_stall(family):  # compactions behind: switching now would wait holding the GIL
                    if time.monotonic() > deadline:
                        return
                    time.sleep(0.002)
                family.flush(wait=False)

    def _stop_recording(self) -> dict[str, set]:
        """What each family's recorder holds, copied after it stopped (rows recorded later were written after
        the checkpoint was taken)."""
        changed = {}
        for name, recorder in self._recorders.items():
            rows, recorder.rows = recorder.rows, None
            changed[name] = set(rows or ())
        return changed


def _read_at(snapshot, row: bytes) -> bytes | None:
    try:
        return snapshot[row]
    except KeyError:
        return None
    except Exception as exc:  # rocksdict's snapshots say "key not found" with a plain Exception
        if "not found" in str(exc):
            return None
        raise


def _write_rows(path: str, values: dict[str, dict[bytes, bytes | None]]) -> frozenset[str]:
    """Write ``values`` (family -> row -> value, None: delete) into the RocksDB checkpoint at ``path``; returns
    the names of the SST files that made."""
    before = set(os.listdir(path))
    opts = rocksdict.Options(raw_mode=True)
    opts.set_disable_auto_compactions(True)  # its files stay the live instance's: nothing new to upload
    opts.set_max_open_files(64)
    opts.set_skip_stats_update_on_db_open(True)
    names = list_column_families(path)
    db = rocksdict.Rdict(path, opts, column_families={name: rocksdict.Options(raw_mode=True) for name in names})
    families = []
    try:
        writes = rocksdict.WriteOptions()
        writes.disable_wal = True
        db.set_write_options(writes)
        for name, rows in values.items():
            if not rows:
                continue
            family = db.get_column_family(name)
            families.append(family)
            batch = rocksdict.WriteBatch(raw_mode=True)
            batch.set_default_column_family(db.get_column_family_handle(name))
            for row, value in rows.items():
                if value is None:
                    batch.delete(row)
                else:
                    batch.put(row, value)
            db.write(batch)
            family.flush(wait=True)
    finally:
        for family in families:
            family.close()
        db.close()
    return frozenset(name for name in os.listdir(path) if name.endswith(".sst") and name not in before)
