"""Parquet part files, and reading Parquet files record by record, on ``pyarrow.parquet``.

:class:`ParquetWriterFactory` writes the records of a part through a converter to Arrow batches of a declared
schema (a row group every 64 MiB of buffered data), or, with no converter, writes dicts with the schema Arrow
infers from all the rows of the part (``FileSink(path, format="parquet")``).

:class:`ParquetRecordFormat` reads a file's rows in batches; its position is the row number, and a resume skips
whole row groups by the file's metadata. What records it makes (dicts of every column, Rows of some columns) is
its :class:`RecordShape`'s choice.

>>> import io
>>> from operators.file_formats.arrow_rows import RowConverter
>>> schema = pa.schema([("n", pa.int64()), ("word", pa.string())])
>>> out = io.BytesIO(); writer = ParquetWriterFactory(RowConverter(schema, "doc")).create(out)
>>> _ = writer.add_elements([(1, "a"), (2, "b"), (3, "c")]); writer.finish()
>>> reader = ParquetRecordFormat(RowShape(schema)).open(io.BytesIO(out.getvalue()), 1, "doc.parquet")
>>> reader.read(10), reader.position, reader.read(10)
([Row(n=2, word='b'), Row(n=3, word='c')], 3, None)
"""

from __future__ import annotations

import datetime
import json
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from operators.file_formats.arrow_rows import python_values
from operators.file_formats.base import BatchedRecordReader, BulkWriter, BulkWriterFactory, FileRecordFormat
from runtime.errors import MalformedRecordError
from runtime.types import Row

__all__ = ["ParquetWriterFactory", "ParquetRecordFormat", "RecordShape", "DictShape", "RowShape"]

ROW_GROUP_BYTES = 64 << 20  # buffered Arrow data written as one row group: bounds a part writer's memory


class ParquetWriterFactory(BulkWriterFactory):
    """Writes Parquet part files. ``converter`` turns records into Arrow batches of its ``schema`` (a
    :class:`~operators.file_formats.arrow_rows.RowConverter`, or any object with ``schema`` and
    ``to_batch(records)``); without one, records are dicts and each part infers its schema from all its rows.
    ``options`` are ``pyarrow.parquet.ParquetWriter``'s keyword arguments (``compression``, ...).

    >>> ParquetWriterFactory().extension
    '.parquet'
    """

    extension = ".parquet"

    def __init__(self, converter=None, options: dict | None = None):
        self.converter = converter
        self.options = dict(options or {})

    def create(self, stream) -> BulkWriter:
        if self.converter is None:
            return _InferringParquetWriter(stream, self.options)
        return _ParquetWriter(stream, self.converter, self.options)

    def __repr__(self) -> str:
        schema = "inferred" if self.converter is None else self.converter.schema.names
        return f"ParquetWriterFactory({schema})"


class _ParquetWriter(BulkWriter):
    def __init__(self, stream, converter, options: dict):
        self.converter = converter
        self.writer = pq.ParquetWriter(stream, converter.schema, **options)
        self.batches: list[pa.RecordBatch] = []
        self.buffered = 0

    def add_elements(self, records: list) -> int:
        batch = self.converter.to_batch(records)
        self.batches.append(batch)
        self.buffered += batch.nbytes
        if self.buffered >= ROW_GROUP_BYTES:
            self._write_row_group()
        return batch.nbytes

    def _write_row_group(self) -> None:
        if self.batches:
            self.writer.write_table(pa.Table.from_batches(self.batches, self.converter.schema))
        self.batches, self.buffered = [], 0

    def finish(self) -> None:
        self._write_row_group()
        self.writer.close()


class _InferringParquetWriter(BulkWriter):
    """Dicts, with the schema Arrow infers from all the rows of the part: they are buffered until it closes."""

    def __init__(self, stream, options: dict):
        self.stream, self.options, self.rows = stream, options, []

    def add_elements(self, records: list) -> int:
        self.rows.extend(records)
        sample = records[:16]  # the size of the rows' JSON, estimated from a few: rolling by size needs no more
        return sum(len(json.dumps(r, default=str)) for r in sample) * len(records) // len(sample) if sample else 0

    def finish(self) -> None:
        pq.write_table(pa.Table.from_pylist(self.rows), self.stream, **self.options)
        self.rows = []


# -- reading -------------------------------------------------------------------------------------------------


class RecordShape:
    """What records a Parquet reader makes of a file: which columns it reads, and how a batch of them becomes
    records."""

    def plan(self, file: pq.ParquetFile, path: str) -> tuple[list[str] | None, Callable[[pa.RecordBatch], list]]:
        raise NotImplementedError


class DictShape(RecordShape):
    """Every column; each row a dict by column name (``FileSource(path, format="parquet")``).

    >>> DictShape()
    DictShape()
    """

    def plan(self, file, path):
        return None, pa.RecordBatch.to_pylist

    def __repr__(self) -> str:
        return "DictShape()"


class RowShape(RecordShape):
    """The columns of ``schema``'s fields (matched by name, ignoring case unless ``case_sensitive``), each read as
    its field's type; each row a :class:`~runtime.types.Row` named by the fields. A field the file lacks is None.

    Times: a timestamp column that holds instants (Parquet's INT96, or adjusted to UTC) read into a field without
    time zone gives the wall-clock time in UTC with ``utc_timestamp``, else in the local time zone; a column of
    wall-clock times read into a field with time zone is taken likewise. ``type_names`` name the fields' types as
    the user declared them, for messages.

    >>> RowShape(pa.schema([("a", pa.int32())]), case_sensitive=False)
    RowShape(['a'], case_sensitive=False, utc_timestamp=False)
    """

    def __init__(self, schema: pa.Schema, case_sensitive: bool = True, utc_timestamp: bool = False,
                 type_names: list[str] | None = None):
        self.schema = schema
        self.case_sensitive = case_sensitive
        self.utc_timestamp = utc_timestamp
        self.type_names = type_names or [str(field.type) for field in schema]

    def __repr__(self) -> str:
        return (f"RowShape({self.schema.names}, case_sensitive={self.case_sensitive}, "
                f"utc_timestamp={self.utc_timestamp})")

    def plan(self, file, path):
        file_schema = file.schema_arrow
        columns, readers = [], []
        for index, field in enumerate(self.schema):
            column = self._column_of(field.name, file_schema.names)
            if column is None:
                readers.append(_nulls)
                continue
            columns.append(column)
            instants = _holds_instants(file, column)
            readers.append(_ColumnReader(column, field, self.type_names[index], path, instants, self.utc_timestamp))
        names = tuple(self.schema.names)

        def to_records(batch: pa.RecordBatch) -> list:
            values = [reader(batch) for reader in readers]
            return [Row.of(names, list(row)) for row in zip(*values)] if values else []

        return columns, to_records

    def _column_of(self, name: str, file_names: list[str]) -> str | None:
        if name in file_names:
            return name
        if not self.case_sensitive:
            return next((n for n in file_names if n.casefold() == name.casefold()), None)
        return None


def _nulls(batch: pa.RecordBatch) -> list:
    return [None] * batch.num_rows


def _holds_instants(file: pq.ParquetFile, column: str) -> bool:
    """Whether the column's timestamps are instants (INT96, or adjusted to UTC) rather than wall-clock times."""
    arrow_type = file.schema_arrow.field(column).type
    if not pa.types.is_timestamp(arrow_type):
        return False
    if arrow_type.tz is not None:
        return True
    index = file.schema_arrow.get_field_index(column)
    try:
        return file.schema.column(index).physical_type == "INT96"
    except (IndexError, KeyError):  # a nested column: no INT96 there
        return False


class _ColumnReader:
    """One field's values from a batch: its column cast to the field's type, times moved between zones."""

    def __init__(self, column: str, field: pa.Field, type_name: str, path: str, instants: bool, utc: bool):
        self.column, self.field, self.type_name, self.path = column, field, type_name, path
        target = field.type
        self.zone_change = None
        if pa.types.is_timestamp(target) and target.tz is None and instants:
            self.zone_change = _instant_to_wall_clock_utc if utc else _instant_to_wall_clock_local
        elif pa.types.is_timestamp(target) and target.tz is not None and not instants:
            self.zone_change = _wall_clock_utc_to_instant if utc else _wall_clock_local_to_instant

    def __call__(self, batch: pa.RecordBatch) -> list:
        array = batch.column(self.column)
        if self.zone_change is not None:
            utc = pa.timestamp("us", tz="+00:00")
            naive = array.cast(utc, safe=False).cast(pa.timestamp("us")) if array.type.tz is not None else array
            values = naive.cast(pa.timestamp("us"), safe=False).to_pylist()
            return [None if v is None else self.zone_change(v) for v in values]
        if array.type != self.field.type:
            # Parquet's INT96 and Spark's timestamps have nanoseconds, which Python's datetimes do not
            truncating = pa.types.is_timestamp(array.type) and pa.types.is_timestamp(self.field.type)
            try:
                array = array.cast(self.field.type, safe=not truncating)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise MalformedRecordError(
                    f"{self.path}: column {self.column!r} holds {array.type}, which cannot be read as the row type's "
                    f"field {self.field.name!r} ({self.type_name}): {exc}. Declare the field with the column's "
                    "type, or fix the file.") from None
        return python_values(array)


_UTC = datetime.timezone.utc


def _instant_to_wall_clock_utc(value: datetime.datetime) -> datetime.datetime:
    return value  # already the UTC wall clock, naive


def _instant_to_wall_clock_local(value: datetime.datetime) -> datetime.datetime:
    return value.replace(tzinfo=_UTC).astimezone().replace(tzinfo=None)


def _wall_clock_utc_to_instant(value: datetime.datetime) -> datetime.datetime:
    return value.replace(tzinfo=_UTC)


def _wall_clock_local_to_instant(value: datetime.datetime) -> datetime.datetime:
    return value.astimezone(_UTC)  # a naive datetime's astimezone takes it as local time


class ParquetRecordFormat(FileRecordFormat):
    """Parquet files, ``batch_size`` rows at a time, as its ``shape`` makes them (dicts by default); the
    position is the row number.

    >>> ParquetRecordFormat(batch_size=500)
    ParquetRecordFormat(DictShape(), batch_size=500)
    """

    def __init__(self, shape: RecordShape | None = None, batch_size: int = 256):
        self.shape = shape if shape is not None else DictShape()
        self.batch_size = batch_size

    def __repr__(self) -> str:
        return f"ParquetRecordFormat({self.shape!r}, batch_size={self.batch_size})"

    def open(self, stream, position: int, path: str) -> BatchedRecordReader:
        try:
            file = pq.ParquetFile(stream)
        except pa.ArrowInvalid as exc:
            raise MalformedRecordError(f"{path}: not a Parquet file, or an incomplete one ({exc}). Keep other files "
                                       "out of the source's path, or match only the Parquet files with a glob "
                                       "('dir/*.parquet').") from None
        columns, to_records = self.shape.plan(file, path)
        row_groups, skip = _row_groups_from(file.metadata, position)
        batches = file.iter_batches(self.batch_size, row_groups=row_groups, columns=columns) if row_groups \
            else iter(())
        return BatchedRecordReader(_records(batches, skip, to_records), position)


def _row_groups_from(metadata, row: int) -> tuple[list[int], int]:
    """The row groups from the one holding ``row`` on, and how many of its rows come before ``row``."""
    for group in range(metadata.num_row_groups):
        rows = metadata.row_group(group).num_rows
        if row < rows:
            return list(range(group, metadata.num_row_groups)), row
        row -= rows
    return [], 0


def _records(batches: Iterator[pa.RecordBatch], skip: int, to_records) -> Iterator[list]:
    for batch in batches:
        if skip:
            if skip >= batch.num_rows:
                skip -= batch.num_rows
                continue
            batch, skip = batch.slice(skip), 0
        yield to_records(batch)
