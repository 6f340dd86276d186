"""PyFlink's ``pyflink.datastream.formats.csv``: CSV files with a schema for ``FileSource`` and ``FileSink``, and one
CSV line to a :class:`~runtime.types.Row` and back, for messages.

Files: a :class:`CsvSchema` (built by ``CsvSchema.builder()``) names and types the columns;
``FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema), path)`` reads each record as a Row named
by the columns, typed as the schema says, and resumes after a failure at the byte where it stopped;
``FileSink.for_bulk_format(path, CsvBulkWriters.for_schema(schema))`` writes Rows, tuples or dicts.

>>> import fsspec
>>> from runtime.datastream.connectors.file_system import FileSource
>>> from runtime.table import DataTypes
>>> fsspec.filesystem("memory").pipe("/csv-doc/people.csv", b"id|name\\n1|ann\\n2|bo\\n")
>>> schema = (CsvSchema.builder().add_number_column("id", DataTypes.INT()).add_string_column("name")
...           .set_column_separator("|").set_use_header().build())
>>> source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema), "memory://csv-doc").build()
>>> reader = source.create_reader(0, 1); reader.open(None); reader.poll(10)
[Row(id=1, name='ann'), Row(id=2, name='bo')]

Messages: columns map to the row's fields by position. Field values are read as the field's type says (numbers,
booleans, ISO-8601 dates and times); an array is one column whose elements are split by the array element
delimiter (``;``). The serializer ends each message with the line delimiter (``\\n``), as Flink's does.

>>> from runtime.types import Types
>>> row_type = Types.ROW([Types.INT(), Types.STRING()])
>>> CsvRowSerializationSchema.Builder(row_type).build().serialize((1, "hi, there"))
b'1,"hi, there"\\n'
>>> CsvRowDeserializationSchema.Builder(row_type).build().deserialize(b'1,"hi, there"\\n')
Row(f0=1, f1='hi, there')
"""

from __future__ import annotations

import csv
import io

from runtime.common.serialization import DeserializationSchema, RowDataBulkWriterFactory, SerializationSchema
from runtime.datastream.connectors.file_system import StreamFormat
from runtime.datastream.formats._csv_files import (
    CsvColumn,
    CsvDialect,
    CsvFileFormat,
    CsvLayout,
    CsvWriterFactory,
    format_column,
    one_char,
    parse_column,
)
from runtime.errors import ApiUsageError, ConfigurationError, MalformedRecordError
from runtime.table.types import ArrayType, DataType, DataTypes, DecimalType, NumericType, RowField, RowType
from runtime.types import Row, TypeInformation

__all__ = ["CsvSchema", "CsvSchemaBuilder", "CsvReaderFormat", "CsvBulkWriters", "CsvRowDeserializationSchema",
           "CsvRowSerializationSchema"]


def _row_type(type_info, where: str) -> TypeInformation:
    if not isinstance(type_info, TypeInformation) or not type_info.field_names:
        raise TypeError(f"{where}: a row type is needed, Types.ROW([...]) or Types.ROW_NAMED(names, types), not "
                        f"{type_info!r}.")
    return type_info


class CsvRowDeserializationSchema(DeserializationSchema):
    """Bytes of one CSV line to a Row of ``type_info`` (Flink's ``CsvRowDeserializationSchema``): build one with
    ``CsvRowDeserializationSchema.Builder(type_info)``.

    >>> from runtime.types import Types
    >>> schema = CsvRowDeserializationSchema.Builder(Types.ROW([Types.LIST(Types.INT()), Types.BOOLEAN()])) \\
    ...     .set_field_delimiter("|").set_null_literal("n/a").build()
    >>> schema.deserialize(b"1;2;3|true"), schema.deserialize(b"n/a|false")
    (Row(f0=[1, 2, 3], f1=True), Row(f0=None, f1=False))
    """

    def __init__(self, type_info: TypeInformation, dialect: CsvDialect, allow_comments: bool,
                 ignore_parse_errors: bool):
        self.type_info = _row_type(type_info, "CsvRowDeserializationSchema")
        self.dialect = dialect
        self.allow_comments = allow_comments
        self.ignore_parse_errors = ignore_parse_errors

    class Builder:
        def __init__(self, type_info: TypeInformation):
            if type_info is None:
                raise TypeError("Type information must not be None")
            self._type_info = _row_type(type_info, "CsvRowDeserializationSchema.Builder")
            self._dialect = CsvDialect()
            self._allow_comments = False
            self._ignore_parse_errors = False

        def set_field_delimiter(self, delimiter: str) -> "CsvRowDeserializationSchema.Builder":
            self._dialect.field_delimiter = one_char(delimiter, "field delimiter")
            return self

        def set_allow_comments(self, allow_comments: bool) -> "CsvRowDeserializationSchema.Builder":
            self._allow_comments = bool(allow_comments)
            return self

        def set_array_element_delimiter(self, delimiter: str) -> "CsvRowDeserializationSchema.Builder":
            self._dialect.array_element_delimiter = delimiter
            return self

        def set_quote_character(self, c: str) -> "CsvRowDeserializationSchema.Builder":
            self._dialect.quote_character = one_char(c, "quote character")
            return self

        def set_escape_character(self, c: str) -> "CsvRowDeserializationSchema.Builder":
            self._dialect.escape_character = one_char(c, "escape character")
            return self

        def set_null_literal(self, null_literal: str) -> "CsvRowDeserializationSchema.Builder":
            self._dialect.null_literal = null_literal
            return self

        def set_ignore_parse_errors(self, ignore_parse_errors: bool) -> "CsvRowDeserializationSchema.Builder":
            self._ignore_parse_errors = bool(ignore_parse_errors)
            return self

        def build(self) -> "CsvRowDeserializationSchema":
            return CsvRowDeserializationSchema(self._type_info, self._dialect, self._allow_comments,
                                               self._ignore_parse_errors)

    def deserialize(self, message: bytes) -> Row | None:
        text = bytes(message).decode("utf-8").rstrip("\r\n")
        if not text or (self.allow_comments and text.lstrip().startswith("#")):
            return None
        try:
            (columns,) = list(csv.reader([text], **self.dialect.csv_options()))
            fields = self.type_info.fields
            if len(columns) != len(fields):
                raise ValueError(f"Row length mismatch. {len(fields)} fields expected but was {len(columns)}.")
            values = [self._value(column, field_type) for column, field_type in zip(columns, fields)]
        except (ValueError, TypeError, ArithmeticError, csv.Error) as exc:
            if self.ignore_parse_errors:
                return None
            raise MalformedRecordError(f"Failed to deserialize CSV row {text[:200]!r}: {exc}. Fix the producer, or "
                                       "build the schema with set_ignore_parse_errors(True).") from None
        return Row.of(self.type_info.field_names, values)

    def _value(self, column: str, field_type: TypeInformation):
        return parse_column(column, field_type, self.dialect.null_literal, self.dialect.array_element_delimiter)


class CsvRowSerializationSchema(SerializationSchema):
    """A Row (or tuple) of ``type_info`` to the bytes of one CSV line: build one with
    ``CsvRowSerializationSchema.Builder(type_info)``.

    >>> from runtime.types import Types
    >>> CsvRowSerializationSchema.Builder(Types.ROW([Types.LIST(Types.STRING()), Types.INT()])) \\
    ...     .set_field_delimiter(";").set_array_element_delimiter("|").build().serialize((["a", "b"], None))
    b'a|b;\\n'
    """

    def __init__(self, type_info: TypeInformation, dialect: CsvDialect, line_delimiter: str):
        self.type_info = _row_type(type_info, "CsvRowSerializationSchema")
        self.dialect = dialect
        self.line_delimiter = line_delimiter

    class Builder:
        def __init__(self, type_info: TypeInformation):
            if type_info is None:
                raise TypeError("Type information must not be None")
            self._type_info = _row_type(type_info, "CsvRowSerializationSchema.Builder")
            self._dialect = CsvDialect()
            self._line_delimiter = "\n"

        def set_field_delimiter(self, c: str) -> "CsvRowSerializationSchema.Builder":
            self._dialect.field_delimiter = one_char(c, "field delimiter")
            return self

        def set_line_delimiter(self, delimiter: str) -> "CsvRowSerializationSchema.Builder":
            if delimiter not in ("\n", "\r", "\r\n", ""):
                raise ConfigurationError(f"CSV format: the line delimiter must be '\\n', '\\r', '\\r\\n' or '' (as in "
                                         f"Flink), not {delimiter!r}.")
            self._line_delimiter = delimiter
            return self

        def set_array_element_delimiter(self, delimiter: str) -> "CsvRowSerializationSchema.Builder":
            self._dialect.array_element_delimiter = delimiter
            return self

        def disable_quote_character(self) -> "CsvRowSerializationSchema.Builder":
            self._dialect.quote_character = None
            return self

        def set_quote_character(self, c: str) -> "CsvRowSerializationSchema.Builder":
            self._dialect.quote_character = one_char(c, "quote character")
            return self

        def set_escape_character(self, c: str) -> "CsvRowSerializationSchema.Builder":
            self._dialect.escape_character = one_char(c, "escape character")
            return self

        def set_null_literal(self, s: str) -> "CsvRowSerializationSchema.Builder":
            self._dialect.null_literal = s
            return self

        def build(self) -> "CsvRowSerializationSchema":
            return CsvRowSerializationSchema(self._type_info, self._dialect, self._line_delimiter)

    def serialize(self, element) -> bytes:
        names = self.type_info.field_names
        values = [element.get(name) for name in names] if isinstance(element, dict) else list(element)
        if len(values) != len(names):
            raise MalformedRecordError(f"CsvRowSerializationSchema: {element!r:.200} has {len(values)} fields, the "
                                       f"row type {len(names)}.")
        columns = [self._column(v) for v in values]
        out = io.StringIO()
        csv.writer(out, lineterminator=self.line_delimiter, **self.dialect.csv_options()).writerow(columns)
        return out.getvalue().encode()

    def _column(self, value) -> str:
        return format_column(value, self.dialect.null_literal, self.dialect.array_element_delimiter)


# -- CSV files with a schema -----------------------------------------------------------------------------------


class CsvSchema:
    """The columns of a CSV file and how it is written (PyFlink's ``CsvSchema``, after Jackson's): made by
    :meth:`builder`. Its records are Rows named by the columns, of :meth:`get_type_info`.

    >>> schema = CsvSchema.builder().add_number_column("id").add_array_column("tags").build()
    >>> schema, len(schema), schema.get_type_info()
    (CsvSchema(id BIGINT, tags ARRAY<STRING>), 2, ROW_NAMED(['id', 'tags']))
    """

    def __init__(self, row_type: RowType, layout: CsvLayout):
        self._row_type = row_type
        self._layout = layout

    @staticmethod
    def builder() -> "CsvSchemaBuilder":
        return CsvSchemaBuilder()

    def get_type_info(self) -> TypeInformation:
        """The type of its records: ``Types.ROW_NAMED`` of the columns (Chandy's)."""
        return self._row_type.to_type_info()

    def size(self) -> int:
        return len(self._row_type)

    def __len__(self) -> int:
        return self.size()

    def __repr__(self) -> str:
        return "CsvSchema(" + ", ".join(f"{f.name} {f.data_type}" for f in self._row_type) + ")"


class CsvSchemaBuilder:
    """Builds a :class:`CsvSchema` (PyFlink's ``CsvSchemaBuilder``): columns in order, then the file's settings.
    Defaults as Jackson's: ``,`` between columns, ``"`` quotes, no escape character, ``\\n`` ends a line (when
    writing; ``\\n`` and ``\\r\\n`` are read), ``;`` between array elements, an empty column of a non-string type
    is None.

    >>> builder = CsvSchema.builder().add_string_column("a").set_quote_char("'").set_null_value("n/a")
    >>> builder.size(), builder.build()
    (1, CsvSchema(a STRING))
    >>> builder.set_column_separator("||")
    Traceback (most recent call last):
    ...
    runtime.errors.ConfigurationError: CSV format: the column separator must be one character, not '||'.
    """

    def __init__(self):
        self._fields: list[RowField] = []
        self._separators: list[str | None] = []  # per column: its array elements' separator (None: not set)
        self._settings: dict = {}

    def build(self) -> CsvSchema:
        row_type = DataTypes.ROW(self._fields)
        columns = tuple(_column(field, separator) for field, separator in zip(self._fields, self._separators))
        return CsvSchema(row_type, CsvLayout(columns, **self._settings))

    def _add(self, name: str, data_type: DataType, separator: str | None = None) -> "CsvSchemaBuilder":
        self._fields.append(DataTypes.FIELD(name, data_type))
        self._separators.append(separator)
        return self

    def add_array_column(self, name: str, separator: str = ";", element_type: DataType | None = None) \
            -> "CsvSchemaBuilder":
        """An array column, its elements split by ``separator``, of ``element_type`` (default STRING)."""
        return self._add(name, DataTypes.ARRAY(DataTypes.STRING() if element_type is None else element_type),
                         separator)

    def add_boolean_column(self, name: str) -> "CsvSchemaBuilder":
        return self._add(name, DataTypes.BOOLEAN())

    def add_number_column(self, name: str, number_type: NumericType | None = None) -> "CsvSchemaBuilder":
        """A number column of ``number_type`` (default BIGINT)."""
        if number_type is None:
            number_type = DataTypes.BIGINT()
        if not isinstance(number_type, NumericType):
            raise ConfigurationError(f"add_number_column({name!r}, {number_type!r}): the type must be a number type "
                                     "(DataTypes.INT(), DataTypes.DOUBLE(), DataTypes.DECIMAL(p, s), ...).")
        return self._add(name, number_type)

    def add_string_column(self, name: str) -> "CsvSchemaBuilder":
        return self._add(name, DataTypes.STRING())

    def add_columns_from(self, schema: CsvSchema) -> "CsvSchemaBuilder":
        """The columns of ``schema``, after these."""
        for field, column in zip(schema._row_type, schema._layout.columns):
            self._add(field.name, field.data_type, column.array_separator)
        return self

    def clear_columns(self) -> "CsvSchemaBuilder":
        self._fields.clear()
        self._separators.clear()
        return self

    def set_allow_comments(self, allow: bool = True) -> "CsvSchemaBuilder":
        """Skip lines starting with ``#`` when reading."""
        self._settings["allow_comments"] = bool(allow)
        return self

    def set_any_property_name(self, name: str) -> "CsvSchemaBuilder":
        """Accepted: Jackson's name for extra columns of a Java object, which Rows do not have."""
        return self

    def disable_array_element_separator(self) -> "CsvSchemaBuilder":
        """Array columns without a separator of their own hold one element."""
        self._settings["array_element_separator"] = ""
        return self

    def remove_array_element_separator(self, index: int) -> "CsvSchemaBuilder":
        """The array column at ``index`` holds one element."""
        self._separators[index] = ""
        return self

    def set_array_element_separator(self, separator: str) -> "CsvSchemaBuilder":
        """The separator of array columns without one of their own (default ``;``)."""
        self._settings["array_element_separator"] = separator
        return self

    def set_column_separator(self, char: str) -> "CsvSchemaBuilder":
        self._settings["column_separator"] = one_char(char, "column separator")
        return self

    def disable_escape_char(self) -> "CsvSchemaBuilder":
        self._settings["escape_char"] = None
        return self

    def set_escape_char(self, char: str) -> "CsvSchemaBuilder":
        self._settings["escape_char"] = one_char(char, "escape character")
        return self

    def set_line_separator(self, separator: str) -> "CsvSchemaBuilder":
        """What ends each written line (default ``\\n``); reading takes ``\\n`` and ``\\r\\n``."""
        if separator not in ("\n", "\r\n", "\r"):
            raise ConfigurationError(f"set_line_separator({separator!r}): a line ends with '\\n', '\\r\\n' or "
                                     "'\\r'.")
        self._settings["line_separator"] = separator
        return self

    def set_null_value(self, null_value: str) -> "CsvSchemaBuilder":
        """The text of a None (default: an empty column, None for types other than strings)."""
        self._settings["null_value"] = null_value
        return self

    def disable_quote_char(self) -> "CsvSchemaBuilder":
        self._settings["quote_char"] = None
        return self

    def set_quote_char(self, char: str) -> "CsvSchemaBuilder":
        self._settings["quote_char"] = one_char(char, "quote character")
        return self

    def set_skip_first_data_row(self, skip: bool = True) -> "CsvSchemaBuilder":
        """Skip the first record of each file (after the header, if it has one) when reading."""
        self._settings["skip_first_data_row"] = bool(skip)
        return self

    def set_strict_headers(self, strict: bool = True) -> "CsvSchemaBuilder":
        """With :meth:`set_use_header`: a header whose names differ from the columns' fails the read."""
        self._settings["strict_headers"] = bool(strict)
        return self

    def set_use_header(self, use: bool = True) -> "CsvSchemaBuilder":
        """Files start with a header line: skipped when reading, written at the top of each part file."""
        self._settings["use_header"] = bool(use)
        return self

    def size(self) -> int:
        return len(self._fields)

    def __len__(self) -> int:
        return self.size()


def _column(field: RowField, separator: str | None) -> CsvColumn:
    data_type = field.data_type
    scale = data_type.scale if isinstance(data_type, DecimalType) else None
    if not isinstance(data_type, ArrayType):
        separator = None
    return CsvColumn(field.name, data_type.to_type_info(), separator, scale)


def _csv_schema(schema, where: str) -> CsvSchema:
    if not isinstance(schema, CsvSchema):
        raise ApiUsageError(f"{where} expects a CsvSchema (CsvSchema.builder()...build()), got "
                            f"{type(schema).__name__}.")
    return schema


class CsvReaderFormat(StreamFormat):
    """Reads CSV files of a :class:`CsvSchema` record by record, for ``FileSource.for_record_stream_format``
    (PyFlink's): each record a Row named by the columns. A record that does not fit the schema fails the job,
    naming the file, the byte where the record starts, and the column.

    >>> CsvReaderFormat.for_schema(CsvSchema.builder().add_string_column("name").build())
    CsvReaderFormat.for_schema(CsvSchema(name STRING))
    """

    def __init__(self, schema: CsvSchema):
        super().__init__(CsvFileFormat(schema._layout))
        self._schema = schema

    @staticmethod
    def for_schema(schema: CsvSchema) -> "CsvReaderFormat":
        return CsvReaderFormat(_csv_schema(schema, "CsvReaderFormat.for_schema(schema)"))

    def __repr__(self) -> str:
        return f"CsvReaderFormat.for_schema({self._schema!r})"


class CsvBulkWriters:
    """Makes the writer factory of CSV files of a :class:`CsvSchema` for ``FileSink.for_bulk_format`` (PyFlink's
    name).

    >>> CsvBulkWriters.for_schema(CsvSchema.builder().add_string_column("name").build())
    RowDataBulkWriterFactory(CsvWriterFactory(['name']), ROW<name STRING>)
    """

    @staticmethod
    def for_schema(schema: CsvSchema) -> RowDataBulkWriterFactory:
        """Writes Rows (by name), tuples (in column order) or dicts of ``schema`` into CSV part files; each value
        must read back as its column's type."""
        schema = _csv_schema(schema, "CsvBulkWriters.for_schema(schema)")
        return RowDataBulkWriterFactory(CsvWriterFactory(schema._layout, "CsvBulkWriters"), schema._row_type)
