"""Avro data files (Avro's container format), on ``fastavro``: the part writer of ``AvroBulkWriters`` and the reader
of ``AvroInputFormat``. Records are generic records: dicts by field name.

A writer checks each record against the schema before it writes any of a batch, so a record that does not fit
fails where it is written, naming the field and the value; fastavro then cuts the file into blocks as it goes. A
reader's position is the record number; a resume skips whole blocks without decoding their records.

>>> import io
>>> import fastavro
>>> schema = fastavro.parse_schema({"type": "record", "name": "Pair", "fields": [{"name": "k", "type": "string"},
...                                                                            {"name": "n", "type": "long"}]})
>>> out = io.BytesIO(); writer = AvroFileWriterFactory(schema, "AvroBulkWriters").create(out)
>>> _ = writer.add_elements([{"k": "a", "n": 1}, {"k": "b", "n": 2}]); writer.finish()
>>> reader = AvroFileFormat(schema).open(io.BytesIO(out.getvalue()), 1, "pairs.avro")
>>> reader.read(10), reader.position, reader.read(10)
([{'k': 'b', 'n': 2}], 2, None)
>>> writer.add_elements([{"k": "c", "n": "three"}])
Traceback (most recent call last):
...
runtime.errors.RecordEncodingError: AvroBulkWriters: the record {'k': 'c', 'n': 'three'} does not fit the Avro
schema Pair: field 'Pair.n' (long) cannot hold 'three' (str). Fix the records (a map before the sink), or the schema.
"""

from __future__ import annotations

from typing import Iterator

import fastavro
import fastavro.read
import fastavro.validation
import fastavro.write

from operators.file_formats.base import BatchedRecordReader, BulkWriter, BulkWriterFactory, FileRecordFormat
from runtime.errors import MalformedRecordError, RecordEncodingError

__all__ = ["AvroFileWriterFactory", "AvroFileFormat", "check_record"]


def check_record(record, schema: dict, where: str) -> None:
    """Raise a RecordEncodingError naming the field and the value if ``record`` does not fit the parsed
    ``schema``."""
    try:
        fastavro.validation.validate(record, schema, raise_errors=True)
    except fastavro.validation.ValidationError as exc:
        problems = "; ".join(_problem(error) for error in exc.errors)
        raise RecordEncodingError(f"{where}: the record {record!r:.200} does not fit the Avro schema "
                                  f"{schema.get('name')}: {problems}. Fix the records (a map before the sink), or "
                                  "the schema.") from None


def _problem(error) -> str:
    datum, expected, field = getattr(error, "datum", None), getattr(error, "schema", None), getattr(error, "field", "")
    if field is None and expected is None:
        return str(error)
    return f"field {field!r} ({_schema_name(expected)}) cannot hold {datum!r:.100} ({type(datum).__name__})"


def _schema_name(schema) -> str:
    if isinstance(schema, dict):
        return str(schema.get("name") or schema.get("logicalType") or schema.get("type"))
    if isinstance(schema, list):
        return " or ".join(_schema_name(branch) for branch in schema)
    return str(schema)


class AvroFileWriterFactory(BulkWriterFactory):
    """Writes Avro data files of the parsed ``schema`` (a record schema), blocks compressed with ``codec``
    (``null``, ``deflate``, ``snappy``...: fastavro's names); ``where`` names the writer in messages.

    >>> AvroFileWriterFactory({"type": "record", "name": "T", "fields": []}, "AvroBulkWriters").extension
    '.avro'
    """

    extension = ".avro"

    def __init__(self, schema: dict, where: str, codec: str = "null"):
        self.schema = fastavro.parse_schema(schema)
        self.where = where
        self.codec = codec

    def create(self, stream) -> BulkWriter:
        return _AvroFileWriter(stream, self)

    def __repr__(self) -> str:
        return f"AvroFileWriterFactory({self.schema.get('name')!r})"


class _AvroFileWriter(BulkWriter):
    def __init__(self, stream, factory: AvroFileWriterFactory):
        self.stream = stream
        self.factory = factory
        self.writer = fastavro.write.Writer(stream, factory.schema, codec=factory.codec)
        self.size = self._size()

    def _size(self) -> int:
        return self.stream.tell() + self.writer.io.tell()  # written, and the block being filled

    def add_elements(self, records: list) -> int:
        for record in records:
            check_record(record, self.factory.schema, self.factory.where)
        for record in records:
            self.writer.write(record)
        before, self.size = self.size, self._size()
        return self.size - before

    def finish(self) -> None:
        self.writer.flush()


class AvroFileFormat(FileRecordFormat):
    """Reads Avro data files as generic records (dicts) of the parsed ``schema``, Avro's reader schema: a file
    written with another schema is resolved to it (fields added with defaults, others dropped).

    >>> AvroFileFormat({"type": "record", "name": "T", "fields": []})
    AvroFileFormat('T')
    """

    def __init__(self, schema: dict):
        self.schema = fastavro.parse_schema(schema)

    def __repr__(self) -> str:
        return f"AvroFileFormat({self.schema.get('name')!r})"

    def open(self, stream, position: int, path: str) -> BatchedRecordReader:
        return BatchedRecordReader(_records(stream, self.schema, position, path), position)


def _records(stream, schema: dict, skip: int, path: str) -> Iterator[list]:
    try:
        for block in fastavro.block_reader(stream, schema):
            if skip >= block.num_records:
                skip -= block.num_records
                continue
            records = list(block)[skip:]
            skip = 0
            yield records
    except (ValueError, TypeError, EOFError, fastavro.read.SchemaResolutionError) as exc:
        raise MalformedRecordError(f"{path}: cannot read it as Avro data of the schema {schema.get('name')} "
                                   f"({type(exc).__name__}: {exc}). Check that it is an Avro data file, and that "
                                   "the schema can read what it holds.") from exc
