"""ORC part files, on ``pyarrow.orc``: records go through a converter to Arrow batches of a declared schema, and
straight into the ORC writer, which cuts its stripes itself (``stripe_size``, 64 MiB by default).

>>> import io
>>> import pyarrow.orc
>>> from operators.file_formats.arrow_rows import RowConverter
>>> schema = pa.schema([("n", pa.int64()), ("word", pa.string())])
>>> out = io.BytesIO(); writer = OrcWriterFactory(RowConverter(schema, "doc")).create(out)
>>> _ = writer.add_elements([(1, "a"), (2, "b")]); writer.finish()
>>> pyarrow.orc.read_table(io.BytesIO(out.getvalue())).to_pylist()
[{'n': 1, 'word': 'a'}, {'n': 2, 'word': 'b'}]
"""

from __future__ import annotations

import pyarrow as pa

from operators.file_formats.base import BulkWriter, BulkWriterFactory
from runtime.errors import ConfigurationError

__all__ = ["OrcWriterFactory"]


def _has_time_of_day(arrow_type: pa.DataType) -> bool:
    if pa.types.is_time(arrow_type):
        return True
    return any(_has_time_of_day(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


class OrcWriterFactory(BulkWriterFactory):
    """Writes ORC part files of ``converter.schema``; ``options`` are ``pyarrow.orc.ORCWriter``'s keyword arguments
    (``compression``, ``stripe_size``, ...). ORC has no time-of-day type, so a schema with one is refused.

    >>> OrcWriterFactory(type("Converter", (), {"schema": pa.schema([("t", pa.time64("us"))])}), {})
    Traceback (most recent call last):
    ...
    runtime.errors.ConfigurationError: ORC has no type for a time of day, and the row type's field 't' is one ...
    """

    extension = ".orc"

    def __init__(self, converter, options: dict | None = None):
        for field in converter.schema:
            if _has_time_of_day(field.type):
                raise ConfigurationError(
                    f"ORC has no type for a time of day, and the row type's field {field.name!r} is one "
                    f"({field.type}). Declare it as an INT (milliseconds of the day) or a STRING, or write "
                    "Parquet (ParquetBulkWriters), which has one.")
        self.converter = converter
        self.options = dict(options or {})

    def create(self, stream) -> BulkWriter:
        return _OrcWriter(stream, self.converter, self.options)

    def __repr__(self) -> str:
        return f"OrcWriterFactory({self.converter.schema.names})"


class _OrcWriter(BulkWriter):
    def __init__(self, stream, converter, options: dict):
        import pyarrow.orc

        self.converter = converter
        self.writer = pyarrow.orc.ORCWriter(stream, **options)

    def add_elements(self, records: list) -> int:
        batch = self.converter.to_batch(records)
        self.writer.write(pa.Table.from_batches([batch]))
        return batch.nbytes

    def finish(self) -> None:
        self.writer.close()
