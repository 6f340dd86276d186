"""What ``FileSink`` and ``FileSource`` need of a file format: a writer of one part file, and a reader of one file
from a position.

A :class:`BulkWriterFactory` makes the :class:`BulkWriter` of each part file a sink opens (Flink's
``BulkWriter.Factory``): the sink opens the file, hands its stream to :meth:`BulkWriterFactory.create`, passes
records to :meth:`BulkWriter.add_elements`, and at a checkpoint (or a roll) calls :meth:`BulkWriter.finish` and
closes the stream. The sink keeps the file under ``_inprogress/`` until the checkpoint completes, so what a writer
has written is never seen before its commit, however it writes.

A :class:`FileRecordFormat` opens a :class:`RecordReader` over one file at a position it gave before (``0`` at
the start): a row number, or a byte offset; the source checkpoints it, so a restore resumes at the next record.

>>> import io
>>> class Lines(BulkWriterFactory):
...     extension = ".txt"
...     def create(self, stream):
...         return LinesWriter(stream)
>>> class LinesWriter(BulkWriter):
...     def __init__(self, stream):
...         self.stream = stream
...     def add_elements(self, records):
...         data = "".join(f"{r}\\n" for r in records).encode()
...         self.stream.write(data)
...         return len(data)
>>> out = io.BytesIO(); writer = Lines().create(out)
>>> writer.add_elements(["a", "b"]), writer.finish(), out.getvalue()
(4, None, b'a\\nb\\n')
>>> reader = BatchedRecordReader(iter([["a", "b"], ["c"]]), position=0)
>>> reader.read(2), reader.position, reader.read(5), reader.position, reader.read(5)
(['a', 'b'], 2, ['c'], 3, None)
"""

from __future__ import annotations

from typing import Iterator

__all__ = ["BulkWriter", "BulkWriterFactory", "RecordReader", "FileRecordFormat", "BatchedRecordReader"]


class BulkWriter:
    """Writes one part file: records in, then :meth:`finish` once (Flink's ``BulkWriter``)."""

    def add_elements(self, records: list) -> int:
        """Encode ``records`` into the file (or buffer them for it); return the bytes they add, encoded or
        estimated, by which a sink rolls its parts at a size."""
        raise NotImplementedError

    def finish(self) -> None:
        """Write what is buffered and flush; the sink closes the stream after."""


class BulkWriterFactory:
    """Makes the :class:`BulkWriter` of each part file (PyFlink's ``BulkWriterFactory``). A factory travels
    pickled to the executors, so it holds settings only (schemas, options), never an open file.

    >>> BulkWriterFactory().extension
    ''
    """

    extension = ""  # the part files' suffix when the sink is given none, such as ".parquet"

    def create(self, stream) -> BulkWriter:
        raise NotImplementedError


class RecordReader:
    """Reads the records of one file, from the position it was opened at."""

    position: int  # where the next record starts: what FileRecordFormat.open takes to resume there

    def read(self, max_records: int) -> list | None:
        """Up to ``max_records`` next records (fewer is fine); ``None`` once the file has no more."""
        raise NotImplementedError

    def close(self) -> None:
        """Let go of what the reader holds (the source closes the file's stream itself)."""


class FileRecordFormat:
    """Turns one file into records (PyFlink's ``StreamFormat`` and ``BulkFormat`` in Chandy's engine). Travels
    pickled to the executors, like a :class:`BulkWriterFactory`."""

    def open(self, stream, position: int, path: str) -> RecordReader:
        """A reader of ``stream`` (the file at ``path``, for messages) starting at ``position``: 0, or a
        :attr:`RecordReader.position` this format's reader gave."""
        raise NotImplementedError


class BatchedRecordReader(RecordReader):
    """A reader over lists of records that begin at ``position`` (a row number): what row-numbered formats
    (Parquet, Avro files) return once they have skipped to the position."""

    def __init__(self, batches: Iterator[list], position: int):
        self._batches = batches
        self._pending: list = []
        self.position = position

    def read(self, max_records: int) -> list | None:
        records: list = []
        while len(records) < max_records:
            if not self._pending:
                self._pending = next(self._batches, None)
                if self._pending is None:
                    self._pending = []
                    break
                continue
            taken = self._pending[:max_records - len(records)]
            del self._pending[:len(taken)]
            records.extend(taken)
        if not records and not self._pending:
            return None
        self.position += len(records)
        return records
