"""``FileSink``: exactly-once files on any fsspec filesystem, by two-phase commit.

Layout under ``path``::

    _inprogress/part-<run>-<subtask>-<seq>-<n>.<ext>   being written, or pre-committed (invisible)
    part-<run>-<subtask>-<seq>-<n>.<ext>               committed (``part`` and ``.<ext>``: see part_prefix)
    _committed/part-...                                commit markers (object stores only)

A transaction is one subtask's output between two checkpoints, in one or more part files (rolled by size
and time). Commit renames each part into place: atomic on local disks. Object stores have no atomic
rename, so there a part counts as committed once its marker exists (write-then-marker); use
:meth:`FileSink.committed_files` to list what is committed. Readers such as Spark skip ``_``-prefixed
paths, so in-progress files are never read as output.

Restoring a checkpoint (even an older one) first commits what it had pending, then deletes every file of
this run written after it, committed or not: the replay writes them again, so output stays exactly-once.

>>> sink = FileSink("out/", format="jsonl")
>>> sink.name
'FileSink(out/)'
"""

from __future__ import annotations

import csv
import io
import json
import os
import posixpath
import re
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from operators.file_formats import WRITERS_BY_FORMAT, BulkWriter, BulkWriterFactory
from operators.two_phase_commit import RecoveredState, TransactionContext, TransactionStatus, TwoPhaseCommitSink
from runtime.errors import ApiUsageError, ConfigurationError, OutputCommitError, OutputUnreachableError
from runtime.filesystems import failing_fast, filesystem_for, is_object_store

__all__ = ["FileSink", "FileTransaction"]

INPROGRESS = "_inprogress"
MARKERS = "_committed"


def _part_pattern(prefix: str, suffix: str) -> re.Pattern:
    return re.compile(rf"^{re.escape(prefix)}-(?P<run>[0-9a-f]+)-(?P<subtask>\d+)-(?P<seq>\d+)-(?P<n>\d+)"
                      rf"{re.escape(suffix)}$")


@dataclass
class FileTransaction:
    """One subtask's files between two checkpoints (picklable: it is checkpointed).

    ``status`` is what this object went through; a copy restored from a checkpoint tells what it was when the
    checkpoint was written out (usually ``PRE_COMMITTED``, though it may have been committed since, or even
    while the snapshot was pickled), so :meth:`FileSink.commit` and :meth:`FileSink.abort` look at the files.
    """

    run_id: str
    subtask: int
    sequence: int
    parts: list[str] = field(default_factory=list)  # file names, relative to the sink's path
    status: TransactionStatus = TransactionStatus.OPEN

    def __setstate__(self, state: dict) -> None:
        # Transactions checkpointed by Chandy 0.1 carry no status: they were checkpointed pre-committed.
        state.setdefault("status", TransactionStatus.PRE_COMMITTED)
        self.__dict__.update(state)

    def _check(self, status: TransactionStatus) -> TransactionStatus:
        """``status``, if this transaction may move there (else ``TransactionStateError``)."""
        return self.status.advance(status, f"FileSink transaction {self.run_id}-{self.subtask}-{self.sequence}")


@dataclass
class _OpenPart:
    """The part file a transaction is writing (executor only: never pickled)."""

    stream: Any  # the open file
    writer: BulkWriter  # what encodes records into it
    opened_at: float  # time.monotonic()
    bytes_written: int = 0  # as the writer counts them (encoded, or estimated where it buffers)


class FileSink(TwoPhaseCommitSink):
    """Writes records to part files under ``path`` (any fsspec URL or local path), exactly once.

    ``format``: ``"jsonl"`` (one JSON value per line), ``"csv"`` (records are tuples/lists), ``"text"``
    (``str(record)`` per line), ``"parquet"`` (records are dicts; a part is written when it closes, so its
    rows are buffered in memory until the next checkpoint or roll), or a
    :class:`~operators.file_formats.BulkWriterFactory` (PyFlink's bulk writers: ``ParquetBulkWriters``,
    ``OrcBulkWriters``, ``AvroBulkWriters``, ... in ``runtime.datastream.formats``). Parts roll at
    ``max_part_bytes`` (of encoded data, as the writer counts it; for ``"parquet"``, the rows' JSON size as an
    estimate) and after ``rollover_interval_ms``. Parts are named
    ``<part_prefix>-<run>-<subtask>-<sequence>-<n><part_suffix>``; the suffix defaults to the format's extension
    (``.jsonl``, ``.csv``, ``.txt``, ``.parquet``, the factory's). ``storage_options``: fsspec's options for
    ``path``'s protocol (such as ``{"endpoint_url": ..., "key": ..., "secret": ...}`` for s3://), sent to the
    executors with the sink; without them the protocol's environment variables apply (see runtime/filesystems.py).

    >>> sink = FileSink("memory://file-sink-doc/out", format="jsonl"); sink.validate()
    >>> writer = sink.create_writer(subtask_index=0, parallelism=1); writer.open(None)
    >>> writer.write_batch([{"user": "a"}]); _ = writer.snapshot_state(checkpoint_id=1)
    >>> sink.read_committed()                 # pre-committed at the barrier: durable, not visible
    []
    >>> writer.notify_checkpoint_complete(1); sink.read_committed()
    [{'user': 'a'}]
    """

    def __init__(self, path: str, format: "str | BulkWriterFactory" = "jsonl", max_part_bytes: int = 128 << 20,
                 rollover_interval_ms: float | None = None, part_prefix: str = "part", part_suffix: str | None = None,
                 storage_options: dict | None = None):
        writers = format if isinstance(format, BulkWriterFactory) else WRITERS_BY_FORMAT.get(format)
        if writers is None:
            raise ConfigurationError(f"FileSink format must be one of {sorted(WRITERS_BY_FORMAT)} or a "
                                     f"BulkWriterFactory (such as ParquetBulkWriters.for_row_type(row_type)), got "
                                     f"{format!r}")
        self.writers = writers
        part_suffix = writers.extension if part_suffix is None else part_suffix
        if not part_prefix or part_prefix.startswith((".", "_")) or "/" in part_prefix + part_suffix:
            raise ConfigurationError(f"FileSink part_prefix={part_prefix!r}, part_suffix={part_suffix!r}: the prefix "
                                     "must be non-empty and not start with '.' or '_' (readers skip such files as "
                                     "hidden), and neither may contain '/'.")
        self.part_prefix = part_prefix
        self.part_suffix = part_suffix
        self._part = _part_pattern(part_prefix, part_suffix)
        self.url = path if "://" in path else "file://" + os.path.abspath(path)
        self.name = f"FileSink({path})"
        self.format = format
        self.max_part_bytes = max_part_bytes
        self.rollover_interval_ms = rollover_interval_ms
        self.storage_options = dict(storage_options or {})  # pickled to the executors with the sink
        self._fs = None
        self._open: dict[tuple[int, int], _OpenPart] = {}  # (subtask, sequence) -> its open part; executor only

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fs"] = None
        state["_open"] = {}
        return state

    def _connect(self) -> None:
        if self._fs is None:  # filesystems are made where they are used: they do not travel pickled
            self._fs, self._root = filesystem_for(self.url, "FileSink path", self.storage_options)

    @property
    def fs(self):
        self._connect()
        return self._fs

    @property
    def root(self) -> str:
        self._connect()
        return self._root

    def _path(self, *names: str) -> str:
        return posixpath.join(self.root, *names)

    def validate(self) -> None:
        """Driver, before launch: the output directory must be creatable and writable."""
        super().validate()
        probe = self._path(INPROGRESS, ".probe")
        fs = failing_fast(self.fs)  # seconds, not botocore's retry loop, before saying why
        try:
            if not is_object_store(fs):  # where makedirs would create a missing bucket instead
                fs.makedirs(self._path(INPROGRESS), exist_ok=True)
            with fs.open(probe, "wb") as f:
                f.write(b"ok")
            fs.rm(probe)
        except Exception as exc:  # unusable output: say so before the job runs for an hour
            raise OutputUnreachableError(self.url, exc) from exc

    # -- transactions ----------------------------------------------------------------------------------

    def begin_transaction(self, context: TransactionContext) -> FileTransaction:
        return FileTransaction(context.run_id, context.subtask, context.sequence)

    def _roll(self, transaction: FileTransaction) -> _OpenPart:
        self._close_part(transaction)
        name = (f"{self.part_prefix}-{transaction.run_id}-{transaction.subtask}-{transaction.sequence}-"
                f"{len(transaction.parts)}{self.part_suffix}")
        if not is_object_store(self.fs):
            self.fs.makedirs(self._path(INPROGRESS), exist_ok=True)
        stream = self.fs.open(self._path(INPROGRESS, name), "wb")
        try:
            writer = self.writers.create(stream)
        except BaseException:
            stream.close()
            raise
        transaction.parts.append(name)
        part = self._open[(transaction.subtask, transaction.sequence)] = _OpenPart(stream, writer, time.monotonic())
        return part

    def _close_part(self, transaction: FileTransaction) -> None:
        part = self._open.pop((transaction.subtask, transaction.sequence), None)
        if part is not None:
            try:
                part.writer.finish()
            finally:
                part.stream.close()

    def write(self, transaction: FileTransaction, records: list) -> None:
        transaction._check(TransactionStatus.OPEN)
        if not records:
            return
        part = self._open.get((transaction.subtask, transaction.sequence))
        if part is None or part.bytes_written >= self.max_part_bytes or (
                self.rollover_interval_ms is not None
                and (time.monotonic() - part.opened_at) * 1000 >= self.rollover_interval_ms):
            part = self._roll(transaction)
        part.bytes_written += part.writer.add_elements(records)

    def pre_commit(self, transaction: FileTransaction) -> None:
        status = transaction._check(TransactionStatus.PRE_COMMITTED)
        self._close_part(transaction)  # closing flushes: the parts are durable, still invisible
        transaction.status = status

    def commit(self, transaction: FileTransaction) -> None:
        status = transaction._check(TransactionStatus.COMMITTED)  # idempotence: decided by the files below
        local = isinstance(self.fs, LocalFileSystem)
        for name in transaction.parts:
            source, target = self._path(INPROGRESS, name), self._path(name)
            if self.fs.exists(source):
                self.fs.mv(source, target)
            elif not self.fs.exists(target):
                raise OutputCommitError(f"FileSink cannot commit {name}: neither {source} nor {target} exists "
                                        "(was the output directory changed while the job ran?)")
            if not local:
                with self.fs.open(self._path(MARKERS, name), "wb") as f:
                    f.write(b"")
        transaction.status = status

    def abort(self, transaction: FileTransaction) -> None:
        status = transaction._check(TransactionStatus.ABORTED)
        self._close_part(transaction)
        for name in transaction.parts:
            path = self._path(INPROGRESS, name)
            if self.fs.exists(path):
                self.fs.rm(path)
        transaction.status = status

    def recover(self, state: RecoveredState) -> None:
        for transaction in state.pending:
            self.commit(transaction)
        committed_names = {n for t in state.pending for n in t.parts}
        for directory in ("", INPROGRESS, MARKERS):
            for path in self._list(self._path(directory) if directory else self.root):
                match = self._part.match(posixpath.basename(path))
                if not match or match.group("run") != state.run_id:
                    continue
                name = posixpath.basename(path)
                subtask, sequence = int(match.group("subtask")), int(match.group("seq"))
                after_checkpoint = sequence >= state.next_sequence.get(subtask, 0)
                if directory == INPROGRESS or (after_checkpoint and name not in committed_names):
                    self.fs.rm(path)

    def _part_order(self, name: str) -> tuple:
        """Committed parts in the order they were written: by run, subtask, sequence and part number."""
        match = self._part.match(name)
        return match.group("run"), int(match.group("subtask")), int(match.group("seq")), int(match.group("n"))

    def _list(self, directory: str) -> list[str]:
        try:
            return [p for p in self.fs.ls(directory, detail=False) if not self.fs.isdir(p)]
        except FileNotFoundError:
            return []

    # -- reading the output ----------------------------------------------------------------------------

    def committed_files(self) -> list[str]:
        """Paths of the committed part files, sorted."""
        names = [posixpath.basename(p) for p in self._list(self.root) if self._part.match(posixpath.basename(p))]
        if not isinstance(self.fs, LocalFileSystem):
            marked = {posixpath.basename(p) for p in self._list(self._path(MARKERS))}
            names = [n for n in names if n in marked]
        return [self._path(n) for n in sorted(names, key=self._part_order)]

    def read_committed(self) -> list:
        """Every committed record (as rows for csv, dicts for parquet), for tests and small outputs.

        Only for the formats named by a string: read the output of a :class:`BulkWriterFactory` with a
        ``FileSource`` of the matching reader format (or with pyarrow, fastavro, ...) over :meth:`committed_files`.
        """
        if not isinstance(self.format, str):
            raise ApiUsageError(f"{self.name}.read_committed() reads the formats named by a string "
                                f"({sorted(WRITERS_BY_FORMAT)}); this sink writes with a {type(self.format).__name__}. "
                                "Read committed_files() with a FileSource of the matching reader format, or with "
                                "pyarrow or fastavro.")
        records = []
        for path in self.committed_files():
            with self.fs.open(path, "rb") as f:
                if self.format == "parquet":
                    records.extend(pq.read_table(f).to_pylist())
                elif self.format == "csv":
                    records.extend(csv.reader(io.StringIO(f.read().decode())))
                else:
                    for line in f.read().decode().splitlines():
                        records.append(json.loads(line) if self.format == "jsonl" else line)
        return records

