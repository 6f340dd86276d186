"""CSV text of typed values, for the CSV row schemas (one message, one row) and for CSV files with a schema (the
reader of ``CsvReaderFormat`` and the part writer of ``CsvBulkWriters``).

A column's text becomes its type's value by :func:`parse_column` and back by :func:`format_column`: numbers,
``true``/``false``, ISO-8601 dates and times; an array is one column whose elements are split by a separator.

A file reader's position is the byte offset of the next record, so a resume seeks there; a record may span lines
(a quoted field with line breaks). A writer writes each batch at once, and checks that every value reads back as
its column's type, so a record that does not fit fails where it is written, naming the column and the value.

>>> import io
>>> from runtime.types import Types
>>> layout = CsvLayout((CsvColumn("id", Types.INT()), CsvColumn("tags", Types.LIST(Types.STRING()), ";")),
...                    use_header=True)
>>> out = io.BytesIO(); writer = CsvWriterFactory(layout, "CsvBulkWriters").create(out)
>>> _ = writer.add_elements([Row(id=1, tags=["a", "b"]), (2, [])]); out.getvalue()
b'id,tags\\n1,a;b\\n2,\\n'
>>> reader = CsvFileFormat(layout).open(io.BytesIO(out.getvalue()), 0, "ids.csv")
>>> reader.read(1), reader.position
([Row(id=1, tags=['a', 'b'])], 14)
>>> reader = CsvFileFormat(layout).open(io.BytesIO(out.getvalue()), 14, "ids.csv")
>>> reader.read(5), reader.read(5)
([Row(id=2, tags=[])], None)
"""

from __future__ import annotations

import csv
import decimal
import io
from dataclasses import dataclass
from typing import Iterator

from operators.file_formats.base import BulkWriter, BulkWriterFactory, FileRecordFormat, RecordReader
from runtime.datastream.formats._values import from_text, kind_of, to_text_value
from runtime.errors import ConfigurationError, MalformedRecordError, RecordEncodingError
from runtime.types import Row, TypeInformation

__all__ = ["CsvDialect", "parse_column", "format_column", "CsvColumn", "CsvLayout", "CsvFileFormat",
           "CsvWriterFactory"]

_ARRAYS = ("LIST", "BASIC_ARRAY", "PRIMITIVE_ARRAY")


def one_char(value: str | None, what: str) -> str | None:
    """``value`` if it is one character (or None); else a ConfigurationError naming ``what``."""
    if value is not None and (not isinstance(value, str) or len(value) != 1):
        raise ConfigurationError(f"CSV format: the {what} must be one character, not {value!r}.")
    return value


class CsvDialect:
    """The CSV settings the row schemas share: delimiters, quoting, escaping and the null literal.

    >>> CsvDialect().csv_options()["delimiter"]
    ','
    """

    def __init__(self):
        self.field_delimiter = ","
        self.quote_character: str | None = '"'
        self.escape_character: str | None = None
        self.array_element_delimiter = ";"
        self.null_literal: str | None = None

    def csv_options(self) -> dict:
        return _csv_options(self.field_delimiter, self.quote_character, self.escape_character)


def _csv_options(delimiter: str, quote: str | None, escape: str | None) -> dict:
    return {"delimiter": delimiter, "quotechar": quote, "escapechar": escape,
            "quoting": csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE,
            "doublequote": escape is None and quote is not None}


def _is_array(type_info: TypeInformation) -> bool:
    kind = kind_of(type_info)
    return kind in _ARRAYS and not (kind == "PRIMITIVE_ARRAY" and kind_of(type_info.fields[0]) == "BYTE")


def parse_column(text: str, type_info: TypeInformation, null_literal: str | None, array_delimiter: str):
    """The value of ``type_info`` a column's ``text`` holds (ValueError or TypeError when it holds none).

    >>> from runtime.types import Types
    >>> parse_column("1;2", Types.LIST(Types.INT()), None, ";"), parse_column("", Types.INT(), None, ";")
    ([1, 2], None)
    """
    if null_literal is not None and text == null_literal:
        return None
    if _is_array(type_info):
        if not text:
            return []
        elements = text.split(array_delimiter) if array_delimiter else [text]
        return [from_text(element, type_info.fields[0]) for element in elements]
    if type_info.field_names:  # a nested row: its fields as array elements, as Flink writes it
        return from_text(text.split(array_delimiter), type_info)
    if text == "" and kind_of(type_info) != "STRING":
        return None
    return from_text(text, type_info)


def format_column(value, null_literal: str | None, array_delimiter: str) -> str:
    """A value as a column's text: arrays and rows joined by ``array_delimiter``, booleans ``true``/``false``,
    decimals exactly.

    >>> format_column([1, 2], None, ";"), format_column(True, None, ";"), format_column(None, "n/a", ";")
    ('1;2', 'true', 'n/a')
    """
    if value is None:
        return null_literal or ""
    if isinstance(value, (list, tuple, Row)):
        return array_delimiter.join(format_column(v, null_literal, array_delimiter) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # exact, and without an exponent
    plain = to_text_value(value)
    return plain if isinstance(plain, str) else str(plain)


@dataclass(frozen=True)
class CsvColumn:
    """A column of a CSV file: its name and type, the separator of its elements if it is an array, and the scale
    its decimals are rounded to (half up, as Flink does)."""

    name: str
    type_info: TypeInformation
    array_separator: str | None = None
    decimal_scale: int | None = None

    def rounded(self, value):
        if self.decimal_scale is None or value is None or isinstance(value, bool) \
                or not isinstance(value, (decimal.Decimal, int, float)):
            return value
        return decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-self.decimal_scale), decimal.ROUND_HALF_UP)


@dataclass(frozen=True)
class CsvLayout:
    """How a CSV file with a schema is laid out (``CsvSchema``'s settings, as Jackson's ``CsvSchema`` has them)."""

    columns: tuple[CsvColumn, ...]
    column_separator: str = ","
    quote_char: str | None = '"'
    escape_char: str | None = None
    line_separator: str = "\n"
    null_value: str | None = None
    array_element_separator: str = ";"
    allow_comments: bool = False
    use_header: bool = False
    strict_headers: bool = False
    skip_first_data_row: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    def csv_options(self) -> dict:
        return _csv_options(self.column_separator, self.quote_char, self.escape_char)

    def separator_of(self, column: CsvColumn) -> str:
        return self.array_element_separator if column.array_separator is None else column.array_separator


# -- reading -------------------------------------------------------------------------------------------------


class CsvFileFormat(FileRecordFormat):
    """CSV files of ``layout``, each record a Row named by its columns; the position is a byte offset."""

    def __init__(self, layout: CsvLayout):
        self.layout = layout

    def __repr__(self) -> str:
        return f"CsvFileFormat({list(self.layout.names)})"

    def open(self, stream, position: int, path: str) -> RecordReader:
        return _CsvReader(self.layout, stream, position, path)


class _CsvReader(RecordReader):
    def __init__(self, layout: CsvLayout, stream, position: int, path: str):
        self.layout, self.stream, self.path = layout, stream, path
        self.position = position
        self._consumed = position
        self._text: list[str] = []  # the lines of the record being read, for messages
        stream.seek(position)
        self._rows = csv.reader(self._lines(), **layout.csv_options())
        if position == 0:
            self._skip_heading()

    def _lines(self) -> Iterator[str]:
        """The file's lines from the position on, counting their bytes; comment lines are skipped."""
        while True:
            raw = self.stream.readline()
            if not raw:
                return
            self._consumed += len(raw)
            text = raw.decode("utf-8")
            if self.layout.allow_comments and text.lstrip().startswith("#"):
                continue
            self._text.append(text)
            yield text

    def _next_row(self) -> tuple[list[str], str] | None:
        """The next non-empty row's columns and text, and the position moved past it."""
        try:
            for row in self._rows:
                text, self._text = "".join(self._text).rstrip("\r\n"), []
                if row:
                    self.position = self._consumed
                    return row, text
        except (csv.Error, UnicodeDecodeError) as exc:
            raise self._malformed(f"{type(exc).__name__}: {exc}", "".join(self._text)) from None
        self.position = self._consumed
        return None

    def _skip_heading(self) -> None:
        if self.layout.use_header:
            header = self._next_row()
            if self.layout.strict_headers and header is not None and tuple(header[0]) != self.layout.names:
                raise self._malformed(f"the header names the columns {header[0]}, the schema "
                                      f"{list(self.layout.names)}", header[1], 0)
        if self.layout.skip_first_data_row:
            self._next_row()

    def read(self, max_records: int) -> list | None:
        records = []
        while len(records) < max_records:
            start = self.position
            row = self._next_row()
            if row is None:
                break
            records.append(self._record(*row, start))
        if not records:
            return None
        return records

    def _record(self, row: list[str], text: str, start: int) -> Row:
        layout = self.layout
        if len(row) != len(layout.columns):
            raise self._malformed(f"{len(row)} columns where the schema has {len(layout.columns)}: "
                                  f"{list(layout.names)}", text, start)
        values = []
        for value_text, column in zip(row, layout.columns):
            try:
                value = parse_column(value_text, column.type_info, layout.null_value, layout.separator_of(column))
            except (ValueError, TypeError, ArithmeticError) as exc:
                raise self._malformed(f"column {column.name!r} ({column.type_info!r}) cannot hold {value_text!r}: "
                                      f"{exc}", text, start) from None
            values.append(column.rounded(value))
        return Row.of(layout.names, values)

    def _malformed(self, problem: str, text: str, start: int | None = None) -> MalformedRecordError:
        where = self.position if start is None else start
        return MalformedRecordError(f"{self.path}, byte {where}: malformed CSV record ({problem}): {text[:200]!r}. "
                                    "Fix the file, or the CsvSchema.")


# -- writing -------------------------------------------------------------------------------------------------


class CsvWriterFactory(BulkWriterFactory):
    """Writes CSV part files of ``layout``: Rows (by name when named), tuples in column order, or dicts by name;
    ``where`` names the writer in messages."""

    extension = ".csv"

    def __init__(self, layout: CsvLayout, where: str):
        self.layout = layout
        self.where = where

    def create(self, stream) -> BulkWriter:
        return _CsvWriter(stream, self)

    def __repr__(self) -> str:
        return f"CsvWriterFactory({list(self.layout.names)})"


class _CsvWriter(BulkWriter):
    def __init__(self, stream, factory: CsvWriterFactory):
        self.stream, self.factory = stream, factory
        self.header_due = factory.layout.use_header

    def add_elements(self, records: list) -> int:
        layout = self.factory.layout
        rows = [self._columns(record) for record in records]
        if self.header_due:
            rows.insert(0, list(layout.names))
            self.header_due = False
        text = io.StringIO()
        try:
            csv.writer(text, lineterminator=layout.line_separator, **layout.csv_options()).writerows(rows)
        except csv.Error as exc:
            raise RecordEncodingError(f"{self.factory.where}: cannot write a record as CSV ({exc}). Set an escape "
                                      "character or a quote character on the CsvSchema.") from None
        data = text.getvalue().encode()
        self.stream.write(data)
        return len(data)

    def _columns(self, record) -> list[str]:
        layout = self.factory.layout
        names = layout.names
        if isinstance(record, Row) and record._fields is not None and record._fields != names:
            missing = [name for name in names if name not in record._fields]
            if missing:
                raise self._misfit(record, f"it has no field {missing[0]!r} (its fields are {list(record._fields)})")
            values = record.get_fields_by_names(names)
        elif isinstance(record, dict):
            values = [record.get(name) for name in names]
        elif isinstance(record, (Row, tuple, list)):
            values = list(record)
        else:
            raise self._misfit(record, f"a Row, a tuple of the {len(names)} columns in order, or a dict by column "
                                       f"name was expected, not {type(record).__name__}")
        if len(values) != len(names):
            raise self._misfit(record, f"it has {len(values)} fields where the schema has {len(names)}")
        return [self._text(record, column, value) for column, value in zip(layout.columns, values)]

    def _text(self, record, column: CsvColumn, value) -> str:
        layout = self.factory.layout
        separator = layout.separator_of(column)
        text = format_column(column.rounded(value), layout.null_value, separator)
        if value is not None:
            try:  # what is written must read back as the column's type
                parse_column(text, column.type_info, layout.null_value, separator)
            except (ValueError, TypeError, ArithmeticError) as exc:
                raise self._misfit(record, f"column {column.name!r} ({column.type_info!r}) cannot hold {value!r:.100} "
                                           f"({type(value).__name__}): {exc}") from None
        return text

    def _misfit(self, record, detail: str) -> RecordEncodingError:
        return RecordEncodingError(f"{self.factory.where}: the record {record!r:.200} does not fit the CSV schema: "
                                   f"{detail}. Fix the records (a map before the sink), or the schema.")
