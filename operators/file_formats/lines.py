"""Part writers of the line formats, ``FileSink(path, format="jsonl" | "csv" | "text")``: each batch of records is
encoded and written at once, one line per record.

>>> import io
>>> out = io.BytesIO(); writer = JSON_LINES.create(out)
>>> writer.add_elements([{"a": 1}, Row(b=2), Row(3, 4)]), out.getvalue()
(25, b'{"a": 1}\\n{"b": 2}\\n[3, 4]\\n')
>>> out = io.BytesIO(); CSV_LINES.create(out).add_elements([(1, "x, y"), "z"]); out.getvalue()
13
b'1,"x, y"\\r\\nz\\r\\n'
"""

from __future__ import annotations

import csv
import io
import json
from typing import Callable

from operators.file_formats.base import BulkWriter, BulkWriterFactory
from runtime.types import Row

__all__ = ["LineWriterFactory", "JSON_LINES", "CSV_LINES", "TEXT_LINES"]


class LineWriterFactory(BulkWriterFactory):
    """Writes records as lines, encoded by ``encode`` (a module-level function: factories travel pickled)."""

    def __init__(self, extension: str, encode: Callable[[list], bytes]):
        self.extension = extension
        self.encode = encode

    def create(self, stream) -> BulkWriter:
        return _LineWriter(stream, self.encode)

    def __repr__(self) -> str:
        return f"LineWriterFactory({self.extension!r})"


class _LineWriter(BulkWriter):
    def __init__(self, stream, encode: Callable[[list], bytes]):
        self.stream = stream
        self.encode = encode

    def add_elements(self, records: list) -> int:
        data = self.encode(records)
        self.stream.write(data)
        return len(data)


def _json_value(value):
    """What JSON cannot hold as it is: a named Row as an object, a positional one as an array, else its str."""
    if isinstance(value, Row):
        return value.as_dict() if value._fields is not None else list(value)
    return str(value)


def _json_lines(records: list) -> bytes:
    return "".join(json.dumps(r, default=_json_value) + "\n" for r in records).encode()


def _csv_lines(records: list) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(r if isinstance(r, (list, tuple, Row)) else [r] for r in records)
    return buffer.getvalue().encode()


def _text_lines(records: list) -> bytes:
    return "".join(f"{r}\n" for r in records).encode()


JSON_LINES = LineWriterFactory(".jsonl", _json_lines)
CSV_LINES = LineWriterFactory(".csv", _csv_lines)
TEXT_LINES = LineWriterFactory(".txt", _text_lines)
