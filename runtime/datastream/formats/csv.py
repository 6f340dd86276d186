"""PyFlink's ``pyflink.datastream.formats.csv``: one CSV line to a :class:`~runtime.types.Row` and back.

Columns map to the row's fields by position. Field values are read as the field's type says (numbers,
booleans, ISO-8601 dates and times); an array is one column whose elements are split by the array element
delimiter (``;``). The serializer ends each message with the line delimiter (``\\n``), as Flink's does.

>>> from runtime.types import Types
>>> row_type = Types.ROW([Types.INT(), Types.STRING()])
>>> CsvRowSerializationSchema.Builder(row_type).build().serialize((1, "hi, there"))
b'1,"hi, there"\\n'
>>> CsvRowDeserializationSchema.Builder(row_type).build().deserialize(b'1,"hi, there"\\n')
Row(f0=1, f1='hi, there')

(``CsvSchema``, ``CsvReaderFormat`` and ``CsvBulkWriters`` are PyFlink's file formats, for Flink's Java file
connectors: use ``FileSource(path, format="csv")`` and ``FileSink(path, format="csv")`` instead.)
"""

from __future__ import annotations

import csv
import io

from runtime.common.serialization import DeserializationSchema, SerializationSchema
from runtime.datastream.formats._values import from_text, kind_of, to_text_value
from runtime.errors import ConfigurationError, MalformedRecordError
from runtime.types import Row, TypeInformation

__all__ = ["CsvRowDeserializationSchema", "CsvRowSerializationSchema"]

_ARRAYS = ("LIST", "BASIC_ARRAY", "PRIMITIVE_ARRAY")


def _row_type(type_info, where: str) -> TypeInformation:
    if not isinstance(type_info, TypeInformation) or not type_info.field_names:
        raise TypeError(f"{where}: a row type is needed, Types.ROW([...]) or Types.ROW_NAMED(names, types), not "
                        f"{type_info!r}.")
    return type_info


def _char(value: str | None, what: str) -> str | None:
    if value is not None and len(value) != 1:
        raise ConfigurationError(f"CSV format: the {what} must be one character, not {value!r}.")
    return value


class _Dialect:
    """The CSV settings shared by both directions."""

    def __init__(self):
        self.field_delimiter = ","
        self.quote_character: str | None = '"'
        self.escape_character: str | None = None
        self.array_element_delimiter = ";"
        self.null_literal: str | None = None

    def csv_options(self) -> dict:
        return {"delimiter": self.field_delimiter, "quotechar": self.quote_character,
                "escapechar": self.escape_character, "quoting": csv.QUOTE_MINIMAL if self.quote_character
                else csv.QUOTE_NONE, "doublequote": self.escape_character is None and self.quote_character is not None}


class CsvRowDeserializationSchema(DeserializationSchema):
    """Bytes of one CSV line to a Row of ``type_info`` (Flink's ``CsvRowDeserializationSchema``): build one with
    ``CsvRowDeserializationSchema.Builder(type_info)``.

    >>> from runtime.types import Types
    >>> schema = CsvRowDeserializationSchema.Builder(Types.ROW([Types.LIST(Types.INT()), Types.BOOLEAN()])) \\
    ...     .set_field_delimiter("|").set_null_literal("n/a").build()
    >>> schema.deserialize(b"1;2;3|true"), schema.deserialize(b"n/a|false")
    (Row(f0=[1, 2, 3], f1=True), Row(f0=None, f1=False))
    """

    def __init__(self, type_info: TypeInformation, dialect: _Dialect, allow_comments: bool, ignore_parse_errors: bool):
        self.type_info = _row_type(type_info, "CsvRowDeserializationSchema")
        self.dialect = dialect
        self.allow_comments = allow_comments
        self.ignore_parse_errors = ignore_parse_errors

    class Builder:
        def __init__(self, type_info: TypeInformation):
            if type_info is None:
                raise TypeError("Type information must not be None")
            self._type_info = _row_type(type_info, "CsvRowDeserializationSchema.Builder")
            self._dialect = _Dialect()
            self._allow_comments = False
            self._ignore_parse_errors = False

        def set_field_delimiter(self, delimiter: str) -> "CsvRowDeserializationSchema.Builder":
            self._dialect.field_delimiter = _char(delimiter, "field delimiter")
            return self

        def set_allow_comments(self, allow_comments: bool) -> "CsvRowDeserializationSchema.Builder":
            self._allow_comments = bool(allow_comments)
            return self

        def set_array_element_delimiter(self, delimiter: str) -> "CsvRowDeserializationSchema.Builder":
            self._dialect.array_element_delimiter = delimiter
            return self

        def set_quote_character(self, c: str) -> "CsvRowDeserializationSchema.Builder":
            self._dialect.quote_character = _char(c, "quote character")
            return self

        def set_escape_character(self, c: str) -> "CsvRowDeserializationSchema.Builder":
            self._dialect.escape_character = _char(c, "escape character")
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
        if self.dialect.null_literal is not None and column == self.dialect.null_literal:
            return None
        kind = kind_of(field_type)
        if kind in _ARRAYS and not (kind == "PRIMITIVE_ARRAY" and kind_of(field_type.fields[0]) == "BYTE"):
            elements = column.split(self.dialect.array_element_delimiter) if column else []
            return [from_text(e, field_type.fields[0]) for e in elements]
        if field_type.field_names:  # a nested row: its fields as array elements, as Flink writes it
            elements = column.split(self.dialect.array_element_delimiter)
            return from_text(elements, field_type)
        if column == "" and kind != "STRING":
            return None
        return from_text(column, field_type)


class CsvRowSerializationSchema(SerializationSchema):
    """A Row (or tuple) of ``type_info`` to the bytes of one CSV line: build one with
    ``CsvRowSerializationSchema.Builder(type_info)``.

    >>> from runtime.types import Types
    >>> CsvRowSerializationSchema.Builder(Types.ROW([Types.LIST(Types.STRING()), Types.INT()])) \\
    ...     .set_field_delimiter(";").set_array_element_delimiter("|").build().serialize((["a", "b"], None))
    b'a|b;\\n'
    """

    def __init__(self, type_info: TypeInformation, dialect: _Dialect, line_delimiter: str):
        self.type_info = _row_type(type_info, "CsvRowSerializationSchema")
        self.dialect = dialect
        self.line_delimiter = line_delimiter

    class Builder:
        def __init__(self, type_info: TypeInformation):
            if type_info is None:
                raise TypeError("Type information must not be None")
            self._type_info = _row_type(type_info, "CsvRowSerializationSchema.Builder")
            self._dialect = _Dialect()
            self._line_delimiter = "\n"

        def set_field_delimiter(self, c: str) -> "CsvRowSerializationSchema.Builder":
            self._dialect.field_delimiter = _char(c, "field delimiter")
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
            self._dialect.quote_character = _char(c, "quote character")
            return self

        def set_escape_character(self, c: str) -> "CsvRowSerializationSchema.Builder":
            self._dialect.escape_character = _char(c, "escape character")
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
        if value is None:
            return self.dialect.null_literal or ""
        if isinstance(value, (list, tuple, Row)) and not isinstance(value, (bytes, str)):
            return self.dialect.array_element_delimiter.join(self._column(v) for v in value)
        if isinstance(value, bool):
            return "true" if value else "false"
        plain = to_text_value(value)
        return plain if isinstance(plain, str) else str(plain)
