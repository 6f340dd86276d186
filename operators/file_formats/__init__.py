"""File formats of ``FileSink`` and ``FileSource``: :mod:`.base` says what a format provides (a writer of one part
file, a reader of one file from a position); :mod:`.lines`, :mod:`.parquet` and :mod:`.orc` are Chandy's own, and
``runtime.datastream.formats`` adds PyFlink's (Avro files, CSV with a schema, Avro records in Parquet).

>>> from operators.file_formats import WRITERS_BY_FORMAT
>>> sorted(WRITERS_BY_FORMAT)
['csv', 'jsonl', 'parquet', 'text']
"""

from operators.file_formats.base import (
    BatchedRecordReader,
    BulkWriter,
    BulkWriterFactory,
    FileRecordFormat,
    RecordReader,
)
from operators.file_formats.lines import CSV_LINES, JSON_LINES, TEXT_LINES
from operators.file_formats.parquet import ParquetRecordFormat, ParquetWriterFactory

# FileSink(path, format=name) writes with these (FileSource reads the line formats itself)
WRITERS_BY_FORMAT = {"jsonl": JSON_LINES, "csv": CSV_LINES, "text": TEXT_LINES, "parquet": ParquetWriterFactory()}

__all__ = ["BulkWriter", "BulkWriterFactory", "FileRecordFormat", "RecordReader", "BatchedRecordReader",
           "WRITERS_BY_FORMAT", "ParquetRecordFormat", "ParquetWriterFactory"]
