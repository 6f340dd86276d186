"""One writer subtask's Parquet files in a table's directory, and what a commit needs to know of them.

Files are named uniquely (a random id per file) and written straight to their final place: nothing in a Delta or
Iceberg table is visible until its log or metadata references it, so no rename is needed, which object stores do
not have. Partition columns are not stored in the files (the Delta protocol keeps them in the path and the log);
rows go to one open file per partition value, rolled at ``target_file_size``.

>>> import pyarrow as pa, tempfile
>>> root = tempfile.mkdtemp()
>>> writer = ParquetFileWriter(root, pa.schema([("day", pa.string()), ("n", pa.int64())]), partition_by=("day",))
>>> writer.write([pa.record_batch({"day": ["mon", "tue", "mon"], "n": [1, 2, 3]})])
>>> files = sorted(writer.prepare_commit(), key=lambda f: f.partition_values)
>>> [(f.partition_values, f.num_records, f.path.split("/")[0]) for f in files]
[((('day', 'mon'),), 2, 'day=mon'), ((('day', 'tue'),), 1, 'day=tue')]
>>> files[0].stats
'{"numRecords": 2, "minValues": {"n": 1}, "maxValues": {"n": 3}, "nullCount": {"n": 0}}'
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import posixpath
import time
import uuid
from typing import NamedTuple
from urllib.parse import quote

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from operators.committing.sink import FileWriter

__all__ = ["ParquetFile", "ParquetFileWriter", "small_files_note"]

SMALL_FILE_BYTES = 8 << 20

log = logging.getLogger(__name__)

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # the Delta protocol's directory name for a null partition value


class ParquetFile(NamedTuple):
    """A written, closed file: everything the commit's ``add`` action records about it."""

    path: str  # relative to the table's root, partition directories URL-encoded as Delta names them
    size: int
    partition_values: tuple[tuple[str, str | None], ...]
    num_records: int
    stats: str  # the ``stats`` JSON of the add action
    modification_time: int  # epoch ms


def _stat_value(value):
    """A min/max value as the Delta log's stats JSON holds it, or None for types whose stats are left out."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None  # NaN has no order; JSON has no infinities
    if isinstance(value, str):
        return value if len(value) <= 32 else None  # a truncated max would be wrong; Delta readers then read the file
    if isinstance(value, datetime.datetime):
        return None  # the protocol's timestamp stats depend on the column's zone: left out, the file is read
    if isinstance(value, datetime.date):
        return value.isoformat()
    return None


class _Stats:
    """Running record count, min, max and null count of one file's columns."""

    def __init__(self, names):
        self.records = 0
        self.minimum: dict = {}
        self.maximum: dict = {}
        self.nulls = {name: 0 for name in names}

    def add(self, batch: pa.RecordBatch) -> None:
        self.records += batch.num_rows
        for name, column in zip(batch.schema.names, batch.columns):
            self.nulls[name] += column.null_count
            if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
                    or pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
                    or pa.types.is_date32(column.type)):
                continue
            extremes = pc.min_max(column)
            low, high = extremes["min"].as_py(), extremes["max"].as_py()
            if low is None:
                continue
            self.minimum[name] = low if name not in self.minimum else min(self.minimum[name], low)
            self.maximum[name] = high if name not in self.maximum else max(self.maximum[name], high)

    def to_json(self) -> str:
        minimum = {k: v for k, v in ((k, _stat_value(v)) for k, v in self.minimum.items()) if v is not None}
        maximum = {k: v for k, v in ((k, _stat_value(v)) for k, v in self.maximum.items()) if v is not None}
        return json.dumps({"numRecords": self.records, "minValues": minimum, "maxValues": maximum,
                           "nullCount": self.nulls})


class _OpenFile:
    def __init__(self, fs, root: str, relative: str, schema: pa.Schema, compression: str):
        self.fs = fs
        self.relative = relative
        self.absolute = posixpath.join(root, relative)
        fs.makedirs(posixpath.dirname(self.absolute), exist_ok=True)
        self.handle = fs.open(self.absolute, "wb")
        self.writer = pq.ParquetWriter(self.handle, schema, compression=compression)
        self.stats = _Stats(schema.names)
        self.bytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)
        self.stats.add(batch)
        self.bytes += batch.nbytes

    def close(self) -> int:
        self.writer.close()
        self.handle.close()
        return int(self.fs.size(self.absolute))

    def discard(self) -> None:
        try:
            self.writer.close()
            self.handle.close()
        finally:
            self.fs.rm(self.absolute)


def partition_directory(values: tuple[tuple[str, str | None], ...]) -> str:
    """``col=value/...`` for a partition, URL-encoded as Delta tables name their directories.

    >>> partition_directory((("day", "2026-11-27"), ("kind", None)))
    'day=2026-11-27/kind=__HIVE_DEFAULT_PARTITION__'
    """
    return "/".join(f"{quote(name, safe='')}={quote(NULL_PARTITION if value is None else value, safe='')}"
                    for name, value in values)


def _partition_text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    return str(value)


class ParquetFileWriter(FileWriter):
    """Writes batches of ``schema`` (the table's columns, partition columns included) under ``root``."""

    def __init__(self, root: str, schema: pa.Schema, partition_by: tuple[str, ...] = (), filesystem=None,
                 target_file_size: int = 128 << 20, compression: str = "zstd", subtask: int = 0,
                 storage_options: dict | None = None):
        self.fs, self.root = (filesystem, root) if filesystem is not None else fsspec.core.url_to_fs(
            root, **(storage_options or {}))
        self.root = self.root.rstrip("/")
        self.schema = schema
        self.partition_by = tuple(partition_by)
        self.data_schema = pa.schema([f for f in schema if f.name not in self.partition_by])
        self.target_file_size = target_file_size
        self.compression = compression
        self.subtask = subtask
        self.open_files: dict[tuple, _OpenFile] = {}
        self.closed: list[ParquetFile] = []

    def write(self, records: list) -> None:
        for batch in records:
            if batch.num_rows == 0:
                continue
            if not batch.schema.equals(self.schema):
                batch = batch.select(self.schema.names).cast(self.schema)
            if not self.partition_by:
                self._append((), batch)
                continue
            for values, rows in self._split(batch):
                self._append(values, rows)

    def _split(self, batch: pa.RecordBatch):
        table = pa.Table.from_batches([batch])
        keys = table.select(list(self.partition_by)).group_by(list(self.partition_by)).aggregate([])
        for key in keys.to_pylist():
            mask = None
            for name in self.partition_by:
                value = key[name]
                test = pc.is_null(table[name]) if value is None else pc.equal(table[name], value)
                mask = test if mask is None else pc.and_(mask, test)
            rows = table.filter(mask).select(self.data_schema.names).combine_chunks().to_batches()
            yield tuple((name, _partition_text(key[name])) for name in self.partition_by), rows[0]

    def _append(self, values: tuple, batch: pa.RecordBatch) -> None:
        target = self.open_files.get(values)
        if target is None:
            name = f"part-{self.subtask:05d}-{uuid.uuid4()}.{self.compression}.parquet"
            relative = posixpath.join(partition_directory(values), name) if values else name
            target = self.open_files[values] = _OpenFile(self.fs, self.root, relative, self.data_schema,
                                                         self.compression)
        target.write(batch)
        if target.bytes >= self.target_file_size:
            self._close(values)

    def _close(self, values: tuple) -> None:
        target = self.open_files.pop(values)
        size = target.close()
        self.closed.append(ParquetFile(target.relative, size, values, target.stats.records, target.stats.to_json(),
                                    int(time.time() * 1000)))

    def prepare_commit(self) -> tuple:
        for values in list(self.open_files):
            self._close(values)
        closed, self.closed = tuple(self.closed), []
        return closed

    def abort(self) -> None:
        for target in self.open_files.values():
            try:
                target.discard()
            except Exception:  # the log never references it: litter for VACUUM, not wrong data
                log.debug("could not delete %s", target.absolute, exc_info=True)
        self.open_files.clear()


def small_files_note(files, compaction: str) -> str:
    """The end of a commit's log line: how many of its files are small, and how the user compacts them.

    >>> small_files_note([ParquetFile("a", 100, (), 1, "{}", 0)], "OPTIMIZE")
    '; 1 files under 8 MB: compact the table now and then (OPTIMIZE)'
    """
    small = sum(1 for f in files if f.size < SMALL_FILE_BYTES)
    return f"; {small} files under {SMALL_FILE_BYTES >> 20} MB: compact the table now and then ({compaction})" \
        if small else ""
