"""PyFlink's ``pyflink.common.serialization``: turning records into bytes and back, and the file sink's encoder.

In PyFlink these wrap Java objects that Flink's Java connectors call; here they are plain Python with the same
names and constructors, and they do their work themselves (``serialize`` / ``deserialize`` / ``encode``): the
Kafka connector calls them, and so can your own sources and sinks. The row formats (``JsonRowSerializationSchema``
and the others of :mod:`runtime.datastream.formats`) can be imported from here too, as older PyFlink programs do.
A ``BulkWriterFactory`` writes the part files of ``FileSink.for_bulk_format``: the formats of
:mod:`runtime.datastream.formats` make them (``ParquetBulkWriters.for_row_type(row_type)``, ...).

>>> from runtime.common.serialization import Encoder, SimpleStringSchema
>>> SimpleStringSchema().deserialize(b"caf\\xc3\\xa9"), Encoder.simple_string_encoder().encode(42)
('café', b'42\\n')
"""

from __future__ import annotations

import codecs

from operators.file_formats.base import BulkWriter, BulkWriterFactory
from runtime.errors import ConfigurationError

__all__ = ["SerializationSchema", "DeserializationSchema", "SimpleStringSchema", "ByteArraySchema", "Encoder",
           "SimpleStringEncoder", "RowFieldExtractorSchema", "BulkWriterFactory", "RowDataBulkWriterFactory"]

# PyFlink 1.15 and older had the row formats here; they live in runtime.datastream.formats (which imports this
# module, so they are looked up when asked for).
_ROW_FORMATS = {"JsonRowSerializationSchema": "json", "JsonRowDeserializationSchema": "json",
                "CsvRowSerializationSchema": "csv", "CsvRowDeserializationSchema": "csv",
                "AvroRowSerializationSchema": "avro", "AvroRowDeserializationSchema": "avro"}


def __getattr__(name: str):
    if name in _ROW_FORMATS:
        import importlib

        return getattr(importlib.import_module(f"runtime.datastream.formats.{_ROW_FORMATS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _codec(charset: str, where: str) -> str:
    """Python's canonical name of a charset named as Java names it (``UTF-8``, ``ISO-8859-1``, ``US-ASCII``)."""
    try:
        return codecs.lookup(charset).name
    except (LookupError, TypeError):
        raise ConfigurationError(f"{where}: unknown charset {charset!r}. Use a name Python's codecs know, such as "
                                 "'UTF-8', 'ISO-8859-1' or 'US-ASCII'.") from None


class SerializationSchema:
    """Turns a record into bytes (PyFlink's base class): implement ``serialize``.

    >>> class Upper(SerializationSchema):
    ...     def serialize(self, element):
    ...         return element.upper().encode()
    >>> Upper().serialize("a")
    b'A'
    """

    def serialize(self, element) -> bytes:
        raise NotImplementedError


class DeserializationSchema:
    """Turns bytes into a record (PyFlink's base class): implement ``deserialize``.

    ``is_end_of_stream(record)`` (as in Flink): whether a source using this schema should stop at ``record``.

    >>> class Number(DeserializationSchema):
    ...     def deserialize(self, message):
    ...         return int(message)
    >>> Number().deserialize(b"42"), Number().is_end_of_stream(42)
    (42, False)
    """

    def deserialize(self, message: bytes):
        raise NotImplementedError

    def is_end_of_stream(self, next_element) -> bool:
        return False


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings to bytes and back in ``charset`` (default UTF-8), as Flink's ``SimpleStringSchema``.

    >>> schema = SimpleStringSchema("ISO-8859-1")
    >>> schema.serialize("café"), schema.deserialize(b"caf\\xe9")
    (b'caf\\xe9', 'café')
    """

    def __init__(self, charset: str = "UTF-8"):
        self.charset = _codec(charset, "SimpleStringSchema")

    def serialize(self, element: str) -> bytes:
        return element.encode(self.charset)

    def deserialize(self, message: bytes) -> str:
        return bytes(message).decode(self.charset)

    def __repr__(self) -> str:
        return f"SimpleStringSchema({self.charset!r})"


class ByteArraySchema(SerializationSchema, DeserializationSchema):
    """Bytes as they are, both ways (Flink's ``ByteArraySchema``).

    >>> ByteArraySchema().serialize(b"raw"), ByteArraySchema().deserialize(b"raw")
    (b'raw', b'raw')
    """

    def serialize(self, element) -> bytes:
        return bytes(element)

    def deserialize(self, message: bytes) -> bytes:
        return bytes(message)


class RowFieldExtractorSchema(SerializationSchema):
    """One field of a Row (or tuple), which must hold bytes already, as the message (Flink's
    ``RowFieldExtractorSchema``): a Kafka sink's key from field 0 and value from field 1, for instance.

    >>> from runtime.types import Row
    >>> RowFieldExtractorSchema(1).serialize(Row(b"user-1", b'{"n": 1}'))
    b'{"n": 1}'
    """

    def __init__(self, field_index: int):
        if field_index < 0:
            raise ValueError(f"Field index must be non-negative, got {field_index}")
        self.field_index = field_index

    def serialize(self, element) -> bytes:
        value = element[self.field_index]
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"RowFieldExtractorSchema({self.field_index}): field {self.field_index} of {element!r:.100} "
                            f"holds a {type(value).__name__}, not bytes: encode it in a map before the sink.")
        return bytes(value)


class Encoder:
    """How a row-format file sink writes each record (PyFlink's ``Encoder``). Make one with
    :meth:`simple_string_encoder`; ``FileSink.for_row_format(path, encoder)`` takes it.

    >>> Encoder.simple_string_encoder()
    Encoder.simple_string_encoder('utf-8')
    """

    def __init__(self, charset: str):
        self.charset = _codec(charset, "Encoder")

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> "Encoder":
        """Writes ``str(record)`` and a newline per record, in ``charset_name`` (Flink: ``toString()`` + ``\\n``).

        >>> from runtime.types import Row
        >>> encoder = Encoder.simple_string_encoder()
        >>> encoder.encode("é"), encoder.encode({"n": 1}), encoder.encode(Row(1, "a")) == f"{Row(1, 'a')}\\n".encode()
        (b'\\xc3\\xa9\\n', b"{'n': 1}\\n", True)
        """
        return Encoder(charset_name)

    def encode(self, element) -> bytes:
        return f"{element}\n".encode(self.charset)

    def __repr__(self) -> str:
        return f"Encoder.simple_string_encoder({self.charset!r})"


class SimpleStringEncoder(Encoder):
    """Flink's ``SimpleStringEncoder`` by its class name: the same as ``Encoder.simple_string_encoder(charset)``.

    >>> SimpleStringEncoder("UTF-8").encode(("a", 1))
    b"('a', 1)\\n"
    """

    def __init__(self, charset: str = "UTF-8"):
        super().__init__(charset)


class RowDataBulkWriterFactory(BulkWriterFactory):
    """A :class:`BulkWriterFactory` of rows of a declared row type (PyFlink's name): what
    ``ParquetBulkWriters.for_row_type``, ``OrcBulkWriters.for_row_type`` and ``CsvBulkWriters.for_schema`` return.
    It writes with ``writer_factory``; :meth:`get_row_type` is the ``RowType`` its records fit.

    >>> from operators.file_formats import JSON_LINES
    >>> factory = RowDataBulkWriterFactory(JSON_LINES, "ROW<...>")
    >>> factory.extension, factory.get_row_type()
    ('.jsonl', 'ROW<...>')
    """

    def __init__(self, writer_factory: BulkWriterFactory, row_type):
        self._writer_factory = writer_factory
        self._row_type = row_type
        self.extension = writer_factory.extension

    def create(self, stream) -> BulkWriter:
        return self._writer_factory.create(stream)

    def get_row_type(self):
        return self._row_type

    def __repr__(self) -> str:
        return f"RowDataBulkWriterFactory({self._writer_factory!r}, {self._row_type!r})"
