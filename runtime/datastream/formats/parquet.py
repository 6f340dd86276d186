"""PyFlink's ``pyflink.datastream.formats.parquet``: Parquet files for ``FileSink`` and ``FileSource``, on
``pyarrow.parquet``.

- ``ParquetBulkWriters.for_row_type(row_type)`` writes Rows of a ``DataTypes.ROW`` (by field name; tuples by
  position), each value checked against its field's type where it is written;
- ``ParquetColumnarRowInputFormat(row_type)`` reads a file's columns of the row type's fields as Rows, resuming
  after a failure at the row where it stopped;
- ``AvroParquetWriters`` and ``AvroParquetReaders`` write and read Avro generic records (dicts) in Parquet files,
  laid out as Flink's parquet-avro writer lays them out.

>>> from operators.file_sink import FileSink
>>> from runtime.datastream.connectors.file_system import FileSource
>>> from runtime.table import DataTypes
>>> from runtime.types import Row
>>> row_type = DataTypes.ROW([DataTypes.FIELD("word", DataTypes.STRING()), DataTypes.FIELD("n", DataTypes.INT())])
>>> sink = FileSink("memory://parquet-doc/out", format=ParquetBulkWriters.for_row_type(row_type)); sink.validate()
>>> writer = sink.create_writer(subtask_index=0, parallelism=1); writer.open(None)
>>> writer.write_batch([Row(word="to", n=1), Row(word="be", n=2)])
>>> _ = writer.snapshot_state(checkpoint_id=1); writer.notify_checkpoint_complete(1)
>>> source = FileSource.for_bulk_file_format(ParquetColumnarRowInputFormat(row_type), "memory://parquet-doc/out") \\
...     .build()
>>> reader = source.create_reader(0, 1); reader.open(None); reader.poll(10)
[Row(word='to', n=1), Row(word='be', n=2)]

Timestamps: a ``TIMESTAMP`` field is stored as Parquet's timestamp without time zone (the wall-clock time as given,
to the microsecond), a ``TIMESTAMP_LTZ`` one as a timestamp adjusted to UTC; Flink stores both as INT96 instead.
"""

from __future__ import annotations

from operators.file_formats.arrow_rows import RowConverter
from operators.file_formats.parquet import ParquetRecordFormat, ParquetWriterFactory, RowShape
from runtime.common.serialization import BulkWriterFactory, RowDataBulkWriterFactory
from runtime.settings.configuration import Configuration
from runtime.datastream.connectors.file_system import BulkFormat, StreamFormat
from runtime.datastream.formats._avro_parquet import AvroRecords, AvroShape
from runtime.datastream.formats._options import parquet_options, settings_of
from runtime.datastream.formats.avro import AvroSchema, avro_schema_of
from runtime.errors import ApiUsageError, ConfigurationError
from runtime.table.types import RowType

__all__ = ["AvroParquetReaders", "AvroParquetWriters", "ParquetColumnarRowInputFormat", "ParquetBulkWriters"]


def row_type_of(row_type, where: str) -> RowType:
    """``row_type`` if it is a RowType; else an ApiUsageError saying how to make one."""
    if not isinstance(row_type, RowType):
        raise ApiUsageError(f"{where} expects a RowType: DataTypes.ROW([DataTypes.FIELD('name', DataTypes.STRING()), "
                            f"...]) (from runtime.table import DataTypes); got {type(row_type).__name__}.")
    return row_type


def row_converter(row_type: RowType, where: str) -> RowConverter:
    """Records to Arrow batches of ``row_type``, its fields' types named as declared in messages."""
    return RowConverter(row_type.to_arrow_schema(), where, [str(t) for t in row_type.field_types()])


class ParquetBulkWriters:
    """Makes the writer factory of Parquet files of a row type, for ``FileSink.for_bulk_format`` (PyFlink's name).

    >>> from runtime.table import DataTypes
    >>> ParquetBulkWriters.for_row_type(DataTypes.ROW([DataTypes.FIELD("id", DataTypes.BIGINT())]))
    RowDataBulkWriterFactory(ParquetWriterFactory(['id']), ROW<id BIGINT>)
    """

    @staticmethod
    def for_row_type(row_type: RowType, hadoop_config: Configuration | None = None,
                     utc_timestamp: bool = False) -> RowDataBulkWriterFactory:
        """Writes Rows of ``row_type`` into Parquet part files. Of ``hadoop_config``, ``parquet.compression``,
        ``parquet.page.size`` and ``parquet.enable.dictionary`` are honoured. ``utc_timestamp`` is accepted and has
        no effect: Chandy stores a ``TIMESTAMP`` as the wall-clock time it is, not as an instant (Flink's INT96)
        that needs a time zone to be one."""
        where = "ParquetBulkWriters.for_row_type"
        row_type = row_type_of(row_type, f"{where}(row_type)")
        factory = ParquetWriterFactory(row_converter(row_type, "ParquetBulkWriters"),
                                       parquet_options(hadoop_config, where))
        return RowDataBulkWriterFactory(factory, row_type)


class AvroParquetWriters:
    """Makes the writer factory of Parquet files of Avro generic records, for ``FileSink.for_bulk_format``
    (PyFlink's name).

    >>> schema = AvroSchema.parse_string('{"type": "record", "name": "User", "fields": ['
    ...                                  '{"name": "name", "type": "string"}]}')
    >>> AvroParquetWriters.for_generic_record(schema)
    ParquetWriterFactory(['name'])
    """

    @staticmethod
    def for_generic_record(schema: AvroSchema) -> BulkWriterFactory:
        """Writes generic records (dicts by field name) of ``schema`` into Parquet part files; a union of several
        types is a group of ``member0``, ``member1``, ... as parquet-avro writes it."""
        schema = avro_schema_of(schema, "AvroParquetWriters.for_generic_record(schema)")
        return ParquetWriterFactory(AvroRecords(schema._parsed, "AvroParquetWriters"))


class AvroParquetReaders:
    """Makes the reader format of Avro generic records in Parquet files, for
    ``FileSource.for_record_stream_format`` (PyFlink's name).

    >>> schema = AvroSchema.parse_string('{"type": "record", "name": "User", "fields": []}')
    >>> AvroParquetReaders.for_generic_record(schema)
    StreamFormat(ParquetRecordFormat(AvroShape('User'), batch_size=256))
    """

    @staticmethod
    def for_generic_record(schema: AvroSchema) -> StreamFormat:
        """Reads each row as a generic record (a dict) of ``schema``: its fields' columns, a field the file lacks
        taking its default (or None)."""
        schema = avro_schema_of(schema, "AvroParquetReaders.for_generic_record(schema)")
        return StreamFormat(ParquetRecordFormat(AvroShape(schema._parsed)))


class ParquetColumnarRowInputFormat(BulkFormat):
    """Reads Parquet files as Rows of a row type, for ``FileSource.for_bulk_file_format`` (PyFlink's): the columns
    of the row type's fields, matched by name (ignoring case unless ``is_case_sensitive``), each converted to its
    field's type, ``batch_size`` rows at a time; a field the file lacks is None.

    ``is_utc_timestamp``: a column of instants (Parquet's INT96, as Flink, Hive and Spark write timestamps, or a
    timestamp adjusted to UTC) read into a ``TIMESTAMP`` field gives its wall-clock time in UTC, else (the default,
    as in Flink) in the local time zone. ``hadoop_config`` has no reading setting Chandy honours: leave it empty.

    >>> from runtime.table import DataTypes
    >>> ParquetColumnarRowInputFormat(DataTypes.ROW([DataTypes.FIELD("id", DataTypes.BIGINT())]), batch_size=500)
    ParquetColumnarRowInputFormat(ROW<id BIGINT>, batch_size=500, is_utc_timestamp=False, is_case_sensitive=True)
    """

    def __init__(self, row_type: RowType, hadoop_config: Configuration | None = None, batch_size: int = 2048,
                 is_utc_timestamp: bool = False, is_case_sensitive: bool = True):
        where = "ParquetColumnarRowInputFormat"
        row_type = row_type_of(row_type, f"{where}(row_type)")
        settings = settings_of(hadoop_config, where)
        if settings:
            raise ConfigurationError(f"{where}: hadoop_config {sorted(settings)} has no counterpart in Chandy's "
                                     "Parquet reader (pyarrow); filesystem settings come with the path (its fsspec "
                                     "URL). Leave hadoop_config out.")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ConfigurationError(f"{where}(batch_size={batch_size!r}): the batch size is a positive number of "
                                     "rows.")
        self._row_type = row_type
        self._settings = (batch_size, bool(is_utc_timestamp), bool(is_case_sensitive))
        shape = RowShape(row_type.to_arrow_schema(), case_sensitive=bool(is_case_sensitive),
                         utc_timestamp=bool(is_utc_timestamp), type_names=[str(t) for t in row_type.field_types()])
        super().__init__(ParquetRecordFormat(shape, batch_size))

    def __repr__(self) -> str:
        batch_size, utc, case_sensitive = self._settings
        return (f"ParquetColumnarRowInputFormat({self._row_type}, batch_size={batch_size}, is_utc_timestamp={utc}, "
                f"is_case_sensitive={case_sensitive})")
